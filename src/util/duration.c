/* duration — Go-style duration strings (see src/util/duration.h). */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "util/duration.h"

struct unit {
        const char *name;
        uint64_t ns;
};

/* Longest names first so "ms" is not read as "m". */
static const struct unit units[] = {
        {"ns", 1ULL},
        {"us", 1000ULL},
        {"\xc2\xb5s", 1000ULL}, /* U+00B5 micro sign */
        {"\xce\xbcs", 1000ULL}, /* U+03BC Greek mu */
        {"ms", 1000000ULL},
        {"s", 1000000000ULL},
        {"m", 60ULL * 1000000000ULL},
        {"h", 3600ULL * 1000000000ULL},
};

int duration_parse(const char *s, uint64_t *ret_usec)
{
        unsigned __int128 total = 0;
        const char *p = s;

        if (!s || !*s)
                return -EINVAL;
        if (*p == '-')
                return -ERANGE;
        if (*p == '+')
                p++;
        if (strcmp(p, "0") == 0) {
                *ret_usec = 0;
                return 0;
        }
        if (!*p)
                return -EINVAL;
        while (*p) {
                unsigned __int128 whole = 0, frac = 0, scale = 1;
                int digits = 0;
                const struct unit *u = NULL;

                while (*p >= '0' && *p <= '9') {
                        whole = whole * 10 + (unsigned)(*p++ - '0');
                        digits++;
                        if (whole > UINT64_MAX)
                                return -ERANGE;
                }
                if (*p == '.') {
                        p++;
                        while (*p >= '0' && *p <= '9') {
                                /* Digits past nanosecond precision of an
                                 * hour do not matter; stop scaling then. */
                                if (scale < 1000000000000000000ULL) {
                                        frac = frac * 10 + (unsigned)(*p - '0');
                                        scale *= 10;
                                }
                                p++;
                                digits++;
                        }
                }
                if (!digits)
                        return -EINVAL;
                for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
                        size_t n = strlen(units[i].name);

                        if (strncmp(p, units[i].name, n) == 0 &&
                            !(n == 1 && units[i].name[0] == 'm' && p[1] == 's')) {
                                u = &units[i];
                                p += n;
                                break;
                        }
                }
                if (!u)
                        return -EINVAL;
                total += whole * u->ns + frac * u->ns / scale;
                if (total > (unsigned __int128)INT64_MAX)
                        return -ERANGE;
        }
        *ret_usec = (uint64_t)(total / 1000u);
        return 0;
}
