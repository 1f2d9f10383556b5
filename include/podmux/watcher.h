/*
 * watcher — the one thread that owns libinotifytools.
 *
 * Owns: the library's process-wide inotify instance, the watcher thread, and
 * the pipe that carries events into the loop.
 * Never: interprets events.  Each subscriber (the file source, the plugin
 * watcher) asks for a path and gets that path's events as callbacks on the
 * loop's thread.
 *
 * libinotifytools blocks in its own read and does not expose its descriptor,
 * so the thread is woken for requests by a write to a private, already
 * unlinked file it watches: a request is never lost between "check the
 * queue" and "block", and an idle thread never wakes up.
 */
#ifndef PODMUX_WATCHER_H
#define PODMUX_WATCHER_H

#include <stdint.h>

#include "podmux/loop.h"

/* Events handed to subscribers per loop turn at most; the rest wait for
 * the next turn, so a burst never keeps the loop from its other work.
 * Events are read at most 64 KB ahead of that; past it they wait in the
 * kernel, and if they overflow there every subscriber is told
 * (IN_Q_OVERFLOW) and relists. */
#define WATCHER_BATCH 1024

struct watcher;
struct watcher_watch;

/*
 * An event for the watched path: name is the entry inside a watched
 * directory ("" for an event on the path itself).  mask is the inotify mask
 * (IN_Q_OVERFLOW events go to every subscriber with name "").
 */
typedef void (*watcher_event_fn)(void *data, const char *path,
                                 const char *name, uint32_t mask);

int watcher_new(struct loop *loop, struct watcher **ret_w);
/* Stops and joins the thread, frees every watch.  NULL-safe. */
void watcher_free(struct watcher *w);

/*
 * Watches path (a directory or a file) with an inotify mask.  Returns
 * -errno from inotify (-ENOENT if the path is missing, -ENOSPC at the
 * user's watch limit).  The watch ends when the kernel drops it (path
 * deleted or moved: the callback sees IN_IGNORED and the handle is freed
 * after that call) or with watcher_remove().
 */
int watcher_add(struct watcher *w, const char *path, uint32_t mask,
                watcher_event_fn fn, void *data,
                struct watcher_watch **ret_watch);
/* NULL-safe. */
void watcher_remove(struct watcher_watch *ww);

#endif
