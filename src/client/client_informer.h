/*
 * client_informer — libpodmux-client's informer-style handlers
 * (podmux_client_add_handler()): the pods records turned into OnAdd,
 * OnUpdate(old, new) and OnDelete calls for each handler, in order.
 *
 * Owns: a reference to each pod last handed to the handlers, by source and
 * UID (the "seen" map: it is the cache as handed on), the handler list.
 * Never: does I/O, logs.  Private to the library.
 *
 * The map is built when the first handler is added (from the cache) and
 * then follows the records.  Out of memory while following leaves it
 * stale: the next informer_fix() diffs the cache against it (the way a
 * SET is diffed), so no change is lost, only handed on later.
 * Cost: O(pods in the record) per record; a SET O(cache).
 */
#ifndef PODMUX_CLIENT_INFORMER_H
#define PODMUX_CLIENT_INFORMER_H

#include <stdbool.h>
#include <stddef.h>

#include "podmux/client.h"

struct informer_handler {
        struct podmux_handler h;
        void *data;
};

struct informer {
        struct keymap *seen; /* struct seen_ent by "source/uid"; NULL until the first handler */
        struct informer_handler *hs;
        size_t n_hs;
        bool stale; /* a record could not be followed: informer_fix() due */
        /* The client's "a handler stopped me" flag (set by client.c, which
         * owns it): once true, no handler is called.  A pointer, so this
         * module does not call back into client.c. */
        const bool *stop;
};

void informer_free(struct informer *inf);
/* Adds a handler; the first one builds the map from pods[0..n) (the
 * cache).  The new handler gets each pod of the map as an initial ADD.
 * 0 or -ENOMEM (nothing added). */
int informer_add(struct podmux_client *c, struct informer *inf, const struct podmux_handler *h, void *data,
                 struct podmux_pod *const *pods, size_t n);
/* One pods record, after the cache holds it. */
void informer_record(struct podmux_client *c, struct informer *inf, enum podmux_op op,
                     struct podmux_pod *const *pods, size_t n);
/* When stale, brings the map to pods[0..n) (the cache). */
void informer_fix(struct podmux_client *c, struct informer *inf, struct podmux_pod *const *pods, size_t n);

#endif
