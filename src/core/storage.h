/*
 * storage — the merger (the kubelet's podStorage): per-source pod sets,
 * classification of every incoming record into ADD / UPDATE / DELETE /
 * REMOVE / RECONCILE, the three notification modes, sources seen.
 *
 * Owns: the only view of all pods of all sources.
 * Never: knows about consumers or sockets.  Its output goes to one emit
 * callback (the updates pipe), in the order doc/pod-config.md 3.6 gives.
 *
 * Cost: a SET of n pods with k changed is O(n) digest compares plus
 * O(k * pod size) for the changed ones; nothing is re-serialised for an
 * unchanged pod.
 */
#ifndef PODMUX_STORAGE_H
#define PODMUX_STORAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/pod.h"

enum storage_mode {
        STORAGE_MODE_SNAPSHOT = 1,
        STORAGE_MODE_SNAPSHOT_AND_UPDATES = 2,
        STORAGE_MODE_INCREMENTAL = 3,
};

/* "snapshot", "snapshot-and-updates", "incremental". */
const char *storage_mode_to_string(enum storage_mode m);
int storage_mode_from_string(const char *s, enum storage_mode *ret);

struct storage;

/* Takes ownership of u. */
typedef void (*storage_emit_fn)(void *data, struct pod_update *u);
/* A pod the merger dropped (duplicate name in one record) or an inbound op
 * it ignored (p may be NULL).  reason is a short CamelCase word. */
typedef void (*storage_event_fn)(void *data, const char *source, const struct pod *p, const char *reason,
                                 const char *message);

struct storage_config {
        enum storage_mode mode;
        storage_emit_fn emit;
        void *emit_data;
        storage_event_fn event; /* may be NULL */
        void *event_data;
        uint64_t (*wall_usec)(void); /* clock for config.seen; NULL: wall_usec() */
};

int storage_new(const struct storage_config *cfg, struct storage **ret_s);
void storage_free(struct storage *s); /* NULL-safe */

/*
 * Merges one record from source; u is only read.  -EINVAL for an empty
 * source name; -ENOMEM, and then nothing changed and nothing was emitted:
 * the same record can be merged again later.  A merge either updates the
 * store and emits all its records, or does neither, so the store and what
 * consumers were told never diverge.
 */
int storage_apply(struct storage *s, const char *source, const struct pod_update *u);
/* storage_apply(), then frees u (ownership passes, also on error).
 * Tests and benchmarks only. */
int storage_merge(struct storage *s, const char *source, struct pod_update *u);

/* Emits one SET of the merged state with source "*" (the classic Sync).
 * Tests only. */
int storage_sync(struct storage *s);

/* True once a SET from source has been merged. */
bool storage_source_seen(const struct storage *s, const char *source);
/* The merger's half of seen_all_sources: every name was seen (vacuously
 * true for n == 0). */
bool storage_seen_all(const struct storage *s, const char *const *sources, size_t n);

/* The merged state: one SET (source "*") with every pod of every source,
 * sorted.  Caller frees.  Used by tests, and to rebuild the Kubernetes
 * API view (src/kubeapi/kube_api_server.h) after it ran out of memory. */
int storage_merged(const struct storage *s, struct pod_update **ret_u);
/* The current state per source that has delivered, as the mode presents
 * it to a new consumer, sorted by source name: in incremental mode an ADD
 * of that source's pods (possibly empty); in the snapshot modes a SET of
 * the merged state labelled with that source (a SET always carries every
 * pod).  Caller frees the records and the array. */
int storage_state(const struct storage *s, struct pod_update ***ret_updates, size_t *ret_n);
/* Pods stored for one source (0 if unknown), and in all (tests only). */
size_t storage_count(const struct storage *s, const char *source);
size_t storage_total(const struct storage *s);

#endif
