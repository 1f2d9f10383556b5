/* Unit tests: canonical JSON, FNV-1a-128, bounded parsing. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/digest.h"
#include "util/json_canon.h"
#include "util/json_parse.h"
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
        /* More members than are sorted on the stack. */
        a = canon_of("{\"k\":1,\"j\":2,\"i\":3,\"h\":4,\"g\":5,\"f\":6,\"e\":7,\"d\":8,\"c\":9,\"b\":10,\"a\":11}");
        ck_assert_str_eq(a,
                         "{\"a\":11,\"b\":10,\"c\":9,\"d\":8,\"e\":7,\"f\":6,\"g\":5,\"h\":4,\"i\":3,\"j\":2,\"k\":1}");
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


/* What json-c's own strict parser makes of text, printed plainly, or NULL
 * if it refuses it. */
static char *jsonc_says(const char *text)
{
        json_tokener *tok = json_tokener_new_ex(JSON_MAX_DEPTH);
        json_object *o;
        char *out = NULL;

        ck_assert_ptr_nonnull(tok);
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
        o = json_tokener_parse_ex(tok, text, (int)strlen(text) + 1); /* the NUL ends a number */
        if (json_tokener_get_error(tok) == json_tokener_success)
                out = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        json_object_put(o);
        json_tokener_free(tok);
        return out;
}

static char *ours_says(const char *text)
{
        json_object *o = NULL;
        char *out = NULL;

        if (json_parse(text, strlen(text), JSON_MAX_DEPTH, &o, NULL) == 0)
                out = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        json_object_put(o);
        return out;
}

/* Our parser builds the tree json-c's strict parser builds, value for
 * value (types, number spellings, decoded strings), and refuses what it
 * refuses. */
START_TEST(test_parse_matches_jsonc)
{
        static const char *const same[] = {
                "{}", "[]", "0", "-0", "1", "-1", "1.0", "-1.5e-3", "1e5", "1E+5", "0.5",
                "9223372036854775807", "-9223372036854775808", "9223372036854775808",
                "18446744073709551615", "123456789012345678901234567890.5",
                "true", "false", "null", "\"\"", "\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"",
                "\"\\u00e9\\u4e2d\\ud83d\\ude00\"", "\"caf\xc3\xa9\"",
                "{\"a\":1,\"b\":[1,2,{\"c\":null}],\"d\":{\"e\":\"f\"}}",
                " \t\r\n{ \"a\" : [ 1 , 2 ] } \n", "{\"k\":1,\"k\":2}", "[[[[[]]]]]",
                "{\"\":0}", "[1.25,-0.0,3e-7,1e400]",
        };
        static const char *const refused[] = {
                "", " ", "{", "[1,]", "{\"a\":1,}", "01", "1.", ".5", "+1", "- 1", "1e", "NaN",
                "Infinity", "'a'", "{'a':1}", "/*c*/{}", "{} //c", "tru", "nul", "\"\\x\"",
                "\"\\u12\"", "\"\\u12g4\"", "{\"a\" 1}", "{1:2}", "[1 2]", "\"a\x01\"", "{} {}",
        };
        char *a, *b;

        for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
                a = jsonc_says(same[i]);
                b = ours_says(same[i]);
                ck_assert_msg(a && b, "%s: json-c %s, ours %s", same[i], a ? a : "(refused)",
                              b ? b : "(refused)");
                ck_assert_msg(strcmp(a, b) == 0, "%s: json-c %s, ours %s", same[i], a, b);
                free(a);
                free(b);
        }
        for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
                b = ours_says(refused[i]);
                ck_assert_msg(!b, "%s: accepted as %s", refused[i], b);
        }
}
END_TEST

/* What json_parse_next() says of text[0..len) from 0 with max_depth, and
 * json_skip_next() says the same: the same result, the same end, the
 * same error message. */
static void skip_agrees(const char *text, size_t len, unsigned max_depth)
{
        struct buf e1 = BUF_INIT, e2 = BUF_INIT;
        json_object *o = NULL;
        size_t p1 = 0, p2 = 0;
        int r1 = json_parse_next(text, len, &p1, max_depth, &o, &e1);
        int r2 = json_skip_next(text, len, &p2, max_depth, &e2);

        ck_assert_msg(r1 == r2, "%.*s: parse %d, skip %d", (int)len, text, r1, r2);
        ck_assert_msg(p1 == p2, "%.*s: parse ends at %zu, skip at %zu", (int)len, text, p1, p2);
        ck_assert_msg(strcmp(e1.data, e2.data) == 0, "%.*s: parse \"%s\", skip \"%s\"", (int)len, text, e1.data,
                      e2.data);
        json_object_put(o);
        buf_free(&e1);
        buf_free(&e2);
}

/* Stepping over a value checks it exactly as parsing it does: every text
 * above, whole and cut anywhere, and nesting at and past the limit. */
START_TEST(test_skip_next_matches_parse)
{
        static const char *const texts[] = {
                "{}",
                "[]",
                "0",
                "-0",
                "1.0",
                "-1.5e-3",
                "1E+5",
                "18446744073709551615",
                "123456789012345678901234567890.5",
                "true",
                "false",
                "null",
                "\"\"",
                "\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"",
                "\"\\u00e9\\u4e2d\\ud83d\\ude00\"",
                "\"caf\xc3\xa9\"",
                "{\"a\":1,\"b\":[1,2,{\"c\":null}],\"d\":{\"e\":\"f\"}} 7",
                " \t\r\n{ \"a\" : [ 1 , 2 ] } \n",
                "{\"k\":1,\"k\":2}",
                "{\"a\xfa\x7a\":1,\"\\ud800\":\"\xff\"}",
                "",
                " ",
                "{",
                "[1,]",
                "{\"a\":1,}",
                "01",
                "1.",
                ".5",
                "+1",
                "- 1",
                "1e",
                "NaN",
                "'a'",
                "/*c*/{}",
                "tru",
                "nul",
                "\"\\x\"",
                "\"\\u12\"",
                "\"\\u12g4\"",
                "{\"a\" 1}",
                "{1:2}",
                "[1 2]",
                "\"a\x01\"",
                "{\"a\":tx}",
        };
        struct buf deep = BUF_INIT;

        for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
                for (size_t cut = 0; cut <= strlen(texts[i]); cut++)
                        skip_agrees(texts[i], cut, JSON_MAX_DEPTH);
        for (int i = 0; i < 5; i++)
                ck_assert_int_eq(buf_puts(&deep, "{\"a\":["), 0);
        ck_assert_int_eq(buf_puts(&deep, "1]}]}]}]}]}"), 0);
        for (unsigned d = 8; d <= 11; d++)
                skip_agrees(deep.data, deep.len, d);
        buf_free(&deep);
}
END_TEST

/* A string decoded as the parser decodes it: from the text when nothing
 * needed decoding, else from the scratch buffer; anything else refused. */
START_TEST(test_string_next)
{
        static const struct {
                const char *text, *want;
                size_t want_len;
                bool in_text;
        } cases[] = {
                {" \"abc\" ,", "abc", 3, true},
                {"\"a\\u0062\\n\"", "ab\n", 3, false},
                {"\"x\\u0000y\"", "x\0y", 3, false},
                {"\"\\ud800\xff\"", "\xef\xbf\xbd\xef\xbf\xbd", 6, false},
        };
        struct buf scratch = BUF_INIT, err = BUF_INIT;
        const char *s;
        size_t n, pos;

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                const char *t = cases[i].text;

                pos = 0;
                ck_assert_int_eq(json_string_next(t, strlen(t), &pos, &scratch, &s, &n, &err), 0);
                ck_assert_uint_eq(n, cases[i].want_len);
                ck_assert_msg(memcmp(s, cases[i].want, n) == 0, "%s", t);
                ck_assert_msg((s >= t && s < t + strlen(t)) == cases[i].in_text, "%s", t);
                ck_assert_uint_eq(pos, strlen(t) - (i == 0 ? 2 : 0));
        }
        pos = 0;
        ck_assert_int_eq(json_string_next("  12", 4, &pos, &scratch, &s, &n, &err), -EINVAL);
        ck_assert_str_eq(err.data, "byte 2: expected a string");
        ck_assert_uint_eq(pos, 0);
        ck_assert_int_eq(json_string_next("\"ab", 3, &pos, &scratch, &s, &n, &err), -EAGAIN);
        ck_assert_int_eq(json_string_next("\"a\\q\"", 5, &pos, &scratch, &s, &n, &err), -EINVAL);
        ck_assert_uint_eq(pos, 0);
        buf_free(&scratch);
        buf_free(&err);
}
END_TEST

/* Strings are scanned eight bytes at a time: a byte that ends a plain
 * run (a quote, a backslash, a control character, a non-ASCII byte) is
 * found at every offset of a long string, and at its end. */
START_TEST(test_string_stops_at_every_offset)
{
        static const char *const marks[] = {"\\n", "\\\"", "\xc3\xa9", "\xff", "\x85", "\x01", "\x1f", "\x7f"};

        for (size_t m = 0; m < sizeof(marks) / sizeof(marks[0]); m++) {
                for (int at = 0; at <= 24; at++) {
                        char text[64], want[64];
                        char *a, *b;

                        snprintf(text, sizeof(text), "[\"%.*s%s%.*s\"]", at, "abcdefghijklmnopqrstuvwxyz", marks[m],
                                 24 - at, "ABCDEFGHIJKLMNOPQRSTUVWXYZ");
                        b = ours_says(text);
                        if (marks[m][0] == '\x01' || marks[m][0] == '\x1f') {
                                ck_assert_msg(!b, "%s: accepted", text);
                                continue;
                        }
                        ck_assert_msg(b != NULL, "%s: refused", text);
                        if (marks[m][0] == '\xff' || marks[m][0] == '\x85') {
                                snprintf(want, sizeof(want), "[\"%.*s\xef\xbf\xbd%.*s\"]", at,
                                         "abcdefghijklmnopqrstuvwxyz", 24 - at, "ABCDEFGHIJKLMNOPQRSTUVWXYZ");
                                ck_assert_str_eq(b, want);
                        } else {
                                a = jsonc_says(text);
                                ck_assert_msg(a && strcmp(a, b) == 0, "%s: json-c %s, ours %s", text, a, b);
                                free(a);
                        }
                        free(b);
                        skip_agrees(text, strlen(text), JSON_MAX_DEPTH);
                }
        }
}
END_TEST

/* Piece by piece: a value cut anywhere is -EAGAIN until it is whole. */
START_TEST(test_parse_next_pieces)
{
        const char *text = "{\"a\":[1,2.5,\"x\\u00e9\\ud83d\\ude00\"],\"b\":true} 42 ";
        size_t len = strlen(text), pos;
        json_object *o = NULL;
        struct buf err = BUF_INIT;

        for (size_t cut = 0; cut < 44; cut++) {
                pos = 0;
                ck_assert_msg(json_parse_next(text, cut, &pos, JSON_MAX_DEPTH, &o, NULL) == -EAGAIN,
                              "cut at %zu", cut);
                ck_assert_uint_eq(pos, 0);
        }
        pos = 0;
        ck_assert_int_eq(json_parse_next(text, len, &pos, JSON_MAX_DEPTH, &o, &err), 0);
        ck_assert_uint_eq(pos, 44);
        ck_assert_str_eq(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN),
                         "{\"a\":[1,2.5,\"x\xc3\xa9\xf0\x9f\x98\x80\"],\"b\":true}");
        json_object_put(o);
        /* The number needs what follows it to be known whole. */
        ck_assert_int_eq(json_parse_next(text, 47, &pos, JSON_MAX_DEPTH, &o, NULL), -EAGAIN);
        ck_assert_int_eq(json_parse_next(text, len, &pos, JSON_MAX_DEPTH, &o, NULL), 0);
        ck_assert_int_eq(json_object_get_int(o), 42);
        json_object_put(o);
        /* A bad byte is -EINVAL at once, with its offset. */
        pos = 0;
        ck_assert_int_eq(json_parse_next("[1,x", 4, &pos, JSON_MAX_DEPTH, &o, &err), -EINVAL);
        ck_assert_msg(strstr(err.data, "byte 3") != NULL, "%s", err.data);
        buf_free(&err);
}
END_TEST

/* A lone surrogate decodes to U+FFFD, as Go decodes it. */
START_TEST(test_parse_lone_surrogates)
{
        char *b = ours_says("[\"\\ud800\",\"\\udc00x\",\"\\ud800\\u0041\"]");

        ck_assert_str_eq(b, "[\"\xef\xbf\xbd\",\"\xef\xbf\xbdx\",\"\xef\xbf\xbd" "A\"]");
        free(b);
}
END_TEST

/* Bytes that are not UTF-8 decode as U+FFFD, one per byte, as Go's decoder
 * reads them, so keys sort as the kubelet sorts them: here the two keys
 * differ only in an invalid byte, and once decoded the shorter one comes
 * first.  A valid multi-byte sequence is kept as it is. */
START_TEST(test_parse_invalid_utf8)
{
        char *b = ours_says("{\"a\xfa\x7a\":1,\"a\xff\":2,\"\xc3\xa9\xe0\x80\x80\xc3\":3}");

        ck_assert_str_eq(b, "{\"a\xef\xbf\xbdz\":1,\"a\xef\xbf\xbd\":2,"
                            "\"\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\":3}");
        free(b);
        /* Canonical text sorts the decoded keys and writes U+FFFD as it
         * is, as Go's encoder writes a valid rune. */
        b = canon_of("{\"a\xfaz\":1,\"a\xff\":2,\"b\":\"\xef\xbf\xbd\"}");
        ck_assert_str_eq(b, "{\"a\xef\xbf\xbd\":2,\"a\xef\xbf\xbdz\":1,\"b\":\"\xef\xbf\xbd\"}");
        free(b);
}
END_TEST

UNIT_MAIN(test_parse_matches_jsonc, test_skip_next_matches_parse, test_string_next, test_string_stops_at_every_offset,
          test_parse_next_pieces, test_parse_lone_surrogates, test_parse_invalid_utf8,
          test_canon_sorts_keys_and_strips_space, test_canon_keeps_number_spelling_and_empties,
          test_fnv128_known_vectors, test_parse_errors_and_depth_limit)
