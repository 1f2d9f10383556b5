/*
 * fuzz.h — what every fuzz target shares: the libFuzzer entry point (linked
 * either with libFuzzer by scripts/fuzz, or with standalone.c, which runs
 * the corpus under `make check`) and the checks a target makes on what
 * the code under test produced.
 *
 * A target keeps no state between inputs and frees everything it got
 * (LeakSanitizer is on).  A broken invariant is reported with abort(), so
 * libFuzzer and the sanitizers see it as a crash.
 */
#ifndef PODMUX_TESTS_FUZZ_H
#define PODMUX_TESTS_FUZZ_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <json-c/json.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_ASSERT(cond)                                                              \
        do {                                                                           \
                if (!(cond)) {                                                         \
                        fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__,    \
                                __LINE__, #cond);                                      \
                        abort();                                                       \
                }                                                                      \
        } while (0)

/*
 * text[0..len) must be one JSON value in valid UTF-8 with nothing after
 * it: what a consumer of the update stream is promised (doc/protocol.md,
 * protocol 1).
 */
static inline void fuzz_check_json(const char *text, size_t len, const char *what)
{
        json_tokener *tok = json_tokener_new_ex(128);
        json_object *o;

        FUZZ_ASSERT(tok != NULL);
        FUZZ_ASSERT(len < INT32_MAX);
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
        o = json_tokener_parse_ex(tok, text, (int)len);
        if (!o || json_tokener_get_error(tok) != json_tokener_success ||
            json_tokener_get_parse_end(tok) != len) {
                fprintf(stderr, "%s is not one valid JSON value in UTF-8 (%s): %.*s\n", what,
                        json_tokener_error_desc(json_tokener_get_error(tok)),
                        len > 4096 ? 4096 : (int)len, text);
                abort();
        }
        json_object_put(o);
        json_tokener_free(tok);
}

/*
 * Writes data to a fresh memory file and puts a path that opens it into
 * path (for code that reads a file by name).  Returns the fd (close it
 * when done) or aborts.
 */
static inline int fuzz_memfile(const uint8_t *data, size_t size, char *path, size_t path_size)
{
        int fd = memfd_create("fuzz", MFD_CLOEXEC);
        size_t off = 0;

        FUZZ_ASSERT(fd >= 0);
        while (off < size) {
                ssize_t n = write(fd, data + off, size - off);

                if (n < 0 && errno == EINTR)
                        continue;
                FUZZ_ASSERT(n > 0);
                off += (size_t)n;
        }
        snprintf(path, path_size, "/proc/self/fd/%d", fd);
        return fd;
}

#endif
