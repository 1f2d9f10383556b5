/*
 * event_correlator — client-go's event aggregation, counting and spam
 * filter (see src/events/event_correlator.h and doc/events.md).
 *
 * One event goes through three caches, in client-go's order:
 *   1. aggregation, keyed by everything but the message: the group
 *      remembers the distinct messages (their digests) seen within
 *      EVENT_AGGREGATE_WINDOW_USEC of the previous one; once there are
 *      EVENT_AGGREGATE_MAX, the event becomes the group's combined one
 *      (EVENT_AGGREGATE_PREFIX + its message) and the oldest message is
 *      forgotten (client-go drops "any": the oldest is our choice, so
 *      that it is deterministic);
 *   2. observation, keyed by the whole event (or by the group for a
 *      combined one): a key seen before gives the earlier event's name,
 *      first time and count + 1, to be written as a PATCH;
 *   3. the spam filter, keyed by the object: a token bucket of
 *      EVENT_SPAM_BURST refilled one per EVENT_SPAM_PERIOD_USEC.  A
 *      throttled event was still observed (its count goes on), as in
 *      client-go.
 *
 * All or nothing: every allocation (the new cache entries, room in the
 * maps, the output text) is made before anything is changed, so -ENOMEM
 * leaves the caches as they were.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "util/clock.h"
#include "events/event_correlator.h"
#include "util/digest.h"
#include "util/strmap.h"

/* The longest name an Event may have (a DNS subdomain). */
#define EVENT_NAME_MAX 253

/* ---- the token bucket ----------------------------------------------------------- */

void event_bucket_init(struct event_bucket *b, unsigned burst, uint64_t period, uint64_t now)
{
        b->credit = (uint64_t)burst * period;
        b->at = now;
}

uint64_t event_bucket_take(struct event_bucket *b, unsigned burst, uint64_t period, uint64_t now)
{
        uint64_t cap = (uint64_t)burst * period;

        if (period == 0)
                return 0;
        if (now > b->at) {
                b->credit = now - b->at >= cap - b->credit ? cap : b->credit + (now - b->at);
                b->at = now;
        }
        if (b->credit < period)
                return period - b->credit;
        b->credit -= period;
        return 0;
}

/* ---- a bounded cache, least recently used dropped first ---------------------------- */

/* The first member of every cached record. */
struct lru_entry {
        char key[33]; /* a digest in hex; the map borrows it */
        struct lru_entry *prev, *next;
};

struct lru {
        struct strmap *map;
        struct lru_entry head; /* head.next is the most recent */
        size_t n, max;
};

static int lru_init(struct lru *l, size_t max)
{
        l->map = strmap_new_borrowed();
        l->head.prev = l->head.next = &l->head;
        l->n = 0;
        l->max = max;
        return l->map ? 0 : -ENOMEM;
}

static void lru_unlink(struct lru_entry *e)
{
        e->prev->next = e->next;
        e->next->prev = e->prev;
}

static void lru_front(struct lru *l, struct lru_entry *e)
{
        e->next = l->head.next;
        e->prev = &l->head;
        l->head.next->prev = e;
        l->head.next = e;
}

static void lru_clear(struct lru *l)
{
        if (!l->map)
                return;
        while (l->head.next != &l->head) {
                struct lru_entry *e = l->head.next;

                lru_unlink(e);
                free(e);
        }
        strmap_free(l->map, NULL);
        l->map = NULL;
}

/* Marks e the most recent. */
static void lru_touch(struct lru *l, struct lru_entry *e)
{
        lru_unlink(e);
        lru_front(l, e);
}

/* Adds e (its key set), after strmap_reserve(l->map, 1) succeeded, so
 * this cannot fail; the least recent entry goes past the bound. */
static void lru_insert(struct lru *l, struct lru_entry *e)
{
        (void)strmap_put(l->map, e->key, e, NULL);
        lru_front(l, e);
        if (++l->n > l->max) {
                struct lru_entry *old = l->head.prev;

                strmap_remove(l->map, old->key);
                lru_unlink(old);
                free(old);
                l->n--;
        }
}

/* ---- records ------------------------------------------------------------------------ */

struct agg_record {
        struct lru_entry e;
        uint64_t last; /* monotonic time of the group's last event */
        unsigned n;    /* distinct messages in local, oldest first */
        uint8_t local[EVENT_AGGREGATE_MAX][16];
};

struct log_record {
        struct lru_entry e;
        unsigned count;
        uint64_t first; /* wall time */
        char name[EVENT_NAME_MAX + 1];
};

struct spam_record {
        struct lru_entry e;
        struct event_bucket b;
};

struct event_correlator {
        char *component, *host;
        unsigned spam_burst;
        uint64_t spam_period;
        struct lru aggs, logs, spams;
        uint64_t last_nanos; /* of the last name made: names never repeat */
};

int event_correlator_new(const struct event_correlator_config *cfg, struct event_correlator **ret_c)
{
        struct event_correlator *c = calloc(1, sizeof(*c));
        size_t max = cfg->cache_entries ? cfg->cache_entries : EVENT_CACHE_ENTRIES;

        if (!c)
                return -ENOMEM;
        c->component = strdup(cfg->component ? cfg->component : "");
        c->host = strdup(cfg->host ? cfg->host : "");
        c->spam_burst = cfg->spam_burst ? cfg->spam_burst : EVENT_SPAM_BURST;
        c->spam_period = cfg->spam_period_usec ? cfg->spam_period_usec : EVENT_SPAM_PERIOD_USEC;
        if (!c->component || !c->host || lru_init(&c->aggs, max) < 0 || lru_init(&c->logs, max) < 0 ||
            lru_init(&c->spams, max) < 0) {
                event_correlator_free(c);
                return -ENOMEM;
        }
        *ret_c = c;
        return 0;
}

void event_correlator_free(struct event_correlator *c)
{
        if (!c)
                return;
        lru_clear(&c->aggs);
        lru_clear(&c->logs);
        lru_clear(&c->spams);
        free(c->component);
        free(c->host);
        free(c);
}

void event_out_clear(struct event_out *o)
{
        if (!o)
                return;
        free(o->namespace);
        free(o->name);
        free(o->post);
        free(o->patch);
        memset(o, 0, sizeof(*o));
}

/* ---- keys and names ------------------------------------------------------------------- */

static const char *str_or_empty(const char *s)
{
        return s ? s : "";
}

/* The digest of a domain letter and n strings, each ended by its NUL, so
 * that no two lists of strings run together (client-go joins them with
 * nothing between). */
static void digest(uint8_t out[16], char domain, const char *const *parts, size_t n)
{
        struct fnv128 h;

        fnv128_init(&h);
        fnv128_update(&h, &domain, 1);
        for (size_t i = 0; i < n; i++) {
                const char *s = str_or_empty(parts[i]);

                fnv128_update(&h, s, strlen(s) + 1);
        }
        fnv128_final(&h, out);
}

static void key_hex(char out[33], char domain, const char *const *parts, size_t n)
{
        uint8_t d[16];

        digest(d, domain, parts, n);
        fnv128_hex(d, out);
}

/* The bytes of s kept in a message: at most EVENT_MESSAGE_MAX, cut where
 * a character starts. */
static size_t message_len(const char *s)
{
        size_t n = strlen(s);

        if (n <= EVENT_MESSAGE_MAX)
                return n;
        n = EVENT_MESSAGE_MAX;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
                n--;
        return n;
}

/* A DNS subdomain (RFC 1123): lower-case letters, digits, '-' and '.',
 * starting and ending with a letter or digit. */
static bool dns_subdomain(const char *s)
{
        size_t n = strlen(s);

        if (n == 0 || n > EVENT_NAME_MAX)
                return false;
        for (size_t i = 0; i < n; i++) {
                char ch = s[i];
                bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');

                if (!alnum && ((ch != '-' && ch != '.') || i == 0 || i == n - 1))
                        return false;
        }
        return true;
}

/* client-go's event name: the object's name, '.', the time in
 * nanoseconds in hex; when that is no valid name (a node name with upper
 * case, say), the digest of the object's name stands in for it. */
static void make_name(char out[EVENT_NAME_MAX + 1], const char *ref_name, uint64_t nanos)
{
        int n = snprintf(out, EVENT_NAME_MAX + 1, "%s.%" PRIx64, ref_name, nanos);

        if (n < 0 || n > EVENT_NAME_MAX || !dns_subdomain(out)) {
                char hex[33];

                key_hex(hex, 'n', &ref_name, 1);
                (void)snprintf(out, EVENT_NAME_MAX + 1, "%s.%" PRIx64, hex, nanos);
        }
}

/* ---- rendering ----------------------------------------------------------------------- */

static int put_member(struct buf *b, const char *sep, const char *name, const char *v)
{
        int r;

        if (!v || !v[0])
                return 0;
        if ((r = buf_printf(b, "%s\"%s\":", sep, name)) < 0)
                return r;
        return buf_json_string(b, v, strlen(v));
}

static int put_ref(struct buf *b, const struct event_ref *o)
{
        int r = buf_puts(b, "\"involvedObject\":{");

        /* kind is never empty (event_correlate checks), so it leads. */
        if (r >= 0)
                r = put_member(b, "", "kind", o->kind);
        if (r >= 0)
                r = put_member(b, ",", "namespace", o->namespace);
        if (r >= 0)
                r = put_member(b, ",", "name", o->name);
        if (r >= 0)
                r = put_member(b, ",", "uid", o->uid);
        if (r >= 0)
                r = put_member(b, ",", "apiVersion", o->api_version);
        return r < 0 ? r : buf_putc(b, '}');
}

/* The decision about one event, before anything is committed. */
struct plan {
        const struct event_in *ev;
        const char *ns;
        struct buf message;
        char name[EVENT_NAME_MAX + 1];
        unsigned count;
        uint64_t first, last;
};

/* The Event as client-go's recorder fills it, as JSON. */
static int render_post(const struct event_correlator *c, const struct plan *p, struct buf *b)
{
        int r = buf_puts(b, "{\"kind\":\"Event\",\"apiVersion\":\"v1\",\"metadata\":{");

        if (r >= 0)
                r = put_member(b, "", "name", p->name);
        if (r >= 0)
                r = put_member(b, ",", "namespace", p->ns);
        if (r >= 0)
                r = buf_puts(b, "},");
        if (r >= 0)
                r = put_ref(b, &p->ev->obj);
        if (r >= 0)
                r = put_member(b, ",", "reason", p->ev->reason);
        if (r >= 0)
                r = buf_puts(b, ",\"message\":");
        if (r >= 0)
                r = buf_json_string(b, p->message.data, p->message.len);
        if (r >= 0)
                r = buf_puts(b, ",\"source\":{");
        if (r >= 0)
                r = put_member(b, "", "component", c->component);
        if (r >= 0)
                r = put_member(b, c->component[0] ? "," : "", "host", c->host);
        if (r >= 0 && (r = buf_puts(b, "},\"firstTimestamp\":")) >= 0 && (r = buf_json_time(b, p->first)) >= 0 &&
            (r = buf_puts(b, ",\"lastTimestamp\":")) >= 0 && (r = buf_json_time(b, p->last)) >= 0)
                r = buf_printf(b, ",\"count\":%u", p->count);
        if (r >= 0)
                r = put_member(b, ",", "type", p->ev->type);
        if (r >= 0)
                r = buf_puts(b, ",\"eventTime\":null,\"reportingComponent\":");
        if (r >= 0)
                r = buf_json_string(b, c->component, strlen(c->component));
        if (r >= 0)
                r = buf_puts(b, ",\"reportingInstance\":");
        if (r >= 0)
                r = buf_json_string(b, c->host, strlen(c->host));
        return r < 0 ? r : buf_putc(b, '}');
}

/* What client-go's two-way strategic merge patch holds for a repeat: the
 * fields that differ from the event with no count, time or message. */
static int render_patch(const struct plan *p, struct buf *b)
{
        int r = buf_printf(b, "{\"count\":%u,\"lastTimestamp\":", p->count);

        if (r >= 0)
                r = buf_json_time(b, p->last);
        if (r >= 0)
                r = buf_puts(b, ",\"message\":");
        if (r >= 0)
                r = buf_json_string(b, p->message.data, p->message.len);
        return r < 0 ? r : buf_putc(b, '}');
}

/* Fills o from the plan.  0 or -ENOMEM (o cleared). */
static int render_out(const struct event_correlator *c, const struct plan *p, struct event_out *o)
{
        struct buf post = BUF_INIT, patch = BUF_INIT;

        o->namespace = strdup(p->ns);
        o->name = strdup(p->name);
        if (!o->namespace || !o->name || render_post(c, p, &post) < 0 ||
            (p->count > 1 && render_patch(p, &patch) < 0) || !(o->post = buf_steal(&post, NULL)) ||
            (p->count > 1 && !(o->patch = buf_steal(&patch, NULL)))) {
                buf_free(&post);
                buf_free(&patch);
                event_out_clear(o);
                return -ENOMEM;
        }
        o->count = p->count;
        return 0;
}

/* ---- correlation -------------------------------------------------------------------- */

/* The keys of one event. */
struct keys {
        char spam[33], agg[33], event[33];
        uint8_t local[16];
};

static void event_keys(const struct event_correlator *c, const struct event_in *ev, const struct buf *message,
                       struct keys *k)
{
        const struct event_ref *o = &ev->obj;
        const char *spam[] = {c->component, c->host, o->kind, o->namespace, o->name, o->uid, o->api_version};
        const char *agg[] = {c->component,   c->host,  o->kind,    o->namespace, o->name, o->uid,
                             o->api_version, ev->type, ev->reason, c->component, c->host};
        /* fieldPath is always empty here. */
        const char *full[] = {c->component, c->host,        o->kind,  o->namespace, o->name,      "",
                              o->uid,       o->api_version, ev->type, ev->reason,   message->data};
        const char *msg = message->data;

        key_hex(k->spam, 's', spam, sizeof(spam) / sizeof(spam[0]));
        key_hex(k->agg, 'a', agg, sizeof(agg) / sizeof(agg[0]));
        key_hex(k->event, 'e', full, sizeof(full) / sizeof(full[0]));
        digest(k->local, 'm', &msg, 1);
}

static bool agg_has(const struct agg_record *a, const uint8_t local[16])
{
        for (unsigned i = 0; i < a->n; i++)
                if (memcmp(a->local[i], local, 16) == 0)
                        return true;
        return false;
}

/* The entries an event needs and does not have yet, allocated up front. */
struct fresh {
        struct agg_record *agg;
        struct log_record *log;
        struct spam_record *spam;
};

static void fresh_free(struct fresh *f)
{
        free(f->agg);
        free(f->log);
        free(f->spam);
}

/* Allocates the missing entries and room for them in the maps.  0 or
 * -ENOMEM (f freed). */
static int fresh_alloc(struct event_correlator *c, bool need_agg, bool need_log, bool need_spam, struct fresh *f)
{
        memset(f, 0, sizeof(*f));
        if ((need_agg && (!(f->agg = calloc(1, sizeof(*f->agg))) || strmap_reserve(c->aggs.map, 1) < 0)) ||
            (need_log && (!(f->log = calloc(1, sizeof(*f->log))) || strmap_reserve(c->logs.map, 1) < 0)) ||
            (need_spam && (!(f->spam = calloc(1, sizeof(*f->spam))) || strmap_reserve(c->spams.map, 1) < 0))) {
                fresh_free(f);
                return -ENOMEM;
        }
        return 0;
}

/* Records the message in the group (new, or idle past the window: started
 * over) and, when the group is full, forgets its oldest. */
static void agg_commit(struct event_correlator *c, struct agg_record *a, bool is_new, bool stale, const struct keys *k,
                       uint64_t mono)
{
        if (is_new) {
                memcpy(a->e.key, k->agg, sizeof(a->e.key));
                lru_insert(&c->aggs, &a->e);
        } else {
                lru_touch(&c->aggs, &a->e);
        }
        if (stale)
                a->n = 0;
        if (!agg_has(a, k->local))
                memcpy(a->local[a->n++], k->local, 16);
        if (a->n >= EVENT_AGGREGATE_MAX) {
                memmove(a->local[0], a->local[1], (size_t)(a->n - 1) * 16);
                a->n--;
        }
        a->last = mono;
}

static void log_commit(struct event_correlator *c, struct log_record *l, bool is_new, const char *key,
                       const struct plan *p)
{
        if (is_new) {
                memcpy(l->e.key, key, sizeof(l->e.key));
                lru_insert(&c->logs, &l->e);
        } else {
                lru_touch(&c->logs, &l->e);
        }
        l->count = p->count;
        l->first = p->first;
        memcpy(l->name, p->name, sizeof(l->name));
}

static void spam_commit(struct event_correlator *c, struct spam_record *s, bool is_new, const char *key,
                        const struct event_bucket *b)
{
        if (is_new) {
                memcpy(s->e.key, key, sizeof(s->e.key));
                lru_insert(&c->spams, &s->e);
        } else {
                lru_touch(&c->spams, &s->e);
        }
        s->b = *b;
}

/* The message as written: cut, and for a combined event prefixed, then
 * cut again.  0 or -ENOMEM. */
static int plan_message(const char *message, bool aggregated, struct buf *out)
{
        int r = 0;

        if (aggregated)
                r = buf_puts(out, EVENT_AGGREGATE_PREFIX);
        if (r >= 0)
                r = buf_append(out, message, message_len(message));
        if (r >= 0 && out->len > EVENT_MESSAGE_MAX)
                out->data[out->len = message_len(out->data)] = '\0';
        return r;
}

static bool event_valid(const struct event_in *ev)
{
        return ev->obj.kind && ev->obj.kind[0] && ev->obj.name && ev->obj.name[0] && ev->type && ev->type[0] &&
               ev->reason && ev->reason[0];
}

/* The name of a new event: unique even for two in one microsecond. */
static uint64_t next_nanos(const struct event_correlator *c, uint64_t wall)
{
        uint64_t nanos = wall * 1000u;

        return nanos > c->last_nanos ? nanos : c->last_nanos + 1;
}

int event_correlate(struct event_correlator *c, const struct event_in *ev, uint64_t mono, uint64_t wall,
                    struct event_out *ret)
{
        struct plan p = {.ev = ev, .message = BUF_INIT, .last = wall};
        struct buf cut = BUF_INIT;
        struct keys k;
        struct agg_record *agg;
        struct log_record *log;
        struct spam_record *spam;
        struct event_bucket bucket;
        struct fresh f;
        bool stale, aggregated;
        uint64_t nanos = next_nanos(c, wall);
        int r = -ENOMEM;

        memset(ret, 0, sizeof(*ret));
        if (!event_valid(ev))
                return -EINVAL;
        p.ns = ev->obj.namespace && ev->obj.namespace[0] ? ev->obj.namespace : "default";
        if (buf_append(&cut, str_or_empty(ev->message), message_len(str_or_empty(ev->message))) < 0)
                goto out;
        event_keys(c, ev, &cut, &k);
        agg = strmap_get(c->aggs.map, k.agg);
        stale = !agg || mono - agg->last > EVENT_AGGREGATE_WINDOW_USEC;
        aggregated = (stale ? 0 : agg->n) + (!stale && agg_has(agg, k.local) ? 0 : 1) >= EVENT_AGGREGATE_MAX;
        log = strmap_get(c->logs.map, aggregated ? k.agg : k.event);
        p.count = log && log->count ? log->count + 1 : 1;
        p.first = p.count > 1 ? log->first : wall;
        if (p.count > 1)
                memcpy(p.name, log->name, sizeof(p.name));
        else
                make_name(p.name, ev->obj.name, nanos);
        spam = strmap_get(c->spams.map, k.spam);
        if (spam)
                bucket = spam->b;
        else
                event_bucket_init(&bucket, c->spam_burst, c->spam_period, mono);
        ret->skip = event_bucket_take(&bucket, c->spam_burst, c->spam_period, mono) > 0;
        if (plan_message(cut.data, aggregated, &p.message) < 0 || fresh_alloc(c, !agg, !log, !spam, &f) < 0)
                goto out;
        if (!ret->skip && render_out(c, &p, ret) < 0) {
                fresh_free(&f);
                goto out;
        }
        /* Nothing can fail from here on. */
        agg_commit(c, agg ? agg : f.agg, !agg, stale, &k, mono);
        log_commit(c, log ? log : f.log, !log, aggregated ? k.agg : k.event, &p);
        spam_commit(c, spam ? spam : f.spam, !spam, k.spam, &bucket);
        if (p.count == 1)
                c->last_nanos = nanos;
        ret->aggregated = aggregated;
        r = 0;
out:
        buf_free(&cut);
        buf_free(&p.message);
        if (r < 0)
                memset(ret, 0, sizeof(*ret));
        return r;
}
