/*
 * api_decode — PodList pages and the watch stream into a pod store (see
 * src/kube/api_decode.h and doc/api-source.md sections 4-6).
 */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "kube/api_decode.h"
#include "util/grow.h"
#include "util/json_get.h"
#include "util/json_parse.h"
#include "core/pod.h"

/*
 * The syntax of one JSON value, checked a byte at a time as the bytes
 * come, without allocating: it finds where an event ends, and ends the
 * watch at the first byte that cannot be JSON (garbage in the stream is
 * not waited on).  The event is then parsed whole by json_parse_text
 * (json-c's own incremental tokener does not survive running out of
 * memory).
 */
enum jv_state {
        JV_VALUE,          /* a value must start */
        JV_VALUE_OR_CLOSE, /* after '[' */
        JV_KEY_OR_CLOSE,   /* after '{' */
        JV_KEY,            /* after ',' in an object */
        JV_COLON,
        JV_NEXT,           /* after a member or element: ',' or the close */
        JV_STRING,
        JV_ESCAPE,
        JV_UNICODE,
        JV_NUMBER,
        JV_WORD,
};

enum jv_num { N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };

enum jv_result { JV_BAD = -1, JV_MORE = 0, JV_END = 1, JV_END_BEFORE = 2 };

struct jv {
        enum jv_state state;
        bool key;          /* the string is a member name */
        enum jv_num num;
        const char *word;  /* true, false or null */
        unsigned pos;      /* in word, or hex digits of \u so far */
        unsigned depth;
        char stack[JSON_MAX_DEPTH]; /* '{' or '[' of each open container */
};

struct watch_decoder {
        struct buf ev;   /* bytes of an event that spans reads */
        bool started;    /* inside an event */
        struct jv jv;
        size_t event_bytes;
};

static enum jv_result jv_feed(struct jv *v, char c);
static bool jv_space(char c);

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
        return json_get_str(json_get(obj, outer), inner, NULL);
}

/* One item of a list page, decoded before anything is stored. */
struct item {
        struct pod *pod;
        struct pod *old; /* what it replaced in pages */
        bool put;
};

static void items_free(struct item *items, size_t n)
{
        for (size_t i = 0; items && i < n; i++)
                pod_unref(items[i].pod);
        free(items);
}

/* A pod from a decoded object (its store key is pod->key).  0, -EINVAL
 * (not a pod) or -ENOMEM. */
static int decode_pod(json_object *obj, struct pod **ret_pod)
{
        return pod_from_json(obj, ret_pod, NULL);
}

/* Stores every item, or none: a put that fails is undone by putting the
 * earlier ones back in reverse order (replacing a value or removing a key
 * allocates nothing, so the undo cannot fail). */
static int store_items(struct strmap *pages, struct item *items, size_t n)
{
        size_t i;

        for (i = 0; i < n; i++) {
                if (strmap_put(pages, pod_key(items[i].pod), items[i].pod, (void **)&items[i].old) < 0)
                        break;
                items[i].put = true;
        }
        if (i == n) {
                for (i = 0; i < n; i++) {
                        pod_unref(items[i].old); /* replaced: the pages' reference */
                        items[i].pod = NULL;     /* the pages' now */
                }
                return 0;
        }
        while (i-- > 0) {
                if (items[i].old)
                        (void)strmap_put(pages, pod_key(items[i].old), items[i].old, NULL);
                else
                        (void)strmap_remove(pages, pod_key(items[i].pod));
        }
        return -ENOMEM;
}

/* Skips JSON white space. */
static size_t skip_ws(const char *s, size_t len, size_t pos)
{
        while (pos < len && (s[pos] == ' ' || s[pos] == '\t' || s[pos] == '\n' || s[pos] == '\r'))
                pos++;
        return pos;
}

/* The byte at *pos (after white space) is c: 0 and *pos past it, else
 * -EINVAL. */
static int expect(const char *s, size_t len, size_t *pos, char c)
{
        *pos = skip_ws(s, len, *pos);
        if (*pos >= len || s[*pos] != c)
                return -EINVAL;
        (*pos)++;
        return 0;
}

/* Grows the decoded items by one slot.  0 or -ENOMEM. */
static int items_grow(struct item **items, size_t n, size_t *cap)
{
        size_t old = *cap;

        if (GROW(*items, *cap, n + 1, 64) < 0)
                return -ENOMEM;
        memset(*items + old, 0, (*cap - old) * sizeof(**items));
        return 0;
}

/* metadata's resourceVersion and non-empty continue, copied. */
static int list_meta(json_object *meta, char **ret_rv, char **ret_cont)
{
        json_object *v;

        if (!json_object_is_type(meta, json_type_object))
                return 0;
        if ((v = json_get_type(meta, "resourceVersion", json_type_string))) {
                free(*ret_rv);
                if (!(*ret_rv = strdup(json_object_get_string(v))))
                        return -ENOMEM;
        }
        if ((v = json_get_type(meta, "continue", json_type_string)) && json_object_get_string_len(v) > 0) {
                free(*ret_cont);
                if (!(*ret_cont = strdup(json_object_get_string(v))))
                        return -ENOMEM;
        }
        return 0;
}

/* What a PodList body has given so far, before anything is stored. */
struct list_page {
        struct item *items;
        size_t n, cap;
        bool have_items;
        char *rv, *cont;
};

/*
 * The member of a PodList's members (the body without its items' elements:
 * see struct list_decoder) at s[*pos] (after white space: its name):
 * "items" must be [] or null (it was an array, or null), "metadata" gives
 * its resourceVersion and continue, anything else is parsed and dropped.
 * 0 with *pos past the value, or < 0.
 */
static int list_member(const char *s, size_t len, size_t *pos, struct list_page *pg)
{
        json_object *key = NULL, *v = NULL;
        const char *name;
        int r;

        *pos = skip_ws(s, len, *pos);
        if (*pos >= len || s[*pos] != '"')
                return -EINVAL;
        r = json_parse_next(s, len, pos, JSON_MAX_DEPTH, &key, NULL);
        if (r < 0)
                return r;
        name = json_object_get_string(key);
        r = expect(s, len, pos, ':');
        if (r == 0)
                r = json_parse_next(s, len, pos, JSON_MAX_DEPTH, &v, NULL);
        if (r == 0 && strcmp(name, "items") == 0) {
                pg->have_items = true;
                if (v && !json_object_is_type(v, json_type_array))
                        r = -EINVAL;
        } else if (r == 0 && strcmp(name, "metadata") == 0) {
                r = list_meta(v, &pg->rv, &pg->cont);
        }
        json_object_put(v);
        json_object_put(key);
        return r;
}

/*
 * A PodList's members (see list_member) into pg.  They must be one JSON
 * object with nothing after it, and have "items".  0, -EINVAL (not a
 * PodList) or -ENOMEM.
 */
static int decode_members(const char *s, size_t len, struct list_page *pg)
{
        size_t pos = 0;
        int r;

        if (expect(s, len, &pos, '{') < 0)
                return -EINVAL;
        pos = skip_ws(s, len, pos);
        if (pos < len && s[pos] == '}') {
                pos++;
        } else {
                for (;;) {
                        r = list_member(s, len, &pos, pg);
                        if (r < 0)
                                return r;
                        pos = skip_ws(s, len, pos);
                        if (pos < len && s[pos] == '}') {
                                pos++;
                                break;
                        }
                        if (expect(s, len, &pos, ',') < 0)
                                return -EINVAL;
                }
        }
        return skip_ws(s, len, pos) != len || !pg->have_items ? -EINVAL : 0;
}

static void list_page_clear(struct list_page *pg)
{
        items_free(pg->items, pg->n);
        free(pg->rv);
        free(pg->cont);
        memset(pg, 0, sizeof(*pg));
}

struct watch_decoder *watch_decoder_new(void)
{
        struct watch_decoder *d = calloc(1, sizeof(*d));

        if (d)
                buf_init(&d->ev);
        return d;
}

void watch_decoder_free(struct watch_decoder *d)
{
        if (!d)
                return;
        buf_free(&d->ev);
        free(d);
}

void watch_decoder_reset(struct watch_decoder *d)
{
        buf_reset(&d->ev);
        d->started = false;
        memset(&d->jv, 0, sizeof(d->jv));
        d->event_bytes = 0;
}

/*
 * Applies one decoded event, all or nothing: the copy of its resource
 * version is made first, then the store changes (a put or a remove that
 * fails leaves it as it was), then *rv_slot.  0 or a watch_decoder_feed()
 * error.
 */
static int apply_event(json_object *ev, struct strmap *store, char **rv_slot, watch_event_fn on_event,
                       void *arg, long *ret_code, struct buf *err)
{
        json_object *type = NULL, *obj = NULL, *v = NULL;
        enum watch_event_type et;
        struct pod *p = NULL, *old = NULL;
        char *key = NULL, *rv_copy = NULL;
        const char *t, *rv;
        int r = 0;

        if (!(type = json_get_type(ev, "type", json_type_string)) ||
            !(obj = json_get_type(ev, "object", json_type_object)))
                return buf_set_err(err, -EBADMSG, "undecodable event");
        t = json_object_get_string(type);
        if (strcmp(t, "ERROR") == 0) {
                /* A Status object; a code that is not a number counts as
                 * an internal error, as an absent one does. */
                *ret_code = 500;
                if ((v = json_get_type(obj, "code", json_type_int)))
                        *ret_code = (long)json_object_get_int(v);
                if ((v = json_get_type(obj, "message", json_type_string)))
                        return buf_set_err(err, -EPROTO, "%s", json_object_get_string(v));
                return buf_set_err(err, -EPROTO, "(an ERROR event without a message)");
        }
        if (strcmp(t, "ADDED") == 0)
                et = WATCH_ADDED;
        else if (strcmp(t, "MODIFIED") == 0)
                et = WATCH_MODIFIED;
        else if (strcmp(t, "DELETED") == 0)
                et = WATCH_DELETED;
        else if (strcmp(t, "BOOKMARK") == 0)
                et = WATCH_BOOKMARK;
        else
                return buf_set_err(err, -EBADMSG, "unknown event type \"%.64s\"", t);
        if (et == WATCH_DELETED) {
                /* A DELETED object need not be a whole pod: its namespace
                 * and name are enough, as in the reflector's store. */
                const char *ns = member_string(obj, "metadata", "namespace");
                const char *name = member_string(obj, "metadata", "name");
                struct buf b = BUF_INIT;

                if (!name)
                        name = "";
                r = ns && ns[0] ? buf_printf(&b, "%s/%s", ns, name) : buf_puts(&b, name);
                if (r == 0 && !(key = buf_steal(&b, NULL)))
                        r = -ENOMEM;
                buf_free(&b);
        } else if (et != WATCH_BOOKMARK) {
                r = decode_pod(obj, &p);
        }
        if (r == -EINVAL)
                return buf_set_err(err, -EBADMSG, "a %s event does not hold a pod", t);
        if (et == WATCH_BOOKMARK) {
                const char *end = json_get_str(json_get(json_get(obj, "metadata"), "annotations"),
                                               "k8s.io/initial-events-end", NULL);

                if (end && strcmp(end, "true") == 0)
                        et = WATCH_INITIAL_END;
        }
        rv = member_string(obj, "metadata", "resourceVersion");
        if (r == 0 && rv_slot && rv && !(rv_copy = strdup(rv)))
                r = -ENOMEM;
        if (r == 0 && p)
                r = strmap_put(store, pod_key(p), p, (void **)&old);
        if (r < 0) {
                pod_unref(p);
                free(key);
                free(rv_copy);
                return r;
        }
        /* Nothing below can fail. */
        if (et == WATCH_DELETED)
                old = strmap_remove(store, key);
        free(key);
        if (rv_copy) {
                free(*rv_slot);
                *rv_slot = rv_copy;
        }
        if (on_event)
                on_event(arg, et, old, p);
        pod_unref(old);
        return 0;
}

static bool jv_space(char c)
{
        return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* A value just ended: the container goes on, or the top value is whole. */
static enum jv_result jv_value_done(struct jv *v)
{
        if (v->depth == 0)
                return JV_END;
        v->state = JV_NEXT;
        return JV_MORE;
}

static enum jv_result jv_start_value(struct jv *v, char c)
{
        switch (c) {
        case '{':
        case '[':
                if (v->depth == sizeof(v->stack))
                        return JV_BAD; /* nesting too deep */
                v->stack[v->depth++] = c;
                v->state = c == '{' ? JV_KEY_OR_CLOSE : JV_VALUE_OR_CLOSE;
                return JV_MORE;
        case '"':
                v->state = JV_STRING;
                v->key = false;
                return JV_MORE;
        case 't':
        case 'f':
        case 'n':
                v->word = c == 't' ? "true" : c == 'f' ? "false" : "null";
                v->pos = 1;
                v->state = JV_WORD;
                return JV_MORE;
        case '-':
                v->num = N_MINUS;
                v->state = JV_NUMBER;
                return JV_MORE;
        default:
                if (c < '0' || c > '9')
                        return JV_BAD;
                v->num = c == '0' ? N_ZERO : N_INT;
                v->state = JV_NUMBER;
                return JV_MORE;
        }
}

static enum jv_result jv_close(struct jv *v, char c)
{
        if (v->depth == 0 || v->stack[v->depth - 1] != (c == '}' ? '{' : '['))
                return JV_BAD;
        v->depth--;
        return jv_value_done(v) == JV_END ? JV_END : JV_MORE;
}

/* After '{' or ',' in an object: a member name starts (or, after '{', the
 * object closes). */
static enum jv_result jv_key(struct jv *v, char c)
{
        if (jv_space(c))
                return JV_MORE;
        if (c == '}' && v->state == JV_KEY_OR_CLOSE)
                return jv_close(v, c);
        if (c != '"')
                return JV_BAD;
        v->state = JV_STRING;
        v->key = true;
        return JV_MORE;
}

/* After a member name: its ':'. */
static enum jv_result jv_colon(struct jv *v, char c)
{
        if (jv_space(c))
                return JV_MORE;
        if (c != ':')
                return JV_BAD;
        v->state = JV_VALUE;
        return JV_MORE;
}

/* After a member or an element: ',' or the container's close. */
static enum jv_result jv_next(struct jv *v, char c)
{
        if (jv_space(c))
                return JV_MORE;
        if (c == ',') {
                v->state = v->stack[v->depth - 1] == '{' ? JV_KEY : JV_VALUE;
                return JV_MORE;
        }
        return c == '}' || c == ']' ? jv_close(v, c) : JV_BAD;
}

/* Inside a string: its closing quote ends a name or a value. */
static enum jv_result jv_string(struct jv *v, char c)
{
        if (c == '"') {
                if (v->key) {
                        v->state = JV_COLON;
                        return JV_MORE;
                }
                return jv_value_done(v);
        }
        if (c == '\\')
                v->state = JV_ESCAPE;
        else if ((unsigned char)c < 0x20)
                return JV_BAD;
        return JV_MORE;
}

/* After a backslash in a string. */
static enum jv_result jv_escape(struct jv *v, char c)
{
        if (c == 'u') {
                v->pos = 0;
                v->state = JV_UNICODE;
                return JV_MORE;
        }
        if (!strchr("\"\\/bfnrt", c) || c == '\0')
                return JV_BAD;
        v->state = JV_STRING;
        return JV_MORE;
}

/* The four hex digits of a \u escape. */
static enum jv_result jv_unicode(struct jv *v, char c)
{
        if (!isxdigit((unsigned char)c))
                return JV_BAD;
        if (++v->pos == 4)
                v->state = JV_STRING;
        return JV_MORE;
}

/* The rest of true, false or null. */
static enum jv_result jv_word(struct jv *v, char c)
{
        if (c != v->word[v->pos])
                return JV_BAD;
        if (v->word[++v->pos])
                return JV_MORE;
        return jv_value_done(v);
}

/* Inside a number, which ends at the first byte that cannot continue it:
 * that byte then belongs to what follows. */
static enum jv_result jv_number(struct jv *v, char c)
{
        switch (v->num) {
        case N_MINUS:
                if (c < '0' || c > '9')
                        return JV_BAD;
                v->num = c == '0' ? N_ZERO : N_INT;
                return JV_MORE;
        case N_INT:
                if (c >= '0' && c <= '9')
                        return JV_MORE;
                /* fall through */
        case N_ZERO:
                if (c == '.') {
                        v->num = N_DOT;
                        return JV_MORE;
                }
                if (c == 'e' || c == 'E') {
                        v->num = N_E;
                        return JV_MORE;
                }
                break;
        case N_DOT:
        case N_ESIGN:
                if (c < '0' || c > '9')
                        return JV_BAD;
                v->num = v->num == N_DOT ? N_FRAC : N_EXP;
                return JV_MORE;
        case N_FRAC:
                if (c >= '0' && c <= '9')
                        return JV_MORE;
                if (c == 'e' || c == 'E') {
                        v->num = N_E;
                        return JV_MORE;
                }
                break;
        case N_E:
                if (c == '+' || c == '-') {
                        v->num = N_ESIGN;
                        return JV_MORE;
                }
                if (c < '0' || c > '9')
                        return JV_BAD;
                v->num = N_EXP;
                return JV_MORE;
        case N_EXP:
                if (c >= '0' && c <= '9')
                        return JV_MORE;
                break;
        }
        /* The number is whole; c belongs to what follows it. */
        if (v->depth == 0)
                return JV_END_BEFORE;
        v->state = JV_NEXT;
        return jv_next(v, c);
}

/* One byte, in the state the bytes before it left. */
static enum jv_result jv_feed(struct jv *v, char c)
{
        switch (v->state) {
        case JV_VALUE:
                return jv_space(c) ? JV_MORE : jv_start_value(v, c);
        case JV_VALUE_OR_CLOSE:
                if (jv_space(c))
                        return JV_MORE;
                return c == ']' ? jv_close(v, c) : jv_start_value(v, c);
        case JV_KEY_OR_CLOSE:
        case JV_KEY:
                return jv_key(v, c);
        case JV_COLON:
                return jv_colon(v, c);
        case JV_NEXT:
                return jv_next(v, c);
        case JV_STRING:
                return jv_string(v, c);
        case JV_ESCAPE:
                return jv_escape(v, c);
        case JV_UNICODE:
                return jv_unicode(v, c);
        case JV_WORD:
                return jv_word(v, c);
        case JV_NUMBER:
                break;
        }
        return jv_number(v, c);
}

int watch_decoder_feed(struct watch_decoder *d, const char *data, size_t len, struct strmap *store,
                       char **rv_slot, watch_event_fn on_event, void *arg, long *ret_code,
                       struct buf *err)
{
        size_t off = 0;

        *ret_code = 500;
        while (off < len) {
                enum jv_result jr = JV_MORE;
                const char *text;
                size_t end, text_len;
                json_object *ev = NULL;
                struct buf why = BUF_INIT;
                int r;

                if (!d->started) {
                        while (off < len && isspace((unsigned char)data[off]))
                                off++;
                        if (off == len)
                                break;
                        d->started = true;
                }
                for (end = off; end < len && jr == JV_MORE; end++)
                        jr = jv_feed(&d->jv, data[end]);
                if (jr == JV_END_BEFORE)
                        end--; /* that byte starts what follows */
                if (jr == JV_BAD)
                        return buf_set_err(err, -EBADMSG,
                                           "data that is not JSON (unexpected byte 0x%02x at byte %zu of the event)",
                                           (unsigned char)data[end - 1], d->event_bytes + (end - 1 - off));
                /* One event may be large, never unbounded. */
                d->event_bytes += end - off;
                if (d->event_bytes > API_MAX_EVENT)
                        return buf_set_err(err, -EBADMSG, "an event larger than %u bytes", API_MAX_EVENT);
                if (jr == JV_MORE || d->ev.len) {
                        /* Kept until the event is whole. */
                        if (buf_append(&d->ev, data + off, end - off) < 0)
                                goto nomem;
                }
                off = end;
                if (jr == JV_MORE)
                        break;
                text = d->ev.len ? d->ev.data : data + end - d->event_bytes;
                text_len = d->event_bytes;
                r = json_parse_text(text, text_len, &ev, &why);
                if (r == -EINVAL)
                        r = buf_set_err(err, -EBADMSG, "data that is not JSON (%s)", why.len ? why.data : "?");
                buf_free(&why);
                watch_decoder_reset(d);
                if (r == 0)
                        r = apply_event(ev, store, rv_slot, on_event, arg, ret_code, err);
                json_object_put(ev);
                if (r == -ENOMEM)
                        goto nomem;
                if (r < 0)
                        return r;
        }
        return 0;
nomem:
        if (err)
                buf_reset(err); /* a failure replaces what err held */
        return -ENOMEM;
}

/* ---- a list, decoded as its bytes come ----------------------------------------------- */

/*
 * The body is checked byte by byte (struct jv).  The elements of the
 * top-level "items" array are taken out as they come: each is parsed alone
 * once its last byte is in, and turned into a pod.  Every other byte goes
 * to skel, which thus reads as the body with "items":[], and is decoded
 * at the end by decode_members (kind, apiVersion and metadata are small).
 * So the whole body is never held: the peak is the pods decoded so far,
 * one item's bytes and tree, and the small members.
 */
enum list_dest { TO_NONE, TO_SKEL, TO_ITEM };

struct list_decoder {
        struct jv jv;
        bool ended;          /* the body's value is whole: white space only now */
        int error;           /* the first failure (kept: later feeds repeat it) */
        struct buf why;      /* its words */
        struct buf skel;     /* the body without the items' elements */
        struct buf item;     /* the bytes of the element being read */
        size_t key_at;       /* where the top-level name being read starts in skel */
        bool items_key;      /* the last top-level name read was "items" */
        bool in_items;       /* inside the top-level items array */
        bool in_item;        /* inside one of its elements */
        struct list_page pg; /* the items decoded so far */
        /* The bytes of the current read not yet copied: data[from..] go
         * to dest. */
        enum list_dest dest;
        size_t from;
};

struct list_decoder *list_decoder_new(void)
{
        struct list_decoder *d = calloc(1, sizeof(*d));

        if (d)
                list_decoder_reset(d);
        return d;
}

void list_decoder_reset(struct list_decoder *d)
{
        list_page_clear(&d->pg);
        buf_free(&d->why);
        buf_free(&d->skel);
        buf_free(&d->item);
        memset(&d->jv, 0, sizeof(d->jv));
        d->ended = d->items_key = d->in_items = d->in_item = false;
        d->error = 0;
        d->key_at = 0;
        d->dest = TO_SKEL;
}

void list_decoder_free(struct list_decoder *d)
{
        if (!d)
                return;
        list_decoder_reset(d);
        free(d);
}

/* Copies data[d->from..to) where it goes, and sends what follows to dest.
 * 0 or -ENOMEM. */
static int route(struct list_decoder *d, const char *data, size_t to, enum list_dest dest)
{
        struct buf *b = d->dest == TO_SKEL ? &d->skel : d->dest == TO_ITEM ? &d->item : NULL;

        if (b && to > d->from && buf_append(b, data + d->from, to - d->from) < 0)
                return -ENOMEM;
        d->from = to;
        d->dest = dest;
        return 0;
}

/* The element in d->item is whole: parsed and made a pod.  0, -EINVAL,
 * -ENOTSUP (not a pod; d->why says which) or -ENOMEM. */
static int take_item(struct list_decoder *d)
{
        json_object *o = NULL;
        int r = json_parse_text(d->item.data, d->item.len, &o, NULL);

        buf_reset(&d->item);
        d->in_item = false;
        if (r < 0)
                return r == -ENOMEM ? r : -EINVAL;
        r = items_grow(&d->pg.items, d->pg.n, &d->pg.cap);
        if (r == 0)
                r = decode_pod(o, &d->pg.items[d->pg.n].pod);
        json_object_put(o);
        if (r == -EINVAL)
                return buf_set_err(&d->why, -ENOTSUP, "item %zu is not a pod", d->pg.n);
        if (r == 0)
                d->pg.n++;
        return r;
}

/* A top-level name just ended in skel (at d->key_at): whether it is
 * "items", escapes decoded.  0 or -ENOMEM. */
static int check_key(struct list_decoder *d)
{
        const char *k = d->skel.data + d->key_at;
        size_t n = d->skel.len - d->key_at;
        json_object *o = NULL;
        int r;

        if (!memchr(k, '\\', n)) {
                d->items_key = n == 7 && memcmp(k, "\"items\"", 7) == 0;
                return 0;
        }
        r = json_parse_text(k, n, &o, NULL);
        if (r < 0)
                return r == -ENOMEM ? r : -EINVAL;
        d->items_key = strcmp(json_object_get_string(o), "items") == 0;
        json_object_put(o);
        return 0;
}

/* A byte outside the items' elements, at data[i], before (st, depth) and
 * after it: the top-level names are watched, and the items array opened
 * and closed.  0 or < 0. */
static int skel_byte(struct list_decoder *d, const char *data, size_t i, enum jv_state st, unsigned depth)
{
        char c = data[i];

        if (d->in_items) {
                /* Between elements: separators are dropped, the close
                 * goes to skel. */
                if (d->jv.depth > 1)
                        return 0;
                d->in_items = false;
                return route(d, data, i, TO_SKEL);
        }
        if (depth != 1)
                return 0;
        if ((st == JV_KEY_OR_CLOSE || st == JV_KEY) && d->jv.state == JV_STRING)
                d->key_at = d->skel.len + (i - d->from);
        if (st == JV_STRING && d->jv.state == JV_COLON)
                return route(d, data, i + 1, TO_SKEL) < 0 ? -ENOMEM : check_key(d);
        if (st == JV_VALUE && !jv_space(c) && d->items_key) {
                /* "items" again: the last one counts, as in a JSON object. */
                list_page_clear(&d->pg);
                d->in_items = c == '[';
                if (d->in_items && route(d, data, i + 1, TO_NONE) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* One byte of the body, at data[i].  0 or < 0 (see take_item). */
static int list_byte(struct list_decoder *d, const char *data, size_t i)
{
        char c = data[i];
        enum jv_state st = d->jv.state;
        unsigned depth = d->jv.depth;
        enum jv_result jr;
        int r;

        if (d->ended)
                return jv_space(c) ? 0 : -EINVAL;
        if (d->in_items && !d->in_item && depth == 2 && (st == JV_VALUE || st == JV_VALUE_OR_CLOSE) && !jv_space(c) &&
            c != ']') {
                if (route(d, data, i, TO_ITEM) < 0)
                        return -ENOMEM;
                d->in_item = true;
        }
        jr = jv_feed(&d->jv, c);
        if (jr == JV_BAD || jr == JV_END_BEFORE) /* a top-level number is no list */
                return -EINVAL;
        if (jr == JV_END)
                d->ended = true;
        if (!d->in_item)
                return skel_byte(d, data, i, st, depth);
        if (st == JV_NUMBER && depth == 2 && d->jv.state != JV_NUMBER) {
                /* A number element ended before c, which separates or
                 * closes. */
                r = route(d, data, i, TO_NONE);
                if (r == 0)
                        r = take_item(d);
                return r < 0 ? r : skel_byte(d, data, i, JV_NEXT, 2);
        }
        if (d->jv.depth == 2 && d->jv.state == JV_NEXT)
                return route(d, data, i + 1, TO_NONE) < 0 ? -ENOMEM : take_item(d);
        return 0;
}

/*
 * Keeps the first failure r (of list_byte or decode_members) as d->error,
 * in the words api_decode_list_page() gives (an item that is not a pod
 * says so itself; anything else, a syntax error or a list that is not
 * one, is the body's fault), and hands it out in err.
 */
static int list_fail(struct list_decoder *d, int r, struct buf *err)
{
        if (!d->error) {
                if (r == -ENOTSUP)
                        r = -EINVAL; /* d->why says which item */
                else if (r != -ENOMEM)
                        r = buf_set_err(&d->why, -EINVAL, "the response is not a PodList");
                d->error = r;
        }
        if (d->error == -ENOMEM) {
                if (err)
                        buf_reset(err);
                return -ENOMEM;
        }
        return buf_set_err(err, -EINVAL, "%s", d->why.data);
}

int list_decoder_feed(struct list_decoder *d, const char *data, size_t len, struct buf *err)
{
        int r = 0;

        if (d->error)
                return list_fail(d, d->error, err);
        d->from = 0;
        for (size_t i = 0; i < len && r == 0; i++)
                r = list_byte(d, data, i);
        if (r == 0)
                r = route(d, data, len, d->dest);
        return r < 0 ? list_fail(d, r, err) : 0;
}

int list_decoder_finish(struct list_decoder *d, struct strmap *pages, char **ret_rv, char **ret_cont, struct buf *err)
{
        struct list_page sk = {0};
        int r;

        if (d->error)
                return list_fail(d, d->error, err);
        r = d->ended ? decode_members(d->skel.data, d->skel.len, &sk) : -EINVAL;
        if (r == 0)
                r = store_items(pages, d->pg.items, d->pg.n);
        if (r == 0) {
                *ret_rv = sk.rv;
                *ret_cont = sk.cont;
                sk.rv = sk.cont = NULL;
        }
        list_page_clear(&sk);
        if (r < 0)
                return list_fail(d, r, err);
        list_decoder_reset(d);
        return 0;
}

size_t list_decoder_items(const struct list_decoder *d)
{
        return d->pg.n;
}

int api_decode_list_page(const char *body, size_t len, struct strmap *pages, char **ret_rv, char **ret_cont,
                         struct buf *err)
{
        struct list_decoder *d = list_decoder_new();
        int r;

        if (!d) {
                if (err)
                        buf_reset(err);
                return -ENOMEM;
        }
        r = list_decoder_feed(d, body ? body : "", len, err);
        if (r == 0)
                r = list_decoder_finish(d, pages, ret_rv, ret_cont, err);
        list_decoder_free(d);
        return r;
}
