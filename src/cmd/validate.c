/*
 * podmux validate — decode, default and validate manifests exactly as the
 * file source (or, with --manifest-url-mode, the HTTP source) would, and
 * print what it would emit or why not.  Admins run it before dropping a
 * file into the static-pod directory.
 *
 * Listing, loading and building the pods are the sources' own functions
 * (src/sources/static_pod.h), and the duplicate rule is theirs (the
 * first file in sorted order keeps a namespace/name, by pod_store_key()),
 * so validate and the daemon cannot drift apart.
 *
 * The UID printed is the one the daemon computes when the node name
 * matches: each path is made absolute (from the working directory) and
 * cleaned lexically (like Go's filepath.Clean: no realpath, symlinks
 * kept), as the daemon takes --pod-manifest-path, and a directory's
 * entries are joined to that path.
 *
 * When a daemon answers on the stream socket (--socket, $PODMUX_SOCKET,
 * or the default socket when it exists; not with --offline), its node
 * name is the default of --node-name, and its record
 * of each file is shown too (doc/protocol.md "Files request"): what it
 * made of the file, with the pod and seq when applied; a verdict against
 * the bytes on disk now that is a rejection or a duplicate fails the
 * file, as the offline checks do.
 */

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "daemon_conn.h"
#include "util/buf.h"
#include "util/clock.h"
#include "cmd/cmd.h"
#include "cmd/usage.h"
#include "util/digest.h"
#include "util/dir.h"
#include "util/file.h"
#include "util/json_get.h"
#include "util/json_path.h"
#include "util/log.h"
#include "sources/manifest.h"
#include "cmd/options.h"
#include "util/path.h"
#include "core/pod.h"
#include "sources/static_pod.h"
#include "util/yaml_json.h"

/* How long the daemon may take to list its files. */
#define VALIDATE_DAEMON_TIMEOUT_USEC (5u * 1000u * 1000u)

struct validate_opts {
        const char *node_name;
        bool url_mode;
        bool json; /* -o json: the whole pods; else one line per pod */
        char **patterns; /* --static-pod-file-pattern */
        size_t n_patterns;
        const char *socket; /* --socket, or NULL */
        bool offline;
        /* The daemon's records (an array) and static pod path, or NULL. */
        json_object *daemon_records;
        const char *daemon_path;
        json_object *daemon_head;
        /* The daemon's status message, or NULL; node_name may point in it. */
        json_object *daemon_status;
};

static void usage(FILE *f)
{
        fputs("Usage: podmux validate [--node-name NAME] [--manifest-url-mode] [--static-pod-file-pattern GLOB]\n"
              "                       [--socket PATH | --offline] [-o text|json] PATH...\n"
              "\n"
              "Decode, default and validate static-pod manifests the way the file source\n"
              "does, with the file source's own code, and print each pod as the source\n"
              "would emit it on standard output, or the reason it would be rejected on\n"
              "standard error.  A directory is read like the file source reads it: every\n"
              "regular file whose name does not start with '.', in byte order, without\n"
              "recursing; of two files defining one namespace/name the first is kept.\n"
              "Fields that core/v1 does not define are dropped, as the kubelet drops\n"
              "them, and listed as warnings on standard error.  Each PATH is made\n"
              "absolute and cleaned, as the daemon takes --pod-manifest-path, so a\n"
              "file's UID is the daemon's, however the path is spelled.\n"
              "\n"
              "Options:\n"
              "  --node-name NAME     the node name (default: the daemon's, when a daemon is\n"
              "                       asked, else this host's name, lower-cased, as the\n"
              "                       kubelet derives it)\n"
              "  --manifest-url-mode  decode each file as the HTTP source decodes a body:\n"
              "                       a Pod or a PodList, no toleration added, UID salted\n"
              "                       with url:PATH\n"
              "  --static-pod-file-pattern GLOB\n"
              "                       in a directory, read only names matching this glob (repeatable),\n"
              "                       as the daemon's flag: another name is \"ignored: does not match\n"
              "                       --static-pod-file-pattern\", or a duplicate when its pod is one a\n"
              "                       read file defines\n"
              "  --socket PATH        also show what the daemon listening there made of each file\n"
              "                       (default: $PODMUX_SOCKET, else " OPTIONS_DEFAULT_SOCKET " when it\n"
              "                       exists); its rejection or duplicate of the bytes on disk now\n"
              "                       fails the file\n"
              "  --offline            do not ask a daemon\n"
              "  -o, --output FORMAT  text: one line per pod, \"PATH\": NAMESPACE/NAME uid=UID\n"
              "                       node=NODE config.hash=HASH (default); json: each pod\n"
              "                       whole, as JSON (with --manifest-url-mode, one JSON\n"
              "                       array per file)\n"
              "  -h, --help           show this help\n"
              "\n"
              "Exit status: 0 if every manifest is valid, 1 if any is not, 2 on a usage\n"
              "error.\n",
              f);
}

static void report(const char *path, const char *reason)
{
        struct buf q = BUF_INIT;

        /* The path quoted as a JSON string, so odd names stay readable. */
        if (buf_json_string(&q, path, strlen(path)) < 0)
                fprintf(stderr, "podmux validate: \"%s\": %s\n", path, reason);
        else
                fprintf(stderr, "podmux validate: %s: %s\n", q.data, reason);
        buf_free(&q);
}

/* One warning per field v1 does not define, like kubectl's. */
static int report_unknown(const char *path, const struct v1_unknown *u)
{
        struct buf msg = BUF_INIT;
        int r = 0;

        for (size_t i = 0; r == 0 && i < u->n; i++) {
                buf_reset(&msg);
                r = buf_puts(&msg, "warning: unknown field ");
                if (r == 0)
                        r = buf_json_string(&msg, u->paths[i], strlen(u->paths[i]));
                if (r == 0)
                        r = buf_printf(&msg, " ignored (not in core/v1 of Kubernetes %s)",
                                       v1_schema_kubernetes);
                if (r == 0)
                        report(path, msg.data);
        }
        if (r == 0 && u->total > u->n) {
                buf_reset(&msg);
                r = buf_printf(&msg, "warning: %zu more unknown fields ignored", u->total - u->n);
                if (r == 0)
                        report(path, msg.data);
        }
        buf_free(&msg);
        return r;
}

/* One line: "PATH": NAMESPACE/NAME uid=UID node=NODE config.hash=HASH,
 * the identity a consumer of the stream sees.  0 or -ENOMEM. */
static int print_line(const char *path, const struct pod *p)
{
        json_object *obj = pod_to_json(p);
        struct buf line = BUF_INIT;
        const char *node, *hash;
        int r;

        if (!obj)
                return -ENOMEM;
        node = json_get_str(json_get(obj, "spec"), "nodeName", NULL);
        hash = json_get_str(json_get(json_get(obj, "metadata"), "annotations"), POD_ANNOTATION_HASH, NULL);
        r = buf_json_string(&line, path, strlen(path));
        if (r == 0)
                r = buf_printf(&line, ": %s/%s uid=%s node=%s config.hash=%s\n", pod_namespace(p), pod_name(p),
                               pod_uid(p)[0] ? pod_uid(p) : "-", node ? node : "-", hash ? hash : "-");
        if (r == 0)
                fputs(line.data, stdout);
        json_object_put(obj);
        buf_free(&line);
        return r < 0 ? -ENOMEM : 0;
}

/* The pods as the source emits them: one line each, or (-o json) each
 * whole, pretty-printed, or as one array (url mode).  0 or -ENOMEM. */
static int print_pods(const struct validate_opts *o, const char *path, struct pod *const *pods,
                      size_t n)
{
        json_object *arr = NULL;
        int r = 0;

        if (!o->json) {
                struct buf q = BUF_INIT;

                for (size_t i = 0; r == 0 && i < n; i++)
                        r = print_line(path, pods[i]);
                /* An empty PodList: the URL would remove its pods. */
                if (r == 0 && n == 0) {
                        r = buf_json_string(&q, path, strlen(path)) < 0 ? -ENOMEM : 0;
                        if (r == 0)
                                printf("%s: no pods\n", q.data);
                }
                buf_free(&q);
                return r;
        }
        if (o->url_mode && !(arr = json_object_new_array()))
                return -ENOMEM;
        for (size_t i = 0; r == 0 && i < n; i++) {
                json_object *obj = pod_to_json(pods[i]);

                if (!obj) {
                        r = -ENOMEM;
                } else if (arr) {
                        if (json_object_array_add(arr, obj) != 0) {
                                json_object_put(obj);
                                r = -ENOMEM;
                        }
                } else {
                        const char *text = json_object_to_json_string_ext(
                                obj, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);

                        if (!text)
                                r = -ENOMEM;
                        else
                                printf("%s\n", text);
                        json_object_put(obj);
                }
        }
        if (r == 0 && arr) {
                const char *text = json_object_to_json_string_ext(
                        arr, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);

                if (!text)
                        r = -ENOMEM;
                else
                        printf("%s\n", text);
        }
        json_object_put(arr);
        return r;
}

/* Keys already emitted in this directory -> the file that defined them;
 * the file source keeps the first file in sorted order (doc/pod-config.md 6.4). */
struct seen {
        json_object *keys;
};

/* Whether pod's namespace/name is taken by an earlier file of the
 * directory (reported: 1), else records it (0).  -ENOMEM. */
static int check_duplicate(struct seen *seen, const char *path, const struct pod *pod)
{
        struct buf key = BUF_INIT, msg = BUF_INIT;
        json_object *prev = NULL;
        int r;

        if (!seen->keys)
                return 0;
        r = pod_store_key(pod, &key);
        if (r < 0)
                goto out;
        if (json_object_object_get_ex(seen->keys, key.data, &prev)) {
                r = buf_printf(&msg, "pod \"%s\" is already defined by \"%s\"; the "
                                     "file source keeps the first file and ignores this one",
                               key.data, json_object_get_string(prev));
                if (r == 0) {
                        report(path, msg.data);
                        r = 1;
                }
                goto out;
        }
        prev = json_object_new_string(path);
        if (!prev || json_object_object_add(seen->keys, key.data, prev) != 0) {
                json_object_put(prev);
                r = -ENOMEM;
        }
out:
        buf_free(&key);
        buf_free(&msg);
        return r < 0 ? -ENOMEM : r;
}

/* The daemon's record of path, or NULL. */
static json_object *daemon_record(const struct validate_opts *o, const char *path)
{
        size_t n = o->daemon_records ? json_object_array_length(o->daemon_records) : 0;

        for (size_t i = 0; i < n; i++) {
                json_object *r = json_object_array_get_idx(o->daemon_records, i);

                if (strcmp(json_get_str(r, "source", ""), "file") == 0 && json_path_is(r, path, strlen(path)))
                        return r;
        }
        return NULL;
}

/* Whether the daemon's static pod path takes in path. */
static bool daemon_reads(const struct validate_opts *o, const char *path)
{
        const char *slash = strrchr(path, '/');
        size_t len = slash == path ? 1 : (size_t)(slash - path);

        return o->daemon_path &&
               (json_path_is(o->daemon_head, path, strlen(path)) || json_path_is(o->daemon_head, path, len));
}

/* Whether the record's digest names the bytes at path now (a record
 * judged without reading them counts). */
static bool daemon_read_these(json_object *rec, const char *path)
{
        const char *text = json_get_str(rec, "digest", NULL);
        uint8_t want[DIGEST_LEN], got[DIGEST_LEN];
        char *data = NULL;
        size_t len = 0;
        bool same;

        if (!text)
                return true;
        if (digest_parse(text, want) < 0 || file_read(path, MANIFEST_MAX_BYTES, &data, &len, NULL) < 0)
                return false;
        same = digest_sha256(data, len, got) == 0 && memcmp(want, got, DIGEST_LEN) == 0;
        free(data);
        return same;
}

/*
 * What the daemon made of path, when one was asked: a note, or, for a
 * rejection or a duplicate of the bytes on disk now, a failure (1).  0
 * otherwise, -ENOMEM.
 */
static int daemon_view(const struct validate_opts *o, const char *path)
{
        json_object *rec = daemon_record(o, path), *pods, *seq;
        const char *state;
        struct buf msg = BUF_INIT;
        bool these;
        int r = 0;

        if (!o->daemon_records)
                return 0;
        if (!rec) {
                if (daemon_reads(o, path))
                        report(path, "note: the daemon has not seen this file yet");
                return 0;
        }
        state = json_get_str(rec, "state", "?");
        these = daemon_read_these(rec, path);
        pods = json_get_type(rec, "pods", json_type_array);
        seq = json_get(rec, "seq");
        if (strcmp(state, "applied") == 0 || strcmp(state, "pending") == 0) {
                json_object *p = pods && json_object_array_length(pods) ? json_object_array_get_idx(pods, 0) : NULL;

                r = buf_printf(&msg, "note: the daemon: %s %s/%s uid=%s seq=%s%s", state,
                               json_get_str(p, "namespace", ""), json_get_str(p, "name", "-"),
                               json_get_str(p, "uid", "-"), seq ? json_object_get_string(seq) : "-",
                               these ? "" : " (of other bytes than the file's now)");
        } else {
                bool fails = these && strcmp(state, "ignored") != 0;

                r = buf_printf(&msg, "%sthe daemon: %s: %s%s", fails ? "" : "note: ", state,
                               json_get_str(rec, "reason", "-"), these ? "" : " (of other bytes than the file's now)");
                if (r == 0 && fails)
                        r = 1;
        }
        if (r >= 0)
                report(path, msg.data);
        buf_free(&msg);
        return r;
}

/* 0 valid, 1 invalid (reported), -ENOMEM. */
static int validate_file(const struct validate_opts *o, const char *path, struct seen *seen)
{
        struct v1_unknown unknown = {NULL, 0, 0};
        struct buf err = BUF_INIT, msg = BUF_INIT;
        struct pod **pods = NULL, *one = NULL;
        char *data = NULL;
        size_t len = 0, n = 0;
        int r, docs = 1;

        if (o->url_mode) {
                r = file_read(path, MANIFEST_MAX_BYTES, &data, &len, &err);
                if (r == 0)
                        r = static_pod_decode_body(data, len, path, o->node_name, &pods, &n, &unknown, &err);
                if (r == 0)
                        docs = yaml_count_documents(data, len, NULL);
        } else {
                /* The file source's own loader: what it refuses is
                 * refused here, in its words, and the documents it
                 * ignores are counted as it counts them. */
                r = static_pod_load(path, o->node_name, &one, &unknown, &docs, NULL, &err);
                if (r == 0) {
                        pods = &one;
                        n = 1;
                }
        }
        if (r == -ENOMEM)
                goto out;
        if (r < 0) {
                report(path, err.len ? err.data : "invalid manifest");
                r = daemon_view(o, path) < 0 ? -ENOMEM : 1;
                goto out;
        }
        if (!o->url_mode && (r = check_duplicate(seen, path, one)) != 0) {
                if (r > 0 && daemon_view(o, path) < 0)
                        r = -ENOMEM;
                goto out;
        }
        if (docs > 1) {
                buf_reset(&msg);
                if (buf_printf(&msg, "note: %d YAML documents; only the first is used", docs) == 0)
                        report(path, msg.data);
        }
        r = report_unknown(path, &unknown);
        if (r == 0)
                r = print_pods(o, path, pods, n);
        if (r == 0)
                r = daemon_view(o, path);
out:
        v1_unknown_clear(&unknown);
        if (pods == &one)
                pod_unref(one);
        else
                static_pod_pods_free(pods, n);
        free(data);
        buf_free(&err);
        buf_free(&msg);
        return r;
}

/*
 * An entry --static-pod-file-pattern leaves out, once every read file is
 * judged: ignored (a note), or, when it decodes to a pod a read file
 * defines, a duplicate (1).  The daemon's view follows.  0, 1, -ENOMEM.
 */
static int validate_filtered(const struct validate_opts *o, const char *path, struct seen *seen)
{
        struct buf err = BUF_INIT, key = BUF_INIT, msg = BUF_INIT;
        json_object *holder = NULL;
        struct pod *pod = NULL;
        int r = static_pod_load(path, o->node_name, &pod, NULL, NULL, NULL, &err);

        if (r == -ENOMEM)
                goto out;
        if (r == 0 && (r = pod_store_key(pod, &key)) < 0)
                goto out;
        if (r == 0 && json_object_object_get_ex(seen->keys, key.data, &holder)) {
                r = buf_printf(&msg,
                               "pod \"%s\" is already defined by \"%s\" (this name does not match "
                               "--static-pod-file-pattern and is not read: a leftover copy?)",
                               key.data, json_object_get_string(holder));
                if (r < 0)
                        goto out;
                report(path, msg.data);
                r = 1;
        } else {
                report(path, "note: ignored: " STATIC_POD_FILTERED_REASON);
                r = 0;
        }
        {
                int d = daemon_view(o, path);

                r = d < 0 ? d : r;
        }
out:
        pod_unref(pod);
        buf_free(&err);
        buf_free(&key);
        buf_free(&msg);
        return r;
}

/* Every entry as the file source lists and sorts it (its own lister),
 * each judged as the file source judges it; the names
 * --static-pod-file-pattern leaves out after the others, which they may
 * duplicate whatever the order. */
static int validate_dir(const struct validate_opts *o, const char *dir)
{
        struct seen seen = {NULL};
        struct buf reason = BUF_INIT, msg = BUF_INIT;
        const char *what = "cannot list directory";
        char **names = NULL;
        size_t n = 0;
        int failed = 0, r;

        r = dir_list(dir, DIR_LIST_NO_HIDDEN | DIR_LIST_PATHS, &names, &n, &what);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                if (buf_printf(&msg, "%s: %s", what, ERRNO_STR(r)) < 0)
                        return -ENOMEM;
                report(dir, msg.data);
                buf_free(&msg);
                return 1;
        }
        seen.keys = json_object_new_object();
        if (!seen.keys) {
                r = -ENOMEM;
                goto out;
        }
        for (size_t i = 0; i < n; i++) {
                const char *base = strrchr(names[i], '/') + 1;

                if (static_pod_name_kind(base, (const char *const *)o->patterns, o->n_patterns) ==
                    STATIC_POD_NAME_FILTERED)
                        continue;
                r = static_pod_entry(names[i], &reason);
                if (r == -ENOMEM)
                        goto out;
                if (r < 0) {
                        report(names[i], ERRNO_STR(r));
                        failed = 1;
                        continue;
                }
                switch (r) {
                case STATIC_POD_DIRECTORY:
                        report(names[i], "note: skipped, a directory (the file source does not recurse)");
                        continue;
                case STATIC_POD_GONE:
                        continue;
                case STATIC_POD_BAD:
                        report(names[i], reason.data);
                        failed = 1;
                        continue;
                }
                r = validate_file(o, names[i], &seen);
                if (r < 0)
                        goto out;
                if (r > 0)
                        failed = 1;
        }
        for (size_t i = 0; i < n; i++) {
                const char *base = strrchr(names[i], '/') + 1;

                if (static_pod_name_kind(base, (const char *const *)o->patterns, o->n_patterns) !=
                            STATIC_POD_NAME_FILTERED ||
                    static_pod_entry(names[i], &reason) != STATIC_POD_MANIFEST)
                        continue;
                r = validate_filtered(o, names[i], &seen);
                if (r < 0)
                        goto out;
                if (r > 0)
                        failed = 1;
        }
        r = 0;
out:
        dir_list_free(names, n);
        json_object_put(seen.keys);
        buf_free(&reason);
        buf_free(&msg);
        return r < 0 ? r : failed;
}

/* arg made absolute and cleaned, as the daemon takes a relative
 * --pod-manifest-path: a file's UID is then the same however it is
 * spelled ("a.yaml", "./a.yaml", "/dir/a.yaml"), and is the daemon's. */
static int validate_path(const struct validate_opts *o, const char *arg)
{
        struct seen none = {NULL};
        struct stat st;
        char *path = NULL;
        int r = path_absolute(arg, NULL, &path);

        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                report(arg, "relative, and the working directory is unknown: cannot name the file as the daemon "
                            "would");
                return 1;
        }
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
                r = validate_dir(o, path);
        else
                r = validate_file(o, path, &none);
        free(path);
        return r;
}

/* The flags into o; -1 to go on with argv[optind...], else the exit
 * status.  Flags end at the first PATH, as they always have ("+"). */
static int parse_args(struct validate_opts *o, int argc, char **argv)
{
        static const struct option opts[] = {
                {"node-name", required_argument, NULL, 'n'},
                {"manifest-url-mode", no_argument, NULL, 'u'},
                {"output", required_argument, NULL, 'o'},
                {"static-pod-file-pattern", required_argument, NULL, 'p'},
                {"socket", required_argument, NULL, 's'},
                {"offline", no_argument, NULL, 'f'},
                {"help", no_argument, NULL, 'h'},
                {NULL, 0, NULL, 0},
        };
        struct buf err = BUF_INIT;
        int c, r;

        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "+:o:h", opts, NULL)) != -1) {
                switch (c) {
                case 'p':
                        r = options_add_pattern(&o->patterns, &o->n_patterns, optarg, &err);
                        if (r < 0) {
                                r = cmd_usage_error("validate", "%s", err.len ? err.data : ERRNO_STR(r));
                                buf_free(&err);
                                return r;
                        }
                        break;
                case 's':
                        if (!optarg[0])
                                return cmd_usage_error("validate", "--socket must not be empty");
                        o->socket = optarg;
                        break;
                case 'f':
                        o->offline = true;
                        break;
                case 'n':
                        o->node_name = optarg;
                        break;
                case 'u':
                        o->url_mode = true;
                        break;
                case 'o':
                        if (strcmp(optarg, "json") != 0 && strcmp(optarg, "text") != 0)
                                return cmd_usage_error("validate", "-o \"%s\": want text or json", optarg);
                        o->json = strcmp(optarg, "json") == 0;
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                default: /* '?' or ':' */
                        return cmd_bad_flag("validate", c, argc, argv, opts);
                }
        }
        if (optind >= argc)
                return cmd_usage_error("validate", "no PATH given");
        if (o->node_name && !o->node_name[0])
                return cmd_usage_error("validate", "--node-name must not be empty");
        if (o->offline && o->socket)
                return cmd_usage_error("validate", "--offline and --socket: give one");
        return -1;
}

/* A note that the daemon at path could not be asked, and why. */
static void cannot_ask(const char *path, int r, const struct buf *err)
{
        struct buf q = BUF_INIT;

        if (buf_json_string(&q, path, strlen(path)) == 0)
                fprintf(stderr, "podmux validate: note: cannot ask the daemon at %s: %s\n", q.data,
                        err->len ? err->data : ERRNO_STR(r));
        buf_free(&q);
}

/*
 * Asks the daemon at the socket given, else at the usual one when it is
 * there: its node name (a status request), then its records (a files
 * request).  A pod's UID hashes the node name, so without --node-name
 * the daemon's name is the one to compute with; with it, a name that
 * differs is said, since the UIDs printed will not be the daemon's.  A
 * daemon that cannot be asked is said (as a note) only when its socket
 * was named.
 */
static void ask_daemon(struct validate_opts *o)
{
        const char *env = getenv("PODMUX_SOCKET"), *path = o->socket, *node;
        bool named = o->socket || (env && *env);
        struct buf err = BUF_INIT;
        struct stat st;
        int r;

        if (o->offline || o->url_mode)
                return;
        if (!path)
                path = env && *env ? env : OPTIONS_DEFAULT_SOCKET;
        if (!named && (stat(path, &st) < 0 || !S_ISSOCK(st.st_mode)))
                return;
        r = daemon_status(path, mono_usec() + VALIDATE_DAEMON_TIMEOUT_USEC, &o->daemon_status, &err);
        if (r < 0) {
                /* Its records would be no better: the same socket. */
                if (named)
                        cannot_ask(path, r, &err);
                buf_free(&err);
                return;
        }
        node = json_get_str(o->daemon_status, "node", NULL);
        if (node && *node && !o->node_name)
                o->node_name = node;
        else if (node && *node && strcmp(node, o->node_name) != 0)
                fprintf(stderr,
                        "podmux validate: note: the daemon's node is \"%s\": the UIDs below are for "
                        "--node-name \"%s\", not the daemon's\n",
                        node, o->node_name);
        buf_reset(&err);
        r = daemon_files(path, mono_usec() + VALIDATE_DAEMON_TIMEOUT_USEC, &o->daemon_head, &o->daemon_records, &err);
        if (r < 0 && named)
                cannot_ask(path, r, &err);
        if (r == 0)
                o->daemon_path = json_get_str(o->daemon_head, "path", NULL);
        buf_free(&err);
}

int cmd_validate(int argc, char **argv)
{
        struct validate_opts o = {.node_name = NULL};
        char host[256];
        int i, first, failed = 0, r;

        r = parse_args(&o, argc, argv);
        if (r >= 0)
                goto done;
        first = optind;
        ask_daemon(&o);
        if (!o.node_name) {
                r = options_default_node_name(host, sizeof(host));
                if (r < 0) {
                        fprintf(stderr, "podmux validate: cannot get the host name: %s\n",
                                ERRNO_STR(r));
                        r = 1;
                        goto done;
                }
                o.node_name = host;
        }
        for (i = first; i < argc; i++) {
                r = validate_path(&o, argv[i]);
                if (r < 0) {
                        fprintf(stderr, "podmux validate: %s\n", ERRNO_STR(r));
                        failed = 1;
                        break;
                }
                if (r > 0)
                        failed = 1;
        }
        fflush(stdout);
        r = failed ? 1 : 0;
done:
        for (size_t k = 0; k < o.n_patterns; k++)
                free(o.patterns[k]);
        free(o.patterns);
        json_object_put(o.daemon_records);
        json_object_put(o.daemon_head);
        json_object_put(o.daemon_status);
        return r;
}
