/* Unit tests: canonical JSON, FNV-1a-128, bounded parsing. */
#include <errno.h>
#include <string.h>

#include "podmux/json_canon.h"
#include "unit.h"

static char *canon_of(const char *text)
{
        struct buf b = BUF_INIT, err = BUF_INIT;
        json_object *o = NULL;

        ck_assert_msg(json_parse_text(text, strlen(text), &o, &err) == 0, "parse %s: %s", text,
                      err.data);
        ck_assert_int_eq(json_canon_append(&b, o), 0);
        json_object_put(o);
        buf_free(&err);
        return buf_steal(&b, NULL);
}

START_TEST(test_canon_sorts_keys_and_strips_space)
{
        char *a = canon_of("{ \"b\": [1, 2, {\"z\":1,\"a\":null}], \"a\" : \"x\" }");

        ck_assert_str_eq(a, "{\"a\":\"x\",\"b\":[1,2,{\"a\":null,\"z\":1}]}");
        free(a);
}
END_TEST

START_TEST(test_canon_keeps_number_spelling_and_empties)
{
        char *a = canon_of("{\"i\":1,\"d\":1.0,\"e\":1e3,\"o\":{},\"l\":[],\"n\":null,\"t\":true}");

        ck_assert_str_eq(a, "{\"d\":1.0,\"e\":1e3,\"i\":1,\"l\":[],\"n\":null,\"o\":{},\"t\":true}");
        free(a);
}
END_TEST

START_TEST(test_fnv128_known_vectors)
{
        struct fnv128 h;
        uint8_t d[16];
        char hex[33];

        /* Offset basis for the empty input, and the published value for "a". */
        fnv128_init(&h);
        fnv128_final(&h, d);
        fnv128_hex(d, hex);
        ck_assert_str_eq(hex, "6c62272e07bb014262b821756295c58d");
        fnv128_init(&h);
        fnv128_update(&h, "a", 1);
        fnv128_final(&h, d);
        fnv128_hex(d, hex);
        ck_assert_str_eq(hex, "d228cb696f1a8caf78912b704e4a8964");
}
END_TEST

START_TEST(test_parse_errors_and_depth_limit)
{
        struct buf err = BUF_INIT, deep = BUF_INIT;
        json_object *o = NULL;

        ck_assert_int_eq(json_parse_text("{\"a\":", 5, &o, &err), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err.data, "unexpected end"));
        buf_reset(&err);
        ck_assert_int_eq(json_parse_text("{} x", 4, &o, &err), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err.data, "byte 3"));
        for (int i = 0; i < JSON_MAX_DEPTH + 5; i++)
                buf_putc(&deep, '[');
        for (int i = 0; i < JSON_MAX_DEPTH + 5; i++)
                buf_putc(&deep, ']');
        buf_reset(&err);
        ck_assert_int_eq(json_parse_text(deep.data, deep.len, &o, &err), -EINVAL);
        ck_assert_msg(strstr(err.data, "nesting too deep") != NULL, "message: %s", err.data);
        buf_free(&err);
        buf_free(&deep);
}
END_TEST

UNIT_MAIN(test_canon_sorts_keys_and_strips_space, test_canon_keeps_number_spelling_and_empties,
          test_fnv128_known_vectors, test_parse_errors_and_depth_limit)
