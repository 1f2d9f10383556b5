/*
 * file_events — what an event on one file does to the file source's
 * state: the file read again, its pod put, replaced or dropped, the next
 * file in sorted order taking over a key it gave up, the change sent as
 * one delta and the records of the files it touched settled.
 *
 * Never lists the directory or arms the watch (src/sources/file_source.c
 * queues the events and calls file_changed()).
 *
 * Costs: an event is O(1) in the number of pods held (the indexes of
 * src/sources/file_store.h), plus the files naming the keys it touches;
 * only a UID shared between stored pods makes it send the whole SET.
 */
#ifndef PODMUX_FILE_EVENTS_H
#define PODMUX_FILE_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/pod.h"
#include "sources/file_records.h"
#include "sources/file_store.h"

struct file_source;

/*
 * What one event did under each key it touched (at most two: the key a
 * file's pod had and the one it has now): the pod stored there before
 * and after, NULL for none, and the file that held it before, with a
 * reference each.  The store and its UID counts already say after.
 */
struct change {
        struct pod *before[2], *after[2];
        struct file_name *held[2];
        size_t n;
};

void change_clear(struct change *c);
bool pod_unchanged(const struct pod *before, const struct pod *after);
bool uid_before(const struct change *c, size_t n, const char *uid);
bool change_is_local(const struct state *st, const struct change *c);
void log_changes(struct file_source *fs, const struct change *c);
int send_changes(struct file_source *fs, const struct change *c, uint64_t *ret_sent);
struct pod *stored_pod(struct file_source *fs, const char *key);
struct file_name *holder_of(struct file_source *fs, const char *key);
void settle_change(struct file_source *fs, const struct change *c, uint64_t sent);
int take_over(struct file_source *fs, struct keyref *kr);
int release_key(struct file_source *fs, struct keyref *kr, const char *file, struct change *c);
uint64_t file_drop(struct file_source *fs, const char *file);
void file_gone(struct file_source *fs, const char *file);
void take_holder_event(struct file_source *fs, const char *key, const char *file);
int put_changed(struct file_source *fs, struct frec *rec, struct pod *pod, struct change *c);
void file_changed(struct file_source *fs, struct frec *rec, uint32_t mask);

#endif
