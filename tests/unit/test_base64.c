/* Unit tests: base64 as Go's StdEncoding reads it (util/base64). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/base64.h"
#include "failalloc.h"
#include "unit.h"

static int dec(const char *in, const char *want)
{
        char *out = NULL;
        size_t n = 0;
        int r = base64_decode(in, strlen(in), &out, &n);

        if (r == 0) {
                ck_assert_msg(want != NULL, "\"%s\" decoded, should be refused", in);
                ck_assert_uint_eq(n, strlen(want));
                ck_assert_str_eq(out, want);
                free(out);
        } else {
                ck_assert_msg(want == NULL, "\"%s\" refused (%d), should decode", in, r);
                ck_assert_ptr_null(out);
        }
        return r;
}

START_TEST(test_decodes)
{
        dec("", "");
        dec("aGVsbG8=", "hello");
        dec("aGVsbA==", "hell");
        dec("aGVsbG8h", "hello!");
        /* Line breaks and blanks anywhere (a PEM block, a YAML block). */
        dec("aGVs\nbG8=", "hello");
        dec(" aGVs\r\n\tbG8=\n", "hello");
        dec("a+/A", "k\xef\xc0");
}
END_TEST

START_TEST(test_refuses)
{
        ck_assert_int_eq(dec("abc", NULL), -EINVAL);       /* not a whole group */
        ck_assert_int_eq(dec("not*base64!", NULL), -EINVAL);
        ck_assert_int_eq(dec("aGVsbG8", NULL), -EINVAL);   /* padding missing */
        ck_assert_int_eq(dec("aG=sbG8=", NULL), -EINVAL);  /* '=' inside */
        ck_assert_int_eq(dec("aGVsbA==aGVs", NULL), -EINVAL);
        ck_assert_int_eq(dec("aGV===", NULL), -EINVAL);
        ck_assert_int_eq(dec("a===", NULL), -EINVAL);
        ck_assert_int_eq(dec("aGVs-_8=", NULL), -EINVAL);  /* the URL alphabet */
}
END_TEST

/* Encoding: padded, standard alphabet, as Go's StdEncoding; what it
 * writes decodes back. */
START_TEST(test_encodes)
{
        static const struct {
                const char *in, *out;
        } cases[] = {
                {"", ""}, {"h", "aA=="}, {"he", "aGU="}, {"hel", "aGVs"}, {"hello", "aGVsbG8="}, {"k\xef\xc0", "a+/A"},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char *out = NULL;

                ck_assert_int_eq(base64_encode(cases[i].in, strlen(cases[i].in), &out), 0);
                ck_assert_str_eq(out, cases[i].out);
                if (cases[i].in[0])
                        dec(out, cases[i].in);
                free(out);
        }
}
END_TEST

START_TEST(test_encode_out_of_memory)
{
        char *out = NULL;

        if (!failalloc_enabled())
                return;
        failalloc_arm(1);
        ck_assert_int_eq(base64_encode("hello", 5, &out), -ENOMEM);
        failalloc_arm(0);
        ck_assert_ptr_null(out);
}
END_TEST

UNIT_MAIN(test_decodes, test_refuses, test_encodes, test_encode_out_of_memory)
