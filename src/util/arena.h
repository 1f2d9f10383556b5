/*
 * arena — memory for many small blocks that die roughly in the order they
 * were made (the stream's messages), carved from large segments; a
 * segment goes back to the allocator, whole, when its last block is freed.
 *
 * Why: a consumer's backlog of messages allocated from the general heap
 * lies among the long-lived pods built at the same time; when it drains
 * it leaves holes of a message's size between them, which the allocator
 * can neither fill with pods nor give back, so the daemon's resident size
 * stays at the burst's peak.  Here a drained backlog frees whole
 * segments (large enough that the allocator maps them apart from its
 * heap: see doc/design.md, "Memory").
 *
 * Owns: its segments.  A segment still holding live blocks outlives
 * arena_close(); the last arena_free() of it frees it.  One long-lived
 * block keeps its whole segment: make such a block with
 * arena_alloc_apart().
 * Cost: arena_alloc and arena_free are O(1).  Waste: a block's 16-byte
 * header, and the tail of a segment too short for the next block.  A
 * block larger than an eighth of a segment gets an allocation of its own.
 */
#ifndef PODMUX_ARENA_H
#define PODMUX_ARENA_H

#include <stddef.h>

struct arena;

/* Segments of seg_size bytes (at least 4096).  NULL on ENOMEM. */
struct arena *arena_new(size_t seg_size);
/* Blocks already handed out stay valid until freed.  NULL-safe. */
void arena_close(struct arena *a);
/* size bytes aligned for any type.  NULL on ENOMEM. */
void *arena_alloc(struct arena *a, size_t size);
/* A block of its own, that arena_free() frees too: for one that will
 * outlive the blocks made around it (it would keep their segment).  NULL
 * on ENOMEM. */
void *arena_alloc_apart(size_t size);
/* A block from arena_alloc or arena_alloc_apart (of any arena, closed or
 * not).  NULL-safe.  The current segment, once empty, is carved again
 * from its start; if more than a quarter of it had been carved (a burst),
 * it is freed instead, so its pages go back. */
void arena_free(void *p);

#endif
