/* Unit tests: the watch stream decoder (api_decode). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "podmux/api_decode.h"
#include "unit.h"

#define EV(type, name, rv)                                                                  \
        "{\"type\":\"" type "\",\"object\":{\"metadata\":{\"name\":\"" name "\",\"namespace\":\"n\"," \
        "\"resourceVersion\":\"" rv "\"}}}"

static void count(void *arg, enum watch_event_type t)
{
        (*(int *)arg)++;
}

/* Feeds text in reads of size step (0: one read); the last result. */
static int feed_by(const char *text, size_t step, struct strmap *store, int *events, char **rv,
                   struct buf *err)
{
        struct watch_decoder *d = watch_decoder_new();
        size_t len = strlen(text), off = 0;
        long code = 0;
        int r = 0;

        ck_assert_ptr_nonnull(d);
        while (off < len && r == 0) {
                size_t n = step && step < len - off ? step : len - off;

                r = watch_decoder_feed(d, text + off, n, store, rv, count, events, &code, err);
                off += n;
        }
        watch_decoder_free(d);
        return r;
}

START_TEST(test_events_across_and_within_reads)
{
        const char *text = EV("ADDED", "a", "5") "\n" EV("ADDED", "b", "6") " " EV("DELETED", "a", "7") "\n";

        for (size_t step = 0; step < 40; step++) {
                struct strmap *store = strmap_new();
                struct buf err = BUF_INIT;
                char *rv = NULL;
                int events = 0;

                ck_assert_int_eq(feed_by(text, step, store, &events, &rv, &err), 0);
                ck_assert_int_eq(events, 3);
                ck_assert_str_eq(rv, "7");
                ck_assert_uint_eq(strmap_size(store), 1);
                ck_assert_ptr_nonnull(strmap_get(store, "n/b"));
                free(rv);
                buf_free(&err);
                api_store_free(store);
        }
}
END_TEST

/* Found by tests/fuzz/fuzz_api_watch: json-c's lenient mode takes
 * comments and, after an event, goes on eating what may start one, so
 * "<event>\n/" applied the event when the read ended after it and not
 * when the "/" came in the same read.  The stream is strict JSON now, as
 * client-go reads it: the event is applied, then the "/" ends the watch,
 * wherever the reads are cut. */
START_TEST(test_comment_is_not_json_wherever_reads_end)
{
        const char *bad[] = {
                EV("ADDED", "a", "5") "\n/",
                EV("ADDED", "a", "5") "/* c */" EV("ADDED", "b", "6"),
                EV("ADDED", "a", "5") "\n// c\n",
        };

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                for (size_t step = 0; step < 80; step += 7) {
                        struct strmap *store = strmap_new();
                        struct buf err = BUF_INIT;
                        char *rv = NULL;
                        int events = 0;

                        ck_assert_int_eq(feed_by(bad[i], step, store, &events, &rv, &err), -EBADMSG);
                        ck_assert_msg(events == 1, "case %zu, reads of %zu: %d events", i, step, events);
                        ck_assert_ptr_nonnull(strstr(err.data, "not JSON"));
                        free(rv);
                        buf_free(&err);
                        api_store_free(store);
                }
        }
}
END_TEST

UNIT_MAIN(test_events_across_and_within_reads, test_comment_is_not_json_wherever_reads_end)
