/* Unit tests: the checked array growth (util/grow), overflow and
 * allocation failure included. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "util/grow.h"
#include "failalloc.h"
#include "unit.h"

/* first, then doubling until need fits; no call when it already fits. */
START_TEST(test_capacities)
{
        int *a = NULL;
        size_t cap = 0;

        ck_assert_int_eq(GROW(a, cap, 0, 8), 0);
        ck_assert_ptr_null(a);
        ck_assert_uint_eq(cap, 0);
        ck_assert_int_eq(GROW(a, cap, 1, 8), 0);
        ck_assert_ptr_nonnull(a);
        ck_assert_uint_eq(cap, 8);
        a[7] = 7;
        ck_assert_int_eq(GROW(a, cap, 8, 8), 0);
        ck_assert_uint_eq(cap, 8);
        ck_assert_int_eq(GROW(a, cap, 9, 8), 0);
        ck_assert_uint_eq(cap, 16);
        ck_assert_int_eq(a[7], 7); /* kept */
        ck_assert_int_eq(GROW(a, cap, 100, 8), 0);
        ck_assert_uint_eq(cap, 128);
        a[99] = 1;
        free(a);
        /* A first capacity above need is still the first block; first 0
         * is taken as 1. */
        a = NULL;
        cap = 0;
        ck_assert_int_eq(GROW(a, cap, 3, 0), 0);
        ck_assert_uint_eq(cap, 4);
        free(a);
}
END_TEST

/* need * elem beyond size_t: -ENOMEM, nothing changed.  Doubling past
 * what fits falls back to need exactly. */
START_TEST(test_overflow)
{
        char *a = NULL;
        int *b = NULL;
        size_t cap = 0, bcap = 0;

        ck_assert_int_eq(GROW(b, bcap, SIZE_MAX / sizeof(int) + 1, 8), -ENOMEM);
        ck_assert_ptr_null(b);
        ck_assert_uint_eq(bcap, 0);
        ck_assert_int_eq(GROW(b, bcap, 4, 8), 0);
        ck_assert_int_eq(GROW(b, bcap, SIZE_MAX, 8), -ENOMEM);
        ck_assert_ptr_nonnull(b);
        ck_assert_uint_eq(bcap, 8);
        free(b);
        /* Bytes: a capacity over SIZE_MAX / 2 cannot double; need is
         * asked for exactly (and that much memory is not there; a
         * sanitizer would abort on the size instead of returning NULL). */
        if (!failalloc_enabled())
                return;
        cap = SIZE_MAX / 2 + 2;
        ck_assert_int_eq(grow((void **)&a, &cap, SIZE_MAX, 1, 1), -ENOMEM);
        ck_assert_uint_eq(cap, SIZE_MAX / 2 + 2);
        ck_assert_ptr_null(a);
}
END_TEST

/* An allocation that fails leaves the array and its capacity as they
 * were, still the caller's; the next try succeeds. */
START_TEST(test_allocation_failure)
{
        int *a = NULL;
        size_t cap = 0;

        if (!failalloc_enabled())
                return;
        failalloc_arm(1);
        ck_assert_int_eq(GROW(a, cap, 1, 4), -ENOMEM);
        failalloc_arm(0);
        ck_assert_ptr_null(a);
        ck_assert_uint_eq(cap, 0);
        ck_assert_int_eq(GROW(a, cap, 4, 4), 0);
        a[3] = 3;
        failalloc_arm(1);
        ck_assert_int_eq(GROW(a, cap, 5, 4), -ENOMEM);
        failalloc_arm(0);
        ck_assert_uint_eq(cap, 4);
        ck_assert_int_eq(a[3], 3);
        ck_assert_int_eq(GROW(a, cap, 5, 4), 0);
        ck_assert_uint_eq(cap, 8);
        ck_assert_int_eq(a[3], 3);
        free(a);
}
END_TEST

UNIT_MAIN(test_capacities, test_overflow, test_allocation_failure)
