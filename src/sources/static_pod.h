/*
 * static_pod — the steps from a static-pod path to the pods the sources
 * emit: listing a manifest directory, telling what an entry is, loading
 * one file, decoding one manifest-URL body.  The file source and
 * `podmux validate` both call these (and the HTTP source can), so what
 * validate prints is what the daemon sends, byte for byte, and what one
 * refuses the other refuses.
 *
 * Owns: nothing beyond what it returns (documented per function).
 * Never: logs, watches, keeps state between calls, talks to the merger.
 * Decoding itself is manifest's (src/sources/manifest.h).
 */
#ifndef PODMUX_STATIC_POD_H
#define PODMUX_STATIC_POD_H

#include <stdbool.h>
#include <stddef.h>

#include <sys/stat.h>

#include "util/buf.h"
#include "util/digest.h"
#include "core/pod.h"
#include "kube/v1_normalize.h"

/*
 * Whether r says nothing about a file or a directory's content but that
 * this process is short of something (memory, descriptors): such an error
 * must never cost a pod, the work is tried again later.
 */
bool static_pod_resource_error(int r);

enum static_pod_entry {
        STATIC_POD_MANIFEST,  /* a regular file (through links): load it */
        STATIC_POD_DIRECTORY, /* skipped: no recursion */
        STATIC_POD_GONE,      /* vanished since the listing: skipped silently */
        STATIC_POD_BAD,       /* skipped with an error: reason says why */
};

/* What a directory entry's base name is to the file source: read as a
 * manifest, a dot file (never read, as in the kubelet), or left out by
 * --static-pod-file-pattern (patterns: fnmatch(3) globs, one of which a
 * name must match when n_patterns > 0). */
enum static_pod_name {
        STATIC_POD_NAME_READ,
        STATIC_POD_NAME_DOT,
        STATIC_POD_NAME_FILTERED,
};
enum static_pod_name static_pod_name_kind(const char *base, const char *const *patterns, size_t n_patterns);
/* The reasons a record gives for the two names left out. */
#define STATIC_POD_DOT_REASON "a dot file (names starting with '.' are not read)"
#define STATIC_POD_FILTERED_REASON "does not match --static-pod-file-pattern"

/*
 * What a listed entry is to the file source, looked at through symbolic
 * links.  For STATIC_POD_BAD, reason (reset first) says why in one line:
 * "not a regular file: skipped", "dangling symbolic link: skipped", or
 * the error of stat(2) that says the path leads to no file (a link
 * loop, a name too long).  An entry stat(2) cannot look at (EIO,
 * EACCES...) is a manifest: its load says it is unreadable.  Returns
 * the kind, or a negative resource error (-ENOMEM included; the listing
 * is retried).
 */
int static_pod_entry(const char *path, struct buf *reason);

/* What static_pod_load() read: the bytes' digest and the file's stat, as
 * the descriptor they came from says. */
struct static_pod_read {
        bool read; /* the bytes were read (else the rest is unset) */
        uint8_t digest[DIGEST_LEN];
        struct stat st;
};

/*
 * Reads, decodes, defaults and validates the static-pod file path for
 * node_name, and builds the pod the file source emits (refs == 1, the
 * caller unrefs it).  *ret_unknown (NULL: not wanted) lists the fields
 * core/v1 does not define, as manifest_decode_pod() does.  *ret_docs
 * (NULL: not wanted) is set on success to the number of YAML documents in
 * the file, of which only the first is used (as the kubelet does): 1, or
 * more (a later document too malformed to count is counted as one; a
 * file with no "---" or "..." line after its start costs no second
 * look).  *ret_read (NULL: not wanted) is set whenever the bytes were
 * read, whether they then decode or not (so a refused manifest is named
 * by its digest too), and says read false when they were not.  Errors:
 * -ENOENT when the file is not there, a resource error (see
 * static_pod_resource_error()), or the file's own error (-EINVAL, -EFBIG,
 * -ENODATA, -EACCES, -EIO...), each with a one-line reason in err (may be
 * NULL; util/buf.h: it replaces what err held, empty after -ENOMEM; a
 * success leaves err alone).
 */
int static_pod_load(const char *path, const char *node_name, struct pod **ret_pod, struct v1_unknown *ret_unknown,
                    int *ret_docs, struct static_pod_read *ret_read, struct buf *err);

/*
 * Whether r, an error of static_pod_load() with rd as it set it, says
 * the file's bytes could not be read (EIO, EACCES, EPERM, ... of its
 * stat, open or read): nothing about what the file holds, so a source
 * keeps the pod the file last gave (doc/pod-config.md 6.8).  False for a
 * resource error (static_pod_resource_error()), a path that leads to no
 * file (ENOENT, ENOTDIR, ELOOP, ENAMETOOLONG), what is not a manifest
 * (not a regular file, too large), and any error after the bytes were
 * read.
 */
bool static_pod_unreadable(int r, const struct static_pod_read *rd);

/*
 * A manifest-URL body (a Pod or a PodList, every item valid or none) into
 * the pods the HTTP source emits for url: *ret_pods holds *ret_n pods
 * (each refs == 1), freed with static_pod_pods_free().  Errors as
 * manifest_decode_pods().
 */
int static_pod_decode_body(const char *data, size_t len, const char *url, const char *node_name, struct pod ***ret_pods,
                           size_t *ret_n, struct v1_unknown *ret_unknown, struct buf *err);
void static_pod_pods_free(struct pod **pods, size_t n); /* NULL-safe */

#endif
