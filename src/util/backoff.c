/* backoff — see src/util/backoff.h. */
#include "util/backoff.h"

uint64_t backoff_next(struct backoff *b, uint64_t now)
{
        uint64_t wait;

        if (!b->delay || (b->reset_after && now - b->at > b->reset_after))
                b->delay = b->base;
        else
                b->delay = b->delay > b->cap / 2 ? b->cap : b->delay * 2; /* no overflow */
        if (b->delay > b->cap)
                b->delay = b->cap;
        b->at = now;
        wait = b->delay;
        if (b->jitter > 0 && b->rand)
                wait += b->rand((uint64_t)((double)b->delay * b->jitter));
        return wait;
}

void backoff_reset(struct backoff *b)
{
        b->delay = 0;
}

int backoff_waiting(const struct backoff *b, uint64_t now)
{
        return b->delay && now - b->at <= b->delay;
}
