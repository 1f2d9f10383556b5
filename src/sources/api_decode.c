/*
 * api_decode — PodList pages and the watch stream into a pod store (see
 * include/podmux/api_decode.h and spec/apiserver-source.md sections 4-6).
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "podmux/api_decode.h"
#include "podmux/json_canon.h"
#include "podmux/pod.h"
#include "podmux/str.h"

struct watch_decoder {
        json_tokener *tok;
        size_t event_bytes; /* fed into the event being decoded */
};

static void unref_value(void *v)
{
        pod_unref(v);
}

void api_store_free(struct strmap *store)
{
        strmap_free(store, unref_value);
}

static const char *member_string(json_object *obj, const char *outer, const char *inner)
{
        json_object *o = NULL, *v = NULL;

        if (json_object_object_get_ex(obj, outer, &o) && json_object_object_get_ex(o, inner, &v) &&
            json_object_is_type(v, json_type_string))
                return json_object_get_string(v);
        return NULL;
}

/* Puts obj into store under namespace/name.  0, -EINVAL (not a pod) or
 * -ENOMEM. */
static int store_put(struct strmap *store, json_object *obj)
{
        struct pod *p = NULL, *old = NULL;
        struct buf key = BUF_INIT;
        int r;

        r = pod_from_json(obj, &p, NULL);
        if (r < 0)
                return r;
        r = pod_store_key(p, &key);
        if (r == 0)
                r = strmap_put(store, key.data, p, (void **)&old);
        if (r < 0)
                pod_unref(p);
        pod_unref(old);
        buf_free(&key);
        return r;
}

/* A DELETED object need not be a whole pod: its namespace and name are
 * enough, as in the reflector's store. */
static int store_delete(struct strmap *store, json_object *obj)
{
        const char *ns = member_string(obj, "metadata", "namespace");
        const char *name = member_string(obj, "metadata", "name");
        struct buf key = BUF_INIT;
        int r;

        if (!ns)
                ns = "";
        if (!name)
                name = "";
        r = ns[0] ? buf_printf(&key, "%s/%s", ns, name) : buf_puts(&key, name);
        if (r == 0)
                pod_unref(strmap_remove(store, key.data));
        buf_free(&key);
        return r;
}

int api_decode_list_page(const char *body, size_t len, struct strmap *pages, char **ret_rv,
                         char **ret_cont, struct buf *err)
{
        json_object *o = NULL, *items = NULL, *meta = NULL, *v;
        char *rv = NULL, *cont = NULL;
        size_t n = 0;
        int r;

        if (json_parse_text(body ? body : "", len, &o, NULL) < 0 || !json_object_is_type(o, json_type_object) ||
            !json_object_object_get_ex(o, "items", &items) ||
            !(json_object_is_type(items, json_type_array) || json_object_is_type(items, json_type_null))) {
                buf_puts(err, "the response is not a PodList");
                r = -EINVAL;
                goto done;
        }
        if (json_object_is_type(items, json_type_array))
                n = json_object_array_length(items);
        for (size_t i = 0; i < n; i++) {
                r = store_put(pages, json_object_array_get_idx(items, i));
                if (r < 0) {
                        if (r == -EINVAL)
                                buf_printf(err, "item %zu is not a pod", i);
                        goto done;
                }
        }
        if (json_object_object_get_ex(o, "metadata", &meta)) {
                if (json_object_object_get_ex(meta, "resourceVersion", &v) && json_object_is_type(v, json_type_string) &&
                    !(rv = strdup(json_object_get_string(v)))) {
                        r = -ENOMEM;
                        goto done;
                }
                if (json_object_object_get_ex(meta, "continue", &v) && json_object_is_type(v, json_type_string) &&
                    json_object_get_string_len(v) > 0 && !(cont = strdup(json_object_get_string(v)))) {
                        r = -ENOMEM;
                        goto done;
                }
        }
        *ret_rv = rv;
        *ret_cont = cont;
        rv = cont = NULL;
        r = 0;
done:
        free(rv);
        free(cont);
        json_object_put(o);
        return r;
}

struct watch_decoder *watch_decoder_new(void)
{
        struct watch_decoder *d = calloc(1, sizeof(*d));

        if (!d)
                return NULL;
        d->tok = json_tokener_new_ex(JSON_MAX_DEPTH);
        if (!d->tok) {
                free(d);
                return NULL;
        }
        /* Strict JSON, as client-go reads it.  Without this json-c takes
         * comments, and after an event it goes on eating what may start
         * one ("/"), so whether an event was applied depended on where
         * the reads were cut.  Strict json-c refuses text after a value
         * unless told that the stream holds several. */
        json_tokener_set_flags(d->tok, JSON_TOKENER_STRICT | JSON_TOKENER_ALLOW_TRAILING_CHARS);
        return d;
}

void watch_decoder_free(struct watch_decoder *d)
{
        if (!d)
                return;
        json_tokener_free(d->tok);
        free(d);
}

void watch_decoder_reset(struct watch_decoder *d)
{
        json_tokener_reset(d->tok);
        d->event_bytes = 0;
}

/* Applies one decoded event.  0 or a watch_decoder_feed() error. */
static int apply_event(json_object *ev, struct strmap *store, char **rv_slot,
                       void (*on_event)(void *arg, enum watch_event_type t), void *arg, long *ret_code,
                       struct buf *err)
{
        json_object *type = NULL, *obj = NULL, *v = NULL;
        enum watch_event_type et;
        const char *t;
        int r;

        if (!json_object_is_type(ev, json_type_object) || !json_object_object_get_ex(ev, "type", &type) ||
            !json_object_is_type(type, json_type_string) || !json_object_object_get_ex(ev, "object", &obj) ||
            !json_object_is_type(obj, json_type_object)) {
                buf_puts(err, "undecodable event");
                return -EBADMSG;
        }
        t = json_object_get_string(type);
        if (strcmp(t, "ERROR") == 0) {
                /* A Status object; a code that is not a number counts as
                 * an internal error, as an absent one does. */
                *ret_code = 500;
                if (json_object_object_get_ex(obj, "code", &v) && json_object_is_type(v, json_type_int))
                        *ret_code = (long)json_object_get_int(v);
                if (json_object_object_get_ex(obj, "message", &v) && json_object_is_type(v, json_type_string))
                        buf_puts(err, json_object_get_string(v));
                return -EPROTO;
        }
        if (strcmp(t, "ADDED") == 0)
                et = WATCH_ADDED;
        else if (strcmp(t, "MODIFIED") == 0)
                et = WATCH_MODIFIED;
        else if (strcmp(t, "DELETED") == 0)
                et = WATCH_DELETED;
        else if (strcmp(t, "BOOKMARK") == 0)
                et = WATCH_BOOKMARK;
        else {
                buf_printf(err, "unknown event type \"%.64s\"", t);
                return -EBADMSG;
        }
        if (et == WATCH_DELETED)
                r = store_delete(store, obj);
        else if (et != WATCH_BOOKMARK)
                r = store_put(store, obj);
        else
                r = 0;
        if (r == -EINVAL) {
                buf_printf(err, "a %s event does not hold a pod", t);
                return -EBADMSG;
        }
        if (r < 0)
                return r;
        if (rv_slot) {
                const char *rv = member_string(obj, "metadata", "resourceVersion");

                if (rv && str_set(rv_slot, rv) < 0)
                        return -ENOMEM;
        }
        if (on_event)
                on_event(arg, et);
        return 0;
}

int watch_decoder_feed(struct watch_decoder *d, const char *data, size_t len, struct strmap *store,
                       char **rv_slot, void (*on_event)(void *arg, enum watch_event_type t), void *arg,
                       long *ret_code, struct buf *err)
{
        size_t off = 0;

        *ret_code = 500;
        while (off < len) {
                json_object *ev;
                enum json_tokener_error jerr;
                size_t room = len - off;
                int r;

                if (json_tokener_get_parse_end(d->tok) == 0 && d->event_bytes == 0) {
                        while (off < len && isspace((unsigned char)data[off]))
                                off++;
                        if (off == len)
                                break;
                        room = len - off;
                }
                /* json_tokener takes an int length. */
                if (room > (size_t)API_MAX_EVENT + 1)
                        room = (size_t)API_MAX_EVENT + 1;
                ev = json_tokener_parse_ex(d->tok, data + off, (int)room);
                jerr = json_tokener_get_error(d->tok);
                if (jerr == json_tokener_continue) {
                        /* One event may be large, never unbounded. */
                        d->event_bytes += room;
                        off += room;
                        if (d->event_bytes > API_MAX_EVENT) {
                                buf_printf(err, "an event larger than %u bytes", API_MAX_EVENT);
                                return -EBADMSG;
                        }
                        continue;
                }
                d->event_bytes = 0;
                if (jerr != json_tokener_success) {
                        buf_printf(err, "data that is not JSON (%s)", json_tokener_error_desc(jerr));
                        return -EBADMSG;
                }
                off += json_tokener_get_parse_end(d->tok);
                json_tokener_reset(d->tok);
                r = apply_event(ev, store, rv_slot, on_event, arg, ret_code, err);
                json_object_put(ev);
                if (r < 0)
                        return r;
        }
        return 0;
}
