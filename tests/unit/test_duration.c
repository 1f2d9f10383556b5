/* Unit tests: Go-style durations. */
#include <errno.h>

#include "util/duration.h"
#include "unit.h"

static const struct {
        const char *in;
        int ret;
        uint64_t usec;
} cases[] = {
        {"20s", 0, 20000000},
        {"0", 0, 0},
        {"1m30s", 0, 90000000},
        {"1.5h", 0, 5400000000ULL},
        {"300ms", 0, 300000},
        {"2us", 0, 2},
        {"2\xc2\xb5s", 0, 2},
        {"1500ns", 0, 1},
        {"+5s", 0, 5000000},
        {".5s", 0, 500000},
        {"1h2m3s4ms", 0, 3723004000ULL},
        {"", -EINVAL, 0},
        {"5", -EINVAL, 0},
        {"5x", -EINVAL, 0},
        {"s", -EINVAL, 0},
        {".s", -EINVAL, 0},
        {"-5s", -ERANGE, 0},
        {"9999999999999h", -ERANGE, 0},
        {"1d", -EINVAL, 0},
};

START_TEST(test_duration_table)
{
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                uint64_t us = 12345;
                int r = duration_parse(cases[i].in, &us);

                ck_assert_msg(r == cases[i].ret, "\"%s\": got %d want %d", cases[i].in, r,
                              cases[i].ret);
                if (r == 0)
                        ck_assert_msg(us == cases[i].usec, "\"%s\": got %llu want %llu",
                                      cases[i].in, (unsigned long long)us,
                                      (unsigned long long)cases[i].usec);
                else
                        ck_assert_msg(us == 12345, "\"%s\": output written on error", cases[i].in);
        }
}
END_TEST

UNIT_MAIN(test_duration_table)
