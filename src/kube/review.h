/*
 * review — who a bearer token is, and whether they may read pods, asked
 * of the API server the way the kubelet's delegated webhook authenticator
 * and authorizer ask it (doc/kube-api.md, "Who may read it"): a
 * TokenReview for the token, a SubjectAccessReview for the access, each
 * decision cached for a while.
 *
 * Owns: two bounded caches (tokens, accesses) of decisions and of the
 * reviews in flight, each review's transfer, and the waits of callers on
 * them.  A token is kept only as its SHA-256 (the cache key) and, while
 * its review is in flight, inside the request body; never in a reason,
 * a log line or the cache.
 * Never: blocks (every review is a transfer on the loop's curl_loop),
 * logs (a reason comes with each refusal, for the caller to log), or
 * opens: a review that gets no usable answer (no connection, timeout, a
 * 5xx, a body that is not a review) refuses, and its refusal is not
 * cached, so the next request asks again.
 *
 * Sharing: callers asking about the same token (or the same user and
 * access) while its review is in flight wait on that one review; the
 * API server sees one request however many callers ask.
 * Cost: a lookup is one SHA-256 and one hash probe, O(1) in the number of
 * entries; an insertion into a full cache evicts the least recently
 * inserted decision, O(1).  Memory: at most REVIEW_CACHE_MAX entries per
 * cache, each a few hundred bytes plus the user's names.
 */
#ifndef PODMUX_REVIEW_H
#define PODMUX_REVIEW_H

#include <stddef.h>
#include <stdint.h>

#include "kube/kube_client.h"
#include "util/curl_loop.h"
#include "util/loop.h"

/* The kubelet's defaults: --authentication-token-webhook-cache-ttl
 * (2 min), which its delegating authenticator applies to tokens the API
 * server accepted and to those it refused alike; and the authorization
 * webhook's cacheAuthorizedTTL (5 min) and cacheUnauthorizedTTL (30 s). */
#define REVIEW_TOKEN_TTL_USEC (120ull * 1000000ull)
#define REVIEW_TOKEN_DENIED_TTL_USEC (120ull * 1000000ull)
#define REVIEW_ALLOWED_TTL_USEC (300ull * 1000000ull)
#define REVIEW_DENIED_TTL_USEC (30ull * 1000000ull)
/* Entries per cache (decisions and reviews in flight): a client that
 * sends a new token with every request costs at most this much. */
#define REVIEW_CACHE_MAX 4096u
/* A review with no complete answer this long counts as no answer (the
 * API server's delegation options' request timeout). */
#define REVIEW_TIMEOUT_USEC (10ull * 1000000ull)
/* The longest token, and the longest answer, taken (bytes): a longer
 * token is refused with no review, a longer answer is no answer. */
#define REVIEW_TOKEN_MAX KUBE_TOKEN_MAX
#define REVIEW_BODY_MAX (256u * 1024u)

enum review_outcome {
        REVIEW_OK,              /* authenticated, or allowed */
        REVIEW_UNAUTHENTICATED, /* the server answers 401 */
        REVIEW_FORBIDDEN,       /* the server answers 403 */
};

/* One extra attribute of a user: a key and its values. */
struct review_extra {
        char *key;
        char **values;
        size_t n_values;
};

/*
 * Who the API server said a token belongs to.  Reference-counted: the
 * cache holds one reference; a caller that keeps the user past its
 * callback takes its own with review_user_ref() and drops it with
 * review_user_unref().  Never changed once made.
 */
struct review_user {
        unsigned refs;
        char *username;
        char *uid; /* may be "" */
        char **groups;
        size_t n_groups;
        struct review_extra *extra;
        size_t n_extra;
};
struct review_user *review_user_ref(struct review_user *u);
void review_user_unref(struct review_user *u); /* NULL-safe */

/* What is asked about: verb ("get", "list" or "watch") on pods of
 * version v1 in the core group; namespace "" for all namespaces; name
 * only for a get (else NULL or ""). */
struct review_access {
        const char *verb;
        const char *namespace;
        const char *name;
};

/*
 * A decision.  user is the token's user when outcome is REVIEW_OK (else
 * NULL), valid for the callback's duration.  reason says why a refusal
 * (and is NULL for REVIEW_OK): the server's own words, or what kept it
 * from answering (kube_describe_failure's words); it names no token.
 */
typedef void (*review_authn_fn)(void *data, enum review_outcome outcome, struct review_user *user, const char *reason);
typedef void (*review_authz_fn)(void *data, enum review_outcome outcome, const char *reason);

struct review_config {
        struct kube_client *kube; /* borrowed: outlives the review */
        /* 0: the defaults above (tests make them small). */
        size_t cache_max;
        size_t answer_max; /* REVIEW_BODY_MAX */
        uint64_t token_ttl, token_denied_ttl, allowed_ttl, denied_ttl;
        /* The clock of the caches' expiry (monotonic µs); NULL: mono_usec. */
        uint64_t (*now)(void *data);
        void *now_data;
};

struct review;
struct review_wait;

/* 0, -EINVAL without a kube client, -ENOMEM. */
int review_new(struct loop *loop, struct curl_loop *cl, const struct review_config *cfg, struct review **ret_r);
/* Cancels every review in flight without calling anyone back: the
 * caller's waits are gone with it.  NULL-safe. */
void review_free(struct review *r);

/*
 * Who token is.  A cached decision calls cb at once, before this returns
 * (*ret_wait is then NULL); else cb is called from the loop once the
 * review in flight for that token ends, and *ret_wait is the wait, which
 * review_cancel() drops (a connection gone before its answer).  0 either
 * way; -ENOMEM with nothing changed and no call (the caller refuses).
 * An empty or too long token is refused at once, with no review.
 * cb must not free r.
 */
int review_authenticate(struct review *r, const char *token, review_authn_fn cb, void *data,
                        struct review_wait **ret_wait);
/*
 * Whether user may do access, as review_authenticate() answers: at once
 * from the cache, else when the SubjectAccessReview ends.  The review
 * carries the user's name, uid, groups and extra and the access's
 * attributes; a decision is cached under their SHA-256.  -EINVAL for an
 * access with no verb.
 */
int review_authorize(struct review *r, const struct review_user *user, const struct review_access *access,
                     review_authz_fn cb, void *data, struct review_wait **ret_wait);
/* Drops a wait: its callback is never called.  The review goes on for
 * others (and for the cache).  A wait is over once its callback runs:
 * it must not be cancelled then, nor from its own callback.  NULL-safe. */
void review_cancel(struct review *r, struct review_wait *w);

/* Counters (tests, metrics). */
struct review_stats {
        uint64_t sent;    /* reviews sent to the API server */
        uint64_t hits;    /* answered from a cached decision */
        uint64_t shared;  /* waits joined to a review in flight */
        uint64_t failed;  /* reviews with no usable answer */
        uint64_t evicted; /* decisions dropped for room */
        size_t tokens;    /* entries in the token cache */
        size_t accesses;  /* entries in the access cache */
};
void review_get_stats(const struct review *r, struct review_stats *ret_stats);

#endif
