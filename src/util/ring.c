/*
 * ring — circular FIFO (see src/util/ring.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/ring.h"

void ring_free(struct ring *r)
{
        if (!r)
                return;
        free(r->slots);
        r->slots = NULL;
        r->head = r->len = r->cap = 0;
}

int ring_reserve(struct ring *r, size_t n)
{
        size_t cap = r->cap ? r->cap : 8, first;
        char *slots;

        if (n <= r->cap)
                return 0;
        while (cap < n)
                cap *= 2;
        slots = malloc(cap * r->size);
        if (!slots)
                return -ENOMEM;
        /* Unwrapped: the oldest first, at position 0. */
        first = r->cap - r->head < r->len ? r->cap - r->head : r->len;
        if (r->len) {
                memcpy(slots, r->slots + r->head * r->size, first * r->size);
                memcpy(slots + first * r->size, r->slots, (r->len - first) * r->size);
        }
        free(r->slots);
        r->slots = slots;
        r->cap = cap;
        r->head = 0;
        return 0;
}

int ring_push(struct ring *r, const void *elem)
{
        if (r->len == r->cap && ring_reserve(r, r->len + 1) < 0)
                return -ENOMEM;
        memcpy(ring_at(r, r->len), elem, r->size);
        r->len++;
        return 0;
}

void ring_pop(struct ring *r)
{
        r->head = (r->head + 1) & (r->cap - 1);
        r->len--;
}
