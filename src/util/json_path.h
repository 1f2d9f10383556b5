/*
 * json_path — a file's path in a protocol message, byte for byte
 * (doc/protocol.md "Paths that are not UTF-8").
 *
 * The stream is UTF-8 text, and a path is bytes: a name that is not valid
 * UTF-8 reads in "path" with U+FFFD for each stray byte, which no longer
 * names the file.  Such a path is also sent whole, hex-encoded, in
 * JSON_PATH_HEX beside it; a reader takes that when it is there.  The
 * daemon writes both members and the clients (libpodmux-client, podmux
 * wait) read them here.
 *
 * Owns: nothing; what it returns is the caller's.  Never: logs.
 * Cost: O(length of the path).
 */
#ifndef PODMUX_JSON_PATH_H
#define PODMUX_JSON_PATH_H

#include <stdbool.h>
#include <stddef.h>

#include <json-c/json.h>

#include "util/buf.h"
#include "util/proto_words.h"

/* The member carrying the path's bytes, lower-case hex, two digits a byte
 * (its name comes from scripts/protocol-words.json). */
#define JSON_PATH_HEX PROTO_MEMBER_PATH_HEX

/* Appends "path":P, and ,"path_hex":H when path is not valid UTF-8
 * ("path":null for NULL).  0 or -ENOMEM (out may hold part of it). */
int json_path_put(struct buf *out, const char *path);

/*
 * The bytes of the path o names: JSON_PATH_HEX decoded when o has it,
 * else "path" as it is.  *ret (NUL-terminated, *ret_len bytes without the
 * NUL) is the caller's.  0; -ENOENT when o has no path (absent or null);
 * -EINVAL when a member is not a string, the hex is not whole bytes of
 * hex digits, or the path holds a NUL byte (no file name does);
 * -ENOMEM.
 */
int json_path_get(json_object *o, char **ret, size_t *ret_len);

/* Whether the path o names is path[0..len) byte for byte, read as
 * json_path_get() reads it; false for a message it refuses.  Allocates
 * nothing. */
bool json_path_is(json_object *o, const char *path, size_t len);

#endif
