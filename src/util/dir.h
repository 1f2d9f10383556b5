/*
 * dir — listing a directory, all or nothing; making one as mkdir -p does.
 *
 * Owns: nothing; the caller frees the list with dir_list_free().  Never:
 * recurses, follows anything (dir_make() follows symbolic links on the
 * way, as mkdir -p does), changes a directory that exists, or logs.
 */
#ifndef PODMUX_DIR_H
#define PODMUX_DIR_H

#include <stddef.h>
#include <sys/types.h>

#include "util/buf.h"

/* Leave out names that start with '.' ("." and ".." are always left out). */
#define DIR_LIST_NO_HIDDEN 1u
/* Return full paths (path_join(dir, name)) rather than names. */
#define DIR_LIST_PATHS 2u

/*
 * The entries of directory dir, sorted bytewise.  All or nothing: an error
 * while reading the directory (readdir's errno is checked, not taken for
 * its end) fails the whole listing with -errno and *ret_what naming the
 * step ("cannot open directory", "cannot read directory", "cannot list
 * directory" for want of memory), so a partial listing is never taken for
 * the directory's content.  O(entries log entries).
 */
int dir_list(const char *dir, unsigned flags, char ***ret_names, size_t *ret_n, const char **ret_what);
void dir_list_free(char **names, size_t n); /* NULL-safe */

/* The mode of the parents dir_make() creates, before the umask. */
#define DIR_PARENT_MODE 0755

/*
 * mkdir -p: makes each missing directory on the way to dir, from the root
 * down, the parents with DIR_PARENT_MODE and dir itself with mode (less
 * the umask, as mkdir(2) applies it).  A directory that exists is left as
 * it is: its mode and owner are the admin's choice, never ours.  0 when
 * dir is a directory at the end (found, made, or made meanwhile by
 * someone else); else -errno with err (may be NULL; empty after -ENOMEM,
 * which only writing the message can give) naming the one directory that
 * stopped it (-ENAMETOOLONG for a dir of PATH_MAX bytes or more):
 *   "cannot create directory \"D\": <errno>"   mkdir(2) failed;
 *   "cannot create directory \"D\": File exists (not a directory)"
 *                                             (-ENOTDIR);
 *   "directory \"D\": <errno>"                  stat(2) failed.
 * A relative dir is made from the working directory.  Costs one stat per
 * component and one mkdir per missing one; never removes what it made when
 * a later step fails (mkdir -p does not either).
 */
int dir_make(const char *dir, mode_t mode, struct buf *err);

#endif
