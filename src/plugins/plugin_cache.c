/* plugin_cache — DSW and ASW of the plugin manager (see
 * src/plugins/plugin_cache.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/plugin_cache.h"
#include "util/strmap.h"

struct plugin_cache {
        struct strmap *dsw; /* path -> struct plugin_dsw_entry* */
        struct strmap *asw; /* path -> struct plugin_asw_entry* */
        uint64_t next_generation;
};

static void dsw_free(void *v)
{
        struct plugin_dsw_entry *e = v;

        if (!e)
                return;
        free(e->path);
        free(e);
}

static void asw_free(void *v)
{
        struct plugin_asw_entry *e = v;

        if (!e)
                return;
        free(e->path);
        free(e->type);
        free(e->name);
        free(e->endpoint);
        for (size_t i = 0; i < e->n_versions; i++)
                free(e->versions[i]);
        free(e->versions);
        free(e);
}

int plugin_cache_new(struct plugin_cache **ret_c)
{
        struct plugin_cache *c = calloc(1, sizeof(*c));

        if (!c)
                return -ENOMEM;
        c->dsw = strmap_new();
        c->asw = strmap_new();
        if (!c->dsw || !c->asw) {
                plugin_cache_free(c);
                return -ENOMEM;
        }
        c->next_generation = 1;
        *ret_c = c;
        return 0;
}

void plugin_cache_free(struct plugin_cache *c)
{
        if (!c)
                return;
        strmap_free(c->dsw, dsw_free);
        strmap_free(c->asw, asw_free);
        free(c);
}

int plugin_dsw_add_or_update(struct plugin_cache *c, const char *path, uint64_t wall)
{
        struct plugin_dsw_entry *e, *old = NULL;

        if (!path || !path[0])
                return -EINVAL;
        e = calloc(1, sizeof(*e));
        if (!e || !(e->path = strdup(path))) {
                free(e);
                return -ENOMEM;
        }
        e->generation = c->next_generation++;
        e->timestamp = wall;
        if (strmap_put(c->dsw, path, e, (void **)&old) < 0) {
                dsw_free(e);
                return -ENOMEM;
        }
        dsw_free(old);
        return 0;
}

void plugin_dsw_remove(struct plugin_cache *c, const char *path)
{
        dsw_free(strmap_remove(c->dsw, path));
}

const struct plugin_dsw_entry *plugin_dsw_get(const struct plugin_cache *c, const char *path)
{
        return strmap_get(c->dsw, path);
}

static int cmp_path(const void *a, const void *b)
{
        /* Both entry types start with char *path. */
        return strcmp(**(char *const *const *)a, **(char *const *const *)b);
}

static int list(struct strmap *m, const void ***ret, size_t *ret_n)
{
        size_t n = strmap_size(m), i = 0, it = 0;
        const void **arr = calloc(n ? n : 1, sizeof(*arr));
        void *v;

        if (!arr)
                return -ENOMEM;
        while (strmap_next(m, &it, NULL, &v))
                arr[i++] = v;
        qsort(arr, n, sizeof(*arr), cmp_path);
        *ret = arr;
        *ret_n = n;
        return 0;
}

int plugin_dsw_list(const struct plugin_cache *c, const struct plugin_dsw_entry ***ret, size_t *ret_n)
{
        return list(c->dsw, (const void ***)ret, ret_n);
}

int plugin_asw_add(struct plugin_cache *c, const struct plugin_asw_entry *src)
{
        struct plugin_asw_entry *e, *old = NULL;

        if (!src->path || !src->path[0])
                return -EINVAL;
        e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        e->generation = src->generation;
        e->timestamp = src->timestamp;
        e->path = strdup(src->path);
        e->type = strdup(src->type ? src->type : "");
        e->name = strdup(src->name ? src->name : "");
        e->endpoint = strdup(src->endpoint ? src->endpoint : "");
        e->versions = calloc(src->n_versions ? src->n_versions : 1, sizeof(char *));
        if (!e->path || !e->type || !e->name || !e->endpoint || !e->versions)
                goto nomem;
        for (size_t i = 0; i < src->n_versions; i++) {
                e->versions[i] = strdup(src->versions[i]);
                if (!e->versions[i])
                        goto nomem;
                e->n_versions++;
        }
        if (strmap_put(c->asw, e->path, e, (void **)&old) < 0)
                goto nomem;
        asw_free(old);
        return 0;
nomem:
        asw_free(e);
        return -ENOMEM;
}

void plugin_asw_remove(struct plugin_cache *c, const char *path)
{
        asw_free(strmap_remove(c->asw, path));
}

const struct plugin_asw_entry *plugin_asw_get(const struct plugin_cache *c, const char *path)
{
        return strmap_get(c->asw, path);
}

int plugin_asw_list(const struct plugin_cache *c, const struct plugin_asw_entry ***ret, size_t *ret_n)
{
        return list(c->asw, (const void ***)ret, ret_n);
}

int plugin_asw_same_generation(const struct plugin_cache *c, const struct plugin_dsw_entry *d)
{
        const struct plugin_asw_entry *a = strmap_get(c->asw, d->path);

        return a && a->generation == d->generation;
}
