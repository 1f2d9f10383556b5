/*
 * storage — the merger (see include/podmux/storage.h and
 * spec/pod-config.md section 3).
 *
 * Per source: a map UID -> stored pod and a "seen" flag.  One merge builds
 * the lists A (ADD), U (UPDATE), D (DELETE), R (REMOVE) and C (RECONCILE)
 * and then emits them in the order the notification mode prescribes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "podmux/loop.h"
#include "podmux/storage.h"
#include "podmux/strmap.h"

struct source_state {
        char *name;
        struct strmap *pods; /* uid -> struct pod* (one reference each) */
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

static void source_free(struct source_state *ss)
{
        if (!ss)
                return;
        strmap_free(ss->pods, unref_pod_value);
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
        ss->pods = strmap_new();
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
                        event(s, source, p, "FailedValidation", msg.data ? msg.data : "duplicate pod name");
                        buf_free(&msg);
                        continue;
                }
                if (strmap_put(names, key.data, (void *)1, NULL) < 0)
                        goto out;
                named[n_named++] = p;
        }
        /* Last index of each UID among the survivors. */
        for (size_t i = 0; i < n_named; i++)
                if (strmap_put(uids, named[i]->uid, (void *)(uintptr_t)(i + 1), NULL) < 0)
                        goto out;
        for (size_t i = 0; i < n_named; i++)
                if ((uintptr_t)strmap_get(uids, named[i]->uid) == i + 1)
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
                char seen[48];

                /* The stored object gets source and first-seen time; a
                 * private copy keeps the sender's pod untouched. */
                r = pod_clone(ref, &np);
                if (r < 0)
                        return r;
                pod_format_seen(s->cfg.wall_usec(), seen, sizeof(seen));
                if (pod_set_source(np, source) < 0 || pod_set_seen(np, seen) < 0) {
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

static int merged_state(const struct storage *s, const char *source,
                        struct pod_update **ret_u)
{
        struct pod_update *u = pod_update_new(POD_OP_SET, source);

        if (!u)
                return -ENOMEM;
        for (size_t i = 0; i < s->n_sources; i++) {
                size_t it = 0;
                void *v;

                while (strmap_next(s->sources[i]->pods, &it, NULL, &v)) {
                        if (pod_update_add(u, v) < 0) {
                                pod_update_free(u);
                                return -ENOMEM;
                        }
                }
        }
        pod_update_sort(u);
        *ret_u = u;
        return 0;
}

/* Emission per notification mode (3.6). */
static int emit_lists(struct storage *s, const char *source,
                      struct merge_lists *l, bool first)
{
        struct pod_update *set = NULL, *marker;
        bool a = l->add->n_pods, upd = l->update->n_pods,
             d = l->del->n_pods, rm = l->remove->n_pods,
             c = l->reconcile->n_pods;

        switch (s->cfg.mode) {
        case STORAGE_MODE_INCREMENTAL:
                if (rm)
                        emit(s, &l->remove);
                if (a)
                        emit(s, &l->add);
                if (upd)
                        emit(s, &l->update);
                if (d)
                        emit(s, &l->del);
                if (first && !a && !upd && !d) {
                        marker = pod_update_new(POD_OP_ADD, source);
                        if (!marker)
                                return -ENOMEM;
                        emit(s, &marker);
                }
                if (c)
                        emit(s, &l->reconcile);
                break;
        case STORAGE_MODE_SNAPSHOT_AND_UPDATES:
                if (rm || a || first) {
                        if (merged_state(s, source, &set) < 0)
                                return -ENOMEM;
                        emit(s, &set);
                }
                if (upd)
                        emit(s, &l->update);
                if (d)
                        emit(s, &l->del);
                break;
        case STORAGE_MODE_SNAPSHOT:
                if (a || upd || d || rm || first) {
                        if (merged_state(s, source, &set) < 0)
                                return -ENOMEM;
                        emit(s, &set);
                }
                break;
        }
        return 0;
}

/* ADD / UPDATE / DELETE: upserts, nothing removed. */
static int merge_upsert(struct storage *s, struct source_state *ss,
                        struct pod **keep, size_t n, struct merge_lists *l)
{
        for (size_t i = 0; i < n; i++) {
                struct pod *store = NULL, *old = NULL;
                int r = classify(s, ss->name, keep[i],
                                 strmap_get(ss->pods, keep[i]->uid), l, &store);

                if (r < 0)
                        return r;
                r = strmap_put(ss->pods, keep[i]->uid, store, (void **)&old);
                if (r < 0) {
                        pod_unref(store);
                        return r;
                }
                pod_unref(old);
        }
        return 0;
}

static int merge_remove(struct source_state *ss, const struct pod_update *u,
                        struct merge_lists *l)
{
        for (size_t i = 0; i < u->n_pods; i++) {
                struct pod *old = strmap_remove(ss->pods, u->pods[i]->uid);
                int r;

                if (!old)
                        continue;
                r = pod_update_add(l->remove, old);
                pod_unref(old);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int merge_set(struct storage *s, struct source_state *ss,
                     struct pod **keep, size_t n, struct merge_lists *l)
{
        struct strmap *fresh = strmap_new();
        size_t it = 0;
        const char *uid;
        void *v;
        int r = -ENOMEM;

        if (!fresh)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                struct pod *store = NULL;

                r = classify(s, ss->name, keep[i], strmap_get(ss->pods, keep[i]->uid), l, &store);
                if (r < 0)
                        goto fail;
                r = strmap_put(fresh, keep[i]->uid, store, NULL);
                if (r < 0) {
                        pod_unref(store);
                        goto fail;
                }
        }
        while (strmap_next(ss->pods, &it, &uid, &v)) {
                if (strmap_get(fresh, uid))
                        continue;
                r = pod_update_add(l->remove, v);
                if (r < 0)
                        goto fail;
        }
        /* The kubelet's REMOVE order here is Go map order; ours is sorted. */
        pod_update_sort(l->remove);
        strmap_free(ss->pods, unref_pod_value);
        ss->pods = fresh;
        return 0;
fail:
        strmap_free(fresh, unref_pod_value);
        return r;
}

int storage_merge(struct storage *s, const char *source, struct pod_update *u)
{
        struct source_state *ss;
        struct merge_lists l;
        struct pod **keep = NULL;
        size_t n = 0;
        bool first = false;
        int r;

        if (!source || !source[0]) {
                pod_update_free(u);
                return -EINVAL;
        }
        if (u->op != POD_OP_SET && u->op != POD_OP_ADD && u->op != POD_OP_UPDATE &&
            u->op != POD_OP_DELETE && u->op != POD_OP_REMOVE) {
                const char *name = pod_op_to_string(u->op);
                struct buf msg = BUF_INIT;

                buf_printf(&msg, "received invalid update type %s from source \"%s\": ignored",
                           name ? name : "(unknown)", source);
                event(s, source, NULL, "InvalidOp", msg.data ? msg.data : "invalid update type");
                buf_free(&msg);
                pod_update_free(u);
                return 0;
        }
        r = get_source(s, source, &ss);
        if (r < 0 || (r = lists_init(&l, source)) < 0) {
                pod_update_free(u);
                return r;
        }
        if (u->op == POD_OP_REMOVE) {
                r = merge_remove(ss, u, &l);
        } else {
                r = preprocess(s, source, u, &keep, &n);
                if (r == 0 && u->op == POD_OP_SET) {
                        first = !ss->seen;
                        ss->seen = true;
                        r = merge_set(s, ss, keep, n, &l);
                } else if (r == 0) {
                        r = merge_upsert(s, ss, keep, n, &l);
                }
        }
        if (r == 0)
                r = emit_lists(s, source, &l, first);
        free(keep);
        lists_free(&l);
        pod_update_free(u);
        return r;
}

int storage_sync(struct storage *s)
{
        struct pod_update *u;
        int r = merged_state(s, POD_SOURCE_ALL, &u);

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
        return merged_state(s, POD_SOURCE_ALL, ret_u);
}

int storage_state(const struct storage *s, struct pod_update ***ret_updates,
                  size_t *ret_n)
{
        struct pod_update **arr;
        size_t n = 0;

        /* Snapshot modes: a SET always carries the complete merged state
         * (spec 3.6), so each seen source gets one SET of the merged state
         * labelled with its name — the records its live SETs would be. */
        if (s->cfg.mode != STORAGE_MODE_INCREMENTAL) {
                arr = calloc(s->n_sources ? s->n_sources : 1, sizeof(*arr));
                if (!arr)
                        return -ENOMEM;
                for (size_t i = 0; i < s->n_sources; i++) {
                        if (!s->sources[i]->seen && strmap_size(s->sources[i]->pods) == 0)
                                continue;
                        if (merged_state(s, s->sources[i]->name, &arr[n]) < 0)
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

                if (!ss->seen && strmap_size(ss->pods) == 0)
                        continue;
                u = pod_update_new(POD_OP_ADD, ss->name);
                if (!u)
                        goto fail;
                arr[n++] = u;
                while (strmap_next(ss->pods, &it, NULL, &v))
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

        return ss ? strmap_size(ss->pods) : 0;
}

size_t storage_total(const struct storage *s)
{
        size_t n = 0;

        for (size_t i = 0; i < s->n_sources; i++)
                n += strmap_size(s->sources[i]->pods);
        return n;
}
