/* grow — see src/util/grow.h. */
#include "util/grow.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

int grow(void **p, size_t *cap, size_t need, size_t elem, size_t first)
{
        size_t c = *cap ? *cap : first ? first : 1;
        void *v;

        if (need <= *cap)
                return 0;
        while (c < need)
                c = c > SIZE_MAX / 2 ? need : c * 2;
        /* Doubling past what can be allocated: exactly need, if that fits. */
        if (elem && c > SIZE_MAX / elem)
                c = need;
        if (elem && c > SIZE_MAX / elem)
                return -ENOMEM;
        v = realloc(*p, c * elem);
        if (!v)
                return -ENOMEM;
        *p = v;
        *cap = c;
        return 0;
}
