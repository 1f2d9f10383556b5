/*
 * client_informer — see client_informer.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/keymap.h"

#include "client_cache.h"
#include "client_informer.h"
#include "client_msg.h"

struct seen_ent {
        struct podmux_pod *pod; /* a reference */
        char key[];             /* source "/" uid */
};

static const char *seen_key(const void *item)
{
        return ((const struct seen_ent *)item)->key;
}

static void seen_ent_free(void *item)
{
        struct seen_ent *e = item;

        client_pod_unref(e->pod);
        free(e);
}

void informer_free(struct informer *inf)
{
        keymap_free(inf->seen, seen_ent_free);
        free(inf->hs);
        memset(inf, 0, sizeof(*inf));
}

/* "source/uid" into a new entry holding a reference to p, or NULL. */
static struct seen_ent *ent_new(struct podmux_pod *p)
{
        struct seen_ent *e = malloc(sizeof(*e) + client_pod_id_size(p));

        if (!e)
                return NULL;
        client_pod_id_write(p, e->key);
        e->pod = client_pod_ref(p);
        return e;
}

/* The entry of p's source and UID (*ret NULL if none).  0 or -ENOMEM. */
static int seen_get(const struct informer *inf, const struct podmux_pod *p, struct seen_ent **ret)
{
        void *e;
        int r = client_pod_id_get(inf->seen, p, &e);

        *ret = e;
        return r;
}

static bool stopping(const struct informer *inf)
{
        return inf->stop && *inf->stop;
}

static void call_add(struct podmux_client *c, struct informer *inf, const struct podmux_pod *p, bool initial)
{
        for (size_t i = 0; i < inf->n_hs && !stopping(inf); i++)
                if (inf->hs[i].h.on_add)
                        inf->hs[i].h.on_add(c, p, initial, inf->hs[i].data);
}

static void call_update(struct podmux_client *c, struct informer *inf, const struct podmux_pod *old,
                        const struct podmux_pod *new_)
{
        for (size_t i = 0; i < inf->n_hs && !stopping(inf); i++)
                if (inf->hs[i].h.on_update)
                        inf->hs[i].h.on_update(c, old, new_, inf->hs[i].data);
}

static void call_delete(struct podmux_client *c, struct informer *inf, const struct podmux_pod *old)
{
        for (size_t i = 0; i < inf->n_hs && !stopping(inf); i++)
                if (inf->hs[i].h.on_delete)
                        inf->hs[i].h.on_delete(c, old, inf->hs[i].data);
}

/* p is the pod now: an OnAdd or an OnUpdate(old, p) (quiet: none when
 * the same by the resync rule).  When the map cannot take it, nothing is
 * called and the map is stale. */
static void upsert(struct podmux_client *c, struct informer *inf, struct podmux_pod *p, bool quiet)
{
        struct seen_ent *e = NULL, *n;
        void *old = NULL;
        int same = 0;

        if (quiet && seen_get(inf, p, &e) < 0)
                goto stale;
        if (e) {
                same = client_pod_text_same(e->pod->json, e->pod->len, p->json, p->len);
                if (same < 0)
                        goto stale; /* -ENOMEM: the texts were checked when they came */
        }
        n = ent_new(p);
        if (!n || keymap_put(inf->seen, n, &old) < 0) {
                if (n)
                        seen_ent_free(n);
                goto stale;
        }
        if (!old)
                call_add(c, inf, p, false);
        else if (!same)
                call_update(c, inf, ((struct seen_ent *)old)->pod, p);
        if (old)
                seen_ent_free(old);
        return;
stale:
        inf->stale = true;
}

static void drop(struct podmux_client *c, struct informer *inf, const struct podmux_pod *p)
{
        struct seen_ent *e;

        if (seen_get(inf, p, &e) < 0) {
                inf->stale = true;
                return;
        }
        if (!e)
                return;
        (void)keymap_remove(inf->seen, e->key);
        call_delete(c, inf, e->pod);
        seen_ent_free(e);
}

static int cmp_pods(const void *a, const void *b)
{
        return client_pod_compare(*(struct podmux_pod *const *)a, *(struct podmux_pod *const *)b);
}

/* Brings the map to exactly pods[0..n): OnDelete for the pods it lacks
 * (in the cache's order), then OnAdd or OnUpdate for each of pods in
 * order (nothing for one the same by the resync rule: the map takes its
 * text).  -ENOMEM: nothing done. */
static int diff_to(struct podmux_client *c, struct informer *inf, struct podmux_pod *const *pods, size_t n)
{
        struct keymap *now = keymap_new(seen_key);
        struct seen_ent **ents = calloc(n + 1, sizeof(*ents));
        struct podmux_pod **gone = calloc(keymap_size(inf->seen) + 1, sizeof(*gone));
        size_t n_gone = 0, it = 0;
        void *item;
        int r = -ENOMEM;

        if (!now || !ents || !gone || keymap_reserve(now, n) < 0)
                goto out;
        /* From the last: of two pods of one source and UID (a malformed
         * SET) the later wins, as in the cache, and is handed on once. */
        for (size_t i = n; i-- > 0;) {
                ents[i] = ent_new(pods[i]);
                if (!ents[i])
                        goto out;
                if (keymap_get(now, ents[i]->key)) {
                        seen_ent_free(ents[i]);
                        ents[i] = NULL;
                        continue;
                }
                if (keymap_put(now, ents[i], NULL) < 0) { /* reserved: cannot fail */
                        seen_ent_free(ents[i]);
                        goto out;
                }
        }
        while (keymap_next(inf->seen, &it, &item))
                if (!keymap_get(now, ((struct seen_ent *)item)->key))
                        gone[n_gone++] = ((struct seen_ent *)item)->pod;
        qsort(gone, n_gone, sizeof(*gone), cmp_pods);
        if (keymap_reserve(inf->seen, n) < 0)
                goto out;
        inf->stale = false; /* an upsert that cannot allocate sets it again */
        for (size_t i = 0; i < n_gone; i++)
                drop(c, inf, gone[i]); /* gone[i] stays valid: drop() calls before it frees */
        for (size_t i = 0; i < n; i++)
                if (ents[i])
                        upsert(c, inf, pods[i], true);
        r = 0;
out:
        keymap_free(now, seen_ent_free);
        free(ents);
        free(gone);
        return r;
}

void informer_record(struct podmux_client *c, struct informer *inf, enum podmux_op op,
                     struct podmux_pod *const *pods, size_t n)
{
        if (!inf->seen)
                return;
        if (op == PODMUX_OP_SET) {
                if (diff_to(c, inf, pods, n) < 0)
                        inf->stale = true;
                return;
        }
        for (size_t i = 0; i < n; i++) {
                if (op == PODMUX_OP_REMOVE)
                        drop(c, inf, pods[i]);
                else
                        upsert(c, inf, pods[i], false);
        }
}

void informer_fix(struct podmux_client *c, struct informer *inf, struct podmux_pod *const *pods, size_t n)
{
        if (inf->seen && inf->stale)
                (void)diff_to(c, inf, pods, n);
}

int informer_add(struct podmux_client *c, struct informer *inf, const struct podmux_handler *h, void *data,
                 struct podmux_pod *const *pods, size_t n)
{
        struct informer_handler *hs = realloc(inf->hs, (inf->n_hs + 1) * sizeof(*hs));

        if (!hs)
                return -ENOMEM;
        inf->hs = hs;
        if (!inf->seen) {
                inf->seen = keymap_new(seen_key);
                if (!inf->seen)
                        return -ENOMEM;
                for (size_t i = 0; i < n; i++) {
                        struct seen_ent *e = ent_new(pods[i]);

                        if (!e || keymap_put(inf->seen, e, NULL) < 0) {
                                if (e)
                                        seen_ent_free(e);
                                keymap_free(inf->seen, seen_ent_free);
                                inf->seen = NULL;
                                return -ENOMEM;
                        }
                }
        }
        hs[inf->n_hs].h = *h;
        hs[inf->n_hs].data = data;
        inf->n_hs++;
        if (!h->on_add)
                return 0;
        /* The initial ADDs, in the cache's order. */
        for (size_t i = 0; i < n; i++) {
                struct seen_ent *e = NULL;

                if (seen_get(inf, pods[i], &e) == 0 && e && !stopping(inf))
                        h->on_add(c, e->pod, true, data);
        }
        return 0;
}
