/*
 * buf — a growable byte buffer, always NUL-terminated.
 *
 * Owns: its heap block.  Never: interprets the bytes (JSON helpers only
 * escape what they are given).
 *
 * Invariant: after buf_init(), b->data is either NULL (len == 0) or a heap
 * block of b->cap bytes with data[len] == '\0'.  All appends return 0 or
 * -ENOMEM; on -ENOMEM the buffer is unchanged.
 */
#ifndef PODMUX_BUF_H
#define PODMUX_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

struct buf {
        char *data;
        size_t len;
        size_t cap;
};

#define BUF_INIT {NULL, 0, 0}

void buf_init(struct buf *b);
/* Frees the block; b is left empty and reusable.  NULL-safe. */
void buf_free(struct buf *b);
/* Keeps the block, sets len to 0. */
void buf_reset(struct buf *b);
int buf_reserve(struct buf *b, size_t extra);
int buf_append(struct buf *b, const void *p, size_t n);
int buf_puts(struct buf *b, const char *s);
int buf_putc(struct buf *b, char c);
int buf_printf(struct buf *b, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
int buf_vprintf(struct buf *b, const char *fmt, va_list ap)
        __attribute__((format(printf, 2, 0)));
/* Appends s (n bytes) as a JSON string literal, quotes included.  The
 * literal is always valid UTF-8: a byte of s that is not part of a
 * well-formed sequence is written as \ufffd (as Go's encoding/json does). */
int buf_json_string(struct buf *b, const char *s, size_t n);
/* Appends JSON text s (n bytes) as json-c writes it — bytes >= 0x80 only
 * inside strings — with the same replacement, so it is valid UTF-8 too. */
int buf_json_text(struct buf *b, const char *s, size_t n);

/* Length of the well-formed UTF-8 sequence at s[0..n), whose first byte is
 * 0x80 or above, or 0 when it is not one (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF). */
size_t utf8_len(const unsigned char *s, size_t n);
/* Appends a wall-clock time (microseconds since the epoch) as a quoted
 * RFC 3339 UTC string to the second, or null for 0 ("never"). */
int buf_json_time(struct buf *b, uint64_t wall_usec);
/* Hands the block to the caller (who frees it); b becomes empty.  Returns
 * an empty heap string for an empty buffer; NULL only on ENOMEM. */
char *buf_steal(struct buf *b, size_t *ret_len);
/* Drops the first n bytes (n <= len). */
void buf_consume(struct buf *b, size_t n);

#endif
