/*
 * strmap — a string-keyed hash map (open addressing, linear probing).
 *
 * Owns: copies of its keys (or, made with strmap_new_borrowed(), only
 * pointers to keys the caller keeps alive).  Never: the values (the caller
 * frees them, or passes a destructor to strmap_free()).
 * Cost: O(1) expected per operation; grows at 70% load, so memory is about
 * 2.9 slots of 16 bytes per entry plus the keys.
 */
#ifndef PODMUX_STRMAP_H
#define PODMUX_STRMAP_H

#include <stddef.h>

struct strmap;

struct strmap *strmap_new(void); /* NULL on ENOMEM */
/* The hash of a key (FNV-1a, 64 bits), shared with keymap. */
size_t strmap_hash(const char *s);
/*
 * A map that borrows its keys instead of copying them: the caller keeps
 * each key's text alive and unchanged while it is in the map (typically
 * the key lives in the value, e.g. a pod's UID).  A put of a present key
 * takes the new key pointer too.  Saves one allocation per entry, and with
 * strmap_reserve() a put never allocates.
 */
struct strmap *strmap_new_borrowed(void);
void strmap_free(struct strmap *m, void (*free_value)(void *)); /* NULL-safe */
size_t strmap_size(const struct strmap *m);
void *strmap_get(const struct strmap *m, const char *key);
/* Inserts or replaces; *ret_old (if given) gets the replaced value or NULL.
 * 0 or -ENOMEM (the map is unchanged on error). */
int strmap_put(struct strmap *m, const char *key, void *value, void **ret_old);
/* Makes room for n more new keys: afterwards n puts of new keys into a
 * borrowed map cannot fail (a copying map still copies each key).
 * 0 or -ENOMEM (the map is unchanged). */
int strmap_reserve(struct strmap *m, size_t n);
/* Removes key; returns its value or NULL.  Never allocates. */
void *strmap_remove(struct strmap *m, const char *key);
/* Iteration: start with *iter = 0; returns 0 at the end.  The map must not
 * be changed during iteration except by strmap_remove of the current key. */
int strmap_next(const struct strmap *m, size_t *iter, const char **ret_key, void **ret_value);

#endif
