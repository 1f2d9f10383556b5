/*
 * bench_drop — a manifest renamed into the watched directory, timed until
 * a C consumer built on libpodmux-client has its pod, next to a raw
 * inotify reader on the same directory (the floor) timing the same
 * renames.  Prints figures; asserts nothing.  Run by scripts/bench (its
 * "drop_c" line).
 *
 * Usage: bench_drop PODMUX DROPS [PODS]
 *
 * The daemon (PODMUX run, its own socket, the directory as its manifest
 * path, no periodic relist) is started with PODS - 1 manifests in the
 * directory (default 1: the dropped one alone).  Each drop writes a
 * manifest of a new pod name beside the directory, then renames it to
 * drop.yaml inside: the time from just before rename() to the consumer's
 * pods handler seeing the pod, and to the inotify reader's thread
 * reading IN_MOVED_TO.  The renaming thread sleeps until both have noted
 * their time (each signals an eventfd once it has): a harness polling
 * for them would take CPU from what it measures on a 2-core machine.
 *
 * Then the same renames into a directory of its own, which the daemon
 * does not watch, reach a relay: a process of its own reading inotify
 * that hands one byte per IN_MOVED_TO over a socket to a thread of this
 * one, timed next to a second raw reader.  Two wake-ups and no work: the
 * floor of any design with a daemon between the file and the consumer,
 * so what the C consumer takes beyond it is the daemon's and the
 * library's work.  A phase of its own, as a third process woken by every
 * rename would take CPU from the first phase's figures.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_pod.h"
#include "podmux/client.h"
#include "util/clock.h"

#define NODE "bench"

/* BENCH_POD_YAML (bench_pod.h) named name, at path. */
static void write_pod(const char *path, const char *name, int i)
{
        FILE *f = fopen(path, "w");

        if (!f || fprintf(f, BENCH_POD_YAML, name, i, i) < 0 || fclose(f) != 0) {
                perror(path);
                exit(1);
        }
}

/* The raw reader: when each IN_MOVED_TO of drop.yaml was read; each is
 * signalled on done, an eventfd. */
struct raw {
        int fd;
        int want;
        uint64_t *at;
        int seen; /* read with __atomic */
        int done;
};

/* Wakes the renaming thread blocked in wait_done(). */
static void signal_done(int fd)
{
        uint64_t one = 1;

        if (write(fd, &one, sizeof(one)) != sizeof(one))
                exit(1);
}

/* Sleeps until fd is signalled, at most 60 s; whether it was. */
static bool wait_done(int fd)
{
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        uint64_t n;

        return poll(&pfd, 1, 60 * 1000) == 1 && read(fd, &n, sizeof(n)) == sizeof(n);
}

/* Reads fd, an inotify descriptor (one read, again after EINTR): how
 * many IN_MOVED_TO of drop.yaml it gave, or -1 when it could not. */
static int read_drops(int fd)
{
        char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
        ssize_t n;
        int drops = 0;

        do
                n = read(fd, buf, sizeof(buf));
        while (n < 0 && errno == EINTR);
        if (n <= 0)
                return -1;
        for (char *p = buf; p < buf + n;) {
                const struct inotify_event *ev = (const struct inotify_event *)p;

                if ((ev->mask & IN_MOVED_TO) && ev->len && !strcmp(ev->name, "drop.yaml"))
                        drops++;
                p += sizeof(*ev) + ev->len;
        }
        return drops;
}

static void *raw_main(void *arg)
{
        struct raw *r = arg;

        while (__atomic_load_n(&r->seen, __ATOMIC_ACQUIRE) < r->want) {
                int drops = read_drops(r->fd);
                uint64_t t = mono_usec();

                if (drops < 0)
                        break;
                for (; drops > 0; drops--) {
                        int k = __atomic_load_n(&r->seen, __ATOMIC_RELAXED);

                        if (k == r->want)
                                break;
                        r->at[k] = t;
                        __atomic_store_n(&r->seen, k + 1, __ATOMIC_RELEASE);
                        signal_done(r->done);
                }
        }
        return NULL;
}

/* The relay's process: one byte on out for each IN_MOVED_TO of drop.yaml
 * in the directory fd watches, until want were handed on. */
static void relay_run(int fd, int out, int want)
{
        while (want > 0) {
                int drops = read_drops(fd);

                if (drops < 0)
                        _exit(1);
                for (; drops > 0 && want > 0; drops--, want--)
                        if (write(out, "x", 1) != 1)
                                _exit(1);
        }
        _exit(0);
}

/* The relay's receiving end, a thread: when each byte came (at[k], fd
 * the socket), each signalled on done. */
static void *relay_main(void *arg)
{
        struct raw *r = arg;

        while (__atomic_load_n(&r->seen, __ATOMIC_ACQUIRE) < r->want) {
                char b;
                ssize_t n = read(r->fd, &b, 1);
                int k = __atomic_load_n(&r->seen, __ATOMIC_RELAXED);

                if (n <= 0) {
                        if (n < 0 && errno == EINTR)
                                continue;
                        break;
                }
                r->at[k] = mono_usec();
                __atomic_store_n(&r->seen, k + 1, __ATOMIC_RELEASE);
                signal_done(r->done);
        }
        return NULL;
}

/*
 * The consumer, on a thread of its own as an application's would be: the
 * renaming thread sits in rename() well after the event is queued (ext4
 * writes the data of a file renamed over another inside the call, some
 * 150 us here), and a consumer sharing that thread could not see the pod
 * before rename() returned.  The main thread sets want and then drop
 * (release); the consumer notes when the pod named want of drop k was
 * handed to it in at, then sets got to k (release) and signals done.
 */
struct consumer {
        struct podmux_client *c;
        char want[64];
        int drop; /* with __atomic */
        int got;  /* with __atomic */
        uint64_t at;
        int stop; /* with __atomic */
        int done;
};

static void on_pods(struct podmux_client *c, const struct podmux_update *u, void *data)
{
        struct consumer *st = data;
        int k = __atomic_load_n(&st->drop, __ATOMIC_ACQUIRE);

        (void)c;
        if (u->op == PODMUX_OP_REMOVE || u->op == PODMUX_OP_DELETE || k == __atomic_load_n(&st->got, __ATOMIC_RELAXED))
                return;
        for (size_t i = 0; i < u->n_pods; i++)
                if (!strcmp(podmux_pod_name(u->pods[i]), st->want)) {
                        st->at = mono_usec();
                        __atomic_store_n(&st->got, k, __ATOMIC_RELEASE);
                        signal_done(st->done);
                        return;
                }
}

/* Runs the client on its descriptor, as an application's loop would,
 * until stop. */
static void *consumer_main(void *arg)
{
        struct consumer *st = arg;

        while (!__atomic_load_n(&st->stop, __ATOMIC_ACQUIRE)) {
                struct pollfd pfd = {.fd = podmux_client_fd(st->c), .events = POLLIN};
                int wait = podmux_client_timeout(st->c);

                if (podmux_client_process(st->c) < 0)
                        exit(1);
                if (wait < 0 || wait > 20)
                        wait = 20;
                (void)poll(&pfd, 1, wait);
        }
        return NULL;
}

/* Runs the client (on its descriptor, as an application's own loop
 * would) until *done or timeout_ms.  Whether *done. */
static bool pump_until(struct podmux_client *c, const uint64_t *done, int timeout_ms)
{
        uint64_t deadline = mono_usec() + (uint64_t)timeout_ms * 1000u;

        for (;;) {
                struct pollfd pfd = {.fd = podmux_client_fd(c), .events = POLLIN};
                int wait = podmux_client_timeout(c);
                uint64_t now;

                if (podmux_client_process(c) < 0)
                        return false;
                if (*done)
                        return true;
                now = mono_usec();
                if (now >= deadline)
                        return false;
                if (wait < 0 || (uint64_t)wait * 1000u > deadline - now)
                        wait = (int)((deadline - now + 999) / 1000);
                (void)poll(&pfd, 1, wait);
        }
}

static pid_t start_daemon(const char *podmux, const char *sock, const char *mdir)
{
        pid_t pid = fork();

        if (pid < 0) {
                perror("fork");
                exit(1);
        }
        if (pid == 0) {
                int null = open("/dev/null", O_WRONLY);

                /* Killed if the benchmark ends early (kept across exec). */
                (void)prctl(PR_SET_PDEATHSIG, SIGTERM);

                if (null >= 0)
                        dup2(null, 2);
                execl(podmux, podmux, "run", "--socket", sock, "--node-name", NODE, "--plugins-registry-dir", "",
                      "--pod-manifest-path", mdir, "--file-check-frequency", "1h", (char *)NULL);
                _exit(127);
        }
        for (int i = 0; i < 1000 && access(sock, F_OK) != 0; i++)
                usleep(10000);
        if (access(sock, F_OK) != 0) {
                fprintf(stderr, "bench_drop: %s did not start\n", podmux);
                exit(1);
        }
        return pid;
}

/* Removes dir and what it holds, one level of subdirectories deep (the
 * manifest directory). */
static void remove_tree(const char *dir, int depth)
{
        DIR *d = opendir(dir);
        struct dirent *de;

        while (d && (de = readdir(d))) {
                char path[PATH_MAX + 256];

                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
                if (unlink(path) < 0 && errno == EISDIR && depth > 0)
                        remove_tree(path, depth - 1);
        }
        if (d)
                closedir(d);
        (void)rmdir(dir);
}

/* CPU time of every thread of pid so far, microseconds (schedstat). */
static uint64_t cpu_usec(pid_t pid)
{
        char path[64];
        uint64_t total = 0;
        DIR *d;
        struct dirent *de;

        snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
        d = opendir(path);
        while (d && (de = readdir(d))) {
                char file[320];
                unsigned long long ns;
                FILE *f;

                if (de->d_name[0] == '.')
                        continue;
                snprintf(file, sizeof(file), "/proc/%d/task/%s/schedstat", (int)pid, de->d_name);
                f = fopen(file, "r");
                if (f && fscanf(f, "%llu", &ns) == 1)
                        total += ns / 1000u;
                if (f)
                        fclose(f);
        }
        if (d)
                closedir(d);
        return total;
}

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

        return x < y ? -1 : x > y;
}

static uint64_t pct(const uint64_t *sorted, int n, int p)
{
        int i = (int)((double)p / 100.0 * (n - 1) + 0.5);

        return sorted[i < n ? i : n - 1];
}

int main(int argc, char **argv)
{
        const char *podmux = argc > 1 ? argv[1] : NULL;
        int drops = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 200;
        int n_pods = argc > 3 ? (int)strtol(argv[3], NULL, 10) : 1;
        char dir[] = "/tmp/podmux-bench-drop-XXXXXX", mdir[64], rdir[64], sock[64], tmp[64];
        char dst[96], rdst[96];
        uint64_t cpu0, cpu1, *lat_c, *lat_raw, *raw_at, *lat_relay, *lat_raw2, *raw2_at, *relay_at;
        struct consumer st = {0};
        struct podmux_client *c = NULL;
        struct raw r = {0}, r2 = {0}, rl = {0};
        pthread_t th, th_consumer, th_raw2, th_relay;
        pid_t pid, relay_pid;
        int status, sv[2], relay_in;

        if (!podmux || drops < 1 || n_pods < 1 || !mkdtemp(dir)) {
                fprintf(stderr, "usage: bench_drop PODMUX DROPS [PODS]\n");
                return 2;
        }
        snprintf(mdir, sizeof(mdir), "%s/m", dir);
        snprintf(rdir, sizeof(rdir), "%s/r", dir);
        snprintf(rdst, sizeof(rdst), "%s/drop.yaml", rdir);
        snprintf(sock, sizeof(sock), "%s/s.sock", dir);
        snprintf(tmp, sizeof(tmp), "%s/drop.tmp", dir);
        snprintf(dst, sizeof(dst), "%s/drop.yaml", mdir);
        lat_c = calloc((size_t)drops, sizeof(*lat_c));
        lat_raw = calloc((size_t)drops, sizeof(*lat_raw));
        raw_at = calloc((size_t)drops, sizeof(*raw_at));
        lat_relay = calloc((size_t)drops, sizeof(*lat_relay));
        lat_raw2 = calloc((size_t)drops, sizeof(*lat_raw2));
        raw2_at = calloc((size_t)drops, sizeof(*raw2_at));
        relay_at = calloc((size_t)drops, sizeof(*relay_at));
        st.done = eventfd(0, EFD_CLOEXEC);
        r.done = eventfd(0, EFD_CLOEXEC);
        r2.done = eventfd(0, EFD_CLOEXEC);
        rl.done = eventfd(0, EFD_CLOEXEC);
        if (!lat_c || !lat_raw || !raw_at || !lat_relay || !lat_raw2 || !raw2_at || !relay_at || st.done < 0 ||
            r.done < 0 || r2.done < 0 || rl.done < 0 || mkdir(mdir, 0755) < 0 || mkdir(rdir, 0755) < 0)
                return 1;
        /* The relay's process, before any thread: its watch is in place
         * before it exists, so no rename can come first. */
        relay_in = inotify_init1(IN_CLOEXEC);
        if (relay_in < 0 || inotify_add_watch(relay_in, rdir, IN_MOVED_TO) < 0 ||
            socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                return 1;
        relay_pid = fork();
        if (relay_pid < 0)
                return 1;
        if (relay_pid == 0) {
                /* Gone with this process, however it ends. */
                (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
                close(sv[0]);
                relay_run(relay_in, sv[1], drops);
        }
        close(relay_in);
        close(sv[1]);
        for (int i = 0; i < n_pods - 1; i++) {
                char path[PATH_MAX + 32], name[32];

                snprintf(path, sizeof(path), "%s/p%d.yaml", mdir, i);
                snprintf(name, sizeof(name), "p%d", i);
                write_pod(path, name, i);
        }
        pid = start_daemon(podmux, sock, mdir);
        r.fd = inotify_init1(IN_CLOEXEC);
        r.want = drops;
        r.at = raw_at;
        if (r.fd < 0 || inotify_add_watch(r.fd, mdir, IN_MOVED_TO) < 0)
                return 1;
        pthread_create(&th, NULL, raw_main, &r);
        if (podmux_client_new(sock, &st, &c) < 0)
                return 1;
        podmux_client_on_pods(c, on_pods);
        st.c = c;
        for (int i = 0; i < 3000 && !podmux_client_has_synced(c); i++) {
                uint64_t never = 0;

                (void)pump_until(c, &never, 10);
        }
        if (!podmux_client_has_synced(c)) {
                fprintf(stderr, "bench_drop: the consumer never synced\n");
                return 1;
        }
        /* What the start left to do once the consumer has its state
         * (with PODS in the thousands, tens of ms of CPU) is no drop's
         * cost: the count starts when the daemon has gone idle, its CPU
         * time unchanged over 50 ms (at most 10 s). */
        cpu0 = cpu_usec(pid);
        for (int i = 0; i < 200; i++) {
                uint64_t again;

                usleep(50000);
                again = cpu_usec(pid);
                if (again == cpu0)
                        break;
                cpu0 = again;
        }
        /* From here the consumer's thread alone runs the client. */
        if (pthread_create(&th_consumer, NULL, consumer_main, &st) != 0)
                return 1;
        for (int k = 0; k < drops; k++) {
                char name[32];
                uint64_t t0;

                snprintf(name, sizeof(name), "drop%d", k);
                snprintf(st.want, sizeof(st.want), "%s-%s", name, NODE);
                __atomic_store_n(&st.drop, k + 1, __ATOMIC_RELEASE);
                write_pod(tmp, name, n_pods);
                t0 = mono_usec();
                if (rename(tmp, dst) < 0) {
                        perror("rename");
                        return 1;
                }
                if (!wait_done(st.done) || __atomic_load_n(&st.got, __ATOMIC_ACQUIRE) != k + 1) {
                        fprintf(stderr, "bench_drop: %s never reached the consumer\n", name);
                        return 1;
                }
                if (!wait_done(r.done) || __atomic_load_n(&r.seen, __ATOMIC_ACQUIRE) <= k) {
                        fprintf(stderr, "bench_drop: the inotify reader missed %s\n", name);
                        return 1;
                }
                lat_c[k] = st.at - t0;
                lat_raw[k] = raw_at[k] - t0;
        }
        __atomic_store_n(&st.stop, 1, __ATOMIC_RELEASE);
        pthread_join(th_consumer, NULL);
        cpu1 = cpu_usec(pid);
        pthread_join(th, NULL);
        podmux_client_free(c);
        kill(pid, SIGTERM);
        waitpid(pid, &status, 0);

        /* The relay's phase: the daemon gone, the same renames into rdir. */
        r2.fd = inotify_init1(IN_CLOEXEC);
        r2.want = rl.want = drops;
        r2.at = raw2_at;
        rl.at = relay_at;
        rl.fd = sv[0];
        if (r2.fd < 0 || inotify_add_watch(r2.fd, rdir, IN_MOVED_TO) < 0 ||
            pthread_create(&th_raw2, NULL, raw_main, &r2) != 0 || pthread_create(&th_relay, NULL, relay_main, &rl) != 0)
                return 1;
        for (int k = 0; k < drops; k++) {
                char name[32];
                uint64_t t0;

                snprintf(name, sizeof(name), "drop%d", k);
                write_pod(tmp, name, n_pods);
                t0 = mono_usec();
                if (rename(tmp, rdst) < 0) {
                        perror("rename");
                        return 1;
                }
                if (!wait_done(rl.done) || __atomic_load_n(&rl.seen, __ATOMIC_ACQUIRE) <= k || !wait_done(r2.done) ||
                    __atomic_load_n(&r2.seen, __ATOMIC_ACQUIRE) <= k) {
                        fprintf(stderr, "bench_drop: the relay or its inotify reader missed %s\n", name);
                        return 1;
                }
                lat_relay[k] = relay_at[k] - t0;
                lat_raw2[k] = raw2_at[k] - t0;
        }
        pthread_join(th_raw2, NULL);
        pthread_join(th_relay, NULL);
        waitpid(relay_pid, &status, 0);

        qsort(lat_c, (size_t)drops, sizeof(*lat_c), cmp_u64);
        qsort(lat_raw, (size_t)drops, sizeof(*lat_raw), cmp_u64);
        qsort(lat_relay, (size_t)drops, sizeof(*lat_relay), cmp_u64);
        qsort(lat_raw2, (size_t)drops, sizeof(*lat_raw2), cmp_u64);
        printf("drop_c_consumer pods=%d drops=%d p50_us=%" PRIu64 " p99_us=%" PRIu64 " daemon_cpu_us_per_drop=%.0f\n",
               n_pods, drops, pct(lat_c, drops, 50), pct(lat_c, drops, 99), (double)(cpu1 - cpu0) / drops);
        printf("drop_raw_inotify pods=%d drops=%d p50_us=%" PRIu64 " p99_us=%" PRIu64 "\n", n_pods, drops,
               pct(lat_raw, drops, 50), pct(lat_raw, drops, 99));
        printf("ratio drop c_consumer/raw_inotify p50=%.2f p99=%.2f (target p50 <= 2)\n",
               (double)pct(lat_c, drops, 50) / (double)(pct(lat_raw, drops, 50) ? pct(lat_raw, drops, 50) : 1),
               (double)pct(lat_c, drops, 99) / (double)(pct(lat_raw, drops, 99) ? pct(lat_raw, drops, 99) : 1));
        printf("drop_relay_floor pods=%d drops=%d p50_us=%" PRIu64 " p99_us=%" PRIu64
               " (inotify -> a process -> one byte on a socket -> a thread: two wake-ups, no work)\n",
               n_pods, drops, pct(lat_relay, drops, 50), pct(lat_relay, drops, 99));
        printf("drop_raw_inotify_beside_relay pods=%d drops=%d p50_us=%" PRIu64 " p99_us=%" PRIu64 "\n", n_pods, drops,
               pct(lat_raw2, drops, 50), pct(lat_raw2, drops, 99));
        printf("ratio drop relay/raw_inotify p50=%.2f; c_consumer - relay p50=%" PRId64
               " us (the daemon's and the library's own work)\n",
               (double)pct(lat_relay, drops, 50) / (double)(pct(lat_raw2, drops, 50) ? pct(lat_raw2, drops, 50) : 1),
               (int64_t)pct(lat_c, drops, 50) - (int64_t)pct(lat_relay, drops, 50));
        close(r.fd);
        close(r2.fd);
        close(sv[0]);
        close(r2.done);
        close(rl.done);
        close(r.done);
        close(st.done);
        remove_tree(dir, 1);
        free(lat_c);
        free(lat_raw);
        free(raw_at);
        free(lat_relay);
        free(lat_raw2);
        free(raw2_at);
        free(relay_at);
        return 0;
}
