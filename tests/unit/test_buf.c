/* Unit tests: buf. */
#include <string.h>

#include "util/buf.h"
#include "unit.h"

START_TEST(test_buf_append_and_printf)
{
        struct buf b = BUF_INIT;

        ck_assert_int_eq(buf_puts(&b, "ab"), 0);
        ck_assert_int_eq(buf_printf(&b, "-%d-%s", 42, "x"), 0);
        ck_assert_str_eq(b.data, "ab-42-x");
        ck_assert_uint_eq(b.len, 7);
        buf_consume(&b, 3);
        ck_assert_str_eq(b.data, "42-x");
        buf_reset(&b);
        ck_assert_uint_eq(b.len, 0);
        ck_assert_str_eq(b.data, "");
        buf_free(&b);
        ck_assert_str_eq(b.data, "");
        ck_assert_uint_eq(b.cap, 0);
}
END_TEST

START_TEST(test_buf_grows_past_many_doublings)
{
        struct buf b = BUF_INIT;

        for (int i = 0; i < 100000; i++)
                ck_assert_int_eq(buf_putc(&b, (char)('a' + i % 26)), 0);
        ck_assert_uint_eq(b.len, 100000);
        ck_assert_int_eq(b.data[99999], 'a' + 99999 % 26);
        ck_assert_int_eq(b.data[100000], '\0');
        buf_free(&b);
}
END_TEST

START_TEST(test_buf_json_string_escapes)
{
        struct buf b = BUF_INIT;
        const char in[] = "q\"b\\n\n\t\x01\x1f/é";

        ck_assert_int_eq(buf_json_string(&b, in, sizeof(in) - 1), 0);
        ck_assert_str_eq(b.data, "\"q\\\"b\\\\n\\n\\t\\u0001\\u001f/é\"");
        buf_free(&b);
}
END_TEST

/* Found by tests/fuzz/fuzz_api_list: a pod from the API server with
 * bytes that are not UTF-8 reached consumers as they were, so the stream
 * line was not valid UTF-8 JSON.  Each such byte is now U+FFFD, as in Go;
 * well-formed sequences up to 4 bytes pass unchanged. */
START_TEST(test_buf_json_string_invalid_utf8)
{
        static const struct {
                const char *in, *want;
        } cases[] = {
                {"a\xff", "\"a\\ufffd\""},
                {"\xc3", "\"\\ufffd\""},                      /* cut short */
                {"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\""},
                {"\xc0\xaf", "\"\\ufffd\\ufffd\""},              /* overlong '/' */
                {"\xe0\x80\xaf", "\"\\ufffd\\ufffd\\ufffd\""},      /* overlong */
                {"\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\""},      /* a surrogate */
                {"\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\""}, /* above U+10FFFF */
                {"\xe2\x82x", "\"\\ufffd\\ufffdx\""},
        };
        struct buf b = BUF_INIT;

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                buf_reset(&b);
                ck_assert_int_eq(buf_json_string(&b, cases[i].in, strlen(cases[i].in)), 0);
                ck_assert_msg(strcmp(b.data, cases[i].want) == 0, "case %zu: got %s, want %s", i, b.data,
                              cases[i].want);
        }
        buf_free(&b);
}
END_TEST

START_TEST(test_buf_steal_empty_and_full)
{
        struct buf b = BUF_INIT;
        size_t n = 99;
        char *s = buf_steal(&b, &n);

        ck_assert_ptr_nonnull(s);
        ck_assert_str_eq(s, "");
        ck_assert_uint_eq(n, 0);
        free(s);
        buf_puts(&b, "hello");
        s = buf_steal(&b, &n);
        ck_assert_str_eq(s, "hello");
        ck_assert_uint_eq(n, 5);
        ck_assert_str_eq(b.data, "");
        free(s);
        buf_free(NULL);
}
END_TEST

/* An empty buffer reads as "" in every state that leaves it empty, and an
 * append works from each of them (the shared "" is never written). */
START_TEST(test_buf_empty_reads_as_empty_string)
{
        struct buf b = BUF_INIT, z;
        char *s;

        ck_assert_ptr_nonnull(b.data);
        ck_assert_str_eq(b.data, "");
        ck_assert_uint_eq(b.len, 0);
        ck_assert_str_eq(b.data + b.len, "");

        buf_init(&b);
        ck_assert_str_eq(b.data, "");
        ck_assert_int_eq(buf_puts(&b, "after init"), 0);
        ck_assert_str_eq(b.data, "after init");

        buf_reset(&b); /* keeps the block */
        ck_assert_str_eq(b.data, "");
        ck_assert_uint_eq(b.len, 0);
        ck_assert_int_eq(buf_putc(&b, 'r'), 0);
        ck_assert_str_eq(b.data, "r");

        buf_free(&b);
        ck_assert_str_eq(b.data, "");
        ck_assert_uint_eq(b.len, 0);
        buf_reset(&b); /* nothing allocated: still "" */
        ck_assert_str_eq(b.data, "");
        buf_consume(&b, 0);
        ck_assert_str_eq(b.data, "");
        ck_assert_int_eq(buf_printf(&b, "%s-%d", "free", 1), 0);
        ck_assert_str_eq(b.data, "free-1");

        s = buf_steal(&b, NULL);
        ck_assert_str_eq(s, "free-1");
        free(s);
        ck_assert_str_eq(b.data, "");
        ck_assert_uint_eq(b.len, 0);
        ck_assert_int_eq(buf_append(&b, "st", 2), 0);
        ck_assert_str_eq(b.data, "st");
        buf_free(&b);

        /* Stealing an empty buffer gives a heap "" of the caller's, and the
         * buffer is still usable; so is an empty append. */
        s = buf_steal(&b, NULL);
        ck_assert_ptr_nonnull(s);
        ck_assert_ptr_ne(s, b.data);
        free(s);
        ck_assert_str_eq(b.data, "");
        ck_assert_int_eq(buf_append(&b, "", 0), 0);
        ck_assert_str_eq(b.data, "");
        ck_assert_int_eq(buf_json_string(&b, "", 0), 0);
        ck_assert_str_eq(b.data, "\"\"");
        buf_free(&b);
        ck_assert_str_eq(b.data, "");

        /* Two empty buffers, one copied from the other, are independent. */
        z = b;
        ck_assert_int_eq(buf_puts(&z, "z"), 0);
        ck_assert_str_eq(b.data, "");
        ck_assert_str_eq(z.data, "z");
        buf_free(&z);

        /* A zeroed buffer (calloc'd struct) takes appends and resets too. */
        memset(&z, 0, sizeof(z));
        ck_assert_int_eq(buf_puts(&z, "zeroed"), 0);
        ck_assert_str_eq(z.data, "zeroed");
        buf_free(&z);
        memset(&z, 0, sizeof(z));
        buf_reset(&z);
        ck_assert_str_eq(z.data, "");
        buf_free(&z);
        memset(&z, 0, sizeof(z));
        s = buf_steal(&z, NULL);
        ck_assert_str_eq(s, "");
        free(s);
        buf_free(&z);
}
END_TEST

UNIT_MAIN(test_buf_append_and_printf, test_buf_grows_past_many_doublings,
          test_buf_json_string_escapes, test_buf_json_string_invalid_utf8,
          test_buf_steal_empty_and_full, test_buf_empty_reads_as_empty_string)
