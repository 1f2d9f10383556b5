/*
 * unit.h — the shape of every unit-test runner: Check tests listed in one
 * table, run in one process (CK_FORK=no under `make check`, so sanitizers
 * and valgrind see everything), reported as TAP.
 *
 * Usage, at the end of a test file:
 *     UNIT_MAIN(test_a, test_b, test_c)
 */
#ifndef PODMUX_TESTS_UNIT_H
#define PODMUX_TESTS_UNIT_H

#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

/* Check's assertion messages are formats built by its macros. */
#pragma GCC diagnostic ignored "-Wformat-nonliteral"

/* Seconds one test may take.  Under CK_FORK=no, Check's own timeout does
 * nothing, and a test that failed halfway can leave a thread behind that
 * makes the next one wait forever: the alarm ends the run instead, saying
 * so, and the failure before it is in the log. */
#define UNIT_TEST_TIMEOUT 300

static void unit_timed_out(int sig)
{
        static const char msg[] = "Bail out! a test ran longer than UNIT_TEST_TIMEOUT seconds\n";
        ssize_t w = write(STDOUT_FILENO, msg, sizeof(msg) - 1);

        (void)sig;
        (void)w;
        _exit(3);
}

static void unit_arm_alarm(void)
{
        signal(SIGALRM, unit_timed_out);
        alarm(UNIT_TEST_TIMEOUT);
}

static void unit_disarm_alarm(void)
{
        alarm(0);
}

#define UNIT_MAIN(...)                                                     \
        int main(void)                                                     \
        {                                                                  \
                const TTest *tests[] = {__VA_ARGS__};                      \
                Suite *s = suite_create(__FILE__);                         \
                TCase *tc = tcase_create("unit");                          \
                tcase_set_timeout(tc, UNIT_TEST_TIMEOUT);                  \
                tcase_add_checked_fixture(tc, unit_arm_alarm, unit_disarm_alarm); \
                for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) \
                        tcase_add_test(tc, tests[i]);                      \
                suite_add_tcase(s, tc);                                    \
                SRunner *sr = srunner_create(s);                           \
                srunner_run_all(sr, CK_ENV);                               \
                int failed = srunner_ntests_failed(sr);                    \
                srunner_free(sr);                                          \
                return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;          \
        }

#endif
