/*
 * search — binary search over any sorted sequence: the caller says, for
 * a position, whether its element comes before the key.
 *
 * Owns: nothing.
 */
#ifndef PODMUX_SEARCH_H
#define PODMUX_SEARCH_H

#include <stdbool.h>
#include <stddef.h>

/* Tells whether the element at position i of the sequence ctx comes
 * before the key (ctx also carries the key). */
typedef bool (*search_before_fn)(const void *ctx, size_t i);

/* The first position in [0, n) whose element does not come before the
 * key, or n when all do.  The sequence must be ordered: every element
 * that comes before the key precedes every one that does not.
 * O(log n) calls of before. */
size_t search_first(size_t n, search_before_fn before, const void *ctx);

#endif
