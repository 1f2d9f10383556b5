/*
 * log_capture.h — what the daemon's code logs while a test runs: stderr
 * into a temporary file between log_capture_start() and
 * log_capture_end(), which hands back the text.
 */
#ifndef PODMUX_TESTS_LOG_CAPTURE_H
#define PODMUX_TESTS_LOG_CAPTURE_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct log_capture {
        char path[48];
        int fd, saved;
};

static inline void log_capture_start(struct log_capture *c)
{
        (void)snprintf(c->path, sizeof(c->path), "/tmp/podmux-test-log-XXXXXX");
        c->fd = mkstemp(c->path);
        c->saved = dup(STDERR_FILENO);
        ck_assert_int_ge(c->fd, 0);
        ck_assert_int_ge(c->saved, 0);
        ck_assert_int_ge(dup2(c->fd, STDERR_FILENO), 0);
}

/* stderr back; the captured text, NUL-terminated, in text. */
static inline void log_capture_end(struct log_capture *c, char *text, size_t size)
{
        ssize_t n;

        ck_assert_int_ge(dup2(c->saved, STDERR_FILENO), 0);
        close(c->saved);
        n = pread(c->fd, text, size - 1, 0);
        close(c->fd);
        unlink(c->path);
        ck_assert_int_ge(n, 0);
        text[n] = '\0';
}

/* How many times what occurs in text. */
static inline int log_capture_count(const char *text, const char *what)
{
        int n = 0;

        for (const char *p = text; (p = strstr(p, what)); p += strlen(what))
                n++;
        return n;
}

#endif
