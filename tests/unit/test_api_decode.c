/* Unit tests: PodList pages and the watch stream into a pod store. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kube/api_decode.h"
#include "core/pod.h"
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

/* The store's content and the outcome of a page, as one string. */
static char *page_result(const char *page, size_t chunk)
{
        struct strmap *pages = strmap_new_borrowed();
        struct list_decoder *d = list_decoder_new();
        struct buf err = BUF_INIT, out = BUF_INIT;
        char *rv = NULL, *cont = NULL, *ret;
        size_t len = strlen(page), it = 0;
        const char *key;
        void *v;
        int r = 0;

        ck_assert_ptr_nonnull(d);
        for (size_t at = 0; r == 0 && at < len; at += chunk)
                r = list_decoder_feed(d, page + at, len - at < chunk ? len - at : chunk, &err);
        if (r == 0)
                r = list_decoder_finish(d, pages, &rv, &cont, &err);
        /* A failure is kept: telling it the end repeats it. */
        if (r < 0) {
                struct buf again = BUF_INIT;

                ck_assert_int_eq(list_decoder_finish(d, pages, &rv, &cont, &again), r);
                ck_assert_str_eq(again.data, err.data);
                buf_free(&again);
        }
        ck_assert_int_eq(buf_printf(&out, "%d %s rv=%s cont=%s n=%zu", r, err.data, rv ? rv : "-", cont ? cont : "-",
                                    strmap_size(pages)),
                         0);
        /* Store order is the same for the same puts (one map type). */
        while (strmap_next(pages, &it, &key, &v)) {
                ck_assert_int_eq(buf_printf(&out, "\n%s ", key), 0);
                ck_assert_int_eq(pod_render(v, &out), 0);
        }
        ret = buf_steal(&out, NULL);
        free(rv);
        free(cont);
        buf_free(&err);
        list_decoder_free(d);
        api_store_free(pages);
        return ret;
}

/* A page fed in reads of any size gives what it gives whole: the bytes
 * that end an item, a name or the list can be anywhere in a read. */
START_TEST(test_list_page_in_reads)
{
        static const char *const pages[] = {
                "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"41\",\"continue\":\"c1\"},"
                "\"items\":[" POD("default", "a", "40") " , " POD("kube-system", "b", "39") "]}",
                "{ \"items\" : [ ] , \"metadata\" : {\"resourceVersion\":\"7\"} }\n",
                "{\"items\":[" POD("default", "a", "1") "],\"items\":[" POD("default", "b", "2") "]}",
                "{\"items\":[" POD("default", "a", "1") "],\"items\":null}",
                "{\"\\u0069tems\":[" POD("default", "a", "1") "],\"x\":{\"items\":[1]}}",
                "{\"it\\\"ems\":[" POD("default", "a", "1") "],\"items\":[]}",
                "{\"items\":[" POD("default", "a", "1") ",12.5e3]}",
                "{\"items\":[" POD("default", "a", "1") ",\"]\"]}",
                "{\"items\":[" POD("default", "a", "1") ",[" POD("default", "b", "1") "]]}",
                "{\"items\":[-1]}",
                "{\"items\":[" POD("default", "a", "1") "]} x",
                "{\"items\":[" POD("default", "a", "1"),
                "{\"items\":5}",
                "[{\"items\":[]}]",
                "7",
                "",
        };

        for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++) {
                char *whole = page_result(pages[i], strlen(pages[i]) + 1);

                for (size_t chunk = 1; chunk <= 9; chunk++) {
                        char *got = page_result(pages[i], chunk);

                        ck_assert_msg(strcmp(got, whole) == 0, "page %zu in reads of %zu:\n%s\nwhole:\n%s", i, chunk,
                                      got, whole);
                        free(got);
                }
                free(whole);
        }
}
END_TEST

/* Each item is a pod as soon as its last byte is in: the body is never
 * waited for, nor kept. */
START_TEST(test_list_items_as_they_come)
{
        static const char *const items[] = {POD("default", "a", "1"), POD("default", "b", "2"),
                                            POD("default", "c", "3")};
        const char *tail = "],\"metadata\":{\"resourceVersion\":\"9\"}}";
        struct list_decoder *d = list_decoder_new();
        struct strmap *pages = strmap_new_borrowed();
        char *rv = NULL, *cont = NULL;

        ck_assert_int_eq(list_decoder_feed(d, "{\"items\":[", 10, NULL), 0);
        for (size_t i = 0; i < 3; i++) {
                size_t len = strlen(items[i]);

                if (i > 0)
                        ck_assert_int_eq(list_decoder_feed(d, ",", 1, NULL), 0);
                ck_assert_int_eq(list_decoder_feed(d, items[i], len - 1, NULL), 0);
                ck_assert_uint_eq(list_decoder_items(d), i);
                ck_assert_int_eq(list_decoder_feed(d, items[i] + len - 1, 1, NULL), 0);
                ck_assert_uint_eq(list_decoder_items(d), i + 1);
        }
        ck_assert_int_eq(list_decoder_feed(d, tail, strlen(tail), NULL), 0);
        ck_assert_uint_eq(strmap_size(pages), 0); /* stored only at the end */
        ck_assert_int_eq(list_decoder_finish(d, pages, &rv, &cont, NULL), 0);
        ck_assert_uint_eq(strmap_size(pages), 3);
        ck_assert_str_eq(rv, "9");
        ck_assert_ptr_null(cont);
        /* Ready for the next body. */
        ck_assert_uint_eq(list_decoder_items(d), 0);
        free(rv);
        list_decoder_free(d);
        api_store_free(pages);
}
END_TEST

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

UNIT_MAIN(test_list_page_in_reads, test_list_items_as_they_come, test_list_page, test_watch_stream_any_split,
          test_watch_stream_errors_end_the_watch, test_watch_event_size_limit, test_events_across_and_within_reads,
          test_comment_is_not_json_wherever_reads_end)
