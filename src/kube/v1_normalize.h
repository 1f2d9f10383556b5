/*
 * v1_normalize — rewrites a decoded manifest object in place so that two
 * objects the kubelet's decoder turns into deep-equal Go values have the
 * same JSON, member for member.  Then the canonical JSON digests podmux
 * compares (src/core/pod.h) and the UID it generates agree with Go's
 * reflect.DeepEqual on the decoded v1 objects.
 *
 * Owns: the decoding rules of the core/v1 types, driven by the generated
 * table (src/kube/v1_schema.h):
 *   - a member v1 does not define is removed and its path reported
 *     (Go's non-strict decoder drops it);
 *   - null, anywhere in a struct, is removed (Go leaves the field at its
 *     zero value, the same as absent); a null slice element or map value
 *     becomes the element's zero value ("", 0, false, {}, "0");
 *   - a plain (non-pointer) scalar at its zero value ("", 0, false, an
 *     IntOrString 0) and a plain struct that ends up empty are removed:
 *     Go cannot tell them from absent, omitempty or not;
 *   - pointers, slices and maps stay, empty or zero: nil differs from
 *     a pointer to zero and from an empty slice or map;
 *   - a quantity written as a JSON number becomes the string Go's YAML to
 *     JSON step gives that number ("cpu: 1" = "cpu: \"1\"", 1.0 -> "1");
 *     a string quantity loses surrounding blanks; spellings stay apart
 *     ("1" != "1000m"), as in Go, which keeps the parsed spelling;
 *   - a value of the wrong JSON type, a number out of range, or a quantity
 *     Go cannot parse is an error (Go's typed decoding fails the manifest).
 * Never: applies defaults, validates beyond types, logs.  Times are kept
 * as written (the merger compares metadata.deletionTimestamp as an
 * instant), and so are RAW members.
 *
 * Cost: one walk over the tree, a binary search in the type's member table
 * per member; no allocation unless something is replaced or reported.
 */
#ifndef PODMUX_V1_NORMALIZE_H
#define PODMUX_V1_NORMALIZE_H

#include <stddef.h>

#include <json-c/json.h>

#include "util/buf.h"
#include "kube/v1_schema.h"

/* Unknown-field paths kept per list (more are only counted) and errors
 * kept per call (more are summarized).  The walk goes no deeper than the
 * table (V1_SCHEMA_MAX_FRAMES): members the table does not type (RAW) are
 * not entered. */
#define V1_NORMALIZE_MAX_UNKNOWN 64
#define V1_NORMALIZE_MAX_ERRORS 16

/* Paths of dropped members, in document order:
 * "spec.containers[0].imagePullPolicyy".  Zero-initialize; the owner
 * frees with v1_unknown_clear(). */
struct v1_unknown {
        char **paths;
        size_t n;     /* held in paths (<= V1_NORMALIZE_MAX_UNKNOWN) */
        size_t total; /* dropped, held or not */
};

/* Frees the paths; u is left empty and reusable.  NULL-safe. */
void v1_unknown_clear(struct v1_unknown *u);
/* Appends the paths as JSON strings, ", "-separated, then
 * " (and N more)" if some were only counted: "\"a.b\", \"c\"".
 * Nothing for an empty list.  0 or -ENOMEM. */
int v1_unknown_join(const struct v1_unknown *u, struct buf *out);

/*
 * Normalizes obj, a JSON object decoded as a value of *type, in place.
 * prefix ("" or e.g. "items[2]") is put before the paths of unknown
 * members appended to unknown (NULL: not wanted).  Type errors are
 * written to err (NULL: not wanted) as the convention of util/buf.h
 * says (replacing what it held; untouched on success), "; "-separated,
 * each naming its path relative to obj: "spec.hostNetwork: Invalid type:
 * expected boolean, got string".
 * Returns 0; -EINVAL after type errors (obj is then half done: drop it);
 * -ENOMEM (obj half done too; err empty).
 */
int v1_normalize(json_object *obj, const struct v1_type *type, const char *prefix, struct v1_unknown *unknown,
                 struct buf *err);

#endif
