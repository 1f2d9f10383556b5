/* Unit tests: a path in a message, byte for byte (util/json_path). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "failalloc.h"
#include "util/json_path.h"
#include "unit.h"

static char *put(const char *path)
{
        struct buf b = BUF_INIT;

        ck_assert_int_eq(json_path_put(&b, path), 0);
        return buf_steal(&b, NULL);
}

/* The path read back from what json_path_put wrote. */
static void round_trip(const char *path)
{
        char *text = put(path), *wrapped = NULL, *got = NULL;
        size_t len = strlen(text) + 3, got_len = 0;
        json_object *o;

        wrapped = malloc(len);
        ck_assert_ptr_nonnull(wrapped);
        memcpy(wrapped, "{", 1);
        memcpy(wrapped + 1, text, strlen(text));
        memcpy(wrapped + 1 + strlen(text), "}", 2);
        o = json_tokener_parse(wrapped);
        ck_assert_msg(o != NULL, "not JSON: %s", wrapped);
        ck_assert_int_eq(json_path_get(o, &got, &got_len), 0);
        ck_assert_uint_eq(got_len, strlen(path));
        ck_assert_int_eq(memcmp(got, path, got_len + 1), 0);
        json_object_put(o);
        free(got);
        free(wrapped);
        free(text);
}

/* A UTF-8 path is "path" alone; any other has its bytes beside it. */
START_TEST(test_put)
{
        char *s = put("/etc/kubernetes/manifests/\xc3\xa9t\"cd.yaml");

        ck_assert_str_eq(s, "\"path\":\"/etc/kubernetes/manifests/\xc3\xa9t\\\"cd.yaml\"");
        free(s);
        s = put("/m/w\xff"
                "b.yaml");
        ck_assert_str_eq(s, "\"path\":\"/m/w\\ufffdb.yaml\",\"path_hex\":\"2f6d2f77ff622e79616d6c\"");
        free(s);
        s = put(NULL);
        ck_assert_str_eq(s, "\"path\":null");
        free(s);
        /* A truncated sequence and an overlong one are not UTF-8. */
        s = put("/\xc3");
        ck_assert_str_eq(s, "\"path\":\"/\\ufffd\",\"path_hex\":\"2fc3\"");
        free(s);
        s = put("/\xc0\xaf");
        ck_assert_ptr_nonnull(strstr(s, ",\"path_hex\":\"2fc0af\""));
        free(s);
}
END_TEST

START_TEST(test_round_trip)
{
        round_trip("/etc/kubernetes/manifests/etcd.yaml");
        round_trip("/m/\xe6\x97\xa5\xe6\x9c\xac.yaml");
        round_trip("/m/w\xff"
                   "b.yaml");
        round_trip("/m/\xfe\xff\x80\x01\x1f\"\\");
        round_trip("/m/\xed\xa0\x80"); /* a surrogate's encoding: not UTF-8 */
}
END_TEST

static int get(const char *json, char **ret, size_t *ret_len)
{
        json_object *o = json_tokener_parse(json);
        int r;

        ck_assert_msg(o != NULL, "not JSON: %s", json);
        r = json_path_get(o, ret, ret_len);
        json_object_put(o);
        return r;
}

/* Each bad member is refused, and *ret is left alone. */
START_TEST(test_get_refused)
{
        static const struct {
                const char *json;
                int want;
        } cases[] = {
                {"{}", -ENOENT},
                {"{\"path\":null}", -ENOENT},
                {"{\"path\":null,\"path_hex\":\"2f\"}", -ENOENT},
                {"{\"path\":3}", -EINVAL},
                {"{\"path\":\"/a\",\"path_hex\":7}", -EINVAL},
                {"{\"path\":\"/a\",\"path_hex\":\"2f6\"}", -EINVAL},
                {"{\"path\":\"/a\",\"path_hex\":\"2g\"}", -EINVAL},
                {"{\"path\":\"/a\",\"path_hex\":\"2f00\"}", -EINVAL},
                {"{\"path\":\"/a\\u0000b\"}", -EINVAL},
        };
        char *keep = (char *)"untouched", *got = keep;
        size_t len = 99;

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                int r = get(cases[i].json, &got, &len);

                ck_assert_msg(r == cases[i].want, "%s: %d, want %d", cases[i].json, r, cases[i].want);
                ck_assert_ptr_eq(got, keep);
                ck_assert_uint_eq(len, 99);
        }
        /* Upper-case hex is read; a null hex member means none. */
        ck_assert_int_eq(get("{\"path\":\"/?\",\"path_hex\":\"2FFF\"}", &got, &len), 0);
        ck_assert_uint_eq(len, 2);
        ck_assert_int_eq(memcmp(got, "/\xff", 3), 0);
        free(got);
        ck_assert_int_eq(get("{\"path\":\"/a\",\"path_hex\":null}", &got, &len), 0);
        ck_assert_str_eq(got, "/a");
        free(got);
}
END_TEST

/* json_path_is reads as json_path_get does, byte for byte. */
START_TEST(test_is)
{
        static const struct {
                const char *json, *path;
                size_t len;
                bool want;
        } cases[] = {
                {"{\"path\":\"/m/a.yaml\"}", "/m/a.yaml", 9, true},
                {"{\"path\":\"/m/a.yaml\"}", "/m/a.yaml", 2, false},
                {"{\"path\":\"/m\"}", "/m/a.yaml", 2, true}, /* the directory of a path */
                {"{\"path\":\"/m/a.yaml\"}", "/m/b.yaml", 9, false},
                {"{\"path\":\"/m/w\\ufffdb\"}",
                 "/m/w\xff"
                 "b",
                 6, false},
                {"{\"path\":\"/m/w\\ufffdb\",\"path_hex\":\"2f6d2f77ff62\"}",
                 "/m/w\xff"
                 "b",
                 6, true},
                {"{\"path\":\"/m/w\\ufffdb\",\"path_hex\":\"2F6D2F77FF62\"}",
                 "/m/w\xff"
                 "b",
                 6, true},
                {"{\"path\":\"/m/w\\ufffdb\",\"path_hex\":\"2f6d2f77fe62\"}",
                 "/m/w\xff"
                 "b",
                 6, false},
                {"{\"path\":\"/m/w\\ufffdb\",\"path_hex\":\"2f6d2f77ff6\"}",
                 "/m/w\xff"
                 "b",
                 6, false},
                {"{\"path\":\"/m/w\\ufffdb\",\"path_hex\":\"2f6d2f77ffzz\"}",
                 "/m/w\xff"
                 "b",
                 6, false},
                {"{\"path\":\"/m/w\\ufffdb\",\"path_hex\":5}",
                 "/m/w\xff"
                 "b",
                 6, false},
                {"{\"path\":null,\"path_hex\":\"2f\"}", "/", 1, false},
                {"{\"path\":4}", "/", 1, false},
                {"{}", "", 0, false},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                json_object *o = json_tokener_parse(cases[i].json);

                ck_assert_msg(o != NULL, "not JSON: %s", cases[i].json);
                ck_assert_msg(json_path_is(o, cases[i].path, cases[i].len) == cases[i].want, "case %zu: %s", i,
                              cases[i].json);
                json_object_put(o);
        }
}
END_TEST

/* Out of memory at each allocation: -ENOMEM, nothing leaked, nothing
 * written. */
START_TEST(test_out_of_memory)
{
        const char *paths[] = {"/m/a.yaml", "/m/w\xff"
                                            "b.yaml"};
        const char *msgs[] = {"{\"path\":\"/m/a.yaml\"}", "{\"path\":\"/m/w?b\",\"path_hex\":\"2f6d2f77ff62\"}"};

        if (!failalloc_enabled())
                return;
        for (size_t k = 0; k < 2; k++) {
                json_object *o = json_tokener_parse(msgs[k]);
                long before = failalloc_live();

                ck_assert_ptr_nonnull(o);
                for (long n = 1;; n++) {
                        struct buf b = BUF_INIT;
                        char *got = NULL;
                        size_t len = 0;
                        bool failed;
                        int r, g;

                        failalloc_arm(n);
                        r = json_path_put(&b, paths[k]);
                        g = json_path_get(o, &got, &len);
                        failed = failalloc_failed();
                        failalloc_arm(0);
                        buf_free(&b);
                        if (!failed) {
                                ck_assert_int_eq(r, 0);
                                ck_assert_int_eq(g, 0);
                                free(got);
                                break;
                        }
                        ck_assert(r == -ENOMEM || g == -ENOMEM);
                        if (g < 0)
                                ck_assert_ptr_null(got);
                        free(got);
                        ck_assert_int_le(failalloc_live(), before);
                }
                json_object_put(o);
        }
}
END_TEST

UNIT_MAIN(test_put, test_round_trip, test_get_refused, test_is, test_out_of_memory)
