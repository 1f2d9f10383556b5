/* plugin_handlers — CSI, device and DRA plugin handlers (see
 * src/plugins/plugin_handlers.h). */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/plugin_handlers.h"
#include "util/strmap.h"
#include "plugins/version.h"

struct plugin_handlers {
        struct strmap *csi;    /* name -> its highest version as reported (char*) */
        struct strmap *dra;    /* "name\nendpoint" -> (void*)1 */
        struct strmap *device; /* "name\nendpoint" -> (void*)1 */
};

int plugin_handlers_new(struct plugin_handlers **ret_h)
{
        struct plugin_handlers *h = calloc(1, sizeof(*h));

        if (!h)
                return -ENOMEM;
        h->csi = strmap_new();
        h->dra = strmap_new();
        h->device = strmap_new();
        if (!h->csi || !h->dra || !h->device) {
                plugin_handlers_free(h);
                return -ENOMEM;
        }
        *ret_h = h;
        return 0;
}

void plugin_handlers_free(struct plugin_handlers *h)
{
        if (!h)
                return;
        strmap_free(h->csi, free);
        strmap_free(h->dra, NULL);
        strmap_free(h->device, NULL);
        free(h);
}

int plugin_handlers_has(const struct plugin_handlers *h, const char *type)
{
        return type && (strcmp(type, PLUGIN_TYPE_CSI) == 0 || strcmp(type, PLUGIN_TYPE_DEVICE) == 0 ||
                        strcmp(type, PLUGIN_TYPE_DRA) == 0);
}

int plugin_parse_version(const char *s, unsigned long ret[3])
{
        struct version v;

        if (version_parse_generic(s, &v, NULL) < 0)
                return -EINVAL;
        for (size_t i = 0; i < 3; i++)
                ret[i] = (unsigned long)version_component(&v, i);
        return 0;
}

/* The highest 1.x version among versions, as the kubelet's
 * HighestSupportedVersion picks it; *ret points into versions[*ret_i]. */
static int csi_highest(char *const *versions, size_t n, struct version *ret, size_t *ret_i, struct buf *err)
{
        if (n == 0)
                return buf_set_err(err, -EINVAL, "CSI plugin reports no supported versions");
        if (version_highest_supported(versions, n, ret, ret_i, NULL) < 0)
                return buf_set_err(err, -EINVAL,
                                   "none of the CSI versions reported by the plugin are supported (need 1.x)");
        return 0;
}

static int dns_label_char(char c)
{
        return islower((unsigned char)c) || isdigit((unsigned char)c) || c == '-';
}

/* A domain-qualified extended resource name, not in kubernetes.io, not
 * starting with "requests.": the kubelet checks "requests." + name as a
 * qualified name, so the domain is a DNS-1123 subdomain of at most 244
 * characters (253 with the prefix): dot-separated labels of [a-z0-9-]
 * starting and ending with a letter or digit, with no length limit of
 * their own (the subdomain check is a pattern and a total length, not a
 * label-by-label check); and the name part is at most 63 characters of
 * [A-Za-z0-9_.-] starting and ending with a letter or digit. */
static int valid_extended_resource(const char *name)
{
        const char *slash = strchr(name, '/'), *label;
        size_t plen, nlen;

        if (!slash || strstr(name, "kubernetes.io/") || strncmp(name, "requests.", 9) == 0)
                return 0;
        plen = (size_t)(slash - name);
        nlen = strlen(slash + 1);
        if (plen == 0 || plen > 253 - 9 || nlen == 0 || nlen > 63)
                return 0;
        label = name;
        for (size_t i = 0; i <= plen; i++) {
                if (i == plen || name[i] == '.') {
                        size_t llen = (size_t)(name + i - label);

                        if (llen == 0 || !isalnum((unsigned char)label[0]) ||
                            !isalnum((unsigned char)name[i - 1]))
                                return 0;
                        label = name + i + 1;
                } else if (!dns_label_char(name[i])) {
                        return 0;
                }
        }
        for (const char *p = slash + 1; *p; p++)
                if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.')
                        return 0;
        if (!isalnum((unsigned char)slash[1]) || !isalnum((unsigned char)slash[nlen]))
                return 0;
        return 1;
}

static int has_version(char *const *versions, size_t n, const char *want)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(versions[i], want) == 0)
                        return 1;
        return 0;
}

static char *pair_key(const char *name, const char *endpoint)
{
        struct buf b = BUF_INIT;

        if (buf_printf(&b, "%s\n%s", name, endpoint) < 0)
                return NULL;
        return buf_steal(&b, NULL);
}

int plugin_handlers_validate(struct plugin_handlers *h, const char *type, const char *name,
                             const char *endpoint, char *const *versions, size_t n,
                             struct buf *err)
{
        if (!name || !name[0])
                return buf_set_err(err, -EINVAL, "the plugin reports no name");
        if (strcmp(type, PLUGIN_TYPE_CSI) == 0) {
                struct version hi, cur;
                const char *had;
                size_t i;
                int r;

                r = csi_highest(versions, n, &hi, &i, err);
                if (r < 0)
                        return r;
                had = strmap_get(h->csi, name);
                /* Stored only after it parsed. */
                if (had && version_parse_generic(had, &cur, NULL) == 0 && version_compare(&cur, &hi) >= 0) {
                        struct buf vc = BUF_INIT, vh = BUF_INIT;

                        r = version_format(&cur, &vc) < 0 || version_format(&hi, &vh) < 0 ? -ENOMEM : 0;
                        if (r == 0)
                                r = buf_set_err(err, -EINVAL,
                                                "CSI driver \"%s\" is already registered with version %s, "
                                                "which is not lower than %s",
                                                name, vc.data, vh.data);
                        else if (err)
                                buf_reset(err);
                        buf_free(&vc);
                        buf_free(&vh);
                        return r;
                }
                return 0;
        }
        if (strcmp(type, PLUGIN_TYPE_DEVICE) == 0) {
                if (!has_version(versions, n, "v1beta1"))
                        return buf_set_err(err, -EINVAL, "device plugin does not support version v1beta1");
                if (!valid_extended_resource(name))
                        return buf_set_err(err, -EINVAL,
                                           "invalid extended resource name \"%s\" (want a domain-qualified name "
                                           "like vendor.example/gpu, outside kubernetes.io)",
                                           name);
                return 0;
        }
        if (strcmp(type, PLUGIN_TYPE_DRA) == 0) {
                if (n == 0)
                        return buf_set_err(err, -EINVAL, "DRA plugin reports no supported services");
                if (!has_version(versions, n, "v1.DRAPlugin") && !has_version(versions, n, "v1beta1.DRAPlugin"))
                        return buf_set_err(err, -EINVAL,
                                           "DRA plugin supports none of the services v1.DRAPlugin, v1beta1.DRAPlugin");
                (void)endpoint;
                return 0;
        }
        return buf_set_err(err, -EINVAL, "no handler for plugin type \"%s\"", type);
}

int plugin_handlers_register(struct plugin_handlers *h, const char *type, const char *name,
                             const char *endpoint, char *const *versions, size_t n,
                             struct buf *err)
{
        int r;

        if (strcmp(type, PLUGIN_TYPE_CSI) == 0) {
                struct version hi;
                char *v, *old = NULL;
                size_t i;

                r = csi_highest(versions, n, &hi, &i, err);
                if (r < 0)
                        return r;
                v = strdup(versions[i]);
                if (!v)
                        goto nomem;
                if (strmap_put(h->csi, name, v, (void **)&old) < 0) {
                        free(v);
                        goto nomem;
                }
                free(old);
                return 0;
        }
        if (strcmp(type, PLUGIN_TYPE_DRA) == 0 || strcmp(type, PLUGIN_TYPE_DEVICE) == 0) {
                struct strmap *m = strcmp(type, PLUGIN_TYPE_DRA) == 0 ? h->dra : h->device;
                char *k = pair_key(name, endpoint);

                if (!k)
                        goto nomem;
                if (m == h->dra && strmap_get(m, k)) {
                        free(k);
                        return buf_set_err(err, -EEXIST, "DRA driver \"%s\" already has endpoint \"%s\" registered",
                                           name, endpoint);
                }
                r = strmap_put(m, k, (void *)1, NULL);
                free(k);
                if (r < 0)
                        goto nomem;
                return 0;
        }
        return buf_set_err(err, -EINVAL, "no handler for plugin type \"%s\"", type);
nomem:
        if (err)
                buf_reset(err);
        return -ENOMEM;
}

void plugin_handlers_deregister(struct plugin_handlers *h, const char *type, const char *name,
                                const char *endpoint)
{
        if (strcmp(type, PLUGIN_TYPE_CSI) == 0) {
                free(strmap_remove(h->csi, name));
        } else if (strcmp(type, PLUGIN_TYPE_DRA) == 0 || strcmp(type, PLUGIN_TYPE_DEVICE) == 0) {
                char *k = pair_key(name, endpoint);

                if (k)
                        strmap_remove(strcmp(type, PLUGIN_TYPE_DRA) == 0 ? h->dra : h->device, k);
                free(k);
        }
}
