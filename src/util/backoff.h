/*
 * backoff — the growing pause between the retries of one failing thing
 * (a poll, a list, a merge, a registration, a reconnection).
 *
 * The pause starts at base, doubles at each failure and stops at cap (a
 * base above cap gives cap).  backoff_reset() after a success starts it
 * over; with reset_after set, so does a failure more than reset_after
 * after the previous one (client-go's backoff manager forgets an old
 * failure that way).  With jitter set, what is waited is the pause plus
 * a random part in [0, pause * jitter): client-go's "d + rand * d" is
 * jitter 1.  Each user states its own parameters in its header.
 *
 * Time is passed in (monotonic µs), and so is the randomness, so a test
 * drives it by hand.  Owns: nothing.  Never: allocates, fails, reads a
 * clock.  Cost: O(1).
 */
#ifndef PODMUX_BACKOFF_H
#define PODMUX_BACKOFF_H

#include <stdint.h>

struct backoff {
        /* The parameters (set them, then leave them). */
        uint64_t base;        /* the first pause */
        uint64_t cap;         /* the pause never grows beyond this */
        uint64_t reset_after; /* 0: only backoff_reset() starts over */
        double jitter;        /* 0: none; else the random part's scale */
        uint64_t (*rand)(uint64_t n); /* [0, n); needed when jitter is set */
        /* The state. */
        uint64_t delay; /* the last pause, jitter excluded; 0: none since reset */
        uint64_t at;    /* the now of the last backoff_next() */
};

/* A backoff from base to cap with no jitter and no idle reset. */
#define BACKOFF_INIT(base_, cap_) ((struct backoff){.base = (base_), .cap = (cap_)})

/* A failure at now: grows the pause and returns how long to wait (the
 * pause plus any jitter).  now matters only to reset_after and
 * backoff_waiting(); a user with neither may pass 0. */
uint64_t backoff_next(struct backoff *b, uint64_t now);
/* A success: the next failure waits base again. */
void backoff_reset(struct backoff *b);
/* Whether the last pause is still running at now: a retry is allowed only
 * once strictly more than it has passed since the failure. */
int backoff_waiting(const struct backoff *b, uint64_t now);

#endif
