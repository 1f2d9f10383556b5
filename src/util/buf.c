/* buf — growable NUL-terminated byte buffer (see src/util/buf.h). */

#include <errno.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "util/clock.h"

/* What data points at while nothing is allocated (cap == 0): read-only,
 * so a write through it that skipped buf_reserve() faults at once. */
const char buf_empty_slot[1] = "";

void buf_init(struct buf *b)
{
        b->data = (char *)buf_empty_slot;
        b->len = 0;
        b->cap = 0;
}

void buf_free(struct buf *b)
{
        if (!b)
                return;
        if (b->cap)
                free(b->data);
        buf_init(b);
}

void buf_reset(struct buf *b)
{
        b->len = 0;
        if (b->cap)
                b->data[0] = '\0';
        else
                b->data = (char *)buf_empty_slot;
}

int buf_grow(struct buf *b, size_t extra)
{
        size_t need, cap;
        char *p;

        if (extra > SIZE_MAX - b->len - 1)
                return -ENOMEM;
        need = b->len + extra + 1;
        if (need <= b->cap)
                return 0;
        /* Doubling keeps appends amortised O(1). */
        cap = b->cap ? b->cap : 64;
        while (cap < need)
                cap = cap > SIZE_MAX / 2 ? need : cap * 2;
        /* With cap == 0, data is buf_empty_slot (or NULL in a zeroed
         * buffer): never realloc'ed, a fresh block replaces it. */
        p = b->cap ? realloc(b->data, cap) : malloc(cap);
        if (!p)
                return -ENOMEM;
        if (!b->cap)
                p[0] = '\0';
        b->data = p;
        b->cap = cap;
        return 0;
}

int buf_puts(struct buf *b, const char *s)
{
        return buf_append(b, s, strlen(s));
}

int buf_vprintf(struct buf *b, const char *fmt, va_list ap)
{
        va_list ap2;
        int n;

        va_copy(ap2, ap);
        n = vsnprintf(NULL, 0, fmt, ap2);
        va_end(ap2);
        if (n < 0)
                return -EINVAL;
        if (buf_reserve(b, (size_t)n) < 0)
                return -ENOMEM;
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
        b->len += (size_t)n;
        return 0;
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = buf_vprintf(b, fmt, ap);
        va_end(ap);
        return r;
}

/* Length of the well-formed UTF-8 sequence at s[0..n) (s[0] >= 0x80), or
 * 0: RFC 3629, so no overlong forms, no surrogates, nothing above
 * U+10FFFF — what Go's utf8.DecodeRune accepts. */
size_t utf8_len(const unsigned char *s, size_t n)
{
        unsigned char lo = 0x80, hi = 0xbf;
        size_t len;

        if (s[0] >= 0xc2 && s[0] <= 0xdf)
                len = 2;
        else if (s[0] >= 0xe0 && s[0] <= 0xef)
                len = 3;
        else if (s[0] >= 0xf0 && s[0] <= 0xf4)
                len = 4;
        else
                return 0;
        if (len > n)
                return 0;
        if (s[0] == 0xe0)
                lo = 0xa0; /* overlong */
        else if (s[0] == 0xed)
                hi = 0x9f; /* surrogates */
        else if (s[0] == 0xf0)
                lo = 0x90; /* overlong */
        else if (s[0] == 0xf4)
                hi = 0x8f; /* above U+10FFFF */
        if (s[1] < lo || s[1] > hi)
                return 0;
        for (size_t i = 2; i < len; i++)
                if (s[i] < 0x80 || s[i] > 0xbf)
                        return 0;
        return len;
}

int buf_json_string(struct buf *b, const char *s, size_t n)
{
        static const char hex[] = "0123456789abcdef";
        size_t i, start = 0;

        /* Worst case every byte becomes \u00XX; reserve the common case. */
        if (buf_reserve(b, n + 2) < 0 || buf_putc(b, '"') < 0)
                return -ENOMEM;
        for (i = 0; i < n; i++) {
                unsigned char c = (unsigned char)s[i];
                char esc[7];
                size_t elen = 2;

                if (c >= 0x80) {
                        size_t len = utf8_len((const unsigned char *)s + i, n - i);

                        if (len) {
                                i += len - 1;
                                continue;
                        }
                        /* A byte that starts no valid sequence becomes
                         * U+FFFD, one per byte, as Go's encoding/json
                         * writes it: the stream is UTF-8 whatever the
                         * input held. */
                        memcpy(esc, "\\ufffd", 6);
                        elen = 6;
                } else if (c >= 0x20 && c != '"' && c != '\\') {
                        continue;
                } else {
                        esc[0] = '\\';
                        switch (c) {
                        case '"': esc[1] = '"'; break;
                        case '\\': esc[1] = '\\'; break;
                        case '\n': esc[1] = 'n'; break;
                        case '\r': esc[1] = 'r'; break;
                        case '\t': esc[1] = 't'; break;
                        case '\b': esc[1] = 'b'; break;
                        case '\f': esc[1] = 'f'; break;
                        default:
                                esc[1] = 'u';
                                esc[2] = '0';
                                esc[3] = '0';
                                esc[4] = hex[c >> 4];
                                esc[5] = hex[c & 15];
                                elen = 6;
                        }
                }
                if (buf_append(b, s + start, i - start) < 0 ||
                    buf_append(b, esc, elen) < 0)
                        return -ENOMEM;
                start = i + 1;
        }
        if (buf_append(b, s + start, n - start) < 0 || buf_putc(b, '"') < 0)
                return -ENOMEM;
        return 0;
}

char *buf_steal(struct buf *b, size_t *ret_len)
{
        char *p;

        /* The empty slot is not the caller's to free: give a heap "". */
        if (!b->cap && buf_reserve(b, 0) < 0)
                return NULL;
        p = b->data;
        if (ret_len)
                *ret_len = b->len;
        buf_init(b);
        return p;
}

void buf_consume(struct buf *b, size_t n)
{
        if (n >= b->len) {
                buf_reset(b);
                return;
        }
        memmove(b->data, b->data + n, b->len - n);
        b->len -= n;
        b->data[b->len] = '\0';
}

int buf_set_err(struct buf *err, int code, const char *fmt, ...)
{
        struct buf msg = BUF_INIT;
        va_list ap;
        int r;

        if (!err)
                return code;
        /* Written aside first: an argument may be err's own text. */
        va_start(ap, fmt);
        r = buf_vprintf(&msg, fmt, ap);
        va_end(ap);
        buf_free(err);
        if (r < 0)
                return -ENOMEM;
        *err = msg;
        return code;
}

int buf_json_time(struct buf *b, uint64_t wall_usec)
{
        char text[CLOCK_RFC3339_MAX];

        if (wall_usec == 0)
                return buf_puts(b, "null");
        return buf_printf(b, "\"%s\"", clock_rfc3339(wall_usec, CLOCK_SECONDS, text));
}
