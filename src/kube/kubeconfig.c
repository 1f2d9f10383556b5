/*
 * kubeconfig — kubeconfig and in-cluster settings (see
 * src/kube/kubeconfig.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "util/base64.h"
#include "util/file.h"
#include "util/json_get.h"
#include "kube/kubeconfig.h"
#include "util/log.h"
#include "util/yaml_json.h"

void kube_config_free(struct kube_config *c)
{
        if (!c)
                return;
        free(c->server);
        free(c->ca_file);
        free(c->ca_data.data);
        free(c->cert_file);
        free(c->cert_data.data);
        free(c->key_file);
        if (c->key_data.data) /* key material: wipe before freeing */
                memset(c->key_data.data, 0, c->key_data.len);
        free(c->key_data.data);
        if (c->token)
                memset(c->token, 0, strlen(c->token));
        free(c->token);
        free(c->token_file);
        free(c->tls_server_name);
        free(c->context);
        memset(c, 0, sizeof(*c));
}

/* ---- helpers over the decoded YAML ------------------------------------------------ */

static const char *string_member(json_object *o, const char *key)
{
        json_object *v = json_get(o, key);

        if (v && json_object_is_type(v, json_type_string) && json_object_get_string_len(v))
                return json_object_get_string(v);
        return NULL;
}

/* The entry named name in a kubeconfig list (clusters/users/contexts). */
static json_object *named_entry(json_object *root, const char *list, const char *item,
                                const char *name)
{
        json_object *arr = json_get(root, list);
        size_t n = arr && json_object_is_type(arr, json_type_array) ? json_object_array_length(arr) : 0;

        for (size_t i = 0; i < n; i++) {
                json_object *e = json_object_array_get_idx(arr, i);
                const char *en = string_member(e, "name");

                if (en && strcmp(en, name) == 0)
                        return json_get(e, item);
        }
        return NULL;
}

static char *resolve_path(const char *dir, const char *p)
{
        struct buf b = BUF_INIT;

        if (p[0] == '/' || !dir)
                return strdup(p);
        if (buf_printf(&b, "%s/%s", dir, p) < 0)
                return NULL;
        return buf_steal(&b, NULL);
}

static int set_dup(char **slot, const char *v)
{
        if (!v)
                return 0;
        *slot = strdup(v);
        return *slot ? 0 : -ENOMEM;
}

/* Reads one of the pairs "<field>" (a path) and "<field>-data" (base64). */
static int load_pair(json_object *o, const char *field, const char *dir, const char *where,
                     char **ret_file, struct kube_blob *ret_data, struct buf *err)
{
        char data_key[64];
        const char *file = string_member(o, field), *data;

        snprintf(data_key, sizeof(data_key), "%s-data", field);
        data = string_member(o, data_key);
        if (file && data) {
                return buf_set_err(err, -EINVAL, "%s: both %s and %s are set (use one)", where, field, data_key);
        }
        if (data) {
                int r = base64_decode(data, strlen(data), &ret_data->data, &ret_data->len);

                if (r == -EINVAL)
                        r = buf_set_err(err, -EINVAL, "%s: %s is not valid base64", where, data_key);
                return r;
        }
        if (file) {
                *ret_file = resolve_path(dir, file);
                return *ret_file ? 0 : -ENOMEM;
        }
        return 0;
}

static int normalize_server(const char *server, char **ret)
{
        struct buf b = BUF_INIT;
        size_t n = strlen(server);

        while (n > 0 && server[n - 1] == '/')
                n--;
        if (!strstr(server, "://") && buf_puts(&b, "https://") < 0)
                return -ENOMEM;
        if (buf_append(&b, server, n) < 0)
                return -ENOMEM;
        *ret = buf_steal(&b, NULL);
        return *ret ? 0 : -ENOMEM;
}

static const char *const unsupported_user_fields[] = {
        "exec", "auth-provider", "username", "password", "as", "as-groups", "as-uid",
        "as-user-extra",
};

/* What a context names: the context's own name, its cluster, its user.
 * The strings and objects live in the decoded file. */
struct picked {
        const char *ctx_name, *cluster_name, *user_name;
        json_object *cluster, *user; /* user: NULL when the context has none */
};

/* Finds the context (context, else current-context), its cluster and its
 * user in root.  0 and *ret, or -EINVAL with err set. */
static int pick_context(json_object *root, const char *path, const char *context, struct picked *ret, struct buf *err)
{
        struct picked p = {0};
        json_object *ctx;

        p.ctx_name = context ? context : string_member(root, "current-context");
        if (!p.ctx_name)
                return buf_set_err(err, -EINVAL, "kubeconfig \"%s\": current-context is not set", path);
        ctx = named_entry(root, "contexts", "context", p.ctx_name);
        if (!ctx)
                return buf_set_err(err, -EINVAL, "kubeconfig \"%s\": context \"%s\" not found in contexts", path,
                                   p.ctx_name);
        p.cluster_name = string_member(ctx, "cluster");
        if (!p.cluster_name)
                return buf_set_err(err, -EINVAL, "kubeconfig \"%s\": context \"%s\" has no cluster", path, p.ctx_name);
        p.cluster = named_entry(root, "clusters", "cluster", p.cluster_name);
        if (!p.cluster)
                return buf_set_err(err, -EINVAL,
                                   "kubeconfig \"%s\": cluster \"%s\" (of context \"%s\") not found in clusters", path,
                                   p.cluster_name, p.ctx_name);
        p.user_name = string_member(ctx, "user");
        if (p.user_name) {
                p.user = named_entry(root, "users", "user", p.user_name);
                if (!p.user)
                        return buf_set_err(err, -EINVAL,
                                           "kubeconfig \"%s\": user \"%s\" (of context \"%s\") not found in users",
                                           path, p.user_name, p.ctx_name);
        }
        *ret = p;
        return 0;
}

/* Fills c's server, context, certificate authority, insecure flag and TLS
 * server name from the picked cluster; where is scratch for the message
 * prefix.  0, or -errno with err set (perhaps not for -ENOMEM). */
static int load_cluster(const struct picked *p, const char *path, const char *dir, struct kube_config *c,
                        struct buf *where, struct buf *err)
{
        const char *s, *host;
        json_object *v;
        int r;

        s = string_member(p->cluster, "server");
        if (!s)
                return buf_set_err(err, -EINVAL, "kubeconfig \"%s\": cluster \"%s\": server is not set", path,
                                   p->cluster_name);
        if ((r = normalize_server(s, &c->server)) < 0 || (r = set_dup(&c->context, p->ctx_name)) < 0)
                return r;
        /* client-go refuses a server without a host ("https://", ":///"):
         * it is not a URL libcurl could reach either. */
        host = strstr(c->server, "://");
        if (!host || !host[3] || strchr("/?#", host[3]))
                return buf_set_err(err, -EINVAL, "kubeconfig \"%s\": cluster \"%s\": server \"%s\" has no host", path,
                                   p->cluster_name, s);
        if (string_member(p->cluster, "proxy-url"))
                return buf_set_err(err, -EINVAL, "kubeconfig \"%s\": cluster \"%s\": proxy-url is not supported", path,
                                   p->cluster_name);
        if (buf_printf(where, "kubeconfig \"%s\": cluster \"%s\"", path, p->cluster_name) < 0)
                return -ENOMEM;
        if ((r = load_pair(p->cluster, "certificate-authority", dir, where->data, &c->ca_file, &c->ca_data, err)) < 0)
                return r;
        v = json_get(p->cluster, "insecure-skip-tls-verify");
        c->insecure = v && json_object_is_type(v, json_type_boolean) && json_object_get_boolean(v);
        if (c->insecure && (c->ca_file || c->ca_data.data))
                return buf_set_err(err, -EINVAL,
                                   "%s: certificate-authority and insecure-skip-tls-verify are both set "
                                   "(a root certificate with the insecure flag is not allowed)",
                                   where->data);
        return set_dup(&c->tls_server_name, string_member(p->cluster, "tls-server-name"));
}

/* Fills c's client certificate and key, token and token file from the
 * picked user (which is set); where is scratch for the message prefix.
 * 0, or -errno with err set (perhaps not for -ENOMEM). */
static int load_user(const struct picked *p, const char *path, const char *dir, struct kube_config *c,
                     struct buf *where, struct buf *err)
{
        const char *s;
        int r;

        buf_reset(where);
        if (buf_printf(where, "kubeconfig \"%s\": user \"%s\"", path, p->user_name) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < sizeof(unsupported_user_fields) / sizeof(*unsupported_user_fields); i++) {
                if (json_get(p->user, unsupported_user_fields[i]))
                        return buf_set_err(
                                err, -EINVAL,
                                "%s: %s is not supported (use a token, a token file or a client certificate)",
                                where->data, unsupported_user_fields[i]);
        }
        if ((r = load_pair(p->user, "client-certificate", dir, where->data, &c->cert_file, &c->cert_data, err)) < 0 ||
            (r = load_pair(p->user, "client-key", dir, where->data, &c->key_file, &c->key_data, err)) < 0)
                return r;
        if ((c->cert_file || c->cert_data.data) != (c->key_file || c->key_data.data))
                return buf_set_err(err, -EINVAL, "%s: %s is set without %s", where->data,
                                   c->cert_file || c->cert_data.data ? "client-certificate" : "client-key",
                                   c->cert_file || c->cert_data.data ? "client-key" : "client-certificate");
        if ((r = set_dup(&c->token, string_member(p->user, "token"))) < 0)
                return r;
        s = string_member(p->user, "tokenFile");
        if (s && !(c->token_file = resolve_path(dir, s)))
                return -ENOMEM;
        return 0;
}

int kubeconfig_load(const char *path, const char *context, struct kube_config *ret_cfg,
                    struct buf *err)
{
        struct kube_config c;
        struct buf e = BUF_INIT, where = BUF_INIT;
        struct picked p = {0};
        json_object *root = NULL;
        char *data = NULL, *dir = NULL;
        const char *slash;
        size_t len = 0;
        int r;

        memset(&c, 0, sizeof(c));
        r = file_read(path, KUBECONFIG_MAX_BYTES, &data, &len, &e);
        if (r == 0)
                r = yaml_to_json(data, len, &root, &e);
        if (r == 0 && !json_object_is_type(root, json_type_object))
                r = buf_set_err(&e, -EINVAL, "not a mapping");
        if (r == -ENOMEM)
                goto out;
        if (r < 0) {
                r = buf_set_err(err, r, "kubeconfig \"%s\": %s", path, e.len ? e.data : "unreadable");
                goto out;
        }
        /* Relative paths in the file are relative to its folder. */
        slash = strrchr(path, '/');
        dir = !slash ? strdup(".") : slash == path ? strdup("/") : strndup(path, (size_t)(slash - path));
        if (!dir) {
                r = -ENOMEM;
                goto out;
        }
        if ((r = pick_context(root, path, context, &p, err)) < 0 ||
            (r = load_cluster(&p, path, dir, &c, &where, err)) < 0 ||
            (p.user && (r = load_user(&p, path, dir, &c, &where, err)) < 0))
                goto out;
        *ret_cfg = c;
        memset(&c, 0, sizeof(c));
        r = 0;
out:
        if (r == -ENOMEM && err)
                buf_reset(err); /* no message, and none left from before */
        kube_config_free(&c);
        json_object_put(root);
        if (data)
                memset(data, 0, len); /* may hold a token or a key */
        free(data);
        free(dir);
        buf_free(&e);
        buf_free(&where);
        return r;
}

int kubeconfig_in_cluster(const char *sa_dir, struct kube_config *ret_cfg, struct buf *err)
{
        const char *host = getenv("KUBERNETES_SERVICE_HOST"), *port = getenv("KUBERNETES_SERVICE_PORT");
        struct kube_config c;
        struct buf b = BUF_INIT;
        struct stat st;
        int r = -ENOMEM;

        memset(&c, 0, sizeof(c));
        if (!sa_dir)
                sa_dir = KUBE_SERVICE_ACCOUNT_DIR;
        if (!host || !host[0] || !port || !port[0])
                return buf_set_err(err, -EINVAL,
                                   "--in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set");
        /* An IPv6 host gets brackets. */
        if (buf_printf(&b, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host, port) < 0)
                goto fail;
        c.server = buf_steal(&b, NULL);
        if (buf_printf(&b, "%s/token", sa_dir) < 0)
                goto fail;
        c.token_file = buf_steal(&b, NULL);
        if (buf_printf(&b, "%s/ca.crt", sa_dir) < 0)
                goto fail;
        c.ca_file = buf_steal(&b, NULL);
        c.context = strdup("in-cluster");
        if (!c.server || !c.token_file || !c.ca_file || !c.context)
                goto fail;
        if (stat(c.token_file, &st) < 0) {
                r = buf_set_err(err, -EINVAL, "--in-cluster: service account token \"%s\": %s", c.token_file,
                                ERRNO_STR(errno));
                goto fail;
        }
        /* client-go falls back to the system roots when ca.crt is missing. */
        if (stat(c.ca_file, &st) < 0) {
                free(c.ca_file);
                c.ca_file = NULL;
        }
        *ret_cfg = c;
        return 0;
fail:
        buf_free(&b);
        kube_config_free(&c);
        return r;
}
