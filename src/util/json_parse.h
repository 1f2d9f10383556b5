/*
 * json_parse — JSON text (RFC 8259, strict) into json-c values, with every
 * allocation checked.
 *
 * Owns: nothing beyond the call.  Never: logs.
 *
 * Why not json-c's own parser: the json-c Debian 12 ships (0.16) leaves
 * some allocations of its parser unchecked (upstream fixed them in 0.17
 * and 0.18).  When memory runs out it may crash, or return an object with
 * a member silently left out, and a pod built from that would be wrong.
 * Here a failed allocation is -ENOMEM and nothing is returned.  The values
 * are made with json-c's public constructors, so the trees are the ones
 * json-c would build: integers as int64 (uint64 above INT64_MAX), other
 * numbers as doubles that print with the spelling they were read with,
 * strings with \u escapes decoded (a lone surrogate becomes U+FFFD, as Go
 * decodes it), the last of duplicate keys winning.
 *
 * Strict: no comments, no single quotes, no trailing commas, no leading
 * zeros, no NaN/Infinity, no raw control characters in strings.  Bytes
 * that are not UTF-8 inside strings are kept as they are (rendering makes
 * them U+FFFD, see buf_json_string).
 *
 * Cost: one pass over the text; the allocations are json-c's (one per
 * value, one per object key).
 */
#ifndef PODMUX_JSON_PARSE_H
#define PODMUX_JSON_PARSE_H

#include <stddef.h>

#include <json-c/json.h>

#include "util/buf.h"

/*
 * Parses the one JSON value that text[0..len) holds (whitespace around it
 * allowed).  Nesting deeper than max_depth arrays/objects is an error.
 * 0 and *ret_obj (the caller puts it); -EINVAL with a message naming the
 * byte offset in err (may be NULL; the convention of util/buf.h: the
 * message replaces what err held, which a success leaves alone); -ENOMEM
 * with nothing built and err empty (also when the message cannot be
 * written).
 */
int json_parse(const char *text, size_t len, unsigned max_depth, json_object **ret_obj, struct buf *err);

/*
 * Parses one value starting at text[*pos] (leading whitespace skipped) and
 * moves *pos just past it; what follows is not looked at.  Same results as
 * json_parse(), and -EAGAIN when text ends inside the value (more input
 * may complete it; *pos is unchanged).
 */
int json_parse_next(const char *text, size_t len, size_t *pos, unsigned max_depth, json_object **ret_obj,
                    struct buf *err);

/*
 * Steps *pos over one value (leading whitespace skipped), checked exactly
 * as json_parse_next() checks it, with nothing built and nothing
 * allocated: the way to accept a value whose text is kept as it is.
 * Same results as json_parse_next() (-ENOMEM only when err's message
 * cannot be written).  Cost: one pass over the value's bytes.
 */
int json_skip_next(const char *text, size_t len, size_t *pos, unsigned max_depth, struct buf *err);

/*
 * The string value at text[*pos] (leading whitespace skipped), decoded as
 * json_parse_next() decodes strings, *pos moved past it.  *ret_s and
 * *ret_len: the decoded bytes (a \u0000 stays in them), pointing into
 * text when none needed decoding, else into scratch (reset first; the
 * caller frees it; valid until its next use).  -EINVAL (a value that is
 * not a string, or a bad one; err as above), -EAGAIN (the text ends
 * inside it), -ENOMEM (err empty).
 */
int json_string_next(const char *text, size_t len, size_t *pos, struct buf *scratch, const char **ret_s,
                     size_t *ret_len, struct buf *err);

/*
 * Parses strict JSON text into a tree with a nesting limit (a value at
 * most JSON_MAX_DEPTH - 1 levels below the top).  -EINVAL with a message
 * naming the byte offset in err (if given; as util/buf.h says, it
 * replaces what err held, and a success leaves err alone); -ENOMEM, err
 * empty, when memory runs out,
 * never a partial tree or a parse error (building the message in err
 * counts).  Caller puts the tree.
 */
#define JSON_MAX_DEPTH 64
int json_parse_text(const char *text, size_t len, json_object **ret_obj, struct buf *err);

/* json_object_object_add that takes v (put on failure too) and returns 0
 * or -ENOMEM, without the key json-c 0.16 leaks when its table cannot
 * grow. */
int json_put(json_object *o, const char *key, json_object *v);

#endif
