/* Unit tests: a failure said once per reason and once when it is over
 * (util/episode), the log lines it writes, the keyed form, and an
 * allocation failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/episode.h"
#include "failalloc.h"
#include "log_capture.h"
#include "unit.h"

/* The first failure is said, the same reason again is not, another is;
 * the end is said once, and after it the same reason is said again. */
START_TEST(test_once_per_reason)
{
        struct episode ep = EPISODE_INIT;

        ck_assert(!episode_failing(&ep));
        ck_assert(!episode_clear(&ep, NULL)); /* nothing going on */
        ck_assert(episode_fail(&ep, "refused"));
        ck_assert(episode_failing(&ep));
        ck_assert(!episode_fail(&ep, "refused"));
        ck_assert(!episode_fail(&ep, "refused"));
        ck_assert(episode_fail(&ep, "timed out"));
        ck_assert(episode_fail(&ep, "refused")); /* not the one said last */
        ck_assert_uint_eq(ep.failures, 5);
        ck_assert_str_eq(ep.said, "refused");
        ck_assert(episode_clear(&ep, NULL));
        ck_assert(!episode_failing(&ep));
        ck_assert_ptr_null(ep.said);
        ck_assert(!episode_clear(&ep, NULL)); /* once */
        ck_assert(episode_fail(&ep, "refused"));
        episode_free(&ep);
        episode_free(NULL);
}
END_TEST

/* The lines: at the level asked when said, at debug with the count
 * when not (only if debug is on), the end at info; a clear with no
 * episode logs nothing. */
START_TEST(test_lines)
{
        struct episode ep = EPISODE_INIT;
        struct log_capture c;
        char text[4096];

        log_setup(LOG_LEVEL_DEBUG, LOG_FORMAT_TEXT);
        log_capture_start(&c);
        ck_assert(episode_log(&ep, LOG_LEVEL_ERROR, "HTTP 500", "src: %s: again in %d s", "HTTP 500", 1));
        ck_assert(!episode_log(&ep, LOG_LEVEL_ERROR, "HTTP 500", "src: %s: again in %d s", "HTTP 500", 2));
        ck_assert(episode_log(&ep, LOG_LEVEL_WARN, "HTTP 503", "src: %s", "HTTP 503"));
        ck_assert(episode_clear(&ep, "src: works again (the last problem was: %s)", ep.said));
        ck_assert(!episode_clear(&ep, "src: must not be logged"));
        log_setup(LOG_LEVEL_INFO, LOG_FORMAT_TEXT);
        ck_assert(episode_log(&ep, LOG_LEVEL_ERROR, "x", "src: x"));
        ck_assert(!episode_log(&ep, LOG_LEVEL_ERROR, "x", "src: x (quiet)"));
        episode_free(&ep);
        log_capture_end(&c, text, sizeof(text));
        ck_assert_msg(strstr(text, "error src: HTTP 500: again in 1 s\n"), "%s", text);
        ck_assert_msg(strstr(text, "debug src: HTTP 500: again in 2 s (failure 2 in a row)\n"), "%s", text);
        ck_assert_msg(strstr(text, "warn  src: HTTP 503\n"), "%s", text);
        ck_assert_msg(strstr(text, "info  src: works again (the last problem was: HTTP 503)\n"), "%s", text);
        ck_assert_msg(strstr(text, "error src: x\n"), "%s", text);
        ck_assert_msg(!strstr(text, "must not") && !strstr(text, "quiet"), "%s", text);
        ck_assert_int_eq(log_capture_count(text, "\n"), 5);
}
END_TEST

/* One episode per key: each key's reason apart, a clear of one key
 * leaves the others, a key never failed has no end to say. */
START_TEST(test_keyed)
{
        struct strmap *m = strmap_new();

        ck_assert_ptr_nonnull(m);
        ck_assert(episode_fail_in(m, "a.yaml", "bad"));
        ck_assert(!episode_fail_in(m, "a.yaml", "bad"));
        ck_assert(episode_fail_in(m, "b.yaml", "bad"));
        ck_assert(episode_fail_in(m, "a.yaml", "worse"));
        ck_assert(!episode_fail_in(m, "a.yaml", "worse"));
        ck_assert_str_eq(strmap_get(m, "a.yaml"), "worse");
        ck_assert(episode_clear_in(m, "a.yaml"));
        ck_assert(!episode_clear_in(m, "a.yaml"));
        ck_assert(!episode_clear_in(m, "c.yaml"));
        ck_assert(!episode_fail_in(m, "b.yaml", "bad"));
        ck_assert(episode_fail_in(m, "a.yaml", "worse")); /* a new episode */
        strmap_free(m, free);
}
END_TEST

/* The copy of a reason cannot be made: the failure is said and counted,
 * the next one is said again (nothing kept to call it a repeat), its
 * end is still said; nothing leaks.  The keyed form leaves its map as
 * it was: the new reason is said again next time, a key that failed
 * before keeps its place. */
START_TEST(test_allocation_failure)
{
        struct episode ep = EPISODE_INIT;
        struct strmap *m;
        long live;

        if (!failalloc_enabled())
                return;
        m = strmap_new();
        ck_assert_ptr_nonnull(m);
        live = failalloc_live();
        ck_assert(episode_fail(&ep, "first"));
        failalloc_arm(1);
        ck_assert(episode_fail(&ep, "second"));
        ck_assert(failalloc_failed());
        failalloc_arm(0);
        ck_assert_ptr_null(ep.said);
        ck_assert(episode_fail(&ep, "second")); /* said again */
        ck_assert(!episode_fail(&ep, "second"));
        ck_assert_uint_eq(ep.failures, 4);
        ck_assert(episode_clear(&ep, NULL));
        ck_assert_int_eq(failalloc_live(), live);

        ck_assert(episode_fail_in(m, "a.yaml", "bad"));
        failalloc_arm(1);
        ck_assert(episode_fail_in(m, "a.yaml", "worse"));
        ck_assert(failalloc_failed());
        failalloc_arm(0);
        ck_assert_str_eq(strmap_get(m, "a.yaml"), "bad");
        ck_assert(episode_fail_in(m, "a.yaml", "worse")); /* said again */
        ck_assert(!episode_fail_in(m, "a.yaml", "worse"));
        /* The map cannot grow for a new key: not kept either. */
        failalloc_arm(2);
        ck_assert(episode_fail_in(m, "b.yaml", "bad"));
        failalloc_arm(0);
        ck_assert_ptr_null(strmap_get(m, "b.yaml"));
        ck_assert(episode_fail_in(m, "b.yaml", "bad"));
        ck_assert(!episode_fail_in(m, "b.yaml", "bad"));
        strmap_free(m, free);
}
END_TEST

UNIT_MAIN(test_once_per_reason, test_lines, test_keyed, test_allocation_failure)
