/*
 * review — TokenReview and SubjectAccessReview with caches (see
 * src/kube/review.h and doc/kube-api.md, "Who may read it").
 *
 * Each cache maps a SHA-256 (of the token, or of the access review's
 * body, which holds everything the decision depends on) to an entry:
 * either a review in flight, with the callers waiting on it, or a
 * decision with its expiry.  Decisions sit on a list in the order they
 * were made, which is the order they are evicted in when the cache is
 * full: O(1), and a cache full of fresh decisions evicts one that is
 * about to expire first among those of its TTL.  Entries in flight are
 * never evicted; a cache full of them refuses the new request (closed).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "kube/review.h"
#include "util/buf.h"
#include "util/digest.h"
#include "util/json_get.h"
#include "util/json_parse.h"
#include "util/strmap.h"

#define TOKEN_REVIEW_PATH "/apis/authentication.k8s.io/v1/tokenreviews"
#define ACCESS_REVIEW_PATH "/apis/authorization.k8s.io/v1/subjectaccessreviews"

enum kind { KIND_TOKEN, KIND_ACCESS };

struct entry;

struct review_wait {
        struct entry *e;
        struct review_wait *prev, *next;
        review_authn_fn authn;
        review_authz_fn authz;
        void *data;
};

struct cache {
        struct strmap *map;         /* borrowed keys: each entry's own */
        struct entry *first, *last; /* decisions, oldest first */
};

struct entry {
        struct review *r;
        enum kind kind;
        char key[DIGEST_TEXT_MAX];
        bool decided;
        bool listed; /* on the cache's list of decisions */
        enum review_outcome outcome;
        struct review_user *user; /* KIND_TOKEN and REVIEW_OK */
        char *reason;             /* a cached refusal's, for later callers */
        uint64_t expires;
        struct entry *prev, *next; /* the list of decisions */
        struct review_wait *waits, *waits_last;

        /* while in flight */
        CURL *easy;
        struct curl_slist *hdrs;
        char *body; /* a TokenReview's holds the token: wiped when freed */
        size_t body_len;
        struct buf answer;
        bool too_long; /* the answer passed REVIEW_BODY_MAX */
        struct curl_guard guard;
};

struct review {
        struct loop *loop;
        struct curl_loop *cl;
        struct kube_client *kube;
        size_t cache_max;
        size_t answer_max;
        uint64_t token_ttl, token_denied_ttl, allowed_ttl, denied_ttl;
        uint64_t (*now)(void *data);
        void *now_data;
        struct cache tokens, accesses;
        struct review_stats stats;
};

static uint64_t default_now(void *data)
{
        (void)data;
        return mono_usec();
}

static uint64_t now(const struct review *r)
{
        return r->now(r->now_data);
}

/* ---- users ----------------------------------------------------------------------------- */

struct review_user *review_user_ref(struct review_user *u)
{
        if (u)
                u->refs++;
        return u;
}

static void free_strv(char **v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

void review_user_unref(struct review_user *u)
{
        if (!u || --u->refs > 0)
                return;
        free(u->username);
        free(u->uid);
        free_strv(u->groups, u->n_groups);
        for (size_t i = 0; i < u->n_extra; i++) {
                free(u->extra[i].key);
                free_strv(u->extra[i].values, u->extra[i].n_values);
        }
        free(u->extra);
        free(u);
}

/* The strings of a JSON array (NULL: none) into a new vector.  0,
 * -EINVAL (not an array of strings) or -ENOMEM. */
static int strv_from_json(json_object *a, char ***ret_v, size_t *ret_n)
{
        size_t n = 0;
        char **v;

        *ret_v = NULL;
        *ret_n = 0;
        if (!a)
                return 0;
        if (!json_object_is_type(a, json_type_array))
                return -EINVAL;
        n = json_object_array_length(a);
        if (n == 0)
                return 0;
        if (!(v = calloc(n, sizeof(*v))))
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                json_object *s = json_object_array_get_idx(a, i);

                if (!json_object_is_type(s, json_type_string) || !(v[i] = strdup(json_object_get_string(s)))) {
                        free_strv(v, n);
                        return json_object_is_type(s, json_type_string) ? -ENOMEM : -EINVAL;
                }
        }
        *ret_v = v;
        *ret_n = n;
        return 0;
}

/* A TokenReview's status.user.  0, -EINVAL (no username, or members of
 * the wrong types) or -ENOMEM. */
static int user_from_json(json_object *o, struct review_user **ret_u)
{
        struct review_user *u = calloc(1, sizeof(*u));
        const char *name = json_get_str(o, "username", "");
        json_object *extra = json_get(o, "extra");
        int r = -ENOMEM;

        if (!u)
                return -ENOMEM;
        u->refs = 1;
        if (!name[0]) {
                r = -EINVAL;
                goto fail;
        }
        if (!(u->username = strdup(name)) || !(u->uid = strdup(json_get_str(o, "uid", ""))))
                goto fail;
        if ((r = strv_from_json(json_get(o, "groups"), &u->groups, &u->n_groups)) < 0)
                goto fail;
        if (extra) {
                size_t n;

                r = -EINVAL;
                if (!json_object_is_type(extra, json_type_object))
                        goto fail;
                n = (size_t)json_object_object_length(extra);
                r = -ENOMEM;
                if (n && !(u->extra = calloc(n, sizeof(*u->extra))))
                        goto fail;
                json_object_object_foreach(extra, k, vals) {
                        struct review_extra *x = &u->extra[u->n_extra];

                        if (!(x->key = strdup(k)))
                                goto fail;
                        u->n_extra++;
                        if ((r = strv_from_json(vals, &x->values, &x->n_values)) < 0)
                                goto fail;
                        r = -ENOMEM;
                }
        }
        *ret_u = u;
        return 0;
fail:
        review_user_unref(u);
        return r;
}

/* ---- entries --------------------------------------------------------------------------- */

static struct cache *cache_of(struct review *r, enum kind kind)
{
        return kind == KIND_TOKEN ? &r->tokens : &r->accesses;
}

static const char *entry_key(const struct entry *e)
{
        return e->key;
}

static void unlist(struct entry *e)
{
        struct cache *c = cache_of(e->r, e->kind);

        if (!e->listed)
                return;
        if (e->prev)
                e->prev->next = e->next;
        else
                c->first = e->next;
        if (e->next)
                e->next->prev = e->prev;
        else
                c->last = e->prev;
        e->prev = e->next = NULL;
        e->listed = false;
}

static void list_last(struct entry *e)
{
        struct cache *c = cache_of(e->r, e->kind);

        e->prev = c->last;
        e->next = NULL;
        if (c->last)
                c->last->next = e;
        else
                c->first = e;
        c->last = e;
        e->listed = true;
}

/* The transfer's belongings; the request body and the answer wiped (a
 * token's may hold it). */
static void end_transfer(struct entry *e)
{
        curl_loop_cancel(e->r->cl, &e->easy);
        curl_slist_free_all(e->hdrs);
        e->hdrs = NULL;
        if (e->body)
                memset(e->body, 0, e->body_len);
        free(e->body);
        e->body = NULL;
        /* An API server may echo the token in its answer. */
        if (e->answer.len)
                memset(e->answer.data, 0, e->answer.len);
        buf_free(&e->answer);
}

/* Frees e and its waits (no callbacks); e must be out of its map. */
static void entry_free(struct entry *e)
{
        struct review_wait *w, *next;

        if (!e)
                return;
        unlist(e);
        end_transfer(e);
        for (w = e->waits; w; w = next) {
                next = w->next;
                free(w);
        }
        review_user_unref(e->user);
        free(e->reason);
        free(e);
}

static void entry_drop(struct entry *e)
{
        strmap_remove(cache_of(e->r, e->kind)->map, e->key);
        entry_free(e);
}

static void free_entry_value(void *v)
{
        entry_free(v);
}

/* ---- setup ----------------------------------------------------------------------------- */

int review_new(struct loop *loop, struct curl_loop *cl, const struct review_config *cfg, struct review **ret_r)
{
        struct review *r;

        if (!cfg->kube)
                return -EINVAL;
        if (!(r = calloc(1, sizeof(*r))))
                return -ENOMEM;
        r->loop = loop;
        r->cl = cl;
        r->kube = cfg->kube;
        r->cache_max = cfg->cache_max ? cfg->cache_max : REVIEW_CACHE_MAX;
        r->answer_max = cfg->answer_max ? cfg->answer_max : REVIEW_BODY_MAX;
        r->token_ttl = cfg->token_ttl ? cfg->token_ttl : REVIEW_TOKEN_TTL_USEC;
        r->token_denied_ttl = cfg->token_denied_ttl ? cfg->token_denied_ttl : REVIEW_TOKEN_DENIED_TTL_USEC;
        r->allowed_ttl = cfg->allowed_ttl ? cfg->allowed_ttl : REVIEW_ALLOWED_TTL_USEC;
        r->denied_ttl = cfg->denied_ttl ? cfg->denied_ttl : REVIEW_DENIED_TTL_USEC;
        r->now = cfg->now ? cfg->now : default_now;
        r->now_data = cfg->now_data;
        if (!(r->tokens.map = strmap_new_borrowed()) || !(r->accesses.map = strmap_new_borrowed())) {
                review_free(r);
                return -ENOMEM;
        }
        *ret_r = r;
        return 0;
}

void review_free(struct review *r)
{
        if (!r)
                return;
        strmap_free(r->tokens.map, free_entry_value);
        strmap_free(r->accesses.map, free_entry_value);
        free(r);
}

void review_get_stats(const struct review *r, struct review_stats *ret_stats)
{
        *ret_stats = r->stats;
        ret_stats->tokens = strmap_size(r->tokens.map);
        ret_stats->accesses = strmap_size(r->accesses.map);
}

/* ---- answers --------------------------------------------------------------------------- */

static void call(struct review_wait *w, enum review_outcome outcome, struct review_user *user, const char *reason)
{
        if (w->authn)
                w->authn(w->data, outcome, outcome == REVIEW_OK ? user : NULL, reason);
        else
                w->authz(w->data, outcome, reason);
}

/* Calls e's waits in the order they came, each taken off first so that a
 * callback may cancel another's wait.  e is not on the list of decisions
 * meanwhile, so no callback's new entry can evict it. */
static void dispatch(struct entry *e, const char *reason)
{
        struct review_wait *w;

        while ((w = e->waits)) {
                e->waits = w->next;
                if (e->waits)
                        e->waits->prev = NULL;
                else
                        e->waits_last = NULL;
                call(w, e->outcome, e->user, reason);
                free(w);
        }
}

static enum review_outcome refusal(enum kind kind)
{
        return kind == KIND_TOKEN ? REVIEW_UNAUTHENTICATED : REVIEW_FORBIDDEN;
}

/*
 * What a 2xx answer's body decides: 1 and the outcome (and for a token
 * its user) to be cached until *ret_ttl; 0 with a refusal not to be
 * cached (the server said it could not decide); -EINVAL for a body that
 * is no review; -ENOMEM.  why gets the server's words for a refusal.
 */
static int decide(struct entry *e, json_object *status, uint64_t *ret_ttl, struct buf *why)
{
        struct review *r = e->r;
        json_object *ok;

        if (!json_object_is_type(status, json_type_object))
                return -EINVAL;
        if (e->kind == KIND_TOKEN) {
                const char *error = json_get_str(status, "error", "");
                int q;

                ok = json_get_type(status, "authenticated", json_type_boolean);
                if (ok && json_object_get_boolean(ok)) {
                        if ((q = user_from_json(json_get(status, "user"), &e->user)) < 0)
                                return q;
                        e->outcome = REVIEW_OK;
                        *ret_ttl = r->token_ttl;
                        return 1;
                }
                e->outcome = REVIEW_UNAUTHENTICATED;
                if (buf_puts(why, "the API server did not authenticate the token") < 0 ||
                    (error[0] && buf_printf(why, ": %s", error) < 0))
                        return -ENOMEM;
                /* A review that failed is asked again, as the kubelet's
                 * webhook does; a plain "no" is remembered. */
                *ret_ttl = r->token_denied_ttl;
                return error[0] ? 0 : 1;
        }
        ok = json_get_type(status, "allowed", json_type_boolean);
        if (ok && json_object_get_boolean(ok)) {
                e->outcome = REVIEW_OK;
                *ret_ttl = r->allowed_ttl;
                return 1;
        }
        e->outcome = REVIEW_FORBIDDEN;
        {
                const char *reason = json_get_str(status, "reason", "");
                const char *error = json_get_str(status, "evaluationError", "");

                if (buf_puts(why, "the API server did not allow the access") < 0 ||
                    (reason[0] && buf_printf(why, ": %s", reason) < 0) ||
                    (error[0] && buf_printf(why, " (%s)", error) < 0))
                        return -ENOMEM;
        }
        *ret_ttl = r->denied_ttl;
        return 1;
}

static void on_done(void *data, CURL *easy, CURLcode result)
{
        struct entry *e = data;
        struct review *r = e->r;
        struct buf why = BUF_INIT;
        json_object *o = NULL;
        uint64_t ttl = 0;
        long status = 0;
        int cached = 0;
        const char *reason = NULL;

        e->easy = NULL;
        curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
        if (result == CURLE_OK && e->guard.mangled)
                result = CURLE_OUT_OF_MEMORY;
        if (result != CURLE_OK) {
                if (result == CURLE_WRITE_ERROR && e->too_long)
                        reason = "the API server's answer is too long";
                else if (kube_describe_failure(easy, result, &why) < 0 ||
                         buf_printf(&why, " (API server %s)", kube_client_server(r->kube)) < 0)
                        reason = curl_easy_strerror(result);
        } else if (status < 200 || status > 299) {
                if (status == 401)
                        kube_client_unauthorized(r->kube);
                if (buf_puts(&why, "the API server refused the review: ") < 0 ||
                    kube_describe_status(e->answer.data, e->answer.len, status, &why) < 0)
                        reason = "the API server refused the review";
        } else {
                int q = json_parse_text(e->answer.data, e->answer.len, &o, NULL);

                if (q == 0)
                        q = decide(e, json_get(o, "status"), &ttl, &why);
                if (q == -ENOMEM)
                        reason = "out of memory";
                else if (q < 0)
                        reason = "the API server's answer is not a review";
                cached = q > 0;
        }
        curl_easy_cleanup(easy);
        end_transfer(e);
        json_object_put(o);
        if (!cached) {
                /* No decision: closed, and asked again next time. */
                r->stats.failed++;
                review_user_unref(e->user);
                e->user = NULL;
                e->outcome = refusal(e->kind);
                strmap_remove(cache_of(r, e->kind)->map, e->key);
        } else {
                e->decided = true;
                e->expires = now(r) + ttl;
        }
        if (!reason && e->outcome != REVIEW_OK)
                reason = why.len ? why.data : "refused";
        /* Later callers get the same words (a generic one if memory
         * ran out: the decision stands either way). */
        if (cached && e->outcome != REVIEW_OK)
                e->reason = strdup(reason);
        dispatch(e, e->outcome == REVIEW_OK ? NULL : reason);
        buf_free(&why);
        if (cached)
                list_last(e);
        else
                entry_free(e);
}

/* ---- requests -------------------------------------------------------------------------- */

static size_t on_write(char *p, size_t size, size_t n, void *data)
{
        struct entry *e = data;
        size_t len = size * n;

        if (e->answer.len + len > e->r->answer_max) {
                e->too_long = true;
                return 0;
        }
        return buf_append(&e->answer, p, len) == 0 ? len : 0;
}

/* Starts e's review: body (taken) to path.  0, -ENOMEM or -EIO; on
 * failure the transfer's belongings are freed. */
static int start(struct entry *e, const char *path)
{
        struct review *r = e->r;
        struct curl_slist *n;
        CURL *easy = curl_easy_init();
        int q = -ENOMEM;

        if (!easy)
                goto fail;
        if ((q = kube_client_prepare(r->kube, easy, path, &e->hdrs, NULL)) < 0)
                goto fail;
        q = -ENOMEM;
        if (!(n = curl_slist_append(e->hdrs, "Content-Type: application/json")))
                goto fail;
        e->hdrs = n;
        if (!(n = curl_slist_append(e->hdrs, "Expect:")))
                goto fail;
        e->hdrs = n;
        curl_easy_setopt(easy, CURLOPT_HTTPHEADER, e->hdrs);
        curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE, (long)e->body_len);
        curl_easy_setopt(easy, CURLOPT_POSTFIELDS, e->body);
        curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, (long)(REVIEW_TIMEOUT_USEC / 1000u));
        curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(easy, CURLOPT_WRITEDATA, e);
        curl_guard_arm(easy, &e->guard);
        if ((q = curl_loop_add(r->cl, easy, on_done, e)) < 0)
                goto fail;
        e->easy = easy;
        r->stats.sent++;
        return 0;
fail:
        curl_easy_cleanup(easy);
        end_transfer(e);
        return q;
}

/* A wait on e (appended to its list). */
static int add_wait(struct entry *e, review_authn_fn authn, review_authz_fn authz, void *data,
                    struct review_wait **ret_w)
{
        struct review_wait *w = calloc(1, sizeof(*w));

        if (!w)
                return -ENOMEM;
        w->e = e;
        w->authn = authn;
        w->authz = authz;
        w->data = data;
        w->prev = e->waits_last;
        if (e->waits_last)
                e->waits_last->next = w;
        else
                e->waits = w;
        e->waits_last = w;
        *ret_w = w;
        return 0;
}

void review_cancel(struct review *r, struct review_wait *w)
{
        struct entry *e;

        (void)r;
        if (!w)
                return;
        e = w->e;
        if (w->prev)
                w->prev->next = w->next;
        else
                e->waits = w->next;
        if (w->next)
                w->next->prev = w->prev;
        else
                e->waits_last = w->prev;
        free(w);
}

/*
 * The common part of both asks.  body (taken; wiped and freed whatever
 * happens) is what is sent, and key names the decision.  Answers at once
 * from a live decision, joins a review in flight, or starts one.
 */
static int ask(struct review *r, enum kind kind, const char key[DIGEST_TEXT_MAX], char *body, size_t body_len,
               review_authn_fn authn, review_authz_fn authz, void *data, struct review_wait **ret_wait)
{
        struct cache *c = cache_of(r, kind);
        struct entry *e = strmap_get(c->map, key);
        struct review_wait *w = NULL;
        int q;

        *ret_wait = NULL;
        if (e && e->decided && e->listed && now(r) >= e->expires) {
                entry_drop(e);
                e = NULL;
        }
        if (e && e->decided) {
                memset(body, 0, body_len);
                free(body);
                r->stats.hits++;
                w = &(struct review_wait){.authn = authn, .authz = authz, .data = data};
                call(w, e->outcome, e->user,
                     e->outcome == REVIEW_OK ? NULL
                     : e->reason             ? e->reason
                                             : "refused (a decision held)");
                return 0;
        }
        if (e) {
                memset(body, 0, body_len);
                free(body);
                if ((q = add_wait(e, authn, authz, data, ret_wait)) < 0)
                        return q;
                r->stats.shared++;
                return 0;
        }
        if (strmap_size(c->map) >= r->cache_max && !c->first) {
                /* Every entry is a review in flight: closed. */
                memset(body, 0, body_len);
                free(body);
                w = &(struct review_wait){.authn = authn, .authz = authz, .data = data};
                call(w, refusal(kind), NULL, "too many reviews in flight");
                return 0;
        }
        q = -ENOMEM;
        if (!(e = calloc(1, sizeof(*e)))) {
                memset(body, 0, body_len);
                free(body);
                return q;
        }
        e->r = r;
        e->kind = kind;
        memcpy(e->key, key, DIGEST_TEXT_MAX);
        e->body = body;
        e->body_len = body_len;
        buf_init(&e->answer);
        /* Room first, so that nothing can fail once the review is out. */
        if ((q = strmap_reserve(c->map, 1)) < 0 || (q = add_wait(e, authn, authz, data, &w)) < 0 ||
            (q = start(e, kind == KIND_TOKEN ? TOKEN_REVIEW_PATH : ACCESS_REVIEW_PATH)) < 0) {
                entry_free(e);
                return q;
        }
        if (strmap_size(c->map) >= r->cache_max) {
                r->stats.evicted++;
                entry_drop(c->first);
        }
        (void)strmap_put(c->map, entry_key(e), e, NULL); /* reserved */
        *ret_wait = w;
        return 0;
}

/* ---- the two reviews ------------------------------------------------------------------- */

int review_authenticate(struct review *r, const char *token, review_authn_fn cb, void *data,
                        struct review_wait **ret_wait)
{
        size_t len = token ? strlen(token) : 0;
        uint8_t d[DIGEST_LEN];
        char key[DIGEST_TEXT_MAX];
        struct buf b = BUF_INIT;
        int q;

        *ret_wait = NULL;
        if (len == 0 || len > REVIEW_TOKEN_MAX) {
                cb(data, REVIEW_UNAUTHENTICATED, NULL, len ? "the token is too long" : "no token");
                return 0;
        }
        if ((q = digest_sha256(token, len, d)) < 0)
                return q;
        digest_text(d, key);
        /* One block, reserved at once, so that no copy of the token is
         * left behind by a buffer's growth: a JSON string is at most six
         * bytes per byte. */
        if (buf_reserve(&b, 6 * len + 128) < 0)
                return -ENOMEM;
        (void)buf_puts(&b,
                       "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenReview\",\"spec\":{\"token\":");
        (void)buf_json_string(&b, token, len);
        (void)buf_puts(&b, "}}");
        {
                size_t body_len = b.len;
                char *body = buf_steal(&b, NULL);

                return ask(r, KIND_TOKEN, key, body, body_len, cb, NULL, data, ret_wait);
        }
}

static int put_strv(struct buf *b, char *const *v, size_t n)
{
        int q = buf_putc(b, '[');

        for (size_t i = 0; q == 0 && i < n; i++)
                if ((i && (q = buf_putc(b, ',')) < 0) || (q = buf_json_string(b, v[i], strlen(v[i]))) < 0)
                        break;
        return q == 0 ? buf_putc(b, ']') : q;
}

/* A member "key":"value" after a comma. */
static int put_member(struct buf *b, const char *key, const char *value)
{
        int q;

        if ((q = buf_printf(b, ",\"%s\":", key)) < 0)
                return q;
        return buf_json_string(b, value, strlen(value));
}

/* The SubjectAccessReview's body, written the same way for the same
 * question (extra in the order the TokenReview gave it), so its digest
 * names the decision. */
static int access_body(const struct review_user *u, const struct review_access *a, struct buf *b)
{
        int q;

        if ((q = buf_puts(b, "{\"apiVersion\":\"authorization.k8s.io/v1\",\"kind\":\"SubjectAccessReview\","
                             "\"spec\":{\"resourceAttributes\":{\"group\":\"\",\"version\":\"v1\","
                             "\"resource\":\"pods\"")) < 0 ||
            (q = put_member(b, "verb", a->verb)) < 0 ||
            (q = put_member(b, "namespace", a->namespace ? a->namespace : "")) < 0 ||
            (a->name && a->name[0] && (q = put_member(b, "name", a->name)) < 0) || (q = buf_putc(b, '}')) < 0 ||
            (q = put_member(b, "user", u->username)) < 0 ||
            (u->uid && u->uid[0] && (q = put_member(b, "uid", u->uid)) < 0) || (q = buf_puts(b, ",\"groups\":")) < 0 ||
            (q = put_strv(b, u->groups, u->n_groups)) < 0 || (q = buf_puts(b, ",\"extra\":{")) < 0)
                return q;
        for (size_t i = 0; i < u->n_extra; i++) {
                if ((i && (q = buf_putc(b, ',')) < 0) ||
                    (q = buf_json_string(b, u->extra[i].key, strlen(u->extra[i].key))) < 0 ||
                    (q = buf_putc(b, ':')) < 0 || (q = put_strv(b, u->extra[i].values, u->extra[i].n_values)) < 0)
                        return q;
        }
        return buf_puts(b, "}}}");
}

int review_authorize(struct review *r, const struct review_user *user, const struct review_access *access,
                     review_authz_fn cb, void *data, struct review_wait **ret_wait)
{
        uint8_t d[DIGEST_LEN];
        char key[DIGEST_TEXT_MAX];
        struct buf b = BUF_INIT;
        size_t len;
        char *body;
        int q;

        *ret_wait = NULL;
        if (!user || !user->username || !access || !access->verb || !access->verb[0])
                return -EINVAL;
        if ((q = access_body(user, access, &b)) < 0 || (q = digest_sha256(b.data, b.len, d)) < 0) {
                buf_free(&b);
                return q;
        }
        digest_text(d, key);
        len = b.len;
        if (!(body = buf_steal(&b, NULL))) {
                buf_free(&b);
                return -ENOMEM;
        }
        return ask(r, KIND_ACCESS, key, body, len, NULL, cb, data, ret_wait);
}
