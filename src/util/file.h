/*
 * file — reading a whole file, within a size limit the caller chooses.
 *
 * Owns: nothing; the caller frees what it gets.  Never: logs.
 */
#ifndef PODMUX_FILE_H
#define PODMUX_FILE_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "util/buf.h"

/*
 * Reads the file at path (symlinks followed) into a heap block, refusing
 * anything but a regular file (-EINVAL), a file of limit bytes or more,
 * also one that grows to that while it is read (-EFBIG), and read errors
 * (-errno), with a message in err.  *ret_data is NUL-terminated and
 * *ret_len excludes the NUL; the caller frees it.  Never waits: a FIFO
 * swapped in at path is refused, not opened for reading.  -ENOMEM when
 * memory runs out, message or not.
 */
int file_read(const char *path, size_t limit, char **ret_data, size_t *ret_len, struct buf *err);
/* file_read(), and on success *ret_st (may be NULL) as fstat(2) saw the
 * descriptor the bytes were read from (its mtime and size name them). */
int file_read_stat(const char *path, size_t limit, char **ret_data, size_t *ret_len, struct stat *ret_st,
                   struct buf *err);

/* "a directory", "a socket", ...: what a file of mode m is, for messages
 * that say why it is not a regular file. */
const char *file_kind(mode_t m);

#endif
