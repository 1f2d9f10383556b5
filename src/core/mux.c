/*
 * mux — channels per source feeding the merger (see src/core/mux.h).
 *
 * Each channel has its own FIFO; every queued record carries a global
 * ticket so a drain can hand records over in exactly the order they were
 * sent, across channels.  A drain is scheduled once per burst of sends.
 *
 * Past MUX_FOLD_BACKLOG waiting records, a SET or delta sent while the
 * channel's last record is a SET or delta still waiting is folded into
 * that record (pod_update_fold) instead of queued behind it: the rest of
 * a burst costs one merge, and a channel whose source speaks in SETs and
 * deltas never holds more than MUX_FOLD_BACKLOG records, however long
 * the burst.  Below that, every record is merged as it was sent, so a
 * consumer sees each change of ordinary traffic.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/mux.h"
#include "util/backoff.h"

struct mux_entry {
        uint64_t ticket;
        uint64_t through; /* the channel's number of the last record in it */
        struct pod_update *u;
        bool merging; /* being handed to the merger: not to be folded into */
        struct mux_entry *next;
};

struct mux_channel {
        struct mux *mux;
        char *name;
        struct mux_entry *head, *tail;
        size_t len;    /* records waiting */
        uint64_t sent; /* records taken, folded ones included */
        mux_merged_fn merged;
        void *merged_data;
};

struct mux {
        struct loop *loop;
        mux_merge_fn merge;
        void *data;
        /* Armed when a merge ran out of memory (the record waits at the
         * head of its channel) or a drain could not be deferred. */
        struct loop_timer *retry_timer;
        struct backoff retry; /* mux.h */
        struct mux_channel **channels; /* sorted by name */
        const char **names;            /* parallel to channels */
        size_t n;
        uint64_t next_ticket;
        int drain_scheduled;
        size_t fold_after; /* MUX_FOLD_BACKLOG, or what a test set */
};

static void drain_deferred(void *data);
static void retry_fired(struct loop_timer *t, void *data);

int mux_new(struct loop *loop, mux_merge_fn merge, void *data,
            struct mux **ret_mux)
{
        struct mux *m = calloc(1, sizeof(*m));
        int r;

        if (!m)
                return -ENOMEM;
        m->loop = loop;
        m->merge = merge;
        m->data = data;
        m->fold_after = MUX_FOLD_BACKLOG;
        m->retry = BACKOFF_INIT(MUX_RETRY_MIN_USEC, MUX_RETRY_MAX_USEC);
        if (loop && (r = loop_timer_new(loop, retry_fired, m, &m->retry_timer)) < 0) {
                free(m);
                return r;
        }
        *ret_mux = m;
        return 0;
}

static void channel_free(struct mux_channel *ch)
{
        while (ch->head) {
                struct mux_entry *e = ch->head;

                ch->head = e->next;
                pod_update_free(e->u);
                free(e);
        }
        free(ch->name);
        free(ch);
}

void mux_free(struct mux *m)
{
        if (!m)
                return;
        if (m->drain_scheduled)
                loop_defer_cancel(m->loop, drain_deferred, m);
        loop_timer_free(m->retry_timer);
        for (size_t i = 0; i < m->n; i++)
                channel_free(m->channels[i]);
        free(m->channels);
        free(m->names);
        free(m);
}

int mux_channel(struct mux *m, const char *source, struct mux_channel **ret_ch)
{
        struct mux_channel *ch, **nc;
        const char **nn;
        size_t i;

        if (!source || !source[0])
                return -EINVAL;
        for (i = 0; i < m->n; i++) {
                int c = strcmp(m->channels[i]->name, source);

                if (c == 0) {
                        *ret_ch = m->channels[i];
                        return 0;
                }
                if (c > 0)
                        break;
        }
        ch = calloc(1, sizeof(*ch));
        if (!ch)
                return -ENOMEM;
        ch->mux = m;
        ch->name = strdup(source);
        nc = realloc(m->channels, (m->n + 1) * sizeof(*nc));
        if (nc)
                m->channels = nc;
        nn = realloc(m->names, (m->n + 1) * sizeof(*nn));
        if (nn)
                m->names = nn;
        if (!ch->name || !nc || !nn) {
                channel_free(ch);
                return -ENOMEM;
        }
        memmove(&m->channels[i + 1], &m->channels[i], (m->n - i) * sizeof(*nc));
        m->channels[i] = ch;
        m->n++;
        for (size_t j = 0; j < m->n; j++)
                m->names[j] = m->channels[j]->name;
        *ret_ch = ch;
        return 0;
}

const char *mux_channel_name(const struct mux_channel *ch)
{
        return ch->name;
}

void mux_channel_on_merged(struct mux_channel *ch, mux_merged_fn fn, void *data)
{
        ch->merged = fn;
        ch->merged_data = data;
}

uint64_t mux_channel_sent(const struct mux_channel *ch)
{
        return ch->sent;
}

static void drain_deferred(void *data)
{
        struct mux *m = data;

        m->drain_scheduled = 0;
        mux_drain(m);
}

static void retry_fired(struct loop_timer *t, void *data)
{
        (void)t;
        mux_drain(data);
}

/* Folds u into the channel's last record when both are foldable and that
 * record is still waiting.  1 folded (u freed), 0 not foldable here,
 * -ENOMEM (nothing changed; u kept). */
static int fold_into_tail(struct mux_channel *ch, struct pod_update *u)
{
        struct mux_entry *t = ch->tail;
        int r;

        if (ch->len < ch->mux->fold_after || !t || t->merging || !pod_update_foldable(t->u) ||
            !pod_update_foldable(u))
                return 0;
        if (!u->delta) {
                /* A whole state replaces what waits: swap, no copy. */
                pod_update_free(t->u);
                t->u = u;
                t->through = ++ch->sent;
                return 1;
        }
        r = pod_update_fold(t->u, u);
        if (r < 0)
                return r;
        pod_update_free(u);
        t->through = ++ch->sent;
        return 1;
}

int mux_channel_send(struct mux_channel *ch, struct pod_update *u)
{
        struct mux *m = ch->mux;
        struct mux_entry *e;

        /* Out of memory folding: queue it on its own instead. */
        if (fold_into_tail(ch, u) == 1)
                return 0;
        e = malloc(sizeof(*e));
        if (!e) {
                pod_update_free(u);
                return -ENOMEM;
        }
        e->ticket = m->next_ticket++;
        e->through = ++ch->sent;
        e->u = u;
        e->merging = false;
        e->next = NULL;
        if (ch->tail)
                ch->tail->next = e;
        else
                ch->head = e;
        ch->tail = e;
        ch->len++;
        if (m->loop && !m->drain_scheduled && !loop_timer_armed(m->retry_timer)) {
                if (loop_defer(m->loop, drain_deferred, m) == 0)
                        m->drain_scheduled = 1;
                else
                        loop_timer_arm(m->retry_timer, 0); /* cannot fail */
        }
        return 0;
}

size_t mux_drain(struct mux *m)
{
        size_t done = 0;

        if (m->retry_timer)
                loop_timer_stop(m->retry_timer);
        for (;;) {
                struct mux_channel *best = NULL;
                struct mux_entry *e;
                uint64_t through;
                int r;

                for (size_t i = 0; i < m->n; i++) {
                        struct mux_channel *ch = m->channels[i];

                        if (ch->head && (!best || ch->head->ticket < best->head->ticket))
                                best = ch;
                }
                if (!best)
                        return done;
                e = best->head;
                /* A folded record is merged in the order a SET of the
                 * source would have (O(n log n) for its n pods); one
                 * that names a pod twice (a manifest URL's list) keeps
                 * their order, so the first in the list wins. */
                r = pod_update_sort_listed(e->u);
                if (r == 0) {
                        /* The merge may send more records (tests do); they
                         * queue behind this one and are handed over in
                         * this same drain. */
                        e->merging = true;
                        r = m->merge(m->data, best->name, &e->u);
                        e->merging = false;
                }
                if (r == -ENOMEM && e->u) {
                        /* Nothing of it was applied: it stays first in line
                         * (FIFO holds; later changes may fold into it) and
                         * is merged again after a pause. */
                        uint64_t pause = backoff_next(&m->retry, 0);

                        if (m->retry_timer)
                                loop_timer_arm(m->retry_timer, pause);
                        return done;
                }
                backoff_reset(&m->retry);
                best->head = e->next;
                if (!best->head)
                        best->tail = NULL;
                best->len--;
                through = e->through;
                pod_update_free(e->u);
                free(e);
                done++;
                if (best->merged)
                        best->merged(best->merged_data, through);
        }
}

void mux_fold_after(struct mux *m, size_t n)
{
        m->fold_after = n;
}

const char *const *mux_sources(const struct mux *m, size_t *ret_n)
{
        *ret_n = m->n;
        return m->names;
}
