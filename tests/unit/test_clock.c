/* Unit tests: RFC 3339 text, written and read (util/clock). */
#include <errno.h>
#include <stdint.h>

#include "util/clock.h"
#include "unit.h"

/* 2006-01-02T15:04:05Z, Go's reference time, in microseconds. */
#define REF_USEC (1136214245ull * 1000000ull)

START_TEST(test_format_precisions)
{
        char out[CLOCK_RFC3339_MAX];

        ck_assert_str_eq(clock_rfc3339(REF_USEC + 123450, CLOCK_SECONDS, out), "2006-01-02T15:04:05Z");
        ck_assert_str_eq(clock_rfc3339(REF_USEC + 123450, CLOCK_MICRO, out), "2006-01-02T15:04:05.123450Z");
        ck_assert_str_eq(clock_rfc3339(REF_USEC, CLOCK_MICRO, out), "2006-01-02T15:04:05.000000Z");
        /* Go's RFC3339Nano: trailing zeros, then the dot, dropped. */
        ck_assert_str_eq(clock_rfc3339(REF_USEC + 123450, CLOCK_NANO, out), "2006-01-02T15:04:05.12345Z");
        ck_assert_str_eq(clock_rfc3339(REF_USEC + 1, CLOCK_NANO, out), "2006-01-02T15:04:05.000001Z");
        ck_assert_str_eq(clock_rfc3339(REF_USEC, CLOCK_NANO, out), "2006-01-02T15:04:05Z");
        ck_assert_str_eq(clock_rfc3339(0, CLOCK_SECONDS, out), "1970-01-01T00:00:00Z");
}
END_TEST

START_TEST(test_parse)
{
        int64_t sec;
        long nsec;

        ck_assert_int_eq(clock_parse_rfc3339("2006-01-02T15:04:05Z", &sec, &nsec), 0);
        ck_assert_int_eq(sec, 1136214245);
        ck_assert_int_eq(nsec, 0);
        /* The same instant in another zone, with a fraction. */
        ck_assert_int_eq(clock_parse_rfc3339("2006-01-02T08:04:05.5-07:00", &sec, &nsec), 0);
        ck_assert_int_eq(sec, 1136214245);
        ck_assert_int_eq(nsec, 500000000);
        ck_assert_int_eq(clock_parse_rfc3339("2006-01-02t15:04:05.000000001z", &sec, &nsec), 0);
        ck_assert_int_eq(nsec, 1);
        ck_assert_int_eq(clock_parse_rfc3339("2006-01-02 15:04:05+00:00", &sec, &nsec), 0);
        ck_assert_int_eq(sec, 1136214245);
        ck_assert_int_eq(clock_parse_rfc3339("2006-01-02T15:04:05", &sec, &nsec), -EINVAL);
        ck_assert_int_eq(clock_parse_rfc3339("2006-01-02T15:04:05.Z", &sec, &nsec), -EINVAL);
        ck_assert_int_eq(clock_parse_rfc3339("2006-01-02T15:04:05Zx", &sec, &nsec), -EINVAL);
        ck_assert_int_eq(clock_parse_rfc3339("yesterday", &sec, &nsec), -EINVAL);
}
END_TEST

/* What the formatter writes, the parser reads back to the microsecond. */
START_TEST(test_round_trip)
{
        char out[CLOCK_RFC3339_MAX];
        uint64_t t[] = {0, 1, REF_USEC + 999999, 4102444800ull * 1000000ull + 10};

        for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
                int64_t sec;
                long nsec;

                ck_assert_int_eq(clock_parse_rfc3339(clock_rfc3339(t[i], CLOCK_NANO, out), &sec, &nsec), 0);
                ck_assert_uint_eq((uint64_t)sec * 1000000u + (uint64_t)nsec / 1000u, t[i]);
        }
}
END_TEST

/* Jitter stays below its bound, and spreads (a thousand draws below a
 * million are not all one value). */
START_TEST(test_jitter_in_range)
{
        uint64_t first = clock_jitter(1000000), other = 0;

        ck_assert_uint_eq(clock_jitter(0), 0);
        ck_assert_uint_eq(clock_jitter(1), 0);
        ck_assert_uint_lt(first, 1000000);
        for (int i = 0; i < 1000; i++) {
                uint64_t v = clock_jitter(1000000);

                ck_assert_uint_lt(v, 1000000);
                if (v != first)
                        other++;
        }
        ck_assert_uint_gt(other, 0);
}
END_TEST

UNIT_MAIN(test_format_precisions, test_parse, test_round_trip, test_jitter_in_range)
