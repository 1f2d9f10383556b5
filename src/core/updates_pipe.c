/* updates_pipe — FIFO of merged records (see src/core/updates_pipe.h).
 * A list threaded through the records' own link field: push and pop are
 * O(1) and never allocate, so a merged record can always be queued. */
#include <stddef.h>

#include "core/updates_pipe.h"

void updates_pipe_init(struct updates_pipe *p)
{
        p->head = p->tail = NULL;
}

void updates_pipe_push(struct updates_pipe *p, struct pod_update *u)
{
        u->next = NULL;
        if (p->tail)
                p->tail->next = u;
        else
                p->head = u;
        p->tail = u;
}

struct pod_update *updates_pipe_pop(struct updates_pipe *p)
{
        struct pod_update *u = p->head;

        if (!u)
                return NULL;
        p->head = u->next;
        if (!p->head)
                p->tail = NULL;
        u->next = NULL;
        return u;
}

void updates_pipe_free(struct updates_pipe *p)
{
        struct pod_update *u;

        if (!p)
                return;
        while ((u = updates_pipe_pop(p)))
                pod_update_free(u);
        updates_pipe_init(p);
}
