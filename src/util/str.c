/* str — string helpers (see src/util/str.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* the GNU strerror_r */
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/str.h"

int str_set(char **slot, const char *v)
{
        char *n = NULL;

        if (v && !(n = strdup(v)))
                return -ENOMEM;
        free(*slot);
        *slot = n;
        return 0;
}

const char *errno_str(int err, char *buf, size_t size)
{
        if (err < 0)
                err = -err;
#if defined(_GNU_SOURCE)
        /* GNU strerror_r may return a static string instead of filling buf. */
        return strerror_r(err, buf, size);
#else
        if (strerror_r(err, buf, size) != 0)
                snprintf(buf, size, "error %d", err);
        return buf;
#endif
}
