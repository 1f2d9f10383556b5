/*
 * json_canon — canonical JSON text, FNV-1a-128 and a bounded JSON parser
 * (see include/podmux/json_canon.h).
 */

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/linkhash.h>

#include "podmux/json_canon.h"

static int cmp_str_ptr(const void *a, const void *b)
{
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int canon_object(struct buf *out, json_object *v)
{
        size_t n = (size_t)json_object_object_length(v), i = 0;
        const char **keys = NULL;
        int r = -ENOMEM;

        if (n == 0)
                return buf_puts(out, "{}");
        keys = malloc(n * sizeof(*keys));
        if (!keys)
                return -ENOMEM;
        json_object_object_foreach(v, key, val) {
                (void)val;
                keys[i++] = key;
        }
        /* Sorting costs O(k log k) per object; canonical text is computed
         * once per pod version, never per comparison. */
        qsort(keys, n, sizeof(*keys), cmp_str_ptr);
        if (buf_putc(out, '{') < 0)
                goto out;
        for (i = 0; i < n; i++) {
                if ((i && buf_putc(out, ',') < 0) ||
                    buf_json_string(out, keys[i], strlen(keys[i])) < 0 ||
                    buf_putc(out, ':') < 0)
                        goto out;
                r = json_canon_append(out, json_object_object_get(v, keys[i]));
                if (r < 0)
                        goto out;
                r = -ENOMEM;
        }
        if (buf_putc(out, '}') < 0)
                goto out;
        r = 0;
out:
        free(keys);
        return r;
}

/*
 * A scalar as json-c prints it: an int as decoded, a double with the
 * spelling it was parsed from, so "1.0" and "1" stay apart as they do for
 * Go's typed values.  json-c's printer is used for numbers alone: a number
 * fits the printer's first block, so the only allocation it makes is
 * checked (NULL).  Containers and strings never go through it, because
 * json-c ignores failed appends there and would return a text with pieces
 * missing.
 */
static int put_scalar(struct buf *out, json_object *v)
{
        const char *text;

        switch (json_object_get_type(v)) {
        case json_type_null:
                return buf_puts(out, "null");
        case json_type_boolean:
                return buf_puts(out, json_object_get_boolean(v) ? "true" : "false");
        case json_type_int:
        case json_type_double:
                /* An empty text is a failed append too: json-c's printer
                 * of a number kept with its spelling ignores it. */
                text = json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN);
                return text && text[0] ? buf_puts(out, text) : -ENOMEM;
        case json_type_string:
                return buf_json_string(out, json_object_get_string(v),
                                       (size_t)json_object_get_string_len(v));
        default:
                return -EINVAL;
        }
}

static int put_array(struct buf *out, json_object *v, int (*put)(struct buf *, json_object *))
{
        size_t n = json_object_array_length(v);
        int r;

        if (buf_putc(out, '[') < 0)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                if (i && buf_putc(out, ',') < 0)
                        return -ENOMEM;
                r = put(out, json_object_array_get_idx(v, i));
                if (r < 0)
                        return r;
        }
        return buf_putc(out, ']');
}

int json_canon_append(struct buf *out, json_object *v)
{
        switch (json_object_get_type(v)) {
        case json_type_object:
                return canon_object(out, v);
        case json_type_array:
                return put_array(out, v, json_canon_append);
        default:
                return put_scalar(out, v);
        }
}

int json_write(struct buf *out, json_object *v)
{
        bool first = true;

        switch (json_object_get_type(v)) {
        case json_type_object:
                if (buf_putc(out, '{') < 0)
                        return -ENOMEM;
                json_object_object_foreach(v, key, val) {
                        int r;

                        if ((!first && buf_putc(out, ',') < 0) ||
                            buf_json_string(out, key, strlen(key)) < 0 || buf_putc(out, ':') < 0)
                                return -ENOMEM;
                        first = false;
                        r = json_write(out, val);
                        if (r < 0)
                                return r;
                }
                return buf_putc(out, '}');
        case json_type_array:
                return put_array(out, v, json_write);
        default:
                return put_scalar(out, v);
        }
}

/* FNV-1a 128: offset basis 0x6c62272e07bb014262b821756295c58d, prime
 * 2^88 + 0x13b.  Multiplication done in 64-bit halves. */
void fnv128_init(struct fnv128 *h)
{
        h->hi = 0x6c62272e07bb0142ULL;
        h->lo = 0x62b821756295c58dULL;
}

void fnv128_update(struct fnv128 *h, const void *p, size_t n)
{
        const unsigned char *s = p;
        uint64_t hi = h->hi, lo = h->lo;

        for (size_t i = 0; i < n; i++) {
                unsigned __int128 x, prod;

                lo ^= s[i];
                x = ((unsigned __int128)hi << 64) | lo;
                /* x * (2^88 + 0x13b) mod 2^128 */
                prod = x * 0x13bu + (x << 88);
                hi = (uint64_t)(prod >> 64);
                lo = (uint64_t)prod;
        }
        h->hi = hi;
        h->lo = lo;
}

void fnv128_final(const struct fnv128 *h, uint8_t out[16])
{
        for (int i = 0; i < 8; i++) {
                out[i] = (uint8_t)(h->hi >> (56 - 8 * i));
                out[8 + i] = (uint8_t)(h->lo >> (56 - 8 * i));
        }
}

void fnv128_hex(const uint8_t digest[16], char out[33])
{
        static const char hex[] = "0123456789abcdef";

        for (int i = 0; i < 16; i++) {
                out[2 * i] = hex[digest[i] >> 4];
                out[2 * i + 1] = hex[digest[i] & 15];
        }
        out[32] = '\0';
}

/* ---- checked building ---------------------------------------------------- */

int json_put(json_object *o, const char *key, json_object *v)
{
        struct lh_table *t = json_object_get_object(o);

        /* json-c 0.16 leaks its copy of a new key when the table cannot
         * grow, so the table is grown here first, where a failure costs
         * nothing; then the add cannot need memory but for the key. */
        if (t && !json_object_object_get_ex(o, key, NULL) && t->count >= t->size * LH_LOAD_FACTOR &&
            (t->size > INT32_MAX / 2 || lh_table_resize(t, t->size * 2) != 0)) {
                json_object_put(v);
                return -ENOMEM;
        }
        if (json_object_object_add(o, key, v) != 0) {
                json_object_put(v);
                return -ENOMEM;
        }
        return 0;
}

int json_copy(json_object *src, json_object **ret)
{
        json_object *dst = NULL;
        int r = 0;

        switch (json_object_get_type(src)) {
        case json_type_null:
                *ret = NULL;
                return 0;
        case json_type_boolean:
                dst = json_object_new_boolean(json_object_get_boolean(src));
                break;
        case json_type_int:
                /* int64 or uint64, as stored. */
                dst = json_object_get_int64(src) >= 0 && json_object_get_uint64(src) > INT64_MAX
                              ? json_object_new_uint64(json_object_get_uint64(src))
                              : json_object_new_int64(json_object_get_int64(src));
                break;
        case json_type_double: {
                /* The spelling the number was decoded with goes along. */
                const char *text = json_object_to_json_string_ext(src, JSON_C_TO_STRING_PLAIN);

                if (!text || !text[0])
                        return -ENOMEM;
                dst = json_object_new_double_s(json_object_get_double(src), text);
                break;
        }
        case json_type_string:
                dst = json_object_new_string_len(json_object_get_string(src), json_object_get_string_len(src));
                break;
        case json_type_array: {
                size_t n = json_object_array_length(src);

                dst = json_object_new_array_ext(n > 0 && n < INT32_MAX ? (int)n : 1);
                for (size_t i = 0; dst && r == 0 && i < n; i++) {
                        json_object *el = NULL;

                        r = json_copy(json_object_array_get_idx(src, i), &el);
                        if (r == 0 && json_object_array_add(dst, el) != 0) {
                                json_object_put(el);
                                r = -ENOMEM;
                        }
                }
                break;
        }
        case json_type_object:
                dst = json_object_new_object();
                if (!dst)
                        break;
                json_object_object_foreach(src, k, v) {
                        json_object *el = NULL;

                        r = json_copy(v, &el);
                        if (r == 0)
                                r = json_put(dst, k, el);
                        if (r < 0)
                                break;
                }
                break;
        }
        if (!dst)
                return -ENOMEM;
        if (r < 0) {
                json_object_put(dst);
                return r;
        }
        *ret = dst;
        return 0;
}

/* ---- parsing ---------------------------------------------------------------- */

/*
 * A recursive-descent parser for strict JSON (RFC 8259) that builds json-c
 * values.  json-c's own tokener is not used: when memory runs out it drops
 * members, turns strings into nulls or truncates them, and passes a NULL
 * key to the hash table (a crash).  The values built are those json-c
 * builds: integers as int64 (uint64 above INT64_MAX, clamped at the
 * ends), other numbers as doubles keeping their spelling, the last of
 * duplicate keys wins, a key stops at an escaped NUL, a lone surrogate
 * escape becomes U+FFFD.  Raw control characters in strings and anything
 * after the value but white space are errors.
 *
 * Cost: one pass; the recursion is bounded by JSON_MAX_DEPTH.  Strings are
 * decoded into one scratch buffer, keys onto a stack of them, so nothing
 * is allocated per member beyond what json-c keeps.
 */
struct jp {
        const char *s;
        size_t len, pos;
        struct buf str;  /* the string value being decoded */
        struct buf keys; /* the keys of the open objects, NUL-separated */
        struct buf *err;
};

static int jp_fail(struct jp *p, size_t at, const char *what)
{
        if (!p->err)
                return -EINVAL;
        if (at >= p->len ? buf_puts(p->err, "unexpected end of JSON input") < 0
                         : buf_printf(p->err, "byte %zu: %s", at, what) < 0)
                return -ENOMEM; /* the message is part of the result */
        return -EINVAL;
}

static void jp_space(struct jp *p)
{
        while (p->pos < p->len &&
               (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\r' || p->s[p->pos] == '\n'))
                p->pos++;
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

static int put_utf8(struct buf *b, unsigned c)
{
        char u[4];
        size_t n;

        if (c < 0x80) {
                u[0] = (char)c;
                n = 1;
        } else if (c < 0x800) {
                u[0] = (char)(0xc0 | (c >> 6));
                u[1] = (char)(0x80 | (c & 0x3f));
                n = 2;
        } else if (c < 0x10000) {
                u[0] = (char)(0xe0 | (c >> 12));
                u[1] = (char)(0x80 | ((c >> 6) & 0x3f));
                u[2] = (char)(0x80 | (c & 0x3f));
                n = 3;
        } else {
                u[0] = (char)(0xf0 | (c >> 18));
                u[1] = (char)(0x80 | ((c >> 12) & 0x3f));
                u[2] = (char)(0x80 | ((c >> 6) & 0x3f));
                u[3] = (char)(0x80 | (c & 0x3f));
                n = 4;
        }
        return buf_append(b, u, n);
}

/* Decodes the string at p->pos (its opening quote) onto out. */
static int jp_string(struct jp *p, struct buf *out)
{
        p->pos++;

        for (;;) {
                size_t run = p->pos;
                unsigned c, lo;
                int r = 0;

                while (p->pos < p->len && p->s[p->pos] != '"' && p->s[p->pos] != '\\' &&
                       (unsigned char)p->s[p->pos] >= 0x20)
                        p->pos++;
                if (p->pos > run && buf_append(out, p->s + run, p->pos - run) < 0)
                        return -ENOMEM;
                if (p->pos >= p->len)
                        return jp_fail(p, p->len, NULL);
                if (p->s[p->pos] == '"') {
                        p->pos++;
                        return 0;
                }
                if ((unsigned char)p->s[p->pos] < 0x20)
                        return jp_fail(p, p->pos, "control character in a string");
                /* An escape. */
                if (p->pos + 1 >= p->len)
                        return jp_fail(p, p->len, NULL);
                switch (p->s[p->pos + 1]) {
                case '"':
                case '\\':
                case '/':
                        r = buf_putc(out, p->s[p->pos + 1]);
                        break;
                case 'b':
                        r = buf_putc(out, '\b');
                        break;
                case 'f':
                        r = buf_putc(out, '\f');
                        break;
                case 'n':
                        r = buf_putc(out, '\n');
                        break;
                case 'r':
                        r = buf_putc(out, '\r');
                        break;
                case 't':
                        r = buf_putc(out, '\t');
                        break;
                case 'u':
                        if (p->pos + 6 > p->len)
                                return jp_fail(p, p->len, NULL);
                        if (hex4(p->s + p->pos + 2, &c) < 0)
                                return jp_fail(p, p->pos, "invalid \\u escape in a string");
                        p->pos += 4;
                        if (c >= 0xd800 && c < 0xdc00 && p->pos + 8 <= p->len && p->s[p->pos + 2] == '\\' &&
                            p->s[p->pos + 3] == 'u' && hex4(p->s + p->pos + 4, &lo) == 0 && lo >= 0xdc00 &&
                            lo < 0xe000) {
                                c = 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
                                p->pos += 6;
                        } else if (c >= 0xd800 && c < 0xe000) {
                                c = 0xfffd; /* a lone surrogate */
                        }
                        r = put_utf8(out, c);
                        break;
                default:
                        return jp_fail(p, p->pos, "invalid escape in a string");
                }
                if (r < 0)
                        return -ENOMEM;
                p->pos += 2;
        }
}

static int jp_number(struct jp *p, json_object **ret)
{
        size_t start = p->pos;
        bool is_double = false;
        char tmp[64], *text = tmp;
        size_t n;
        json_object *o;

        if (p->s[p->pos] == '-')
                p->pos++;
        if (p->pos < p->len && p->s[p->pos] == '0') {
                p->pos++;
        } else if (p->pos < p->len && p->s[p->pos] >= '1' && p->s[p->pos] <= '9') {
                while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
                        p->pos++;
        } else {
                return jp_fail(p, p->pos, "invalid number");
        }
        if (p->pos < p->len && p->s[p->pos] == '.') {
                size_t d = ++p->pos;

                is_double = true;
                while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
                        p->pos++;
                if (p->pos == d)
                        return jp_fail(p, p->pos, "invalid number");
        }
        if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
                size_t d;

                is_double = true;
                p->pos++;
                if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-'))
                        p->pos++;
                d = p->pos;
                while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
                        p->pos++;
                if (p->pos == d)
                        return jp_fail(p, p->pos, "invalid number");
        }
        n = p->pos - start;
        if (n >= sizeof(tmp)) {
                text = malloc(n + 1);
                if (!text)
                        return -ENOMEM;
        }
        memcpy(text, p->s + start, n);
        text[n] = '\0';
        /* strtoll and strtoull clamp at their ends, as json-c's readers. */
        if (is_double) {
                o = json_object_new_double_s(strtod(text, NULL), text);
        } else if (text[0] == '-') {
                o = json_object_new_int64(strtoll(text, NULL, 10));
        } else {
                unsigned long long u = strtoull(text, NULL, 10);

                o = u > INT64_MAX ? json_object_new_uint64(u) : json_object_new_int64((int64_t)u);
        }
        if (text != tmp)
                free(text);
        if (!o)
                return -ENOMEM;
        *ret = o;
        return 0;
}

static int jp_value(struct jp *p, int depth, json_object **ret);

static int jp_word(struct jp *p, const char *word)
{
        size_t n = strlen(word);

        if (p->len - p->pos < n)
                return memcmp(p->s + p->pos, word, p->len - p->pos) == 0 ? jp_fail(p, p->len, NULL)
                                                                         : jp_fail(p, p->pos, "unexpected character");
        if (memcmp(p->s + p->pos, word, n) != 0)
                return jp_fail(p, p->pos, "unexpected character");
        p->pos += n;
        return 0;
}

static int jp_array(struct jp *p, int depth, json_object **ret)
{
        json_object *a = json_object_new_array();
        int r = 0;

        if (!a)
                return -ENOMEM;
        p->pos++;
        jp_space(p);
        if (p->pos < p->len && p->s[p->pos] == ']') {
                p->pos++;
                *ret = a;
                return 0;
        }
        for (;;) {
                json_object *v = NULL;

                if (depth + 1 >= JSON_MAX_DEPTH) {
                        r = jp_fail(p, p->pos, "nesting too deep");
                        break;
                }
                r = jp_value(p, depth + 1, &v);
                if (r < 0)
                        break;
                if (json_object_array_add(a, v) != 0) {
                        json_object_put(v);
                        r = -ENOMEM;
                        break;
                }
                jp_space(p);
                if (p->pos < p->len && p->s[p->pos] == ',') {
                        p->pos++;
                        continue;
                }
                if (p->pos < p->len && p->s[p->pos] == ']') {
                        p->pos++;
                        *ret = a;
                        return 0;
                }
                r = jp_fail(p, p->pos, "',' or ']' expected");
                break;
        }
        json_object_put(a);
        return r;
}

static int jp_object(struct jp *p, int depth, json_object **ret)
{
        json_object *o = json_object_new_object();
        int r = 0;

        if (!o)
                return -ENOMEM;
        p->pos++;
        jp_space(p);
        if (p->pos < p->len && p->s[p->pos] == '}') {
                p->pos++;
                *ret = o;
                return 0;
        }
        for (;;) {
                size_t key = p->keys.len;
                json_object *v = NULL;

                if (p->pos >= p->len || p->s[p->pos] != '"') {
                        r = jp_fail(p, p->pos, "quoted member name expected");
                        break;
                }
                r = jp_string(p, &p->keys);
                if (r == 0 && buf_putc(&p->keys, '\0') < 0)
                        r = -ENOMEM;
                if (r < 0)
                        break;
                jp_space(p);
                if (p->pos >= p->len || p->s[p->pos] != ':') {
                        r = jp_fail(p, p->pos, "':' expected");
                        break;
                }
                p->pos++;
                if (depth + 1 >= JSON_MAX_DEPTH) {
                        r = jp_fail(p, p->pos, "nesting too deep");
                        break;
                }
                r = jp_value(p, depth + 1, &v);
                /* The stack may have moved while the value was read. */
                if (r == 0)
                        r = json_put(o, p->keys.data + key, v);
                p->keys.len = key;
                if (r < 0)
                        break;
                jp_space(p);
                if (p->pos < p->len && p->s[p->pos] == ',') {
                        p->pos++;
                        jp_space(p);
                        continue;
                }
                if (p->pos < p->len && p->s[p->pos] == '}') {
                        p->pos++;
                        *ret = o;
                        return 0;
                }
                r = jp_fail(p, p->pos, "',' or '}' expected");
                break;
        }
        json_object_put(o);
        return r;
}

static int jp_value(struct jp *p, int depth, json_object **ret)
{
        int r;

        jp_space(p);
        if (p->pos >= p->len)
                return jp_fail(p, p->len, NULL);
        switch (p->s[p->pos]) {
        case '{':
                return jp_object(p, depth, ret);
        case '[':
                return jp_array(p, depth, ret);
        case '"':
                buf_reset(&p->str);
                r = jp_string(p, &p->str);
                if (r < 0)
                        return r;
                *ret = json_object_new_string_len(p->str.data ? p->str.data : "", (int)p->str.len);
                return *ret ? 0 : -ENOMEM;
        case 't':
                r = jp_word(p, "true");
                if (r == 0 && !(*ret = json_object_new_boolean(1)))
                        r = -ENOMEM;
                return r;
        case 'f':
                r = jp_word(p, "false");
                if (r == 0 && !(*ret = json_object_new_boolean(0)))
                        r = -ENOMEM;
                return r;
        case 'n':
                r = jp_word(p, "null");
                if (r == 0)
                        *ret = NULL;
                return r;
        default:
                if (p->s[p->pos] == '-' || (p->s[p->pos] >= '0' && p->s[p->pos] <= '9'))
                        return jp_number(p, ret);
                return jp_fail(p, p->pos, "unexpected character");
        }
}

int json_parse_text(const char *text, size_t len, json_object **ret_obj, struct buf *err)
{
        struct jp p = {.s = text ? text : "", .len = text ? len : 0, .err = err};
        json_object *obj = NULL;
        int r;

        if (len > (size_t)INT32_MAX) {
                if (err && buf_puts(err, "JSON text too large") < 0)
                        return -ENOMEM;
                return -EFBIG;
        }
        r = jp_value(&p, 0, &obj);
        if (r == 0) {
                jp_space(&p);
                if (p.pos < p.len) {
                        json_object_put(obj);
                        r = jp_fail(&p, p.pos, "unexpected data after the JSON value");
                }
        }
        if (r == 0)
                *ret_obj = obj;
        buf_free(&p.str);
        buf_free(&p.keys);
        return r;
}
