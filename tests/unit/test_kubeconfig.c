/* Unit tests: kubeconfig loading and in-cluster settings. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kube/kubeconfig.h"
#include "unit.h"

static char dir[64];

static const char *write_in(const char *name, const char *text)
{
        static char path[256];
        FILE *f;

        if (!dir[0]) {
                strcpy(dir, "/tmp/podmux-kc-XXXXXX");
                ck_assert_ptr_nonnull(mkdtemp(dir));
        }
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fputs(text, f);
        fclose(f);
        return path;
}

#define HEAD "apiVersion: v1\nkind: Config\ncurrent-context: c\n" \
             "contexts: [{name: c, context: {cluster: k, user: u}}]\n"

START_TEST(test_paths_data_and_context)
{
        struct kube_config c;
        struct buf err = BUF_INIT;
        const char *p = write_in("config",
                                 HEAD "clusters: [{name: k, cluster: {server: 'api.example:6443/', "
                                 "certificate-authority: certs/ca.pem, tls-server-name: kube}}]\n"
                                 "users: [{name: u, user: {client-certificate-data: aGVsbG8=, "
                                 "client-key: /abs/key.pem, tokenFile: tok}}]\n");

        ck_assert_msg(kubeconfig_load(p, NULL, &c, &err) == 0, "%s", err.data);
        ck_assert_str_eq(c.server, "https://api.example:6443");
        ck_assert_ptr_nonnull(strstr(c.ca_file, "/certs/ca.pem"));
        ck_assert_msg(strncmp(c.ca_file, dir, strlen(dir)) == 0, "relative to the file: %s", c.ca_file);
        ck_assert_str_eq(c.cert_data.data, "hello");
        ck_assert_str_eq(c.key_file, "/abs/key.pem");
        ck_assert_ptr_nonnull(strstr(c.token_file, "/tok"));
        ck_assert_str_eq(c.tls_server_name, "kube");
        ck_assert_str_eq(c.context, "c");
        ck_assert(!c.insecure);
        kube_config_free(&c);
        buf_free(&err);
}
END_TEST

START_TEST(test_errors_name_the_field)
{
        static const struct {
                const char *text, *needle;
        } bad[] = {
                {"apiVersion: v1\nkind: Config\n", "current-context"},
                {"current-context: x\ncontexts: []\n", "context \"x\""},
                {HEAD "clusters: []\nusers: [{name: u, user: {}}]\n", "cluster \"k\""},
                {HEAD "clusters: [{name: k, cluster: {server: s}}]\nusers: []\n", "user \"u\""},
                {HEAD "clusters: [{name: k, cluster: {}}]\nusers: [{name: u, user: {}}]\n", "server"},
                {HEAD "clusters: [{name: k, cluster: {server: s, certificate-authority: a, "
                      "insecure-skip-tls-verify: true}}]\nusers: [{name: u, user: {}}]\n",
                 "insecure-skip-tls-verify"},
                {HEAD "clusters: [{name: k, cluster: {server: s}}]\n"
                      "users: [{name: u, user: {client-certificate: c.pem}}]\n",
                 "client-key"},
                {HEAD "clusters: [{name: k, cluster: {server: s}}]\n"
                      "users: [{name: u, user: {exec: {command: x}}}]\n",
                 "exec"},
                {HEAD "clusters: [{name: k, cluster: {server: s}}]\n"
                      "users: [{name: u, user: {username: a, password: b}}]\n",
                 "username"},
                {HEAD "clusters: [{name: k, cluster: {server: s, certificate-authority: a, "
                      "certificate-authority-data: aGVsbG8=}}]\nusers: [{name: u, user: {}}]\n",
                 "both"},
                {HEAD "clusters: [{name: k, cluster: {server: s, certificate-authority-data: '@@@@'}}]\n"
                      "users: [{name: u, user: {}}]\n",
                 "base64"},
        };
        struct buf err = BUF_INIT;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct kube_config c;
                const char *p = write_in("bad", bad[i].text);

                buf_reset(&err);
                ck_assert_msg(kubeconfig_load(p, NULL, &c, &err) < 0, "case %zu accepted", i);
                ck_assert_msg(strstr(err.data, bad[i].needle) && strstr(err.data, p),
                              "case %zu: message \"%s\" lacks \"%s\" or the file", i, err.data,
                              bad[i].needle);
        }
        {
                struct kube_config c;

                buf_reset(&err);
                ck_assert_int_lt(kubeconfig_load("/nonexistent/kubeconfig", NULL, &c, &err), 0);
                ck_assert_ptr_nonnull(strstr(err.data, "/nonexistent/kubeconfig"));
        }
        buf_free(&err);
}
END_TEST

START_TEST(test_token_never_in_messages)
{
        struct kube_config c;
        struct buf err = BUF_INIT;
        const char *p = write_in("tok",
                                 HEAD "clusters: [{name: k, cluster: {server: s}}]\n"
                                 "users: [{name: u, user: {token: SUPERSECRET, exec: {}}}]\n");

        ck_assert_int_lt(kubeconfig_load(p, NULL, &c, &err), 0);
        ck_assert_ptr_null(strstr(err.data, "SUPERSECRET"));
        buf_free(&err);
}
END_TEST

START_TEST(test_in_cluster)
{
        struct kube_config c;
        struct buf err = BUF_INIT;
        char sa[128];

        write_in("token", "abc\n");
        snprintf(sa, sizeof(sa), "%s", dir);
        unsetenv("KUBERNETES_SERVICE_HOST");
        ck_assert_int_eq(kubeconfig_in_cluster(sa, &c, &err), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err.data, "KUBERNETES_SERVICE_HOST"));
        setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
        setenv("KUBERNETES_SERVICE_PORT", "443", 1);
        buf_reset(&err);
        ck_assert_msg(kubeconfig_in_cluster(sa, &c, &err) == 0, "%s", err.data);
        ck_assert_str_eq(c.server, "https://[fd00::1]:443");
        ck_assert_ptr_nonnull(strstr(c.token_file, "/token"));
        ck_assert_ptr_null(c.ca_file); /* no ca.crt: system roots */
        kube_config_free(&c);
        buf_free(&err);
}
END_TEST

/* Found by tests/fuzz/fuzz_kubeconfig: "https://" lost its slashes to the
 * trailing-'/' trim and came out as the server "https:"; a server without
 * a host is refused, as client-go refuses it. */
START_TEST(test_server_without_host)
{
        static const char *const servers[] = {"'https://'", "'https:///'", "'http://?x'", "':///'",
                                              "'https://#'"};
        struct buf err = BUF_INIT;

        for (size_t i = 0; i < sizeof(servers) / sizeof(servers[0]); i++) {
                char text[256];
                struct kube_config c;
                const char *p;

                snprintf(text, sizeof(text), HEAD "clusters: [{name: k, cluster: {server: %s}}]\n"
                                                  "users: [{name: u, user: {}}]\n",
                         servers[i]);
                p = write_in("nohost", text);
                buf_reset(&err);
                ck_assert_msg(kubeconfig_load(p, NULL, &c, &err) == -EINVAL, "server %s accepted", servers[i]);
                ck_assert_msg(strstr(err.data, "has no host"), "server %s: message \"%s\"",
                              servers[i], err.data);
        }
        buf_free(&err);
}
END_TEST

UNIT_MAIN(test_paths_data_and_context, test_errors_name_the_field, test_server_without_host,
          test_token_never_in_messages, test_in_cluster)
