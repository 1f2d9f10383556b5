/*
 * client_cache — the client's pods and plugins (see
 * src/client/client_cache.h).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "client_cache.h"
#include "util/grow.h"
#include "util/json_canon.h"
#include "util/json_get.h"
#include "util/json_parse.h"
#include "util/search.h"
#include "util/proto_words.h"

/* ---- the uid index ----------------------------------------------------------- */

static size_t hash_uid(const char *s)
{
        uint64_t h = 14695981039346656037ull; /* FNV-1a 64 */

        for (; *s; s++) {
                h ^= (unsigned char)*s;
                h *= 1099511628211ull;
        }
        return (size_t)h;
}

static void ix_insert(struct podmux_pod **ix, size_t cap, struct podmux_pod *p)
{
        size_t i = hash_uid(p->uid) & (cap - 1);

        while (ix[i])
                i = (i + 1) & (cap - 1);
        ix[i] = p;
}

/* Linear probing with backward-shift deletion: no tombstones, so a
 * lookup stops at the first empty slot. */
static void ix_remove(struct cache *c, const struct podmux_pod *p)
{
        size_t mask = c->ix_cap - 1, i = hash_uid(p->uid) & mask, j;

        while (c->ix[i] && c->ix[i] != p)
                i = (i + 1) & mask;
        if (!c->ix[i])
                return;
        c->ix[i] = NULL;
        for (j = (i + 1) & mask; c->ix[j]; j = (j + 1) & mask) {
                size_t home = hash_uid(c->ix[j]->uid) & mask;

                /* Move j back to i if its home is not in (i, j]. */
                if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
                        c->ix[i] = c->ix[j];
                        c->ix[j] = NULL;
                        i = j;
                }
        }
}

/* Makes room in the index for total pods (load at most 1/2).  0 or
 * -ENOMEM (unchanged). */
static int ix_reserve(struct cache *c, size_t total)
{
        size_t cap = c->ix_cap ? c->ix_cap : 16;
        struct podmux_pod **ix;

        while (cap < total * 2)
                cap *= 2;
        if (cap == c->ix_cap)
                return 0;
        ix = calloc(cap, sizeof(*ix));
        if (!ix)
                return -ENOMEM;
        for (size_t i = 0; i < c->n; i++)
                ix_insert(ix, cap, c->v[i]);
        free(c->ix);
        c->ix = ix;
        c->ix_cap = cap;
        return 0;
}

const struct podmux_pod *cache_by_uid(const struct cache *c, const char *uid)
{
        const struct podmux_pod *best = NULL;
        size_t mask, i;

        if (!c->ix_cap || !uid)
                return NULL;
        mask = c->ix_cap - 1;
        for (i = hash_uid(uid) & mask; c->ix[i]; i = (i + 1) & mask)
                if (strcmp(c->ix[i]->uid, uid) == 0 && (!best || client_pod_compare(c->ix[i], best) < 0))
                        best = c->ix[i];
        return best;
}

/* The pod of this source and UID, or NULL.  O(1). */
static struct podmux_pod *ix_get(const struct cache *c, const char *source, const char *uid)
{
        size_t mask, i;

        if (!c->ix_cap)
                return NULL;
        mask = c->ix_cap - 1;
        for (i = hash_uid(uid) & mask; c->ix[i]; i = (i + 1) & mask)
                if (strcmp(c->ix[i]->uid, uid) == 0 && strcmp(c->ix[i]->source, source) == 0)
                        return c->ix[i];
        return NULL;
}

const struct podmux_pod *cache_by_key(const struct cache *c, const char *source, const char *uid)
{
        return ix_get(c, source, uid);
}

/* ---- the sorted array ---------------------------------------------------------- */

/* What the searches below look for, and in what. */
struct pod_key {
        const struct cache *c;
        const struct podmux_pod *pod; /* cache_find */
        const char *ns, *name;        /* cache_by_name */
};

static bool pod_before(const void *ctx, size_t i)
{
        const struct pod_key *k = ctx;

        return client_pod_compare(k->c->v[i], k->pod) < 0;
}

bool cache_find(const struct cache *c, const struct podmux_pod *p, size_t *ret_pos)
{
        struct pod_key k = {.c = c, .pod = p};

        *ret_pos = search_first(c->n, pod_before, &k);
        return *ret_pos < c->n && client_pod_compare(c->v[*ret_pos], p) == 0;
}

/* The order of client_pod_compare: namespace, then name. */
static int name_compare(const struct podmux_pod *p, const char *ns, const char *name)
{
        int r = strcmp(p->ns, ns);

        return r ? r : strcmp(p->name, name);
}

static bool name_before(const void *ctx, size_t i)
{
        const struct pod_key *k = ctx;

        return name_compare(k->c->v[i], k->ns, k->name) < 0;
}

const struct podmux_pod *cache_by_name(const struct cache *c, const char *ns, const char *name)
{
        struct pod_key k = {.c = c, .ns = ns, .name = name};
        size_t pos;

        if (!ns || !name)
                return NULL;
        pos = search_first(c->n, name_before, &k);
        return pos < c->n && name_compare(c->v[pos], ns, name) == 0 ? c->v[pos] : NULL;
}

/* Even an empty cache gets its first block, as it always did. */
static int array_reserve(struct cache *c, size_t total)
{
        return GROW(c->v, c->cap, total ? total : 1, 16);
}

static void pods_free(struct cache *c)
{
        for (size_t i = 0; i < c->n; i++)
                client_pod_unref(c->v[i]);
        free(c->v);
        free(c->ix);
        c->v = NULL;
        c->ix = NULL;
        c->n = c->cap = c->ix_cap = c->n_held = 0;
}

static void plugin_ent_free(struct plugin_ent *e)
{
        free(e->socket);
        free(e->json);
        free(e->type);
        free(e->name);
}

void cache_free(struct cache *c)
{
        pods_free(c);
        for (size_t i = 0; i < c->n_plugins; i++)
                plugin_ent_free(&c->plugins[i]);
        free(c->plugins);
        c->plugins = NULL;
        c->n_plugins = c->plugins_cap = 0;
}

/* ---- applying a pods message ------------------------------------------------- */

struct sort_ent {
        struct podmux_pod *p;
        size_t i;
};

/* By source and UID, then by place in the message. */
static int cmp_key_ent(const void *a, const void *b)
{
        const struct sort_ent *x = a, *y = b;
        int r = strcmp(x->p->uid, y->p->uid);

        if (r == 0)
                r = strcmp(x->p->source, y->p->source);
        if (r)
                return r;
        return x->i < y->i ? -1 : x->i > y->i;
}

static int cmp_order_ent(const void *a, const void *b)
{
        const struct sort_ent *x = a, *y = b;

        return client_pod_compare(x->p, y->p);
}

static bool same_key(const struct podmux_pod *a, const struct podmux_pod *b)
{
        return strcmp(a->uid, b->uid) == 0 && strcmp(a->source, b->source) == 0;
}

/* The pods of a SET as a sorted array with one pod per source and UID
 * (the last of a source and UID wins, as a later change would).  Two
 * sorts: O(n log n). */
static int build_set(const struct client_msg *m, struct cache *out)
{
        struct sort_ent *e = NULL;
        size_t n = 0;
        int r = -ENOMEM;

        memset(out, 0, sizeof(*out));
        if (m->n_pods == 0)
                return 0;
        e = malloc(m->n_pods * sizeof(*e));
        if (!e || array_reserve(out, m->n_pods) < 0)
                goto fail;
        for (size_t i = 0; i < m->n_pods; i++) {
                e[i].p = m->pods[i];
                e[i].i = i;
        }
        qsort(e, m->n_pods, sizeof(*e), cmp_key_ent);
        for (size_t i = 0; i < m->n_pods; i++)
                if (i + 1 == m->n_pods || !same_key(e[i].p, e[i + 1].p))
                        e[n++] = e[i];
        /* Keys are unique now, and so are places in the order. */
        qsort(e, n, sizeof(*e), cmp_order_ent);
        for (size_t i = 0; i < n; i++)
                out->v[i] = client_pod_ref(e[i].p);
        out->n = n;
        if (ix_reserve(out, n) < 0)
                goto fail;
        free(e);
        return 0;
fail:
        free(e);
        pods_free(out);
        return r;
}

int cache_pods_prepare(struct cache *c, const struct client_msg *m, struct cache_prep *prep)
{
        size_t fresh = 0;

        memset(prep, 0, sizeof(*prep));
        if (m->op == PODMUX_OP_SET)
                return build_set(m, &prep->set);
        if (m->op == PODMUX_OP_REMOVE)
                return 0;
        for (size_t i = 0; i < m->n_pods; i++)
                if (!ix_get(c, m->pods[i]->source, m->pods[i]->uid))
                        fresh++; /* a pod twice in the message counts twice: room to spare */
        if (array_reserve(c, c->n + fresh) < 0 || ix_reserve(c, c->n + fresh) < 0)
                return -ENOMEM;
        return 0;
}

/* Takes old (in the cache) out.  The array's tail moves: O(n). */
static void remove_pod(struct cache *c, struct podmux_pod *old)
{
        size_t pos;

        if (!cache_find(c, old, &pos))
                return;
        ix_remove(c, old);
        memmove(c->v + pos, c->v + pos + 1, (c->n - pos - 1) * sizeof(*c->v));
        c->n--;
        if (old->held)
                c->n_held--;
        client_pod_unref(old);
}

/* Puts p in its place; room was made by cache_pods_prepare(). */
static void insert_pod(struct cache *c, struct podmux_pod *p)
{
        size_t pos;

        (void)cache_find(c, p, &pos);
        memmove(c->v + pos + 1, c->v + pos, (c->n - pos) * sizeof(*c->v));
        c->v[pos] = client_pod_ref(p);
        c->n++;
        ix_insert(c->ix, c->ix_cap, p);
}

void cache_pods_commit(struct cache *c, const struct client_msg *m, struct cache_prep *prep)
{
        if (m->op == PODMUX_OP_SET) {
                struct cache old = *c;

                /* Only the pods change hands; the plugins stay. */
                c->v = prep->set.v;
                c->n = prep->set.n;
                c->cap = prep->set.cap;
                c->ix = prep->set.ix;
                c->ix_cap = prep->set.ix_cap;
                c->n_held = 0;
                for (size_t i = 0; i < c->n; i++)
                        c->n_held += c->v[i]->held;
                memset(&prep->set, 0, sizeof(prep->set));
                old.plugins = NULL;
                old.n_plugins = 0;
                pods_free(&old);
                return;
        }
        /* A pod is its source and UID: an upsert under another namespace
         * or name (a pod renamed with its UID kept) replaces the one held,
         * which moves to its new place in the order. */
        for (size_t i = 0; i < m->n_pods; i++) {
                struct podmux_pod *p = m->pods[i], *old = ix_get(c, p->source, p->uid);
                size_t pos;

                if (m->op == PODMUX_OP_REMOVE) {
                        if (old)
                                remove_pod(c, old);
                        continue;
                }
                if (old && client_pod_compare(old, p) == 0 && cache_find(c, old, &pos)) {
                        if (old->held)
                                c->n_held--;
                        ix_remove(c, old);
                        c->v[pos] = client_pod_ref(p);
                        ix_insert(c->ix, c->ix_cap, p);
                        client_pod_unref(old);
                        continue;
                }
                if (old)
                        remove_pod(c, old);
                insert_pod(c, p);
        }
}

void cache_prep_free(struct cache_prep *prep)
{
        pods_free(&prep->set);
}

/* ---- plugins ------------------------------------------------------------------ */

struct plugin_key {
        const struct cache *c;
        const char *socket;
};

static bool plugin_before(const void *ctx, size_t i)
{
        const struct plugin_key *k = ctx;

        return strcmp(k->c->plugins[i].socket, k->socket) < 0;
}

bool cache_plugin_find(const struct cache *c, const char *socket, size_t *ret_pos)
{
        struct plugin_key k = {c, socket};

        *ret_pos = search_first(c->n_plugins, plugin_before, &k);
        return *ret_pos < c->n_plugins && strcmp(c->plugins[*ret_pos].socket, socket) == 0;
}

int cache_plugin_apply(struct cache *c, const struct client_msg *m)
{
        struct plugin_ent e = {0};
        size_t pos;
        bool found = cache_plugin_find(c, m->socket, &pos);

        if (strcmp(m->plugin_op, "DEREGISTERED") == 0) {
                if (found) {
                        plugin_ent_free(&c->plugins[pos]);
                        memmove(c->plugins + pos, c->plugins + pos + 1,
                                (c->n_plugins - pos - 1) * sizeof(*c->plugins));
                        c->n_plugins--;
                }
                return 0;
        }
        if (strcmp(m->plugin_op, "REGISTERED") != 0)
                return 0; /* FAILED is news, not state */
        e.socket = strdup(m->socket);
        e.json = strdup(m->plugin_json);
        e.type = strdup(m->plugin_type);
        e.name = strdup(m->plugin_name);
        if (!e.socket || !e.json || !e.type || !e.name)
                goto nomem;
        if (found) {
                plugin_ent_free(&c->plugins[pos]);
                c->plugins[pos] = e;
                return 0;
        }
        if (GROW(c->plugins, c->plugins_cap, c->n_plugins + 1, 8) < 0)
                goto nomem;
        memmove(c->plugins + pos + 1, c->plugins + pos, (c->n_plugins - pos) * sizeof(*c->plugins));
        c->plugins[pos] = e;
        c->n_plugins++;
        return 0;
nomem:
        plugin_ent_free(&e);
        return -ENOMEM;
}

/* ---- diff ---------------------------------------------------------------------- */

void diff_free(struct diff *d)
{
        for (size_t i = 0; i < d->n_recs; i++) {
                for (size_t j = 0; j < d->recs[i].n_pods; j++)
                        client_pod_unref(d->recs[i].pods[j]);
                free(d->recs[i].pods);
        }
        free(d->recs);
        free(d->plugins);
        memset(d, 0, sizeof(*d));
}

/* ---- the resync comparison (doc/protocol.md, "Which pods changed") ---------- */

/* The annotations the merger writes or keeps per run of the daemon. */
#define WORD(w) w,
static const char *const local_annotations[] = {PROTO_LOCAL_ANNOTATIONS(WORD)};
#undef WORD

/* The members compared, in metadata (meta) or at the top. */
static const struct {
        const char *key;
        bool meta;
} compared[] = {
#define COMPARED(key, meta) {key, meta},
        PROTO_COMPARED(COMPARED)
#undef COMPARED
};

/* The compared parts of one pod's text into out: its name and namespace as
 * the pod's identity reads them (client_msg.c: a namespace that is missing
 * or not a string is ""), each with its length; then per member present,
 * its index, ':', its canonical JSON text (json_canon.h: keys sorted,
 * numbers as spelled, no raw newline) and a newline.  Equal outputs are
 * equal parts.  0, -EINVAL (not JSON), -ENOMEM. */
static int compared_text(const char *text, size_t len, struct buf *out)
{
        json_object *o = NULL, *md, *ann;
        const char *name, *ns;
        int r = json_parse(text, len, CLIENT_MSG_MAX_DEPTH, &o, NULL);

        if (r < 0)
                return r;
        md = json_get(o, "metadata");
        name = json_get_str(md, "name", NULL);
        ns = json_get_str(md, "namespace", "");
        if ((name && buf_printf(out, "name %zu:%s\n", strlen(name), name) < 0) ||
            buf_printf(out, "namespace %zu:%s\n", strlen(ns), ns) < 0)
                r = -ENOMEM;
        ann = json_get_type(md, "annotations", json_type_object);
        for (size_t i = 0; ann && i < sizeof(local_annotations) / sizeof(local_annotations[0]); i++)
                json_object_object_del(ann, local_annotations[i]);
        for (size_t i = 0; r == 0 && i < sizeof(compared) / sizeof(compared[0]); i++) {
                json_object *from = compared[i].meta ? md : o, *v = NULL;

                if (!json_object_is_type(from, json_type_object) ||
                    !json_object_object_get_ex(from, compared[i].key, &v))
                        continue;
                if (v && v == ann && json_object_object_length(ann) == 0)
                        continue; /* no annotations but local ones: as if none */
                if (buf_printf(out, "%zu:", i) < 0 || json_canon_append(out, v) < 0 || buf_putc(out, '\n') < 0)
                        r = -ENOMEM;
        }
        json_object_put(o);
        return r;
}

/* The end of the JSON string opening at s[i] (past its closing quote), or
 * 0 if the text ends first. */
static size_t string_end(const char *s, size_t len, size_t i)
{
        for (i++; i < len; i++) {
                if (s[i] == '\\')
                        i++;
                else if (s[i] == '"')
                        return i + 1;
        }
        return 0;
}

#define SEEN_KEY "\"" PROTO_ANNOTATION_SEEN "\""
#define TEXT_HEAD "{\"metadata\":{\"annotations\":{"

/*
 * The span [*ret_start, *ret_end) of the member "kubernetes.io/config.seen"
 * (name and value, no comma) in metadata.annotations, for a text laid out
 * as the daemon writes pods: compact, annotations first, every annotation
 * a string.  False for any other text (or no such member): then only the
 * full comparison can tell.  O(length of the annotations).
 */
static bool seen_span(const char *s, size_t len, size_t *ret_start, size_t *ret_end)
{
        size_t i = sizeof(TEXT_HEAD) - 1;

        if (len < i || memcmp(s, TEXT_HEAD, i) != 0)
                return false;
        while (i < len && s[i] == '"') {
                size_t key = i, end = string_end(s, len, i), value;

                if (!end || end >= len || s[end] != ':' || end + 1 >= len || s[end + 1] != '"')
                        return false;
                value = string_end(s, len, end + 1);
                if (!value || value >= len)
                        return false;
                if (end - key == sizeof(SEEN_KEY) - 1 && memcmp(s + key, SEEN_KEY, end - key) == 0) {
                        *ret_start = key;
                        *ret_end = value;
                        return true;
                }
                if (s[value] != ',')
                        return false;
                i = value + 1;
        }
        return false;
}

/* Whether a and b are the same text but for the value of config.seen in
 * their annotations (seen_span()).  O(text length), allocates nothing. */
static bool same_but_seen(const char *a, size_t a_len, const char *b, size_t b_len)
{
        size_t as, ae, bs, be;

        return seen_span(a, a_len, &as, &ae) && seen_span(b, b_len, &bs, &be) && as == bs && a_len - ae == b_len - be &&
               memcmp(a, b, as) == 0 && memcmp(a + ae, b + be, a_len - ae) == 0;
}

int client_pod_text_same(const char *a, size_t a_len, const char *b, size_t b_len)
{
        struct buf x = BUF_INIT, y = BUF_INIT;
        int r;

        /* Equal texts, and (what a daemon restart gives every unchanged
         * pod) texts that differ only in config.seen, cost no parse. */
        if ((a_len == b_len && memcmp(a, b, a_len) == 0) || same_but_seen(a, a_len, b, b_len))
                return 1;
        r = compared_text(a, a_len, &x);
        if (r == 0)
                r = compared_text(b, b_len, &y);
        if (r == 0)
                r = x.len == y.len && memcmp(x.data, y.data, x.len) == 0;
        buf_free(&x);
        buf_free(&y);
        return r;
}

static int cmp_str_ptr(const void *a, const void *b)
{
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The changes of one kind: pods and their ops, in cache order. */
struct change {
        struct podmux_pod *p;
        enum podmux_op op;
};

static int records_from(const struct change *ch, size_t n_ch, const char **srcs, struct diff *d);

static int diff_pods(const struct cache *old, const struct cache *new_, struct diff *d)
{
        struct change *ch = NULL;
        const char **srcs = NULL;
        size_t n_ch = 0, i = 0, j = 0;
        int r = -ENOMEM;

        ch = malloc((old->n + new_->n + 1) * sizeof(*ch));
        srcs = malloc((old->n + new_->n + 1) * sizeof(*srcs));
        if (!ch || !srcs)
                goto done;
        /* Both sorted the same way: one merge walk, O(n).  A pod is its
         * source and UID: one that moved in the order (renamed, its UID
         * kept) is found by key on the other side and compared. */
        while (i < old->n || j < new_->n) {
                int c = i >= old->n ? 1 : j >= new_->n ? -1 : client_pod_compare(old->v[i], new_->v[j]);
                const struct podmux_pod *o, *p;
                int same;

                if (c < 0) {
                        o = old->v[i++];
                        if (!ix_get(new_, o->source, o->uid))
                                ch[n_ch++] = (struct change){(struct podmux_pod *)o, PODMUX_OP_REMOVE};
                        continue;
                }
                p = new_->v[j++];
                o = c == 0 ? old->v[i++] : ix_get(old, p->source, p->uid);
                if (!o) {
                        ch[n_ch++] = (struct change){(struct podmux_pod *)p, PODMUX_OP_ADD};
                        continue;
                }
                same = client_pod_text_same(o->json, o->len, p->json, p->len);
                if (same < 0)
                        goto done; /* -ENOMEM: the texts were checked when they came */
                if (!same)
                        ch[n_ch++] = (struct change){(struct podmux_pod *)p, PODMUX_OP_UPDATE};
        }
        r = records_from(ch, n_ch, srcs, d);
done:
        free(ch);
        free(srcs);
        return r;
}

/* The changes ch[0..n_ch) as records in d: per source (sorted) REMOVE,
 * ADD, UPDATE, each in the order of ch.  srcs has room for n_ch.  0 or
 * -ENOMEM (d->recs as far as built: diff_free() frees them). */
static int records_from(const struct change *ch, size_t n_ch, const char **srcs, struct diff *d)
{
        static const enum podmux_op order[] = {PODMUX_OP_REMOVE, PODMUX_OP_ADD, PODMUX_OP_UPDATE};
        size_t n_srcs = 0, i, j;

        for (i = 0; i < n_ch; i++)
                srcs[n_srcs++] = ch[i].p->source;
        qsort(srcs, n_srcs, sizeof(*srcs), cmp_str_ptr);
        j = 0;
        for (i = 0; i < n_srcs; i++)
                if (j == 0 || strcmp(srcs[j - 1], srcs[i]) != 0)
                        srcs[j++] = srcs[i];
        n_srcs = j;
        d->recs = calloc(n_srcs * 3 + 1, sizeof(*d->recs));
        if (!d->recs)
                return -ENOMEM;
        for (size_t s = 0; s < n_srcs; s++) {
                for (size_t o = 0; o < 3; o++) {
                        struct diff_rec *rec = &d->recs[d->n_recs];
                        size_t k = 0;

                        for (i = 0; i < n_ch; i++)
                                if (ch[i].op == order[o] && strcmp(ch[i].p->source, srcs[s]) == 0)
                                        k++;
                        if (k == 0)
                                continue;
                        rec->pods = malloc(k * sizeof(*rec->pods));
                        if (!rec->pods)
                                return -ENOMEM;
                        d->n_recs++;
                        rec->op = order[o];
                        for (i = 0; i < n_ch; i++)
                                if (ch[i].op == order[o] && strcmp(ch[i].p->source, srcs[s]) == 0)
                                        rec->pods[rec->n_pods++] = client_pod_ref(ch[i].p);
                        rec->source = rec->pods[0]->source;
                }
        }
        return 0;
}

static int diff_plugins(const struct cache *old, const struct cache *new_, struct diff *d)
{
        size_t i = 0, j = 0;

        d->plugins = calloc(old->n_plugins + new_->n_plugins + 1, sizeof(*d->plugins));
        if (!d->plugins)
                return -ENOMEM;
        while (i < old->n_plugins || j < new_->n_plugins) {
                int c = i >= old->n_plugins   ? 1
                        : j >= new_->n_plugins ? -1
                                               : strcmp(old->plugins[i].socket, new_->plugins[j].socket);

                if (c < 0) {
                        d->plugins[d->n_plugins++] = (struct diff_plugin){false, &old->plugins[i++]};
                } else if (c > 0) {
                        d->plugins[d->n_plugins++] = (struct diff_plugin){true, &new_->plugins[j++]};
                } else {
                        if (strcmp(old->plugins[i].json, new_->plugins[j].json) != 0)
                                d->plugins[d->n_plugins++] = (struct diff_plugin){true, &new_->plugins[j]};
                        i++;
                        j++;
                }
        }
        return 0;
}

int cache_diff(const struct cache *old, const struct cache *new_, struct diff *ret)
{
        struct diff d = {0};

        if (diff_pods(old, new_, &d) < 0 || diff_plugins(old, new_, &d) < 0) {
                diff_free(&d);
                return -ENOMEM;
        }
        *ret = d;
        return 0;
}

/* ---- holding over ---------------------------------------------------------------- */

static bool in_list(const char *s, const char *const *v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(s, v[i]) == 0)
                        return true;
        return false;
}

int cache_hold_over(const struct cache *old, struct cache *fresh, const char *const *delivered, size_t n)
{
        size_t k = 0;

        for (size_t i = 0; i < old->n; i++)
                k += !in_list(old->v[i]->source, delivered, n);
        if (k == 0)
                return 0;
        if (array_reserve(fresh, fresh->n + k) < 0 || ix_reserve(fresh, fresh->n + k) < 0)
                return -ENOMEM;
        /* fresh holds no pod of these sources: they were not delivered. */
        for (size_t i = 0; i < old->n; i++)
                if (!in_list(old->v[i]->source, delivered, n))
                        insert_pod(fresh, old->v[i]);
        return 0;
}

void cache_mark_held(struct cache *c, const char *const *delivered, size_t n)
{
        c->n_held = 0;
        for (size_t i = 0; i < c->n; i++) {
                c->v[i]->held = !in_list(c->v[i]->source, delivered, n);
                c->n_held += c->v[i]->held;
        }
}

int cache_held_records(const struct cache *c, struct diff *ret)
{
        struct change *ch = malloc((c->n_held + 1) * sizeof(*ch));
        const char **srcs = malloc((c->n_held + 1) * sizeof(*srcs));
        struct diff d = {0};
        size_t n_ch = 0;
        int r = -ENOMEM;

        if (ch && srcs) {
                for (size_t i = 0; i < c->n; i++)
                        if (c->v[i]->held)
                                ch[n_ch++] = (struct change){c->v[i], PODMUX_OP_REMOVE};
                r = records_from(ch, n_ch, srcs, &d);
        }
        free(ch);
        free(srcs);
        if (r < 0) {
                diff_free(&d);
                return r;
        }
        *ret = d;
        return 0;
}

void cache_drop_held(struct cache *c)
{
        size_t n = 0;

        for (size_t i = 0; i < c->n; i++) {
                struct podmux_pod *p = c->v[i];

                if (!p->held) {
                        c->v[n++] = p;
                        continue;
                }
                ix_remove(c, p);
                p->held = false;
                client_pod_unref(p);
        }
        c->n = n;
        c->n_held = 0;
}
