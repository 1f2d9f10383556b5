/*
 * file_events — what an event on one file does to the file source's
 * state: the file read again, its pod put, replaced or dropped, the next
 * file in sorted order taking over a key it gave up, the change sent as
 * one delta and the records of the files it touched settled.
 *
 * Never lists the directory or arms the watch (src/sources/file_source.c
 * queues the events and calls file_events_changed()).
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

/* Whether the merger would find nothing changed from before to after. */
bool file_events_pod_unchanged(const struct pod *before, const struct pod *after);
/* Sets the records of the files c touched, its change sent as number
 * sent. */
void file_events_settle(struct file_source *fs, const struct change *c, uint64_t sent);
/* file is gone or names no pod now: its pod goes, or the next file
 * naming the key takes it over.  The send number of the change, 0 when
 * none, FILE_RECORDS_SENT_NONE when it could not be made (a relist
 * will).  file_events_gone() also forgets what was said about the file,
 * and its record goes once that send is merged. */
uint64_t file_events_drop(struct file_source *fs, const char *file);
void file_events_gone(struct file_source *fs, const char *file);
/* An event (mask) on rec's file: read again and applied as a relist
 * would find it, sent as one delta. */
void file_events_changed(struct file_source *fs, struct frec *rec, uint32_t mask);

#endif
