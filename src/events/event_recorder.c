/*
 * event_recorder — Events written to the API server (see
 * src/events/event_recorder.h and doc/events.md).
 *
 * record(): correlate at once (so a throttled event never takes a place
 * in the queue), queue the write, arm the pump.  pump(): when no write is
 * in flight, take a token of the --event-qps bucket (or wait for one) and
 * start the oldest write.  done(): 2xx -> next; 404 to a PATCH -> the
 * same event as a POST; 429 or 5xx with Retry-After -> the same request
 * after that many seconds (at most RETRY_AFTER_MAX_RETRIES times, and
 * once they are spent the next write waits it: util/retry_after.h); any
 * other status -> dropped; no answer -> the same write after a pause
 * (client-go: a random part of the pause first, then the whole pause),
 * EVENT_MAX_TRIES times in all.  Every write is one request at a time,
 * as client-go's one goroutine per sink makes them.
 *
 * Nothing waits on the loop: the queue is bounded (a full queue drops the
 * new event), and every pause is a timer.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "util/episode.h"
#include "events/event_recorder.h"
#include "util/retry_after.h"
#include "util/ring.h"

/* Of an error answer, this much is kept to say why. */
#define EVENT_ERROR_BODY_MAX (64u * 1024u)

/* One write: the event as correlated. */
struct write {
        char *ns, *name;
        char *post;  /* the whole event */
        char *patch; /* the count patch of a repeat, or NULL */
        bool create; /* POST: a new event, or the PATCH found it gone */
        unsigned tries;
        struct retry_after ra; /* its last answer's Retry-After, its retries */
};

struct event_recorder {
        struct loop *loop;
        struct curl_loop *cl;
        struct event_correlator *corr;
        char *node;
        struct kube_client *kube;
        event_report_fn report;
        void *report_data;
        struct event_stats *stats; /* may be NULL */
        struct event_stats own;    /* counted here when stats is NULL */
        size_t queue_max;
        uint64_t retry;
        unsigned burst;
        uint64_t period; /* usec per write; 0: no limit */
        struct event_bucket bucket;
        struct ring queue;        /* struct write *, oldest first */
        struct loop_timer *timer; /* the pump: now, or after a wait */

        /* the write in flight */
        CURL *easy;
        struct curl_slist *hdrs;
        struct buf body;
        struct buf failure; /* no answer: what kind of failure */

        struct episode problem; /* the writes failing: the kind last reported (util/episode.h) */
        uint64_t lost;          /* events dropped since */
};

static void write_free(struct write *w)
{
        if (!w)
                return;
        free(w->ns);
        free(w->name);
        free(w->post);
        free(w->patch);
        free(w);
}

static struct write *head(const struct event_recorder *er)
{
        return er->queue.len ? *(struct write **)ring_at(&er->queue, 0) : NULL;
}

static void depth_changed(struct event_recorder *er)
{
        er->stats->queue_depth = er->queue.len;
        if (er->queue.len > er->stats->queue_peak)
                er->stats->queue_peak = er->queue.len;
}

/* The oldest write is over (written or dropped); the next one's turn. */
static void next(struct event_recorder *er)
{
        write_free(head(er));
        ring_pop(&er->queue);
        depth_changed(er);
        if (er->queue.len && !loop_timer_armed(er->timer))
                loop_timer_arm(er->timer, 0);
}

/* Reports a problem once per distinct kind (key). */
static void problem(struct event_recorder *er, const char *key, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void problem(struct event_recorder *er, const char *key, const char *fmt, ...)
{
        struct buf b = BUF_INIT;
        va_list ap;

        if (!episode_fail(&er->problem, key))
                return;
        va_start(ap, fmt);
        (void)buf_vprintf(&b, fmt, ap);
        va_end(ap);
        if (er->report)
                er->report(er->report_data, b.len ? b.data : key, 0);
        buf_free(&b);
}

static void dropped(struct event_recorder *er, uint64_t *counter)
{
        (*counter)++;
        er->lost++;
}

/* ---- one request ------------------------------------------------------------------ */

static void on_done(void *data, CURL *easy, CURLcode result);

static size_t on_header(char *line, size_t size, size_t n, void *data)
{
        struct event_recorder *er = data;
        size_t len = size * n;

        /* The write in flight is the oldest. */
        (void)retry_after_header(&head(er)->ra, line, len);
        return len;
}

static size_t on_write(char *ptr, size_t size, size_t n, void *data)
{
        struct event_recorder *er = data;
        size_t len = size * n;

        size_t room = EVENT_ERROR_BODY_MAX - er->body.len;

        /* Only the start of an error says why; the rest is not kept. */
        if (room)
                (void)buf_append(&er->body, ptr, len < room ? len : room);
        return len;
}

/* "/api/v1/namespaces/NS/events[/NAME]", escaped.  0 or -ENOMEM. */
static int write_path(const struct write *w, struct buf *out)
{
        char *ns = curl_easy_escape(NULL, w->ns, 0), *name = curl_easy_escape(NULL, w->name, 0);
        int r = ns && name ? buf_printf(out, "/api/v1/namespaces/%s/events", ns) : -ENOMEM;

        if (r >= 0 && !w->create)
                r = buf_printf(out, "/%s", name);
        curl_free(ns);
        curl_free(name);
        return r;
}

/* Sets up e for w; the headers go to er->hdrs.  0 or -ENOMEM. */
static int setup(struct event_recorder *er, CURL *e, const struct write *w)
{
        struct buf path = BUF_INIT;
        const char *token_problem = NULL;
        struct curl_slist *n;
        int r;

        if ((r = write_path(w, &path)) < 0 ||
            (r = kube_client_prepare(er->kube, e, path.data, &er->hdrs, &token_problem)) < 0)
                goto out;
        if (token_problem)
                problem(er, token_problem, "%s", token_problem);
        r = -ENOMEM;
        n = curl_slist_append(er->hdrs, w->create ? "Content-Type: application/json"
                                                  : "Content-Type: application/strategic-merge-patch+json");
        if (!n)
                goto out;
        er->hdrs = n;
        /* No "Expect: 100-continue" round trip for a body of a few KB. */
        if (!(n = curl_slist_append(er->hdrs, "Expect:")))
                goto out;
        er->hdrs = n;
        if (curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, w->create ? w->post : w->patch) != CURLE_OK ||
            (!w->create && curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "PATCH") != CURLE_OK))
                goto out;
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, er->hdrs);
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(EVENT_REQUEST_TIMEOUT_USEC / 1000u));
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, er);
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(e, CURLOPT_HEADERDATA, er);
        r = 0;
out:
        buf_free(&path);
        return r;
}

static void no_answer(struct event_recorder *er, struct write *w, const char *why);

/* Starts the oldest write. */
static void start(struct event_recorder *er, struct write *w)
{
        CURL *e = curl_easy_init();
        int r = -ENOMEM;

        curl_slist_free_all(er->hdrs);
        er->hdrs = NULL;
        buf_reset(&er->body);
        retry_after_sent(&w->ra);
        if (e && (r = setup(er, e, w)) == 0 && (r = curl_loop_add(er->cl, e, on_done, er)) == 0) {
                er->easy = e;
                return;
        }
        if (e)
                curl_easy_cleanup(e);
        no_answer(er, w, r == -ENOMEM ? "out of memory" : "libcurl refused the request");
}

static void on_pump(struct loop_timer *t, void *data)
{
        struct event_recorder *er = data;
        uint64_t wait;

        if (er->easy || !er->queue.len)
                return;
        wait = event_bucket_take(&er->bucket, er->burst, er->period, mono_usec());
        if (wait) {
                loop_timer_arm(t, wait);
                return;
        }
        start(er, head(er));
}

/* ---- answers ----------------------------------------------------------------------- */

/* No answer (or none that says anything): the same write after a pause,
 * up to EVENT_MAX_TRIES in all. */
static void no_answer(struct event_recorder *er, struct write *w, const char *why)
{
        char key[64];

        w->tries++;
        (void)snprintf(key, sizeof(key), "no answer: %s", why);
        problem(er, key,
                "no answer from the API server (%s): each write is tried again every %.0f s, up to %u times, "
                "the later ones waiting",
                why, (double)er->retry / 1e6, EVENT_MAX_TRIES);
        if (w->tries >= EVENT_MAX_TRIES) {
                dropped(er, &er->stats->gave_up);
                next(er);
                return;
        }
        /* The first pause is a random part of the whole, so that clients
         * that lost one server do not all come back at once. */
        loop_timer_arm(er->timer, w->tries == 1 ? clock_jitter(er->retry) : er->retry);
}

/* An answer other than 2xx that is final: the write is dropped. */
static void refused(struct event_recorder *er, const struct write *w, long status)
{
        struct buf why = BUF_INIT;
        char key[32];

        if (status == 401)
                kube_client_unauthorized(er->kube);
        (void)kube_describe_status(er->body.data, er->body.len, status, &why);
        (void)snprintf(key, sizeof(key), "HTTP %ld", status);
        problem(er, key, "the API server refused an event (%s in namespace \"%s\": %s): it is dropped",
                w->create ? "POST" : "PATCH", w->ns, why.len ? why.data : key);
        buf_free(&why);
        dropped(er, &er->stats->rejected);
        next(er);
}

static void written(struct event_recorder *er)
{
        er->stats->sent++;
        if (episode_clear(&er->problem, NULL) && er->report)
                er->report(er->report_data, NULL, er->lost);
        er->lost = 0;
        next(er);
}

static void on_done(void *data, CURL *easy, CURLcode result)
{
        struct event_recorder *er = data;
        struct write *w = head(er);
        long status = 0;
        uint64_t wait;

        er->easy = NULL;
        curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
        buf_reset(&er->failure);
        if (result != CURLE_OK && kube_describe_failure(easy, result, &er->failure) < 0)
                buf_reset(&er->failure); /* curl's own words instead */
        curl_easy_cleanup(easy);
        curl_slist_free_all(er->hdrs);
        er->hdrs = NULL;
        if (status >= 200 && status < 300) {
                /* Written, even if the answer's body was cut short. */
                written(er);
        } else if (status == 0 || result == CURLE_OUT_OF_MEMORY) {
                no_answer(er, w,
                          result == CURLE_OK ? "no status"
                          : er->failure.len  ? er->failure.data
                                             : curl_easy_strerror(result));
        } else if (status == 404 && !w->create) {
                /* The event to count on is gone: written anew, as
                 * client-go does. */
                w->create = true;
                loop_timer_arm(er->timer, 0);
        } else if (retry_after_retry(&w->ra, status, &wait)) {
                loop_timer_arm(er->timer, wait);
        } else {
                /* A Retry-After whose retries are spent drops the write,
                 * but the server's pause still holds: the next write
                 * waits it out (next() leaves an armed pump alone). */
                if ((wait = retry_after_left(&w->ra, status)) > 0)
                        loop_timer_arm(er->timer, wait);
                refused(er, w, status);
        }
}

/* ---- the recorder ------------------------------------------------------------------ */

int event_recorder_new(struct loop *loop, struct curl_loop *cl, const struct event_recorder_config *cfg,
                       struct event_recorder **ret_er)
{
        struct event_correlator_config cc = {.component = EVENT_COMPONENT, .host = cfg->node_name};
        struct event_recorder *er;
        int r = -ENOMEM;

        if (!cfg->node_name || !cfg->node_name[0] || !cfg->kube)
                return -EINVAL;
        er = calloc(1, sizeof(*er));
        if (!er)
                return -ENOMEM;
        er->loop = loop;
        er->cl = cl;
        er->kube = cfg->kube;
        er->report = cfg->report;
        er->report_data = cfg->report_data;
        er->stats = cfg->stats ? cfg->stats : &er->own;
        er->stats->configured = true;
        er->queue_max = cfg->queue_max ? cfg->queue_max : EVENT_QUEUE_MAX;
        er->retry = cfg->retry_usec ? cfg->retry_usec : EVENT_RETRY_USEC;
        er->burst = cfg->burst ? cfg->burst : EVENT_CLIENT_BURST;
        er->period = cfg->qps ? 1000000u / cfg->qps : 0;
        if (cfg->qps > 1000000u)
                er->period = 1; /* as good as no limit, but a limit */
        event_bucket_init(&er->bucket, er->burst, er->period, mono_usec());
        er->queue = (struct ring)RING_INIT(struct write *);
        buf_init(&er->body);
        buf_init(&er->failure);
        er->node = strdup(cfg->node_name);
        if (!er->node || (r = event_correlator_new(&cc, &er->corr)) < 0 ||
            (r = loop_timer_new(loop, on_pump, er, &er->timer)) < 0) {
                event_recorder_free(er);
                return r < 0 ? r : -ENOMEM;
        }
        *ret_er = er;
        return 0;
}

void event_recorder_free(struct event_recorder *er)
{
        if (!er)
                return;
        curl_loop_cancel(er->cl, &er->easy);
        curl_slist_free_all(er->hdrs);
        while (er->queue.len) {
                write_free(head(er));
                ring_pop(&er->queue);
        }
        ring_free(&er->queue);
        loop_timer_free(er->timer);
        event_correlator_free(er->corr);
        buf_free(&er->body);
        buf_free(&er->failure);
        episode_free(&er->problem);
        free(er->node);
        free(er);
}

struct event_ref event_recorder_node(const struct event_recorder *er)
{
        /* The kubelet's reference to its node: no namespace, no API
         * version, the name as the UID. */
        return (struct event_ref){.kind = "Node", .name = er->node, .uid = er->node};
}

size_t event_recorder_queued(const struct event_recorder *er)
{
        return er->queue.len;
}

/* The write of a correlated event, its strings moved in. */
static void take_out(struct write *w, struct event_out *o)
{
        w->ns = o->namespace;
        w->name = o->name;
        w->post = o->post;
        w->patch = o->patch;
        w->create = o->count == 1;
        memset(o, 0, sizeof(*o));
}

int event_recorder_record(struct event_recorder *er, const struct event_ref *obj, const char *type, const char *reason,
                          const char *message)
{
        struct event_in in = {.obj = *obj, .type = type, .reason = reason, .message = message};
        struct event_out out;
        struct write *w;
        int r;

        er->stats->recorded++;
        if (er->queue.len >= er->queue_max) {
                /* Dropped before it is looked at, as client-go's full
                 * broadcaster queue drops it. */
                dropped(er, &er->stats->queue_full);
                return -ENOBUFS;
        }
        /* Room first, so that nothing fails once the event is counted. */
        w = calloc(1, sizeof(*w));
        if (!w || ring_reserve(&er->queue, er->queue.len + 1) < 0) {
                free(w);
                return -ENOMEM;
        }
        r = event_correlate(er->corr, &in, mono_usec(), wall_usec(), &out);
        if (r < 0 || out.skip) {
                free(w);
                if (r == 0)
                        er->stats->throttled++;
                return r < 0 ? r : 1;
        }
        take_out(w, &out);
        (void)ring_push(&er->queue, &w); /* reserved */
        depth_changed(er);
        if (!er->easy && !loop_timer_armed(er->timer))
                loop_timer_arm(er->timer, 0);
        return 0;
}
