/* Unit tests: the first line a client of the update stream sends. */
#include <errno.h>
#include <string.h>

#include "stream/stream_request.h"
#include "unit.h"

START_TEST(test_good_lines)
{
        struct {
                const char *line;
                bool have_resume;
                uint64_t resume;
                bool status, files;
        } cases[] = {
                {"{}", false, 0, false, false},
                {"{\"resume_after\":0}", true, 0, false, false},
                {"{\"resume_after\":18446744073709551615}", true, UINT64_MAX, false, false},
                {"{\"resume_after\":42,\"future\":{\"x\":[1]}} \t\r", true, 42, false, false},
                {"{\"request\":\"status\"}", false, 0, true, false},
                {"  {\"request\":\"status\",\"resume_after\":7}", true, 7, true, false},
                {"{\"request\":\"files\"}", false, 0, false, true},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct stream_request req;
                const char *why = NULL;

                ck_assert_msg(stream_request_parse(cases[i].line, strlen(cases[i].line), &req, &why) == 0,
                              "%s: %s", cases[i].line, why ? why : "");
                ck_assert_int_eq(req.have_resume, cases[i].have_resume);
                ck_assert_uint_eq(req.resume_after, cases[i].resume);
                ck_assert_int_eq(req.status, cases[i].status);
                ck_assert_int_eq(req.files, cases[i].files);
        }
}
END_TEST

START_TEST(test_bad_lines_say_why)
{
        struct {
                const char *line;
                size_t len; /* 0: strlen */
                const char *why;
        } cases[] = {
                {"", 0, "the first line is not JSON"},
                {"resume", 0, "the first line is not JSON"},
                {"{\"resume_after\":1", 0, "the first line is not JSON"},
                {"{} {}", 0, "the first line is not JSON"},
                {"{}x", 0, "the first line is not JSON"},
                {"[1]", 0, "the first line is not a JSON object"},
                {"{\"resume_after\":-1}", 0, "resume_after must be a non-negative integer"},
                {"{\"resume_after\":\"5\"}", 0, "resume_after must be a non-negative integer"},
                {"{\"resume_after\":1.5}", 0, "resume_after must be a non-negative integer"},
                {"{\"request\":\"stream\"}", 0, "request must be \"status\" or \"files\""},
                {"{\"request\":\"Files\"}", 0, "request must be \"status\" or \"files\""},
                {"{\"request\":1}", 0, "request must be \"status\" or \"files\""},
                {"{\"a\":[[[[[[[[[[1]]]]]]]]]]}", 0, "the first line is not JSON"},
                {"{}\0{}", 5, "the first line has text after the JSON object"},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct stream_request req = {.status = true};
                const char *why = NULL;
                size_t len = cases[i].len ? cases[i].len : strlen(cases[i].line);

                ck_assert_msg(stream_request_parse(cases[i].line, len, &req, &why) == -EINVAL, "case %zu accepted", i);
                ck_assert_msg(why && strcmp(why, cases[i].why) == 0, "%s: \"%s\"", cases[i].line, why ? why : "");
                ck_assert(req.status); /* untouched on error */
        }
}
END_TEST

UNIT_MAIN(test_good_lines, test_bad_lines_say_why)
