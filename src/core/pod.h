/*
 * pod — the compact, reference-counted in-memory form of one v1 Pod, and
 * the update record that carries pods between sources, the merger and the
 * stream.
 *
 * Owns: a pod's identity, the digests the merge rules compare, its local
 * config annotations and the compact JSON text sent to consumers.
 * Never: keeps a json-c tree.  Pods are parsed at the edge (a source), turned
 * into a struct pod with pod_from_json(), and the tree is dropped.
 *
 * A pod is reference counted and changes at most once after it is built:
 * the merger stamps config.source and config.seen on a pod it stores for
 * the first time (pod_stamp), before any record carries it to a consumer,
 * and stores the sender's pod itself rather than a copy.  A stamped pod
 * never changes again, so an emitted record can share pods with the
 * merger's store: "deep copy" semantics at the cost of a counter.  A source
 * never reads back config.source or config.seen of its own pods (what it
 * compares is the text, the digests and config.mirror), so the stamp is
 * invisible to it.  Memory: the JSON text and the identity strings, shared
 * by clones, plus 104 bytes per pod.
 *
 * Local annotations (kubernetes.io/config.source, .seen, .mirror) are kept
 * out of the text and in their own fields; pod_render() splices them back
 * into metadata.annotations.  That lets the merger stamp source/seen without
 * re-serialising the pod.
 *
 * Threads.  Pods live on the loop thread: refs and body->refs are plain
 * counters, taken and dropped there only, and pod_stamp() writes source,
 * seen and stamped there.  What never changes once a pod is built (or
 * cloned, before it is shared) may be read by another thread for as long
 * as the loop holds a reference on its behalf: body and the text, the
 * identity strings after it, text_len and the span offsets, uid_len,
 * ns_len, the digests, deleting, has_annotations and mirror.  The
 * checkpoint writer reads those (src/sources/checkpoint_writer.h).
 */
#ifndef PODMUX_POD_H
#define PODMUX_POD_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "util/buf.h"
#include "util/proto_words.h"

struct strmap;

#define POD_ANNOTATION_SOURCE PROTO_ANNOTATION_SOURCE
#define POD_ANNOTATION_SEEN PROTO_ANNOTATION_SEEN
#define POD_ANNOTATION_MIRROR PROTO_ANNOTATION_MIRROR
#define POD_ANNOTATION_HASH PROTO_ANNOTATION_HASH

#define POD_DIGEST_LEN 16

/*
 * The layout, once.  A pod is two blocks: struct pod (104 bytes, one
 * 112-byte malloc block on 64-bit glibc; pod.c asserts the size), private
 * to its holder, and the body, shared by clones and counted apart.
 *
 *   struct pod (64-bit)
 *     0  refs, ns_len                   4 + 4
 *     8  source                         8   pointer or POD_SOURCE_* constant
 *    16  seen (text | usec)             8   union: stamped says which
 *    24  mirror                         8   pointer
 *    32  body                           8   pointer to the shared block
 *    40  semantic digest               16
 *    56  status digest                 16
 *    72  text_len                       4
 *    76  splice .. status_off          20   five offsets into the text
 *    96  uid_len                        4
 *   100  deleting, has_annotations,     3   + 1 byte of padding = 104
 *        stamped
 *
 *   the body:  refs | text (text_len) NUL | UID (uid_len) NUL |
 *              namespace (ns_len) NUL | "namespace/name" NUL
 *   (the key is the name alone without a namespace; the name is the
 *   key's tail, so it is not stored twice)
 *
 * Why it is shaped so (each trick is explained at its member below):
 * - The identity strings live in the body, after the text, each with
 *   its NUL, and are found from the three lengths: no pointer per string,
 *   one allocation for all, and clones share them.  The maps keyed by
 *   them borrow them rather than copy: storage's per-source keymap by
 *   pod_uid(), the file source's store and UID index by pod_key() and
 *   pod_uid() (util/keymap.h reads the key through the item, so a slot is
 *   one pointer).  A key is valid while its pod is referenced, so an
 *   index entry always goes before, or with, its pod's last reference.
 * - Offsets and lengths are 32-bit: inputs are megabytes at most, and
 *   pod_from_json() refuses a text of 4 GiB (-EFBIG).
 * - config.source usually points at a POD_SOURCE_* constant, not a copy;
 *   config.seen is a text until pod_stamp() turns it into a time (stamped
 *   says which member of the union is live).
 * - Only what the merge rules compare is kept beyond the text, as two
 *   digests; everything else is read from the text when it is needed.
 * Do not shave more bytes unless a benchmark line of a real workload
 * needs it: the target (512 B a pod beyond the text) is met.
 */
struct pod {
        unsigned refs;
        uint32_t ns_len; /* strlen of metadata.namespace */
        /* config.source, .seen and .mirror, NULL if absent.  A source that
         * is one of the POD_SOURCE_* names points at that constant instead
         * of a copy of its own (never written through). */
        char *source;
        /* config.seen: the text a source gave (seen.text), or, once the
         * merger has stamped the pod (stamped), the time it was first
         * stored (seen.usec), formatted when rendered.  Read it with
         * pod_seen(). */
        union {
                char *text;
                uint64_t usec;
        } seen;
        char *mirror;
        /*
         * Compact JSON of the pod without the local annotations (pod_text()),
         * shared by clones, laid out in spans so that a merge assembles a
         * pod from the spans of two versions without parsing either
         * (pod_merge_update):
         *
         *   {"metadata":{"annotations":{<non-local>|splice|}
         *     <other metadata> |copied_off| <labels, deletionTimestamp,
         *     deletionGracePeriodSeconds, generation> |meta_end|}
         *     <other members> |spec_off| ,"spec":... |status_off|
         *     ,"status":... }
         *
         * Each span but the first holds members with a leading comma.  The
         * local annotations are inserted at splice when rendering.
         */
        struct pod_body *body;
        /* Digest of what "semantically equal" compares: spec, labels,
         * deletionTimestamp (as an instant), deletionGracePeriodSeconds and
         * the non-local annotations.  Absent != empty for spec and labels
         * (Go's deep equality); a missing annotations map counts as empty
         * (doc/pod-config.md 3.4); null counts as absent. */
        uint8_t semantic[POD_DIGEST_LEN];
        /* Digest of the whole status subtree. */
        uint8_t status[POD_DIGEST_LEN];
        uint32_t text_len;
        uint32_t splice, copied_off, meta_end, spec_off, status_off;
        /* strlen of metadata.uid.  The body holds, after the text, the
         * UID, the namespace and the store key "namespace/name" (the name
         * alone without a namespace), each NUL-terminated and in that
         * order, so maps keyed by them can borrow them: pod_uid(),
         * pod_namespace(), pod_key() and pod_name() find them there. */
        uint32_t uid_len;
        bool deleting;        /* metadata.deletionTimestamp is set */
        bool has_annotations; /* non-local annotations are present */
        bool stamped;         /* pod_stamp() was here: seen.usec is set */
};

/* The body as laid out behind struct pod's members (its text first). */
struct pod_body {
        unsigned refs;
        char text[];
};

static inline const char *pod_text(const struct pod *p)
{
        return p->body->text;
}

/* metadata.uid ("" if absent): just after the text in the body. */
static inline const char *pod_uid(const struct pod *p)
{
        return p->body->text + p->text_len + 1;
}

/* metadata.namespace ("" if absent): after the UID. */
static inline const char *pod_namespace(const struct pod *p)
{
        return pod_uid(p) + p->uid_len + 1;
}

/* The store key "namespace/name" (the name alone without a namespace):
 * after the namespace. */
static inline const char *pod_key(const struct pod *p)
{
        return pod_namespace(p) + p->ns_len + 1;
}

/* metadata.name ("" if absent): the key's tail. */
static inline const char *pod_name(const struct pod *p)
{
        return pod_key(p) + (p->ns_len ? p->ns_len + 1 : 0);
}

/* Builds a pod from a decoded v1 Pod object.  obj is only read.  Fails with
 * -EINVAL (message in err, which may be NULL: util/buf.h's convention,
 * the message replaces what err held and a success leaves it alone) if obj
 * is not a JSON object or metadata is not an object; -ENOMEM (err empty).
 * Returns a pod with refs == 1. */
int pod_from_json(json_object *obj, struct pod **ret_pod, struct buf *err);
/* Same, from JSON text (used by tests and the API source). */
int pod_from_text(const char *text, size_t len, struct pod **ret_pod, struct buf *err);
struct pod *pod_ref(struct pod *p);
/* Drops a reference; frees at zero.  NULL-safe. */
void pod_unref(struct pod *p);

/* Returns a private copy (refs == 1) whose local annotations can be set.
 * The JSON text is shared with the original, so a clone costs 112 bytes
 * (a source's name is not copied: see struct pod). */
int pod_clone(const struct pod *p, struct pod **ret_pod);
/* Set a local annotation on a pod no record has carried to a consumer.
 * value NULL removes it.  Return 0 or -ENOMEM (p unchanged).  Tests only. */
int pod_set_source(struct pod *p, const char *value);
int pod_set_seen(struct pod *p, const char *value);
/* The merger's stamp on a pod it stores for the first time: config.source
 * is source, config.seen the time wall_usec, and the pod is marked stamped
 * (it is never stamped again: a pod the merger meets again unstored, and
 * already stamped, is cloned first).  Never allocates for one of the
 * POD_SOURCE_* names.  0 or -ENOMEM (p unchanged). */
int pod_stamp(struct pod *p, const char *source, uint64_t wall_usec);

#define POD_SEEN_MAX 48
/* config.seen as text (formatted into buf if stamped), or NULL if absent. */
const char *pod_seen(const struct pod *p, char buf[POD_SEEN_MAX]);

/* Whether a source may keep a in place of b, a new version it read: the
 * same text, layout, digests and config.mirror (config.source and .seen
 * are the merger's: see above).  O(text length). */
bool pod_same(const struct pod *a, const struct pod *b);

/* Semantic equality and status equality (digests). */
bool pod_semantic_equal(const struct pod *a, const struct pod *b);
bool pod_status_equal(const struct pod *a, const struct pod *b);

/*
 * The merger's copy rules.  pod_merge_update() returns a new pod: existing's
 * object with ref's spec, labels, deletionTimestamp,
 * deletionGracePeriodSeconds, generation, status and annotations copied in
 * (existing's local annotations win; everything else in metadata stays as
 * in existing).  pod_merge_status() returns existing with ref's status.
 */
int pod_merge_update(const struct pod *existing, const struct pod *ref, struct pod **ret_pod);
int pod_merge_status(const struct pod *existing, const struct pod *ref, struct pod **ret_pod);

/* Appends the full pod JSON (local annotations included) to out. */
int pod_render(const struct pod *p, struct buf *out);
/* Full pod as a fresh json-c tree (caller puts it); NULL on error. */
json_object *pod_to_json(const struct pod *p);

/* "<name>_<namespace>" and "<namespace>/<name>" (just name if no
 * namespace) into out (reset first). */
int pod_full_name(const struct pod *p, struct buf *out);
int pod_store_key(const struct pod *p, struct buf *out);
/* Orders by namespace, then name, then uid (stable output order). */
int pod_compare(const struct pod *a, const struct pod *b);
int pod_compare_ptr(const void *a, const void *b); /* for qsort(struct pod **) */

/* RFC 3339 with nanoseconds, trailing zeros trimmed, UTC "Z": the
 * config.seen format.  out must hold 40 bytes. */
void pod_format_seen(uint64_t wall_usec, char *out, size_t size);

/* ---- ops and update records ------------------------------------------ */

/* Values match the classic kubelet constants. */
enum pod_op {
        POD_OP_SET = 0,
        POD_OP_ADD = 1,
        POD_OP_DELETE = 2,
        POD_OP_REMOVE = 3,
        POD_OP_UPDATE = 4,
        POD_OP_RECONCILE = 5,
        _POD_OP_MAX,
        _POD_OP_INVALID = -EINVAL,
};

const char *pod_op_to_string(enum pod_op op); /* NULL if out of range */
/* -EINVAL for an unknown name (exact, upper case).  Tests only. */
enum pod_op pod_op_from_string(const char *s);

#define POD_SOURCE_FILE "file"
#define POD_SOURCE_HTTP "http"
#define POD_SOURCE_API "api"
#define POD_SOURCE_ALL "*"

/*
 * {op, source, pods[]}: a value.  It owns one reference to each pod and its
 * own copy of source.
 *
 * A delta (op SET, delta true) is how a source says what changed since its
 * last record without repeating the rest: pods are its pods that are new
 * or changed, gone the pods (by UID) it no longer has; no UID is in both.
 * The merger decides exactly as for the full SET it stands for (the
 * source's previous state with these changes), at a cost that follows the
 * change.  A delta never goes to consumers: the merger's records are plain.
 */
struct pod_update {
        enum pod_op op;
        char *source;
        struct pod **pods;
        size_t n_pods;
        size_t cap_pods;
        bool delta;
        /* A provisional SET: not read from the source's origin (the API
         * source's checkpoint, kept from before the daemon started,
         * doc/checkpoint.md).  Merged as any SET, but the source is not
         * counted seen for it (doc/pod-config.md 4.3).  Copied by
         * pod_update_share(); a fold takes a full SET's. */
        bool provisional;
        /* pods are in pod_compare order (kept by pod_update_add; cleared
         * by a fold); pod_update_sort() restores it. */
        bool sorted;
        struct pod **gone; /* delta: pods whose UIDs are gone */
        size_t n_gone;
        size_t cap_gone;
        /* UID -> position + 1 in pods / gone, built by the first fold into
         * this record and kept in step after it (keys borrowed from the
         * pods). */
        struct strmap *pods_ix, *gone_ix;
        struct pod_update *next; /* link of the queue holding it (updates_pipe) */
};

/* Empty record.  Returns NULL on ENOMEM. */
struct pod_update *pod_update_new(enum pod_op op, const char *source);
/* Takes a new reference to p.  0 or -ENOMEM. */
int pod_update_add(struct pod_update *u, struct pod *p);
/* A plain record with the same op, source and pods (new references, in
 * the same order), its array sized to fit: what a record kept for later
 * costs beyond the pods it shares.  0, -EINVAL for a delta, or -ENOMEM.
 * O(n). */
int pod_update_share(const struct pod_update *u, struct pod_update **ret_copy);
/* An empty delta of source (see struct pod_update).  NULL on ENOMEM. */
struct pod_update *pod_update_new_delta(const char *source);
/* Delta: p's UID is gone (a new reference to p).  0 or -ENOMEM. */
int pod_update_add_gone(struct pod_update *u, struct pod *p);
/* Whether a record can be folded (a SET or a delta; the plain ops ADD,
 * UPDATE, DELETE and REMOVE cannot). */
bool pod_update_foldable(const struct pod_update *u);
/*
 * Folds next (a later record of the same source, SET or delta; only read)
 * into u (SET or delta), so that u alone says what u then next said: a
 * full SET next replaces u's content; a delta next upserts its pods by UID
 * and takes its gone UIDs out of u's pods (and, u being a delta, records
 * them as gone).  u's pods may then be out of order (sorted false).
 * All or nothing: 0, -EINVAL (not foldable), or -ENOMEM with u unchanged.
 * Cost O(k) for the k pods of a delta next, plus a one-time O(n) index of
 * u's n pods on the first fold; O(k) for a full SET next.
 */
int pod_update_fold(struct pod_update *u, const struct pod_update *next);
/* NULL-safe. */
void pod_update_free(struct pod_update *u);
/* Sorts the pods with pod_compare.  O(n log n). */
void pod_update_sort(struct pod_update *u);
/* The same, except that pods of one namespace/name keep the order the
 * list gave them, so the merger's first-wins filter of duplicate names
 * (doc/pod-config.md 3.2) still sees the list's order.  0, or -ENOMEM
 * with u unchanged.  O(n log n) and n pointers and indexes. */
int pod_update_sort_listed(struct pod_update *u);

#endif
