/*
 * file_reports — what the file source says about its files: bad files
 * logged once per distinct reason (and once when they are good again),
 * unknown fields and extra YAML documents, duplicate warnings with the
 * hint for a leftover copy (an editor's backup), the files whose bytes
 * cannot be read, and the line per pod that goes out, is replaced or goes.
 *
 * Never changes the store or sends; the maps it keeps (path -> the last
 * text said) are struct file_source's (src/sources/file_source_int.h).
 *
 * Costs: each call is O(1) maps operations plus the text; file_reports_trim()
 * is O(reports log n), after a relist.
 */
#ifndef PODMUX_FILE_REPORTS_H
#define PODMUX_FILE_REPORTS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/pod.h"
#include "sources/file_records.h"
#include "util/strmap.h"

struct file_source;
struct v1_unknown;

/* Room for a duplicate's text: a key, a path and words. */
#define DUP_TEXT (2 * PATH_MAX + 256)

/* Room for a duplicate's warning: its text and the hint. */
#define DUP_WARNING (DUP_TEXT + 128)

/* A bad file: logged, counted (parse: as a parse error) and told to the
 * rejected callback once per distinct reason (quiet: a write in
 * progress, nothing said); file_reports_clear_bad() says once
 * that it is good again, file_reports_forget() forgets every report of a
 * file gone, file_reports_trim() those of files not among the sorted
 * names a relist found. */
void file_reports_bad(struct file_source *fs, const char *file, const char *reason, int quiet, bool parse);
void file_reports_clear_bad(struct file_source *fs, const char *file);
void file_reports_forget(struct file_source *fs, const char *file);
void file_reports_trim(struct file_source *fs, char **names, size_t n);
/* Unknown fields and extra YAML documents, warned once while the same. */
void file_reports_unknown(struct file_source *fs, const char *file, const struct v1_unknown *u);
void file_reports_docs(struct file_source *fs, const char *file, int docs);
/* file defines key, which winner keeps: warned once while so (with the
 * hint when file looks like a leftover copy); file_reports_clear_dup()
 * ends it, file_reports_take_from() says file took key from another. */
void file_reports_dup(struct file_source *fs, const char *file, const char *key, const char *winner);
void file_reports_clear_dup(struct file_source *fs, const char *file, const char *key);
/* rec's bytes could not be read (r, reason): its record says so, the read
 * retry is armed, logged once per reason; file_reports_readable_again()
 * ends that for file. */
void file_reports_unreadable(struct file_source *fs, struct frec *rec, const char *reason, int r, bool filtered);
void file_reports_readable_again(struct file_source *fs, const char *file);
/* The info line of a pod applied, replaced or removed (what). */
void file_reports_outcome(const char *what, const struct pod *p, const char *file);
/* A duplicate's record reason into text (size bytes, DUP_TEXT). */
void file_reports_dup_reason(char *text, size_t size, const char *key, const char *holder, bool filtered);
void file_reports_take_from(struct file_source *fs, const char *file, const char *key, const char *other);

#endif
