/* Unit tests: SHA-256 digests and their text (util/digest). */
#include <errno.h>
#include <string.h>

#include "failalloc.h"
#include "util/digest.h"
#include "unit.h"

/* The test vectors of FIPS 180-2 (appendix B). */
START_TEST(test_known_digests)
{
        uint8_t d[DIGEST_LEN];
        char text[DIGEST_TEXT_MAX];

        ck_assert_int_eq(digest_sha256("abc", 3, d), 0);
        digest_text(d, text);
        ck_assert_str_eq(text, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        ck_assert_int_eq(digest_sha256("", 0, d), 0);
        digest_text(d, text);
        ck_assert_str_eq(text, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}
END_TEST

/* A text parses back to its digest; anything else is refused. */
START_TEST(test_parse)
{
        uint8_t d[DIGEST_LEN], back[DIGEST_LEN];
        char text[DIGEST_TEXT_MAX], bad[DIGEST_TEXT_MAX + 1];

        ck_assert_int_eq(digest_sha256("abc", 3, d), 0);
        digest_text(d, text);
        ck_assert_int_eq(digest_parse(text, back), 0);
        ck_assert_int_eq(memcmp(d, back, DIGEST_LEN), 0);
        ck_assert_int_eq(digest_parse(NULL, back), -EINVAL);
        ck_assert_int_eq(digest_parse("", back), -EINVAL);
        ck_assert_int_eq(digest_parse("md5:900150983cd24fb0d6963f7d28e17f72", back), -EINVAL);
        memcpy(bad, text, sizeof(text));
        bad[DIGEST_TEXT_MAX - 2] = '\0'; /* one digit short */
        ck_assert_int_eq(digest_parse(bad, back), -EINVAL);
        memcpy(bad, text, sizeof(text));
        bad[10] = 'A'; /* upper case */
        ck_assert_int_eq(digest_parse(bad, back), -EINVAL);
        memcpy(bad, text, sizeof(text));
        bad[10] = 'g';
        ck_assert_int_eq(digest_parse(bad, back), -EINVAL);
        memcpy(bad, text, sizeof(text) - 1);
        bad[DIGEST_TEXT_MAX - 1] = '0'; /* one digit more */
        bad[DIGEST_TEXT_MAX] = '\0';
        ck_assert_int_eq(digest_parse(bad, back), -EINVAL);
}
END_TEST

/* Out of memory inside libcrypto: -ENOMEM and the output untouched, or
 * the right digest; nothing leaked; then it works. */
START_TEST(test_out_of_memory)
{
        uint8_t d[DIGEST_LEN], want[DIGEST_LEN];
        long before;
        int failures = 0;

        if (!failalloc_enabled())
                return;
        ck_assert_int_eq(digest_sha256("abc", 3, want), 0);
        before = failalloc_live();
        for (long n = 1;; n++) {
                bool failed;
                int r;

                memset(d, 0x5a, sizeof(d));
                failalloc_arm(n);
                r = digest_sha256("abc", 3, d);
                failed = failalloc_failed();
                failalloc_arm(0);
                if (!failed) {
                        ck_assert_int_eq(r, 0);
                        ck_assert_int_eq(memcmp(d, want, DIGEST_LEN), 0);
                        break;
                }
                /* libcrypto does without some of what it asks for
                 * (a cache): then the digest is right all the same. */
                if (r == 0) {
                        ck_assert_int_eq(memcmp(d, want, DIGEST_LEN), 0);
                } else {
                        failures++;
                        ck_assert_int_eq(r, -ENOMEM);
                        ck_assert_uint_eq(d[0], 0x5a);
                }
                ck_assert_int_le(failalloc_live(), before);
        }
        ck_assert_int_ge(failures, 1);
}
END_TEST

UNIT_MAIN(test_known_digests, test_parse, test_out_of_memory)
