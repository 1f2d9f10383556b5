/* Unit tests: the allocator's tuning and giving memory back (util/mem).
 * Not linked with failalloc: these look at glibc's own allocator.  Under
 * AddressSanitizer, which owns malloc, there is nothing to check. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "util/mem.h"
#include "unit.h"

#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
static long rss_pages(void)
{
        long size = 0, rss = 0;
        FILE *f = fopen("/proc/self/statm", "r");

        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(fscanf(f, "%ld %ld", &size, &rss), 2);
        fclose(f);
        return rss;
}
#endif

/* mem_tune(): a block of the map threshold is mapped apart from the heap,
 * also after a larger one was freed (which would otherwise raise glibc's
 * threshold to that one's size);
 * mem_give_back(): free whole pages inside the heap (below blocks still
 * in use) leave the resident set. */
START_TEST(test_memory_goes_back)
{
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
        enum { N = 1024, SIZE = 16 * 1024 };
        char *big[N], *small[N];
        long page = sysconf(_SC_PAGESIZE), before, after;
        struct mallinfo2 m0, m1;
        char *volatile mapped; /* volatile: the allocations are kept */

        mem_tune();
        mapped = malloc(4 * 1024 * 1024);
        ck_assert_ptr_nonnull(mapped);
        free(mapped);
        m0 = mallinfo2();
        mapped = malloc(MEM_MAP_THRESHOLD);
        ck_assert_ptr_nonnull(mapped);
        m1 = mallinfo2();
        ck_assert_uint_eq(m1.hblks, m0.hblks + 1);
        free(mapped);
        for (int i = 0; i < N; i++) {
                big[i] = malloc(SIZE);
                small[i] = malloc(16); /* keeps the heap from shrinking */
                ck_assert(big[i] && small[i]);
                memset(big[i], 1, SIZE);
        }
        for (int i = 0; i < N; i++)
                free(big[i]);
        before = rss_pages();
        mem_give_back();
        after = rss_pages();
        /* Each hole of 16 KiB holds at least 2 whole pages. */
        ck_assert_int_ge((before - after) * page, (long)N * 2 * page);
        for (int i = 0; i < N; i++)
                free(small[i]);
#endif
}
END_TEST

/* The buffers libyaml allocates for each manifest it parses (16 KiB of
 * raw input, 48 KiB decoded) sit at the heap's top: freed, they stay
 * there for the next parse rather than go back to the system and come
 * again (two brk() calls a file drop, scripts/bench drop_c).  It runs
 * first, while the heap has no free holes that could hold them. */
START_TEST(test_parse_buffers_stay_at_the_top)
{
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
        struct mallinfo2 held, freed;
        char *volatile raw, *volatile decoded; /* volatile: not optimised out */

        mem_tune();
        mem_give_back(); /* the top as small as it goes */
        raw = malloc(16 * 1024);
        decoded = malloc(48 * 1024);
        ck_assert(raw && decoded);
        held = mallinfo2();
        free(decoded);
        free(raw);
        freed = mallinfo2();
        ck_assert_uint_eq(freed.arena, held.arena);
#endif
}
END_TEST

UNIT_MAIN(test_parse_buffers_stay_at_the_top, test_memory_goes_back)
