/*
 * manifest — decoding, defaulting and validating static-pod manifests the
 * way the kubelet's file and HTTP sources do (doc/pod-config.md section 5).
 *
 * Owns: the rules of sections 5.1-5.5 and 9.1 (generated UID).
 * Never: reads directories, watches files, logs, talks to the merger.  The
 * file source, the HTTP source and `podmux validate` all call this module,
 * so they agree byte for byte.
 */
#ifndef PODMUX_MANIFEST_H
#define PODMUX_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>

#include <json-c/json.h>

#include "util/buf.h"
#include "kube/v1_normalize.h"

/* Inputs of this size or larger are rejected (the kubelet's limit). */
#define MANIFEST_MAX_BYTES (10u * 1024u * 1024u)

enum manifest_origin {
        MANIFEST_ORIGIN_FILE, /* UID salt "host:<node>" "file:<path>"; toleration added */
        MANIFEST_ORIGIN_URL,  /* UID salt "url:<url>"; no toleration */
};

struct manifest_ctx {
        enum manifest_origin origin;
        const char *node_name; /* as given; lower-cased for the name suffix */
        const char *location;  /* the file path or the URL */
};

/*
 * Decodes one Pod (YAML or JSON, first document only), normalizes it
 * through the core/v1 table (src/kube/v1_normalize.h), applies API
 * defaults (5.2), source defaults (5.3, UID per 9.1) and validation (5.5).
 * On success *ret_pod is the defaulted v1 Pod tree (caller puts it), and
 * *ret_unknown (NULL: not wanted; cleared first, left empty on failure)
 * lists the members v1 does not define, which were dropped, e.g.
 * "spec.containers[0].imagePullPolicyy".  On failure returns
 * -EINVAL/-ENODATA/-EFBIG with one human-readable reason in err (no
 * trailing newline), e.g. "line 4, column 3: mapping values are not
 * allowed here" or "spec.containers[0].image: Required value"; -ENOMEM
 * leaves err empty.
 */
int manifest_decode_pod(const char *data, size_t len, const struct manifest_ctx *ctx, json_object **ret_pod,
                        struct v1_unknown *ret_unknown, struct buf *err);

/*
 * HTTP form: a single Pod, else a PodList (every item must pass, or the whole
 * list fails).  *ret_pods is a json array of defaulted pods (possibly
 * empty; caller puts it).  Unknown members of the list and its items are
 * listed as for manifest_decode_pod ("items[2].spec.foo").
 */
int manifest_decode_pods(const char *data, size_t len, const struct manifest_ctx *ctx, json_object **ret_pods,
                         struct v1_unknown *ret_unknown, struct buf *err);

#endif
