/*
 * keymap — a hash index of items that carry their own string key (open
 * addressing, linear probing).
 *
 * Each slot is one pointer to an item; the item's key is read through the
 * key_of function given at creation (a pod's UID, a file's path), so the
 * key is stored nowhere but in the item.  That halves what a strmap that
 * borrows its keys costs (16 bytes a slot) for the daemon's per-pod
 * indexes.
 *
 * Owns: the slots.  Never: the items (the caller frees them, or passes a
 * destructor to keymap_free()).  An item's key must not change while the
 * item is in the map.
 * Its users share their names instead of copying them: a pod's UID and
 * key are read from the pod's body (src/core/pod.h explains that layout),
 * a file's path from its record, a keyref's key from the keyref itself.
 * The map is only as valid as those items: take an item out before its
 * key's memory goes.
 * Cost: O(1) expected per operation, plus key_of and a string compare per
 * probe.  The table is rebuilt at twice its items when it is three
 * quarters full, so it takes 10.7 to 16 bytes per item, and smaller when
 * it is an eighth full.
 */
#ifndef PODMUX_KEYMAP_H
#define PODMUX_KEYMAP_H

#include <stddef.h>

struct keymap;

typedef const char *keymap_key_fn(const void *item);

struct keymap *keymap_new(keymap_key_fn *key_of);              /* NULL on ENOMEM */
void keymap_free(struct keymap *m, void (*free_item)(void *)); /* NULL-safe */
size_t keymap_size(const struct keymap *m);
size_t keymap_slots(const struct keymap *m);               /* the table's size (tests only) */
void *keymap_get(const struct keymap *m, const char *key); /* NULL if absent */
/* Puts item under its key, in place of the item there (given in *ret_old
 * if asked, else NULL).  Replacing never allocates.  0 or -ENOMEM (the map
 * unchanged). */
int keymap_put(struct keymap *m, void *item, void **ret_old);
/* Makes room for n more new keys: n puts after it cannot fail.  0 or
 * -ENOMEM (the map unchanged). */
int keymap_reserve(struct keymap *m, size_t n);
/* Takes key's item out and returns it (NULL if absent).  Cannot fail: a
 * table left an eighth full is rebuilt smaller, if memory allows. */
void *keymap_remove(struct keymap *m, const char *key);
/* Iteration: *iter starts at 0; 1 and the next item, or 0 at the end.  The
 * map must not change meanwhile, except that keymap_put() may replace an
 * item with one of the same key. */
int keymap_next(const struct keymap *m, size_t *iter, void **ret_item);

#endif
