/*
 * str — small string helpers: heap strings held in struct fields, and the
 * text of an errno.
 *
 * Owns: nothing; the caller owns every string it passes in or gets back.
 */
#ifndef PODMUX_STR_H
#define PODMUX_STR_H

#include <stddef.h>

/* Replaces *slot with a copy of v (NULL clears it), freeing the old one.
 * 0, or -ENOMEM with *slot unchanged. */
int str_set(char **slot, const char *v);

/* strerror_r wrapper: the message for a positive or negative errno, in buf
 * or a static string. */
const char *errno_str(int err, char *buf, size_t size);
/* The same in a temporary that lives to the end of the full expression. */
#define ERRNO_STR(e) errno_str((e), (char[128]){0}, 128)

#endif
