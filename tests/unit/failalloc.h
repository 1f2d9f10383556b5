/*
 * failalloc — fault injection for unit tests, the way SQLite tests malloc
 * failure: the Nth allocation from now fails, or the Nth call of a system
 * call fails with a chosen errno (or, for sendmsg, writes only part).
 *
 * It works by symbol interposition: a test executable linked with
 * failalloc.c defines malloc, calloc, realloc, free and a few system-call
 * wrappers itself, so every library in the process (json-c, libyaml, libc's
 * own strdup and opendir) allocates through it.  Faults are injected only
 * on the thread that armed them; other threads (the watcher's) are counted
 * but never failed, so a sweep is deterministic.
 *
 * Under AddressSanitizer the sanitizer owns malloc, so nothing is
 * interposed: failalloc_enabled() is false and the sweeps skip themselves.
 */
#ifndef PODMUX_TESTS_FAILALLOC_H
#define PODMUX_TESTS_FAILALLOC_H

#include <stdbool.h>

/* False when the build cannot interpose (sanitizers). */
bool failalloc_enabled(void);
/* The nth allocation from now on this thread fails (n >= 1); 0 disarms.
 * Also clears failalloc_failed() and the count. */
void failalloc_arm(long n);
/* With on, every allocation after the first injected failure fails too,
 * until failalloc_arm(0). */
void failalloc_persist(bool on);
/* While paused, nothing is counted or failed (the test's own work). */
void failalloc_pause(bool on);
/* The same, nesting: each hold is matched by a release, and only the
 * outermost pair pauses and resumes (a helper that holds may be called
 * from code that already holds). */
void failalloc_hold(void);
void failalloc_release(void);
/* Allocations counted since the last arm (on the arming thread). */
long failalloc_count(void);
/* Blocks allocated and not yet freed, all threads: a leak check compares
 * it before and after a piece of work. */
long failalloc_live(void);
/* What the C library allocates once and keeps, done before a leak check
 * takes its first count: the time zone's state (the first time a log
 * line converts a time), and a thread's stack and bookkeeping (reused by
 * the next thread without an allocation).  A test
 * that is the first of its process (as every test is under CK_FORK=yes)
 * would count them as leaked, and see pthread_create() fail with EAGAIN
 * at an injected failure. */
void failalloc_warm_up(void);
/* Whether a failure was injected since the last arm. */
bool failalloc_failed(void);
/* The return address of the allocation that failed (NULL: none), to
 * tell whose it was with dladdr(). */
const void *failalloc_failed_caller(void);

/*
 * With on, allocations made directly by GnuTLS and the libraries it
 * rests on (libgnutls, libtasn1, libnettle, libhogweed, libgmp,
 * libp11-kit, libidn2, libunistring) are left alone: never failed, and
 * counted apart (failalloc_spared()), not in failalloc_count(); they
 * still count in failalloc_live().  GnuTLS crashes on some of its own
 * failed allocations (gnutls_x509_crt_import(),
 * gnutls_certificate_verify_peers2()), which is its defect, not ours: a
 * sweep of a TLS path spares them to reach our own allocations.  The
 * caller is the allocation's return address, compared with the loaded
 * code of those libraries, which failalloc_arm() finds once per arm
 * (dl_iterate_phdr()); the check itself allocates nothing.  An
 * allocation that libc makes on their behalf (strdup) is not spared.
 * Off by failalloc_spare_tls(false) only, not by failalloc_arm(0).
 */
void failalloc_spare_tls(bool on);
/* Allocations spared since the last arm (on the arming thread). */
long failalloc_spared(void);

enum failsys_call {
        FAILSYS_OPENDIR,
        FAILSYS_READDIR,
        FAILSYS_OPEN,
        FAILSYS_READ,
        FAILSYS_SENDMSG,
        FAILSYS_OPENAT,
        FAILSYS_WRITE,
        FAILSYS_FSYNC,
        FAILSYS_RENAMEAT,
        FAILSYS_FCHMOD,
        FAILSYS_UNLINKAT,
        FAILSYS_EVENTFD,
        FAILSYS_MKDIR,
        FAILSYS_EPOLL_CTL,
        _FAILSYS_MAX,
};

/* The nth call of call from now on the arming thread fails once with err;
 * err 0 for FAILSYS_SENDMSG and FAILSYS_WRITE makes it write only part of
 * what it was given (at least one byte).  n 0 disarms that call. */
void failsys_arm(enum failsys_call call, long n, int err);
/* Calls of call counted since it was armed. */
long failsys_count(enum failsys_call call);
bool failsys_failed(enum failsys_call call);

/*
 * Faults of one file, on every thread, until cleared: with
 * FAILSYS_OPEN every open(2) that lands on the file at path (its inode
 * as stat(2) finds it, so through symbolic links too) fails with err;
 * with FAILSYS_READ it opens and every read(2) of that descriptor fails.
 * err 0 clears the file's faults.  At most 8 files; 0 or -errno.  A disk
 * that fails one file is what it mimics: the rest of the process is
 * untouched.
 */
int failsys_file(const char *path, enum failsys_call call, int err);
/* Clears every file's faults. */
void failsys_files_clear(void);

#endif
