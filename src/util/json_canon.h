/*
 * json_canon — canonical JSON text of a json-c value (what digests hash).
 *
 * Canonical: object keys sorted bytewise, no whitespace, strings escaped the
 * same way everywhere, numbers in the spelling they were decoded with (json-c
 * keeps a double's original text; integers print as integers).  Two values
 * that differ only in key order, whitespace or quoting have equal canonical
 * text; null, absent, {} and [] stay distinct.
 * Never: allocates anything the caller must free except through struct buf.
 */
#ifndef PODMUX_JSON_CANON_H
#define PODMUX_JSON_CANON_H

#include <stdint.h>

#include <json-c/json.h>

#include "util/buf.h"

/* Appends the canonical text of v (NULL prints as null).  0 or -ENOMEM. */
int json_canon_append(struct buf *out, json_object *v);

/* Appends v as compact JSON text in its own member order, as json-c's
 * plain printer writes it but always valid UTF-8 (see buf_json_string)
 * and with every allocation checked: 0 or -ENOMEM, never a text with
 * pieces missing (json-c's printer can return one when memory runs out). */
int json_write(struct buf *out, json_object *v);

/* A deep copy with every allocation checked (json-c's leaks a key when
 * memory runs out); numbers keep their spelling.  0 or -ENOMEM; *ret
 * is NULL for a null. */
int json_copy(json_object *src, json_object **ret);

#endif
