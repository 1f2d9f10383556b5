/* Unit tests: the event recorder's queue and retries (events/
 * event_recorder), with a client that cannot reach any server.  What an
 * API server answers is tested against scripts/fake-apiserver by
 * tests/integration/test_events.py. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "failalloc.h"
#include "events/event_recorder.h"
#include "unit.h"

static const struct event_ref pod = {
        .kind = "Pod", .namespace = "default", .name = "web", .uid = "u-1", .api_version = "v1"};

struct fixture {
        struct loop *loop;
        struct curl_loop *cl;
        struct event_recorder *er;
        struct kube_client *kube; /* to a port nobody listens on */
        struct event_stats stats;
        unsigned reports, clears;
        char last_report[512];
};

/* A client of port 1 of the loopback: refused at once. */
static struct kube_client *refused_client(void)
{
        struct kube_config kc = {0};
        struct kube_client *kube = NULL;

        kc.server = strdup("http://127.0.0.1:1");
        ck_assert_ptr_nonnull(kc.server);
        ck_assert_int_eq(kube_client_new(&kc, &kube, NULL), 0);
        return kube;
}

static void fake_report(void *data, const char *problem, uint64_t lost)
{
        struct fixture *f = data;

        (void)lost;
        if (!problem) {
                f->clears++;
                return;
        }
        f->reports++;
        (void)snprintf(f->last_report, sizeof(f->last_report), "%s", problem);
}

/* Once, before the first test measures memory (libcurl keeps some). */
static void init_curl(void)
{
        static bool done;

        if (!done)
                ck_assert_int_eq(curl_global_init(CURL_GLOBAL_DEFAULT), CURLE_OK);
        done = true;
}

static void setup(struct fixture *f, size_t queue_max)
{
        struct event_recorder_config cfg = {
                .node_name = "node1",
                .qps = 0,
                .report = fake_report,
                .report_data = f,
                .stats = &f->stats,
                .queue_max = queue_max,
                .retry_usec = 1000,
        };

        init_curl();
        memset(f, 0, sizeof(*f));
        cfg.kube = f->kube = refused_client();
        ck_assert_int_eq(loop_new(&f->loop), 0);
        ck_assert_int_eq(curl_loop_new(f->loop, &f->cl), 0);
        ck_assert_int_eq(event_recorder_new(f->loop, f->cl, &cfg, &f->er), 0);
        ck_assert(f->stats.configured);
}

static void teardown(struct fixture *f)
{
        event_recorder_free(f->er);
        kube_client_free(f->kube);
        curl_loop_free(f->cl);
        loop_free(f->loop);
}

static int record(struct fixture *f, const char *message)
{
        return event_recorder_record(f->er, &pod, "Warning", "FailedValidation", message);
}

/* Runs the loop until the recorder has given up on n writes (bounded by a
 * count of iterations, not by time). */
static void run_until_given_up(struct fixture *f, uint64_t n)
{
        for (int i = 0; i < 100000 && f->stats.gave_up < n; i++)
                ck_assert_int_ge(loop_run_once(f->loop, 100000), 0);
        ck_assert_uint_eq(f->stats.gave_up, n);
}

/* A full queue drops the new event and counts it; nothing blocks. */
START_TEST(test_full_queue_drops)
{
        struct fixture f;
        char msg[16];

        setup(&f, 3);
        for (int i = 0; i < 3; i++) {
                (void)snprintf(msg, sizeof(msg), "m%d", i);
                ck_assert_int_eq(record(&f, msg), 0);
        }
        ck_assert_int_eq(record(&f, "m3"), -ENOBUFS);
        ck_assert_uint_eq(f.stats.recorded, 4);
        ck_assert_uint_eq(f.stats.queue_full, 1);
        ck_assert_uint_eq(f.stats.queue_depth, 3);
        ck_assert_uint_eq(f.stats.queue_peak, 3);
        ck_assert_uint_eq(event_recorder_queued(f.er), 3);
        ck_assert_uint_eq(kube_client_prepared(f.kube), 0); /* nothing runs before the loop does */
        teardown(&f);
}
END_TEST

/* A throttled event takes no place in the queue and is counted. */
START_TEST(test_throttled_counted)
{
        struct fixture f;

        setup(&f, 100);
        for (int i = 0; i < EVENT_SPAM_BURST; i++)
                ck_assert_int_eq(record(&f, "same"), 0);
        ck_assert_int_eq(record(&f, "same"), 1);
        ck_assert_uint_eq(f.stats.throttled, 1);
        ck_assert_uint_eq(event_recorder_queued(f.er), EVENT_SPAM_BURST);
        teardown(&f);
}
END_TEST

/*
 * A write that cannot be sent is tried EVENT_MAX_TRIES times, the writes
 * behind it waiting, then dropped and counted; the problem is reported
 * once while it lasts.
 */
START_TEST(test_refused_connection_retried_then_dropped)
{
        struct fixture f;

        setup(&f, 10);
        ck_assert_int_eq(record(&f, "one"), 0);
        ck_assert_int_eq(record(&f, "two"), 0);
        run_until_given_up(&f, 1);
        ck_assert_uint_eq(kube_client_prepared(f.kube), EVENT_MAX_TRIES);
        ck_assert_uint_eq(event_recorder_queued(f.er), 1);
        ck_assert_uint_eq(f.reports, 1);
        ck_assert_ptr_nonnull(strstr(f.last_report, "no answer from the API server"));
        /* The kind of failure, as the kube client names it. */
        ck_assert_msg(strstr(f.last_report, "(connection refused)"), "%s", f.last_report);
        run_until_given_up(&f, 2);
        ck_assert_uint_eq(kube_client_prepared(f.kube), 2 * EVENT_MAX_TRIES);
        ck_assert_uint_eq(f.reports, 1); /* the same problem: not again */
        ck_assert_uint_eq(f.clears, 0);
        ck_assert_uint_eq(f.stats.sent, 0);
        ck_assert_uint_eq(f.stats.queue_depth, 0);
        teardown(&f);
}
END_TEST

/* A bad configuration is refused. */
START_TEST(test_new_refuses_bad_config)
{
        struct event_recorder_config cfg = {.node_name = ""};
        struct event_recorder *er = NULL;
        struct loop *l;

        init_curl();
        ck_assert_int_eq(loop_new(&l), 0);
        cfg.kube = refused_client();
        ck_assert_int_eq(event_recorder_new(l, NULL, &cfg, &er), -EINVAL);
        kube_client_free(cfg.kube);
        cfg.node_name = "node1";
        cfg.kube = NULL;
        ck_assert_int_eq(event_recorder_new(l, NULL, &cfg, &er), -EINVAL);
        loop_free(l);
}
END_TEST

/* Every allocation of record() fails in turn: -ENOMEM, nothing queued,
 * and the same event is then queued as new (its count unchanged). */
START_TEST(test_record_fails_cleanly)
{
        long live;

        if (!failalloc_enabled())
                return;
        init_curl();
        failalloc_warm_up();
        live = failalloc_live();
        for (long n = 1;; n++) {
                struct fixture f;
                bool failed;
                int r;

                setup(&f, 10);
                failalloc_arm(n);
                r = record(&f, "m");
                failed = failalloc_failed();
                failalloc_arm(0);
                if (!failed) {
                        ck_assert_int_eq(r, 0);
                        teardown(&f);
                        break;
                }
                ck_assert_int_eq(r, -ENOMEM);
                ck_assert_uint_eq(event_recorder_queued(f.er), 0);
                ck_assert_uint_eq(f.stats.queue_depth, 0);
                ck_assert_int_eq(record(&f, "m"), 0);
                ck_assert_uint_eq(event_recorder_queued(f.er), 1);
                teardown(&f);
        }
        ck_assert_int_eq(failalloc_live(), live);
}
END_TEST

/* Making a recorder fails cleanly at each of its allocations.  (Timers
 * the loop has not run are freed with the loop: compared after it.) */
START_TEST(test_new_fails_cleanly)
{
        struct kube_client *kube;
        struct loop *l;
        long live;

        if (!failalloc_enabled())
                return;
        init_curl();
        kube = refused_client();
        failalloc_warm_up();
        live = failalloc_live();
        ck_assert_int_eq(loop_new(&l), 0);
        for (long n = 1;; n++) {
                struct event_stats stats = {0};
                struct event_recorder_config cfg = {.node_name = "node1", .kube = kube, .stats = &stats};
                struct event_recorder *er = NULL;
                bool failed;
                int r;

                failalloc_arm(n);
                r = event_recorder_new(l, NULL, &cfg, &er);
                failed = failalloc_failed();
                failalloc_arm(0);
                if (!failed) {
                        ck_assert_int_eq(r, 0);
                        event_recorder_free(er);
                        break;
                }
                ck_assert_int_eq(r, -ENOMEM);
        }
        loop_free(l);
        ck_assert_int_eq(failalloc_live(), live);
        kube_client_free(kube);
}
END_TEST

UNIT_MAIN(test_full_queue_drops, test_throttled_counted, test_refused_connection_retried_then_dropped,
          test_new_refuses_bad_config, test_record_fails_cleanly, test_new_fails_cleanly)
