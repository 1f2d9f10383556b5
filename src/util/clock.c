/*
 * clock — the clocks and RFC 3339 text (see src/util/clock.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* timegm() */
#endif
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "util/clock.h"

static uint64_t clock_usec(clockid_t id)
{
        struct timespec ts;

        clock_gettime(id, &ts);
        return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t mono_usec(void)
{
        return clock_usec(CLOCK_MONOTONIC);
}

uint64_t wall_usec(void)
{
        return clock_usec(CLOCK_REALTIME);
}

uint64_t clock_jitter(uint64_t n)
{
        uint64_t r = 0;

        if (n == 0)
                return 0;
        /* Without entropy yet (early boot), a weaker spread still spreads. */
        if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
                r = mono_usec() * 6364136223846793005ull + 1442695040888963407ull;
        return r % n;
}

char *clock_rfc3339(uint64_t wall, enum clock_precision precision, char out[CLOCK_RFC3339_MAX])
{
        time_t secs = (time_t)(wall / 1000000u);
        unsigned long usec = (unsigned long)(wall % 1000000u);
        char frac[16] = "";
        struct tm tm;

        if (!gmtime_r(&secs, &tm))
                memset(&tm, 0, sizeof(tm));
        if (precision == CLOCK_MICRO) {
                snprintf(frac, sizeof(frac), ".%06lu", usec);
        } else if (precision == CLOCK_NANO && usec) {
                size_t n;

                snprintf(frac, sizeof(frac), ".%09lu", usec * 1000u);
                n = strlen(frac);
                while (frac[n - 1] == '0')
                        frac[--n] = '\0';
        }
        snprintf(out, CLOCK_RFC3339_MAX, "%04d-%02d-%02dT%02d:%02d:%02d%sZ", tm.tm_year + 1900, tm.tm_mon + 1,
                 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
        return out;
}

int clock_parse_rfc3339(const char *s, int64_t *ret_sec, long *ret_nsec)
{
        struct tm tm;
        int y, mo, d, h, mi, sec, n = 0;
        long nsec = 0;
        int64_t off = 0;
        const char *p;

        if (sscanf(s, "%4d-%2d-%2d%*1[Tt ]%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi,
                   &sec, &n) != 6 || n == 0)
                return -EINVAL;
        p = s + n;
        if (*p == '.') {
                long scale = 100000000;

                p++;
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                while (*p >= '0' && *p <= '9') {
                        nsec += (*p - '0') * scale;
                        scale /= 10;
                        p++;
                }
        }
        if (*p == 'Z' || *p == 'z') {
                p++;
        } else if (*p == '+' || *p == '-') {
                int oh, om;

                if (sscanf(p + 1, "%2d:%2d", &oh, &om) != 2)
                        return -EINVAL;
                off = (int64_t)(oh * 3600 + om * 60) * (*p == '-' ? -1 : 1);
                p += 6;
        } else {
                return -EINVAL;
        }
        if (*p)
                return -EINVAL;
        memset(&tm, 0, sizeof(tm));
        tm.tm_year = y - 1900;
        tm.tm_mon = mo - 1;
        tm.tm_mday = d;
        tm.tm_hour = h;
        tm.tm_min = mi;
        tm.tm_sec = sec;
        *ret_sec = (int64_t)timegm(&tm) - off;
        *ret_nsec = nsec;
        return 0;
}
