/*
 * kube_view — the node's pods as the Kubernetes API has them: one object
 * per namespace/name with one UID, each with the resourceVersion of the
 * event that last changed it, and a bounded history of watch events
 * (ADDED, MODIFIED, DELETED) to replay from (doc/kube-api.md).
 *
 * Fed the merger's records, the same struct pod_update the stream server
 * broadcasts, with the stream's sequence number of each.  The stream
 * identifies a pod by its source and UID; this view by namespace/name
 * and UID, so a record's ops are turned into events here:
 *   - a pod new under its namespace/name: ADDED;
 *   - a change keeping namespace, name and UID: MODIFIED;
 *   - a pod gone: DELETED;
 *   - a rename (one UPDATE in the stream): DELETED old, ADDED new;
 *   - a UID change (REMOVE + ADD in the stream): DELETED, then ADDED.
 * Two sources may hold a pod of the same namespace/name: the first one
 * held is served, the other waits hidden and is served when the first
 * goes (DELETED + ADDED, or MODIFIED with the same UID).
 *
 * Versions.  The event i (from 0) of the record numbered seq gets
 * max(previous + 1, seq * KUBE_VIEW_RV_PER_SEQ + i): strictly increasing,
 * and above every version of an earlier run of the daemon, since the
 * stream's numbers start at the daemon's start time in microseconds
 * (doc/protocol.md "Numbers").
 *
 * Owns: the served objects (struct kv_obj, reference counted, never
 * changed once made), the entries by stream identity and by
 * namespace/name, and the history ring.  Never: logs; does I/O; keeps a
 * struct pod (each is rendered once into its served text).
 * Cost: an applied record costs O(pods in the record) (rendering each
 * pod once), never O(pods held); a SET (the snapshot modes, a resync)
 * is compared with the whole view, O(pods held), as the record itself
 * is.  kube_view_apply() is all or nothing: every allocation is made
 * before the view changes.
 */
#ifndef PODMUX_KUBE_VIEW_H
#define PODMUX_KUBE_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "core/pod.h"
#include "util/buf.h"

/* Versions a record may number before it borrows from the next record's
 * numbers (see above). */
#define KUBE_VIEW_RV_PER_SEQ 1000u
/* Watch events kept for replay by default (--kube-api-history), and at
 * most (the ring is allocated whole, 32 bytes an event, at start). */
#define KUBE_VIEW_DEFAULT_HISTORY 10000u
#define KUBE_VIEW_MAX_HISTORY 1000000u
/* The annotation keeping an API pod's own resourceVersion on the API
 * server, which is not a version of this view. */
#define KUBE_VIEW_ANNOTATION_SOURCE_RV "podmux.dev/source-resource-version"

/* The fields a field selector may name (the API server's set for pods). */
enum kv_field {
        KV_FIELD_NAME,
        KV_FIELD_NAMESPACE,
        KV_FIELD_NODE_NAME,
        KV_FIELD_RESTART_POLICY,
        KV_FIELD_SCHEDULER_NAME,
        KV_FIELD_SERVICE_ACCOUNT_NAME,
        KV_FIELD_HOST_NETWORK,
        KV_FIELD_PHASE,
        KV_FIELD_POD_IP,
        KV_FIELD_NOMINATED_NODE_NAME,
        _KV_FIELD_MAX,
};

/* One pod as served: immutable once made, shared by the view, the
 * history and lists and watches in progress. */
struct kv_obj {
        unsigned refs;
        uint64_t rv;                 /* metadata.resourceVersion as served */
        char *id;                    /* "source\nuid": the stream's identity */
        const char *uid;             /* inside id */
        char *key;                   /* "namespace/name" */
        const char *ns, *name;       /* namespace and name, NUL-split copies */
        char *fields[_KV_FIELD_MAX]; /* "" when absent */
        json_object *labels;         /* metadata.labels, or NULL */
        char *text;                  /* the object's JSON, rv included */
        size_t len;
};

struct kv_obj *kv_obj_ref(struct kv_obj *o);
void kv_obj_unref(struct kv_obj *o); /* NULL-safe */

enum kv_type { KV_ADDED, KV_MODIFIED, KV_DELETED };
const char *kv_type_name(enum kv_type t); /* "ADDED", ... */

/* A watch event.  obj is the object after the change (for DELETED, the
 * object as last served, with the event's version); prev, for MODIFIED,
 * the object before (a watch with a selector turns a change in or out of
 * it into ADDED or DELETED). */
struct kv_event {
        enum kv_type type;
        uint64_t rv;
        struct kv_obj *obj;
        struct kv_obj *prev;
};

struct kube_view_config {
        size_t history;    /* events kept; 0: KUBE_VIEW_DEFAULT_HISTORY */
        uint64_t base_seq; /* the stream's last number when the view is made */
};

struct kube_view;

/* 0 or -ENOMEM. */
int kube_view_new(const struct kube_view_config *cfg, struct kube_view **ret_v);
void kube_view_free(struct kube_view *v); /* NULL-safe */

/* Applies record u (ADD, UPDATE, DELETE, RECONCILE: upserts; REMOVE;
 * SET: the whole state), numbered seq by the stream.  u is only read.
 * Returns the number of events it made, or -ENOMEM with the view
 * unchanged. */
int kube_view_apply(struct kube_view *v, const struct pod_update *u, uint64_t seq);

/* The view's version: that of its last event, or its base. */
uint64_t kube_view_rv(const struct kube_view *v);
/* The oldest version a watch may start from: every event after it is in
 * the history.  A version below it is too old (410). */
uint64_t kube_view_floor(const struct kube_view *v);
/* Events in the history, oldest first; kube_view_event(v, i) for
 * i < kube_view_n_events(v). */
size_t kube_view_n_events(const struct kube_view *v);
const struct kv_event *kube_view_event(const struct kube_view *v, size_t i);
/* Position of the first event with a version above rv (n_events if none).
 * O(log history). */
size_t kube_view_after(const struct kube_view *v, uint64_t rv);
/* Objects served now. */
size_t kube_view_count(const struct kube_view *v);
/* The longest "namespace/name" kube_view_get() looks up (63 + 1 + 253
 * and its NUL, with room to spare); a longer one names no pod. */
#define KUBE_VIEW_MAX_KEY 512
/* The object served under namespace/name, or NULL (borrowed).  Never
 * allocates. */
const struct kv_obj *kube_view_get(const struct kube_view *v, const char *ns, const char *name);
/* Every object served, sorted by namespace/name, each referenced: the
 * caller unrefs each and frees the array.  A list is inherently
 * O(n log n).  0 or -ENOMEM. */
int kube_view_snapshot(const struct kube_view *v, struct kv_obj ***ret_objs, size_t *ret_n);

/* ---- selectors ------------------------------------------------------- */

enum kv_op { KV_OP_EQ, KV_OP_NE, KV_OP_IN, KV_OP_NOTIN, KV_OP_EXISTS, KV_OP_NOT_EXISTS, KV_OP_GT, KV_OP_LT };

struct kv_req {
        enum kv_op op;
        char *key;     /* a label key; for a field, unused */
        int field;     /* enum kv_field, for a field requirement */
        char **values; /* one for EQ/NE/GT/LT, the set for IN/NOTIN */
        size_t n_values;
};

/* What a list or watch asks for: a namespace (NULL: all), a label
 * selector and a field selector, all ANDed. */
struct kv_filter {
        char *ns;
        struct kv_req *labels;
        size_t n_labels;
        struct kv_req *fields;
        size_t n_fields;
};

/* Parses a labelSelector (=, ==, !=, in, notin, exists, !key, >, <) and
 * a fieldSelector (=, ==, != on the fields of enum kv_field) into f,
 * which must be zeroed first; either text may be NULL or empty.
 * 0; -EINVAL with the reason in err (util/buf.h), the API server's
 * words where it has them; -ENOMEM.  f holds what was parsed either way:
 * free it with kv_filter_free(). */
int kv_filter_parse(struct kv_filter *f, const char *label_selector, const char *field_selector, struct buf *err);
void kv_filter_free(struct kv_filter *f); /* NULL-safe; leaves f zeroed */
/* Whether o passes f.  O(requirements). */
bool kv_filter_match(const struct kv_filter *f, const struct kv_obj *o);

#endif
