/*
 * file_reports — see src/sources/file_reports.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include "util/backoff.h"
#include "util/digest.h"
#include "sources/file_records.h"
#include "sources/file_events.h"
#include "sources/file_reports.h"
#include "sources/file_source_int.h"
#include "sources/file_store.h"
#include "util/dir.h"
#include "util/episode.h"
#include "util/keymap.h"
#include "sources/file_source.h"
#include "util/log.h"
#include "sources/manifest.h"
#include "util/mem.h"
#include "metrics/metrics.h"
#include "util/path.h"
#include "sources/static_pod.h"
#include "util/str.h"
#include "util/strmap.h"

/* Logs a bad file once per distinct reason. */
void file_reports_bad(struct file_source *fs, const char *file, const char *reason, int quiet, bool parse)
{
        /* One line per change of the file's state: a write in progress
         * says nothing, a reason already given is not repeated. */
        if (quiet) {
                log_trace("file \"%s\": %s (still being written?)", file, reason);
                return;
        }
        if (!episode_fail_in(fs->errors, file, reason)) {
                log_debug("file \"%s\": %s", file, reason);
                return;
        }
        log_error("file \"%s\": %s", file, reason);
        source_stats_error(fs->stats, parse, "file \"%s\": %s", file, reason);
        /* Bad, it duplicates nothing: said again if it does once fixed. */
        free(strmap_remove(fs->dups, file));
        if (fs->rejected)
                fs->rejected(fs->rejected_data, POD_SOURCE_FILE, file, reason);
}

void file_reports_clear_bad(struct file_source *fs, const char *file)
{
        if (episode_clear_in(fs->errors, file))
                log_info("file \"%s\": valid again", file);
}

/* A file that is gone: what was said about it is forgotten, silently (it
 * is said again if the file comes back still bad). */
void file_reports_forget(struct file_source *fs, const char *file)
{
        free(strmap_remove(fs->errors, file));
        free(strmap_remove(fs->unknown, file));
        free(strmap_remove(fs->docs, file));
        free(strmap_remove(fs->dups, file));
        free(strmap_remove(fs->unreadable, file));
}

static int cmp_name(const void *key, const void *elem)
{
        return strcmp(key, *(char *const *)elem);
}

/* After a listing of the directory (names, sorted): files it did not
 * find are gone, whatever events were missed.  O(reports log n). */
void file_reports_trim(struct file_source *fs, char **names, size_t n)
{
        struct strmap *maps[] = {fs->errors, fs->unknown, fs->docs, fs->dups, fs->unreadable};

        for (size_t m = 0; m < sizeof(maps) / sizeof(maps[0]); m++) {
                size_t it = 0;
                const char *k;

                while (strmap_next(maps[m], &it, &k, NULL))
                        if (!n || !bsearch(k, names, n, sizeof(*names), cmp_name))
                                free(strmap_remove(maps[m], k)); /* the current key */
        }
}

/* Warns about the fields a file's manifest has that v1 does not define
 * (dropped, as the kubelet drops them) when that list changes. */
void file_reports_unknown(struct file_source *fs, const char *file, const struct v1_unknown *u)
{
        struct buf list = BUF_INIT;

        if (u->total == 0) {
                (void)episode_clear_in(fs->unknown, file);
                return;
        }
        if (v1_unknown_join(u, &list) < 0 || !episode_fail_in(fs->unknown, file, list.data))
                goto out;
        log_warn("file \"%s\": unknown fields ignored (not in core/v1 of Kubernetes %s): %s", file,
                 v1_schema_kubernetes, list.data);
out:
        buf_free(&list);
}

/* Logs text as a warning about file unless map says it was said last,
 * then at debug only. */
static void warn_once(struct strmap *map, const char *file, const char *text)
{
        if (!episode_fail_in(map, file, text)) {
                log_debug("file \"%s\": %s", file, text);
                return;
        }
        log_warn("file \"%s\": %s", file, text);
}

/* Warns that a file holds documents after its first, which are ignored
 * (as the kubelet ignores them, silently), when their number changes. */
void file_reports_docs(struct file_source *fs, const char *file, int docs)
{
        char text[128];

        if (docs <= 1) {
                free(strmap_remove(fs->docs, file));
                return;
        }
        (void)snprintf(text, sizeof(text), "%d YAML documents: only the first is used, the others are ignored", docs);
        warn_once(fs->docs, file, text);
}

/* The text a duplicate is warned with. */
static void dup_text(char *text, size_t size, const char *key, const char *winner)
{
        (void)snprintf(text, size,
                       "pod \"%s\" is already defined by file \"%s\": ignored (the first file in "
                       "sorted order wins)",
                       key, winner);
}

/* Whether file's name is what an editor, a package manager or `sed -i`
 * leaves beside a manifest (x.yaml~, x.yaml.bak, .swp, .orig,
 * .dpkg-old/-dist/-new, sed's sedXXXXXX temp file): every visible name is
 * read, so such a copy is the usual duplicate. */
static bool looks_leftover(const char *file)
{
        static const char *const ends[] = {"~", ".bak", ".swp", ".orig"};
        const char *slash = strrchr(file, '/'), *base = slash ? slash + 1 : file;
        size_t n = strlen(base), alnum = 0;

        for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++)
                if (n >= strlen(ends[i]) && strcmp(base + n - strlen(ends[i]), ends[i]) == 0)
                        return true;
        if (strstr(base, ".dpkg-"))
                return true;
        while (n == 9 && alnum < 6 &&
               ((base[3 + alnum] >= 'a' && base[3 + alnum] <= 'z') ||
                (base[3 + alnum] >= 'A' && base[3 + alnum] <= 'Z') ||
                (base[3 + alnum] >= '0' && base[3 + alnum] <= '9')))
                alnum++;
        return n == 9 && strncmp(base, "sed", 3) == 0 && alnum == 6;
}

/* The warning about file, a duplicate of key which winner keeps: its
 * text, and for a leftover copy how to keep such names from being
 * read. */
static void dup_warning(char *text, size_t size, const char *file, const char *key, const char *winner)
{
        dup_text(text, size, key, winner);
        if (looks_leftover(file))
                (void)snprintf(text + strlen(text), size - strlen(text),
                               "; it looks like a leftover copy: remove it, or read only manifest names with "
                               "--static-pod-file-pattern '*.yaml'");
}

/* file defines key, which winner keeps: one warning while that stays so
 * (a relist finds it again every period). */
void file_reports_dup(struct file_source *fs, const char *file, const char *key, const char *winner)
{
        char text[DUP_WARNING];

        dup_warning(text, sizeof(text), file, key, winner);
        warn_once(fs->dups, file, text);
}

/* file's pod is stored: if it was a duplicate, that is over (one info
 * line). */
void file_reports_clear_dup(struct file_source *fs, const char *file, const char *key)
{
        if (episode_clear_in(fs->dups, file))
                log_info("file \"%s\": now defines pod \"%s\" (no longer a duplicate)", file, key);
}

/*
 * rec's file could not be read (reason, from errno r): it keeps the pod
 * it holds, if any, and its record says so.  Logged and counted once per
 * distinct reason (unless filtered); every such file is read again after
 * the read backoff.
 */
void file_reports_unreadable(struct file_source *fs, struct frec *rec, const char *reason, int r, bool filtered)
{
        const struct file_name *f = NULL;
        const struct entry *e = file_store_rec_entry(&fs->st, rec, &f);
        char text[FILE_RECORD_REASON_MAX];
        /* A file read before that holds no pod lost it to another file
         * or was refused: "never read" would send the admin looking for
         * the wrong thing. */
        const char *before = !rec->have_digest                     ? "never read"
                             : rec->state == FILE_RECORD_DUPLICATE ? "a duplicate when last read"
                             : rec->state == FILE_RECORD_REJECTED  ? "refused when last read"
                             : rec->state == FILE_RECORD_IGNORED   ? "ignored when last read"
                                                                   : "none held";

        /* The errno's number too: what an admin searches for. */
        (void)snprintf(text, sizeof(text), "cannot be read: %s (errno %d)", reason, -r);
        file_records_set(&fs->recs, rec, FILE_RECORD_UNREADABLE, text);
        if (!loop_timer_armed(fs->read_retry_timer))
                loop_timer_arm(fs->read_retry_timer, backoff_next(&fs->read_retry, 0));
        /* A name --static-pod-file-pattern leaves out is read only to
         * tell a duplicate: nothing is said about it. */
        if (filtered || !episode_fail_in(fs->unreadable, rec->path, text)) {
                log_debug("file \"%s\": %s: trying again in %.1f s", rec->path, text,
                          (double)fs->read_retry.delay / 1e6);
                return;
        }
        if (e)
                log_error("file \"%s\": %s: keeping its pod \"%s\", trying again in %.1f s", rec->path, text,
                          pod_key(e->pod), (double)fs->read_retry.delay / 1e6);
        else
                log_error("file \"%s\": %s: no pod to keep (%s), trying again in %.1f s", rec->path, text, before,
                          (double)fs->read_retry.delay / 1e6);
        source_stats_error(fs->stats, false, "file \"%s\": %s", rec->path, text);
}

/* rec's file was read: if it could not be before, that is over. */
void file_reports_readable_again(struct file_source *fs, const char *file)
{
        if (episode_clear_in(fs->unreadable, file))
                log_info("file \"%s\": readable again", file);
        if (strmap_size(fs->unreadable) == 0)
                backoff_reset(&fs->read_retry);
}

/* One line per pod that goes out, comes back changed or goes (info, the
 * default level): what an admin greps the journal for, as the kubelet's
 * SyncLoop ADD/REMOVE lines.  A burst of n files logs n lines. */
void file_reports_outcome(const char *what, const struct pod *p, const char *file)
{
        log_info("static pod \"%s\" %s: file \"%s\" (uid %s)", pod_key(p), what, file, pod_uid(p));
}

/* The reason a duplicate's record gives: the warning's words for a file
 * that is read; for a name --static-pod-file-pattern leaves out, that it
 * is a copy of a pod another file defines. */
void file_reports_dup_reason(char *text, size_t size, const char *key, const char *holder, bool filtered)
{
        if (filtered)
                (void)snprintf(text, size,
                               "pod \"%s\" is already defined by file \"%s\" (this name does not match "
                               "--static-pod-file-pattern and is not read)",
                               key, holder);
        else
                dup_text(text, size, key, holder);
}

/* file now defines key in other's place: other sorts later (file is new)
 * or is gone (its event is still to come).  One warning; other, if it is
 * still there, is now a duplicate, which that warning said already. */
void file_reports_take_from(struct file_source *fs, const char *file, const char *key, const char *other)
{
        char text[DUP_WARNING];
        struct stat st;

        log_warn("file \"%s\": now defines pod \"%s\" in place of file \"%s\" (which sorts later or is gone)", file,
                 key, other);
        if (stat(other, &st) < 0)
                return;
        dup_warning(text, sizeof(text), other, key, file);
        (void)episode_fail_in(fs->dups, other, text); /* said by the line above */
}
