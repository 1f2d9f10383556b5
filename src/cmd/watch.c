/*
 * watch — `podmux watch`: a consumer of the update stream built on
 * libpodmux-client (include/podmux/client.h, doc/protocol.md).  The
 * library holds the cache, resumes and resyncs; watch prints the changes
 * it hands on (a `kubectl get pods -w` style table), the raw protocol
 * lines (-o json), or runs a command once per pod change (--exec).
 *
 * The only place it waits is ppoll() on the library's descriptor, with
 * SIGINT/SIGTERM blocked everywhere else: a signal can only land inside
 * ppoll(), so it is never lost between a check and a wait, and Ctrl-C
 * always exits 0 at once.  A command run by --exec gets the signal mask
 * and SIGPIPE disposition watch started with.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* ppoll(); the build defines it too */
#endif

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <langinfo.h>
#include <locale.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "util/buf.h"
#include "podmux/client.h"
#include "cmd/cmd.h"
#include "cmd/usage.h"
#include "util/json_get.h"
#include "util/log.h"
#include "util/table.h"

#define WATCH_DEFAULT_SOCKET PODMUX_CLIENT_DEFAULT_SOCKET

/* The table (util/table.h).  OP and SOURCE are never cut: OP is as wide
 * as RECONCILE (a plugin's DEREGISTERED takes room from NAMESPACE).
 * NAMESPACE, NAME and UID are cut when the line is short, UID first (a
 * pod is told by its namespace and name; its UID is for telling two
 * apart), then the widest, and take the room a wide line leaves (an API
 * server UID has 36 characters; a name or namespace is shown up to 63).
 * SEQ, only with -o wide (kubectl shows no resourceVersion either), is
 * laid out for the 16 digits of the daemon's counter (microseconds since
 * the epoch, doc/protocol.md) and, cut, keeps its last digits, the ones
 * that tell rows apart.  The default table is the same without its
 * first column. */
enum { COL_SEQ, COL_OP, COL_SOURCE, COL_NAMESPACE, COL_NAME, COL_UID, COL_PHASE, N_COLS };
static const struct table_column columns[N_COLS] = {
        [COL_SEQ] = {.title = "SEQ", .floor = 16, .least = 7, .tail = true},
        [COL_OP] = {.title = "OP", .floor = 9},
        [COL_SOURCE] = {.title = "SOURCE", .floor = 6},
        [COL_NAMESPACE] = {.title = "NAMESPACE", .floor = 9, .least = 9, .most = 63},
        [COL_NAME] = {.title = "NAME", .floor = 10, .least = 16, .most = 63},
        [COL_UID] = {.title = "UID", .floor = 8, .least = 8, .most = 36, .first = true},
        [COL_PHASE] = {.title = "PHASE", .floor = 9},
};

/* Set by the signal handler: the one piece of state a handler can touch. */
static volatile sig_atomic_t watch_signal;

static void on_signal(int sig)
{
        watch_signal = sig;
}

struct watch {
        const char *path;
        bool json;
        bool wide;        /* -o wide: the SEQ column too */
        size_t first_col; /* the first of columns shown: COL_SEQ or COL_OP */
        bool reconnect;
        bool have_resume;
        uint64_t resume;
        const char *exec;
        struct table table; /* laid out with the first rows */
        bool measuring;     /* print_row() measures the first rows */
        bool header_done;
        sigset_t waitmask; /* what ppoll() waits with: SIGINT/TERM open */
        sigset_t old_mask; /* what --exec's command starts with */
        struct podmux_error last;  /* copied strings below */
        char last_message[512];
        bool have_last;
        /* A failure to reach the daemon said, and not cleared since: the
         * same one again is not said again (--reconnect retries it). */
        bool failing;
        char failing_message[512];
};

static void usage(FILE *f)
{
        fputs("Usage: podmux watch [--socket PATH] [-o table|wide|json] [--resume-after N]\n"
              "                    [--reconnect] [--exec CMD]\n"
              "\n"
              "Connects to the update stream of `podmux run` and prints every\n"
              "change: as a table (one row per pod per change) or as the raw\n"
              "JSON lines of the protocol (-o json); or runs a command per pod\n"
              "change (--exec).\n"
              "\n"
              "Flags:\n"
              "  --socket PATH       the stream socket (default $PODMUX_SOCKET, else\n"
              "                      " WATCH_DEFAULT_SOCKET ")\n"
              "  -o, --output FMT    table (default), wide (the table with each row's\n"
              "                      SEQ) or json; the table fits the terminal's\n"
              "                      width ($COLUMNS, else 80), long values elided,\n"
              "                      the UID first\n"
              "  --resume-after N    ask the server for every message after seq N; if\n"
              "                      N is no longer in its history it sends the full\n"
              "                      state instead\n"
              "  --reconnect         when the connection is lost, retry (after 100 ms,\n"
              "                      doubling to 5 s) and resume after the last change;\n"
              "                      a failure is said once, however often it recurs,\n"
              "                      and a line says when it clears\n"
              "  --exec CMD          run CMD with /bin/sh once per pod change, one at\n"
              "                      a time and in order: the pod's JSON on stdin;\n"
              "                      PODMUX_OP, PODMUX_SOURCE, PODMUX_UID,\n"
              "                      PODMUX_NAMESPACE, PODMUX_NAME and PODMUX_RESYNC\n"
              "                      (1 for a change computed after a resync, else 0)\n"
              "                      in its environment; a failure is logged and the\n"
              "                      stream goes on\n"
              "  -h, --help          this help\n"
              "\n"
              "Exit status: 0 when the server shuts down (or on SIGINT/SIGTERM), 1 when\n"
              "the connection fails or the server drops this consumer, 2 on bad flags.\n",
              f);
}

/* Whether the user's locale writes UTF-8 (the table's ellipsis). */
static bool utf8_locale(void)
{
        const char *cs;

        if (!setlocale(LC_CTYPE, ""))
                return false;
        cs = nl_langinfo(CODESET);
        return cs && strcmp(cs, "UTF-8") == 0;
}

static int parse_u64(const char *s, uint64_t *ret)
{
        unsigned long long v;
        char *end = NULL;

        if (!s || *s < '0' || *s > '9')
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno == ERANGE)
                return -ERANGE;
        if (*end != '\0')
                return -EINVAL;
        *ret = (uint64_t)v;
        return 0;
}

/* ---- output ----------------------------------------------------------- */

/* The first rows lay the table out: the header goes with them. */
static void print_header(struct watch *w)
{
        if (w->header_done)
                return;
        table_layout(&w->table);
        table_print_header(&w->table, stdout);
        w->header_done = true;
}

/* Prints a row, or before the header only measures it (w->measuring). */
static void print_row(struct watch *w, const char *seq, const char *op, const char *source, const char *ns,
                      const char *name, const char *uid, const char *phase)
{
        const char *cells[N_COLS] = {seq, op, source, ns, name, uid, phase};

        if (w->measuring)
                table_measure(&w->table, cells + w->first_col);
        else
                table_print_row(&w->table, cells + w->first_col, stdout);
}

/* "-- text" for what is not a row. */
static void print_note(struct watch *w, const char *text)
{
        print_header(w);
        table_print_note(&w->table, "-- ", text, stdout);
}

/* The SEQ cell: the message's number, or "resync" for a change the
 * library computed from a full state. */
static const char *seq_cell(char *buf, size_t size, uint64_t seq, bool resync)
{
        if (resync || seq == 0)
                return resync ? "resync" : "state";
        (void)snprintf(buf, size, "%" PRIu64, seq);
        return buf;
}

static void update_rows(struct watch *w, const struct podmux_update *u)
{
        char sb[24];
        const char *seq = seq_cell(sb, sizeof(sb), u->seq, u->resync);
        const char *op = podmux_op_name(u->op);

        if (u->n_pods == 0) {
                /* An empty SET or ADD still says something: a row. */
                print_row(w, seq, op, u->source, "-", "<no pods>", "-", "-");
                return;
        }
        for (size_t i = 0; i < u->n_pods; i++) {
                const struct podmux_pod *p = u->pods[i];
                json_object *o = NULL;
                const char *phase = NULL;

                if (podmux_pod_object(p, &o) == 0)
                        phase = json_get_str(json_get(o, "status"), "phase", NULL);
                print_row(w, seq, op, podmux_pod_source(p), podmux_pod_namespace(p), podmux_pod_name(p),
                          podmux_pod_uid(p), phase);
                json_object_put(o);
        }
}

/* The first update's rows lay the table out: measured, then printed. */
static void print_update(struct watch *w, const struct podmux_update *u)
{
        if (!w->header_done) {
                w->measuring = true;
                update_rows(w, u);
                w->measuring = false;
                print_header(w);
        }
        update_rows(w, u);
}

/* ---- --exec --------------------------------------------------------------- */

/* Writes all of s to fd; a command that exits without reading is not an
 * error (EPIPE: SIGPIPE is ignored while watch runs). */
static void write_all(int fd, const char *s, size_t n)
{
        while (n > 0) {
                ssize_t k = write(fd, s, n);

                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return;
                }
                s += k;
                n -= (size_t)k;
        }
}

/* Runs the command for one pod, waits for it, logs a failure. */
static void exec_one(struct watch *w, const char *op, const struct podmux_pod *p, bool resync)
{
        int pfd[2], status = 0;
        size_t len;
        const char *json = podmux_pod_json(p, &len);
        pid_t pid;

        if (pipe2(pfd, O_CLOEXEC) < 0) {
                fprintf(stderr, "podmux watch: --exec: cannot make a pipe: %s\n", ERRNO_STR(-errno));
                return;
        }
        pid = fork();
        if (pid < 0) {
                fprintf(stderr, "podmux watch: --exec: cannot fork: %s\n", ERRNO_STR(-errno));
                close(pfd[0]);
                close(pfd[1]);
                return;
        }
        if (pid == 0) {
                /* The child: only async-signal-safe work would be strictly
                 * needed, but this process has one thread. */
                if (dup2(pfd[0], STDIN_FILENO) < 0)
                        _exit(127);
                signal(SIGPIPE, SIG_DFL);
                signal(SIGINT, SIG_DFL);
                signal(SIGTERM, SIG_DFL);
                sigprocmask(SIG_SETMASK, &w->old_mask, NULL);
                if (setenv("PODMUX_OP", op, 1) < 0 || setenv("PODMUX_SOURCE", podmux_pod_source(p), 1) < 0 ||
                    setenv("PODMUX_UID", podmux_pod_uid(p), 1) < 0 ||
                    setenv("PODMUX_NAMESPACE", podmux_pod_namespace(p), 1) < 0 ||
                    setenv("PODMUX_NAME", podmux_pod_name(p), 1) < 0 ||
                    setenv("PODMUX_RESYNC", resync ? "1" : "0", 1) < 0)
                        _exit(127);
                execl("/bin/sh", "sh", "-c", w->exec, (char *)NULL);
                _exit(127);
        }
        close(pfd[0]);
        write_all(pfd[1], json, len);
        write_all(pfd[1], "\n", 1);
        close(pfd[1]);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                return;
        if (WIFEXITED(status))
                fprintf(stderr, "podmux watch: --exec: the command exited with status %d for %s %s/%s (uid %s)\n",
                        WEXITSTATUS(status), op, podmux_pod_namespace(p), podmux_pod_name(p), podmux_pod_uid(p));
        else
                fprintf(stderr, "podmux watch: --exec: the command was killed by signal %d for %s %s/%s (uid %s)\n",
                        WIFSIGNALED(status) ? WTERMSIG(status) : 0, op, podmux_pod_namespace(p),
                        podmux_pod_name(p), podmux_pod_uid(p));
}

/* ---- handlers ----------------------------------------------------------------- */

static void on_pods(struct podmux_client *c, const struct podmux_update *u, void *data)
{
        struct watch *w = data;

        (void)c;
        if (w->exec) {
                for (size_t i = 0; i < u->n_pods && !watch_signal; i++)
                        exec_one(w, podmux_op_name(u->op), u->pods[i], u->resync);
                return;
        }
        if (!w->json)
                print_update(w, u);
}

/* A failure said clears when the stream is whole again: one line. */
static void failure_cleared(struct watch *w, bool resumed)
{
        if (!w->failing)
                return;
        w->failing = false;
        fprintf(stderr, "podmux watch: connected again to \"%s\" (%s)\n", w->path, resumed ? "resumed" : "full state");
}

static void on_synced(struct podmux_client *c, bool resumed, void *data)
{
        struct watch *w = data;
        char text[96];
        size_t n;

        failure_cleared(w, resumed);
        if (w->json || w->exec)
                return;
        n = podmux_client_pod_count(c);
        (void)snprintf(text, sizeof(text), "synced: %s, %zu pod%s", resumed ? "resumed" : "full state", n,
                       n == 1 ? "" : "s");
        print_note(w, text);
}

static void on_ready(struct podmux_client *c, const char *const *sources, size_t n, void *data)
{
        struct watch *w = data;
        struct buf text = BUF_INIT;

        (void)c;
        if (w->json || w->exec)
                return;
        (void)buf_puts(&text, "sources ready:");
        for (size_t i = 0; i < n; i++)
                (void)buf_printf(&text, "%s %s", i ? "," : "", sources[i]);
        if (text.len)
                print_note(w, text.data);
        buf_free(&text);
}

static void on_plugin(struct podmux_client *c, const struct podmux_plugin_event *e, void *data)
{
        struct watch *w = data;
        char sb[24];
        const char *seq;

        (void)c;
        if (w->json || w->exec)
                return;
        seq = seq_cell(sb, sizeof(sb), e->seq, e->resync);
        if (!w->header_done) {
                w->measuring = true;
                print_row(w, seq, e->op, "plugin", e->type, e->name, "-", e->error);
                w->measuring = false;
                print_header(w);
        }
        print_row(w, seq, e->op, "plugin", e->type, e->name, "-", e->error);
}

/* What a source serves, when it changes (doc/protocol.md "source"): for
 * an edge node the one fact that matters, so the table says it too. */
static void on_source(struct podmux_client *c, const struct podmux_source_state *s, void *data)
{
        struct watch *w = data;
        char text[512]; /* a note is cut to the line anyway */

        (void)c;
        if (w->json || w->exec)
                return;
        if (s->serving == PODMUX_SERVING_CHECKPOINT)
                (void)snprintf(text, sizeof(text), "source %s: checkpoint of %s (resourceVersion %s)", s->source,
                               s->checkpoint_time ? s->checkpoint_time : "?",
                               s->checkpoint_resource_version ? s->checkpoint_resource_version : "?");
        else if (s->serving == PODMUX_SERVING_LIVE)
                (void)snprintf(text, sizeof(text), "source %s: live", s->source);
        else
                (void)snprintf(text, sizeof(text), "source %s: %s", s->source, s->state);
        print_note(w, text);
}

static void on_error(struct podmux_client *c, const struct podmux_error *e, void *data)
{
        struct watch *w = data;

        (void)c;
        w->last = *e;
        (void)snprintf(w->last_message, sizeof(w->last_message), "%s", e->message);
        w->last.message = w->last_message;
        w->last.reason = NULL;
        w->have_last = true;
        if (e->fatal)
                return;
        /* While the daemon is away every retry fails alike: said once. */
        if (w->failing && strcmp(w->failing_message, w->last_message) == 0)
                return;
        w->failing = true;
        (void)snprintf(w->failing_message, sizeof(w->failing_message), "%s", e->message);
        fprintf(stderr, "podmux watch: %s\n", e->message);
}

static void on_line(struct podmux_client *c, const char *line, size_t len, void *data)
{
        struct watch *w = data;

        (void)c;
        if (!w->json)
                return;
        fwrite(line, 1, len, stdout);
        putchar('\n');
}

/* ---- the loop ------------------------------------------------------------------ */

static int install_signals(struct watch *w, struct sigaction *old_int, struct sigaction *old_term,
                           struct sigaction *old_pipe)
{
        struct sigaction sa;
        sigset_t block;

        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigemptyset(&block);
        sigaddset(&block, SIGINT);
        sigaddset(&block, SIGTERM);
        if (sigprocmask(SIG_BLOCK, &block, &w->old_mask) < 0)
                return -errno;
        w->waitmask = w->old_mask;
        sigdelset(&w->waitmask, SIGINT);
        sigdelset(&w->waitmask, SIGTERM);
        if (sigaction(SIGINT, &sa, old_int) < 0 || sigaction(SIGTERM, &sa, old_term) < 0)
                return -errno;
        /* --exec writes to a command that may not read its stdin. */
        sa.sa_handler = SIG_IGN;
        if (sigaction(SIGPIPE, &sa, old_pipe) < 0)
                return -errno;
        return 0;
}

/* Runs the client until a signal or its end: the exit status. */
static int watch_loop(struct watch *w, struct podmux_client *c)
{
        for (;;) {
                struct pollfd pfd = {.fd = podmux_client_fd(c), .events = POLLIN};
                struct timespec ts, *tsp = NULL;
                int r = podmux_client_process(c), t;

                fflush(stdout);
                if (watch_signal)
                        return 0;
                if (r < 0) {
                        if (r == -ESHUTDOWN)
                                return 0; /* the daemon shut down */
                        fprintf(stderr, "podmux watch: %s\n",
                                w->have_last ? w->last_message : "the connection ended");
                        return 1;
                }
                t = podmux_client_timeout(c);
                if (t >= 0) {
                        ts.tv_sec = t / 1000;
                        ts.tv_nsec = (long)(t % 1000) * 1000000L;
                        tsp = &ts;
                }
                if (ppoll(&pfd, 1, tsp, &w->waitmask) < 0 && errno != EINTR)
                        return 1;
                if (watch_signal)
                        return 0;
        }
}

static int parse_args(struct watch *w, int argc, char **argv)
{
        static const struct option opts[] = {
                {"socket", required_argument, NULL, 's'},
                {"output", required_argument, NULL, 'o'},
                {"resume-after", required_argument, NULL, 'r'},
                {"reconnect", no_argument, NULL, 'R'},
                {"exec", required_argument, NULL, 'e'},
                {"help", no_argument, NULL, 'h'},
                {NULL, 0, NULL, 0},
        };
        int c;

        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
                switch (c) {
                case 's':
                        w->path = optarg;
                        break;
                case 'o':
                        w->json = strcmp(optarg, "json") == 0;
                        w->wide = strcmp(optarg, "wide") == 0;
                        if (!w->json && !w->wide && strcmp(optarg, "table") != 0)
                                return cmd_usage_error("watch", "-o \"%s\": want table, wide or json", optarg);
                        break;
                case 'r':
                        if (parse_u64(optarg, &w->resume) < 0)
                                return cmd_usage_error("watch", "--resume-after \"%s\": want a non-negative integer",
                                                       optarg);
                        w->have_resume = true;
                        break;
                case 'R':
                        w->reconnect = true;
                        break;
                case 'e':
                        if (!*optarg)
                                return cmd_usage_error("watch", "--exec needs a command");
                        w->exec = optarg;
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                default: /* '?' or ':' */
                        return cmd_bad_flag("watch", c, argc, argv, opts);
                }
        }
        if (optind < argc)
                return cmd_usage_error("watch", "unexpected argument \"%s\"", argv[optind]);
        if (w->exec && w->json)
                return cmd_usage_error("watch", "--exec and -o json do not go together");
        if (!*w->path)
                return cmd_usage_error("watch", "the socket path is empty");
        return -1;
}

int cmd_watch(int argc, char **argv)
{
        struct watch w;
        struct sigaction old_int, old_term, old_pipe;
        struct podmux_client *c = NULL;
        const char *env;
        int r, status;

        memset(&w, 0, sizeof(w));
        env = getenv("PODMUX_SOCKET");
        w.path = env && *env ? env : WATCH_DEFAULT_SOCKET;
        status = parse_args(&w, argc, argv);
        if (status >= 0)
                return status;
        w.first_col = w.wide ? COL_SEQ : COL_OP;
        table_init(&w.table, columns + w.first_col, N_COLS - w.first_col, table_terminal_width(STDOUT_FILENO),
                   utf8_locale());
        r = podmux_client_new(w.path, &w, &c);
        if (r < 0) {
                fprintf(stderr, "podmux watch: %s\n", ERRNO_STR(r));
                return 1;
        }
        podmux_client_on_pods(c, on_pods);
        podmux_client_on_synced(c, on_synced);
        podmux_client_on_sources_ready(c, on_ready);
        podmux_client_on_plugin(c, on_plugin);
        podmux_client_on_source(c, on_source);
        podmux_client_on_error(c, on_error);
        podmux_client_on_line(c, on_line);
        if (!w.reconnect)
                podmux_client_set_flags(c, PODMUX_CLIENT_NO_RECONNECT);
        if (w.have_resume)
                podmux_client_set_resume(c, w.resume);
        if (install_signals(&w, &old_int, &old_term, &old_pipe) < 0) {
                fprintf(stderr, "podmux watch: cannot set up signals\n");
                podmux_client_free(c);
                return 1;
        }
        status = watch_loop(&w, c);
        fflush(stdout);
        podmux_client_free(c);
        (void)sigaction(SIGINT, &old_int, NULL);
        (void)sigaction(SIGTERM, &old_term, NULL);
        (void)sigaction(SIGPIPE, &old_pipe, NULL);
        (void)sigprocmask(SIG_SETMASK, &w.old_mask, NULL);
        return status;
}
