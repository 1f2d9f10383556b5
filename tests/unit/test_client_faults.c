/*
 * test_client_faults — libpodmux-client with every allocation failing in
 * turn (tests/unit/failalloc.h), the way tests/unit/test_faults.c sweeps
 * the daemon.
 *
 * A fake daemon (tests/unit/fake_stream.h) holds a fixed world: an
 * initial state, seven live messages after it (pods, plugins, and the api
 * source serving its checkpoint, said again after every synced), and the
 * final state they lead to.  The first connection gets the initial
 * state, synced and the live messages, then is cut; later connections
 * are answered as the daemon would: a replay of what came after the
 * resume point if it is one of the world's numbers, the final state
 * otherwise.  For every N the Nth allocation inside the library fails
 * (once; and from N on until released), and each time:
 *   - the client ends up holding exactly the final state;
 *   - the records its handlers saw, applied in order, give that cache
 *     (nothing lost, nothing seen twice, no half-applied message);
 *   - every error it reported is out of memory or the cut;
 *   - nothing is left allocated after podmux_client_free().
 * A second world is a daemon restart: the first connection gets a state
 * and is cut, every later one a full state in which one pod changed and
 * one differs only in its config.seen (the resync diff compares those two
 * texts, and may run out of memory doing it).  A third is a restart
 * whose http source delivers late: the full state has file only, so the
 * http pods are held over, then http delivers (one pod the same but for
 * config.seen, one changed, one new, one gone) and sources_ready ends the
 * hold-over; a cut at any point resumes or gets that full state again.
 * Each run has an index of its own (gen) and the built-in ones, and
 * checks that they give the final cache's pods and that every informer
 * call finds them in step with the cache.  Another sweep fails each
 * allocation of adding an index and of a built-in's first lookup.
 * Under AddressSanitizer nothing is interposed: the scenario runs once.
 */
#include "fake_stream.h"
#include "failalloc.h"
#include "unit.h"

#include <limits.h>

#include <json-c/json.h>

#include "../../src/client/client_msg.h"

/* Final state: a (gen 2), c, d; plugins p1 (changed) and p3. */
#define FIRST_SYNCED 10
#define LAST_LIVE 17
/* The api source serves its checkpoint from message 17 on: said again
 * after every synced (doc/protocol.md, "source"). */
#define CHECKPOINT_MEMBERS                                                                                             \
        "\"source\":\"api\",\"state\":\"checkpoint\",\"checkpoint\":{\"time\":\"2026-11-24T09:58:00Z\",\"resource_"    \
        "version\":\"48213\"}"

static void source_message(struct fake *f, uint64_t seq)
{
        fake_send(f, "{\"type\":\"source\",\"seq\":%" PRIu64 "," CHECKPOINT_MEMBERS "}", seq);
}

static void live_message(struct fake *f, uint64_t seq)
{
        switch (seq) {
        case 11:
                fake_pods(f, 11, "UPDATE", "file", 1, pod_text("a", "default", "alpha", "file", 2));
                break;
        case 12:
                fake_pods(f, 12, "REMOVE", "file", 1, pod_text("b", "default", "beta", "file", 1));
                break;
        case 13:
                fake_pods(f, 13, "ADD", "http", 1, pod_text("d", "web", "delta", "http", 1));
                break;
        case 14:
                fake_send(f, "{\"type\":\"plugin\",\"seq\":14,\"op\":\"REGISTERED\",\"plugin\":{\"socket\":\"/p1\","
                             "\"type\":\"CSIPlugin\",\"name\":\"p1\",\"versions\":[\"2\"]}}");
                break;
        case 15:
                fake_send(f, "{\"type\":\"plugin\",\"seq\":15,\"op\":\"DEREGISTERED\",\"plugin\":{\"socket\":\"/p2\","
                             "\"type\":\"CSIPlugin\",\"name\":\"p2\"}}");
                break;
        case 16:
                fake_send(f, "{\"type\":\"plugin\",\"seq\":16,\"op\":\"REGISTERED\",\"plugin\":{\"socket\":\"/p3\","
                             "\"type\":\"DRAPlugin\",\"name\":\"p3\"}}");
                break;
        case 17:
                source_message(f, 17);
                break;
        }
}

static void initial_state(struct fake *f)
{
        fake_hello(f, 5);
        fake_pods(f, 6, "ADD", "api", 1, pod_text("c", "default", "gamma", "api", 1));
        fake_pods(f, 7, "ADD", "file", 2, pod_text("a", "default", "alpha", "file", 1),
                  pod_text("b", "default", "beta", "file", 1));
        fake_send(f, "{\"type\":\"plugin\",\"seq\":8,\"op\":\"REGISTERED\",\"plugin\":{\"socket\":\"/p1\","
                     "\"type\":\"CSIPlugin\",\"name\":\"p1\",\"versions\":[\"1\"]}}");
        fake_send(f, "{\"type\":\"plugin\",\"seq\":9,\"op\":\"REGISTERED\",\"plugin\":{\"socket\":\"/p2\","
                     "\"type\":\"CSIPlugin\",\"name\":\"p2\"}}");
        fake_synced(f, FIRST_SYNCED, false);
}

static void final_state(struct fake *f)
{
        fake_hello(f, 100);
        fake_pods(f, 101, "ADD", "api", 1, pod_text("c", "default", "gamma", "api", 1));
        fake_pods(f, 102, "ADD", "file", 1, pod_text("a", "default", "alpha", "file", 2));
        fake_pods(f, 103, "ADD", "http", 1, pod_text("d", "web", "delta", "http", 1));
        fake_send(f, "{\"type\":\"plugin\",\"seq\":104,\"op\":\"REGISTERED\",\"plugin\":{\"socket\":\"/p1\","
                     "\"type\":\"CSIPlugin\",\"name\":\"p1\",\"versions\":[\"2\"]}}");
        fake_send(f, "{\"type\":\"plugin\",\"seq\":105,\"op\":\"REGISTERED\",\"plugin\":{\"socket\":\"/p3\","
                     "\"type\":\"DRAPlugin\",\"name\":\"p3\"}}");
        fake_synced(f, 106, false);
        source_message(f, 107);
}

/* The restart world (restart below). */
#define SEEN(day) "\"kubernetes.io/config.seen\":\"2026-01-0" day "T00:00:00Z\""
#define RESTART_POD(uid, gen, day)                                                                                     \
        "{\"metadata\":{\"name\":\"" uid "\",\"namespace\":\"default\",\"uid\":\"" uid                                 \
        "\",\"annotations\":{" SEEN(day) "}},\"spec\":{\"gen\":" gen "}}"

static const char *const want_restart_cache =
        "file/a=" RESTART_POD("a", "1", "2") "\nfile/b=" RESTART_POD("b", "2", "2") "\n";

/* The late world (late below): its pods name their source, as the
 * daemon's do (a SET carries every source's); its final cache. */
#define LATE_POD(uid, src, gen, day)                                                                                   \
        "{\"metadata\":{\"name\":\"" uid "\",\"namespace\":\"default\",\"uid\":\"" uid                                 \
        "\",\"annotations\":{\"kubernetes.io/config.source\":\"" src "\"," SEEN(day) "}},\"spec\":{\"gen\":" gen "}}"

static const char *const want_late_cache =
        "file/a=" LATE_POD("a", "file", "1", "1") "\nhttp/h1=" LATE_POD("h1", "http", "1", "2") "\nhttp/h2=" LATE_POD(
                "h2", "http", "2", "2") "\nhttp/h3=" LATE_POD("h3", "http", "1", "2") "\n";

/* The late world in a snapshot mode: SETs of the merged state. */
static bool late_snapshot;

static void late_hello(struct fake *f, uint64_t seq)
{
        fake_send(f, "{\"type\":\"hello\",\"protocol\":1,\"mode\":\"%s\",\"node\":\"n1\",\"seq\":%" PRIu64 "}",
                  late_snapshot ? "snapshot" : "incremental", seq);
}

static void late_message(struct fake *f, uint64_t seq)
{
        if (seq == 103 && late_snapshot)
                fake_send(f,
                          "{\"type\":\"pods\",\"seq\":103,\"op\":\"SET\",\"source\":\"http\",\"pods\":[%s,%s,%s,%s]}",
                          LATE_POD("a", "file", "1", "1"), LATE_POD("h1", "http", "1", "2"),
                          LATE_POD("h2", "http", "2", "2"), LATE_POD("h3", "http", "1", "2"));
        else if (seq == 103)
                fake_send(f, "{\"type\":\"pods\",\"seq\":103,\"op\":\"ADD\",\"source\":\"http\",\"pods\":[%s,%s,%s]}",
                          LATE_POD("h1", "http", "1", "2"), LATE_POD("h2", "http", "2", "2"),
                          LATE_POD("h3", "http", "1", "2"));
        if (seq == 104)
                fake_send(f, "{\"type\":\"sources_ready\",\"seq\":104,\"sources\":[\"file\",\"http\"]}");
}

static void serve_late(struct fake *f, bool first)
{
        unsigned long long n;

        if (first) {
                late_hello(f, 5);
                fake_send(f, "{\"type\":\"pods\",\"seq\":6,\"op\":\"ADD\",\"source\":\"file\",\"pods\":[%s]}",
                          LATE_POD("a", "file", "1", "1"));
                fake_send(f, "{\"type\":\"pods\",\"seq\":7,\"op\":\"ADD\",\"source\":\"http\",\"pods\":[%s,%s,%s]}",
                          LATE_POD("h1", "http", "1", "1"), LATE_POD("h2", "http", "1", "1"),
                          LATE_POD("h4", "http", "1", "1"));
                fake_synced(f, FIRST_SYNCED, false);
                return;
        }
        if (sscanf(f->first, "{\"resume_after\":%llu}", &n) == 1 && n >= 102 && n <= 104) {
                late_hello(f, 200);
                for (uint64_t s = n + 1; s <= 104; s++)
                        late_message(f, s);
                fake_synced(f, 201, true);
                return;
        }
        if (sscanf(f->first, "{\"resume_after\":%llu}", &n) == 1 && n >= 200) {
                late_hello(f, 300);
                fake_synced(f, 301, true);
                return;
        }
        late_hello(f, 100);
        fake_send(f, "{\"type\":\"pods\",\"seq\":101,\"op\":\"%s\",\"source\":\"file\",\"pods\":[%s]}",
                  late_snapshot ? "SET" : "ADD", LATE_POD("a", "file", "1", "1"));
        fake_synced(f, 102, false);
        late_message(f, 103);
        late_message(f, 104);
}

/* Which world the fake daemon serves. */
static bool restart, late;

static void serve_restart(struct fake *f, bool first)
{
        if (first) {
                fake_hello(f, 5);
                fake_send(f, "{\"type\":\"pods\",\"seq\":6,\"op\":\"ADD\",\"source\":\"file\",\"pods\":[%s,%s]}",
                          RESTART_POD("a", "1", "1"), RESTART_POD("b", "1", "1"));
                fake_synced(f, FIRST_SYNCED, false);
                return;
        }
        fake_hello(f, 100);
        fake_send(f, "{\"type\":\"pods\",\"seq\":101,\"op\":\"ADD\",\"source\":\"file\",\"pods\":[%s,%s]}",
                  RESTART_POD("a", "1", "2"), RESTART_POD("b", "2", "2"));
        fake_synced(f, 102, false);
}

/* Answers one connection's first line as the daemon would. */
static void serve(struct fake *f, bool first)
{
        unsigned long long n;

        if (restart) {
                serve_restart(f, first);
                return;
        }
        if (late) {
                serve_late(f, first);
                return;
        }
        if (first) {
                initial_state(f);
                for (uint64_t s = FIRST_SYNCED + 1; s <= LAST_LIVE; s++)
                        live_message(f, s);
                return;
        }
        if (sscanf(f->first, "{\"resume_after\":%llu}", &n) == 1 && n >= FIRST_SYNCED && n <= LAST_LIVE) {
                fake_hello(f, 200);
                for (uint64_t s = n + 1; s <= LAST_LIVE; s++)
                        live_message(f, s);
                fake_synced(f, 201, true);
                source_message(f, 202);
                return;
        }
        if (sscanf(f->first, "{\"resume_after\":%llu}", &n) == 1 && n >= 100) {
                fake_hello(f, 300);
                fake_synced(f, 301, true);
                source_message(f, 302);
                return;
        }
        final_state(f);
}

static const char *const want_cache =
        "file/a={\"metadata\":{\"name\":\"alpha\",\"namespace\":\"default\",\"uid\":\"a\",\"annotations\":"
        "{\"kubernetes.io/config.source\":\"file\"}},\"spec\":{\"gen\":2}}\n"
        "api/c={\"metadata\":{\"name\":\"gamma\",\"namespace\":\"default\",\"uid\":\"c\",\"annotations\":"
        "{\"kubernetes.io/config.source\":\"api\"}},\"spec\":{\"gen\":1}}\n"
        "http/d={\"metadata\":{\"name\":\"delta\",\"namespace\":\"web\",\"uid\":\"d\",\"annotations\":"
        "{\"kubernetes.io/config.source\":\"http\"}},\"spec\":{\"gen\":1}}\n";

static void hook(bool enter)
{
        failalloc_pause(enter);
}

/* An informer-style handler's model: what its calls give, which must be
 * the cache whatever allocation failed (a record the handler map could
 * not follow is handed on later, diffed against the cache). */
static void i_add(struct podmux_client *c, const struct podmux_pod *p, bool initial, void *data)
{
        (void)c;
        (void)initial;
        hook(true);
        model_put(data, p);
        hook(false);
}

static void i_update(struct podmux_client *c, const struct podmux_pod *old, const struct podmux_pod *p, void *data)
{
        struct rec *r = data;
        bool found = false;

        hook(true);
        for (size_t i = 0; i < r->n; i++)
                found |= strcmp(r->pods[i].uid, podmux_pod_uid(old)) == 0 &&
                         strcmp(r->pods[i].json, podmux_pod_json(old, NULL)) == 0;
        ck_assert_msg(found, "on_update: old %s is not what the handler was given", podmux_pod_uid(old));
        ck_assert_msg(in_source_index(c, p), "on_update: %s not in the source index", podmux_pod_uid(p));
        model_put(r, p);
        hook(false);
}

static void i_delete(struct podmux_client *c, const struct podmux_pod *old, void *data)
{
        struct rec *r = data;
        bool found = false;

        hook(true);
        for (size_t i = 0; i < r->n && !found; i++)
                if (strcmp(r->pods[i].source, podmux_pod_source(old)) == 0 &&
                    strcmp(r->pods[i].uid, podmux_pod_uid(old)) == 0) {
                        model_del(r, i);
                        found = true;
                }
        ck_assert_msg(found, "on_delete: %s was not given", podmux_pod_uid(old));
        ck_assert_msg(!in_source_index(c, old), "on_delete: %s still in the source index", podmux_pod_uid(old));
        hook(false);
}

static const struct podmux_handler iops = {i_add, i_update, i_delete};

/* podmux_client_process() with faults injected into it alone. */
static int proc(struct podmux_client *c)
{
        int r;

        failalloc_pause(false);
        r = podmux_client_process(c);
        failalloc_pause(true);
        return r;
}

static void drain(struct podmux_client *c)
{
        for (int i = 0; i < 100; i++) {
                struct pollfd p = {.fd = podmux_client_fd(c), .events = POLLIN};

                if (proc(c) < 0 || poll(&p, 1, 0) <= 0)
                        return;
        }
}

/* One run; n 0 means no fault.  Returns the allocations the library made
 * while faults were armed. */
static long run_once(long n, bool persist)
{
        struct fake f;
        struct rec r = {.log = BUF_INIT}, ir = {.log = BUF_INIT};
        struct podmux_client *c = NULL;
        long live0, used = 0;
        uint64_t point = 0;
        bool done = false;
        int rounds;

        failalloc_pause(true);
        signal(SIGPIPE, SIG_IGN); /* the fake writes to a client that may have gone */
        fake_init(&f);
        live0 = failalloc_live();
        ck_assert_int_eq(podmux_client_new(f.path, &r, &c), 0);
        rec_attach(&r, c);
        ck_assert_int_eq(podmux_client_add_handler(c, &iops, &ir), 0);
        ck_assert_int_eq(podmux_client_add_index(c, "gen", index_gen, NULL), 0);
        check_indexes(c); /* builds the built-in ones: followed from now on */
        rec_hook = hook;
        client_set_backoff(c, 0, 0);
        failalloc_persist(persist);
        failalloc_arm(n ? n : LONG_MAX); /* 0: count, never fail */
        failalloc_pause(true);
        for (rounds = 0; rounds < 40 && !done; rounds++) {
                char *dump;

                if (persist && rounds == 3) {
                        used = failalloc_count();
                        failalloc_arm(0);
                        failalloc_pause(true);
                }
                if (podmux_client_timeout(c) >= 0) {
                        /* Idle: connect (a failed socket() or connect is
                         * retried on the next round). */
                        (void)proc(c);
                        if (podmux_client_timeout(c) >= 0)
                                continue;
                }
                fake_close(&f);
                f.cfd = accept4(f.lfd, NULL, NULL, SOCK_CLOEXEC);
                ck_assert_int_ge(f.cfd, 0);
                {
                        size_t k = 0;

                        while (k < sizeof(f.first) - 1 && read(f.cfd, f.first + k, 1) == 1 && f.first[k] != '\n')
                                k++;
                        f.first[k] = '\0';
                }
                serve(&f, rounds == 0);
                if (rounds == 0)
                        fake_close(&f); /* the first connection is cut after its messages */
                drain(c);
                dump = cache_dump(c);
                done = podmux_client_timeout(c) < 0 && podmux_client_has_synced(c) &&
                       podmux_client_resume_point(c, &point) && point > LAST_LIVE &&
                       (restart || late || podmux_client_source_state(c, "api", NULL)) &&
                       strcmp(dump, restart ? want_restart_cache
                                    : late  ? want_late_cache
                                            : want_cache) == 0;
                free(dump);
        }
        if (!persist)
                used = failalloc_count();
        failalloc_arm(0);
        failalloc_pause(true);
        if (!done)
                fprintf(stderr, "# handlers saw:\n%.3000s\n", r.log.data);
        ck_assert_msg(done, "fault %ld%s: the client did not converge to the final state", n,
                      persist ? " (persistent)" : "");
        check_model(&r, c);
        check_model(&ir, c);
        check_indexes(c);
        if (late) {
                /* No pod of the late source is removed or added again for
                 * the restart; with no fault, exactly its changes. */
                ck_assert_msg(!strstr(r.log.data, "resync h1") && !strstr(r.log.data, "REMOVE http resync h2") &&
                                      !strstr(r.log.data, "REMOVE http resync h3") &&
                                      (n > 0 || strstr(r.log.data, late_snapshot ? "pods SET http a h1 h2 h3 h4\n"
                                                                                   "pods REMOVE http resync h4\n"
                                                                                 : "pods ADD http h3\npods UPDATE http "
                                                                                   "resync h2\n"
                                                                                   "pods REMOVE http resync h4\n")),
                              "fault %ld: handlers saw %s", n, r.log.data);
        } else if (restart) {
                /* Only b's change is told: a's new config.seen is not one
                 * (with no fault, the state before the restart was seen). */
                ck_assert_msg(!strstr(r.log.data, "resync a") &&
                                      (n > 0 || strstr(r.log.data, "pods UPDATE file resync b\n")),
                              "fault %ld: handlers saw %s", n, r.log.data);
        } else {
                size_t it = 0;
                const char *sock, *json;

                ck_assert(podmux_client_plugin_next(c, &it, &sock, &json));
                ck_assert_str_eq(sock, "/p1");
                ck_assert_ptr_nonnull(strstr(json, "\"2\""));
                ck_assert(podmux_client_plugin_next(c, &it, &sock, NULL));
                ck_assert_str_eq(sock, "/p3");
                ck_assert(!podmux_client_plugin_next(c, &it, &sock, NULL));
                {
                        struct podmux_source_state st;

                        ck_assert(podmux_client_source_state(c, "api", &st));
                        ck_assert_int_eq(st.serving, PODMUX_SERVING_CHECKPOINT);
                        ck_assert_str_eq(st.checkpoint_time, "2026-11-24T09:58:00Z");
                        ck_assert_str_eq(st.checkpoint_resource_version, "48213");
                        /* Told once, whatever failed: never live in between. */
                        ck_assert_msg(!strstr(r.log.data, "source api live"), "fault %ld: handlers saw %s", n,
                                      r.log.data);
                }
        }
        ck_assert_msg(r.errors == 0 || r.last_kind == PODMUX_ERROR_NOMEM || r.last_kind == PODMUX_ERROR_CLOSED ||
                              r.last_kind == PODMUX_ERROR_CONNECT,
                      "fault %ld: error kind %d", n, (int)r.last_kind);
        podmux_client_free(c);
        rec_hook = NULL;
        rec_free(&r);
        rec_free(&ir);
        fake_free(&f);
        ck_assert_msg(failalloc_live() == live0, "fault %ld: %ld blocks leaked", n, failalloc_live() - live0);
        failalloc_pause(false);
        return used;
}

static void sweep(bool persist)
{
        long total;

        if (!failalloc_enabled()) {
                (void)run_once(0, false);
                return;
        }
        total = run_once(0, false);
        ck_assert_int_gt(total, 20);
        for (long n = getenv("SWEEP_FROM") ? atol(getenv("SWEEP_FROM")) : 1; n <= total; n++)
                (void)run_once(n, persist);
}

START_TEST(test_alloc_sweep)
{
        sweep(false);
}
END_TEST

START_TEST(test_alloc_sweep_persistent)
{
        sweep(true);
}
END_TEST

START_TEST(test_alloc_sweep_restart)
{
        restart = true;
        sweep(false);
        sweep(true);
        restart = false;
}
END_TEST

START_TEST(test_alloc_sweep_late_source)
{
        late = true;
        for (int k = 0; k < 2; k++) {
                late_snapshot = k == 1;
                sweep(false);
                sweep(true);
        }
        late = late_snapshot = false;
}
END_TEST

/* Adding an index over a cache, and the first lookup of a built-in one,
 * with the nth allocation failing: -ENOMEM and nothing added (the index
 * is not there, the built-in is built by the next lookup), or done;
 * nothing leaked either way.  Returns the allocations made. */
static long add_index_once(long n)
{
        struct fake f;
        struct rec r = {.log = BUF_INIT};
        struct podmux_client *c = NULL;
        const struct podmux_pod **v = NULL;
        long live0, used;
        size_t k = 0;
        int r1, r2;

        failalloc_pause(true);
        fake_init(&f);
        live0 = failalloc_live();
        ck_assert_int_eq(podmux_client_new(f.path, &r, &c), 0);
        rec_attach(&r, c);
        fake_accept(&f, c);
        initial_state(&f);
        drain(c);
        ck_assert(podmux_client_has_synced(c));
        failalloc_arm(n ? n : LONG_MAX);
        failalloc_pause(false);
        r1 = podmux_client_add_index(c, "gen", index_gen, NULL);
        r2 = podmux_client_by_index(c, PODMUX_INDEX_NAMESPACE, "default", &v, &k);
        used = failalloc_count();
        failalloc_arm(0);
        failalloc_pause(true);
        ck_assert_msg(r1 == 0 || r1 == -ENOMEM, "fault %ld: add_index %d", n, r1);
        ck_assert_msg(r2 == 0 || r2 == -ENOMEM, "fault %ld: by_index %d", n, r2);
        ck_assert_uint_eq(k, r2 == 0 ? 3 : 0);
        free(v);
        if (r1 < 0)
                ck_assert_int_eq(podmux_client_by_index(c, "gen", "odd", &v, &k), -ENOENT);
        else
                check_indexes(c);
        podmux_client_free(c);
        rec_free(&r);
        fake_free(&f);
        ck_assert_msg(failalloc_live() == live0, "fault %ld: %ld blocks leaked", n, failalloc_live() - live0);
        failalloc_pause(false);
        return used;
}

START_TEST(test_alloc_sweep_add_index)
{
        long total;

        if (!failalloc_enabled()) {
                (void)add_index_once(0);
                return;
        }
        total = add_index_once(0);
        ck_assert_int_gt(total, 10);
        for (long n = 1; n <= total; n++)
                (void)add_index_once(n);
}
END_TEST

/* client_msg_parse() of line with its nth allocation failing (none when
 * allocations cannot be failed); *failed says whether one did. */
static int parse_failing(const char *line, size_t len, long n, struct client_msg *m, struct buf *why, bool *failed)
{
        int r;

        failalloc_arm(failalloc_enabled() ? n : 0);
        r = client_msg_parse(line, len, m, why);
        *failed = failalloc_failed();
        failalloc_arm(0);
        return r;
}

/* A pods line whose identities must be decoded (escapes in the names of
 * members and in their values, which the decoder copies aside) with each
 * allocation failing in turn: -ENOMEM, nothing kept and nothing leaked;
 * then the pods as they are. */
START_TEST(test_alloc_msg_decoded_identity)
{
        static const char line[] =
                "{\"type\":\"pods\",\"seq\":4,\"op\":\"ADD\",\"source\":\"file\",\"pods\":["
                "{\"met\\u0061data\":{\"uid\":\"u\\u00e9\",\"n\\u0061me\":\"a\\\"b\",\"namespace\":\"n\\/s\","
                "\"annotations\":{\"kubernetes.io\\/config.source\":\"f\\u0069le\"}},\"spec\":{\"x\":\"\\n\"}},"
                "{\"metadata\":{\"uid\":\"u2\",\"name\":\"c\"}}]}";
        long before = failalloc_live();

        for (long n = 1;; n++) {
                struct client_msg m;
                struct buf why = BUF_INIT;
                bool failed;
                int r;

                r = parse_failing(line, sizeof(line) - 1, n, &m, &why, &failed);
                if (!failed) {
                        ck_assert_int_eq(r, 0);
                        ck_assert_uint_eq(m.n_pods, 2);
                        ck_assert_str_eq(m.pods[0]->uid, "u\xc3\xa9");
                        ck_assert_str_eq(m.pods[0]->name, "a\"b");
                        ck_assert_str_eq(m.pods[0]->ns, "n/s");
                        ck_assert_str_eq(m.pods[0]->source, "file");
                        ck_assert_str_eq(m.pods[1]->uid, "u2");
                        client_msg_clear(&m);
                        buf_free(&why);
                        break;
                }
                ck_assert_msg(r == -ENOMEM, "fault %ld: %d (%s)", n, r, why.data);
                ck_assert_uint_eq(m.n_pods, 0);
                buf_free(&why);
                ck_assert_msg(failalloc_live() == before, "fault %ld: %ld blocks leaked", n, failalloc_live() - before);
        }
        ck_assert_int_eq(failalloc_live(), before);
}
END_TEST

/* The lines whose "pods" or "plugin" is walked after the object (the
 * type comes last) or walked and then replaced (a second "pods"), with
 * each allocation failing in turn: -ENOMEM, nothing kept and nothing
 * leaked; then the message as it is. */
START_TEST(test_alloc_msg_typed_members)
{
        static const struct {
                const char *line;
                size_t pods;
                bool plugin;
        } lines[] = {
                {"{\"pods\":[{\"metadata\":{\"uid\":\"u\",\"name\":\"a\"}}],\"seq\":4,\"op\":\"ADD\",\"source\":\"file\","
                 "\"type\":\"pods\"}",
                 1, false},
                {"{\"type\":\"pods\",\"seq\":4,\"op\":\"ADD\",\"source\":\"file\",\"pods\":[{\"metadata\":{\"uid\":\"u\","
                 "\"name\":\"a\"}}],\"pods\":[{\"metadata\":{\"uid\":\"v\",\"name\":\"b\"}},{\"metadata\":{\"uid\":"
                 "\"w\",\"name\":\"c\"}}]}",
                 2, false},
                {"{\"plugin\":{\"socket\":\"/p.sock\",\"name\":\"x\"},\"seq\":4,\"op\":\"REGISTERED\",\"type\":\"plugin\"}",
                 0, true},
                {"{\"type\":\"synced\",\"seq\":4,\"pods\":[{\"metadata\":{\"uid\":\"u\",\"name\":\"a\"}}],\"plugin\":"
                 "{\"socket\":\"/p\"}}",
                 0, false},
        };
        long before = failalloc_live();

        for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
                for (long n = 1;; n++) {
                        struct client_msg m;
                        struct buf why = BUF_INIT;
                        bool failed;
                        int r;

                        r = parse_failing(lines[i].line, strlen(lines[i].line), n, &m, &why, &failed);
                        buf_free(&why);
                        if (!failed) {
                                ck_assert_msg(r == 0, "line %zu: %d", i, r);
                                ck_assert_uint_eq(m.n_pods, lines[i].pods);
                                ck_assert(!m.plugin_json == !lines[i].plugin);
                                client_msg_clear(&m);
                                break;
                        }
                        ck_assert_msg(r == -ENOMEM, "line %zu fault %ld: %d", i, n, r);
                        ck_assert_uint_eq(m.n_pods, 0);
                        ck_assert_ptr_null(m.plugin_json);
                        ck_assert_msg(failalloc_live() == before, "line %zu fault %ld: %ld blocks leaked", i, n,
                                      failalloc_live() - before);
                }
        }
        ck_assert_int_eq(failalloc_live(), before);
}
END_TEST

/* podmux_record_path out of memory: -ENOMEM, *ret_path untouched,
 * nothing left allocated; then the path. */
START_TEST(test_alloc_record_path)
{
        const char *texts[] = {"{\"path\":\"/m/a.yaml\"}", "{\"path\":\"/m/w?\",\"path_hex\":\"2f6d2f77ff\"}"};

        for (size_t k = 0; k < 2; k++) {
                struct json_object *o = json_tokener_parse(texts[k]);
                long before;

                ck_assert_ptr_nonnull(o);
                before = failalloc_live();
                for (long n = 1;; n++) {
                        char *got = (char *)"untouched";
                        bool failed;
                        int r;

                        failalloc_arm(failalloc_enabled() ? n : 0);
                        r = podmux_record_path(o, &got, NULL);
                        failed = failalloc_failed();
                        failalloc_arm(0);
                        if (!failed) {
                                ck_assert_int_eq(r, 0);
                                ck_assert_str_eq(got, k ? "/m/w\xff" : "/m/a.yaml");
                                free(got);
                                break;
                        }
                        ck_assert_int_eq(r, -ENOMEM);
                        ck_assert_str_eq(got, "untouched");
                        ck_assert_int_le(failalloc_live(), before);
                }
                json_object_put(o);
        }
}
END_TEST

UNIT_MAIN(test_alloc_sweep, test_alloc_sweep_persistent, test_alloc_sweep_restart, test_alloc_sweep_late_source,
          test_alloc_sweep_add_index, test_alloc_record_path, test_alloc_msg_decoded_identity,
          test_alloc_msg_typed_members)
