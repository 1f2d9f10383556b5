/*
 * client_index — libpodmux-client's indexes (podmux_client_add_index(),
 * podmux_client_by_index()): for each index, the pods of each key, kept in
 * step with the cache by the same prepare/commit as the cache
 * (client_cache.h), so a message is applied to the cache and to every
 * index or to none.
 *
 * Owns: per index its name, an entry per pod of the cache (a reference
 * to the pod, the keys its function gave, its id "source/uid") and a map
 * of keys to the set of entries holding each (a keymap by id).
 * Never: does I/O, logs, calls anything but the index functions (from
 * index_prepare() and index_add() only).  Private to the library.
 *
 * The built-in indexes (PODMUX_INDEX_NAMESPACE, PODMUX_INDEX_SOURCE) are
 * built from the cache by the first lookup of each (index_lookup()), so a
 * client that never reads one pays nothing for it.
 * Cost: a message O(its pods x their keys) (hash operations and the
 * index functions' calls); a SET or a full state rebuilds each index
 * from the new cache, O(cache); a lookup O(k) for k pods found (a key's
 * pods are kept in order, a change moving them within that key).
 */
#ifndef PODMUX_CLIENT_INDEX_H
#define PODMUX_CLIENT_INDEX_H

#include <stddef.h>

#include "podmux/client.h"

struct podmux_pod;
struct cindex;

struct indexes {
        struct cindex **v;
        size_t n;
};

/* What index_commit() needs, allocated by index_prepare(). */
struct ix_prep;
struct index_prep {
        struct ix_prep *v; /* one per index */
        size_t n;
        enum podmux_op op;
        size_t n_pods;
};

void indexes_free(struct indexes *ix);
/* Adds an index and builds it from pods[0..n) (the cache).  0, -EEXIST
 * (the name is taken, a built-in's among them), -ENOMEM, or the index
 * function's error; nothing added on an error. */
int index_add(struct indexes *ix, const char *name, podmux_index_fn fn, void *data, struct podmux_pod *const *pods,
              size_t n);
/*
 * A pods message's change: op with its pods, or for PODMUX_OP_SET every
 * pod of the new cache (a SET, a full state).  The pods stay valid until
 * index_commit().  0, or -ENOMEM or an index function's error, the
 * indexes unchanged either way.  prep is cleared first; free it with
 * index_prep_free() after a commit or not.
 */
int index_prepare(struct indexes *ix, enum podmux_op op, struct podmux_pod *const *pods, size_t n,
                  struct index_prep *prep);
/* Makes the prepared change; cannot fail. */
void index_commit(struct indexes *ix, struct index_prep *prep);
void index_prep_free(struct index_prep *prep);
/* The pods of key in the index name, in the cache's order
 * (client_pod_compare()), in a new array (NULL for none); a built-in
 * index is built from pods[0..n) (the cache) first.  0, -ENOENT (no such
 * index), -ENOMEM. */
int index_lookup(struct indexes *ix, const char *name, const char *key, struct podmux_pod *const *pods, size_t n,
                 const struct podmux_pod ***ret, size_t *ret_n);

#endif
