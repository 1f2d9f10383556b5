/*
 * files_msg — the per-file members of the stream's messages
 * (doc/protocol.md "Files request", "Status"): a record's "file" member,
 * the "files" message's head, and the "files" member of a status answer.
 *
 * The sources keep the records and show them through views
 * (src/core/file_record.h); the daemon's wiring hands this module a way to
 * walk them, and the stream server sends what it renders.
 *
 * Owns: nothing.  Never: keeps a view, logs, sends.
 * Cost: a record is O(its size); the status member walks the records
 * three times (counts, then the ones not applied, then the applied), so
 * it is O(files): inherent in a status that counts them.
 */
#ifndef PODMUX_FILES_MSG_H
#define PODMUX_FILES_MSG_H

#include <stddef.h>

#include "core/file_record.h"
#include "util/buf.h"

/* Walks every record: calls fn(ctx, view) for each, stopping at (and
 * returning) the first negative result. */
typedef int (*files_msg_each_fn)(void *data, int (*fn)(void *ctx, const struct file_record_view *v), void *ctx);

/* Appends ,"file":{...} for v.  0 or -ENOMEM (out may hold part of it). */
int files_msg_record(const struct file_record_view *v, struct buf *out);

/* Appends the "files" message's members: ,"path":P (and "path_hex"),
 * "patterns":[...] and "url":U.  path and url may be NULL (that source is
 * off); url must already be as it may be shown (no credentials).  0 or
 * -ENOMEM. */
int files_msg_head(const char *path, char *const *patterns, size_t n_patterns, const char *url, struct buf *out);

/* Appends ,"files":{"total":N,"states":{...},"records":[...],"omitted":K}:
 * the count of records per state, then at most max records, those not
 * applied first.  0 or -ENOMEM. */
int files_msg_status(files_msg_each_fn each, void *data, size_t max, struct buf *out);

#endif
