/*
 * json_parse — strict JSON into json-c values, every allocation checked
 * (see src/util/json_parse.h).
 *
 * A recursive descent over the text; the recursion is bounded by
 * max_depth.  Strings without escapes are handed to json-c straight from
 * the text; with escapes they are decoded into one scratch buffer that
 * lives for the whole parse.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/linkhash.h>

#include "util/json_parse.h"

/* ---- checked building ---------------------------------------------------- */

int json_put(json_object *o, const char *key, json_object *v)
{
        struct lh_table *t = json_object_get_object(o);

        /* json-c 0.16 leaks its copy of a new key when the table cannot
         * grow, so the table is grown here first, where a failure costs
         * nothing; then the add cannot need memory but for the key. */
        bool is_new = t && !json_object_object_get_ex(o, key, NULL);

        if (is_new && t->count >= t->size * LH_LOAD_FACTOR &&
            (t->size > INT32_MAX / 2 || lh_table_resize(t, t->size * 2) != 0)) {
                json_object_put(v);
                return -ENOMEM;
        }
        /* A key just found absent is added without json-c looking again. */
        if (json_object_object_add_ex(o, key, v, is_new ? JSON_C_OBJECT_ADD_KEY_IS_NEW : 0) != 0) {
                json_object_put(v);
                return -ENOMEM;
        }
        return 0;
}

/* ---- the parser ---------------------------------------------------------- */

struct parser {
        const char *s;
        size_t len, pos;
        unsigned max_depth;
        struct buf scratch; /* decoded strings */
        struct buf *err;
        bool final; /* the text is whole: a number may end it */
        bool skip;  /* validate only: build no value, decode no string */
};

/* Bytes of a decoded string into p->scratch; nothing when only
 * validating, so a skip needs no memory at all. */
static int scratch_append(struct parser *p, const char *s, size_t n)
{
        return p->skip ? 0 : buf_append(&p->scratch, s, n);
}

/* A syntax error at the current byte.  -EINVAL, or -EAGAIN when the text
 * simply ended (a caller with more text to come may try again); -ENOMEM
 * when the message cannot be written (an error without its reason would
 * be taken for the input's fault). */
static int fail(struct parser *p, const char *what)
{
        if (p->pos >= p->len)
                return buf_set_err(p->err, -EAGAIN, "unexpected end of JSON input");
        return buf_set_err(p->err, -EINVAL, "byte %zu: %s", p->pos, what);
}

static void skip_ws_run(struct parser *p)
{
        while (p->pos < p->len) {
                char c = p->s[p->pos];

                if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
                        return;
                p->pos++;
        }
}

/* Inline: compact text has no white space, so this is one test. */
static inline void skip_ws(struct parser *p)
{
        if (p->pos < p->len && (unsigned char)p->s[p->pos] > ' ')
                return;
        skip_ws_run(p);
}

static int hex4(const char *s, unsigned *ret)
{
        unsigned v = 0;

        for (int i = 0; i < 4; i++) {
                char c = s[i];

                v <<= 4;
                if (c >= '0' && c <= '9')
                        v |= (unsigned)(c - '0');
                else if (c >= 'a' && c <= 'f')
                        v |= (unsigned)(c - 'a' + 10);
                else if (c >= 'A' && c <= 'F')
                        v |= (unsigned)(c - 'A' + 10);
                else
                        return -1;
        }
        *ret = v;
        return 0;
}

static int put_utf8(struct parser *p, unsigned cp)
{
        char out[4];
        size_t n;

        if (cp < 0x80) {
                out[0] = (char)cp;
                n = 1;
        } else if (cp < 0x800) {
                out[0] = (char)(0xc0 | (cp >> 6));
                out[1] = (char)(0x80 | (cp & 0x3f));
                n = 2;
        } else if (cp < 0x10000) {
                out[0] = (char)(0xe0 | (cp >> 12));
                out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
                out[2] = (char)(0x80 | (cp & 0x3f));
                n = 3;
        } else {
                out[0] = (char)(0xf0 | (cp >> 18));
                out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
                out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
                out[3] = (char)(0x80 | (cp & 0x3f));
                n = 4;
        }
        return scratch_append(p, out, n);
}

/* Steps p->pos over bytes that stand for themselves in a string: it stops
 * at a quote, a backslash, a control character, a byte that starts no
 * well-formed UTF-8 sequence, or the end of the text. */
static void skip_plain(struct parser *p)
{
        const unsigned char *s = (const unsigned char *)p->s;
        size_t i = p->pos, n = p->len;

        for (;;) {
                /* Eight bytes at a time while none of them ends the run:
                 * strings are most of a pod's text, and most of their
                 * bytes are plain ASCII. */
                while (n - i >= 8) {
                        const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
                        uint64_t w, q, b;

                        memcpy(&w, s + i, 8);
                        q = w ^ (ones * '"');
                        b = w ^ (ones * '\\');
                        w = ((w - ones * 0x20) | w | ((q - ones) & ~q) | ((b - ones) & ~b)) & highs;
                        if (w) {
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
                                /* The lowest flagged byte is a real stop
                                 * (a borrow only flags bytes above one). */
                                i += (size_t)__builtin_ctzll(w) / 8;
#endif
                                break;
                        }
                        i += 8;
                }
                while (i < n) {
                        unsigned char c = s[i];

                        if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80)
                                break;
                        i++;
                }
                if (i < n && s[i] >= 0x80) {
                        size_t k = utf8_len(s + i, n - i);

                        if (k) {
                                i += k;
                                continue;
                        }
                }
                p->pos = i;
                return;
        }
}

/* The \u escape whose 'u' is at p->pos, decoded into p->scratch, with
 * p->pos past it; a surrogate pair is taken whole, a lone surrogate is
 * U+FFFD. */
static int parse_unicode(struct parser *p)
{
        unsigned cp, lo;

        if (p->pos + 4 >= p->len) {
                p->pos = p->len;
                return fail(p, "unterminated string");
        }
        if (hex4(p->s + p->pos + 1, &cp) < 0)
                return fail(p, "bad \\u escape");
        p->pos += 5;
        if (cp >= 0xd800 && cp < 0xdc00) {
                /* A high surrogate pairs with a following \u low
                 * surrogate; alone it is U+FFFD. */
                if (p->pos + 5 < p->len && p->s[p->pos] == '\\' && p->s[p->pos + 1] == 'u' &&
                    hex4(p->s + p->pos + 2, &lo) == 0 && lo >= 0xdc00 && lo < 0xe000) {
                        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                        p->pos += 6;
                } else if (p->pos + 5 >= p->len && p->pos < p->len && p->s[p->pos] == '\\') {
                        /* The pair may be cut by the end of the text. */
                        p->pos = p->len;
                        return fail(p, "unterminated string");
                } else {
                        cp = 0xfffd;
                }
        } else if (cp >= 0xdc00 && cp < 0xe000) {
                cp = 0xfffd;
        }
        if (put_utf8(p, cp) < 0)
                return -ENOMEM;
        return 0;
}

/* The escape whose backslash is at p->pos, decoded into p->scratch, with
 * p->pos past it. */
static int parse_escape(struct parser *p)
{
        unsigned char c;

        if (p->pos + 1 >= p->len) {
                p->pos = p->len;
                return fail(p, "unterminated string");
        }
        c = (unsigned char)p->s[++p->pos];
        if (c == 'u')
                return parse_unicode(p);
        switch (c) {
        case '"':
        case '\\':
        case '/':
                break;
        case 'b':
                c = '\b';
                break;
        case 'f':
                c = '\f';
                break;
        case 'n':
                c = '\n';
                break;
        case 'r':
                c = '\r';
                break;
        case 't':
                c = '\t';
                break;
        default:
                return fail(p, "bad escape in a string");
        }
        if (scratch_append(p, (const char *)&c, 1) < 0)
                return -ENOMEM;
        p->pos++;
        return 0;
}

/*
 * The string at p->pos (at its opening quote).  *ret_text, *ret_len: the
 * decoded bytes, pointing into the text when there was no escape, else
 * into p->scratch (valid until the next string).
 */
static int parse_string(struct parser *p, const char **ret_text, size_t *ret_len)
{
        size_t start = ++p->pos, run;
        bool escaped = false;
        int r;

        if (!p->skip)
                buf_reset(&p->scratch);
        for (;;) {
                unsigned char c;

                run = p->pos;
                skip_plain(p);
                if (p->pos >= p->len)
                        return fail(p, "unterminated string");
                c = (unsigned char)p->s[p->pos];
                if (c < 0x20)
                        return fail(p, "control character in a string");
                if (escaped && scratch_append(p, p->s + run, p->pos - run) < 0)
                        return -ENOMEM;
                if (c >= 0x80) {
                        /* A byte that starts no valid UTF-8 sequence (or
                         * one cut by the end of the text) decodes as
                         * U+FFFD, one per byte, as Go's decoder does. */
                        if (!escaped && scratch_append(p, p->s + start, p->pos - start) < 0)
                                return -ENOMEM;
                        escaped = true;
                        if (put_utf8(p, 0xfffd) < 0)
                                return -ENOMEM;
                        p->pos++;
                        continue;
                }
                if (c == '"') {
                        p->pos++;
                        if (!escaped) {
                                *ret_text = p->s + start;
                                *ret_len = p->pos - 1 - start;
                        } else {
                                *ret_text = p->scratch.data;
                                *ret_len = p->scratch.len;
                        }
                        return 0;
                }
                /* A backslash: everything before it goes to scratch. */
                if (!escaped) {
                        if (scratch_append(p, p->s + start, p->pos - start) < 0)
                                return -ENOMEM;
                        escaped = true;
                }
                r = parse_escape(p);
                if (r < 0)
                        return r;
        }
}

static bool is_digit(char c)
{
        return c >= '0' && c <= '9';
}

/* An integer literal (optional '-', digits) that fits: 0, else -ERANGE. */
static int int_value(const char *s, size_t n, bool *ret_neg, uint64_t *ret_mag)
{
        bool neg = s[0] == '-';
        uint64_t v = 0;

        for (size_t i = neg; i < n; i++) {
                unsigned d = (unsigned)(s[i] - '0');

                if (v > (UINT64_MAX - d) / 10)
                        return -ERANGE;
                v = v * 10 + d;
        }
        if (neg && v > (uint64_t)INT64_MAX + 1)
                return -ERANGE;
        *ret_neg = neg;
        *ret_mag = v;
        return 0;
}

/* Steps over the number at p->pos; *ret_frac: it has a fraction or an
 * exponent. */
static int number_syntax(struct parser *p, bool *ret_frac)
{
        bool frac = false;

        if (p->s[p->pos] == '-')
                p->pos++;
        if (p->pos >= p->len)
                return fail(p, "bad number");
        if (p->s[p->pos] == '0') {
                p->pos++;
        } else if (is_digit(p->s[p->pos])) {
                while (p->pos < p->len && is_digit(p->s[p->pos]))
                        p->pos++;
        } else {
                return fail(p, "bad number");
        }
        if (p->pos < p->len && p->s[p->pos] == '.') {
                frac = true;
                p->pos++;
                if (p->pos >= p->len || !is_digit(p->s[p->pos]))
                        return fail(p, "bad number");
                while (p->pos < p->len && is_digit(p->s[p->pos]))
                        p->pos++;
        }
        if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
                frac = true;
                p->pos++;
                if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-'))
                        p->pos++;
                if (p->pos >= p->len || !is_digit(p->s[p->pos]))
                        return fail(p, "bad number");
                while (p->pos < p->len && is_digit(p->s[p->pos]))
                        p->pos++;
        }
        /* A number that ends a piece may go on in the next one. */
        if (p->pos >= p->len && !p->final)
                return fail(p, "bad number");
        *ret_frac = frac;
        return 0;
}

static int parse_number(struct parser *p, json_object **ret)
{
        size_t start = p->pos;
        bool frac = false, neg;
        uint64_t mag;
        char small[64], *lit;
        json_object *o;
        double d;
        int r = number_syntax(p, &frac);

        if (r < 0 || p->skip)
                return r;
        if (!frac && int_value(p->s + start, p->pos - start, &neg, &mag) == 0) {
                if (neg)
                        o = json_object_new_int64(mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag);
                else if (mag <= (uint64_t)INT64_MAX)
                        o = json_object_new_int64((int64_t)mag);
                else
                        o = json_object_new_uint64(mag);
                if (!o)
                        return -ENOMEM;
                *ret = o;
                return 0;
        }
        /* A double (or an integer too large for 64 bits): its value, and
         * its spelling for printing it back as it came. */
        lit = p->pos - start < sizeof(small) ? small : malloc(p->pos - start + 1);
        if (!lit)
                return -ENOMEM;
        memcpy(lit, p->s + start, p->pos - start);
        lit[p->pos - start] = '\0';
        d = strtod(lit, NULL);
        o = json_object_new_double_s(d, lit);
        if (lit != small)
                free(lit);
        if (!o)
                return -ENOMEM;
        *ret = o;
        return 0;
}

static int parse_value(struct parser *p, unsigned depth, json_object **ret);

/* In a skip, arrays and objects are walked the same way with nothing built
 * (arr, obj NULL). */
static int parse_array(struct parser *p, unsigned depth, json_object **ret)
{
        json_object *arr = p->skip ? NULL : json_object_new_array();
        int r;

        if (!arr && !p->skip)
                return -ENOMEM;
        p->pos++;
        skip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == ']') {
                p->pos++;
                *ret = arr;
                return 0;
        }
        for (;;) {
                json_object *v = NULL;

                r = parse_value(p, depth, &v);
                if (r < 0)
                        goto fail;
                if (!p->skip && json_object_array_add(arr, v) < 0) {
                        json_object_put(v);
                        r = -ENOMEM;
                        goto fail;
                }
                skip_ws(p);
                if (p->pos >= p->len) {
                        r = fail(p, "");
                        goto fail;
                }
                if (p->s[p->pos] == ']') {
                        p->pos++;
                        *ret = arr;
                        return 0;
                }
                if (p->s[p->pos] != ',') {
                        r = fail(p, "expected ',' or ']' in an array");
                        goto fail;
                }
                p->pos++;
        }
fail:
        json_object_put(arr);
        return r;
}

static int parse_object(struct parser *p, unsigned depth, json_object **ret)
{
        json_object *obj = p->skip ? NULL : json_object_new_object();
        char small[128], *key = NULL;
        int r;

        if (!obj && !p->skip)
                return -ENOMEM;
        p->pos++;
        skip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == '}') {
                p->pos++;
                *ret = obj;
                return 0;
        }
        for (;;) {
                json_object *v = NULL;
                const char *k;
                size_t klen;

                skip_ws(p);
                if (p->pos >= p->len || p->s[p->pos] != '"') {
                        r = fail(p, "expected a member name in an object");
                        goto fail;
                }
                r = parse_string(p, &k, &klen);
                if (r < 0)
                        goto fail;
                if (p->skip)
                        goto value;
                /* json-c keys are C strings: a copy, cut at a NUL as
                 * json-c's own parser cuts it. */
                key = klen < sizeof(small) ? small : malloc(klen + 1);
                if (!key) {
                        r = -ENOMEM;
                        goto fail;
                }
                memcpy(key, k, klen);
                key[klen] = '\0';
        value:
                skip_ws(p);
                if (p->pos >= p->len || p->s[p->pos] != ':') {
                        r = fail(p, "expected ':' after a member name");
                        goto fail;
                }
                p->pos++;
                r = parse_value(p, depth, &v);
                if (r < 0)
                        goto fail;
                if (!p->skip) {
                        r = json_put(obj, key, v);
                        if (r < 0)
                                goto fail;
                }
                if (key != small)
                        free(key);
                key = NULL;
                skip_ws(p);
                if (p->pos >= p->len) {
                        r = fail(p, "");
                        goto fail;
                }
                if (p->s[p->pos] == '}') {
                        p->pos++;
                        *ret = obj;
                        return 0;
                }
                if (p->s[p->pos] != ',') {
                        r = fail(p, "expected ',' or '}' in an object");
                        goto fail;
                }
                p->pos++;
        }
fail:
        if (key != small)
                free(key);
        json_object_put(obj);
        return r;
}

static int literal(struct parser *p, const char *word, json_object **ret, json_object *val, bool is_null)
{
        size_t n = strlen(word), have = p->len - p->pos < n ? p->len - p->pos : n;

        if (memcmp(p->s + p->pos, word, have) != 0) {
                json_object_put(val);
                return fail(p, "unexpected character");
        }
        if (have < n) {
                json_object_put(val);
                p->pos = p->len;
                return fail(p, "");
        }
        if (!is_null && !val && !p->skip)
                return -ENOMEM;
        p->pos += n;
        *ret = val;
        return 0;
}

static int parse_value(struct parser *p, unsigned depth, json_object **ret)
{
        const char *t;
        size_t n;
        int r;

        skip_ws(p);
        if (p->pos >= p->len)
                return fail(p, "");
        switch (p->s[p->pos]) {
        case '{':
        case '[':
                if (depth >= p->max_depth)
                        return fail(p, "nesting too deep");
                return p->s[p->pos] == '{' ? parse_object(p, depth + 1, ret) : parse_array(p, depth + 1, ret);
        case '"':
                r = parse_string(p, &t, &n);
                if (r < 0 || p->skip)
                        return r;
                *ret = json_object_new_string_len(t, (int)n);
                return *ret ? 0 : -ENOMEM;
        case 't':
                return literal(p, "true", ret, p->skip ? NULL : json_object_new_boolean(1), false);
        case 'f':
                return literal(p, "false", ret, p->skip ? NULL : json_object_new_boolean(0), false);
        case 'n':
                return literal(p, "null", ret, NULL, true);
        default:
                if (p->s[p->pos] == '-' || is_digit(p->s[p->pos]))
                        return parse_number(p, ret);
                return fail(p, "unexpected character");
        }
}

static int run(struct parser *p, json_object **ret_obj)
{
        json_object *o = NULL;
        int r;

        if (p->len > (size_t)INT32_MAX)
                return buf_set_err(p->err, -EFBIG, "JSON text too large");
        r = parse_value(p, 0, &o);
        buf_free(&p->scratch);
        if (r == -ENOMEM && p->err)
                buf_reset(p->err); /* a failure replaces what err held */
        if (r < 0)
                return r;
        *ret_obj = o;
        return 0;
}

int json_parse_next(const char *text, size_t len, size_t *pos, unsigned max_depth,
                    json_object **ret_obj, struct buf *err)
{
        struct parser p = {.s = text, .len = len, .pos = *pos, .max_depth = max_depth, .err = err, .scratch = BUF_INIT};
        int r = run(&p, ret_obj);

        if (r == 0)
                *pos = p.pos;
        return r;
}

int json_skip_next(const char *text, size_t len, size_t *pos, unsigned max_depth, struct buf *err)
{
        struct parser p = {.s = text,
                           .len = len,
                           .pos = *pos,
                           .max_depth = max_depth,
                           .err = err,
                           .skip = true,
                           .scratch = BUF_INIT};
        json_object *none = NULL;
        int r = run(&p, &none);

        if (r == 0)
                *pos = p.pos;
        return r;
}

int json_string_next(const char *text, size_t len, size_t *pos, struct buf *scratch, const char **ret_s,
                     size_t *ret_len, struct buf *err)
{
        struct parser p = {.s = text, .len = len, .pos = *pos, .err = err, .scratch = *scratch};
        const char *s = NULL;
        size_t n = 0;
        int r;

        skip_ws(&p);
        if (p.pos >= p.len || p.s[p.pos] != '"')
                r = fail(&p, "expected a string");
        else
                r = parse_string(&p, &s, &n);
        /* The scratch buffer is the caller's: it may have grown. */
        *scratch = p.scratch;
        if (r == -ENOMEM && err)
                buf_reset(err);
        if (r < 0)
                return r;
        *pos = p.pos;
        *ret_s = s;
        *ret_len = n;
        return 0;
}

int json_parse(const char *text, size_t len, unsigned max_depth, json_object **ret_obj,
               struct buf *err)
{
        struct parser p = {
                .s = text, .len = len, .max_depth = max_depth, .err = err, .final = true, .scratch = BUF_INIT};
        json_object *o = NULL;
        int r = run(&p, &o);

        if (r == -EAGAIN)
                return -EINVAL; /* no more is coming */
        if (r < 0)
                return r;
        skip_ws(&p);
        if (p.pos < len) {
                json_object_put(o);
                return buf_set_err(err, -EINVAL, "byte %zu: unexpected data after the JSON value", p.pos);
        }
        *ret_obj = o;
        return 0;
}

int json_parse_text(const char *text, size_t len, json_object **ret_obj, struct buf *err)
{
        return json_parse(text, len, JSON_MAX_DEPTH, ret_obj, err);
}
