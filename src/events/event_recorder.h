/*
 * event_recorder — records core/v1 Events on the API server as the
 * kubelet's recorder does (doc/events.md): each event is correlated at
 * once (event_correlator.h: aggregated, counted, throttled per object),
 * queued, and written by one request at a time (POST, or PATCH of a
 * repeat's count), at most --event-qps requests a second after a burst of
 * --event-burst.
 *
 * Owns: the correlator, the bounded queue of writes (EVENT_QUEUE_MAX) and
 * the one request in flight.
 * Never: blocks (a full queue drops the event, counted), logs (problems
 * go to the config's report callback, once per distinct problem and once
 * when writes succeed again), or knows how to reach the API server: the
 * kube client it is given sets up each request (URL, TLS, token), the
 * same client as the API source's (src/kube/kube_client.h).
 *
 * A write the server refuses (any HTTP error, after client-go's
 * Retry-After retries) is dropped; the next write still waits out a
 * Retry-After that came with the refusal.  One that gets no answer (refused
 * connection, reset, timeout, DNS, TLS: named by kube_describe_failure)
 * is tried again after a random part of
 * EVENT_RETRY_USEC, then every EVENT_RETRY_USEC, EVENT_MAX_TRIES times in
 * all, the later writes waiting behind it (client-go's recordToSink).
 */
#ifndef PODMUX_EVENT_RECORDER_H
#define PODMUX_EVENT_RECORDER_H

#include <stdint.h>

#include "events/event_correlator.h"
#include "kube/kube_client.h"
#include "util/curl_loop.h"
#include "util/loop.h"
#include "metrics/metrics.h"

/* client-go's figures (tools/record/event.go, the REST client; its
 * Retry-After retries are RETRY_AFTER_MAX_RETRIES, util/retry_after.h). */
#define EVENT_QUEUE_MAX 1000
#define EVENT_MAX_TRIES 12
#define EVENT_RETRY_USEC (10ull * 1000000ull)
/* The kubelet's --event-qps and --event-burst defaults; a burst of 0
 * with a limit is client-go's default burst. */
#define EVENT_DEFAULT_QPS 50
#define EVENT_DEFAULT_BURST 100
#define EVENT_CLIENT_BURST 10
/* A write with no complete answer this long counts as no answer. */
#define EVENT_REQUEST_TIMEOUT_USEC (30ull * 1000000ull)
/* What podmux names itself in source.component and reportingComponent. */
#define EVENT_COMPONENT "podmux"

/* A problem writing events (problem non-NULL: a line to log, once per
 * distinct problem), or writes succeeding again (problem NULL; lost: the
 * events dropped since the problem began). */
typedef void (*event_report_fn)(void *data, const char *problem, uint64_t lost);

struct event_recorder_config {
        const char *node_name; /* source.host, reportingInstance, the Node */
        unsigned qps;          /* writes a second; 0: no limit */
        unsigned burst;        /* 0: EVENT_CLIENT_BURST */
        struct kube_client *kube; /* borrowed: outlives the recorder */
        event_report_fn report; /* may be NULL */
        void *report_data;
        struct event_stats *stats; /* counted into when not NULL; outlives the recorder */
        /* 0: EVENT_QUEUE_MAX and EVENT_RETRY_USEC (tests make them small). */
        size_t queue_max;
        uint64_t retry_usec;
};

struct event_recorder;

/* 0, -EINVAL for an empty node name or no kube client, -ENOMEM. */
int event_recorder_new(struct loop *loop, struct curl_loop *cl, const struct event_recorder_config *cfg,
                       struct event_recorder **ret_er);
/* Drops what is queued and cancels the write in flight.  NULL-safe. */
void event_recorder_free(struct event_recorder *er);

/*
 * Records an event about obj (type "Normal" or "Warning"); never waits.
 * 0 queued, 1 throttled by the spam filter, -ENOBUFS dropped (the queue
 * is full), -ENOMEM (nothing changed), -EINVAL (see event_correlate()).
 * Every call counts as recorded, and queued, throttled and dropped events
 * in their own counters too.
 */
int event_recorder_record(struct event_recorder *er, const struct event_ref *obj, const char *type, const char *reason,
                          const char *message);
/* The Node this recorder reports on (kind Node, name and uid the node
 * name, as the kubelet refers to its node). */
struct event_ref event_recorder_node(const struct event_recorder *er);
/* Writes waiting, the one in flight included (tests only). */
size_t event_recorder_queued(const struct event_recorder *er);

#endif
