/*
 * grow — room in a growing array, checked (git's ALLOC_GROW, systemd's
 * GREEDY_REALLOC).
 *
 * An array is a pointer, a count the caller keeps, and a capacity in
 * elements.  grow() makes room for need elements: the capacity goes to
 * first when it is 0, then doubles until it holds need, so n appends cost
 * O(n) copying in all.  Each caller keeps the first capacity it always
 * had, so no array's memory changed when this helper came in.
 *
 * Errors: -ENOMEM when the allocation fails, and also when need * elem
 * does not fit a size_t (no array that large can be allocated, and every
 * caller already handles -ENOMEM; a distinct -EOVERFLOW would only be
 * mapped back).  On error nothing changed: the array and its capacity
 * stay as they were, still owned by the caller.
 *
 * Owns: nothing (the caller owns the array).  Never: shrinks, zeroes the
 * new room, logs.  Cost: one realloc() when the capacity grows, none
 * otherwise.
 */
#ifndef PODMUX_GROW_H
#define PODMUX_GROW_H

#include <stddef.h>

/* Room for need elements of elem bytes in *p, whose capacity is *cap;
 * first (>= 1) is the capacity of an empty array's first block.  0 or
 * -ENOMEM (nothing changed).  *p is any object pointer passed as void **
 * (GROW() does the cast): the helper reads and writes it as a void *. */
int grow(void **p, size_t *cap, size_t need, size_t elem, size_t first);

/* grow() on an array lvalue and its capacity lvalue. */
#define GROW(arr, cap, need, first) grow((void **)&(arr), &(cap), (need), sizeof(*(arr)), (first))

#endif
