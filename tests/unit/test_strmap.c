/*
 * test_strmap — the string-keyed hash map (src/util/strmap.h):
 * put/get/replace/remove, tombstones and growth, iteration.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/strmap.h"
#include "unit.h"

#define N_KEYS 10000

static void key_of(size_t i, char *out, size_t size)
{
        snprintf(out, size, "key-%zu", i);
}

/* Values are the index + 1 (never NULL). */
static void *val_of(size_t i)
{
        return (void *)(uintptr_t)(i + 1);
}

static size_t index_of_key(const char *k)
{
        char *end = NULL;
        unsigned long long v;

        ck_assert_msg(strncmp(k, "key-", 4) == 0, "unexpected key \"%s\"", k);
        v = strtoull(k + 4, &end, 10);
        ck_assert_msg(end && *end == '\0', "unexpected key \"%s\"", k);
        return (size_t)v;
}

static struct strmap *new_map(void)
{
        struct strmap *m = strmap_new();

        ck_assert_ptr_nonnull(m);
        return m;
}

START_TEST(test_put_get_replace_remove)
{
        struct strmap *m = new_map();
        void *old = (void *)1;
        int a = 1, b = 2, c = 3;
        char key[8] = "abc";

        ck_assert_uint_eq(strmap_size(m), 0);
        ck_assert_ptr_null(strmap_get(m, "abc"));
        ck_assert_ptr_null(strmap_remove(m, "abc"));

        /* insert: *ret_old = NULL */
        ck_assert_int_eq(strmap_put(m, key, &a, &old), 0);
        ck_assert_ptr_null(old);
        ck_assert_uint_eq(strmap_size(m), 1);
        /* the map keeps its own copy of the key */
        memcpy(key, "xyz", 4);
        ck_assert_ptr_eq(strmap_get(m, "abc"), &a);
        ck_assert_ptr_null(strmap_get(m, "xyz"));
        ck_assert_ptr_null(strmap_get(m, "ab"));
        ck_assert_ptr_null(strmap_get(m, "abcd"));

        /* replace: old value back, size unchanged */
        ck_assert_int_eq(strmap_put(m, "abc", &b, &old), 0);
        ck_assert_ptr_eq(old, &a);
        ck_assert_uint_eq(strmap_size(m), 1);
        ck_assert_ptr_eq(strmap_get(m, "abc"), &b);
        /* ret_old may be NULL */
        ck_assert_int_eq(strmap_put(m, "abc", &c, NULL), 0);
        ck_assert_ptr_eq(strmap_get(m, "abc"), &c);

        /* the empty key and keys differing in one byte */
        ck_assert_int_eq(strmap_put(m, "", &a, NULL), 0);
        ck_assert_int_eq(strmap_put(m, "abC", &b, NULL), 0);
        ck_assert_uint_eq(strmap_size(m), 3);
        ck_assert_ptr_eq(strmap_get(m, ""), &a);
        ck_assert_ptr_eq(strmap_get(m, "abC"), &b);
        ck_assert_ptr_eq(strmap_get(m, "abc"), &c);

        /* remove returns the value; removing again returns NULL */
        ck_assert_ptr_eq(strmap_remove(m, "abc"), &c);
        ck_assert_ptr_null(strmap_remove(m, "abc"));
        ck_assert_ptr_null(strmap_get(m, "abc"));
        ck_assert_uint_eq(strmap_size(m), 2);
        ck_assert_ptr_eq(strmap_get(m, "abC"), &b);
        /* put after remove: a fresh insert */
        old = (void *)1;
        ck_assert_int_eq(strmap_put(m, "abc", &a, &old), 0);
        ck_assert_ptr_null(old);
        ck_assert_ptr_eq(strmap_get(m, "abc"), &a);
        ck_assert_uint_eq(strmap_size(m), 3);
        strmap_free(m, NULL);
        strmap_free(NULL, NULL);
}
END_TEST

START_TEST(test_many_keys_growth_and_tombstones)
{
        struct strmap *m = new_map();
        char key[32];

        for (size_t i = 0; i < N_KEYS; i++) {
                void *old = (void *)1;

                key_of(i, key, sizeof(key));
                ck_assert_int_eq(strmap_put(m, key, val_of(i), &old), 0);
                ck_assert_msg(old == NULL, "insert of %s returned old %p", key, old);
                ck_assert_uint_eq(strmap_size(m), i + 1);
        }
        for (size_t i = 0; i < N_KEYS; i++) {
                key_of(i, key, sizeof(key));
                ck_assert_msg(strmap_get(m, key) == val_of(i), "get(%s) = %p, want %p", key,
                              strmap_get(m, key), val_of(i));
        }
        ck_assert_ptr_null(strmap_get(m, "key-10000"));

        /* remove every other key: tombstones in every probe chain */
        for (size_t i = 0; i < N_KEYS; i += 2) {
                key_of(i, key, sizeof(key));
                ck_assert_msg(strmap_remove(m, key) == val_of(i), "remove(%s)", key);
        }
        ck_assert_uint_eq(strmap_size(m), N_KEYS / 2);
        for (size_t i = 0; i < N_KEYS; i++) {
                void *want = i % 2 ? val_of(i) : NULL;

                key_of(i, key, sizeof(key));
                ck_assert_msg(strmap_get(m, key) == want, "after removal get(%s) = %p, want %p",
                              key, strmap_get(m, key), want);
        }

        /* reinsert them with new values (reusing tombstones), and add as
         * many new keys again (growth with tombstones present) */
        for (size_t i = 0; i < N_KEYS; i += 2) {
                key_of(i, key, sizeof(key));
                ck_assert_int_eq(strmap_put(m, key, val_of(i + N_KEYS), NULL), 0);
        }
        for (size_t i = N_KEYS; i < 2 * N_KEYS; i++) {
                key_of(i, key, sizeof(key));
                ck_assert_int_eq(strmap_put(m, key, val_of(i), NULL), 0);
        }
        ck_assert_uint_eq(strmap_size(m), 2 * N_KEYS);
        for (size_t i = 0; i < 2 * N_KEYS; i++) {
                void *want = i < N_KEYS && i % 2 == 0 ? val_of(i + N_KEYS) : val_of(i);

                key_of(i, key, sizeof(key));
                ck_assert_msg(strmap_get(m, key) == want, "get(%s) = %p, want %p", key,
                              strmap_get(m, key), want);
        }

        /* remove everything, then the map is empty and usable */
        for (size_t i = 0; i < 2 * N_KEYS; i++) {
                key_of(i, key, sizeof(key));
                ck_assert_ptr_nonnull(strmap_remove(m, key));
        }
        ck_assert_uint_eq(strmap_size(m), 0);
        {
                size_t it = 0;

                ck_assert_int_eq(strmap_next(m, &it, NULL, NULL), 0);
        }
        ck_assert_int_eq(strmap_put(m, "again", val_of(7), NULL), 0);
        ck_assert_ptr_eq(strmap_get(m, "again"), val_of(7));
        strmap_free(m, NULL);
}
END_TEST

/* Insert/remove churn on a small live set: tombstones pile up without the
 * live size growing; lookups of absent keys must still terminate and the
 * map must not grow without bound. */
START_TEST(test_tombstone_churn)
{
        struct strmap *m = new_map();
        char key[32];

        for (size_t round = 0; round < 20 * N_KEYS; round++) {
                key_of(round, key, sizeof(key));
                ck_assert_int_eq(strmap_put(m, key, val_of(round), NULL), 0);
                if (round >= 8) {
                        key_of(round - 8, key, sizeof(key));
                        ck_assert_ptr_eq(strmap_remove(m, key), val_of(round - 8));
                }
                ck_assert_ptr_null(strmap_get(m, "never-inserted"));
        }
        ck_assert_uint_eq(strmap_size(m), 8);
        for (size_t i = 20 * N_KEYS - 8; i < 20 * N_KEYS; i++) {
                key_of(i, key, sizeof(key));
                ck_assert_ptr_eq(strmap_get(m, key), val_of(i));
        }
        {
                /* iteration cost is bounded by the table size: count slots
                 * visited via the iterator position */
                size_t it = 0, n = 0;

                while (strmap_next(m, &it, NULL, NULL))
                        n++;
                ck_assert_uint_eq(n, 8);
                ck_assert_msg(it <= 1024, "table of %zu slots for 8 live keys", it);
        }
        strmap_free(m, NULL);
}
END_TEST

START_TEST(test_iteration_sees_every_key_once)
{
        struct strmap *m = new_map();
        unsigned char *seen = calloc(N_KEYS, 1);
        char key[32];
        size_t it = 0, n = 0;
        const char *k;
        void *v;

        ck_assert_ptr_nonnull(seen);
        /* an empty map */
        ck_assert_int_eq(strmap_next(m, &it, &k, &v), 0);
        ck_assert_int_eq(strmap_next(m, &it, &k, &v), 0);

        for (size_t i = 0; i < N_KEYS; i++) {
                key_of(i, key, sizeof(key));
                ck_assert_int_eq(strmap_put(m, key, val_of(i), NULL), 0);
        }
        /* with some tombstones in the table */
        for (size_t i = 0; i < N_KEYS; i += 7) {
                key_of(i, key, sizeof(key));
                ck_assert_ptr_nonnull(strmap_remove(m, key));
        }
        it = 0;
        while (strmap_next(m, &it, &k, &v)) {
                size_t i = index_of_key(k);

                ck_assert_msg(i < N_KEYS && i % 7 != 0, "iteration returned removed key %s", k);
                ck_assert_msg(!seen[i], "key %s returned twice", k);
                ck_assert_msg(v == val_of(i), "key %s with value %p, want %p", k, v, val_of(i));
                seen[i] = 1;
                n++;
        }
        ck_assert_uint_eq(n, strmap_size(m));
        for (size_t i = 0; i < N_KEYS; i++)
                ck_assert_msg(seen[i] == (i % 7 != 0), "key-%zu seen %d", i, seen[i]);
        /* finished iterators stay finished */
        ck_assert_int_eq(strmap_next(m, &it, &k, &v), 0);
        /* key and value outputs are optional */
        it = 0;
        n = 0;
        while (strmap_next(m, &it, NULL, NULL))
                n++;
        ck_assert_uint_eq(n, strmap_size(m));
        free(seen);
        strmap_free(m, NULL);
}
END_TEST

START_TEST(test_remove_during_iteration)
{
        struct strmap *m = new_map();
        unsigned char *seen = calloc(N_KEYS, 1);
        char key[32];
        size_t it = 0, visited = 0;
        const char *k;
        void *v;

        ck_assert_ptr_nonnull(seen);
        for (size_t i = 0; i < N_KEYS; i++) {
                key_of(i, key, sizeof(key));
                ck_assert_int_eq(strmap_put(m, key, val_of(i), NULL), 0);
        }
        /* remove the current key whenever it is odd */
        while (strmap_next(m, &it, &k, &v)) {
                size_t i = index_of_key(k);

                ck_assert_msg(!seen[i], "key %s returned twice", k);
                seen[i] = 1;
                visited++;
                if (i % 2) {
                        /* k is the map's copy: copy it before removing */
                        snprintf(key, sizeof(key), "%s", k);
                        ck_assert_ptr_eq(strmap_remove(m, key), v);
                }
        }
        ck_assert_uint_eq(visited, N_KEYS);
        ck_assert_uint_eq(strmap_size(m), N_KEYS / 2);
        for (size_t i = 0; i < N_KEYS; i++) {
                key_of(i, key, sizeof(key));
                ck_assert_msg(strmap_get(m, key) == (i % 2 ? NULL : val_of(i)),
                              "after removal during iteration get(%s) = %p", key,
                              strmap_get(m, key));
        }
        /* remove everything during a second pass */
        it = 0;
        while (strmap_next(m, &it, &k, &v)) {
                snprintf(key, sizeof(key), "%s", k);
                ck_assert_ptr_eq(strmap_remove(m, key), v);
        }
        ck_assert_uint_eq(strmap_size(m), 0);
        free(seen);
        strmap_free(m, NULL);
}
END_TEST

static size_t freed;

static void count_free(void *v)
{
        freed++;
        free(v);
}

START_TEST(test_free_with_destructor)
{
        struct strmap *m = new_map();
        char key[32];

        freed = 0;
        for (size_t i = 0; i < 100; i++) {
                char *v = strdup("value");

                ck_assert_ptr_nonnull(v);
                key_of(i, key, sizeof(key));
                ck_assert_int_eq(strmap_put(m, key, v, NULL), 0);
        }
        /* removed values are the caller's again */
        for (size_t i = 0; i < 100; i += 3) {
                key_of(i, key, sizeof(key));
                free(strmap_remove(m, key));
        }
        /* every remaining value freed once (ASan checks leaks and double
         * frees) */
        strmap_free(m, count_free);
        ck_assert_uint_eq(freed, 100 - 34);
}
END_TEST

UNIT_MAIN(test_put_get_replace_remove, test_many_keys_growth_and_tombstones, test_tombstone_churn,
          test_iteration_sees_every_key_once, test_remove_during_iteration,
          test_free_with_destructor)
