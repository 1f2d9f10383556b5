/* Unit tests: the circular FIFO (util/ring). */
#include <errno.h>
#include <stdbool.h>

#include "failalloc.h"
#include "util/ring.h"
#include "unit.h"

/* The ring holds exactly first, first + 1, ..., first + n - 1. */
static void holds(const struct ring *r, int first, size_t n)
{
        ck_assert_uint_eq(r->len, n);
        for (size_t i = 0; i < n; i++)
                ck_assert_int_eq(*(int *)ring_at(r, i), first + (int)i);
}

/* Wrapped around many times, grown while wrapped: order kept. */
START_TEST(test_fifo_order_through_wraps_and_growth)
{
        struct ring r = RING_INIT(int);
        int next = 0, oldest = 0;

        for (int round = 0; round < 50; round++) {
                for (int k = 0; k < 5 + round % 7; k++) {
                        ck_assert_int_eq(ring_push(&r, &next), 0);
                        next++;
                }
                for (int k = 0; k < 3 + round % 5 && r.len > 0; k++) {
                        ring_pop(&r);
                        oldest++;
                }
                holds(&r, oldest, (size_t)(next - oldest));
        }
        ck_assert_uint_eq(r.cap & (r.cap - 1), 0); /* a power of two */
        ring_free(&r);
        ck_assert_uint_eq(r.len, 0);
        ring_free(&r);  /* twice: fine */
        ring_free(NULL);
}
END_TEST

/* What is reserved is enough: pushes up to it never allocate. */
START_TEST(test_reserve_then_push_never_allocates)
{
        struct ring r = RING_INIT(int);
        int v = 7, bad = 0;
        bool failed = false;

        ck_assert_int_eq(ring_reserve(&r, 100), 0);
        ck_assert_uint_ge(r.cap, 100);

        /* (No assertion inside: Check's own bookkeeping allocates.) */
        if (failalloc_enabled())
                failalloc_arm(1);
        for (int i = 0; i < 100; i++)
                bad += ring_push(&r, &v) != 0;
        if (failalloc_enabled()) {
                failed = failalloc_failed();
                failalloc_arm(0);
        }
        ck_assert_int_eq(bad, 0);
        ck_assert(!failed);
        ring_free(&r);
}
END_TEST

/* A push that cannot grow the block fails and changes nothing. */
START_TEST(test_failed_growth_changes_nothing)
{
        struct ring r = RING_INIT(int);
        int next = 0;

        if (!failalloc_enabled())
                return;
        while (r.len < 8 || r.len < r.cap) {
                ck_assert_int_eq(ring_push(&r, &next), 0);
                next++;
        }
        ring_pop(&r); /* wrapped: the oldest is not at 0 */
        ck_assert_int_eq(ring_push(&r, &next), 0);
        next++;
        failalloc_arm(1);
        ck_assert_int_eq(ring_push(&r, &next), -ENOMEM);
        failalloc_arm(0);
        holds(&r, 1, (size_t)next - 1);
        ck_assert_int_eq(ring_push(&r, &next), 0);
        holds(&r, 1, (size_t)next);
        ring_free(&r);
}
END_TEST

UNIT_MAIN(test_fifo_order_through_wraps_and_growth, test_reserve_then_push_never_allocates,
          test_failed_growth_changes_nothing)
