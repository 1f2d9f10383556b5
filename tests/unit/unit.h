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
#include <stdlib.h>

#define UNIT_MAIN(...)                                                     \
        int main(void)                                                     \
        {                                                                  \
                const TTest *tests[] = {__VA_ARGS__};                      \
                Suite *s = suite_create(__FILE__);                         \
                TCase *tc = tcase_create("unit");                          \
                tcase_set_timeout(tc, 120);                                \
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
