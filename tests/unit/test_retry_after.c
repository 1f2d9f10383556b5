/* Unit tests: an answer's Retry-After (util/retry_after): the header
 * read in its integer form only (an HTTP date, past or future, and
 * garbage are none), which answers it makes retry, the retries of one
 * request and when they are spent, the pause that still holds after
 * them, a retry granted as if the server had said it, and the longest
 * Retry-After that counts. */
#include <string.h>

#include "util/retry_after.h"
#include "unit.h"

/* retry_after_header() on a NUL-terminated line. */
static bool header(struct retry_after *ra, const char *line)
{
        return retry_after_header(ra, line, strlen(line));
}

START_TEST(test_header_seconds)
{
        static const struct {
                const char *line;
                long seconds;
        } cases[] = {
                /* Any case, blanks or none around the number, at once,
                 * a line that ends without its line break. */
                {"Retry-After: 5\r\n", 5},  {"retry-after:3\r\n", 3},    {"RETRY-AFTER:\t7 \t\r\n", 7},
                {"Retry-After: 0 \r\n", 0}, {"Retry-After: 120\n", 120}, {"Retry-After: 9", 9},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct retry_after ra = RETRY_AFTER_INIT;

                ck_assert_msg(header(&ra, cases[i].line), "case %zu: %s", i, cases[i].line);
                ck_assert_int_eq(ra.seconds, cases[i].seconds);
                ck_assert_uint_eq(ra.retries, 0);
        }
}
END_TEST

/* What is not a Retry-After in the integer form is none, and leaves what
 * the answer's headers said so far. */
START_TEST(test_header_not_seconds)
{
        static const char *const lines[] = {
                "Retry-After: Fri, 01 Jan 2100 00:00:00 GMT\r\n", /* an HTTP date to come */
                "Retry-After: Wed, 21 Oct 2015 07:28:00 GMT\r\n", /* one past */
                "Retry-After: 5x\r\n",
                "Retry-After: 5 s\r\n",
                "Retry-After: 1.5\r\n",
                "Retry-After: -1\r\n",
                "Retry-After: \r\n",
                "Retry-After:\r\n",
                "Retry-After: soon\r\n",
                "Retry-After",
                "Retry-Afters: 5\r\n",
                "Content-Type: text/plain\r\n",
                "HTTP/1.1 429 Too Many Requests\r\n",
                "\r\n",
        };

        for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
                struct retry_after ra = RETRY_AFTER_INIT, kept = {.seconds = 4, .retries = 2};

                ck_assert_msg(!header(&ra, lines[i]), "case %zu: %s", i, lines[i]);
                ck_assert_int_eq(ra.seconds, -1);
                ck_assert_msg(!header(&kept, lines[i]), "case %zu: %s", i, lines[i]);
                ck_assert_int_eq(kept.seconds, 4);
                ck_assert_uint_eq(kept.retries, 2);
        }
}
END_TEST

/* An answer with none, even one that would retry with it, is no retry
 * and leaves no pause: the caller's own backoff applies. */
START_TEST(test_date_or_garbage_no_retry)
{
        static const char *const lines[] = {
                "Retry-After: Fri, 01 Jan 2100 00:00:00 GMT\r\n",
                "Retry-After: Wed, 21 Oct 2015 07:28:00 GMT\r\n",
                "Retry-After: later\r\n",
        };

        for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
                struct retry_after ra = RETRY_AFTER_INIT;
                uint64_t wait = 77;

                retry_after_sent(&ra);
                (void)header(&ra, lines[i]);
                ck_assert_msg(!retry_after_retry(&ra, 429, &wait), "case %zu", i);
                ck_assert_uint_eq(wait, 77); /* untouched */
                ck_assert_uint_eq(ra.retries, 0);
                ck_assert_uint_eq(retry_after_left(&ra, 429), 0);
        }
}
END_TEST

/* 429 and every status of 500 or more with a Retry-After: the same
 * request after it; any other status: no retry, no pause. */
START_TEST(test_statuses)
{
        static const struct {
                long status;
                bool retry;
        } cases[] = {
                {429, true},  {500, true},  {502, true},  {503, true},  {504, true},  {599, true},
                {200, false}, {201, false}, {301, false}, {400, false}, {401, false}, {404, false},
                {409, false}, {410, false}, {428, false}, {430, false}, {499, false}, {0, false},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct retry_after ra = RETRY_AFTER_INIT;
                uint64_t wait = 0;

                ck_assert(header(&ra, "Retry-After: 3\r\n"));
                ck_assert_msg(retry_after_retry(&ra, cases[i].status, &wait) == cases[i].retry, "HTTP %ld",
                              cases[i].status);
                ck_assert_uint_eq(wait, cases[i].retry ? 3000000u : 0);
                ck_assert_uint_eq(ra.retries, cases[i].retry ? 1 : 0);
                /* Whether it asks for a pause is the status's too. */
                ck_assert_uint_eq(retry_after_left(&ra, cases[i].status), cases[i].retry ? 3000000u : 0);
        }
}
END_TEST

/* Retry-After: 0 is a retry at once, counted like any. */
START_TEST(test_zero_seconds)
{
        struct retry_after ra = RETRY_AFTER_INIT;
        uint64_t wait = 77;

        ck_assert(header(&ra, "Retry-After: 0\r\n"));
        ck_assert(retry_after_retry(&ra, 503, &wait));
        ck_assert_uint_eq(wait, 0);
        ck_assert_uint_eq(ra.retries, 1);
        ck_assert_uint_eq(retry_after_left(&ra, 503), 0);
}
END_TEST

/* One request is retried RETRY_AFTER_MAX_RETRIES times, each send
 * reading its answer anew; then its retries are spent, and a new request
 * has them all again. */
START_TEST(test_retries_spent)
{
        struct retry_after ra = RETRY_AFTER_INIT;
        uint64_t wait;

        ck_assert_uint_eq(RETRY_AFTER_MAX_RETRIES, 10); /* client-go's */
        for (unsigned i = 0; i < RETRY_AFTER_MAX_RETRIES; i++) {
                retry_after_sent(&ra);
                ck_assert_int_eq(ra.seconds, -1);
                ck_assert(header(&ra, "Retry-After: 2\r\n"));
                wait = 0;
                ck_assert_msg(retry_after_retry(&ra, 429, &wait), "retry %u", i + 1);
                ck_assert_uint_eq(wait, 2000000u);
                ck_assert_uint_eq(ra.retries, i + 1);
        }
        retry_after_sent(&ra);
        ck_assert(header(&ra, "Retry-After: 2\r\n"));
        wait = 77;
        ck_assert(!retry_after_retry(&ra, 429, &wait));
        ck_assert_uint_eq(wait, 77);
        ck_assert_uint_eq(ra.retries, RETRY_AFTER_MAX_RETRIES);

        /* A send that is answered without one in between does not give
         * any back. */
        retry_after_sent(&ra);
        ck_assert(!retry_after_retry(&ra, 503, &wait));
        ck_assert_uint_eq(ra.retries, RETRY_AFTER_MAX_RETRIES);

        retry_after_request(&ra);
        ck_assert_uint_eq(ra.retries, 0);
        retry_after_sent(&ra);
        ck_assert(header(&ra, "Retry-After: 1\r\n"));
        ck_assert(retry_after_retry(&ra, 429, &wait));
        ck_assert_uint_eq(wait, 1000000u);
}
END_TEST

/* The answer whose retries are spent still asks for its pause: what the
 * next request waits, until the next send forgets it.  A new request
 * keeps it too (the caller backs off after the request ended). */
START_TEST(test_wait_after_spent)
{
        struct retry_after ra = {.seconds = -1, .retries = RETRY_AFTER_MAX_RETRIES};
        uint64_t wait = 77;

        retry_after_sent(&ra);
        ck_assert(header(&ra, "Retry-After: 4\r\n"));
        ck_assert(!retry_after_retry(&ra, 429, &wait));
        ck_assert_uint_eq(retry_after_left(&ra, 429), 4000000u);
        ck_assert_uint_eq(retry_after_left(&ra, 500), 4000000u);
        ck_assert_uint_eq(retry_after_left(&ra, 404), 0); /* a status that asks for none */
        retry_after_request(&ra);
        ck_assert_uint_eq(retry_after_left(&ra, 429), 4000000u);
        retry_after_sent(&ra);
        ck_assert_uint_eq(retry_after_left(&ra, 429), 0);

        /* Without a Retry-After, no pause is left. */
        ra = RETRY_AFTER_INIT;
        ck_assert_uint_eq(retry_after_left(&ra, 429), 0);
        ck_assert_uint_eq(retry_after_left(&ra, 503), 0);
}
END_TEST

/* A retry as if the server had said Retry-After: N (a GET that lost its
 * connection) draws on the same retries, and keeps no pause. */
START_TEST(test_as_if)
{
        struct retry_after ra = RETRY_AFTER_INIT;
        uint64_t wait = 0;

        ck_assert(retry_after_as_if(&ra, 1, &wait));
        ck_assert_uint_eq(wait, 1000000u);
        ck_assert_uint_eq(ra.retries, 1);
        ck_assert_int_eq(ra.seconds, -1);
        ck_assert_uint_eq(retry_after_left(&ra, 503), 0);
        for (unsigned i = 1; i < RETRY_AFTER_MAX_RETRIES - 1; i++)
                ck_assert(retry_after_as_if(&ra, 1, &wait));
        /* The last one, taken by an answer's Retry-After. */
        retry_after_sent(&ra);
        ck_assert(header(&ra, "Retry-After: 6\r\n"));
        ck_assert(retry_after_retry(&ra, 503, &wait));
        ck_assert_uint_eq(wait, 6000000u);
        wait = 77;
        ck_assert(!retry_after_as_if(&ra, 1, &wait));
        ck_assert_uint_eq(wait, 77);
        ck_assert(!retry_after_retry(&ra, 503, &wait));
        ck_assert_uint_eq(ra.retries, RETRY_AFTER_MAX_RETRIES);
}
END_TEST

/* Up to RETRY_AFTER_MAX_SECONDS a Retry-After counts, and its pause in
 * microseconds is whole; a larger number is none (it wrapped around to a
 * retry at once), and so the answer is no retry and leaves no pause. */
START_TEST(test_over_the_cap)
{
        static const char *const over[] = {
                "Retry-After: 9223372037\r\n",           /* one more than the cap */
                "Retry-After: 18446744073710\r\n",       /* wraps around 2^64 in microseconds */
                "Retry-After: 9223372036854775807\r\n",  /* LONG_MAX */
                "Retry-After: 99999999999999999999\r\n", /* beyond a long: ERANGE */
        };
        struct retry_after ra = RETRY_AFTER_INIT;
        uint64_t wait = 0;

        ck_assert_int_eq(RETRY_AFTER_MAX_SECONDS, 9223372036LL);
        ck_assert(header(&ra, "Retry-After: 9223372036\r\n"));
        ck_assert_int_eq(ra.seconds, RETRY_AFTER_MAX_SECONDS);
        ck_assert(retry_after_retry(&ra, 503, &wait));
        ck_assert_uint_eq(wait, 9223372036000000ull);
        ck_assert_uint_eq(retry_after_left(&ra, 503), 9223372036000000ull);
        for (size_t i = 0; i < sizeof(over) / sizeof(over[0]); i++) {
                ra = RETRY_AFTER_INIT;
                wait = 77;
                ck_assert_msg(!header(&ra, over[i]), "case %zu: %s", i, over[i]);
                ck_assert_int_eq(ra.seconds, -1);
                ck_assert(!retry_after_retry(&ra, 503, &wait));
                ck_assert_uint_eq(wait, 77);
                ck_assert_uint_eq(ra.retries, 0);
                ck_assert_uint_eq(retry_after_left(&ra, 503), 0);
        }
}
END_TEST

UNIT_MAIN(test_header_seconds, test_header_not_seconds, test_date_or_garbage_no_retry, test_statuses, test_zero_seconds,
          test_retries_spent, test_wait_after_spent, test_as_if, test_over_the_cap)
