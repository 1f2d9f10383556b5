/*
 * metrics — counters and their renderings (see src/metrics/metrics.h).
 *
 * Counting costs a few additions per update on the loop thread; a scrape
 * renders about 4 KB of text.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/loop.h"
#include "util/proto_words.h"
#include "metrics/metrics.h"

static const uint64_t merge_bounds[METRICS_MERGE_BUCKETS] = {
        25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 1000000,
};

static const char *const source_names[_METRICS_SOURCE_MAX] = {"file", "http", "api", "*"};

void source_stats_success(struct source_stats *st, size_t pods)
{
        if (!st)
                return;
        /* A checkpoint's pods are handed on, but nothing succeeded: the
         * checkpoint is served only before any list did, so a last
         * success shown then would be a false one (its time is in the
         * checkpoint's own member of the status). */
        if (!st->serving || strcmp(st->serving, PROTO_SERVING_CHECKPOINT) != 0)
                st->last_success = wall_usec();
        if (pods != METRICS_PODS_UNCHANGED)
                st->pods = pods;
}

/* Drops a multi-byte character cut by truncation, so the text stays
 * valid UTF-8 in a status message. */
static void utf8_trim(char *s)
{
        size_t n = strlen(s), i = n, want;

        while (i > 0 && ((unsigned char)s[i - 1] & 0xC0) == 0x80)
                i--;
        if (i == 0 || (unsigned char)s[i - 1] < 0xC0)
                return;
        want = (unsigned char)s[i - 1] >= 0xF0 ? 4 : (unsigned char)s[i - 1] >= 0xE0 ? 3 : 2;
        if (n - (i - 1) < want)
                s[i - 1] = '\0';
}

void source_stats_error(struct source_stats *st, bool parse, const char *fmt, ...)
{
        va_list ap;
        int n;

        if (!st)
                return;
        st->last_error_at = wall_usec();
        st->errors++;
        if (parse)
                st->parse_errors++;
        va_start(ap, fmt);
        n = vsnprintf(st->last_error, sizeof(st->last_error), fmt, ap);
        va_end(ap);
        if (n >= (int)sizeof(st->last_error))
                utf8_trim(st->last_error);
}

void checkpoint_stats_error(struct checkpoint_stats *st, const char *fmt, ...)
{
        va_list ap;
        int n;

        if (!st)
                return;
        st->last_error_at = wall_usec();
        st->write_errors++;
        va_start(ap, fmt);
        n = vsnprintf(st->last_error, sizeof(st->last_error), fmt, ap);
        va_end(ap);
        if (n >= (int)sizeof(st->last_error))
                utf8_trim(st->last_error);
}

void metrics_text(char *dst, size_t size, const char *text)
{
        if (dst && (size_t)snprintf(dst, size, "%s", text) >= size)
                utf8_trim(dst);
}

void source_stats_target(struct source_stats *st, const char *target)
{
        if (st)
                metrics_text(st->target, sizeof(st->target), target);
}

void source_stats_state(struct source_stats *st, const char *state)
{
        if (st)
                st->state = state;
}

void metrics_init(struct metrics *m)
{
        memset(m, 0, sizeof(*m));
        m->started = wall_usec();
}

static int source_index(const char *source)
{
        for (int i = 0; i < _METRICS_SOURCE_MAX; i++)
                if (source && strcmp(source, source_names[i]) == 0)
                        return i;
        return -1;
}

struct source_stats *metrics_source(struct metrics *m, const char *source)
{
        int i = source_index(source);

        return i >= 0 && i <= METRICS_SOURCE_API ? &m->sources[i] : NULL;
}

void metrics_count_update(struct metrics *m, const struct pod_update *u)
{
        int i = source_index(u->source);

        if (i < 0 || (int)u->op < 0 || u->op >= _POD_OP_MAX)
                return;
        m->updates[u->op][i]++;
        m->update_pods[u->op][i] += u->n_pods;
}

void metrics_observe_merge(struct metrics *m, uint64_t usec)
{
        size_t b = 0;

        while (b < METRICS_MERGE_BUCKETS && usec > merge_bounds[b])
                b++;
        m->merge_buckets[b]++;
        m->merge_count++;
        m->merge_sum_usec += usec;
}

void metrics_count_plugin(struct metrics *m, const char *op)
{
        if (strcmp(op, "REGISTERED") == 0)
                m->plugin_registrations++;
        else if (strcmp(op, "DEREGISTERED") == 0)
                m->plugin_deregistrations++;
        else if (strcmp(op, "FAILED") == 0)
                m->plugin_failures++;
}

static int help(struct buf *out, const char *name, const char *type, const char *text)
{
        return buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, text, name, type);
}

/* A family with one unlabelled sample. */
static int single(struct buf *out, const char *name, const char *type, const char *text, uint64_t v)
{
        int r = help(out, name, type, text);

        return r < 0 ? r : buf_printf(out, "%s %" PRIu64 "\n", name, v);
}

/* One sample per configured source of a per-source counter. */
static int per_source(const struct metrics *m, struct buf *out, const char *name, const char *type, const char *text,
                      size_t offset, bool is_size)
{
        int r = help(out, name, type, text);

        for (int i = 0; i <= METRICS_SOURCE_API && r >= 0; i++) {
                const char *field = (const char *)&m->sources[i] + offset;
                uint64_t v = is_size ? (uint64_t) * (const size_t *)field : *(const uint64_t *)field;

                if (m->sources[i].configured)
                        r = buf_printf(out, "%s{source=\"%s\"} %" PRIu64 "\n", name, source_names[i], v);
        }
        return r;
}

/* A wall time in seconds with microseconds, as Prometheus timestamps are
 * written in *_timestamp_seconds gauges. */
static int seconds(struct buf *out, uint64_t usec)
{
        return buf_printf(out, "%" PRIu64 ".%06" PRIu64, usec / 1000000u, usec % 1000000u);
}

/* The two families counted by op and source: messages and their pods.
 * Both have a sample for each pair that sent a message. */
static int render_updates(const struct metrics *m, struct buf *out)
{
        int r = help(out, "podmux_updates_total", "counter", "Update messages sent to consumers, by op and source.");

        for (int op = 0; op < _POD_OP_MAX && r >= 0; op++)
                for (int s = 0; s < _METRICS_SOURCE_MAX && r >= 0; s++)
                        if (m->updates[op][s])
                                r = buf_printf(out, "podmux_updates_total{op=\"%s\",source=\"%s\"} %" PRIu64 "\n",
                                               pod_op_to_string((enum pod_op)op), source_names[s], m->updates[op][s]);
        if (r >= 0)
                r = help(out, "podmux_update_pods_total", "counter",
                         "Pods carried by update messages, by op and source.");
        for (int op = 0; op < _POD_OP_MAX && r >= 0; op++)
                for (int s = 0; s < _METRICS_SOURCE_MAX && r >= 0; s++)
                        if (m->updates[op][s])
                                r = buf_printf(out, "podmux_update_pods_total{op=\"%s\",source=\"%s\"} %" PRIu64 "\n",
                                               pod_op_to_string((enum pod_op)op), source_names[s],
                                               m->update_pods[op][s]);
        return r;
}

/* The per-source families, then the API source's own counters when it is
 * configured. */
static int render_sources(const struct metrics *m, struct buf *out)
{
        int r = per_source(m, out, "podmux_source_pods", "gauge", "Pods in the source's last delivery.",
                           offsetof(struct source_stats, pods), true);

        if (r >= 0)
                r = per_source(m, out, "podmux_source_errors_total", "counter",
                               "Failed reads, polls, lists and watches, by source.",
                               offsetof(struct source_stats, errors), false);
        if (r >= 0)
                r = per_source(m, out, "podmux_parse_errors_total", "counter",
                               "Manifests or objects that could not be decoded, by source.",
                               offsetof(struct source_stats, parse_errors), false);
        if (r >= 0)
                r = help(out, "podmux_source_last_success_timestamp_seconds", "gauge",
                         "When the source last succeeded (0: never; a checkpoint served is none).");
        for (int i = 0; i <= METRICS_SOURCE_API && r >= 0; i++) {
                if (!m->sources[i].configured)
                        continue;
                if ((r = buf_printf(out, "podmux_source_last_success_timestamp_seconds{source=\"%s\"} ",
                                    source_names[i])) >= 0 &&
                    (r = seconds(out, m->sources[i].last_success)) >= 0)
                        r = buf_putc(out, '\n');
        }
        if (m->sources[METRICS_SOURCE_API].configured) {
                if (r >= 0)
                        r = single(out, "podmux_api_relists_total", "counter", "Lists of the node's pods started.",
                                   m->sources[METRICS_SOURCE_API].relists);
                if (r >= 0)
                        r = single(out, "podmux_api_watch_restarts_total", "counter",
                                   "Watches that ended (closed, failed or expired) and were started again.",
                                   m->sources[METRICS_SOURCE_API].watch_restarts);
        }
        return r;
}

/* The API source's serving state, one sample per state (1 for the one
 * it is in), and its checkpoint's families when it has one
 * (doc/checkpoint.md). */
static int render_checkpoint(const struct metrics *m, struct buf *out)
{
        static const char *const states[] = {PROTO_SERVING_WAITING, PROTO_SERVING_CHECKPOINT, PROTO_SERVING_LIVE};
        const struct source_stats *api = &m->sources[METRICS_SOURCE_API];
        const struct checkpoint_stats *c = &m->checkpoint;
        const char *serving = api->serving ? api->serving : PROTO_SERVING_WAITING;
        uint64_t now = wall_usec();
        int r = 0;

        if (!api->configured)
                return 0;
        r = help(out, "podmux_api_source_serving", "gauge",
                 "Whose pods the API source serves: none yet, its checkpoint's, or the server's (1 for the one).");
        for (size_t i = 0; i < sizeof(states) / sizeof(states[0]) && r >= 0; i++)
                r = buf_printf(out, "podmux_api_source_serving{state=\"%s\"} %d\n", states[i],
                               strcmp(serving, states[i]) == 0);
        if (r < 0 || !c->configured)
                return r;
        if ((r = single(out, "podmux_checkpoint_writes_total", "counter", "Checkpoints written.", c->writes)) < 0 ||
            (r = single(out, "podmux_checkpoint_write_errors_total", "counter", "Checkpoint writes that failed.",
                        c->write_errors)) < 0 ||
            (r = single(out, "podmux_checkpoint_written_bytes_total", "counter", "Bytes of checkpoints written.",
                        c->bytes)) < 0 ||
            (r = single(out, "podmux_checkpoint_last_write_bytes", "gauge", "Size of the last checkpoint written.",
                        c->last_bytes)) < 0)
                return r;
        if ((r = help(out, "podmux_checkpoint_last_write_duration_seconds", "gauge",
                      "How long the last checkpoint took to encode and write (on its own thread).")) < 0 ||
            (r = buf_puts(out, "podmux_checkpoint_last_write_duration_seconds ")) < 0 ||
            (r = seconds(out, c->last_write_usec)) < 0 || (r = buf_putc(out, '\n')) < 0)
                return r;
        if ((r = help(out, "podmux_checkpoint_timestamp_seconds", "gauge",
                      "When the server confirmed the state on disk (0: no checkpoint known).")) < 0 ||
            (r = buf_puts(out, "podmux_checkpoint_timestamp_seconds ")) < 0 ||
            (r = seconds(out, c->written_time)) < 0 || (r = buf_putc(out, '\n')) < 0)
                return r;
        if (!c->written_time)
                return 0;
        if ((r = help(out, "podmux_checkpoint_age_seconds", "gauge", "Age of the state on disk.")) < 0 ||
            (r = buf_puts(out, "podmux_checkpoint_age_seconds ")) < 0 ||
            (r = seconds(out, now > c->written_time ? now - c->written_time : 0)) < 0)
                return r;
        return buf_putc(out, '\n');
}

/* The consumers of the stream and the plugins: gauges and counters. */
static int render_consumers_plugins(const struct metrics *m, const struct metrics_gauges *g, struct buf *out)
{
        int r = single(out, "podmux_consumers", "gauge", "Open connections on the update stream.", g->consumers);

        if (r >= 0)
                r = single(out, "podmux_consumers_dropped_total", "counter",
                           "Consumers cut off because their backlog passed the bound.", g->consumers_dropped);
        if (r >= 0)
                r = single(out, "podmux_plugins_registered", "gauge", "Plugins registered now.", g->plugins_registered);
        if (r >= 0)
                r = single(out, "podmux_plugin_registrations_total", "counter", "Plugin registrations that succeeded.",
                           m->plugin_registrations);
        if (r >= 0)
                r = single(out, "podmux_plugin_deregistrations_total", "counter", "Plugins deregistered.",
                           m->plugin_deregistrations);
        if (r >= 0)
                r = single(out, "podmux_plugin_registration_failures_total", "counter",
                           "Plugin registrations that failed (GetInfo, validation or the handler).",
                           m->plugin_failures);
        return r;
}

/* The merge-duration histogram: cumulative buckets, sum and count. */
static int render_merge(const struct metrics *m, struct buf *out)
{
        uint64_t cum = 0;
        int r = help(out, "podmux_merge_duration_seconds", "histogram",
                     "Time to merge one source delivery and classify its changes.");

        for (size_t b = 0; b <= METRICS_MERGE_BUCKETS && r >= 0; b++) {
                cum += m->merge_buckets[b];
                if (b == METRICS_MERGE_BUCKETS)
                        r = buf_printf(out, "podmux_merge_duration_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n", cum);
                else if ((r = buf_puts(out, "podmux_merge_duration_seconds_bucket{le=\"")) >= 0 &&
                         (r = seconds(out, merge_bounds[b])) >= 0)
                        r = buf_printf(out, "\"} %" PRIu64 "\n", cum);
        }
        if (r >= 0 && (r = buf_puts(out, "podmux_merge_duration_seconds_sum ")) >= 0 &&
            (r = seconds(out, m->merge_sum_usec)) >= 0)
                r = buf_printf(out, "\npodmux_merge_duration_seconds_count %" PRIu64 "\n", m->merge_count);
        return r;
}

/* The event recorder's families (doc/events.md), when it runs. */
static int render_events(const struct event_stats *e, struct buf *out)
{
        const struct {
                const char *reason;
                uint64_t n;
        } drops[] = {{"queue_full", e->queue_full},
                     {"spam_filter", e->throttled},
                     {"rejected", e->rejected},
                     {"gave_up", e->gave_up}};
        int r = single(out, "podmux_events_recorded_total", "counter",
                       "Kubernetes Events handed to the recorder (duplicate pod names, rejected static pods).",
                       e->recorded);

        if (r >= 0)
                r = single(out, "podmux_events_sent_total", "counter",
                           "Event writes (POST, or PATCH of a repeat) the API server accepted.", e->sent);
        if (r >= 0)
                r = help(out, "podmux_events_dropped_total", "counter",
                         "Events not written, by reason: queue_full, spam_filter, rejected (by the API server), "
                         "gave_up (no answer).");
        for (size_t i = 0; i < sizeof(drops) / sizeof(drops[0]) && r >= 0; i++)
                r = buf_printf(out, "podmux_events_dropped_total{reason=\"%s\"} %" PRIu64 "\n", drops[i].reason,
                               drops[i].n);
        if (r >= 0)
                r = single(out, "podmux_event_queue_depth", "gauge",
                           "Event writes waiting, the one in flight included.", e->queue_depth);
        if (r >= 0)
                r = single(out, "podmux_event_queue_peak", "gauge", "The most event writes that were ever waiting.",
                           e->queue_peak);
        return r;
}

int metrics_render(const struct metrics *m, const struct metrics_gauges *g, struct buf *out)
{
        int r;

        r = help(out, "podmux_start_time_seconds", "gauge", "Start time of the daemon since the epoch.");
        if (r >= 0 && (r = buf_puts(out, "podmux_start_time_seconds ")) >= 0 && (r = seconds(out, m->started)) >= 0)
                r = buf_putc(out, '\n');
        if (r >= 0)
                r = render_updates(m, out);
        if (r >= 0)
                r = render_sources(m, out);
        if (r >= 0)
                r = render_checkpoint(m, out);
        if (r >= 0)
                r = render_consumers_plugins(m, g, out);
        if (r >= 0)
                r = render_merge(m, out);
        if (r >= 0)
                r = single(out, "podmux_stream_last_seq", "gauge", "The last sequence number of the update stream.",
                           g->stream_seq);
        if (r >= 0 && m->events.configured)
                r = render_events(&m->events, out);
        return r < 0 ? -ENOMEM : 0;
}

/* "last_error" of the checkpoint: {"time", "message"} or null. */
static int status_checkpoint_error(const struct checkpoint_stats *c, struct buf *out)
{
        int r;

        if (!c->last_error_at)
                return buf_puts(out, "null");
        if ((r = buf_puts(out, "{\"time\":")) < 0 || (r = buf_json_time(out, c->last_error_at)) < 0 ||
            (r = buf_puts(out, ",\"message\":")) < 0 ||
            (r = buf_json_string(out, c->last_error, strlen(c->last_error))) < 0)
                return r;
        return buf_putc(out, '}');
}

/* ,"serving":...,"checkpoint":{...}|null of the api source's entry. */
static int status_checkpoint(const struct metrics *m, struct buf *out)
{
        const struct source_stats *api = &m->sources[METRICS_SOURCE_API];
        const struct checkpoint_stats *c = &m->checkpoint;
        uint64_t now = wall_usec();
        int r;

        if ((r = buf_printf(out, ",\"serving\":\"%s\",\"checkpoint\":",
                            api->serving ? api->serving : PROTO_SERVING_WAITING)) < 0)
                return r;
        if (!c->configured)
                return buf_puts(out, "null");
        if ((r = buf_puts(out, "{\"dir\":")) < 0 || (r = buf_json_string(out, c->dir, strlen(c->dir))) < 0 ||
            (r = buf_puts(out, ",\"time\":")) < 0 || (r = buf_json_time(out, c->written_time)) < 0)
                return r;
        if (c->written_time)
                r = buf_printf(out, ",\"age_seconds\":%" PRIu64,
                               now > c->written_time ? (now - c->written_time) / 1000000u : 0);
        else
                r = buf_puts(out, ",\"age_seconds\":null");
        if (r < 0 || (r = buf_puts(out, ",\"served\":")) < 0)
                return r;
        if (c->served_time &&
            ((r = buf_puts(out, "{\"time\":")) < 0 || (r = buf_json_time(out, c->served_time)) < 0 ||
             (r = buf_puts(out, ",\"resource_version\":")) < 0 ||
             (r = buf_json_string(out, c->served_rv, strlen(c->served_rv))) < 0 || (r = buf_putc(out, '}')) < 0))
                return r;
        if (!c->served_time && (r = buf_puts(out, "null")) < 0)
                return r;
        if ((r = buf_puts(out, ",\"refused\":")) < 0 ||
            (r = c->refused[0] ? buf_json_string(out, c->refused, strlen(c->refused)) : buf_puts(out, "null")) < 0 ||
            (r = buf_printf(out,
                            ",\"writes\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"last_bytes\":%" PRIu64
                            ",\"errors\":%" PRIu64 ",\"last_error\":",
                            c->writes, c->bytes, c->last_bytes, c->write_errors)) < 0 ||
            (r = status_checkpoint_error(c, out)) < 0)
                return r;
        return buf_putc(out, '}');
}

int metrics_render_status(const struct metrics *m, struct buf *out)
{
        bool first = true;
        int r;

        if ((r = buf_puts(out, ",\"started\":")) < 0 || (r = buf_json_time(out, m->started)) < 0 ||
            (r = buf_puts(out, ",\"sources\":[")) < 0)
                return r;
        for (int i = 0; i <= METRICS_SOURCE_API; i++) {
                const struct source_stats *st = &m->sources[i];

                if (!st->configured)
                        continue;
                if ((!first && (r = buf_putc(out, ',')) < 0) ||
                    (r = buf_printf(out, "{\"name\":\"%s\",\"target\":", source_names[i])) < 0 ||
                    (r = buf_json_string(out, st->target, strlen(st->target))) < 0 ||
                    (r = buf_printf(out, ",\"state\":\"%s\",\"pods\":%zu,\"last_success\":",
                                    st->state ? st->state : "starting", st->pods)) < 0 ||
                    (r = buf_json_time(out, st->last_success)) < 0 || (r = buf_puts(out, ",\"last_error\":")) < 0)
                        return r;
                if (st->last_error_at) {
                        if ((r = buf_puts(out, "{\"time\":")) < 0 || (r = buf_json_time(out, st->last_error_at)) < 0 ||
                            (r = buf_puts(out, ",\"message\":")) < 0 ||
                            (r = buf_json_string(out, st->last_error, strlen(st->last_error))) < 0 ||
                            (r = buf_putc(out, '}')) < 0)
                                return r;
                } else if ((r = buf_puts(out, "null")) < 0) {
                        return r;
                }
                if ((r = buf_printf(out, ",\"errors\":%" PRIu64 ",\"parse_errors\":%" PRIu64, st->errors,
                                    st->parse_errors)) < 0)
                        return r;
                if (i == METRICS_SOURCE_API &&
                    ((r = buf_printf(out, ",\"relists\":%" PRIu64 ",\"watch_restarts\":%" PRIu64, st->relists,
                                     st->watch_restarts)) < 0 ||
                     (r = status_checkpoint(m, out)) < 0))
                        return r;
                if ((r = buf_putc(out, '}')) < 0)
                        return r;
                first = false;
        }
        return buf_putc(out, ']');
}
