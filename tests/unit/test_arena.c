/* Unit tests: the segment arena (util/arena). */
#include <stdalign.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "failalloc.h"
#include "util/arena.h"
#include "unit.h"

#define SEG 4096

/* Blocks of every size up to a segment's eighth and beyond, over many
 * segments: aligned, apart, holding what was written; freed in a
 * shuffled order, every segment goes (nothing left allocated). */
START_TEST(test_blocks_apart_aligned_and_all_freed)
{
        enum { N = 600 };
        unsigned char *p[N];
        long live = failalloc_live();
        struct arena *a = arena_new(SEG);

        ck_assert_ptr_nonnull(a);
        for (int i = 0; i < N; i++) {
                size_t size = (size_t)(i * 7) % 700; /* above SEG / 8 too */

                p[i] = arena_alloc(a, size + 1);
                ck_assert_ptr_nonnull(p[i]);
                ck_assert_uint_eq((uintptr_t)p[i] % alignof(max_align_t), 0);
                memset(p[i], i & 0xff, size + 1);
        }
        for (int i = 0; i < N; i++) {
                size_t size = (size_t)(i * 7) % 700;

                for (size_t k = 0; k <= size; k++)
                        ck_assert_uint_eq(p[i][k], (unsigned)(i & 0xff));
        }
        for (int i = 0; i < N; i++)
                arena_free(p[(i * 7) % N]); /* 7 and N are coprime */
        arena_free(NULL);
        arena_close(a);
        if (failalloc_enabled())
                ck_assert_int_eq(failalloc_live(), live);
}
END_TEST

/* A segment whose blocks all went is carved again, not replaced; one
 * still in use outlives arena_close() and goes with its last block. */
START_TEST(test_segment_reused_and_outlives_close)
{
        struct arena *a;
        void *x, *y;
        long live, count;
        bool all = true;

        if (!failalloc_enabled())
                return; /* counts allocations */
        live = failalloc_live();
        a = arena_new(SEG);
        x = arena_alloc(a, 100);
        arena_free(x);
        failalloc_arm(LONG_MAX); /* counts, never fails */
        for (int i = 0; i < 1000; i++) {
                x = arena_alloc(a, 100);
                all &= x != NULL; /* no ck_assert here: Check allocates */
                arena_free(x);
        }
        count = failalloc_count();
        failalloc_arm(0);
        ck_assert(all);
        ck_assert_int_eq(count, 0);
        y = arena_alloc(a, 100);
        arena_close(a);
        ck_assert_int_eq(failalloc_live(), live + 1); /* the segment */
        memset(y, 1, 100);
        arena_free(y);
        ck_assert_int_eq(failalloc_live(), live);
}
END_TEST

/* The current segment emptied after a burst had carved more than a
 * quarter of it is freed (its pages go back); a block apart is freed by
 * arena_free too. */
START_TEST(test_burst_segment_freed_when_empty)
{
        enum { N = SEG / 4 / 64 + 2 };
        void *p[N], *apart;
        struct arena *a;
        long live, count;

        if (!failalloc_enabled())
                return;
        live = failalloc_live();
        a = arena_new(SEG);
        for (int i = 0; i < N; i++)
                ck_assert_ptr_nonnull(p[i] = arena_alloc(a, 48)); /* 64 with its header */
        ck_assert_int_eq(failalloc_live(), live + 2);             /* the arena, one segment */
        for (int i = 0; i < N; i++)
                arena_free(p[i]);
        ck_assert_int_eq(failalloc_live(), live + 1); /* the arena alone */
        failalloc_arm(LONG_MAX);
        p[0] = arena_alloc(a, 48);
        count = failalloc_count();
        failalloc_arm(0);
        ck_assert_ptr_nonnull(p[0]);
        ck_assert_int_eq(count, 1); /* a new segment */
        apart = arena_alloc_apart(10);
        ck_assert_ptr_nonnull(apart);
        ck_assert_uint_eq((uintptr_t)apart % alignof(max_align_t), 0);
        arena_close(a);
        arena_free(apart);
        arena_free(p[0]);
        ck_assert_int_eq(failalloc_live(), live);
}
END_TEST

/* Out of memory: no block, the arena as it was and usable after. */
START_TEST(test_out_of_memory)
{
        struct arena *a;
        void *x, *y;
        long live;

        if (!failalloc_enabled())
                return;
        live = failalloc_live();
        a = arena_new(SEG);
        failalloc_arm(1);
        ck_assert_ptr_null(arena_alloc(a, 10));       /* its first segment */
        failalloc_arm(1);
        ck_assert_ptr_null(arena_alloc(a, SEG));      /* a block of its own */
        failalloc_arm(0);
        x = arena_alloc(a, SEG / 2 - 64);
        ck_assert_ptr_nonnull(x);
        failalloc_arm(1);
        ck_assert_ptr_null(arena_alloc(a, SEG / 8 - 32)); /* needs a new segment */
        failalloc_arm(0);
        y = arena_alloc(a, SEG / 8 - 32);
        ck_assert_ptr_nonnull(y);
        arena_free(x);
        arena_free(y);
        arena_close(a);
        ck_assert_int_eq(failalloc_live(), live);
}
END_TEST

UNIT_MAIN(test_blocks_apart_aligned_and_all_freed, test_segment_reused_and_outlives_close,
          test_burst_segment_freed_when_empty, test_out_of_memory)
