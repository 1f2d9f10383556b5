/*
 * retry_after — client-go's rule for an answer that asks the client to
 * come back later: the one home of it for every request podmux makes of
 * the API server (the API source's lists and watches, the Events
 * recorder's writes; doc/api-source.md 7.2, doc/events.md).
 *
 * - A Retry-After header counts in its integer form only (whole
 *   seconds, 0 to RETRY_AFTER_MAX_SECONDS), as client-go reads it: an
 *   HTTP date, a negative number, one too large or anything else is no
 *   Retry-After.
 * - An answer 429, or of 500 or more, that carries one: the same request
 *   is sent again after that many seconds, RETRY_AFTER_MAX_RETRIES times
 *   at most per request.
 * - Once they are spent the answer ends the request, but the pause it
 *   asked for still holds: retry_after_left() is what the caller's next
 *   request waits, on top of its own pause (client-go's would not wait
 *   it: doc/api-source.md 7.2).
 *
 * A caller keeps one struct per request (the retries are counted across
 * its sends), calls retry_after_sent() before each send,
 * retry_after_header() on each response header line, then
 * retry_after_retry() with the status, and retry_after_left() when the
 * answer ends the request.  How the pause is waited (a timer, on top of a
 * backoff or of a rate limit) is the caller's.
 *
 * Owns: nothing (the struct is the caller's).  Never: allocates, fails,
 * reads a clock, logs.  Cost: O(1) per header line and per answer.
 */
#ifndef PODMUX_RETRY_AFTER_H
#define PODMUX_RETRY_AFTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* client-go's REST client retries one request this often. */
#define RETRY_AFTER_MAX_RETRIES 10
/* The longest Retry-After that counts: the whole seconds a Go
 * time.Duration holds, so every pause client-go counts right is counted
 * alike.  A larger number is none (the answer is an error, backed off
 * from): in microseconds it would wrap around, to a retry at once where
 * the server asked for the longest pause. */
#define RETRY_AFTER_MAX_SECONDS 9223372036LL

struct retry_after {
        long seconds;     /* the last answer's Retry-After; -1: none */
        unsigned retries; /* granted to this request so far */
};

#define RETRY_AFTER_INIT ((struct retry_after){.seconds = -1, .retries = 0})

/* A new request (not a retry of the last): no retries granted yet.  The
 * last answer's Retry-After stays until the next retry_after_sent(). */
static inline void retry_after_request(struct retry_after *ra)
{
        ra->retries = 0;
}

/* The request is being sent (again): no Retry-After read yet. */
static inline void retry_after_sent(struct retry_after *ra)
{
        ra->seconds = -1;
}

/* A response header line, as libcurl's header callback gets it (ending
 * in a line break or a NUL): true when it is a Retry-After in the
 * integer form, whose seconds are kept; false otherwise (ra unchanged). */
bool retry_after_header(struct retry_after *ra, const char *line, size_t len);

/* The answer's status, its headers read: true when the same request is
 * to be sent again after *ret_usec (the retry is counted); false when
 * the answer asks for no pause, or this request's retries are spent. */
bool retry_after_retry(struct retry_after *ra, long status, uint64_t *ret_usec);

/* A retry granted as if the answer had said Retry-After: seconds (a GET
 * that lost its connection: client-go takes a probable EOF so),
 * counted against the same RETRY_AFTER_MAX_RETRIES: true and *ret_usec,
 * or false when they are spent. */
bool retry_after_as_if(struct retry_after *ra, long seconds, uint64_t *ret_usec);

/* The answer (status) ended the request, no retry granted: the pause it
 * still asks for, in microseconds; 0 when it asks for none. */
uint64_t retry_after_left(const struct retry_after *ra, long status);

#endif
