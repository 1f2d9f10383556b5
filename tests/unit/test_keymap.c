/*
 * test_keymap — the index of items keyed by their own text
 * (src/util/keymap.h): put/get/replace/remove, tombstones, growth
 * and shrinking, iteration, reserve, and allocation failure.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "failalloc.h"
#include "util/keymap.h"
#include "unit.h"

#define N_ITEMS 10000

struct item {
        int value;
        char key[24];
};

static const char *item_key(const void *v)
{
        return ((const struct item *)v)->key;
}

static struct item *items;

static void make_items(void)
{
        items = calloc(N_ITEMS, sizeof(*items));
        ck_assert_ptr_nonnull(items);
        for (int i = 0; i < N_ITEMS; i++) {
                items[i].value = i;
                snprintf(items[i].key, sizeof(items[i].key), "key-%d", i);
        }
}

/* Every item in [lo, hi) is found, every other is not; iteration sees
 * exactly the items in [lo, hi), each once. */
static void expect_range(struct keymap *m, int lo, int hi)
{
        bool *seen = calloc(N_ITEMS, sizeof(*seen));
        size_t it = 0, n = 0;
        void *v;

        ck_assert_ptr_nonnull(seen);
        ck_assert_uint_eq(keymap_size(m), (size_t)(hi - lo));
        for (int i = 0; i < N_ITEMS; i++) {
                struct item *got = keymap_get(m, items[i].key);

                if (i >= lo && i < hi)
                        ck_assert_ptr_eq(got, &items[i]);
                else
                        ck_assert_ptr_null(got);
        }
        while (keymap_next(m, &it, &v)) {
                struct item *x = v;

                ck_assert(x->value >= lo && x->value < hi);
                ck_assert(!seen[x->value]);
                seen[x->value] = true;
                n++;
        }
        ck_assert_uint_eq(n, (size_t)(hi - lo));
        free(seen);
}

START_TEST(test_put_get_remove)
{
        struct keymap *m = keymap_new(item_key);
        void *old = &old;

        make_items();
        ck_assert_ptr_nonnull(m);
        expect_range(m, 0, 0);
        for (int i = 0; i < N_ITEMS; i++) {
                ck_assert_int_eq(keymap_put(m, &items[i], &old), 0);
                ck_assert_ptr_null(old);
        }
        expect_range(m, 0, N_ITEMS);
        /* Removing half leaves tombstones; the rest is still found. */
        for (int i = 0; i < N_ITEMS / 2; i++)
                ck_assert_ptr_eq(keymap_remove(m, items[i].key), &items[i]);
        ck_assert_ptr_null(keymap_remove(m, items[0].key));
        expect_range(m, N_ITEMS / 2, N_ITEMS);
        /* Put back: tombstones are reused or cleared by a rebuild. */
        for (int i = 0; i < N_ITEMS / 2; i++)
                ck_assert_int_eq(keymap_put(m, &items[i], NULL), 0);
        expect_range(m, 0, N_ITEMS);
        keymap_free(m, NULL);
        free(items);
}
END_TEST

/* A put of a present key replaces the item, in place, without allocating,
 * and hands back the old one; iteration may go on across it. */
START_TEST(test_replace)
{
        struct keymap *m = keymap_new(item_key);
        struct item twin[10];
        size_t it = 0, n = 0;
        void *old, *v;
        long count;
        int r = 0;

        make_items();
        for (int i = 0; i < 10; i++) {
                ck_assert_int_eq(keymap_put(m, &items[i], NULL), 0);
                twin[i] = items[i];
                twin[i].value = 100 + i;
        }
        failalloc_arm(LONG_MAX);
        while (keymap_next(m, &it, &v)) {
                struct item *x = v;

                if (x->value < 10)
                        r |= keymap_put(m, &twin[x->value], &old) | (old != x);
                n++;
        }
        count = failalloc_count();
        failalloc_arm(0);
        ck_assert_int_eq(r, 0);
        ck_assert_uint_eq(n, 10);
        ck_assert_int_eq(count, 0);
        ck_assert_uint_eq(keymap_size(m), 10);
        for (int i = 0; i < 10; i++)
                ck_assert_ptr_eq(keymap_get(m, items[i].key), &twin[i]);
        keymap_free(m, NULL);
        free(items);
}
END_TEST

/* Between half and three quarters full: a table grown for N items and
 * then emptied shrinks again when it is rebuilt. */
START_TEST(test_grows_and_shrinks)
{
        struct keymap *m = keymap_new(item_key);

        make_items();
        for (int i = 0; i < N_ITEMS; i++) {
                ck_assert_int_eq(keymap_put(m, &items[i], NULL), 0);
                ck_assert_msg(keymap_slots(m) * 3 >= keymap_size(m) * 4 && keymap_slots(m) <= 2 * keymap_size(m) + 8,
                              "%zu items in %zu slots", keymap_size(m), keymap_slots(m));
        }
        for (int i = 0; i < N_ITEMS - 1; i++)
                keymap_remove(m, items[i].key);
        /* Churn on one key fills the table with tombstones until it is
         * rebuilt around the one live item. */
        for (int round = 0; round < 3 * N_ITEMS; round++) {
                ck_assert_int_eq(keymap_put(m, &items[round % 2], NULL), 0);
                ck_assert_ptr_eq(keymap_remove(m, items[round % 2].key), &items[round % 2]);
        }
        expect_range(m, N_ITEMS - 1, N_ITEMS);
        ck_assert_uint_le(keymap_slots(m), 8);
        keymap_free(m, NULL);
        free(items);
}
END_TEST

/* After keymap_reserve(n), n puts of new keys allocate nothing; a failed
 * put or reserve leaves the map as it was. */
START_TEST(test_reserve_and_failure)
{
        struct keymap *m = keymap_new(item_key);
        long count;
        int r = 0;

        make_items();
        ck_assert_int_eq(keymap_reserve(m, 1000), 0);
        failalloc_arm(LONG_MAX);
        for (int i = 0; i < 1000; i++)
                r |= keymap_put(m, &items[i], NULL);
        count = failalloc_count();
        failalloc_arm(0);
        ck_assert_int_eq(r, 0);
        ck_assert_int_eq(count, 0);
        expect_range(m, 0, 1000);
        if (failalloc_enabled()) {
                /* Fill to the next rebuild, then fail it. */
                int i = 1000;

                for (;; i++) {
                        failalloc_arm(1);
                        r = keymap_put(m, &items[i], NULL);
                        failalloc_arm(0);
                        if (r < 0)
                                break;
                }
                ck_assert_int_eq(r, -ENOMEM);
                expect_range(m, 0, i);
                failalloc_arm(1);
                r = keymap_reserve(m, 5000);
                failalloc_arm(0);
                ck_assert_int_eq(r, -ENOMEM);
                expect_range(m, 0, i);
                ck_assert_int_eq(keymap_put(m, &items[i], NULL), 0);
                expect_range(m, 0, i + 1);
        }
        keymap_free(m, NULL);
        free(items);
}
END_TEST

static int freed;

static void count_free(void *v)
{
        (void)v;
        freed++;
}

START_TEST(test_free_items)
{
        struct keymap *m = keymap_new(item_key);

        make_items();
        for (int i = 0; i < 100; i++)
                ck_assert_int_eq(keymap_put(m, &items[i], NULL), 0);
        keymap_remove(m, items[5].key);
        freed = 0;
        keymap_free(m, count_free);
        ck_assert_int_eq(freed, 99);
        keymap_free(NULL, count_free);
        free(items);
}
END_TEST

UNIT_MAIN(test_put_get_remove, test_replace, test_grows_and_shrinks, test_reserve_and_failure, test_free_items)
