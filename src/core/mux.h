/*
 * mux — one channel per named source, read by the merger (the kubelet's
 * config.Mux).
 *
 * Owns: the channels, their queues of pending records, and the set of
 * configured source names.
 * Never: classifies; that is storage's job.  It only folds a source's
 * pending SETs and deltas together (pod_update_fold), by UID.
 *
 * Everything runs on the loop's thread, so a "send" enqueues the record and
 * schedules a drain on the loop; the drain hands records to the merge
 * callback one at a time, in the order they were sent (FIFO per channel and
 * across channels), so merges are serialised as in the kubelet.
 */
#ifndef PODMUX_MUX_H
#define PODMUX_MUX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/loop.h"
#include "core/pod.h"

struct mux;
struct mux_channel;

/* The pause before a record whose merge ran out of memory is merged
 * again, a backoff (util/backoff.h): base MUX_RETRY_MIN_USEC, doubling,
 * cap MUX_RETRY_MAX_USEC, no jitter; reset by a merge that goes through. */
#define MUX_RETRY_MIN_USEC 1000u
#define MUX_RETRY_MAX_USEC (1000u * 1000u)

/*
 * Merges *u.  The callback may keep the record by taking it (setting *u to
 * NULL); otherwise the mux frees it after the call.  Returning -ENOMEM with
 * *u still set means nothing of it was applied: the record stays first in
 * its channel and is merged again after a pause, so no record is ever lost
 * or reordered.  Any other result is final.
 */
typedef int (*mux_merge_fn)(void *data, const char *source, struct pod_update **u);

/* loop may be NULL (tests): then nothing is drained until mux_drain(). */
int mux_new(struct loop *loop, mux_merge_fn merge, void *data, struct mux **ret_mux);
/* Frees pending records and channels.  NULL-safe. */
void mux_free(struct mux *m);

/* The channel for source, created on first use (and recorded as a
 * configured source).  Same name, same channel.  -EINVAL for an empty
 * name, -ENOMEM. */
int mux_channel(struct mux *m, const char *source, struct mux_channel **ret_ch);
/* The channel's source name (tests only). */
const char *mux_channel_name(const struct mux_channel *ch);
/* Records a channel holds before it folds (see mux_channel_send). */
#define MUX_FOLD_BACKLOG 64

/*
 * Queues u (ownership passes, also on error) for the merger.  Once the
 * channel holds MUX_FOLD_BACKLOG records, a SET or a delta is folded into
 * its last record if that is a SET or a delta still waiting, so a source
 * that sends only those has at most MUX_FOLD_BACKLOG records pending,
 * whatever the burst: its memory is bounded by its state.  Ordinary
 * traffic stays below the bound, and each record is merged as sent.  The
 * plain ops (ADD, UPDATE, DELETE, REMOVE; no source of ours sends them)
 * are queued as they come.  Cost O(k) for a delta of k pods.  0 or
 * -ENOMEM.
 */
int mux_channel_send(struct mux_channel *ch, struct pod_update *u);

/*
 * Each record a channel takes is numbered (1, 2, ...: see
 * mux_channel_sent()), and when the merger is done with a channel's
 * record (the merge callback returned anything but the -ENOMEM that makes
 * it wait), the channel's merged callback is told the number of the last
 * record sent into it, folded ones included: everything the source sent
 * up to that number has been merged, and whatever the merge emitted was
 * handed on (podmux run broadcasts it from the merge callback).  A source
 * uses it to learn when a change it sent has reached consumers, or made
 * no difference.  The callback runs on the loop, after the merge, and may
 * not send into the mux.
 */
typedef void (*mux_merged_fn)(void *data, uint64_t through);
/* Sets ch's merged callback (NULL: none). */
void mux_channel_on_merged(struct mux_channel *ch, mux_merged_fn fn, void *data);
/* The number of the last record ch took (0 before the first): read it
 * right after a mux_channel_send() that returned 0. */
uint64_t mux_channel_sent(const struct mux_channel *ch);

/* Delivers every queued record now; returns how many were merged (it stops
 * early at a merge that ran out of memory). */
size_t mux_drain(struct mux *m);

/* Folds from n waiting records on instead of MUX_FOLD_BACKLOG (tests). */
void mux_fold_after(struct mux *m, size_t n);

/* Configured sources, sorted by name; the array is owned by the mux and is
 * valid until the next mux_channel(). */
const char *const *mux_sources(const struct mux *m, size_t *ret_n);

#endif
