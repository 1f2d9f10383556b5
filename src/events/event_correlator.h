/*
 * event_correlator — what client-go's event recorder decides before it
 * writes a core/v1 Event (doc/events.md "Correlation"): similar events
 * are aggregated, identical ones counted (a PATCH of the first one's
 * count), and each object's events are throttled by a token bucket.  Also
 * the token bucket itself, which the recorder uses for --event-qps.
 *
 * Owns: three bounded caches (EVENT_CACHE_ENTRIES entries each, least
 * recently used dropped first): the aggregation groups, the events seen
 * (name, count, first time) and the per-object buckets.  Keys are 128-bit
 * digests, so an entry costs about 300 bytes whatever the message.
 * Never: does I/O, reads a clock (the caller passes the time in), or logs.
 *
 * Cost: O(length of the event's strings) per event; memory at most about
 * 3 * EVENT_CACHE_ENTRIES entries.
 */
#ifndef PODMUX_EVENT_CORRELATOR_H
#define PODMUX_EVENT_CORRELATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* client-go's figures (tools/record/events_cache.go). */
#define EVENT_CACHE_ENTRIES 4096
#define EVENT_AGGREGATE_MAX 10
#define EVENT_AGGREGATE_WINDOW_USEC (600ull * 1000000ull)
#define EVENT_SPAM_BURST 25
#define EVENT_SPAM_PERIOD_USEC (300ull * 1000000ull)
#define EVENT_AGGREGATE_PREFIX "(combined from similar events): "
/* A message longer than this is cut (at a character boundary): the
 * events.k8s.io limit on a note, applied to core/v1 messages too. */
#define EVENT_MESSAGE_MAX 1024

/* ---- a token bucket ---------------------------------------------------------- */

/*
 * golang.org/x/time/rate's bucket as client-go uses it: burst tokens at
 * the start, one more every period (never more than burst), one taken
 * per event.  Kept in microseconds of credit, so refills are exact.
 */
struct event_bucket {
        uint64_t credit; /* usec; one token is period usec */
        uint64_t at;     /* monotonic time of the last refill */
};

/* Full: burst tokens at now. */
void event_bucket_init(struct event_bucket *b, unsigned burst, uint64_t period, uint64_t now);
/* Takes a token at now: 0, or how many microseconds until one is there
 * (nothing taken).  period 0 means no limit. */
uint64_t event_bucket_take(struct event_bucket *b, unsigned burst, uint64_t period, uint64_t now);

/* ---- the correlator ------------------------------------------------------------ */

/* The object an event is about (a v1 ObjectReference); NULL or "" for a
 * field that is absent. */
struct event_ref {
        const char *kind;
        const char *namespace;
        const char *name;
        const char *uid;
        const char *api_version;
};

struct event_in {
        struct event_ref obj;
        const char *type; /* "Normal" or "Warning" */
        const char *reason;
        const char *message;
};

/* What to write.  Strings are the caller's after event_correlate(), freed
 * with event_out_clear(). */
struct event_out {
        bool skip;       /* throttled: nothing to write */
        bool aggregated; /* the message is the combined one */
        unsigned count;  /* 1: a new event (POST); more: PATCH its count */
        char *namespace; /* of the Event: the object's, or "default" */
        char *name;      /* of the Event */
        char *post;      /* the whole Event as JSON: the POST body (also
                          * when a PATCH finds the event gone) */
        char *patch;     /* the strategic merge patch, when count > 1 */
};
void event_out_clear(struct event_out *o); /* NULL-safe */

struct event_correlator_config {
        const char *component; /* source.component and reportingComponent */
        const char *host;      /* source.host and reportingInstance */
        /* 0: client-go's figures (tests make them small). */
        size_t cache_entries;
        unsigned spam_burst;
        uint64_t spam_period_usec;
};

struct event_correlator;

/* Copies the strings of cfg.  0 or -ENOMEM. */
int event_correlator_new(const struct event_correlator_config *cfg, struct event_correlator **ret_c);
void event_correlator_free(struct event_correlator *c); /* NULL-safe */

/*
 * Correlates one event at monotonic time mono and wall time wall (both
 * microseconds): aggregates it, counts it, throttles it, and says what to
 * write in *ret.  All or nothing: 0 with *ret filled (ret->skip when
 * throttled), or -ENOMEM with the caches as they were.  -EINVAL for an
 * event without a kind, name, type or reason.
 */
int event_correlate(struct event_correlator *c, const struct event_in *ev, uint64_t mono, uint64_t wall,
                    struct event_out *ret);

#endif
