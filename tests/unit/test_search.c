/* Unit tests: binary search (util/search). */
#include <stdbool.h>
#include <stddef.h>

#include "util/search.h"
#include "unit.h"

struct ints {
        const int *v;
        int key;
        int calls;
};

static bool int_before(const void *ctx, size_t i)
{
        struct ints *s = (struct ints *)ctx;

        s->calls++;
        return s->v[i] < s->key;
}

/* The first position not below the key, for every key around every
 * element of sorted arrays with repeats, of every length up to 40,
 * checked against a linear scan; and in O(log n) calls. */
START_TEST(test_first_position_not_before_the_key)
{
        int v[40];

        for (size_t n = 0; n <= 40; n++) {
                for (size_t i = 0; i < n; i++)
                        v[i] = (int)(i / 3) * 2; /* 0 0 0 2 2 2 4 ... */
                for (int key = -1; key <= (int)n; key++) {
                        struct ints s = {v, key, 0};
                        size_t want = 0;

                        while (want < n && v[want] < key)
                                want++;
                        ck_assert_uint_eq(search_first(n, int_before, &s), want);
                        ck_assert_int_le(s.calls, 7); /* ceil(log2(41)) + 1 */
                }
        }
}
END_TEST

UNIT_MAIN(test_first_position_not_before_the_key)
