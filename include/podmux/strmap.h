/*
 * strmap — a string-keyed hash map (open addressing, linear probing).
 *
 * Owns: copies of its keys.  Never: the values (the caller frees them,
 * or passes a destructor to strmap_free()).
 * Cost: O(1) expected per operation; grows at 70% load, so memory is about
 * 2.9 slots of 16 bytes per entry plus the keys.
 */
#ifndef PODMUX_STRMAP_H
#define PODMUX_STRMAP_H

#include <stddef.h>

struct strmap;

struct strmap *strmap_new(void); /* NULL on ENOMEM */
void strmap_free(struct strmap *m, void (*free_value)(void *)); /* NULL-safe */
size_t strmap_size(const struct strmap *m);
void *strmap_get(const struct strmap *m, const char *key);
/* Inserts or replaces; *ret_old (if given) gets the replaced value or NULL.
 * 0 or -ENOMEM (the map is unchanged on error). */
int strmap_put(struct strmap *m, const char *key, void *value, void **ret_old);
/* Removes key; returns its value or NULL. */
void *strmap_remove(struct strmap *m, const char *key);
/* Iteration: start with *iter = 0; returns 0 at the end.  The map must not
 * be changed during iteration except by strmap_remove of the current key. */
int strmap_next(const struct strmap *m, size_t *iter, const char **ret_key,
                void **ret_value);

#endif
