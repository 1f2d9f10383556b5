/* arena — see src/util/arena.h. */
#include "util/arena.h"

#include <stdalign.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

struct seg {
        struct arena *owner; /* the arena carving it; NULL once it is not */
        size_t live;         /* blocks handed out and not yet freed */
        size_t used;         /* bytes of data carved */
        size_t size;         /* bytes of data */
        alignas(max_align_t) unsigned char data[];
};

/* Before each block: its segment (NULL: the block is an allocation of its
 * own). */
struct block {
        struct seg *seg;
        alignas(max_align_t) unsigned char data[];
};

struct arena {
        size_t seg_size;
        struct seg *cur; /* the segment blocks are carved from, or NULL */
};

#define ALIGN_UP(n) (((n) + alignof(max_align_t) - 1) & ~(alignof(max_align_t) - 1))

struct arena *arena_new(size_t seg_size)
{
        struct arena *a = calloc(1, sizeof(*a));

        if (a)
                a->seg_size = seg_size < 4096 ? 4096 : seg_size;
        return a;
}

/* The current segment is let go: freed now if nothing lives in it, else
 * by the free of its last block. */
static void retire(struct arena *a)
{
        struct seg *s = a->cur;

        a->cur = NULL;
        if (!s)
                return;
        if (s->live == 0)
                free(s);
        else
                s->owner = NULL;
}

void arena_close(struct arena *a)
{
        if (!a)
                return;
        retire(a);
        free(a);
}

void *arena_alloc_apart(size_t size)
{
        struct block *b;

        if (size > SIZE_MAX / 2)
                return NULL;
        b = malloc(sizeof(struct block) + size);
        if (!b)
                return NULL;
        b->seg = NULL;
        return b->data;
}

void *arena_alloc(struct arena *a, size_t size)
{
        size_t need;
        struct block *b;

        if (size > SIZE_MAX / 2)
                return NULL;
        need = ALIGN_UP(sizeof(struct block) + size);
        if (need > a->seg_size / 8)
                return arena_alloc_apart(size);
        if (!a->cur || a->cur->size - a->cur->used < need) {
                struct seg *s = malloc(sizeof(*s) + a->seg_size);

                if (!s)
                        return NULL;
                retire(a);
                s->owner = a;
                s->live = s->used = 0;
                s->size = a->seg_size;
                a->cur = s;
        }
        b = (struct block *)(a->cur->data + a->cur->used);
        a->cur->used += need;
        a->cur->live++;
        b->seg = a->cur;
        return b->data;
}

void arena_free(void *p)
{
        struct block *b;
        struct seg *s;

        if (!p)
                return;
        b = (struct block *)((unsigned char *)p - offsetof(struct block, data));
        s = b->seg;
        if (!s) {
                free(b);
                return;
        }
        if (--s->live > 0)
                return;
        if (s->owner && s->used <= s->size / 4) {
                s->used = 0; /* the current segment, empty: carved again */
                return;
        }
        /* A segment let go, or the current one emptied after a burst had
         * filled it: its pages go back, and a new one is made when needed,
         * so steady traffic keeps one lightly used segment. */
        if (s->owner)
                s->owner->cur = NULL;
        free(s);
}
