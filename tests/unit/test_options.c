/* Unit tests: `podmux run` flags and --config. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "podmux/options.h"
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
                        "--manifest-url-header", "a:3", "--max-consumer-backlog", "4096", NULL};

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
                {"--bogus", NULL, "--bogus"},
        };
        struct buf err = BUF_INIT;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct options o;
                char *argv[] = {"run", (char *)bad[i].flag, (char *)bad[i].value, NULL};

                ck_assert_msg(parse(&o, &err, argv) == -EINVAL, "%s %s accepted", bad[i].flag,
                              bad[i].value);
                ck_assert_msg(err.data && strstr(err.data, bad[i].needle),
                              "%s: message \"%s\" does not name the flag", bad[i].flag, err.data);
        }
        buf_free(&err);
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
                ck_assert_msg(err.data && strstr(err.data, path), "message \"%s\" lacks the file",
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
                if (strcmp(f->name, "hostname-override") == 0)
                        continue; /* an alias, documented with --node-name */
                at = strstr(usage, want);
                ck_assert_msg(at != NULL, "--help does not mention %s", want);
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

START_TEST(test_metrics_address_and_source_conflicts)
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
                        ck_assert_msg(r == 0, "%s: %s", cases[i].value, err.data ? err.data : "");
                        ck_assert_str_eq(o.metrics_address, cases[i].ok);
                        options_free(&o);
                } else {
                        ck_assert_int_eq(r, -EINVAL);
                        ck_assert_ptr_nonnull(strstr(err.data, "--metrics-address"));
                        ck_assert_msg(strstr(err.data, cases[i].why), "%s: %s", cases[i].value, err.data);
                }
        }
        {
                struct options o;
                char *argv[] = {"run", "--node-name", "n1", "--kubeconfig", "/k", "--in-cluster", NULL};

                ck_assert_int_eq(parse(&o, &err, argv), -EINVAL);
                ck_assert_ptr_nonnull(strstr(err.data, "--in-cluster"));
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
                ck_assert_msg(err.data && strstr(err.data, bad[i].want), "config %zu: message \"%s\", want \"%s\"",
                              i, err.data, bad[i].want);
                unlink(path);
                free(path);
        }
        buf_free(&err);
}
END_TEST

UNIT_MAIN(test_defaults, test_flags_parsed, test_bad_flags_name_the_flag,
          test_kubelet_config_file_and_flag_precedence, test_bad_config_files,
          test_help_documents_every_flag_with_default, test_metrics_address_and_source_conflicts,
          test_config_null_and_wrong_types)
