"""The words of the stream protocol (doc/protocol.md).

Written by scripts/gen-protocol-words from scripts/protocol-words.json; do not edit.
"""
import errno
from typing import Dict, Final, Tuple

# The ops' names on the wire; OPS in Op's order.
OP_SET: Final = "SET"
OP_ADD: Final = "ADD"
OP_UPDATE: Final = "UPDATE"
OP_DELETE: Final = "DELETE"
OP_REMOVE: Final = "REMOVE"
OP_RECONCILE: Final = "RECONCILE"
OPS: Final[Tuple[str, ...]] = (OP_SET, OP_ADD, OP_UPDATE, OP_DELETE, OP_REMOVE, OP_RECONCILE)

# The reasons of an "error" message.
REASON_FORBIDDEN: Final = "Forbidden"
REASON_SLOW_CONSUMER: Final = "SlowConsumer"
REASON_RESOURCE_EXHAUSTED: Final = "ResourceExhausted"
REASON_TOO_MANY_CONSUMERS: Final = "TooManyConsumers"
REASON_SHUTTING_DOWN: Final = "ShuttingDown"
REASON_BAD_REQUEST: Final = "BadRequest"
REASON_INTERNAL_ERROR: Final = "InternalError"
# The kind (ErrorKind's value) and errno a client gives each reason;
# another reason is OTHER_ERROR.
SERVER_ERRORS: Final[Dict[str, Tuple[str, int]]] = {
    REASON_FORBIDDEN: ("permission", errno.EACCES),
    REASON_SLOW_CONSUMER: ("server", errno.ENOBUFS),
    REASON_RESOURCE_EXHAUSTED: ("server", errno.ENOMEM),
    REASON_TOO_MANY_CONSUMERS: ("server", errno.EUSERS),
    REASON_SHUTTING_DOWN: ("server", errno.ESHUTDOWN),
    REASON_BAD_REQUEST: ("server", errno.EINVAL),
    REASON_INTERNAL_ERROR: ("server", errno.EIO),
}
OTHER_ERROR: Final[Tuple[str, int]] = ("server", errno.EIO)

# What a source serves ("source" messages; podmux status), and the
# word for a state this module does not know.
SERVING_LIVE: Final = "live"
SERVING_CHECKPOINT: Final = "checkpoint"
SERVING_WAITING: Final = "waiting"
SERVING_UNKNOWN: Final = "unknown"
# Serving's words, in its order.
SERVING: Final[Tuple[str, ...]] = (SERVING_LIVE, SERVING_CHECKPOINT, SERVING_UNKNOWN)

# The annotations the daemon writes.
ANNOTATION_SOURCE: Final = "kubernetes.io/config.source"
ANNOTATION_SEEN: Final = "kubernetes.io/config.seen"
ANNOTATION_MIRROR: Final = "kubernetes.io/config.mirror"
ANNOTATION_HASH: Final = "kubernetes.io/config.hash"
# The merger's own, per daemon run: left out of the resync comparison.
LOCAL_ANNOTATIONS: Final[Tuple[str, ...]] = (ANNOTATION_SOURCE, ANNOTATION_SEEN, ANNOTATION_MIRROR)

# Message members read by name.
MEMBER_PATH_HEX: Final = "path_hex"

# The members of a pod the merger compares, in metadata and at the top.
COMPARED_META: Final[Tuple[str, ...]] = ("labels", "annotations", "deletionTimestamp", "deletionGracePeriodSeconds")
COMPARED_TOP: Final[Tuple[str, ...]] = ("spec", "status")
