/*
 * v1_normalize — a decoded object rewritten the way Go's decoder would see
 * it (see src/kube/v1_normalize.h for the rules).
 *
 * The walk follows the document, not the schema: each member of an object
 * is looked up in its struct's table (binary search), checked, possibly
 * replaced, and removed when Go could not tell it from absent.  Paths are
 * kept as a stack of (key | index) frames and only spelled out when a
 * member is unknown or wrong, so a clean manifest costs no allocation.
 *
 * Members are removed and replaced while walking the object's hash table:
 * the next entry is taken before the current one is touched, and neither
 * lh_table_delete_entry() nor lh_entry_set_val() moves other entries
 * (only an insertion can resize the table, and this walk inserts nothing).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/linkhash.h>

#include "util/json_get.h"
#include "kube/v1_normalize.h"

#define QUANTITY_FORMAT_MSG                                                                                            \
        "quantities must match the regular expression "                                                                \
        "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
#define QUANTITY_SUFFIX_MSG "unable to parse quantity's suffix"

struct frame {
        const char *key; /* NULL: an index */
        size_t idx;
};

struct walk {
        struct frame frames[V1_SCHEMA_MAX_FRAMES]; /* enough: v1_schema_table.c */
        unsigned depth;
        const char *prefix;
        struct v1_unknown *unknown;
        struct buf *err;
        unsigned n_errors;
        struct buf path; /* scratch */
};

/* ---- paths and reports ------------------------------------------------- */

static int spell_path(struct walk *w, bool with_prefix)
{
        struct buf *p = &w->path;

        buf_reset(p);
        if (with_prefix && w->prefix && buf_puts(p, w->prefix) < 0)
                return -ENOMEM;
        for (unsigned i = 0; i < w->depth; i++) {
                const struct frame *f = &w->frames[i];
                int r;

                if (f->key)
                        r = (p->len && buf_putc(p, '.') < 0) ? -ENOMEM : buf_puts(p, f->key);
                else
                        r = buf_printf(p, "[%zu]", f->idx);
                if (r < 0)
                        return -ENOMEM;
        }
        return 0;
}

static void pop(struct walk *w)
{
        w->depth--;
}

static int add_error(struct walk *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "<path>: <message>".  Only -ENOMEM is returned: the error itself is
 * counted in n_errors. */
static int add_error(struct walk *w, const char *fmt, ...)
{
        struct buf *e = w->err;
        va_list ap;
        int r;

        w->n_errors++;
        if (!e || w->n_errors > V1_NORMALIZE_MAX_ERRORS + 1)
                return 0;
        if (w->n_errors == 1)
                buf_reset(e); /* the first error replaces what err held */
        else if (buf_puts(e, "; ") < 0)
                return -ENOMEM;
        if (w->n_errors == V1_NORMALIZE_MAX_ERRORS + 1)
                return buf_puts(e, "(more type errors not shown)");
        if (spell_path(w, false) < 0)
                return -ENOMEM;
        if (w->path.len && (buf_append(e, w->path.data, w->path.len) < 0 || buf_puts(e, ": ") < 0))
                return -ENOMEM;
        va_start(ap, fmt);
        r = buf_vprintf(e, fmt, ap);
        va_end(ap);
        return r;
}

static const char *kind_word(unsigned kind)
{
        switch (kind) {
        case V1_STRING:
        case V1_BYTES:
        case V1_TIME:
                return "string";
        case V1_BOOL:
                return "boolean";
        case V1_INT32:
        case V1_INT64:
                return "integer";
        case V1_FLOAT64:
                return "number";
        case V1_QUANTITY:
                return "quantity (string or number)";
        case V1_INT_OR_STRING:
                return "integer or string";
        default:
                return "object";
        }
}

static int type_error(struct walk *w, const char *want, json_object *got)
{
        return add_error(w, "Invalid type: expected %s, got %s", want, json_type_word(got));
}

static int report_unknown(struct walk *w)
{
        struct v1_unknown *u = w->unknown;
        char **bigger, *copy;

        if (!u)
                return 0;
        u->total++;
        if (u->n >= V1_NORMALIZE_MAX_UNKNOWN)
                return 0;
        if (spell_path(w, true) < 0)
                return -ENOMEM;
        copy = strdup(w->path.data);
        if (!copy)
                return -ENOMEM;
        bigger = realloc(u->paths, (u->n + 1) * sizeof(*u->paths));
        if (!bigger) {
                free(copy);
                return -ENOMEM;
        }
        u->paths = bigger;
        u->paths[u->n++] = copy;
        return 0;
}

void v1_unknown_clear(struct v1_unknown *u)
{
        if (!u)
                return;
        for (size_t i = 0; i < u->n; i++)
                free(u->paths[i]);
        free(u->paths);
        u->paths = NULL;
        u->n = 0;
        u->total = 0;
}

int v1_unknown_join(const struct v1_unknown *u, struct buf *out)
{
        for (size_t i = 0; i < u->n; i++) {
                if ((i && buf_puts(out, ", ") < 0) || buf_json_string(out, u->paths[i], strlen(u->paths[i])) < 0)
                        return -ENOMEM;
        }
        if (u->total > u->n && buf_printf(out, " (and %zu more)", u->total - u->n) < 0)
                return -ENOMEM;
        return 0;
}

/* ---- numbers and quantities -------------------------------------------- */

/*
 * A double as Go's encoding/json writes a float64: the shortest digits
 * that read back to it, in plain notation, or in exponent notation below
 * 1e-6 and from 1e21 on ("1e+21", "1e-7").  That is the text a quantity
 * written as a YAML or JSON number reaches Quantity's parser with, since
 * the kubelet converts every manifest YAML -> Go values -> JSON first.
 */
static void go_float64_text(double d, char *out, size_t size)
{
        char tmp[40], digits[24], text[64];
        size_t nd = 0, o = 0;
        int p, exp10;
        const char *e;
        double a = fabs(d);

        if (d == 0) {
                snprintf(out, size, "%s", signbit(d) ? "-0" : "0");
                return;
        }
        /* The shortest %e precision that reads back to d. */
        for (p = 1; p < 17; p++) {
                snprintf(tmp, sizeof(tmp), "%.*e", p - 1, d);
                if (strtod(tmp, NULL) == d)
                        break;
        }
        if (p == 17)
                snprintf(tmp, sizeof(tmp), "%.16e", d);
        e = strchr(tmp, 'e');
        for (const char *c = tmp + (d < 0); c < e && nd < sizeof(digits); c++)
                if (*c != '.')
                        digits[nd++] = *c;
        exp10 = (int)strtol(e + 1, NULL, 10);
        if (d < 0)
                text[o++] = '-';
        if (a < 1e-6 || a >= 1e21) {
                /* d[.ddd]e+XX, or e-X without a leading 0. */
                text[o++] = digits[0];
                if (nd > 1) {
                        text[o++] = '.';
                        memcpy(text + o, digits + 1, nd - 1);
                        o += nd - 1;
                }
                snprintf(text + o, sizeof(text) - o, "e%c%s%d", exp10 < 0 ? '-' : '+',
                         exp10 >= 0 && exp10 < 10 ? "0" : "", exp10 < 0 ? -exp10 : exp10);
        } else if (exp10 < 0) {
                /* 1e-6 <= a < 1: at most five zeros after the point. */
                text[o++] = '0';
                text[o++] = '.';
                for (int i = 0; i < -exp10 - 1; i++)
                        text[o++] = '0';
                memcpy(text + o, digits, nd);
                text[o + nd] = '\0';
        } else {
                /* 1 <= a < 1e21: the integer part, zero-padded, then the
                 * rest of the digits after a point. */
                for (size_t i = 0; i < nd || i <= (size_t)exp10; i++) {
                        if (i == (size_t)exp10 + 1)
                                text[o++] = '.';
                        text[o++] = i < nd ? digits[i] : '0';
                }
                text[o] = '\0';
        }
        snprintf(out, size, "%s", text);
}

static bool is_digit(char c)
{
        return c >= '0' && c <= '9';
}

/* strconv.ParseInt(s, 10, 64) succeeds. */
static bool go_int64_text(const char *s, size_t n)
{
        uint64_t v = 0, limit = (uint64_t)INT64_MAX;
        size_t i = 0;

        if (i < n && (s[i] == '+' || s[i] == '-')) {
                if (s[i] == '-')
                        limit++;
                i++;
        }
        if (i == n)
                return false;
        for (; i < n; i++) {
                if (!is_digit(s[i]) || v > (limit - (uint64_t)(s[i] - '0')) / 10)
                        return false;
                v = v * 10 + (uint64_t)(s[i] - '0');
        }
        return true;
}

static bool quantity_suffix_known(const char *s, size_t n)
{
        static const char *const known[] = {"",  "n", "u",  "m",  "k",  "M",  "G",  "T",
                                            "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};

        for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
                if (strlen(known[i]) == n && memcmp(known[i], s, n) == 0)
                        return true;
        return n > 1 && (s[0] == 'e' || s[0] == 'E') && go_int64_text(s + 1, n - 1);
}

/*
 * resource.ParseQuantity's acceptance, step by step: a sign, digits, a
 * fraction, then a suffix of the letters "eEinumkKMGTP", a sign and
 * digits, which must be a known suffix or an exponent.  NULL if s (n
 * bytes, already trimmed) parses, else Go's message.
 */
static const char *quantity_problem(const char *s, size_t n)
{
        static const char letters[] = "eEinumkKMGTP";
        size_t pos = 0, start;

        if (n == 0)
                return QUANTITY_FORMAT_MSG;
        if (s[0] == '+' || s[0] == '-')
                pos++;
        while (pos < n && is_digit(s[pos]))
                pos++;
        if (pos < n && s[pos] == '.') {
                pos++;
                while (pos < n && is_digit(s[pos]))
                        pos++;
        }
        start = pos;
        while (pos < n && memchr(letters, s[pos], sizeof(letters) - 1))
                pos++;
        if (pos < n && (s[pos] == '+' || s[pos] == '-'))
                pos++;
        while (pos < n && is_digit(s[pos]))
                pos++;
        if (pos < n)
                return QUANTITY_FORMAT_MSG;
        return quantity_suffix_known(s + start, n - start) ? NULL : QUANTITY_SUFFIX_MSG;
}

static bool is_blank(char c)
{
        return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* *ret_new: NULL to keep v, else its replacement. */
static int quantity(struct walk *w, json_object *v, json_object **ret_new)
{
        char num[48];
        const char *s, *problem;
        size_t n, lead = 0;

        switch (json_object_get_type(v)) {
        case json_type_int: {
                int64_t i = json_object_get_int64(v);

                if (i == INT64_MAX)
                        snprintf(num, sizeof(num), "%" PRIu64, json_object_get_uint64(v));
                else
                        snprintf(num, sizeof(num), "%" PRId64, i);
                break;
        }
        case json_type_double:
                /* The YAML reader refuses infinities and NaN; json-c's
                 * lenient parser would not. */
                if (!isfinite(json_object_get_double(v)))
                        return add_error(w, "Invalid value: a quantity must be a finite number");
                go_float64_text(json_object_get_double(v), num, sizeof(num));
                break;
        case json_type_string:
                s = json_object_get_string(v);
                n = (size_t)json_object_get_string_len(v);
                while (lead < n && is_blank(s[lead]))
                        lead++;
                while (n > lead && is_blank(s[n - 1]))
                        n--;
                problem = quantity_problem(s + lead, n - lead);
                if (problem) {
                        struct buf q = BUF_INIT;
                        int r = buf_json_string(&q, s, (size_t)json_object_get_string_len(v));

                        if (r == 0)
                                r = add_error(w, "Invalid value: %s: %s", q.data, problem);
                        buf_free(&q);
                        return r;
                }
                if (lead == 0 && n == (size_t)json_object_get_string_len(v))
                        return 0;
                *ret_new = json_object_new_string_len(s + lead, (int)(n - lead));
                return *ret_new ? 0 : -ENOMEM;
        default:
                return type_error(w, kind_word(V1_QUANTITY), v);
        }
        problem = quantity_problem(num, strlen(num));
        if (problem)
                return add_error(w, "Invalid value: %s: %s", num, problem);
        *ret_new = json_object_new_string(num);
        return *ret_new ? 0 : -ENOMEM;
}

/* A json-c integer that fits [min, max]. */
static bool int_in_range(json_object *v, int64_t min, int64_t max)
{
        int64_t i = json_object_get_int64(v);

        /* json-c clamps a uint64 above INT64_MAX to INT64_MAX. */
        if (i == INT64_MAX && json_object_get_uint64(v) != (uint64_t)INT64_MAX)
                return false;
        return i >= min && i <= max;
}

static int range_error(struct walk *w, json_object *v, const char *what)
{
        int64_t i = json_object_get_int64(v);

        if (i == INT64_MAX)
                return add_error(w, "Invalid value: %" PRIu64 ": out of range for %s", json_object_get_uint64(v), what);
        return add_error(w, "Invalid value: %" PRId64 ": out of range for %s", i, what);
}

/* ---- the walk ------------------------------------------------------------ */

static int walk_struct(struct walk *w, json_object *obj, const struct v1_type *type);

/* One value of kind (not a container).  *ret_new as for quantity(). */
static int walk_value(struct walk *w, const struct v1_field *f, json_object *v, json_object **ret_new)
{
        json_type t = json_object_get_type(v);

        *ret_new = NULL;
        switch (f->kind) {
        case V1_STRING:
        case V1_BYTES:
        case V1_TIME:
                return t == json_type_string ? 0 : type_error(w, kind_word(f->kind), v);
        case V1_BOOL:
                return t == json_type_boolean ? 0 : type_error(w, kind_word(f->kind), v);
        case V1_INT32:
                if (t != json_type_int)
                        return type_error(w, kind_word(f->kind), v);
                return int_in_range(v, INT32_MIN, INT32_MAX) ? 0 : range_error(w, v, "int32");
        case V1_INT64:
                if (t != json_type_int)
                        return type_error(w, kind_word(f->kind), v);
                return int_in_range(v, INT64_MIN, INT64_MAX) ? 0 : range_error(w, v, "int64");
        case V1_FLOAT64:
                return t == json_type_int || t == json_type_double ? 0 : type_error(w, kind_word(f->kind), v);
        case V1_QUANTITY:
                return quantity(w, v, ret_new);
        case V1_INT_OR_STRING:
                if (t == json_type_string)
                        return 0;
                if (t != json_type_int)
                        return type_error(w, kind_word(f->kind), v);
                return int_in_range(v, INT32_MIN, INT32_MAX) ? 0 : range_error(w, v, "int32");
        case V1_RAW:
                return 0;
        case V1_STRUCT:
                if (t != json_type_object)
                        return type_error(w, "object", v);
                return walk_struct(w, v, &v1_types[f->type]);
        }
        return 0;
}

/* The zero value of a slice element or map value written as null; NULL
 * where Go's zero value itself prints as null. */
static int zero_of(const struct v1_field *f, json_object **ret)
{
        switch (f->kind) {
        case V1_STRING:
                *ret = json_object_new_string("");
                break;
        case V1_BOOL:
                *ret = json_object_new_boolean(0);
                break;
        case V1_INT32:
        case V1_INT64:
        case V1_FLOAT64:
        case V1_INT_OR_STRING:
                *ret = json_object_new_int64(0);
                break;
        case V1_QUANTITY:
                *ret = json_object_new_string("0");
                break;
        case V1_STRUCT:
                *ret = json_object_new_object();
                break;
        default:
                *ret = NULL;
                return 0;
        }
        return *ret ? 0 : -ENOMEM;
}

/* A plain member Go decodes to the same value as no member at all. */
static bool same_as_absent(const struct v1_field *f, json_object *v)
{
        switch (f->kind) {
        case V1_STRING:
                return json_object_get_string_len(v) == 0;
        case V1_BOOL:
                return !json_object_get_boolean(v);
        case V1_INT32:
        case V1_INT64:
                return json_object_get_int64(v) == 0;
        case V1_FLOAT64:
                return json_object_get_double(v) == 0;
        case V1_INT_OR_STRING:
                return json_object_is_type(v, json_type_int) && json_object_get_int64(v) == 0;
        case V1_STRUCT:
                return json_object_object_length(v) == 0;
        default:
                /* Quantity{} and Time{} are not what any text parses to;
                 * []byte and RAW keep nil apart from empty. */
                return false;
        }
}

/* The walk enters only what the table types, so it never goes deeper
 * than the table's deepest path, which fits (checked at compile time). */
static void push(struct walk *w, const char *key, size_t idx)
{
        w->frames[w->depth].key = key;
        w->frames[w->depth].idx = idx;
        w->depth++;
}

static int walk_slice(struct walk *w, const struct v1_field *f, json_object *arr)
{
        size_t n;

        if (!json_object_is_type(arr, json_type_array))
                return type_error(w, f->kind == V1_STRING ? "array of strings" : "array", arr);
        n = json_object_array_length(arr);
        for (size_t i = 0; i < n; i++) {
                json_object *el = json_object_array_get_idx(arr, i), *nv = NULL;
                int r;

                push(w, NULL, i);
                r = el ? walk_value(w, f, el, &nv) : zero_of(f, &nv);
                pop(w);
                if (r < 0)
                        return r;
                if (nv && json_object_array_put_idx(arr, i, nv) != 0) {
                        json_object_put(nv);
                        return -ENOMEM;
                }
        }
        return 0;
}

static int walk_map(struct walk *w, const struct v1_field *f, json_object *map)
{
        struct lh_entry *e;

        if (!json_object_is_type(map, json_type_object))
                return type_error(w, f->kind == V1_STRING ? "map of strings" : "object", map);
        for (e = lh_table_head(json_object_get_object(map)); e; e = lh_entry_next(e)) {
                json_object *v = (json_object *)lh_entry_v(e), *nv = NULL;
                int r;

                push(w, (const char *)lh_entry_k(e), 0);
                r = v ? walk_value(w, f, v, &nv) : zero_of(f, &nv);
                pop(w);
                if (r < 0)
                        return r;
                if (nv) {
                        json_object_put(v);
                        lh_entry_set_val(e, nv);
                }
        }
        return 0;
}

static int walk_struct(struct walk *w, json_object *obj, const struct v1_type *type)
{
        struct lh_table *t = json_object_get_object(obj);
        struct lh_entry *e, *next;

        for (e = lh_table_head(t); e; e = next) {
                const char *key = (const char *)lh_entry_k(e);
                json_object *v = (json_object *)lh_entry_v(e), *nv = NULL;
                const struct v1_field *f = v1_schema_field(type, key);
                bool drop = false;
                int r = 0;

                next = lh_entry_next(e);
                push(w, key, 0);
                if (!f) {
                        r = report_unknown(w);
                        drop = true;
                } else if (!v) {
                        drop = true; /* null: the zero value, nil, absent */
                } else if (f->shape == V1_SLICE) {
                        r = walk_slice(w, f, v);
                } else if (f->shape == V1_MAP) {
                        r = walk_map(w, f, v);
                } else {
                        unsigned before = w->n_errors;

                        r = walk_value(w, f, v, &nv);
                        if (r == 0 && nv) {
                                json_object_put(v);
                                lh_entry_set_val(e, nv);
                                v = nv;
                        }
                        drop = r == 0 && f->shape == V1_PLAIN && w->n_errors == before && same_as_absent(f, v);
                }
                pop(w);
                if (r < 0)
                        return r;
                if (drop)
                        lh_table_delete_entry(t, e);
        }
        return 0;
}

int v1_normalize(json_object *obj, const struct v1_type *type, const char *prefix, struct v1_unknown *unknown,
                 struct buf *err)
{
        /* Frames on the stack: no allocation for a clean object. */
        struct walk w = {.prefix = prefix, .unknown = unknown, .err = err, .path = BUF_INIT};
        int r;

        if (!json_object_is_type(obj, json_type_object))
                return buf_set_err(err, -EINVAL, "Invalid type: expected object, got %s", json_type_word(obj));
        r = walk_struct(&w, obj, type);
        if (r == 0 && w.n_errors)
                r = -EINVAL;
        if (r == -ENOMEM && err)
                buf_reset(err); /* no half message */
        buf_free(&w.path);
        return r;
}
