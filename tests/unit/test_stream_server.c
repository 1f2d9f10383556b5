/*
 * test_stream_server — the update stream on a real loop with real unix
 * socket clients in the same process.  Clients are non-blocking and are
 * read between loop iterations; every wait is "drive the loop until a
 * condition holds", bounded by an iteration count, never a sleep.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <json-c/json.h>

#include "failalloc.h"
#include "util/loop.h"
#include "core/pod.h"
#include "stream/stream_server.h"
#include "unit.h"

#define MAX_CLIENTS 80
#define DRIVE_MAX_ITER 4000
#define DRIVE_STEP_USEC 5000

/* ---- a tiny merger: the records state_fn returns ----------------------- */

struct mock {
        struct pod_update *recs[8];
        size_t n;
        unsigned calls;
        int fail;
};

static int mock_state(void *data, struct pod_update ***ret_updates,
                      size_t *ret_n)
{
        struct mock *m = data;
        struct pod_update **arr;
        size_t i, j;

        m->calls++;
        if (m->fail)
                return m->fail;
        arr = calloc(m->n ? m->n : 1, sizeof(*arr));
        ck_assert_ptr_nonnull(arr);
        for (i = 0; i < m->n; i++) {
                arr[i] = pod_update_new(m->recs[i]->op, m->recs[i]->source);
                ck_assert_ptr_nonnull(arr[i]);
                for (j = 0; j < m->recs[i]->n_pods; j++)
                        ck_assert_int_eq(pod_update_add(arr[i], m->recs[i]->pods[j]), 0);
        }
        *ret_updates = arr;
        *ret_n = m->n;
        return 0;
}

static void mock_clear(struct mock *m)
{
        size_t i;

        for (i = 0; i < m->n; i++)
                pod_update_free(m->recs[i]);
        m->n = 0;
}

/* ---- pods and records -------------------------------------------------- */

/* A pod named name (uid "uid-<name>") with pad bytes of annotation. */
static struct pod *make_pod(const char *name, size_t pad)
{
        struct buf t = BUF_INIT, err = BUF_INIT;
        struct pod *p = NULL;

        ck_assert_int_eq(buf_printf(&t, "{\"metadata\":{\"name\":\"%s\","
                                    "\"namespace\":\"default\",\"uid\":\"uid-%s\","
                                    "\"annotations\":{\"pad\":\"", name, name), 0);
        ck_assert_int_eq(buf_reserve(&t, pad), 0);
        memset(t.data + t.len, 'x', pad);
        t.len += pad;
        t.data[t.len] = '\0';
        ck_assert_int_eq(buf_puts(&t, "\"}},\"status\":{\"phase\":\"Running\"}}"), 0);
        ck_assert_msg(pod_from_text(t.data, t.len, &p, &err) == 0, "pod: %s",
                      err.data);
        buf_free(&t);
        buf_free(&err);
        return p;
}

/* A record op/source with one pod per name (NULL-terminated). */
static struct pod_update *make_update(enum pod_op op, const char *source,
                                      size_t pad, const char *const *names)
{
        struct pod_update *u = pod_update_new(op, source);

        ck_assert_ptr_nonnull(u);
        for (; names && *names; names++) {
                struct pod *p = make_pod(*names, pad);

                ck_assert_int_eq(pod_update_add(u, p), 0);
                pod_unref(p);
        }
        return u;
}

/* ---- clients ------------------------------------------------------------ */

struct line {
        char *text;      /* without the newline */
        json_object *obj;
};

struct client {
        int fd;
        struct buf in;
        struct line *lines;
        size_t n_lines, cap_lines;
        bool eof;
        size_t bytes; /* total received */
};

struct env {
        char dir[64];
        char path[160];
        struct loop *loop;
        struct stream_server *srv;
        struct mock mock;
        struct client *clients[MAX_CLIENTS];
        size_t n_clients;
        uint64_t wall_before;
};

static void client_poll(struct client *c)
{
        char tmp[65536];
        char *nl;

        if (c->eof || c->fd < 0)
                return;
        for (;;) {
                ssize_t n = recv(c->fd, tmp, sizeof(tmp), 0);

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN || errno == EWOULDBLOCK)
                                break;
                        c->eof = true; /* reset by the server */
                        break;
                }
                if (n == 0) {
                        c->eof = true;
                        break;
                }
                c->bytes += (size_t)n;
                ck_assert_int_eq(buf_append(&c->in, tmp, (size_t)n), 0);
        }
        while (c->in.len > 0 && (nl = memchr(c->in.data, '\n', c->in.len))) {
                size_t len = (size_t)(nl - c->in.data);
                struct line *l;

                if (c->n_lines == c->cap_lines) {
                        size_t cap = c->cap_lines ? c->cap_lines * 2 : 16;
                        struct line *nv = realloc(c->lines, cap * sizeof(*nv));

                        ck_assert_ptr_nonnull(nv);
                        c->lines = nv;
                        c->cap_lines = cap;
                }
                l = &c->lines[c->n_lines++];
                l->text = strndup(c->in.data, len);
                ck_assert_ptr_nonnull(l->text);
                l->obj = json_tokener_parse(l->text);
                ck_assert_msg(l->obj != NULL, "server sent a line that is not JSON: %.200s",
                              l->text);
                buf_consume(&c->in, len + 1);
        }
}

static void env_poll(struct env *e)
{
        size_t i;

        for (i = 0; i < e->n_clients; i++)
                client_poll(e->clients[i]);
}

#define DRIVE_UNTIL(e, cond)                                                   \
        do {                                                                   \
                int i_;                                                        \
                for (i_ = 0; i_ < DRIVE_MAX_ITER && !(cond); i_++) {           \
                        ck_assert_int_ge(loop_run_once((e)->loop, DRIVE_STEP_USEC), 0); \
                        env_poll(e);                                           \
                }                                                              \
                ck_assert_msg((cond), "gave up waiting for: %s", #cond);       \
        } while (0)

static struct client *client_connect(struct env *e)
{
        struct client *c = calloc(1, sizeof(*c));
        struct sockaddr_un sa;

        ck_assert_ptr_nonnull(c);
        buf_init(&c->in);
        ck_assert_uint_lt(e->n_clients, MAX_CLIENTS);
        memset(&sa, 0, sizeof(sa));
        sa.sun_family = AF_UNIX;
        memcpy(sa.sun_path, e->path, strlen(e->path) + 1);
        c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(c->fd, 0);
        ck_assert_msg(connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0,
                      "connect: errno %d", errno);
        ck_assert_int_eq(fcntl(c->fd, F_SETFL, O_NONBLOCK), 0);
        e->clients[e->n_clients++] = c;
        return c;
}

/* Sends all of s, driving the loop while the socket is full. */
static void client_send(struct env *e, struct client *c, const char *s, size_t n)
{
        int iter = 0;

        while (n > 0) {
                ssize_t w = send(c->fd, s, n, MSG_NOSIGNAL);

                if (w < 0) {
                        ck_assert_msg(errno == EAGAIN || errno == EINTR,
                                      "send: errno %d", errno);
                        ck_assert_int_lt(iter++, DRIVE_MAX_ITER);
                        ck_assert_int_ge(loop_run_once(e->loop, DRIVE_STEP_USEC), 0);
                        env_poll(e);
                        continue;
                }
                s += w;
                n -= (size_t)w;
        }
}

static void client_puts(struct env *e, struct client *c, const char *s)
{
        client_send(e, c, s, strlen(s));
}

static void client_close(struct client *c)
{
        if (c->fd >= 0)
                close(c->fd);
        c->fd = -1;
        c->eof = true;
}

static void client_free(struct client *c)
{
        size_t i;

        if (!c)
                return;
        client_close(c);
        for (i = 0; i < c->n_lines; i++) {
                free(c->lines[i].text);
                json_object_put(c->lines[i].obj);
        }
        free(c->lines);
        buf_free(&c->in);
        free(c);
}

static json_object *member(json_object *o, const char *key)
{
        json_object *v = NULL;

        if (!json_object_object_get_ex(o, key, &v))
                return NULL;
        return v;
}

static const char *line_type(const struct client *c, size_t i)
{
        json_object *v;

        ck_assert_uint_lt(i, c->n_lines);
        v = member(c->lines[i].obj, "type");
        return v ? json_object_get_string(v) : "";
}

static uint64_t line_seq(const struct client *c, size_t i)
{
        json_object *v;

        ck_assert_uint_lt(i, c->n_lines);
        v = member(c->lines[i].obj, "seq");
        ck_assert_msg(v && json_object_is_type(v, json_type_int),
                      "line %zu has no integer seq: %s", i, c->lines[i].text);
        return json_object_get_uint64(v);
}

static const char *line_str(const struct client *c, size_t i, const char *key)
{
        json_object *v = member(c->lines[i].obj, key);

        return v ? json_object_get_string(v) : "";
}

static size_t count_type(const struct client *c, const char *type)
{
        size_t i, n = 0;

        for (i = 0; i < c->n_lines; i++)
                if (strcmp(line_type(c, i), type) == 0)
                        n++;
        return n;
}

/* Index of the first line of type at or after from, or n_lines. */
static size_t find_type(const struct client *c, const char *type, size_t from)
{
        for (; from < c->n_lines; from++)
                if (strcmp(line_type(c, from), type) == 0)
                        break;
        return from;
}

static bool has_type(const struct client *c, const char *type)
{
        return find_type(c, type, 0) < c->n_lines;
}

/* Name of pod j of a pods line. */
static const char *pod_name_at(const struct client *c, size_t i, size_t j)
{
        json_object *pods = member(c->lines[i].obj, "pods"), *p, *md;

        ck_assert_ptr_nonnull(pods);
        ck_assert_uint_lt(j, json_object_array_length(pods));
        p = json_object_array_get_idx(pods, j);
        md = member(p, "metadata");
        return json_object_get_string(member(md, "name"));
}

static size_t pods_len(const struct client *c, size_t i)
{
        json_object *pods = member(c->lines[i].obj, "pods");

        ck_assert_ptr_nonnull(pods);
        return json_object_array_length(pods);
}

/* ---- the environment ---------------------------------------------------- */

static void env_init(struct env *e)
{
        memset(e, 0, sizeof(*e));
        memcpy(e->dir, "/tmp/podmux-stream-XXXXXX", sizeof("/tmp/podmux-stream-XXXXXX"));
        ck_assert_ptr_nonnull(mkdtemp(e->dir));
        (void)snprintf(e->path, sizeof(e->path), "%s/podmux.sock", e->dir);
        ck_assert_int_eq(loop_new(&e->loop), 0);
}

static void env_config(struct env *e, struct stream_server_config *cfg)
{
        memset(cfg, 0, sizeof(*cfg));
        cfg->socket_path = e->path;
        cfg->mode_name = "incremental";
        cfg->node_name = "n1";
        cfg->state_fn = mock_state;
        cfg->state_data = &e->mock;
}

static void env_serve_cfg(struct env *e, const struct stream_server_config *cfg)
{
        struct buf err = BUF_INIT;
        int r;

        e->wall_before = wall_usec();
        r = stream_server_new(e->loop, cfg, &e->srv, &err);
        ck_assert_msg(r == 0, "stream_server_new: %d %s", r, err.data);
        buf_free(&err);
}

static void env_serve(struct env *e, size_t history, size_t max_backlog,
                      size_t max_consumers)
{
        struct stream_server_config cfg;

        env_config(e, &cfg);
        cfg.history = history;
        cfg.max_backlog = max_backlog;
        cfg.max_consumers = max_consumers;
        env_serve_cfg(e, &cfg);
}

static void env_done(struct env *e)
{
        size_t i;

        stream_server_free(e->srv);
        e->srv = NULL;
        for (i = 0; i < e->n_clients; i++)
                client_free(e->clients[i]);
        mock_clear(&e->mock);
        /* Reap handles freed outside a callback. */
        (void)loop_run_once(e->loop, 0);
        loop_free(e->loop);
        (void)unlink(e->path);
        ck_assert_int_eq(rmdir(e->dir), 0);
}

/* A client that sent line (or nothing when NULL) and reached synced. */
static struct client *client_synced(struct env *e, const char *line)
{
        struct client *c = client_connect(e);

        if (line)
                client_puts(e, c, line);
        DRIVE_UNTIL(e, has_type(c, "synced"));
        return c;
}

/* Broadcasts one record with one pod; returns its seq: the next number
 * (an error to a consumer dropped on the way takes the one after it). */
static uint64_t bcast(struct env *e, enum pod_op op, const char *source,
                      const char *name, size_t pad)
{
        const char *names[] = {name, NULL};
        struct pod_update *u = make_update(op, source, pad, names);
        uint64_t seq = stream_server_last_seq(e->srv) + 1;

        ck_assert_int_eq(stream_server_broadcast(e->srv, u), 0);
        pod_update_free(u);
        return seq;
}

static void assert_seq_increasing(const struct client *c, size_t from)
{
        size_t i;

        for (i = from + 1; i < c->n_lines; i++)
                ck_assert_msg(line_seq(c, i) > line_seq(c, i - 1),
                              "line %zu seq %" PRIu64 " after %" PRIu64, i,
                              line_seq(c, i), line_seq(c, i - 1));
}

/* ---- tests --------------------------------------------------------------- */

/* The "resumed" member of the synced line at index i. */
static bool synced_resumed(struct client *c, size_t i)
{
        json_object *v = NULL;

        ck_assert_str_eq(line_type(c, i), "synced");
        ck_assert(json_object_object_get_ex(c->lines[i].obj, "resumed", &v));
        ck_assert(json_object_is_type(v, json_type_boolean));
        return json_object_get_boolean(v);
}

START_TEST(test_hello_fields)
{
        struct env e;
        struct client *c;
        json_object *hello;
        char want[256];

        env_init(&e);
        env_serve(&e, 0, 0, 0);
        c = client_connect(&e);
        /* hello comes before the client says anything. */
        DRIVE_UNTIL(&e, c->n_lines >= 1);
        ck_assert_str_eq(line_type(c, 0), "hello");
        hello = c->lines[0].obj;
        ck_assert_int_eq(json_object_object_length(hello), 5);
        ck_assert_int_eq(json_object_get_int(member(hello, "protocol")), 1);
        ck_assert_str_eq(line_str(c, 0, "mode"), "incremental");
        ck_assert_str_eq(line_str(c, 0, "node"), "n1");
        ck_assert_uint_gt(line_seq(c, 0), e.wall_before);
        ck_assert_uint_le(line_seq(c, 0), stream_server_last_seq(e.srv));
        (void)snprintf(want, sizeof(want), "{\"type\":\"hello\",\"protocol\":1,"
                       "\"mode\":\"incremental\",\"node\":\"n1\",\"seq\":%" PRIu64 "}",
                       line_seq(c, 0));
        ck_assert_str_eq(c->lines[0].text, want);
        /* Nothing else until the client speaks or the grace ends. */
        ck_assert_uint_eq(c->n_lines, 1);
        client_puts(&e, c, "{}\n");
        DRIVE_UNTIL(&e, has_type(c, "synced"));
        ck_assert_uint_eq(c->n_lines, 2);
        ck_assert_int_eq(json_object_object_length(c->lines[1].obj), 3);
        {
                json_object *v = NULL;

                /* Not a replay: what came before synced was the state. */
                ck_assert(json_object_object_get_ex(c->lines[1].obj, "resumed", &v));
                ck_assert(json_object_is_type(v, json_type_boolean) && !json_object_get_boolean(v));
        }
        ck_assert_uint_gt(line_seq(c, 1), line_seq(c, 0));
        ck_assert_uint_eq(line_seq(c, 1), stream_server_last_seq(e.srv));
        ck_assert_uint_eq(stream_server_consumers(e.srv), 1);
        env_done(&e);
}
END_TEST

START_TEST(test_seq_strictly_increasing)
{
        const char *const ready[] = {"api", "file"};
        struct env e;
        struct client *a, *b, *c;
        uint64_t last = 0;
        size_t i;

        env_init(&e);
        env_serve(&e, 0, 0, 0);
        a = client_synced(&e, "{}\n");
        bcast(&e, POD_OP_ADD, "file", "p1", 0);
        b = client_synced(&e, NULL); /* full state after the grace */
        bcast(&e, POD_OP_UPDATE, "file", "p1", 0);
        ck_assert_int_eq(stream_server_sources_ready(e.srv, ready, 2), 0);
        c = client_synced(&e, "{}\n");
        for (i = 0; i < 5; i++)
                last = bcast(&e, POD_OP_ADD, "api", "q", 0);
        DRIVE_UNTIL(&e, count_type(a, "pods") == 7 && count_type(b, "pods") == 6 &&
                        count_type(c, "pods") == 5);
        assert_seq_increasing(a, 0);
        assert_seq_increasing(b, 0);
        assert_seq_increasing(c, 0);
        ck_assert_uint_eq(line_seq(a, a->n_lines - 1), last);
        ck_assert_uint_eq(line_seq(c, c->n_lines - 1), last);
        ck_assert_uint_eq(stream_server_last_seq(e.srv), last);
        env_done(&e);
}
END_TEST

START_TEST(test_initial_state_then_synced)
{
        const char *const ab[] = {"a", "b", NULL};
        struct env e;
        struct client *c;

        env_init(&e);
        e.mock.recs[e.mock.n++] = make_update(POD_OP_ADD, "file", 0, ab);
        e.mock.recs[e.mock.n++] = make_update(POD_OP_ADD, "api", 0, NULL);
        env_serve(&e, 0, 0, 0);
        c = client_synced(&e, "{}\n");
        ck_assert_uint_eq(e.mock.calls, 1);
        ck_assert_uint_eq(c->n_lines, 4);
        ck_assert_str_eq(line_type(c, 0), "hello");
        ck_assert_str_eq(line_type(c, 1), "pods");
        ck_assert_str_eq(line_str(c, 1, "op"), "ADD");
        ck_assert_str_eq(line_str(c, 1, "source"), "file");
        ck_assert_uint_eq(pods_len(c, 1), 2);
        ck_assert_str_eq(pod_name_at(c, 1, 0), "a");
        ck_assert_str_eq(pod_name_at(c, 1, 1), "b");
        ck_assert_str_eq(line_type(c, 2), "pods");
        ck_assert_str_eq(line_str(c, 2, "source"), "api");
        ck_assert_uint_eq(pods_len(c, 2), 0);
        ck_assert_str_eq(line_type(c, 3), "synced");
        assert_seq_increasing(c, 0);
        /* Key order of a pods message, as documented. */
        ck_assert_msg(strncmp(c->lines[2].text, "{\"type\":\"pods\",\"seq\":", 20) == 0,
                      "%s", c->lines[2].text);
        ck_assert_msg(strstr(c->lines[2].text, ",\"op\":\"ADD\",\"source\":\"api\","
                             "\"pods\":[]}") != NULL, "%s", c->lines[2].text);
        env_done(&e);
}
END_TEST

START_TEST(test_resume_within_history)
{
        struct env e;
        struct client *a, *b, *c;
        char line[96];
        uint64_t s, b1;
        size_t i, from;

        env_init(&e);
        env_serve(&e, 0, 0, 0);
        a = client_synced(&e, "{}\n");
        s = line_seq(a, a->n_lines - 1);
        b1 = bcast(&e, POD_OP_ADD, "file", "b1", 0);
        bcast(&e, POD_OP_UPDATE, "file", "b1", 0);
        bcast(&e, POD_OP_DELETE, "file", "b1", 0);
        DRIVE_UNTIL(&e, count_type(a, "pods") == 3);

        (void)snprintf(line, sizeof(line), "{\"resume_after\":%" PRIu64 "}\n", s);
        b = client_synced(&e, line);
        ck_assert_uint_eq(e.mock.calls, 1); /* a's only: b was replayed */
        ck_assert_uint_eq(b->n_lines, 5);
        ck_assert_str_eq(line_type(b, 0), "hello");
        from = find_type(a, "pods", 0);
        for (i = 0; i < 3; i++)
                ck_assert_str_eq(b->lines[1 + i].text, a->lines[from + i].text);
        ck_assert_str_eq(line_type(b, 4), "synced");
        ck_assert_uint_gt(line_seq(b, 4), line_seq(b, 0));
        ck_assert(synced_resumed(b, 4));

        /* From the middle: only what came after. */
        (void)snprintf(line, sizeof(line), "{\"resume_after\":%" PRIu64 "}\n", b1);
        c = client_synced(&e, line);
        ck_assert_uint_eq(c->n_lines, 4);
        ck_assert_str_eq(c->lines[1].text, a->lines[from + 1].text);
        ck_assert_str_eq(c->lines[2].text, a->lines[from + 2].text);
        ck_assert_str_eq(line_type(c, 3), "synced");

        /* Live after the replay. */
        bcast(&e, POD_OP_ADD, "file", "b2", 0);
        DRIVE_UNTIL(&e, count_type(b, "pods") == 4 && count_type(c, "pods") == 3);
        ck_assert_str_eq(b->lines[b->n_lines - 1].text, c->lines[c->n_lines - 1].text);
        ck_assert_uint_eq(e.mock.calls, 1);
        env_done(&e);
}
END_TEST

START_TEST(test_resume_too_old)
{
        const char *const names[] = {"now", NULL};
        struct env e;
        struct client *a, *b, *c;
        char line[96];
        uint64_t s, seqs[4];
        size_t i;

        env_init(&e);
        env_serve(&e, 2, 0, 0);
        a = client_synced(&e, "{}\n");
        s = line_seq(a, a->n_lines - 1);
        for (i = 0; i < 4; i++)
                seqs[i] = bcast(&e, POD_OP_ADD, "file", "x", 0);
        e.mock.recs[e.mock.n++] = make_update(POD_OP_SET, "*", 0, names);

        /* History holds the last two; seqs[1] was the newest evicted: a
         * consumer that saw it misses nothing. */
        (void)snprintf(line, sizeof(line), "{\"resume_after\":%" PRIu64 "}\n", seqs[1]);
        b = client_synced(&e, line);
        ck_assert_uint_eq(e.mock.calls, 1);
        ck_assert_uint_eq(b->n_lines, 4);
        ck_assert_uint_eq(line_seq(b, 1), seqs[2]);
        ck_assert_uint_eq(line_seq(b, 2), seqs[3]);

        /* One before it: seqs[1] would be missing, so the full state. */
        (void)snprintf(line, sizeof(line), "{\"resume_after\":%" PRIu64 "}\n", seqs[1] - 1);
        c = client_synced(&e, line);
        ck_assert_uint_eq(e.mock.calls, 2);
        ck_assert_uint_eq(c->n_lines, 3);
        ck_assert_str_eq(line_str(c, 1, "op"), "SET");
        ck_assert_str_eq(pod_name_at(c, 1, 0), "now");
        ck_assert_uint_gt(line_seq(c, 1), seqs[3]);
        ck_assert_uint_lt(s, seqs[0]);
        env_done(&e);
}
END_TEST

#define BIG_PAD (32u * 1024u)
#define HISTORY_BYTES (256u * 1024u)

START_TEST(test_history_byte_bound)
{
        struct env e;
        struct stream_server_config cfg;
        struct client *b, *c;
        char line[96];
        uint64_t seqs[40];
        size_t i, fit, n;

        env_init(&e);
        env_config(&e, &cfg);
        cfg.history_bytes = HISTORY_BYTES;
        env_serve_cfg(&e, &cfg);
        /* Each message is a little over BIG_PAD bytes: fit of them fit in
         * HISTORY_BYTES, the rest push the oldest out. */
        fit = HISTORY_BYTES / (BIG_PAD + 1024);
        n = fit + 2;
        ck_assert_uint_le(n, 40);
        for (i = 0; i < n; i++)
                seqs[i] = bcast(&e, POD_OP_UPDATE, "file", "big", BIG_PAD);

        /* seqs[0] and seqs[1] are gone: after seqs[0] needs the state. */
        (void)snprintf(line, sizeof(line), "{\"resume_after\":%" PRIu64 "}\n", seqs[0]);
        b = client_synced(&e, line);
        ck_assert_uint_eq(e.mock.calls, 1);
        ck_assert_uint_eq(b->n_lines, 2);

        /* After seqs[1] is a replay starting at seqs[2]. */
        (void)snprintf(line, sizeof(line), "{\"resume_after\":%" PRIu64 "}\n", seqs[1]);
        c = client_connect(&e);
        client_puts(&e, c, line);
        DRIVE_UNTIL(&e, c->n_lines >= 2);
        ck_assert_uint_eq(line_seq(c, 1), seqs[2]);
        ck_assert_uint_eq(e.mock.calls, 1);
        client_close(c);
        env_done(&e);
}
END_TEST

/* The history keeps a pods message as its record: a reference to each
 * (immutable) pod, not the text, so the same pods in many snapshots cost
 * one pod each.  A replay renders each record again, byte for byte as it
 * was sent live, though the merger's records are long gone; leaving the
 * history (count bound here) drops the references. */
START_TEST(test_history_keeps_pods_by_reference)
{
        struct env e;
        struct client *a, *b;
        struct pod *shared = make_pod("shared", 4096);
        const char *names[] = {"x", "y", NULL};
        char line[96];
        uint64_t first = 0;
        size_t i, from;

        env_init(&e);
        env_serve(&e, 4, 0, 0);
        a = client_synced(&e, "{}\n");
        for (i = 0; i < 6; i++) {
                struct pod_update *u = make_update(POD_OP_SET, "*", 1000 + i, names);
                uint64_t seq = stream_server_last_seq(e.srv) + 1;

                ck_assert_int_eq(pod_update_add(u, shared), 0);
                ck_assert_int_eq(stream_server_broadcast(e.srv, u), 0);
                pod_update_free(u);
                if (i == 2)
                        first = seq;
                /* Ours, plus one per message the history holds. */
                ck_assert_uint_eq(shared->refs, 1 + (i + 1 < 4 ? i + 1 : 4));
        }
        DRIVE_UNTIL(&e, count_type(a, "pods") == 6);

        /* After the third: the last three, as a saw them. */
        (void)snprintf(line, sizeof(line), "{\"resume_after\":%" PRIu64 "}\n", first);
        b = client_synced(&e, line);
        ck_assert(synced_resumed(b, b->n_lines - 1));
        ck_assert_uint_eq(count_type(b, "pods"), 3);
        from = find_type(a, "pods", 0) + 3;
        for (i = 0; i < 3; i++)
                ck_assert_str_eq(b->lines[1 + i].text, a->lines[from + i].text);
        env_done(&e);
        /* The history let go of every reference. */
        ck_assert_uint_eq(shared->refs, 1);
        pod_unref(shared);
}
END_TEST

/* Every allocation of a broadcast failed in turn: either the broadcast
 * fails (no number taken, the live consumer cut: it will resume) or it is
 * sent, and a consumer resuming just before it is replayed exactly the
 * line the live one got, whether the history could copy the record or
 * fell back to keeping the text. */
START_TEST(test_broadcast_out_of_memory_sweep)
{
        struct env e;
        const char *names[] = {"p", "q", NULL};
        long n, hits = 0;

        if (!failalloc_enabled())
                return;
        env_init(&e);
        env_serve(&e, 0, 0, 0);
        for (n = 1;; n++) {
                struct client *a = client_synced(&e, "{}\n"), *b;
                struct pod_update *u = make_update(POD_OP_SET, "*", 100, names);
                uint64_t before = stream_server_last_seq(e.srv);
                char line[96];
                bool failed;
                int r;

                failalloc_arm(n);
                r = stream_server_broadcast(e.srv, u);
                failed = failalloc_failed();
                failalloc_arm(0);
                pod_update_free(u);
                if (r < 0) {
                        ck_assert_int_eq(r, -ENOMEM);
                        DRIVE_UNTIL(&e, has_type(a, "error"));
                        ck_assert_str_eq(line_str(a, a->n_lines - 1, "reason"), "ResourceExhausted");
                        ck_assert_uint_eq(count_type(a, "pods"), 0);
                } else {
                        DRIVE_UNTIL(&e, count_type(a, "pods") == 1);
                        (void)snprintf(line, sizeof(line), "{\"resume_after\":%" PRIu64 "}\n", before);
                        b = client_synced(&e, line);
                        ck_assert(synced_resumed(b, b->n_lines - 1));
                        ck_assert_uint_eq(count_type(b, "pods"), 1);
                        ck_assert_str_eq(b->lines[1].text, a->lines[find_type(a, "pods", 0)].text);
                        client_close(b);
                }
                client_close(a);
                hits += failed;
                if (!failed)
                        break;
        }
        ck_assert_int_gt(hits, 2);
        env_done(&e);
}
END_TEST

/* The state and backlog the server reports for the consumer other than
 * the status client itself whose state is not "live" (or NULL). */
static const char *replaying_backlog(struct env *e, size_t *ret_backlog)
{
        static char state[32];
        struct client *s = client_connect(e);
        json_object *cs, *c, *v;
        const char *found = NULL;

        client_send(e, s, "{\"request\":\"status\"}\n", 21);
        /* Only s is read. */
        for (int i = 0; i < DRIVE_MAX_ITER && !has_type(s, "status"); i++) {
                ck_assert_int_ge(loop_run_once(e->loop, DRIVE_STEP_USEC), 0);
                client_poll(s);
        }
        ck_assert(has_type(s, "status"));
        cs = member(s->lines[find_type(s, "status", 0)].obj, "consumers");
        for (size_t i = 0; cs && i < json_object_array_length(cs); i++) {
                c = json_object_array_get_idx(cs, i);
                if (!json_object_object_get_ex(c, "state", &v) ||
                    strcmp(json_object_get_string(v), "live") == 0)
                        continue;
                (void)snprintf(state, sizeof(state), "%s", json_object_get_string(v));
                found = state;
                *ret_backlog = json_object_get_int64(member(c, "backlog"));
        }
        client_close(s);
        return found;
}

/* A long replay is fed as the consumer reads, not queued at once: while it
 * has not read, the server holds at most about REPLAY_BUDGET for it (256
 * KiB; the replay is 1.5 MiB).  Broadcasts during the replay reach it from
 * the history, in order, and synced comes after the newest. */
START_TEST(test_replay_is_fed_as_the_consumer_reads)
{
        struct env e;
        struct client *a, *b;
        char line[96];
        uint64_t s;
        size_t backlog = 0, i, from;
        const char *state;

        env_init(&e);
        env_serve(&e, 0, 0, 0);
        a = client_synced(&e, "{}\n");
        s = line_seq(a, a->n_lines - 1);
        for (i = 0; i < 48; i++)
                bcast(&e, POD_OP_UPDATE, "file", "big", 32 * 1024);
        DRIVE_UNTIL(&e, count_type(a, "pods") == 48);

        b = client_connect(&e);
        (void)snprintf(line, sizeof(line), "{\"resume_after\":%" PRIu64 "}\n", s);
        client_send(&e, b, line, strlen(line));
        /* b is not read: run the loop only. */
        for (i = 0; i < 20; i++)
                (void)loop_run_once(e.loop, 1);
        state = replaying_backlog(&e, &backlog);
        ck_assert_ptr_nonnull(state);
        ck_assert_str_eq(state, "replaying");
        ck_assert_uint_le(backlog, 256 * 1024 + 40 * 1024);
        for (i = 0; i < 3; i++)
                bcast(&e, POD_OP_UPDATE, "file", "late", 100);

        DRIVE_UNTIL(&e, has_type(b, "synced") && count_type(a, "pods") == 51);
        ck_assert_uint_eq(count_type(b, "pods"), 51);
        from = find_type(a, "pods", 0);
        for (i = 0; i < 51; i++)
                ck_assert_str_eq(b->lines[1 + i].text, a->lines[from + i].text);
        ck_assert_str_eq(line_type(b, 52), "synced");
        ck_assert(synced_resumed(b, 52));
        assert_seq_increasing(b, 1);
        bcast(&e, POD_OP_ADD, "file", "after", 0);
        DRIVE_UNTIL(&e, count_type(b, "pods") == 52);
        ck_assert_uint_eq(e.mock.calls, 1); /* a's only */
        env_done(&e);
}
END_TEST

/* A replaying consumer that stops reading while the history moves on
 * past its next message is cut (SlowConsumer), and resuming from the last
 * message it read gets the full state. */
START_TEST(test_replay_falls_behind_the_history)
{
        struct env e;
        struct client *b, *c;
        char line[96];
        uint64_t s, last;
        size_t i;

        env_init(&e);
        env_serve(&e, 32, 0, 0);
        b = client_synced(&e, "{}\n");
        s = line_seq(b, b->n_lines - 1);
        for (i = 0; i < 24; i++)
                bcast(&e, POD_OP_UPDATE, "file", "big", 64 * 1024);
        client_close(b);

        c = client_connect(&e);
        (void)snprintf(line, sizeof(line), "{\"resume_after\":%" PRIu64 "}\n", s);
        client_send(&e, c, line, strlen(line));
        for (i = 0; i < 20; i++)
                (void)loop_run_once(e.loop, 1);
        /* 32 more push every entry it has not been given out of the
         * history. */
        for (i = 0; i < 32; i++)
                bcast(&e, POD_OP_UPDATE, "file", "next", 100);
        DRIVE_UNTIL(&e, c->eof);
        ck_assert(!has_type(c, "synced"));
        ck_assert_str_eq(line_type(c, c->n_lines - 1), "error");
        ck_assert_str_eq(line_str(c, c->n_lines - 1, "reason"), "SlowConsumer");
        last = line_seq(c, find_type(c, "error", 0) - 1);
        (void)snprintf(line, sizeof(line), "{\"resume_after\":%" PRIu64 "}\n", last);
        c = client_synced(&e, line);
        ck_assert(!synced_resumed(c, c->n_lines - 1));
        ck_assert_uint_eq(e.mock.calls, 2);
        env_done(&e);
}
END_TEST

START_TEST(test_resume_from_the_future_or_another_run)
{
        struct env e;
        struct client *a, *b, *c, *d;
        char line[96];
        uint64_t last;

        env_init(&e);
        env_serve(&e, 0, 0, 0);
        a = client_synced(&e, "{}\n");
        last = bcast(&e, POD_OP_ADD, "file", "x", 0);
        DRIVE_UNTIL(&e, count_type(a, "pods") == 1);

        (void)snprintf(line, sizeof(line), "{\"resume_after\":%" PRIu64 "}\n", last + 1000);
        b = client_synced(&e, line);
        ck_assert_uint_eq(e.mock.calls, 2);
        ck_assert_uint_eq(count_type(b, "pods"), 0); /* the mock state is empty */
        ck_assert(!synced_resumed(b, b->n_lines - 1)); /* a state, not a replay */

        /* An earlier run's number: older than this run's start. */
        (void)snprintf(line, sizeof(line), "{\"resume_after\":%" PRIu64 "}\n",
                       e.wall_before - 1);
        c = client_synced(&e, line);
        ck_assert_uint_eq(e.mock.calls, 3);

        /* Exactly the last number: nothing to replay, no state. */
        (void)snprintf(line, sizeof(line), "{\"resume_after\":%" PRIu64 "}\n",
                       stream_server_last_seq(e.srv));
        d = client_synced(&e, line);
        ck_assert_uint_eq(e.mock.calls, 3);
        ck_assert_uint_eq(d->n_lines, 2);
        ck_assert(synced_resumed(d, 1)); /* an empty replay */
        (void)c;
        env_done(&e);
}
END_TEST

START_TEST(test_empty_object_skips_grace)
{
        struct env e;
        struct client *c;
        int i;

        env_init(&e);
        env_serve(&e, 0, 0, 0);
        c = client_connect(&e);
        client_puts(&e, c, "{}\n");
        /* Non-waiting iterations: accept, read the line, flush.  With the
         * grace (100 ms) in the way this could not finish in a handful. */
        for (i = 0; i < 6 && !has_type(c, "synced"); i++) {
                ck_assert_int_ge(loop_run_once(e.loop, 0), 0);
                env_poll(&e);
        }
        ck_assert_msg(has_type(c, "synced"), "no synced after %d iterations", i);
        ck_assert_uint_eq(e.mock.calls, 1);
        env_done(&e);
}
END_TEST

START_TEST(test_grace_gives_full_state)
{
        const char *const names[] = {"a", NULL};
        struct env e;
        struct client *c;
        uint64_t t0;

        env_init(&e);
        e.mock.recs[e.mock.n++] = make_update(POD_OP_ADD, "file", 0, names);
        env_serve(&e, 0, 0, 0);
        t0 = mono_usec();
        c = client_synced(&e, NULL);
        ck_assert_uint_ge(mono_usec() - t0, STREAM_RESUME_GRACE_USEC);
        ck_assert_uint_eq(e.mock.calls, 1);
        ck_assert_uint_eq(c->n_lines, 3);
        ck_assert_str_eq(pod_name_at(c, 1, 0), "a");
        env_done(&e);
}
END_TEST

START_TEST(test_shut_without_line_gets_state_and_live)
{
        struct env e;
        struct client *c;

        env_init(&e);
        env_serve(&e, 0, 0, 0);
        c = client_connect(&e);
        ck_assert_int_eq(shutdown(c->fd, SHUT_WR), 0);
        DRIVE_UNTIL(&e, has_type(c, "synced"));
        bcast(&e, POD_OP_ADD, "file", "x", 0);
        DRIVE_UNTIL(&e, count_type(c, "pods") == 1);
        ck_assert_uint_eq(stream_server_consumers(e.srv), 1);
        ck_assert(!c->eof);
        env_done(&e);
}
END_TEST

START_TEST(test_bad_first_line)
{
        static const char *const bad[] = {
                "not json\n",
                "[1]\n",
                "\"resume\"\n",
                "{\"resume_after\":-1}\n",
                "{\"resume_after\":\"5\"}\n",
                "{\"resume_after\":1.5}\n",
                "{\"resume_after\":null}\n",
                "{} x\n",
                "{\"resume_after\":5\n",
                "\n",
        };
        struct env e;
        size_t i;
        char *big;

        env_init(&e);
        env_serve(&e, 0, 0, 0);
        for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct client *c = client_connect(&e);
                size_t last;

                client_puts(&e, c, bad[i]);
                DRIVE_UNTIL(&e, c->eof);
                ck_assert_uint_eq(c->n_lines, 2);
                last = c->n_lines - 1;
                ck_assert_msg(strcmp(line_type(c, last), "error") == 0 &&
                              strcmp(line_str(c, last, "reason"), "BadRequest") == 0,
                              "line %zu (%s) got %s", i, bad[i], c->lines[last].text);
                ck_assert_uint_gt(line_seq(c, last), line_seq(c, 0));
        }

        /* The limit: a line of exactly STREAM_MAX_CLIENT_LINE bytes is read,
         * one byte more is refused. */
        big = malloc(STREAM_MAX_CLIENT_LINE + 3);
        ck_assert_ptr_nonnull(big);
        for (i = 0; i < 2; i++) {
                size_t len = STREAM_MAX_CLIENT_LINE + i;
                struct client *c = client_connect(&e);
                const char *head = "{\"resume_after\":0,\"pad\":\"";

                memset(big, 'x', len);
                memcpy(big, head, strlen(head));
                memcpy(big + len - 2, "\"}", 2);
                big[len] = '\n';
                client_send(&e, c, big, len + 1);
                if (i == 0) {
                        DRIVE_UNTIL(&e, has_type(c, "synced"));
                        ck_assert(!has_type(c, "error"));
                } else {
                        DRIVE_UNTIL(&e, c->eof);
                        ck_assert_str_eq(line_str(c, c->n_lines - 1, "reason"),
                                         "BadRequest");
                }
        }
        /* Too long without any newline at all. */
        {
                struct client *c = client_connect(&e);

                memset(big, ' ', STREAM_MAX_CLIENT_LINE + 2);
                client_send(&e, c, big, STREAM_MAX_CLIENT_LINE + 2);
                DRIVE_UNTIL(&e, c->eof);
                ck_assert_str_eq(line_str(c, c->n_lines - 1, "reason"), "BadRequest");
        }
        free(big);
        DRIVE_UNTIL(&e, stream_server_consumers(e.srv) == 1);
        ck_assert_uint_eq(stream_server_dropped(e.srv), 0);
        env_done(&e);
}
END_TEST

#define FANOUT_CONSUMERS 60
#define FANOUT_MESSAGES 25

static bool all_have_pods(struct client **cs, size_t n, size_t want)
{
        size_t i;

        for (i = 0; i < n; i++)
                if (count_type(cs[i], "pods") < want)
                        return false;
        return true;
}

START_TEST(test_fanout_60_consumers)
{
        struct env e;
        struct client *cs[FANOUT_CONSUMERS];
        size_t i, k, first0, first;

        env_init(&e);
        env_serve(&e, 0, 0, 0);
        for (i = 0; i < FANOUT_CONSUMERS; i++) {
                cs[i] = client_connect(&e);
                client_puts(&e, cs[i], "{}\n");
        }
        DRIVE_UNTIL(&e, stream_server_consumers(e.srv) == FANOUT_CONSUMERS);
        for (i = 0; i < FANOUT_CONSUMERS; i++)
                DRIVE_UNTIL(&e, has_type(cs[i], "synced"));
        for (k = 0; k < FANOUT_MESSAGES; k++) {
                char name[16];

                (void)snprintf(name, sizeof(name), "p%zu", k);
                bcast(&e, k % 2 ? POD_OP_UPDATE : POD_OP_ADD, "file", name, 100);
        }
        DRIVE_UNTIL(&e, all_have_pods(cs, FANOUT_CONSUMERS, FANOUT_MESSAGES));
        first0 = find_type(cs[0], "pods", 0);
        for (i = 0; i < FANOUT_CONSUMERS; i++) {
                first = find_type(cs[i], "pods", 0);
                ck_assert_uint_eq(cs[i]->n_lines - first, FANOUT_MESSAGES);
                for (k = 0; k < FANOUT_MESSAGES; k++) {
                        char name[16];

                        (void)snprintf(name, sizeof(name), "p%zu", k);
                        ck_assert_str_eq(pod_name_at(cs[i], first + k, 0), name);
                        ck_assert_str_eq(cs[i]->lines[first + k].text,
                                         cs[0]->lines[first0 + k].text);
                }
                assert_seq_increasing(cs[i], 0);
        }
        ck_assert_uint_eq(stream_server_dropped(e.srv), 0);
        env_done(&e);
}
END_TEST

#define SLOW_READERS 4
#define SLOW_MESSAGES 120
#define SLOW_PAD (16 * 1024)
#define SLOW_BACKLOG (64 * 1024)

/* Broadcasts SLOW_MESSAGES big messages; the readers keep up.  If slow is
 * given, it starts reading as soon as it has been dropped (well within
 * the close timeout). */
static void slow_scenario(struct env *e, struct client **readers, uint64_t *seqs,
                          struct client *slow)
{
        size_t k;

        for (k = 0; k < SLOW_MESSAGES; k++) {
                seqs[k] = bcast(e, POD_OP_UPDATE, "file", "big", SLOW_PAD);
                if (slow && stream_server_dropped(e->srv) == 1) {
                        e->clients[e->n_clients++] = slow;
                        slow = NULL;
                }
                DRIVE_UNTIL(e, all_have_pods(readers, SLOW_READERS, k + 1));
        }
        ck_assert_ptr_null(slow);
}

START_TEST(test_slow_consumer_dropped)
{
        struct env e;
        struct client *readers[SLOW_READERS], *slow;
        uint64_t seqs[SLOW_MESSAGES];
        size_t i, n_pods, last;

        env_init(&e);
        env_serve(&e, 0, SLOW_BACKLOG, 0);
        for (i = 0; i < SLOW_READERS; i++)
                readers[i] = client_synced(&e, "{}\n");
        slow = client_connect(&e);
        client_puts(&e, slow, "{}\n");
        /* It never reads until it is dropped: take it out of the polling. */
        e.n_clients--;
        DRIVE_UNTIL(&e, stream_server_consumers(e.srv) == SLOW_READERS + 1 &&
                        e.mock.calls == SLOW_READERS + 1);
        slow_scenario(&e, readers, seqs, slow);
        ck_assert_uint_eq(stream_server_dropped(e.srv), 1);
        for (i = 0; i < SLOW_READERS; i++) {
                size_t first = find_type(readers[i], "pods", 0);
                size_t k;

                ck_assert_uint_eq(count_type(readers[i], "pods"), SLOW_MESSAGES);
                for (k = 0; k < SLOW_MESSAGES; k++)
                        ck_assert_uint_eq(line_seq(readers[i], first + k), seqs[k]);
        }
        /* It read from the moment it was dropped: everything it was sent,
         * then the error, then end of stream. */
        DRIVE_UNTIL(&e, slow->eof);
        last = slow->n_lines - 1;
        ck_assert_str_eq(line_type(slow, last), "error");
        ck_assert_str_eq(line_str(slow, last, "reason"), "SlowConsumer");
        n_pods = count_type(slow, "pods");
        ck_assert_uint_gt(n_pods, 0);
        ck_assert_uint_lt(n_pods, SLOW_MESSAGES);
        for (i = 0; i < n_pods; i++)
                ck_assert_uint_eq(line_seq(slow, find_type(slow, "pods", 0) + i), seqs[i]);
        /* Its error's number says exactly where to resume. */
        ck_assert_uint_gt(line_seq(slow, last), seqs[n_pods - 1]);
        ck_assert_uint_lt(line_seq(slow, last), seqs[n_pods]);
        ck_assert_uint_eq(slow->in.len, 0);
        DRIVE_UNTIL(&e, stream_server_consumers(e.srv) == SLOW_READERS);
        env_done(&e);
}
END_TEST

/* A burst larger than the bound, broadcast in one loop pass, does not
 * cut a consumer whose socket takes it: only bytes its socket refused
 * count. */
START_TEST(test_burst_past_the_bound_fits_the_socket)
{
        struct env e;
        struct client *a;
        uint64_t s;

        env_init(&e);
        env_serve(&e, 0, 64 * 1024, 0);
        a = client_synced(&e, "{}\n");
        s = line_seq(a, a->n_lines - 1);
        /* 3 x 40 KiB queued before the loop runs: 120 KiB > 64 KiB. */
        bcast(&e, POD_OP_UPDATE, "file", "big", 40 * 1024);
        bcast(&e, POD_OP_UPDATE, "file", "big", 40 * 1024);
        bcast(&e, POD_OP_UPDATE, "file", "big", 40 * 1024);
        DRIVE_UNTIL(&e, count_type(a, "pods") == 3 || has_type(a, "error"));
        ck_assert(!has_type(a, "error"));
        ck_assert_uint_eq(count_type(a, "pods"), 3);
        ck_assert_uint_gt(line_seq(a, a->n_lines - 1), s);
        ck_assert_uint_eq(stream_server_dropped(e.srv), 0);
        env_done(&e);
}
END_TEST

START_TEST(test_slow_consumer_closed_after_timeout)
{
        struct env e;
        struct client *readers[SLOW_READERS], *slow;
        uint64_t seqs[SLOW_MESSAGES];
        size_t i;

        env_init(&e);
        env_serve(&e, 0, SLOW_BACKLOG, 0);
        for (i = 0; i < SLOW_READERS; i++)
                readers[i] = client_synced(&e, "{}\n");
        slow = client_connect(&e);
        client_puts(&e, slow, "{}\n");
        e.n_clients--;
        DRIVE_UNTIL(&e, e.mock.calls == SLOW_READERS + 1);
        slow_scenario(&e, readers, seqs, NULL);
        ck_assert_uint_eq(stream_server_dropped(e.srv), 1);
        /* Never reads: closed by the timeout, the loop never stalled. */
        DRIVE_UNTIL(&e, stream_server_consumers(e.srv) == SLOW_READERS);
        bcast(&e, POD_OP_DELETE, "file", "big", 0);
        DRIVE_UNTIL(&e, all_have_pods(readers, SLOW_READERS, SLOW_MESSAGES + 1));
        e.clients[e.n_clients++] = slow;
        DRIVE_UNTIL(&e, slow->eof);
        ck_assert_uint_lt(count_type(slow, "pods"), SLOW_MESSAGES);
        env_done(&e);
}
END_TEST

START_TEST(test_client_disconnect_mid_message)
{
        struct env e;
        struct client *a, *b, *gone;
        char tmp[1024];
        ssize_t n;

        env_init(&e);
        env_serve(&e, 0, 0, 0);
        a = client_synced(&e, "{}\n");
        b = client_synced(&e, "{}\n");
        gone = client_synced(&e, "{}\n");
        /* b and gone stop being polled; the message (2 MB) cannot fit in
         * their socket buffers. */
        e.n_clients = 1;
        bcast(&e, POD_OP_ADD, "file", "huge", 2u * 1024u * 1024u);
        DRIVE_UNTIL(&e, count_type(a, "pods") == 1);
        /* b reads a piece, then leaves in the middle of the message. */
        n = recv(b->fd, tmp, sizeof(tmp), 0);
        ck_assert_int_gt(n, 0);
        client_close(b);
        client_close(gone);
        DRIVE_UNTIL(&e, stream_server_consumers(e.srv) == 1);
        ck_assert_uint_eq(stream_server_dropped(e.srv), 0); /* quietly */
        bcast(&e, POD_OP_DELETE, "file", "huge", 0);
        DRIVE_UNTIL(&e, count_type(a, "pods") == 2);
        e.n_clients = 3;
        env_done(&e);
}
END_TEST

START_TEST(test_max_consumers)
{
        struct env e;
        struct client *a, *b, *c, *d;
        size_t last;

        env_init(&e);
        env_serve(&e, 0, 0, 2);
        a = client_synced(&e, "{}\n");
        b = client_synced(&e, "{}\n");
        c = client_connect(&e);
        DRIVE_UNTIL(&e, c->eof);
        ck_assert_uint_eq(c->n_lines, 1);
        last = c->n_lines - 1;
        ck_assert_str_eq(line_type(c, last), "error");
        ck_assert_str_eq(line_str(c, last, "reason"), "TooManyConsumers");
        ck_assert_uint_gt(line_seq(c, last), line_seq(b, b->n_lines - 1));
        ck_assert_uint_eq(stream_server_consumers(e.srv), 2);
        /* A place freed is taken again. */
        client_close(a);
        DRIVE_UNTIL(&e, stream_server_consumers(e.srv) == 1);
        d = client_synced(&e, "{}\n");
        ck_assert(!has_type(d, "error"));
        ck_assert_uint_eq(stream_server_consumers(e.srv), 2);
        env_done(&e);
}
END_TEST

/* Leaves a socket file at path that nobody listens on. */
static void make_stale_socket(const char *path)
{
        struct sockaddr_un sa;
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);

        ck_assert_int_ge(fd, 0);
        memset(&sa, 0, sizeof(sa));
        sa.sun_family = AF_UNIX;
        memcpy(sa.sun_path, path, strlen(path) + 1);
        ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        close(fd);
}

START_TEST(test_stale_socket_replaced)
{
        struct env e;
        struct stat before, after;
        struct client *c;

        env_init(&e);
        make_stale_socket(e.path);
        ck_assert_int_eq(lstat(e.path, &before), 0);
        env_serve(&e, 0, 0, 0);
        ck_assert_int_eq(lstat(e.path, &after), 0);
        ck_assert(S_ISSOCK(after.st_mode));
        ck_assert(S_ISSOCK(before.st_mode));
        c = client_synced(&e, "{}\n");
        ck_assert_str_eq(line_type(c, 0), "hello");
        env_done(&e);
}
END_TEST

START_TEST(test_live_socket_refused)
{
        struct env e;
        struct stream_server_config cfg;
        struct stream_server *second = NULL;
        struct buf err = BUF_INIT;
        struct client *c;
        char want[256];
        int r;

        env_init(&e);
        env_serve(&e, 0, 0, 0);
        env_config(&e, &cfg);
        r = stream_server_new(e.loop, &cfg, &second, &err);
        ck_assert_int_eq(r, -EADDRINUSE);
        ck_assert_ptr_null(second);
        (void)snprintf(want, sizeof(want), "another podmux (pid %ld) serves %s", (long)getpid(), e.path);
        ck_assert_str_eq(err.data, want);
        buf_free(&err);
        /* The first one is untouched. */
        c = client_synced(&e, "{}\n");
        ck_assert_str_eq(line_type(c, 0), "hello");
        env_done(&e);
}
END_TEST

START_TEST(test_non_socket_refused)
{
        struct env e;
        struct stream_server_config cfg;
        struct stream_server *srv = NULL;
        struct buf err = BUF_INIT;
        char missing[200], got[16];
        FILE *f;
        int r;

        env_init(&e);
        f = fopen(e.path, "w");
        ck_assert_ptr_nonnull(f);
        fputs("keep me", f);
        fclose(f);
        env_config(&e, &cfg);
        r = stream_server_new(e.loop, &cfg, &srv, &err);
        ck_assert_int_eq(r, -EEXIST);
        ck_assert_ptr_null(srv);
        ck_assert_msg(strstr(err.data, "is not a socket") != NULL, "%s", err.data);
        f = fopen(e.path, "r");
        ck_assert_ptr_nonnull(f);
        ck_assert_ptr_nonnull(fgets(got, sizeof(got), f));
        fclose(f);
        ck_assert_str_eq(got, "keep me");

        /* A parent directory that cannot be made: one line naming it. */
        (void)snprintf(missing, sizeof(missing), "%s/nope/podmux.sock", e.path);
        cfg.socket_path = missing;
        buf_reset(&err);
        r = stream_server_new(e.loop, &cfg, &srv, &err);
        ck_assert_int_eq(r, -ENOTDIR);
        ck_assert_ptr_null(srv);
        ck_assert_msg(strstr(err.data, "cannot create directory") != NULL && strstr(err.data, e.path) != NULL, "%s",
                      err.data);
        buf_free(&err);
        env_done(&e);
}
END_TEST

START_TEST(test_socket_mode)
{
        static const struct {
                mode_t umask, mode, want;
        } cases[] = {
                {0, 0, 0660},
                {077, 0, 0660},
                {022, 0666, 0666},
                {0, 0600, 0600},
        };
        size_t i;

        for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct env e;
                struct stream_server_config cfg;
                struct stat st;
                mode_t old = umask(cases[i].umask);

                env_init(&e);
                env_config(&e, &cfg);
                cfg.socket_mode = cases[i].mode;
                env_serve_cfg(&e, &cfg);
                umask(old);
                ck_assert_int_eq(lstat(e.path, &st), 0);
                ck_assert_msg((st.st_mode & 07777) == cases[i].want,
                              "case %zu: mode %04o, want %04o", i,
                              (unsigned)(st.st_mode & 07777), (unsigned)cases[i].want);
                env_done(&e);
        }
}
END_TEST

START_TEST(test_socket_removed_on_free)
{
        struct env e;
        struct stat st;
        FILE *f;

        env_init(&e);
        env_serve(&e, 0, 0, 0);
        ck_assert_int_eq(lstat(e.path, &st), 0);
        stream_server_free(e.srv);
        e.srv = NULL;
        ck_assert_int_eq(lstat(e.path, &st), -1);
        ck_assert_int_eq(errno, ENOENT);

        /* Replaced behind our back: not ours any more, left alone. */
        env_serve(&e, 0, 0, 0);
        ck_assert_int_eq(unlink(e.path), 0);
        f = fopen(e.path, "w");
        ck_assert_ptr_nonnull(f);
        fclose(f);
        stream_server_free(e.srv);
        e.srv = NULL;
        ck_assert_int_eq(lstat(e.path, &st), 0);
        ck_assert(S_ISREG(st.st_mode));
        env_done(&e);
}
END_TEST

START_TEST(test_sources_ready_live_and_late)
{
        const char *const ready[] = {"api", "file"};
        const char *const other[] = {"http"};
        struct env e;
        struct client *a, *b, *c;
        char line[96];
        uint64_t before, ready_seq;
        size_t i, syn;

        env_init(&e);
        env_serve(&e, 0, 0, 0);
        a = client_synced(&e, "{}\n");
        before = line_seq(a, a->n_lines - 1);
        ck_assert_int_eq(stream_server_sources_ready(e.srv, ready, 2), 0);
        ready_seq = stream_server_last_seq(e.srv);
        DRIVE_UNTIL(&e, has_type(a, "sources_ready"));
        i = a->n_lines - 1;
        (void)snprintf(line, sizeof(line),
                       "{\"type\":\"sources_ready\",\"seq\":%" PRIu64
                       ",\"sources\":[\"api\",\"file\"]}", ready_seq);
        ck_assert_str_eq(a->lines[i].text, line);

        /* Once: a second call changes nothing. */
        ck_assert_int_eq(stream_server_sources_ready(e.srv, other, 1), 0);
        ck_assert_uint_eq(stream_server_last_seq(e.srv), ready_seq);

        /* A later consumer: synced, then sources_ready with a fresh number. */
        b = client_synced(&e, "{}\n");
        DRIVE_UNTIL(&e, has_type(b, "sources_ready"));
        syn = find_type(b, "synced", 0);
        ck_assert_uint_eq(find_type(b, "sources_ready", 0), syn + 1);
        ck_assert_uint_gt(line_seq(b, syn + 1), line_seq(b, syn));
        ck_assert_str_eq(line_str(b, syn + 1, "type"), "sources_ready");
        ck_assert_uint_eq(json_object_array_length(member(b->lines[syn + 1].obj, "sources")), 2);

        /* Resuming from before it: replayed from history, then again after
         * synced (a consumer can always wait for it after synced). */
        (void)snprintf(line, sizeof(line), "{\"resume_after\":%" PRIu64 "}\n", before);
        c = client_synced(&e, line);
        DRIVE_UNTIL(&e, count_type(c, "sources_ready") == 2);
        ck_assert_str_eq(line_type(c, 1), "sources_ready");
        ck_assert_uint_eq(line_seq(c, 1), ready_seq);
        ck_assert_str_eq(line_type(c, 2), "synced");
        ck_assert_str_eq(line_type(c, 3), "sources_ready");
        ck_assert_uint_eq(c->n_lines, 4);
        env_done(&e);
}
END_TEST

/* "source" (doc/protocol.md): broadcast live; a state other than live is
 * said again after synced to later and resuming consumers; live forgets
 * it. */
START_TEST(test_source_state_live_and_late)
{
        static const char ckpt[] = ",\"checkpoint\":{\"time\":\"2026-01-02T03:04:05Z\",\"resource_version\":\"42\"}";
        struct env e;
        struct client *a, *b, *c, *d;
        char line[256];
        uint64_t before, seq;
        size_t syn;

        env_init(&e);
        env_serve(&e, 0, 0, 0);
        a = client_synced(&e, "{}\n");
        before = line_seq(a, a->n_lines - 1);
        ck_assert_int_eq(stream_server_source_state(e.srv, NULL, "live", NULL), -EINVAL);
        ck_assert_int_eq(stream_server_source_state(e.srv, "api", "checkpoint", ckpt), 0);
        seq = stream_server_last_seq(e.srv);
        DRIVE_UNTIL(&e, has_type(a, "source"));
        (void)snprintf(line, sizeof(line),
                       "{\"type\":\"source\",\"seq\":%" PRIu64 ",\"source\":\"api\",\"state\":"
                       "\"checkpoint\"%s}",
                       seq, ckpt);
        ck_assert_str_eq(a->lines[a->n_lines - 1].text, line);

        /* A later consumer: synced, then the state, with a fresh number. */
        b = client_synced(&e, "{}\n");
        DRIVE_UNTIL(&e, has_type(b, "source"));
        syn = find_type(b, "synced", 0);
        ck_assert_uint_eq(find_type(b, "source", 0), syn + 1);
        ck_assert_uint_gt(line_seq(b, syn + 1), line_seq(b, syn));
        ck_assert_str_eq(line_str(b, syn + 1, "state"), "checkpoint");
        ck_assert_str_eq(
                json_object_get_string(member(member(b->lines[syn + 1].obj, "checkpoint"), "resource_version")), "42");

        /* Resuming from before it: replayed, then again after synced. */
        (void)snprintf(line, sizeof(line), "{\"resume_after\":%" PRIu64 "}\n", before);
        c = client_synced(&e, line);
        DRIVE_UNTIL(&e, count_type(c, "source") == 2);
        ck_assert_str_eq(line_type(c, 1), "source");
        ck_assert_uint_eq(line_seq(c, 1), seq);
        ck_assert_str_eq(line_type(c, 2), "synced");
        ck_assert_str_eq(line_type(c, 3), "source");

        /* Live: broadcast, and forgotten: a later consumer hears nothing. */
        ck_assert_int_eq(stream_server_source_state(e.srv, "api", "live", NULL), 0);
        DRIVE_UNTIL(&e, count_type(a, "source") == 2);
        ck_assert_str_eq(line_str(a, a->n_lines - 1, "state"), "live");
        ck_assert_ptr_null(member(a->lines[a->n_lines - 1].obj, "checkpoint"));
        d = client_synced(&e, "{}\n");
        DRIVE_UNTIL(&e, has_type(d, "synced"));
        ck_assert_uint_eq(count_type(d, "source"), 0);
        env_done(&e);
}
END_TEST

/* The "checkpoint" state rendered by the stream server from the
 * checkpoint's time and resourceVersion (run.c renders nothing). */
START_TEST(test_source_checkpoint_rendered)
{
        struct env e;
        struct client *a;
        char line[256];

        env_init(&e);
        env_serve(&e, 0, 0, 0);
        a = client_synced(&e, "{}\n");
        ck_assert_int_eq(stream_server_source_checkpoint(e.srv, "api", 0, NULL), -EINVAL);
        ck_assert_int_eq(stream_server_source_checkpoint(e.srv, "api", 1767323045ull * 1000000u + 999, "4\"2"), 0);
        DRIVE_UNTIL(&e, has_type(a, "source"));
        (void)snprintf(line, sizeof(line),
                       "{\"type\":\"source\",\"seq\":%" PRIu64 ",\"source\":\"api\",\"state\":\"checkpoint\","
                       "\"checkpoint\":{\"time\":\"2026-01-02T03:04:05Z\",\"resource_version\":\"4\\\"2\"}}",
                       stream_server_last_seq(e.srv));
        ck_assert_str_eq(a->lines[a->n_lines - 1].text, line);
        env_done(&e);
}
END_TEST

/* "source" lines of c with state state. */
static size_t count_state(const struct client *c, const char *state)
{
        size_t n = 0;

        for (size_t i = 0; i < c->n_lines; i++)
                if (strcmp(line_type(c, i), "source") == 0 && strcmp(line_str(c, i, "state"), state) == 0)
                        n++;
        return n;
}

/* Every allocation of a "source" message failed in turn: it fails whole
 * (-ENOMEM, nothing kept, nothing sent), or, kept but not built, the live
 * consumer is cut (it resumes, and hears the state after synced), or it
 * is sent; a later consumer hears the state exactly when it was kept. */
START_TEST(test_source_state_out_of_memory)
{
        struct env e;
        long n, hits = 0;

        if (!failalloc_enabled())
                return;
        env_init(&e);
        env_serve(&e, 0, 0, 0);
        for (n = 1;; n++) {
                struct client *a = client_synced(&e, "{}\n"), *b;
                bool failed;
                size_t had;
                int r;

                ck_assert_int_eq(stream_server_source_state(e.srv, "api", "live", NULL), 0);
                DRIVE_UNTIL(&e, count_state(a, "live") == 1);
                /* (the previous round's state, said after synced) */
                had = count_state(a, "checkpoint");
                failalloc_arm(n);
                r = stream_server_source_state(e.srv, "api", "checkpoint", ",\"x\":1");
                failed = failalloc_failed();
                failalloc_arm(0);
                ck_assert(r == 0 || r == -ENOMEM);
                /* A later consumer, then a fence: whatever followed its
                 * synced has come once the fence has. */
                b = client_synced(&e, "{}\n");
                ck_assert_int_eq(stream_server_source_state(e.srv, "fence", "live", NULL), 0);
                DRIVE_UNTIL(&e, count_state(b, "live") == 1);
                if (r == 0) {
                        /* Sent (to a, unless queueing it for a failed:
                         * then a was cut, with an error if one could be
                         * built). */
                        DRIVE_UNTIL(&e, count_state(a, "checkpoint") == had + 1 || has_type(a, "error") || a->eof);
                        ck_assert_uint_eq(count_state(b, "checkpoint"), 1);
                } else if (count_state(b, "checkpoint") == 1) {
                        /* Kept, not sent: the live consumer was cut. */
                        DRIVE_UNTIL(&e, has_type(a, "error") || a->eof);
                        ck_assert_uint_eq(count_state(a, "checkpoint"), had);
                } else {
                        /* Nothing kept: nothing sent. */
                        ck_assert_uint_eq(count_state(a, "checkpoint"), had);
                }
                client_close(a);
                client_close(b);
                hits += failed;
                if (!failed)
                        break;
        }
        ck_assert_int_gt(hits, 2);
        env_done(&e);
}
END_TEST

START_TEST(test_shutting_down)
{
        struct env e;
        struct client *a, *greeting;
        size_t last;

        env_init(&e);
        env_serve(&e, 0, 0, 0);
        a = client_synced(&e, "{}\n");
        greeting = client_connect(&e);
        DRIVE_UNTIL(&e, greeting->n_lines == 1);
        stream_server_free(e.srv);
        e.srv = NULL;
        env_poll(&e);
        ck_assert(a->eof);
        last = a->n_lines - 1;
        ck_assert_str_eq(line_type(a, last), "error");
        ck_assert_str_eq(line_str(a, last, "reason"), "ShuttingDown");
        ck_assert_uint_gt(line_seq(a, last), line_seq(a, last - 1));
        ck_assert(greeting->eof);
        ck_assert_str_eq(line_str(greeting, 1, "reason"), "ShuttingDown");
        env_done(&e);
}
END_TEST

START_TEST(test_input_after_first_line_ignored)
{
        struct env e;
        struct client *c;
        char *junk;
        size_t n = 200 * 1024;

        env_init(&e);
        env_serve(&e, 0, 0, 0);
        c = client_synced(&e, "{}\nnot json at all\n{\"resume_after\":1}\n");
        junk = malloc(n);
        ck_assert_ptr_nonnull(junk);
        memset(junk, 'j', n);
        client_send(&e, c, junk, n); /* more than one read budget */
        free(junk);
        bcast(&e, POD_OP_ADD, "file", "x", 0);
        DRIVE_UNTIL(&e, count_type(c, "pods") == 1);
        ck_assert(!has_type(c, "error"));
        ck_assert_uint_eq(stream_server_consumers(e.srv), 1);
        env_done(&e);
}
END_TEST

/* n loop turns, the clients left unread. */
static void turns(struct env *e, int n)
{
        for (int i = 0; i < n; i++)
                ck_assert_int_ge(loop_run_once(e->loop, 0), 0);
}

/* A synced client whose last message is behind it: a few quiet turns, so
 * its next message comes after an idle wait. */
static struct client *client_settled(struct env *e)
{
        struct client *c = client_synced(e, "{}\n");

        for (int i = 0; i < 5; i++) {
                turns(e, 1);
                env_poll(e);
        }
        return c;
}

/* The pods messages of c from the first: named prefix0, prefix1, ... and
 * numbered seqs, in order. */
static void assert_pods_in_order(const struct client *c, const char *prefix, const uint64_t *seqs, size_t n)
{
        size_t first = find_type(c, "pods", 0);

        ck_assert_uint_eq(count_type(c, "pods"), n);
        for (size_t k = 0; k < n; k++) {
                char name[32];

                (void)snprintf(name, sizeof(name), "%s%zu", prefix, k);
                ck_assert_str_eq(pod_name_at(c, first + k, 0), name);
                ck_assert_uint_eq(line_seq(c, first + k), seqs[k]);
        }
        assert_seq_increasing(c, 0);
}

#define BATCH_MESSAGES 10

/* What one loop turn broadcasts goes to a consumer in one sendmsg(), even
 * when that call writes only part of the first block (an injected short
 * write): the rest goes on from that byte in one more call.  Counting
 * calls needs interposition (not under the sanitizers); the bytes and
 * their order are checked always. */
START_TEST(test_live_messages_batched_per_turn)
{
        struct env e;
        struct client *a;
        uint64_t seqs[BATCH_MESSAGES];
        bool count = failalloc_enabled();
        char name[32];

        env_init(&e);
        env_serve(&e, 0, 0, 0);
        a = client_settled(&e);
        if (count)
                failsys_arm(FAILSYS_SENDMSG, 1, 0);
        for (size_t k = 0; k < BATCH_MESSAGES; k++) {
                (void)snprintf(name, sizeof(name), "b%zu", k);
                seqs[k] = bcast(&e, k ? POD_OP_UPDATE : POD_OP_ADD, "file", name, 100);
        }
        turns(&e, 1);
        if (count) {
                ck_assert(failsys_failed(FAILSYS_SENDMSG));
                ck_assert_int_eq(failsys_count(FAILSYS_SENDMSG), 1);
                failsys_arm(FAILSYS_SENDMSG, LONG_MAX, 0); /* counts the rest */
        }
        DRIVE_UNTIL(&e, count_type(a, "pods") == BATCH_MESSAGES);
        if (count) {
                ck_assert_int_eq(failsys_count(FAILSYS_SENDMSG), 1);
                failsys_arm(FAILSYS_SENDMSG, 0, 0);
        }
        assert_pods_in_order(a, "b", seqs, BATCH_MESSAGES);
        ck_assert_uint_eq(a->in.len, 0);
        env_done(&e);
}
END_TEST

/* A consumer that reads each message as it comes costs the server no
 * wake-up and no change of its watch: a turn after the read runs
 * nothing (EPOLLOUT is watched only while a socket is full). */
START_TEST(test_reader_keeping_up_wakes_nothing)
{
        struct env e;
        struct client *a;
        bool count = failalloc_enabled();

        env_init(&e);
        env_serve(&e, 0, 0, 0);
        a = client_settled(&e);
        if (count)
                failsys_arm(FAILSYS_EPOLL_CTL, LONG_MAX, 0);
        for (size_t k = 0; k < BATCH_MESSAGES; k++) {
                bcast(&e, k ? POD_OP_UPDATE : POD_OP_ADD, "file", "k", 0);
                turns(&e, 1);
                client_poll(a);
                ck_assert_uint_eq(count_type(a, "pods"), k + 1);
                ck_assert_int_eq(loop_run_once(e.loop, 0), 0);
        }
        if (count) {
                ck_assert_int_eq(failsys_count(FAILSYS_EPOLL_CTL), 0);
                failsys_arm(FAILSYS_EPOLL_CTL, 0, 0);
        }
        env_done(&e);
}
END_TEST

/* Two turns in a row broadcast (a stream, as the server sees it): the
 * second's message may be kept back, but the next turn that broadcasts
 * nothing writes it, without waiting for a timer: a source that waits
 * for its consumers before sending more is not slowed down. */
START_TEST(test_kept_messages_go_on_a_quiet_turn)
{
        struct env e;
        struct client *a;

        env_init(&e);
        env_serve(&e, 0, 0, 0);
        a = client_settled(&e);
        for (size_t k = 1; k <= BATCH_MESSAGES; k++) {
                bcast(&e, POD_OP_UPDATE, "file", "q", 0);
                turns(&e, 1);
                bcast(&e, POD_OP_UPDATE, "file", "q", 0); /* right after it */
                turns(&e, 1);
                turns(&e, 1); /* broadcasts nothing */
                client_poll(a);
                ck_assert_uint_eq(count_type(a, "pods"), 2 * k);
        }
        env_done(&e);
}
END_TEST

/* When the pass of the next turn cannot be queued (out of memory), what
 * would have been kept back is written at once: nothing waits for a pass
 * that will not come. */
START_TEST(test_kept_messages_written_when_no_pass_can_follow)
{
        struct env e;
        struct client *a;
        long hits = 0;

        if (!failalloc_enabled())
                return;
        env_init(&e);
        env_serve(&e, 0, 0, 0);
        a = client_settled(&e);
        bcast(&e, POD_OP_ADD, "file", "o", 0);
        turns(&e, 1);
        /* Each try: a message right after a turn that broadcast, so the
         * pass wants to keep it (unless it already waited CORK_USEC). */
        for (size_t k = 1; k < BATCH_MESSAGES && hits == 0; k++) {
                bcast(&e, POD_OP_UPDATE, "file", "o", 0);
                failalloc_arm(1);
                turns(&e, 1);
                hits += failalloc_failed();
                failalloc_arm(0);
                client_poll(a);
                ck_assert_uint_eq(count_type(a, "pods"), k + 1);
        }
        ck_assert_int_eq(hits, 1);
        ck_assert_uint_eq(stream_server_dropped(e.srv), 0);
        env_done(&e);
}
END_TEST

#define FULL_MESSAGES 60
#define FULL_PAD (10 * 1024 + 7)

/* A batch larger than the socket: each sendmsg() of it stops where the
 * socket is full, in the middle of a block, and the next goes on from
 * that byte when the consumer has read.  A handful of calls for sixty
 * messages, where one call per message was made before. */
START_TEST(test_batch_cut_by_a_full_socket)
{
        struct env e;
        struct client *a;
        uint64_t seqs[FULL_MESSAGES];
        bool count = failalloc_enabled();
        char name[32];

        env_init(&e);
        env_serve(&e, 0, 0, 0);
        a = client_settled(&e);
        e.n_clients--;
        if (count)
                failsys_arm(FAILSYS_SENDMSG, LONG_MAX, 0);
        for (size_t k = 0; k < FULL_MESSAGES; k++) {
                (void)snprintf(name, sizeof(name), "f%zu", k);
                seqs[k] = bcast(&e, k ? POD_OP_UPDATE : POD_OP_ADD, "file", name, FULL_PAD);
        }
        turns(&e, 3);
        if (count)
                ck_assert_int_eq(failsys_count(FAILSYS_SENDMSG), 1);
        e.n_clients++;
        DRIVE_UNTIL(&e, count_type(a, "pods") == FULL_MESSAGES);
        if (count) {
                ck_assert_int_le(failsys_count(FAILSYS_SENDMSG), FULL_MESSAGES / 5);
                failsys_arm(FAILSYS_SENDMSG, 0, 0);
        }
        assert_pods_in_order(a, "f", seqs, FULL_MESSAGES);
        ck_assert_uint_eq(a->in.len, 0);
        ck_assert_uint_eq(stream_server_dropped(e.srv), 0);
        env_done(&e);
}
END_TEST

/* A client resuming after the last message it read gets what follows. */
static struct client *client_resumed(struct env *e, uint64_t last)
{
        char line[64];

        (void)snprintf(line, sizeof(line), "{\"resume_after\":%" PRIu64 "}\n", last);
        return client_synced(e, line);
}

/* A consumer whose watch cannot be changed (epoll_ctl() failing) cannot
 * be served: it is closed like a connection that is gone, the others go
 * on, and it resumes without a loss.  The watch changes when a socket
 * fills (EPOLLOUT asked for), when it has room again (EPOLLOUT dropped)
 * and when the client shuts its side (EPOLLIN dropped). */
START_TEST(test_watch_change_failure_closes_consumer)
{
        struct env e;
        struct client *a, *b, *c, *d;
        uint64_t s, t, last_b, last_c, last_d;

        if (!failalloc_enabled())
                return;
        env_init(&e);
        env_serve(&e, 0, 0, 0);
        a = client_settled(&e);
        b = client_settled(&e); /* the newest is written first */
        last_b = line_seq(b, b->n_lines - 1);
        failsys_arm(FAILSYS_SENDMSG, 1, EAGAIN);
        failsys_arm(FAILSYS_EPOLL_CTL, 1, ENOMEM);
        s = bcast(&e, POD_OP_ADD, "file", "x", 0);
        DRIVE_UNTIL(&e, b->eof && count_type(a, "pods") == 1);
        ck_assert(failsys_failed(FAILSYS_EPOLL_CTL));
        ck_assert_uint_eq(count_type(b, "pods"), 0);
        ck_assert_uint_eq(stream_server_consumers(e.srv), 1);
        ck_assert_uint_eq(stream_server_dropped(e.srv), 0); /* quietly */
        b = client_resumed(&e, last_b);
        ck_assert_uint_eq(count_type(b, "pods"), 1);
        ck_assert_uint_eq(line_seq(b, find_type(b, "pods", 0)), s);

        /* Full (EPOLLOUT asked for), then room: dropping EPOLLOUT fails. */
        c = client_settled(&e);
        last_c = line_seq(c, c->n_lines - 1);
        failsys_arm(FAILSYS_SENDMSG, 1, EAGAIN);
        failsys_arm(FAILSYS_EPOLL_CTL, 2, ENOMEM);
        t = bcast(&e, POD_OP_UPDATE, "file", "x", 0);
        DRIVE_UNTIL(&e, c->eof && count_type(a, "pods") == 2 && count_type(b, "pods") == 2);
        ck_assert(failsys_failed(FAILSYS_EPOLL_CTL));
        failsys_arm(FAILSYS_SENDMSG, 0, 0);
        ck_assert_uint_eq(stream_server_consumers(e.srv), 2);
        c = client_resumed(&e, last_c);
        ck_assert_uint_eq(count_type(c, "pods"), 1);
        ck_assert_uint_eq(line_seq(c, find_type(c, "pods", 0)), t);

        /* The client shuts its side: dropping EPOLLIN fails. */
        d = client_settled(&e);
        last_d = line_seq(d, d->n_lines - 1);
        failsys_arm(FAILSYS_EPOLL_CTL, 1, ENOMEM);
        ck_assert_int_eq(shutdown(d->fd, SHUT_WR), 0);
        DRIVE_UNTIL(&e, d->eof);
        ck_assert(failsys_failed(FAILSYS_EPOLL_CTL));
        failsys_arm(FAILSYS_EPOLL_CTL, 0, 0);
        ck_assert_uint_eq(stream_server_consumers(e.srv), 3);
        s = bcast(&e, POD_OP_DELETE, "file", "x", 0);
        d = client_resumed(&e, last_d);
        ck_assert_uint_eq(count_type(d, "pods"), 1);
        ck_assert_uint_eq(line_seq(d, find_type(d, "pods", 0)), s);
        DRIVE_UNTIL(&e, count_type(a, "pods") == 3 && count_type(b, "pods") == 3 && count_type(c, "pods") == 2);
        ck_assert_uint_eq(stream_server_dropped(e.srv), 0);
        env_done(&e);
}
END_TEST

START_TEST(test_broadcast_during_grace_full_state)
{
        const char *const names[] = {"x", NULL};
        struct env e;
        struct client *a, *b;
        size_t first;

        env_init(&e);
        env_serve(&e, 0, 0, 0);
        a = client_synced(&e, "{}\n");
        b = client_connect(&e);
        DRIVE_UNTIL(&e, b->n_lines == 1); /* hello: b waits for its line */
        /* The merger changes while b is in its grace wait. */
        bcast(&e, POD_OP_ADD, "file", "x", 0);
        e.mock.recs[e.mock.n++] = make_update(POD_OP_ADD, "file", 0, names);
        DRIVE_UNTIL(&e, has_type(b, "synced"));
        /* b got it once, inside the state, not also as a live message. */
        ck_assert_uint_eq(count_type(b, "pods"), 1);
        first = find_type(b, "pods", 0);
        ck_assert_str_eq(pod_name_at(b, first, 0), "x");
        ck_assert_uint_lt(first, find_type(b, "synced", 0));
        bcast(&e, POD_OP_UPDATE, "file", "x", 0);
        DRIVE_UNTIL(&e, count_type(b, "pods") == 2 && count_type(a, "pods") == 2);
        assert_seq_increasing(b, 0);
        env_done(&e);
}
END_TEST

START_TEST(test_broadcast_during_grace_resume)
{
        struct env e;
        struct client *a, *b;
        char line[96];
        uint64_t s, x;

        env_init(&e);
        env_serve(&e, 0, 0, 0);
        a = client_synced(&e, "{}\n");
        s = line_seq(a, a->n_lines - 1);
        b = client_connect(&e);
        DRIVE_UNTIL(&e, b->n_lines == 1);
        x = bcast(&e, POD_OP_ADD, "file", "x", 0);
        (void)snprintf(line, sizeof(line), "{\"resume_after\":%" PRIu64 "}\n", s);
        client_puts(&e, b, line);
        DRIVE_UNTIL(&e, has_type(b, "synced"));
        ck_assert_uint_eq(e.mock.calls, 1);
        ck_assert_uint_eq(b->n_lines, 3);
        ck_assert_uint_eq(line_seq(b, 1), x);
        ck_assert_str_eq(line_type(b, 2), "synced");
        env_done(&e);
}
END_TEST

/* A plugin event; returns its seq. */
static uint64_t plugin_ev(struct env *e, const char *op, const char *sock, const char *error)
{
        char json[160];
        uint64_t seq = stream_server_last_seq(e->srv) + 1;

        (void)snprintf(json, sizeof(json), "{\"type\":\"DevicePlugin\",\"name\":\"vendor.example/x\","
                       "\"endpoint\":\"%s\",\"versions\":[\"v1beta1\"],\"socket\":\"%s\"}", sock, sock);
        ck_assert_int_eq(stream_server_plugin(e->srv, op, sock, json, error), 0);
        return seq;
}

static const char *plugin_op_at(const struct client *c, size_t i)
{
        return line_str(c, i, "op");
}

static const char *plugin_sock_at(const struct client *c, size_t i)
{
        json_object *pl = member(c->lines[i].obj, "plugin");

        ck_assert_ptr_nonnull(pl);
        return json_object_get_string(member(pl, "socket"));
}

/*
 * Messages numbered after a consumer's hello all reach it, in order.
 * While b waits for its line: a plugin registers (state), a pod is added
 * (state), a plugin fails (news: no state holds it), the sources are
 * ready (sent after synced).  b, given the full state, gets hello, the
 * FAILED (its own number), then its state, synced, sources_ready: every
 * number larger than the one before, nothing twice.  c, waiting at the
 * same time and resuming from before, gets the FAILED once, from the
 * replay.
 */
START_TEST(test_news_during_grace_reaches_consumer)
{
        const char *const names[] = {"x", NULL};
        const char *const ready[] = {"file"};
        struct env e;
        struct client *a, *b, *c;
        char line[96];
        uint64_t before, failed;
        size_t i;

        env_init(&e);
        env_serve(&e, 0, 0, 0);
        a = client_synced(&e, "{}\n");
        before = line_seq(a, a->n_lines - 1);
        b = client_connect(&e);
        c = client_connect(&e);
        DRIVE_UNTIL(&e, b->n_lines == 1 && c->n_lines == 1);
        plugin_ev(&e, "REGISTERED", "/r/good.sock", NULL);
        bcast(&e, POD_OP_ADD, "file", "x", 0);
        e.mock.recs[e.mock.n++] = make_update(POD_OP_ADD, "file", 0, names);
        failed = plugin_ev(&e, "FAILED", "/r/bad.sock", "RegisterPlugin error -- boom");
        ck_assert_int_eq(stream_server_sources_ready(e.srv, ready, 1), 0);
        (void)snprintf(line, sizeof(line), "{\"resume_after\":%" PRIu64 "}\n", before);
        client_puts(&e, c, line);
        DRIVE_UNTIL(&e, has_type(b, "sources_ready") && count_type(c, "sources_ready") == 2);

        /* b: hello, FAILED, pods (state), REGISTERED (state), synced,
         * sources_ready. */
        ck_assert_msg(b->n_lines == 6, "b got %zu lines", b->n_lines);
        ck_assert_str_eq(line_type(b, 0), "hello");
        ck_assert_str_eq(line_type(b, 1), "plugin");
        ck_assert_str_eq(plugin_op_at(b, 1), "FAILED");
        ck_assert_str_eq(plugin_sock_at(b, 1), "/r/bad.sock");
        ck_assert_str_eq(line_str(b, 1, "error"), "RegisterPlugin error -- boom");
        ck_assert_uint_eq(line_seq(b, 1), failed);
        ck_assert_str_eq(line_type(b, 2), "pods");
        ck_assert_str_eq(pod_name_at(b, 2, 0), "x");
        ck_assert_str_eq(line_type(b, 3), "plugin");
        ck_assert_str_eq(plugin_op_at(b, 3), "REGISTERED");
        ck_assert_str_eq(plugin_sock_at(b, 3), "/r/good.sock");
        ck_assert_str_eq(line_type(b, 4), "synced");
        ck_assert(!synced_resumed(b, 4));
        ck_assert_str_eq(line_type(b, 5), "sources_ready");
        assert_seq_increasing(b, 0);

        /* c: the replay, FAILED once among it. */
        ck_assert_uint_eq(count_type(c, "plugin"), 2);
        for (i = 1; i < c->n_lines; i++)
                if (strcmp(line_type(c, i), "plugin") == 0 && strcmp(plugin_op_at(c, i), "FAILED") == 0)
                        ck_assert_uint_eq(line_seq(c, i), failed);
        ck_assert(synced_resumed(c, find_type(c, "synced", 0)));

        /* Both live afterwards; the news is not sent again. */
        plugin_ev(&e, "FAILED", "/r/other.sock", "again");
        DRIVE_UNTIL(&e, count_type(b, "plugin") == 3 && count_type(c, "plugin") == 3);
        ck_assert_str_eq(plugin_sock_at(b, b->n_lines - 1), "/r/other.sock");
        assert_seq_increasing(b, 0);
        env_done(&e);
}
END_TEST

/* A consumer that cannot keep the news for want of memory is cut with
 * ResourceExhausted (it does not start without it); the broadcast itself
 * and the other consumers are not affected.  Every allocation of the
 * broadcast fails in turn. */
START_TEST(test_news_kept_out_of_memory)
{
        struct env e;
        struct client *a, *b;
        long n, cut = 0, hit = 0;
        int r;

        if (!failalloc_enabled())
                return;
        env_init(&e);
        env_serve(&e, 0, 0, 0);
        a = client_synced(&e, "{}\n");
        for (n = 1;; n++) {
                size_t had = count_type(a, "plugin");
                bool failed;

                b = client_connect(&e);
                DRIVE_UNTIL(&e, b->n_lines == 1);
                failalloc_arm(n);
                r = stream_server_plugin(e.srv, "FAILED", "/r/bad.sock",
                                         "{\"type\":\"\",\"name\":\"\",\"endpoint\":\"\",\"versions\":[],"
                                         "\"socket\":\"/r/bad.sock\"}",
                                         "boom");
                failed = failalloc_failed();
                failalloc_arm(0);
                client_puts(&e, b, "{}\n");
                DRIVE_UNTIL(&e, has_type(b, "synced") || has_type(b, "error"));
                if (r < 0) {
                        /* Not built: no number taken, no one told. */
                        ck_assert_int_eq(r, -ENOMEM);
                        ck_assert(!has_type(b, "plugin"));
                } else if (has_type(b, "error")) {
                        ck_assert_str_eq(line_str(b, b->n_lines - 1, "reason"), "ResourceExhausted");
                        ck_assert(!has_type(b, "synced"));
                        cut++;
                } else {
                        ck_assert_str_eq(line_type(b, 1), "plugin");
                        ck_assert_str_eq(plugin_op_at(b, 1), "FAILED");
                }
                if (r == 0)
                        DRIVE_UNTIL(&e, count_type(a, "plugin") == had + 1 || has_type(a, "error"));
                hit += failed;
                client_close(b);
                if (!failed)
                        break;
                if (has_type(a, "error")) /* a's own queue ran out: a new one */
                        a = client_synced(&e, "{}\n");
        }
        ck_assert_msg(cut >= 1, "no consumer was cut for the news it could not keep (%ld faults)", hit);
        env_done(&e);
}
END_TEST

START_TEST(test_state_failure_is_reported)
{
        struct env e;
        struct client *c;
        size_t last;

        env_init(&e);
        env_serve(&e, 0, 0, 0);
        e.mock.fail = -EIO;
        c = client_connect(&e);
        client_puts(&e, c, "{}\n");
        DRIVE_UNTIL(&e, c->eof);
        last = c->n_lines - 1;
        ck_assert_str_eq(line_str(c, last, "reason"), "InternalError");
        ck_assert(!has_type(c, "synced"));
        env_done(&e);
}
END_TEST

/* ---- the files request ------------------------------------------------------ */

struct files_mock {
        int n_records;
        int fail; /* returned after the first record when set */
        unsigned calls;
};

static int mock_files(void *data, int (*emit)(void *ctx, const char *type, const char *members), void *ctx)
{
        struct files_mock *f = data;
        int r;

        f->calls++;
        r = emit(ctx, "files", ",\"path\":\"/etc/kubernetes/manifests\"");
        for (int i = 0; i < f->n_records && r >= 0; i++) {
                char members[96];

                (void)snprintf(members, sizeof(members), ",\"file\":{\"path\":\"/m/%d.yaml\",\"state\":\"applied\"}",
                               i);
                r = emit(ctx, "file", members);
                if (r >= 0 && f->fail)
                        return f->fail;
        }
        return r;
}

static struct files_mock files_mock;

static void env_serve_files(struct env *e, size_t max_backlog)
{
        struct stream_server_config cfg;

        env_config(e, &cfg);
        cfg.files_fn = mock_files;
        cfg.files_data = &files_mock;
        cfg.max_backlog = max_backlog;
        env_serve_cfg(e, &cfg);
}

/* A files request gets the records and synced, then only what
 * stream_server_files() sends: no pods, plugins or sources_ready; a pods
 * consumer never sees the files' messages.  The status lists each
 * consumer's stream. */
START_TEST(test_files_request)
{
        struct env e;
        struct client *f, *p, *st;
        json_object *cons;
        size_t n;

        files_mock = (struct files_mock){.n_records = 2};
        env_init(&e);
        env_serve_files(&e, 0);
        ck_assert(!stream_server_files_wanted(e.srv));
        ck_assert_int_eq(stream_server_files(e.srv, "file", ",\"file\":{}"), 0); /* nobody: nothing built */
        p = client_synced(&e, "{}\n");
        f = client_synced(&e, "{\"request\":\"files\"}\n");
        ck_assert(stream_server_files_wanted(e.srv));
        ck_assert_uint_eq(f->n_lines, 5);
        ck_assert_str_eq(line_type(f, 0), "hello");
        ck_assert_str_eq(line_type(f, 1), "files");
        ck_assert_str_eq(line_str(f, 1, "path"), "/etc/kubernetes/manifests");
        ck_assert_str_eq(line_type(f, 2), "file");
        ck_assert_str_eq(line_type(f, 3), "file");
        ck_assert_str_eq(line_type(f, 4), "synced");
        ck_assert(!synced_resumed(f, 4));
        assert_seq_increasing(f, 0);
        bcast(&e, POD_OP_ADD, "file", "a", 0);
        ck_assert_int_eq(stream_server_plugin(e.srv, "FAILED", "/r/x.sock",
                                              "{\"type\":\"\",\"name\":\"\",\"endpoint\":\"\",\"versions\":[],"
                                              "\"socket\":\"/r/x.sock\"}",
                                              "boom"),
                         0);
        ck_assert_int_eq(stream_server_sources_ready(e.srv, (const char *const[]){"file"}, 1), 0);
        ck_assert_int_eq(stream_server_files(e.srv, "file", ",\"file\":{\"path\":\"/m/0.yaml\",\"state\":\"gone\"}"),
                         0);
        DRIVE_UNTIL(&e, f->n_lines == 6 && count_type(p, "sources_ready") == 1);
        ck_assert_str_eq(line_type(f, 5), "file");
        assert_seq_increasing(f, 0);
        ck_assert_uint_eq(count_type(p, "file"), 0);
        ck_assert_uint_eq(count_type(p, "pods"), 1);
        /* Nothing else reached the files consumer meanwhile. */
        for (int i = 0; i < 20; i++) {
                loop_run_once(e.loop, 1000);
                env_poll(&e);
        }
        ck_assert_uint_eq(f->n_lines, 6);
        st = client_connect(&e);
        client_puts(&e, st, "{\"request\":\"status\"}\n");
        DRIVE_UNTIL(&e, has_type(st, "status"));
        cons = member(st->lines[find_type(st, "status", 0)].obj, "consumers");
        ck_assert_uint_eq(json_object_array_length(cons), 2);
        n = 0;
        for (size_t i = 0; i < 2; i++)
                n += strcmp(json_object_get_string(member(json_object_array_get_idx(cons, i), "stream")), "files") == 0;
        ck_assert_uint_eq(n, 1);
        client_close(f);
        DRIVE_UNTIL(&e, !stream_server_files_wanted(e.srv));
        env_done(&e);
}
END_TEST

/* No files callback: the request is refused; a failing one cuts the
 * consumer, saying why; one whose queue passes the bound is cut. */
START_TEST(test_files_refused_failed_slow)
{
        struct env e;
        struct client *c, *slow;
        char members[8192];

        env_init(&e);
        env_serve(&e, 0, 0, 0);
        c = client_connect(&e);
        client_puts(&e, c, "{\"request\":\"files\"}\n");
        DRIVE_UNTIL(&e, c->eof);
        ck_assert_str_eq(line_str(c, c->n_lines - 1, "reason"), "BadRequest");
        env_done(&e);

        files_mock = (struct files_mock){.n_records = 2, .fail = -EIO};
        env_init(&e);
        env_serve_files(&e, 16 * 1024);
        c = client_connect(&e);
        client_puts(&e, c, "{\"request\":\"files\"}\n");
        DRIVE_UNTIL(&e, c->eof);
        ck_assert_str_eq(line_str(c, c->n_lines - 1, "reason"), "InternalError");
        ck_assert(!has_type(c, "synced"));
        files_mock.fail = 0;
        slow = client_synced(&e, "{\"request\":\"files\"}\n");
        e.n_clients--; /* it reads no more */
        memset(members, 0, sizeof(members));
        memcpy(members, ",\"pad\":\"", 8);
        memset(members + 8, 'x', sizeof(members) - 10);
        members[sizeof(members) - 2] = '"';
        for (int i = 0; i < 400 && stream_server_dropped(e.srv) == 0; i++) {
                ck_assert_int_eq(stream_server_files(e.srv, "file", members), 0);
                loop_run_once(e.loop, 1000);
        }
        ck_assert_uint_eq(stream_server_dropped(e.srv), 1);
        e.clients[e.n_clients++] = slow;
        DRIVE_UNTIL(&e, slow->eof);
        ck_assert_str_eq(line_str(slow, slow->n_lines - 1, "reason"), "SlowConsumer");
        env_done(&e);
}
END_TEST

/* Out of memory building or queueing a file's message: the consumer is
 * cut (it asks again), never left believing it has every change; out of
 * memory starting it closes it. */
START_TEST(test_files_out_of_memory)
{
        struct env e;
        struct client *f;
        long n, cut = 0;
        int r;

        if (!failalloc_enabled())
                return;
        files_mock = (struct files_mock){.n_records = 1};
        env_init(&e);
        env_serve_files(&e, 0);
        f = client_synced(&e, "{\"request\":\"files\"}\n");
        for (n = 1;; n++) {
                size_t had = count_type(f, "file");
                bool failed;

                failalloc_arm(n);
                r = stream_server_files(e.srv, "file", ",\"file\":{\"path\":\"/m/x.yaml\"}");
                failed = failalloc_failed();
                failalloc_arm(0);
                DRIVE_UNTIL(&e, count_type(f, "file") == had + 1 || f->eof);
                if (f->eof) {
                        ck_assert_str_eq(line_str(f, f->n_lines - 1, "reason"), "ResourceExhausted");
                        ck_assert(r == 0 || r == -ENOMEM);
                        cut++;
                        f = client_synced(&e, "{\"request\":\"files\"}\n");
                } else {
                        ck_assert_int_eq(r, 0);
                }
                if (!failed)
                        break;
        }
        ck_assert_int_ge(cut, 1);
        /* Starting one, each allocation in turn. */
        for (n = 1;; n++) {
                struct client *c = client_connect(&e);
                bool failed;

                DRIVE_UNTIL(&e, c->n_lines == 1);
                failalloc_arm(n);
                client_puts(&e, c, "{\"request\":\"files\"}\n");
                for (int i = 0; i < 50; i++) {
                        bool done;

                        loop_run_once(e.loop, 1000);
                        failalloc_hold(); /* the test's own reading */
                        env_poll(&e);
                        done = c->eof || has_type(c, "synced");
                        failalloc_release();
                        if (done)
                                break;
                }
                failed = failalloc_failed();
                failalloc_arm(0);
                DRIVE_UNTIL(&e, c->eof || has_type(c, "synced"));
                if (!failed) {
                        ck_assert(has_type(c, "synced"));
                        break;
                }
                client_close(c);
        }
        env_done(&e);
}
END_TEST

/* ---- descriptor exhaustion ------------------------------------------------ */

struct fd_events {
        int n;
        int err[8];
        uint64_t refused[8];
};

static void on_fds(void *data, int err, uint64_t refused)
{
        struct fd_events *ev = data;

        ck_assert_int_lt(ev->n, 8);
        ev->err[ev->n] = err;
        ev->refused[ev->n] = refused;
        ev->n++;
}

/* Connects a socket made earlier (connect() takes no descriptor, so this
 * works while they are all in use) and adds it as a client. */
static struct client *client_connect_fd(struct env *e, int fd)
{
        struct client *c = calloc(1, sizeof(*c));
        struct sockaddr_un sa;

        ck_assert_ptr_nonnull(c);
        buf_init(&c->in);
        ck_assert_uint_lt(e->n_clients, MAX_CLIENTS);
        memset(&sa, 0, sizeof(sa));
        sa.sun_family = AF_UNIX;
        memcpy(sa.sun_path, e->path, strlen(e->path) + 1);
        ck_assert_msg(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect: errno %d", errno);
        ck_assert_int_eq(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
        c->fd = fd;
        e->clients[e->n_clients++] = c;
        return c;
}

/* Takes every free descriptor under a soft limit lowered to a few above
 * the lowest free one; *old keeps the limit to restore.  Returns how many
 * were taken, in fds[]. */
static size_t exhaust_descriptors(int *fds, size_t max, struct rlimit *old)
{
        struct rlimit low;
        size_t n = 0;
        int probe = open("/dev/null", O_RDONLY | O_CLOEXEC);

        ck_assert_int_ge(probe, 0);
        close(probe);
        ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, old), 0);
        low = *old;
        low.rlim_cur = (rlim_t)probe + 16;
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
        for (;;) {
                int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

                if (fd < 0) {
                        ck_assert_int_eq(errno, EMFILE);
                        break;
                }
                ck_assert_uint_lt(n, max);
                fds[n++] = fd;
        }
        return n;
}

/* Descriptors run out: connections are still answered, TooManyConsumers,
 * through the spare descriptor; consumers already there keep their
 * updates; the episode is reported once when it starts and once when it
 * ends; a server cannot even start without its spare. */
START_TEST(test_descriptors_run_out)
{
        struct env e;
        struct stream_server_config cfg;
        struct stream_server *second = NULL;
        struct fd_events ev = {0};
        struct client *a, *c[3], *late;
        struct rlimit old;
        struct buf err = BUF_INIT;
        char path2[200];
        int pre[4], dummies[64];
        size_t n, i;

        env_init(&e);
        env_config(&e, &cfg);
        cfg.fd_fn = on_fds;
        cfg.fd_data = &ev;
        env_serve_cfg(&e, &cfg);
        a = client_synced(&e, "{}\n");
        for (i = 0; i < 4; i++) {
                pre[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                ck_assert_int_ge(pre[i], 0);
        }
        n = exhaust_descriptors(dummies, 64, &old);

        for (i = 0; i < 3; i++)
                c[i] = client_connect_fd(&e, pre[i]);
        DRIVE_UNTIL(&e, c[0]->eof && c[1]->eof && c[2]->eof);
        for (i = 0; i < 3; i++) {
                ck_assert_uint_eq(c[i]->n_lines, 1);
                ck_assert_str_eq(line_type(c[i], 0), "error");
                ck_assert_str_eq(line_str(c[i], 0, "reason"), "TooManyConsumers");
                ck_assert_msg(strstr(line_str(c[i], 0, "message"), "file descriptors"), "%s",
                              line_str(c[i], 0, "message"));
        }
        ck_assert_int_eq(ev.n, 1);
        ck_assert_int_eq(ev.err[0], -EMFILE);
        ck_assert_uint_eq(stream_server_consumers(e.srv), 1);
        /* The consumer already there is served as before. */
        bcast(&e, POD_OP_ADD, "file", "web", 0);
        DRIVE_UNTIL(&e, count_type(a, "pods") == 1);

        /* No spare, no server. */
        (void)snprintf(path2, sizeof(path2), "%s/second.sock", e.dir);
        cfg.socket_path = path2;
        ck_assert_int_eq(stream_server_new(e.loop, &cfg, &second, &err), -EMFILE);
        ck_assert_ptr_null(second);
        ck_assert_msg(strstr(err.data, "/dev/null") && strstr(err.data, "spare descriptor"), "%s", err.data);
        ck_assert_int_eq(access(path2, F_OK), -1);
        buf_free(&err);

        for (i = 0; i < n; i++)
                close(dummies[i]);
        late = client_connect_fd(&e, pre[3]);
        client_puts(&e, late, "{}\n");
        DRIVE_UNTIL(&e, has_type(late, "synced"));
        ck_assert(!has_type(late, "error"));
        ck_assert_int_eq(ev.n, 2);
        ck_assert_int_eq(ev.err[1], 0);
        ck_assert_uint_eq(ev.refused[1], 3);
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
        env_done(&e);
}
END_TEST

UNIT_MAIN(test_source_checkpoint_rendered, test_live_messages_batched_per_turn, test_reader_keeping_up_wakes_nothing,
          test_kept_messages_go_on_a_quiet_turn, test_kept_messages_written_when_no_pass_can_follow,
          test_batch_cut_by_a_full_socket, test_watch_change_failure_closes_consumer, test_files_request,
          test_files_refused_failed_slow, test_files_out_of_memory, test_burst_past_the_bound_fits_the_socket,
          test_history_keeps_pods_by_reference, test_broadcast_out_of_memory_sweep,
          test_replay_is_fed_as_the_consumer_reads, test_replay_falls_behind_the_history, test_hello_fields,
          test_seq_strictly_increasing, test_initial_state_then_synced, test_resume_within_history, test_resume_too_old,
          test_history_byte_bound, test_resume_from_the_future_or_another_run, test_empty_object_skips_grace,
          test_grace_gives_full_state, test_shut_without_line_gets_state_and_live, test_bad_first_line,
          test_fanout_60_consumers, test_slow_consumer_dropped, test_slow_consumer_closed_after_timeout,
          test_client_disconnect_mid_message, test_max_consumers, test_stale_socket_replaced, test_live_socket_refused,
          test_non_socket_refused, test_socket_mode, test_socket_removed_on_free, test_sources_ready_live_and_late,
          test_source_state_live_and_late, test_source_state_out_of_memory, test_shutting_down,
          test_input_after_first_line_ignored, test_broadcast_during_grace_full_state,
          test_broadcast_during_grace_resume, test_news_during_grace_reaches_consumer, test_news_kept_out_of_memory,
          test_state_failure_is_reported, test_descriptors_run_out)
