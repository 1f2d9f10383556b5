/* str — heap string helpers (see include/podmux/str.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "podmux/str.h"

int str_set(char **slot, const char *v)
{
        char *n = NULL;

        if (v && !(n = strdup(v)))
                return -ENOMEM;
        free(*slot);
        *slot = n;
        return 0;
}
