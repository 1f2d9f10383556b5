/*
 * http_source — the manifest URL source (see src/sources/http_source.h
 * and doc/pod-config.md section 7).
 *
 * One poll: GET with the configured headers; transport error (a body cut
 * short included), non-200 or an oversized body -> error, nothing sent
 * (the merger keeps the last pods); empty body -> empty SET (source seen)
 * and the remembered body is forgotten (podmux deviation: the kubelet
 * keeps it and would then ignore the same content coming back); a body
 * identical to the last one -> no update; otherwise decode as a Pod or a
 * PodList and send a SET, or report why not.  A bad body is remembered,
 * so it is reported once while it stays the same; a good one only once
 * its SET is queued.
 *
 * Running out of memory (or libcurl saying so) is never the body's fault:
 * it is logged and counted, nothing is sent, nothing is remembered, and
 * the poll is tried again after the retry backoff (1 s doubling to the period).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/backoff.h"
#include "util/digest.h"
#include "sources/file_records.h"
#include "sources/http_source.h"
#include "util/log.h"
#include "sources/manifest.h"
#include "sources/source_episode.h"
#include "core/mux.h"

struct http_source {
        struct loop *loop;
        struct curl_loop *cl;
        struct mux_channel *ch;
        char *url;
        char *url_log;
        char *node_name;
        struct source_stats *stats; /* may be NULL */
        struct curl_slist *headers;
        uint64_t period;
        uint64_t timeout;
        struct loop_timer *timer;
        CURL *easy;            /* the transfer in flight, or NULL */
        struct curl_guard guard; /* of that transfer */
        struct buf body;       /* of the transfer in flight */
        int body_too_large;
        int body_oom;          /* the body could not be kept */
        /* The last non-empty body that was decoded and its SET queued
         * (last_ok), or found bad (!last_ok); NULL if none. */
        char *last_body;
        size_t last_len;
        int last_ok;           /* last_body decoded into pods */
        struct episode unknown; /* the unknown fields last warned about (util/episode.h) */
        struct episode failing; /* the polls failing in a row (util/episode.h) */
        bool empty_warned;     /* the body is empty, and that was said */
        struct backoff retry;  /* after a resource failure (http_source.h) */
        int resource_failed;   /* this poll failed for want of a resource */
        void (*rejected)(void *data, const char *source, const char *where, const char *reason);
        void *rejected_data;
        /* The URL's record (keyed by url_log; shown once a body was
         * read: rec->have_digest), and the pods of the last good body:
         * n_pods times "key\0uid\0", and a view of each pointing into
         * it, made with them so that showing the record allocates
         * nothing. */
        struct file_records recs;
        struct frec *rec;
        char *pods;
        struct file_record_pod *views;
        size_t n_pods;
};

char *http_redact_url(const char *url)
{
        CURLU *u = curl_url();
        char *out = NULL, *tmp = NULL;
        CURLUcode uc;

        if (!u)
                return NULL;
        uc = curl_url_set(u, CURLUPART_URL, url, 0);
        if (uc == CURLUE_OK) {
                /* Clearing a part frees it: it cannot fail. */
                curl_url_set(u, CURLUPART_USER, NULL, 0);
                curl_url_set(u, CURLUPART_PASSWORD, NULL, 0);
                curl_url_set(u, CURLUPART_QUERY, NULL, 0);
                curl_url_set(u, CURLUPART_FRAGMENT, NULL, 0);
                uc = curl_url_get(u, CURLUPART_URL, &tmp, 0);
                if (uc == CURLUE_OK) {
                        out = strdup(tmp);
                        curl_free(tmp);
                }
        }
        if (uc != CURLUE_OK && uc != CURLUE_OUT_OF_MEMORY)
                out = strdup("(unparsable URL)");
        curl_url_cleanup(u);
        return out;
}

/* A failed poll, counted every time.  Logged once per distinct reason
 * (the kubelet logs three in a row, then only at high verbosity; a
 * server down for an hour would still repeat a line per period here):
 * the same reason again is logged at debug; retry (0: none) is when the
 * poll is tried again, said but not part of the reason. */
static void report_failure(struct http_source *hs, const char *detail, bool parse, uint64_t retry)
{
        char again[64] = "";

        if (retry)
                (void)snprintf(again, sizeof(again), ": trying again in %.1f s", (double)retry / 1e6);
        (void)source_episode_fail(hs->stats, &hs->failing, parse, LOG_LEVEL_ERROR, detail, "http source \"%s\": %s%s",
                                  hs->url_log, detail, again);
}

static void report_success(struct http_source *hs)
{
        source_stats_success(hs->stats, METRICS_PODS_UNCHANGED);
        (void)source_episode_clear(hs->stats, &hs->failing, "http source \"%s\": succeeded again after %u failure(s)",
                                   hs->url_log, hs->failing.failures);
}

/*
 * Memory (or, through libcurl, a resource) ran out: not the server's
 * fault and not the body's.  Nothing was sent and nothing is remembered;
 * the poll is tried again after 1 s doubling to the period.
 */
static void resource_failure(struct http_source *hs, const char *what, int r)
{
        char detail[256];

        (void)backoff_next(&hs->retry, 0);
        hs->resource_failed = 1;
        (void)snprintf(detail, sizeof(detail), "%s: %s", what, ERRNO_STR(r));
        report_failure(hs, detail, false, hs->retry.delay);
}

/* ---- the URL's record ---------------------------------------------------- */

/* The record as a view (src/sources/file_records.h). */
static void record_view(void *data, const struct frec *r, struct file_record_view *v, struct file_record_pod *pod)
{
        const struct http_source *hs = data;

        *v = (struct file_record_view){
                .source = POD_SOURCE_HTTP,
                .path = hs->url_log,
                .state = (enum file_record_state)r->state,
                .reason = r->text,
                .digest = r->digest,
                .size = r->size,
                .pods = hs->views,
                .n_pods = hs->n_pods,
                .seq = r->seq,
        };
}

/* The identities of u's pods, for the record: "key\0uid\0" each, and a
 * view of each into them.  0, or -ENOMEM with nothing made. */
static int pod_idents(const struct pod_update *u, char **ret_text, struct file_record_pod **ret_views)
{
        struct file_record_pod *views = calloc(u->n_pods ? u->n_pods : 1, sizeof(*views));
        struct buf b = BUF_INIT;
        const char *p;

        for (size_t i = 0; views && i < u->n_pods; i++)
                if (buf_append(&b, pod_key(u->pods[i]), strlen(pod_key(u->pods[i])) + 1) < 0 ||
                    buf_append(&b, pod_uid(u->pods[i]), strlen(pod_uid(u->pods[i])) + 1) < 0)
                        goto nomem;
        if (!views)
                goto nomem;
        *ret_text = u->n_pods ? buf_steal(&b, NULL) : NULL;
        if (u->n_pods && !*ret_text)
                goto nomem;
        p = *ret_text;
        for (size_t i = 0; i < u->n_pods; i++) {
                views[i].key = p;
                p += strlen(p) + 1;
                views[i].uid = p;
                p += strlen(p) + 1;
        }
        *ret_views = views;
        return 0;
nomem:
        buf_free(&b);
        free(views);
        return -ENOMEM;
}

/* A body read: digest into d.  0 or -ENOMEM. */
static int body_digest(const struct http_source *hs, uint8_t d[DIGEST_LEN])
{
        return digest_sha256(hs->body.data, hs->body.len, d);
}

/* The body with digest d was refused for reason: rejected (the pods the
 * merger keeps stay named).  0, or -ENOMEM with the record unchanged. */
static int record_rejected(struct http_source *hs, const uint8_t d[DIGEST_LEN], const char *reason)
{
        char *copy = file_record_reason_dup(reason);

        if (!copy)
                return -ENOMEM;
        file_records_bytes(&hs->recs, hs->rec, d, (int64_t)hs->body.len, 0);
        file_records_set_text(&hs->recs, hs->rec, FILE_RECORD_REJECTED, copy);
        file_records_flush(&hs->recs);
        return 0;
}

/* ---- polling ---------------------------------------------------------------- */

/* The pods as a SET on the channel; the record is pending on it, with
 * digest d.  0, or -ENOMEM with nothing sent (a pod that cannot be built
 * is never left out of a SET). */
static int send_pods(struct http_source *hs, json_object *arr, const uint8_t d[DIGEST_LEN])
{
        struct pod_update *u = pod_update_new(POD_OP_SET, POD_SOURCE_HTTP);
        size_t n = arr ? json_object_array_length(arr) : 0, n_pods;
        struct file_record_pod *views = NULL;
        char *idents = NULL;

        if (!u)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                struct pod *p = NULL;
                int r = pod_from_json(json_object_array_get_idx(arr, i), &p, NULL);

                if (r == 0)
                        r = pod_update_add(u, p);
                pod_unref(p);
                if (r < 0) {
                        /* The pods were decoded and checked already: only
                         * memory can fail here. */
                        pod_update_free(u);
                        return -ENOMEM;
                }
        }
        n_pods = u->n_pods;
        if (pod_idents(u, &idents, &views) < 0) {
                pod_update_free(u);
                return -ENOMEM;
        }
        if (mux_channel_send(hs->ch, u) < 0) {
                free(idents);
                free(views);
                return -ENOMEM;
        }
        source_stats_success(hs->stats, n_pods);
        file_records_bytes(&hs->recs, hs->rec, d, (int64_t)hs->body.len, 0);
        file_records_pending(&hs->recs, hs->rec, mux_channel_sent(hs->ch));
        free(hs->pods);
        free(hs->views);
        hs->pods = idents;
        hs->views = views;
        hs->n_pods = n_pods;
        file_records_touch(&hs->recs, hs->rec); /* its pods */
        file_records_flush(&hs->recs);
        return 0;
}

/* Forgets the remembered body, then remembers the one just polled. */
static void remember_body(struct http_source *hs, int ok)
{
        free(hs->last_body);
        /* A non-empty buffer is handed over: this allocates nothing. */
        hs->last_body = buf_steal(&hs->body, &hs->last_len);
        if (!hs->last_body)
                hs->last_len = 0;
        hs->last_ok = ok;
}

static void forget_body(struct http_source *hs)
{
        free(hs->last_body);
        hs->last_body = NULL;
        hs->last_len = 0;
        hs->last_ok = 0;
}

/* The next poll: one period after this one, or the retry pause after a
 * resource failure (any other outcome ends the retries). */

/* Warns about the fields the body has that v1 does not define (dropped,
 * as the kubelet drops them) when that list changes. */
static void warn_unknown(struct http_source *hs, const struct v1_unknown *u)
{
        struct buf list = BUF_INIT;

        if (u->total == 0) {
                (void)episode_clear(&hs->unknown, NULL);
                return;
        }
        if (v1_unknown_join(u, &list) < 0 || !episode_fail(&hs->unknown, list.data))
                goto out;
        log_warn("http source \"%s\": unknown fields ignored (not in core/v1 of Kubernetes %s): %s", hs->url_log,
                 v1_schema_kubernetes, list.data);
out:
        buf_free(&list);
}

static void schedule_next(struct http_source *hs)
{
        if (!hs->resource_failed)
                backoff_reset(&hs->retry);
        hs->resource_failed = 0;
        loop_timer_arm(hs->timer, hs->retry.delay ? hs->retry.delay : hs->period);
}

static void handle_body(struct http_source *hs)
{
        struct manifest_ctx ctx = {
                .origin = MANIFEST_ORIGIN_URL,
                .node_name = hs->node_name,
                .location = hs->url,
        };
        struct v1_unknown unknown = {NULL, 0, 0};
        struct buf err = BUF_INIT;
        json_object *pods = NULL;
        const char *data = hs->body.data;
        size_t len = hs->body.len;
        uint8_t d[DIGEST_LEN];
        int r;

        if (body_digest(hs, d) < 0) {
                resource_failure(hs, "out of memory naming the body", -ENOMEM);
                return;
        }
        if (len == 0) {
                /* An empty body means "no pods": they are removed and the
                 * source counts as seen, as in the kubelet. */
                forget_body(hs);
                r = send_pods(hs, NULL, d);
                if (r < 0) {
                        resource_failure(hs, "cannot queue the empty update", r);
                        return;
                }
                report_success(hs);
                /* The kubelet reports this as an error after sending,
                 * at every poll; here once while it stays empty. */
                if (!hs->empty_warned)
                        log_warn("http source \"%s\": zero-length body: no pods from this source", hs->url_log);
                else
                        log_debug("http source \"%s\": zero-length body", hs->url_log);
                hs->empty_warned = true;
                return;
        }
        hs->empty_warned = false;
        if (hs->last_body && hs->last_len == len && memcmp(hs->last_body, data, len) == 0) {
                /* An unchanged good body is a success (the failure count
                 * starts over, as in the kubelet); an unchanged bad body,
                 * already reported, is neither. */
                if (hs->last_ok)
                        report_success(hs);
                log_debug("http source \"%s\": content unchanged", hs->url_log);
                return;
        }
        r = manifest_decode_pods(data, len, &ctx, &pods, &unknown, &err);
        if (r == -ENOMEM) {
                resource_failure(hs, "out of memory decoding the body", r);
        } else if (r < 0 && record_rejected(hs, d, err.len ? err.data : "invalid manifest") < 0) {
                /* Not remembered: the poll is tried again. */
                resource_failure(hs, "out of memory recording the refused body", -ENOMEM);
        } else if (r < 0) {
                /* Remembered, so it is reported once while it stays. */
                report_failure(hs, err.len ? err.data : "invalid manifest", true, 0);
                if (hs->rejected)
                        hs->rejected(hs->rejected_data, POD_SOURCE_HTTP, hs->url_log,
                                     err.len ? err.data : "invalid manifest");
                remember_body(hs, 0);
        } else if ((r = send_pods(hs, pods, d)) < 0) {
                resource_failure(hs, "out of memory building the update", r);
        } else {
                warn_unknown(hs, &unknown);
                remember_body(hs, 1);
                report_success(hs);
        }
        v1_unknown_clear(&unknown);
        json_object_put(pods);
        buf_free(&err);
}

static void on_done(void *data, CURL *easy, CURLcode result)
{
        struct http_source *hs = data;
        long status = 0;
        struct buf msg = BUF_INIT;

        hs->easy = NULL;
        curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
        if (hs->guard.mangled) {
                /* Not the URL asked for: whatever came is not used. */
                resource_failure(hs, "libcurl sent the request without its query", -ENOMEM);
        } else if (hs->body_oom || result == CURLE_OUT_OF_MEMORY) {
                resource_failure(hs, "out of memory receiving the body", -ENOMEM);
        } else if (hs->body_too_large || result == CURLE_FILESIZE_EXCEEDED) {
                buf_printf(&msg, "response body too large (limit %u bytes): ignored",
                           MANIFEST_MAX_BYTES - 1);
                report_failure(hs, msg.data, false, 0);
        } else if (result != CURLE_OK) {
                buf_printf(&msg, "request failed: %s", curl_easy_strerror(result));
                report_failure(hs, msg.data, false, 0);
        } else if (status != 200) {
                buf_printf(&msg, "HTTP status %ld (want 200): keeping the last pods", status);
                report_failure(hs, msg.data, false, 0);
        } else {
                handle_body(hs);
        }
        buf_free(&msg);
        buf_reset(&hs->body);
        curl_easy_cleanup(easy);
        schedule_next(hs);
}

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *data)
{
        struct http_source *hs = data;
        size_t n = size * nmemb;

        if (hs->guard.mangled)
                return 0;
        /* Bodies of MANIFEST_MAX_BYTES or more are refused, like files. */
        if (hs->body.len + n >= MANIFEST_MAX_BYTES) {
                hs->body_too_large = 1;
                return 0;
        }
        if (buf_append(&hs->body, ptr, n) < 0) {
                hs->body_oom = 1;
                return 0;
        }
        return n;
}

/* libcurl copies string options, which may run out of memory. */
static int set_str(CURL *e, CURLoption opt, const char *v)
{
        return curl_easy_setopt(e, opt, v) == CURLE_OUT_OF_MEMORY ? -ENOMEM : 0;
}

static void poll_now(struct http_source *hs)
{
        CURL *e = curl_easy_init();
        int r;

        buf_reset(&hs->body);
        hs->body_too_large = 0;
        hs->body_oom = 0;
        if (!e) {
                resource_failure(hs, "cannot create an HTTP request", -ENOMEM);
                schedule_next(hs);
                return;
        }
        if ((r = set_str(e, CURLOPT_URL, hs->url)) < 0 ||
            (r = set_str(e, CURLOPT_PROTOCOLS_STR, "http,https")) < 0 ||
            (r = set_str(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https")) < 0 ||
            (r = set_str(e, CURLOPT_ACCEPT_ENCODING, "")) < 0 || /* every encoding libcurl has */
            (r = set_str(e, CURLOPT_USERAGENT, "podmux/" PODMUX_VERSION)) < 0) {
                curl_easy_cleanup(e);
                resource_failure(hs, "cannot set up the HTTP request", r);
                schedule_next(hs);
                return;
        }
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
        curl_easy_setopt(e, CURLOPT_MAXREDIRS, (long)HTTP_SOURCE_MAX_REDIRECTS);
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(hs->timeout / 1000u));
        curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)MANIFEST_MAX_BYTES - 1);
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, hs);
        if (hs->headers)
                curl_easy_setopt(e, CURLOPT_HTTPHEADER, hs->headers);
        curl_guard_arm(e, &hs->guard);
        r = curl_loop_add(hs->cl, e, on_done, hs);
        if (r < 0) {
                curl_easy_cleanup(e);
                if (r == -ENOMEM)
                        resource_failure(hs, "cannot start the HTTP request", r);
                else
                        report_failure(hs, "cannot start the HTTP request", false, 0);
                schedule_next(hs);
                return;
        }
        hs->easy = e;
}

static void on_timer(struct loop_timer *t, void *data)
{
        struct http_source *hs = data;

        if (!hs->easy)
                poll_now(hs);
}

static void on_merged(void *data, uint64_t through);

int http_source_new(struct loop *loop, struct curl_loop *cl, struct mux_channel *ch,
                    const struct http_source_config *cfg, struct http_source **ret_hs,
                    struct buf *err)
{
        struct http_source *hs;
        CURLU *u;
        int r = -ENOMEM;

        if (!cfg->url || !cfg->url[0])
                return buf_set_err(err, -EINVAL, "the manifest URL is empty");
        u = curl_url();
        if (!u)
                goto nomem;
        {
                char *scheme = NULL;
                CURLUcode uc = curl_url_set(u, CURLUPART_URL, cfg->url, 0);

                if (uc == CURLUE_OK)
                        uc = curl_url_get(u, CURLUPART_SCHEME, &scheme, 0);
                if (uc == CURLUE_OUT_OF_MEMORY) {
                        curl_url_cleanup(u);
                        goto nomem;
                }
                if (uc != CURLUE_OK || (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)) {
                        r = buf_set_err(err, -EINVAL, "--manifest-url: \"%s\" is not an http:// or https:// URL",
                                        uc == CURLUE_OK ? scheme : "(unparsable)");
                        curl_free(scheme);
                        curl_url_cleanup(u);
                        return r;
                }
                curl_free(scheme);
                curl_url_cleanup(u);
        }
        hs = calloc(1, sizeof(*hs));
        if (!hs)
                goto nomem;
        hs->loop = loop;
        buf_init(&hs->body);
        hs->cl = cl;
        hs->ch = ch;
        hs->period = cfg->period_usec ? cfg->period_usec : HTTP_SOURCE_DEFAULT_PERIOD_USEC;
        hs->retry = BACKOFF_INIT(cfg->retry_usec ? cfg->retry_usec : HTTP_SOURCE_RETRY_USEC, hs->period);
        hs->timeout = cfg->timeout_usec ? cfg->timeout_usec : HTTP_SOURCE_TIMEOUT_USEC;
        /* A request never outlives the period it belongs to. */
        if (hs->timeout > hs->period)
                hs->timeout = hs->period;
        if (hs->timeout < 1000)
                hs->timeout = 1000;
        hs->url = strdup(cfg->url);
        hs->url_log = http_redact_url(cfg->url);
        hs->node_name = strdup(cfg->node_name ? cfg->node_name : "");
        hs->stats = cfg->stats;
        hs->rejected = cfg->rejected;
        hs->rejected_data = cfg->rejected_data;
        if (!hs->url || !hs->url_log || !hs->node_name)
                goto fail;
        source_stats_target(hs->stats, hs->url_log);
        for (size_t i = 0; i < cfg->n_headers; i++) {
                struct buf line = BUF_INIT;
                struct curl_slist *n;

                /* "Name:" with an empty value would make libcurl drop the
                 * header; "Name;" sends it empty. */
                if (cfg->headers[i].value[0])
                        r = buf_printf(&line, "%s: %s", cfg->headers[i].name, cfg->headers[i].value);
                else
                        r = buf_printf(&line, "%s;", cfg->headers[i].name);
                n = r == 0 ? curl_slist_append(hs->headers, line.data) : NULL;
                r = -ENOMEM;
                buf_free(&line);
                if (!n)
                        goto fail;
                hs->headers = n;
        }
        if ((r = loop_timer_new(loop, on_timer, hs, &hs->timer)) < 0)
                goto fail;
        if ((r = file_records_init(&hs->recs, record_view, hs, cfg->record, cfg->record_data)) < 0 ||
            !(hs->rec = file_records_get(&hs->recs, hs->url_log, true)))
                goto fail;
        mux_channel_on_merged(ch, on_merged, hs);
        *ret_hs = hs;
        return 0;
fail:
        http_source_free(hs);
nomem:
        /* Every failure past the URL checks is for want of memory. */
        if (err)
                buf_reset(err); /* a failure replaces what err held */
        return -ENOMEM;
}

/* The mux merged the channel's records up to number through: a pending
 * body is applied, with the message that carried it (or the last one of
 * this source, when the merger found nothing new). */
static void on_merged(void *data, uint64_t through)
{
        struct http_source *hs = data;

        file_records_merged(&hs->recs, through);
}

void http_source_carried(struct http_source *hs, const struct pod_update *u, uint64_t seq)
{
        if (!u->source || strcmp(u->source, POD_SOURCE_HTTP) != 0)
                return;
        hs->recs.last_seq = seq;
        if (u->op != POD_OP_REMOVE)
                file_records_carried(hs->rec, seq);
}

int http_source_record(struct http_source *hs, int (*fn)(void *data, const struct file_record_view *v), void *data)
{
        struct file_record_view v;

        /* Its one record, shown directly: listing allocates. */
        if (!hs->rec->have_digest)
                return 0;
        record_view(hs, hs->rec, &v, NULL);
        return fn(data, &v);
}

int http_source_start(struct http_source *hs)
{
        poll_now(hs);
        return 0;
}

void http_source_poll(struct http_source *hs)
{
        if (!hs->easy) {
                loop_timer_stop(hs->timer);
                poll_now(hs);
        }
}

void http_source_free(struct http_source *hs)
{
        if (!hs)
                return;
        curl_loop_cancel(hs->cl, &hs->easy);
        if (hs->ch)
                mux_channel_on_merged(hs->ch, NULL, NULL);
        loop_timer_free(hs->timer);
        curl_slist_free_all(hs->headers);
        file_records_clear(&hs->recs);
        free(hs->pods);
        free(hs->views);
        buf_free(&hs->body);
        free(hs->last_body);
        episode_free(&hs->unknown);
        episode_free(&hs->failing);
        free(hs->url);
        free(hs->url_log);
        free(hs->node_name);
        free(hs);
}
