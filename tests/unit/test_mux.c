/*
 * test_mux — channels per source and the order in which their records
 * reach the merger (src/core/mux.h, doc/pod-config.md 3.1).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/loop.h"
#include "core/mux.h"
#include "core/pod.h"
#include "unit.h"

/* ---- harness ---------------------------------------------------------------- */

#define MAX_SEEN 64

struct sink {
        /* "source:tag" of every merged record, in merge order */
        char seen[MAX_SEEN][48];
        size_t n;
        /* records to send from inside the merge callback */
        struct mux_channel *resend_ch;
        const char *resend_on; /* tag that triggers a send */
        const char *resend_tag;
};

/* Records are tagged by their source field.  They are plain ADDs, which
 * the mux queues as they come (SETs and deltas fold: see the fold tests). */
static struct pod_update *rec(const char *tag)
{
        struct pod_update *u = pod_update_new(POD_OP_ADD, tag);

        ck_assert_ptr_nonnull(u);
        return u;
}

static int on_merge(void *data, const char *source, struct pod_update **up)
{
        struct sink *s = data;
        struct pod_update *u = *up;

        ck_assert_msg(s->n < MAX_SEEN, "too many merges");
        snprintf(s->seen[s->n++], sizeof(s->seen[0]), "%s:%s", source, u->source);
        if (s->resend_on && strcmp(u->source, s->resend_on) == 0) {
                ck_assert_int_eq(mux_channel_send(s->resend_ch, rec(s->resend_tag)), 0);
                s->resend_on = NULL;
        }
        return 0; /* the mux frees u */
}

static void expect_merged(const struct sink *s, int line, const char *want)
{
        char got[1024] = "";
        size_t off = 0;

        for (size_t i = 0; i < s->n; i++)
                off += (size_t)snprintf(got + off, sizeof(got) - off, "%s%s", i ? "," : "",
                                        s->seen[i]);
        ck_assert_msg(strcmp(got, want) == 0, "line %d: merged \"%s\", want \"%s\"", line, got,
                      want);
}

#define EXPECT_MERGED(s, want) expect_merged((s), __LINE__, (want))

static struct mux_channel *channel(struct mux *m, const char *name)
{
        struct mux_channel *ch = NULL;
        int r = mux_channel(m, name, &ch);

        ck_assert_msg(r == 0, "mux_channel(\"%s\") = %d", name, r);
        ck_assert_ptr_nonnull(ch);
        ck_assert_str_eq(mux_channel_name(ch), name);
        return ch;
}

static void expect_sources(const struct mux *m, int line, const char *want)
{
        char got[512] = "";
        size_t n = 99, off = 0;
        const char *const *names = mux_sources(m, &n);

        for (size_t i = 0; i < n; i++)
                off += (size_t)snprintf(got + off, sizeof(got) - off, "%s%s", i ? "," : "",
                                        names[i]);
        ck_assert_msg(strcmp(got, want) == 0, "line %d: sources \"%s\", want \"%s\"", line, got,
                      want);
}

#define EXPECT_SOURCES(m, want) expect_sources((m), __LINE__, (want))

/* ---- channels ------------------------------------------------------------------ */

START_TEST(test_channel_per_name)
{
        struct sink s = {0};
        struct mux *m = NULL;
        struct mux_channel *file, *api, *again, *ch = (struct mux_channel *)&s;

        ck_assert_int_eq(mux_new(NULL, on_merge, &s, &m), 0);
        ck_assert_ptr_nonnull(m);
        EXPECT_SOURCES(m, "");
        file = channel(m, "file");
        api = channel(m, "api");
        ck_assert_ptr_ne(file, api);
        /* same name, same channel: no second channel or source */
        again = channel(m, "file");
        ck_assert_ptr_eq(again, file);
        ck_assert_ptr_eq(channel(m, "api"), api);
        EXPECT_SOURCES(m, "api,file");
        /* names are compared exactly */
        ck_assert_ptr_ne(channel(m, "File"), file);
        ck_assert_ptr_ne(channel(m, "file "), file);
        EXPECT_SOURCES(m, "File,api,file,file ");
        /* empty name: -EINVAL, nothing written, nothing recorded */
        ck_assert_int_eq(mux_channel(m, "", &ch), -EINVAL);
        ck_assert_ptr_eq(ch, (struct mux_channel *)&s);
        ck_assert_int_eq(mux_channel(m, NULL, &ch), -EINVAL);
        EXPECT_SOURCES(m, "File,api,file,file ");
        /* channel pointers stay valid while more channels are created */
        for (int i = 0; i < 40; i++) {
                char name[16];

                snprintf(name, sizeof(name), "s%02d", i);
                channel(m, name);
        }
        ck_assert_ptr_eq(channel(m, "file"), file);
        ck_assert_ptr_eq(channel(m, "api"), api);
        ck_assert_str_eq(mux_channel_name(file), "file");
        ck_assert_int_eq(mux_channel_send(file, rec("x")), 0);
        ck_assert_uint_eq(mux_drain(m), 1);
        EXPECT_MERGED(&s, "file:x");
        mux_free(m);
        mux_free(NULL);
}
END_TEST

START_TEST(test_sources_sorted)
{
        struct sink s = {0};
        struct mux *m = NULL;
        const char *names[] = {"http", "api", "file", "test", "api", "b", "a", "http"};
        const char *const *list;
        size_t n = 0;

        ck_assert_int_eq(mux_new(NULL, on_merge, &s, &m), 0);
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                channel(m, names[i]);
        EXPECT_SOURCES(m, "a,api,b,file,http,test");
        list = mux_sources(m, &n);
        ck_assert_uint_eq(n, 6);
        for (size_t i = 1; i < n; i++)
                ck_assert_msg(strcmp(list[i - 1], list[i]) < 0, "not sorted: %s before %s",
                              list[i - 1], list[i]);
        /* 100 names in reverse order (the kubelet's TestPodConfigRace uses
         * "0".."99") */
        for (int i = 99; i >= 0; i--) {
                char name[8];

                snprintf(name, sizeof(name), "%d", i);
                channel(m, name);
        }
        list = mux_sources(m, &n);
        ck_assert_uint_eq(n, 106);
        for (size_t i = 1; i < n; i++)
                ck_assert_msg(strcmp(list[i - 1], list[i]) < 0, "not sorted at %zu: %s before %s",
                              i, list[i - 1], list[i]);
        mux_free(m);
}
END_TEST

/* ---- order ---------------------------------------------------------------------- */

START_TEST(test_fifo_within_and_across_channels)
{
        struct sink s = {0};
        struct mux *m = NULL;
        struct mux_channel *ch1, *ch2;

        ck_assert_int_eq(mux_new(NULL, on_merge, &s, &m), 0);
        ch1 = channel(m, "ch1");
        ch2 = channel(m, "ch2");
        /* nothing drained without a loop until mux_drain() */
        ck_assert_uint_eq(mux_drain(m), 0);
        ck_assert_int_eq(mux_channel_send(ch1, rec("a")), 0);
        ck_assert_int_eq(mux_channel_send(ch1, rec("b")), 0);
        ck_assert_int_eq(mux_channel_send(ch2, rec("c")), 0);
        ck_assert_int_eq(mux_channel_send(ch1, rec("a2")), 0);
        ck_assert_uint_eq(s.n, 0);
        ck_assert_uint_eq(mux_drain(m), 4);
        EXPECT_MERGED(&s, "ch1:a,ch1:b,ch2:c,ch1:a2");
        ck_assert_uint_eq(mux_drain(m), 0);

        /* a channel created later, sorted before the others, does not jump
         * the queue */
        s.n = 0;
        ck_assert_int_eq(mux_channel_send(ch2, rec("d")), 0);
        ck_assert_int_eq(mux_channel_send(channel(m, "aaa"), rec("e")), 0);
        ck_assert_int_eq(mux_channel_send(ch1, rec("f")), 0);
        ck_assert_int_eq(mux_channel_send(channel(m, "aaa"), rec("g")), 0);
        ck_assert_int_eq(mux_channel_send(ch2, rec("h")), 0);
        ck_assert_uint_eq(mux_drain(m), 5);
        EXPECT_MERGED(&s, "ch2:d,aaa:e,ch1:f,aaa:g,ch2:h");
        mux_free(m);
}
END_TEST

START_TEST(test_send_from_merge_same_drain)
{
        struct sink s = {0};
        struct mux *m = NULL;
        struct mux_channel *ch1, *ch2;

        ck_assert_int_eq(mux_new(NULL, on_merge, &s, &m), 0);
        ch1 = channel(m, "ch1");
        ch2 = channel(m, "ch2");
        /* while merging "a", the merger sends "x" on ch2: it queues behind
         * what was already sent and is handed over in the same drain */
        s.resend_ch = ch2;
        s.resend_on = "a";
        s.resend_tag = "x";
        ck_assert_int_eq(mux_channel_send(ch1, rec("a")), 0);
        ck_assert_int_eq(mux_channel_send(ch1, rec("b")), 0);
        ck_assert_int_eq(mux_channel_send(ch2, rec("c")), 0);
        ck_assert_uint_eq(mux_drain(m), 4);
        EXPECT_MERGED(&s, "ch1:a,ch1:b,ch2:c,ch2:x");
        ck_assert_uint_eq(mux_drain(m), 0);

        /* the same on the channel being drained */
        s.n = 0;
        s.resend_ch = ch1;
        s.resend_on = "p";
        s.resend_tag = "q";
        ck_assert_int_eq(mux_channel_send(ch1, rec("p")), 0);
        ck_assert_uint_eq(mux_drain(m), 2);
        EXPECT_MERGED(&s, "ch1:p,ch1:q");
        mux_free(m);
}
END_TEST

/* ---- with a real loop -------------------------------------------------------------- */

START_TEST(test_loop_deferred_drain)
{
        struct sink s = {0};
        struct loop *l = NULL;
        struct mux *m = NULL;
        struct mux_channel *ch1, *ch2;

        ck_assert_int_eq(loop_new(&l), 0);
        ck_assert_int_eq(mux_new(l, on_merge, &s, &m), 0);
        ch1 = channel(m, "ch1");
        ch2 = channel(m, "ch2");
        ck_assert_int_eq(mux_channel_send(ch1, rec("a")), 0);
        ck_assert_int_eq(mux_channel_send(ch2, rec("b")), 0);
        ck_assert_int_eq(mux_channel_send(ch1, rec("c")), 0);
        /* a send only queues: no merge before the loop runs */
        ck_assert_uint_eq(s.n, 0);
        ck_assert_int_ge(loop_run_once(l, 0), 1);
        EXPECT_MERGED(&s, "ch1:a,ch2:b,ch1:c");
        /* an idle iteration merges nothing more */
        ck_assert_int_eq(loop_run_once(l, 0), 0);
        ck_assert_uint_eq(s.n, 3);

        /* a second burst schedules a new drain; a send from inside the
         * merge is delivered in the same iteration */
        s.n = 0;
        s.resend_ch = ch1;
        s.resend_on = "d";
        s.resend_tag = "e";
        ck_assert_int_eq(mux_channel_send(ch2, rec("d")), 0);
        ck_assert_int_ge(loop_run_once(l, 0), 1);
        EXPECT_MERGED(&s, "ch2:d,ch1:e");
        ck_assert_int_eq(loop_run_once(l, 0), 0);
        ck_assert_uint_eq(s.n, 2);

        /* mux_drain() by hand still works with a loop; the deferred drain
         * then finds nothing */
        s.n = 0;
        ck_assert_int_eq(mux_channel_send(ch1, rec("f")), 0);
        ck_assert_uint_eq(mux_drain(m), 1);
        ck_assert_int_ge(loop_run_once(l, 0), 0);
        EXPECT_MERGED(&s, "ch1:f");
        ck_assert_int_eq(mux_channel_send(ch1, rec("g")), 0);
        ck_assert_int_ge(loop_run_once(l, 0), 1);
        EXPECT_MERGED(&s, "ch1:f,ch1:g");

        mux_free(m);
        loop_free(l);
}
END_TEST

/* ---- freeing ------------------------------------------------------------------------- */

START_TEST(test_free_with_pending)
{
        struct sink s = {0};
        struct mux *m = NULL;
        struct mux_channel *ch;
        struct pod *p;
        const char *j = "{\"metadata\":{\"uid\":\"u\"}}";
        struct pod_update *u;

        ck_assert_int_eq(mux_new(NULL, on_merge, &s, &m), 0);
        ch = channel(m, "file");
        ck_assert_int_eq(pod_from_text(j, strlen(j), &p, NULL), 0);
        u = rec("a");
        ck_assert_int_eq(pod_update_add(u, p), 0);
        ck_assert_int_eq(mux_channel_send(ch, u), 0);
        ck_assert_int_eq(mux_channel_send(ch, rec("b")), 0);
        ck_assert_int_eq(mux_channel_send(channel(m, "api"), rec("c")), 0);
        ck_assert_uint_eq(p->refs, 2);
        /* pending records and their pods are freed (ASan checks leaks) */
        mux_free(m);
        ck_assert_uint_eq(s.n, 0);
        ck_assert_uint_eq(p->refs, 1);
        pod_unref(p);

        /* with a loop, freed in the documented order (mux, then loop) */
        {
                struct loop *l = NULL;

                ck_assert_int_eq(loop_new(&l), 0);
                ck_assert_int_eq(mux_new(l, on_merge, &s, &m), 0);
                ck_assert_int_eq(mux_channel_send(channel(m, "x"), rec("d")), 0);
                mux_free(m);
                loop_free(l);
                ck_assert_uint_eq(s.n, 0);
        }
}
END_TEST

/* A mux freed while its deferred drain is still queued on a loop that keeps
 * running must not be touched by that drain.  Run in a child so a
 * use-after-free (ASan abort) fails this test only. */
START_TEST(test_free_with_drain_scheduled_loop_keeps_running)
{
        pid_t pid;
        int status = 0;

        fflush(NULL);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                struct sink s = {0};
                struct loop *l = NULL;
                struct mux *m = NULL;
                struct mux_channel *ch = NULL;

                if (loop_new(&l) < 0 || mux_new(l, on_merge, &s, &m) < 0 ||
                    mux_channel(m, "x", &ch) < 0 || mux_channel_send(ch, rec("d")) < 0)
                        _exit(2);
                mux_free(m);
                /* the loop goes on (other handles still live on it) */
                loop_run_once(l, 0);
                loop_free(l);
                _exit(s.n == 0 ? 0 : 3);
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "child %s %d: the deferred drain ran on a freed mux "
                      "(see the AddressSanitizer report above)",
                      WIFEXITED(status) ? "exited with" : "killed by signal",
                      WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}
END_TEST


/* ---- folding ------------------------------------------------------------------- */

struct keeper {
        struct pod_update *got[MUX_FOLD_BACKLOG + 8]; /* merged records, kept */
        size_t n;
        struct mux_channel *resend; /* sends a delta from inside the first merge */
};

static struct pod *named(const char *name, const char *uid)
{
        char json[128];
        struct pod *p = NULL;

        snprintf(json, sizeof(json), "{\"metadata\":{\"name\":\"%s\",\"uid\":\"%s\"}}", name, uid);
        ck_assert_int_eq(pod_from_text(json, strlen(json), &p, NULL), 0);
        return p;
}

/* A record of op (or a delta when delta) with pods "+name" (upserted) or
 * "-name" (gone); each pod's UID is "u" + name. */
static struct pod_update *make(enum pod_op op, bool delta, const char *spec)
{
        struct pod_update *u = delta ? pod_update_new_delta("file") : pod_update_new(op, "file");
        char buf[128], *save = NULL;

        ck_assert_ptr_nonnull(u);
        snprintf(buf, sizeof(buf), "%s", spec);
        for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
                char uid[64];
                struct pod *p;

                snprintf(uid, sizeof(uid), "u%s", t + 1);
                p = named(t + 1, uid);
                ck_assert_int_eq(t[0] == '-' ? pod_update_add_gone(u, p) : pod_update_add(u, p), 0);
                pod_unref(p);
        }
        return u;
}

static const char *names_of(const struct pod_update *u, char *out, size_t size)
{
        size_t off = 0;

        out[0] = '\0';
        off += (size_t)snprintf(out, size, "%s%s:", pod_op_to_string(u->op), u->delta ? "~" : "");
        for (size_t i = 0; i < u->n_pods; i++)
                off += (size_t)snprintf(out + off, size - off, "+%s", pod_name(u->pods[i]));
        for (size_t i = 0; i < u->n_gone; i++)
                off += (size_t)snprintf(out + off, size - off, "-%s", pod_name(u->gone[i]));
        return out;
}

static int keep_merge(void *data, const char *source, struct pod_update **up)
{
        struct keeper *k = data;

        (void)source;
        ck_assert_uint_lt(k->n, MUX_FOLD_BACKLOG + 8);
        k->got[k->n++] = *up;
        *up = NULL;
        if (k->resend) {
                struct mux_channel *ch = k->resend;

                k->resend = NULL;
                ck_assert_int_eq(mux_channel_send(ch, make(0, true, "+late")), 0);
        }
        return 0;
}

static void keeper_reset(struct keeper *k)
{
        for (size_t i = 0; i < k->n; i++)
                pod_update_free(k->got[i]);
        k->n = 0;
}

START_TEST(test_sets_and_deltas_fold_while_waiting)
{
        struct keeper k = {0};
        struct mux *m = NULL;
        struct mux_channel *ch, *other;
        char out[128];

        ck_assert_int_eq(mux_new(NULL, keep_merge, &k, &m), 0);
        mux_fold_after(m, 1);
        ch = channel(m, "file");
        other = channel(m, "api");
        /* A SET and two deltas behind it: one merge of the SET they make,
         * its pods back in order. */
        ck_assert_int_eq(mux_channel_send(ch, make(POD_OP_SET, false, "+a +b")), 0);
        ck_assert_int_eq(mux_channel_send(ch, make(0, true, "+c +b")), 0);
        ck_assert_int_eq(mux_channel_send(ch, make(0, true, "-a +a2")), 0);
        ck_assert_uint_eq(mux_drain(m), 1);
        ck_assert_str_eq(names_of(k.got[0], out, sizeof(out)), "SET:+a2+b+c");
        ck_assert(k.got[0]->sorted);
        keeper_reset(&k);
        /* Deltas fold into a delta; a full SET replaces them all. */
        ck_assert_int_eq(mux_channel_send(ch, make(0, true, "+x -y")), 0);
        ck_assert_int_eq(mux_channel_send(ch, make(0, true, "+y -x")), 0);
        ck_assert_uint_eq(mux_drain(m), 1);
        ck_assert_str_eq(names_of(k.got[0], out, sizeof(out)), "SET~:+y-x");
        keeper_reset(&k);
        ck_assert_int_eq(mux_channel_send(ch, make(0, true, "+x -y")), 0);
        ck_assert_int_eq(mux_channel_send(ch, make(POD_OP_SET, false, "+s")), 0);
        ck_assert_uint_eq(mux_drain(m), 1);
        ck_assert_str_eq(names_of(k.got[0], out, sizeof(out)), "SET:+s");
        keeper_reset(&k);
        /* Plain ops are queued as they come, and nothing folds across
         * them or across channels; the order of sends holds. */
        ck_assert_int_eq(mux_channel_send(ch, make(0, true, "+d1")), 0);
        ck_assert_int_eq(mux_channel_send(other, make(0, true, "+o1")), 0);
        ck_assert_int_eq(mux_channel_send(ch, make(POD_OP_ADD, false, "+p")), 0);
        ck_assert_int_eq(mux_channel_send(ch, make(0, true, "+d2")), 0);
        ck_assert_int_eq(mux_channel_send(ch, make(POD_OP_REMOVE, false, "+p")), 0);
        ck_assert_uint_eq(mux_drain(m), 5);
        ck_assert_str_eq(names_of(k.got[0], out, sizeof(out)), "SET~:+d1");
        ck_assert_str_eq(names_of(k.got[1], out, sizeof(out)), "SET~:+o1");
        ck_assert_str_eq(names_of(k.got[2], out, sizeof(out)), "ADD:+p");
        ck_assert_str_eq(names_of(k.got[3], out, sizeof(out)), "SET~:+d2");
        ck_assert_str_eq(names_of(k.got[4], out, sizeof(out)), "REMOVE:+p");
        keeper_reset(&k);
        /* A record being merged is not folded into: a delta sent from
         * inside its merge is merged after it. */
        k.resend = ch;
        ck_assert_int_eq(mux_channel_send(ch, make(POD_OP_SET, false, "+a")), 0);
        ck_assert_uint_eq(mux_drain(m), 2);
        ck_assert_str_eq(names_of(k.got[0], out, sizeof(out)), "SET:+a");
        ck_assert_str_eq(names_of(k.got[1], out, sizeof(out)), "SET~:+late");
        keeper_reset(&k);
        mux_free(m);
}
END_TEST

/* Below the bound every record is merged as sent; a burst past it holds
 * MUX_FOLD_BACKLOG records, however long, and says the same. */
START_TEST(test_burst_of_deltas_is_bounded)
{
        struct keeper k = {0};
        struct mux *m = NULL;
        struct mux_channel *ch;
        size_t merged;

        ck_assert_int_eq(mux_new(NULL, keep_merge, &k, &m), 0);
        ch = channel(m, "file");
        ck_assert_int_eq(mux_channel_send(ch, make(POD_OP_SET, false, "")), 0);
        for (int i = 0; i < 5; i++)
                ck_assert_int_eq(mux_channel_send(ch, make(0, true, "+a")), 0);
        ck_assert_uint_eq(mux_drain(m), 6);
        keeper_reset(&k);
        ck_assert_int_eq(mux_channel_send(ch, make(POD_OP_SET, false, "")), 0);
        for (int i = 0; i < 2000; i++) {
                char spec[32];

                snprintf(spec, sizeof(spec), "+p%d", i % 100);
                ck_assert_int_eq(mux_channel_send(ch, make(0, true, spec)), 0);
        }
        merged = mux_drain(m);
        /* The last record holds the rest of the burst: every pod. */
        ck_assert_uint_eq(k.got[merged - 1]->n_pods, 100);
        ck_assert_uint_eq(merged, MUX_FOLD_BACKLOG);
        keeper_reset(&k);
        mux_free(m);
}
END_TEST

/* ---- merged through ------------------------------------------------------------ */

struct through_log {
        uint64_t got[16];
        size_t n;
        int fail_next; /* the next merge runs out of memory (nothing applied) */
        struct mux_channel *ch;
        uint64_t sent_at_merge; /* mux_channel_sent() seen from inside a merge */
};

static int through_merge(void *data, const char *source, struct pod_update **up)
{
        struct through_log *t = data;

        (void)source;
        (void)up;
        t->sent_at_merge = mux_channel_sent(t->ch);
        if (t->fail_next) {
                t->fail_next = 0;
                return -ENOMEM;
        }
        return 0;
}

static void on_through(void *data, uint64_t through)
{
        struct through_log *t = data;

        ck_assert_uint_lt(t->n, 16);
        t->got[t->n++] = through;
}

/* Every record a channel takes is numbered, folded ones too; once the
 * merger is done with a record, the channel is told the number of the
 * last record in it, so a source knows what of its sends is merged.  A
 * merge that ran out of memory tells nothing: the record waits. */
START_TEST(test_merged_through_numbers)
{
        struct through_log t = {0};
        struct mux *m = NULL;
        struct mux_channel *ch, *other;

        ck_assert_int_eq(mux_new(NULL, through_merge, &t, &m), 0);
        ch = channel(m, "file");
        other = channel(m, "api");
        t.ch = ch;
        mux_channel_on_merged(ch, on_through, &t);
        ck_assert_uint_eq(mux_channel_sent(ch), 0);
        ck_assert_int_eq(mux_channel_send(ch, make(POD_OP_SET, false, "+a")), 0);
        ck_assert_uint_eq(mux_channel_sent(ch), 1);
        ck_assert_int_eq(mux_channel_send(ch, make(0, true, "+b")), 0);
        ck_assert_int_eq(mux_channel_send(other, make(0, true, "+o")), 0);
        ck_assert_uint_eq(mux_channel_sent(ch), 2);
        ck_assert_uint_eq(mux_channel_sent(other), 1);
        ck_assert_uint_eq(mux_drain(m), 3);
        /* Told after each of its own records, not the other channel's. */
        ck_assert_uint_eq(t.n, 2);
        ck_assert_uint_eq(t.got[0], 1);
        ck_assert_uint_eq(t.got[1], 2);
        /* Folded: one merge covers records 3 to 5. */
        mux_fold_after(m, 1);
        ck_assert_int_eq(mux_channel_send(ch, make(0, true, "+c")), 0);
        ck_assert_int_eq(mux_channel_send(ch, make(0, true, "+d")), 0);
        ck_assert_int_eq(mux_channel_send(ch, make(POD_OP_SET, false, "+e")), 0);
        ck_assert_uint_eq(mux_channel_sent(ch), 5);
        ck_assert_uint_eq(mux_drain(m), 1);
        ck_assert_uint_eq(t.n, 3);
        ck_assert_uint_eq(t.got[2], 5);
        /* Out of memory: nothing told until the record is merged. */
        t.fail_next = 1;
        ck_assert_int_eq(mux_channel_send(ch, make(0, true, "+f")), 0);
        ck_assert_uint_eq(mux_drain(m), 0);
        ck_assert_uint_eq(t.n, 3);
        ck_assert_uint_eq(mux_drain(m), 1);
        ck_assert_uint_eq(t.n, 4);
        ck_assert_uint_eq(t.got[3], 6);
        ck_assert_uint_eq(t.sent_at_merge, 6);
        /* No callback: nothing is told. */
        mux_channel_on_merged(ch, NULL, NULL);
        ck_assert_int_eq(mux_channel_send(ch, make(0, true, "+g")), 0);
        ck_assert_uint_eq(mux_drain(m), 1);
        ck_assert_uint_eq(t.n, 4);
        mux_free(m);
}
END_TEST

UNIT_MAIN(test_merged_through_numbers, test_sets_and_deltas_fold_while_waiting, test_burst_of_deltas_is_bounded,
          test_channel_per_name, test_sources_sorted, test_fifo_within_and_across_channels,
          test_send_from_merge_same_drain, test_loop_deferred_drain, test_free_with_pending,
          test_free_with_drain_scheduled_loop_keeps_running)
