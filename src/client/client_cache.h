/*
 * client_cache — libpodmux-client's copy of the daemon's merged pods and
 * registered plugins, and the ops of protocol 1 applied to it.
 *
 * Owns: a reference to each pod it holds, its plugin entries.
 * Never: does I/O, logs, calls handlers.  Private to the library.
 *
 * A pod is its source and UID (doc/protocol.md): the cache holds one pod
 * per source and UID, and an upsert of a pod under another namespace or
 * name replaces the one held.  Layout: pods in one array sorted by
 * client_pod_compare() (the daemon's order: namespace, name, uid, source),
 * plus an open-addressing index by uid (that finds a source and UID).  Applying a message is all or nothing: everything it needs is
 * allocated first (cache_pods_prepare), then the change is made without
 * allocating (cache_pods_commit), so out of memory leaves the cache as it
 * was.  Costs: a lookup by uid O(1), by position O(log n); an insert or
 * remove O(log n) plus a memmove of the array's tail (a few microseconds
 * at 10,000 pods); a SET O(n log n).
 */
#ifndef PODMUX_CLIENT_CACHE_H
#define PODMUX_CLIENT_CACHE_H

#include <stdbool.h>
#include <stddef.h>

#include "client_msg.h"

struct plugin_ent {
        char *socket;
        char *json;
        char *type;
        char *name;
};

struct cache {
        struct podmux_pod **v; /* sorted */
        size_t n, cap;
        size_t n_held;          /* pods with ->held set */
        struct podmux_pod **ix; /* by uid; ix_cap a power of two or 0 */
        size_t ix_cap;
        struct plugin_ent *plugins; /* sorted by socket */
        size_t n_plugins, plugins_cap;
};

/*
 * Holding over (doc/protocol.md, "A restarted daemon's late sources"): a
 * full state replacing a cache keeps the pods of the sources that did not
 * deliver in it, as they were, flagged held (n_held counts them).  Any
 * change that replaces or removes a held pod ends its hold-over.
 */

void cache_free(struct cache *c);

/* Position of a pod equal to p under client_pod_compare(), or where it
 * would go (false). */
bool cache_find(const struct cache *c, const struct podmux_pod *p, size_t *ret_pos);
const struct podmux_pod *cache_by_uid(const struct cache *c, const char *uid);
/* The pod of this source and UID, or NULL.  O(1). */
const struct podmux_pod *cache_by_key(const struct cache *c, const char *source, const char *uid);
const struct podmux_pod *cache_by_name(const struct cache *c, const char *ns, const char *name);

/* A pods message: prepare allocates what commit needs (0 or -ENOMEM, the
 * cache unchanged either way); commit cannot fail.  A SET replaces the
 * pods (prepare builds the new array aside, *set holds it until commit). */
struct cache_prep {
        struct cache set; /* SET: the new pods */
};
int cache_pods_prepare(struct cache *c, const struct client_msg *m, struct cache_prep *prep);
void cache_pods_commit(struct cache *c, const struct client_msg *m, struct cache_prep *prep);
void cache_prep_free(struct cache_prep *prep);

/* A plugin message, all or nothing: 0 or -ENOMEM. */
int cache_plugin_apply(struct cache *c, const struct client_msg *m);
/* An entry's position by socket (false: where it would go). */
bool cache_plugin_find(const struct cache *c, const char *socket, size_t *ret_pos);

/*
 * Whether two texts of one pod (same source and UID) are the same for the
 * resync diff: byte for byte, or the same name and namespace (a missing
 * namespace is "") and equal in every member the merger compares
 * (doc/protocol.md, "Which pods changed"): labels, annotations but
 * config.source, config.seen and config.mirror, deletionTimestamp,
 * deletionGracePeriodSeconds, spec and status.  The
 * rest of a stored pod is as the daemon's run first stored it (config.seen,
 * an API pod's resourceVersion, ...): a restarted daemon shows other
 * values there without any change.  1 same, 0 not, -EINVAL (a text is not
 * JSON), -ENOMEM.  Cost: a comparison of the bytes for equal texts and for
 * texts laid out by the daemon that differ only in config.seen (what a
 * restart gives every unchanged pod); else both parsed and the compared
 * members canonicalized.  O(text length).
 */
int client_pod_text_same(const char *a, size_t a_len, const char *b, size_t b_len);

/* The difference from old to new, as records, pods matched by source and
 * UID.  Each record: op, source, pods (references), in this order: per
 * source (sorted by name) REMOVE, ADD, UPDATE (a pod whose text changed
 * but is the same by client_pod_text_same() gets none); then plugin changes (REGISTERED for
 * new or changed, DEREGISTERED for gone, by socket).  0 or -ENOMEM
 * (nothing built). */
struct diff_rec {
        enum podmux_op op;
        const char *source; /* points into a pod */
        struct podmux_pod **pods;
        size_t n_pods;
};
struct diff_plugin {
        bool registered;
        const struct plugin_ent *ent; /* in old (gone) or new */
};
struct diff {
        struct diff_rec *recs;
        size_t n_recs;
        struct diff_plugin *plugins;
        size_t n_plugins;
};
int cache_diff(const struct cache *old, const struct cache *new_, struct diff *ret);
void diff_free(struct diff *d);

/* Puts into fresh (a full state built aside) the pods of old whose source
 * is not one of delivered[0..n) (not flagged yet: cache_mark_held() does
 * it once fresh is the cache).  0 or -ENOMEM (fresh unchanged). */
int cache_hold_over(const struct cache *old, struct cache *fresh, const char *const *delivered, size_t n);
/* Flags the pods whose source is not one of delivered[0..n) as held. */
void cache_mark_held(struct cache *c, const char *const *delivered, size_t n);
/* The held pods as REMOVE records, per source (sorted by name), pods in
 * cache order (references), nothing removed.  0 or -ENOMEM. */
int cache_held_records(const struct cache *c, struct diff *ret);
/* Takes every held pod out of the cache.  Cannot fail.  O(n). */
void cache_drop_held(struct cache *c);

#endif
