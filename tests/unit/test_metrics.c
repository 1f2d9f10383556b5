/* Unit tests: metrics counters, the Prometheus text and the status members. */
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "util/clock.h"
#include "util/json_parse.h"
#include "util/json_get.h"
#include "metrics/metrics.h"
#include "unit.h"

static struct pod_update *update(enum pod_op op, const char *source, size_t n_pods)
{
        struct pod_update *u = pod_update_new(op, source);

        ck_assert_ptr_nonnull(u);
        u->n_pods = n_pods; /* counted only; never rendered here */
        return u;
}

static void count(struct metrics *m, enum pod_op op, const char *source, size_t n_pods)
{
        struct pod_update *u = update(op, source, n_pods);

        metrics_count_update(m, u);
        u->n_pods = 0;
        pod_update_free(u);
}

static void has_line(const struct buf *b, const char *line)
{
        char want[512];

        (void)snprintf(want, sizeof(want), "\n%s\n", line);
        ck_assert_msg(strstr(b->data, want) != NULL, "no line \"%s\" in:\n%s", line, b->data);
}

START_TEST(test_render_counts_updates_sources_plugins)
{
        struct metrics m;
        struct metrics_gauges g = {.consumers = 3, .consumers_dropped = 2, .plugins_registered = 1, .stream_seq = 99};
        struct buf b = BUF_INIT;

        metrics_init(&m);
        metrics_source(&m, "file")->configured = true;
        metrics_source(&m, "api")->configured = true;
        ck_assert_ptr_null(metrics_source(&m, "*"));
        ck_assert_ptr_null(metrics_source(&m, "nope"));
        count(&m, POD_OP_ADD, "file", 2);
        count(&m, POD_OP_ADD, "file", 1);
        count(&m, POD_OP_UPDATE, "api", 5);
        count(&m, POD_OP_SET, "*", 7);
        count(&m, POD_OP_ADD, "bogus", 1); /* not a source: ignored */
        source_stats_success(metrics_source(&m, "file"), 3);
        source_stats_success(metrics_source(&m, "file"), METRICS_PODS_UNCHANGED);
        source_stats_error(metrics_source(&m, "file"), true, "file \"%s\": bad", "/x.yaml");
        source_stats_error(metrics_source(&m, "api"), false, "list: 500");
        metrics_source(&m, "api")->relists = 4;
        metrics_source(&m, "api")->watch_restarts = 6;
        metrics_count_plugin(&m, "REGISTERED");
        metrics_count_plugin(&m, "REGISTERED");
        metrics_count_plugin(&m, "FAILED");
        metrics_count_plugin(&m, "DEREGISTERED");
        metrics_count_plugin(&m, "OTHER");
        ck_assert_int_eq(metrics_render(&m, &g, &b), 0);
        has_line(&b, "podmux_updates_total{op=\"ADD\",source=\"file\"} 2");
        has_line(&b, "podmux_update_pods_total{op=\"ADD\",source=\"file\"} 3");
        has_line(&b, "podmux_updates_total{op=\"UPDATE\",source=\"api\"} 1");
        has_line(&b, "podmux_updates_total{op=\"SET\",source=\"*\"} 1");
        has_line(&b, "podmux_source_pods{source=\"file\"} 3");
        has_line(&b, "podmux_parse_errors_total{source=\"file\"} 1");
        has_line(&b, "podmux_parse_errors_total{source=\"api\"} 0");
        has_line(&b, "podmux_source_errors_total{source=\"api\"} 1");
        has_line(&b, "podmux_api_relists_total 4");
        has_line(&b, "podmux_api_watch_restarts_total 6");
        has_line(&b, "podmux_consumers 3");
        has_line(&b, "podmux_consumers_dropped_total 2");
        has_line(&b, "podmux_plugins_registered 1");
        has_line(&b, "podmux_plugin_registrations_total 2");
        has_line(&b, "podmux_plugin_registration_failures_total 1");
        has_line(&b, "podmux_plugin_deregistrations_total 1");
        has_line(&b, "podmux_stream_last_seq 99");
        /* A source not configured has no samples. */
        ck_assert_ptr_null(strstr(b.data, "source=\"http\""));
        /* Every family is announced once, with HELP before TYPE. */
        ck_assert_ptr_nonnull(strstr(b.data, "# HELP podmux_updates_total "));
        ck_assert_ptr_nonnull(strstr(b.data, "# TYPE podmux_updates_total counter\n"));
        ck_assert_ptr_null(strstr(strstr(b.data, "# TYPE podmux_updates_total") + 1, "# TYPE podmux_updates_total "));
        buf_free(&b);
}
END_TEST

START_TEST(test_merge_histogram_is_cumulative)
{
        struct metrics m;
        struct metrics_gauges g = {0};
        struct buf b = BUF_INIT;

        metrics_init(&m);
        metrics_observe_merge(&m, 10);      /* <= 25 us */
        metrics_observe_merge(&m, 25);      /* <= 25 us: bounds are inclusive */
        metrics_observe_merge(&m, 700);     /* <= 1 ms */
        metrics_observe_merge(&m, 5000000); /* above every bound */
        ck_assert_int_eq(metrics_render(&m, &g, &b), 0);
        has_line(&b, "podmux_merge_duration_seconds_bucket{le=\"0.000025\"} 2");
        has_line(&b, "podmux_merge_duration_seconds_bucket{le=\"0.000500\"} 2");
        has_line(&b, "podmux_merge_duration_seconds_bucket{le=\"0.001000\"} 3");
        has_line(&b, "podmux_merge_duration_seconds_bucket{le=\"1.000000\"} 3");
        has_line(&b, "podmux_merge_duration_seconds_bucket{le=\"+Inf\"} 4");
        has_line(&b, "podmux_merge_duration_seconds_count 4");
        has_line(&b, "podmux_merge_duration_seconds_sum 5.000735");
        buf_free(&b);
}
END_TEST

START_TEST(test_status_members_are_json)
{
        struct metrics m;
        struct buf b = BUF_INIT;
        json_object *o = NULL, *sources, *s0, *s1, *v;
        char long_text[METRICS_ERROR_TEXT * 2];
        size_t i;

        metrics_init(&m);
        metrics_source(&m, "http")->configured = true;
        metrics_source(&m, "api")->configured = true;
        /* An error text cut in the middle of a two-byte character must
         * still be valid UTF-8. */
        long_text[0] = 'x';
        for (i = 1; i + 2 < sizeof(long_text); i += 2) {
                long_text[i] = (char)0xC3;
                long_text[i + 1] = (char)0xA9; /* é */
        }
        long_text[i] = '\0';
        source_stats_error(metrics_source(&m, "http"), true, "%s", long_text);
        ck_assert_uint_lt(strlen(metrics_source(&m, "http")->last_error), METRICS_ERROR_TEXT);
        source_stats_success(metrics_source(&m, "api"), 4);
        /* The target, cut like the error text; the state as set. */
        source_stats_target(metrics_source(&m, "http"), "http://h/pods");
        source_stats_state(metrics_source(&m, "http"), "failing");
        {
                char long_target[METRICS_TARGET_TEXT + 8];

                memset(long_target, 'a', sizeof(long_target) - 3);
                long_target[sizeof(long_target) - 4] = (char)0xC3;
                long_target[sizeof(long_target) - 3] = (char)0xA9;
                long_target[sizeof(long_target) - 2] = '\0';
                long_target[METRICS_TARGET_TEXT - 2] = (char)0xC3;
                long_target[METRICS_TARGET_TEXT - 1] = (char)0xA9;
                source_stats_target(metrics_source(&m, "api"), long_target);
                ck_assert_uint_eq(strlen(metrics_source(&m, "api")->target), METRICS_TARGET_TEXT - 2);
        }
        source_stats_target(NULL, "x");
        source_stats_state(NULL, "x");
        ck_assert_int_eq(buf_puts(&b, "{\"x\":1"), 0);
        ck_assert_int_eq(metrics_render_status(&m, &b), 0);
        ck_assert_int_eq(buf_putc(&b, '}'), 0);
        ck_assert_msg(json_parse_text(b.data, b.len, &o, NULL) == 0, "not JSON: %s", b.data);
        ck_assert(json_object_object_get_ex(o, "sources", &sources));
        ck_assert_uint_eq(json_object_array_length(sources), 2);
        s0 = json_object_array_get_idx(sources, 0);
        s1 = json_object_array_get_idx(sources, 1);
        ck_assert(json_object_object_get_ex(s0, "name", &v));
        ck_assert_str_eq(json_object_get_string(v), "http");
        ck_assert(json_object_object_get_ex(s0, "target", &v));
        ck_assert_str_eq(json_object_get_string(v), "http://h/pods");
        ck_assert(json_object_object_get_ex(s0, "state", &v));
        ck_assert_str_eq(json_object_get_string(v), "failing");
        ck_assert(json_object_object_get_ex(s1, "state", &v));
        ck_assert_str_eq(json_object_get_string(v), "starting");
        ck_assert(json_object_object_get_ex(s1, "target", &v));
        ck_assert_uint_eq(strlen(json_object_get_string(v)), METRICS_TARGET_TEXT - 2);
        ck_assert(json_object_object_get_ex(s0, "last_success", &v));
        ck_assert(json_object_is_type(v, json_type_null));
        ck_assert(json_object_object_get_ex(s0, "parse_errors", &v));
        ck_assert_int_eq(json_object_get_int(v), 1);
        ck_assert(json_object_object_get_ex(s0, "last_error", &v));
        ck_assert(json_object_object_get_ex(v, "message", &v));
        ck_assert_int_eq(json_object_get_string(v)[0], 'x');
        ck_assert(json_object_object_get_ex(s1, "pods", &v));
        ck_assert_int_eq(json_object_get_int(v), 4);
        ck_assert(json_object_object_get_ex(s1, "last_error", &v));
        ck_assert(json_object_is_type(v, json_type_null));
        ck_assert(json_object_object_get_ex(s1, "watch_restarts", &v));
        json_object_put(o);
        buf_free(&b);
}
END_TEST

/* The event recorder's families appear only when it runs, with every
 * reason of a drop. */
START_TEST(test_event_families)
{
        struct metrics m;
        struct metrics_gauges g = {0};
        struct buf b = BUF_INIT;

        metrics_init(&m);
        ck_assert_int_eq(metrics_render(&m, &g, &b), 0);
        ck_assert_ptr_null(strstr(b.data, "podmux_event"));
        buf_reset(&b);
        m.events = (struct event_stats){.configured = true,
                                        .recorded = 40,
                                        .sent = 12,
                                        .throttled = 20,
                                        .queue_full = 3,
                                        .rejected = 2,
                                        .gave_up = 1,
                                        .queue_depth = 2,
                                        .queue_peak = 9};
        ck_assert_int_eq(metrics_render(&m, &g, &b), 0);
        has_line(&b, "podmux_events_recorded_total 40");
        has_line(&b, "podmux_events_sent_total 12");
        has_line(&b, "podmux_events_dropped_total{reason=\"queue_full\"} 3");
        has_line(&b, "podmux_events_dropped_total{reason=\"spam_filter\"} 20");
        has_line(&b, "podmux_events_dropped_total{reason=\"rejected\"} 2");
        has_line(&b, "podmux_events_dropped_total{reason=\"gave_up\"} 1");
        has_line(&b, "podmux_event_queue_depth 2");
        has_line(&b, "podmux_event_queue_peak 9");
        has_line(&b, "# TYPE podmux_event_queue_depth gauge");
        has_line(&b, "# TYPE podmux_events_dropped_total counter");
        buf_free(&b);
}
END_TEST

/* The API source's serving state and its checkpoint, in both renderings
 * (doc/checkpoint.md section 8). */
START_TEST(test_checkpoint_rendered)
{
        struct metrics m;
        struct metrics_gauges g = {0};
        struct buf b = BUF_INIT;
        json_object *o = NULL, *api, *c, *v;
        uint64_t now = wall_usec();

        metrics_init(&m);
        metrics_source(&m, "api")->configured = true;
        /* No checkpoint: the serving state only. */
        ck_assert_int_eq(metrics_render(&m, &g, &b), 0);
        has_line(&b, "podmux_api_source_serving{state=\"waiting\"} 1");
        has_line(&b, "podmux_api_source_serving{state=\"live\"} 0");
        ck_assert_ptr_null(strstr(b.data, "podmux_checkpoint_"));
        buf_reset(&b);
        metrics_source(&m, "api")->serving = "checkpoint";
        m.checkpoint.configured = true;
        metrics_text(m.checkpoint.dir, sizeof(m.checkpoint.dir), "/var/lib/podmux");
        m.checkpoint.writes = 3;
        m.checkpoint.write_errors = 1;
        m.checkpoint.bytes = 3000;
        m.checkpoint.last_bytes = 1000;
        m.checkpoint.last_write_usec = 2500;
        m.checkpoint.written_time = now - 90000000u;
        m.checkpoint.served_time = now - 90000000u;
        metrics_text(m.checkpoint.served_rv, sizeof(m.checkpoint.served_rv), "42");
        checkpoint_stats_error(&m.checkpoint, "disk %s", "full");
        checkpoint_stats_error(NULL, "ignored");
        ck_assert_uint_eq(m.checkpoint.write_errors, 2);
        ck_assert_int_eq(metrics_render(&m, &g, &b), 0);
        has_line(&b, "podmux_api_source_serving{state=\"checkpoint\"} 1");
        has_line(&b, "podmux_api_source_serving{state=\"waiting\"} 0");
        has_line(&b, "podmux_checkpoint_writes_total 3");
        has_line(&b, "podmux_checkpoint_write_errors_total 2");
        has_line(&b, "podmux_checkpoint_written_bytes_total 3000");
        has_line(&b, "podmux_checkpoint_last_write_bytes 1000");
        has_line(&b, "podmux_checkpoint_last_write_duration_seconds 0.002500");
        ck_assert_ptr_nonnull(strstr(b.data, "\npodmux_checkpoint_age_seconds 90."));
        buf_reset(&b);
        ck_assert_int_eq(buf_puts(&b, "{\"x\":1"), 0);
        ck_assert_int_eq(metrics_render_status(&m, &b), 0);
        ck_assert_int_eq(buf_putc(&b, '}'), 0);
        ck_assert_msg(json_parse_text(b.data, b.len, &o, NULL) == 0, "not JSON: %s", b.data);
        api = json_object_array_get_idx(json_get(o, "sources"), 0);
        ck_assert_str_eq(json_get_str(api, "serving", "?"), "checkpoint");
        c = json_get_type(api, "checkpoint", json_type_object);
        ck_assert_ptr_nonnull(c);
        ck_assert_str_eq(json_get_str(c, "dir", "?"), "/var/lib/podmux");
        ck_assert_int_ge(json_object_get_int64(json_get(c, "age_seconds")), 90);
        ck_assert_str_eq(json_get_str(json_get(c, "served"), "resource_version", "?"), "42");
        ck_assert_ptr_null(json_get(c, "refused"));
        ck_assert_int_eq(json_object_get_int64(json_get(c, "writes")), 3);
        ck_assert_int_eq(json_object_get_int64(json_get(c, "errors")), 2);
        ck_assert_str_eq(json_get_str(json_get(c, "last_error"), "message", "?"), "disk full");
        v = json_get(c, "bytes");
        ck_assert_int_eq(json_object_get_int64(v), 3000);
        json_object_put(o);
        /* Refused at start, nothing on disk: null time and age. */
        m.checkpoint.written_time = 0;
        m.checkpoint.served_time = 0;
        metrics_text(m.checkpoint.refused, sizeof(m.checkpoint.refused), "checksum mismatch: corrupt");
        buf_reset(&b);
        ck_assert_int_eq(buf_puts(&b, "{\"x\":1"), 0);
        ck_assert_int_eq(metrics_render_status(&m, &b), 0);
        ck_assert_int_eq(buf_putc(&b, '}'), 0);
        ck_assert_msg(json_parse_text(b.data, b.len, &o, NULL) == 0, "not JSON: %s", b.data);
        c = json_get(json_object_array_get_idx(json_get(o, "sources"), 0), "checkpoint");
        ck_assert_ptr_null(json_get(c, "time"));
        ck_assert_ptr_null(json_get(c, "age_seconds"));
        ck_assert_ptr_null(json_get(c, "served"));
        ck_assert_str_eq(json_get_str(c, "refused", "?"), "checksum mismatch: corrupt");
        json_object_put(o);
        buf_free(&b);
}
END_TEST

/* The api source hands on its checkpoint's pods before any list
 * succeeded: the pods count, but no last success is recorded until the
 * source is live. */
START_TEST(test_checkpoint_is_no_success)
{
        struct metrics m;
        struct source_stats *api;

        metrics_init(&m);
        api = metrics_source(&m, "api");
        api->configured = true;
        api->serving = "checkpoint";
        source_stats_success(api, 3);
        ck_assert_uint_eq(api->last_success, 0);
        ck_assert_uint_eq(api->pods, 3);
        api->serving = "live";
        source_stats_success(api, 2);
        ck_assert_uint_gt(api->last_success, 0);
        ck_assert_uint_eq(api->pods, 2);
}
END_TEST

UNIT_MAIN(test_render_counts_updates_sources_plugins, test_merge_histogram_is_cumulative, test_status_members_are_json,
          test_event_families, test_checkpoint_rendered, test_checkpoint_is_no_success)
