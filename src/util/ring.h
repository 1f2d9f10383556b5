/*
 * ring — a FIFO of fixed-size elements in one growable circular block:
 * O(1) push at the back, pop at the front and access by position.
 *
 * Owns: its block.  Never: what the elements point to (the caller drops
 * those before popping or freeing).
 */
#ifndef PODMUX_RING_H
#define PODMUX_RING_H

#include <stddef.h>

struct ring {
        char *slots; /* cap elements of size bytes */
        size_t size; /* bytes per element */
        size_t head; /* position of the oldest */
        size_t len;
        size_t cap; /* 0 or a power of two */
};

#define RING_INIT(type)                                                                                                \
        {                                                                                                              \
                NULL, sizeof(type), 0, 0, 0                                                                            \
        }

/* Frees the block; the ring is left empty and reusable.  NULL-safe. */
void ring_free(struct ring *r);
/* Room for n elements in all, so that pushes up to n never allocate.
 * 0, or -ENOMEM with r unchanged. */
int ring_reserve(struct ring *r, size_t n);
/* Copies *elem in at the back, doubling the block when full.  0, or
 * -ENOMEM with r unchanged. */
int ring_push(struct ring *r, const void *elem);
/* Drops the oldest element (len > 0). */
void ring_pop(struct ring *r);

/* The element at position i (0 the oldest, i < len). */
static inline void *ring_at(const struct ring *r, size_t i)
{
        return r->slots + ((r->head + i) & (r->cap - 1)) * r->size;
}

#endif
