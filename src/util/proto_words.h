/*
 * proto_words — the words of the stream protocol (doc/protocol.md) that
 * the daemon and libpodmux-client both use, as string macros and lists.
 * Written by scripts/gen-protocol-words from scripts/protocol-words.json; do not edit.
 *
 * Owns: nothing (macros only; no code, no data, no link dependency).
 * Never: changes by hand: tests/words-check.sh fails on a stale copy.
 */
#ifndef PODMUX_PROTO_WORDS_H
#define PODMUX_PROTO_WORDS_H

/* Generated: one list a line. */
/* clang-format off */
/* Ops of a "pods" message.  PROTO_OPS(X) lists them in the client's
 * enum order (include/podmux/client.h, enum podmux_op). */
#define PROTO_OP_SET "SET"
#define PROTO_OP_ADD "ADD"
#define PROTO_OP_UPDATE "UPDATE"
#define PROTO_OP_DELETE "DELETE"
#define PROTO_OP_REMOVE "REMOVE"
#define PROTO_OP_RECONCILE "RECONCILE"
#define PROTO_OPS(X) X(PROTO_OP_SET) X(PROTO_OP_ADD) X(PROTO_OP_UPDATE) X(PROTO_OP_DELETE) X(PROTO_OP_REMOVE) X(PROTO_OP_RECONCILE)

/* Reasons of an "error" message.  PROTO_ERROR_REASONS(X) gives each
 * as X(reason, kind, errno): the podmux_error_kind suffix and the
 * positive errno a client reports; any other reason is
 * PROTO_ERROR_OTHER_KIND, PROTO_ERROR_OTHER_ERRNO. */
#define PROTO_ERROR_FORBIDDEN "Forbidden"
#define PROTO_ERROR_SLOW_CONSUMER "SlowConsumer"
#define PROTO_ERROR_RESOURCE_EXHAUSTED "ResourceExhausted"
#define PROTO_ERROR_TOO_MANY_CONSUMERS "TooManyConsumers"
#define PROTO_ERROR_SHUTTING_DOWN "ShuttingDown"
#define PROTO_ERROR_BAD_REQUEST "BadRequest"
#define PROTO_ERROR_INTERNAL_ERROR "InternalError"
#define PROTO_ERROR_REASONS(X) X(PROTO_ERROR_FORBIDDEN, PERMISSION, EACCES) X(PROTO_ERROR_SLOW_CONSUMER, SERVER, ENOBUFS) X(PROTO_ERROR_RESOURCE_EXHAUSTED, SERVER, ENOMEM) X(PROTO_ERROR_TOO_MANY_CONSUMERS, SERVER, EUSERS) X(PROTO_ERROR_SHUTTING_DOWN, SERVER, ESHUTDOWN) X(PROTO_ERROR_BAD_REQUEST, SERVER, EINVAL) X(PROTO_ERROR_INTERNAL_ERROR, SERVER, EIO)
#define PROTO_ERROR_OTHER_KIND SERVER
#define PROTO_ERROR_OTHER_ERRNO EIO

/* What a source serves ("source" messages; podmux status).
 * PROTO_CLIENT_SERVING(X): the client's enum podmux_serving, in order. */
#define PROTO_SERVING_LIVE "live"
#define PROTO_SERVING_CHECKPOINT "checkpoint"
#define PROTO_SERVING_WAITING "waiting"
#define PROTO_SERVING_UNKNOWN "unknown"
#define PROTO_CLIENT_SERVING(X) X(PROTO_SERVING_LIVE) X(PROTO_SERVING_CHECKPOINT) X(PROTO_SERVING_UNKNOWN)

/* Annotations.  PROTO_LOCAL_ANNOTATIONS(X): the merger's own, per
 * daemon run, left out of the resync comparison. */
#define PROTO_ANNOTATION_SOURCE "kubernetes.io/config.source"
#define PROTO_ANNOTATION_SEEN "kubernetes.io/config.seen"
#define PROTO_ANNOTATION_MIRROR "kubernetes.io/config.mirror"
#define PROTO_ANNOTATION_HASH "kubernetes.io/config.hash"
#define PROTO_LOCAL_ANNOTATIONS(X) X(PROTO_ANNOTATION_SOURCE) X(PROTO_ANNOTATION_SEEN) X(PROTO_ANNOTATION_MIRROR)

/* Message members read by name. */
#define PROTO_MEMBER_PATH_HEX "path_hex"

/* The members of a pod the merger compares: X(key, in metadata). */
#define PROTO_COMPARED(X) X("labels", 1) X("annotations", 1) X("deletionTimestamp", 1) X("deletionGracePeriodSeconds", 1) X("spec", 0) X("status", 0)

/* clang-format on */

#endif
