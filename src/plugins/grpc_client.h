/*
 * grpc_client — unary gRPC calls to a unix socket, over libcurl's HTTP/2
 * with prior knowledge, on the event loop.
 *
 * Owns: one call's request, reply and retry timer.
 * Never: encodes messages (the caller hands protobuf bytes) or blocks.
 *
 * Each call uses a fresh connection (libcurl 7.88 fails a second request
 * on a reused HTTP/2 connection), sends "te: trailers" (gRPC C-core servers
 * reset the stream without it), reads grpc-status/grpc-message from headers
 * or trailers (errors usually come trailers-only), and retries a refused
 * connect within the dial timeout the way gRPC's dialer does.
 */
#ifndef PODMUX_GRPC_CLIENT_H
#define PODMUX_GRPC_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "util/curl_loop.h"
#include "util/loop.h"

/* A reply larger than this is refused. */
#define GRPC_MAX_MESSAGE (4u * 1024u * 1024u)
/* gRPC status codes used here. */
#define GRPC_STATUS_OK 0
#define GRPC_STATUS_DEADLINE_EXCEEDED 4
#define GRPC_STATUS_UNAVAILABLE 14
#define GRPC_STATUS_INTERNAL 13

struct grpc_call;

/*
 * Called once.  status is the gRPC status (GRPC_STATUS_OK on success; a
 * transport failure is UNAVAILABLE, a deadline DEADLINE_EXCEEDED, a
 * malformed reply INTERNAL); message explains a failure ("" on success);
 * reply/len is the reply message (valid during the call only).  The call
 * object is freed after the callback returns.
 */
typedef void (*grpc_done_fn)(void *data, int status, const char *message, const uint8_t *reply, size_t len);

struct grpc_call_config {
        const char *socket_path;
        const char *method;     /* "/package.Service/Method" */
        const uint8_t *request; /* protobuf bytes (copied) */
        size_t request_len;
        uint64_t deadline_usec; /* for the call once connected */
        uint64_t dial_usec;     /* retry refused connects this long */
};

int grpc_call_start(struct loop *loop, struct curl_loop *cl, const struct grpc_call_config *cfg, grpc_done_fn fn,
                    void *data, struct grpc_call **ret_call);
/* Cancels without calling back.  NULL-safe. */
void grpc_call_cancel(struct grpc_call *call);

/*
 * The pure parts of a reply, kept apart from the I/O so that every byte a
 * plugin controls can be fuzzed (tests/fuzz/).
 *
 * grpc_unframe: a unary reply body must be exactly one uncompressed
 * length-prefixed message.  0 with *ret_msg and *ret_len pointing into data;
 * -EBADMSG with *ret_why a static sentence.
 *
 * grpc_message_decode: a grpc-message value s[0..n) is percent-encoded
 * UTF-8 ("%XX"; anything else is kept as is).  0 and a new NUL-terminated
 * string in *ret (caller frees; a "%00" ends it early); -ENOMEM.
 */
int grpc_unframe(const uint8_t *data, size_t len, const uint8_t **ret_msg, size_t *ret_len, const char **ret_why);
int grpc_message_decode(const char *s, size_t n, char **ret);

#endif
