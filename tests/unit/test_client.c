/*
 * test_client — libpodmux-client against a scripted daemon
 * (tests/unit/fake_stream.h): every corner of protocol 1 a consumer meets
 * (doc/protocol.md).  Each test checks what the handlers saw, line by
 * line, and that those records applied in order give the cache.
 */
#include "fake_stream.h"
#include "unit.h"

#include <json-c/json.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "util/json_get.h"
#include "util/json_parse.h"
#include "../../src/client/client_cache.h"
#include "../../src/client/client_msg.h"

struct t {
        struct fake f;
        struct rec r;
        struct podmux_client *c;
};

static void t_init(struct t *t)
{
        memset(t, 0, sizeof(*t));
        buf_init(&t->r.log);
        fake_init(&t->f);
        ck_assert_int_eq(podmux_client_new(t->f.path, &t->r, &t->c), 0);
        rec_attach(&t->r, t->c);
        client_set_backoff(t->c, 1000, 8000);
}

static void t_free(struct t *t)
{
        podmux_client_free(t->c);
        rec_free(&t->r);
        fake_free(&t->f);
}

static void expect_log(struct t *t, const char *want)
{
        char *have = rec_take(&t->r);

        ck_assert_str_eq(have, want);
        free(have);
}

/* Connects and gives the state: file a, b; api c; then synced at 10. */
static void start(struct t *t)
{
        fake_accept(&t->f, t->c);
        fake_hello(&t->f, 5);
        fake_pods(&t->f, 6, "ADD", "file", 2, pod_text("a", "default", "alpha", "file", 1),
                  pod_text("b", "kube-system", "beta", "file", 1));
        fake_pods(&t->f, 7, "ADD", "api", 1, pod_text("c", "default", "gamma", "api", 1));
        fake_synced(&t->f, 10, false);
        pump(t->c);
}

START_TEST(test_full_state)
{
        struct t t;
        uint64_t point = 0;
        char *dump;

        t_init(&t);
        ck_assert_int_eq(podmux_client_timeout(t.c), 0);
        start(&t);
        ck_assert_str_eq(t.f.first, "{}");
        /* Held until synced, then given as the difference from the empty
         * cache: per source (sorted), ADD. */
        expect_log(&t, "pods ADD api c\npods ADD file a b\nsynced state\n");
        ck_assert(podmux_client_has_synced(t.c));
        ck_assert(podmux_client_resume_point(t.c, &point));
        ck_assert_uint_eq(point, 10);
        dump = cache_dump(t.c);
        /* The daemon's order: namespace, name, uid. */
        ck_assert_str_eq(dump, "file/a={\"metadata\":{\"name\":\"alpha\",\"namespace\":\"default\",\"uid\":\"a\","
                               "\"annotations\":{\"kubernetes.io/config.source\":\"file\"}},\"spec\":{\"gen\":1}}\n"
                               "api/c={\"metadata\":{\"name\":\"gamma\",\"namespace\":\"default\",\"uid\":\"c\","
                               "\"annotations\":{\"kubernetes.io/config.source\":\"api\"}},\"spec\":{\"gen\":1}}\n"
                               "file/b={\"metadata\":{\"name\":\"beta\",\"namespace\":\"kube-system\",\"uid\":\"b\","
                               "\"annotations\":{\"kubernetes.io/config.source\":\"file\"}},\"spec\":{\"gen\":1}}\n");
        free(dump);
        ck_assert_str_eq(podmux_pod_name(podmux_client_pod_by_uid(t.c, "b")), "beta");
        ck_assert_str_eq(podmux_pod_uid(podmux_client_pod_by_name(t.c, "default", "gamma")), "c");
        ck_assert_ptr_null(podmux_client_pod_by_uid(t.c, "zz"));
        ck_assert_ptr_null(podmux_client_pod_by_name(t.c, "default", "zz"));
        {
                struct json_object *o = NULL;

                ck_assert_int_eq(podmux_pod_object(podmux_client_pod_by_uid(t.c, "a"), &o), 0);
                ck_assert_int_eq(json_object_get_int(json_object_object_get(json_object_object_get(o, "spec"), "gen")), 1);
                json_object_put(o);
        }
        check_model(&t.r, t.c);
        ck_assert_int_eq(t.r.errors, 0);
        t_free(&t);
}
END_TEST

START_TEST(test_live_ops_and_seq_gaps)
{
        struct t t;
        uint64_t point = 0;
        const struct podmux_pod *kept;

        t_init(&t);
        start(&t);
        free(rec_take(&t.r));
        kept = podmux_pod_ref(podmux_client_pod_by_uid(t.c, "a"));
        /* Numbers jump (other consumers' messages take numbers too). */
        fake_pods(&t.f, 20, "UPDATE", "file", 1, pod_text("a", "default", "alpha", "file", 2));
        fake_pods(&t.f, 57, "REMOVE", "file", 1, pod_text("b", "kube-system", "beta", "file", 1));
        fake_pods(&t.f, 58, "DELETE", "api", 1, pod_text("c", "default", "gamma", "api", 2));
        fake_pods(&t.f, 90, "RECONCILE", "api", 1, pod_text("c", "default", "gamma", "api", 3));
        fake_pods(&t.f, 1000, "ADD", "http", 1, pod_text("d", "web", "delta", "http", 1));
        fake_send(&t.f, "{\"type\":\"sources_ready\",\"seq\":1001,\"sources\":[\"api\",\"file\",\"http\"]}");
        /* The same list again tells nothing new. */
        fake_send(&t.f, "{\"type\":\"sources_ready\",\"seq\":1002,\"sources\":[\"api\",\"file\",\"http\"]}");
        pump(t.c);
        expect_log(&t, "pods UPDATE file a\npods REMOVE file b\npods DELETE api c\npods RECONCILE api c\n"
                       "pods ADD http d\nready api file http\n");
        ck_assert(podmux_client_resume_point(t.c, &point));
        ck_assert_uint_eq(point, 1002);
        ck_assert_uint_eq(podmux_client_pod_count(t.c), 3);
        ck_assert_ptr_null(podmux_client_pod_by_uid(t.c, "b"));
        /* A pod held by the application outlives its replacement. */
        ck_assert_ptr_nonnull(strstr(podmux_pod_json(kept, NULL), "\"gen\":1"));
        podmux_pod_unref(kept);
        ck_assert_ptr_nonnull(strstr(podmux_pod_json(podmux_client_pod_by_uid(t.c, "a"), NULL), "\"gen\":2"));
        check_model(&t.r, t.c);
        ck_assert_int_eq(t.r.errors, 0);
        t_free(&t);
}
END_TEST

START_TEST(test_resume_replay)
{
        struct t t;
        uint64_t point = 0;

        t_init(&t);
        start(&t);
        fake_pods(&t.f, 20, "UPDATE", "file", 1, pod_text("a", "default", "alpha", "file", 2));
        pump(t.c);
        free(rec_take(&t.r));
        /* The daemon cuts us (a restart of the connection). */
        fake_close(&t.f);
        pump(t.c);
        expect_log(&t, "error 4 -\nreconnect after 20\n");
        ck_assert_int_eq(t.r.last_kind, PODMUX_ERROR_CLOSED);
        fake_accept(&t.f, t.c);
        ck_assert_str_eq(t.f.first, "{\"resume_after\":20}");
        fake_hello(&t.f, 40);
        /* The replay: old numbers, before hello's. */
        fake_pods(&t.f, 21, "ADD", "file", 1, pod_text("e", "default", "eps", "file", 1));
        fake_pods(&t.f, 25, "UPDATE", "file", 1, pod_text("a", "default", "alpha", "file", 3));
        fake_send(&t.f, "{\"type\":\"plugin\",\"seq\":26,\"op\":\"FAILED\",\"plugin\":{\"socket\":\"/p/x.sock\","
                        "\"type\":\"CSIPlugin\",\"name\":\"x\"},\"error\":\"bad\"}");
        /* Nothing is applied before synced. */
        pump(t.c);
        ck_assert_str_eq(t.r.log.data, "");
        fake_synced(&t.f, 41, true);
        pump(t.c);
        expect_log(&t, "pods ADD file e\npods UPDATE file a\nplugin FAILED /p/x.sock error\nsynced resumed\n");
        ck_assert(podmux_client_resume_point(t.c, &point));
        ck_assert_uint_eq(point, 41);
        check_model(&t.r, t.c);
        t_free(&t);
}
END_TEST

START_TEST(test_failed_resume_full_state)
{
        struct t t;

        t_init(&t);
        start(&t);
        fake_send(&t.f, "{\"type\":\"plugin\",\"seq\":11,\"op\":\"REGISTERED\",\"plugin\":{\"socket\":\"/p/a.sock\","
                        "\"type\":\"CSIPlugin\",\"name\":\"a\"}}");
        fake_send(&t.f, "{\"type\":\"plugin\",\"seq\":12,\"op\":\"REGISTERED\",\"plugin\":{\"socket\":\"/p/b.sock\","
                        "\"type\":\"CSIPlugin\",\"name\":\"b\"}}");
        fake_send(&t.f, "{\"type\":\"error\",\"seq\":13,\"reason\":\"SlowConsumer\",\"message\":\"too slow\"}");
        pump(t.c);
        free(rec_take(&t.r));
        ck_assert_int_eq(t.r.last_kind, PODMUX_ERROR_SERVER);
        ck_assert_int_eq(t.r.last_err, -ENOBUFS);
        ck_assert(!t.r.last_fatal);
        fake_accept(&t.f, t.c);
        ck_assert_str_eq(t.f.first, "{\"resume_after\":12}");
        /* 12 is no longer in the history: the full state. a changed, b
         * gone, c the same, d new; plugin a the same, b gone, c new. */
        fake_hello(&t.f, 500);
        fake_pods(&t.f, 501, "ADD", "api", 1, pod_text("c", "default", "gamma", "api", 1));
        fake_pods(&t.f, 502, "ADD", "file", 2, pod_text("a", "default", "alpha", "file", 9),
                  pod_text("d", "default", "delta", "file", 1));
        fake_send(&t.f, "{\"type\":\"plugin\",\"seq\":503,\"op\":\"REGISTERED\",\"plugin\":{\"socket\":\"/p/a.sock\","
                        "\"type\":\"CSIPlugin\",\"name\":\"a\"}}");
        fake_send(&t.f, "{\"type\":\"plugin\",\"seq\":504,\"op\":\"REGISTERED\",\"plugin\":{\"socket\":\"/p/c.sock\","
                        "\"type\":\"DevicePlugin\",\"name\":\"c\"}}");
        fake_synced(&t.f, 505, false);
        fake_send(&t.f, "{\"type\":\"sources_ready\",\"seq\":506,\"sources\":[\"api\",\"file\"]}");
        pump(t.c);
        expect_log(&t, "pods REMOVE file resync b\npods ADD file resync d\npods UPDATE file resync a\n"
                       "plugin DEREGISTERED /p/b.sock resync\nplugin REGISTERED /p/c.sock resync\n"
                       "synced state\nready api file\n");
        check_model(&t.r, t.c);
        {
                size_t it = 0;
                const char *sock;

                ck_assert(podmux_client_plugin_next(t.c, &it, &sock, NULL));
                ck_assert_str_eq(sock, "/p/a.sock");
                ck_assert(podmux_client_plugin_next(t.c, &it, &sock, NULL));
                ck_assert_str_eq(sock, "/p/c.sock");
                ck_assert(!podmux_client_plugin_next(t.c, &it, &sock, NULL));
        }
        t_free(&t);
}
END_TEST

START_TEST(test_partial_line_after_cut)
{
        struct t t;
        const char half[] = "{\"type\":\"pods\",\"seq\":31,\"op\":\"ADD\",\"source\":\"file\",\"pods\":[{\"meta";

        t_init(&t);
        start(&t);
        free(rec_take(&t.r));
        fake_pods(&t.f, 30, "UPDATE", "file", 1, pod_text("a", "default", "alpha", "file", 2));
        fake_write(&t.f, half, sizeof(half) - 1);
        fake_close(&t.f);
        pump(t.c);
        /* The whole message is applied, the partial line dropped, and the
         * resume comes right after the last whole message. */
        expect_log(&t, "pods UPDATE file a\nerror 4 -\nreconnect after 30\n");
        fake_accept(&t.f, t.c);
        ck_assert_str_eq(t.f.first, "{\"resume_after\":30}");
        check_model(&t.r, t.c);
        t_free(&t);
}
END_TEST

START_TEST(test_unknown_type_ignored)
{
        struct t t;
        uint64_t point = 0;

        t_init(&t);
        fake_accept(&t.f, t.c);
        fake_hello(&t.f, 5);
        fake_send(&t.f, "{\"type\":\"future\",\"seq\":6,\"anything\":[1,{\"x\":null}]}");
        fake_pods(&t.f, 7, "ADD", "file", 1, pod_text("a", "default", "alpha", "file", 1));
        fake_synced(&t.f, 8, false);
        fake_send(&t.f, "{\"seq\":9,\"type\":\"status\",\"protocol\":1}");
        /* Members this library does not know are ignored too. */
        fake_send(&t.f, "{\"type\":\"pods\",\"seq\":10,\"op\":\"UPDATE\",\"source\":\"file\",\"later\":{\"a\":1},"
                        "\"pods\":[%s]}",
                  "{\"metadata\":{\"uid\":\"a\",\"name\":\"alpha\",\"namespace\":\"default\"},\"x\":2}");
        pump(t.c);
        expect_log(&t, "pods ADD file a\nsynced state\npods UPDATE file a\n");
        ck_assert_int_eq(t.r.errors, 0);
        ck_assert(podmux_client_resume_point(t.c, &point));
        ck_assert_uint_eq(point, 10);
        /* A pod without the annotation takes the message's source. */
        ck_assert_str_eq(podmux_pod_source(podmux_client_pod_by_uid(t.c, "a")), "file");
        check_model(&t.r, t.c);
        t_free(&t);
}
END_TEST

/* "pods" and "plugin" are walked only in the message they belong to:
 * in another (a type this library does not know, or one it does) they
 * are members it does not know, ignored whatever their shape; where the
 * type comes after them, or is repeated, the last type decides. */
START_TEST(test_typed_members_of_other_messages)
{
        static const char *const bad[] = {
                /* The last "type" makes it a pods message: its pods count. */
                "{\"type\":\"synced\",\"seq\":20,\"pods\":[1],\"type\":\"pods\",\"op\":\"ADD\",\"source\":\"file\"}",
                "{\"plugin\":[],\"seq\":20,\"op\":\"REGISTERED\",\"type\":\"plugin\"}",
                "{\"type\":\"pods\",\"seq\":20,\"op\":\"ADD\",\"source\":\"file\",\"pods\":{}}",
                /* Stepped over, but still JSON. */
                "{\"type\":\"future\",\"seq\":20,\"pods\":[1,}",
        };
        struct t t;
        uint64_t point = 0;
        char *a2 = pod_text("a", "default", "alpha", "file", 2), *a3 = pod_text("a", "default", "alpha", "file", 3);

        t_init(&t);
        start(&t);
        free(rec_take(&t.r));
        fake_send(&t.f, "{\"type\":\"pod_summary\",\"seq\":11,\"pods\":[\"default/a\"],\"plugin\":7}");
        fake_send(&t.f, "{\"type\":\"sources_ready\",\"seq\":12,\"sources\":[\"file\"],\"plugin\":\"n/a\"}");
        fake_send(&t.f, "{\"type\":\"synced\",\"seq\":13,\"resumed\":false,\"pods\":[{\"count\":1}]}");
        fake_send(&t.f,
                  "{\"type\":\"pods\",\"seq\":14,\"op\":\"ADD\",\"source\":\"file\",\"pods\":[1],\"type\":\"x\"}");
        /* A pods message whose type comes last, its pods first. */
        fake_send(&t.f, "{\"pods\":[%s],\"seq\":15,\"op\":\"UPDATE\",\"source\":\"file\",\"type\":\"pods\"}", a2);
        fake_send(&t.f, "{\"plugin\":{\"socket\":\"/p.sock\"},\"seq\":16,\"op\":\"REGISTERED\",\"type\":\"plugin\"}");
        /* The last of two "pods": the first walked, then replaced. */
        fake_send(&t.f,
                  "{\"type\":\"pods\",\"seq\":17,\"op\":\"UPDATE\",\"source\":\"file\",\"pods\":[1],\"pods\":[%s]}",
                  a3);
        /* The daemon's error, which ends the connection: its reason. */
        fake_send(&t.f, "{\"type\":\"error\",\"seq\":18,\"reason\":\"Later\",\"pods\":{},\"plugin\":{\"socket\":1}}");
        pump(t.c);
        expect_log(&t, "ready file\npods UPDATE file a\nplugin REGISTERED /p.sock\npods UPDATE file a\nerror 3 Later\n"
                       "reconnect after 17\n");
        ck_assert_int_eq(t.r.last_kind, PODMUX_ERROR_SERVER);
        ck_assert(podmux_client_resume_point(t.c, &point));
        ck_assert_uint_eq(point, 17);
        ck_assert_str_eq(podmux_pod_json(podmux_client_pod_by_uid(t.c, "a"), NULL), a3);
        check_model(&t.r, t.c);
        t_free(&t);
        free(a2);
        free(a3);

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                t_init(&t);
                start(&t);
                t.r.errors = 0;
                fake_send(&t.f, "%s", bad[i]);
                pump(t.c);
                ck_assert_msg(t.r.errors == 1 && t.r.last_kind == PODMUX_ERROR_BAD_MESSAGE,
                              "line %zu: %s: errors %d kind %d", i, bad[i], t.r.errors, (int)t.r.last_kind);
                t_free(&t);
        }
}
END_TEST

START_TEST(test_protocol_mismatch)
{
        struct t t;

        t_init(&t);
        fake_accept(&t.f, t.c);
        /* Whatever else a protocol 2 hello says, the number decides. */
        fake_send(&t.f, "{\"type\":\"hello\",\"protocol\":2,\"seq\":\"new-style\",\"mode\":7}");
        pump(t.c);
        expect_log(&t, "error 2 - fatal\n");
        ck_assert_int_eq(t.r.last_err, -EPROTONOSUPPORT);
        ck_assert_int_eq(podmux_client_process(t.c), -EPROTONOSUPPORT);
        ck_assert_int_eq(podmux_client_timeout(t.c), -1);
        ck_assert_int_eq(t.r.reconnects, 0);
        t_free(&t);
}
END_TEST

START_TEST(test_daemon_restart)
{
        struct t t;

        t_init(&t);
        start(&t);
        free(rec_take(&t.r));
        /* The daemon exits: its error, then the socket file goes. */
        fake_send(&t.f, "{\"type\":\"error\",\"seq\":11,\"reason\":\"ShuttingDown\",\"message\":\"bye\"}");
        fake_close(&t.f);
        fake_unlisten(&t.f);
        pump(t.c);
        expect_log(&t, "error 3 ShuttingDown\nreconnect after 10\n");
        /* No socket yet: retried with a growing backoff, never fatal. */
        ck_assert_int_eq(wait_due(t.c), 0);
        ck_assert_int_eq(t.r.last_kind, PODMUX_ERROR_CONNECT);
        ck_assert_int_eq(t.r.last_err, -ENOENT);
        ck_assert(!t.r.last_fatal);
        ck_assert_int_eq(wait_due(t.c), 0);
        expect_log(&t, "error 0 -\nreconnect after 10\nerror 0 -\nreconnect after 10\n");
        /* The new daemon numbers from its start time: 10 is older than
         * its history, so it sends the full state. */
        fake_listen(&t.f);
        fake_accept(&t.f, t.c);
        ck_assert_str_eq(t.f.first, "{\"resume_after\":10}");
        fake_hello(&t.f, 9000000);
        fake_pods(&t.f, 9000001, "ADD", "file", 2, pod_text("a", "default", "alpha", "file", 1),
                  pod_text("b", "kube-system", "beta", "file", 1));
        fake_synced(&t.f, 9000002, false);
        pump(t.c);
        /* The api source has not delivered yet in the new daemon: its pod
         * is held over, not removed (doc/protocol.md, "A restarted
         * daemon's late sources"). */
        expect_log(&t, "synced state\n");
        ck_assert(podmux_client_has_synced(t.c));
        ck_assert_str_eq(podmux_pod_source(podmux_client_pod_by_uid(t.c, "c")), "api");
        check_model(&t.r, t.c);
        /* It delivers the same pod: nothing of it is handed on (the ADD
         * goes on empty, as the daemon's own marker of a source seen). */
        fake_pods(&t.f, 9000003, "ADD", "api", 1, pod_text("c", "default", "gamma", "api", 1));
        fake_send(&t.f, "{\"type\":\"sources_ready\",\"seq\":9000004,\"sources\":[\"api\",\"file\"]}");
        pump(t.c);
        expect_log(&t, "pods ADD api\nready api file\n");
        ck_assert_uint_eq(podmux_client_pod_count(t.c), 3);
        check_model(&t.r, t.c);
        t_free(&t);
}
END_TEST

/* Pods of the sources listed, as a state before a restart: file a, b;
 * api c, d, e, x; http h. */
static void start_three_sources(struct t *t, const char *mode)
{
        fake_accept(&t->f, t->c);
        fake_send(&t->f, "{\"type\":\"hello\",\"protocol\":1,\"mode\":\"%s\",\"node\":\"n1\",\"seq\":5}", mode);
        fake_pods(&t->f, 6, "ADD", "file", 2, pod_text("a", "default", "alpha", "file", 1),
                  pod_text("b", "default", "beta", "file", 1));
        fake_pods(&t->f, 7, "ADD", "api", 4, pod_text("c", "default", "gamma", "api", 1),
                  pod_text("d", "default", "delta", "api", 1), pod_text("e", "default", "eps", "api", 1),
                  pod_text("x", "default", "xi", "api", 1));
        fake_pods(&t->f, 8, "ADD", "http", 1, pod_text("h", "default", "eta", "http", 1));
        fake_synced(&t->f, 10, false);
        fake_send(&t->f, "{\"type\":\"sources_ready\",\"seq\":11,\"sources\":[\"api\",\"file\",\"http\"]}");
        fake_send(&t->f, "{\"type\":\"error\",\"seq\":12,\"reason\":\"ShuttingDown\",\"message\":\"bye\"}");
        pump(t->c);
        free(rec_take(&t->r));
}

/*
 * A daemon restart whose api source delivers late (the API server
 * unreachable for a while): the full state has file and http only.  No
 * api pod is removed then; when api delivers, an unchanged pod is not
 * handed on, a changed one is an UPDATE flagged resync, a new one goes in
 * the ADD; another op on a held pod goes as sent; sources_ready removes
 * the pod api did not deliver again.  Meanwhile has_synced() holds.
 */
START_TEST(test_restart_late_source)
{
        struct t t;

        t_init(&t);
        start_three_sources(&t, "incremental");
        fake_accept(&t.f, t.c);
        fake_hello(&t.f, 900);
        fake_pods(&t.f, 901, "ADD", "file", 2, pod_text("a", "default", "alpha", "file", 1),
                  pod_text("b", "default", "beta", "file", 2));
        fake_pods(&t.f, 902, "ADD", "http", 0); /* http delivered: none */
        fake_synced(&t.f, 903, false);
        pump(t.c);
        expect_log(&t, "pods UPDATE file resync b\npods REMOVE http resync h\nsynced state\n");
        ck_assert(podmux_client_has_synced(t.c));
        ck_assert_uint_eq(podmux_client_pod_count(t.c), 6);
        check_model(&t.r, t.c);
        /* Live changes of other sources go as usual. */
        fake_pods(&t.f, 904, "UPDATE", "file", 1, pod_text("a", "default", "alpha", "file", 3));
        fake_pods(&t.f, 905, "UPDATE", "api", 1, pod_text("x", "default", "xi", "api", 2));
        fake_pods(&t.f, 906, "ADD", "api", 3, pod_text("c", "default", "gamma", "api", 1),
                  pod_text("d", "default", "delta", "api", 2), pod_text("f", "default", "phi", "api", 1));
        pump(t.c);
        expect_log(&t, "pods UPDATE file a\npods UPDATE api x\npods ADD api f\npods UPDATE api resync d\n");
        ck_assert_uint_eq(podmux_client_pod_count(t.c), 7);
        check_model(&t.r, t.c);
        fake_send(&t.f, "{\"type\":\"sources_ready\",\"seq\":907,\"sources\":[\"api\",\"file\",\"http\"]}");
        pump(t.c);
        /* The same list as before the restart: not told again. */
        expect_log(&t, "pods REMOVE api resync e\n");
        ck_assert_ptr_null(podmux_client_pod_by_uid(t.c, "e"));
        ck_assert_uint_eq(podmux_client_pod_count(t.c), 6);
        check_model(&t.r, t.c);
        /* Nothing is held any more: an ADD goes as sent. */
        fake_pods(&t.f, 908, "ADD", "api", 1, pod_text("c", "default", "gamma", "api", 1));
        pump(t.c);
        expect_log(&t, "pods ADD api c\n");
        check_model(&t.r, t.c);
        t_free(&t);
}
END_TEST

/* A held pod whose source is not in the new run's sources_ready (no
 * longer configured) is removed then, flagged resync. */
START_TEST(test_restart_source_gone)
{
        struct t t;

        t_init(&t);
        start_three_sources(&t, "incremental");
        fake_accept(&t.f, t.c);
        fake_hello(&t.f, 900);
        fake_pods(&t.f, 901, "ADD", "file", 2, pod_text("a", "default", "alpha", "file", 1),
                  pod_text("b", "default", "beta", "file", 1));
        fake_pods(&t.f, 902, "ADD", "api", 4, pod_text("c", "default", "gamma", "api", 1),
                  pod_text("d", "default", "delta", "api", 1), pod_text("e", "default", "eps", "api", 1),
                  pod_text("x", "default", "xi", "api", 1));
        fake_synced(&t.f, 903, false);
        fake_send(&t.f, "{\"type\":\"sources_ready\",\"seq\":904,\"sources\":[\"api\",\"file\"]}");
        pump(t.c);
        expect_log(&t, "synced state\npods REMOVE http resync h\nready api file\n");
        ck_assert_uint_eq(podmux_client_pod_count(t.c), 6);
        check_model(&t.r, t.c);
        t_free(&t);
}
END_TEST

/* The hold-over lasts across connections: a replay applies as live, and a
 * further full state holds again what its sources did not deliver, and
 * compares what they did. */
START_TEST(test_restart_held_across_reconnects)
{
        struct t t;

        t_init(&t);
        start_three_sources(&t, "incremental");
        fake_accept(&t.f, t.c);
        fake_hello(&t.f, 900);
        fake_pods(&t.f, 901, "ADD", "file", 2, pod_text("a", "default", "alpha", "file", 1),
                  pod_text("b", "default", "beta", "file", 1));
        fake_synced(&t.f, 903, false);
        fake_send(&t.f, "{\"type\":\"error\",\"seq\":904,\"reason\":\"SlowConsumer\",\"message\":\"slow\"}");
        pump(t.c);
        expect_log(&t, "synced state\nerror 3 SlowConsumer\nreconnect after 903\n");
        /* A replay: http delivers h again, unchanged. */
        fake_accept(&t.f, t.c);
        fake_hello(&t.f, 1000);
        fake_pods(&t.f, 905, "ADD", "http", 1, pod_text("h", "default", "eta", "http", 1));
        fake_synced(&t.f, 1001, true);
        fake_send(&t.f, "{\"type\":\"error\",\"seq\":1002,\"reason\":\"SlowConsumer\",\"message\":\"slow\"}");
        pump(t.c);
        expect_log(&t, "pods ADD http\nsynced resumed\nerror 3 SlowConsumer\nreconnect after 1001\n");
        /* The point left the history: a full state, api still missing. */
        fake_accept(&t.f, t.c);
        fake_hello(&t.f, 2000);
        fake_pods(&t.f, 2001, "ADD", "file", 2, pod_text("a", "default", "alpha", "file", 1),
                  pod_text("b", "default", "beta", "file", 1));
        fake_pods(&t.f, 2002, "ADD", "http", 1, pod_text("h", "default", "eta", "http", 1));
        fake_synced(&t.f, 2003, false);
        fake_send(&t.f, "{\"type\":\"error\",\"seq\":2004,\"reason\":\"SlowConsumer\",\"message\":\"slow\"}");
        pump(t.c);
        expect_log(&t, "synced state\nerror 3 SlowConsumer\nreconnect after 2003\n");
        ck_assert_uint_eq(podmux_client_pod_count(t.c), 7);
        /* Another, api in it: its pods compared as any. */
        fake_accept(&t.f, t.c);
        fake_hello(&t.f, 3000);
        fake_pods(&t.f, 3001, "ADD", "api", 3, pod_text("c", "default", "gamma", "api", 2),
                  pod_text("d", "default", "delta", "api", 1), pod_text("x", "default", "xi", "api", 1));
        fake_pods(&t.f, 3002, "ADD", "file", 2, pod_text("a", "default", "alpha", "file", 1),
                  pod_text("b", "default", "beta", "file", 1));
        fake_pods(&t.f, 3003, "ADD", "http", 1, pod_text("h", "default", "eta", "http", 1));
        fake_synced(&t.f, 3004, false);
        pump(t.c);
        expect_log(&t, "pods REMOVE api resync e\npods UPDATE api resync c\nsynced state\n");
        check_model(&t.r, t.c);
        t_free(&t);
}
END_TEST

/* The snapshot modes: the full state is one SET per source that
 * delivered; a live SET of the late source replaces the pods it carries,
 * keeps the held ones it does not, and is handed on with the whole cache;
 * sources_ready removes those. */
START_TEST(test_restart_late_source_snapshot)
{
        static const char *const modes[] = {"snapshot", "snapshot-and-updates"};

        for (size_t k = 0; k < 2; k++) {
                struct t t;

                t_init(&t);
                start_three_sources(&t, modes[k]);
                fake_accept(&t.f, t.c);
                fake_send(&t.f, "{\"type\":\"hello\",\"protocol\":1,\"mode\":\"%s\",\"node\":\"n1\",\"seq\":900}",
                          modes[k]);
                fake_pods(&t.f, 901, "SET", "file", 3, pod_text("a", "default", "alpha", "file", 1),
                          pod_text("b", "default", "beta", "file", 1), pod_text("h", "default", "eta", "http", 1));
                fake_pods(&t.f, 902, "SET", "http", 3, pod_text("a", "default", "alpha", "file", 1),
                          pod_text("b", "default", "beta", "file", 1), pod_text("h", "default", "eta", "http", 1));
                fake_synced(&t.f, 903, false);
                pump(t.c);
                expect_log(&t, "synced state\n");
                ck_assert_uint_eq(podmux_client_pod_count(t.c), 7);
                fake_pods(&t.f, 904, "SET", "api", 6, pod_text("a", "default", "alpha", "file", 1),
                          pod_text("b", "default", "beta", "file", 1), pod_text("c", "default", "gamma", "api", 2),
                          pod_text("d", "default", "delta", "api", 1), pod_text("h", "default", "eta", "http", 1),
                          pod_text("g", "default", "gimel", "api", 1));
                pump(t.c);
                /* The cache's order: namespace, name (alpha, beta, delta,
                 * eps, eta, gamma, gimel, xi). */
                expect_log(&t, "pods SET api a b d e h c g x\n");
                ck_assert_uint_eq(podmux_client_pod_count(t.c), 8);
                check_model(&t.r, t.c);
                fake_send(&t.f, "{\"type\":\"sources_ready\",\"seq\":905,\"sources\":[\"api\",\"file\",\"http\"]}");
                pump(t.c);
                expect_log(&t, "pods REMOVE api resync e x\n");
                ck_assert_uint_eq(podmux_client_pod_count(t.c), 6);
                check_model(&t.r, t.c);
                t_free(&t);
        }
}
END_TEST

/* tests/fixtures/resync-diff.json: pairs of one pod's texts before and
 * after a daemon restart, and whether the resync diff tells the pod. */
struct restart_case {
        const char *name, *before, *after;
        bool changed;
};

/* A table of tests/fixtures (name: its file name), read whole. */
static json_object *fixture(const char *name)
{
        const char *top = getenv("PODMUX_SRCDIR");
        char path[4096];
        json_object *o;

        snprintf(path, sizeof(path), "%s/tests/fixtures/%s", top ? top : ".", name);
        o = json_object_from_file(path);
        ck_assert_msg(o != NULL, "cannot read %s (set PODMUX_SRCDIR)", path);
        return o;
}

static json_object *load_restart_cases(struct restart_case **ret, size_t *ret_n)
{
        json_object *o = fixture("resync-diff.json"), *cases;
        struct restart_case *v;
        size_t n;

        cases = json_object_object_get(o, "cases");
        n = json_object_array_length(cases);
        v = calloc(n, sizeof(*v));
        ck_assert_ptr_nonnull(v);
        for (size_t i = 0; i < n; i++) {
                json_object *c = json_object_array_get_idx(cases, i);

                v[i].name = json_object_get_string(json_object_object_get(c, "name"));
                v[i].before = json_object_get_string(json_object_object_get(c, "before"));
                v[i].after = json_object_get_string(json_object_object_get(c, "after"));
                v[i].changed = json_object_get_boolean(json_object_object_get(c, "changed"));
        }
        *ret = v;
        *ret_n = n;
        return o;
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sorts the words of the first line of s from byte at on, in place. */
static void sort_words(char *s, size_t at)
{
        char *end = strchr(s + at, '\n'), *w[64], out[4096] = "";
        size_t n = 0;

        ck_assert_ptr_nonnull(end);
        *end = '\0';
        for (char *tok = strtok_r(s + at, " ", &end); tok && n < 64; tok = strtok_r(NULL, " ", &end))
                w[n++] = tok;
        qsort(w, n, sizeof(*w), cmp_str);
        for (size_t i = 0; i < n; i++)
                snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%s", i ? " " : "", w[i]);
        memmove(s + at, out, strlen(out));
        s[at + strlen(out)] = '\n';
}

/* The full state after a daemon restart is compared with the cache as the
 * merger compares: a pod that differs only in what a run of the daemon
 * stamps on it is not told, but the cache holds its new text. */
START_TEST(test_restart_same_pods_not_told)
{
        struct restart_case *cases;
        size_t n, n_told = 0;
        json_object *fixture = load_restart_cases(&cases, &n);
        const char **told = calloc(n, sizeof(*told));
        struct buf want = BUF_INIT;
        char *have;
        struct t t;

        ck_assert_ptr_nonnull(told);
        t_init(&t);
        fake_accept(&t.f, t.c);
        fake_hello(&t.f, 5);
        for (size_t i = 0; i < n; i++)
                fake_send(&t.f, "{\"type\":\"pods\",\"seq\":%zu,\"op\":\"ADD\",\"source\":\"file\",\"pods\":[%s]}",
                          6 + i, cases[i].before);
        fake_synced(&t.f, 100, false);
        pump(t.c);
        free(rec_take(&t.r));
        fake_send(&t.f, "{\"type\":\"error\",\"seq\":101,\"reason\":\"ShuttingDown\",\"message\":\"bye\"}");
        pump(t.c);
        free(rec_take(&t.r));
        fake_accept(&t.f, t.c);
        fake_hello(&t.f, 9000);
        for (size_t i = 0; i < n; i++)
                fake_send(&t.f, "{\"type\":\"pods\",\"seq\":%zu,\"op\":\"ADD\",\"source\":\"file\",\"pods\":[%s]}",
                          9001 + i, cases[i].after);
        fake_synced(&t.f, 9900, false);
        pump(t.c);
        /* One UPDATE record for the source with the changed pods (their
         * UIDs are the cases' names; the record is in the cache's order,
         * sorted here). */
        for (size_t i = 0; i < n; i++)
                if (cases[i].changed)
                        told[n_told++] = cases[i].name;
        qsort(told, n_told, sizeof(*told), cmp_str);
        ck_assert_int_eq(buf_puts(&want, "pods UPDATE file resync"), 0);
        for (size_t i = 0; i < n_told; i++)
                ck_assert_int_eq(buf_printf(&want, " %s", told[i]), 0);
        ck_assert_int_eq(buf_puts(&want, "\nsynced state\n"), 0);
        have = rec_take(&t.r);
        sort_words(have, strlen("pods UPDATE file resync "));
        ck_assert_str_eq(have, want.data);
        free(have);
        /* The cache holds every new text, told or not. */
        for (size_t i = 0; i < n; i++)
                ck_assert_str_eq(podmux_pod_json(podmux_client_pod_by_uid(t.c, cases[i].name), NULL), cases[i].after);
        check_model(&t.r, t.c);
        buf_free(&want);
        free(told);
        free(cases);
        json_object_put(fixture);
        t_free(&t);
}
END_TEST

/* The rule by itself, both ways round, and on texts that are not JSON. */
START_TEST(test_pod_text_same)
{
        struct restart_case *cases;
        size_t n;
        json_object *fixture = load_restart_cases(&cases, &n);

        for (size_t i = 0; i < n; i++) {
                const char *a = cases[i].before, *b = cases[i].after;

                ck_assert_msg(client_pod_text_same(a, strlen(a), b, strlen(b)) == !cases[i].changed, "case %s",
                              cases[i].name);
                ck_assert_int_eq(client_pod_text_same(b, strlen(b), a, strlen(a)), !cases[i].changed);
                ck_assert_int_eq(client_pod_text_same(a, strlen(a), a, strlen(a)), 1);
        }
        ck_assert_int_eq(client_pod_text_same("{", 1, "[]", 2), -EINVAL);
        ck_assert_int_eq(client_pod_text_same("{}", 2, "{", 1), -EINVAL);
        /* Not objects at all: nothing compared, the same. */
        ck_assert_int_eq(client_pod_text_same("[]", 2, "1", 1), 1);
        free(cases);
        json_object_put(fixture);
}
END_TEST

/* A bad line's error message is one line: the line quoted up to its end
 * (not into the lines after it in the buffer), at most 80 bytes of it, and
 * no control character from the line or the daemon's own message. */
START_TEST(test_error_message_one_line)
{
        static const struct {
                const char *send, *want_end;
        } cases[] = {
                {"not json\n{\"type\":\"synced\",\"seq\":20}\n",
                 "(byte 0: a line that is not a JSON object): not json"},
                {"{\"x\":1,\"\x01\"}\n\n\n", "): {\"x\":1,\"?\"}"},
                /* 100 bytes: cut at 80, before the 3-byte character at 79. */
                {"[\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\xe2\x82\xac"
                 "aaaaaaaaaaaaaaaa\"]\n",
                 ": [\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa..."},
                {"{\"type\":\"error\",\"seq\":20,\"reason\":\"Other\",\"message\":\"two\\nlines\\r\"}\n",
                 "closed the connection: Other: two?lines?"},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct t t;
                size_t ml, wl = strlen(cases[i].want_end);

                t_init(&t);
                start(&t);
                fake_write(&t.f, cases[i].send, strlen(cases[i].send));
                pump(t.c);
                ml = strlen(t.r.last_message);
                ck_assert_msg(t.r.errors == 1, "case %zu: %d errors", i, t.r.errors);
                ck_assert_msg(!strpbrk(t.r.last_message, "\n\r\x01"), "case %zu: message over lines: %s", i,
                              t.r.last_message);
                ck_assert_msg(ml >= wl && strcmp(t.r.last_message + ml - wl, cases[i].want_end) == 0,
                              "case %zu: message \"%s\" does not end with \"%s\"", i, t.r.last_message,
                              cases[i].want_end);
                t_free(&t);
        }
}
END_TEST

/* A client started from a saved resume point holds only what the replay
 * carried: has_synced() stays false (its cache is not the daemon's whole
 * state) though the replay is done; a later full state is handed on whole
 * (one SET, every plugin REGISTERED), since what went away before the
 * point is not known here; then has_synced() is true. */
START_TEST(test_saved_resume_partial_cache)
{
        struct t t;
        uint64_t point = 0;

        t_init(&t);
        podmux_client_set_resume(t.c, 77);
        ck_assert(!podmux_client_has_synced(t.c));
        fake_accept(&t.f, t.c);
        ck_assert_str_eq(t.f.first, "{\"resume_after\":77}");
        fake_hello(&t.f, 200);
        fake_pods(&t.f, 80, "UPDATE", "file", 1, pod_text("a", "default", "alpha", "file", 2));
        fake_synced(&t.f, 201, true);
        pump(t.c);
        expect_log(&t, "pods UPDATE file a\nsynced resumed\n");
        ck_assert(!podmux_client_has_synced(t.c));
        ck_assert(podmux_client_resume_point(t.c, &point));
        ck_assert_uint_eq(point, 201);
        ck_assert_uint_eq(podmux_client_pod_count(t.c), 1);
        /* Another replay: still only part of the state. */
        fake_close(&t.f);
        pump(t.c);
        free(rec_take(&t.r));
        fake_accept(&t.f, t.c);
        ck_assert_str_eq(t.f.first, "{\"resume_after\":201}");
        fake_hello(&t.f, 300);
        fake_pods(&t.f, 250, "ADD", "api", 1, pod_text("c", "default", "gamma", "api", 1));
        fake_synced(&t.f, 301, true);
        pump(t.c);
        expect_log(&t, "pods ADD api c\nsynced resumed\n");
        ck_assert(!podmux_client_has_synced(t.c));
        /* The daemon restarted: the full state, told whole. */
        fake_send(&t.f, "{\"type\":\"error\",\"seq\":302,\"reason\":\"ShuttingDown\",\"message\":\"bye\"}");
        pump(t.c);
        free(rec_take(&t.r));
        fake_accept(&t.f, t.c);
        fake_hello(&t.f, 9000);
        fake_pods(&t.f, 9001, "ADD", "file", 2, pod_text("a", "default", "alpha", "file", 2),
                  pod_text("b", "kube-system", "beta", "file", 1));
        fake_send(&t.f, "{\"type\":\"plugin\",\"seq\":9002,\"op\":\"REGISTERED\",\"plugin\":{\"socket\":\"/p/a.sock\","
                        "\"type\":\"CSIPlugin\",\"name\":\"a\"}}");
        fake_synced(&t.f, 9003, false);
        pump(t.c);
        expect_log(&t, "pods SET * resync a b\nplugin REGISTERED /p/a.sock resync\nsynced state\n");
        ck_assert(podmux_client_has_synced(t.c));
        ck_assert_uint_eq(podmux_client_pod_count(t.c), 2);
        check_model(&t.r, t.c);
        /* From now on the cache is whole: a later full state is compared. */
        fake_send(&t.f, "{\"type\":\"error\",\"seq\":9004,\"reason\":\"SlowConsumer\",\"message\":\"slow\"}");
        pump(t.c);
        free(rec_take(&t.r));
        fake_accept(&t.f, t.c);
        fake_hello(&t.f, 9100);
        fake_pods(&t.f, 9101, "ADD", "file", 1, pod_text("a", "default", "alpha", "file", 2));
        fake_send(&t.f, "{\"type\":\"plugin\",\"seq\":9102,\"op\":\"REGISTERED\",\"plugin\":{\"socket\":\"/p/a.sock\","
                        "\"type\":\"CSIPlugin\",\"name\":\"a\"}}");
        fake_synced(&t.f, 9103, false);
        pump(t.c);
        expect_log(&t, "pods REMOVE file resync b\nsynced state\n");
        ck_assert(podmux_client_has_synced(t.c));
        check_model(&t.r, t.c);
        t_free(&t);
}
END_TEST

START_TEST(test_seq_going_back)
{
        struct t t;

        t_init(&t);
        start(&t);
        fake_pods(&t.f, 20, "UPDATE", "file", 1, pod_text("a", "default", "alpha", "file", 2));
        fake_pods(&t.f, 20, "UPDATE", "file", 1, pod_text("a", "default", "alpha", "file", 3));
        pump(t.c);
        free(rec_take(&t.r));
        ck_assert_int_eq(t.r.last_kind, PODMUX_ERROR_BAD_MESSAGE);
        fake_accept(&t.f, t.c);
        ck_assert_str_eq(t.f.first, "{\"resume_after\":20}");
        t_free(&t);
}
END_TEST

/* A pod's identity as a json-c tree of its text gives it: what the
 * library read before it stopped building trees (the reference). */
static void tree_identity(const char *text, const char **ret_uid, const char **ret_name, const char **ret_ns,
                          const char **ret_src, json_object **ret_tree)
{
        json_object *o = NULL, *md;

        ck_assert_int_eq(json_parse(text, strlen(text), CLIENT_MSG_MAX_DEPTH, &o, NULL), 0);
        md = json_get(o, "metadata");
        *ret_uid = json_get_str(md, "uid", NULL);
        *ret_name = json_get_str(md, "name", NULL);
        *ret_ns = json_get_str(md, "namespace", "");
        *ret_src = json_get_str(json_get(md, "annotations"), "kubernetes.io/config.source", "");
        *ret_tree = o;
}

/* tests/fixtures/message-lines.json: each line taken or refused as
 * malformed, as the Go package and the Python module take it; a line
 * taken holds the pods or plugin of its own type only. */
START_TEST(test_message_lines_fixture)
{
        json_object *o = fixture("message-lines.json"), *cases = json_object_object_get(o, "cases");

        ck_assert_uint_gt(json_object_array_length(cases), 0);
        for (size_t i = 0; i < json_object_array_length(cases); i++) {
                json_object *c = json_object_array_get_idx(cases, i);
                const char *name = json_object_get_string(json_object_object_get(c, "name"));
                const char *line = json_object_get_string(json_object_object_get(c, "line"));
                bool ok = json_object_get_boolean(json_object_object_get(c, "ok"));
                struct buf why = BUF_INIT;
                struct client_msg m;
                int r = client_msg_parse(line, strlen(line), &m, &why);

                ck_assert_msg(ok ? r == 0 : r == -EINVAL, "%s: %d (%s)", name, r, why.data ? why.data : "");
                ck_assert_msg(r < 0 || m.type == CLIENT_MSG_PODS || m.n_pods == 0, "%s: pods kept", name);
                ck_assert_msg(r < 0 || m.type == CLIENT_MSG_PLUGIN || !m.plugin_json, "%s: plugin kept", name);
                client_msg_clear(&m);
                buf_free(&why);
        }
        json_object_put(o);
}
END_TEST

/* The identity read while stepping over a pod is the one a json-c tree of
 * it holds, for pods written every way JSON allows: escapes in names and
 * values, a NUL (json-c cuts there), repeated members (the last wins),
 * members of other types, deep values; and the pods a tree refuses (or
 * whose identity is missing) are refused, with nothing kept. */
START_TEST(test_pod_identity_as_tree)
{
        static const char *const pods[] = {
                "{\"metadata\":{\"uid\":\"u1\",\"name\":\"a\",\"namespace\":\"n\"}}",
                "{\"metadata\":{\"name\":\"a\",\"uid\":\"u1\",\"annotations\":{\"kubernetes.io/"
                "config.source\":\"api\"}}}",
                "{\"m\\u0065tadata\":{\"\\u0075id\":\"u\\u00e9\\n\",\"name\":\"a\\\"b\",\"namespace\":\"\\ud800x\"}}",
                "{\"metadata\":{\"uid\":\"u\\u0000tail\",\"name\":\"a\",\"uid\\u0000x\":\"u2\"}}",
                "{\"metadata\":{\"uid\":\"u1\",\"name\":\"a\"},\"metadata\":{\"uid\":\"u2\",\"name\":\"b\"}}",
                "{\"metadata\":{\"uid\":\"u1\",\"name\":\"a\",\"namespace\":7,\"uid\":\"u3\"}}",
                "{\"metadata\":{\"uid\":\"u1\",\"name\":\"a\",\"annotations\":{\"kubernetes.io\\/config.source\":"
                "\"file\",\"x\":[1,{\"y\":null}]},\"annotations\":{\"kubernetes.io/config.source\":true}}}",
                "{\"spec\":{\"a\":[[[[{}]]]],\"b\":-1.5e3},\"metadata\":{\"uid\":\"u1\",\"name\":\"\"},\"s\":\"\xff\"}",
                " {\"metadata\" : {\"uid\" : \"u1\" , \"name\" : \"a\" , \"annotations\" : [ ] } } ",
                "{\"metadata\":{\"uid\":\"u1\",\"name\":\"a\"},\"metadata\":5}",
                "{\"metadata\":{\"uid\":\"\",\"name\":\"a\"}}",
                "{\"metadata\":{\"uid\":1,\"name\":\"a\"}}",
                "{\"metadata\":{\"uid\":\"u1\",\"name\":null}}",
                "[{\"metadata\":{\"uid\":\"u1\",\"name\":\"a\"}}]",
                "\"pod\"",
                "{\"metadata\":{\"uid\":\"u1\",\"name\":\"a\",}}",
                "{\"metadata\":{\"uid\":\"u1\",\"name\":\"a\"},\"spec\":tru}",
                "{\"metadata\":{\"uid\":\"u1\" \"name\":\"a\"}}",
                "{\"metadata\":{\"uid\":\"u1\",\"name\":\"a\\x\"}}",
        };
        struct buf deep = BUF_INIT;

        /* A value nested as deep as a message may, and one level more. */
        for (int extra = 0; extra < 2; extra++) {
                buf_reset(&deep);
                ck_assert_int_eq(buf_puts(&deep, "{\"metadata\":{\"uid\":\"u1\",\"name\":\"a\",\"labels\":"), 0);
                for (int i = 0; i < CLIENT_MSG_MAX_DEPTH - 3 + extra; i++)
                        ck_assert_int_eq(buf_putc(&deep, '['), 0);
                for (int i = 0; i < CLIENT_MSG_MAX_DEPTH - 3 + extra; i++)
                        ck_assert_int_eq(buf_putc(&deep, ']'), 0);
                ck_assert_int_eq(buf_puts(&deep, "}}"), 0);
                for (size_t i = 0; i <= sizeof(pods) / sizeof(pods[0]); i++) {
                        const char *pod = i < sizeof(pods) / sizeof(pods[0]) ? pods[i] : deep.data;
                        const char *uid = NULL, *name = NULL, *ns = NULL, *src = NULL;
                        json_object *tree = NULL, *probe = NULL;
                        struct buf line = BUF_INIT, why = BUF_INIT;
                        struct client_msg m;
                        bool ok = json_parse(pod, strlen(pod), CLIENT_MSG_MAX_DEPTH, &probe, NULL) == 0;
                        int r;

                        json_object_put(probe);
                        if (ok)
                                tree_identity(pod, &uid, &name, &ns, &src, &tree);
                        ok = ok && json_object_is_type(tree, json_type_object) && uid && *uid && name;
                        ck_assert_int_eq(buf_printf(&line,
                                                    "{\"type\":\"pods\",\"seq\":3,\"op\":\"SET\",\"source\":\"*\","
                                                    "\"pods\":[%s]}",
                                                    pod),
                                         0);
                        r = client_msg_parse(line.data, line.len, &m, &why);
                        ck_assert_msg(r == (ok ? 0 : -EINVAL), "%s: %d (%s)", pod, r, why.data);
                        if (ok) {
                                ck_assert_uint_eq(m.n_pods, 1);
                                ck_assert_str_eq(m.pods[0]->uid, uid);
                                ck_assert_str_eq(m.pods[0]->name, name);
                                ck_assert_str_eq(m.pods[0]->ns, ns);
                                ck_assert_str_eq(m.pods[0]->ann_source, src);
                                ck_assert_uint_eq(m.pods[0]->len, strlen(pod) - (pod[0] == ' ' ? 2 : 0));
                        } else {
                                ck_assert_msg(why.len > 0, "%s: no reason", pod);
                                ck_assert_uint_eq(m.n_pods, 0);
                        }
                        client_msg_clear(&m);
                        json_object_put(tree);
                        buf_free(&line);
                        buf_free(&why);
                }
        }
        buf_free(&deep);
}
END_TEST

START_TEST(test_malformed_lines)
{
        static const char *const bad[] = {
                "not json",
                "[1,2]",
                "{\"type\":\"pods\",\"seq\":20}",                                                 /* no op */
                "{\"type\":\"pods\",\"seq\":20,\"op\":\"MOVE\",\"source\":\"file\",\"pods\":[]}", /* unknown op */
                "{\"type\":\"pods\",\"seq\":20,\"op\":\"ADD\",\"source\":\"file\",\"pods\":[{\"metadata\":{}}]}",
                "{\"type\":\"pods\",\"seq\":20,\"op\":\"ADD\",\"source\":\"file\",\"pods\":{}}",
                "{\"type\":\"pods\",\"seq\":-1,\"op\":\"ADD\",\"source\":\"file\",\"pods\":[]}",
                "{\"type\":\"pods\",\"seq\":20,\"op\":\"ADD\",\"source\":\"file\",\"pods\":[]} x",
                "{\"type\":7,\"seq\":20}",
                "{\"seq\":20}",
                "{\"type\":\"synced\",\"seq\":20,\"resumed\":\"yes\"}",
                "{\"type\":\"plugin\",\"seq\":20,\"op\":\"REGISTERED\",\"plugin\":[]}",
                "{\"type\":\"sources_ready\",\"seq\":20,\"sources\":[1]}",
                "{\"type\":\"error\",\"seq\":20}",
                "{\"type\":\"source\",\"seq\":20,\"state\":\"live\"}", /* no source */
                "{\"type\":\"source\",\"seq\":20,\"source\":\"api\"}", /* no state */
                "{\"type\":\"source\",\"seq\":20,\"source\":\"api\",\"state\":1}",
                "{\"type\":\"source\",\"seq\":20,\"source\":\"api\",\"state\":\"checkpoint\",\"checkpoint\":\"x\"}",
                "{\"type\":\"source\",\"seq\":20,\"source\":\"api\",\"state\":\"checkpoint\",\"checkpoint\":{\"time\":"
                "5}}",
                "{\"type\":\"source\",\"seq\":20,\"source\":\"api\",\"state\":\"checkpoint\",\"checkpoint\":"
                "{\"resource_version\":[]}}",
                "{\"type\":\"hello\",\"protocol\":1,\"seq\":21}", /* a second hello */
                "{\"type\":\"pods\",\"seq\":20,\"op\":\"ADD\",\"source\":\"file\",\"pods\":[{\"metadata\":{\"uid\":"
                "\"\xff\"}",
        };

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct t t;
                char *dump, *after;

                t_init(&t);
                start(&t);
                dump = cache_dump(t.c);
                t.r.errors = 0;
                fake_send(&t.f, "%s", bad[i]);
                pump(t.c);
                ck_assert_msg(t.r.errors == 1 && t.r.last_kind == PODMUX_ERROR_BAD_MESSAGE,
                              "line %zu: %s: errors %d kind %d", i, bad[i], t.r.errors, (int)t.r.last_kind);
                after = cache_dump(t.c);
                ck_assert_str_eq(after, dump); /* nothing applied */
                fake_accept(&t.f, t.c);
                ck_assert_str_eq(t.f.first, "{\"resume_after\":10}");
                free(dump);
                free(after);
                t_free(&t);
        }
}
END_TEST

START_TEST(test_bad_before_hello)
{
        struct t t;

        t_init(&t);
        fake_accept(&t.f, t.c);
        fake_synced(&t.f, 3, false);
        pump(t.c);
        ck_assert_int_eq(t.r.last_kind, PODMUX_ERROR_BAD_MESSAGE);
        ck_assert(!t.r.last_fatal);
        t_free(&t);
}
END_TEST

/* The names tests/fixtures/informer-scenarios.json ("server_errors") gives
 * the error kinds (in enum podmux_error_kind's order) and errnos. */
static int kind_named(const char *name)
{
        static const char *const kinds[] = {"connect", "permission",  "protocol", "server",
                                            "closed",  "bad_message", "nomem"};

        for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
                if (strcmp(name, kinds[i]) == 0)
                        return (int)i;
        ck_abort_msg("unknown kind %s", name);
        return -1;
}

static int errno_named(const char *name)
{
        static const struct {
                const char *name;
                int err;
        } errs[] = {
                {"EACCES", EACCES}, {"EINVAL", EINVAL},       {"ENOBUFS", ENOBUFS}, {"EUSERS", EUSERS},
                {"ENOMEM", ENOMEM}, {"ESHUTDOWN", ESHUTDOWN}, {"EIO", EIO},
        };

        for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++)
                if (strcmp(name, errs[i].name) == 0)
                        return errs[i].err;
        ck_abort_msg("unknown errno %s", name);
        return 0;
}

START_TEST(test_server_errors)
{
        json_object *o = fixture("informer-scenarios.json"), *cases;

        cases = json_object_object_get(o, "server_errors");
        ck_assert_uint_gt(json_object_array_length(cases), 0);
        for (size_t i = 0; i < json_object_array_length(cases); i++) {
                json_object *k = json_object_array_get_idx(cases, i);
                const char *reason = json_object_get_string(json_object_object_get(k, "reason"));
                int kind = kind_named(json_object_get_string(json_object_object_get(k, "kind")));
                int err = -errno_named(json_object_get_string(json_object_object_get(k, "errno")));
                bool fatal = json_object_get_boolean(json_object_object_get(k, "fatal"));
                struct t t;

                t_init(&t);
                fake_accept(&t.f, t.c);
                /* A refused connection gets the error without a hello. */
                fake_send(&t.f, "{\"type\":\"error\",\"seq\":4,\"reason\":\"%s\",\"message\":\"m\"}", reason);
                pump(t.c);
                ck_assert_msg((int)t.r.last_kind == kind && t.r.last_err == err && t.r.last_fatal == fatal,
                              "%s: kind %d errno %d fatal %d, want %d %d %d", reason, (int)t.r.last_kind, t.r.last_err,
                              t.r.last_fatal, kind, err, fatal);
                ck_assert_int_eq(podmux_client_process(t.c), fatal ? err : 0);
                ck_assert_int_eq(t.r.reconnects, fatal ? 0 : 1);
                t_free(&t);
        }
        json_object_put(o);
}
END_TEST

/* The daemon's reason is handed on whole, however long. */
START_TEST(test_long_server_reason)
{
        char reason[300];
        char want[400];
        struct t t;

        memset(reason, 'R', sizeof(reason) - 1);
        reason[sizeof(reason) - 1] = '\0';
        t_init(&t);
        start(&t);
        free(rec_take(&t.r));
        fake_send(&t.f, "{\"type\":\"error\",\"seq\":20,\"reason\":\"%s\",\"message\":\"m\"}", reason);
        pump(t.c);
        snprintf(want, sizeof(want), "error 3 %s\nreconnect after 10\n", reason);
        expect_log(&t, want);
        t_free(&t);
}
END_TEST

START_TEST(test_wrong_path)
{
        struct rec r = {.log = BUF_INIT};
        struct podmux_client *c = NULL;

        ck_assert_int_eq(podmux_client_new("", NULL, &c), -EINVAL);
        ck_assert_int_eq(podmux_client_new("/nonexistent/podmux.sock", &r, &c), 0);
        rec_attach(&r, c);
        podmux_client_set_flags(c, PODMUX_CLIENT_NO_RECONNECT);
        ck_assert_int_eq(podmux_client_process(c), -ENOENT);
        ck_assert_int_eq(r.last_kind, PODMUX_ERROR_CONNECT);
        ck_assert(r.last_fatal);
        podmux_client_free(c);
        rec_free(&r);

        /* A regular file and a directory: no socket. */
        {
                char dir[] = "/tmp/podmux-client-XXXXXX", file[64];
                const char *paths[2] = {dir, file};
                int fd;

                ck_assert_ptr_nonnull(mkdtemp(dir));
                snprintf(file, sizeof(file), "%s/regular", dir);
                fd = open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
                ck_assert_int_ge(fd, 0);
                close(fd);
                for (size_t i = 0; i < 2; i++) {
                        memset(&r, 0, sizeof(r));
                        buf_init(&r.log);
                        ck_assert_int_eq(podmux_client_new(paths[i], &r, &c), 0);
                        rec_attach(&r, c);
                        podmux_client_set_flags(c, PODMUX_CLIENT_NO_RECONNECT);
                        ck_assert_int_eq(podmux_client_process(c), -ENOTSOCK);
                        ck_assert_int_eq(r.last_kind, PODMUX_ERROR_CONNECT);
                        podmux_client_free(c);
                        rec_free(&r);
                }
                ck_assert_int_eq(unlink(file), 0);
                ck_assert_int_eq(rmdir(dir), 0);
        }

        memset(&r, 0, sizeof(r));
        buf_init(&r.log);
        {
                char longp[200];

                memset(longp, 'x', sizeof(longp) - 1);
                longp[0] = '/';
                longp[sizeof(longp) - 1] = '\0';
                ck_assert_int_eq(podmux_client_new(longp, &r, &c), 0);
                rec_attach(&r, c);
                ck_assert_int_eq(podmux_client_process(c), -ENAMETOOLONG);
                ck_assert(r.last_fatal);
                podmux_client_free(c);
                rec_free(&r);
        }
}
END_TEST

START_TEST(test_permission_refused)
{
        struct t t;

        if (geteuid() == 0)
                return; /* root connects whatever the mode */
        t_init(&t);
        ck_assert_int_eq(chmod(t.f.path, 0), 0);
        ck_assert_int_eq(podmux_client_process(t.c), -EACCES);
        ck_assert_int_eq(t.r.last_kind, PODMUX_ERROR_PERMISSION);
        ck_assert(t.r.last_fatal);
        t_free(&t);
}
END_TEST

START_TEST(test_snapshot_set)
{
        struct t t;

        t_init(&t);
        fake_accept(&t.f, t.c);
        fake_send(&t.f, "{\"type\":\"hello\",\"protocol\":1,\"mode\":\"snapshot\",\"node\":\"n1\",\"seq\":5}");
        /* One SET per source, each the whole merged state, keyed by each
         * pod's own source annotation. */
        fake_pods(&t.f, 6, "SET", "api", 2, pod_text("a", "default", "alpha", "file", 1),
                  pod_text("c", "default", "gamma", "api", 1));
        fake_pods(&t.f, 7, "SET", "file", 2, pod_text("a", "default", "alpha", "file", 1),
                  pod_text("c", "default", "gamma", "api", 1));
        fake_synced(&t.f, 8, false);
        fake_pods(&t.f, 9, "SET", "file", 2, pod_text("c", "default", "gamma", "api", 1),
                  pod_text("d", "default", "delta", "file", 1));
        pump(t.c);
        expect_log(&t, "pods ADD api c\npods ADD file a\nsynced state\npods SET file c d\n");
        ck_assert_str_eq(podmux_pod_source(podmux_client_pod_by_uid(t.c, "c")), "api");
        ck_assert_uint_eq(podmux_client_pod_count(t.c), 2);
        check_model(&t.r, t.c);
        t_free(&t);
}
END_TEST

START_TEST(test_max_line)
{
        struct t t;

        t_init(&t);
        start(&t);
        podmux_client_set_max_line(t.c, 400);
        fake_pods(&t.f, 20, "ADD", "file", 3, pod_text("x", "default", "x", "file", 1),
                  pod_text("y", "default", "y", "file", 1), pod_text("z", "default", "z", "file", 1));
        pump(t.c);
        ck_assert_int_eq(t.r.last_kind, PODMUX_ERROR_BAD_MESSAGE);
        ck_assert_int_eq(t.r.last_err, -EMSGSIZE);
        ck_assert_ptr_null(podmux_client_pod_by_uid(t.c, "x"));
        t_free(&t);
}
END_TEST

START_TEST(test_stop_and_run)
{
        struct t t;

        t_init(&t);
        t.r.stop_on_pods = true;
        fake_accept(&t.f, t.c);
        fake_hello(&t.f, 5);
        fake_pods(&t.f, 6, "ADD", "file", 1, pod_text("a", "default", "alpha", "file", 1));
        fake_synced(&t.f, 7, false);
        fake_pods(&t.f, 8, "ADD", "file", 1, pod_text("b", "default", "beta", "file", 1));
        /* run() returns when a handler stops the client; nothing after. */
        ck_assert_int_eq(podmux_client_run(t.c, -1), -ECANCELED);
        expect_log(&t, "pods ADD file a\n");
        ck_assert_int_eq(podmux_client_process(t.c), -ECANCELED);
        ck_assert_uint_eq(podmux_client_pod_count(t.c), 1);
        t_free(&t);
}
END_TEST

/* A handler that stops the client in a replay: the replay goes no
 * further, nothing after the handler is applied, and the resume point is
 * the last message the handlers saw, so a client resuming from it loses
 * nothing. */
START_TEST(test_stop_mid_replay)
{
        struct t t;
        uint64_t point = 0;
        char *a2 = pod_text("a", "default", "alpha", "file", 2);

        t_init(&t);
        start(&t);
        fake_pods(&t.f, 20, "UPDATE", "file", 1, strdup(a2));
        pump(t.c);
        fake_close(&t.f);
        pump(t.c);
        free(rec_take(&t.r));
        fake_accept(&t.f, t.c);
        ck_assert_str_eq(t.f.first, "{\"resume_after\":20}");
        fake_hello(&t.f, 40);
        fake_pods(&t.f, 21, "ADD", "file", 1, pod_text("e", "default", "eps", "file", 1));
        fake_pods(&t.f, 25, "UPDATE", "file", 1, pod_text("a", "default", "alpha", "file", 3));
        fake_synced(&t.f, 41, true);
        t.r.stop_on_pods = true;
        ck_assert_int_eq(podmux_client_run(t.c, -1), -ECANCELED);
        expect_log(&t, "pods ADD file e\n");
        ck_assert(podmux_client_resume_point(t.c, &point));
        ck_assert_uint_eq(point, 21);
        ck_assert_str_eq(podmux_pod_json(podmux_client_pod_by_uid(t.c, "a"), NULL), a2);
        check_model(&t.r, t.c);
        free(a2);
        t_free(&t);
}
END_TEST

/* A source handler that stops the client as the first live message ends
 * the sources' confirmation (a source not said again is live): that
 * message is not applied. */
START_TEST(test_stop_from_source_handler)
{
        struct t t;
        uint64_t point = 0;

        t_init(&t);
        fake_accept(&t.f, t.c);
        fake_hello(&t.f, 100);
        fake_synced(&t.f, 101, false);
        fake_send(&t.f, "{\"type\":\"source\",\"seq\":102,\"source\":\"api\",\"state\":\"checkpoint\"}");
        pump(t.c);
        fake_close(&t.f);
        pump(t.c);
        free(rec_take(&t.r));
        fake_accept(&t.f, t.c);
        ck_assert_str_eq(t.f.first, "{\"resume_after\":102}");
        fake_hello(&t.f, 200);
        fake_synced(&t.f, 201, true);
        fake_pods(&t.f, 202, "ADD", "file", 1, pod_text("a", "default", "alpha", "file", 1));
        t.r.stop_on_source = true;
        ck_assert_int_eq(podmux_client_run(t.c, -1), -ECANCELED);
        expect_log(&t, "synced resumed\nsource api live 0 resync\n");
        ck_assert(podmux_client_resume_point(t.c, &point));
        ck_assert_uint_eq(point, 201);
        ck_assert_uint_eq(podmux_client_pod_count(t.c), 0);
        t_free(&t);
}
END_TEST

/* podmux_client_stop() outside a handler: an application's loop polling
 * the descriptor need not wait for it to be readable, as the timeout is
 * due at once, and the next podmux_client_process() closes the
 * connection. */
START_TEST(test_stop_outside_handler)
{
        struct t t;
        char b;

        t_init(&t);
        start(&t);
        free(rec_take(&t.r));
        ck_assert_int_eq(podmux_client_timeout(t.c), -1);
        podmux_client_stop(t.c);
        ck_assert_int_eq(podmux_client_timeout(t.c), 0);
        ck_assert_int_eq(podmux_client_process(t.c), -ECANCELED);
        ck_assert_int_eq(recv(t.f.cfd, &b, 1, MSG_DONTWAIT), 0);
        ck_assert_int_eq(podmux_client_timeout(t.c), -1);
        ck_assert_uint_eq(podmux_client_pod_count(t.c), 3); /* the cache stays readable */
        expect_log(&t, "");
        t_free(&t);
}
END_TEST

START_TEST(test_run_timeout)
{
        struct t t;

        t_init(&t);
        start(&t);
        ck_assert_int_eq(podmux_client_run(t.c, 0), 0);
        ck_assert_int_eq(podmux_client_run(t.c, 20), 0);
        t_free(&t);
}
END_TEST

static void count_line(struct podmux_client *c, const char *line, size_t len, void *data)
{
        struct t *t = podmux_client_data(c);

        (void)data;
        (void)buf_printf(&t->r.log, "line %.*s\n", (int)len, line);
}

static void count_log(struct podmux_client *c, enum podmux_log_level level, const char *line, void *data)
{
        struct t *t = podmux_client_data(c);

        (void)data;
        ck_assert_ptr_nonnull(strstr(line, t->f.path)); /* every line names the socket */
        t->r.errors += 100;
}

START_TEST(test_saved_resume_lines_and_log)
{
        struct t t;
        uint64_t point = 0;

        t_init(&t);
        /* Handlers get the client's data: here the test itself. */
        podmux_client_free(t.c);
        ck_assert_int_eq(podmux_client_new(t.f.path, &t, &t.c), 0);
        client_set_backoff(t.c, 1000, 8000);
        podmux_client_on_line(t.c, count_line);
        podmux_client_on_log(t.c, count_log);
        podmux_client_set_resume(t.c, 77);
        ck_assert(podmux_client_resume_point(t.c, &point));
        ck_assert_uint_eq(point, 77);
        fake_accept(&t.f, t.c);
        ck_assert_str_eq(t.f.first, "{\"resume_after\":77}");
        fake_hello(&t.f, 5);
        fake_synced(&t.f, 6, false);
        pump(t.c);
        expect_log(&t, "line {\"type\":\"hello\",\"protocol\":1,\"mode\":\"incremental\",\"node\":\"n1\",\"seq\":5}\n"
                       "line {\"type\":\"synced\",\"seq\":6,\"resumed\":false}\n");
        ck_assert_int_ge(t.r.errors, 100); /* the log handler was called */
        ck_assert(podmux_client_has_synced(t.c));
        t_free(&t);
}
END_TEST

/* A pod is its source and UID (doc/protocol.md): a live upsert that
 * carries it under another name or namespace replaces the pod held (no
 * second entry), a REMOVE finds it whatever name it carries, and a SET
 * holds one pod per source and UID (the later one). */
START_TEST(test_renamed_same_uid)
{
        struct t t;
        char *dump;

        t_init(&t);
        start(&t);
        free(rec_take(&t.r));
        fake_pods(&t.f, 20, "UPDATE", "file", 1, pod_text("a", "default", "zeta", "file", 2));
        fake_pods(&t.f, 21, "ADD", "file", 1, pod_text("b", "other", "beta", "file", 2));
        pump(t.c);
        expect_log(&t, "pods UPDATE file a\npods ADD file b\n");
        ck_assert_uint_eq(podmux_client_pod_count(t.c), 3);
        ck_assert_ptr_null(podmux_client_pod_by_name(t.c, "default", "alpha"));
        ck_assert_str_eq(podmux_pod_uid(podmux_client_pod_by_name(t.c, "default", "zeta")), "a");
        ck_assert_ptr_null(podmux_client_pod_by_name(t.c, "kube-system", "beta"));
        ck_assert_str_eq(podmux_pod_uid(podmux_client_pod_by_name(t.c, "other", "beta")), "b");
        dump = cache_dump(t.c);
        /* Each in its new place in the order. */
        ck_assert_ptr_nonnull(strstr(dump, "api/c="));
        ck_assert(strstr(dump, "api/c=") < strstr(dump, "file/a="));
        ck_assert(strstr(dump, "file/a=") < strstr(dump, "file/b="));
        free(dump);
        check_model(&t.r, t.c);
        /* The same UID in another source is another pod. */
        fake_pods(&t.f, 22, "ADD", "api", 1, pod_text("a", "default", "alpha", "api", 1));
        fake_pods(&t.f, 23, "REMOVE", "file", 1, pod_text("a", "default", "old-name", "file", 1));
        pump(t.c);
        expect_log(&t, "pods ADD api a\npods REMOVE file a\n");
        ck_assert_uint_eq(podmux_client_pod_count(t.c), 3);
        ck_assert_str_eq(podmux_pod_source(podmux_client_pod_by_uid(t.c, "a")), "api");
        check_model(&t.r, t.c);
        fake_pods(&t.f, 24, "SET", "file", 3, pod_text("x", "default", "one", "file", 1),
                  pod_text("y", "default", "aaa", "file", 1), pod_text("x", "default", "two", "file", 2));
        pump(t.c);
        expect_log(&t, "pods SET file x y x\n");
        ck_assert_uint_eq(podmux_client_pod_count(t.c), 2);
        ck_assert_str_eq(podmux_pod_name(podmux_client_pod_by_uid(t.c, "x")), "two");
        ck_assert_ptr_null(podmux_client_pod_by_name(t.c, "default", "one"));
        check_model(&t.r, t.c);
        t_free(&t);
}
END_TEST

/* ---- informer-style handlers ----------------------------------------------- */

/* A handler's calls, one line each: "<name> add[*] source/uid gen" (*:
 * initial), "<name> update source/uid old>new", "<name> delete
 * source/uid gen". */
struct hrec {
        const char *name;
        struct buf *log;
};

static int pod_gen(const struct podmux_pod *p)
{
        const char *g = strstr(podmux_pod_json(p, NULL), "\"gen\":");

        return g ? atoi(g + 6) : -1;
}

static void h_add(struct podmux_client *c, const struct podmux_pod *p, bool initial, void *data)
{
        struct hrec *h = data;

        /* The cache already holds the pod. */
        ck_assert_ptr_nonnull(podmux_client_pod_by_uid(c, podmux_pod_uid(p)));
        ck_assert_int_eq(buf_printf(h->log, "%s add%s %s/%s %d\n", h->name, initial ? "*" : "", podmux_pod_source(p),
                                    podmux_pod_uid(p), pod_gen(p)),
                         0);
}

static void h_update(struct podmux_client *c, const struct podmux_pod *old, const struct podmux_pod *p, void *data)
{
        struct hrec *h = data;

        ck_assert_str_eq(podmux_pod_uid(old), podmux_pod_uid(p));
        /* The indexes are in step with the cache. */
        ck_assert_msg(in_source_index(c, p), "on_update: %s not in the source index", podmux_pod_uid(p));
        ck_assert_int_eq(buf_printf(h->log, "%s update %s/%s %d>%d\n", h->name, podmux_pod_source(p), podmux_pod_uid(p),
                                    pod_gen(old), pod_gen(p)),
                         0);
}

static void h_delete(struct podmux_client *c, const struct podmux_pod *old, void *data)
{
        struct hrec *h = data;

        ck_assert_msg(!in_source_index(c, old), "on_delete: %s still in the source index", podmux_pod_uid(old));
        ck_assert_int_eq(buf_printf(h->log, "%s delete %s/%s %d\n", h->name, podmux_pod_source(old),
                                    podmux_pod_uid(old), pod_gen(old)),
                         0);
}

static const struct podmux_handler hops = {h_add, h_update, h_delete};

static void expect_h(struct buf *log, const char *want)
{
        char *have = buf_steal(log, NULL);

        ck_assert_ptr_nonnull(have);
        ck_assert_str_eq(have, want);
        free(have);
}

/* Two handlers, one added before the first connection and one after
 * sync (initial ADDs of the cache, in its order); each op mapped; a
 * slow-consumer cut and a failed resume handed on as the difference. */
START_TEST(test_handlers_ops)
{
        struct buf log = BUF_INIT;
        struct hrec h1 = {"h1", &log}, h2 = {"h2", &log};
        struct t t;

        t_init(&t);
        ck_assert_int_eq(podmux_client_add_handler(t.c, NULL, NULL), -EINVAL);
        ck_assert_int_eq(podmux_client_add_handler(t.c, &hops, &h1), 0);
        start(&t);
        free(rec_take(&t.r));
        expect_h(&log, "h1 add api/c 1\nh1 add file/a 1\nh1 add file/b 1\n");
        ck_assert_int_eq(podmux_client_add_handler(t.c, &hops, &h2), 0);
        expect_h(&log, "h2 add* file/a 1\nh2 add* api/c 1\nh2 add* file/b 1\n");
        fake_pods(&t.f, 11, "UPDATE", "file", 1, pod_text("a", "default", "alpha", "file", 2));
        fake_pods(&t.f, 12, "DELETE", "file", 1, pod_text("a", "default", "alpha", "file", 3));
        fake_pods(&t.f, 13, "REMOVE", "file", 1, pod_text("b", "kube-system", "beta", "file", 1));
        fake_pods(&t.f, 14, "RECONCILE", "api", 1, pod_text("c", "default", "gamma", "api", 2));
        fake_pods(&t.f, 15, "ADD", "http", 1, pod_text("h", "default", "eta", "http", 1));
        fake_pods(&t.f, 16, "REMOVE", "file", 1, pod_text("zz", "default", "none", "file", 1));
        pump(t.c);
        expect_h(&log, "h1 update file/a 1>2\nh2 update file/a 1>2\nh1 update file/a 2>3\nh2 update file/a 2>3\n"
                       "h1 delete file/b 1\nh2 delete file/b 1\nh1 update api/c 1>2\nh2 update api/c 1>2\n"
                       "h1 add http/h 1\nh2 add http/h 1\n");
        fake_send(&t.f, "{\"type\":\"error\",\"seq\":17,\"reason\":\"SlowConsumer\",\"message\":\"too slow\"}");
        pump(t.c);
        fake_accept(&t.f, t.c);
        ck_assert_str_eq(t.f.first, "{\"resume_after\":16}");
        /* Too old: the full state.  a changed, c the same, d new, h gone. */
        fake_hello(&t.f, 500);
        fake_pods(&t.f, 501, "ADD", "api", 1, pod_text("c", "default", "gamma", "api", 2));
        fake_pods(&t.f, 502, "ADD", "file", 2, pod_text("a", "default", "alpha", "file", 4),
                  pod_text("d", "default", "delta", "file", 1));
        fake_pods(&t.f, 503, "ADD", "http", 0);
        fake_synced(&t.f, 504, false);
        pump(t.c);
        expect_h(&log, "h1 add file/d 1\nh2 add file/d 1\nh1 update file/a 3>4\nh2 update file/a 3>4\n"
                       "h1 delete http/h 1\nh2 delete http/h 1\n");
        ck_assert(podmux_client_has_synced(t.c));
        buf_free(&log);
        t_free(&t);
}
END_TEST

/* Snapshot mode: each SET is diffed against what the handlers were
 * given; a pod the same by the resync rule is not handed on. */
START_TEST(test_handlers_snapshot)
{
        struct buf log = BUF_INIT;
        struct hrec h1 = {"h1", &log};
        struct t t;

        t_init(&t);
        ck_assert_int_eq(podmux_client_add_handler(t.c, &hops, &h1), 0);
        fake_accept(&t.f, t.c);
        fake_send(&t.f, "{\"type\":\"hello\",\"protocol\":1,\"mode\":\"snapshot\",\"node\":\"n1\",\"seq\":5}");
        fake_pods(&t.f, 6, "SET", "file", 2, pod_text("a", "default", "alpha", "file", 1),
                  pod_text("c", "default", "gamma", "api", 1));
        fake_synced(&t.f, 8, false);
        fake_pods(&t.f, 9, "SET", "file", 3, pod_text("b", "default", "beta", "file", 1),
                  pod_text("c", "default", "gamma", "api", 2), pod_text("d", "default", "delta", "file", 1));
        fake_send(&t.f, "{\"type\":\"pods\",\"seq\":10,\"op\":\"SET\",\"source\":\"file\",\"pods\":["
                        "{\"metadata\":{\"name\":\"beta\",\"namespace\":\"default\",\"uid\":\"b\","
                        "\"annotations\":{\"kubernetes.io/config.source\":\"file\","
                        "\"kubernetes.io/config.seen\":\"x\"}},\"spec\":{\"gen\":1}}]}");
        pump(t.c);
        expect_h(&log, "h1 add api/c 1\nh1 add file/a 1\n"
                       "h1 delete file/a 1\nh1 add file/b 1\nh1 update api/c 1>2\nh1 add file/d 1\n"
                       "h1 delete file/d 1\nh1 delete api/c 2\n");
        ck_assert_uint_eq(podmux_client_pod_count(t.c), 1);
        buf_free(&log);
        t_free(&t);
}
END_TEST

/* ---- indexes ------------------------------------------------------------------ */

/* "source/uid" of the pods of key in the index name, one a line. */
static char *by_index(struct podmux_client *c, const char *name, const char *key)
{
        const struct podmux_pod **v;
        struct buf b = BUF_INIT;
        size_t n;

        ck_assert_int_eq(podmux_client_by_index(c, name, key, &v, &n), 0);
        ck_assert(n > 0 || v == NULL);
        for (size_t i = 0; i < n; i++)
                ck_assert_int_eq(buf_printf(&b, "%s/%s\n", podmux_pod_source(v[i]), podmux_pod_uid(v[i])), 0);
        free(v);
        return b.len ? buf_steal(&b, NULL) : strdup("");
}

static void expect_index_is(struct podmux_client *c, const char *name, const char *key, const char *want)
{
        char *have = by_index(c, name, key);

        ck_assert_msg(strcmp(have, want) == 0, "index %s %s: have\n%swant\n%s", name, key, have, want);
        free(have);
}

/* Every pod gets the key "x", twice. */
static int index_twice(const struct podmux_pod *p, struct podmux_index_keys *keys, void *data)
{
        int r = podmux_index_keys_add(keys, "x");

        (void)p;
        (void)data;
        return r < 0 ? r : podmux_index_keys_add(keys, "x");
}

/* Fails (with *(int *)data) for a pod of gen 9. */
static int index_failing(const struct podmux_pod *p, struct podmux_index_keys *keys, void *data)
{
        (void)keys;
        return pod_gen_of(p) == 9 ? *(int *)data : 0;
}

/* Bad arguments and names get clear errors; an index added after the
 * pods are cached is filled from the cache. */
/* The log handler that looks up the namespace index when the client says
 * held-over pods were removed (the first lookup builds the index from the
 * cache): what it found, one "source/uid" a line. */
static char *found_in_log;

static void log_by_index(struct podmux_client *c, enum podmux_log_level level, const char *line, void *data)
{
        (void)level;
        (void)data;
        if (strstr(line, "not delivered again") && !found_in_log)
                found_in_log = by_index(c, PODMUX_INDEX_NAMESPACE, "default");
}

/* sources_ready removes the pods held over that were not delivered again:
 * a log handler reading the cache or an index as it is told sees them
 * gone from both, and the index stays the cache's afterwards. */
START_TEST(test_index_in_log_handler)
{
        struct t t;
        char *after;

        t_init(&t);
        start_three_sources(&t, "incremental");
        podmux_client_on_log(t.c, log_by_index);
        fake_accept(&t.f, t.c);
        fake_hello(&t.f, 900);
        fake_pods(&t.f, 901, "ADD", "file", 2, pod_text("a", "default", "alpha", "file", 1),
                  pod_text("b", "default", "beta", "file", 1));
        fake_pods(&t.f, 902, "ADD", "http", 1, pod_text("h", "default", "eta", "http", 1));
        fake_synced(&t.f, 903, false);
        fake_send(&t.f, "{\"type\":\"sources_ready\",\"seq\":904,\"sources\":[\"file\",\"http\"]}");
        pump(t.c);
        ck_assert_ptr_nonnull(found_in_log);
        ck_assert_str_eq(found_in_log, "file/a\nfile/b\nhttp/h\n");
        after = by_index(t.c, PODMUX_INDEX_NAMESPACE, "default");
        ck_assert_str_eq(after, "file/a\nfile/b\nhttp/h\n");
        ck_assert_uint_eq(podmux_client_pod_count(t.c), 3);
        free(after);
        free(found_in_log);
        found_in_log = NULL;
        t_free(&t);
}
END_TEST

START_TEST(test_index_add_and_errors)
{
        const struct podmux_pod **v = (const struct podmux_pod **)&v;
        size_t n = 7;
        struct t t;

        t_init(&t);
        ck_assert_int_eq(podmux_client_add_index(t.c, NULL, index_gen, NULL), -EINVAL);
        ck_assert_int_eq(podmux_client_add_index(t.c, "gen", NULL, NULL), -EINVAL);
        ck_assert_int_eq(podmux_client_add_index(t.c, PODMUX_INDEX_NAMESPACE, index_gen, NULL), -EEXIST);
        ck_assert_int_eq(podmux_client_add_index(t.c, PODMUX_INDEX_SOURCE, index_gen, NULL), -EEXIST);
        ck_assert_int_eq(podmux_client_by_index(t.c, "gen", "odd", &v, &n), -ENOENT);
        ck_assert_int_eq(podmux_client_by_index(t.c, NULL, "odd", &v, &n), -EINVAL);
        ck_assert_int_eq(podmux_client_by_index(t.c, "gen", NULL, &v, &n), -EINVAL);
        ck_assert_int_eq(podmux_client_by_index(t.c, "gen", "odd", NULL, &n), -EINVAL);
        ck_assert_int_eq(podmux_client_by_index(t.c, "gen", "odd", &v, NULL), -EINVAL);
        /* Nothing cached: none, as NULL and 0. */
        ck_assert_int_eq(podmux_client_by_index(t.c, PODMUX_INDEX_SOURCE, "file", &v, &n), 0);
        ck_assert_ptr_null(v);
        ck_assert_uint_eq(n, 0);
        start(&t);
        /* Added late: built from the cache (a and b of file, c of api). */
        ck_assert_int_eq(podmux_client_add_index(t.c, "gen", index_gen, NULL), 0);
        ck_assert_int_eq(podmux_client_add_index(t.c, "gen", index_gen, NULL), -EEXIST);
        expect_index_is(t.c, "gen", "odd", "file/a\napi/c\nfile/b\n");
        expect_index_is(t.c, "gen", "gen=1", "file/a\napi/c\nfile/b\n");
        expect_index_is(t.c, PODMUX_INDEX_NAMESPACE, "default", "file/a\napi/c\n");
        expect_index_is(t.c, PODMUX_INDEX_NAMESPACE, "kube-system", "file/b\n");
        expect_index_is(t.c, PODMUX_INDEX_SOURCE, "file", "file/a\nfile/b\n");
        expect_index_is(t.c, PODMUX_INDEX_SOURCE, "nope", "");
        ck_assert_int_eq(podmux_client_by_index(t.c, "nope", "x", &v, &n), -ENOENT);
        /* A key given twice counts once. */
        ck_assert_int_eq(podmux_client_add_index(t.c, "twice", index_twice, NULL), 0);
        expect_index_is(t.c, "twice", "x", "file/a\napi/c\nfile/b\n");
        /* Live: a renamed into web (same source and UID: it moves), b
         * gone, c to gen 4 (no gen key), d new. */
        fake_pods(&t.f, 11, "UPDATE", "file", 1, pod_text("a", "web", "alpha", "file", 2));
        fake_pods(&t.f, 12, "REMOVE", "file", 1, pod_text("b", "kube-system", "beta", "file", 1));
        fake_pods(&t.f, 13, "UPDATE", "api", 1, pod_text("c", "default", "gamma", "api", 4));
        fake_pods(&t.f, 14, "ADD", "http", 1, pod_text("d", "default", "delta", "http", 3));
        pump(t.c);
        check_indexes(t.c);
        expect_index_is(t.c, PODMUX_INDEX_NAMESPACE, "default", "http/d\napi/c\n");
        expect_index_is(t.c, PODMUX_INDEX_NAMESPACE, "web", "file/a\n");
        expect_index_is(t.c, PODMUX_INDEX_NAMESPACE, "kube-system", "");
        expect_index_is(t.c, "gen", "odd", "http/d\n");
        expect_index_is(t.c, "gen", "gen=2", "file/a\n");
        expect_index_is(t.c, "gen", "gen=1", "");
        expect_index_is(t.c, "twice", "x", "http/d\napi/c\nfile/a\n");
        t_free(&t);
}
END_TEST

/* Random live messages of every op, pods moving between namespaces under
 * the same source and UID, two keys given twice: after each one every
 * index holds exactly the cache's pods of each key, in the cache's order
 * (check_indexes), which the lookups hand out without sorting. */
START_TEST(test_index_order_random_ops)
{
        static const char *const ops[] = {"ADD", "UPDATE", "REMOVE", "DELETE", "RECONCILE", "SET"};
        static const char *const nss[] = {"default", "web", "kube-system"};
        static const char *const srcs[] = {"file", "http", "api"};
        unsigned seed = 7;
        struct t t;

        t_init(&t);
        start(&t);
        ck_assert_int_eq(podmux_client_add_index(t.c, "gen", index_gen, NULL), 0);
        ck_assert_int_eq(podmux_client_add_index(t.c, "twice", index_twice, NULL), 0);
        check_indexes(t.c);
        for (int seq = 11; seq < 211; seq++) {
                char *texts[3];
                const char *op;
                int n;

                seed = seed * 1103515245u + 12345u;
                op = ops[(seed >> 16) % 6];
                n = 1 + (int)((seed >> 8) % 3);
                for (int i = 0; i < n; i++) {
                        char uid[8], name[8];
                        unsigned k;

                        seed = seed * 1103515245u + 12345u;
                        k = (seed >> 16) % 12;
                        snprintf(uid, sizeof(uid), "u%u", k);
                        snprintf(name, sizeof(name), "p%u", (seed >> 8) % 12);
                        texts[i] = pod_text(uid, nss[(seed >> 12) % 3], name,
                                            strcmp(op, "SET") == 0 ? srcs[k % 3] : "file", 1 + (int)(seed >> 20) % 4);
                }
                fake_pods(&t.f, seq, op, strcmp(op, "SET") == 0 ? "*" : "file", n, n > 0 ? texts[0] : NULL,
                          n > 1 ? texts[1] : NULL, n > 2 ? texts[2] : NULL);
                pump(t.c);
                ck_assert_int_eq(t.r.errors, 0);
                check_indexes(t.c);
        }
        ck_assert_uint_gt(podmux_client_pod_count(t.c), 0);
        t_free(&t);
}
END_TEST

/* An index function's error fails the apply as out of memory does: the
 * message is not applied to the cache nor to any index, and the client
 * resumes after the last message applied. */
START_TEST(test_index_fn_error)
{
        int err = -EIO;
        char *log;
        struct t t;

        t_init(&t);
        start(&t);
        ck_assert_int_eq(podmux_client_add_index(t.c, "gen", index_gen, NULL), 0);
        ck_assert_int_eq(podmux_client_add_index(t.c, "failing", index_failing, &err), 0);
        expect_index_is(t.c, PODMUX_INDEX_SOURCE, "file", "file/a\nfile/b\n");
        free(rec_take(&t.r));
        fake_pods(&t.f, 11, "ADD", "file", 2, pod_text("e", "default", "eps", "file", 1),
                  pod_text("a", "default", "alpha", "file", 9));
        pump(t.c);
        log = rec_take(&t.r);
        ck_assert_msg(strstr(log, "error 6 -") && !strstr(log, "pods"), "log %s", log);
        free(log);
        ck_assert_int_eq(t.r.last_kind, PODMUX_ERROR_NOMEM);
        ck_assert_int_eq(t.r.last_err, -ENOMEM);
        ck_assert_ptr_null(podmux_client_pod_by_uid(t.c, "e"));
        ck_assert_int_eq(pod_gen_of(podmux_client_pod_by_uid(t.c, "a")), 1);
        expect_index_is(t.c, PODMUX_INDEX_SOURCE, "file", "file/a\nfile/b\n");
        expect_index_is(t.c, "gen", "gen=1", "file/a\napi/c\nfile/b\n");
        check_indexes(t.c);
        /* The same when adding an index over such a pod... */
        fake_accept(&t.f, t.c);
        ck_assert_str_eq(t.f.first, "{\"resume_after\":10}");
        err = 0;
        fake_hello(&t.f, 20);
        fake_pods(&t.f, 21, "ADD", "file", 2, pod_text("e", "default", "eps", "file", 1),
                  pod_text("a", "default", "alpha", "file", 9));
        fake_synced(&t.f, 22, true);
        pump(t.c);
        check_indexes(t.c);
        expect_index_is(t.c, "gen", "odd", "file/a\nfile/e\napi/c\nfile/b\n");
        err = -EIO;
        ck_assert_int_eq(podmux_client_add_index(t.c, "failing2", index_failing, &err), -EIO);
        ck_assert_int_eq(podmux_client_add_index(t.c, "failing2", index_gen, NULL), 0);
        t_free(&t);
}
END_TEST

/* ---- the shared scenario table ---------------------------------------------- */

/* The log lines of a JSON array of strings, each with a newline. */
static char *joined(json_object *a)
{
        struct buf b = BUF_INIT;

        for (size_t i = 0; i < json_object_array_length(a); i++)
                ck_assert_int_eq(buf_printf(&b, "%s\n", json_object_get_string(json_object_array_get_idx(a, i))), 0);
        return b.len ? buf_steal(&b, NULL) : strdup("");
}

/* "source/uid gen" of each pod, in the cache's order. */
static char *cache_gens(const struct podmux_client *c)
{
        struct buf b = BUF_INIT;

        for (const struct podmux_pod *p = podmux_client_pod_first(c); p; p = podmux_client_pod_next(c, p))
                ck_assert_int_eq(buf_printf(&b, "%s/%s %d\n", podmux_pod_source(p), podmux_pod_uid(p), pod_gen(p)), 0);
        return b.len ? buf_steal(&b, NULL) : strdup("");
}

static void expect_joined(const char *have_owned_by_caller, json_object *want_arr, const char *where)
{
        char *want = joined(want_arr);

        ck_assert_msg(strcmp(have_owned_by_caller, want) == 0, "%s: have\n%s\nwant\n%s", where, have_owned_by_caller,
                      want);
        free(want);
}

static void send_lines(struct t *t, json_object *step)
{
        json_object *lines = json_object_object_get(step, "send"), *partial;

        for (size_t i = 0; i < json_object_array_length(lines); i++) {
                const char *l = json_object_get_string(json_object_array_get_idx(lines, i));

                fake_write(&t->f, l, strlen(l));
                fake_write(&t->f, "\n", 1);
        }
        if (json_object_object_get_ex(step, "partial", &partial)) {
                fake_write(&t->f, json_object_get_string(partial), strlen(json_object_get_string(partial)));
                fake_close(&t->f);
        }
        pump(t->c);
}

/* Each [name, key, ["source/uid", ...]] of an index step. */
static void expect_index(struct podmux_client *c, json_object *qs, const char *where)
{
        for (size_t i = 0; i < json_object_array_length(qs); i++) {
                json_object *q = json_object_array_get_idx(qs, i);
                const char *name = json_object_get_string(json_object_array_get_idx(q, 0));
                const char *key = json_object_get_string(json_object_array_get_idx(q, 1));
                json_object *want = json_object_array_get_idx(q, 2);
                const struct podmux_pod **v;
                struct buf b = BUF_INIT;
                size_t n;
                char *have;

                ck_assert_int_eq(podmux_client_by_index(c, name, key, &v, &n), 0);
                for (size_t k = 0; k < n; k++)
                        ck_assert_int_eq(buf_printf(&b, "%s/%s\n", podmux_pod_source(v[k]), podmux_pod_uid(v[k])), 0);
                free(v);
                have = b.len ? buf_steal(&b, NULL) : strdup("");
                expect_joined(have, want, where);
                free(have);
        }
}

/* The scenario's record of a source's state change (the client's data is
 * the struct rec of t_init, so the log is reached through this). */
static struct buf *scenario_log;

static void scenario_source(struct podmux_client *c, const struct podmux_source_state *s, void *data)
{
        ck_assert_int_eq(buf_printf(scenario_log, "source %s %s %" PRIu64 "%s\n", s->source, s->state, s->seq,
                                    s->resync ? " resync" : ""),
                         0);
}

/* A source step: [name, state, checkpoint time or null, resourceVersion
 * or null], what the client says of the source now. */
static void expect_source(struct podmux_client *c, json_object *want, const char *where)
{
        struct podmux_source_state st;
        const char *state = json_object_get_string(json_object_array_get_idx(want, 1));
        json_object *tm = json_object_array_get_idx(want, 2), *rv = json_object_array_get_idx(want, 3);
        bool not_live = podmux_client_source_state(c, json_object_get_string(json_object_array_get_idx(want, 0)), &st);

        ck_assert_msg(strcmp(st.state, state) == 0 && not_live == (strcmp(state, "live") != 0), "%s: source %s", where,
                      st.state);
        ck_assert_msg(tm ? st.checkpoint_time && strcmp(st.checkpoint_time, json_object_get_string(tm)) == 0
                         : !st.checkpoint_time,
                      "%s: checkpoint time", where);
        ck_assert_msg(rv ? st.checkpoint_resource_version &&
                                      strcmp(st.checkpoint_resource_version, json_object_get_string(rv)) == 0
                         : !st.checkpoint_resource_version,
                      "%s: checkpoint resourceVersion", where);
}

/* One step of a scenario (tests/fixtures/informer-scenarios.json says
 * what each does). */
static void run_step(struct t *t, json_object *step, struct buf *log, struct hrec *hs, size_t *n_hs, const char *name)
{
        json_object *v;
        char *have;

        if (json_object_object_get_ex(step, "add_handler", &v)) {
                ck_assert_uint_lt(*n_hs, 4);
                hs[*n_hs] = (struct hrec){json_object_get_string(v), log};
                ck_assert_int_eq(podmux_client_add_handler(t->c, &hops, &hs[(*n_hs)++]), 0);
        }
        if (json_object_object_get_ex(step, "accept", &v)) {
                fake_accept(&t->f, t->c);
                ck_assert_msg(strcmp(t->f.first, json_object_get_string(v)) == 0, "%s: first line %s", name,
                              t->f.first);
        }
        if (json_object_object_get_ex(step, "send", &v))
                send_lines(t, step);
        if (json_object_object_get_ex(step, "close", &v)) {
                fake_close(&t->f);
                pump(t->c);
        }
        if (json_object_object_get_ex(step, "expect", &v)) {
                have = buf_steal(log, NULL);
                expect_joined(have ? have : "", v, name);
                free(have);
        }
        if (json_object_object_get_ex(step, "cache", &v)) {
                have = cache_gens(t->c);
                expect_joined(have, v, name);
                free(have);
                ck_assert_int_eq(podmux_client_has_synced(t->c),
                                 json_object_get_boolean(json_object_object_get(step, "has_synced")));
        }
        if (json_object_object_get_ex(step, "index", &v))
                expect_index(t->c, v, name);
        if (json_object_object_get_ex(step, "source", &v))
                expect_source(t->c, v, name);
}

START_TEST(test_informer_scenarios)
{
        json_object *o = fixture("informer-scenarios.json"), *scs;

        scs = json_object_object_get(o, "scenarios");
        for (size_t i = 0; i < json_object_array_length(scs); i++) {
                json_object *sc = json_object_array_get_idx(scs, i), *steps = json_object_object_get(sc, "steps");
                const char *name = json_object_get_string(json_object_object_get(sc, "name"));
                struct buf log = BUF_INIT;
                struct hrec hs[4];
                size_t n_hs = 0;
                struct t t;

                t_init(&t);
                ck_assert_int_eq(podmux_client_add_index(t.c, "gen", index_gen, NULL), 0);
                ck_assert_int_eq(podmux_client_add_index(t.c, "seen", index_seen, NULL), 0);
                scenario_log = &log;
                podmux_client_on_source(t.c, scenario_source);
                for (size_t k = 0; k < json_object_array_length(steps); k++)
                        run_step(&t, json_object_array_get_idx(steps, k), &log, hs, &n_hs, name);
                ck_assert_msg(log.len == 0, "%s: records not expected: %s", name, log.data);
                buf_free(&log);
                t_free(&t);
        }
        json_object_put(o);
}
END_TEST

#define CP(seq, time, rv)                                                                                              \
        "{\"type\":\"source\",\"seq\":" #seq                                                                           \
        ",\"source\":\"api\",\"state\":\"checkpoint\",\"checkpoint\":{\"time\":\"" time                                \
        "\",\"resource_version\":\"" rv "\"}}"
#define LIVE(seq) "{\"type\":\"source\",\"seq\":" #seq ",\"source\":\"api\",\"state\":\"live\"}"

/* The "source" message: a state kept and told when it changes, "live"
 * ends it, a state not known is passed on as such (doc/protocol.md). */
START_TEST(test_source_state)
{
        struct t t;
        struct podmux_source_state st;
        uint64_t point = 0;

        t_init(&t);
        start(&t);
        free(rec_take(&t.r));
        /* Never said: live. */
        ck_assert(!podmux_client_source_state(t.c, "api", &st));
        ck_assert_int_eq(st.serving, PODMUX_SERVING_LIVE);
        ck_assert_str_eq(st.state, "live");
        ck_assert_str_eq(st.source, "api");
        ck_assert_ptr_null(st.checkpoint_time);
        ck_assert(!podmux_client_source_state(t.c, NULL, NULL));
        fake_send(&t.f, CP(11, "2026-11-24T09:58:00Z", "48213"));
        fake_pods(&t.f, 12, "ADD", "api", 1, pod_text("k", "default", "kappa", "api", 1));
        /* Said again, the same: nothing to tell. */
        fake_send(&t.f, CP(13, "2026-11-24T09:58:00Z", "48213"));
        pump(t.c);
        expect_log(&t, "source api checkpoint 2026-11-24T09:58:00Z 48213 11\npods ADD api k\n");
        ck_assert(podmux_client_source_state(t.c, "api", &st));
        ck_assert_int_eq(st.serving, PODMUX_SERVING_CHECKPOINT);
        ck_assert_str_eq(st.checkpoint_time, "2026-11-24T09:58:00Z");
        ck_assert_str_eq(st.checkpoint_resource_version, "48213");
        ck_assert_uint_eq(st.seq, 11);
        ck_assert(!st.resync);
        ck_assert(!podmux_client_source_state(t.c, "file", NULL));
        ck_assert(podmux_client_resume_point(t.c, &point));
        ck_assert_uint_eq(point, 13);
        /* Another checkpoint (other time): told. */
        fake_send(&t.f, CP(14, "2026-11-24T10:00:00Z", "48300"));
        /* live: told, then its records. */
        fake_send(&t.f, LIVE(15));
        fake_pods(&t.f, 16, "REMOVE", "api", 1, pod_text("k", "default", "kappa", "api", 1));
        /* live said of a live source: nothing. */
        fake_send(&t.f, LIVE(17));
        /* A state this library does not know, without a checkpoint, and
         * a checkpoint of null. */
        fake_send(&t.f, "{\"type\":\"source\",\"seq\":18,\"source\":\"http\",\"state\":\"stale\",\"checkpoint\":null,"
                        "\"extra\":1}");
        pump(t.c);
        expect_log(&t, "source api checkpoint 2026-11-24T10:00:00Z 48300 14\nsource api live 15\npods REMOVE api k\n"
                       "source http stale 18\n");
        ck_assert(!podmux_client_source_state(t.c, "api", &st));
        ck_assert_int_eq(st.serving, PODMUX_SERVING_LIVE);
        ck_assert(podmux_client_source_state(t.c, "http", &st));
        ck_assert_int_eq(st.serving, PODMUX_SERVING_UNKNOWN);
        ck_assert_str_eq(st.state, "stale");
        ck_assert_ptr_null(st.checkpoint_time);
        ck_assert(podmux_client_resume_point(t.c, &point));
        ck_assert_uint_eq(point, 18);
        ck_assert_str_eq(podmux_serving_name(PODMUX_SERVING_CHECKPOINT), "checkpoint");
        ck_assert_str_eq(podmux_serving_name(PODMUX_SERVING_LIVE), "live");
        ck_assert_str_eq(podmux_serving_name(PODMUX_SERVING_UNKNOWN), "unknown");
        ck_assert_ptr_null(podmux_serving_name((enum podmux_serving)9));
        check_model(&t.r, t.c);
        ck_assert_int_eq(t.r.errors, 0);
        t_free(&t);
}
END_TEST

/* Cut, then answered with a full state (hello of another run): the
 * daemon's state replaces the client's; a state not said again after
 * synced is live, told when the next message comes. */
static void cut_and_full_state(struct t *t, uint64_t hello)
{
        fake_close(&t->f);
        pump(t->c);
        fake_accept(&t->f, t->c);
        fake_hello(&t->f, hello);
        fake_pods(&t->f, hello + 1, "ADD", "file", 2, pod_text("a", "default", "alpha", "file", 1),
                  pod_text("b", "kube-system", "beta", "file", 1));
        fake_pods(&t->f, hello + 2, "ADD", "api", 1, pod_text("c", "default", "gamma", "api", 1));
        fake_synced(&t->f, hello + 3, false);
}

/* Source states across reconnections: a resume keeps them, and the
 * daemon says again after synced what is not live; a full state (a new
 * daemon run) replaces them with what it says after synced. */
START_TEST(test_source_state_reconnect)
{
        struct t t;
        struct podmux_source_state st;

        t_init(&t);
        start(&t);
        fake_send(&t.f, CP(11, "2026-11-24T09:58:00Z", "48213"));
        pump(t.c);
        free(rec_take(&t.r));
        /* Resumed, still serving it: said again after synced, not told. */
        fake_close(&t.f);
        pump(t.c);
        fake_accept(&t.f, t.c);
        ck_assert_str_eq(t.f.first, "{\"resume_after\":11}");
        fake_hello(&t.f, 40);
        fake_synced(&t.f, 41, true);
        fake_send(&t.f, CP(42, "2026-11-24T09:58:00Z", "48213"));
        fake_pods(&t.f, 43, "UPDATE", "file", 1, pod_text("a", "default", "alpha", "file", 2));
        pump(t.c);
        expect_log(&t, "error 4 -\nreconnect after 11\nsynced resumed\npods UPDATE file a\n");
        ck_assert(podmux_client_source_state(t.c, "api", &st));
        ck_assert_uint_eq(st.seq, 11);
        /* Resumed; it went live meanwhile: the replay says so. */
        fake_close(&t.f);
        pump(t.c);
        fake_accept(&t.f, t.c);
        ck_assert_str_eq(t.f.first, "{\"resume_after\":43}");
        fake_hello(&t.f, 60);
        fake_send(&t.f, LIVE(50));
        fake_synced(&t.f, 61, true);
        pump(t.c);
        expect_log(&t, "error 4 -\nreconnect after 43\nsource api live 50\nsynced resumed\n");
        ck_assert(!podmux_client_source_state(t.c, "api", NULL));
        /* A checkpoint again, then a new daemon run whose api source is
         * live: nothing said after synced, so live at the next message. */
        fake_send(&t.f, CP(62, "2026-11-24T09:58:00Z", "48213"));
        pump(t.c);
        free(rec_take(&t.r));
        cut_and_full_state(&t, 9000000);
        pump(t.c);
        /* Until then the state is kept. */
        ck_assert(podmux_client_source_state(t.c, "api", NULL));
        fake_send(&t.f, "{\"type\":\"sources_ready\",\"seq\":9000004,\"sources\":[\"api\",\"file\"]}");
        pump(t.c);
        expect_log(&t, "error 4 -\nreconnect after 62\npods UPDATE file resync a\nsynced state\nsource api live 0 "
                       "resync\nready api file\n");
        ck_assert(!podmux_client_source_state(t.c, "api", &st));
        ck_assert_int_eq(st.serving, PODMUX_SERVING_LIVE);
        /* A new run serving its checkpoint: said after synced. */
        cut_and_full_state(&t, 9100000);
        fake_send(&t.f, CP(9100004, "2026-11-24T09:50:00Z", "48000"));
        pump(t.c);
        expect_log(&t, "error 4 -\nreconnect after 9000004\nsynced state\n"
                       "source api checkpoint 2026-11-24T09:50:00Z 48000 9100004\n");
        /* Another run, serving the same checkpoint: not told again, and
         * kept past the message after it. */
        cut_and_full_state(&t, 9200000);
        fake_send(&t.f, CP(9200004, "2026-11-24T09:50:00Z", "48000"));
        fake_pods(&t.f, 9200005, "ADD", "file", 1, pod_text("e", "default", "eps", "file", 1));
        pump(t.c);
        expect_log(&t, "error 4 -\nreconnect after 9100004\nsynced state\npods ADD file e\n");
        ck_assert(podmux_client_source_state(t.c, "api", &st));
        ck_assert_uint_eq(st.seq, 9100004);
        /* An unknown message type after synced ends the window too. */
        cut_and_full_state(&t, 9300000);
        fake_send(&t.f, "{\"type\":\"novel\",\"seq\":9300004}");
        pump(t.c);
        expect_log(&t, "error 4 -\nreconnect after 9200005\npods REMOVE file resync e\nsynced state\n"
                       "source api live 0 resync\n");
        ck_assert(!podmux_client_source_state(t.c, "api", NULL));
        check_model(&t.r, t.c);
        t_free(&t);
}
END_TEST

/* A bad source message says what is wrong with it. */
START_TEST(test_source_bad_message)
{
        static const char *const bad[][2] = {
                {"{\"type\":\"source\",\"seq\":20,\"source\":\"api\"}", "no \"state\""},
                {"{\"type\":\"source\",\"seq\":20,\"source\":\"api\",\"state\":\"checkpoint\",\"checkpoint\":1}",
                 "\"checkpoint\" is not an object"},
                {"{\"type\":\"source\",\"seq\":20,\"source\":\"api\",\"state\":\"checkpoint\",\"checkpoint\":{\"time\":"
                 "1}}",
                 "a member of \"checkpoint\" is not a string"},
        };

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct t t;

                t_init(&t);
                start(&t);
                fake_send(&t.f, "%s", bad[i][0]);
                pump(t.c);
                ck_assert_int_eq(t.r.last_kind, PODMUX_ERROR_BAD_MESSAGE);
                ck_assert_msg(strstr(t.r.last_message, bad[i][1]), "%s: %s", bad[i][0], t.r.last_message);
                ck_assert(!podmux_client_source_state(t.c, "api", NULL));
                t_free(&t);
        }
}
END_TEST

START_TEST(test_op_names)
{
        ck_assert_str_eq(podmux_op_name(PODMUX_OP_RECONCILE), "RECONCILE");
        ck_assert_ptr_null(podmux_op_name((enum podmux_op)42));
}
END_TEST

/* A record's path, byte for byte: path_hex when the name is not UTF-8
 * (doc/protocol.md "Paths that are not UTF-8"), else path. */
START_TEST(test_record_path)
{
        static const struct {
                const char *json, *want;
                size_t want_len;
                int r;
        } cases[] = {
                {"{\"source\":\"file\",\"path\":\"/m/a.yaml\",\"state\":\"applied\"}", "/m/a.yaml", 9, 0},
                {"{\"source\":\"file\",\"path\":\"/m/w\\ufffd.y\",\"path_hex\":\"2f6d2f77ff2e79\"}", "/m/w\xff.y", 7,
                 0},
                {"{\"type\":\"files\",\"path\":\"/m\\ufffd\",\"path_hex\":\"2f6dfe\",\"url\":null}", "/m\xfe", 3, 0},
                {"{\"source\":\"http\",\"url\":\"http://x/m\"}", NULL, 0, -ENOENT},
                {"{\"type\":\"files\",\"path\":null}", NULL, 0, -ENOENT},
                {"{\"path\":\"/m\",\"path_hex\":\"2f6\"}", NULL, 0, -EINVAL},
                {"{\"path\":\"/m\",\"path_hex\":\"2f00\"}", NULL, 0, -EINVAL},
                {"{\"path\":[]}", NULL, 0, -EINVAL},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct json_object *o = json_tokener_parse(cases[i].json);
                char *got = (char *)"untouched";
                size_t len = 99;
                int r;

                ck_assert_ptr_nonnull(o);
                r = podmux_record_path(o, &got, &len);
                ck_assert_msg(r == cases[i].r, "%s: %d", cases[i].json, r);
                if (r == 0) {
                        ck_assert_uint_eq(len, cases[i].want_len);
                        ck_assert_int_eq(memcmp(got, cases[i].want, len + 1), 0);
                        free(got);
                        ck_assert_int_eq(podmux_record_path(o, &got, NULL), 0);
                        ck_assert_str_eq(got, cases[i].want);
                        free(got);
                } else {
                        ck_assert_str_eq(got, "untouched");
                        ck_assert_uint_eq(len, 99);
                }
                json_object_put(o);
        }
}
END_TEST

UNIT_MAIN(test_full_state, test_live_ops_and_seq_gaps, test_resume_replay, test_failed_resume_full_state,
          test_partial_line_after_cut, test_unknown_type_ignored, test_typed_members_of_other_messages,
          test_message_lines_fixture, test_protocol_mismatch, test_daemon_restart, test_seq_going_back,
          test_malformed_lines, test_bad_before_hello, test_server_errors, test_long_server_reason, test_wrong_path,
          test_permission_refused, test_snapshot_set, test_max_line, test_stop_and_run, test_stop_mid_replay,
          test_stop_from_source_handler, test_stop_outside_handler, test_run_timeout, test_saved_resume_lines_and_log,
          test_op_names, test_restart_same_pods_not_told, test_pod_text_same, test_error_message_one_line,
          test_saved_resume_partial_cache, test_renamed_same_uid, test_restart_late_source, test_restart_source_gone,
          test_restart_held_across_reconnects, test_restart_late_source_snapshot, test_handlers_ops,
          test_handlers_snapshot, test_informer_scenarios, test_index_in_log_handler, test_index_add_and_errors,
          test_index_fn_error, test_source_state, test_source_state_reconnect, test_source_bad_message,
          test_record_path, test_pod_identity_as_tree, test_index_order_random_ops)
