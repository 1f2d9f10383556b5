/*
 * Unit tests of yaml_json: YAML 1.1 scalar resolution as Go's yaml.v2
 * (through sigs.k8s.io/yaml) does it, anchors, limits, errors.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/json_canon.h"
#include "util/json_parse.h"
#include "util/yaml_json.h"
#include "unit.h"

/* Canonical JSON of the converted text, or "ERR <code>: <message>". */
static char *conv_n(const char *text, size_t len)
{
        struct buf out = BUF_INIT, err = BUF_INIT;
        json_object *o = NULL;
        int r;

        r = yaml_to_json(text, len, &o, &err);
        if (r < 0)
                ck_assert_int_eq(buf_printf(&out, "ERR %d: %s", r, err.data), 0);
        else
                ck_assert_int_eq(json_canon_append(&out, o), 0);
        json_object_put(o);
        buf_free(&err);
        return buf_steal(&out, NULL);
}

static char *conv(const char *text)
{
        return conv_n(text, strlen(text));
}

#define EXPECT(yaml, want)                                   \
        do {                                                 \
                char *got_ = conv(yaml);                     \
                ck_assert_str_eq(got_, want);                \
                free(got_);                                  \
        } while (0)

/* The value of "v: <scalar>" as canonical JSON. */
#define EXPECT_V(scalar, want) EXPECT("v: " scalar, "{\"v\":" want "}")

START_TEST(test_null_scalars)
{
        EXPECT_V("~", "null");
        EXPECT_V("null", "null");
        EXPECT_V("Null", "null");
        EXPECT_V("NULL", "null");
        EXPECT("v:", "{\"v\":null}");
        EXPECT("v: \"\"", "{\"v\":\"\"}");
        EXPECT_V("nULL", "\"nULL\"");
        EXPECT_V("'null'", "\"null\"");
        EXPECT("[~, null, ]", "[null,null]");
}
END_TEST

START_TEST(test_bool_scalars)
{
        static const char *const t[] = {"y", "Y", "yes", "Yes", "YES", "true", "True",
                                        "TRUE", "on", "On", "ON"};
        static const char *const f[] = {"n", "N", "no", "No", "NO", "false", "False",
                                        "FALSE", "off", "Off", "OFF"};
        static const char *const s[] = {"tRUE", "yES", "oN", "o", "t", "f", "yess", "nope",
                                        "Yes!", "of"};
        char in[64], want[64];

        for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
                snprintf(in, sizeof(in), "v: %s", t[i]);
                EXPECT(in, "{\"v\":true}");
        }
        for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
                snprintf(in, sizeof(in), "v: %s", f[i]);
                EXPECT(in, "{\"v\":false}");
        }
        for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
                snprintf(in, sizeof(in), "v: %s", s[i]);
                snprintf(want, sizeof(want), "{\"v\":\"%s\"}", s[i]);
                EXPECT(in, want);
        }
        /* Quoted spellings stay strings. */
        EXPECT("v: \"yes\"", "{\"v\":\"yes\"}");
        EXPECT("v: 'off'", "{\"v\":\"off\"}");
}
END_TEST

START_TEST(test_int_scalars)
{
        EXPECT_V("0", "0");
        EXPECT_V("42", "42");
        EXPECT_V("+42", "42");
        EXPECT_V("-42", "-42");
        EXPECT_V("-0", "0");
        EXPECT_V("0x1F", "31");
        EXPECT_V("0X1f", "31");
        EXPECT_V("-0x10", "-16");
        EXPECT_V("0o17", "15");
        EXPECT_V("0O17", "15");
        EXPECT_V("017", "15");
        EXPECT_V("0b101", "5");
        EXPECT_V("-0b101", "-5");
        EXPECT_V("1_000_000", "1000000");
        EXPECT_V("0x_ff", "255");
        EXPECT_V("9223372036854775807", "9223372036854775807");
        EXPECT_V("-9223372036854775808", "-9223372036854775808");
        /* Past int64: Go's ParseUint takes it as uint64. */
        EXPECT_V("9223372036854775808", "9223372036854775808");
        EXPECT_V("18446744073709551615", "18446744073709551615");
        EXPECT_V("0xFFFFFFFFFFFFFFFF", "18446744073709551615");
        /* Past uint64: a float if it looks like one (spelling kept), else
         * a string. */
        EXPECT_V("18446744073709551616", "18446744073709551616");
        EXPECT_V("-9223372036854775809", "-9223372036854775809");
        EXPECT_V("0x1FFFFFFFFFFFFFFFF", "\"0x1FFFFFFFFFFFFFFFF\"");
        /* 08 is no octal number: Go then reads it as the float 8. */
        EXPECT_V("08", "8");
        EXPECT_V("0x", "\"0x\"");
        EXPECT_V("0b2", "\"0b2\"");
        EXPECT_V("1__0", "10");
        EXPECT_V("_1", "\"_1\"");
        EXPECT_V("-a", "\"-a\"");
        EXPECT_V("+", "\"+\"");
        EXPECT_V("12abc", "\"12abc\"");
        EXPECT_V("2001-12-14", "\"2001-12-14\"");
        EXPECT_V("2001-12-14t21:59:43.10-05:00", "\"2001-12-14t21:59:43.10-05:00\"");
        EXPECT_V("1:20", "\"1:20\"");
        EXPECT_V("\"42\"", "\"42\"");
        EXPECT_V("'0x10'", "\"0x10\"");
}
END_TEST

START_TEST(test_float_scalars)
{
        /* Valid JSON spellings are kept as written ... */
        EXPECT_V("1.5", "1.5");
        EXPECT_V("1.50", "1.50");
        EXPECT_V("1e3", "1e3");
        EXPECT_V("1E+3", "1E+3");
        EXPECT_V("-0.25", "-0.25");
        EXPECT_V("0.0000001", "0.0000001");
        /* ... YAML-only spellings become the shortest JSON that reads back. */
        EXPECT_V(".5", "0.5");
        EXPECT_V("+.5", "0.5");
        EXPECT_V("-.5", "-0.5");
        EXPECT_V("+1.5", "1.5");
        EXPECT_V("1.", "1");
        EXPECT_V("1_000.5", "1000.5");
        EXPECT_V("01.5", "1.5");
        EXPECT_V(".5e1", "5");
        /* Not floats for Go: strings. */
        EXPECT_V("1e400", "\"1e400\"");
        EXPECT_V(".", "\".\"");
        EXPECT_V("._5", "\"._5\"");
        EXPECT_V("1.2.3", "\"1.2.3\"");
        EXPECT_V("1e", "\"1e\"");
        EXPECT_V("inf", "\"inf\"");
        EXPECT_V("nan", "\"nan\"");
        EXPECT_V("0x1p3", "\"0x1p3\"");
        EXPECT_V("\"1.5\"", "\"1.5\"");

        /* The double keeps its value too. */
        {
                struct buf err = BUF_INIT;
                json_object *o = NULL, *v;

                ck_assert_int_eq(yaml_to_json("v: 1_000.25", 11, &o, &err), 0);
                v = json_object_object_get(o, "v");
                ck_assert(json_object_is_type(v, json_type_double));
                ck_assert(json_object_get_double(v) == 1000.25);
                json_object_put(o);
                buf_free(&err);
        }
}
END_TEST

START_TEST(test_inf_nan_rejected)
{
        EXPECT("v: .inf", "ERR -22: line 1, column 4: .inf: JSON cannot represent infinity or NaN");
        EXPECT("a: 1\nb:\n  - -.Inf",
               "ERR -22: line 3, column 5: -.Inf: JSON cannot represent infinity or NaN");
        EXPECT("v: +.INF", "ERR -22: line 1, column 4: +.INF: JSON cannot represent infinity or NaN");
        EXPECT("v: .NaN", "ERR -22: line 1, column 4: .NaN: JSON cannot represent infinity or NaN");
        EXPECT("v: .nan", "ERR -22: line 1, column 4: .nan: JSON cannot represent infinity or NaN");
        EXPECT("v: !!float .inf",
               "ERR -22: line 1, column 4: .inf: JSON cannot represent infinity or NaN");
        /* Spelled otherwise, they are strings. */
        EXPECT_V(".infinity", "\".infinity\"");
        EXPECT_V("'.inf'", "\".inf\"");
}
END_TEST

START_TEST(test_strings_quoted_and_block)
{
        EXPECT("a: hello world\nb: 'it''s'\nc: \"tab\\there\\u00e9\"\n",
               "{\"a\":\"hello world\",\"b\":\"it's\",\"c\":\"tab\\there\xc3\xa9\"}");
        EXPECT("a: |\n  line1\n  line2\nb: >-\n  folded\n  text\nc: |-\n  12\n",
               "{\"a\":\"line1\\nline2\\n\",\"b\":\"folded text\",\"c\":\"12\"}");
        EXPECT("a: multi\n  line plain\n", "{\"a\":\"multi line plain\"}");
        EXPECT("a: caf\xc3\xa9 \xe2\x9c\x93", "{\"a\":\"caf\xc3\xa9 \xe2\x9c\x93\"}");
        /* An escaped NUL in a value is kept (length-aware strings). */
        {
                struct buf err = BUF_INIT;
                json_object *o = NULL, *v;

                ck_assert_int_eq(yaml_to_json("a: \"x\\0y\"", 9, &o, &err), 0);
                v = json_object_object_get(o, "a");
                ck_assert_int_eq(json_object_get_string_len(v), 3);
                ck_assert_int_eq(memcmp(json_object_get_string(v), "x\0y", 3), 0);
                json_object_put(o);
                buf_free(&err);
        }
}
END_TEST

START_TEST(test_explicit_tags)
{
        EXPECT("v: !!str 12", "{\"v\":\"12\"}");
        EXPECT("v: !!str yes", "{\"v\":\"yes\"}");
        EXPECT("v: !!str", "{\"v\":\"\"}");
        EXPECT("v: !!int \"12\"", "{\"v\":12}");
        EXPECT("v: !!int 0x10", "{\"v\":16}");
        EXPECT("v: !!float 1", "{\"v\":1}");
        EXPECT("v: !!float \"2.5\"", "{\"v\":2.5}");
        EXPECT("v: !!bool \"yes\"", "{\"v\":true}");
        EXPECT("v: !!null ~", "{\"v\":null}");
        EXPECT("v: !!null \"\"", "{\"v\":null}");
        EXPECT("v: !!timestamp 2001-12-14", "{\"v\":\"2001-12-14\"}");
        EXPECT("v: !!binary aGVsbG8=", "{\"v\":\"hello\"}");
        EXPECT("v: !!binary |\n  aGVs\n  bG8=\n", "{\"v\":\"hello\"}");
        EXPECT("v: !custom 12", "{\"v\":\"12\"}");
        EXPECT("v: ! 12", "{\"v\":\"12\"}");
        EXPECT("v: !<tag:yaml.org,2002:str> 12", "{\"v\":\"12\"}");
        EXPECT("v: !!map {a: 1}", "{\"v\":{\"a\":1}}");
        EXPECT("v: !!seq [1]", "{\"v\":[1]}");
        EXPECT("v: !!int abc", "ERR -22: line 1, column 4: cannot decode !!str `abc` as a !!int");
        EXPECT("v: !!int 1.5", "ERR -22: line 1, column 4: cannot decode !!float `1.5` as a !!int");
        EXPECT("v: !!bool 1", "ERR -22: line 1, column 4: cannot decode !!int `1` as a !!bool");
        EXPECT("v: !!float x", "ERR -22: line 1, column 4: cannot decode !!str `x` as a !!float");
        EXPECT("v: !!null x", "ERR -22: line 1, column 4: cannot decode !!str `x` as a !!null");
        EXPECT("v: !!binary '@@'", "ERR -22: line 1, column 4: !!binary value contains invalid base64 data");
}
END_TEST

START_TEST(test_keys_become_strings)
{
        EXPECT("1: a\nyes: b\n1.5: c\n0x10: d\n1e7: e\nfalse: f\n-3: g\n0.1: h\n",
               "{\"-3\":\"g\",\"0.1\":\"h\",\"1\":\"a\",\"1.5\":\"c\",\"16\":\"d\","
               "\"1e+07\":\"e\",\"false\":\"f\",\"true\":\"b\"}");
        EXPECT("{100000: a, 1000000: b, .inf: c}", "{\".inf\":\"c\",\"100000\":\"a\",\"1000000\":\"b\"}");
        EXPECT("\"1\": quoted\n", "{\"1\":\"quoted\"}");
        EXPECT("? [1]\n: 2\n",
               "ERR -22: line 1, column 3: a mapping key must be a scalar (JSON object keys are strings)");
        EXPECT("{{a: 1}: 2}",
               "ERR -22: line 1, column 2: a mapping key must be a scalar (JSON object keys are strings)");
        EXPECT("~: a", "ERR -22: line 1, column 1: a null mapping key cannot be a JSON object key");
        EXPECT("\"a\\0b\": 1", "ERR -22: line 1, column 1: a mapping key may not contain a NUL character");
        /* An alias to a scalar can be a key; to a collection it cannot. */
        EXPECT("a: &k key\n*k : v\n", "{\"a\":\"key\",\"key\":\"v\"}");
        EXPECT("a: &k 7\n*k : v\n", "{\"7\":\"v\",\"a\":7}");
        EXPECT("a: &k [1]\n*k : v\n",
               "ERR -22: line 2, column 1: a mapping key must be a scalar (JSON object keys are strings)");
        /* Go's YAML 1.1 quirk: the key y (or n, on, off...) is a bool. */
        EXPECT("y: 1\nn: 2\non: 3\n", "{\"false\":2,\"true\":3}");
        /* Duplicate keys: the last wins, as in yaml.v2. */
        EXPECT("a: 1\nb: 2\na: 3\n", "{\"a\":3,\"b\":2}");
}
END_TEST

START_TEST(test_anchors_and_aliases)
{
        json_object *o = NULL, *x, *y;
        struct buf err = BUF_INIT;
        const char *doc = "base: &b {image: nginx, ports: [80]}\nc1: *b\nc2: *b\n";

        EXPECT("a: &x 1\nb: *x\nc: &l [1, 2]\nd: *l\ne: &m {k: v}\nf: *m\n",
               "{\"a\":1,\"b\":1,\"c\":[1,2],\"d\":[1,2],\"e\":{\"k\":\"v\"},\"f\":{\"k\":\"v\"}}");
        /* A name defined again refers to the new node from then on. */
        EXPECT("a: &x 1\nb: *x\nc: &x 2\nd: *x\n", "{\"a\":1,\"b\":1,\"c\":2,\"d\":2}");
        EXPECT("a: &n ~\nb: *n\n", "{\"a\":null,\"b\":null}");
        EXPECT("a: *nope", "ERR -22: line 1, column 4: unknown anchor 'nope' referenced");
        EXPECT("a: &a [1, *a]", "ERR -22: line 1, column 11: anchor 'a' value contains itself");
        EXPECT("a: &a {b: *a}", "ERR -22: line 1, column 11: anchor 'a' value contains itself");

        /* Aliases are copies: editing one leaves the others alone. */
        ck_assert_int_eq(yaml_to_json(doc, strlen(doc), &o, &err), 0);
        x = json_object_object_get(o, "c1");
        y = json_object_object_get(o, "c2");
        ck_assert_ptr_ne(x, y);
        json_object_object_add(x, "image", json_object_new_string("changed"));
        ck_assert_str_eq(json_object_get_string(json_object_object_get(y, "image")), "nginx");
        ck_assert_str_eq(json_object_get_string(json_object_object_get(
                                 json_object_object_get(o, "base"), "image")),
                         "nginx");
        json_object_put(o);
        buf_free(&err);
}
END_TEST

START_TEST(test_merge_keys)
{
        EXPECT("base: &b {p: 1, q: 2}\nm:\n  <<: *b\n  q: 3\n",
               "{\"base\":{\"p\":1,\"q\":2},\"m\":{\"p\":1,\"q\":3}}");
        /* yaml.v2: merged keys override the ones written before <<. */
        EXPECT("base: &b {p: 1, q: 2}\nm:\n  q: 3\n  <<: *b\n",
               "{\"base\":{\"p\":1,\"q\":2},\"m\":{\"p\":1,\"q\":2}}");
        /* A sequence: earlier mappings take precedence. */
        EXPECT("a: &a {x: 1}\nb: &b {x: 2, z: 3}\nm: {<<: [*a, *b]}\n",
               "{\"a\":{\"x\":1},\"b\":{\"x\":2,\"z\":3},\"m\":{\"x\":1,\"z\":3}}");
        EXPECT("m: {<<: {x: 1}, z: 2}", "{\"m\":{\"x\":1,\"z\":2}}");
        EXPECT("m: {<<: 1}", "ERR -22: line 1, column 9: map merge requires map or sequence of maps as the value");
        EXPECT("m: {<<: [1]}",
               "ERR -22: line 1, column 9: map merge requires map or sequence of maps as the value");
        /* Quoted, it is an ordinary key. */
        EXPECT("m: {\"<<\": 1}", "{\"m\":{\"<<\":1}}");
}
END_TEST

START_TEST(test_alias_bomb_bounded)
{
        const char *bomb =
                "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
                "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
                "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
                "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
                "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
                "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n"
                "h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]\n"
                "i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h, *h]\n";
        struct timespec t0, t1;
        char *got;

        clock_gettime(CLOCK_MONOTONIC, &t0);
        got = conv(bomb);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        ck_assert_msg(strstr(got, "ERR -22: line 6, column ") == got, "got %s", got);
        ck_assert_msg(strstr(got, "more than 1000000 nodes") != NULL, "got %s", got);
        /* Refused long before a billion nodes exist. */
        ck_assert_int_lt(t1.tv_sec - t0.tv_sec, 20);
        free(got);
}
END_TEST

static char *repeat_doc(const char *open, const char *mid, const char *close, size_t n)
{
        size_t lo = strlen(open), lm = strlen(mid), lc = strlen(close);
        char *s = malloc(lo + n * lm + lc + 1), *p = s;

        ck_assert_ptr_nonnull(s);
        memcpy(p, open, lo);
        p += lo;
        for (size_t i = 0; i < n; i++, p += lm)
                memcpy(p, mid, lm);
        memcpy(p, close, lc);
        p[lc] = '\0';
        return s;
}

START_TEST(test_node_limit_exact)
{
        /* A sequence of N scalars is N + 1 nodes. */
        char *ok = repeat_doc("[", "0,", "0]", YAML_JSON_MAX_NODES - 2);
        char *over = repeat_doc("[", "0,", "0]", YAML_JSON_MAX_NODES - 1);
        char *got;

        got = conv(ok);
        ck_assert_int_eq(strncmp(got, "[0,0,0", 6), 0);
        ck_assert_int_eq(strlen(got), 2 * (size_t)YAML_JSON_MAX_NODES - 1);
        free(got);
        got = conv(over);
        ck_assert_str_eq(got, "ERR -22: line 1, column 2000000: document too large: "
                              "more than 1000000 nodes (alias expansion?)");
        free(got);
        free(ok);
        free(over);
}
END_TEST

START_TEST(test_depth_limit)
{
        char open[80], close[80], *s, *got;

        memset(open, '[', YAML_JSON_MAX_DEPTH + 1);
        memset(close, ']', YAML_JSON_MAX_DEPTH + 1);
        s = calloc(1, 2 * YAML_JSON_MAX_DEPTH + 3);
        ck_assert_ptr_nonnull(s);
        memcpy(s, open, YAML_JSON_MAX_DEPTH);
        memcpy(s + YAML_JSON_MAX_DEPTH, close, YAML_JSON_MAX_DEPTH);
        got = conv(s);
        ck_assert_int_eq(strncmp(got, "[[[[", 4), 0);
        free(got);
        memcpy(s, open, YAML_JSON_MAX_DEPTH + 1);
        memcpy(s + YAML_JSON_MAX_DEPTH + 1, close, YAML_JSON_MAX_DEPTH + 1);
        got = conv(s);
        ck_assert_str_eq(got, "ERR -22: line 1, column 65: nesting too deep (limit 64)");
        free(got);
        free(s);

        /* Through an alias: 63 levels under a mapping fit, once more not. */
        s = repeat_doc("a: &a ", "[", "", YAML_JSON_MAX_DEPTH - 1);
        got = repeat_doc(s, "]", "\nb: [*a]\n", YAML_JSON_MAX_DEPTH - 1);
        free(s);
        s = conv(got);
        ck_assert_str_eq(s, "ERR -22: line 2, column 5: nesting too deep (limit 64)");
        free(s);
        free(got);
}
END_TEST

START_TEST(test_syntax_errors_have_line_and_column)
{
        EXPECT("a: b\nkey: value: bad\n",
               "ERR -22: line 2, column 11: mapping values are not allowed in this context");
        EXPECT("a: [1, 2\nb: 3\n",
               "ERR -22: line 2, column 2: did not find expected ',' or ']' (while parsing a flow "
               "sequence at line 1, column 4)");
        EXPECT("a: @x", "ERR -22: line 1, column 4: found character that cannot start any token "
                        "(while scanning for the next token)");
        EXPECT("a:\n  - 1\n - 2\n",
               "ERR -22: line 3, column 2: did not find expected key (while parsing a block "
               "mapping at line 1, column 1)");
        EXPECT("a: \"open\n", "ERR -22: line 2, column 1: found unexpected end of stream "
                              "(while scanning a quoted scalar at line 1, column 4)");
        EXPECT("a:\tb\n\tc: d\n", "ERR -22: line 2, column 1: found a tab character that "
                                  "violates indentation (while scanning a plain scalar at line 1, "
                                  "column 4)");
}
END_TEST

START_TEST(test_first_document_only)
{
        struct buf err = BUF_INIT;

        EXPECT("a: 1\n---\nb: 2\n", "{\"a\":1}");
        EXPECT("---\na: 1\n...\n---\nb: 2\n", "{\"a\":1}");
        EXPECT("a: 1\n---\nb: [unclosed\n", "{\"a\":1}");
        ck_assert_int_eq(yaml_count_documents("a: 1\n---\nb: 2\n---\n", 18, &err), 3);
        ck_assert_int_eq(yaml_count_documents("a: 1\n", 5, &err), 1);
        ck_assert_int_eq(yaml_count_documents("", 0, &err), 0);
        ck_assert_int_eq(yaml_count_documents("# only a comment\n", 17, &err), 0);
        ck_assert_int_eq(yaml_count_documents("a: 1\n---\nb: [x\n", 15, &err), -EINVAL);
        ck_assert_str_eq(err.data, "line 4, column 1: did not find expected ',' or ']' "
                                   "(while parsing a flow sequence at line 3, column 4)");
        buf_free(&err);
}
END_TEST

START_TEST(test_empty_and_null_documents)
{
        static const char *const empty[] = {"", "   \n\n", "# comment only\n", "---\n", "---\n...\n",
                                            "~", "null\n", "--- null\n---\na: 1\n", "!!null ''"};

        for (size_t i = 0; i < sizeof(empty) / sizeof(empty[0]); i++)
                EXPECT(empty[i], "ERR -61: empty document");
        {
                struct buf err = BUF_INIT;
                json_object *o = (json_object *)&err;

                /* NULL text with length 0 is an empty input, and the
                 * output is untouched on failure. */
                ck_assert_int_eq(yaml_to_json(NULL, 0, &o, &err), -ENODATA);
                ck_assert_ptr_eq(o, (json_object *)&err);
                buf_free(&err);
        }
        /* A scalar or sequence document is converted (the caller decides). */
        EXPECT("hello", "\"hello\"");
        EXPECT("- 1\n- 2\n", "[1,2]");
}
END_TEST

START_TEST(test_binary_garbage)
{
        static const char nul[] = "apiVersion: v1\nkind: P\0d\n";
        static const unsigned char junk[] = {0x7f, 'E', 'L', 'F', 0x02, 0x01, 0x01, 0x00, 0x00};
        static const unsigned char bad_utf8[] = {'a', ':', ' ', 0xc3, 0x28, '\n'};
        static const unsigned char ctl[] = {'a', ':', ' ', 0x01, '\n'};
        char *got;

        got = conv_n(nul, sizeof(nul) - 1);
        ck_assert_str_eq(got, "ERR -22: line 2, column 8: NUL byte at offset 22: binary data is "
                              "not a YAML or JSON manifest");
        free(got);
        got = conv_n((const char *)junk, sizeof(junk));
        ck_assert_str_eq(got, "ERR -22: line 1, column 8: NUL byte at offset 7: binary data is "
                              "not a YAML or JSON manifest");
        free(got);
        got = conv_n((const char *)bad_utf8, sizeof(bad_utf8));
        ck_assert_str_eq(got, "ERR -22: line 1, column 5: invalid trailing UTF-8 octet (byte "
                              "0x28): not YAML or JSON text; is this a binary file?");
        free(got);
        got = conv_n((const char *)ctl, sizeof(ctl));
        ck_assert_str_eq(got, "ERR -22: line 1, column 4: control characters are not allowed "
                              "(byte 0x01): not YAML or JSON text; is this a binary file?");
        free(got);
        /* Pseudo-random bytes never crash and always fail cleanly. */
        for (unsigned seed = 1; seed <= 200; seed++) {
                unsigned char buf[256];
                unsigned x = seed;

                for (size_t i = 0; i < sizeof(buf); i++) {
                        x = x * 1103515245u + 12345u;
                        buf[i] = (unsigned char)(x >> 16);
                }
                got = conv_n((const char *)buf, sizeof(buf));
                ck_assert_msg(strncmp(got, "ERR -22: line ", 14) == 0, "seed %u: %s", seed, got);
                free(got);
        }
}
END_TEST

START_TEST(test_json_input)
{
        const char *json = "{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": {\"name\": "
                           "\"x\", \"labels\": {\"a\": \"b\"}}, \"spec\": {\"containers\": [{\"name\": "
                           "\"c\", \"image\": \"i\", \"ports\": [{\"containerPort\": 80}]}], "
                           "\"enableServiceLinks\": false, \"x\": null, \"f\": 1.0}}";
        const char *yaml = "# the same object in YAML\n"
                           "kind: Pod\napiVersion: v1\n"
                           "spec:\n  f: 1.0\n  x: ~\n  enableServiceLinks: false\n"
                           "  containers:\n  - image: i\n    name: c\n    ports:\n    - containerPort: 80\n"
                           "metadata: {labels: {a: b}, name: 'x'}\n";
        char *a = conv(json), *b = conv(yaml);

        ck_assert_str_eq(a, b);
        ck_assert_str_eq(a, "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"labels\":{\"a\":"
                            "\"b\"},\"name\":\"x\"},\"spec\":{\"containers\":[{\"image\":\"i\",\"name\":"
                            "\"c\",\"ports\":[{\"containerPort\":80}]}],\"enableServiceLinks\":false,"
                            "\"f\":1.0,\"x\":null}}");
        free(a);
        free(b);
        EXPECT("{\"s\": \"caf\\u00e9 \\\"q\\\" \\\\ \\/\"}", "{\"s\":\"caf\xc3\xa9 \\\"q\\\" \\\\ /\"}");
}
END_TEST

START_TEST(test_utf16_input)
{
        /* "a: 1" as UTF-16LE with its byte order mark: NUL bytes are fine. */
        static const char u16[] = {(char)0xff, (char)0xfe, 'a', 0, ':', 0, ' ', 0, '1', 0};
        char *got = conv_n(u16, sizeof(u16));

        ck_assert_str_eq(got, "{\"a\":1}");
        free(got);
}
END_TEST

START_TEST(test_error_buffer_optional)
{
        json_object *o = NULL;

        ck_assert_int_eq(yaml_to_json("a: [", 4, &o, NULL), -EINVAL);
        ck_assert_ptr_null(o);
        ck_assert_int_eq(yaml_to_json("", 0, &o, NULL), -ENODATA);
        ck_assert_int_eq(yaml_to_json("a: 1", 4, &o, NULL), 0);
        ck_assert_ptr_nonnull(o);
        json_object_put(o);
}
END_TEST

UNIT_MAIN(test_null_scalars, test_bool_scalars, test_int_scalars, test_float_scalars,
          test_inf_nan_rejected, test_strings_quoted_and_block, test_explicit_tags,
          test_keys_become_strings, test_anchors_and_aliases, test_merge_keys,
          test_alias_bomb_bounded, test_node_limit_exact, test_depth_limit,
          test_syntax_errors_have_line_and_column, test_first_document_only,
          test_empty_and_null_documents, test_binary_garbage, test_json_input,
          test_utf16_input, test_error_buffer_optional)
