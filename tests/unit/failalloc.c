/*
 * failalloc — see failalloc.h.  glibc exports its allocator as
 * __libc_malloc and friends, so the interposed functions forward there
 * without dlsym (which may itself allocate); system calls are found once
 * with dlsym(RTLD_NEXT).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "failalloc.h"

#if defined(__SANITIZE_ADDRESS__)
#define FAILALLOC_INTERPOSE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FAILALLOC_INTERPOSE 0
#endif
#endif
#ifndef FAILALLOC_INTERPOSE
#define FAILALLOC_INTERPOSE 1
#endif

/* Armed state: read and written by the arming thread only, except
 * live, which every thread updates. */
static pthread_t armed_thread;
static bool armed, persist, paused, failed_once;
static long countdown, counted;
static long live;

/* failalloc_spare_tls(): the code of the spared libraries, found by
 * failalloc_arm(); a fixed table, so that the check never allocates. */
#define SPARED_MAX 64
struct code_range {
        uintptr_t lo, hi;
};
static bool spare_tls;
static struct code_range spared_code[SPARED_MAX];
static size_t n_spared_code;
static long spared;
static const void *failed_caller;
static const char *const spared_libs[] = {
        "libgnutls", "libtasn1", "libnettle", "libhogweed", "libgmp", "libp11-kit", "libidn2", "libunistring",
};

struct sysfault {
        long countdown, counted;
        int err;
        bool armed, failed;
};
static struct sysfault sys[_FAILSYS_MAX];

/* failsys_file(): the files that fail, and the descriptors open on one
 * whose reads fail (their errno; 0 none).  Set by the test between
 * steps; other threads only read them. */
#define FILE_FAULTS 8
#define FD_FAULTS 4096
struct filefault {
        dev_t dev;
        ino_t ino;
        enum failsys_call call;
        int err;
};
static struct filefault file_faults[FILE_FAULTS];
static int fd_faults[FD_FAULTS];

bool failalloc_enabled(void)
{
        return FAILALLOC_INTERPOSE;
}

/* dl_iterate_phdr() callback: the executable segments of one spared
 * library, by the file name's stem ("libgnutls.so.30": "libgnutls"). */
static int find_spared(struct dl_phdr_info *info, size_t size, void *data)
{
        const char *name = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
        bool match = false;

        (void)size;
        (void)data;
        name = name ? name + 1 : info->dlpi_name;
        if (!name)
                return 0;
        for (size_t i = 0; i < sizeof(spared_libs) / sizeof(spared_libs[0]) && !match; i++) {
                size_t len = strlen(spared_libs[i]);

                match = strncmp(name, spared_libs[i], len) == 0 && (name[len] == '.' || name[len] == '-');
        }
        for (size_t i = 0; match && i < info->dlpi_phnum && n_spared_code < SPARED_MAX; i++) {
                const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

                if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
                        continue;
                spared_code[n_spared_code].lo = info->dlpi_addr + ph->p_vaddr;
                spared_code[n_spared_code].hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
                n_spared_code++;
        }
        return 0;
}

void failalloc_spare_tls(bool on)
{
        spare_tls = on;
}

long failalloc_spared(void)
{
        return spared;
}

void failalloc_arm(long n)
{
        armed_thread = pthread_self();
        armed = n > 0;
        countdown = n;
        counted = 0;
        spared = 0;
        n_spared_code = 0;
        if (armed && spare_tls) {
                bool was = paused;

                paused = true; /* in case the loader allocates */
                (void)dl_iterate_phdr(find_spared, NULL);
                paused = was;
        }
        failed_once = false;
        if (n == 0)
                persist = false;
}

void failalloc_persist(bool on)
{
        persist = on;
}

void failalloc_pause(bool on)
{
        paused = on;
}

static int holds;

void failalloc_hold(void)
{
        if (holds++ == 0)
                failalloc_pause(true);
}

void failalloc_release(void)
{
        if (--holds == 0)
                failalloc_pause(false);
}

long failalloc_count(void)
{
        return counted;
}

long failalloc_live(void)
{
        return __atomic_load_n(&live, __ATOMIC_SEQ_CST);
}

static void *no_work(void *arg)
{
        return arg;
}

void failalloc_warm_up(void)
{
        time_t now = time(NULL);
        struct tm tm;
        pthread_t t;

        (void)gmtime_r(&now, &tm);
        if (pthread_create(&t, NULL, no_work, NULL) == 0)
                (void)pthread_join(t, NULL);
}

bool failalloc_failed(void)
{
        return failed_once;
}

const void *failalloc_failed_caller(void)
{
        return failed_once ? failed_caller : NULL;
}

void failsys_arm(enum failsys_call call, long n, int err)
{
        armed_thread = pthread_self();
        sys[call].armed = n > 0;
        sys[call].countdown = n;
        sys[call].counted = 0;
        sys[call].err = err;
        sys[call].failed = false;
}

int failsys_file(const char *path, enum failsys_call call, int err)
{
        struct filefault *free_slot = NULL;
        struct stat st;

        if (stat(path, &st) < 0)
                return -errno;
        for (size_t i = 0; i < FILE_FAULTS; i++) {
                struct filefault *f = &file_faults[i];

                if (f->err && f->dev == st.st_dev && f->ino == st.st_ino)
                        f->err = 0;
                if (!f->err && !free_slot)
                        free_slot = f;
        }
        if (!err)
                return 0;
        if (!free_slot)
                return -ENOSPC;
        *free_slot = (struct filefault){.dev = st.st_dev, .ino = st.st_ino, .call = call, .err = err};
        return 0;
}

void failsys_files_clear(void)
{
        for (size_t i = 0; i < FILE_FAULTS; i++)
                file_faults[i].err = 0;
        for (size_t i = 0; i < FD_FAULTS; i++)
                fd_faults[i] = 0;
}

long failsys_count(enum failsys_call call)
{
        return sys[call].counted;
}

bool failsys_failed(enum failsys_call call)
{
        return sys[call].failed;
}

#if FAILALLOC_INTERPOSE

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);

static bool is_spared(const void *caller)
{
        uintptr_t a = (uintptr_t)caller;

        for (size_t i = 0; i < n_spared_code; i++)
                if (a >= spared_code[i].lo && a < spared_code[i].hi)
                        return true;
        return false;
}

/* True when this allocation, asked for by code at caller, is to fail. */
static bool should_fail(const void *caller)
{
        if (!armed || paused || !pthread_equal(pthread_self(), armed_thread))
                return false;
        if (n_spared_code && is_spared(caller)) {
                spared++;
                return false;
        }
        counted++;
        if (failed_once && persist)
                return true;
        if (failed_once || --countdown > 0)
                return false;
        failed_once = true;
        failed_caller = caller;
        if (getenv("FAILALLOC_BACKTRACE")) {
                /* Where the injected failure hit (debugging a sweep). */
                void *frames[24];

                paused = true;
                backtrace_symbols_fd(frames, backtrace(frames, 24), 2);
                paused = false;
        }
        return true;
}

static void *counted_block(void *p)
{
        if (p)
                __atomic_add_fetch(&live, 1, __ATOMIC_SEQ_CST);
        return p;
}

static void *malloc_from(size_t n, const void *caller)
{
        if (should_fail(caller)) {
                errno = ENOMEM;
                return NULL;
        }
        return counted_block(__libc_malloc(n));
}

void *malloc(size_t n)
{
        return malloc_from(n, __builtin_return_address(0));
}

void *calloc(size_t n, size_t size)
{
        if (should_fail(__builtin_return_address(0))) {
                errno = ENOMEM;
                return NULL;
        }
        return counted_block(__libc_calloc(n, size));
}

void *realloc(void *p, size_t n)
{
        void *q;

        if (!p)
                return malloc_from(n, __builtin_return_address(0));
        if (n == 0) {
                free(p);
                return NULL;
        }
        if (should_fail(__builtin_return_address(0))) {
                errno = ENOMEM;
                return NULL;
        }
        q = __libc_realloc(p, n);
        return q;
}

void free(void *p)
{
        if (!p)
                return;
        __atomic_sub_fetch(&live, 1, __ATOMIC_SEQ_CST);
        __libc_free(p);
}

/* Never failed, only counted, so free() stays balanced. */
void *memalign(size_t align, size_t n)
{
        return counted_block(__libc_memalign(align, n));
}

void *aligned_alloc(size_t align, size_t n)
{
        return counted_block(__libc_memalign(align, n));
}

int posix_memalign(void **ret, size_t align, size_t n)
{
        void *p = __libc_memalign(align, n);

        if (!p)
                return ENOMEM;
        *ret = counted_block(p);
        return 0;
}

/* ---- system calls -------------------------------------------------------- */

/* -1 (with errno set) or 1 (write short) when the call is to fail. */
static int sys_fault(enum failsys_call call)
{
        struct sysfault *f = &sys[call];

        if (!f->armed || paused || f->failed || !pthread_equal(pthread_self(), armed_thread))
                return 0;
        f->counted++;
        if (--f->countdown > 0)
                return 0;
        f->failed = true;
        if (f->err == 0)
                return 1;
        errno = f->err;
        return -1;
}

typedef DIR *(*opendir_fn)(const char *);
typedef struct dirent *(*readdir_fn)(DIR *);
typedef int (*open_fn)(const char *, int, ...);
typedef ssize_t (*read_fn)(int, void *, size_t);
typedef ssize_t (*sendmsg_fn)(int, const struct msghdr *, int);
typedef int (*openat_fn)(int, const char *, int, ...);
typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef int (*fsync_fn)(int);
typedef int (*renameat_fn)(int, const char *, int, const char *);
typedef int (*fchmod_fn)(int, mode_t);
typedef int (*unlinkat_fn)(int, const char *, int);
typedef int (*eventfd_fn)(unsigned, int);
typedef int (*mkdir_fn)(const char *, mode_t);
typedef int (*close_fn)(int);
typedef int (*epoll_ctl_fn)(int, int, int, struct epoll_event *);

#define REAL(name)                                                        \
        static name##_fn real_##name;                                     \
        if (!real_##name)                                                 \
                real_##name = (name##_fn)(uintptr_t)dlsym(RTLD_NEXT, #name)

DIR *opendir(const char *path)
{
        REAL(opendir);
        if (sys_fault(FAILSYS_OPENDIR) < 0)
                return NULL;
        return real_opendir(path);
}

struct dirent *readdir(DIR *d)
{
        REAL(readdir);
        if (sys_fault(FAILSYS_READDIR) < 0)
                return NULL;
        return real_readdir(d);
}

/* fd, just opened: closed with -1 and errno set if its file's opens
 * fail (failsys_file()), marked if its reads do. */
static int file_fault(int fd)
{
        struct stat st;
        bool any = false;

        if (fd < 0)
                return fd;
        for (size_t i = 0; i < FILE_FAULTS; i++)
                any = any || file_faults[i].err;
        if (fd < FD_FAULTS)
                fd_faults[fd] = 0;
        if (!any || fstat(fd, &st) < 0)
                return fd;
        for (size_t i = 0; i < FILE_FAULTS; i++) {
                const struct filefault *f = &file_faults[i];

                if (!f->err || f->dev != st.st_dev || f->ino != st.st_ino)
                        continue;
                if (f->call == FAILSYS_READ && fd < FD_FAULTS) {
                        fd_faults[fd] = f->err;
                        return fd;
                }
                if (f->call == FAILSYS_OPEN) {
                        int err = f->err;

                        (void)close(fd);
                        errno = err;
                        return -1;
                }
        }
        return fd;
}

int open(const char *path, int flags, ...)
{
        mode_t mode = 0;

        REAL(open);
        if (flags & (O_CREAT | O_TMPFILE)) {
                va_list ap;

                va_start(ap, flags);
                mode = va_arg(ap, mode_t);
                va_end(ap);
        }
        if (sys_fault(FAILSYS_OPEN) < 0)
                return -1;
        return file_fault(real_open(path, flags, mode));
}

ssize_t read(int fd, void *p, size_t n)
{
        REAL(read);
        if (sys_fault(FAILSYS_READ) < 0)
                return -1;
        if (fd >= 0 && fd < FD_FAULTS && fd_faults[fd]) {
                errno = fd_faults[fd];
                return -1;
        }
        return real_read(fd, p, n);
}

int close(int fd)
{
        REAL(close);
        if (fd >= 0 && fd < FD_FAULTS)
                fd_faults[fd] = 0;
        return real_close(fd);
}

ssize_t sendmsg(int fd, const struct msghdr *mh, int flags)
{
        int f;

        REAL(sendmsg);
        f = sys_fault(FAILSYS_SENDMSG);
        if (f < 0)
                return -1;
        if (f > 0 && mh->msg_iovlen > 0 && mh->msg_iov[0].iov_len > 1) {
                /* A short write: half of the first block. */
                struct msghdr half = *mh;
                struct iovec one = mh->msg_iov[0];

                one.iov_len /= 2;
                half.msg_iov = &one;
                half.msg_iovlen = 1;
                return real_sendmsg(fd, &half, flags);
        }
        return real_sendmsg(fd, mh, flags);
}

int openat(int dirfd, const char *path, int flags, ...)
{
        mode_t mode = 0;

        REAL(openat);
        if (flags & (O_CREAT | O_TMPFILE)) {
                va_list ap;

                va_start(ap, flags);
                mode = va_arg(ap, mode_t);
                va_end(ap);
        }
        if (sys_fault(FAILSYS_OPENAT) < 0)
                return -1;
        return real_openat(dirfd, path, flags, mode);
}

/* With err 0, writes half of what it is given (at least one byte). */
ssize_t write(int fd, const void *p, size_t n)
{
        int f;

        REAL(write);
        f = sys_fault(FAILSYS_WRITE);
        if (f < 0)
                return -1;
        if (f > 0 && n > 1)
                n /= 2;
        return real_write(fd, p, n);
}

int fsync(int fd)
{
        REAL(fsync);
        if (sys_fault(FAILSYS_FSYNC) < 0)
                return -1;
        return real_fsync(fd);
}

int renameat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath)
{
        REAL(renameat);
        if (sys_fault(FAILSYS_RENAMEAT) < 0)
                return -1;
        return real_renameat(olddirfd, oldpath, newdirfd, newpath);
}

int fchmod(int fd, mode_t mode)
{
        REAL(fchmod);
        if (sys_fault(FAILSYS_FCHMOD) < 0)
                return -1;
        return real_fchmod(fd, mode);
}

int unlinkat(int dirfd, const char *path, int flags)
{
        REAL(unlinkat);
        if (sys_fault(FAILSYS_UNLINKAT) < 0)
                return -1;
        return real_unlinkat(dirfd, path, flags);
}

int eventfd(unsigned count, int flags)
{
        REAL(eventfd);
        if (sys_fault(FAILSYS_EVENTFD) < 0)
                return -1;
        return real_eventfd(count, flags);
}

int mkdir(const char *path, mode_t mode)
{
        REAL(mkdir);
        if (sys_fault(FAILSYS_MKDIR) < 0)
                return -1;
        return real_mkdir(path, mode);
}

int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
        REAL(epoll_ctl);
        if (sys_fault(FAILSYS_EPOLL_CTL) < 0)
                return -1;
        return real_epoll_ctl(epfd, op, fd, ev);
}

#endif
