/* Unit tests: client-go's event correlation (events/event_correlator):
 * the token bucket, counting, aggregation, the spam filter, the bodies
 * written, and failed allocations.  Time is passed in: nothing waits. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "failalloc.h"
#include "events/event_correlator.h"
#include "unit.h"

#define SEC 1000000ull
/* 2023-11-14T22:13:20.123456Z; its nanoseconds are 0x17979cfe3d85ca00. */
#define WALL 1700000000123456ull
#define MONO (1000 * SEC)

static const struct event_ref node = {.kind = "Node", .name = "node1", .uid = "node1"};
static const struct event_ref pod = {
        .kind = "Pod", .namespace = "kube-system", .name = "web", .uid = "1234-abcd", .api_version = "v1"};

static struct event_correlator *new_correlator(size_t entries)
{
        struct event_correlator_config cfg = {.component = "podmux", .host = "node1", .cache_entries = entries};
        struct event_correlator *c = NULL;

        ck_assert_int_eq(event_correlator_new(&cfg, &c), 0);
        return c;
}

/* One Warning about obj with message, at mono and wall; the result. */
static struct event_out warn_at(struct event_correlator *c, const struct event_ref *obj, const char *reason,
                                const char *message, uint64_t mono, uint64_t wall)
{
        struct event_in in = {.obj = *obj, .type = "Warning", .reason = reason, .message = message};
        struct event_out o;

        ck_assert_int_eq(event_correlate(c, &in, mono, wall, &o), 0);
        return o;
}

static struct event_out warn(struct event_correlator *c, const char *message, uint64_t t)
{
        return warn_at(c, &node, "StaticPodRejected", message, MONO + t, WALL + t);
}

/* ---- the token bucket ------------------------------------------------------------ */

/* A full bucket at the start; one token per period after; never more
 * than burst however long it rests. */
START_TEST(test_bucket_burst_then_one_per_period)
{
        struct event_bucket b;

        event_bucket_init(&b, 3, 10, 100);
        for (int i = 0; i < 3; i++)
                ck_assert_uint_eq(event_bucket_take(&b, 3, 10, 100), 0);
        ck_assert_uint_eq(event_bucket_take(&b, 3, 10, 100), 10);
        ck_assert_uint_eq(event_bucket_take(&b, 3, 10, 104), 6);
        ck_assert_uint_eq(event_bucket_take(&b, 3, 10, 110), 0);
        ck_assert_uint_eq(event_bucket_take(&b, 3, 10, 110), 10);
        /* A long rest refills to burst, not more. */
        for (int i = 0; i < 3; i++)
                ck_assert_uint_eq(event_bucket_take(&b, 3, 10, 1000000), 0);
        ck_assert_uint_eq(event_bucket_take(&b, 3, 10, 1000000), 10);
        /* A clock that seems to go back takes nothing from it. */
        ck_assert_uint_eq(event_bucket_take(&b, 3, 10, 5), 10);
        /* Period 0: no limit. */
        event_bucket_init(&b, 1, 0, 0);
        for (int i = 0; i < 1000; i++)
                ck_assert_uint_eq(event_bucket_take(&b, 1, 0, 0), 0);
}
END_TEST

/* ---- bodies and counting --------------------------------------------------------- */

/* The first event about the node: a POST of the whole Event, as the
 * kubelet's recorder fills it for its node (no namespace: "default";
 * the node's name as its UID). */
START_TEST(test_first_event_is_a_post_of_the_whole_event)
{
        struct event_correlator *c = new_correlator(0);
        struct event_out o = warn(c, "static pod manifest \"/etc/m/a.yaml\" rejected: bad", 0);

        ck_assert(!o.skip);
        ck_assert(!o.aggregated);
        ck_assert_uint_eq(o.count, 1);
        ck_assert_str_eq(o.namespace, "default");
        ck_assert_str_eq(o.name, "node1.17979cfe3d85ca00");
        ck_assert_ptr_null(o.patch);
        ck_assert_str_eq(o.post,
                         "{\"kind\":\"Event\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"node1.17979cfe3d85ca00\","
                         "\"namespace\":\"default\"},\"involvedObject\":{\"kind\":\"Node\",\"name\":\"node1\","
                         "\"uid\":\"node1\"},\"reason\":\"StaticPodRejected\",\"message\":\"static pod manifest "
                         "\\\"/etc/m/a.yaml\\\" rejected: bad\",\"source\":{\"component\":\"podmux\",\"host\":"
                         "\"node1\"},\"firstTimestamp\":\"2023-11-14T22:13:20Z\",\"lastTimestamp\":\"2023-11-14T22:"
                         "13:20Z\",\"count\":1,\"type\":\"Warning\",\"eventTime\":null,\"reportingComponent\":"
                         "\"podmux\",\"reportingInstance\":\"node1\"}");
        event_out_clear(&o);
        event_correlator_free(c);
}
END_TEST

/* An event about a pod lives in the pod's namespace and names the pod
 * by kind, namespace, name, UID and API version. */
START_TEST(test_pod_event_in_the_pods_namespace)
{
        struct event_correlator *c = new_correlator(0);
        struct event_out o = warn_at(c, &pod, "FailedValidation", "duplicate", MONO, WALL);

        ck_assert_str_eq(o.namespace, "kube-system");
        ck_assert_str_eq(o.name, "web.17979cfe3d85ca00");
        ck_assert_ptr_nonnull(strstr(o.post, "\"metadata\":{\"name\":\"web.17979cfe3d85ca00\",\"namespace\":"
                                             "\"kube-system\"},\"involvedObject\":{\"kind\":\"Pod\",\"namespace\":"
                                             "\"kube-system\",\"name\":\"web\",\"uid\":\"1234-abcd\","
                                             "\"apiVersion\":\"v1\"},\"reason\":\"FailedValidation\""));
        event_out_clear(&o);
        event_correlator_free(c);
}
END_TEST

/* The same event again: the first one's name and first time, count 2,
 * written as client-go's patch of count, lastTimestamp and message. */
START_TEST(test_repeat_patches_the_count)
{
        struct event_correlator *c = new_correlator(0);
        struct event_out a = warn(c, "bad", 0), b = warn(c, "bad", 90 * SEC), d;

        ck_assert_uint_eq(b.count, 2);
        ck_assert_str_eq(b.name, a.name);
        ck_assert_str_eq(b.patch, "{\"count\":2,\"lastTimestamp\":\"2023-11-14T22:14:50Z\",\"message\":\"bad\"}");
        /* The whole event too, for a PATCH that finds it gone. */
        ck_assert_ptr_nonnull(strstr(b.post, "\"firstTimestamp\":\"2023-11-14T22:13:20Z\",\"lastTimestamp\":"
                                             "\"2023-11-14T22:14:50Z\",\"count\":2,"));
        /* Another message: another event. */
        d = warn(c, "worse", 91 * SEC);
        ck_assert_uint_eq(d.count, 1);
        ck_assert_str_ne(d.name, a.name);
        ck_assert_ptr_null(d.patch);
        event_out_clear(&a);
        event_out_clear(&b);
        event_out_clear(&d);
        event_correlator_free(c);
}
END_TEST

/* Two new events in one microsecond still get two names. */
START_TEST(test_names_never_repeat)
{
        struct event_correlator *c = new_correlator(0);
        struct event_out a = warn(c, "one", 0), b = warn(c, "two", 0);

        ck_assert_str_eq(a.name, "node1.17979cfe3d85ca00");
        ck_assert_str_eq(b.name, "node1.17979cfe3d85ca01");
        event_out_clear(&a);
        event_out_clear(&b);
        event_correlator_free(c);
}
END_TEST

/* A node name that makes no valid Event name (upper case): the digest of
 * the name stands in for it, and the event still names the node. */
START_TEST(test_name_of_an_unusual_node)
{
        static const struct event_ref odd = {.kind = "Node", .name = "Node_1", .uid = "Node_1"};
        struct event_correlator *c = new_correlator(0);
        struct event_out o = warn_at(c, &odd, "StaticPodRejected", "bad", MONO, WALL);
        const char *dot = strchr(o.name, '.');

        ck_assert_ptr_nonnull(dot);
        ck_assert_int_eq((int)(dot - o.name), 32);
        ck_assert_str_eq(dot, ".17979cfe3d85ca00");
        for (const char *p = o.name; p < dot; p++)
                ck_assert((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'));
        ck_assert_ptr_nonnull(strstr(o.post, "\"name\":\"Node_1\""));
        event_out_clear(&o);
        event_correlator_free(c);
}
END_TEST

/* A long message is cut to EVENT_MESSAGE_MAX bytes, never inside a
 * character. */
START_TEST(test_long_message_cut_at_a_character)
{
        struct event_correlator *c = new_correlator(0);
        char msg[EVENT_MESSAGE_MAX + 8];
        struct event_out o;
        const char *m;

        memset(msg, 'a', EVENT_MESSAGE_MAX - 1);
        memcpy(msg + EVENT_MESSAGE_MAX - 1, "\xc3\xa9zz", 5); /* é across the limit */
        o = warn(c, msg, 0);
        m = strstr(o.post, "\"message\":\"") + 11;
        ck_assert_uint_eq(strcspn(m, "\""), EVENT_MESSAGE_MAX - 1);
        event_out_clear(&o);
        event_correlator_free(c);
}
END_TEST

START_TEST(test_event_without_kind_reason_or_type_refused)
{
        struct event_correlator *c = new_correlator(0);
        struct event_in in = {.obj = node, .type = "Warning", .reason = "R", .message = "m"};
        struct event_out o;

        in.obj.kind = "";
        ck_assert_int_eq(event_correlate(c, &in, MONO, WALL, &o), -EINVAL);
        in.obj.kind = "Node";
        in.reason = NULL;
        ck_assert_int_eq(event_correlate(c, &in, MONO, WALL, &o), -EINVAL);
        in.reason = "R";
        in.type = "";
        ck_assert_int_eq(event_correlate(c, &in, MONO, WALL, &o), -EINVAL);
        in.obj.name = NULL;
        in.type = "Warning";
        ck_assert_int_eq(event_correlate(c, &in, MONO, WALL, &o), -EINVAL);
        event_correlator_free(c);
}
END_TEST

/* ---- aggregation -------------------------------------------------------------------- */

static void expect_plain(struct event_correlator *c, const char *msg, uint64_t t, unsigned count)
{
        struct event_out o = warn(c, msg, t);

        ck_assert_msg(!o.aggregated, "\"%s\" aggregated", msg);
        ck_assert_uint_eq(o.count, count);
        ck_assert_ptr_nonnull(strstr(o.post, msg));
        event_out_clear(&o);
}

/* Nine distinct messages about one object, reason and type are nine
 * events; the tenth within the window is the combined event, and every
 * later new message counts on it.  A message still in the group's memory
 * is its own event (counted); the oldest one was forgotten. */
START_TEST(test_tenth_distinct_message_is_combined)
{
        struct event_correlator *c = new_correlator(0);
        struct event_out agg, again, old;
        char msg[32];

        for (int i = 1; i <= 9; i++) {
                (void)snprintf(msg, sizeof(msg), "file %d rejected", i);
                expect_plain(c, msg, (uint64_t)i * SEC, 1);
        }
        agg = warn(c, "file 10 rejected", 10 * SEC);
        ck_assert(agg.aggregated);
        ck_assert_uint_eq(agg.count, 1);
        ck_assert_ptr_null(agg.patch);
        ck_assert_ptr_nonnull(strstr(agg.post, "\"message\":\"(combined from similar events): file 10 rejected\""));
        again = warn(c, "file 11 rejected", 11 * SEC);
        ck_assert(again.aggregated);
        ck_assert_uint_eq(again.count, 2);
        ck_assert_str_eq(again.name, agg.name);
        ck_assert_str_eq(again.patch, "{\"count\":2,\"lastTimestamp\":\"2023-11-14T22:13:31Z\",\"message\":"
                                      "\"(combined from similar events): file 11 rejected\"}");
        /* Still remembered (files 3 to 11 are; 1 and 2 were forgotten
         * as 10 and 11 came): its own event, counted. */
        expect_plain(c, "file 9 rejected", 12 * SEC, 2);
        old = warn(c, "file 1 rejected", 13 * SEC);
        ck_assert(old.aggregated);
        ck_assert_uint_eq(old.count, 3);
        event_out_clear(&agg);
        event_out_clear(&again);
        event_out_clear(&old);
        event_correlator_free(c);
}
END_TEST

/* Another reason, type or object is another group. */
START_TEST(test_groups_apart_by_reason_and_object)
{
        struct event_correlator *c = new_correlator(0);
        char msg[32];

        for (int i = 1; i <= 9; i++) {
                (void)snprintf(msg, sizeof(msg), "m%d", i);
                expect_plain(c, msg, (uint64_t)i, 1);
        }
        {
                struct event_out o = warn_at(c, &node, "OtherReason", "m10", MONO + 10, WALL + 10);
                struct event_out p = warn_at(c, &pod, "StaticPodRejected", "m10", MONO + 11, WALL + 11);

                ck_assert(!o.aggregated);
                ck_assert(!p.aggregated);
                event_out_clear(&o);
                event_out_clear(&p);
        }
        event_correlator_free(c);
}
END_TEST

/* A group idle longer than the window starts over. */
START_TEST(test_aggregation_window)
{
        struct event_correlator *c = new_correlator(0);
        char msg[32];

        for (int i = 1; i <= 9; i++) {
                (void)snprintf(msg, sizeof(msg), "m%d", i);
                expect_plain(c, msg, (uint64_t)i, 1);
        }
        /* Exactly the window after the last: still within it. */
        {
                struct event_out o = warn(c, "m10", 9 + EVENT_AGGREGATE_WINDOW_USEC);

                ck_assert(o.aggregated);
                event_out_clear(&o);
        }
        expect_plain(c, "m11", 10 + 2 * EVENT_AGGREGATE_WINDOW_USEC, 1);
        expect_plain(c, "m12", 11 + 2 * EVENT_AGGREGATE_WINDOW_USEC, 1);
        event_correlator_free(c);
}
END_TEST

/* ---- the spam filter ------------------------------------------------------------------ */

/* 25 events about one object pass, then one every 5 minutes; a
 * throttled event still counts, so the next one written says so. */
START_TEST(test_spam_filter_per_object)
{
        struct event_correlator *c = new_correlator(0);
        struct event_out o;

        for (unsigned i = 1; i <= EVENT_SPAM_BURST; i++) {
                o = warn(c, "same", i);
                ck_assert(!o.skip);
                ck_assert_uint_eq(o.count, i);
                event_out_clear(&o);
        }
        o = warn(c, "same", 26);
        ck_assert(o.skip);
        ck_assert_ptr_null(o.post);
        /* Another object has its own bucket. */
        o = warn_at(c, &pod, "FailedValidation", "dup", MONO + 27, WALL + 27);
        ck_assert(!o.skip);
        event_out_clear(&o);
        o = warn(c, "same", EVENT_SPAM_PERIOD_USEC - 1);
        ck_assert(o.skip);
        o = warn(c, "same", EVENT_SPAM_PERIOD_USEC + 25);
        ck_assert(!o.skip);
        ck_assert_uint_eq(o.count, 28);
        event_out_clear(&o);
        o = warn(c, "other message, same node", EVENT_SPAM_PERIOD_USEC + 26);
        ck_assert(o.skip);
        event_correlator_free(c);
}
END_TEST

/* ---- the caches' bound --------------------------------------------------------------- */

/* The least recently used entry goes: an event not seen for long is new
 * again (POST), one seen lately is still counted. */
START_TEST(test_caches_are_bounded)
{
        struct event_correlator *c = new_correlator(2);
        struct event_out o;

        expect_plain(c, "a", 1, 1);
        expect_plain(c, "b", 2, 1);
        expect_plain(c, "a", 3, 2);
        expect_plain(c, "c", 4, 1); /* b goes: a was used later */
        expect_plain(c, "a", 5, 3);
        o = warn(c, "b", 6);
        ck_assert_uint_eq(o.count, 1);
        event_out_clear(&o);
        event_correlator_free(c);
}
END_TEST

/* ---- failed allocations --------------------------------------------------------------- */

/*
 * Every allocation of a correlation fails in turn, for a new event and
 * for a repeat: -ENOMEM, and the caches as they were (the same event then
 * gets the count it would have had); nothing leaks.
 */
START_TEST(test_failed_allocations_change_nothing)
{
        long live;

        if (!failalloc_enabled())
                return;
        failalloc_warm_up();
        live = failalloc_live();
        for (int round = 0; round < 2; round++) {
                for (long n = 1;; n++) {
                        struct event_correlator *c = new_correlator(0);
                        struct event_in in = {.obj = node, .type = "Warning", .reason = "R", .message = "m"};
                        struct event_out o;
                        bool failed;
                        int r;

                        if (round == 1) {
                                o = warn_at(c, &node, "R", "m", MONO, WALL);
                                event_out_clear(&o);
                        }
                        failalloc_arm(n);
                        r = event_correlate(c, &in, MONO + 5, WALL + 5, &o);
                        failed = failalloc_failed();
                        failalloc_arm(0);
                        if (!failed) {
                                ck_assert_int_eq(r, 0);
                                ck_assert_uint_eq(o.count, (unsigned)round + 1);
                                event_out_clear(&o);
                                event_correlator_free(c);
                                break;
                        }
                        ck_assert_int_eq(r, -ENOMEM);
                        ck_assert_ptr_null(o.post);
                        o = warn_at(c, &node, "R", "m", MONO + 6, WALL + 6);
                        ck_assert_uint_eq(o.count, (unsigned)round + 1);
                        event_out_clear(&o);
                        event_correlator_free(c);
                }
        }
        ck_assert_int_eq(failalloc_live(), live);
}
END_TEST

/* Making a correlator fails cleanly at each of its allocations. */
START_TEST(test_new_fails_cleanly)
{
        long live;

        if (!failalloc_enabled())
                return;
        failalloc_warm_up();
        live = failalloc_live();
        for (long n = 1;; n++) {
                struct event_correlator_config cfg = {.component = "podmux", .host = "node1"};
                struct event_correlator *c = NULL;
                bool failed;
                int r;

                failalloc_arm(n);
                r = event_correlator_new(&cfg, &c);
                failed = failalloc_failed();
                failalloc_arm(0);
                if (!failed) {
                        ck_assert_int_eq(r, 0);
                        event_correlator_free(c);
                        break;
                }
                ck_assert_int_eq(r, -ENOMEM);
        }
        ck_assert_int_eq(failalloc_live(), live);
}
END_TEST

UNIT_MAIN(test_bucket_burst_then_one_per_period, test_first_event_is_a_post_of_the_whole_event,
          test_pod_event_in_the_pods_namespace, test_repeat_patches_the_count, test_names_never_repeat,
          test_name_of_an_unusual_node, test_long_message_cut_at_a_character,
          test_event_without_kind_reason_or_type_refused, test_tenth_distinct_message_is_combined,
          test_groups_apart_by_reason_and_object, test_aggregation_window, test_spam_filter_per_object,
          test_caches_are_bounded, test_failed_allocations_change_nothing, test_new_fails_cleanly)
