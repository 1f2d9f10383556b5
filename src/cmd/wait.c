/*
 * podmux wait — waits until the daemon has an outcome for the current
 * content of each FILE (podmux(8) "PODMUX WAIT"): applied, rejected, a
 * duplicate or ignored, or with --gone, its pod removed.
 *
 * "Current" is the bytes on disk when the wait began, or any later
 * version.  The wait subscribes first ({"request":"files"},
 * doc/protocol.md "Files request"), then hashes each file, and takes a
 * record whose digest is the file's; a record of other bytes makes it
 * hash the file again (a later version is as good), so a write just
 * before the wait, or during it, cannot be missed: the daemon tells each
 * read after the subscription.  No polling: it sleeps in poll(2) on the
 * socket until a record or the deadline; a connection that ends (the
 * daemon restarting) is opened again, 100 ms doubling to 1 s apart.
 * A file the daemon cannot read (an I/O error, doc/pod-config.md 6.8)
 * has no outcome yet: the daemon tries again, and the wait goes on,
 * having said why once.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "daemon_conn.h"
#include "util/buf.h"
#include "util/clock.h"
#include "cmd/cmd.h"
#include "cmd/usage.h"
#include "util/digest.h"
#include "util/duration.h"
#include "util/file.h"
#include "util/json_parse.h"
#include "util/json_get.h"
#include "util/json_path.h"
#include "sources/manifest.h"
#include "cmd/options.h"
#include "util/path.h"
#include "util/proto_words.h"
#include "util/str.h"

#define WAIT_DEFAULT_TIMEOUT_USEC (30ull * 1000000u)
#define WAIT_RECONNECT_MIN_USEC (100u * 1000u)
#define WAIT_RECONNECT_MAX_USEC (1000u * 1000u)

/* Exit statuses (podmux(8)). */
enum {
        WAIT_APPLIED = 0,     /* every file applied (--gone: gone) */
        WAIT_NOT_APPLIED = 1, /* some file rejected, a duplicate or ignored */
        WAIT_USAGE = 2,
        WAIT_TIMEOUT = 3,
        WAIT_CANNOT = 4, /* the daemon cannot answer: refused, too old, the file is not its, or is its directory */
};

/* What one connection ended with. */
enum session_end {
        SESSION_DONE,    /* every file has its outcome */
        SESSION_RETRY,   /* the connection ended: open another */
        SESSION_TIMEOUT, /* the deadline passed */
        SESSION_CANNOT,  /* no use trying again (err says why) */
};

struct target {
        char *path;     /* absolute and cleaned: the daemon's name for it */
        bool exists;    /* as last looked at */
        bool have_hash; /* hash is of the bytes on disk, as last read */
        uint8_t hash[DIGEST_LEN];
        bool seen;            /* the daemon sent a record of it on this connection */
        bool told_unreadable; /* "the daemon cannot read it" was said */
        json_object *rec;     /* the daemon's last record of it, or NULL */
        json_object *outcome; /* the record that settles it, or NULL */
        bool done;
};

struct wait {
        const char *socket;
        uint64_t timeout; /* 0: none */
        bool gone;
        struct target *t;
        size_t n;
        char last_error[512]; /* why the daemon could not be reached, last */
};

static void usage(FILE *f)
{
        fputs("Usage: podmux wait [--socket PATH] [--timeout DUR] [--gone] FILE...\n"
              "\n"
              "Waits until the daemon has an outcome for the current content of each\n"
              "static pod manifest FILE (the bytes on disk when the wait begins, or a\n"
              "later version): it is applied (consumers have its pod), rejected, a\n"
              "duplicate of another file's pod, or ignored.  A file rewritten meanwhile\n"
              "is waited for again; one not there yet is waited for until it is; one the\n"
              "daemon cannot read (EIO, EACCES...) is waited for while it tries again,\n"
              "and standard error says so once, with the error.  With\n"
              "--gone, waits until each FILE is gone and its pod removed.  A wait that\n"
              "begins after the outcome returns at once.  The daemon is asked over its\n"
              "stream socket; a daemon restarting is waited for.\n"
              "\n"
              "Prints, for each applied FILE, on standard output:\n"
              "  \"FILE\": applied NAMESPACE/NAME uid=UID seq=SEQ\n"
              "(SEQ: the update stream message that carried the pod to consumers), and\n"
              "for each other outcome, on standard error, the daemon's reason.  --gone\n"
              "prints \"FILE\": gone seq=SEQ, the message that removed the pod, or\n"
              "seq=- when no message did: the daemon never had the file, or never sent\n"
              "its pod (a rejected file), or the file went before the wait began.\n"
              "\n"
              "Flags:\n"
              "  --socket PATH    the stream socket (default $PODMUX_SOCKET, else\n"
              "                   " OPTIONS_DEFAULT_SOCKET ")\n"
              "  --timeout DUR    give up after this long, 0 for never (default 30s)\n"
              "  --gone           wait for each FILE's pod to be removed (the file deleted)\n"
              "  -h, --help       this help\n"
              "\n"
              "Exit status: 0 every FILE applied (--gone: gone); 1 some FILE rejected, a\n"
              "duplicate or ignored; 2 bad flags; 3 timed out; 4 the daemon cannot\n"
              "answer (it refused, is older than podmux wait, has no static pod path, or\n"
              "FILE is not in it or is that directory itself).\n",
              f);
}

/* Reads the file as it is now: whether it is there, and its digest. */
static void look(struct target *t)
{
        char *data = NULL;
        size_t len = 0;
        int r = file_read(t->path, MANIFEST_MAX_BYTES, &data, &len, NULL);

        t->exists = r != -ENOENT && r != -ENOTDIR;
        t->have_hash = r == 0 && digest_sha256(data, len, t->hash) == 0;
        free(data);
}

static void set_obj(json_object **slot, json_object *o)
{
        json_object_put(*slot);
        *slot = o ? json_object_get(o) : NULL;
}

/* Whether t's record, final, is of the bytes on disk (hashed again when
 * it names others: a later version is as good). */
static bool of_current(struct target *t, const char *digest)
{
        uint8_t d[DIGEST_LEN];

        /* Judged without reading (a dot file, a directory). */
        if (!digest)
                return true;
        if (digest_parse(digest, d) < 0)
                return false;
        if (!t->have_hash || memcmp(t->hash, d, DIGEST_LEN) != 0)
                look(t);
        return t->have_hash && memcmp(t->hash, d, DIGEST_LEN) == 0;
}

/* The daemon's reason for t's unreadable record, without the words
 * the message around it says already. */
static const char *unreadable_reason(json_object *rec)
{
        const char *reason = json_get_str(rec, "reason", "?");

        return strncmp(reason, "cannot be read: ", 16) == 0 ? reason + 16 : reason;
}

/*
 * The daemon could not read t's bytes (EIO, EACCES...: doc/pod-config.md
 * 6.8).  That is no verdict on them, and the daemon reads the file again
 * with its backoff, so the wait goes on; but an admin waiting must know
 * why, at once and not only at the timeout.  Said once per FILE: the
 * daemon tells every retry that fails again.
 */
static void tell_unreadable(struct target *t, json_object *rec)
{
        json_object *pods = json_get_type(rec, "pods", json_type_array);
        json_object *pod = pods && json_object_array_length(pods) ? json_object_array_get_idx(pods, 0) : NULL;
        struct buf q = BUF_INIT;

        if (t->told_unreadable || buf_json_string(&q, t->path, strlen(t->path)) < 0)
                goto out;
        t->told_unreadable = true;
        if (pod)
                fprintf(stderr,
                        "podmux wait: %s: the daemon cannot read it: %s; it keeps the pod it last read, %s/%s "
                        "uid=%s, and tries again: waiting\n",
                        q.data, unreadable_reason(rec), json_get_str(pod, "namespace", ""),
                        json_get_str(pod, "name", "?"), json_get_str(pod, "uid", "-"));
        else
                fprintf(stderr, "podmux wait: %s: the daemon cannot read it: %s; no pod of it, tries again: waiting\n",
                        q.data, unreadable_reason(rec));
out:
        buf_free(&q);
}

/* What the daemon says of t now (rec NULL: nothing, after synced). */
static void judge(struct wait *w, struct target *t, json_object *rec)
{
        const char *state = rec ? json_get_str(rec, "state", "") : "gone";

        set_obj(&t->rec, strcmp(state, "gone") == 0 ? NULL : rec);
        set_obj(&t->outcome, NULL);
        t->done = false;
        if (w->gone) {
                if (strcmp(state, "gone") != 0)
                        return; /* the daemon still has the file */
                look(t);
                t->done = !t->exists;
        } else {
                if (strcmp(state, "unreadable") == 0) {
                        tell_unreadable(t, rec);
                        return; /* not an outcome: read again later */
                }
                if (strcmp(state, "pending") == 0 || strcmp(state, "gone") == 0 ||
                    !of_current(t, json_get_str(rec, "digest", NULL)))
                        return;
                t->done = true;
        }
        if (t->done)
                set_obj(&t->outcome, rec);
}

/* The record rec judges every FILE it names, byte for byte (a name that
 * is not UTF-8 too: src/util/json_path.h): the same file given twice (or
 * spelt twice, "web.yaml ./web.yaml") gets its outcome once per
 * argument.  O(FILEs) per record, as the lookup was. */
static void judge_record(struct wait *w, json_object *rec)
{
        for (size_t i = 0; i < w->n; i++) {
                if (!json_path_is(rec, w->t[i].path, strlen(w->t[i].path)))
                        continue;
                w->t[i].seen = true;
                judge(w, &w->t[i], rec);
        }
}

static bool all_done(const struct wait *w)
{
        for (size_t i = 0; i < w->n; i++)
                if (!w->t[i].done)
                        return false;
        return true;
}

/* The daemon's "files" message: each FILE must be in its static pod path
 * (the path itself, a single file, or a file in that directory). */
static int check_head(struct wait *w, json_object *head, struct buf *err)
{
        const char *dir = json_get_str(head, "path", NULL);
        struct stat st;

        if (!dir)
                return buf_set_err(err, -ENOENT, "the daemon reads no static pod path (--pod-manifest-path)");
        for (size_t i = 0; i < w->n; i++) {
                const char *p = w->t[i].path, *slash = strrchr(p, '/');
                size_t len = slash == p ? 1 : (size_t)(slash - p);
                bool is_dir = json_path_is(head, p, strlen(p));

                /* The directory itself has no record (the daemon reads
                 * the files in it): a wait on it could only time out. */
                if (is_dir && stat(p, &st) == 0 && S_ISDIR(st.st_mode))
                        return buf_set_err(err, -EISDIR,
                                           "\"%s\" is the daemon's static pod directory: wait on the manifests in "
                                           "it",
                                           p);
                if (!is_dir && !json_path_is(head, p, len))
                        return buf_set_err(err, -ENOENT, "\"%s\" is not in the daemon's static pod path \"%s\"", p,
                                           dir);
        }
        return 0;
}

/* One message: SESSION_DONE when every FILE has its outcome, -1 to read
 * on, or how the session ends. */
static int on_message(struct wait *w, json_object *m, bool *synced, struct buf *err)
{
        const char *type = json_get_str(m, "type", "");
        json_object *p;

        if (strcmp(type, "hello") == 0) {
                p = json_get(m, "protocol");
                if (!p || json_object_get_int(p) != 1) {
                        buf_set_err(err, -EPROTO, "the daemon speaks protocol %s, not 1",
                                    p ? json_object_get_string(p) : "?");
                        return SESSION_CANNOT;
                }
        } else if (strcmp(type, "error") == 0) {
                const char *reason = json_get_str(m, "reason", "?");

                buf_set_err(err, -EPROTO, "the daemon refused: %s: %s", reason, json_get_str(m, "message", ""));
                return strcmp(reason, PROTO_ERROR_BAD_REQUEST) == 0 || strcmp(reason, PROTO_ERROR_FORBIDDEN) == 0
                               ? SESSION_CANNOT
                               : SESSION_RETRY;
        } else if (strcmp(type, "files") == 0) {
                if (check_head(w, m, err) < 0)
                        return SESSION_CANNOT;
        } else if (strcmp(type, "file") == 0 && (p = json_get_type(m, "file", json_type_object))) {
                judge_record(w, p);
        } else if (strcmp(type, "synced") == 0) {
                *synced = true;
                for (size_t i = 0; i < w->n; i++)
                        if (!w->t[i].seen)
                                judge(w, &w->t[i], NULL);
        }
        /* --gone needs the whole list: a file not in it is gone. */
        return all_done(w) && (*synced || !w->gone) ? SESSION_DONE : -1;
}

/* One connection, until every FILE has its outcome or it ends. */
static int session(struct wait *w, uint64_t deadline, struct buf *err)
{
        struct daemon_conn c = DAEMON_CONN_INIT;
        bool synced = false;
        char *line;
        int r;

        if (daemon_conn_open(&c, w->socket, "{\"request\":\"files\"}", err) < 0)
                return SESSION_RETRY;
        /* Subscribed first, then the files are read: whatever the daemon
         * reads after this, it tells. */
        for (size_t i = 0; i < w->n; i++) {
                w->t[i].seen = false;
                look(&w->t[i]);
        }
        for (r = -1; r < 0;) {
                json_object *m = NULL;
                int got = daemon_conn_line(&c, deadline, &line, err);

                if (got == -ETIMEDOUT) {
                        r = SESSION_TIMEOUT;
                } else if (got <= 0) {
                        if (got == 0)
                                buf_set_err(err, -ECONNRESET, "the daemon closed the connection");
                        r = SESSION_RETRY;
                } else if (json_parse_text(line, strlen(line), &m, NULL) == 0) {
                        r = on_message(w, m, &synced, err);
                        json_object_put(m);
                }
        }
        daemon_conn_close(&c);
        return r;
}

/* Sleeps usec, but not past deadline (0: none). */
static void pause_until(uint64_t usec, uint64_t deadline)
{
        uint64_t now = mono_usec();
        struct timespec ts;

        if (deadline && now + usec > deadline)
                usec = deadline > now ? deadline - now : 0;
        ts.tv_sec = (time_t)(usec / 1000000u);
        ts.tv_nsec = (long)(usec % 1000000u) * 1000;
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

/* Prints each outcome; the exit status. */
static int report(const struct wait *w)
{
        int status = WAIT_APPLIED;

        for (size_t i = 0; i < w->n; i++) {
                json_object *o = w->t[i].outcome, *pods = json_get_type(o, "pods", json_type_array);
                json_object *pod = pods && json_object_array_length(pods) ? json_object_array_get_idx(pods, 0) : NULL;
                const char *state = o ? json_get_str(o, "state", "gone") : "gone";
                struct buf q = BUF_INIT;

                if (buf_json_string(&q, w->t[i].path, strlen(w->t[i].path)) < 0)
                        return WAIT_CANNOT;
                if (strcmp(state, "applied") == 0) {
                        printf("%s: applied %s/%s uid=%s seq=%s\n", q.data, json_get_str(pod, "namespace", ""),
                               json_get_str(pod, "name", "?"), json_get_str(pod, "uid", "-"),
                               json_object_get_string(json_get(o, "seq")) ? json_object_get_string(json_get(o, "seq"))
                                                                          : "-");
                } else if (strcmp(state, "gone") == 0) {
                        json_object *seq = json_get(o, "seq");

                        printf("%s: gone seq=%s\n", q.data, seq ? json_object_get_string(seq) : "-");
                } else {
                        fprintf(stderr, "podmux wait: %s: %s: %s\n", q.data, state, json_get_str(o, "reason", "-"));
                        status = WAIT_NOT_APPLIED;
                }
                buf_free(&q);
        }
        fflush(stdout);
        return status;
}

/* What is known of each FILE not settled when the time is up. */
static int timed_out(const struct wait *w)
{
        for (size_t i = 0; i < w->n; i++) {
                const struct target *t = &w->t[i];
                const char *state = t->rec ? json_get_str(t->rec, "state", "?") : NULL;
                struct buf q = BUF_INIT;

                if (t->done || buf_json_string(&q, t->path, strlen(t->path)) < 0)
                        continue;
                if (w->last_error[0])
                        fprintf(stderr, "podmux wait: %s: timed out: %s\n", q.data, w->last_error);
                else if (w->gone)
                        fprintf(stderr, "podmux wait: %s: timed out: %s\n", q.data,
                                t->exists ? "the file is still there" : "the daemon still has its record");
                else if (!state)
                        fprintf(stderr, "podmux wait: %s: timed out: the daemon has not seen %s\n", q.data,
                                t->exists ? "it yet" : "it (the file does not exist)");
                else if (strcmp(state, "pending") == 0)
                        fprintf(stderr, "podmux wait: %s: timed out: pending (read, not yet merged)\n", q.data);
                else if (strcmp(state, "unreadable") == 0)
                        fprintf(stderr, "podmux wait: %s: timed out: the daemon cannot read it: %s\n", q.data,
                                unreadable_reason(t->rec));
                else
                        fprintf(stderr,
                                "podmux wait: %s: timed out: the daemon's verdict (%s) is of other bytes "
                                "than the file's now\n",
                                q.data, state);
                buf_free(&q);
        }
        return WAIT_TIMEOUT;
}

static int run(struct wait *w)
{
        uint64_t deadline = w->timeout ? mono_usec() + w->timeout : 0, pause = WAIT_RECONNECT_MIN_USEC;
        struct buf err = BUF_INIT;
        int r;

        for (;;) {
                buf_reset(&err);
                r = session(w, deadline, &err);
                if (r == SESSION_DONE || r == SESSION_CANNOT || r == SESSION_TIMEOUT)
                        break;
                /* The connection ended, or none could be made: again. */
                (void)snprintf(w->last_error, sizeof(w->last_error), "%s", err.len ? err.data : "no connection");
                if (deadline && mono_usec() >= deadline) {
                        r = SESSION_TIMEOUT;
                        break;
                }
                pause_until(pause, deadline);
                pause = pause * 2 > WAIT_RECONNECT_MAX_USEC ? WAIT_RECONNECT_MAX_USEC : pause * 2;
        }
        if (r == SESSION_DONE) {
                r = report(w);
        } else if (r == SESSION_CANNOT) {
                fprintf(stderr, "podmux wait: %s\n", err.len ? err.data : "the daemon cannot answer");
                r = WAIT_CANNOT;
        } else {
                if (r == SESSION_TIMEOUT && w->last_error[0] && deadline && mono_usec() < deadline)
                        w->last_error[0] = '\0';
                r = timed_out(w);
        }
        buf_free(&err);
        return r;
}

/* The flags into w; -1 to go on with argv[optind...], else the exit
 * status. */
static int parse_args(struct wait *w, int argc, char **argv)
{
        static const struct option opts[] = {
                {"socket", required_argument, NULL, 's'},
                {"timeout", required_argument, NULL, 't'},
                {"gone", no_argument, NULL, 'g'},
                {"help", no_argument, NULL, 'h'},
                {NULL, 0, NULL, 0},
        };
        int c;

        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
                switch (c) {
                case 's':
                        if (!optarg[0])
                                return cmd_usage_error("wait", "--socket must not be empty");
                        w->socket = optarg;
                        break;
                case 't':
                        if (duration_parse(optarg, &w->timeout) < 0)
                                return cmd_usage_error("wait", "--timeout \"%s\": not a duration (e.g. 30s, 2m, 0)",
                                                       optarg);
                        break;
                case 'g':
                        w->gone = true;
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                default: /* '?' or ':' */
                        return cmd_bad_flag("wait", c, argc, argv, opts);
                }
        }
        if (optind >= argc)
                return cmd_usage_error("wait", "no FILE given");
        return -1;
}

int cmd_wait(int argc, char **argv)
{
        const char *env = getenv("PODMUX_SOCKET");
        struct wait w = {.timeout = WAIT_DEFAULT_TIMEOUT_USEC};
        int r;

        w.socket = env && *env ? env : OPTIONS_DEFAULT_SOCKET;
        r = parse_args(&w, argc, argv);
        if (r >= 0)
                return r;
        w.n = (size_t)(argc - optind);
        w.t = calloc(w.n, sizeof(*w.t));
        if (!w.t) {
                fprintf(stderr, "podmux wait: %s\n", ERRNO_STR(-ENOMEM));
                return WAIT_CANNOT;
        }
        for (size_t i = 0; i < w.n; i++) {
                r = path_absolute(argv[optind + (int)i], NULL, &w.t[i].path);
                if (r < 0) {
                        fprintf(stderr, "podmux wait: \"%s\": %s\n", argv[optind + (int)i], ERRNO_STR(r));
                        r = WAIT_CANNOT;
                        goto out;
                }
        }
        r = run(&w);
out:
        for (size_t i = 0; i < w.n; i++) {
                free(w.t[i].path);
                json_object_put(w.t[i].rec);
                json_object_put(w.t[i].outcome);
        }
        free(w.t);
        return r;
}
