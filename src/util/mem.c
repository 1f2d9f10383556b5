/* mem — see src/util/mem.h. */
#include "util/mem.h"

#include <stdlib.h> /* defines __GLIBC__ under glibc: test it after this */

#ifdef __GLIBC__
#include <malloc.h>
#endif

void mem_give_back(void)
{
#ifdef __GLIBC__
        /* Whole free pages, inside the heap as well as at its top. */
        (void)malloc_trim(0);
#endif
}

void mem_tune(void)
{
#ifdef __GLIBC__
        /* Setting them fixes them: glibc's dynamic thresholds stop. */
        (void)mallopt(M_MMAP_THRESHOLD, MEM_MAP_THRESHOLD);
        (void)mallopt(M_TRIM_THRESHOLD, MEM_TRIM_THRESHOLD);
        (void)mallopt(M_TOP_PAD, MEM_TOP_PAD);
#endif
}
