/*
 * search — binary search (see src/util/search.h).
 */
#include "util/search.h"

size_t search_first(size_t n, search_before_fn before, const void *ctx)
{
        size_t lo = 0, hi = n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (before(ctx, mid))
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}
