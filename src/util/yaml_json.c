/*
 * yaml_json — YAML (and JSON) text to a json-c tree through libyaml's event
 * parser (see src/util/yaml_json.h).
 *
 * The rules copy what the kubelet gets from sigs.k8s.io/yaml, which decodes
 * with Go's yaml.v2 into interface{} values and re-encodes them as JSON:
 *
 *   - plain scalars resolve by YAML 1.1 as yaml.v2 does (resolve.go): the
 *     first character picks the candidates, then an exact-spelling table
 *     (null/bool/.inf/.nan), then Go's strconv rules for integers (base
 *     prefixes 0x 0o 0b, a leading 0 for octal, underscores removed) and a
 *     YAML-style float pattern; everything else stays a string;
 *   - quoted and block scalars are strings; explicit tags (!!str, !!int,
 *     !!float, !!bool, !!null, !!binary) are honored, other tags give strings;
 *   - anchors and aliases are expanded (deep copies, so the caller may edit
 *     the tree freely), bounded by YAML_JSON_MAX_NODES and
 *     YAML_JSON_MAX_DEPTH; merge keys (<<) work as in yaml.v2, where merged
 *     keys override the keys written before the << entry;
 *   - mapping keys become strings the way sigs.k8s.io/yaml prints them
 *     (yes -> "true", 0x10 -> "16"); null or collection keys are errors;
 *   - duplicate keys: the last one wins, silently, as in yaml.v2.
 *
 * Numbers: integers that fit int64 are int64; larger ones up to 2^64-1 are
 * uint64 (Go's uint64); anything bigger that still looks like a float is a
 * double, otherwise a string (Go's order of attempts).  A double keeps the
 * spelling it was written with when that spelling is valid JSON, so "1.50"
 * stays "1.50" in canonical output; a YAML-only spelling (1_000.5, +.5, 08)
 * is replaced by the shortest text that reads back to the same double.
 * Infinity and NaN cannot be JSON (Go's json.Marshal fails on them too):
 * they are errors with their line and column.
 */

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/linkhash.h>
#include <yaml.h>

#include "util/base64.h"
#include "util/json_canon.h"
#include "util/json_parse.h"
#include "util/yaml_json.h"

#define TAG_PREFIX "tag:yaml.org,2002:"
/* Plain scalars longer than this are strings without trying the number
 * rules (Go would still read a 600-digit run as a float; nobody writes
 * one in a manifest, and the bound keeps resolution off the heap). */
#define NUMBER_MAX 512

/* One open collection.  Mappings alternate key / value: key is NULL while
 * a key is expected. */
struct frame {
        json_object *node;
        bool is_map;
        char *key;
        bool merge;              /* the pending key is the merge key << */
        char *anchor;            /* registered when the collection ends */
        size_t nodes_at_start;
        int height;              /* 1 + tallest child so far */
        yaml_mark_t start;       /* where the collection begins, for errors */
};

/* An anchored node; aliases copy it.  nodes and height say what a copy
 * costs, checked before copying. */
struct anchor {
        char *name;
        json_object *node;
        size_t nodes;
        int height;
};

struct conv {
        yaml_parser_t parser;
        const char *text;
        size_t len;
        struct frame stack[YAML_JSON_MAX_DEPTH];
        int depth;
        json_object *root;
        struct lh_table *anchors;
        size_t nodes;
        struct buf *err;
};

/* ---- errors ------------------------------------------------------------ */

static int fail_at(struct conv *c, yaml_mark_t mark, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* -EINVAL with the message in c->err, or -ENOMEM if the message cannot be
 * built: a caller must never report a document as bad without saying
 * why, and a retry will say it. */
static int fail_at(struct conv *c, yaml_mark_t mark, const char *fmt, ...)
{
        va_list ap;
        int r;

        if (!c->err)
                return -EINVAL;
        buf_reset(c->err);
        r = buf_printf(c->err, "line %zu, column %zu: ", mark.line + 1, mark.column + 1);
        if (r == 0) {
                va_start(ap, fmt);
                r = buf_vprintf(c->err, fmt, ap);
                va_end(ap);
        }
        if (r < 0) {
                buf_reset(c->err); /* no half message */
                return -ENOMEM;
        }
        return -EINVAL;
}

/* libyaml reports reader errors (bad encoding, control characters) as a
 * byte offset only; count lines and characters up to it. */
static yaml_mark_t mark_of_offset(const char *text, size_t len, size_t off)
{
        yaml_mark_t m = {0, 0, 0};

        for (size_t i = 0; i < off && i < len; i++) {
                unsigned char ch = (unsigned char)text[i];

                if (ch == '\n') {
                        m.line++;
                        m.column = 0;
                } else if ((ch & 0xc0) != 0x80) {
                        m.column++;
                }
        }
        m.index = off;
        return m;
}

static int fail_parser(struct conv *c)
{
        yaml_parser_t *p = &c->parser;
        const char *problem = p->problem ? p->problem : "unknown YAML error";

        if (p->error == YAML_MEMORY_ERROR)
                return -ENOMEM;
        if (p->error == YAML_READER_ERROR) {
                yaml_mark_t m = mark_of_offset(c->text, c->len, p->problem_offset);

                if (p->problem_value >= 0)
                        return fail_at(c, m,
                                       "%s (byte 0x%02x): not YAML or JSON text; is this a binary file?",
                                       problem, (unsigned)p->problem_value & 0xffu);
                return fail_at(c, m, "%s: not YAML or JSON text; is this a binary file?", problem);
        }
        if (p->context && p->context_mark.line == p->problem_mark.line &&
            p->context_mark.column == p->problem_mark.column)
                return fail_at(c, p->problem_mark, "%s (%s)", problem, p->context);
        if (p->context)
                return fail_at(c, p->problem_mark, "%s (%s at line %zu, column %zu)", problem,
                               p->context, p->context_mark.line + 1,
                               p->context_mark.column + 1);
        return fail_at(c, p->problem_mark, "%s", problem);
}

/* NUL bytes: libyaml would stop with "control characters are not allowed";
 * say plainly that the input is binary.  UTF-16 input (with its BOM) holds
 * NUL bytes legitimately, so it is left to libyaml. */
static int check_binary(struct conv *c)
{
        const unsigned char *s = (const unsigned char *)c->text;
        const char *nul;

        if (c->len >= 2 && ((s[0] == 0xff && s[1] == 0xfe) || (s[0] == 0xfe && s[1] == 0xff)))
                return 0;
        nul = memchr(c->text, '\0', c->len);
        if (!nul)
                return 0;
        return fail_at(c, mark_of_offset(c->text, c->len, (size_t)(nul - c->text)),
                       "NUL byte at offset %zu: binary data is not a YAML or JSON manifest",
                       (size_t)(nul - c->text));
}

/* ---- scalar resolution ----------------------------------------------- */

enum sval_kind { SV_NULL, SV_BOOL, SV_INT, SV_UINT, SV_DOUBLE, SV_STRING };

struct sval {
        enum sval_kind kind;
        bool b;
        int64_t i;
        uint64_t u;
        double d;
        const char *text; /* the scalar as written (not NUL-safe: use len) */
        size_t len;
        char *owned;      /* decoded !!binary, freed by the caller */
};

static bool text_is(const char *s, size_t n, const char *const *list)
{
        for (; *list; list++)
                if (strlen(*list) == n && memcmp(*list, s, n) == 0)
                        return true;
        return false;
}

static const char *const null_words[] = {"", "~", "null", "Null", "NULL", NULL};
static const char *const true_words[] = {"y", "Y", "yes", "Yes", "YES", "true", "True",
                                         "TRUE", "on", "On", "ON", NULL};
static const char *const false_words[] = {"n", "N", "no", "No", "NO", "false", "False",
                                          "FALSE", "off", "Off", "OFF", NULL};
static const char *const nan_words[] = {".nan", ".NaN", ".NAN", NULL};
static const char *const pinf_words[] = {".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", NULL};
static const char *const ninf_words[] = {"-.inf", "-.Inf", "-.INF", NULL};

static int digit_value(char ch)
{
        if (ch >= '0' && ch <= '9')
                return ch - '0';
        if (ch >= 'a' && ch <= 'z')
                return ch - 'a' + 10;
        if (ch >= 'A' && ch <= 'Z')
                return ch - 'A' + 10;
        return 99;
}

/* Go's strconv.ParseUint(s, 0, 64) without the sign (s has no '_'). */
static bool go_parse_uint(const char *s, size_t n, uint64_t *ret)
{
        unsigned base = 10;
        uint64_t v = 0;

        if (n == 0)
                return false;
        if (s[0] == '0') {
                char p = n >= 3 ? (char)(s[1] | 0x20) : 0;

                if (p == 'b' || p == 'o' || p == 'x') {
                        base = p == 'b' ? 2 : p == 'o' ? 8 : 16;
                        s += 2;
                        n -= 2;
                } else {
                        base = 8;
                        s++;
                        n--;
                }
        }
        for (size_t i = 0; i < n; i++) {
                unsigned d = (unsigned)digit_value(s[i]);

                if (d >= base)
                        return false;
                if (v > (UINT64_MAX - d) / base)
                        return false;
                v = v * base + d;
        }
        *ret = v;
        return true;
}

/* Go's strconv.ParseInt(s, 0, 64). */
static bool go_parse_int(const char *s, size_t n, int64_t *ret)
{
        bool neg = false;
        uint64_t u;

        if (n > 0 && (s[0] == '+' || s[0] == '-')) {
                neg = s[0] == '-';
                s++;
                n--;
        }
        if (!go_parse_uint(s, n, &u))
                return false;
        if (neg) {
                if (u > (uint64_t)INT64_MAX + 1)
                        return false;
                *ret = u == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)u;
        } else {
                if (u > (uint64_t)INT64_MAX)
                        return false;
                *ret = (int64_t)u;
        }
        return true;
}

/* yaml.v2's yamlStyleFloat: ^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$ */
static bool yaml_style_float(const char *s, size_t n)
{
        size_t i = 0, d = 0;

        if (i < n && (s[i] == '+' || s[i] == '-'))
                i++;
        if (i < n && s[i] == '.') {
                i++;
                while (i < n && s[i] >= '0' && s[i] <= '9')
                        i++, d++;
                if (d == 0)
                        return false;
        } else {
                while (i < n && s[i] >= '0' && s[i] <= '9')
                        i++, d++;
                if (d == 0)
                        return false;
                if (i < n && s[i] == '.') {
                        i++;
                        while (i < n && s[i] >= '0' && s[i] <= '9')
                                i++;
                }
        }
        if (i < n && (s[i] == 'e' || s[i] == 'E')) {
                i++;
                if (i < n && (s[i] == '+' || s[i] == '-'))
                        i++;
                d = 0;
                while (i < n && s[i] >= '0' && s[i] <= '9')
                        i++, d++;
                if (d == 0)
                        return false;
        }
        return i == n;
}

/* Go's ParseFloat succeeds on these spellings unless the value overflows
 * (then yaml.v2 falls back to a string). */
static bool parse_finite(const char *s, size_t n, double *ret)
{
        char tmp[NUMBER_MAX];
        char *end;
        double v;

        if (n >= sizeof(tmp))
                return false;
        memcpy(tmp, s, n);
        tmp[n] = '\0';
        errno = 0;
        v = strtod(tmp, &end);
        if (end != tmp + n || isinf(v) || isnan(v))
                return false;
        *ret = v;
        return true;
}

/* Plain (untagged, unquoted) scalar, by yaml.v2's resolve(). */
static void resolve_plain(const char *s, size_t n, struct sval *v)
{
        char ch = n ? s[0] : 'N';
        char plain[NUMBER_MAX];
        size_t pn = 0;

        v->kind = SV_STRING;
        if (text_is(s, n, null_words)) {
                v->kind = SV_NULL;
                return;
        }
        if (strchr("yYnNtTfFoO~", ch)) {
                if (text_is(s, n, true_words)) {
                        v->kind = SV_BOOL;
                        v->b = true;
                } else if (text_is(s, n, false_words)) {
                        v->kind = SV_BOOL;
                        v->b = false;
                }
                return;
        }
        if (ch == '.' || ch == '+' || ch == '-') {
                if (text_is(s, n, nan_words)) {
                        v->kind = SV_DOUBLE;
                        v->d = NAN;
                        return;
                }
                if (text_is(s, n, pinf_words)) {
                        v->kind = SV_DOUBLE;
                        v->d = INFINITY;
                        return;
                }
                if (text_is(s, n, ninf_words)) {
                        v->kind = SV_DOUBLE;
                        v->d = -INFINITY;
                        return;
                }
        }
        if (ch == '.') {
                /* Go's ParseFloat on the text as is: no underscores, and
                 * the text starts with '.', so only ".5" / ".5e3" shapes. */
                if (yaml_style_float(s, n) && parse_finite(s, n, &v->d))
                        v->kind = SV_DOUBLE;
                return;
        }
        if (!(ch == '+' || ch == '-' || (ch >= '0' && ch <= '9')))
                return;
        /* Timestamps (2001-12-14) are tried first by yaml.v2 but come back
         * as strings for interface{} targets, and none of them parses as a
         * number, so they need no case here. */
        for (size_t i = 0; i < n; i++) {
                if (s[i] == '_')
                        continue;
                if (pn + 1 >= sizeof(plain))
                        return;
                plain[pn++] = s[i];
        }
        if (go_parse_int(plain, pn, &v->i)) {
                v->kind = SV_INT;
                return;
        }
        if (go_parse_uint(plain, pn, &v->u)) {
                v->kind = SV_UINT;
                return;
        }
        if (yaml_style_float(plain, pn) && parse_finite(plain, pn, &v->d))
                v->kind = SV_DOUBLE;
}

static bool is_tag(const char *tag, const char *name)
{
        size_t pl = sizeof(TAG_PREFIX) - 1;

        return strncmp(tag, TAG_PREFIX, pl) == 0 && strcmp(tag + pl, name) == 0;
}

static const char *kind_tag(enum sval_kind k)
{
        switch (k) {
        case SV_NULL:
                return "!!null";
        case SV_BOOL:
                return "!!bool";
        case SV_INT:
        case SV_UINT:
                return "!!int";
        case SV_DOUBLE:
                return "!!float";
        case SV_STRING:
                break;
        }
        return "!!str";
}

/* One scalar event to a value, honoring explicit tags like yaml.v2. */
static int resolve_scalar(struct conv *c, const yaml_event_t *ev, struct sval *v)
{
        const char *tag = (const char *)ev->data.scalar.tag;
        const char *s = (const char *)ev->data.scalar.value;
        size_t n = ev->data.scalar.length;
        struct sval r = {.kind = SV_STRING, .text = s, .len = n};

        memset(v, 0, sizeof(*v));
        v->text = s;
        v->len = n;
        v->kind = SV_STRING;
        if (!tag) {
                /* Quoted and block scalars are never resolved. */
                if (ev->data.scalar.plain_implicit)
                        resolve_plain(s, n, v);
                return 0;
        }
        if (is_tag(tag, "str") || strcmp(tag, "!") == 0)
                return 0;
        if (is_tag(tag, "binary")) {
                int ret = base64_decode(s, n, &v->owned, &v->len);

                if (ret == -ENOMEM)
                        return ret;
                if (ret < 0)
                        return fail_at(c, ev->start_mark,
                                       "!!binary value contains invalid base64 data");
                v->text = v->owned;
                return 0;
        }
        if (!(is_tag(tag, "bool") || is_tag(tag, "int") || is_tag(tag, "float") ||
              is_tag(tag, "null") || is_tag(tag, "timestamp")))
                return 0; /* local or unknown tags: the text, as yaml.v2 */
        resolve_plain(s, n, &r);
        if (is_tag(tag, "timestamp")) {
                if (r.kind == SV_STRING)
                        return 0;
        } else if (is_tag(tag, "float") && (r.kind == SV_INT || r.kind == SV_UINT)) {
                r.d = r.kind == SV_INT ? (double)r.i : (double)r.u;
                r.kind = SV_DOUBLE;
                *v = r;
                return 0;
        } else if (strcmp(kind_tag(r.kind) + 2, tag + strlen(TAG_PREFIX)) == 0) {
                /* The tag names what the text resolves to anyway. */
                *v = r;
                return 0;
        }
        return fail_at(c, ev->start_mark, "cannot decode %s `%.*s` as a !!%s", kind_tag(r.kind),
                       (int)(n > 64 ? 64 : n), s, tag + strlen(TAG_PREFIX));
}

/* The shortest "%.*g" text that reads back to d: valid JSON for every
 * finite double. */
static void shortest_double(double d, char *out, size_t size)
{
        for (int p = 1; p <= 17; p++) {
                snprintf(out, size, "%.*g", p, d);
                if (strtod(out, NULL) == d)
                        return;
        }
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)? */
static bool is_json_number(const char *s, size_t n)
{
        size_t i = 0, d;

        if (i < n && s[i] == '-')
                i++;
        if (i < n && s[i] == '0') {
                i++;
        } else {
                if (!(i < n && s[i] >= '1' && s[i] <= '9'))
                        return false;
                while (i < n && s[i] >= '0' && s[i] <= '9')
                        i++;
        }
        if (i < n && s[i] == '.') {
                i++;
                for (d = 0; i < n && s[i] >= '0' && s[i] <= '9'; d++)
                        i++;
                if (d == 0)
                        return false;
        }
        if (i < n && (s[i] == 'e' || s[i] == 'E')) {
                i++;
                if (i < n && (s[i] == '+' || s[i] == '-'))
                        i++;
                for (d = 0; i < n && s[i] >= '0' && s[i] <= '9'; d++)
                        i++;
                if (d == 0)
                        return false;
        }
        return i == n;
}

static int sval_to_json(struct conv *c, const struct sval *v, yaml_mark_t mark,
                        json_object **ret)
{
        json_object *o = NULL;
        char num[64];

        switch (v->kind) {
        case SV_NULL:
                *ret = NULL;
                return 0;
        case SV_BOOL:
                o = json_object_new_boolean(v->b);
                break;
        case SV_INT:
                o = json_object_new_int64(v->i);
                break;
        case SV_UINT:
                o = json_object_new_uint64(v->u);
                break;
        case SV_DOUBLE:
                if (isnan(v->d) || isinf(v->d))
                        return fail_at(c, mark, "%.*s: JSON cannot represent infinity or NaN",
                                       (int)(v->len > 64 ? 64 : v->len), v->text);
                if (v->len < sizeof(num) && is_json_number(v->text, v->len)) {
                        memcpy(num, v->text, v->len);
                        num[v->len] = '\0';
                } else {
                        shortest_double(v->d, num, sizeof(num));
                }
                o = json_object_new_double_s(v->d, num);
                break;
        case SV_STRING:
                if (v->len > INT32_MAX)
                        return fail_at(c, mark, "string too long");
                o = json_object_new_string_len(v->text, (int)v->len);
                break;
        }
        if (!o)
                return -ENOMEM;
        *ret = o;
        return 0;
}


/*
 * Go's strconv.FormatFloat(f, 'g', -1, 32), which sigs.k8s.io/yaml uses to
 * turn a float map key into a string: the shortest digits that read back
 * to the same float32, in exponent form when the decimal exponent is below
 * -4 or at least 6 (Go fixes 6 for the shortest form), else plain.
 */
static void go_float32_g(double d, char *out, size_t size)
{
        float f = (float)d;
        char tmp[64], *e;
        long exp10;
        int p;

        if (isinf(f)) {
                snprintf(out, size, "%s", f > 0 ? ".inf" : "-.inf");
                return;
        }
        if (isnan(f)) {
                snprintf(out, size, ".nan");
                return;
        }
        for (p = 1; p < 9; p++) {
                snprintf(tmp, sizeof(tmp), "%.*e", p - 1, (double)f);
                if (strtof(tmp, NULL) == f)
                        break;
        }
        e = strchr(tmp, 'e');
        exp10 = e ? strtol(e + 1, NULL, 10) : 0;
        if (exp10 < -4 || exp10 >= 6) {
                snprintf(out, size, "%s", tmp);
                return;
        }
        snprintf(out, size, "%.*f", (int)(p - 1 - exp10 > 0 ? p - 1 - exp10 : 0), (double)f);
}

/* A resolved scalar as a map key, the way sigs.k8s.io/yaml prints keys. */
static int sval_to_key(struct conv *c, const struct sval *v, yaml_mark_t mark, char **ret)
{
        char num[64] = "";
        const char *s = num;
        size_t n;
        char *k;

        switch (v->kind) {
        case SV_NULL:
                return fail_at(c, mark, "a null mapping key cannot be a JSON object key");
        case SV_BOOL:
                s = v->b ? "true" : "false";
                break;
        case SV_INT:
                snprintf(num, sizeof(num), "%lld", (long long)v->i);
                break;
        case SV_UINT:
                snprintf(num, sizeof(num), "%llu", (unsigned long long)v->u);
                break;
        case SV_DOUBLE:
                go_float32_g(v->d, num, sizeof(num));
                break;
        case SV_STRING:
                if (memchr(v->text, '\0', v->len))
                        return fail_at(c, mark, "a mapping key may not contain a NUL character");
                s = v->text;
                n = v->len;
                goto copy;
        }
        n = strlen(s);
copy:
        k = malloc(n + 1);
        if (!k)
                return -ENOMEM;
        memcpy(k, s, n);
        k[n] = '\0';
        *ret = k;
        return 0;
}

/* The key of an alias that names a scalar (json form, already resolved). */
static int json_to_key(struct conv *c, json_object *o, yaml_mark_t mark, char **ret)
{
        struct sval v = {.kind = SV_NULL};

        switch (json_object_get_type(o)) {
        case json_type_null:
                break;
        case json_type_boolean:
                v.kind = SV_BOOL;
                v.b = json_object_get_boolean(o);
                break;
        case json_type_int:
                /* json-c prints int64 and uint64 values exactly. */
                v.kind = SV_STRING;
                v.text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
                if (!v.text || !v.text[0])
                        return -ENOMEM;
                v.len = strlen(v.text);
                break;
        case json_type_double:
                v.kind = SV_DOUBLE;
                v.d = json_object_get_double(o);
                break;
        case json_type_string:
                v.kind = SV_STRING;
                v.text = json_object_get_string(o);
                v.len = (size_t)json_object_get_string_len(o);
                break;
        case json_type_object:
        case json_type_array:
                return fail_at(c, mark,
                               "a mapping key must be a scalar (JSON object keys are strings)");
        }
        return sval_to_key(c, &v, mark, ret);
}

/* ---- anchors ----------------------------------------------------------- */

static void anchor_entry_free(struct lh_entry *e)
{
        struct anchor *a = lh_entry_v(e);

        if (!a)
                return;
        json_object_put(a->node);
        free(a->name);
        free(a);
}

/* Takes a reference to node.  A name defined again refers to the newest
 * node from then on, as YAML says. */
static int anchor_register(struct conv *c, const char *name, json_object *node,
                           size_t nodes, int height)
{
        struct lh_entry *e;
        struct anchor *a;

        if (!c->anchors) {
                c->anchors = lh_kchar_table_new(16, anchor_entry_free);
                if (!c->anchors)
                        return -ENOMEM;
        }
        e = lh_table_lookup_entry(c->anchors, name);
        if (e) {
                a = lh_entry_v(e);
                json_object_put(a->node);
                a->node = json_object_get(node);
                a->nodes = nodes;
                a->height = height;
                return 0;
        }
        a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        a->name = strdup(name);
        if (!a->name) {
                free(a);
                return -ENOMEM;
        }
        a->node = json_object_get(node);
        a->nodes = nodes;
        a->height = height;
        if (lh_table_insert(c->anchors, a->name, a) != 0) {
                json_object_put(a->node);
                free(a->name);
                free(a);
                return -ENOMEM;
        }
        return 0;
}

/* ---- tree building ----------------------------------------------------- */

static int count_nodes(struct conv *c, size_t n, yaml_mark_t mark)
{
        if (n > YAML_JSON_MAX_NODES - c->nodes)
                return fail_at(c, mark, "document too large: more than %d nodes (alias expansion?)",
                               YAML_JSON_MAX_NODES);
        c->nodes += n;
        return 0;
}

/* yaml.v2 merge: the merged keys override what the mapping holds so far;
 * within a sequence the earlier mappings take precedence. */
static int merge_into(struct conv *c, json_object *dst, json_object *src, yaml_mark_t mark)
{
        if (json_object_is_type(src, json_type_object)) {
                json_object_object_foreach(src, k, v) {
                        if (json_put(dst, k, json_object_get(v)) < 0)
                                return -ENOMEM;
                }
                return 0;
        }
        if (json_object_is_type(src, json_type_array)) {
                size_t n = json_object_array_length(src);

                for (size_t i = n; i-- > 0;) {
                        json_object *m = json_object_array_get_idx(src, i);
                        int r;

                        if (!json_object_is_type(m, json_type_object))
                                return fail_at(c, mark, "map merge requires map or "
                                                        "sequence of maps as the value");
                        r = merge_into(c, dst, m, mark);
                        if (r < 0)
                                return r;
                }
                return 0;
        }
        return fail_at(c, mark, "map merge requires map or sequence of maps as the value");
}

/* Hands a finished value (owned; NULL is JSON null) to its parent, or makes
 * it the root. */
static int attach(struct conv *c, json_object *node, int height, yaml_mark_t mark)
{
        struct frame *f;
        int r = 0;

        if (c->depth == 0) {
                c->root = node;
                return 0;
        }
        f = &c->stack[c->depth - 1];
        if (height + 1 > f->height)
                f->height = height + 1;
        if (!f->is_map) {
                if (json_object_array_add(f->node, node) != 0) {
                        json_object_put(node);
                        return -ENOMEM;
                }
                return 0;
        }
        /* A mapping value: the key was set by the caller beforehand. */
        if (f->merge) {
                r = merge_into(c, f->node, node, mark);
                json_object_put(node);
        } else {
                r = json_put(f->node, f->key, node); /* takes node */
        }
        free(f->key);
        f->key = NULL;
        f->merge = false;
        return r;
}

static bool expecting_key(const struct conv *c)
{
        return c->depth > 0 && c->stack[c->depth - 1].is_map && !c->stack[c->depth - 1].key;
}

static int set_key(struct conv *c, char *key, bool merge)
{
        struct frame *f = &c->stack[c->depth - 1];

        f->key = key;
        f->merge = merge;
        return 0;
}

static int on_scalar(struct conv *c, const yaml_event_t *ev)
{
        struct sval v;
        json_object *node = NULL;
        const char *anchor = (const char *)ev->data.scalar.anchor;
        int r;

        r = resolve_scalar(c, ev, &v);
        if (r < 0)
                return r;
        r = count_nodes(c, 1, ev->start_mark);
        if (r < 0)
                goto out;
        if (expecting_key(c)) {
                char *key = NULL;
                /* yaml.v2 treats a plain, untagged << as the merge key. */
                bool merge = !ev->data.scalar.tag && ev->data.scalar.plain_implicit &&
                             v.len == 2 && memcmp(v.text, "<<", 2) == 0;

                r = sval_to_key(c, &v, ev->start_mark, &key);
                if (r < 0)
                        goto out;
                if (anchor) {
                        json_object *kn = NULL;

                        r = sval_to_json(c, &v, ev->start_mark, &kn);
                        if (r == 0)
                                r = anchor_register(c, anchor, kn, 1, 0);
                        json_object_put(kn);
                        if (r < 0) {
                                free(key);
                                goto out;
                        }
                }
                r = set_key(c, key, merge);
                goto out;
        }
        r = sval_to_json(c, &v, ev->start_mark, &node);
        if (r < 0)
                goto out;
        if (anchor) {
                r = anchor_register(c, anchor, node, 1, 0);
                if (r < 0) {
                        json_object_put(node);
                        goto out;
                }
        }
        r = attach(c, node, 0, ev->start_mark);
out:
        free(v.owned);
        return r;
}

static int on_alias(struct conv *c, const yaml_event_t *ev)
{
        const char *name = (const char *)ev->data.alias.anchor;
        struct lh_entry *e;
        struct anchor *a;
        json_object *copy = NULL;
        int r;

        for (int i = 0; i < c->depth; i++)
                if (c->stack[i].anchor && strcmp(c->stack[i].anchor, name) == 0)
                        return fail_at(c, ev->start_mark, "anchor '%s' value contains itself",
                                       name);
        e = c->anchors ? lh_table_lookup_entry(c->anchors, name) : NULL;
        if (!e)
                return fail_at(c, ev->start_mark, "unknown anchor '%s' referenced", name);
        a = lh_entry_v(e);
        if (expecting_key(c)) {
                char *key = NULL;

                r = json_to_key(c, a->node, ev->start_mark, &key);
                if (r < 0)
                        return r;
                return set_key(c, key, false);
        }
        if (c->depth + a->height > YAML_JSON_MAX_DEPTH)
                return fail_at(c, ev->start_mark, "nesting too deep (limit %d)",
                               YAML_JSON_MAX_DEPTH);
        r = count_nodes(c, a->nodes, ev->start_mark);
        if (r < 0)
                return r;
        /* A copy, not a shared reference: callers edit the tree (defaults
         * of one container must not appear in another). */
        if (a->node && (r = json_copy(a->node, &copy)) < 0)
                return r;
        return attach(c, copy, a->height, ev->start_mark);
}

static int on_start(struct conv *c, const yaml_event_t *ev, bool is_map)
{
        const yaml_char_t *anchor = is_map ? ev->data.mapping_start.anchor
                                           : ev->data.sequence_start.anchor;
        struct frame *f;
        int r;

        if (expecting_key(c))
                return fail_at(c, ev->start_mark,
                               "a mapping key must be a scalar (JSON object keys are strings)");
        if (c->depth >= YAML_JSON_MAX_DEPTH)
                return fail_at(c, ev->start_mark, "nesting too deep (limit %d)",
                               YAML_JSON_MAX_DEPTH);
        r = count_nodes(c, 1, ev->start_mark);
        if (r < 0)
                return r;
        f = &c->stack[c->depth];
        memset(f, 0, sizeof(*f));
        f->node = is_map ? json_object_new_object() : json_object_new_array();
        if (!f->node)
                return -ENOMEM;
        if (anchor) {
                f->anchor = strdup((const char *)anchor);
                if (!f->anchor) {
                        json_object_put(f->node);
                        return -ENOMEM;
                }
        }
        f->is_map = is_map;
        f->nodes_at_start = c->nodes - 1;
        f->height = 1;
        f->start = ev->start_mark;
        c->depth++;
        return 0;
}

static int on_end(struct conv *c, const yaml_event_t *ev)
{
        struct frame f = c->stack[c->depth - 1];
        int r = 0;

        c->depth--;
        if (f.anchor)
                r = anchor_register(c, f.anchor, f.node, c->nodes - f.nodes_at_start, f.height);
        free(f.anchor);
        free(f.key);
        if (r < 0) {
                json_object_put(f.node);
                return r;
        }
        return attach(c, f.node, f.height, f.start);
}

static void conv_free(struct conv *c)
{
        while (c->depth > 0) {
                struct frame *f = &c->stack[--c->depth];

                json_object_put(f->node);
                free(f->key);
                free(f->anchor);
        }
        if (c->anchors)
                lh_table_free(c->anchors);
        json_object_put(c->root);
        yaml_parser_delete(&c->parser);
}

static int conv_init(struct conv *c, const char *text, size_t len, struct buf *err)
{
        memset(c, 0, sizeof(*c));
        c->text = text;
        c->len = len;
        c->err = err;
        if (!yaml_parser_initialize(&c->parser))
                return -ENOMEM;
        yaml_parser_set_input_string(&c->parser, (const unsigned char *)text, len);
        return 0;
}

int yaml_to_json(const char *text, size_t len, json_object **ret_obj, struct buf *err)
{
        struct conv c;
        yaml_event_t ev;
        bool done = false, in_doc = false;
        int r;

        r = conv_init(&c, text ? text : "", text ? len : 0, err);
        if (r < 0) {
                if (err)
                        buf_reset(err);
                return r;
        }
        r = check_binary(&c);
        while (r == 0 && !done) {
                if (!yaml_parser_parse(&c.parser, &ev)) {
                        r = fail_parser(&c);
                        break;
                }
                switch (ev.type) {
                case YAML_STREAM_END_EVENT:
                        done = true;
                        break;
                case YAML_DOCUMENT_START_EVENT:
                        in_doc = true;
                        break;
                case YAML_DOCUMENT_END_EVENT:
                        /* Only the first document counts; the parser is
                         * not asked for the next one at all. */
                        done = true;
                        break;
                case YAML_ALIAS_EVENT:
                        r = on_alias(&c, &ev);
                        break;
                case YAML_SCALAR_EVENT:
                        r = on_scalar(&c, &ev);
                        break;
                case YAML_SEQUENCE_START_EVENT:
                        r = on_start(&c, &ev, false);
                        break;
                case YAML_MAPPING_START_EVENT:
                        r = on_start(&c, &ev, true);
                        break;
                case YAML_SEQUENCE_END_EVENT:
                case YAML_MAPPING_END_EVENT:
                        r = on_end(&c, &ev);
                        break;
                default:
                        break;
                }
                yaml_event_delete(&ev);
        }
        if (r == 0 && (!in_doc || !c.root))
                r = buf_set_err(err, -ENODATA, "empty document");
        if (r == 0) {
                *ret_obj = c.root;
                c.root = NULL;
        }
        conv_free(&c);
        if (r == -ENOMEM && err)
                buf_reset(err); /* a failure replaces what err held */
        return r;
}

int yaml_count_documents(const char *text, size_t len, struct buf *err)
{
        struct conv c;
        yaml_event_t ev;
        int r, n = 0;

        r = conv_init(&c, text ? text : "", text ? len : 0, err);
        if (r < 0) {
                if (err)
                        buf_reset(err);
                return r;
        }
        r = check_binary(&c);
        while (r == 0) {
                if (!yaml_parser_parse(&c.parser, &ev)) {
                        r = fail_parser(&c);
                        break;
                }
                if (ev.type == YAML_DOCUMENT_START_EVENT && n < INT32_MAX)
                        n++;
                if (ev.type == YAML_STREAM_END_EVENT) {
                        yaml_event_delete(&ev);
                        break;
                }
                yaml_event_delete(&ev);
        }
        conv_free(&c);
        if (r == -ENOMEM && err)
                buf_reset(err);
        return r < 0 ? r : n;
}
