/*
 * kube_view — the node's pods as Kubernetes API objects, with a history
 * of watch events (see src/kubeapi/kube_view.h).
 *
 * A record is applied in two steps so that running out of memory leaves
 * the view as it was: prepare() renders every new object, allocates the
 * entries and makes room in the maps; commit() then only moves pointers
 * and cannot fail (the ring has its full size from the start, and the
 * maps borrow their keys from the objects).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kubeapi/kube_view.h"
#include "util/json_canon.h"
#include "util/json_get.h"
#include "util/json_parse.h"
#include "util/ring.h"
#include "util/strmap.h"

/* Every served object starts so (see render()): the version is written
 * between this and the object's tail. */
#define KV_PREFIX "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"resourceVersion\":\""

/* An object of the view: by stream identity always, by namespace/name
 * when served (visible); a hidden one waits behind the served one of its
 * namespace/name, linked from it. */
struct ent {
        struct kv_obj *obj;
        struct ent *hidden; /* the next one waiting under the same key */
        bool visible;
};

struct kube_view {
        struct strmap *by_id;  /* obj->id -> ent (borrowed keys) */
        struct strmap *by_key; /* obj->key -> served ent (borrowed keys) */
        struct ring events;    /* struct kv_event, oldest first */
        size_t history;
        uint64_t rv;    /* the last version handed out */
        uint64_t floor; /* the version of the last event dropped, or the base */
        /* The record being committed: its number and its events so far. */
        uint64_t seq;
        unsigned n_made;
};

/* ---- objects ---------------------------------------------------------- */

struct kv_obj *kv_obj_ref(struct kv_obj *o)
{
        o->refs++;
        return o;
}

void kv_obj_unref(struct kv_obj *o)
{
        if (!o || --o->refs > 0)
                return;
        free(o->id);
        free(o->key);
        free((char *)o->ns); /* the block name points into too */
        for (int i = 0; i < _KV_FIELD_MAX; i++)
                free(o->fields[i]);
        if (o->labels)
                json_object_put(o->labels);
        free(o->text);
        free(o);
}

const char *kv_type_name(enum kv_type t)
{
        switch (t) {
        case KV_ADDED:
                return "ADDED";
        case KV_MODIFIED:
                return "MODIFIED";
        default:
                return "DELETED";
        }
}

/* The member path of each field of enum kv_field. */
static const char *const field_path[_KV_FIELD_MAX][2] = {
        [KV_FIELD_NAME] = {"metadata", "name"},
        [KV_FIELD_NAMESPACE] = {"metadata", "namespace"},
        [KV_FIELD_NODE_NAME] = {"spec", "nodeName"},
        [KV_FIELD_RESTART_POLICY] = {"spec", "restartPolicy"},
        [KV_FIELD_SCHEDULER_NAME] = {"spec", "schedulerName"},
        [KV_FIELD_SERVICE_ACCOUNT_NAME] = {"spec", "serviceAccountName"},
        [KV_FIELD_HOST_NETWORK] = {"spec", "hostNetwork"},
        [KV_FIELD_PHASE] = {"status", "phase"},
        [KV_FIELD_POD_IP] = {"status", "podIP"},
        [KV_FIELD_NOMINATED_NODE_NAME] = {"status", "nominatedNodeName"},
};

/* The field selector's names of enum kv_field. */
static const char *const field_name[_KV_FIELD_MAX] = {
        [KV_FIELD_NAME] = "metadata.name",
        [KV_FIELD_NAMESPACE] = "metadata.namespace",
        [KV_FIELD_NODE_NAME] = "spec.nodeName",
        [KV_FIELD_RESTART_POLICY] = "spec.restartPolicy",
        [KV_FIELD_SCHEDULER_NAME] = "spec.schedulerName",
        [KV_FIELD_SERVICE_ACCOUNT_NAME] = "spec.serviceAccountName",
        [KV_FIELD_HOST_NETWORK] = "spec.hostNetwork",
        [KV_FIELD_PHASE] = "status.phase",
        [KV_FIELD_POD_IP] = "status.podIP",
        [KV_FIELD_NOMINATED_NODE_NAME] = "status.nominatedNodeName",
};

static int field_values(struct kv_obj *o, json_object *tree)
{
        for (int i = 0; i < _KV_FIELD_MAX; i++) {
                json_object *v = json_get(json_get(tree, field_path[i][0]), field_path[i][1]);
                const char *s = "";

                if (i == KV_FIELD_HOST_NETWORK)
                        s = v && json_object_is_type(v, json_type_boolean) && json_object_get_boolean(v) ? "true"
                                                                                                         : "false";
                else if (v && json_object_is_type(v, json_type_string))
                        s = json_object_get_string(v);
                if (!(o->fields[i] = strdup(s)))
                        return -ENOMEM;
        }
        return 0;
}

/* The served tree: apiVersion, kind and metadata first, metadata with an
 * empty resourceVersion first (render() writes the version there), the
 * API server's own version kept as an annotation; then the rest of the
 * pod's members in their order.  Takes nothing from tree but references. */
static int put_str(json_object *o, const char *key, const char *s)
{
        json_object *v = json_object_new_string(s);

        return v ? json_put(o, key, v) : -ENOMEM;
}

static int served_tree(json_object *tree, json_object **ret)
{
        json_object *top = json_object_new_object(), *meta;
        json_object *old_meta = json_get_type(tree, "metadata", json_type_object);
        json_object *old_rv = json_get_type(old_meta, "resourceVersion", json_type_string);

        if (!top || put_str(top, "apiVersion", "v1") < 0 || put_str(top, "kind", "Pod") < 0)
                goto fail;
        meta = json_object_new_object();
        if (!meta || json_put(top, "metadata", meta) < 0 || put_str(meta, "resourceVersion", "") < 0)
                goto fail;
        if (old_meta) {
                json_object_object_foreach(old_meta, k, v) {
                        if (strcmp(k, "resourceVersion") == 0)
                                continue;
                        if (strcmp(k, "annotations") == 0 && old_rv && json_object_get_string(old_rv)[0] &&
                            json_object_is_type(v, json_type_object) &&
                            put_str(v, KUBE_VIEW_ANNOTATION_SOURCE_RV, json_object_get_string(old_rv)) < 0)
                                goto fail;
                        if (json_put(meta, k, json_object_get(v)) < 0)
                                goto fail;
                }
        }
        json_object_object_foreach(tree, k, v) {
                if (strcmp(k, "apiVersion") == 0 || strcmp(k, "kind") == 0 || strcmp(k, "metadata") == 0)
                        continue;
                if (json_put(top, k, json_object_get(v)) < 0)
                        goto fail;
        }
        *ret = top;
        return 0;
fail:
        json_object_put(top);
        return -ENOMEM;
}

/* One pod rendered as served (its version is set at commit).  0,
 * -ENOMEM. */
static int obj_new(const struct pod *p, const char *source, struct kv_obj **ret)
{
        struct kv_obj *o = calloc(1, sizeof(*o));
        json_object *tree = NULL, *top = NULL;
        struct buf b = BUF_INIT;
        size_t sl = strlen(source), ul = strlen(pod_uid(p)), nl = strlen(pod_namespace(p));
        size_t kl = strlen(pod_name(p));
        int r = -ENOMEM;

        if (!o)
                return -ENOMEM;
        o->refs = 1;
        o->id = malloc(sl + ul + 2);
        o->key = malloc(nl + kl + 2);
        if (!o->id || !o->key)
                goto fail;
        memcpy(o->id, source, sl);
        o->id[sl] = '\n';
        memcpy(o->id + sl + 1, pod_uid(p), ul + 1);
        o->uid = o->id + sl + 1;
        /* key "ns/name"; ns and name point at a NUL-split copy after it. */
        memcpy(o->key, pod_namespace(p), nl);
        o->key[nl] = '/';
        memcpy(o->key + nl + 1, pod_name(p), kl + 1);
        if (!(tree = pod_to_json(p)) || (r = field_values(o, tree)) < 0)
                goto fail_r;
        {
                /* Namespace and name as two strings, in one block. */
                char *split = malloc(nl + kl + 2);

                if (!split)
                        goto fail;
                memcpy(split, o->key, nl + kl + 2);
                split[nl] = '\0';
                o->ns = split;
                o->name = split + nl + 1;
        }
        {
                json_object *labels = json_get_type(json_get(tree, "metadata"), "labels", json_type_object);

                if (labels)
                        o->labels = json_object_get(labels);
        }
        if ((r = served_tree(tree, &top)) < 0 || (r = json_write(&b, top)) < 0)
                goto fail_r;
        r = -EINVAL; /* served_tree() put these first */
        if (b.len < sizeof(KV_PREFIX) - 1 || memcmp(b.data, KV_PREFIX, sizeof(KV_PREFIX) - 1) != 0)
                goto fail_r;
        buf_consume(&b, sizeof(KV_PREFIX) - 1);
        if (!(o->text = buf_steal(&b, &o->len)))
                goto fail;
        json_object_put(top);
        json_object_put(tree);
        *ret = o;
        return 0;
fail:
        r = -ENOMEM;
fail_r:
        buf_free(&b);
        json_object_put(top);
        json_object_put(tree);
        kv_obj_unref(o);
        return r;
}

/* ---- the view --------------------------------------------------------- */

int kube_view_new(const struct kube_view_config *cfg, struct kube_view **ret_v)
{
        struct kube_view *v = calloc(1, sizeof(*v));

        if (!v)
                return -ENOMEM;
        v->events = (struct ring)RING_INIT(struct kv_event);
        v->history = cfg->history ? cfg->history : KUBE_VIEW_DEFAULT_HISTORY;
        v->rv = cfg->base_seq * KUBE_VIEW_RV_PER_SEQ;
        v->floor = v->rv;
        v->by_id = strmap_new_borrowed();
        v->by_key = strmap_new_borrowed();
        if (!v->by_id || !v->by_key || ring_reserve(&v->events, v->history) < 0) {
                kube_view_free(v);
                return -ENOMEM;
        }
        *ret_v = v;
        return 0;
}

static void ent_free(void *p)
{
        struct ent *e = p;

        kv_obj_unref(e->obj);
        free(e);
}

static void event_drop(struct kv_event *e)
{
        kv_obj_unref(e->obj);
        kv_obj_unref(e->prev);
}

void kube_view_free(struct kube_view *v)
{
        if (!v)
                return;
        strmap_free(v->by_id, ent_free);
        strmap_free(v->by_key, NULL);
        for (size_t i = 0; i < v->events.len; i++)
                event_drop(ring_at(&v->events, i));
        ring_free(&v->events);
        free(v);
}

/* Hands out the next version of the record being committed. */
static uint64_t next_rv(struct kube_view *v)
{
        uint64_t r = v->seq * KUBE_VIEW_RV_PER_SEQ + v->n_made++;

        if (r <= v->rv)
                r = v->rv + 1;
        v->rv = r;
        return r;
}

/* Records an event (taking new references).  Never allocates: the ring
 * has its full size, and the oldest event goes when it is full. */
static void emit(struct kube_view *v, enum kv_type type, struct kv_obj *obj, struct kv_obj *prev)
{
        struct kv_event e = {
                .type = type, .rv = next_rv(v), .obj = kv_obj_ref(obj), .prev = prev ? kv_obj_ref(prev) : NULL};

        if (type != KV_DELETED)
                obj->rv = e.rv;
        if (v->events.len == v->history) {
                struct kv_event *old = ring_at(&v->events, 0);

                v->floor = old->rv;
                event_drop(old);
                ring_pop(&v->events);
        }
        (void)ring_push(&v->events, &e); /* room reserved: cannot fail */
}

/* Serves e under its key, or hides it behind the one served there. */
static void link_ent(struct kube_view *v, struct ent *e)
{
        struct ent *head = strmap_get(v->by_key, e->obj->key);

        if (!head) {
                (void)strmap_put(v->by_key, e->obj->key, e, NULL); /* reserved */
                e->visible = true;
                e->hidden = NULL;
                emit(v, KV_ADDED, e->obj, NULL);
                return;
        }
        while (head->hidden)
                head = head->hidden;
        head->hidden = e;
        e->hidden = NULL;
        e->visible = false;
}

/* Takes e out of its key's chain: a served one is DELETED and the first
 * hidden one, if any, is served in its place (ADDED). */
static void unlink_ent(struct kube_view *v, struct ent *e)
{
        struct ent *head = strmap_get(v->by_key, e->obj->key);

        if (e->visible) {
                struct ent *next = e->hidden;

                (void)strmap_remove(v->by_key, e->obj->key);
                e->visible = false;
                e->hidden = NULL;
                emit(v, KV_DELETED, e->obj, NULL);
                if (next) {
                        (void)strmap_put(v->by_key, next->obj->key, next, NULL); /* reserved */
                        next->visible = true;
                        emit(v, KV_ADDED, next->obj, NULL);
                }
                return;
        }
        for (; head && head->hidden; head = head->hidden)
                if (head->hidden == e) {
                        head->hidden = e->hidden;
                        break;
                }
        e->hidden = NULL;
}

/* One change of a record: obj (new, referenced) for an upsert, or only
 * id for a removal; fresh is the entry an upsert of a new id takes. */
struct step {
        struct kv_obj *obj;
        char *id;
        struct ent *fresh;
};

static bool same_text(const struct kv_obj *a, const struct kv_obj *b)
{
        return a->len == b->len && memcmp(a->text, b->text, a->len) == 0;
}

static void commit_step(struct kube_view *v, struct step *s)
{
        const char *id = s->obj ? s->obj->id : s->id;
        struct ent *e = strmap_get(v->by_id, id);

        if (!s->obj) { /* removal */
                if (!e)
                        return;
                (void)strmap_remove(v->by_id, id);
                unlink_ent(v, e);
                ent_free(e);
                return;
        }
        if (!e) {
                e = s->fresh;
                s->fresh = NULL;
                e->obj = s->obj;
                s->obj = NULL;
                (void)strmap_put(v->by_id, e->obj->id, e, NULL); /* reserved */
                link_ent(v, e);
                return;
        }
        if (same_text(e->obj, s->obj)) /* nothing a client sees changed */
                return;
        if (e->visible && strcmp(e->obj->key, s->obj->key) == 0) {
                struct kv_obj *prev = e->obj;

                e->obj = s->obj;
                s->obj = NULL;
                (void)strmap_put(v->by_id, e->obj->id, e, NULL);   /* present: takes the new key */
                (void)strmap_put(v->by_key, e->obj->key, e, NULL); /* the same */
                emit(v, KV_MODIFIED, e->obj, prev);
                kv_obj_unref(prev);
                return;
        }
        /* Renamed (DELETED, then ADDED under the new name), or hidden. */
        unlink_ent(v, e);
        kv_obj_unref(e->obj);
        e->obj = s->obj;
        s->obj = NULL;
        (void)strmap_put(v->by_id, e->obj->id, e, NULL);
        link_ent(v, e);
}

static void steps_free(struct step *steps, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                kv_obj_unref(steps[i].obj);
                free(steps[i].id);
                free(steps[i].fresh);
        }
        free(steps);
}

static const char *pod_source_of(const struct pod_update *u, const struct pod *p)
{
        return p->source ? p->source : u->source ? u->source : "";
}

/* The removal of every held id a SET does not carry, appended to steps
 * from *n on.  O(pods held + pods of the SET). */
static int set_removals(struct kube_view *v, struct step *steps, size_t first, size_t *n)
{
        struct strmap *in_set = strmap_new_borrowed();
        size_t iter = 0;
        const char *id;
        void *val;
        int r = -ENOMEM;

        if (!in_set || strmap_reserve(in_set, *n - first) < 0)
                goto out;
        for (size_t i = first; i < *n; i++)
                (void)strmap_put(in_set, steps[i].obj->id, steps, NULL);
        while (strmap_next(v->by_id, &iter, &id, &val)) {
                if (strmap_get(in_set, id))
                        continue;
                if (!(steps[*n].id = strdup(id)))
                        goto out;
                (*n)++;
        }
        r = 0;
out:
        strmap_free(in_set, NULL);
        return r;
}

static int prepare(struct kube_view *v, const struct pod_update *u, struct step **ret_steps, size_t *ret_n)
{
        size_t cap = u->n_pods + (u->op == POD_OP_SET ? strmap_size(v->by_id) : 0), n = 0, n_up;
        struct step *steps = calloc(cap ? cap : 1, sizeof(*steps));
        int r = -ENOMEM;

        if (!steps)
                return -ENOMEM;
        for (size_t i = 0; i < u->n_pods; i++) {
                const struct pod *p = u->pods[i];
                const char *src = pod_source_of(u, p);

                if (u->op == POD_OP_REMOVE) {
                        size_t sl = strlen(src), ul = strlen(pod_uid(p));

                        if (!(steps[n].id = malloc(sl + ul + 2)))
                                goto fail;
                        memcpy(steps[n].id, src, sl);
                        steps[n].id[sl] = '\n';
                        memcpy(steps[n].id + sl + 1, pod_uid(p), ul + 1);
                } else if ((r = obj_new(p, src, &steps[n].obj)) < 0) {
                        goto fail;
                }
                n++;
        }
        n_up = n;
        /* A SET's removals go first, so that a UID that changed is
         * DELETED before its successor is ADDED. */
        if (u->op == POD_OP_SET && (r = set_removals(v, steps, 0, &n)) < 0)
                goto fail;
        r = -ENOMEM;
        for (size_t i = 0; i < n_up; i++)
                if (steps[i].obj && !strmap_get(v->by_id, steps[i].obj->id) &&
                    !(steps[i].fresh = calloc(1, sizeof(struct ent))))
                        goto fail;
        /* Each step adds at most one identity and two served keys. */
        if (strmap_reserve(v->by_id, n_up) < 0 || strmap_reserve(v->by_key, 2 * n) < 0)
                goto fail;
        if (u->op == POD_OP_SET && n > n_up) {
                /* Removals first: rotate them to the front. */
                struct step *sorted = malloc(n * sizeof(*sorted));

                if (!sorted)
                        goto fail;
                memcpy(sorted, steps + n_up, (n - n_up) * sizeof(*sorted));
                memcpy(sorted + (n - n_up), steps, n_up * sizeof(*sorted));
                free(steps);
                steps = sorted;
        }
        *ret_steps = steps;
        *ret_n = n;
        return 0;
fail:
        steps_free(steps, n);
        return r;
}

int kube_view_apply(struct kube_view *v, const struct pod_update *u, uint64_t seq)
{
        struct step *steps = NULL;
        size_t n = 0;
        int r;

        if (u->delta)
                return -EINVAL; /* the merger's records are never deltas */
        r = prepare(v, u, &steps, &n);
        if (r < 0)
                return r;
        v->seq = seq;
        v->n_made = 0;
        for (size_t i = 0; i < n; i++)
                commit_step(v, &steps[i]);
        steps_free(steps, n);
        return (int)v->n_made;
}

uint64_t kube_view_rv(const struct kube_view *v)
{
        return v->rv;
}

uint64_t kube_view_floor(const struct kube_view *v)
{
        return v->floor;
}

size_t kube_view_n_events(const struct kube_view *v)
{
        return v->events.len;
}

const struct kv_event *kube_view_event(const struct kube_view *v, size_t i)
{
        return ring_at(&v->events, i);
}

size_t kube_view_after(const struct kube_view *v, uint64_t rv)
{
        size_t lo = 0, hi = v->events.len;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (((const struct kv_event *)ring_at(&v->events, mid))->rv <= rv)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

size_t kube_view_count(const struct kube_view *v)
{
        return strmap_size(v->by_key);
}

const struct kv_obj *kube_view_get(const struct kube_view *v, const char *ns, const char *name)
{
        /* A namespace is at most 63 bytes and a pod's name 253, as the
         * API allows them, so the key fits here: no allocation, so that
         * running out of memory never reads as "not found". */
        char key[KUBE_VIEW_MAX_KEY];
        size_t nl = strlen(ns), kl = strlen(name);
        struct ent *e;

        if (nl + kl + 2 > sizeof(key))
                return NULL;
        memcpy(key, ns, nl);
        key[nl] = '/';
        memcpy(key + nl + 1, name, kl + 1);
        e = strmap_get(v->by_key, key);
        return e ? e->obj : NULL;
}

static int cmp_key(const void *a, const void *b)
{
        return strcmp((*(struct kv_obj *const *)a)->key, (*(struct kv_obj *const *)b)->key);
}

int kube_view_snapshot(const struct kube_view *v, struct kv_obj ***ret_objs, size_t *ret_n)
{
        size_t n = strmap_size(v->by_key), i = 0, iter = 0;
        struct kv_obj **objs = malloc((n ? n : 1) * sizeof(*objs));
        const char *key;
        void *val;

        if (!objs)
                return -ENOMEM;
        while (strmap_next(v->by_key, &iter, &key, &val))
                objs[i++] = kv_obj_ref(((struct ent *)val)->obj);
        qsort(objs, i, sizeof(*objs), cmp_key);
        *ret_objs = objs;
        *ret_n = i;
        return 0;
}

/* ---- selectors -------------------------------------------------------- */

static void req_free(struct kv_req *q)
{
        free(q->key);
        for (size_t i = 0; i < q->n_values; i++)
                free(q->values[i]);
        free(q->values);
}

void kv_filter_free(struct kv_filter *f)
{
        if (!f)
                return;
        free(f->ns);
        for (size_t i = 0; i < f->n_labels; i++)
                req_free(&f->labels[i]);
        free(f->labels);
        for (size_t i = 0; i < f->n_fields; i++)
                req_free(&f->fields[i]);
        free(f->fields);
        memset(f, 0, sizeof(*f));
}

static bool is_alnum(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* A label value, or a key's name part: at most 63 characters,
 * alphanumeric at both ends, '-', '_', '.' inside; empty allowed only for
 * a value. */
static bool name_ok(const char *s, size_t n, bool empty_ok)
{
        if (n == 0)
                return empty_ok;
        if (n > 63 || !is_alnum(s[0]) || !is_alnum(s[n - 1]))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
                        return false;
        return true;
}

static bool is_lower_alnum(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* A DNS-1123 subdomain: at most 253 characters, dot-separated labels of
 * lower-case alphanumerics and '-', each alphanumeric at both ends. */
static bool subdomain_ok(const char *s, size_t n)
{
        if (n == 0 || n > 253)
                return false;
        for (size_t i = 0; i < n; i++) {
                bool edge = i == 0 || i == n - 1 || s[i - 1] == '.' || s[i + 1] == '.';

                if (s[i] == '.' ? edge : !(is_lower_alnum(s[i]) || (s[i] == '-' && !edge)))
                        return false;
        }
        return true;
}

/* A label key: [prefix/]name, the prefix a DNS subdomain. */
static bool key_ok(const char *s, size_t n)
{
        const char *slash = memchr(s, '/', n);

        if (slash)
                return subdomain_ok(s, (size_t)(slash - s)) && name_ok(slash + 1, n - (size_t)(slash - s) - 1, false);
        return name_ok(s, n, false);
}

/* White space as the API server's selector lexer knows it. */
static bool is_space(char c)
{
        return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static const char *skip_space(const char *p)
{
        while (is_space(*p))
                p++;
        return p;
}

static int add_value(struct kv_req *q, const char *s, size_t n)
{
        char **vals = realloc(q->values, (q->n_values + 1) * sizeof(*vals));

        if (!vals)
                return -ENOMEM;
        q->values = vals;
        if (!(vals[q->n_values] = strndup(s, n)))
                return -ENOMEM;
        q->n_values++;
        return 0;
}

static bool is_integer(const char *s)
{
        if (*s == '-')
                s++;
        if (!*s)
                return false;
        for (; *s; s++)
                if (*s < '0' || *s > '9')
                        return false;
        return true;
}

/* One requirement s[0..n) of a label selector into q (zeroed). */
static int parse_label_req(const char *s, size_t n, struct kv_req *q, struct buf *err)
{
        char *text = strndup(s, n);
        const char *p, *k;
        size_t kn;
        int r;

        if (!text)
                return -ENOMEM;
        p = skip_space(text);
        if (*p == '!') {
                p = skip_space(p + 1);
                q->op = KV_OP_NOT_EXISTS;
        } else {
                q->op = KV_OP_EXISTS;
        }
        k = p;
        while (*p && !is_space(*p) && !strchr("=!<>(),", *p))
                p++;
        kn = (size_t)(p - k);
        r = -EINVAL;
        if (!key_ok(k, kn)) {
                r = buf_set_err(err, -EINVAL, "unable to parse requirement: invalid label key \"%.*s\"", (int)kn, k);
                goto out;
        }
        if (!(q->key = strndup(k, kn))) {
                r = -ENOMEM;
                goto out;
        }
        p = skip_space(p);
        if (q->op == KV_OP_NOT_EXISTS || !*p) {
                if (*p) {
                        r = buf_set_err(err, -EINVAL, "unable to parse requirement: unexpected \"%s\" after !%s", p,
                                        q->key);
                        goto out;
                }
                r = 0;
                goto out;
        }
        if (strncmp(p, "==", 2) == 0) {
                q->op = KV_OP_EQ;
                p += 2;
        } else if (strncmp(p, "!=", 2) == 0) {
                q->op = KV_OP_NE;
                p += 2;
        } else if (*p == '=') {
                q->op = KV_OP_EQ;
                p++;
        } else if (*p == '>' || *p == '<') {
                q->op = *p == '>' ? KV_OP_GT : KV_OP_LT;
                p++;
        } else if ((strncmp(p, "in", 2) == 0 && (is_space(p[2]) || p[2] == '(')) ||
                   (strncmp(p, "notin", 5) == 0 && (is_space(p[5]) || p[5] == '('))) {
                q->op = p[0] == 'i' ? KV_OP_IN : KV_OP_NOTIN;
                p = skip_space(p + (q->op == KV_OP_IN ? 2 : 5));
                if (*p != '(') {
                        r = buf_set_err(err, -EINVAL, "unable to parse requirement: found '%s', expected: '('", p);
                        goto out;
                }
                for (p++;;) {
                        const char *vs = skip_space(p), *ve;

                        p = vs;
                        while (*p && *p != ',' && *p != ')')
                                p++;
                        ve = p;
                        while (ve > vs && is_space(ve[-1]))
                                ve--;
                        if (!*p) {
                                r = buf_set_err(err, -EINVAL, "unable to parse requirement: found '', expected: ')'");
                                goto out;
                        }
                        if (!name_ok(vs, (size_t)(ve - vs), true)) {
                                r = buf_set_err(err, -EINVAL,
                                                "unable to parse requirement: invalid label value \"%.*s\"",
                                                (int)(ve - vs), vs);
                                goto out;
                        }
                        if ((r = add_value(q, vs, (size_t)(ve - vs))) < 0)
                                goto out;
                        r = -EINVAL;
                        if (*p++ == ')')
                                break;
                }
                p = skip_space(p);
                if (*p) {
                        r = buf_set_err(err, -EINVAL, "unable to parse requirement: unexpected \"%s\"", p);
                        goto out;
                }
                r = 0;
                goto out;
        } else {
                r = buf_set_err(err, -EINVAL, "unable to parse requirement: found '%s', expected an operator", p);
                goto out;
        }
        p = skip_space(p);
        {
                const char *ve = p + strlen(p);

                while (ve > p && is_space(ve[-1]))
                        ve--;
                /* A value of 'Gt' and 'Lt' is a label value too: no sign. */
                if (!name_ok(p, (size_t)(ve - p), q->op != KV_OP_GT && q->op != KV_OP_LT)) {
                        r = buf_set_err(err, -EINVAL, "unable to parse requirement: invalid label value \"%.*s\"",
                                        (int)(ve - p), p);
                        goto out;
                }
                if ((r = add_value(q, p, (size_t)(ve - p))) < 0)
                        goto out;
                if ((q->op == KV_OP_GT || q->op == KV_OP_LT) && !is_integer(q->values[0])) {
                        r = buf_set_err(err, -EINVAL,
                                        "unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an "
                                        "integer");
                        goto out;
                }
        }
        r = 0;
out:
        free(text);
        return r;
}

static int push_req(struct kv_req **reqs, size_t *n, struct kv_req **ret)
{
        struct kv_req *g = realloc(*reqs, (*n + 1) * sizeof(*g));

        if (!g)
                return -ENOMEM;
        *reqs = g;
        memset(&g[*n], 0, sizeof(g[*n]));
        *ret = &g[(*n)++];
        return 0;
}

static int parse_labels(struct kv_filter *f, const char *s, struct buf *err)
{
        const char *p = s;

        while (*skip_space(p)) {
                const char *start = p;
                int depth = 0;
                struct kv_req *q;
                int r;

                while (*p && (depth || *p != ',')) {
                        if (*p == '(')
                                depth++;
                        else if (*p == ')' && depth)
                                depth--;
                        p++;
                }
                if ((r = push_req(&f->labels, &f->n_labels, &q)) < 0 ||
                    (r = parse_label_req(start, (size_t)(p - start), q, err)) < 0)
                        return r;
                if (*p == ',') {
                        p++;
                        if (!*skip_space(p))
                                return buf_set_err(err, -EINVAL,
                                                   "unable to parse requirement: found '', expected: identifier");
                }
        }
        return 0;
}

/* A field selector value as the API server's UnescapeValue reads it: "\\",
 * "\\," and "\\=" stand for the character; any other escape, and a bare
 * ',' or '=', are errors.  0, -EINVAL (err set) or -ENOMEM. */
static int unescape_value(const char *s, size_t n, struct buf *out, struct buf *err)
{
        for (size_t i = 0; i < n; i++) {
                char c = s[i];

                if (c == ',' || c == '=')
                        return buf_set_err(err, -EINVAL, "invalid field selector: unescaped character in value: %d", c);
                if (c == '\\') {
                        if (i + 1 == n)
                                return buf_set_err(err, -EINVAL, "invalid field selector: invalid escape sequence: \\");
                        c = s[++i];
                        if (c != '\\' && c != ',' && c != '=')
                                return buf_set_err(err, -EINVAL,
                                                   "invalid field selector: invalid escape sequence: \\%c", c);
                }
                if (buf_putc(out, c) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* One term of the field selector sel, [start, end): split where an
 * operator first starts ("!=", then "==", then "=" at each place, as the
 * API server's splitTerm), its label one of the pods' (spec.host, an old
 * client's name, is spec.nodeName), its value unescaped.  0, -EINVAL
 * (err set) or -ENOMEM. */
static int parse_field_term(struct kv_filter *f, const char *sel, const char *start, const char *end, struct buf *err)
{
        static const struct {
                const char *text;
                enum kv_op op;
        } ops[] = {{"!=", KV_OP_NE}, {"==", KV_OP_EQ}, {"=", KV_OP_EQ}};
        const char *at = NULL;
        struct buf val = BUF_INIT;
        struct kv_req *q;
        size_t kn, on = 0, k = 0;
        int r, field = -1;

        for (const char *p = start; p < end && !at; p++)
                for (k = 0; k < sizeof(ops) / sizeof(ops[0]); k++) {
                        on = strlen(ops[k].text);
                        if ((size_t)(end - p) >= on && strncmp(p, ops[k].text, on) == 0) {
                                at = p;
                                break;
                        }
                }
        if (!at)
                return buf_set_err(err, -EINVAL, "invalid selector: '%s'; can't understand '%.*s'", sel,
                                   (int)(end - start), start);
        kn = (size_t)(at - start);
        for (int i = 0; i < _KV_FIELD_MAX; i++)
                if (strlen(field_name[i]) == kn && strncmp(field_name[i], start, kn) == 0)
                        field = i;
        if (kn == 9 && strncmp(start, "spec.host", 9) == 0)
                field = KV_FIELD_NODE_NAME;
        if (field < 0)
                return buf_set_err(err, -EINVAL, "field label not supported: %.*s", (int)kn, start);
        r = unescape_value(at + on, (size_t)(end - at - on), &val, err);
        if (r >= 0)
                r = push_req(&f->fields, &f->n_fields, &q);
        if (r >= 0) {
                q->field = field;
                q->op = ops[k].op;
                r = add_value(q, val.data ? val.data : "", val.len);
        }
        buf_free(&val);
        return r;
}

/* The field selector s: terms split at commas not escaped, an empty term
 * skipped, as the API server's parseSelector. */
static int parse_fields(struct kv_filter *f, const char *s, struct buf *err)
{
        const char *p = s;

        while (*p) {
                const char *start = p;
                int r;

                while (*p && *p != ',') {
                        if (*p == '\\' && p[1])
                                p++;
                        p++;
                }
                if (p > start && (r = parse_field_term(f, s, start, p, err)) < 0)
                        return r;
                if (*p == ',')
                        p++;
        }
        return 0;
}

int kv_filter_parse(struct kv_filter *f, const char *label_selector, const char *field_selector, struct buf *err)
{
        int r = 0;

        if (label_selector && (r = parse_labels(f, label_selector, err)) < 0)
                goto out;
        if (field_selector && (r = parse_fields(f, field_selector, err)) < 0)
                goto out;
        return 0;
out:
        if (r == -ENOMEM && err)
                buf_reset(err);
        return r;
}

static bool in_values(const struct kv_req *q, const char *v)
{
        for (size_t i = 0; i < q->n_values; i++)
                if (strcmp(q->values[i], v) == 0)
                        return true;
        return false;
}

static bool label_match(const struct kv_req *q, json_object *labels)
{
        json_object *jv = json_get_type(labels, q->key, json_type_string);
        const char *v = jv ? json_object_get_string(jv) : NULL;

        switch (q->op) {
        case KV_OP_EQ:
                return v && strcmp(v, q->values[0]) == 0;
        case KV_OP_NE:
                return !v || strcmp(v, q->values[0]) != 0;
        case KV_OP_IN:
                return v && in_values(q, v);
        case KV_OP_NOTIN:
                return !v || !in_values(q, v);
        case KV_OP_EXISTS:
                return v != NULL;
        case KV_OP_NOT_EXISTS:
                return v == NULL;
        case KV_OP_GT:
        case KV_OP_LT: {
                long long a, b;
                char *end;

                if (!v || !is_integer(v))
                        return false;
                a = strtoll(v, &end, 10);
                b = strtoll(q->values[0], &end, 10);
                return q->op == KV_OP_GT ? a > b : a < b;
        }
        }
        return false;
}

bool kv_filter_match(const struct kv_filter *f, const struct kv_obj *o)
{
        if (f->ns && strcmp(f->ns, o->ns) != 0)
                return false;
        for (size_t i = 0; i < f->n_labels; i++)
                if (!label_match(&f->labels[i], o->labels))
                        return false;
        for (size_t i = 0; i < f->n_fields; i++) {
                const struct kv_req *q = &f->fields[i];
                bool eq = strcmp(o->fields[q->field], q->values[0]) == 0;

                if (q->op == KV_OP_EQ ? !eq : eq)
                        return false;
        }
        return true;
}
