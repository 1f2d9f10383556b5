/*
 * clock — the two clocks the daemon reads, random jitter, and RFC 3339
 * time text.
 *
 * Owns: nothing.  Never: allocates.
 */
#ifndef PODMUX_CLOCK_H
#define PODMUX_CLOCK_H

#include <stddef.h>
#include <stdint.h>

/* Monotonic clock, microseconds: for deadlines and durations. */
uint64_t mono_usec(void);
/* Wall clock, microseconds since the epoch: for timestamps users read. */
uint64_t wall_usec(void);
/* A random duration in [0, n) microseconds (0 for n 0): the jitter of
 * backoffs and retry pauses. */
uint64_t clock_jitter(uint64_t n);

/* How many fraction digits clock_rfc3339() writes. */
enum clock_precision {
        CLOCK_SECONDS, /* "2006-01-02T15:04:05Z" */
        CLOCK_MICRO,   /* "2006-01-02T15:04:05.000000Z": log lines, fixed width */
        CLOCK_NANO,    /* "2006-01-02T15:04:05.999999999Z" with trailing zeros
                        * (and the dot) dropped: Go's RFC3339Nano */
};

/* Room for any text clock_rfc3339() writes, NUL included. */
#define CLOCK_RFC3339_MAX 40

/* Writes wall (microseconds since the epoch) in UTC into out
 * (CLOCK_RFC3339_MAX bytes).  Returns out. */
char *clock_rfc3339(uint64_t wall, enum clock_precision precision, char out[CLOCK_RFC3339_MAX]);

/*
 * Parses RFC 3339 ("2006-01-02T15:04:05[.frac](Z|+hh:mm|-hh:mm)"; a space
 * or lower-case t and z accepted, as Go's parser does) into seconds and
 * nanoseconds since the epoch.  0 or -EINVAL.
 */
int clock_parse_rfc3339(const char *s, int64_t *ret_sec, long *ret_nsec);

#endif
