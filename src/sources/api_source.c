/*
 * api_source — list + watch of the node's pods (see
 * src/sources/api_source.h and doc/api-source.md sections 2-10).
 *
 * One request at a time (a start resumed from the checkpoint skips the
 * first LIST: its WATCH is from the checkpoint's RV):
 *   LIST (paged from RV 0 or unset; unpaged from a known RV) -> replace the
 *   store, push a SET -> WATCH from the list RV -> per event: apply, push a
 *   SET -> stream end -> re-watch from the last RV, or, after an error,
 *   back off and relist from the last RV.
 * The watch body is decoded incrementally (api_decode), so events may be
 * split across reads or share one.
 *
 * Fail safe: a list replaces the store only when every page decoded; a
 * watch event is applied whole or not at all, and a watch that cannot
 * apply one for want of memory ends and resumes from the last resource
 * version (exact, since each applied event moved it).  A SET that cannot
 * be built or queued leaves push_pending set: the whole store is sent
 * again after the push backoff (1 s doubling to API_BACKOFF_CAP_USEC), or with
 * the next change, whichever comes first, so the merger always catches
 * up with the store without waiting for another event.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <json-c/json.h>

#include "kube/api_decode.h"
#include "sources/api_source.h"
#include "sources/checkpoint.h"
#include "sources/source_episode.h"
#include "util/backoff.h"
#include "util/file.h"
#include "util/json_parse.h"
#include "util/json_get.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/proto_words.h"
#include "util/retry_after.h"
#include "util/str.h"
#include "util/strmap.h"

enum phase { PHASE_IDLE, PHASE_LIST, PHASE_WATCH };

/* What to do when the backoff timer fires. */
enum next { NEXT_LIST, NEXT_WATCH, NEXT_RETRY };

struct api_source {
        struct loop *loop;
        struct curl_loop *cl;
        struct mux_channel *ch;
        struct kube_client *kube; /* borrowed */
        char *node_enc;           /* node name, percent-encoded */
        struct strmap *store; /* namespace/name -> struct pod* */
        char *last_rv;
        int rv_unavailable;

        enum phase phase;
        CURL *easy;
        struct curl_guard guard; /* of the request in flight */
        struct curl_slist *hdrs;
        char *url;         /* path of the request in flight (for retries) */
        struct buf body;   /* an error body */
        int body_oom;      /* it (or a list's pod) could not be kept */
        size_t body_bytes; /* of the response so far */
        /* A list answered 200 is decoded as it comes (never held whole);
         * list_bad: the body is not a PodList (ldec has the words). */
        struct list_decoder *ldec;
        int list_bad;
        long status;       /* HTTP status of the request in flight */
        struct buf failure; /* what went wrong when no answer came */
        struct retry_after ra; /* the response's Retry-After, this request's retries */

        /* paged list */
        struct strmap *pages; /* items gathered so far */
        char *list_rv_asked;  /* RV sent on the first page (NULL: unset) */
        char *list_rv;        /* RV of the first page */
        char *cont;           /* continue token of the next page */
        int paged;
        int relisted_unset;   /* one retry with RV unset done */
        int continue_fallback;
        bool list_had_pages;  /* this list came in pages */
        /* A list from RV 0 came back in pages: the server pages (its watch
         * cache is off), so later lists keep asking for pages even from a
         * known RV, as client-go's reflector does. */
        bool paginated_result;

        /* watch */
        struct watch_decoder *dec;
        uint64_t watch_start;
        unsigned watch_events;
        int watch_error;      /* ERROR event or undecodable data */
        bool watch_drain;     /* an ERROR event: the rest is read (API_DRAIN_*) */
        int watch_oom;        /* an event could not be applied for want of memory */
        long watch_error_code;

        /* response headers deadline of the request in flight */
        struct loop_timer *hdr_timer;
        int got_headers;

        /* the reflector's backoff (api_source.h) */
        struct loop_timer *timer;
        enum next next;
        struct backoff backoff;
        /* While no request gets any answer (the server is down): the
         * reconnect's pause (api_source.h), reset by any answer. */
        struct backoff reconnect;

        struct source_stats *stats; /* may be NULL */
        api_state_fn state_fn;      /* may be NULL */
        void *state_data;
        /* The list and watch failing, said once per reason until they
         * work again (util/episode.h). */
        struct episode failing;
        bool listed;                /* a list was started before */

        /* the store not yet sent (out of memory) */
        bool push_pending;
        struct loop_timer *push_timer;
        struct backoff push_retry; /* api_source.h */

        /* The checkpoint (doc/checkpoint.md); writer NULL: none. */
        struct checkpoint_writer *writer;
        char *ckpt_dir;
        char ckpt_ca[CHECKPOINT_FINGERPRINT_SIZE];
        char *node_name;
        struct checkpoint_identity ckpt_id;
        uint64_t ckpt_interval, ckpt_grace, ckpt_max_age;
        uint64_t relist_spread; /* API_RELIST_SPREAD_USEC */
        /* The budget of lists after a 410 (relist_after_gone): the
         * theoretical time, monotonic, at which the next list would find
         * one token left; 0: never spent. */
        uint64_t relist_tat;
        struct checkpoint_stats *ckpt_stats;
        struct checkpoint ckpt; /* loaded, not served yet */
        bool ckpt_loaded;
        /* The store holds the checkpoint's pods (a resumed start), with
         * the watch's events since applied: served as they are. */
        bool ckpt_in_store;
        /* The watch goes on from the checkpoint's resourceVersion and the
         * server has not yet shown that it can (doc/checkpoint.md 7):
         * nothing is pushed as live until it has. */
        bool resuming;
        struct loop_timer *grace_timer;
        enum api_serving serving;
        /* Wall clock: the server's last word on the store (a list, an
         * event, a watch that ran its course). */
        uint64_t confirmed;
        bool watch_open;       /* the watch in flight was answered 200 */
        struct episode write_failing; /* the checkpoint's writes */
        /* --watch-list: lists are streaming lists (cleared when the server
         * refuses them); wl_initial: the watch in flight is one, before
         * its initial-events-end bookmark (its events go to pages). */
        bool wl_on, wl_initial;
        struct loop_timer *wl_timer;
        uint64_t wl_wait; /* API_WATCH_LIST_WAIT_USEC; tests make it short */
};

/* ---- small helpers ------------------------------------------------------------------ */

static char *pct_encode(const char *s)
{
        static const char hex[] = "0123456789ABCDEF";
        struct buf b = BUF_INIT;

        for (; *s; s++) {
                unsigned char c = (unsigned char)*s;

                if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
                        if (buf_putc(&b, (char)c) < 0)
                                goto nomem;
                } else if (buf_putc(&b, '%') < 0 || buf_putc(&b, hex[c >> 4]) < 0 ||
                           buf_putc(&b, hex[c & 15]) < 0) {
                        goto nomem;
                }
        }
        return buf_steal(&b, NULL);
nomem:
        buf_free(&b);
        return NULL;
}

/* Counts a failure, records it as the source's last error and logs it
 * once per distinct reason (a server down for an hour fails every
 * backoff), until the list and watch work again (recovered()). */
static void report(struct api_source *as, bool warn, bool parse, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

static void report(struct api_source *as, bool warn, bool parse, const char *fmt, ...)
{
        struct buf b = BUF_INIT;
        va_list ap;

        va_start(ap, fmt);
        (void)buf_vprintf(&b, fmt, ap);
        va_end(ap);
        (void)source_episode_fail(as->stats, &as->failing, parse, warn ? LOG_LEVEL_WARN : LOG_LEVEL_ERROR,
                                  b.len ? b.data : "?", "api source: %s", b.len ? b.data : "?");
        buf_free(&b);
}

/* The list or the watch worked (a list stored, an event applied, a watch
 * that ran its course): what went wrong before is over, said once. */
static void recovered(struct api_source *as, const char *what)
{
        /* The reason is not kept only when memory ran out. */
        (void)source_episode_clear(as->stats, &as->failing, "api source: %s again (the last problem was: %s)", what,
                                   as->failing.said ? as->failing.said : "?");
}

/* ---- the store and pushes --------------------------------------------------------- */

/* The store as one SET.  0 or -ENOMEM (nothing sent).  O(n) in the
 * node's pods: inherent while the source speaks in SETs. */
static int send_store(struct api_source *as)
{
        struct pod_update *u = pod_update_new(POD_OP_SET, POD_SOURCE_API);
        size_t it = 0, n;
        void *v;

        if (!u)
                return -ENOMEM;
        u->provisional = as->serving == API_SERVING_CHECKPOINT;
        while (strmap_next(as->store, &it, NULL, &v)) {
                if (pod_update_add(u, v) < 0) {
                        pod_update_free(u);
                        return -ENOMEM;
                }
        }
        pod_update_sort(u);
        n = u->n_pods;
        if (mux_channel_send(as->ch, u) < 0) /* frees u */
                return -ENOMEM;
        source_stats_success(as->stats, n);
        return 0;
}

/*
 * Hands the merger the store.  When that fails the store and what the
 * merger holds differ: push_pending stays set and the push is tried again
 * after a pause (1 s doubling), or sooner with the next change.
 */
static void push(struct api_source *as)
{
        int r = send_store(as);

        if (r < 0) {
                (void)backoff_next(&as->push_retry, 0);
                if (!as->push_pending)
                        report(as, false, false, "cannot send the %zu pod(s) of the node: %s: trying again in %.1f s",
                               strmap_size(as->store), ERRNO_STR(r), (double)as->push_retry.delay / 1e6);
                else
                        log_debug("api source: the pods still cannot be sent: trying again in %.1f s",
                                  (double)as->push_retry.delay / 1e6);
                as->push_pending = true;
                loop_timer_arm(as->push_timer, as->push_retry.delay);
                return;
        }
        if (as->push_pending)
                log_info("api source: the %zu pod(s) of the node sent again", strmap_size(as->store));
        as->push_pending = false;
        backoff_reset(&as->push_retry);
        loop_timer_stop(as->push_timer);
}

static void on_push_timer(struct loop_timer *t, void *data)
{
        struct api_source *as = data;

        (void)t;
        if (as->push_pending)
                push(as);
}

/* ---- the checkpoint (doc/checkpoint.md) ------------------------------------------- */

static const char *const serving_names[] = {PROTO_SERVING_WAITING, PROTO_SERVING_CHECKPOINT, PROTO_SERVING_LIVE};

/* The state is counted, and told when it changes (with the checkpoint's
 * time and resourceVersion when that is served). */
static void set_serving(struct api_source *as, enum api_serving s, uint64_t time_usec, const char *rv)
{
        bool changed = as->serving != s;

        as->serving = s;
        if (as->stats)
                as->stats->serving = serving_names[s];
        if (changed && as->state_fn)
                as->state_fn(as->state_data, s, time_usec, rv);
}

/* The checkpoint's pods as a store (they move: ckpt keeps none).  0 or
 * -ENOMEM (ckpt as it was).  A key twice: the last wins. */
static int checkpoint_store(struct api_source *as, struct strmap **ret)
{
        struct strmap *store = strmap_new_borrowed();

        if (!store || strmap_reserve(store, as->ckpt.n_pods) < 0) {
                strmap_free(store, NULL);
                return -ENOMEM;
        }
        for (size_t i = 0; i < as->ckpt.n_pods; i++) {
                void *old = NULL;

                /* Reserved: never fails. */
                (void)strmap_put(store, pod_key(as->ckpt.pods[i]), as->ckpt.pods[i], &old);
                pod_unref(old);
        }
        as->ckpt.n_pods = 0;
        *ret = store;
        return 0;
}

/* The checkpoint's pods become the store and go to the merger as a
 * checkpoint SET: once the grace has passed or a list failed, and only
 * before any list succeeded.  why says what happened, for the log. */
static void serve_checkpoint(struct api_source *as, const char *why)
{
        struct strmap *store;
        char when[CLOCK_RFC3339_MAX];
        const char *rv = as->ckpt.rv;

        if (!as->ckpt_loaded || as->serving != API_SERVING_WAITING)
                return;
        if (as->ckpt_in_store) {
                /* A resumed start: the store is the checkpoint with the
                 * events the watch brought since, the server's state at
                 * last_rv; that is the version served. */
                store = as->store;
                rv = as->last_rv ? as->last_rv : rv;
        } else if (checkpoint_store(as, &store) < 0) {
                /* Tried again with the next failure or the grace. */
                log_error("api source: cannot serve the checkpoint: out of memory");
                return;
        } else {
                api_store_free(as->store);
                as->store = store;
        }
        clock_rfc3339(as->ckpt.time_usec, CLOCK_SECONDS, when);
        log_warn("api source: %s: serving the checkpoint of %s (resourceVersion %s, %zu pod(s)) until the API "
                 "server answers",
                 why ? why : "no answer from the API server", when, rv, strmap_size(store));
        if (as->ckpt_stats) {
                as->ckpt_stats->served_time = as->ckpt.time_usec;
                metrics_text(as->ckpt_stats->served_rv, sizeof(as->ckpt_stats->served_rv), rv);
        }
        set_serving(as, API_SERVING_CHECKPOINT, as->ckpt.time_usec, rv);
        checkpoint_free(&as->ckpt);
        as->ckpt_loaded = false;
        loop_timer_stop(as->grace_timer);
        push(as);
}

static void on_grace(struct loop_timer *t, void *data)
{
        struct api_source *as = data;
        char what[96];

        (void)t;
        (void)snprintf(what, sizeof(what), "no list within %.1f s", (double)as->ckpt_grace / 1e6);
        serve_checkpoint(as, as->failing.said ? as->failing.said : what);
}

/* A list succeeded: the store is live from now on; a checkpoint loaded
 * and not served is dropped. */
static void went_live(struct api_source *as)
{
        if (as->serving == API_SERVING_CHECKPOINT)
                log_info("api source: the API server answered: its %zu pod(s) replace the checkpoint's",
                         strmap_size(as->store));
        checkpoint_free(&as->ckpt);
        as->ckpt_loaded = false;
        as->ckpt_in_store = false;
        as->resuming = false;
        loop_timer_stop(as->grace_timer);
        set_serving(as, API_SERVING_LIVE, 0, NULL);
        as->confirmed = wall_usec();
        checkpoint_writer_changed(as->writer);
}

/*
 * A start with a checkpoint: its pods become the store (not sent yet) and
 * the watch goes on from its resourceVersion, so the server sends only
 * what changed since, and no list is needed.  False when that cannot be:
 * a checkpoint without a usable version ("" or "0", which a watch takes
 * as "any": every pod again), or no memory; the start lists then, as
 * without a checkpoint.
 */
static bool resume(struct api_source *as)
{
        struct strmap *store;
        char *rv;

        if (!as->ckpt.rv || !as->ckpt.rv[0] || strcmp(as->ckpt.rv, "0") == 0)
                return false;
        rv = strdup(as->ckpt.rv);
        if (!rv || checkpoint_store(as, &store) < 0) {
                free(rv);
                log_error("api source: cannot resume from the checkpoint: out of memory: listing");
                return false;
        }
        api_store_free(as->store);
        as->store = store;
        free(as->last_rv);
        as->last_rv = rv;
        as->ckpt_in_store = true;
        as->resuming = true;
        log_info("api source: watching from the checkpoint's resourceVersion %s (no list)", rv);
        return true;
}

/* The resumed watch is confirmed: a bookmark (the server sends one only
 * after every event before it), or a watch that ran its course without an
 * error.  The store is the server's state at last_rv: it goes to the
 * merger whole, as a list's would (its differences only reach consumers),
 * and sources_ready may follow (doc/pod-config.md 4.3). */
static void resumed(struct api_source *as, const char *how)
{
        log_info("api source: resumed from the checkpoint (%s): %zu pod(s) at resourceVersion %s", how,
                 strmap_size(as->store), as->last_rv ? as->last_rv : "?");
        went_live(as);
        push(as);
}

/* The state to write: the live store only (never the checkpoint itself,
 * nor nothing), with the time of the server's last word: now while a
 * watch is open. */
static int take_snapshot(void *data, struct checkpoint_snapshot *ret)
{
        struct api_source *as = data;
        size_t n = strmap_size(as->store), it = 0;
        void *v;

        if (as->serving != API_SERVING_LIVE)
                return 1;
        ret->pods = calloc(n ? n : 1, sizeof(*ret->pods));
        ret->rv = strdup(as->last_rv ? as->last_rv : "");
        if (!ret->pods || !ret->rv) {
                free(ret->pods);
                free(ret->rv);
                memset(ret, 0, sizeof(*ret));
                return -ENOMEM;
        }
        while (strmap_next(as->store, &it, NULL, &v))
                ret->pods[ret->n_pods++] = pod_ref(v);
        ret->time_usec = as->phase == PHASE_WATCH && as->watch_open ? wall_usec() : as->confirmed;
        return 0;
}

/* A write ended: a failure is said once per reason (at the interval's
 * pace it would repeat every minute), a success after one too. */
static void on_written(void *data, const struct checkpoint_result *res)
{
        struct api_source *as = data;

        if (res->error < 0) {
                (void)episode_log(&as->write_failing, LOG_LEVEL_ERROR, res->reason,
                                  "api source: cannot write the checkpoint: %s: trying again in %.1f s", res->reason,
                                  (double)as->ckpt_interval / 1e6);
                return;
        }
        if (!episode_clear(&as->write_failing, "api source: checkpoint written again (%zu bytes)", res->bytes))
                log_debug("api source: checkpoint written: %zu bytes in %.1f ms", res->bytes,
                          (double)res->took_usec / 1e3);
}

/* At start: the checkpoint is loaded, or why not is said once (an error,
 * unless there is none yet) and kept for the status. */
static void load_checkpoint(struct api_source *as)
{
        struct buf why = BUF_INIT;
        char when[CLOCK_RFC3339_MAX];
        int r = checkpoint_load(as->ckpt_dir, &as->ckpt_id, as->ckpt_max_age, wall_usec(), &as->ckpt, &why);
        const char *reason = why.len ? why.data : ERRNO_STR(r);

        if (r == 0) {
                as->ckpt_loaded = true;
                if (as->ckpt_stats)
                        as->ckpt_stats->written_time = as->ckpt.time_usec;
                clock_rfc3339(as->ckpt.time_usec, CLOCK_SECONDS, when);
                log_info("api source: checkpoint of %s loaded (resourceVersion %s, %zu pod(s)): served if no "
                         "list succeeds within %.1f s",
                         when, as->ckpt.rv, as->ckpt.n_pods, (double)as->ckpt_grace / 1e6);
        } else if (r == -ENOENT) {
                log_info("api source: %s: waiting for the API server", reason);
        } else {
                log_error("api source: checkpoint refused: %s: waiting for the API server", reason);
        }
        if (r < 0 && as->ckpt_stats)
                metrics_text(as->ckpt_stats->refused, sizeof(as->ckpt_stats->refused), reason);
        buf_free(&why);
}

/* The CA bundle's fingerprint: of the bytes kubeconfig gave, or of the
 * file it names, or "" with neither. */
static int ca_fingerprint(struct api_source *as, struct buf *err)
{
        const struct kube_config *kube = kube_client_config(as->kube);
        struct buf why = BUF_INIT;
        char *data = NULL;
        size_t len = 0;
        int r;

        if (kube->ca_data.data)
                return checkpoint_fingerprint(kube->ca_data.data, kube->ca_data.len, as->ckpt_ca);
        if (!kube->ca_file)
                return 0;
        r = file_read(kube->ca_file, KUBECONFIG_MAX_BYTES, &data, &len, &why);
        if (r == 0)
                r = checkpoint_fingerprint(data, len, as->ckpt_ca);
        else if (r != -ENOMEM)
                r = buf_set_err(err, -EINVAL,
                                "certificate-authority \"%s\": %s (the checkpoint records its "
                                "fingerprint)",
                                kube->ca_file, why.len ? why.data : ERRNO_STR(r));
        free(data);
        buf_free(&why);
        return r;
}

/* The checkpoint's identity, writer and grace timer. */
static int checkpoint_setup(struct api_source *as, const struct api_source_config *cfg, struct buf *err)
{
        const struct api_source_checkpoint *c = &cfg->checkpoint;
        struct checkpoint_writer_config wc;
        uint64_t refresh = API_CHECKPOINT_REFRESH_USEC;
        int r;

        if (!(as->ckpt_dir = strdup(c->dir)) || !(as->node_name = strdup(cfg->node_name)))
                return -ENOMEM;
        if ((r = ca_fingerprint(as, err)) < 0)
                return r;
        as->ckpt_id = (struct checkpoint_identity){
                .node = as->node_name, .server = kube_client_server(as->kube), .ca_sha256 = as->ckpt_ca};
        as->ckpt_interval = c->interval_usec;
        as->ckpt_grace = c->grace_usec;
        as->ckpt_max_age = c->max_age_usec;
        as->ckpt_stats = c->stats;
        if (c->max_age_usec && refresh > c->max_age_usec / 4)
                refresh = c->max_age_usec / 4;
        if (refresh < c->interval_usec)
                refresh = c->interval_usec;
        wc = (struct checkpoint_writer_config){
                .dir = c->dir,
                .id = as->ckpt_id,
                .interval_usec = c->interval_usec,
                .refresh_usec = refresh,
                .snapshot = take_snapshot,
                .snapshot_data = as,
                .done = on_written,
                .done_data = as,
                .stats = c->stats,
        };
        if (c->stats) {
                c->stats->configured = true;
                metrics_text(c->stats->dir, sizeof(c->stats->dir), c->dir);
        }
        if ((r = loop_timer_new(as->loop, on_grace, as, &as->grace_timer)) < 0)
                return r;
        return checkpoint_writer_new(as->loop, &wc, &as->writer, err);
}

int api_source_flush_checkpoint(struct api_source *as, struct buf *err)
{
        return as->writer ? checkpoint_writer_flush(as->writer, err) : 0;
}

/* ---- requests ---------------------------------------------------------------------------- */

static void on_done(void *data, CURL *easy, CURLcode result);
static void start_list(struct api_source *as);
static void start_watch(struct api_source *as);
static void back_off(struct api_source *as, enum next next);
static int too_large_rv(const struct buf *body, long status);
static int replace_store(struct api_source *as);
static void watch_list_synced(struct api_source *as);

static size_t on_header(char *line, size_t size, size_t n, void *data)
{
        struct api_source *as = data;
        size_t len = size * n;

        if (as->guard.mangled)
                return 0; /* not the request meant: ends it at once */
        if (len > 5 && strncmp(line, "HTTP/", 5) == 0) {
                const char *sp = memchr(line, ' ', len);

                as->got_headers = 1;
                loop_timer_stop(as->hdr_timer);
                /* The last status line counts (after a 100 Continue). */
                as->watch_open = as->phase == PHASE_WATCH && sp && (size_t)(sp - line) + 4 <= len &&
                                 strncmp(sp + 1, "200", 3) == 0;
                /* Any answer ends a run of connection-level failures. */
                backoff_reset(&as->reconnect);
                /* A watch answered 200 is the server's word that the
                 * source works again, events or not (a resumed watch on
                 * a quiet node may bring none for minutes). */
                if (as->watch_open)
                        recovered(as, "watching");
        }
        (void)retry_after_header(&as->ra, line, len);
        return len;
}

/*
 * One watch event's change, as a delta: the new pod, and the old one as
 * gone when its UID is not the new one's.  Nothing for an event that
 * changes nothing the merger compares.  O(1) whatever the node's pods.
 * 0 or -ENOMEM (nothing sent).
 */
static int send_change(struct api_source *as, struct pod *old, struct pod *now)
{
        struct pod_update *u;
        bool same_uid = old && now && strcmp(pod_uid(old), pod_uid(now)) == 0;

        if (same_uid && pod_semantic_equal(old, now) && pod_status_equal(old, now))
                return 0;
        u = pod_update_new_delta(POD_SOURCE_API);
        if (!u)
                return -ENOMEM;
        if ((now && pod_update_add(u, now) < 0) || (old && !same_uid && pod_update_add_gone(u, old) < 0)) {
                pod_update_free(u);
                return -ENOMEM;
        }
        if (mux_channel_send(as->ch, u) < 0) /* frees u */
                return -ENOMEM;
        source_stats_success(as->stats, strmap_size(as->store));
        return 0;
}

/* A watch event was applied to the store: the merger is told what changed.
 * If that cannot be sent, or an earlier push is still owed, the whole
 * store goes instead (push() retries until it is sent). */
static void on_event(void *arg, enum watch_event_type t, struct pod *old, struct pod *now)
{
        struct api_source *as = arg;

        as->watch_events++;
        if (as->wl_initial) {
                /* The state so far, gathered aside in pages. */
                if (t == WATCH_INITIAL_END)
                        watch_list_synced(as);
                return;
        }
        as->confirmed = wall_usec();
        if (episode_failing(&as->failing))
                recovered(as, "watching");
        if (as->resuming) {
                /* Applied, not sent: the events before the bookmark may be
                 * history, and consumers see one state only, the server's
                 * current one, once it is confirmed. */
                if (t == WATCH_BOOKMARK || t == WATCH_INITIAL_END)
                        resumed(as, "a bookmark");
                return;
        }
        if (t == WATCH_BOOKMARK || t == WATCH_INITIAL_END)
                return;
        /* A status-only change waits for the checkpoint's refresh
         * (doc/checkpoint.md section 6): what runs is what counts. */
        if (!old || !now || strcmp(pod_uid(old), pod_uid(now)) != 0 || !pod_semantic_equal(old, now))
                checkpoint_writer_changed(as->writer);
        if (as->push_pending || send_change(as, old, now) < 0)
                push(as);
}

/* Bytes of a list page: decoded as they come.  A body that cannot be a
 * PodList, or a pod that cannot be kept, ends the transfer at once
 * (list_done says why). */
static size_t list_write(struct api_source *as, const char *ptr, size_t len)
{
        int r;

        as->body_bytes += len;
        if (as->body_bytes > API_MAX_BODY)
                return 0;
        r = list_decoder_feed(as->ldec, ptr, len, NULL);
        if (r == -ENOMEM)
                as->body_oom = 1;
        else if (r < 0)
                as->list_bad = 1;
        return r < 0 ? 0 : len;
}

static size_t on_write(char *ptr, size_t size, size_t n, void *data)
{
        struct api_source *as = data;
        size_t len = size * n;
        struct buf why = BUF_INIT;
        int r;

        if (as->guard.mangled)
                return 0;
        if (as->status == 0)
                curl_easy_getinfo(as->easy, CURLINFO_RESPONSE_CODE, &as->status);
        if (as->phase == PHASE_LIST && as->status == 200)
                return list_write(as, ptr, len);
        if (as->phase != PHASE_WATCH || as->status != 200) {
                if (as->body.len + len > API_MAX_BODY)
                        return 0;
                if (buf_append(&as->body, ptr, len) < 0) {
                        as->body_oom = 1;
                        return 0;
                }
                return len;
        }
        if (as->watch_error) {
                /* body_bytes counts the rest (a watch keeps no body). */
                as->body_bytes += len;
                return as->watch_drain && as->body_bytes <= API_DRAIN_MAX_BYTES ? len : 0;
        }
        /* A streaming list's events go to pages; its end makes pages the
         * store (the same map: events after it in this read go on to
         * the store). */
        r = watch_decoder_feed(as->dec, ptr, len, as->wl_initial ? as->pages : as->store, &as->last_rv, on_event, as,
                               &as->watch_error_code, &why);
        if (r == 0 && as->watch_oom)
                return 0;
        if (r < 0) {
                as->watch_error = 1;
                if (r == -EPROTO && as->watch_error_code == 410)
                        log_warn("api source: watch ended by the server: %ld %s", as->watch_error_code, why.data);
                else if (r == -EPROTO)
                        report(as, true, false, "watch ended by the server: %ld %s", as->watch_error_code, why.data);
                else if (r == -ENOMEM)
                        as->watch_oom = 1;
                else
                        report(as, false, true, "watch: %s: ending the watch", why.data);
                buf_free(&why);
                if (r != -EPROTO)
                        return 0;
                /* The server ends the response after an ERROR event: read
                 * to its end, so that the connection is kept for the
                 * relist, which then costs no TLS handshake.  What the
                 * chunk holds after the event is not decoded. */
                as->watch_drain = true;
                as->body_bytes = 0;
                loop_timer_arm(as->hdr_timer, API_DRAIN_USEC);
                return len;
        }
        return len;
}

/* Starts a GET of as->url in the current phase; a failure backs off. */
static void send_request(struct api_source *as)
{
        const char *token_problem = NULL;
        CURL *e = curl_easy_init();
        int r = -ENOMEM;

        curl_slist_free_all(as->hdrs);
        as->hdrs = NULL;
        buf_reset(&as->body);
        as->body_oom = 0;
        as->body_bytes = 0;
        as->list_bad = 0;
        list_decoder_reset(as->ldec);
        as->status = 0;
        retry_after_sent(&as->ra);
        buf_reset(&as->failure);
        if (!e || !as->url || (r = kube_client_prepare(as->kube, e, as->url, &as->hdrs, &token_problem)) < 0)
                goto fail;
        if (token_problem)
                report(as, false, false, "%s", token_problem);
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, as);
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(e, CURLOPT_HEADERDATA, as);
        if (as->phase == PHASE_LIST) {
                curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 60000L);
        } else {
                /* A stalled watch (no byte at all, bookmarks included) is a
                 * dropped connection; the server's own deadline is at most
                 * 600 s away, so allow a minute beyond it. */
                curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
                curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, 660L);
        }
        curl_guard_arm(e, &as->guard);
        r = curl_loop_add(as->cl, e, on_done, as);
        if (r < 0)
                goto fail;
        as->easy = e;
        as->got_headers = 0;
        as->watch_open = false;
        loop_timer_arm(as->hdr_timer, API_RESPONSE_TIMEOUT_USEC);
        /* Each attempt of a streaming list has the bound to end its
         * initial events (a retry too). */
        if (as->phase == PHASE_WATCH && as->wl_initial)
                loop_timer_arm(as->wl_timer, as->wl_wait);
        return;
fail:
        if (e)
                curl_easy_cleanup(e);
        report(as, false, false, "cannot start a request: %s", r == -ENOMEM ? "out of memory" : "refused by libcurl");
        back_off(as, as->phase == PHASE_WATCH ? NEXT_WATCH : NEXT_LIST);
}

/* as->url for the next page.  0 or -ENOMEM (as->url is then NULL). */
static int build_list_url(struct api_source *as)
{
        struct buf u = BUF_INIT;
        char *c = NULL, *rv = NULL;
        int r;

        r = buf_printf(&u, "/api/v1/pods?fieldSelector=spec.nodeName%%3D%s", as->node_enc);
        if (r == 0 && as->cont) {
                c = pct_encode(as->cont);
                r = c ? buf_printf(&u, "&limit=%d&continue=%s", API_PAGE_SIZE, c) : -ENOMEM;
        } else if (r == 0) {
                if (as->paged)
                        r = buf_printf(&u, "&limit=%d", API_PAGE_SIZE);
                if (r == 0 && as->list_rv_asked) {
                        rv = pct_encode(as->list_rv_asked);
                        r = rv ? buf_printf(&u, "&resourceVersion=%s", rv) : -ENOMEM;
                }
        }
        free(c);
        free(rv);
        free(as->url);
        as->url = r == 0 ? buf_steal(&u, NULL) : NULL;
        buf_free(&u);
        return r;
}

static void start_watch_list(struct api_source *as);

/* A list: from lastRV when known (unpaged, "not older than"), else from
 * RV 0, or with no RV after the RV proved unusable (paged).  With
 * --watch-list, a streaming list instead. */
static void start_list(struct api_source *as)
{
        as->wl_initial = false;
        loop_timer_stop(as->wl_timer);
        as->phase = PHASE_LIST;
        retry_after_request(&as->ra);
        if (as->listed && as->stats)
                as->stats->relists++;
        as->listed = true;
        api_store_free(as->pages);
        as->pages = strmap_new_borrowed();
        (void)str_set(&as->cont, NULL);
        (void)str_set(&as->list_rv, NULL);
        (void)str_set(&as->list_rv_asked, NULL);
        if (!as->pages || (!as->rv_unavailable && str_set(&as->list_rv_asked, as->last_rv ? as->last_rv : "0") < 0)) {
                report(as, false, false, "cannot start a list: out of memory");
                back_off(as, NEXT_LIST);
                return;
        }
        if (as->wl_on) {
                start_watch_list(as);
                return;
        }
        as->paged = !as->list_rv_asked || strcmp(as->list_rv_asked, "0") == 0 || as->paginated_result;
        as->list_had_pages = false;
        if (as->continue_fallback) {
                as->paged = 0;
                as->continue_fallback = 0;
        }
        if (build_list_url(as) < 0) {
                report(as, false, false, "cannot start a list: out of memory");
                back_off(as, NEXT_LIST);
                return;
        }
        send_request(as);
}

/* A watch from lastRV; or, streaming, a streaming list "not older than"
 * list_rv_asked (unset: the latest state). */
static void send_watch(struct api_source *as, bool streaming)
{
        struct buf u = BUF_INIT;
        const char *from = streaming ? as->list_rv_asked : as->last_rv;
        char *rv;
        /* client-go: the 5-minute minimum times (1 + rand). */
        unsigned timeout = API_WATCH_MIN_TIMEOUT_SEC + (unsigned)clock_jitter(API_WATCH_MIN_TIMEOUT_SEC);
        int r;

        /* A streaming list "not older than" 0 is one from the latest
         * state: said as client-go says it, with no resourceVersion. */
        if (streaming && from && strcmp(from, "0") == 0)
                from = NULL;
        rv = pct_encode(from ? from : "");

        as->phase = PHASE_WATCH;
        retry_after_request(&as->ra);
        as->wl_initial = streaming;
        r = rv ? buf_printf(&u,
                            "/api/v1/pods?fieldSelector=spec.nodeName%%3D%s&watch=true&allowWatchBookmarks=true"
                            "%s%s%s&timeoutSeconds=%u",
                            as->node_enc, streaming ? "&sendInitialEvents=true&resourceVersionMatch=NotOlderThan" : "",
                            !streaming || rv[0] ? "&resourceVersion=" : "", rv, timeout)
               : -ENOMEM;
        free(rv);
        free(as->url);
        as->url = r == 0 ? buf_steal(&u, NULL) : NULL;
        buf_free(&u);
        if (r < 0) {
                /* Never a watch from another version than the last. */
                report(as, false, false, "cannot start a watch: out of memory");
                back_off(as, NEXT_WATCH);
                return;
        }
        watch_decoder_reset(as->dec);
        as->watch_start = mono_usec();
        as->watch_events = 0;
        as->watch_error = 0;
        as->watch_drain = false;
        as->watch_oom = 0;
        as->watch_error_code = 0;
        send_request(as);
}

static void start_watch(struct api_source *as)
{
        send_watch(as, false);
}

/* start_list() with --watch-list: pages are empty, list_rv_asked set. */
static void start_watch_list(struct api_source *as)
{
        send_watch(as, true);
}

/* The streaming list sent its whole state: it replaces the store, as a
 * list's would, and the same watch goes on with the changes. */
static void watch_list_synced(struct api_source *as)
{
        loop_timer_stop(as->wl_timer);
        if (str_set(&as->list_rv, as->last_rv) < 0 || replace_store(as) < 0) {
                /* The store was not replaced: this streaming list ends
                 * (on_write) and is started again after the backoff. */
                as->watch_oom = 1;
                return;
        }
        as->wl_initial = false;
        as->rv_unavailable = 0;
        as->relisted_unset = 0;
        as->confirmed = wall_usec();
        log_debug("api source: streaming list: %zu pod(s) at resourceVersion %s", strmap_size(as->store),
                  as->last_rv ? as->last_rv : "?");
        recovered(as, "listing");
        went_live(as);
        push(as);
}

/* The server does not serve streaming lists: listed and watched from now
 * on, said once.  The request in flight, if any, was ended. */
static void watch_list_refused(struct api_source *as, const char *why)
{
        log_warn("api source: the API server does not serve streaming lists (%s): listing and watching instead", why);
        as->wl_on = false;
        as->wl_initial = false;
        loop_timer_stop(as->wl_timer);
        start_list(as);
}

static void on_wl_timer(struct loop_timer *t, void *data)
{
        struct api_source *as = data;
        char why[96];

        (void)t;
        /* Only for a streaming list in flight: one that ended (and waits
         * for its retry) was stopped in on_done(). */
        if (!as->wl_initial || !as->easy || as->phase != PHASE_WATCH)
                return;
        curl_loop_cancel(as->cl, &as->easy);
        loop_timer_stop(as->hdr_timer);
        (void)snprintf(why, sizeof(why), "no initial-events-end bookmark within %.0f s",
                       (double)as->wl_wait / 1e6);
        watch_list_refused(as, why);
}

/* client-go's backoff manager: d doubles from 0.8 s to 30 s, each wait is
 * d + rand*d, and d resets after 2 minutes without a backoff. */
static uint64_t wait_then(struct api_source *as, enum next next, uint64_t extra)
{
        uint64_t wait = backoff_next(&as->backoff, mono_usec()) + extra;

        /* A streaming list cut short is started again, never watched on
         * from a version its events reached. */
        as->next = as->wl_initial && next == NEXT_WATCH ? NEXT_LIST : next;
        as->phase = PHASE_IDLE;
        log_debug("api source: retrying in %.1f s", (double)wait / 1e6);
        loop_timer_arm(as->timer, wait);
        return wait;
}

/*
 * How long a list after a 410 at now must wait for the budget
 * (API_RELIST_BURST lists, then one per API_RELIST_REFILL_SPREADS
 * spreads), and the list is counted: a generic cell rate check, O(1) and
 * one word of state.  0 while tokens are left.
 */
static uint64_t relist_budget(struct api_source *as, uint64_t now)
{
        const uint64_t refill = API_RELIST_REFILL_SPREADS * as->relist_spread;
        const uint64_t tau = (API_RELIST_BURST - 1) * refill;
        uint64_t tat = as->relist_tat > now ? as->relist_tat : now;
        uint64_t wait = tat - now > tau ? tat - now - tau : 0;

        as->relist_tat = tat + refill;
        return wait;
}

/* The list after a 410: the backoff, then a random part of the spread
 * (API_RELIST_SPREAD_USEC: a fleet whose server lost its history lists
 * over the spread, not at once), and, once the budget is spent (a server
 * that keeps losing its history), the wait for its next token.  The store
 * is kept meanwhile. */
static void relist_after_gone(struct api_source *as)
{
        /* --relist-spread 0 (a node alone, the tests) turns the budget
         * off too: both are for fleets. */
        uint64_t budget = as->relist_spread ? relist_budget(as, mono_usec()) : 0;
        uint64_t wait = wait_then(as, NEXT_LIST, clock_jitter(as->relist_spread) + budget);

        if (budget)
                log_warn("api source: listing in %.1f s: the server keeps losing its history (%u lists after a 410 "
                         "within %.0f s: one more every %.0f s)",
                         (double)wait / 1e6, API_RELIST_BURST,
                         (double)(API_RELIST_BURST * API_RELIST_REFILL_SPREADS * as->relist_spread) / 1e6,
                         (double)(API_RELIST_REFILL_SPREADS * as->relist_spread) / 1e6);
        else if (as->relist_spread)
                log_info("api source: listing in %.1f s (after a 410 the lists of a fleet spread over %.0f s)",
                         (double)wait / 1e6, (double)as->relist_spread / 1e6);
}

/* The answer that ends a cycle may have asked for a pause (429, or >=
 * 500, with Retry-After) that maybe_retry_after() no longer grants, its
 * retries spent: the backoff comes on top of it (util/retry_after.h).
 * client-go's alone would send the next request 0.8 s after such an
 * answer, before the time the server asked for (doc/api-source.md 7.2). */
static void back_off(struct api_source *as, enum next next)
{
        (void)wait_then(as, next, retry_after_left(&as->ra, as->status));
        /* The server refused or could not be reached: a checkpoint
         * loaded waits no longer for the grace. */
        serve_checkpoint(as, as->failing.said);
}

/*
 * A request got no answer at all (nothing listens, the connection failed
 * or was lost before the status line): the server is down or restarting.
 * The pause is the reconnect's, with full jitter (a random part of d, d
 * doubling from API_BACKOFF_INITIAL_USEC to API_RECONNECT_CAP_USEC), and
 * the reflector's backoff does not grow: once the server is back every
 * node has tried again within the cap, and the cycle's backoff is kept
 * for what the server said (doc/api-source.md 7.4).
 */
static void back_off_reconnect(struct api_source *as, enum next next)
{
        uint64_t d = backoff_next(&as->reconnect, 0);
        uint64_t wait = clock_jitter(d);

        as->next = as->wl_initial && next == NEXT_WATCH ? NEXT_LIST : next;
        as->phase = PHASE_IDLE;
        log_debug("api source: retrying in %.1f s (no answer from the server)", (double)wait / 1e6);
        loop_timer_arm(as->timer, wait);
        /* The server refused or could not be reached: a checkpoint
         * loaded waits no longer for the grace. */
        serve_checkpoint(as, as->failing.said);
}

/* The server cannot go on from the checkpoint's version: a 410, or a
 * version it does not have (its history was restored or replaced).  A
 * list from resourceVersion 0 follows, as at any start, when the backoff
 * and the relist spread have passed, as after any 410.  The server
 * answered, so the checkpoint is not served for this; the grace still
 * runs. */
static void resume_failed(struct api_source *as, const char *why)
{
        log_warn("api source: cannot watch on from resourceVersion %s: %s: listing", as->last_rv ? as->last_rv : "?",
                 why);
        as->resuming = false;
        free(as->last_rv);
        as->last_rv = NULL;
        as->relisted_unset = 0;
        as->rv_unavailable = 0;
        relist_after_gone(as);
}

static void on_timer(struct loop_timer *t, void *data)
{
        struct api_source *as = data;

        switch (as->next) {
        case NEXT_LIST:
                start_list(as);
                break;
        case NEXT_WATCH:
                start_watch(as);
                break;
        case NEXT_RETRY:
                send_request(as);
                break;
        }
}

/* 429, or >= 500, with an integer Retry-After: the same request again after
 * that many seconds, up to API_MAX_RETRY_AFTER times (util/retry_after.h). */
static int maybe_retry_after(struct api_source *as)
{
        uint64_t wait;

        if (!retry_after_retry(&as->ra, as->status, &wait))
                return 0;
        as->next = NEXT_RETRY;
        /* Said for the first retry of a request, unless the source is
         * failing already (then say() has spoken). */
        if (as->ra.retries == 1 && !episode_failing(&as->failing))
                log_info("api source: HTTP %ld: retrying after %ld s (Retry-After)", as->status, as->ra.seconds);
        else
                log_debug("api source: HTTP %ld: retrying after %ld s (Retry-After)", as->status, as->ra.seconds);
        loop_timer_arm(as->timer, wait);
        return 1;
}

static int too_large_rv(const struct buf *body, long status)
{
        return status == 504 && strstr(body->data, "ResourceVersionTooLarge");
}

/* The pages gathered replace the store, and the list's version the last
 * one: both or neither.  A listed pod the same as the one stored under its
 * key (pod_same) gives way to that one, which the merger may store too
 * (src/core/pod.h): a relist that changed nothing leaves one copy of
 * each pod, not two.  0 or -ENOMEM.  O(n) in the listed pods: inherent, a
 * list is the whole state. */
static int replace_store(struct api_source *as)
{
        struct strmap *fresh = strmap_new_borrowed();
        char *rv = NULL;
        size_t it = 0;
        void *v;

        if (!fresh || (as->list_rv && !(rv = strdup(as->list_rv)))) {
                strmap_free(fresh, NULL);
                return -ENOMEM;
        }
        while (strmap_next(as->pages, &it, NULL, &v)) {
                struct pod *listed = v, *stored = strmap_get(as->store, pod_key(listed));

                if (!stored || stored == listed || !pod_same(stored, listed))
                        continue;
                /* Replacing a present key's value never allocates. */
                (void)strmap_put(as->pages, pod_key(stored), pod_ref(stored), NULL);
                pod_unref(listed);
        }
        /* Replace, not merge: pods missing from the list are gone. */
        api_store_free(as->store);
        as->store = as->pages;
        as->pages = fresh;
        free(as->last_rv);
        as->last_rv = rv;
        return 0;
}

/* A page of the list came (HTTP 200): it is decoded into the pages, then
 * the next page is asked for, or, the list complete, it replaces the store
 * and the watch starts.  Any error backs off, the store as it was. */
static void list_page(struct api_source *as)
{
        struct buf why = BUF_INIT;
        char *rv = NULL, *cont = NULL;
        int r = list_decoder_finish(as->ldec, as->pages, &rv, &cont, &why);

        if (r < 0) {
                /* Nothing of the list is applied: the store stays. */
                list_decoder_reset(as->ldec);
                report(as, false, r != -ENOMEM, "list: %s", r == -ENOMEM ? "out of memory" : why.len ? why.data : "?");
                buf_free(&why);
                back_off(as, NEXT_LIST);
                return;
        }
        if (!as->list_rv) {
                as->list_rv = rv;
                rv = NULL;
        }
        free(rv);
        if (cont) {
                free(as->cont);
                as->cont = cont;
                retry_after_request(&as->ra);
                as->list_had_pages = true;
                if (build_list_url(as) < 0) {
                        report(as, false, false, "list: out of memory");
                        back_off(as, NEXT_LIST);
                        return;
                }
                send_request(as);
                return;
        }
        if (replace_store(as) < 0) {
                report(as, false, false, "list: out of memory");
                back_off(as, NEXT_LIST);
                return;
        }
        as->rv_unavailable = 0;
        as->relisted_unset = 0;
        if (as->list_had_pages && as->list_rv_asked && strcmp(as->list_rv_asked, "0") == 0)
                as->paginated_result = true;
        log_debug("api source: listed %zu pod(s) at resourceVersion %s", strmap_size(as->store),
                  as->last_rv ? as->last_rv : "?");
        recovered(as, "listing");
        went_live(as);
        push(as);
        /* What decoding the list freed goes back to the system. */
        mem_give_back();
        start_watch(as);
}

/* The list was answered with another status than 200: retried after
 * Retry-After, listed again (without paging, or at the latest state), or
 * reported and backed off from. */
static void list_refused(struct api_source *as)
{
        struct buf why = BUF_INIT;

        if (maybe_retry_after(as))
                return;
        (void)kube_describe_status(as->body.data, as->body.len, as->status, &why);
        if (as->status == 410 && as->cont) {
                /* The continue token expired: one unpaged list instead. */
                log_warn("api source: list: continue token expired: listing again without paging");
                as->continue_fallback = 1;
                start_list(as);
        } else if ((as->status == 410 || too_large_rv(&as->body, as->status)) && !as->relisted_unset) {
                log_warn("api source: list at resourceVersion %s: %s: listing the latest state",
                         as->list_rv_asked ? as->list_rv_asked : "(unset)", why.len ? why.data : "?");
                as->rv_unavailable = 1;
                as->relisted_unset = 1;
                start_list(as);
        } else if (as->status == 404 && !as->ckpt_loaded && as->serving != API_SERVING_CHECKPOINT) {
                /* The reflector syncs an empty list, then backs off. */
                struct strmap *empty = strmap_new_borrowed();

                report(as, false, false, "list: %s: no pods", why.len ? why.data : "?");
                if (empty) {
                        api_store_free(as->store);
                        as->store = empty;
                        push(as);
                }
                back_off(as, NEXT_LIST);
        } else {
                if (as->status == 401)
                        kube_client_unauthorized(as->kube);
                report(as, false, false, "list: %s", why.len ? why.data : "?");
                back_off(as, NEXT_LIST);
        }
        buf_free(&why);
}

/* What went wrong with a request that got no answer: its kind first
 * (kube_describe_failure, taken before the handle was cleaned up). */
static const char *failure_text(const struct api_source *as, CURLcode result)
{
        return as->failure.len ? as->failure.data : curl_easy_strerror(result);
}

static void list_done(struct api_source *as, CURLcode result)
{
        if (as->list_bad) {
                /* The body said enough: it cannot be a PodList. */
                list_page(as);
                return;
        }
        if (result != CURLE_OK) {
                /* Nothing of the list is applied: the store stays, and the
                 * pods of the part that came go now. */
                list_decoder_reset(as->ldec);
                report(as, false, false, "list failed: %s", as->body_oom ? "out of memory" : failure_text(as, result));
                if (as->status == 0 && !as->body_oom && result != CURLE_OUT_OF_MEMORY)
                        back_off_reconnect(as, NEXT_LIST);
                else
                        back_off(as, NEXT_LIST);
                return;
        }
        if (as->status == 200)
                list_page(as);
        else
                list_refused(as);
}

static void watch_done(struct api_source *as, CURLcode result)
{
        struct buf why = BUF_INIT;
        uint64_t lasted = mono_usec() - as->watch_start;
        uint64_t wait;

        if (as->stats)
                as->stats->watch_restarts++;
        /* A watch answered 200 that brought an event or ran past
         * API_WATCH_HEALTHY_USEC is a working cycle: the failures before
         * it are over, and the next failure waits the first pause again
         * (client-go forgets them only after 2 minutes without one, so a
         * server that restarts twice within that time had its nodes wait
         * the cap: doc/api-source.md 7.1).  A watch closed at once, or
         * ended at once by an ERROR event, proves nothing. */
        if (as->status == 200 && (as->watch_events || lasted >= API_WATCH_HEALTHY_USEC))
                backoff_reset(&as->backoff);

        if (as->watch_oom || result == CURLE_OUT_OF_MEMORY) {
                /* Every event before was applied whole, and the last
                 * version moved with each: the watch resumes from it. */
                report(as, false, false, "watch: out of memory: watching again from resourceVersion %s",
                       as->last_rv ? as->last_rv : "?");
                back_off(as, NEXT_WATCH);
                return;
        }
        if (as->watch_error) {
                /* An ERROR event ends this list+watch cycle: the next
                 * list waits for the backoff, as client-go's does after
                 * every cycle that ends in an error, 410 included (a server
                 * answering every watch with 410 would otherwise be listed
                 * and watched in a tight loop).  After a 410 the list is
                 * from lastRV ("not older than"); a second 410 lists with no
                 * RV. */
                if (as->resuming) {
                        resume_failed(as, as->watch_error_code == 410 ? "410 Expired" : "the server ended the watch");
                        return;
                }
                if (as->watch_error_code == 410) {
                        as->relisted_unset = 0;
                        relist_after_gone(as);
                        return;
                }
                back_off(as, NEXT_LIST);
                return;
        }
        if (as->status == 0 && result != CURLE_OK) {
                report(as, true, false, "watch: %s", failure_text(as, result));
                /* A reset or EOF before any answer, during the TLS
                 * handshake too (a server or load balancer restarting):
                 * the same request again as if the server had said
                 * Retry-After: 1, as client-go takes a probable EOF.  A
                 * certificate that fails verification is no EOF: that
                 * ends the cycle (a relist after the backoff). */
                if ((result == CURLE_RECV_ERROR || result == CURLE_SEND_ERROR || result == CURLE_GOT_NOTHING ||
                     result == CURLE_SSL_CONNECT_ERROR) &&
                    retry_after_as_if(&as->ra, 1, &wait)) {
                        as->next = NEXT_RETRY;
                        loop_timer_arm(as->timer, wait);
                        return;
                }
                /* A failed connection says nothing of the version: a
                 * resumed start tries the watch again. */
                back_off_reconnect(as, result == CURLE_COULDNT_CONNECT || as->resuming ? NEXT_WATCH : NEXT_LIST);
                return;
        }
        if (as->status != 200) {
                if (maybe_retry_after(as))
                        return;
                (void)kube_describe_status(as->body.data, as->body.len, as->status, &why);
                if (as->wl_initial && (as->status == 410 || too_large_rv(&as->body, as->status)) &&
                    !as->relisted_unset) {
                        /* As a list's: once more from the latest state. */
                        as->rv_unavailable = 1;
                        as->relisted_unset = 1;
                        buf_free(&why);
                        start_list(as);
                        return;
                }
                if (as->wl_initial && as->status >= 400 && as->status < 500 && as->status != 401 && as->status != 410 &&
                    as->status != 429) {
                        /* 400, 403, 404, 422...: the server's word on the
                         * parameters (client-go falls back on any). */
                        watch_list_refused(as, why.len ? why.data : "?");
                        buf_free(&why);
                        return;
                }
                if (as->resuming && (as->status == 410 || too_large_rv(&as->body, as->status))) {
                        resume_failed(as, why.len ? why.data : "?");
                        buf_free(&why);
                        return;
                }
                report(as, false, false, "watch: %s", why.len ? why.data : "?");
                buf_free(&why);
                if (as->status == 401)
                        kube_client_unauthorized(as->kube);
                if (as->status == 410) {
                        as->relisted_unset = 0;
                        relist_after_gone(as);
                        return;
                }
                back_off(as, as->status == 429 || as->resuming ? NEXT_WATCH : NEXT_LIST);
                return;
        }
        if (as->wl_initial) {
                report(as, true, false, "streaming list: the watch ended before the end of its initial events");
                back_off(as, NEXT_LIST);
                return;
        }
        /* The stream ended without an ERROR event: clean close, reset or a
         * truncated chunk.  Re-watch at once, unless it was a very short
         * watch with no event (a server that accepts and drops). */
        if (lasted < API_WATCH_HEALTHY_USEC && as->watch_events == 0) {
                report(as, true, false, "watch closed at once with no event: backing off");
                back_off(as, as->resuming ? NEXT_WATCH : NEXT_LIST);
                return;
        }
        if (result != CURLE_OK)
                log_debug("api source: watch ended: %s: watching again from %s", curl_easy_strerror(result),
                          as->last_rv ? as->last_rv : "?");
        else
                recovered(as, "watching");
        if (as->resuming && result == CURLE_OK)
                resumed(as, "a watch that ran its course");
        as->confirmed = wall_usec();
        start_watch(as);
}

/* No response headers in time: the connection is as good as dropped. */
static void on_header_timeout(struct loop_timer *t, void *data)
{
        struct api_source *as = data;

        if (!as->easy)
                return;
        curl_loop_cancel(as->cl, &as->easy);
        if (as->phase == PHASE_WATCH && as->watch_drain) {
                /* The response did not end after its ERROR event: the
                 * connection is dropped, the event stands. */
                as->watch_open = false;
                watch_done(as, CURLE_OK);
                return;
        }
        report(as, true, false, "%s: no response from the server within %llu s",
               as->phase == PHASE_LIST ? "list" : "watch", API_RESPONSE_TIMEOUT_USEC / 1000000ull);
        back_off(as, as->phase == PHASE_WATCH ? NEXT_WATCH : NEXT_LIST);
}

static void on_done(void *data, CURL *easy, CURLcode result)
{
        struct api_source *as = data;

        loop_timer_stop(as->hdr_timer);
        loop_timer_stop(as->wl_timer);
        as->easy = NULL;
        as->watch_open = false;
        if (as->status == 0)
                curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &as->status);
        buf_reset(&as->failure);
        /* Out of memory here: curl's own words are said instead. */
        if (result != CURLE_OK && kube_describe_failure(easy, result, &as->failure) < 0)
                buf_reset(&as->failure);
        curl_easy_cleanup(easy);
        if (as->guard.mangled) {
                /* The server answered another request than the one meant
                 * (libcurl lost the query: a list of the whole cluster). */
                report(as, false, false, "%s: libcurl sent the request without its query (out of memory): "
                                         "not used", as->phase == PHASE_LIST ? "list" : "watch");
                back_off(as, as->phase == PHASE_WATCH ? NEXT_WATCH : NEXT_LIST);
                return;
        }
        if (as->phase == PHASE_LIST)
                list_done(as, result);
        else if (as->phase == PHASE_WATCH)
                watch_done(as, result);
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

int api_source_new(struct loop *loop, struct curl_loop *cl, struct mux_channel *ch,
                   const struct api_source_config *cfg, struct api_source **ret_as,
                   struct buf *err)
{
        struct api_source *as = calloc(1, sizeof(*as));
        int r = -ENOMEM;

        if (!as) {
                if (err)
                        buf_reset(err);
                return -ENOMEM;
        }
        as->loop = loop;
        buf_init(&as->body);
        buf_init(&as->failure);
        as->cl = cl;
        as->ch = ch;
        as->kube = cfg->kube;
        as->stats = cfg->stats;
        as->backoff = BACKOFF_INIT(API_BACKOFF_INITIAL_USEC, API_BACKOFF_CAP_USEC);
        as->backoff.reset_after = API_BACKOFF_RESET_USEC;
        as->backoff.jitter = 1;
        as->backoff.rand = clock_jitter;
        as->reconnect = BACKOFF_INIT(API_BACKOFF_INITIAL_USEC, API_RECONNECT_CAP_USEC);
        as->push_retry = BACKOFF_INIT(API_PUSH_RETRY_USEC, API_BACKOFF_CAP_USEC);
        as->ra = RETRY_AFTER_INIT;
        as->node_enc = pct_encode(cfg->node_name);
        as->store = strmap_new_borrowed();
        as->pages = strmap_new_borrowed();
        as->dec = watch_decoder_new();
        as->ldec = list_decoder_new();
        if (!as->node_enc || !as->store || !as->pages || !as->dec || !as->ldec)
                goto fail;
        source_stats_target(as->stats, kube_client_server(as->kube));
        if ((r = loop_timer_new(loop, on_timer, as, &as->timer)) < 0 ||
            (r = loop_timer_new(loop, on_header_timeout, as, &as->hdr_timer)) < 0 ||
            (r = loop_timer_new(loop, on_push_timer, as, &as->push_timer)) < 0 ||
            (r = loop_timer_new(loop, on_wl_timer, as, &as->wl_timer)) < 0)
                goto fail;
        as->wl_on = cfg->watch_list;
        as->wl_wait = API_WATCH_LIST_WAIT_USEC;
        as->state_fn = cfg->state;
        as->state_data = cfg->state_data;
        as->relist_spread = cfg->relist_spread_usec;
        as->serving = API_SERVING_WAITING;
        if (as->stats)
                as->stats->serving = serving_names[API_SERVING_WAITING];
        if (cfg->checkpoint.dir && (r = checkpoint_setup(as, cfg, err)) < 0)
                goto fail;
        *ret_as = as;
        return 0;
fail:
        if (r == -ENOMEM && err)
                buf_reset(err); /* a failure replaces what err held */
        api_source_free(as);
        return r;
}

void api_source_set_pauses(struct api_source *as, uint64_t backoff_usec, uint64_t push_retry_usec)
{
        as->backoff.base = backoff_usec;
        as->reconnect.base = backoff_usec;
        as->push_retry.base = push_retry_usec;
}

void api_source_set_watch_list_wait(struct api_source *as, uint64_t usec)
{
        as->wl_wait = usec;
}

int api_source_start(struct api_source *as)
{
        log_info("api source: listing and watching the pods of this node on %s", kube_client_server(as->kube));
        if (as->writer) {
                load_checkpoint(as);
                if (as->ckpt_loaded)
                        loop_timer_arm(as->grace_timer, as->ckpt_grace);
                if (as->ckpt_loaded && resume(as)) {
                        start_watch(as);
                        return 0;
                }
        }
        start_list(as);
        return 0;
}

void api_source_free(struct api_source *as)
{
        if (!as)
                return;
        curl_loop_cancel(as->cl, &as->easy);
        checkpoint_writer_free(as->writer);
        checkpoint_free(&as->ckpt);
        loop_timer_free(as->grace_timer);
        free(as->ckpt_dir);
        free(as->node_name);
        episode_free(&as->write_failing);
        loop_timer_free(as->timer);
        loop_timer_free(as->hdr_timer);
        loop_timer_free(as->push_timer);
        loop_timer_free(as->wl_timer);
        curl_slist_free_all(as->hdrs);
        api_store_free(as->store);
        api_store_free(as->pages);
        watch_decoder_free(as->dec);
        list_decoder_free(as->ldec);
        buf_free(&as->body);
        buf_free(&as->failure);
        free(as->url);
        free(as->last_rv);
        free(as->list_rv_asked);
        free(as->list_rv);
        free(as->cont);
        free(as->node_enc);
        episode_free(&as->failing);
        free(as);
}
