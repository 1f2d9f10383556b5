/*
 * client_msg — decoding one line of the update stream (see
 * src/client/client_msg.h).
 *
 * The line is walked member by member; each value is parsed with
 * json_parse_next() (src/util/json_parse.c, every allocation checked), so
 * the walk itself only steps over '{', ':', ',' and '}'.  The "pods"
 * array is walked one element at a time, and an element's text is the
 * bytes stepped over, copied as they are.  An element is walked here down
 * to its identity and every other value in it is stepped over by
 * json_skip_next(): the same checks as a tree would get, without the
 * tree, its ~100 allocations per pod, or freeing them (the library's
 * largest cost before, scripts/bench --only client).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "util/grow.h"
#include "util/json_get.h"
#include "util/json_parse.h"
#include "util/proto_words.h"
#include "client_msg.h"

#define SOURCE_ANNOTATION PROTO_ANNOTATION_SOURCE

/* ---- pods ------------------------------------------------------------------ */

struct podmux_pod *client_pod_ref(struct podmux_pod *p)
{
        if (p)
                p->refs++;
        return p;
}

size_t client_pod_id_size(const struct podmux_pod *p)
{
        return strlen(p->source) + strlen(p->uid) + 2;
}

void client_pod_id_write(const struct podmux_pod *p, char *out)
{
        size_t ls = strlen(p->source);

        memcpy(out, p->source, ls);
        out[ls] = '/';
        memcpy(out + ls + 1, p->uid, strlen(p->uid) + 1);
}

int client_pod_id_get(const struct keymap *m, const struct podmux_pod *p, void **ret)
{
        char stack[256], *id = stack;
        size_t n = client_pod_id_size(p);

        if (n > sizeof(stack) && !(id = malloc(n)))
                return -ENOMEM;
        client_pod_id_write(p, id);
        *ret = keymap_get(m, id);
        if (id != stack)
                free(id);
        return 0;
}

void client_pod_unref(struct podmux_pod *p)
{
        if (!p || --p->refs > 0)
                return;
        free(p->own_source);
        free(p);
}

int client_pod_compare(const struct podmux_pod *a, const struct podmux_pod *b)
{
        int c = strcmp(a->ns, b->ns);

        if (c)
                return c;
        c = strcmp(a->name, b->name);
        if (c)
                return c;
        c = strcmp(a->uid, b->uid);
        if (c)
                return c;
        return strcmp(a->source, b->source);
}

/* One string of a pod's identity as json-c would hand it out: decoded,
 * cut at a NUL (json_object_get_string() is a C string); s NULL when the
 * member is absent or not a string.  dec holds the bytes when they had
 * to be decoded (s points into the text otherwise). */
struct id_str {
        const char *s;
        size_t len;
        struct buf dec;
};

/* The identity read from one pod's text. */
struct pod_ids {
        struct id_str uid, name, ns, src;
};

static void ids_free(struct pod_ids *ids)
{
        buf_free(&ids->uid.dec);
        buf_free(&ids->name.dec);
        buf_free(&ids->ns.dec);
        buf_free(&ids->src.dec);
}

/* One block: the struct, the text, then uid, namespace, name and the
 * source annotation, each NUL-terminated.  0, -EINVAL (why set), -ENOMEM. */
static int pod_new(const char *text, size_t len, const struct pod_ids *ids, struct podmux_pod **ret, struct buf *why)
{
        const char *uid = ids->uid.s, *name = ids->name.s;
        const char *ns = ids->ns.s ? ids->ns.s : "", *src = ids->src.s ? ids->src.s : "";
        size_t lu = ids->uid.len, ln = ids->name.len;
        size_t lns = ids->ns.s ? ids->ns.len : 0, ls = ids->src.s ? ids->src.len : 0, size;
        struct podmux_pod *p;
        char *at;

        if (!uid || !lu || !name) {
                (void)buf_puts(why, "a pod without metadata.uid and metadata.name");
                return -EINVAL;
        }
        size = sizeof(*p) + len + 1 + lu + 1 + ln + 1 + lns + 1 + ls + 1;
        p = malloc(size);
        if (!p)
                return -ENOMEM;
        memset(p, 0, sizeof(*p));
        at = (char *)(p + 1);
        p->refs = 1;
        p->len = len;
        p->json = at;
        memcpy(at, text, len);
        at[len] = '\0';
        at += len + 1;
        memcpy(at, uid, lu);
        at[lu] = '\0';
        p->uid = at;
        at += lu + 1;
        memcpy(at, ns, lns);
        at[lns] = '\0';
        p->ns = at;
        at += lns + 1;
        memcpy(at, name, ln);
        at[ln] = '\0';
        p->name = at;
        at += ln + 1;
        memcpy(at, src, ls);
        at[ls] = '\0';
        p->ann_source = at;
        p->source = at;
        *ret = p;
        return 0;
}

/* ---- the walk ---------------------------------------------------------------- */

/* Where the line's last "pods" or "plugin" member's value starts, and
 * whether the message holds it already: walked as it was met when the
 * type read before it wanted it (the daemon writes "type" first). */
struct typed_member {
        bool have;
        size_t at;
        bool walked;
};

struct walk {
        const char *s;
        size_t len, pos;
        struct buf *why;
        struct typed_member pods, plugin;
};

static void skip_ws(struct walk *w)
{
        while (w->pos < w->len) {
                char c = w->s[w->pos];

                if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
                        return;
                w->pos++;
        }
}

static int bad(struct walk *w, const char *what)
{
        (void)buf_printf(w->why, "byte %zu: %s", w->pos, what);
        return -EINVAL;
}

/* One value at w->pos: 0, -EINVAL (why set), -ENOMEM. */
static int value(struct walk *w, json_object **ret)
{
        int r = json_parse_next(w->s, w->len, &w->pos, CLIENT_MSG_MAX_DEPTH, ret, w->why);

        return r == -EAGAIN ? -EINVAL : r;
}

/* Steps over the value at w->pos, depth containers deep in the line's
 * element being read: checked as value() checks it, nothing built. */
static int skip(struct walk *w, unsigned depth)
{
        int r = json_skip_next(w->s, w->len, &w->pos, CLIENT_MSG_MAX_DEPTH - depth, w->why);

        return r == -EAGAIN ? -EINVAL : r;
}

/* A syntax error as json_parse_next() words it. */
static int syntax(struct walk *w, const char *what)
{
        if (w->pos >= w->len)
                return bad(w, "unexpected end of JSON input");
        return bad(w, what);
}

/*
 * The next member of the object whose '{' or last value ends at w->pos
 * (*first: at the '{').  1 with *key, *klen the member's name decoded
 * and cut at a NUL (as json-c keys are) and w->pos at its value; 0 past
 * the closing '}'; -EINVAL (why set), -ENOMEM.
 */
static int next_member(struct walk *w, bool *first, struct buf *kbuf, const char **key, size_t *klen)
{
        const char *nul;
        int r;

        if (*first) {
                *first = false;
                w->pos++;
                skip_ws(w);
                if (w->pos < w->len && w->s[w->pos] == '}') {
                        w->pos++;
                        return 0;
                }
        } else {
                skip_ws(w);
                if (w->pos < w->len && w->s[w->pos] == '}') {
                        w->pos++;
                        return 0;
                }
                if (w->pos >= w->len || w->s[w->pos] != ',')
                        return syntax(w, "expected ',' or '}' in an object");
                w->pos++;
                skip_ws(w);
        }
        if (w->pos >= w->len || w->s[w->pos] != '"')
                return syntax(w, "expected a member name in an object");
        r = json_string_next(w->s, w->len, &w->pos, kbuf, key, klen, w->why);
        if (r < 0)
                return r == -EAGAIN ? -EINVAL : r;
        if ((nul = memchr(*key, '\0', *klen)))
                *klen = (size_t)(nul - *key);
        skip_ws(w);
        if (w->pos >= w->len || w->s[w->pos] != ':')
                return syntax(w, "expected ':' after a member name");
        w->pos++;
        skip_ws(w);
        return 1;
}

static bool key_is(const char *key, size_t klen, const char *want)
{
        return klen == strlen(want) && memcmp(key, want, klen) == 0;
}

/* The string member value at w->pos into *out (decoded, cut at a NUL);
 * a value of another type is stepped over and leaves out absent, as
 * json_get_str() finds no string there. */
static int id_member(struct walk *w, unsigned depth, struct id_str *out)
{
        const char *nul;
        int r;

        out->s = NULL;
        if (w->pos >= w->len || w->s[w->pos] != '"')
                return skip(w, depth);
        r = json_string_next(w->s, w->len, &w->pos, &out->dec, &out->s, &out->len, w->why);
        if (r < 0) {
                out->s = NULL;
                return r == -EAGAIN ? -EINVAL : r;
        }
        if ((nul = memchr(out->s, '\0', out->len)))
                out->len = (size_t)(nul - out->s);
        return 0;
}

/* metadata.annotations at w->pos (depth 2 members): the source's. */
static int walk_annotations(struct walk *w, struct pod_ids *ids, struct buf *kbuf)
{
        bool first = true;
        const char *k;
        size_t kl;
        int r;

        ids->src.s = NULL;
        if (w->pos >= w->len || w->s[w->pos] != '{')
                return skip(w, 2);
        while ((r = next_member(w, &first, kbuf, &k, &kl)) > 0) {
                if (key_is(k, kl, SOURCE_ANNOTATION))
                        r = id_member(w, 3, &ids->src);
                else
                        r = skip(w, 3);
                if (r < 0)
                        return r;
        }
        return r;
}

/* A pod's metadata at w->pos: uid, name, namespace, annotations. */
static int walk_metadata(struct walk *w, struct pod_ids *ids, struct buf *kbuf)
{
        bool first = true;
        const char *k;
        size_t kl;
        int r;

        /* A repeated "metadata": the last one wins, as in json-c. */
        ids->uid.s = ids->name.s = ids->ns.s = ids->src.s = NULL;
        if (w->pos >= w->len || w->s[w->pos] != '{')
                return skip(w, 1);
        while ((r = next_member(w, &first, kbuf, &k, &kl)) > 0) {
                if (key_is(k, kl, "uid"))
                        r = id_member(w, 2, &ids->uid);
                else if (key_is(k, kl, "name"))
                        r = id_member(w, 2, &ids->name);
                else if (key_is(k, kl, "namespace"))
                        r = id_member(w, 2, &ids->ns);
                else if (key_is(k, kl, "annotations"))
                        r = walk_annotations(w, ids, kbuf);
                else
                        r = skip(w, 2);
                if (r < 0)
                        return r;
        }
        return r;
}

/*
 * One element of "pods" at w->pos: checked as strictly as a json-c tree
 * of it would be built (src/util/json_parse.c), in one pass that builds
 * nothing: the members on the way to the identity are walked here, every
 * other value is stepped over by json_skip_next().  A pod's text is kept
 * as it came, so a tree of it would only be thrown away.
 */
static int walk_pod(struct walk *w, struct pod_ids *ids, struct buf *kbuf)
{
        bool first = true;
        const char *k;
        size_t kl;
        int r;

        ids->uid.s = ids->name.s = ids->ns.s = ids->src.s = NULL;
        if (w->pos >= w->len || w->s[w->pos] != '{')
                return skip(w, 0);
        while ((r = next_member(w, &first, kbuf, &k, &kl)) > 0) {
                if (key_is(k, kl, "metadata"))
                        r = walk_metadata(w, ids, kbuf);
                else
                        r = skip(w, 1);
                if (r < 0)
                        return r;
        }
        return r;
}

static int add_pod(struct client_msg *m, struct podmux_pod *p, size_t *cap)
{
        if (GROW(m->pods, *cap, m->n_pods + 1, 8) < 0)
                return -ENOMEM;
        m->pods[m->n_pods++] = p;
        return 0;
}

/* The "pods" array: each element's text and identity (ids and kbuf the
 * scratch of the walk, reused from one pod to the next).  A pod of the
 * wrong shape is -EINVAL (why set) once it is stepped over. */
static int walk_pods_with(struct walk *w, struct client_msg *m, struct pod_ids *ids, struct buf *kbuf)
{
        size_t cap = 0;
        int r;

        skip_ws(w);
        if (w->pos >= w->len || w->s[w->pos] != '[')
                return bad(w, "pods is not an array");
        w->pos++;
        skip_ws(w);
        if (w->pos < w->len && w->s[w->pos] == ']') {
                w->pos++;
                return 0;
        }
        for (;;) {
                struct podmux_pod *p = NULL;
                size_t start;

                skip_ws(w);
                start = w->pos;
                r = walk_pod(w, ids, kbuf);
                if (r < 0)
                        return r;
                r = pod_new(w->s + start, w->pos - start, ids, &p, w->why);
                if (r < 0)
                        return r;
                r = add_pod(m, p, &cap);
                if (r < 0) {
                        client_pod_unref(p);
                        return r;
                }
                skip_ws(w);
                if (w->pos >= w->len)
                        return bad(w, "the pods array is not closed");
                if (w->s[w->pos] == ']') {
                        w->pos++;
                        return 0;
                }
                if (w->s[w->pos] != ',')
                        return bad(w, "expected ',' or ']' in pods");
                w->pos++;
        }
}

static int walk_pods(struct walk *w, struct client_msg *m)
{
        struct pod_ids ids = {.uid.dec = BUF_INIT, .name.dec = BUF_INIT, .ns.dec = BUF_INIT, .src.dec = BUF_INIT};
        struct buf kbuf = BUF_INIT;
        int r = walk_pods_with(w, m, &ids, &kbuf);

        ids_free(&ids);
        buf_free(&kbuf);
        return r;
}

static int dup_str(json_object *v, char **ret)
{
        char *s = strdup(json_object_get_string(v));

        if (!s)
                return -ENOMEM;
        free(*ret);
        *ret = s;
        return 0;
}

/* The members other than pods and plugin, kept as values until the type
 * is known. */
struct member_list {
        char **keys;
        json_object **vals;
        size_t n, cap;
};

static void members_free(struct member_list *l)
{
        for (size_t i = 0; i < l->n; i++) {
                free(l->keys[i]);
                json_object_put(l->vals[i]);
        }
        free(l->keys);
        free(l->vals);
}

static int members_add(struct member_list *l, char *key, json_object *v)
{
        size_t keys_cap = l->cap;

        /* Two arrays, one capacity: l->cap moves only once both grew. */
        if (GROW(l->keys, keys_cap, l->n + 1, 8) < 0 || GROW(l->vals, l->cap, l->n + 1, 8) < 0)
                return -ENOMEM;
        l->keys[l->n] = key;
        l->vals[l->n] = v;
        l->n++;
        return 0;
}

/* The last value of key (a later duplicate wins, as in json-c). */
static json_object *members_get(const struct member_list *l, const char *key, bool *ret_have)
{
        for (size_t i = l->n; i-- > 0;) {
                if (strcmp(l->keys[i], key) == 0) {
                        if (ret_have)
                                *ret_have = true;
                        return l->vals[i];
                }
        }
        if (ret_have)
                *ret_have = false;
        return NULL;
}

static int want_str(const struct member_list *l, const char *key, bool required, char **ret,
                    struct buf *why)
{
        bool have;
        json_object *v = members_get(l, key, &have);

        if (!have) {
                if (!required)
                        return 0;
                (void)buf_printf(why, "no \"%s\"", key);
                return -EINVAL;
        }
        if (!json_object_is_type(v, json_type_string)) {
                (void)buf_printf(why, "\"%s\" is not a string", key);
                return -EINVAL;
        }
        return dup_str(v, ret);
}

static const struct {
        const char *name;
        enum client_msg_type type;
} types[] = {
        {"hello", CLIENT_MSG_HELLO},   {"pods", CLIENT_MSG_PODS},
        {"synced", CLIENT_MSG_SYNCED}, {"sources_ready", CLIENT_MSG_SOURCES_READY},
        {"plugin", CLIENT_MSG_PLUGIN}, {"error", CLIENT_MSG_ERROR},
        {"source", CLIENT_MSG_SOURCE},
};

/* The op names live here, below client.c, which uses them too: the
 * decoder must not call back into the module that includes it. */
const char *podmux_op_name(enum podmux_op op)
{
#define NAME(n) n,
        static const char *const names[] = {PROTO_OPS(NAME)};
#undef NAME

        if ((int)op < 0 || (size_t)op >= sizeof(names) / sizeof(names[0]))
                return NULL;
        return names[op];
}

static int parse_op(const char *s, enum podmux_op *ret)
{
        for (int i = PODMUX_OP_SET; i <= PODMUX_OP_RECONCILE; i++) {
                if (strcmp(s, podmux_op_name((enum podmux_op)i)) == 0) {
                        *ret = (enum podmux_op)i;
                        return 0;
                }
        }
        return -EINVAL;
}

/* A hello: tolerant of everything but the number, since a client must know
 * the protocol before it reads anything else. */
static int finish_hello(struct client_msg *m, const struct member_list *l, struct buf *why)
{
        json_object *v = members_get(l, "protocol", NULL);
        int r;

        if (!json_object_is_type(v, json_type_int)) {
                (void)buf_puts(why, "a hello without an integer protocol");
                return -EINVAL;
        }
        m->protocol = json_object_get_int64(v);
        if (m->protocol != PODMUX_CLIENT_PROTOCOL)
                return -EPROTONOSUPPORT;
        if ((r = want_str(l, "mode", false, &m->mode, why)) < 0 || (r = want_str(l, "node", false, &m->node, why)) < 0)
                return r;
        return 0;
}

/* A pods message: its op and source. */
static int finish_pods(struct client_msg *m, const struct member_list *l, struct buf *why)
{
        char *op = NULL;
        int r;

        if ((r = want_str(l, "op", true, &op, why)) < 0)
                return r;
        r = parse_op(op, &m->op);
        if (r < 0)
                (void)buf_printf(why, "unknown op \"%s\"", op);
        free(op);
        if (r < 0)
                return r;
        return want_str(l, "source", true, &m->source, why);
}

/* A synced message: whether the stream was resumed (absent: no). */
static int finish_synced(struct client_msg *m, const struct member_list *l, struct buf *why)
{
        bool have;
        json_object *v = members_get(l, "resumed", &have);

        if (have && !json_object_is_type(v, json_type_boolean)) {
                (void)buf_puts(why, "\"resumed\" is not a boolean");
                return -EINVAL;
        }
        m->resumed = have && json_object_get_boolean(v);
        return 0;
}

/* A sources_ready message: the names of the sources, copied. */
static int finish_sources_ready(struct client_msg *m, const struct member_list *l, struct buf *why)
{
        json_object *v = members_get(l, "sources", NULL);
        size_t n;
        int r;

        if (!json_object_is_type(v, json_type_array)) {
                (void)buf_puts(why, "\"sources\" is not an array");
                return -EINVAL;
        }
        n = json_object_array_length(v);
        m->sources = calloc(n ? n : 1, sizeof(*m->sources));
        if (!m->sources)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                json_object *e = json_object_array_get_idx(v, i);

                if (!json_object_is_type(e, json_type_string)) {
                        (void)buf_puts(why, "a source name is not a string");
                        return -EINVAL;
                }
                r = dup_str(e, &m->sources[i]);
                if (r < 0)
                        return r;
                m->n_sources++;
        }
        return 0;
}

/* A plugin message: the plugin (already walked), its op and error. */
static int finish_plugin(struct client_msg *m, const struct member_list *l, struct buf *why)
{
        int r;

        if (!m->plugin_json) {
                (void)buf_puts(why, "a plugin message without \"plugin\"");
                return -EINVAL;
        }
        if ((r = want_str(l, "op", true, &m->plugin_op, why)) < 0 ||
            (r = want_str(l, "error", false, &m->error, why)) < 0)
                return r;
        return 0;
}

/* An error message: its reason and message. */
static int finish_error(struct client_msg *m, const struct member_list *l, struct buf *why)
{
        int r;

        if ((r = want_str(l, "reason", true, &m->reason, why)) < 0 ||
            (r = want_str(l, "message", false, &m->message, why)) < 0)
                return r;
        return 0;
}

/* A source message: its source, state and, when there, the checkpoint's
 * time and resource_version (an absent or null "checkpoint" is none). */
static int finish_source(struct client_msg *m, const struct member_list *l, struct buf *why)
{
        json_object *cp, *v;
        int r;

        if ((r = want_str(l, "source", true, &m->source, why)) < 0 ||
            (r = want_str(l, "state", true, &m->state, why)) < 0)
                return r;
        cp = members_get(l, "checkpoint", NULL);
        if (!cp)
                return 0;
        if (!json_object_is_type(cp, json_type_object)) {
                (void)buf_puts(why, "\"checkpoint\" is not an object");
                return -EINVAL;
        }
        if (json_object_object_get_ex(cp, "time", &v) && v) {
                if (!json_object_is_type(v, json_type_string))
                        goto bad;
                if ((r = dup_str(v, &m->cp_time)) < 0)
                        return r;
        }
        if (json_object_object_get_ex(cp, "resource_version", &v) && v) {
                if (!json_object_is_type(v, json_type_string))
                        goto bad;
                if ((r = dup_str(v, &m->cp_rv)) < 0)
                        return r;
        }
        return 0;
bad:
        (void)buf_puts(why, "a member of \"checkpoint\" is not a string");
        return -EINVAL;
}

/* Members of one type, from the list (pods and plugin already walked). */
static int finish(struct client_msg *m, const struct member_list *l, struct buf *why)
{
        switch (m->type) {
        case CLIENT_MSG_HELLO:
                return finish_hello(m, l, why);
        case CLIENT_MSG_PODS:
                return finish_pods(m, l, why);
        case CLIENT_MSG_SYNCED:
                return finish_synced(m, l, why);
        case CLIENT_MSG_SOURCES_READY:
                return finish_sources_ready(m, l, why);
        case CLIENT_MSG_PLUGIN:
                return finish_plugin(m, l, why);
        case CLIENT_MSG_ERROR:
                return finish_error(m, l, why);
        case CLIENT_MSG_SOURCE:
                return finish_source(m, l, why);
        case CLIENT_MSG_OTHER:
                break;
        }
        return 0;
}

/* The "plugin" object: its text, and socket, type and name. */
static int walk_plugin(struct walk *w, struct client_msg *m)
{
        json_object *o = NULL;
        size_t start;
        const char *s;
        int r;

        skip_ws(w);
        start = w->pos;
        r = value(w, &o);
        if (r < 0)
                return r;
        if (!json_object_is_type(o, json_type_object) || !json_get_str(o, "socket", NULL)) {
                json_object_put(o);
                (void)buf_puts(w->why, "\"plugin\" is not an object with a socket");
                return -EINVAL;
        }
        free(m->plugin_json);
        m->plugin_json = strndup(w->s + start, w->pos - start);
        s = json_get_str(o, "type", NULL);
        free(m->plugin_type);
        m->plugin_type = strdup(s ? s : "");
        s = json_get_str(o, "name", NULL);
        free(m->plugin_name);
        m->plugin_name = strdup(s ? s : "");
        free(m->socket);
        m->socket = strdup(json_get_str(o, "socket", NULL));
        json_object_put(o);
        if (!m->plugin_json || !m->plugin_type || !m->plugin_name || !m->socket)
                return -ENOMEM;
        return 0;
}

/* Sets each pod's source: in a SET (the merged state) the pod's own
 * annotation, elsewhere the message's. */
static int pod_sources(struct client_msg *m)
{
        for (size_t i = 0; i < m->n_pods; i++) {
                struct podmux_pod *p = m->pods[i];
                const char *want = m->source;

                if ((m->op == PODMUX_OP_SET || strcmp(m->source, "*") == 0) && p->ann_source[0])
                        want = p->ann_source;
                if (strcmp(want, p->ann_source) == 0)
                        continue;
                p->own_source = strdup(want);
                if (!p->own_source)
                        return -ENOMEM;
                p->source = p->own_source;
        }
        return 0;
}

/* The string "type" among the members read so far, or NULL. */
static const char *type_text(const struct member_list *l)
{
        json_object *v = members_get(l, "type", NULL);

        return json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

/* The type of that name (CLIENT_MSG_OTHER for a name not known, or
 * NULL). */
static enum client_msg_type type_named(const char *t)
{
        for (size_t i = 0; t && i < sizeof(types) / sizeof(types[0]); i++)
                if (strcmp(t, types[i].name) == 0)
                        return types[i].type;
        return CLIENT_MSG_OTHER;
}

/* Drops what m holds of a "pods" (type CLIENT_MSG_PODS) or "plugin"
 * member. */
static void drop_typed(struct client_msg *m, enum client_msg_type type)
{
        if (type == CLIENT_MSG_PODS) {
                for (size_t i = 0; i < m->n_pods; i++)
                        client_pod_unref(m->pods[i]);
                free(m->pods);
                m->pods = NULL;
                m->n_pods = 0;
                return;
        }
        free(m->plugin_json);
        free(m->plugin_type);
        free(m->plugin_name);
        free(m->socket);
        m->plugin_json = m->plugin_type = m->plugin_name = m->socket = NULL;
}

/* Walks the "pods" or "plugin" value at w->pos into m, in place of what
 * m held.  0, -EINVAL (why set), -ENOMEM. */
static int walk_typed(struct walk *w, struct client_msg *m, enum client_msg_type type)
{
        drop_typed(m, type);
        return type == CLIENT_MSG_PODS ? walk_pods(w, m) : walk_plugin(w, m);
}

/* The value of a "pods" or "plugin" member, the last of its name so far:
 * walked into m if the type read before it is the one it belongs to,
 * else stepped over (its syntax checked) and left to finish_typed(),
 * which walks it only in a message of that type.  A member of another
 * message is one this library does not know, ignored as any other
 * (doc/protocol.md).  0, -EINVAL (why set), -ENOMEM. */
static int typed_member(struct walk *w, struct client_msg *m, const struct member_list *l, enum client_msg_type type)
{
        struct typed_member *t = type == CLIENT_MSG_PODS ? &w->pods : &w->plugin;
        int r;

        skip_ws(w);
        *t = (struct typed_member){.have = true, .at = w->pos};
        if (type_named(type_text(l)) == type) {
                r = walk_typed(w, m, type);
                t->walked = r == 0;
                /* A value of the wrong shape is judged once the type is
                 * final: a later "type" may still make it another's. */
                if (r != -EINVAL)
                        return r;
                drop_typed(m, type);
                buf_reset(w->why);
                w->pos = t->at;
        }
        /* As deep as the walk takes it: a pod's depth does not count the
         * pods array (walk_pod()); "plugin" is one value. */
        r = json_skip_next(w->s, w->len, &w->pos, CLIENT_MSG_MAX_DEPTH + (type == CLIENT_MSG_PODS), w->why);
        return r == -EAGAIN ? -EINVAL : r;
}

/* Once the type is known: m keeps the "pods" or "plugin" member of its
 * own type, walked now if it was only stepped over, and holds none of
 * the other.  0, -EINVAL (why set), -ENOMEM. */
static int finish_typed(struct walk *w, struct client_msg *m)
{
        static const enum client_msg_type kinds[] = {CLIENT_MSG_PODS, CLIENT_MSG_PLUGIN};

        for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
                struct typed_member *t = kinds[i] == CLIENT_MSG_PODS ? &w->pods : &w->plugin;
                int r;

                if (m->type != kinds[i]) {
                        drop_typed(m, kinds[i]);
                        continue;
                }
                if (!t->have || t->walked)
                        continue;
                w->pos = t->at;
                if ((r = walk_typed(w, m, kinds[i])) < 0)
                        return r;
        }
        return 0;
}

/* The member at w->pos (after white space: its name): "pods" and "plugin"
 * as typed_member() says (a repeated one replaces the earlier), any other
 * kept in l as a value.  0, -EINVAL (why set), -ENOMEM. */
static int walk_member(struct walk *w, struct client_msg *m, struct member_list *l)
{
        json_object *v = NULL;
        char *key;
        int r;

        skip_ws(w);
        if (w->pos >= w->len || w->s[w->pos] != '"')
                return bad(w, "expected a member name");
        r = value(w, &v);
        if (r < 0)
                return r;
        key = strdup(json_object_get_string(v));
        json_object_put(v);
        v = NULL;
        if (!key)
                return -ENOMEM;
        skip_ws(w);
        if (w->pos >= w->len || w->s[w->pos] != ':') {
                free(key);
                return bad(w, "expected ':'");
        }
        w->pos++;
        if (strcmp(key, "pods") == 0 || strcmp(key, "plugin") == 0) {
                enum client_msg_type type = strcmp(key, "pods") == 0 ? CLIENT_MSG_PODS : CLIENT_MSG_PLUGIN;

                free(key);
                return typed_member(w, m, l, type);
        }
        r = value(w, &v);
        if (r == 0)
                r = members_add(l, key, v);
        if (r < 0) {
                free(key);
                json_object_put(v);
        }
        return r;
}

/* The line: one JSON object, walked member by member, and nothing after
 * it but white space.  0, -EINVAL (why set), -ENOMEM. */
static int walk_object(struct walk *w, struct client_msg *m, struct member_list *l)
{
        int r;

        skip_ws(w);
        if (w->pos >= w->len || w->s[w->pos] != '{')
                return bad(w, "a line that is not a JSON object");
        w->pos++;
        skip_ws(w);
        if (w->pos < w->len && w->s[w->pos] == '}') {
                w->pos++;
        } else {
                for (;;) {
                        r = walk_member(w, m, l);
                        if (r < 0)
                                return r;
                        skip_ws(w);
                        if (w->pos < w->len && w->s[w->pos] == '}') {
                                w->pos++;
                                break;
                        }
                        if (w->pos >= w->len || w->s[w->pos] != ',')
                                return bad(w, "expected ',' or '}'");
                        w->pos++;
                }
        }
        skip_ws(w);
        if (w->pos < w->len)
                return bad(w, "text after the JSON object");
        return 0;
}

/* m->type from the string "type" (CLIENT_MSG_OTHER for a name not known).
 * 0 or -EINVAL (why set). */
static int read_type(struct client_msg *m, const struct member_list *l, struct buf *why)
{
        const char *t = type_text(l);

        if (!t) {
                (void)buf_puts(why, "a message without a string \"type\"");
                return -EINVAL;
        }
        m->type = type_named(t);
        return 0;
}

/* m->seq from "seq", a non-negative integer; otherwise -EINVAL with
 * missing as the reason. */
static int read_seq(struct client_msg *m, const struct member_list *l, const char *missing, struct buf *why)
{
        json_object *s = members_get(l, "seq", NULL);

        if (!json_object_is_type(s, json_type_int) || json_object_get_int64(s) < 0) {
                (void)buf_puts(why, missing);
                return -EINVAL;
        }
        m->seq = json_object_get_uint64(s);
        return 0;
}

int client_msg_parse(const char *line, size_t len, struct client_msg *m, struct buf *why)
{
        struct walk w = {.s = line, .len = len, .why = why};
        struct member_list l = {0};
        int r;

        memset(m, 0, sizeof(*m));
        r = walk_object(&w, m, &l);
        if (r < 0)
                goto done;
        r = read_type(m, &l, why);
        if (r < 0)
                goto done;
        r = finish_typed(&w, m);
        if (r < 0)
                goto done;
        /* A hello's seq is checked after its protocol: a peer of another
         * protocol is told that first, whatever else its hello lacks. */
        if (m->type != CLIENT_MSG_HELLO) {
                r = read_seq(m, &l, "a message without a non-negative integer \"seq\"", why);
                if (r < 0)
                        goto done;
        }
        r = finish(m, &l, why);
        if (r < 0)
                goto done;
        if (m->type == CLIENT_MSG_HELLO) {
                r = read_seq(m, &l, "a hello without a non-negative integer \"seq\"", why);
                if (r < 0)
                        goto done;
        }
        if (m->type == CLIENT_MSG_PODS)
                r = pod_sources(m);
done:
        members_free(&l);
        if (r < 0 && r != -EPROTONOSUPPORT)
                client_msg_clear(m);
        return r;
}

void client_msg_clear(struct client_msg *m)
{
        int64_t protocol = m->protocol;

        for (size_t i = 0; i < m->n_pods; i++)
                client_pod_unref(m->pods[i]);
        free(m->pods);
        for (size_t i = 0; i < m->n_sources; i++)
                free(m->sources[i]);
        free(m->sources);
        free(m->mode);
        free(m->node);
        free(m->source);
        free(m->plugin_op);
        free(m->plugin_json);
        free(m->socket);
        free(m->plugin_type);
        free(m->plugin_name);
        free(m->error);
        free(m->reason);
        free(m->message);
        free(m->state);
        free(m->cp_time);
        free(m->cp_rv);
        memset(m, 0, sizeof(*m));
        m->protocol = protocol;
}
