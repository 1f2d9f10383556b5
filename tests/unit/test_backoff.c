/* Unit tests: the retry backoff (util/backoff). */
#include <stdint.h>

#include "util/backoff.h"
#include "unit.h"

/* The top of the range asked for: the jitter's largest draw. */
static uint64_t rand_max(uint64_t n)
{
        return n ? n - 1 : 0;
}

static uint64_t rand_zero(uint64_t n)
{
        (void)n;
        return 0;
}

/* base, doubling, stopping at cap; a reset starts over at base. */
START_TEST(test_doubles_to_cap)
{
        struct backoff b = BACKOFF_INIT(1000, 5000);

        ck_assert_uint_eq(b.delay, 0);
        ck_assert_uint_eq(backoff_next(&b, 0), 1000);
        ck_assert_uint_eq(backoff_next(&b, 0), 2000);
        ck_assert_uint_eq(backoff_next(&b, 0), 4000);
        ck_assert_uint_eq(backoff_next(&b, 0), 5000);
        ck_assert_uint_eq(backoff_next(&b, 0), 5000);
        ck_assert_uint_eq(b.delay, 5000);
        backoff_reset(&b);
        ck_assert_uint_eq(b.delay, 0);
        ck_assert_uint_eq(backoff_next(&b, 0), 1000);
}
END_TEST

/* A base above the cap gives the cap; a cap of 0 means no pause (the
 * client's tests), never "no cap"; huge values do not wrap. */
START_TEST(test_edges)
{
        struct backoff b = BACKOFF_INIT(3000, 2000);

        ck_assert_uint_eq(backoff_next(&b, 0), 2000);
        ck_assert_uint_eq(backoff_next(&b, 0), 2000);
        b = BACKOFF_INIT(0, 0);
        ck_assert_uint_eq(backoff_next(&b, 0), 0);
        ck_assert_uint_eq(backoff_next(&b, 0), 0);
        b = BACKOFF_INIT(UINT64_MAX / 2 + 1, UINT64_MAX);
        ck_assert_uint_eq(backoff_next(&b, 0), UINT64_MAX / 2 + 1);
        ck_assert_uint_eq(backoff_next(&b, 0), UINT64_MAX);
        ck_assert_uint_eq(backoff_next(&b, 0), UINT64_MAX);
        /* An odd cap: 3 doubles to 6 > 5, so 5. */
        b = BACKOFF_INIT(3, 5);
        ck_assert_uint_eq(backoff_next(&b, 0), 3);
        ck_assert_uint_eq(backoff_next(&b, 0), 5);
}
END_TEST

/* With reset_after, a failure more than that after the previous one
 * starts over (client-go's backoff manager); exactly that long keeps
 * growing. */
START_TEST(test_reset_after_idle)
{
        struct backoff b = BACKOFF_INIT(800, 30000);

        b.reset_after = 120000;
        ck_assert_uint_eq(backoff_next(&b, 1000000), 800);
        ck_assert_uint_eq(backoff_next(&b, 1000001), 1600);
        ck_assert_uint_eq(backoff_next(&b, 1000001 + 120000), 3200);
        ck_assert_uint_eq(b.at, 1000001 + 120000);
        ck_assert_uint_eq(backoff_next(&b, 1000001 + 240001), 800);
        /* Without reset_after, time alone never starts it over. */
        b.reset_after = 0;
        ck_assert_uint_eq(backoff_next(&b, UINT64_MAX), 1600);
}
END_TEST

/* Jitter adds [0, delay * jitter) to the wait, never to the pause that
 * grows; no jitter asks for no random number. */
START_TEST(test_jitter)
{
        struct backoff b = BACKOFF_INIT(1000, 30000);

        b.jitter = 1;
        b.rand = rand_max;
        ck_assert_uint_eq(backoff_next(&b, 0), 1999);
        ck_assert_uint_eq(b.delay, 1000);
        ck_assert_uint_eq(backoff_next(&b, 0), 3999);
        b.rand = rand_zero;
        ck_assert_uint_eq(backoff_next(&b, 0), 4000);
        b = BACKOFF_INIT(1000, 30000);
        b.jitter = 0.5;
        b.rand = rand_max;
        ck_assert_uint_eq(backoff_next(&b, 0), 1499);
        b = BACKOFF_INIT(1000, 30000);
        b.rand = rand_max; /* ignored: jitter 0 */
        ck_assert_uint_eq(backoff_next(&b, 0), 1000);
}
END_TEST

/* backoff_waiting: a retry is allowed only once strictly more than the
 * pause has passed since the failure; nothing waits before a failure or
 * after a reset. */
START_TEST(test_waiting)
{
        struct backoff b = BACKOFF_INIT(500, 122000);

        ck_assert_int_eq(backoff_waiting(&b, 0), 0);
        (void)backoff_next(&b, 10000);
        ck_assert_int_eq(backoff_waiting(&b, 10000), 1);
        ck_assert_int_eq(backoff_waiting(&b, 10500), 1);
        ck_assert_int_eq(backoff_waiting(&b, 10501), 0);
        backoff_reset(&b);
        ck_assert_int_eq(backoff_waiting(&b, 10000), 0);
}
END_TEST

UNIT_MAIN(test_doubles_to_cap, test_edges, test_reset_after_idle, test_jitter, test_waiting)
