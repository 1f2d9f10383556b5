/*
 * Unit tests: the plugin manager's desired and actual states of world
 * (doc/plugin-manager.md sections 6 and 7), in the spirit of the kubelet's
 * pluginmanager/cache tests.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/plugin_cache.h"
#include "unit.h"

#define SOCK_A "/var/lib/kubelet/plugins_registry/a.sock"
#define SOCK_B "/var/lib/kubelet/plugins_registry/b/b-reg.sock"
#define SOCK_C "/var/lib/kubelet/plugins_registry/c.sock"

static struct plugin_cache *cache_new(void)
{
        struct plugin_cache *c = NULL;

        ck_assert_int_eq(plugin_cache_new(&c), 0);
        ck_assert_ptr_nonnull(c);
        return c;
}

static size_t dsw_count(const struct plugin_cache *c)
{
        const struct plugin_dsw_entry **l = NULL;
        size_t n = 99;

        ck_assert_int_eq(plugin_dsw_list(c, &l, &n), 0);
        free(l);
        return n;
}

static size_t asw_count(const struct plugin_cache *c)
{
        const struct plugin_asw_entry **l = NULL;
        size_t n = 99;

        ck_assert_int_eq(plugin_asw_list(c, &l, &n), 0);
        free(l);
        return n;
}

static struct plugin_asw_entry asw_entry(const char *path, uint64_t generation, const char *name)
{
        static char *versions[] = {"v1beta1", "v1beta2"};
        struct plugin_asw_entry e = {
                .path = (char *)path,
                .generation = generation,
                .timestamp = 1700000000000000ull,
                .type = "DevicePlugin",
                .name = (char *)name,
                .endpoint = (char *)path,
                .versions = versions,
                .n_versions = 2,
        };

        return e;
}

/* ---- desired state of world ------------------------------------------------ */

START_TEST(test_dsw_add_new_plugin)
{
        struct plugin_cache *c = cache_new();
        const struct plugin_dsw_entry *d;

        ck_assert_uint_eq(dsw_count(c), 0);
        ck_assert_ptr_null(plugin_dsw_get(c, SOCK_A));
        ck_assert_int_eq(plugin_dsw_add_or_update(c, SOCK_A, 1234), 0);
        ck_assert_uint_eq(dsw_count(c), 1);
        d = plugin_dsw_get(c, SOCK_A);
        ck_assert_ptr_nonnull(d);
        ck_assert_str_eq(d->path, SOCK_A);
        ck_assert_uint_eq(d->timestamp, 1234);
        ck_assert_uint_ne(d->generation, 0);
        plugin_cache_free(c);
}
END_TEST

/* Re-adding a path makes it look like a new plugin instance: a fresh
 * generation every time, even when the clock reading is the same (the
 * reason upstream moved from timestamps to UUIDs); the timestamp is the
 * observation's, kept for display. */
START_TEST(test_dsw_update_gives_new_generation_each_time)
{
        struct plugin_cache *c = cache_new();
        uint64_t seen[5];

        for (int i = 0; i < 5; i++) {
                const struct plugin_dsw_entry *d;
                uint64_t wall = i < 3 ? 5000 : 6000 + (uint64_t)i; /* same reading three times */

                ck_assert_int_eq(plugin_dsw_add_or_update(c, SOCK_A, wall), 0);
                d = plugin_dsw_get(c, SOCK_A);
                ck_assert_ptr_nonnull(d);
                ck_assert_uint_eq(d->timestamp, wall);
                seen[i] = d->generation;
                for (int j = 0; j < i; j++)
                        ck_assert_msg(seen[j] != seen[i], "generation %llu of update %d reused from update %d",
                                      (unsigned long long)seen[i], i, j);
                ck_assert_uint_eq(dsw_count(c), 1);
        }
        plugin_cache_free(c);
}
END_TEST

/* Generations are never reused, across paths and across remove + add. */
START_TEST(test_dsw_generation_never_reused_after_remove)
{
        struct plugin_cache *c = cache_new();
        uint64_t ga, gb, ga2;

        ck_assert_int_eq(plugin_dsw_add_or_update(c, SOCK_A, 1), 0);
        ga = plugin_dsw_get(c, SOCK_A)->generation;
        ck_assert_int_eq(plugin_dsw_add_or_update(c, SOCK_B, 1), 0);
        gb = plugin_dsw_get(c, SOCK_B)->generation;
        ck_assert_uint_ne(ga, gb);
        plugin_dsw_remove(c, SOCK_A);
        ck_assert_int_eq(plugin_dsw_add_or_update(c, SOCK_A, 1), 0);
        ga2 = plugin_dsw_get(c, SOCK_A)->generation;
        ck_assert_uint_ne(ga2, ga);
        ck_assert_uint_ne(ga2, gb);
        plugin_cache_free(c);
}
END_TEST

START_TEST(test_dsw_empty_path_is_einval)
{
        struct plugin_cache *c = cache_new();

        ck_assert_int_eq(plugin_dsw_add_or_update(c, "", 1), -EINVAL);
        ck_assert_uint_eq(dsw_count(c), 0);
        ck_assert_ptr_null(plugin_dsw_get(c, ""));
        plugin_cache_free(c);
}
END_TEST

START_TEST(test_dsw_remove)
{
        struct plugin_cache *c = cache_new();

        ck_assert_int_eq(plugin_dsw_add_or_update(c, SOCK_A, 1), 0);
        ck_assert_int_eq(plugin_dsw_add_or_update(c, SOCK_B, 1), 0);
        plugin_dsw_remove(c, SOCK_A);
        ck_assert_ptr_null(plugin_dsw_get(c, SOCK_A));
        ck_assert_ptr_nonnull(plugin_dsw_get(c, SOCK_B));
        ck_assert_uint_eq(dsw_count(c), 1);
        /* Removing an absent key is a no-op. */
        plugin_dsw_remove(c, SOCK_A);
        plugin_dsw_remove(c, SOCK_C);
        ck_assert_uint_eq(dsw_count(c), 1);
        plugin_cache_free(c);
}
END_TEST

START_TEST(test_dsw_list_is_sorted_snapshot)
{
        struct plugin_cache *c = cache_new();
        const struct plugin_dsw_entry **l = NULL;
        size_t n = 0;

        ck_assert_int_eq(plugin_dsw_add_or_update(c, SOCK_C, 3), 0);
        ck_assert_int_eq(plugin_dsw_add_or_update(c, SOCK_A, 1), 0);
        ck_assert_int_eq(plugin_dsw_add_or_update(c, SOCK_B, 2), 0);
        ck_assert_int_eq(plugin_dsw_list(c, &l, &n), 0);
        ck_assert_uint_eq(n, 3);
        ck_assert_str_eq(l[0]->path, SOCK_A);
        ck_assert_str_eq(l[1]->path, SOCK_B);
        ck_assert_str_eq(l[2]->path, SOCK_C);
        ck_assert_uint_eq(l[0]->timestamp, 1);
        ck_assert_uint_eq(l[2]->timestamp, 3);
        free(l);
        plugin_cache_free(c);
}
END_TEST

START_TEST(test_dsw_list_empty)
{
        struct plugin_cache *c = cache_new();
        const struct plugin_dsw_entry **l = NULL;
        size_t n = 99;

        ck_assert_int_eq(plugin_dsw_list(c, &l, &n), 0);
        ck_assert_uint_eq(n, 0);
        free(l);
        plugin_cache_free(c);
}
END_TEST

/* ---- actual state of world ------------------------------------------------- */

START_TEST(test_asw_add_copies_entry)
{
        struct plugin_cache *c = cache_new();
        char path[] = SOCK_A, name[] = "vendor.example/gpu";
        struct plugin_asw_entry e = asw_entry(path, 7, name);
        const struct plugin_asw_entry *a;

        ck_assert_int_eq(plugin_asw_add(c, &e), 0);
        /* The cache keeps copies: the caller's strings can go. */
        memset(path, 'x', sizeof(path) - 1);
        memset(name, 'y', sizeof(name) - 1);
        a = plugin_asw_get(c, SOCK_A);
        ck_assert_ptr_nonnull(a);
        ck_assert_str_eq(a->path, SOCK_A);
        ck_assert_uint_eq(a->generation, 7);
        ck_assert_uint_eq(a->timestamp, 1700000000000000ull);
        ck_assert_str_eq(a->type, "DevicePlugin");
        ck_assert_str_eq(a->name, "vendor.example/gpu");
        ck_assert_str_eq(a->endpoint, SOCK_A);
        ck_assert_uint_eq(a->n_versions, 2);
        ck_assert_str_eq(a->versions[0], "v1beta1");
        ck_assert_str_eq(a->versions[1], "v1beta2");
        ck_assert_uint_eq(asw_count(c), 1);
        plugin_cache_free(c);
}
END_TEST

START_TEST(test_asw_add_empty_path_is_einval)
{
        struct plugin_cache *c = cache_new();
        struct plugin_asw_entry e = asw_entry("", 1, "vendor.example/gpu");

        ck_assert_int_eq(plugin_asw_add(c, &e), -EINVAL);
        ck_assert_uint_eq(asw_count(c), 0);
        plugin_cache_free(c);
}
END_TEST

START_TEST(test_asw_add_overwrites)
{
        struct plugin_cache *c = cache_new();
        struct plugin_asw_entry e1 = asw_entry(SOCK_A, 1, "vendor.example/old");
        struct plugin_asw_entry e2 = asw_entry(SOCK_A, 2, "vendor.example/new");
        const struct plugin_asw_entry *a;

        e2.n_versions = 1;
        ck_assert_int_eq(plugin_asw_add(c, &e1), 0);
        ck_assert_int_eq(plugin_asw_add(c, &e2), 0);
        ck_assert_uint_eq(asw_count(c), 1);
        a = plugin_asw_get(c, SOCK_A);
        ck_assert_ptr_nonnull(a);
        ck_assert_uint_eq(a->generation, 2);
        ck_assert_str_eq(a->name, "vendor.example/new");
        ck_assert_uint_eq(a->n_versions, 1);
        plugin_cache_free(c);
}
END_TEST

START_TEST(test_asw_remove)
{
        struct plugin_cache *c = cache_new();
        struct plugin_asw_entry ea = asw_entry(SOCK_A, 1, "vendor.example/a");
        struct plugin_asw_entry eb = asw_entry(SOCK_B, 2, "vendor.example/b");

        ck_assert_int_eq(plugin_asw_add(c, &ea), 0);
        ck_assert_int_eq(plugin_asw_add(c, &eb), 0);
        plugin_asw_remove(c, SOCK_A);
        ck_assert_ptr_null(plugin_asw_get(c, SOCK_A));
        ck_assert_ptr_nonnull(plugin_asw_get(c, SOCK_B));
        plugin_asw_remove(c, SOCK_A); /* absent: no-op */
        ck_assert_uint_eq(asw_count(c), 1);
        plugin_cache_free(c);
}
END_TEST

START_TEST(test_asw_list_sorted)
{
        struct plugin_cache *c = cache_new();
        struct plugin_asw_entry ec = asw_entry(SOCK_C, 3, "vendor.example/c");
        struct plugin_asw_entry ea = asw_entry(SOCK_A, 1, "vendor.example/a");
        struct plugin_asw_entry eb = asw_entry(SOCK_B, 2, "vendor.example/b");
        const struct plugin_asw_entry **l = NULL;
        size_t n = 0;

        ck_assert_int_eq(plugin_asw_add(c, &ec), 0);
        ck_assert_int_eq(plugin_asw_add(c, &ea), 0);
        ck_assert_int_eq(plugin_asw_add(c, &eb), 0);
        ck_assert_int_eq(plugin_asw_list(c, &l, &n), 0);
        ck_assert_uint_eq(n, 3);
        ck_assert_str_eq(l[0]->path, SOCK_A);
        ck_assert_str_eq(l[1]->path, SOCK_B);
        ck_assert_str_eq(l[2]->path, SOCK_C);
        ck_assert_str_eq(l[2]->name, "vendor.example/c");
        free(l);
        plugin_cache_free(c);
}
END_TEST

/* ExistsWithSameGeneration: present and same generation; the reconciler's
 * whole comparison. */
START_TEST(test_asw_same_generation)
{
        struct plugin_cache *c = cache_new();
        const struct plugin_dsw_entry *d;
        struct plugin_asw_entry e;

        ck_assert_int_eq(plugin_dsw_add_or_update(c, SOCK_A, 10), 0);
        d = plugin_dsw_get(c, SOCK_A);
        /* Absent from the ASW. */
        ck_assert_int_eq(plugin_asw_same_generation(c, d), 0);
        e = asw_entry(SOCK_A, d->generation, "vendor.example/a");
        ck_assert_int_eq(plugin_asw_add(c, &e), 0);
        ck_assert_int_ne(plugin_asw_same_generation(c, d), 0);
        /* The socket is re-created: a new DSW generation, same path. */
        ck_assert_int_eq(plugin_dsw_add_or_update(c, SOCK_A, 10), 0);
        d = plugin_dsw_get(c, SOCK_A);
        ck_assert_int_eq(plugin_asw_same_generation(c, d), 0);
        /* Another path with the same generation number does not count. */
        ck_assert_int_eq(plugin_dsw_add_or_update(c, SOCK_B, 10), 0);
        e = asw_entry(SOCK_C, plugin_dsw_get(c, SOCK_B)->generation, "vendor.example/c");
        ck_assert_int_eq(plugin_asw_add(c, &e), 0);
        ck_assert_int_eq(plugin_asw_same_generation(c, plugin_dsw_get(c, SOCK_B)), 0);
        /* Removed: no longer the same. */
        e = asw_entry(SOCK_A, d->generation, "vendor.example/a");
        ck_assert_int_eq(plugin_asw_add(c, &e), 0);
        ck_assert_int_ne(plugin_asw_same_generation(c, d), 0);
        plugin_asw_remove(c, SOCK_A);
        ck_assert_int_eq(plugin_asw_same_generation(c, d), 0);
        plugin_cache_free(c);
}
END_TEST

/* The two maps are independent: the DSW is the watcher's, the ASW the
 * ops'. */
START_TEST(test_dsw_and_asw_are_independent)
{
        struct plugin_cache *c = cache_new();
        struct plugin_asw_entry e = asw_entry(SOCK_B, 1, "vendor.example/b");

        ck_assert_int_eq(plugin_dsw_add_or_update(c, SOCK_A, 1), 0);
        ck_assert_int_eq(plugin_asw_add(c, &e), 0);
        ck_assert_ptr_null(plugin_asw_get(c, SOCK_A));
        ck_assert_ptr_null(plugin_dsw_get(c, SOCK_B));
        plugin_dsw_remove(c, SOCK_B);
        plugin_asw_remove(c, SOCK_A);
        ck_assert_uint_eq(dsw_count(c), 1);
        ck_assert_uint_eq(asw_count(c), 1);
        plugin_cache_free(c);
}
END_TEST

START_TEST(test_free_null)
{
        plugin_cache_free(NULL);
}
END_TEST

UNIT_MAIN(test_dsw_add_new_plugin, test_dsw_update_gives_new_generation_each_time,
          test_dsw_generation_never_reused_after_remove, test_dsw_empty_path_is_einval, test_dsw_remove,
          test_dsw_list_is_sorted_snapshot, test_dsw_list_empty, test_asw_add_copies_entry,
          test_asw_add_empty_path_is_einval, test_asw_add_overwrites, test_asw_remove, test_asw_list_sorted,
          test_asw_same_generation, test_dsw_and_asw_are_independent, test_free_null)
