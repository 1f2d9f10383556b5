/*
 * retry_after — see src/util/retry_after.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <strings.h>

#include "util/retry_after.h"

#define USEC_PER_SEC 1000000u

bool retry_after_header(struct retry_after *ra, const char *line, size_t len)
{
        char *end;
        long v;

        if (len <= 12 || strncasecmp(line, "retry-after:", 12) != 0)
                return false;
        errno = 0;
        v = strtol(line + 12, &end, 10);
        /* Only the integer form counts (client-go); no digits is none
         * (checked before the blanks after them are skipped). */
        if (end == line + 12)
                return false;
        while (*end == ' ' || *end == '\t')
                end++;
        if (!(*end == '\r' || *end == '\n' || !*end) || v < 0)
                return false;
        if (errno == ERANGE || (long long)v > RETRY_AFTER_MAX_SECONDS)
                return false;
        ra->seconds = v;
        return true;
}

/* The answers that may ask for a pause: client-go looks for Retry-After
 * on these only. */
static bool asks_pause(const struct retry_after *ra, long status)
{
        return (status == 429 || status >= 500) && ra->seconds >= 0;
}

bool retry_after_as_if(struct retry_after *ra, long seconds, uint64_t *ret_usec)
{
        if (ra->retries >= RETRY_AFTER_MAX_RETRIES)
                return false;
        ra->retries++;
        *ret_usec = (uint64_t)seconds * USEC_PER_SEC;
        return true;
}

bool retry_after_retry(struct retry_after *ra, long status, uint64_t *ret_usec)
{
        return asks_pause(ra, status) && retry_after_as_if(ra, ra->seconds, ret_usec);
}

uint64_t retry_after_left(const struct retry_after *ra, long status)
{
        return asks_pause(ra, status) ? (uint64_t)ra->seconds * USEC_PER_SEC : 0;
}
