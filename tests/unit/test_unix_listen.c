/*
 * test_unix_listen — one daemon per socket path: the lock file beside the
 * socket, what a second daemon is told, what is replaced (a leftover)
 * and what never is (a socket another daemon bound but has not listened
 * on yet, a live listener, files that are not ours).
 *
 * "Another daemon" is played by this process: flock() locks belong to an
 * open file description, so a lock taken through a descriptor of our own
 * excludes unix_listen()'s exactly as another process's would.
 *
 * flock(), link() and pwrite() are interposed (defined here, so the
 * library's calls land here) to act in the windows a unit test cannot
 * reach otherwise: between unix_listen()'s open() of a lock file and its
 * flock(), where a previous holder may remove the file or a new daemon
 * replace it; before its link(), where another daemon may make the file
 * first; and to make them fail.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/unix_listen.h"
#include "unit.h"

/* ---- interposed system calls -------------------------------------------- */

enum hook {
        HOOK_NONE,
        HOOK_UNLINK,         /* remove the lock file (its holder exited) */
        HOOK_REPLACE_HELD,   /* remove it; a new daemon makes and locks another */
        HOOK_REPLACE_UNHELD, /* remove it; put a leftover in its place */
        HOOK_RELEASE,        /* the holder removes its file and lets go */
};

static enum hook flock_hook, link_hook;
static int flock_hook_skip;  /* flock() calls to let through first */
static int flock_hook_times; /* calls it acts on then; -1: all */
static int flock_errno;      /* fail every flock() with this */
static int pwrite_errno;     /* fail every pwrite() with this */
static int link_errno;       /* fail every link() with this */
static const char *hook_lock_path;
static int hook_holder_fd = -1; /* the other daemon's lock */

static void hold_lock(const char *path, const char *content, int *ret_fd);
static void put_file(const char *path, const char *content);
static const char *live_pid_line(void);

static void run_hook(enum hook h)
{
        if (unlink(hook_lock_path) < 0)
                ck_assert_int_eq(errno, ENOENT);
        if (h == HOOK_REPLACE_HELD) {
                if (hook_holder_fd >= 0)
                        close(hook_holder_fd);
                hold_lock(hook_lock_path, live_pid_line(), &hook_holder_fd);
        } else if (h == HOOK_REPLACE_UNHELD) {
                put_file(hook_lock_path, "99999999\n");
        } else if (h == HOOK_RELEASE && hook_holder_fd >= 0) {
                close(hook_holder_fd);
                hook_holder_fd = -1;
        }
}

int flock(int fd, int op)
{
        if (flock_hook != HOOK_NONE) {
                if (flock_hook_skip > 0) {
                        flock_hook_skip--;
                } else if (flock_hook_times != 0) {
                        if (flock_hook_times > 0)
                                flock_hook_times--;
                        run_hook(flock_hook);
                }
        }
        if (flock_errno) {
                errno = flock_errno;
                return -1;
        }
        return (int)syscall(SYS_flock, fd, op);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
        if (pwrite_errno) {
                errno = pwrite_errno;
                return -1;
        }
        return (ssize_t)syscall(SYS_pwrite64, fd, buf, n, off);
}

int link(const char *from, const char *to)
{
        if (link_hook != HOOK_NONE) {
                enum hook h = link_hook;

                link_hook = HOOK_NONE;
                run_hook(h);
        }
        if (link_errno) {
                errno = link_errno;
                return -1;
        }
        return (int)syscall(SYS_linkat, AT_FDCWD, from, AT_FDCWD, to, 0);
}

/* ---- helpers ------------------------------------------------------------- */

struct env {
        char dir[64];
        char path[160];
        char lock[170];
        struct unix_listener l;
        struct buf err;
};

static void env_init(struct env *e)
{
        memset(e, 0, sizeof(*e));
        buf_init(&e->err);
        e->l.fd = -1;
        memcpy(e->dir, "/tmp/podmux-ul-XXXXXX", sizeof("/tmp/podmux-ul-XXXXXX"));
        ck_assert_ptr_nonnull(mkdtemp(e->dir));
        (void)snprintf(e->path, sizeof(e->path), "%s/podmux.sock", e->dir);
        (void)snprintf(e->lock, sizeof(e->lock), "%s.lock", e->path);
        flock_hook = link_hook = HOOK_NONE;
        flock_hook_skip = flock_hook_times = 0;
        flock_errno = pwrite_errno = link_errno = 0;
        hook_lock_path = e->lock;
        hook_holder_fd = -1;
}

/* Entries in the test's directory (a temporary file left behind shows). */
static int dir_entries(const struct env *e)
{
        DIR *d = opendir(e->dir);
        struct dirent *de;
        int n = 0;

        ck_assert_ptr_nonnull(d);
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                        n++;
        closedir(d);
        return n;
}

/* Removes what a test left in its directory, and the directory. */
static void env_done(struct env *e)
{
        flock_hook = link_hook = HOOK_NONE;
        flock_errno = pwrite_errno = link_errno = 0;
        unix_listener_close(&e->l);
        buf_free(&e->err);
        if (hook_holder_fd >= 0)
                close(hook_holder_fd);
        hook_holder_fd = -1;
        (void)unlink(e->path);
        (void)unlink(e->lock);
        ck_assert_int_eq(rmdir(e->dir), 0);
}

static int listen_at(struct env *e)
{
        return unix_listen(e->path, 0660, (gid_t)-1, &e->l, &e->err);
}

static const char *err_text(const struct env *e)
{
        return e->err.data;
}

/* "N\n" for a process that exists and is not us: our parent. */
static const char *live_pid_line(void)
{
        static char text[32];

        (void)snprintf(text, sizeof(text), "%ld\n", (long)getppid());
        return text;
}

static void put_file(const char *path, const char *content)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, content, strlen(content)), (ssize_t)strlen(content));
        close(fd);
}

/* Makes (or opens) path, writes content, takes an exclusive flock on it
 * the way a daemon would.  *ret_fd holds the lock until closed. */
static void hold_lock(const char *path, const char *content, int *ret_fd)
{
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq((int)syscall(SYS_flock, fd, LOCK_EX | LOCK_NB), 0);
        ck_assert_int_eq(ftruncate(fd, 0), 0);
        ck_assert_int_eq(pwrite(fd, content, strlen(content), 0), (ssize_t)strlen(content));
        *ret_fd = fd;
}

/* A socket bound at path.  listening: whether it listens.  Returns its fd
 * (closing it leaves the file: a leftover). */
static int bind_at(const char *path, bool listening)
{
        struct sockaddr_un sa;
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        ck_assert_int_ge(fd, 0);
        memset(&sa, 0, sizeof(sa));
        sa.sun_family = AF_UNIX;
        memcpy(sa.sun_path, path, strlen(path) + 1);
        ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        if (listening)
                ck_assert_int_eq(listen(fd, 4), 0);
        return fd;
}

static bool connects(const char *path)
{
        struct sockaddr_un sa;
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        bool ok;

        ck_assert_int_ge(fd, 0);
        memset(&sa, 0, sizeof(sa));
        sa.sun_family = AF_UNIX;
        memcpy(sa.sun_path, path, strlen(path) + 1);
        ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
        close(fd);
        return ok;
}

static void read_file(const char *path, char *out, size_t size)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n;

        ck_assert_int_ge(fd, 0);
        n = read(fd, out, size - 1);
        ck_assert_int_ge(n, 0);
        out[n] = '\0';
        close(fd);
}

/* The lock file holds our pid and is the file we hold. */
static void assert_ours(const struct env *e)
{
        char text[64], want[32];
        struct stat st;

        read_file(e->lock, text, sizeof(text));
        (void)snprintf(want, sizeof(want), "%ld\n", (long)getpid());
        ck_assert_str_eq(text, want);
        ck_assert_int_eq(lstat(e->lock, &st), 0);
        ck_assert(S_ISREG(st.st_mode));
        ck_assert_uint_eq(st.st_mode & 07777, 0600);
        ck_assert_uint_eq(st.st_nlink, 1);
        ck_assert_uint_eq(st.st_ino, e->l.lock_ino);
        ck_assert_uint_eq(st.st_dev, e->l.lock_dev);
        /* Held: a lock through another open file description fails. */
        {
                int fd = open(e->lock, O_RDONLY | O_CLOEXEC);

                ck_assert_int_ge(fd, 0);
                ck_assert_int_eq((int)syscall(SYS_flock, fd, LOCK_EX | LOCK_NB), -1);
                ck_assert_int_eq(errno, EWOULDBLOCK);
                close(fd);
        }
}

static bool exists(const char *path)
{
        struct stat st;

        return lstat(path, &st) == 0;
}

static ino_t inode_of(const char *path)
{
        struct stat st;

        ck_assert_int_eq(lstat(path, &st), 0);
        return st.st_ino;
}

/* A pid that no process has: a child we made and reaped. */
static long dead_pid(void)
{
        pid_t pid = fork();

        ck_assert_int_ge(pid, 0);
        if (pid == 0)
                _exit(0);
        ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
        return (long)pid;
}

/* ---- the lock ------------------------------------------------------------ */

/* The lock file is made 0600 with our pid, held while listening, and
 * removed (after the socket) by close; a second listener on the same
 * path is told who serves it. */
START_TEST(test_lock_taken_held_and_removed)
{
        struct env e;
        struct unix_listener second = {.fd = -1};
        char want[256];

        env_init(&e);
        ck_assert_int_eq(listen_at(&e), 0);
        assert_ours(&e);
        ck_assert_int_eq(fcntl(e.l.lock_fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
        ck_assert_str_eq(e.l.lock_path, e.lock);
        ck_assert_int_eq(dir_entries(&e), 2); /* no temporary file left */

        ck_assert_int_eq(unix_listen(e.path, 0660, (gid_t)-1, &second, &e.err), -EADDRINUSE);
        (void)snprintf(want, sizeof(want), "another podmux (pid %ld) serves %s", (long)getpid(), e.path);
        ck_assert_str_eq(err_text(&e), want);
        ck_assert_ptr_null(second.path);
        /* The first one is untouched. */
        ck_assert(connects(e.path));
        assert_ours(&e);

        unix_listener_close(&e.l);
        ck_assert(!exists(e.path));
        ck_assert(!exists(e.lock));
        /* Closing twice, or a zeroed listener, does nothing. */
        unix_listener_close(&e.l);
        memset(&second, 0, sizeof(second));
        unix_listener_close(&second);
        ck_assert_int_ge(fcntl(0, F_GETFD), 0);
        env_done(&e);
}
END_TEST

/* The race of two daemons started together: the other one has taken the
 * lock and bound its socket, and has not called listen() yet, so the
 * socket refuses connections like a leftover.  It must not be replaced. */
START_TEST(test_bound_not_listening_with_lock_holder)
{
        struct env e;
        char want[256], text[64];
        int holder, other;
        ino_t ino;

        env_init(&e);
        hold_lock(e.lock, live_pid_line(), &holder);
        other = bind_at(e.path, false);
        ino = inode_of(e.path);

        ck_assert_int_eq(listen_at(&e), -EADDRINUSE);
        (void)snprintf(want, sizeof(want), "another podmux (pid %ld) serves %s", (long)getppid(), e.path);
        ck_assert_str_eq(err_text(&e), want);
        ck_assert_ptr_null(e.l.path);
        ck_assert_uint_eq(inode_of(e.path), ino);
        read_file(e.lock, text, sizeof(text));
        ck_assert_str_eq(text, live_pid_line());
        /* The other daemon goes on to listen, undisturbed. */
        ck_assert_int_eq(listen(other, 4), 0);
        ck_assert(connects(e.path));
        close(other);
        close(holder);
        env_done(&e);
}
END_TEST

/* A holder whose file names no live process: it is a holder removing a
 * leftover, and we look again; if it stays so, "unknown pid". */
START_TEST(test_lock_holder_pid_unknown)
{
        char dead[32];
        const char *contents[] = {"", "12ab\n", "99", "-5\n", "0\n", "99999999999999999999\n", dead};
        struct env e;
        char want[256];
        size_t i;
        int holder;

        (void)snprintf(dead, sizeof(dead), "%ld\n", dead_pid());
        env_init(&e);
        (void)snprintf(want, sizeof(want), "another podmux (unknown pid) serves %s", e.path);
        for (i = 0; i < sizeof(contents) / sizeof(contents[0]); i++) {
                hold_lock(e.lock, contents[i], &holder);
                ck_assert_int_eq(listen_at(&e), -EADDRINUSE);
                ck_assert_msg(strcmp(err_text(&e), want) == 0, "content %s: %s", contents[i], err_text(&e));
                ck_assert(!exists(e.path));
                ck_assert_int_eq(dir_entries(&e), 1);
                close(holder);
        }
        /* A newer pid written over a longer one: the newline ends it. */
        hold_lock(e.lock, "99999999\n", &holder);
        ck_assert_int_eq(pwrite(holder, live_pid_line(), strlen(live_pid_line()), 0),
                         (ssize_t)strlen(live_pid_line()));
        ck_assert_int_eq(listen_at(&e), -EADDRINUSE);
        (void)snprintf(want, sizeof(want), "another podmux (pid %ld) serves %s", (long)getppid(), e.path);
        ck_assert_str_eq(err_text(&e), want);
        close(holder);
        env_done(&e);
}
END_TEST

/* The holder of a leftover it just locked removes it and lets go while we
 * look again: we then make our own. */
START_TEST(test_lock_holder_finishes_removing)
{
        char dead[32];
        struct env e;

        env_init(&e);
        (void)snprintf(dead, sizeof(dead), "%ld\n", dead_pid());
        hold_lock(e.lock, dead, &hook_holder_fd);
        flock_hook = HOOK_RELEASE;
        flock_hook_skip = 2;
        flock_hook_times = 1;
        ck_assert_msg(listen_at(&e) == 0, "%s", err_text(&e));
        ck_assert_int_eq(flock_hook_times, 0);
        assert_ours(&e);
        env_done(&e);
}
END_TEST

/* A dead daemon's socket and lock file (nobody holds the lock): both are
 * taken over. */
START_TEST(test_leftover_socket_replaced)
{
        struct env e;

        env_init(&e);
        close(bind_at(e.path, false));
        put_file(e.lock, "99999999\n");

        ck_assert_int_eq(listen_at(&e), 0);
        /* (Not the inode: tmpfs hands the freed number out again.) */
        ck_assert(connects(e.path));
        assert_ours(&e);
        ck_assert_int_eq(dir_entries(&e), 2);
        env_done(&e);
}
END_TEST

/* Something that does not take the lock listens on the path: left alone,
 * with a message that says so, and our lock file is gone again. */
START_TEST(test_foreign_listener_left_alone)
{
        struct env e;
        char want[256];
        int other;
        ino_t ino;

        env_init(&e);
        other = bind_at(e.path, true);
        ino = inode_of(e.path);
        ck_assert_int_eq(listen_at(&e), -EADDRINUSE);
        (void)snprintf(want, sizeof(want), "a process that is not podmux is listening on %s; not replacing it",
                       e.path);
        ck_assert_str_eq(err_text(&e), want);
        ck_assert_uint_eq(inode_of(e.path), ino);
        ck_assert(!exists(e.lock));
        close(other);
        env_done(&e);
}
END_TEST

/* ---- lock files that are not ours to use ---------------------------------- */

START_TEST(test_lock_path_symlink_not_followed)
{
        struct env e;
        char target[200], text[64];

        env_init(&e);
        (void)snprintf(target, sizeof(target), "%s/precious", e.dir);
        put_file(target, "keep\n");
        ck_assert_int_eq(symlink(target, e.lock), 0);

        ck_assert_int_eq(listen_at(&e), -EEXIST);
        ck_assert_msg(strstr(err_text(&e), e.lock) && strstr(err_text(&e), "symbolic link"), "%s",
                      err_text(&e));
        read_file(target, text, sizeof(text));
        ck_assert_str_eq(text, "keep\n");
        ck_assert(!exists(e.path));
        ck_assert_int_eq(unlink(target), 0);
        env_done(&e);
}
END_TEST

START_TEST(test_lock_path_not_a_regular_file)
{
        struct env e;

        env_init(&e);
        /* A FIFO: opened without hanging, then refused. */
        ck_assert_int_eq(mkfifo(e.lock, 0600), 0);
        ck_assert_int_eq(listen_at(&e), -EEXIST);
        ck_assert_msg(strstr(err_text(&e), e.lock) && strstr(err_text(&e), "not a regular file"), "%s",
                      err_text(&e));
        ck_assert(!exists(e.path));
        ck_assert_int_eq(unlink(e.lock), 0);
        /* A directory. */
        ck_assert_int_eq(mkdir(e.lock, 0700), 0);
        ck_assert_int_eq(listen_at(&e), -EISDIR);
        ck_assert_msg(strstr(err_text(&e), "cannot open lock file") && strstr(err_text(&e), e.lock), "%s",
                      err_text(&e));
        ck_assert(!exists(e.path));
        ck_assert_int_eq(rmdir(e.lock), 0);
        env_done(&e);
}
END_TEST

/* A hard link to another file at the lock path: we never write into a
 * file we did not make; the name is removed like any leftover and the
 * other file is untouched. */
START_TEST(test_lock_file_with_other_links)
{
        struct env e;
        char other[200], text[64];
        struct stat st;

        env_init(&e);
        (void)snprintf(other, sizeof(other), "%s/other", e.dir);
        put_file(other, "keep\n");
        ck_assert_int_eq(link(other, e.lock), 0);
        ck_assert_msg(listen_at(&e) == 0, "%s", err_text(&e));
        assert_ours(&e);
        read_file(other, text, sizeof(text));
        ck_assert_str_eq(text, "keep\n");
        ck_assert_int_eq(lstat(other, &st), 0);
        ck_assert_uint_eq(st.st_nlink, 1);
        ck_assert_int_eq(unlink(other), 0);
        env_done(&e);
}
END_TEST

START_TEST(test_lock_dir_not_writable)
{
        struct env e;

        if (geteuid() == 0)
                return; /* root writes anyway */
        env_init(&e);
        ck_assert_int_eq(chmod(e.dir, 0500), 0);
        ck_assert_int_eq(listen_at(&e), -EACCES);
        ck_assert_msg(strstr(err_text(&e), "cannot create lock file") && strstr(err_text(&e), e.lock), "%s",
                      err_text(&e));
        ck_assert_int_eq(chmod(e.dir, 0700), 0);
        env_done(&e);
}
END_TEST

/* ---- races ------------------------------------------------------------------ */

/* We opened a leftover; before our flock() the path was freed (a daemon
 * took the leftover and removed it): we locked an orphan, notice, and
 * make a lock file of our own. */
START_TEST(test_lock_file_removed_before_flock)
{
        struct env e;

        env_init(&e);
        put_file(e.lock, "99999999\n");
        flock_hook = HOOK_UNLINK;
        flock_hook_times = 1;
        ck_assert_msg(listen_at(&e) == 0, "%s", err_text(&e));
        ck_assert_int_eq(flock_hook_times, 0);
        assert_ours(&e);
        env_done(&e);
}
END_TEST

/* ... and a new daemon made and locked a new file meanwhile: it serves,
 * we do not, and its file is left alone. */
START_TEST(test_lock_file_replaced_before_flock)
{
        struct env e;
        char want[256], text[64];

        env_init(&e);
        put_file(e.lock, "99999999\n");
        flock_hook = HOOK_REPLACE_HELD;
        flock_hook_times = 1;
        ck_assert_int_eq(listen_at(&e), -EADDRINUSE);
        (void)snprintf(want, sizeof(want), "another podmux (pid %ld) serves %s", (long)getppid(), e.path);
        ck_assert_str_eq(err_text(&e), want);
        ck_assert(!exists(e.path));
        read_file(e.lock, text, sizeof(text));
        ck_assert_str_eq(text, live_pid_line());
        env_done(&e);
}
END_TEST

/* Two daemons find no lock file and both make one: the second's link()
 * finds the first's, and it is told who serves. */
START_TEST(test_lock_file_made_by_another_first)
{
        struct env e;
        char want[256];

        env_init(&e);
        link_hook = HOOK_REPLACE_HELD;
        ck_assert_int_eq(listen_at(&e), -EADDRINUSE);
        (void)snprintf(want, sizeof(want), "another podmux (pid %ld) serves %s", (long)getppid(), e.path);
        ck_assert_str_eq(err_text(&e), want);
        ck_assert_int_eq(dir_entries(&e), 1); /* theirs; our temporary file is gone */
        env_done(&e);
}
END_TEST

START_TEST(test_lock_file_keeps_changing)
{
        struct env e;

        env_init(&e);
        put_file(e.lock, "99999999\n");
        flock_hook = HOOK_REPLACE_UNHELD;
        flock_hook_times = -1;
        ck_assert_int_eq(listen_at(&e), -EAGAIN);
        ck_assert_msg(strstr(err_text(&e), "giving up") && strstr(err_text(&e), e.lock), "%s", err_text(&e));
        flock_hook = HOOK_NONE;
        ck_assert(!exists(e.path));
        env_done(&e);
}
END_TEST

/* ---- failing calls --------------------------------------------------------- */

/* Each failure is reported naming the lock file, leaves nothing behind
 * (no socket, no lock file, no temporary file), and holds nothing: the
 * next try succeeds. */
START_TEST(test_lock_calls_fail)
{
        static const struct {
                int *knob;
                int err;
                const char *text;
        } cases[] = {
                {&flock_errno, ENOLCK, "cannot lock"},
                {&pwrite_errno, EIO, "cannot write our pid"},
                {&pwrite_errno, ENOSPC, "cannot write our pid"},
                {&link_errno, EPERM, "cannot create lock file"},
        };
        struct env e;
        size_t i;

        env_init(&e);
        for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                *cases[i].knob = cases[i].err;
                ck_assert_int_eq(listen_at(&e), -cases[i].err);
                *cases[i].knob = 0;
                ck_assert_msg(strstr(err_text(&e), cases[i].text) && strstr(err_text(&e), e.lock), "%s",
                              err_text(&e));
                ck_assert_int_eq(dir_entries(&e), 0);
        }
        ck_assert_int_eq(listen_at(&e), 0);
        assert_ours(&e);
        env_done(&e);
}
END_TEST

/* ---- the directory ------------------------------------------------------------ */

/* A socket under missing directories: they are made (0755) and it is
 * served; a file where a directory should be stops it with one sentence
 * naming the socket and that file. */
START_TEST(test_missing_directories_made)
{
        char deep[200], a[180], ab[190], blocked[200], want[700];
        struct stat st;
        mode_t old = umask(022);
        struct env e;

        env_init(&e);
        (void)snprintf(a, sizeof(a), "%s/a", e.dir);
        (void)snprintf(ab, sizeof(ab), "%s/a/b", e.dir);
        (void)snprintf(deep, sizeof(deep), "%s/a/b/podmux.sock", e.dir);
        ck_assert_int_eq(unix_listen(deep, 0660, (gid_t)-1, &e.l, &e.err), 0);
        ck_assert_int_eq(stat(ab, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0755);
        ck_assert_int_eq(stat(deep, &st), 0);
        ck_assert(S_ISSOCK(st.st_mode));
        unix_listener_close(&e.l);
        ck_assert_int_eq(rmdir(ab), 0);
        ck_assert_int_eq(rmdir(a), 0);
        put_file(a, "x");
        (void)snprintf(blocked, sizeof(blocked), "%s/a/b/podmux.sock", e.dir);
        ck_assert_int_eq(unix_listen(blocked, 0660, (gid_t)-1, &e.l, &e.err), -ENOTDIR);
        (void)snprintf(want, sizeof(want),
                       "socket \"%s\": cannot create directory \"%s\": File exists (not a directory)", blocked, a);
        ck_assert_str_eq(err_text(&e), want);
        ck_assert_int_eq(unlink(a), 0);
        umask(old);
        env_done(&e);
}
END_TEST

/* ---- closing ---------------------------------------------------------------- */

/* Files at the paths that are no longer ours are left to their owners. */
START_TEST(test_close_leaves_replaced_files)
{
        struct env e;

        env_init(&e);
        ck_assert_int_eq(listen_at(&e), 0);
        ck_assert_int_eq(unlink(e.path), 0);
        close(bind_at(e.path, false));
        ck_assert_int_eq(unlink(e.lock), 0);
        put_file(e.lock, "1\n");
        unix_listener_close(&e.l);
        ck_assert(exists(e.path));
        ck_assert(exists(e.lock));
        env_done(&e);
}
END_TEST

UNIT_MAIN(test_lock_taken_held_and_removed, test_missing_directories_made, test_bound_not_listening_with_lock_holder,
          test_lock_holder_pid_unknown, test_lock_holder_finishes_removing, test_leftover_socket_replaced,
          test_foreign_listener_left_alone, test_lock_path_symlink_not_followed, test_lock_path_not_a_regular_file,
          test_lock_file_with_other_links, test_lock_dir_not_writable, test_lock_file_removed_before_flock,
          test_lock_file_replaced_before_flock, test_lock_file_made_by_another_first, test_lock_file_keeps_changing,
          test_lock_calls_fail, test_close_leaves_replaced_files)
