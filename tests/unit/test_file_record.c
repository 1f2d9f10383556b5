/* Unit tests: per-file states named and rendered (core/file_record). */
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "util/digest.h"
#include "core/file_record.h"
#include "unit.h"

START_TEST(test_state_names)
{
        const char *want[] = {"pending", "applied", "rejected", "duplicate", "ignored", "unreadable", "gone"};

        for (int s = 0; s < _FILE_RECORD_STATE_MAX; s++)
                ck_assert_str_eq(file_record_state_name((enum file_record_state)s), want[s]);
        ck_assert_ptr_null(file_record_state_name(_FILE_RECORD_STATE_MAX));
        ck_assert_ptr_null(file_record_state_name((enum file_record_state)(-1)));
}
END_TEST

/* Every member, in order; what a record lacks is null. */
START_TEST(test_render)
{
        struct file_record_pod pods[2] = {{"kube-system/etcd-node1", "abc"}, {"bare", ""}};
        struct file_record_view v = {
                .source = "file",
                .path = "/etc/kubernetes/manifests/etcd.yaml",
                .state = FILE_RECORD_APPLIED,
                .size = 120,
                .mtime_usec = 1700000000ull * 1000000,
                .pods = pods,
                .n_pods = 1,
                .seq = 42,
        };
        uint8_t d[DIGEST_LEN];
        struct buf b = BUF_INIT;

        ck_assert_int_eq(digest_sha256("abc", 3, d), 0);
        v.digest = d;
        ck_assert_int_eq(file_record_render(&v, &b), 0);
        ck_assert_str_eq(b.data, "{\"source\":\"file\",\"path\":\"/etc/kubernetes/manifests/etcd.yaml\","
                                 "\"state\":\"applied\",\"reason\":null,\"digest\":\"sha256:"
                                 "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\","
                                 "\"size\":120,\"mtime\":\"2023-11-14T22:13:20Z\",\"pods\":[{\"namespace\":"
                                 "\"kube-system\",\"name\":\"etcd-node1\",\"uid\":\"abc\"}],\"seq\":42}");
        buf_reset(&b);
        v = (struct file_record_view){.source = "http",
                                      .path = "http://x/\"m\"",
                                      .state = FILE_RECORD_REJECTED,
                                      .reason = "line 1: bad \"x\"",
                                      .size = -1,
                                      .pods = pods,
                                      .n_pods = 2};
        ck_assert_int_eq(file_record_render(&v, &b), 0);
        ck_assert_str_eq(b.data, "{\"source\":\"http\",\"url\":\"http://x/\\\"m\\\"\",\"state\":\"rejected\","
                                 "\"reason\":\"line 1: bad \\\"x\\\"\",\"digest\":null,\"size\":null,\"mtime\":null,"
                                 "\"pods\":[{\"namespace\":\"kube-system\",\"name\":\"etcd-node1\",\"uid\":\"abc\"},"
                                 "{\"namespace\":\"\",\"name\":\"bare\",\"uid\":\"\"}],\"seq\":null}");
        /* A name that is not UTF-8 has its bytes beside it
         * (doc/protocol.md "Paths that are not UTF-8"). */
        buf_reset(&b);
        v = (struct file_record_view){.source = "file", .path = "/m/w\xff.y", .state = FILE_RECORD_IGNORED, .size = -1};
        ck_assert_int_eq(file_record_render(&v, &b), 0);
        ck_assert_str_eq(b.data, "{\"source\":\"file\",\"path\":\"/m/w\\ufffd.y\",\"path_hex\":\"2f6d2f77ff2e79\","
                                 "\"state\":\"ignored\",\"reason\":null,\"digest\":null,\"size\":null,"
                                 "\"mtime\":null,\"pods\":[],\"seq\":null}");
        buf_free(&b);
}
END_TEST

/* A reason past the bound is cut at a character's end, with "...". */
START_TEST(test_reason_bound)
{
        char *big = malloc(FILE_RECORD_REASON_MAX * 2), *got;
        size_t i;

        ck_assert_ptr_nonnull(big);
        got = file_record_reason_dup("short");
        ck_assert_str_eq(got, "short");
        free(got);
        /* At the bound (with its NUL): kept whole; one byte more: cut. */
        memset(big, 'a', FILE_RECORD_REASON_MAX - 1);
        big[FILE_RECORD_REASON_MAX - 1] = '\0';
        got = file_record_reason_dup(big);
        ck_assert_str_eq(got, big);
        free(got);
        memset(big, 'a', FILE_RECORD_REASON_MAX);
        big[FILE_RECORD_REASON_MAX] = '\0';
        got = file_record_reason_dup(big);
        ck_assert_uint_eq(strlen(got), FILE_RECORD_REASON_MAX - 1);
        ck_assert_str_eq(got + strlen(got) - 3, "...");
        free(got);
        /* Two-byte characters across the cut: none is split. */
        for (i = 0; i + 2 < FILE_RECORD_REASON_MAX * 2 - 1; i += 2)
                memcpy(big + i, "\xc3\xa9", 2);
        big[i] = '\0';
        got = file_record_reason_dup(big);
        ck_assert_uint_le(strlen(got) + 1, FILE_RECORD_REASON_MAX);
        ck_assert_uint_eq((strlen(got) - 3) % 2, 0);
        ck_assert_int_eq(memcmp(got, big, strlen(got) - 3), 0);
        ck_assert_str_eq(got + strlen(got) - 3, "...");
        free(got);
        free(big);
}
END_TEST

UNIT_MAIN(test_state_names, test_render, test_reason_bound)
