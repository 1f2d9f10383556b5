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
 * Costs: each call is O(1) maps operations plus the text; trim_reports()
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

void report_bad(struct file_source *fs, const char *file, const char *reason, int quiet, bool parse);
void clear_bad(struct file_source *fs, const char *file);
void forget_reports(struct file_source *fs, const char *file);
int cmp_name(const void *key, const void *elem);
void trim_reports(struct file_source *fs, char **names, size_t n);
void warn_unknown(struct file_source *fs, const char *file, const struct v1_unknown *u);
void remember(struct strmap *map, const char *file, const char *text);
void warn_once(struct strmap *map, const char *file, const char *text);
void warn_docs(struct file_source *fs, const char *file, int docs);
void dup_text(char *text, size_t size, const char *key, const char *winner);
bool looks_leftover(const char *file);
void dup_warning(char *text, size_t size, const char *file, const char *key, const char *winner);
void note_dup(struct file_source *fs, const char *file, const char *key, const char *winner);
void clear_dup(struct file_source *fs, const char *file, const char *key);
void note_unreadable(struct file_source *fs, struct frec *rec, const char *reason, int r, bool filtered);
void readable_again(struct file_source *fs, const char *file);
void log_outcome(const char *what, const struct pod *p, const char *file);
void dup_reason(char *text, size_t size, const char *key, const char *holder, bool filtered);
void take_from(struct file_source *fs, const char *file, const char *key, const char *other);

#endif
