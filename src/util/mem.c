/* mem — see include/podmux/mem.h. */
#include "podmux/mem.h"

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
