/* keymap — a hash index of items keyed by their own text (see
 * src/util/keymap.h).  Deletion leaves tombstones, cleared when the
 * table is rebuilt.  The table's size need not be a power of two: a hash
 * picks its first slot by multiplying down to the size, so a rebuild makes
 * the table exactly twice its items and the load stays between 1/2 and
 * 3/4. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/keymap.h"
#include "util/strmap.h"

#define MIN_CAP 8

static char tombstone[1];

struct keymap {
        keymap_key_fn *key_of;
        void **slots; /* NULL empty, tombstone deleted */
        size_t cap;
        size_t size; /* live items */
        size_t used; /* live + tombstones */
};

static size_t first_slot(const struct keymap *m, const char *key)
{
        return (size_t)(((unsigned __int128)strmap_hash(key) * m->cap) >> 64);
}

struct keymap *keymap_new(keymap_key_fn *key_of)
{
        struct keymap *m = calloc(1, sizeof(*m));

        if (!m)
                return NULL;
        m->key_of = key_of;
        m->cap = MIN_CAP;
        m->slots = calloc(m->cap, sizeof(*m->slots));
        if (!m->slots) {
                free(m);
                return NULL;
        }
        return m;
}

void keymap_free(struct keymap *m, void (*free_item)(void *))
{
        if (!m)
                return;
        for (size_t i = 0; free_item && i < m->cap; i++)
                if (m->slots[i] && m->slots[i] != tombstone)
                        free_item(m->slots[i]);
        free(m->slots);
        free(m);
}

size_t keymap_size(const struct keymap *m)
{
        return m->size;
}

size_t keymap_slots(const struct keymap *m)
{
        return m->cap;
}

/* The slot holding key, or NULL. */
static void **find(const struct keymap *m, const char *key)
{
        size_t i = first_slot(m, key);

        for (;;) {
                void **s = &m->slots[i];

                if (!*s)
                        return NULL;
                if (*s != tombstone && strcmp(m->key_of(*s), key) == 0)
                        return s;
                if (++i == m->cap)
                        i = 0;
        }
}

void *keymap_get(const struct keymap *m, const char *key)
{
        void **s = find(m, key);

        return s ? *s : NULL;
}

/* Moves the live items into a table of cap slots (tombstones go). */
static int rebuild(struct keymap *m, size_t cap)
{
        void **old = m->slots;
        size_t old_cap = m->cap;

        m->slots = calloc(cap, sizeof(*m->slots));
        if (!m->slots) {
                m->slots = old;
                return -ENOMEM;
        }
        m->cap = cap;
        for (size_t i = 0; i < old_cap; i++) {
                size_t j;

                if (!old[i] || old[i] == tombstone)
                        continue;
                j = first_slot(m, m->key_of(old[i]));
                while (m->slots[j])
                        if (++j == cap)
                                j = 0;
                m->slots[j] = old[i];
        }
        free(old);
        m->used = m->size;
        return 0;
}

int keymap_reserve(struct keymap *m, size_t n)
{
        size_t want;

        /* At most three quarters used, counting tombstones, so that a
         * probe always ends at an empty slot; rebuilt half full (which
         * also shrinks a table that deletions emptied). */
        if ((m->used + n) * 4 <= m->cap * 3)
                return 0;
        if (m->size + n > SIZE_MAX / 2 / sizeof(*m->slots))
                return -ENOMEM;
        want = 2 * (m->size + n);
        return rebuild(m, want < MIN_CAP ? MIN_CAP : want);
}

int keymap_put(struct keymap *m, void *item, void **ret_old)
{
        const char *key = m->key_of(item);
        void **s = find(m, key);
        size_t i;

        if (ret_old)
                *ret_old = s ? *s : NULL;
        if (s) {
                *s = item;
                return 0;
        }
        if (keymap_reserve(m, 1) < 0)
                return -ENOMEM;
        i = first_slot(m, key);
        while (m->slots[i] && m->slots[i] != tombstone)
                if (++i == m->cap)
                        i = 0;
        if (!m->slots[i])
                m->used++;
        m->slots[i] = item;
        m->size++;
        return 0;
}

void *keymap_remove(struct keymap *m, const char *key)
{
        void **s = find(m, key);
        void *item;

        if (!s)
                return NULL;
        item = *s;
        *s = tombstone;
        m->size--;
        /* Mostly empty: rebuilt smaller, so that memory follows the items
         * down as well as up (amortised O(1): the items fell to an eighth
         * of the slots since the last rebuild).  If that cannot be
         * allocated, the table stays as it is, which is as good. */
        if (m->size * 8 < m->cap && m->cap > MIN_CAP)
                (void)rebuild(m, m->size * 2 < MIN_CAP ? MIN_CAP : m->size * 2);
        return item;
}

int keymap_next(const struct keymap *m, size_t *iter, void **ret_item)
{
        while (*iter < m->cap) {
                void *item = m->slots[(*iter)++];

                if (!item || item == tombstone)
                        continue;
                *ret_item = item;
                return 1;
        }
        return 0;
}
