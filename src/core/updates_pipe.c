/* updates_pipe — FIFO of merged records (see include/podmux/updates_pipe.h).
 * A ring buffer: push and pop are O(1) amortised. */
#include <errno.h>
#include <stdlib.h>

#include "podmux/updates_pipe.h"

void updates_pipe_init(struct updates_pipe *p)
{
        p->items = NULL;
        p->head = p->len = p->cap = 0;
}

int updates_pipe_push(struct updates_pipe *p, struct pod_update *u)
{
        if (p->len == p->cap) {
                size_t cap = p->cap ? p->cap * 2 : 16;
                struct pod_update **n = malloc(cap * sizeof(*n));

                if (!n) {
                        pod_update_free(u);
                        return -ENOMEM;
                }
                for (size_t i = 0; i < p->len; i++)
                        n[i] = p->items[(p->head + i) % p->cap];
                free(p->items);
                p->items = n;
                p->cap = cap;
                p->head = 0;
        }
        p->items[(p->head + p->len) % p->cap] = u;
        p->len++;
        return 0;
}

struct pod_update *updates_pipe_pop(struct updates_pipe *p)
{
        struct pod_update *u;

        if (!p->len)
                return NULL;
        u = p->items[p->head];
        p->head = (p->head + 1) % p->cap;
        p->len--;
        return u;
}

size_t updates_pipe_len(const struct updates_pipe *p)
{
        return p->len;
}

void updates_pipe_free(struct updates_pipe *p)
{
        struct pod_update *u;

        if (!p)
                return;
        while ((u = updates_pipe_pop(p)))
                pod_update_free(u);
        free(p->items);
        updates_pipe_init(p);
}
