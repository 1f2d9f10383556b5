/*
 * version — the generic version strings of k8s.io/apimachinery's
 * util/version, as the kubelet parses and compares them (see
 * src/plugins/version.h).  Go matches them with a regular expression;
 * the scan below accepts exactly the strings it matches, with the same
 * numbers, and refuses the others in the same order of checks: the shape,
 * then the count of numbers, then each number in turn (a leading zero in
 * the first, a value over 64 bits in any).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <string.h>

#include "plugins/version.h"

static bool is_digit(char c)
{
        return c >= '0' && c <= '9';
}

/* Go's \s in a regular expression: ASCII space, \t, \n, \f, \r (no \v). */
static bool is_space(char c)
{
        return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r';
}

/* The number at *p (digits up to '.' or end), moving *p past it and its
 * dot.  false when it does not fit in 64 bits. */
static bool next_number(const char **p, const char *end, uint64_t *ret)
{
        uint64_t v = 0;
        bool ok = true;

        for (; *p < end && **p != '.'; (*p)++) {
                unsigned d = (unsigned)(**p - '0');

                if (v > (UINT64_MAX - d) / 10)
                        ok = false;
                v = v * 10 + d;
        }
        if (*p < end)
                (*p)++; /* the dot */
        *ret = v;
        return ok;
}

/* -EINVAL with "what" and the quoted string(s) in place of what err held,
 * or -ENOMEM (err empty) when that cannot be written. */
static int fail(struct buf *err, const char *what, const char *part, size_t plen, const char *s)
{
        if (!err)
                return -EINVAL;
        buf_reset(err);
        if (buf_puts(err, what) < 0 ||
            (part && (buf_putc(err, ' ') < 0 || buf_json_string(err, part, plen) < 0 || buf_puts(err, " in") < 0)) ||
            buf_putc(err, ' ') < 0 || buf_json_string(err, s, strlen(s)) < 0) {
                buf_reset(err);
                return -ENOMEM;
        }
        return -EINVAL;
}

int version_parse_generic(const char *s, struct version *ret, struct buf *err)
{
        const char *p = s, *num, *end;
        size_t n = 1;

        while (is_space(*p))
                p++;
        if (*p == 'v')
                p++;
        if (!is_digit(*p))
                return fail(err, "could not parse as a version:", NULL, 0, s);
        num = p;
        for (;;) {
                while (is_digit(*p))
                        p++;
                /* Longest run: a dot counts only when a digit follows. */
                if (p[0] != '.' || !is_digit(p[1]))
                        break;
                p++;
                n++;
        }
        end = p;
        /* The ignored rest matches Go's ".", which stops at a newline. */
        if (strchr(end, '\n'))
                return fail(err, "could not parse as a version:", NULL, 0, s);
        if (n < 2)
                return fail(err, "illegal version string (want MAJOR.MINOR...):", NULL, 0, s);
        if (num[0] == '0' && is_digit(num[1])) {
                size_t l = strspn(num, "0123456789");

                return fail(err, "illegal zero-prefixed version component", num, l, s);
        }
        for (const char *q = num; q < end;) {
                const char *start = q;
                uint64_t v;

                if (!next_number(&q, end, &v))
                        return fail(err, "version component out of range", start, strspn(start, "0123456789"), s);
        }
        ret->digits = num;
        ret->len = (size_t)(end - num);
        ret->n = n;
        return 0;
}

uint64_t version_component(const struct version *v, size_t i)
{
        const char *p = v->digits, *end = v->digits + v->len;
        uint64_t x = 0;

        for (size_t k = 0; k <= i; k++) {
                if (p >= end)
                        return 0;
                (void)next_number(&p, end, &x);
        }
        return x;
}

int version_compare(const struct version *a, const struct version *b)
{
        const char *pa = a->digits, *ea = a->digits + a->len;
        const char *pb = b->digits, *eb = b->digits + b->len;
        uint64_t x, y;

        while (pa < ea && pb < eb) {
                (void)next_number(&pa, ea, &x);
                (void)next_number(&pb, eb, &y);
                if (x != y)
                        return x < y ? -1 : 1;
        }
        /* Extra numbers count only when one of them is not 0. */
        while (pa < ea)
                if (next_number(&pa, ea, &x) && x != 0)
                        return 1;
        while (pb < eb)
                if (next_number(&pb, eb, &y) && y != 0)
                        return -1;
        return 0;
}

int version_format(const struct version *v, struct buf *out)
{
        const char *p = v->digits, *end = v->digits + v->len;
        uint64_t x;
        int r = 0;

        for (bool first = true; r == 0 && p < end; first = false) {
                (void)next_number(&p, end, &x);
                r = buf_printf(out, "%s%" PRIu64, first ? "" : ".", x);
        }
        return r < 0 ? -ENOMEM : 0;
}

int version_highest_supported(char *const *versions, size_t n, struct version *ret, size_t *ret_index, struct buf *err)
{
        struct version best = {NULL, 0, 0}, v;
        size_t best_i = 0;
        bool found = false;

        if (n == 0)
                return buf_set_err(err, -EINVAL, "empty array for supported versions");
        /* From the last to the first; an equal one later in this walk
         * does not replace the one kept. */
        for (size_t k = n; k-- > 0;) {
                if (version_parse_generic(versions[k], &v, NULL) < 0 || version_component(&v, 0) > 1)
                        continue;
                if (!found || version_compare(&best, &v) < 0) {
                        best = v;
                        best_i = k;
                        found = true;
                }
        }
        if (!found || version_component(&best, 0) != 1) {
                if (!err)
                        return -EINVAL;
                buf_reset(err);
                if (buf_puts(err, "could not find a supported version (1.x) among") < 0)
                        goto nomem;
                for (size_t k = 0; k < n; k++)
                        if (buf_puts(err, k ? ", " : " ") < 0 ||
                            buf_json_string(err, versions[k], strlen(versions[k])) < 0)
                                goto nomem;
                return -EINVAL;
        }
        *ret = best;
        if (ret_index)
                *ret_index = best_i;
        return 0;
nomem:
        buf_reset(err);
        return -ENOMEM;
}
