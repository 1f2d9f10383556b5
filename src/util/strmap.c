/* strmap — string-keyed open-addressing hash map (see
 * src/util/strmap.h).  Deletion uses tombstones, cleared on growth. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/strmap.h"

static char tombstone[1];

struct slot {
        char *key; /* NULL empty, tombstone deleted */
        void *value;
};

struct strmap {
        bool borrowed; /* keys are the caller's, not copies */
        struct slot *slots;
        size_t cap;  /* power of two */
        size_t size; /* live entries */
        size_t used; /* live + tombstones */
};

size_t strmap_hash(const char *s)
{
        /* FNV-1a 64. */
        uint64_t h = 0xcbf29ce484222325ULL;

        for (; *s; s++) {
                h ^= (unsigned char)*s;
                h *= 0x100000001b3ULL;
        }
        return (size_t)h;
}

static struct strmap *map_new(bool borrowed)
{
        struct strmap *m = calloc(1, sizeof(*m));

        if (!m)
                return NULL;
        m->borrowed = borrowed;
        m->cap = 16;
        m->slots = calloc(m->cap, sizeof(*m->slots));
        if (!m->slots) {
                free(m);
                return NULL;
        }
        return m;
}

struct strmap *strmap_new(void)
{
        return map_new(false);
}

struct strmap *strmap_new_borrowed(void)
{
        return map_new(true);
}

void strmap_free(struct strmap *m, void (*free_value)(void *))
{
        if (!m)
                return;
        for (size_t i = 0; i < m->cap; i++) {
                struct slot *s = &m->slots[i];

                if (!s->key || s->key == tombstone)
                        continue;
                if (free_value)
                        free_value(s->value);
                if (!m->borrowed)
                        free(s->key);
        }
        free(m->slots);
        free(m);
}

size_t strmap_size(const struct strmap *m)
{
        return m->size;
}

static struct slot *find(const struct strmap *m, const char *key)
{
        size_t mask = m->cap - 1, i = strmap_hash(key) & mask;

        for (;;) {
                struct slot *s = &m->slots[i];

                if (!s->key)
                        return NULL;
                if (s->key != tombstone && strcmp(s->key, key) == 0)
                        return s;
                i = (i + 1) & mask;
        }
}

void *strmap_get(const struct strmap *m, const char *key)
{
        struct slot *s = find(m, key);

        return s ? s->value : NULL;
}

/* Moves the live entries into a table of cap slots (tombstones go). */
static int rehash(struct strmap *m, size_t cap)
{
        struct slot *slots = calloc(cap, sizeof(*slots));

        if (!slots)
                return -ENOMEM;
        for (size_t i = 0; i < m->cap; i++) {
                struct slot *s = &m->slots[i];
                size_t j;

                if (!s->key || s->key == tombstone)
                        continue;
                j = strmap_hash(s->key) & (cap - 1);
                while (slots[j].key)
                        j = (j + 1) & (cap - 1);
                slots[j] = *s;
        }
        free(m->slots);
        m->slots = slots;
        m->cap = cap;
        m->used = m->size;
        return 0;
}

/* Whether n more keys fit under the 70% load bound. */
static bool fits(const struct strmap *m, size_t n)
{
        return (m->used + n) * 10 <= m->cap * 7;
}

static int grow(struct strmap *m)
{
        return rehash(m, m->size * 2 >= m->cap ? m->cap * 2 : m->cap);
}

int strmap_reserve(struct strmap *m, size_t n)
{
        size_t cap = m->cap;

        if (fits(m, n + 1))
                return 0;
        while ((m->size + n + 1) * 10 > cap * 7)
                cap *= 2;
        return rehash(m, cap);
}

int strmap_put(struct strmap *m, const char *key, void *value, void **ret_old)
{
        struct slot *s = find(m, key);
        size_t mask, i;
        char *k;

        if (s) {
                if (ret_old)
                        *ret_old = s->value;
                s->value = value;
                if (m->borrowed)
                        s->key = (char *)key;
                return 0;
        }
        if (!fits(m, 1) && grow(m) < 0)
                return -ENOMEM;
        k = m->borrowed ? (char *)key : strdup(key);
        if (!k)
                return -ENOMEM;
        mask = m->cap - 1;
        i = strmap_hash(key) & mask;
        while (m->slots[i].key && m->slots[i].key != tombstone)
                i = (i + 1) & mask;
        if (!m->slots[i].key)
                m->used++;
        m->slots[i].key = k;
        m->slots[i].value = value;
        m->size++;
        if (ret_old)
                *ret_old = NULL;
        return 0;
}

void *strmap_remove(struct strmap *m, const char *key)
{
        struct slot *s = find(m, key);
        void *v;

        if (!s)
                return NULL;
        v = s->value;
        if (!m->borrowed)
                free(s->key);
        s->key = tombstone;
        s->value = NULL;
        m->size--;
        return v;
}

int strmap_next(const struct strmap *m, size_t *iter, const char **ret_key,
                void **ret_value)
{
        while (*iter < m->cap) {
                struct slot *s = &m->slots[(*iter)++];

                if (!s->key || s->key == tombstone)
                        continue;
                if (ret_key)
                        *ret_key = s->key;
                if (ret_value)
                        *ret_value = s->value;
                return 1;
        }
        return 0;
}
