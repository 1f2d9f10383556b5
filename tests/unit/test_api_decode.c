/* Unit tests: PodList pages and the watch stream into a pod store. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "podmux/api_decode.h"
#include "podmux/pod.h"
#include "unit.h"

#define POD(ns, name, rv) \
        "{\"metadata\":{\"namespace\":\"" ns "\",\"name\":\"" name "\",\"uid\":\"u-" name "\"," \
        "\"resourceVersion\":\"" rv "\"},\"spec\":{\"nodeName\":\"n1\"}}"
#define EVENT(type, obj) "{\"type\":\"" type "\",\"object\":" obj "}"

struct seen {
        unsigned events[4];
};

static void on_event(void *arg, enum watch_event_type t, struct pod *old, struct pod *new)
{
        (void)old;
        (void)new;
        ((struct seen *)arg)->events[t]++;
}

START_TEST(test_list_page)
{
        struct strmap *pages = strmap_new();
        struct buf err = BUF_INIT;
        char *rv = NULL, *cont = NULL;
        const char *page = "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"41\",\"continue\":\"c1\"},"
                           "\"items\":[" POD("default", "a", "40") "," POD("kube-system", "b", "39") "]}";

        ck_assert_int_eq(api_decode_list_page(page, strlen(page), pages, &rv, &cont, &err), 0);
        ck_assert_uint_eq(strmap_size(pages), 2);
        ck_assert_ptr_nonnull(strmap_get(pages, "default/a"));
        ck_assert_ptr_nonnull(strmap_get(pages, "kube-system/b"));
        ck_assert_str_eq(rv, "41");
        ck_assert_str_eq(cont, "c1");
        free(rv);
        free(cont);
        /* "items": null is an empty list; an empty continue is none. */
        page = "{\"metadata\":{\"continue\":\"\"},\"items\":null}";
        ck_assert_int_eq(api_decode_list_page(page, strlen(page), pages, &rv, &cont, &err), 0);
        ck_assert_ptr_null(rv);
        ck_assert_ptr_null(cont);
        /* Not a PodList, or an item that is not a pod. */
        page = "{\"kind\":\"Status\",\"code\":500}";
        ck_assert_int_eq(api_decode_list_page(page, strlen(page), pages, &rv, &cont, &err), -EINVAL);
        ck_assert_str_eq(err.data, "the response is not a PodList");
        buf_reset(&err);
        page = "{\"items\":[" POD("default", "c", "1") ",42]}";
        ck_assert_int_eq(api_decode_list_page(page, strlen(page), pages, &rv, &cont, &err), -EINVAL);
        ck_assert_str_eq(err.data, "item 1 is not a pod");
        buf_reset(&err);
        ck_assert_int_eq(api_decode_list_page("", 0, pages, &rv, &cont, &err), -EINVAL);
        api_store_free(pages);
        buf_free(&err);
}
END_TEST

/* The same stream fed whole, byte by byte and in odd chunks ends in the
 * same store: events may span reads and share them. */
START_TEST(test_watch_stream_any_split)
{
        const char *stream = EVENT("ADDED", POD("default", "a", "5")) "\n" EVENT("ADDED", POD("default", "b", "6"))
                " \r\n\t" EVENT("MODIFIED", POD("default", "a", "7")) EVENT("DELETED", POD("default", "b", "8"))
                "\n" EVENT("BOOKMARK", "{\"metadata\":{\"resourceVersion\":\"9\"}}") "\n"
                EVENT("ADDED", "{\"metadata\":{\"name\":\"s p a c e\",\"namespace\":\"x\",\"resourceVersion\":\"10\"}}");
        size_t len = strlen(stream);
        size_t chunks[] = {0, 1, 2, 3, 7, 64};

        for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
                struct watch_decoder *d = watch_decoder_new();
                struct strmap *store = strmap_new();
                struct buf err = BUF_INIT;
                struct seen seen = {{0}};
                char *rv = NULL;
                size_t step = chunks[c] ? chunks[c] : len;
                long code = 0;

                ck_assert_ptr_nonnull(d);
                for (size_t off = 0; off < len; off += step) {
                        size_t n = off + step > len ? len - off : step;

                        ck_assert_msg(watch_decoder_feed(d, stream + off, n, store, &rv, on_event, &seen, &code,
                                                         &err) == 0,
                                      "chunk %zu at %zu: %s", step, off, err.data);
                }
                ck_assert_uint_eq(seen.events[WATCH_ADDED], 3);
                ck_assert_uint_eq(seen.events[WATCH_MODIFIED], 1);
                ck_assert_uint_eq(seen.events[WATCH_DELETED], 1);
                ck_assert_uint_eq(seen.events[WATCH_BOOKMARK], 1);
                ck_assert_uint_eq(strmap_size(store), 2);
                ck_assert_ptr_nonnull(strmap_get(store, "default/a"));
                ck_assert_ptr_nonnull(strmap_get(store, "x/s p a c e"));
                ck_assert_str_eq(rv, "10");
                free(rv);
                api_store_free(store);
                watch_decoder_free(d);
                buf_free(&err);
        }
}
END_TEST

START_TEST(test_watch_stream_errors_end_the_watch)
{
        struct {
                const char *data;
                int r;
                long code;
                const char *why;
        } cases[] = {
                {EVENT("ERROR", "{\"kind\":\"Status\",\"code\":410,\"message\":\"too old resource version\"}"),
                 -EPROTO, 410, "too old resource version"},
                {EVENT("ERROR", "{\"code\":\"x\"}"), -EPROTO, 500, NULL},
                {"{\"type\":\"ADDED\"}", -EBADMSG, 500, "undecodable event"},
                {"[1,2]", -EBADMSG, 500, "undecodable event"},
                {EVENT("RENAMED", POD("d", "a", "1")), -EBADMSG, 500, "unknown event type \"RENAMED\""},
                {EVENT("ADDED", "{\"metadata\":[]}"), -EBADMSG, 500, "a ADDED event does not hold a pod"},
                {"{\"type\":}", -EBADMSG, 500, "data that is not JSON"},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct watch_decoder *d = watch_decoder_new();
                struct strmap *store = strmap_new();
                struct buf err = BUF_INIT;
                long code = 0;
                int r = watch_decoder_feed(d, cases[i].data, strlen(cases[i].data), store, NULL, NULL, NULL, &code,
                                           &err);

                ck_assert_msg(r == cases[i].r, "case %zu: %d", i, r);
                ck_assert_int_eq(code, cases[i].code);
                if (cases[i].why)
                        ck_assert_msg(strstr(err.data, cases[i].why), "case %zu: \"%s\"", i,
                                      err.data);
                ck_assert_uint_eq(strmap_size(store), 0);
                api_store_free(store);
                watch_decoder_free(d);
                buf_free(&err);
        }
}
END_TEST

/* One event may be large but never unbounded: past API_MAX_EVENT bytes
 * the watch ends, whether the bytes come in one read or many. */
START_TEST(test_watch_event_size_limit)
{
        size_t big = API_MAX_EVENT + 1024;
        char *data = malloc(big);
        const char *head = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"";
        struct buf err = BUF_INIT;
        long code = 0;

        ck_assert_ptr_nonnull(data);
        memcpy(data, head, strlen(head));
        memset(data + strlen(head), 'a', big - strlen(head));
        for (int split = 0; split < 2; split++) {
                struct watch_decoder *d = watch_decoder_new();
                struct strmap *store = strmap_new();
                int r = 0;

                buf_reset(&err);
                if (split) {
                        for (size_t off = 0; off < big && r == 0; off += 65536)
                                r = watch_decoder_feed(d, data + off, off + 65536 > big ? big - off : 65536, store,
                                                       NULL, NULL, NULL, &code, &err);
                } else {
                        r = watch_decoder_feed(d, data, big, store, NULL, NULL, NULL, &code, &err);
                }
                ck_assert_int_eq(r, -EBADMSG);
                ck_assert_ptr_nonnull(strstr(err.data, "an event larger than"));
                /* After a reset the decoder takes a fresh stream. */
                watch_decoder_reset(d);
                r = watch_decoder_feed(d, EVENT("ADDED", POD("d", "ok", "1")),
                                       strlen(EVENT("ADDED", POD("d", "ok", "1"))), store, NULL, NULL, NULL, &code,
                                       &err);
                ck_assert_int_eq(r, 0);
                ck_assert_uint_eq(strmap_size(store), 1);
                api_store_free(store);
                watch_decoder_free(d);
        }
        free(data);
        buf_free(&err);
}
END_TEST

#define EV(type, name, rv)                                                                  \
        "{\"type\":\"" type "\",\"object\":{\"metadata\":{\"name\":\"" name "\",\"namespace\":\"n\"," \
        "\"resourceVersion\":\"" rv "\"}}}"

static void count(void *arg, enum watch_event_type t, struct pod *old, struct pod *new)
{
        (void)old;
        (void)new;
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

UNIT_MAIN(test_list_page, test_watch_stream_any_split, test_watch_stream_errors_end_the_watch,
          test_watch_event_size_limit, test_events_across_and_within_reads,
          test_comment_is_not_json_wherever_reads_end)
