/*
 * buf — a growable byte buffer, always NUL-terminated.
 *
 * Owns: its heap block.  Never: interprets the bytes (JSON helpers only
 * escape what they are given).
 *
 * Invariant: after BUF_INIT or buf_init(), b->data is never NULL and
 * data[len] == '\0', so b->data can always be read as a C string: an empty
 * buffer reads as "".  While nothing is allocated (cap == 0) data points
 * at buf_empty_slot, a shared read-only "" that is never written, freed or
 * realloc'ed; otherwise it is a heap block of cap bytes.  Never write
 * through data without a successful buf_reserve() first, and never free()
 * it: buf_free() and buf_steal() do.  A struct buf that was zeroed (calloc,
 * memset, {0}) instead of initialised must get buf_init() before its data
 * is read; appending to one works either way.  All appends return 0 or
 * -ENOMEM; on -ENOMEM the buffer is unchanged.
 *
 * Error buffers.  A function that can fail and takes `struct buf *err`
 * (which may be NULL) says why there, the same way everywhere:
 *   - on failure err holds exactly one message, and what it held before
 *     is gone (replaced, not appended to);
 *   - the message is lower case, with no trailing period or newline;
 *     several problems found at once may be joined with "; ";
 *   - on success err is left exactly as it was;
 *   - when memory runs out the message may be missing: err is then empty,
 *     so a caller prints  err.len ? err.data : ERRNO_STR(r)
 *     (util/log.h).  A failure other than -ENOMEM always has one.
 * buf_set_err() writes such a message.
 */
#ifndef PODMUX_BUF_H
#define PODMUX_BUF_H

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct buf {
        char *data;
        size_t len;
        size_t cap;
};

/* The "" an empty buffer's data points at (never written). */
extern const char buf_empty_slot[1];

/* clang-format off */
#define BUF_INIT {(char *)buf_empty_slot, 0, 0}
/* clang-format on */

void buf_init(struct buf *b);
/* Frees the block; b is left empty ("") and reusable.  NULL-safe. */
void buf_free(struct buf *b);
/* Keeps the block, sets len to 0: data reads "". */
void buf_reset(struct buf *b);
/* Room for extra more bytes and the NUL: buf_grow() when there is not. */
int buf_grow(struct buf *b, size_t extra);
int buf_puts(struct buf *b, const char *s);

/* The appends are inline for their common case, room already there: the
 * JSON writers (util/json_canon.c) put a byte at a time, and a call per
 * byte was a fifth of a pod's canonical text. */
static inline int buf_reserve(struct buf *b, size_t extra)
{
        /* cap > len whenever a block is held; cap == 0 always grows. */
        return extra < b->cap - b->len ? 0 : buf_grow(b, extra);
}

static inline int buf_append(struct buf *b, const void *p, size_t n)
{
        if (buf_reserve(b, n) < 0)
                return -ENOMEM;
        if (n)
                memcpy(b->data + b->len, p, n);
        b->len += n;
        b->data[b->len] = '\0';
        return 0;
}

static inline int buf_putc(struct buf *b, char c)
{
        if (buf_reserve(b, 1) < 0)
                return -ENOMEM;
        b->data[b->len++] = c;
        b->data[b->len] = '\0';
        return 0;
}

int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int buf_vprintf(struct buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Appends s (n bytes) as a JSON string literal, quotes included.  The
 * literal is always valid UTF-8: a byte of s that is not part of a
 * well-formed sequence is written as \ufffd (as Go's encoding/json does). */
int buf_json_string(struct buf *b, const char *s, size_t n);

/* Length of the well-formed UTF-8 sequence at s[0..n), whose first byte is
 * 0x80 or above, or 0 when it is not one (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF). */
size_t utf8_len(const unsigned char *s, size_t n);
/* Appends a wall-clock time (microseconds since the epoch) as a quoted
 * RFC 3339 UTC string to the second, or null for 0 ("never"). */
int buf_json_time(struct buf *b, uint64_t wall_usec);
/* Hands the block to the caller (who frees it); b becomes empty.  Returns
 * an empty heap string for an empty buffer; NULL only on ENOMEM (b is then
 * unchanged, and empty). */
char *buf_steal(struct buf *b, size_t *ret_len);
/* Drops the first n bytes (n <= len). */
void buf_consume(struct buf *b, size_t n);

/* Replaces what err holds with the message fmt makes (the error-buffer
 * convention above) and returns code, or -ENOMEM when the message cannot
 * be written (err is then empty): a failure is never reported without its
 * reason unless memory ran out.  err may be NULL: then it only returns
 * code.  The arguments may point into err itself. */
int buf_set_err(struct buf *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
