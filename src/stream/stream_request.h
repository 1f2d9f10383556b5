/*
 * stream_request — the one line a client of the update stream may send
 * first (doc/protocol.md, "Opening a connection"): a JSON object with
 * optional members
 *   "resume_after": N    a non-negative integer: replay what came after N;
 *   "request": "status"  answer with one status message and close
 *                        (`podmux status`);
 *   "request": "files"   send the per-file records, then their changes,
 *                        instead of pods (`podmux wait`, `podmux status
 *                        --files`);
 * other members are ignored, so a later protocol can add some.  "{}" asks
 * for the full state at once.
 *
 * Pure parsing: no I/O, no logging; kept apart from the server so the
 * bytes a client controls can be fuzzed (tests/fuzz/).
 */
#ifndef PODMUX_STREAM_REQUEST_H
#define PODMUX_STREAM_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Nesting the line may have: the object and one level below it. */
#define STREAM_REQUEST_MAX_DEPTH 8

struct stream_request {
        bool have_resume;
        uint64_t resume_after;
        bool status; /* "request":"status" */
        bool files;  /* "request":"files" */
};

/*
 * Parses line[0..len) (without its newline; trailing spaces, tabs and a
 * CR are allowed).  0 and *ret_req filled; -EINVAL with *ret_why set to a
 * static sentence for the client; -ENOMEM.
 */
int stream_request_parse(const char *line, size_t len, struct stream_request *ret_req, const char **ret_why);

#endif
