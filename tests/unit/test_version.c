/*
 * Unit tests: version — Go's generic versions (k8s.io/apimachinery
 * util/version ParseGeneric, comparison, String, HighestSupportedVersion).
 * The expected values are what the Go code gives for each input.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/version.h"
#include "unit.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static char *formatted(const struct version *v)
{
        struct buf b = BUF_INIT;

        ck_assert_int_eq(version_format(v, &b), 0);
        return buf_steal(&b, NULL);
}

/* A list in increasing order: each entry parses, prints as `printed`, and
 * compares with the one before as `eq` says (equal, else greater), both
 * ways round. */
START_TEST(test_ordered_list)
{
        static const struct {
                const char *in, *printed;
                int eq;
        } list[] = {
                {"0.1.0", "0.1.0", 0},
                {"1.0.0-0.3.7", "1.0.0", 0},
                {"1.0.0-alpha", "1.0.0", 1},
                {"1.0.0-alpha+001", "1.0.0", 1},
                {"1.0.0.beta", "1.0.0", 1},
                {"1.0.0.rc.1", "1.0.0", 1},
                {"1.0.0", "1.0.0", 1},
                {"1.0.0+20130313144700", "1.0.0", 1},
                {"1.0x", "1.0", 1},   /* trailing text after MAJOR.MINOR */
                {"1.0.", "1.0", 1},
                {"1.0-", "1.0", 1},
                {"v1.0", "1.0", 1},
                {"1.2", "1.2", 0},
                {"1.2a.3", "1.2", 1},
                {"1.2.3", "1.2.3", 0},
                {"1.2.3.0", "1.2.3.0", 1},
                {"1.2.3a", "1.2.3", 1},
                {"1.2.3-01", "1.2.3", 1},
                {"1.02.3", "1.2.3", 1},
                {"1.2.003", "1.2.3", 1},
                {"1.2.3.4", "1.2.3.4", 0},
                {"1.2.3.4b3", "1.2.3.4", 1},
                {"1.2.3.5", "1.2.3.5", 0}, /* the fourth number counts */
                {"1.2.3.5.0.0", "1.2.3.5.0.0", 1},
                {"1.2.3.5.0.1", "1.2.3.5.0.1", 0},
                {"1.9.0", "1.9.0", 0},
                {"1.10.0", "1.10.0", 0},
                {"1.11.0.0.5", "1.11.0.0.5", 0},
                {"2.0.0", "2.0.0", 0},
                {"42.0.0", "42.0.0", 0},
                {"   42.0.0", "42.0.0", 1},
                {"\t42.0.0  ", "42.0.0", 1},
                {"\n\f\r 42.0.0 x y", "42.0.0", 1},
                {"v42.0.0-1", "42.0.0", 1},
                {"  v43.0.0", "43.0.0", 0},
                {"18446744073709551615.0", "18446744073709551615.0", 0},
        };
        struct version prev = {NULL, 0, 0};

        for (size_t i = 0; i < N(list); i++) {
                struct version v;
                char *s;

                ck_assert_msg(version_parse_generic(list[i].in, &v, NULL) == 0, "\"%s\" refused", list[i].in);
                s = formatted(&v);
                ck_assert_msg(strcmp(s, list[i].printed) == 0, "\"%s\" printed as \"%s\", want \"%s\"", list[i].in,
                              s, list[i].printed);
                free(s);
                if (i > 0) {
                        int c = version_compare(&v, &prev), rc = version_compare(&prev, &v);

                        ck_assert_msg(c == (list[i].eq ? 0 : 1) && rc == -c, "\"%s\" vs \"%s\": %d / %d", list[i].in,
                                      list[i - 1].in, c, rc);
                }
                prev = v;
        }
}
END_TEST

START_TEST(test_refused)
{
        static const struct {
                const char *in, *why;
        } bad[] = {
                {"1", "illegal version string"},
                {"v1", "illegal version string"},
                {"1.", "illegal version string"},
                {"1..3", "illegal version string"},
                {"1.bob", "illegal version string"},
                {"1 .2.3", "illegal version string"},
                {"1. 2.3", "illegal version string"},
                {"01.2.3", "zero-prefixed"},
                {"00.1", "zero-prefixed"},
                {"-1.2.3", "could not parse"},
                {"1.-2.3", "illegal version string"},
                {".2.3", "could not parse"},
                {"1a.2.3", "illegal version string"},
                {"a1.2.3", "could not parse"},
                {"bob", "could not parse"},
                {"v 1.2.3", "could not parse"},
                {"vv1.2.3", "could not parse"},
                {"V1.0", "could not parse"},
                {"\v1.0", "could not parse"}, /* \v is not white space to Go's \s */
                {"", "could not parse"},
                {".", "could not parse"},
                {"1.0\n", "could not parse"}, /* Go's "." stops at a newline */
                {"1.0x\ny", "could not parse"},
                {"18446744073709551616.0", "out of range"},
                {"1.18446744073709551616", "out of range"},
                {"v1beta1", "illegal version string"},
                {"v1.DRAPlugin", "illegal version string"},
        };
        struct buf err = BUF_INIT;

        for (size_t i = 0; i < N(bad); i++) {
                struct version v = {"untouched", 9, 9};

                buf_reset(&err);
                ck_assert_msg(version_parse_generic(bad[i].in, &v, &err) == -EINVAL, "\"%s\" accepted", bad[i].in);
                ck_assert_msg(strstr(err.data, bad[i].why), "\"%s\": \"%s\", want \"%s\"", bad[i].in,
                              err.data, bad[i].why);
                ck_assert_msg(v.n == 9 && v.len == 9, "\"%s\": written on failure", bad[i].in);
                ck_assert_int_eq(version_parse_generic(bad[i].in, &v, NULL), -EINVAL);
        }
        buf_free(&err);
}
END_TEST

START_TEST(test_components)
{
        struct version v;

        ck_assert_int_eq(version_parse_generic("v1.02.3-rc.4", &v, NULL), 0);
        ck_assert_uint_eq(v.n, 3);
        ck_assert_uint_eq(version_component(&v, 0), 1);
        ck_assert_uint_eq(version_component(&v, 1), 2);
        ck_assert_uint_eq(version_component(&v, 2), 3);
        ck_assert_uint_eq(version_component(&v, 3), 0);
        ck_assert_uint_eq(version_component(&v, 100), 0);
}
END_TEST

START_TEST(test_highest_supported)
{
        static const struct {
                const char *v[5];
                const char *want;   /* NULL: refused */
                size_t index;
        } cases[] = {
                {{"v1.0.0"}, "1.0.0", 0},
                {{"0.3.0"}, NULL, 0},
                {{"0.2.0", "v0.3.0"}, NULL, 0},
                {{"0.2.0", "v1.0.0"}, "1.0.0", 1},
                {{"0.2.0", "v1.2.3"}, "1.2.3", 1},
                {{"v1.2.3", "v0.3.0"}, "1.2.3", 0},
                {{"v1.2.3", "v0.3.0", "2.0.1"}, "1.2.3", 0},
                {{"v1.2.3", "4.9.12", "v0.3.0", "2.0.1"}, "1.2.3", 0},
                {{"4.9.12", "2.0.1"}, NULL, 0},
                {{"v1.2.3", "boo", "v0.3.0", "2.0.1"}, "1.2.3", 0},
                {{"var", "boo", "foo"}, NULL, 0},
                {{"1.0x"}, "1.0", 0},
                /* Equal versions: the last in the list is the one kept. */
                {{"1.0", "1.0.0"}, "1.0.0", 1},
                {{"1.0.0", "1.0"}, "1.0", 1},
                {{"1.2.3.4", "1.2.3.5", "1.2.3"}, "1.2.3.5", 1},
        };
        struct buf err = BUF_INIT;

        for (size_t i = 0; i < N(cases); i++) {
                size_t n = 0, idx = 99;
                struct version v;

                while (n < 5 && cases[i].v[n])
                        n++;
                buf_reset(&err);
                if (!cases[i].want) {
                        ck_assert_msg(version_highest_supported((char *const *)cases[i].v, n, &v, &idx, &err) ==
                                              -EINVAL,
                                      "case %zu accepted", i);
                        ck_assert_msg(strstr(err.data, cases[i].v[0]), "case %zu: %s", i, err.data);
                        ck_assert_uint_eq(idx, 99);
                } else {
                        char *s;

                        ck_assert_msg(version_highest_supported((char *const *)cases[i].v, n, &v, &idx, &err) == 0,
                                      "case %zu: %s", i, err.data);
                        s = formatted(&v);
                        ck_assert_msg(strcmp(s, cases[i].want) == 0 && idx == cases[i].index,
                                      "case %zu: %s at %zu, want %s at %zu", i, s, idx, cases[i].want,
                                      cases[i].index);
                        free(s);
                }
        }
        buf_reset(&err);
        ck_assert_int_eq(version_highest_supported(NULL, 0, NULL, NULL, &err), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err.data, "empty"));
        buf_free(&err);
}
END_TEST

UNIT_MAIN(test_ordered_list, test_refused, test_components, test_highest_supported)
