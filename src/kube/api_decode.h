/*
 * api_decode — the bytes the API server sends for the pods of a node,
 * decoded into a pod store: one PodList page at a time, and the watch
 * stream (newline- or space-separated JSON events) incrementally, so an
 * event may span reads and a read may hold several events.
 *
 * A pod store is a strmap "namespace/name" -> struct pod * (one reference
 * each); the keys put are the pods' own (pod_key()), so the store may be a
 * borrowing map (strmap_new_borrowed), as the API source's are.  Nothing here logs or does I/O: errors come back in a buf for the
 * caller to log once.  Kept apart from api_source so that every byte the
 * server controls can be fuzzed without a network (tests/fuzz/).
 *
 * Owns (watch_decoder): the bytes of an event that spans reads.
 *
 * All or nothing: a list page is stored whole or not at all, and each
 * watch event is applied whole (store, resource version, callback) or not
 * at all.  Running out of memory is -ENOMEM, never a decoding error, so a
 * caller can tell "try again" from "the server sent something wrong".
 */
#ifndef PODMUX_API_DECODE_H
#define PODMUX_API_DECODE_H

#include <stddef.h>

#include "util/buf.h"
#include "util/strmap.h"

/* One watch event larger than this ends the watch (a relist follows), so
 * a broken stream cannot exhaust memory. */
#define API_MAX_EVENT (16u * 1024u * 1024u)

/* Frees a pod store and the pods in it.  NULL-safe. */
void api_store_free(struct strmap *store);

/*
 * Adds the items of one PodList page to pages.  *ret_rv gets a copy of
 * metadata.resourceVersion (NULL if absent), *ret_cont a copy of a
 * non-empty metadata.continue (NULL if none).  0; -EINVAL when body is not
 * a PodList or an item is not a pod (err says which); -ENOMEM.  err (may
 * be NULL) follows util/buf.h: a failure replaces what it held (it is
 * empty after -ENOMEM), a success leaves it alone.  On any error pages is
 * as it was.
 */
int api_decode_list_page(const char *body, size_t len, struct strmap *pages, char **ret_rv, char **ret_cont,
                         struct buf *err);

/*
 * The same, as the bytes of a page come (the API source feeds each read),
 * so that a big unpaged list is never held whole: each item is made a pod
 * once its last byte is in, and only the other members (kind, metadata)
 * are kept as text.  Peak memory: the pods decoded so far, one item's bytes
 * and tree, and those members.
 *
 * list_decoder_feed() takes the next bytes; list_decoder_finish() is told
 * the body ended and stores its items into pages, all or nothing, as
 * api_decode_list_page() does (same results and messages).  After the
 * first failure (-EINVAL with err saying why, or -ENOMEM with err empty)
 * every later call repeats it, so a caller may stop reading at once.  A
 * success of list_decoder_finish() leaves the decoder ready for another
 * body; list_decoder_reset() makes it so at any time.
 */
struct list_decoder;

struct list_decoder *list_decoder_new(void);    /* NULL on ENOMEM */
void list_decoder_free(struct list_decoder *d); /* NULL-safe */
void list_decoder_reset(struct list_decoder *d);
int list_decoder_feed(struct list_decoder *d, const char *data, size_t len, struct buf *err);
int list_decoder_finish(struct list_decoder *d, struct strmap *pages, char **ret_rv, char **ret_cont, struct buf *err);
/* Items made pods so far (of the last "items" member); tests only. */
size_t list_decoder_items(const struct list_decoder *d);

enum watch_event_type {
        WATCH_ADDED,
        WATCH_MODIFIED,
        WATCH_DELETED,
        WATCH_BOOKMARK,
        /* A BOOKMARK annotated k8s.io/initial-events-end: "true": a
         * streaming list (sendInitialEvents) sent its whole state. */
        WATCH_INITIAL_END,
};

struct watch_decoder;
struct pod;

/* Told of each event once it is applied: old is the pod the event replaced
 * or removed (NULL if none), new the pod it stored (NULL for DELETED and
 * BOOKMARK).  Both are valid for the call only (take a reference to keep
 * one).  What a source needs to hand on only the change. */
typedef void (*watch_event_fn)(void *arg, enum watch_event_type t, struct pod *old, struct pod *new);

struct watch_decoder *watch_decoder_new(void);    /* NULL on ENOMEM */
void watch_decoder_free(struct watch_decoder *d); /* NULL-safe */
/* Forgets a partial event: call before each new watch. */
void watch_decoder_reset(struct watch_decoder *d);

/*
 * Decodes the bytes of one read and applies each complete event to store:
 * ADDED/MODIFIED put the pod, DELETED removes it, BOOKMARK only moves the
 * resource version.  After each event, *rv_slot (if given) holds a copy of
 * its resourceVersion when it has one, and on_event (if given) is called.
 *
 * 0 when every event was applied (a partial event is kept for the next
 * read).  Otherwise the events before the failing one are applied, the
 * failing one is not (store and *rv_slot as before it), and the watch
 * must end (resuming from *rv_slot is exact):
 *   -EPROTO  an ERROR event; *ret_code gets its code (500 if none) and err
 *            its message;
 *   -EBADMSG data that is not JSON, not an event, an unknown type, an
 *            event whose object is not a pod, or one event over
 *            API_MAX_EVENT bytes (*ret_code 500; err says which);
 *   -ENOMEM  (err empty).
 * err (may be NULL) follows util/buf.h: the message replaces what it
 * held; a success leaves it alone.
 */
int watch_decoder_feed(struct watch_decoder *d, const char *data, size_t len, struct strmap *store, char **rv_slot,
                       watch_event_fn on_event, void *arg, long *ret_code, struct buf *err);

#endif
