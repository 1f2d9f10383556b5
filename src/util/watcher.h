/*
 * watcher — libinotifytools on the loop.
 *
 * Owns: the library's process-wide inotify instance, whose descriptor is
 * one of the loop's.
 * Never: interprets events.  Each subscriber (the file source, the plugin
 * watcher) asks for a path and gets that path's events as callbacks on the
 * loop's thread.
 *
 * Events are read from the library's descriptor, without blocking, when
 * the loop sees it readable; watches are added and removed on it
 * directly.  A failed read is logged (once per reason, and its end once)
 * and told to every subscriber as IN_Q_OVERFLOW.
 *
 * Ownership: a handle belongs to its subscriber until it calls
 * watcher_remove(), or until the callback that saw IN_IGNORED for it
 * returns.  Nothing else ever frees it.
 */
#ifndef PODMUX_WATCHER_H
#define PODMUX_WATCHER_H

#include <stddef.h>
#include <stdint.h>

#include "util/loop.h"

/* Events handed to subscribers per loop turn at most; the rest wait for
 * the next turn, so a burst never keeps the loop from its other work.
 * At most 16 KiB of events are read ahead of that; the rest waits in the
 * kernel, and if it overflows there
 * every subscriber is told (IN_Q_OVERFLOW) and relists. */
#define WATCHER_BATCH 1024

struct watcher;
struct watcher_watch;

/*
 * An event for the watched path: name is the entry inside a watched
 * directory ("" for an event on the path itself).  mask is the inotify mask
 * (IN_Q_OVERFLOW events go to every subscriber with name "").
 */
typedef void (*watcher_event_fn)(void *data, const char *path, const char *name, uint32_t mask);

int watcher_new(struct loop *loop, struct watcher **ret_w);
/* Events read and handed over so far (tests only). */
unsigned long watcher_handed(const struct watcher *w);
/* Frees every watch and closes the library's instance.  NULL-safe. */
void watcher_free(struct watcher *w);

/*
 * Watches path (a directory or a file) with an inotify mask: fn(data, ...)
 * is told of the events in mask, and always of IN_IGNORED, IN_UNMOUNT and
 * IN_Q_OVERFLOW.  Returns 0 and a new handle, or -ENOMEM, or -errno from
 * inotify (-ENOENT if the path is missing, -ENOSPC at the user's watch
 * limit); on error nothing changed.  The watch ends when the kernel drops
 * it (the inode is gone: the callback sees IN_IGNORED and the handle is
 * freed after that call) or with watcher_remove().
 *
 * inotify watches inodes, not paths.  If the same subscriber (fn and
 * data) already has a handle on path's inode, under another path (the
 * directory was renamed) or this one, that handle follows the inode: its
 * events now name path, its mask gains mask, and 1 is returned with it in
 * *ret_watch; the subscriber files it under the new path.  A different
 * subscriber of the same inode gets a handle of its own; they share the
 * kernel watch, which watcher_remove() drops with the last of them.
 * Cost: one system call and O(watches).
 */
int watcher_add(struct watcher *w, const char *path, uint32_t mask, watcher_event_fn fn, void *data,
                struct watcher_watch **ret_watch);
/* Ends this handle (the kernel watch too, if no other subscriber shares
 * it).  Events of it still on their way are dropped.  NULL-safe; safe
 * inside any watcher callback, for any handle. */
void watcher_remove(struct watcher_watch *ww);

#endif
