/*
 * json_canon — canonical JSON text, compact JSON text and a checked deep
 * copy (see src/util/json_canon.h).
 */

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/json_canon.h"
#include "util/json_parse.h"

/* A member of an object: its key and value, read together from json-c's
 * table, so the sorted walk needs no lookup per key. */
struct member {
        const char *key;
        json_object *val;
};

static int cmp_member(const void *a, const void *b)
{
        return strcmp(((const struct member *)a)->key, ((const struct member *)b)->key);
}

/* Members of an object this small are sorted on the stack: most of a
 * pod's objects (metadata, a port, a mount) are; a spec or a container
 * is not, and takes one allocation. */
#define CANON_STACK_MEMBERS 8

static int canon_object(struct buf *out, json_object *v)
{
        size_t n = (size_t)json_object_object_length(v), i = 0;
        struct member stack[CANON_STACK_MEMBERS], *m = stack;
        int r = -ENOMEM;

        if (n == 0)
                return buf_puts(out, "{}");
        if (n > CANON_STACK_MEMBERS) {
                m = malloc(n * sizeof(*m));
                if (!m)
                        return -ENOMEM;
        }
        json_object_object_foreach(v, key, val) {
                m[i].key = key;
                m[i].val = val;
                i++;
        }
        /* Sorting costs O(k log k) per object; canonical text is computed
         * once per pod version, never per comparison. */
        qsort(m, n, sizeof(*m), cmp_member);
        if (buf_putc(out, '{') < 0)
                goto out;
        for (i = 0; i < n; i++) {
                if ((i && buf_putc(out, ',') < 0) || buf_json_string(out, m[i].key, strlen(m[i].key)) < 0 ||
                    buf_putc(out, ':') < 0)
                        goto out;
                r = json_canon_append(out, m[i].val);
                if (r < 0)
                        goto out;
                r = -ENOMEM;
        }
        if (buf_putc(out, '}') < 0)
                goto out;
        r = 0;
out:
        if (m != stack)
                free(m);
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

/* ---- checked building ---------------------------------------------------- */

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
