/*
 * storage — the merger (see src/core/storage.h and
 * doc/pod-config.md section 3).
 *
 * Per source: a map UID -> stored pod and a "seen" flag.  One merge builds
 * the lists A (ADD), U (UPDATE), D (DELETE), R (REMOVE) and C (RECONCILE)
 * and then emits them in the order the notification mode prescribes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "core/storage.h"
#include "util/keymap.h"
#include "util/strmap.h"

struct source_state {
        char *name;
        /* uid -> struct pod* (one reference each), keyed by the stored
         * pods' own UIDs (pod_uid_key). */
        struct keymap *pods;
        bool seen;
};

struct storage {
        struct storage_config cfg;
        struct source_state **sources; /* sorted by name */
        size_t n_sources;
};

/* The lists of one merge. */
struct merge_lists {
        struct pod_update *add, *update, *del, *remove, *reconcile;
};

static const char *const mode_names[] = {
        [STORAGE_MODE_SNAPSHOT] = "snapshot",
        [STORAGE_MODE_SNAPSHOT_AND_UPDATES] = "snapshot-and-updates",
        [STORAGE_MODE_INCREMENTAL] = "incremental",
};

const char *storage_mode_to_string(enum storage_mode m)
{
        if (m < STORAGE_MODE_SNAPSHOT || m > STORAGE_MODE_INCREMENTAL)
                return NULL;
        return mode_names[m];
}

int storage_mode_from_string(const char *s, enum storage_mode *ret)
{
        for (int m = STORAGE_MODE_SNAPSHOT; m <= STORAGE_MODE_INCREMENTAL; m++) {
                if (s && strcmp(s, mode_names[m]) == 0) {
                        *ret = (enum storage_mode)m;
                        return 0;
                }
        }
        return -EINVAL;
}

static void unref_pod_value(void *v)
{
        pod_unref(v);
}

static const char *pod_uid_key(const void *v)
{
        return pod_uid(v);
}

static void source_free(struct source_state *ss)
{
        if (!ss)
                return;
        keymap_free(ss->pods, unref_pod_value);
        free(ss->name);
        free(ss);
}

int storage_new(const struct storage_config *cfg, struct storage **ret_s)
{
        struct storage *s;

        if (!cfg || !storage_mode_to_string(cfg->mode) || !cfg->emit)
                return -EINVAL;
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->cfg = *cfg;
        if (!s->cfg.wall_usec)
                s->cfg.wall_usec = wall_usec;
        *ret_s = s;
        return 0;
}

void storage_free(struct storage *s)
{
        if (!s)
                return;
        for (size_t i = 0; i < s->n_sources; i++)
                source_free(s->sources[i]);
        free(s->sources);
        free(s);
}

static struct source_state *find_source(const struct storage *s, const char *name)
{
        for (size_t i = 0; i < s->n_sources; i++)
                if (strcmp(s->sources[i]->name, name) == 0)
                        return s->sources[i];
        return NULL;
}

static int get_source(struct storage *s, const char *name, struct source_state **ret)
{
        struct source_state *ss = find_source(s, name), **n;
        size_t i;

        if (ss) {
                *ret = ss;
                return 0;
        }
        ss = calloc(1, sizeof(*ss));
        if (!ss)
                return -ENOMEM;
        ss->name = strdup(name);
        ss->pods = keymap_new(pod_uid_key);
        n = realloc(s->sources, (s->n_sources + 1) * sizeof(*n));
        if (!ss->name || !ss->pods || !n) {
                if (n)
                        s->sources = n;
                source_free(ss);
                return -ENOMEM;
        }
        s->sources = n;
        for (i = 0; i < s->n_sources && strcmp(s->sources[i]->name, name) < 0; i++)
                ;
        memmove(&s->sources[i + 1], &s->sources[i], (s->n_sources - i) * sizeof(*n));
        s->sources[i] = ss;
        s->n_sources++;
        *ret = ss;
        return 0;
}

static void lists_free(struct merge_lists *l)
{
        pod_update_free(l->add);
        pod_update_free(l->update);
        pod_update_free(l->del);
        pod_update_free(l->remove);
        pod_update_free(l->reconcile);
        memset(l, 0, sizeof(*l));
}

static int lists_init(struct merge_lists *l, const char *source)
{
        memset(l, 0, sizeof(*l));
        l->add = pod_update_new(POD_OP_ADD, source);
        l->update = pod_update_new(POD_OP_UPDATE, source);
        l->del = pod_update_new(POD_OP_DELETE, source);
        l->remove = pod_update_new(POD_OP_REMOVE, source);
        l->reconcile = pod_update_new(POD_OP_RECONCILE, source);
        if (!l->add || !l->update || !l->del || !l->remove || !l->reconcile) {
                lists_free(l);
                return -ENOMEM;
        }
        return 0;
}

static void event(struct storage *s, const char *source, const struct pod *p,
                  const char *reason, const char *message)
{
        if (s->cfg.event)
                s->cfg.event(s->cfg.event_data, source, p, reason, message);
}

/*
 * Pre-processing (3.2): drops pods whose full name appeared earlier in the
 * same list (the first occurrence wins, as in the kubelet), then, among the
 * survivors, keeps only the last pod of each UID (duplicate UIDs are
 * undefined upstream; the last one is authoritative here).  Returns the
 * surviving pods, in order, as borrowed pointers in *ret_keep (caller frees
 * the array).
 */
static int preprocess(struct storage *s, const char *source,
                      const struct pod_update *u, struct pod ***ret_keep,
                      size_t *ret_n)
{
        struct strmap *names = strmap_new(), *uids = strmap_new();
        struct pod **named = NULL, **keep = NULL;
        struct buf key = BUF_INIT;
        size_t n_named = 0, n = 0;
        int r = -ENOMEM;

        if (!names || !uids)
                goto out;
        named = malloc((u->n_pods ? u->n_pods : 1) * sizeof(*named));
        keep = malloc((u->n_pods ? u->n_pods : 1) * sizeof(*keep));
        if (!named || !keep)
                goto out;
        for (size_t i = 0; i < u->n_pods; i++) {
                struct pod *p = u->pods[i];

                if (pod_full_name(p, &key) < 0)
                        goto out;
                if (strmap_get(names, key.data)) {
                        struct buf msg = BUF_INIT;

                        buf_printf(&msg, "duplicate pod name \"%s\" in one update from source \"%s\": dropped",
                                   key.data, source);
                        event(s, source, p, "FailedValidation", msg.len ? msg.data : "duplicate pod name");
                        buf_free(&msg);
                        continue;
                }
                if (strmap_put(names, key.data, (void *)1, NULL) < 0)
                        goto out;
                named[n_named++] = p;
        }
        /* Last index of each UID among the survivors. */
        for (size_t i = 0; i < n_named; i++)
                if (strmap_put(uids, pod_uid(named[i]), (void *)(uintptr_t)(i + 1), NULL) < 0)
                        goto out;
        for (size_t i = 0; i < n_named; i++)
                if ((uintptr_t)strmap_get(uids, pod_uid(named[i])) == i + 1)
                        keep[n++] = named[i];
        *ret_keep = keep;
        *ret_n = n;
        keep = NULL;
        r = 0;
out:
        free(named);
        free(keep);
        buf_free(&key);
        strmap_free(names, NULL);
        strmap_free(uids, NULL);
        return r;
}

/*
 * Classifies ref against existing (3.3) and returns the pod to store
 * (a new reference) in *ret_store, adding it to the right list.
 */
static int classify(struct storage *s, const char *source, struct pod *ref,
                    struct pod *existing, struct merge_lists *l,
                    struct pod **ret_store)
{
        struct pod *np = NULL;
        int r;

        if (!existing) {
                uint64_t now = s->cfg.wall_usec();

                /* The stored object is the sender's own pod, stamped with
                 * source and first-seen time, as the kubelet stamps the
                 * object it is sent (a source never reads those two back:
                 * src/core/pod.h).  A pod stamped before was stored
                 * before and may sit in records sent out, so it gets a
                 * private copy instead: a pod never changes once a record
                 * may carry it.  A merge that fails after this leaves ref
                 * stamped but unstored; it is copied when it comes again. */
                if (ref->stamped) {
                        r = pod_clone(ref, &np);
                        if (r < 0)
                                return r;
                } else {
                        np = pod_ref(ref);
                }
                if (pod_stamp(np, source, now) < 0) {
                        pod_unref(np);
                        return -ENOMEM;
                }
                r = pod_update_add(l->add, np);
                if (r < 0) {
                        pod_unref(np);
                        return r;
                }
                *ret_store = np;
                return 0;
        }
        if (pod_semantic_equal(existing, ref)) {
                if (pod_status_equal(existing, ref)) {
                        *ret_store = pod_ref(existing);
                        return 0;
                }
                r = pod_merge_status(existing, ref, &np);
                if (r < 0)
                        return r;
                r = pod_update_add(l->reconcile, np);
        } else {
                r = pod_merge_update(existing, ref, &np);
                if (r < 0)
                        return r;
                r = pod_update_add(np->deleting ? l->del : l->update, np);
        }
        if (r < 0) {
                pod_unref(np);
                return r;
        }
        *ret_store = np;
        return 0;
}

static int emit(struct storage *s, struct pod_update **u)
{
        struct pod_update *x = *u;

        *u = NULL;
        s->cfg.emit(s->cfg.emit_data, x);
        return 0;
}

static int cmp_ptr(const void *a, const void *b)
{
        uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;

        return x < y ? -1 : x > y;
}

/*
 * The merged state as one SET labelled source, sorted, leaving out the
 * stored pods in skip (pointer identity; may be NULL): the pods a REMOVE
 * is about to take out.  O(N log N) in the node's pods: inherent, a SET
 * carries every pod.
 */
static int merged_state(const struct storage *s, const char *source,
                        const struct pod_update *skip, struct pod_update **ret_u)
{
        struct pod_update *u = pod_update_new(POD_OP_SET, source);
        struct pod **gone = NULL;
        size_t n_gone = skip ? skip->n_pods : 0;

        if (!u)
                return -ENOMEM;
        if (n_gone) {
                gone = malloc(n_gone * sizeof(*gone));
                if (!gone)
                        goto nomem;
                memcpy(gone, skip->pods, n_gone * sizeof(*gone));
                qsort(gone, n_gone, sizeof(*gone), cmp_ptr);
        }
        for (size_t i = 0; i < s->n_sources; i++) {
                size_t it = 0;
                void *v;

                while (keymap_next(s->sources[i]->pods, &it, &v)) {
                        if (n_gone && bsearch(&v, gone, n_gone, sizeof(*gone), cmp_ptr))
                                continue;
                        if (pod_update_add(u, v) < 0)
                                goto nomem;
                }
        }
        free(gone);
        pod_update_sort(u);
        *ret_u = u;
        return 0;
nomem:
        free(gone);
        pod_update_free(u);
        return -ENOMEM;
}

/*
 * What one merge sends, in the order the notification mode prescribes
 * (3.6).  Built completely before the merge is committed, so a merge
 * either changes the store and sends all of this, or does neither.
 */
struct emission {
        struct pod_update *rec[6];
        size_t n;
};

static void emission_free(struct emission *e)
{
        for (size_t i = 0; i < e->n; i++)
                pod_update_free(e->rec[i]);
        e->n = 0;
}

static void take(struct emission *e, struct pod_update **u)
{
        e->rec[e->n++] = *u;
        *u = NULL;
}

/* Call with the store already holding the merge's result (skip: the pods
 * a REMOVE takes out, still in the store).  Moves the lists of l into e
 * only on success; 0 or -ENOMEM with e empty. */
static int emission_build(struct storage *s, const char *source, struct merge_lists *l,
                          bool first, const struct pod_update *skip, struct emission *e)
{
        struct pod_update *set = NULL, *marker = NULL;
        bool a = l->add->n_pods, upd = l->update->n_pods,
             d = l->del->n_pods, rm = l->remove->n_pods,
             c = l->reconcile->n_pods;

        e->n = 0;
        switch (s->cfg.mode) {
        case STORAGE_MODE_INCREMENTAL:
                if (first && !a && !upd && !d) {
                        marker = pod_update_new(POD_OP_ADD, source);
                        if (!marker)
                                return -ENOMEM;
                }
                if (rm)
                        take(e, &l->remove);
                if (a)
                        take(e, &l->add);
                if (upd)
                        take(e, &l->update);
                if (d)
                        take(e, &l->del);
                if (marker)
                        take(e, &marker);
                if (c)
                        take(e, &l->reconcile);
                break;
        case STORAGE_MODE_SNAPSHOT_AND_UPDATES:
                if ((rm || a || first) && merged_state(s, source, skip, &set) < 0)
                        return -ENOMEM;
                if (set)
                        take(e, &set);
                if (upd)
                        take(e, &l->update);
                if (d)
                        take(e, &l->del);
                break;
        case STORAGE_MODE_SNAPSHOT:
                if ((a || upd || d || rm || first) && merged_state(s, source, skip, &set) < 0)
                        return -ENOMEM;
                if (set)
                        take(e, &set);
                break;
        }
        return 0;
}

static void emission_send(struct storage *s, struct emission *e)
{
        for (size_t i = 0; i < e->n; i++)
                emit(s, &e->rec[i]);
        e->n = 0;
}

/*
 * ADD / UPDATE / DELETE (upserts only), and a SET delta (upserts, then the
 * stored pods in l->remove go).  Every pod is classified first (no change
 * to the store), then put in with an undo log, then the emission is built
 * while the pods to remove are still stored; any failure puts the store
 * back as it was.  O(k) for the k pods of the record, plus a SET in the
 * snapshot modes.
 */
static int merge_upsert(struct storage *s, struct source_state *ss,
                        struct pod **keep, size_t n, struct merge_lists *l,
                        bool first, struct emission *e)
{
        struct pod **store = calloc(n ? n : 1, sizeof(*store));
        struct pod **old = calloc(n ? n : 1, sizeof(*old));
        struct pod_update *gone = l->remove; /* may move into e */
        size_t put = 0, i;
        int r = -ENOMEM;

        if (!store || !old)
                goto out;
        for (i = 0; i < n; i++) {
                r = classify(s, ss->name, keep[i], keymap_get(ss->pods, pod_uid(keep[i])), l, &store[i]);
                if (r < 0)
                        goto out;
        }
        for (put = 0; put < n; put++) {
                r = keymap_put(ss->pods, store[put], (void **)&old[put]);
                if (r < 0)
                        goto undo;
        }
        r = emission_build(s, ss->name, l, first, gone, e);
        if (r < 0)
                goto undo;
        /* Committed: the store holds store[], the old pods go, and so do
         * the removed ones (removing never allocates). */
        for (i = 0; i < n; i++)
                pod_unref(old[i]);
        for (i = 0; i < gone->n_pods; i++)
                pod_unref(keymap_remove(ss->pods, pod_uid(gone->pods[i])));
        free(store);
        free(old);
        return 0;
undo:
        /* Replacing a present key or removing one never allocates. */
        while (put-- > 0) {
                if (old[put])
                        (void)keymap_put(ss->pods, old[put], NULL);
                else
                        (void)keymap_remove(ss->pods, pod_uid(keep[put]));
        }
out:
        if (store)
                for (i = 0; i < n; i++)
                        pod_unref(store[i]);
        free(store);
        free(old);
        return r;
}

/*
 * A SET delta: the decisions of the full SET it stands for.  Pods the
 * source did not mention are unchanged, and a full SET would classify
 * them as unchanged too; the gone UIDs still stored are what the full SET
 * would leave out (REMOVE).  O(k + g) for k pods and g gone UIDs.
 */
static int merge_delta(struct storage *s, struct source_state *ss, const struct pod_update *u,
                       struct pod **keep, size_t n, struct merge_lists *l, bool first,
                       struct emission *e)
{
        struct strmap *upserted = NULL;
        int r = -ENOMEM;

        if (u->n_gone && n) {
                upserted = strmap_new();
                if (!upserted)
                        return -ENOMEM;
                for (size_t i = 0; i < n; i++)
                        if (strmap_put(upserted, pod_uid(keep[i]), (void *)1, NULL) < 0)
                                goto out;
        }
        for (size_t i = 0; i < u->n_gone; i++) {
                const char *uid = pod_uid(u->gone[i]);
                struct pod *p = keymap_get(ss->pods, uid);
                bool dup = false;

                if (!p || (upserted && strmap_get(upserted, uid)))
                        continue;
                for (size_t j = 0; j < l->remove->n_pods && !dup; j++)
                        dup = l->remove->pods[j] == p;
                if (!dup && pod_update_add(l->remove, p) < 0)
                        goto out;
        }
        pod_update_sort(l->remove); /* as a full SET orders them */
        r = merge_upsert(s, ss, keep, n, l, first, e);
out:
        strmap_free(upserted, NULL);
        return r;
}

/* REMOVE: the stored pods of the listed UIDs go.  The emission is built
 * while they are still stored, so nothing is changed until it is ready.
 * O(k) for k UIDs, plus a SET in the snapshot modes. */
static int merge_remove(struct storage *s, struct source_state *ss,
                        const struct pod_update *u, struct merge_lists *l,
                        struct emission *e)
{
        struct pod_update *gone;
        int r;

        for (size_t i = 0; i < u->n_pods; i++) {
                struct pod *p = keymap_get(ss->pods, pod_uid(u->pods[i]));
                bool dup = false;

                if (!p)
                        continue;
                for (size_t j = 0; j < l->remove->n_pods && !dup; j++)
                        dup = l->remove->pods[j] == p;
                if (!dup && (r = pod_update_add(l->remove, p)) < 0)
                        return r;
        }
        gone = l->remove; /* may move into e: it lives until e is freed */
        r = emission_build(s, ss->name, l, false, gone, e);
        if (r < 0)
                return r;
        for (size_t j = 0; j < gone->n_pods; j++)
                pod_unref(keymap_remove(ss->pods, pod_uid(gone->pods[j])));
        return 0;
}

/* SET: the source's whole state.  A fresh map is built aside and swapped
 * in; if the emission cannot be built the old map is put back.  O(n) for
 * the n pods of the record: inherent, a SET is the whole source. */
static int merge_set(struct storage *s, struct source_state *ss,
                     struct pod **keep, size_t n, struct merge_lists *l,
                     bool first, struct emission *e)
{
        struct keymap *fresh = keymap_new(pod_uid_key), *prev;
        size_t it = 0;
        void *v;
        int r = -ENOMEM;

        if (!fresh)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                struct pod *store = NULL;

                r = classify(s, ss->name, keep[i], keymap_get(ss->pods, pod_uid(keep[i])), l, &store);
                if (r < 0)
                        goto fail;
                r = keymap_put(fresh, store, NULL);
                if (r < 0) {
                        pod_unref(store);
                        goto fail;
                }
        }
        while (keymap_next(ss->pods, &it, &v)) {
                if (keymap_get(fresh, pod_uid(v)))
                        continue;
                r = pod_update_add(l->remove, v);
                if (r < 0)
                        goto fail;
        }
        /* The kubelet's REMOVE order here is Go map order; ours is sorted. */
        pod_update_sort(l->remove);
        prev = ss->pods;
        ss->pods = fresh;
        r = emission_build(s, ss->name, l, first, NULL, e);
        if (r < 0) {
                ss->pods = prev;
                goto fail;
        }
        keymap_free(prev, unref_pod_value);
        return 0;
fail:
        keymap_free(fresh, unref_pod_value);
        return r;
}

int storage_apply(struct storage *s, const char *source, const struct pod_update *u)
{
        struct source_state *ss;
        struct merge_lists l;
        struct emission e = {.n = 0};
        struct pod **keep = NULL;
        size_t n = 0;
        bool first = false;
        int r;

        if (!source || !source[0])
                return -EINVAL;
        if (u->op != POD_OP_SET && u->op != POD_OP_ADD && u->op != POD_OP_UPDATE &&
            u->op != POD_OP_DELETE && u->op != POD_OP_REMOVE) {
                const char *name = pod_op_to_string(u->op);
                struct buf msg = BUF_INIT;

                buf_printf(&msg, "received invalid update type %s from source \"%s\": ignored",
                           name ? name : "(unknown)", source);
                event(s, source, NULL, "InvalidOp", msg.len ? msg.data : "invalid update type");
                buf_free(&msg);
                return 0;
        }
        r = get_source(s, source, &ss);
        if (r < 0 || (r = lists_init(&l, source)) < 0)
                return r;
        if (u->op == POD_OP_REMOVE) {
                r = merge_remove(s, ss, u, &l, &e);
        } else {
                r = preprocess(s, source, u, &keep, &n);
                if (r == 0 && u->op == POD_OP_SET) {
                        /* A checkpoint's SET is merged, but the source is
                         * not seen until it delivers from its origin
                         * (doc/pod-config.md 4.3): no marker for it. */
                        first = !ss->seen && !u->provisional;
                        if (u->delta)
                                r = merge_delta(s, ss, u, keep, n, &l, first, &e);
                        else
                                r = merge_set(s, ss, keep, n, &l, first, &e);
                        if (r == 0 && !u->provisional)
                                ss->seen = true;
                } else if (r == 0) {
                        r = merge_upsert(s, ss, keep, n, &l, false, &e);
                }
        }
        /* Past this point nothing can fail: the store holds the merge's
         * result and its records go out. */
        if (r == 0)
                emission_send(s, &e);
        emission_free(&e);
        free(keep);
        lists_free(&l);
        return r;
}

int storage_merge(struct storage *s, const char *source, struct pod_update *u)
{
        int r = storage_apply(s, source, u);

        pod_update_free(u);
        return r;
}

int storage_sync(struct storage *s)
{
        struct pod_update *u;
        int r = merged_state(s, POD_SOURCE_ALL, NULL, &u);

        if (r < 0)
                return r;
        return emit(s, &u);
}

bool storage_source_seen(const struct storage *s, const char *source)
{
        const struct source_state *ss = find_source(s, source);

        return ss && ss->seen;
}

bool storage_seen_all(const struct storage *s, const char *const *sources, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (!storage_source_seen(s, sources[i]))
                        return false;
        return true;
}

int storage_merged(const struct storage *s, struct pod_update **ret_u)
{
        return merged_state(s, POD_SOURCE_ALL, NULL, ret_u);
}

int storage_state(const struct storage *s, struct pod_update ***ret_updates,
                  size_t *ret_n)
{
        struct pod_update **arr;
        size_t n = 0;

        /* Snapshot modes: a SET always carries the complete merged state
         * (doc/pod-config.md 3.6), so each seen source gets one SET of the merged state
         * labelled with its name — the records its live SETs would be. */
        if (s->cfg.mode != STORAGE_MODE_INCREMENTAL) {
                arr = calloc(s->n_sources ? s->n_sources : 1, sizeof(*arr));
                if (!arr)
                        return -ENOMEM;
                for (size_t i = 0; i < s->n_sources; i++) {
                        if (!s->sources[i]->seen && keymap_size(s->sources[i]->pods) == 0)
                                continue;
                        if (merged_state(s, s->sources[i]->name, NULL, &arr[n]) < 0)
                                goto fail;
                        n++;
                }
                *ret_updates = arr;
                *ret_n = n;
                return 0;
        }
        arr = calloc(s->n_sources ? s->n_sources : 1, sizeof(*arr));
        if (!arr)
                return -ENOMEM;
        for (size_t i = 0; i < s->n_sources; i++) {
                struct source_state *ss = s->sources[i];
                struct pod_update *u;
                size_t it = 0;
                void *v;

                if (!ss->seen && keymap_size(ss->pods) == 0)
                        continue;
                u = pod_update_new(POD_OP_ADD, ss->name);
                if (!u)
                        goto fail;
                arr[n++] = u;
                while (keymap_next(ss->pods, &it, &v))
                        if (pod_update_add(u, v) < 0)
                                goto fail;
                pod_update_sort(u);
        }
        *ret_updates = arr;
        *ret_n = n;
        return 0;
fail:
        for (size_t i = 0; i < n; i++)
                pod_update_free(arr[i]);
        free(arr);
        return -ENOMEM;
}

size_t storage_count(const struct storage *s, const char *source)
{
        const struct source_state *ss = find_source(s, source);

        return ss ? keymap_size(ss->pods) : 0;
}

size_t storage_total(const struct storage *s)
{
        size_t n = 0;

        for (size_t i = 0; i < s->n_sources; i++)
                n += keymap_size(s->sources[i]->pods);
        return n;
}
