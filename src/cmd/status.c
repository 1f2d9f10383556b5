/*
 * status — `podmux status`: asks the daemon, over its update stream
 * socket, for one status message ({"request":"status"}, see
 * stream_request.h) and prints it: the daemon, each source with what it
 * reads, its state, last success and last error, the consumers, the
 * registered plugins.
 *
 * A one-shot client: blocking socket with send and receive deadlines, so
 * a stuck daemon cannot hang it.
 *
 * --files asks for the per-file records instead ({"request":"files"},
 * doc/protocol.md "Files request") and prints every one of them.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <json-c/json.h>

#include "daemon_conn.h"
#include "util/buf.h"
#include "util/clock.h"
#include "cmd/cmd.h"
#include "cmd/usage.h"
#include "util/json_parse.h"
#include "util/json_get.h"
#include "util/log.h"
#include "util/proto_words.h"
#include "cmd/options.h"

#define STATUS_TIMEOUT_SEC 5
/* The answer is a few KB; a daemon with thousands of consumers or plugins
 * stays far below this. */
#define STATUS_MAX_BYTES (16u * 1024u * 1024u)

static void usage(FILE *f)
{
        fputs("Usage: podmux status [--socket PATH] [--files] [-o text|json]\n"
              "\n"
              "Asks a running `podmux run` for its status and prints it: the\n"
              "sources with the path or URL each reads, its state (ok, absent,\n"
              "failing...), last success and last error, the consumers of the\n"
              "update stream, the registered plugins, and the files that are not\n"
              "applied.\n"
              "\n"
              "Flags:\n"
              "  --socket PATH       the stream socket (default $PODMUX_SOCKET, else\n"
              "                      " OPTIONS_DEFAULT_SOCKET ")\n"
              "  --files             every file the daemon has seen, and the manifest URL,\n"
              "                      with its state (applied, pending, rejected, duplicate,\n"
              "                      ignored, unreadable), the reason, its pod and the seq\n"
              "                      that carried it\n"
              "  -o, --output FMT    text (default) or json (the status message as sent;\n"
              "                      with --files, a JSON array of the records)\n"
              "  -h, --help          this help\n"
              "\n"
              "Exit status: 0 on an answer, 1 when the daemon cannot be reached or\n"
              "refuses, 2 on bad flags.\n",
              f);
}

/* Connects, asks, and reads until the server closes.  0 or -errno (err
 * says what failed). */
static int fetch(const char *path, struct buf *out, struct buf *err)
{
        static const char line[] = "{\"request\":\"status\"}\n";
        struct timeval tv = {.tv_sec = STATUS_TIMEOUT_SEC};
        struct sockaddr_un sa;
        size_t sent = 0;
        int fd, r = 0;

        memset(&sa, 0, sizeof(sa));
        sa.sun_family = AF_UNIX;
        if (strlen(path) >= sizeof(sa.sun_path)) {
                return buf_set_err(err, -ENAMETOOLONG, "socket path \"%s\" is too long", path);
        }
        memcpy(sa.sun_path, path, strlen(path) + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ||
            connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                r = -errno;
                r = daemon_conn_connect_error(err, path, r);
                goto done;
        }
        /* A daemon that refuses (Forbidden, TooManyConsumers) writes its
         * error and closes without reading: the send may then fail with
         * EPIPE, and the answer is still there to read. */
        while (sent < sizeof(line) - 1) {
                ssize_t n = send(fd, line + sent, sizeof(line) - 1 - sent, MSG_NOSIGNAL);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
                        break;
                if (n < 0) {
                        r = -errno;
                        r = buf_set_err(err, r, "\"%s\": %s", path, ERRNO_STR(r));
                        goto done;
                }
                sent += (size_t)n;
        }
        for (;;) {
                char chunk[8192];
                ssize_t n = recv(fd, chunk, sizeof(chunk), 0);

                if (n < 0 && errno == EINTR)
                        continue;
                /* Closed with our request unread: a reset, after which
                 * what was read is all there is. */
                if (n < 0 && errno == ECONNRESET && out->len > 0)
                        break;
                if (n < 0) {
                        r = -errno;
                        r = buf_set_err(err, r, "\"%s\": %s", path, r == -EAGAIN ? "no answer in time" : ERRNO_STR(r));
                        goto done;
                }
                if (n == 0)
                        break;
                if (out->len + (size_t)n > STATUS_MAX_BYTES) {
                        r = -EFBIG;
                        r = buf_set_err(err, r, "\"%s\": the answer is larger than %u bytes", path, STATUS_MAX_BYTES);
                        goto done;
                }
                if ((r = buf_append(out, chunk, (size_t)n)) < 0)
                        goto done;
        }
done:
        close(fd);
        return r;
}

/* Member key as text, whatever its type (a number's digits), or NULL. */
static const char *str(json_object *o, const char *key)
{
        json_object *v = json_get(o, key);

        return v ? json_object_get_string(v) : NULL;
}

static const char *str_or(json_object *o, const char *key, const char *dflt)
{
        const char *s = str(o, key);

        return s ? s : dflt;
}

/* The api source's serving state and checkpoint (doc/checkpoint.md), a
 * line each under its row. */
static void print_checkpoint(json_object *s)
{
        json_object *c = json_get_type(s, "checkpoint", json_type_object), *served, *le;

        if (!str(s, "serving"))
                return;
        served = json_get_type(c, "served", json_type_object);
        if (strcmp(str(s, "serving"), PROTO_SERVING_CHECKPOINT) == 0)
                /* No list has succeeded in this run (LAST SUCCESS says
                 * never): the pods are those the server confirmed then. */
                printf("       serving its checkpoint of %s (resourceVersion %s): the API server has not answered "
                       "since the start\n",
                       str_or(served, "time", "?"), str_or(served, "resource_version", "?"));
        else
                printf("       serving %s\n", str(s, "serving"));
        if (!c)
                return;
        printf("       checkpoint %s: %s", str_or(c, "dir", "?"), str(c, "time") ? str(c, "time") : "none on disk");
        if (str(c, "age_seconds"))
                printf(" (%s s old)", str(c, "age_seconds"));
        printf("; writes %s (%s bytes), errors %s\n", str_or(c, "writes", "0"), str_or(c, "bytes", "0"),
               str_or(c, "errors", "0"));
        if (str(c, "refused"))
                printf("       checkpoint not loaded at start: %s\n", str(c, "refused"));
        if ((le = json_get_type(c, "last_error", json_type_object)))
                printf("       checkpoint write failed %s: %s\n", str_or(le, "time", "?"), str_or(le, "message", "?"));
}

/* The pods of a record as "ns/name" (the first; "+N" more), or "-". */
static void record_pods(json_object *rec, char *out, size_t size)
{
        json_object *pods = json_get_type(rec, "pods", json_type_array), *p;
        size_t n = pods ? json_object_array_length(pods) : 0;

        if (n == 0) {
                (void)snprintf(out, size, "-");
                return;
        }
        p = json_object_array_get_idx(pods, 0);
        (void)snprintf(out, size, "%s/%s%s", str_or(p, "namespace", ""), str_or(p, "name", "?"), n > 1 ? " +" : "");
        if (n > 1)
                (void)snprintf(out + strlen(out), size - strlen(out), "%zu", n - 1);
}

/* One record: a row, and its reason on the line below. */
static void print_record(json_object *rec)
{
        char pods[320];

        record_pods(rec, pods, sizeof(pods));
        printf("%-10s %-17s %-30s %s\n", str_or(rec, "state", "?"), str_or(rec, "seq", "-"), pods,
               str_or(rec, "path", str_or(rec, "url", "?")));
        if (str(rec, "reason"))
                printf("           %s\n", str(rec, "reason"));
}

/* The "files" member of a status message: the counts, and the records
 * that are not applied (the daemon sends those first). */
static void print_files_member(json_object *files)
{
        json_object *states = json_get_type(files, "states", json_type_object);
        json_object *recs = json_get_type(files, "records", json_type_array);
        size_t n = recs ? json_object_array_length(recs) : 0, shown = 0;
        const char *sep = "";

        printf("\nFILES (%s):", str_or(files, "total", "0"));
        if (states) {
                json_object_object_foreach(states, state, count) {
                        if (json_object_get_int64(count) > 0) {
                                printf("%s %s %s", sep, json_object_get_string(count), state);
                                sep = ",";
                        }
                }
        }
        putchar('\n');
        for (size_t i = 0; i < n; i++) {
                json_object *r = json_object_array_get_idx(recs, i);

                if (strcmp(str_or(r, "state", ""), "applied") == 0)
                        continue;
                if (!shown++)
                        printf("%-10s %-17s %-30s %s\n", "STATE", "SEQ", "POD", "PATH");
                print_record(r);
        }
        if (shown)
                printf("(podmux status --files lists every file)\n");
}

static void print_text(json_object *st)
{
        json_object *sources = json_get_type(st, "sources", json_type_array);
        json_object *consumers = json_get_type(st, "consumers", json_type_array);
        json_object *plugins = json_get_type(st, "plugins", json_type_array), *hist = NULL;
        size_t n;

        printf("podmux %s (pid %s), node %s, mode %s, up since %s\n", str_or(st, "version", "?"),
               str_or(st, "pid", "?"), str_or(st, "node", "?"), str_or(st, "mode", "?"),
               str_or(st, "started", "?"));
        hist = json_get(st, "history");
        printf("stream: last seq %s, history %s message(s) (%s bytes), %zu consumer(s), %s dropped\n",
               str_or(st, "last_seq", "?"), str_or(hist, "messages", "?"), str_or(hist, "bytes", "?"),
               consumers ? json_object_array_length(consumers) : 0, str_or(st, "dropped_consumers", "0"));
        printf("metrics: %s\n", str_or(st, "metrics_address", "off"));

        n = sources ? json_object_array_length(sources) : 0;
        printf("\nSOURCES (%zu)\n", n);
        if (n)
                printf("%-6s %-9s %6s  %-20s  %s\n", "NAME", "STATE", "PODS", "LAST SUCCESS", "LAST ERROR");
        for (size_t i = 0; i < n; i++) {
                json_object *s = json_object_array_get_idx(sources, i), *le = json_get(s, "last_error");
                const char *name = str_or(s, "name", "?");

                printf("%-6s %-9s %6s  %-20s  %s%s%s\n", name, str_or(s, "state", "?"), str_or(s, "pods", "0"),
                       str_or(s, "last_success", "never"), le ? str_or(le, "time", "") : "none", le ? " " : "",
                       le ? str_or(le, "message", "") : "");
                printf("       %s %s; errors %s, parse errors %s",
                       strcmp(name, "file") == 0   ? "path"
                       : strcmp(name, "http") == 0 ? "url"
                                                   : "server",
                       str_or(s, "target", "?"), str_or(s, "errors", "0"), str_or(s, "parse_errors", "0"));
                if (str(s, "relists"))
                        printf(", relists %s, watch restarts %s", str(s, "relists"), str_or(s, "watch_restarts", "0"));
                putchar('\n');
                print_checkpoint(s);
        }

        n = consumers ? json_object_array_length(consumers) : 0;
        printf("\nCONSUMERS (%zu)\n", n);
        if (n)
                printf("%-8s %-6s %-20s  %-9s %s\n", "PID", "UID", "SINCE", "STATE", "BACKLOG");
        for (size_t i = 0; i < n; i++) {
                json_object *c = json_object_array_get_idx(consumers, i);

                printf("%-8s %-6s %-20s  %-9s %s\n", str_or(c, "pid", "?"), str_or(c, "uid", "?"),
                       str_or(c, "since", "?"), str_or(c, "state", "?"), str_or(c, "backlog", "0"));
        }

        n = plugins ? json_object_array_length(plugins) : 0;
        printf("\nPLUGINS (%zu)\n", n);
        if (n)
                printf("%-14s %-28s %-10s %s\n", "TYPE", "NAME", "VERSIONS", "ENDPOINT");
        for (size_t i = 0; i < n; i++) {
                json_object *p = json_object_array_get_idx(plugins, i), *v = NULL;
                struct buf vs = BUF_INIT;

                if ((v = json_get_type(p, "versions", json_type_array)))
                        for (size_t k = 0; k < json_object_array_length(v); k++)
                                buf_printf(&vs, "%s%s", k ? "," : "",
                                           json_object_get_string(json_object_array_get_idx(v, k)));
                printf("%-14s %-28s %-10s %s\n", str_or(p, "type", "?"), str_or(p, "name", "?"), vs.data,
                       str_or(p, "endpoint", "?"));
                buf_free(&vs);
        }
        if (json_get_type(st, "files", json_type_object))
                print_files_member(json_get(st, "files"));
}

/* Prints the status message among the lines of the daemon's answer (it
 * may send others first): as sent for json, else as text.  False, with
 * the reason on stderr, when the daemon refused or sent no status. */
static bool show_answer(char *answer, const char *path, bool json)
{
        char *line, *save = NULL;

        for (line = strtok_r(answer, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                json_object *o = NULL;
                const char *type;

                if (json_parse_text(line, strlen(line), &o, NULL) < 0)
                        continue;
                type = str(o, "type");
                if (type && strcmp(type, "error") == 0) {
                        fprintf(stderr, "podmux status: the daemon refused: %s: %s\n", str_or(o, "reason", "?"),
                                str_or(o, "message", ""));
                        json_object_put(o);
                        return false;
                }
                if (type && strcmp(type, "status") == 0) {
                        if (json)
                                printf("%s\n", line);
                        else
                                print_text(o);
                        json_object_put(o);
                        return true;
                }
                json_object_put(o);
        }
        fprintf(stderr, "podmux status: \"%s\" gave no status (is it a podmux older than status?)\n", path);
        return false;
}

/* --files: every record, as a table or (json) one array. */
static int show_files(const char *path, bool json)
{
        json_object *head = NULL, *recs = NULL;
        struct buf err = BUF_INIT;
        int r = daemon_files(path, mono_usec() + STATUS_TIMEOUT_SEC * 1000000ull, &head, &recs, &err);
        size_t n;

        if (r < 0) {
                fprintf(stderr, "podmux status: %s\n", err.len ? err.data : ERRNO_STR(r));
                buf_free(&err);
                return 1;
        }
        n = json_object_array_length(recs);
        if (json) {
                printf("%s\n",
                       json_object_to_json_string_ext(recs, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        } else {
                printf("static pod path: %s%s", str_or(head, "path", "none"),
                       json_object_array_length(json_get(head, "patterns")) ? ", patterns:" : "");
                for (size_t i = 0; i < json_object_array_length(json_get(head, "patterns")); i++)
                        printf(" %s", json_object_get_string(json_object_array_get_idx(json_get(head, "patterns"), i)));
                printf("\nFILES (%zu)\n", n);
                if (n)
                        printf("%-10s %-17s %-30s %s\n", "STATE", "SEQ", "POD", "PATH");
                for (size_t i = 0; i < n; i++)
                        print_record(json_object_array_get_idx(recs, i));
        }
        json_object_put(head);
        json_object_put(recs);
        buf_free(&err);
        return 0;
}

int cmd_status(int argc, char **argv)
{
        static const struct option opts[] = {
                {"socket", required_argument, NULL, 's'},
                {"output", required_argument, NULL, 'o'},
                {"files", no_argument, NULL, 'f'},
                {"help", no_argument, NULL, 'h'},
                {NULL, 0, NULL, 0},
        };
        const char *env = getenv("PODMUX_SOCKET"), *path;
        struct buf in = BUF_INIT, err = BUF_INIT;
        bool json = false, files = false;
        int c, r, status = 1;

        path = env && *env ? env : OPTIONS_DEFAULT_SOCKET;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
                switch (c) {
                case 's':
                        path = optarg;
                        break;
                case 'o':
                        if (strcmp(optarg, "json") != 0 && strcmp(optarg, "text") != 0)
                                return cmd_usage_error("status", "-o \"%s\": want text or json", optarg);
                        json = strcmp(optarg, "json") == 0;
                        break;
                case 'f':
                        files = true;
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                default: /* '?' or ':' */
                        return cmd_bad_flag("status", c, argc, argv, opts);
                }
        }
        if (optind < argc)
                return cmd_usage_error("status", "unexpected argument \"%s\"", argv[optind]);
        if (files)
                return show_files(path, json);
        r = fetch(path, &in, &err);
        if (r < 0) {
                fprintf(stderr, "podmux status: %s\n", err.len ? err.data : ERRNO_STR(r));
                goto out;
        }
        if (show_answer(in.data, path, json))
                status = 0;
out:
        buf_free(&in);
        buf_free(&err);
        return status;
}
