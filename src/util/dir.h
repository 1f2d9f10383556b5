/*
 * dir — listing a directory, all or nothing.
 *
 * Owns: nothing; the caller frees the list with dir_list_free().  Never:
 * recurses, follows anything, or logs.
 */
#ifndef PODMUX_DIR_H
#define PODMUX_DIR_H

#include <stddef.h>

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

#endif
