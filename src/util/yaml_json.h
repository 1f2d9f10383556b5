/*
 * yaml_json — YAML (and therefore JSON) text to a json-c tree, with libyaml.
 *
 * Owns: the conversion rules.  Scalars resolve the way Go's yaml decoder
 * (YAML 1.1) resolves them for a sigs.k8s.io/yaml YAML->JSON conversion:
 * null/~/empty -> null; true/false/yes/no/on/off (any case spelling Go
 * accepts) -> boolean; integers (decimal, 0x hex, 0o/0 octal, with _ ) ->
 * int64; floats (incl. .inf/.nan) -> double; everything else -> string.
 * Quoted scalars are always strings.  Anchors and aliases are resolved.
 * Mapping keys become strings.
 * Never: reads files (the caller hands bytes), logs.
 *
 * Only the first document is converted; later documents are ignored.
 * Errors carry the 1-based line and column of the problem.
 */
#ifndef PODMUX_YAML_JSON_H
#define PODMUX_YAML_JSON_H

#include <stddef.h>

#include <json-c/json.h>

#include "util/buf.h"

/* Nesting limit (mappings + sequences) and alias expansion bound. */
#define YAML_JSON_MAX_DEPTH 64
#define YAML_JSON_MAX_NODES 1000000

/*
 * Converts the first document of text.  An empty input or a document that
 * is only null yields -ENODATA ("empty document").  Syntax errors -EINVAL
 * with "line L, column C: <problem>" in err (may be NULL; it replaces what
 * err held, a success leaves err alone: util/buf.h); -ENOMEM with err
 * empty.  The caller puts *ret_obj.
 */
int yaml_to_json(const char *text, size_t len, json_object **ret_obj, struct buf *err);

/* Number of documents in text (0 for empty), or -EINVAL on a syntax error
 * (err as for yaml_to_json), -ENOMEM.  Used to tell the user that later
 * documents were ignored. */
int yaml_count_documents(const char *text, size_t len, struct buf *err);

#endif
