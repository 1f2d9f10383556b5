/*
 * podmux validate — decode, default and validate manifests exactly as the
 * file source (or, with --manifest-url-mode, the HTTP source) would, and
 * print what it would emit or why not.  Admins run it before dropping a
 * file into the static-pod directory.
 *
 * The UID printed is the one the daemon computes only when the node name
 * and the path string match what the daemon uses: the path is cleaned
 * lexically (like Go's filepath.Clean: no realpath, symlinks kept), and a
 * directory's entries are joined to the cleaned directory path.
 */

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "podmux/buf.h"
#include "podmux/cmd.h"
#include "podmux/log.h"
#include "podmux/manifest.h"
#include "podmux/path.h"
#include "podmux/yaml_json.h"

#define EXIT_USAGE 2
#define TRY_HELP "Try 'podmux validate --help' for more information.\n"

struct validate_opts {
        const char *node_name;
        bool url_mode;
};

static void usage(FILE *f)
{
        fputs("Usage: podmux validate [--node-name NAME] [--manifest-url-mode] PATH...\n"
              "\n"
              "Decode, default and validate static-pod manifests the way the file source\n"
              "does, and print each resulting pod as JSON on standard output, or the\n"
              "reason it would be rejected on standard error.  A directory is read like\n"
              "the file source reads it: every regular file whose name does not start\n"
              "with '.', in byte order, without recursing.  Fields that core/v1 does\n"
              "not define are dropped, as the kubelet drops them, and listed as\n"
              "warnings on standard error.\n"
              "\n"
              "Options:\n"
              "  --node-name NAME     the node name (default: this host's name, lower-cased,\n"
              "                       as the kubelet derives it)\n"
              "  --manifest-url-mode  decode each file as the HTTP source decodes a body:\n"
              "                       a Pod or a PodList, no toleration added, UID salted\n"
              "                       with url:PATH; prints a JSON array\n"
              "  -h, --help           show this help\n"
              "\n"
              "Exit status: 0 if every manifest is valid, 1 if any is not, 2 on a usage\n"
              "error.\n",
              f);
}


/* The kubelet's default node name: the host name, trimmed and
 * lower-cased (nodeutil.GetHostname). */
static int default_node_name(char *out, size_t size)
{
        size_t start = 0, end;

        if (gethostname(out, size) < 0)
                return -errno;
        out[size - 1] = '\0';
        end = strlen(out);
        while (start < end && strchr(" \t\r\n", out[start]))
                start++;
        while (end > start && strchr(" \t\r\n", out[end - 1]))
                end--;
        memmove(out, out + start, end - start);
        out[end - start] = '\0';
        for (char *s = out; *s; s++)
                if (*s >= 'A' && *s <= 'Z')
                        *s = (char)(*s - 'A' + 'a');
        return 0;
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

/* The store key (namespace/name) of a defaulted pod. */
static int store_key(json_object *pod, struct buf *out)
{
        json_object *meta = NULL, *ns = NULL, *name = NULL;

        json_object_object_get_ex(pod, "metadata", &meta);
        json_object_object_get_ex(meta, "namespace", &ns);
        json_object_object_get_ex(meta, "name", &name);
        buf_reset(out);
        return buf_printf(out, "%s/%s", json_object_get_string(ns), json_object_get_string(name));
}

/* Keys already emitted in this directory -> the file that defined them;
 * the file source keeps the first file in sorted order (spec 6.4). */
struct seen {
        json_object *keys;
};

/* 0 valid, 1 invalid (reported), negative errno on a hard failure. */
static int validate_file(const struct validate_opts *o, const char *path, struct seen *seen)
{
        struct manifest_ctx ctx = {
                .origin = o->url_mode ? MANIFEST_ORIGIN_URL : MANIFEST_ORIGIN_FILE,
                .node_name = o->node_name,
                .location = path,
        };
        struct v1_unknown unknown = {NULL, 0, 0};
        struct buf err = BUF_INIT, key = BUF_INIT, msg = BUF_INIT;
        json_object *out = NULL, *prev = NULL;
        char *data = NULL;
        size_t len = 0;
        int r, docs;

        r = manifest_read_file(path, &data, &len, &err);
        if (r == 0) {
                if (o->url_mode)
                        r = manifest_decode_pods(data, len, &ctx, &out, &unknown, &err);
                else
                        r = manifest_decode_pod(data, len, &ctx, &out, &unknown, &err);
        }
        if (r == -ENOMEM)
                goto out;
        if (r < 0) {
                report(path, err.data ? err.data : "invalid manifest");
                r = 1;
                goto out;
        }
        if (!o->url_mode && seen->keys) {
                r = store_key(out, &key);
                if (r < 0)
                        goto out;
                if (json_object_object_get_ex(seen->keys, key.data, &prev)) {
                        r = buf_printf(&msg, "pod \"%s\" is already defined by \"%s\"; the "
                                             "file source keeps the first file and ignores this one",
                                       key.data, json_object_get_string(prev));
                        if (r < 0)
                                goto out;
                        report(path, msg.data);
                        r = 1;
                        goto out;
                }
                prev = json_object_new_string(path);
                if (!prev || json_object_object_add(seen->keys, key.data, prev) != 0) {
                        json_object_put(prev);
                        r = -ENOMEM;
                        goto out;
                }
        }
        docs = yaml_count_documents(data, len, NULL);
        if (docs > 1) {
                buf_reset(&msg);
                if (buf_printf(&msg, "note: %d YAML documents; only the first is used", docs) == 0)
                        report(path, msg.data);
        }
        r = report_unknown(path, &unknown);
        if (r < 0)
                goto out;
        fputs(json_object_to_json_string_ext(out, JSON_C_TO_STRING_PRETTY |
                                                          JSON_C_TO_STRING_NOSLASHESCAPE),
              stdout);
        fputc('\n', stdout);
        r = 0;
out:
        v1_unknown_clear(&unknown);
        json_object_put(out);
        free(data);
        buf_free(&err);
        buf_free(&key);
        buf_free(&msg);
        return r;
}

static int cmp_names(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every non-hidden entry, sorted bytewise, as the file source lists. */
static int validate_dir(const struct validate_opts *o, const char *dir)
{
        struct seen seen = {NULL};
        char **names = NULL, **bigger;
        size_t n = 0, cap = 0;
        int failed = 0, r = 0;
        struct dirent *de;
        DIR *d;

        d = opendir(dir);
        if (!d) {
                r = -errno;
                report(dir, ERRNO_STR(r));
                return 1;
        }
        for (;;) {
                errno = 0;
                de = readdir(d);
                if (!de)
                        break;
                if (de->d_name[0] == '.')
                        continue;
                if (n == cap) {
                        cap = cap ? cap * 2 : 16;
                        bigger = realloc(names, cap * sizeof(*names));
                        if (!bigger) {
                                r = -ENOMEM;
                                goto out;
                        }
                        names = bigger;
                }
                names[n] = path_join(dir, de->d_name);
                if (!names[n]) {
                        r = -ENOMEM;
                        goto out;
                }
                n++;
        }
        if (errno != 0) {
                r = -errno;
                report(dir, ERRNO_STR(r));
                failed = 1;
        }
        if (n > 1)
                qsort(names, n, sizeof(*names), cmp_names);
        seen.keys = json_object_new_object();
        if (!seen.keys) {
                r = -ENOMEM;
                goto out;
        }
        for (size_t i = 0; i < n; i++) {
                struct stat st;

                if (stat(names[i], &st) < 0) {
                        r = -errno;
                        report(names[i], ERRNO_STR(r));
                        failed = 1;
                        continue;
                }
                if (S_ISDIR(st.st_mode)) {
                        report(names[i],
                               "note: skipped, a directory (the file source does not recurse)");
                        continue;
                }
                if (!S_ISREG(st.st_mode)) {
                        report(names[i], "note: skipped, not a regular file");
                        continue;
                }
                r = validate_file(o, names[i], &seen);
                if (r < 0)
                        goto out;
                if (r > 0)
                        failed = 1;
        }
        r = 0;
out:
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
        json_object_put(seen.keys);
        closedir(d);
        return r < 0 ? r : failed;
}

static int validate_path(const struct validate_opts *o, const char *arg)
{
        struct seen none = {NULL};
        struct stat st;
        char *path = path_clean(arg);
        int r;

        if (!path)
                return -ENOMEM;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
                r = validate_dir(o, path);
        else
                r = validate_file(o, path, &none);
        free(path);
        return r;
}

int cmd_validate(int argc, char **argv)
{
        struct validate_opts o = {NULL, false};
        char host[256];
        int i, failed = 0, r;

        for (i = 1; i < argc; i++) {
                const char *a = argv[i];

                if (strcmp(a, "--") == 0) {
                        i++;
                        break;
                }
                if (a[0] != '-' || a[1] == '\0')
                        break;
                if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
                        usage(stdout);
                        return 0;
                } else if (strcmp(a, "--manifest-url-mode") == 0) {
                        o.url_mode = true;
                } else if (strcmp(a, "--node-name") == 0) {
                        if (i + 1 >= argc) {
                                fputs("podmux validate: --node-name needs a value\n" TRY_HELP,
                                      stderr);
                                return EXIT_USAGE;
                        }
                        o.node_name = argv[++i];
                } else if (strncmp(a, "--node-name=", 12) == 0) {
                        o.node_name = a + 12;
                } else {
                        fprintf(stderr, "podmux validate: unknown option \"%s\"\n" TRY_HELP, a);
                        return EXIT_USAGE;
                }
        }
        if (i >= argc) {
                fputs("podmux validate: no PATH given\n" TRY_HELP, stderr);
                return EXIT_USAGE;
        }
        if (o.node_name && !o.node_name[0]) {
                fputs("podmux validate: --node-name must not be empty\n" TRY_HELP, stderr);
                return EXIT_USAGE;
        }
        if (!o.node_name) {
                r = default_node_name(host, sizeof(host));
                if (r < 0) {
                        fprintf(stderr, "podmux validate: cannot get the host name: %s\n",
                                ERRNO_STR(r));
                        return 1;
                }
                o.node_name = host;
        }
        for (; i < argc; i++) {
                r = validate_path(&o, argv[i]);
                if (r < 0) {
                        fprintf(stderr, "podmux validate: %s\n", ERRNO_STR(r));
                        return 1;
                }
                if (r > 0)
                        failed = 1;
        }
        fflush(stdout);
        return failed ? 1 : 0;
}
