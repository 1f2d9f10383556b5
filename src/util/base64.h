/*
 * base64 — standard base64 (RFC 4648 section 4, padded) to bytes, and
 * bytes to it.
 *
 * Owns: nothing; the caller frees what it gets.
 */
#ifndef PODMUX_BASE64_H
#define PODMUX_BASE64_H

#include <stddef.h>

/*
 * Decodes s[0..n): white space (space, tab, CR, LF: line breaks of a
 * PEM block or a YAML block scalar) is skipped; the rest must be whole
 * groups of four from the standard alphabet, '=' only as padding at the
 * end, as Go's base64.StdEncoding reads it.  *ret (NUL-terminated, *ret_len
 * bytes without the NUL) is the caller's.  0, -EINVAL or -ENOMEM.
 */
int base64_decode(const char *s, size_t n, char **ret, size_t *ret_len);

/* Encodes s[0..n) as padded standard base64 (Go's StdEncoding), into
 * *ret (NUL-terminated, the caller's).  0 or -ENOMEM. */
int base64_encode(const char *s, size_t n, char **ret);

#endif
