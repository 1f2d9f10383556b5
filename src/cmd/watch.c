/*
 * watch — `podmux watch`: a consumer of the update stream (DESIGN.md
 * "Update stream, protocol 1").  Connects, sends its resume line, and
 * prints every message: raw (-o json) or as a `kubectl get pods -w` style
 * table.
 *
 * The only place it waits is ppoll(), with SIGINT/SIGTERM blocked
 * everywhere else: a signal can only land inside ppoll(), so it is never
 * lost between a check and a wait, and Ctrl-C always exits 0 at once.
 *
 * Resume point: the seq of the last message received at or after "synced"
 * on a connection.  Messages before synced are a state dump or a replay
 * and are not a point the server can resume from (a replay re-sends old
 * numbers; a dump's numbers say nothing about the history), so a
 * connection lost before synced resumes from the previous point again.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* ppoll(); the build defines it too */
#endif

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "podmux/buf.h"
#include "podmux/cmd.h"
#include "podmux/json_canon.h"
#include "podmux/log.h"

#define WATCH_DEFAULT_SOCKET "/run/podmux/podmux.sock"
#define WATCH_RETRY_USEC (1000u * 1000u)
/* A server whose accept backlog is full refuses with EAGAIN: retry this
 * often, this many times, before giving up on the attempt. */
#define WATCH_BUSY_USEC (100u * 1000u)
#define WATCH_BUSY_TRIES 50
#define WATCH_READ_CHUNK 65536

/* Table columns.  Wider values are printed whole (the row shifts) rather
 * than cut: a truncated name or UID would be wrong, not just ugly. */
#define COL_SEQ 16
#define COL_OP 12
#define COL_SOURCE 6
#define COL_NAMESPACE 16
#define COL_NAME 32
#define COL_UID 36

/* Set by the signal handler: the one piece of state a handler can touch. */
static volatile sig_atomic_t watch_signal;

static void on_signal(int sig)
{
        watch_signal = sig;
}

struct watch {
        const char *path;
        bool json;
        bool reconnect;
        bool have_resume;
        uint64_t resume;
        bool header_done;
        sigset_t waitmask; /* what ppoll() waits with: SIGINT/TERM open */
        /* per connection */
        bool synced;
        bool shutting_down;
        struct buf last_error; /* "Reason: message" of the last error */
};

enum session_end {
        SESSION_SIGNAL,
        SESSION_CLOSED,
};

static void usage(FILE *f)
{
        fputs("Usage: podmux watch [--socket PATH] [-o table|json] [--resume-after N]\n"
              "                    [--reconnect]\n"
              "\n"
              "Connects to the update stream of `podmux run` and prints every\n"
              "message: as a table (one row per pod per message) or as the raw\n"
              "JSON lines (-o json).\n"
              "\n"
              "Flags:\n"
              "  --socket PATH       the stream socket (default $PODMUX_SOCKET, else\n"
              "                      " WATCH_DEFAULT_SOCKET ")\n"
              "  -o, --output FMT    table (default) or json\n"
              "  --resume-after N    ask the server for every message after seq N; if\n"
              "                      N is no longer in its history it sends the full\n"
              "                      state instead\n"
              "  --reconnect         when the connection is lost, retry every second\n"
              "                      and resume after the last message seen\n"
              "  -h, --help          this help\n"
              "\n"
              "Exit status: 0 when the server shuts down (or on SIGINT/SIGTERM), 1 when\n"
              "the connection fails or the server drops this consumer, 2 on bad flags.\n",
              f);
}

static int parse_u64(const char *s, uint64_t *ret)
{
        unsigned long long v;
        char *end = NULL;

        if (!s || *s < '0' || *s > '9')
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno == ERANGE)
                return -ERANGE;
        if (*end != '\0')
                return -EINVAL;
        *ret = (uint64_t)v;
        return 0;
}

/* Waits usec or until a signal.  Returns true if a signal asked us to
 * stop. */
static bool watch_pause(struct watch *w, uint64_t usec)
{
        struct timespec ts;

        ts.tv_sec = (time_t)(usec / 1000000u);
        ts.tv_nsec = (long)(usec % 1000000u) * 1000;
        (void)ppoll(NULL, 0, &ts, &w->waitmask);
        return watch_signal != 0;
}

/* ---- output ----------------------------------------------------------- */

/* Prints s padded to width (in characters: UTF-8 continuation bytes do not
 * count), control characters shown as '?' so a pod name cannot drive the
 * terminal.  last: no padding, end of row. */
static void put_cell(const char *s, int width, bool last)
{
        int shown = 0;

        if (!s || !*s)
                s = "-";
        for (; *s; s++) {
                unsigned char c = (unsigned char)*s;

                putchar(c < 0x20 || c == 0x7f ? '?' : c);
                if ((c & 0xc0) != 0x80)
                        shown++;
        }
        if (last) {
                putchar('\n');
                return;
        }
        for (; shown < width; shown++)
                putchar(' ');
        fputs("  ", stdout);
}

static json_object *member(json_object *o, const char *key)
{
        json_object *v = NULL;

        if (!o || !json_object_object_get_ex(o, key, &v))
                return NULL;
        return v;
}

/* A string member, NULL if absent or not a string. */
static const char *member_str(json_object *o, const char *key)
{
        json_object *v = member(o, key);

        return v && json_object_is_type(v, json_type_string)
                       ? json_object_get_string(v)
                       : NULL;
}

static void print_header(struct watch *w)
{
        if (w->header_done)
                return;
        put_cell("SEQ", COL_SEQ, false);
        put_cell("OP", COL_OP, false);
        put_cell("SOURCE", COL_SOURCE, false);
        put_cell("NAMESPACE", COL_NAMESPACE, false);
        put_cell("NAME", COL_NAME, false);
        put_cell("UID", COL_UID, false);
        put_cell("PHASE", 0, true);
        w->header_done = true;
}

static void print_row(const char *seq, const char *op, const char *source,
                      const char *ns, const char *name, const char *uid,
                      const char *phase)
{
        put_cell(seq, COL_SEQ, false);
        put_cell(op, COL_OP, false);
        put_cell(source, COL_SOURCE, false);
        put_cell(ns, COL_NAMESPACE, false);
        put_cell(name, COL_NAME, false);
        put_cell(uid, COL_UID, false);
        put_cell(phase, 0, true);
}

/* "-- text (seq N)" for the messages that are not rows. */
static void print_note(const char *text, const char *seq)
{
        fputs("-- ", stdout);
        for (; *text; text++) {
                unsigned char c = (unsigned char)*text;

                putchar(c < 0x20 || c == 0x7f ? '?' : c);
        }
        printf(" (seq %s)\n", seq);
}

static void print_pods(json_object *obj, const char *seq)
{
        json_object *pods = member(obj, "pods");
        const char *op = member_str(obj, "op"), *source = member_str(obj, "source");
        size_t i, n = json_object_is_type(pods, json_type_array)
                              ? json_object_array_length(pods)
                              : 0;

        if (n == 0) {
                /* An empty SET or ADD still says something: a row. */
                print_row(seq, op, source, "-", "<no pods>", "-", "-");
                return;
        }
        for (i = 0; i < n; i++) {
                json_object *p = json_object_array_get_idx(pods, i);
                json_object *md = member(p, "metadata"), *st = member(p, "status");

                print_row(seq, op, source, member_str(md, "namespace"),
                          member_str(md, "name"), member_str(md, "uid"),
                          member_str(st, "phase"));
        }
}

static void print_table(struct watch *w, json_object *obj)
{
        const char *type = member_str(obj, "type");
        json_object *seqv = member(obj, "seq");
        const char *seq = seqv ? json_object_get_string(seqv) : "-";
        struct buf text = BUF_INIT;

        print_header(w);
        if (!type)
                type = "?";
        if (strcmp(type, "pods") == 0) {
                print_pods(obj, seq);
        } else if (strcmp(type, "plugin") == 0) {
                json_object *pl = member(obj, "plugin");
                const char *op = member_str(obj, "op");
                const char *err = member_str(obj, "error");

                if (!err)
                        err = member_str(pl, "error");
                print_row(seq, op, "plugin", member_str(pl, "type"),
                          member_str(pl, "name"), "-", err);
        } else if (strcmp(type, "hello") == 0) {
                json_object *proto = member(obj, "protocol");

                (void)buf_printf(&text, "hello: protocol %s, mode %s, node %s",
                                 proto ? json_object_get_string(proto) : "?",
                                 member_str(obj, "mode") ? member_str(obj, "mode") : "?",
                                 member_str(obj, "node") ? member_str(obj, "node") : "?");
        } else if (strcmp(type, "sources_ready") == 0) {
                json_object *srcs = member(obj, "sources");
                size_t i, n = json_object_is_type(srcs, json_type_array)
                                      ? json_object_array_length(srcs)
                                      : 0;

                (void)buf_puts(&text, "sources ready:");
                for (i = 0; i < n; i++) {
                        const char *name = json_object_get_string(
                                json_object_array_get_idx(srcs, i));

                        (void)buf_printf(&text, "%s %s", i ? "," : "",
                                         name ? name : "null");
                }
        } else if (strcmp(type, "error") == 0) {
                const char *reason = member_str(obj, "reason");
                const char *msg = member_str(obj, "message");

                (void)buf_printf(&text, "error %s: %s", reason ? reason : "?",
                                 msg ? msg : "");
        } else {
                (void)buf_puts(&text, type);
        }
        if (text.data)
                print_note(text.data, seq);
        buf_free(&text);
}

/* ---- the stream ------------------------------------------------------- */

/* One line from the server (len bytes, newline excluded). */
static void handle_line(struct watch *w, const char *line, size_t len)
{
        json_object *obj = NULL, *seqv;
        struct buf err = BUF_INIT;
        const char *type;
        bool have_seq;
        uint64_t seq = 0;

        if (w->json) {
                fwrite(line, 1, len, stdout);
                putchar('\n');
        }
        if (json_parse_text(line, len, &obj, &err) < 0 ||
            !json_object_is_type(obj, json_type_object)) {
                fprintf(stderr, "podmux watch: the server sent a line that is not "
                        "a JSON object (%s)\n", err.data ? err.data : "not an object");
                json_object_put(obj);
                buf_free(&err);
                fflush(stdout);
                return;
        }
        buf_free(&err);
        type = member_str(obj, "type");
        seqv = member(obj, "seq");
        have_seq = seqv && json_object_is_type(seqv, json_type_int) &&
                   json_object_get_int64(seqv) >= 0;
        if (have_seq)
                seq = json_object_get_uint64(seqv);
        if (type && strcmp(type, "hello") == 0)
                w->synced = false;
        else if (type && strcmp(type, "synced") == 0)
                w->synced = true;
        if (w->synced && have_seq) {
                w->have_resume = true;
                w->resume = seq;
        }
        if (type && strcmp(type, "error") == 0) {
                const char *reason = member_str(obj, "reason");
                const char *msg = member_str(obj, "message");

                w->shutting_down = reason && strcmp(reason, "ShuttingDown") == 0;
                buf_reset(&w->last_error);
                (void)buf_printf(&w->last_error, "%s: %s", reason ? reason : "?",
                                 msg ? msg : "");
        }
        if (!w->json)
                print_table(w, obj);
        json_object_put(obj);
        fflush(stdout);
}

static int watch_connect(struct watch *w, int *ret_fd)
{
        struct sockaddr_un sa;
        int fd = -1, r, tries = 0;

        memset(&sa, 0, sizeof(sa));
        sa.sun_family = AF_UNIX;
        if (strlen(w->path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, w->path, strlen(w->path) + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        /* Non-blocking: a unix connect completes at once or fails; EAGAIN
         * means the server's backlog is full. */
        while (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                r = -errno;
                if (r == -EINTR)
                        continue;
                if (r != -EAGAIN || ++tries > WATCH_BUSY_TRIES)
                        goto fail;
                if (watch_pause(w, WATCH_BUSY_USEC)) {
                        r = -EINTR;
                        goto fail;
                }
        }
        *ret_fd = fd;
        return 0;
fail:
        close(fd);
        return r;
}

/* Sends the resume line.  It is tiny and the socket fresh: a full buffer
 * here means the server is stuck, so waiting for POLLOUT is enough. */
static int send_all(struct watch *w, int fd, const char *s, size_t n)
{
        while (n > 0) {
                ssize_t k = send(fd, s, n, MSG_NOSIGNAL);

                if (k < 0) {
                        struct pollfd pfd = {.fd = fd, .events = POLLOUT};

                        if (errno == EINTR)
                                continue;
                        if (errno != EAGAIN && errno != EWOULDBLOCK)
                                return -errno;
                        (void)ppoll(&pfd, 1, NULL, &w->waitmask);
                        if (watch_signal)
                                return -EINTR;
                        continue;
                }
                s += k;
                n -= (size_t)k;
        }
        return 0;
}

/* Reads lines until the server closes or a signal.  Lines of any length:
 * the buffer grows to the longest line. */
static enum session_end watch_session(struct watch *w, int fd)
{
        struct buf in = BUF_INIT;
        enum session_end end = SESSION_CLOSED;

        for (;;) {
                struct pollfd pfd = {.fd = fd, .events = POLLIN};
                size_t start = 0, scan;
                ssize_t n;
                char *nl;

                if (ppoll(&pfd, 1, NULL, &w->waitmask) < 0 && errno != EINTR)
                        break;
                if (watch_signal) {
                        end = SESSION_SIGNAL;
                        break;
                }
                if (buf_reserve(&in, WATCH_READ_CHUNK) < 0) {
                        fprintf(stderr, "podmux watch: out of memory\n");
                        break;
                }
                scan = in.len;
                n = read(fd, in.data + in.len, WATCH_READ_CHUNK);
                if (n < 0) {
                        if (errno == EINTR || errno == EAGAIN)
                                continue;
                        break; /* ECONNRESET and such: the connection is gone */
                }
                if (n == 0)
                        break;
                in.len += (size_t)n;
                in.data[in.len] = '\0';
                /* All complete lines, then one consume: O(bytes) per read. */
                while ((nl = memchr(in.data + scan, '\n', in.len - scan))) {
                        handle_line(w, in.data + start, (size_t)(nl - in.data) - start);
                        start = (size_t)(nl - in.data) + 1;
                        scan = start;
                }
                buf_consume(&in, start);
        }
        buf_free(&in);
        return end;
}

static int install_signals(struct watch *w, struct sigaction *old_int,
                           struct sigaction *old_term, sigset_t *old_mask)
{
        struct sigaction sa;
        sigset_t block;

        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigemptyset(&block);
        sigaddset(&block, SIGINT);
        sigaddset(&block, SIGTERM);
        if (sigprocmask(SIG_BLOCK, &block, old_mask) < 0)
                return -errno;
        w->waitmask = *old_mask;
        sigdelset(&w->waitmask, SIGINT);
        sigdelset(&w->waitmask, SIGTERM);
        if (sigaction(SIGINT, &sa, old_int) < 0 || sigaction(SIGTERM, &sa, old_term) < 0)
                return -errno;
        return 0;
}

int cmd_watch(int argc, char **argv)
{
        static const struct option opts[] = {
                {"socket", required_argument, NULL, 's'},
                {"output", required_argument, NULL, 'o'},
                {"resume-after", required_argument, NULL, 'r'},
                {"reconnect", no_argument, NULL, 'R'},
                {"help", no_argument, NULL, 'h'},
                {NULL, 0, NULL, 0},
        };
        struct watch w;
        struct sigaction old_int, old_term;
        sigset_t old_mask;
        bool reported = false;
        const char *env;
        int c, r, status = 1;

        memset(&w, 0, sizeof(w));
        buf_init(&w.last_error);
        env = getenv("PODMUX_SOCKET");
        w.path = env && *env ? env : WATCH_DEFAULT_SOCKET;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
                switch (c) {
                case 's':
                        w.path = optarg;
                        break;
                case 'o':
                        if (strcmp(optarg, "json") == 0) {
                                w.json = true;
                        } else if (strcmp(optarg, "table") == 0) {
                                w.json = false;
                        } else {
                                fprintf(stderr, "podmux watch: -o \"%s\": want table or json\n",
                                        optarg);
                                return 2;
                        }
                        break;
                case 'r':
                        r = parse_u64(optarg, &w.resume);
                        if (r < 0) {
                                fprintf(stderr, "podmux watch: --resume-after \"%s\": "
                                        "want a non-negative integer\n", optarg);
                                return 2;
                        }
                        w.have_resume = true;
                        break;
                case 'R':
                        w.reconnect = true;
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                case ':':
                        fprintf(stderr, "podmux watch: %s needs a value\n", argv[optind - 1]);
                        usage(stderr);
                        return 2;
                default:
                        fprintf(stderr, "podmux watch: unknown flag \"%s\"\n",
                                argv[optind - 1]);
                        usage(stderr);
                        return 2;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "podmux watch: unexpected argument \"%s\"\n", argv[optind]);
                usage(stderr);
                return 2;
        }
        if (!*w.path) {
                fprintf(stderr, "podmux watch: the socket path is empty\n");
                return 2;
        }
        if (install_signals(&w, &old_int, &old_term, &old_mask) < 0) {
                fprintf(stderr, "podmux watch: cannot set up signals\n");
                return 1;
        }

        for (;;) {
                char line[64];
                int fd = -1;
                enum session_end end;

                r = watch_connect(&w, &fd);
                if (r < 0) {
                        if (watch_signal) {
                                status = 0;
                                break;
                        }
                        if (!reported)
                                fprintf(stderr, "podmux watch: cannot connect to \"%s\": "
                                        "%s (is podmux run running?)%s\n", w.path,
                                        ERRNO_STR(r),
                                        w.reconnect ? "; retrying every second" : "");
                        reported = true;
                        if (!w.reconnect)
                                break;
                        if (watch_pause(&w, WATCH_RETRY_USEC)) {
                                status = 0;
                                break;
                        }
                        continue;
                }
                reported = false;
                w.synced = false;
                w.shutting_down = false;
                buf_reset(&w.last_error);
                if (w.have_resume)
                        (void)snprintf(line, sizeof(line), "{\"resume_after\":%" PRIu64 "}\n",
                                       w.resume);
                else
                        (void)snprintf(line, sizeof(line), "{}\n");
                r = send_all(&w, fd, line, strlen(line));
                end = r < 0 && watch_signal ? SESSION_SIGNAL : SESSION_CLOSED;
                /* A failed send still reads: the server may have said why. */
                if (end != SESSION_SIGNAL)
                        end = watch_session(&w, fd);
                close(fd);
                fflush(stdout);
                if (end == SESSION_SIGNAL) {
                        status = 0;
                        break;
                }
                if (!w.reconnect) {
                        if (w.shutting_down) {
                                status = 0;
                        } else if (w.last_error.len > 0) {
                                fprintf(stderr, "podmux watch: the server closed the "
                                        "connection: %s\n", w.last_error.data);
                        } else {
                                fprintf(stderr, "podmux watch: the server closed the "
                                        "connection\n");
                        }
                        break;
                }
                fprintf(stderr, "podmux watch: connection to \"%s\" closed%s%s; "
                        "reconnecting\n", w.path, w.last_error.len ? ": " : "",
                        w.last_error.len ? w.last_error.data : "");
                if (watch_pause(&w, WATCH_RETRY_USEC)) {
                        status = 0;
                        break;
                }
        }
        fflush(stdout);
        (void)sigaction(SIGINT, &old_int, NULL);
        (void)sigaction(SIGTERM, &old_term, NULL);
        (void)sigprocmask(SIG_SETMASK, &old_mask, NULL);
        buf_free(&w.last_error);
        return status;
}
