/*
 * updates_pipe — the one queue between the merger and the stream server
 * (the kubelet's "updates" channel).
 *
 * Owns: the records queued in it.  Never: blocks — unlike the kubelet's
 * 50-slot channel it has no capacity limit, because the stream server
 * drains it in the same loop iteration and bounds each consumer instead.
 */
#ifndef PODMUX_UPDATES_PIPE_H
#define PODMUX_UPDATES_PIPE_H

#include <stddef.h>

#include "core/pod.h"

struct updates_pipe {
        struct pod_update *head, *tail; /* linked through pod_update.next */
};

void updates_pipe_init(struct updates_pipe *p);
/* Takes ownership of u.  Never fails: the queue links the records
 * themselves, so a merge's output is never lost to an allocation. */
void updates_pipe_push(struct updates_pipe *p, struct pod_update *u);
/* Oldest record, or NULL when empty; the caller owns it. */
struct pod_update *updates_pipe_pop(struct updates_pipe *p);
/* Frees queued records.  NULL-safe. */
void updates_pipe_free(struct updates_pipe *p);

#endif
