/* Unit tests: `podmux run` flags and --config. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "failalloc.h"
#include "cmd/options.h"
#include "kubeapi/kube_api_server.h"
#include "kubeapi/kube_view.h"
#include "util/log.h"
#include "unit.h"

static int parse(struct options *o, struct buf *err, char **argv)
{
        int argc = 0;

        while (argv[argc])
                argc++;
        buf_reset(err);
        return options_parse(argc, argv, o, err);
}

START_TEST(test_defaults)
{
        struct options o;
        struct buf err = BUF_INIT;
        char *argv[] = {"run", "--node-name", "n1", NULL};

        unsetenv("PODMUX_SOCKET");
        ck_assert_int_eq(parse(&o, &err, argv), 0);
        ck_assert_str_eq(o.node_name, "n1");
        ck_assert_str_eq(o.socket_path, OPTIONS_DEFAULT_SOCKET);
        ck_assert_uint_eq(o.file_check_usec, 20000000);
        ck_assert_uint_eq(o.http_check_usec, 20000000);
        ck_assert_int_eq(o.mode, STORAGE_MODE_INCREMENTAL);
        ck_assert_uint_eq(o.socket_mode, 0660);
        ck_assert_ptr_null(o.pod_manifest_path);
        options_free(&o);
        buf_free(&err);
}
END_TEST

START_TEST(test_flags_parsed)
{
        struct options o;
        struct buf err = BUF_INIT;
        char *argv[] = {"run", "--node-name=n2", "--pod-manifest-path", "/etc/k",
                        "--file-check-frequency", "1m30s", "--mode", "snapshot-and-updates",
                        "--socket", "/tmp/x.sock", "--socket-mode", "0600", "-v", "3",
                        "--log-format", "json", "--manifest-url-header", "a:1,b:2",
                        "--manifest-url-header", "a:3", "--max-consumer-backlog", "4096",
                        "--history-bytes", "65536", NULL};

        ck_assert_int_eq(parse(&o, &err, argv), 0);
        ck_assert_str_eq(o.pod_manifest_path, "/etc/k");
        ck_assert_uint_eq(o.file_check_usec, 90000000);
        ck_assert_int_eq(o.mode, STORAGE_MODE_SNAPSHOT_AND_UPDATES);
        ck_assert_str_eq(o.socket_path, "/tmp/x.sock");
        ck_assert_uint_eq(o.socket_mode, 0600);
        ck_assert_int_eq(o.verbosity, 3);
        ck_assert_int_eq(o.log_json, 1);
        ck_assert_uint_eq(o.n_headers, 3);
        ck_assert_str_eq(o.headers[0].name, "a");
        ck_assert_str_eq(o.headers[0].value, "1");
        ck_assert_str_eq(o.headers[1].name, "b");
        ck_assert_str_eq(o.headers[2].value, "3");
        ck_assert_uint_eq(o.max_backlog, 4096);
        ck_assert_uint_eq(o.history_bytes, 65536);
        options_free(&o);
        buf_free(&err);
}
END_TEST

START_TEST(test_bad_flags_name_the_flag)
{
        static const struct {
                const char *flag, *value, *needle;
        } bad[] = {
                {"--file-check-frequency", "5x", "--file-check-frequency"},
                {"--file-check-frequency", "0s", "--file-check-frequency"},
                {"--http-check-frequency", "-1s", "--http-check-frequency"},
                {"--mode", "fast", "--mode"},
                {"--socket-mode", "999", "--socket-mode"},
                {"--log-format", "xml", "--log-format"},
                {"--manifest-url-header", "novalue", "--manifest-url-header"},
                {"--max-consumers", "0", "--max-consumers"},
                {"--history-bytes", "1000", "--history-bytes"}, /* below 1024 */
                {"--history-bytes", "1M", "--history-bytes"},
                {"--events=maybe", NULL, "--events"},
                {"--event-qps", "-1", "--event-qps"},
                {"--event-qps", "1.5", "--event-qps"},
                {"--event-qps", "2147483648", "--event-qps"},
                {"--event-burst", "-3", "--event-burst"},
                {"--event-burst", "many", "--event-burst"},
                {"--bogus", NULL, "--bogus"},
        };
        struct buf err = BUF_INIT;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct options o;
                char *argv[] = {"run", (char *)bad[i].flag, (char *)bad[i].value, NULL};

                ck_assert_msg(parse(&o, &err, argv) == -EINVAL, "%s %s accepted", bad[i].flag,
                              bad[i].value);
                ck_assert_msg(strstr(err.data, bad[i].needle),
                              "%s: message \"%s\" does not name the flag", bad[i].flag, err.data);
        }
        buf_free(&err);
}
END_TEST

/* --log-format's names are util/log's, the one parser of them: an
 * unknown name (case counts) is -EINVAL, as every parser here returns. */
START_TEST(test_log_format_names)
{
        enum log_format f = LOG_FORMAT_JSON;

        ck_assert_int_eq(log_format_from_string("text", &f), 0);
        ck_assert_int_eq(f, LOG_FORMAT_TEXT);
        ck_assert_int_eq(log_format_from_string("json", &f), 0);
        ck_assert_int_eq(f, LOG_FORMAT_JSON);
        ck_assert_int_eq(log_format_from_string("xml", &f), -EINVAL);
        ck_assert_int_eq(log_format_from_string("JSON", &f), -EINVAL);
        ck_assert_int_eq(f, LOG_FORMAT_JSON); /* untouched on error */
}
END_TEST

/* The reason of a refused flag is the same for every subcommand
 * (options_bad_flag(); tests/integration/test_cli.py checks each). */
START_TEST(test_bad_flag_reasons)
{
        static const struct {
                const char *arg, *want;
        } bad[] = {
                {"--sockt", "--sockt: unknown flag"},
                {"--sockt=x", "--sockt=x: unknown flag"},
                {"-Z", "-Z: unknown flag"},
                {"--so", "--so: ambiguous: --socket, --socket-mode, --socket-group"},
                {"--so=x", "--so=x: ambiguous: --socket, --socket-mode, --socket-group"},
                {"--help=x", "--help=x: takes no value"},
                {"--in-c=1", "--in-c=1: takes no value"},
                {"--node-name", "--node-name: missing value"},
                {"-v", "-v: missing value"},
        };
        struct buf err = BUF_INIT;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct options o;
                char *argv[] = {"run", (char *)bad[i].arg, NULL};

                ck_assert_int_eq(parse(&o, &err, argv), -EINVAL);
                ck_assert_str_eq(err.data, bad[i].want);
        }
        buf_free(&err);
}
END_TEST

/* Out of memory while listing an ambiguous flag's candidates: -ENOMEM or
 * -EINVAL, the message whole or absent, nothing leaked. */
START_TEST(test_bad_flag_out_of_memory)
{
        const char *want = "--so: ambiguous: --socket, --socket-mode, --socket-group";
        struct buf err = BUF_INIT;
        bool failed = true;

        if (!failalloc_enabled())
                return;
        for (long k = 1; failed && k < 100; k++) {
                struct options o;
                char *argv[] = {"run", "--so", NULL};
                long live = failalloc_live();
                int r;

                buf_free(&err);
                failalloc_arm(k);
                r = options_parse(2, argv, &o, &err);
                failed = failalloc_failed();
                failalloc_arm(0);
                ck_assert_msg(r == -EINVAL || (failed && r == -ENOMEM), "k=%ld: %d", k, r);
                ck_assert_msg(err.len == 0 || strcmp(err.data, want) == 0, "k=%ld: \"%s\"", k, err.data);
                ck_assert_msg(failed || err.len, "k=%ld: no message without a failure", k);
                buf_free(&err);
                ck_assert_int_eq(failalloc_live(), live);
        }
        ck_assert(!failed);
}
END_TEST

static char *write_tmp(const char *text)
{
        char *path = strdup("/tmp/podmux-opt-XXXXXX");
        int fd = mkstemp(path);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        close(fd);
        return path;
}

START_TEST(test_kubelet_config_file_and_flag_precedence)
{
        struct options o;
        struct buf err = BUF_INIT;
        char *path = write_tmp("apiVersion: kubelet.config.k8s.io/v1beta1\n"
                               "kind: KubeletConfiguration\n"
                               "staticPodPath: /from/config\n"
                               "fileCheckFrequency: 7s\n"
                               "staticPodURL: http://127.0.0.1:1/x\n"
                               "staticPodURLHeader:\n  A: [x, z]\n"
                               "httpCheckFrequency: 1m\n"
                               "cgroupDriver: systemd\n");
        char *argv[] = {"run", "--node-name", "n", "--config", path, NULL};
        char *argv2[] = {"run", "--node-name", "n", "--config", path, "--pod-manifest-path",
                         "/from/flag", "--file-check-frequency", "3s", NULL};

        ck_assert_int_eq(parse(&o, &err, argv), 0);
        ck_assert_str_eq(o.pod_manifest_path, "/from/config");
        ck_assert_uint_eq(o.file_check_usec, 7000000);
        ck_assert_str_eq(o.manifest_url, "http://127.0.0.1:1/x");
        ck_assert_uint_eq(o.http_check_usec, 60000000);
        ck_assert_uint_eq(o.n_headers, 2);
        ck_assert_str_eq(o.headers[1].value, "z");
        options_free(&o);
        ck_assert_int_eq(parse(&o, &err, argv2), 0);
        ck_assert_str_eq(o.pod_manifest_path, "/from/flag");
        ck_assert_uint_eq(o.file_check_usec, 3000000);
        options_free(&o);
        unlink(path);
        free(path);
        buf_free(&err);
}
END_TEST

START_TEST(test_bad_config_files)
{
        static const char *bad[] = {
                "kind: Pod\n",
                "kind: KubeletConfiguration\nfileCheckFrequency: soon\n",
                "kind: KubeletConfiguration\nstaticPodURLHeader: [a]\n",
                "kind: [KubeletConfiguration\n",
        };
        struct buf err = BUF_INIT;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct options o;
                char *path = write_tmp(bad[i]);
                char *argv[] = {"run", "--node-name", "n", "--config", path, NULL};

                ck_assert_msg(parse(&o, &err, argv) < 0, "config %zu accepted", i);
                ck_assert_msg(strstr(err.data, path), "message \"%s\" lacks the file",
                              err.data);
                unlink(path);
                free(path);
        }
        {
                struct options o;
                char *argv[] = {"run", "--config", "/nonexistent/podmux.yaml", NULL};

                ck_assert_int_lt(parse(&o, &err, argv), 0);
                ck_assert_ptr_nonnull(strstr(err.data, "/nonexistent/podmux.yaml"));
        }
        buf_free(&err);
}
END_TEST

/* Where flag starts its own entry in the help: at the start of a line,
 * after the indent and a short form ("  -v, --v N").  NULL if nowhere
 * (a mention inside another entry's text does not count). */
static const char *entry_of(const char *usage, const char *flag)
{
        for (const char *at = strstr(usage, flag); at; at = strstr(at + 1, flag)) {
                const char *q = at;
                size_t n = strlen(flag);

                if (at[n] != ' ' && at[n] != '\n' && at[n] != ',')
                        continue; /* a longer flag */
                while (q > usage && q[-1] == ' ')
                        q--;
                if (q - usage >= 3 && q[-1] == ',' && q[-3] == '-')
                        q -= 3;
                while (q > usage && q[-1] == ' ')
                        q--;
                if (q == usage || q[-1] == '\n')
                        return at;
        }
        return NULL;
}

/* Every flag `podmux run` takes is in --help, and the help entry of each
 * says its default (or that it is off, or repeatable). */
START_TEST(test_help_documents_every_flag_with_default)
{
        const char *usage = options_usage();
        const struct option *f;
        size_t n = 0;

        for (f = options_flags(); f->name; f++, n++) {
                char want[64];
                const char *at, *end, *next;

                (void)snprintf(want, sizeof(want), strlen(f->name) == 1 ? "-%s" : "--%s", f->name);
                at = entry_of(usage, want);
                ck_assert_msg(at != NULL, "--help has no entry for %s", want);
                if (strcmp(f->name, "help") == 0)
                        continue;
                /* The entry runs until the next line that starts a flag. */
                end = at;
                for (next = strchr(at, '\n'); next; next = strchr(next + 1, '\n')) {
                        const char *p = next + 1;

                        while (*p == ' ')
                                p++;
                        end = next;
                        if (*p == '-' || *p == '\n' || *p == '\0')
                                break;
                }
                {
                        char entry[1024];
                        size_t len = (size_t)(end - at) < sizeof(entry) - 1 ? (size_t)(end - at) : sizeof(entry) - 1;

                        memcpy(entry, at, len);
                        entry[len] = '\0';
                        ck_assert_msg(strstr(entry, "default") || strstr(entry, "repeatable"),
                                      "--help entry of %s gives no default: \"%s\"", want, entry);
                }
        }
        ck_assert_uint_gt(n, 20);
}
END_TEST

START_TEST(test_metrics_address)
{
        struct buf err = BUF_INIT;
        struct {
                const char *value;
                const char *ok; /* NULL: refused, with this text in the error */
                const char *why;
        } cases[] = {
                {"/run/podmux/metrics.sock", "/run/podmux/metrics.sock", NULL},
                {"unix:/tmp/m.sock", "unix:/tmp/m.sock", NULL},
                {"127.0.0.1:9100", "127.0.0.1:9100", NULL},
                {"[::1]:9100", "[::1]:9100", NULL},
                {"localhost:0", "localhost:0", NULL},
                {"0.0.0.0:9100", NULL, "loopback only"},
                {"10.1.2.3:9100", NULL, "loopback only"},
                {"127.0.0.1:99999", NULL, "invalid port"},
                {"127.0.0.1:", NULL, "invalid port"},
                {"unix:relative.sock", NULL, "absolute path"},
                {"9100", NULL, "HOST:PORT"},
                {"", NULL, "empty"},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct options o;
                char *argv[] = {"run", "--node-name", "n1", "--metrics-address", (char *)cases[i].value, NULL};
                int r = parse(&o, &err, argv);

                if (cases[i].ok) {
                        ck_assert_msg(r == 0, "%s: %s", cases[i].value, err.data);
                        ck_assert_str_eq(o.metrics_address, cases[i].ok);
                        options_free(&o);
                } else {
                        ck_assert_int_eq(r, -EINVAL);
                        ck_assert_ptr_nonnull(strstr(err.data, "--metrics-address"));
                        ck_assert_msg(strstr(err.data, cases[i].why), "%s: %s", cases[i].value, err.data);
                }
        }
        buf_free(&err);
}
END_TEST

/* --kube-api-*: values taken, defaults, each bad value and each path
 * the socket would collide with refused with a message naming the flag. */
START_TEST(test_kube_api_flags)
{
        static const struct {
                const char *args[6];
                const char *want;
        } bad[] = {
                {{"--kube-api-socket", "rel.sock"}, "--kube-api-socket \"rel.sock\": an absolute path is needed"},
                {{"--kube-api-history", "0"}, "kube-api-history"},
                {{"--kube-api-history", "1000001"}, "--kube-api-history 1000001: at most 1000000"},
                {{"--kube-api-min-request-timeout", "0s"}, "greater than 0"},
                {{"--kube-api-min-request-timeout", "soon"}, "kube-api-min-request-timeout"},
                {{"--kube-api-socket", "/r/p.sock"}, "--kube-api-socket \"/r/p.sock\" and --socket"},
                {{"--kube-api-socket", "/r/p.sock.lock"}, "and --socket \"/r/p.sock\" collide"},
                {{"--kube-api-socket", "/r/m.sock", "--metrics-address", "unix:/r/m.sock"}, "--metrics-address"},
                {{"--kube-api-socket", "/m/k.sock", "--pod-manifest-path", "/m"}, "is in the static pod path"},
                {{"--kube-api-socket", "/reg/k.sock", "--plugins-registry-dir", "/reg"}, "--plugins-registry-dir"},
        };
        struct buf err = BUF_INIT;
        struct options o;

        {
                char *argv[] = {"run", "--socket", "/r/p.sock", NULL};

                ck_assert_int_eq(parse(&o, &err, argv), 0);
                ck_assert_ptr_null(o.kube_api_socket);
                ck_assert_uint_eq(o.kube_api_history, KUBE_VIEW_DEFAULT_HISTORY);
                ck_assert_uint_eq(o.kube_api_min_request_timeout_usec, KUBE_API_DEFAULT_MIN_REQUEST_TIMEOUT_USEC);
                options_free(&o);
        }
        {
                char *argv[] = {"run",       "--socket",
                                "/r/p.sock", "--kube-api-socket",
                                "/r/k.sock", "--kube-api-history",
                                "1000000",   "--kube-api-min-request-timeout",
                                "2s",        "--pod-manifest-path",
                                "/m",        NULL};

                ck_assert_int_eq(parse(&o, &err, argv), 0);
                ck_assert_str_eq(o.kube_api_socket, "/r/k.sock");
                ck_assert_uint_eq(o.kube_api_history, KUBE_VIEW_MAX_HISTORY); /* the limit is taken */
                ck_assert_uint_eq(o.kube_api_min_request_timeout_usec, 2000000);
                options_free(&o);
        }
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char *argv[16] = {"run", "--node-name", "n1", "--plugins-registry-dir", "", "--socket", "/r/p.sock"};
                size_t argc = 7;

                for (size_t j = 0; j < 6 && bad[i].args[j]; j++)
                        argv[argc++] = (char *)bad[i].args[j];
                ck_assert_int_eq(parse(&o, &err, argv), -EINVAL);
                ck_assert_msg(strstr(err.data, bad[i].want), "%s: %s", bad[i].want, err.data);
        }
        buf_free(&err);
}
END_TEST

/* --kube-api-address: a client CA is optional with an API server, whose
 * TokenReview verifies tokens; with neither, nobody could authenticate,
 * and the start is refused saying what to give. */
START_TEST(test_kube_api_address_auth)
{
        static const struct {
                const char *args[6];
                const char *want; /* NULL: taken */
        } cases[] = {
                {{"--kubeconfig", "/k"}, NULL},
                {{"--in-cluster", "--kube-api-authorization-mode", "AlwaysAllow"}, NULL},
                {{"--kube-api-client-ca-file", "/ca", "--kube-api-authorization-mode", "AlwaysAllow"}, NULL},
                {{"--kube-api-client-ca-file", "/ca", "--kubeconfig", "/k"}, NULL},
                {{"--kube-api-authorization-mode", "AlwaysAllow"}, "nobody could authenticate"},
                {{"--kube-api-authorization-mode", "Webhook"}, "nobody could authenticate"},
                {{NULL}, "--kube-api-client-ca-file (client certificates), or an API server"},
                {{"--kube-api-client-ca-file", "/ca"}, "Webhook (the default) asks the API server"},
        };
        struct buf err = BUF_INIT;
        struct options o;

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char *argv[16] = {"run",
                                  "--node-name",
                                  "n1",
                                  "--plugins-registry-dir",
                                  "",
                                  "--socket",
                                  "/r/p.sock",
                                  "--kube-api-address",
                                  "127.0.0.1:6443"};
                size_t argc = 9;

                for (size_t j = 0; j < 6 && cases[i].args[j]; j++)
                        argv[argc++] = (char *)cases[i].args[j];
                if (!cases[i].want) {
                        ck_assert_msg(parse(&o, &err, argv) == 0, "%zu: %s", i, err.data ? err.data : "");
                        ck_assert_str_eq(o.kube_api_address, "127.0.0.1:6443");
                        options_free(&o);
                        continue;
                }
                ck_assert_int_eq(parse(&o, &err, argv), -EINVAL);
                ck_assert_msg(strstr(err.data, cases[i].want), "%zu: %s", i, err.data);
        }
        buf_free(&err);
}
END_TEST

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Every pair of flags that contradict each other is refused by the
 * parser, in either order, naming both; the near misses next to each are
 * accepted. */
START_TEST(test_conflicting_pairs)
{
        /* Automatic arrays: the compound literals of ARGS live in this
         * block. */
        const struct {
                const char *const *args;
                const char *a, *b; /* both named in the message */
        } bad[] = {
                {ARGS("--kubeconfig", "/k", "--in-cluster"), "--kubeconfig", "--in-cluster"},
                {ARGS("--node-name", "a", "--hostname-override", "b"), "--node-name", "--hostname-override"},
                {ARGS("--socket", "/r/p.sock", "--metrics-address", "/r/p.sock"), "--socket", "--metrics-address"},
                {ARGS("--socket", "/r/p.sock", "--metrics-address", "unix:/r/./p.sock"), "--socket",
                 "--metrics-address"},
                {ARGS("--socket", "/r/p.sock", "--metrics-address", "/r/p.sock.lock"), "--socket",
                 "--metrics-address"},
                {ARGS("--socket", "/r/m.sock.lock", "--metrics-address", "/r/m.sock"), "--socket",
                 "--metrics-address"},
                {ARGS("--socket", "/m/p.sock", "--pod-manifest-path", "/m"), "--socket", "--pod-manifest-path"},
                {ARGS("--socket", "/m/web.yaml", "--pod-manifest-path", "/m/web.yaml"), "--socket",
                 "--pod-manifest-path"},
                {ARGS("--socket", "/m/web.yaml", "--pod-manifest-path", "/m/web.yaml.lock"), "--socket",
                 "--pod-manifest-path"},
                {ARGS("--metrics-address", "/m/x.sock", "--pod-manifest-path", "/m/"), "--metrics-address",
                 "--pod-manifest-path"},
                {ARGS("--socket", "/reg/p.sock", "--plugins-registry-dir", "/reg"), "--socket",
                 "--plugins-registry-dir"},
                {ARGS("--socket", "/reg/a/b/p.sock", "--plugins-registry-dir", "/reg"), "--socket",
                 "--plugins-registry-dir"},
                {ARGS("--socket", "/reg", "--plugins-registry-dir", "/reg"), "--socket", "--plugins-registry-dir"},
                {ARGS("--metrics-address", "unix:/reg/m.sock", "--plugins-registry-dir", "/reg"),
                 "--metrics-address", "--plugins-registry-dir"},
                {ARGS("--pod-manifest-path", "/d", "--plugins-registry-dir", "/d/"), "--pod-manifest-path",
                 "--plugins-registry-dir"},
        };
        const char *const *const good[] = {
                ARGS("--kubeconfig", "", "--in-cluster"), /* "" turns the first off */
                ARGS("--node-name", "a", "--hostname-override", "a"),
                ARGS("--node-name", "a", "--node-name", "b"), /* the last one wins */
                ARGS("--socket", "/r/p.sock", "--metrics-address", "/r/m.sock"),
                ARGS("--socket", "/r/p.sock", "--metrics-address", "127.0.0.1:0"),
                ARGS("--socket", "/m/.p.sock", "--pod-manifest-path", "/m"), /* hidden: not listed */
                ARGS("--socket", "/m/sub/p.sock", "--pod-manifest-path", "/m"), /* no recursion */
                ARGS("--socket", "/m/p.sock", "--pod-manifest-path", "/m/web.yaml"),
                ARGS("--socket", "/mm/p.sock", "--pod-manifest-path", "/m"),
                ARGS("--socket", "/reg/.hidden/p.sock", "--plugins-registry-dir", "/reg"),
                ARGS("--socket", "/reg/.p.sock", "--plugins-registry-dir", "/reg"),
                ARGS("--socket", "/regx/p.sock", "--plugins-registry-dir", "/reg"),
                ARGS("--socket", "/reg/p.sock", "--plugins-registry-dir", ""),
                ARGS("--pod-manifest-path", "/d", "--plugins-registry-dir", "/d/plugins"),
                ARGS("--pod-manifest-path", "/d/m", "--plugins-registry-dir", "/d"),
                ARGS("--pod-manifest-path", "", "--plugins-registry-dir", ""),
        };
        struct buf err = BUF_INIT;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                for (int rev = 0; rev < 2; rev++) {
                        char *argv[16] = {"run", "--node-name", "n1", "--socket", "/elsewhere/p.sock"};
                        size_t argc = 5, n = 0;
                        struct options o;

                        while (bad[i].args[n])
                                n++;
                        /* The pair as given, or its second flag first. */
                        for (size_t k = 0; k < n; k++)
                                argv[argc++] = (char *)bad[i].args[rev ? (k + 2) % n : k];
                        argv[argc] = NULL;
                        ck_assert_msg(parse(&o, &err, argv) == -EINVAL, "pair %zu (%s/%s, reversed %d) accepted", i,
                                      bad[i].a, bad[i].b, rev);
                        ck_assert_msg(strstr(err.data, bad[i].a) && strstr(err.data, bad[i].b),
                                      "pair %zu: \"%s\" does not name %s and %s", i, err.data, bad[i].a, bad[i].b);
                }
        }
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
                char *argv[16] = {"run", "--node-name", "n1", "--socket", "/elsewhere/p.sock"};
                size_t argc = 5;
                struct options o;

                for (size_t k = 0; good[i][k]; k++)
                        argv[argc++] = (char *)good[i][k];
                argv[argc] = NULL;
                ck_assert_msg(parse(&o, &err, argv) == 0, "near miss %zu refused: %s", i, err.data);
                options_free(&o);
        }
        buf_free(&err);
}
END_TEST

/* A static pod path from --config takes part in the same checks, named
 * as the file's field. */
START_TEST(test_conflict_with_config_path)
{
        struct options o;
        struct buf err = BUF_INIT;
        char *path = write_tmp("kind: KubeletConfiguration\nstaticPodPath: /cfg/m\n");
        char *argv[] = {"run", "--node-name", "n", "--config", path, "--socket", "/cfg/m/p.sock", NULL};
        char *argv2[] = {"run", "--node-name", "n", "--config", path, "--socket", "/cfg/m/p.sock",
                         "--pod-manifest-path", "/other", NULL};

        ck_assert_int_eq(parse(&o, &err, argv), -EINVAL);
        ck_assert_msg(strstr(err.data, "staticPodPath (--config)") && strstr(err.data, "--socket"), "%s",
                      err.data);
        /* The flag wins over the file, so nothing collides. */
        ck_assert_int_eq(parse(&o, &err, argv2), 0);
        options_free(&o);
        unlink(path);
        free(path);
        buf_free(&err);
}
END_TEST

/* --pod-manifest-path "", --manifest-url "" and --kubeconfig "" turn the
 * source off (the kubelet's meaning), and keep --config's value out. */
START_TEST(test_empty_source_flags_turn_the_source_off)
{
        struct options o;
        struct buf err = BUF_INIT;
        char *path = write_tmp("kind: KubeletConfiguration\nstaticPodPath: /cfg/m\n"
                               "staticPodURL: http://127.0.0.1:1/x\n");
        char *argv[] = {"run", "--node-name", "n", "--config", path, "--pod-manifest-path", "",
                        "--manifest-url", "", "--kubeconfig", "", NULL};
        char *argv2[] = {"run", "--node-name", "n", "--socket", "", NULL};

        ck_assert_int_eq(parse(&o, &err, argv), 0);
        ck_assert_ptr_null(o.pod_manifest_path);
        ck_assert_ptr_null(o.manifest_url);
        ck_assert_ptr_null(o.kubeconfig);
        ck_assert(o.explicit_sources);
        options_free(&o);
        ck_assert_int_eq(parse(&o, &err, argv2), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err.data, "--socket"));
        unlink(path);
        free(path);
        buf_free(&err);
}
END_TEST

/* The plugin manager's default registry: root, and no source on the
 * command line. */
START_TEST(test_default_plugin_registry_rule)
{
        const struct {
                const char *const *args;
                bool explicit_sources;
        } cases[] = {
                {ARGS("--socket", "/s/p.sock"), false},
                {ARGS("--mode", "snapshot", "--metrics-address", "127.0.0.1:0"), false},
                {ARGS("--pod-manifest-path", "/m"), true},
                {ARGS("--pod-manifest-path", ""), true},
                {ARGS("--manifest-url", "http://127.0.0.1:1/"), true},
                {ARGS("--kubeconfig", "/k"), true},
                {ARGS("--in-cluster"), true},
        };
        struct buf err = BUF_INIT;

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char *argv[16] = {"run", "--node-name", "n1"};
                size_t argc = 3;
                struct options o;

                for (size_t k = 0; cases[i].args[k]; k++)
                        argv[argc++] = (char *)cases[i].args[k];
                argv[argc] = NULL;
                ck_assert_msg(parse(&o, &err, argv) == 0, "case %zu: %s", i, err.data);
                ck_assert_msg(o.explicit_sources == cases[i].explicit_sources, "case %zu", i);
                ck_assert_msg(options_default_plugins(&o, 0) == !cases[i].explicit_sources, "case %zu as root", i);
                ck_assert_msg(!options_default_plugins(&o, 1000), "case %zu as uid 1000", i);
                /* What the parse filled in follows the rule for this
                 * process's own user. */
                if (options_default_plugins(&o, geteuid()))
                        ck_assert_str_eq(o.plugins_dir, OPTIONS_DEFAULT_PLUGINS_DIR);
                else
                        ck_assert_ptr_null(o.plugins_dir);
                options_free(&o);
        }
        {
                char *path = write_tmp("kind: KubeletConfiguration\n");
                char *argv[] = {"run", "--node-name", "n", "--config", path, NULL};
                struct options o;

                ck_assert_int_eq(parse(&o, &err, argv), 0);
                ck_assert(!options_default_plugins(&o, 0));
                ck_assert_ptr_null(o.plugins_dir);
                options_free(&o);
                unlink(path);
                free(path);
        }
        buf_free(&err);
}
END_TEST

/* Found by tests/fuzz/fuzz_kubelet_config: a null (json-c's NULL object)
 * where a string was expected crashed in strcmp/strlen; a number was taken
 * as a header value where the kubelet wants []string. */
START_TEST(test_config_null_and_wrong_types)
{
        static const struct {
                const char *text, *want;
        } bad[] = {
                {"kind: null\n", "kind must be KubeletConfiguration"},
                {"kind: 7\n", "kind must be KubeletConfiguration"},
                {"kind: KubeletConfiguration\nstaticPodURLHeader: {a: [null]}\n",
                 "staticPodURLHeader.a must be a list of strings"},
                {"kind: KubeletConfiguration\nstaticPodURLHeader: {a: [x, 1]}\n",
                 "staticPodURLHeader.a must be a list of strings"},
                {"kind: KubeletConfiguration\nfileCheckFrequency: null\n",
                 "fileCheckFrequency: invalid duration null"},
                {"kind: KubeletConfiguration\nhttpCheckFrequency: 20\n",
                 "httpCheckFrequency: invalid duration 20"},
        };
        struct buf err = BUF_INIT;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct options o;
                char *path = write_tmp(bad[i].text);
                char *argv[] = {"run", "--node-name", "n", "--config", path, NULL};

                ck_assert_msg(parse(&o, &err, argv) == -EINVAL, "config %zu accepted", i);
                ck_assert_msg(strstr(err.data, bad[i].want), "config %zu: message \"%s\", want \"%s\"",
                              i, err.data, bad[i].want);
                unlink(path);
                free(path);
        }
        buf_free(&err);
}
END_TEST

/* --hostname-override as the kubelet takes it: trimmed and lower-cased;
 * empty, not given; blank, refused.  --node-name is kept as given, and the
 * two must name one node. */
START_TEST(test_hostname_override_as_the_kubelet_takes_it)
{
        struct options o;
        struct buf err = BUF_INIT;
        char host[256];
        char *trim[] = {"run", "--hostname-override", " Node-A.Example\t", NULL};
        char *agree[] = {"run", "--node-name", "node-a", "--hostname-override", "NODE-A ", NULL};
        char *differ[] = {"run", "--node-name", "Node-A", "--hostname-override", "node-a", NULL};
        char *blank[] = {"run", "--hostname-override", " \t\n", NULL};
        char *empty[] = {"run", "--node-name", "n", "--hostname-override", "", NULL};
        char *empty_only[] = {"run", "--hostname-override", "X", "--hostname-override", "", NULL};

        ck_assert_int_eq(parse(&o, &err, trim), 0);
        ck_assert_str_eq(o.node_name, "node-a.example");
        options_free(&o);
        ck_assert_int_eq(parse(&o, &err, agree), 0);
        ck_assert_str_eq(o.node_name, "node-a");
        options_free(&o);
        ck_assert_int_eq(parse(&o, &err, differ), -EINVAL);
        ck_assert_msg(strstr(err.data, "--node-name \"Node-A\"") && strstr(err.data, "--hostname-override"), "%s",
                      err.data);
        ck_assert_int_eq(parse(&o, &err, blank), -EINVAL);
        ck_assert_msg(strstr(err.data, "--hostname-override") && strstr(err.data, "empty hostname is invalid"), "%s",
                      err.data);
        ck_assert_int_eq(parse(&o, &err, empty), 0);
        ck_assert_str_eq(o.node_name, "n");
        options_free(&o);
        ck_assert_int_eq(parse(&o, &err, empty_only), 0);
        ck_assert_int_eq(options_default_node_name(host, sizeof(host)), 0);
        ck_assert_str_eq(o.node_name, host);
        options_free(&o);
        buf_free(&err);
}
END_TEST

/* A temporary directory holding etc/kubelet.yaml (staticPodPath:
 * manifests/) and etc/abs.yaml (an absolute staticPodPath); the caller
 * removes it with rm_tree(). */
static char *config_tree(void)
{
        char *dir = strdup("/tmp/podmux-opt-tree-XXXXXX"), *p = NULL;
        FILE *f;

        ck_assert_ptr_nonnull(mkdtemp(dir));
        ck_assert_int_ge(asprintf(&p, "%s/etc", dir), 0);
        ck_assert_int_eq(mkdir(p, 0755), 0);
        free(p);
        ck_assert_int_ge(asprintf(&p, "%s/etc/kubelet.yaml", dir), 0);
        ck_assert_ptr_nonnull(f = fopen(p, "w"));
        fputs("kind: KubeletConfiguration\nstaticPodPath: ./manifests/\n", f);
        fclose(f);
        free(p);
        ck_assert_int_ge(asprintf(&p, "%s/etc/abs.yaml", dir), 0);
        ck_assert_ptr_nonnull(f = fopen(p, "w"));
        fputs("kind: KubeletConfiguration\nstaticPodPath: /srv//m/\n", f);
        fclose(f);
        free(p);
        return dir;
}

static void rm_tree(char *dir)
{
        char *cmd = NULL;

        ck_assert_int_ge(asprintf(&cmd, "rm -rf '%s'", dir), 0);
        ck_assert_int_eq(system(cmd), 0);
        free(cmd);
        free(dir);
}

/* The static pod path is made absolute and cleaned: a relative
 * --pod-manifest-path from the working directory, a relative
 * staticPodPath from the --config file's directory (wherever the daemon
 * runs), so one file has one name and one UID. */
START_TEST(test_relative_static_pod_paths)
{
        struct options o;
        struct buf err = BUF_INIT;
        char *dir = config_tree(), *want = NULL, *cwd = getcwd(NULL, 0), *gone = NULL, *full = NULL;
        char *flag[] = {"run", "--node-name", "n", "--pod-manifest-path", "m/../manifests//", NULL};
        char *cfg_rel[] = {"run", "--node-name", "n", "--config", "etc/kubelet.yaml", NULL};
        char *cfg_abs[] = {"run", "--node-name", "n", "--config", "etc/abs.yaml", NULL};
        char *both[] = {"run", "--node-name", "n", "--config", "etc/kubelet.yaml", "--pod-manifest-path", "x", NULL};
        char *cfg_full[] = {"run", "--node-name", "n", "--config", NULL, NULL};

        ck_assert_ptr_nonnull(cwd);
        ck_assert_int_eq(chdir(dir), 0);
        ck_assert_int_ge(asprintf(&want, "%s/manifests", dir), 0);
        ck_assert_int_eq(parse(&o, &err, flag), 0);
        ck_assert_str_eq(o.pod_manifest_path, want);
        options_free(&o);
        free(want);
        ck_assert_int_ge(asprintf(&want, "%s/etc/manifests", dir), 0);
        ck_assert_int_eq(parse(&o, &err, cfg_rel), 0);
        ck_assert_str_eq(o.pod_manifest_path, want);
        options_free(&o);
        ck_assert_int_eq(parse(&o, &err, cfg_abs), 0);
        ck_assert_str_eq(o.pod_manifest_path, "/srv/m");
        options_free(&o);
        /* The flag wins, and is taken from the working directory. */
        ck_assert_int_eq(parse(&o, &err, both), 0);
        ck_assert_str_eq(o.pod_manifest_path + strlen(dir), "/x");
        options_free(&o);

        /* From elsewhere (here a directory that is gone), the file's own
         * directory still places staticPodPath ... */
        ck_assert_int_ge(asprintf(&gone, "%s/gone", dir), 0);
        ck_assert_int_eq(mkdir(gone, 0755), 0);
        ck_assert_int_eq(chdir(gone), 0);
        ck_assert_int_eq(rmdir(gone), 0);
        ck_assert_int_ge(asprintf(&full, "%s/etc/kubelet.yaml", dir), 0);
        cfg_full[4] = full;
        ck_assert_int_eq(parse(&o, &err, cfg_full), 0);
        ck_assert_str_eq(o.pod_manifest_path, want);
        options_free(&o);
        /* ... but a relative path with no working directory is a clear
         * error. */
        ck_assert_int_eq(parse(&o, &err, flag), -EINVAL);
        ck_assert_msg(strstr(err.data, "--pod-manifest-path \"m/../manifests//\"") &&
                              strstr(err.data, "working directory"),
                      "%s", err.data);
        /* A file named without a directory is in the working one. */
        full[strlen(full) - strlen("/kubelet.yaml")] = '\0';
        ck_assert_int_eq(chdir(full), 0);
        cfg_full[4] = "kubelet.yaml";
        ck_assert_int_eq(parse(&o, &err, cfg_full), 0);
        ck_assert_str_eq(o.pod_manifest_path, want);
        options_free(&o);

        ck_assert_int_eq(chdir(cwd), 0);
        free(full);
        free(gone);
        free(want);
        free(cwd);
        rm_tree(dir);
        buf_free(&err);
}
END_TEST

/* Top-level fields KubeletConfiguration does not define are listed for
 * the caller to warn about; fields podmux merely ignores are not. */
START_TEST(test_config_unknown_fields)
{
        struct options o;
        struct buf err = BUF_INIT, text = BUF_INIT;
        char *known = write_tmp("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                                "staticPodPath: /m\ncgroupDriver: systemd\nauthentication: {x509: {}}\n"
                                "failCgroupV1: false\nuserNamespaces: {}\n");
        char *typo = write_tmp("kind: KubeletConfiguration\nstaticPodPth: /m\nfileCheckFrequency: 5s\n"
                               "bogus\"field: 1\n");
        char *many;
        char *argv[] = {"run", "--node-name", "n", "--config", known, NULL};

        ck_assert_int_eq(parse(&o, &err, argv), 0);
        ck_assert_ptr_null(o.config_unknown);
        options_free(&o);
        argv[4] = typo;
        ck_assert_int_eq(parse(&o, &err, argv), 0);
        ck_assert_str_eq(o.config_unknown, "\"staticPodPth\", \"bogus\\\"field\"");
        ck_assert_ptr_null(o.pod_manifest_path);
        ck_assert_uint_eq(o.file_check_usec, 5000000);
        options_free(&o);
        buf_puts(&text, "kind: KubeletConfiguration\n");
        for (int i = 0; i < 25; i++)
                buf_printf(&text, "f%02d: 1\n", i);
        many = write_tmp(text.data);
        argv[4] = many;
        ck_assert_int_eq(parse(&o, &err, argv), 0);
        ck_assert_msg(strstr(o.config_unknown, "\"f00\", \"f01\"") &&
                              strstr(o.config_unknown, "\"f19\" (and 5 more)") && !strstr(o.config_unknown, "f20"),
                      "%s", o.config_unknown);
        options_free(&o);
        unlink(known);
        unlink(typo);
        unlink(many);
        free(known);
        free(typo);
        free(many);
        buf_free(&text);
        buf_free(&err);
}
END_TEST

/* Every allocation of a parse that takes each new step (a config file with
 * unknown fields and a relative staticPodPath, --hostname-override, a
 * relative --pod-manifest-path) fails in turn: -ENOMEM, nothing leaked. */
START_TEST(test_parse_out_of_memory)
{
        struct buf err = BUF_INIT;
        char *dir, *cwd;
        char *argvs[2][8] = {
                {"run", "--hostname-override", " N ", "--config", "etc/kubelet.yaml", NULL},
                {"run", "--node-name", "n", "--pod-manifest-path", "./m", NULL},
        };

        if (!failalloc_enabled())
                return;
        dir = config_tree();
        cwd = getcwd(NULL, 0);
        ck_assert_int_eq(chdir(dir), 0);
        ck_assert_int_eq(system("echo 'typo: 1' >> etc/kubelet.yaml"), 0);
        for (int a = 0; a < 2; a++) {
                long before = failalloc_live(), n;

                for (n = 1;; n++) {
                        struct options o;
                        bool failed;
                        int r;

                        failalloc_arm(n);
                        r = parse(&o, &err, argvs[a]);
                        failed = failalloc_failed();
                        failalloc_arm(0);
                        if (!failed) {
                                ck_assert_int_eq(r, 0);
                                ck_assert_ptr_nonnull(strstr(o.pod_manifest_path, "/m"));
                                options_free(&o);
                                break;
                        }
                        /* glibc's getcwd() keeps its larger buffer when
                         * the final realloc fails: a success. */
                        if (r == 0)
                                options_free(&o);
                        else
                                ck_assert_msg(r == -ENOMEM, "allocation %ld: %d %s", n, r, err.data);
                        buf_free(&err);
                        ck_assert_int_eq(failalloc_live(), before);
                }
                ck_assert_int_ge(n, 5);
        }
        ck_assert_int_eq(chdir(cwd), 0);
        free(cwd);
        rm_tree(dir);
        buf_free(&err);
}
END_TEST

/* Events: on by default with the kubelet's 50 writes/s after 100; the
 * flags take Go's spellings of a boolean, --event-qps and --event-burst
 * whole numbers from 0; eventRecordQPS and eventBurst in --config, the
 * flags winning (doc/events.md). */
START_TEST(test_event_flags)
{
        static const struct {
                const char *arg;
                bool on;
        } bools[] = {{"--events", true},        {"--events=false", false}, {"--events=0", false}, {"--events=F", false},
                     {"--events=FALSE", false}, {"--events=True", true},   {"--events=t", true},  {"--events=1", true}};
        struct options o;
        struct buf err = BUF_INIT;
        char *defaults[] = {"run", "--node-name", "n", NULL};
        char *flags[] = {"run", "--node-name", "n", "--event-qps", "0", "--event-burst=7", NULL};
        char *spaced[] = {"run", "--node-name", "n", "--events", "false", NULL};

        ck_assert_int_eq(parse(&o, &err, defaults), 0);
        ck_assert(o.events);
        ck_assert_uint_eq(o.event_qps, 50);
        ck_assert_uint_eq(o.event_burst, 100);
        options_free(&o);
        ck_assert_int_eq(parse(&o, &err, flags), 0);
        ck_assert_uint_eq(o.event_qps, 0);
        ck_assert_uint_eq(o.event_burst, 7);
        options_free(&o);
        for (size_t i = 0; i < sizeof(bools) / sizeof(bools[0]); i++) {
                char *argv[] = {"run", "--node-name", "n", "--events=false", (char *)bools[i].arg, NULL};

                ck_assert_int_eq(parse(&o, &err, argv), 0);
                ck_assert_msg(o.events == bools[i].on, "%s", bools[i].arg);
                options_free(&o);
        }
        /* As with Go's flags, the value of a boolean is joined. */
        ck_assert_int_eq(parse(&o, &err, spaced), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err.data, "\"false\""));
        buf_free(&err);
}
END_TEST

START_TEST(test_event_config_fields)
{
        static const struct {
                const char *text, *want;
        } bad[] = {
                {"kind: KubeletConfiguration\neventRecordQPS: -1\n", "eventRecordQPS must be a whole number"},
                {"kind: KubeletConfiguration\neventRecordQPS: 2.5\n", "eventRecordQPS must be a whole number"},
                {"kind: KubeletConfiguration\neventBurst: many\n", "eventBurst must be a whole number"},
                {"kind: KubeletConfiguration\neventBurst: 2147483648\n", "eventBurst must be a whole number"},
        };
        struct options o;
        struct buf err = BUF_INIT;
        char *path = write_tmp("kind: KubeletConfiguration\neventRecordQPS: 5\neventBurst: 9\n");
        char *nulls = write_tmp("kind: KubeletConfiguration\neventRecordQPS: null\neventBurst: null\n");
        char *argv[] = {"run", "--node-name", "n", "--config", path, NULL};
        char *argv_flag[] = {"run", "--node-name", "n", "--config", path, "--event-qps", "3", NULL};
        char *argv_null[] = {"run", "--node-name", "n", "--config", nulls, NULL};

        ck_assert_int_eq(parse(&o, &err, argv), 0);
        ck_assert_uint_eq(o.event_qps, 5);
        ck_assert_uint_eq(o.event_burst, 9);
        options_free(&o);
        ck_assert_int_eq(parse(&o, &err, argv_flag), 0);
        ck_assert_uint_eq(o.event_qps, 3);
        ck_assert_uint_eq(o.event_burst, 9);
        options_free(&o);
        ck_assert_int_eq(parse(&o, &err, argv_null), 0);
        ck_assert_uint_eq(o.event_qps, 50);
        ck_assert_uint_eq(o.event_burst, 100);
        options_free(&o);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char *p = write_tmp(bad[i].text);
                char *a[] = {"run", "--node-name", "n", "--config", p, NULL};

                ck_assert_msg(parse(&o, &err, a) == -EINVAL, "config %zu accepted", i);
                ck_assert_msg(strstr(err.data, bad[i].want) && strstr(err.data, p), "config %zu: \"%s\"", i, err.data);
                unlink(p);
                free(p);
        }
        unlink(path);
        unlink(nulls);
        free(path);
        free(nulls);
        buf_free(&err);
}
END_TEST

/* The checkpoint flags (doc/checkpoint.md): defaults, values, a relative
 * directory made absolute, "" turning it off, and every flag that makes
 * no sense without the others refused, naming the flag. */
START_TEST(test_checkpoint_flags)
{
        static const struct {
                const char *argv[10];
                const char *needle;
        } bad[] = {
                {{"run", "--node-name", "n", "--checkpoint-interval", "5s", NULL},
                 "--checkpoint-interval: needs --checkpoint-dir"},
                {{"run", "--node-name", "n", "--checkpoint-max-age=1h", "--checkpoint-dir", "", "--kubeconfig", "/k",
                  NULL},
                 "--checkpoint-max-age: needs --checkpoint-dir"},
                {{"run", "--node-name", "n", "--checkpoint-dir", "/var/lib/podmux", NULL},
                 "--checkpoint-dir: there is no API server source to keep (--kubeconfig or --in-cluster)"},
                {{"run", "--node-name", "n", "--kubeconfig", "/k", "--checkpoint-dir", "/m/", "--pod-manifest-path",
                  "/m", NULL},
                 "--checkpoint-dir \"/m\" is the static pod directory"},
                {{"run", "--node-name", "n", "--kubeconfig", "/k", "--checkpoint-dir", "/c", "--checkpoint-grace", "0s",
                  NULL},
                 "--checkpoint-grace: invalid duration \"0s\""},
                {{"run", "--node-name", "n", "--kubeconfig", "/k", "--checkpoint-dir", "/c", "--checkpoint-interval",
                  "soon", NULL},
                 "--checkpoint-interval: invalid duration \"soon\""},
        };
        struct options o;
        struct buf err = BUF_INIT;
        char *defaults[] = {"run", "--node-name", "n", "--in-cluster", "--checkpoint-dir", "/var/lib/podmux", NULL};
        char *given[] = {"run",
                         "--node-name=n",
                         "--kubeconfig=/k",
                         "--checkpoint-dir=ckpt",
                         "--checkpoint-interval=5s",
                         "--checkpoint-grace=2s",
                         "--checkpoint-max-age=24h",
                         NULL};
        char *off[] = {"run", "--node-name", "n", "--checkpoint-dir", "", NULL};
        char *cwd = getcwd(NULL, 0), *want = NULL;

        ck_assert_int_eq(parse(&o, &err, defaults), 0);
        ck_assert_str_eq(o.checkpoint_dir, "/var/lib/podmux");
        ck_assert_uint_eq(o.checkpoint_interval_usec, 60000000u);
        ck_assert_uint_eq(o.checkpoint_grace_usec, 10000000u);
        ck_assert_uint_eq(o.checkpoint_max_age_usec, 168ull * 3600000000ull);
        options_free(&o);
        ck_assert_int_eq(parse(&o, &err, given), 0);
        ck_assert_int_ge(asprintf(&want, "%s/ckpt", strcmp(cwd, "/") == 0 ? "" : cwd), 0);
        ck_assert_str_eq(o.checkpoint_dir, want);
        ck_assert_uint_eq(o.checkpoint_interval_usec, 5000000u);
        ck_assert_uint_eq(o.checkpoint_grace_usec, 2000000u);
        ck_assert_uint_eq(o.checkpoint_max_age_usec, 24ull * 3600000000ull);
        options_free(&o);
        ck_assert_int_eq(parse(&o, &err, off), 0);
        ck_assert_ptr_null(o.checkpoint_dir);
        options_free(&o);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                ck_assert_int_eq(parse(&o, &err, (char **)bad[i].argv), -EINVAL);
                ck_assert_msg(strstr(err.data, bad[i].needle), "case %zu: \"%s\" lacks \"%s\"", i, err.data,
                              bad[i].needle);
        }
        free(want);
        free(cwd);
        buf_free(&err);
}
END_TEST

/* --static-pod-file-pattern: repeatable, kept in order; the limits
 * each with a test at the limit; out of memory: -ENOMEM, nothing kept. */
START_TEST(test_file_patterns)
{
        char *argv[] = {"run", "--static-pod-file-pattern", "*.yaml", "--static-pod-file-pattern", "*.json", NULL};
        char at_len[OPTIONS_MAX_PATTERN_LEN + 2];
        struct buf err = BUF_INIT;
        struct options o;
        char **pats = NULL;
        size_t n = 0;

        ck_assert_int_eq(parse(&o, &err, argv), 0);
        ck_assert_uint_eq(o.n_file_patterns, 2);
        ck_assert_str_eq(o.file_patterns[0], "*.yaml");
        ck_assert_str_eq(o.file_patterns[1], "*.json");
        options_free(&o);
        for (int i = 0; i < OPTIONS_MAX_PATTERNS; i++)
                ck_assert_int_eq(options_add_pattern(&pats, &n, "*.yaml", &err), 0);
        ck_assert_int_eq(options_add_pattern(&pats, &n, "*.yaml", &err), -EINVAL);
        ck_assert_str_eq(err.data, "--static-pod-file-pattern: at most 64 patterns");
        ck_assert_uint_eq(n, OPTIONS_MAX_PATTERNS);
        for (size_t i = 0; i < n; i++)
                free(pats[i]);
        free(pats);
        pats = NULL;
        n = 0;
        memset(at_len, 'x', sizeof(at_len));
        at_len[OPTIONS_MAX_PATTERN_LEN] = '\0';
        ck_assert_int_eq(options_add_pattern(&pats, &n, at_len, &err), 0);
        at_len[OPTIONS_MAX_PATTERN_LEN] = 'x';
        at_len[OPTIONS_MAX_PATTERN_LEN + 1] = '\0';
        ck_assert_int_eq(options_add_pattern(&pats, &n, at_len, &err), -EINVAL);
        ck_assert_str_eq(err.data, "--static-pod-file-pattern: longer than 255 bytes");
        ck_assert_int_eq(options_add_pattern(&pats, &n, "", &err), -EINVAL);
        ck_assert_str_eq(err.data, "--static-pod-file-pattern: must not be empty");
        ck_assert_int_eq(options_add_pattern(&pats, &n, "m/*.yaml", &err), -EINVAL);
        ck_assert_str_eq(
                err.data,
                "--static-pod-file-pattern \"m/*.yaml\": it is matched against a file's name, which holds no '/'");
        ck_assert_uint_eq(n, 1);
        if (failalloc_enabled()) {
                long before = failalloc_live();

                for (long k = 1;; k++) {
                        bool failed;
                        int r;

                        failalloc_arm(k);
                        r = options_add_pattern(&pats, &n, "*.yml", &err);
                        failed = failalloc_failed();
                        failalloc_arm(0);
                        if (!failed) {
                                ck_assert_int_eq(r, 0);
                                break;
                        }
                        ck_assert_int_eq(r, -ENOMEM);
                        ck_assert_uint_eq(n, 1);
                        ck_assert_int_eq(failalloc_live(), before);
                }
        }
        for (size_t i = 0; i < n; i++)
                free(pats[i]);
        free(pats);
        buf_free(&err);
}
END_TEST

UNIT_MAIN(test_log_format_names, test_file_patterns, test_defaults, test_flags_parsed, test_bad_flags_name_the_flag,
          test_bad_flag_reasons, test_bad_flag_out_of_memory, test_kubelet_config_file_and_flag_precedence,
          test_bad_config_files, test_help_documents_every_flag_with_default, test_metrics_address,
          test_config_null_and_wrong_types, test_conflicting_pairs, test_conflict_with_config_path,
          test_empty_source_flags_turn_the_source_off, test_default_plugin_registry_rule,
          test_hostname_override_as_the_kubelet_takes_it, test_relative_static_pod_paths, test_config_unknown_fields,
          test_parse_out_of_memory, test_event_flags, test_event_config_fields, test_checkpoint_flags,
          test_file_patterns, test_kube_api_flags, test_kube_api_address_auth)
