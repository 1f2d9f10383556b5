/*
 * client_index — see client_index.h.
 *
 * An index is two keymaps: by_id (an entry per pod, by "source/uid") and
 * buckets (a bucket per key, holding a keymap by id of the entries whose
 * keys include it).  An entry may be in several buckets; by_id owns it.
 * A bucket is never empty: the last entry out frees it.  Beside its set,
 * a bucket keeps the same entries in an array in the cache's order
 * (client_pod_compare() of their pods), and their pods in a second array
 * in step with it, so a lookup is one memcpy and sorts nothing; a change pays a binary search and a move within that key's
 * entries, and the room for it is reserved by prepare like the set's.
 *
 * Prepare/commit for a message that is not a SET: prepare makes the new
 * entries (calling the index function), creates the buckets they go into
 * and reserves room in each for its new entries.  Commit then puts every
 * new entry first (replacing or filling reserved room: no allocation)
 * and only after them takes the old entries out (removal never
 * allocates; a keymap it shrinks shrinks after the puts).  A SET builds
 * the whole index aside, and commit swaps it in.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/grow.h"
#include "util/keymap.h"

#include "client_index.h"
#include "client_msg.h"

struct podmux_index_keys {
        char **v;
        size_t n, cap;
};

/* One pod in one index. */
struct ix_ent {
        struct podmux_pod *pod; /* a reference */
        char **keys;
        size_t n_keys;
        char id[]; /* source "/" uid */
};

struct bucket {
        struct keymap *set; /* struct ix_ent by id */
        struct ix_ent **ord; /* the same entries, in the cache's order */
        size_t n_ord, ord_cap;
        /* ord[i]->pod, in step with ord: a lookup copies it whole rather
         * than visit each entry. */
        struct podmux_pod **pods;
        size_t pods_cap;
        size_t pending; /* new entries being prepared for it */
        char key[];
};

struct cindex {
        char *name;
        podmux_index_fn fn;
        void *data;
        struct keymap *by_id;   /* struct ix_ent by id */
        struct keymap *buckets; /* struct bucket by key */
};

struct ix_prep {
        struct cindex *x;
        struct ix_ent **add;  /* upserts: the new entries (owned until commit) */
        struct ix_ent **olds; /* REMOVE: the entries to take out; commit: the replaced ones */
        struct bucket **touched;
        size_t n_touched, touched_cap;
        struct keymap *by_id, *buckets; /* SET: the index built aside */
};

static const char *ent_id(const void *item)
{
        return ((const struct ix_ent *)item)->id;
}

static const char *bucket_key(const void *item)
{
        return ((const struct bucket *)item)->key;
}

int podmux_index_keys_add(struct podmux_index_keys *k, const char *key)
{
        char *copy;

        if (!k || !key)
                return -EINVAL;
        if (GROW(k->v, k->cap, k->n + 1, 4) < 0)
                return -ENOMEM;
        copy = strdup(key);
        if (!copy)
                return -ENOMEM;
        k->v[k->n++] = copy;
        return 0;
}

static void keys_free(char **v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

static void ent_free(void *item)
{
        struct ix_ent *e = item;

        if (!e)
                return;
        client_pod_unref(e->pod);
        keys_free(e->keys, e->n_keys);
        free(e);
}

static void bucket_free(void *item)
{
        struct bucket *b = item;

        keymap_free(b->set, NULL);
        free(b->ord);
        free(b->pods);
        free(b);
}

/* Where e is or would go in b->ord. */
static size_t ord_pos(const struct bucket *b, const struct ix_ent *e)
{
        size_t lo = 0, hi = b->n_ord;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (client_pod_compare(b->pods[mid], e->pod) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

/* Takes e out of b->ord if it is there.  Cannot fail. */
static void ord_remove(struct bucket *b, const struct ix_ent *e)
{
        size_t i = ord_pos(b, e);

        if (i >= b->n_ord || b->ord[i] != e)
                return;
        memmove(b->ord + i, b->ord + i + 1, (b->n_ord - i - 1) * sizeof(*b->ord));
        memmove(b->pods + i, b->pods + i + 1, (b->n_ord - i - 1) * sizeof(*b->pods));
        b->n_ord--;
}

/* Puts e into b->ord, whose room the caller made.  Cannot fail. */
static void ord_insert(struct bucket *b, struct ix_ent *e)
{
        size_t i = ord_pos(b, e);

        memmove(b->ord + i + 1, b->ord + i, (b->n_ord - i) * sizeof(*b->ord));
        memmove(b->pods + i + 1, b->pods + i, (b->n_ord - i) * sizeof(*b->pods));
        b->ord[i] = e;
        b->pods[i] = e->pod;
        b->n_ord++;
}

/* Puts e into b (its set and its order), replacing the entry of the same
 * id; room in both made by the caller.  Cannot fail. */
static void bucket_put(struct bucket *b, struct ix_ent *e)
{
        struct ix_ent *was = keymap_get(b->set, e->id);

        if (was == e)
                return; /* a key given twice */
        if (was)
                ord_remove(b, was);
        (void)keymap_put(b->set, e, NULL);
        ord_insert(b, e);
}

/* Room in b for more new entries.  0 or -ENOMEM (b unchanged but for
 * room). */
static int bucket_reserve(struct bucket *b, size_t more)
{
        if (keymap_reserve(b->set, more) < 0 || GROW(b->ord, b->ord_cap, b->n_ord + more, 4) < 0 ||
            GROW(b->pods, b->pods_cap, b->n_ord + more, 4) < 0)
                return -ENOMEM;
        return 0;
}

/* p's entry: the index function called, its keys kept.  0, -ENOMEM or
 * the function's error. */
static int ent_new(const struct cindex *x, struct podmux_pod *p, struct ix_ent **ret)
{
        struct podmux_index_keys k = {0};
        struct ix_ent *e = NULL;
        int r = x->fn(p, &k, x->data);

        if (r >= 0 && !(e = malloc(sizeof(*e) + client_pod_id_size(p))))
                r = -ENOMEM;
        if (r < 0) {
                keys_free(k.v, k.n);
                return r;
        }
        client_pod_id_write(p, e->id);
        e->pod = client_pod_ref(p);
        e->keys = k.v;
        e->n_keys = k.n;
        *ret = e;
        return 0;
}

/* The entry of p's source and UID in by_id (*ret NULL if none).  0 or
 * -ENOMEM. */
static int ent_get(const struct keymap *by_id, const struct podmux_pod *p, struct ix_ent **ret)
{
        void *e;
        int r = client_pod_id_get(by_id, p, &e);

        *ret = e;
        return r;
}

/* The bucket of key, made (empty) if there is none.  NULL on ENOMEM. */
static struct bucket *bucket_get(struct keymap *buckets, const char *key)
{
        struct bucket *b = keymap_get(buckets, key);
        size_t len = strlen(key);

        if (b)
                return b;
        b = calloc(1, sizeof(*b) + len + 1);
        if (!b)
                return NULL;
        memcpy(b->key, key, len + 1);
        b->set = keymap_new(ent_id);
        if (!b->set || keymap_put(buckets, b, NULL) < 0) {
                bucket_free(b);
                return NULL;
        }
        return b;
}

/* Takes e out of the buckets still holding it (not of by_id).  Cannot
 * fail. */
static void unlink_ent(struct keymap *buckets, const struct ix_ent *e)
{
        for (size_t i = 0; i < e->n_keys; i++) {
                struct bucket *b = keymap_get(buckets, e->keys[i]);

                if (!b || keymap_get(b->set, e->id) != e)
                        continue;
                (void)keymap_remove(b->set, e->id);
                ord_remove(b, e);
                if (keymap_size(b->set) == 0) {
                        (void)keymap_remove(buckets, b->key);
                        bucket_free(b);
                }
        }
}

/* Builds x's maps from pods[0..n) aside.  0, -ENOMEM or the function's
 * error (nothing built). */
static int build(const struct cindex *x, struct podmux_pod *const *pods, size_t n, struct keymap **ret_by_id,
                 struct keymap **ret_buckets)
{
        struct keymap *by_id = keymap_new(ent_id), *buckets = keymap_new(bucket_key);
        int r = -ENOMEM;

        if (!by_id || !buckets || keymap_reserve(by_id, n) < 0)
                goto fail;
        for (size_t i = 0; i < n; i++) {
                struct ix_ent *e;
                void *old;

                r = ent_new(x, pods[i], &e);
                if (r < 0)
                        goto fail;
                (void)keymap_put(by_id, e, &old); /* reserved */
                if (old) {
                        unlink_ent(buckets, old);
                        ent_free(old);
                }
                r = -ENOMEM;
                for (size_t k = 0; k < e->n_keys; k++) {
                        struct bucket *b = bucket_get(buckets, e->keys[k]);

                        if (!b || bucket_reserve(b, 1) < 0)
                                goto fail;
                        bucket_put(b, e);
                }
        }
        *ret_by_id = by_id;
        *ret_buckets = buckets;
        return 0;
fail:
        keymap_free(buckets, bucket_free);
        keymap_free(by_id, ent_free);
        return r;
}

static void cindex_free(struct cindex *x)
{
        if (!x)
                return;
        keymap_free(x->buckets, bucket_free);
        keymap_free(x->by_id, ent_free);
        free(x->name);
        free(x);
}

void indexes_free(struct indexes *ix)
{
        for (size_t i = 0; i < ix->n; i++)
                cindex_free(ix->v[i]);
        free(ix->v);
        memset(ix, 0, sizeof(*ix));
}

static int key_namespace(const struct podmux_pod *p, struct podmux_index_keys *k, void *data)
{
        (void)data;
        return podmux_index_keys_add(k, p->ns);
}

static int key_source(const struct podmux_pod *p, struct podmux_index_keys *k, void *data)
{
        (void)data;
        return podmux_index_keys_add(k, p->source);
}

static podmux_index_fn builtin(const char *name)
{
        if (strcmp(name, PODMUX_INDEX_NAMESPACE) == 0)
                return key_namespace;
        if (strcmp(name, PODMUX_INDEX_SOURCE) == 0)
                return key_source;
        return NULL;
}

static struct cindex *find(const struct indexes *ix, const char *name)
{
        for (size_t i = 0; i < ix->n; i++)
                if (strcmp(ix->v[i]->name, name) == 0)
                        return ix->v[i];
        return NULL;
}

/* A new index, built from pods[0..n), appended.  Its name not taken. */
static int append(struct indexes *ix, const char *name, podmux_index_fn fn, void *data, struct podmux_pod *const *pods,
                  size_t n, struct cindex **ret)
{
        struct cindex **v = realloc(ix->v, (ix->n + 1) * sizeof(*v));
        struct cindex *x;
        int r;

        if (!v)
                return -ENOMEM;
        ix->v = v;
        x = calloc(1, sizeof(*x));
        if (!x || !(x->name = strdup(name))) {
                cindex_free(x);
                return -ENOMEM;
        }
        x->fn = fn;
        x->data = data;
        r = build(x, pods, n, &x->by_id, &x->buckets);
        if (r < 0) {
                cindex_free(x);
                return r;
        }
        ix->v[ix->n++] = x;
        if (ret)
                *ret = x;
        return 0;
}

int index_add(struct indexes *ix, const char *name, podmux_index_fn fn, void *data, struct podmux_pod *const *pods,
              size_t n)
{
        if (find(ix, name) || builtin(name))
                return -EEXIST;
        return append(ix, name, fn, data, pods, n, NULL);
}

/* ---- a message ------------------------------------------------------------------ */

/* Notes b as getting one more new entry (room in touched reserved). */
static void touch(struct ix_prep *p, struct bucket *b)
{
        if (b->pending++ == 0)
                p->touched[p->n_touched++] = b;
}

/* Room in touched for n_keys more buckets. */
static int touched_reserve(struct ix_prep *p, size_t n_keys)
{
        struct bucket **v;
        size_t cap;

        if (p->n_touched + n_keys <= p->touched_cap)
                return 0;
        cap = 2 * (p->n_touched + n_keys);
        v = realloc(p->touched, cap * sizeof(*v));
        if (!v)
                return -ENOMEM;
        p->touched = v;
        p->touched_cap = cap;
        return 0;
}

/* Upserts: the new entries made, their buckets made and given room. */
static int prepare_upserts(struct ix_prep *p, struct podmux_pod *const *pods, size_t n)
{
        struct cindex *x = p->x;
        int r;

        if (keymap_reserve(x->by_id, n) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                r = ent_new(x, pods[i], &p->add[i]);
                if (r < 0)
                        return r;
                if (touched_reserve(p, p->add[i]->n_keys) < 0)
                        return -ENOMEM;
                for (size_t k = 0; k < p->add[i]->n_keys; k++) {
                        struct bucket *b = bucket_get(x->buckets, p->add[i]->keys[k]);

                        if (!b)
                                return -ENOMEM;
                        touch(p, b);
                }
        }
        for (size_t i = 0; i < p->n_touched; i++)
                if (bucket_reserve(p->touched[i], p->touched[i]->pending) < 0)
                        return -ENOMEM;
        return 0;
}

/* The prepared change of one index. */
static int prepare_one(struct ix_prep *p, enum podmux_op op, struct podmux_pod *const *pods, size_t n)
{
        if (op == PODMUX_OP_SET)
                return build(p->x, pods, n, &p->by_id, &p->buckets);
        p->olds = calloc(n + 1, sizeof(*p->olds));
        if (!p->olds)
                return -ENOMEM;
        if (op == PODMUX_OP_REMOVE) {
                for (size_t i = 0; i < n; i++)
                        if (ent_get(p->x->by_id, pods[i], &p->olds[i]) < 0)
                                return -ENOMEM;
                return 0;
        }
        p->add = calloc(n + 1, sizeof(*p->add));
        if (!p->add)
                return -ENOMEM;
        return prepare_upserts(p, pods, n);
}

/* Ends a preparation: the counts cleared, the buckets made for it that
 * got nothing freed. */
static void untouch(struct ix_prep *p)
{
        for (size_t i = 0; i < p->n_touched; i++) {
                struct bucket *b = p->touched[i];

                b->pending = 0;
                if (keymap_size(b->set) == 0) {
                        (void)keymap_remove(p->x->buckets, b->key);
                        bucket_free(b);
                }
        }
        p->n_touched = 0;
}

int index_prepare(struct indexes *ix, enum podmux_op op, struct podmux_pod *const *pods, size_t n,
                  struct index_prep *prep)
{
        int r = 0;

        memset(prep, 0, sizeof(*prep));
        prep->op = op;
        prep->n_pods = n;
        if (ix->n == 0)
                return 0;
        prep->v = calloc(ix->n, sizeof(*prep->v));
        if (!prep->v)
                return -ENOMEM;
        for (size_t i = 0; i < ix->n && r >= 0; i++) {
                prep->v[prep->n].x = ix->v[i];
                r = prepare_one(&prep->v[prep->n++], op, pods, n);
        }
        if (r < 0) {
                for (size_t i = 0; i < prep->n; i++)
                        untouch(&prep->v[i]);
                index_prep_free(prep);
        }
        return r;
}

static void commit_one(struct ix_prep *p, enum podmux_op op, size_t n)
{
        struct cindex *x = p->x;
        void *old;

        if (op == PODMUX_OP_SET) {
                keymap_free(x->buckets, bucket_free);
                keymap_free(x->by_id, ent_free);
                x->by_id = p->by_id;
                x->buckets = p->buckets;
                p->by_id = p->buckets = NULL;
                return;
        }
        /* Every put first (into room prepared), every removal after. */
        for (size_t i = 0; i < n; i++) {
                if (op == PODMUX_OP_REMOVE) {
                        if (p->olds[i])
                                p->olds[i] = keymap_remove(x->by_id, p->olds[i]->id);
                        continue;
                }
                (void)keymap_put(x->by_id, p->add[i], &old);
                p->olds[i] = old;
                for (size_t k = 0; k < p->add[i]->n_keys; k++) {
                        struct bucket *b = keymap_get(x->buckets, p->add[i]->keys[k]); /* made by prepare */

                        bucket_put(b, p->add[i]);
                }
                p->add[i] = NULL;
        }
        untouch(p);
        for (size_t i = 0; i < n; i++) {
                if (!p->olds[i])
                        continue;
                unlink_ent(x->buckets, p->olds[i]);
                ent_free(p->olds[i]);
                p->olds[i] = NULL;
        }
}

void index_commit(struct indexes *ix, struct index_prep *prep)
{
        (void)ix;
        for (size_t i = 0; i < prep->n; i++)
                commit_one(&prep->v[i], prep->op, prep->n_pods);
}

void index_prep_free(struct index_prep *prep)
{
        for (size_t i = 0; i < prep->n; i++) {
                struct ix_prep *p = &prep->v[i];

                for (size_t k = 0; p->add && k < prep->n_pods; k++)
                        ent_free(p->add[k]);
                free(p->add);
                free(p->olds);
                free(p->touched);
                keymap_free(p->buckets, bucket_free);
                keymap_free(p->by_id, ent_free);
        }
        free(prep->v);
        memset(prep, 0, sizeof(*prep));
}

/* ---- lookups -------------------------------------------------------------------- */

int index_lookup(struct indexes *ix, const char *name, const char *key, struct podmux_pod *const *pods, size_t n,
                 const struct podmux_pod ***ret, size_t *ret_n)
{
        struct cindex *x = find(ix, name);
        const struct podmux_pod **v;
        struct bucket *b;
        int r;

        if (!x && builtin(name)) {
                r = append(ix, name, builtin(name), NULL, pods, n, &x);
                if (r < 0)
                        return r;
        }
        if (!x)
                return -ENOENT;
        *ret = NULL;
        *ret_n = 0;
        b = keymap_get(x->buckets, key);
        if (!b)
                return 0;
        v = malloc(b->n_ord * sizeof(*v));
        if (!v)
                return -ENOMEM;
        memcpy(v, b->pods, b->n_ord * sizeof(*v));
        *ret = v;
        *ret_n = b->n_ord;
        return 0;
}
