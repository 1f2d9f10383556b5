"""podmux.wire — the stream protocol's words and records (doc/protocol.md):
the ops, kinds and states as enums, the records a client hands on (Pod,
Update, PluginEvent, SourceState, Error, the events), and one line of the
stream parsed into a message.  No I/O, no state between calls."""

from __future__ import annotations

import bisect
import dataclasses
import enum
import json
import re
from typing import (Any, ClassVar, Dict, Final, List, Literal, Optional,
                    Sequence, Tuple, Union)

from . import _words as _w


PROTOCOL: Final = 1
SOURCE_ANNOTATION: Final = _w.ANNOTATION_SOURCE
# The member carrying a path's bytes when it is not UTF-8 (doc/protocol.md
# "Paths that are not UTF-8").
PATH_HEX: Final = _w.MEMBER_PATH_HEX


class _StrEnum(str, enum.Enum):
    """An enum whose members are their strings: equal to them, hashed as
    them, and printed as them ("%s" and f-strings give "ADD", not
    "Op.ADD")."""

    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, format_spec: str) -> str:
        return str.__format__(str.__str__(self), format_spec)

    __hash__ = str.__hash__


class Op(_StrEnum):
    """The op of a "pods" message or of a computed resync record
    (doc/protocol.md)."""
    SET = _w.OP_SET            # the whole merged state: replaces every pod
    ADD = _w.OP_ADD            # pods new to the node
    UPDATE = _w.OP_UPDATE      # pods that changed
    DELETE = _w.OP_DELETE      # pods deleted gracefully (deletionTimestamp set)
    REMOVE = _w.OP_REMOVE      # pods gone
    RECONCILE = _w.OP_RECONCILE  # only the pod's status changed


OPS: Final[Tuple[Op, ...]] = tuple(Op)
_OP_BY_NAME: Final[Dict[str, Op]] = {o.value: o for o in Op}


class PluginOp(_StrEnum):
    """The op of a plugin message.  A newer daemon may send another: the
    client hands that on as its plain string."""
    REGISTERED = "REGISTERED"
    DEREGISTERED = "DEREGISTERED"
    FAILED = "FAILED"        # news, not state: the cache does not keep it


_PLUGIN_OP_BY_NAME: Final[Dict[str, PluginOp]] = {o.value: o
                                                  for o in PluginOp}


class Serving(_StrEnum):
    """What a source serves (SourceState.serving): its origin, or the
    checkpoint the daemon kept (doc/checkpoint.md); UNKNOWN for a state
    this module does not know (SourceState.state says it)."""
    LIVE = _w.SERVING_LIVE
    CHECKPOINT = _w.SERVING_CHECKPOINT
    UNKNOWN = _w.SERVING_UNKNOWN


class ErrorKind(_StrEnum):
    """What went wrong (Error.kind), as in the C library."""
    CONNECT = "connect"          # the socket cannot be reached
    PERMISSION = "permission"    # not allowed: fatal
    PROTOCOL_MISMATCH = "protocol"  # another protocol spoken: fatal
    SERVER = "server"            # the daemon closed it, saying why (reason)
    CLOSED = "closed"            # the connection ended
    BAD_MESSAGE = "bad_message"  # a line that is not a protocol 1 message
    NOMEM = "nomem"              # out of memory; resynchronizing


# The kinds as module names too.
CONNECT: Final = ErrorKind.CONNECT
PERMISSION: Final = ErrorKind.PERMISSION
PROTOCOL_MISMATCH: Final = ErrorKind.PROTOCOL_MISMATCH
SERVER: Final = ErrorKind.SERVER
CLOSED: Final = ErrorKind.CLOSED
BAD_MESSAGE: Final = ErrorKind.BAD_MESSAGE
NOMEM: Final = ErrorKind.NOMEM

# The level of a line given to on_log.
LogLevel = Literal["info", "warning", "error"]

_SERVER_ERRORS: Final[Dict[str, Tuple[ErrorKind, int]]] = {
    reason: (ErrorKind(kind), err)
    for reason, (kind, err) in _w.SERVER_ERRORS.items()}
_OTHER_ERROR: Final[Tuple[ErrorKind, int]] = (ErrorKind(_w.OTHER_ERROR[0]),
                                              _w.OTHER_ERROR[1])


# The records are frozen dataclasses with __slots__ written out (not
# slots=True, which needs Python 3.10): as fast to read as the namedtuples
# they replace, and cheap to make (scripts/bench --only client).

@dataclasses.dataclass(frozen=True, repr=False)
class Pod:
    """One pod: its JSON text exactly as the daemon sent it, its identity,
    and the decoded object on demand (obj()).  source is "file", "http" or
    "api"."""
    # Not fields (no part of the constructor, equality or repr), set by
    # this module, read with getattr: _ann, the config.source annotation
    # as the parser read it ("" if none), so a pod of a later message whose
    # text is this one's but for config.seen gets its source without a
    # decode (_as_known); _seen, where config.seen is in the text
    # (seen_span()), worked out once: the text never changes; _like, the
    # id() of the pod whose text this one's is but for config.seen
    # (_pod_like): the resync diff, which holds that pod, then knows the
    # two are the same without comparing them again.  An id and not the
    # pod, so no pod keeps an older one alive.
    __slots__ = ("json", "uid", "namespace", "name", "source", "_ann",
                 "_seen", "_like")
    json: str
    uid: str
    namespace: str
    name: str
    source: str

    def obj(self) -> Any:
        """The pod decoded (a dict): a new object each call."""
        return json.loads(self.json)

    def key(self) -> Tuple[str, str, str, str]:
        """What the daemon's order sorts by: (namespace, name, uid,
        source)."""
        return (self.namespace, self.name, self.uid, self.source)

    def source_uid(self) -> Tuple[str, str]:
        """What identifies the pod: (source, uid)."""
        return (self.source, self.uid)

    def __repr__(self) -> str:
        return "Pod(%s %s/%s %s)" % (self.source, self.namespace, self.name,
                                     self.uid)


# A Pod made without its dataclass __init__, which sets each field through
# object.__setattr__ (the class is frozen): each slot is set by its own
# descriptor instead, half the cost of a pod made and annotated
# (scripts/bench --only client: a restart's resync makes 5,000).  The
# same fields, so equal to and hashed as Pod(...) of them.  Every slot is
# set, _seen and _like to None when not known: reading an empty slot
# (getattr with a default) raises and catches an AttributeError inside,
# some 0.1 us, paid for each pod of a resync.
_NEW = object.__new__
(_SET_JSON, _SET_UID, _SET_NS, _SET_NAME, _SET_SOURCE, _SET_ANN, _SET_SEEN,
 _SET_LIKE) = (Pod.__dict__[n].__set__ for n in Pod.__slots__)


def _new_pod(text: str, uid: str, namespace: str, name: str,
             source: str, ann: str,
             seen: Optional[Tuple[int, int]] = None) -> Pod:
    """Pod(text, uid, namespace, name, source) with its _ann (the
    config.source annotation as read, "" if none) and _seen (None: not
    worked out yet)."""
    p: Pod = _NEW(Pod)
    _SET_JSON(p, text)
    _SET_UID(p, uid)
    _SET_NS(p, namespace)
    _SET_NAME(p, name)
    _SET_SOURCE(p, source)
    _SET_ANN(p, ann)
    _SET_SEEN(p, seen)
    _SET_LIKE(p, None)
    return p


@dataclasses.dataclass(frozen=True)
class Update:
    """One change, given to on_pods after the cache holds it: a "pods"
    message as the daemon sent it (live or replayed: resync False, seq its
    number), or a record computed when a full state replaced the cache
    (seq 0, resync True once the client had been synced before).  pods are
    in the daemon's order; source is "file", "http", "api" or "*"."""
    __slots__ = ("op", "source", "pods", "seq", "resync")
    op: Op
    source: str
    pods: Tuple[Pod, ...]
    seq: int
    resync: bool


@dataclasses.dataclass(frozen=True)
class PluginEvent:
    """A plugin message, given to on_plugin: op (a PluginOp, or the plain
    string of an op newer than this module), the plugin's registration
    socket (its key), type ("CSIPlugin", "DevicePlugin", "DRAPlugin"),
    name, plugin_json (the "plugin" object's text), error (FAILED's
    reason, else None), seq (0 for a computed one) and resync."""
    __slots__ = ("op", "socket", "type", "name", "plugin_json", "error",
                 "seq", "resync")
    op: Union[PluginOp, str]
    socket: str
    type: str
    name: str
    plugin_json: str
    error: Optional[str]
    seq: int
    resync: bool


@dataclasses.dataclass(frozen=True)
class SourceState:
    """What a source serves, from the stream's "source" messages
    (doc/protocol.md): given to on_source when it changes, and by
    Client.source_state().  state is the daemon's word ("live",
    "checkpoint", ...); for CHECKPOINT, checkpoint_time (RFC 3339 UTC)
    and checkpoint_resource_version say when the server last confirmed
    its pods, else None.  seq is the message's number, 0 for a state
    computed by the client: after every synced the daemon says again each
    state that is not live, and a state kept from before that is not said
    again ends as live, told with resync=True."""
    __slots__ = ("source", "serving", "state", "checkpoint_time",
                 "checkpoint_resource_version", "seq", "resync")
    source: str
    serving: Serving
    state: str
    checkpoint_time: Optional[str]
    checkpoint_resource_version: Optional[str]
    seq: int
    resync: bool


def _live(source: str, seq: int = 0, resync: bool = False) -> SourceState:
    return SourceState(source, Serving.LIVE, _w.SERVING_LIVE, None, None, seq,
                       resync)


@dataclasses.dataclass(frozen=True)
class Reconnect:
    """Given to on_reconnect: a connection ended and another is due in
    delay seconds; attempt is 1 for the first retry after a good
    connection; resume says it will ask to resume after resume_after."""
    __slots__ = ("delay", "attempt", "resume", "resume_after")
    delay: float
    attempt: int
    resume: bool
    resume_after: Optional[int]


class Error(Exception):
    """What went wrong: kind (an ErrorKind), err (an errno value), reason
    (the daemon's, for SERVER), message (one line naming the socket),
    fatal (the client has stopped)."""

    def __init__(self, kind: ErrorKind, err: int, message: str,
                 reason: Optional[str] = None, fatal: bool = False) -> None:
        super().__init__(message)
        self.kind = kind
        self.err = err
        self.reason = reason
        self.message = message
        self.fatal = fatal


# ---- the events of Client.events() -----------------------------------------
# One class per kind, each carrying only its own member: what the handler
# on_<kind> is given.  kind tells them apart (a type checker narrows Event
# on `ev.kind == "pods"`), and so do isinstance() and match.

@dataclasses.dataclass(frozen=True)
class EventPods:
    """kind "pods": update is what on_pods is given."""
    __slots__ = ("update",)
    kind: ClassVar[Literal["pods"]] = "pods"
    update: Update


@dataclasses.dataclass(frozen=True)
class EventSynced:
    """kind "synced": resumed is what on_synced is given."""
    __slots__ = ("resumed",)
    kind: ClassVar[Literal["synced"]] = "synced"
    resumed: bool


@dataclasses.dataclass(frozen=True)
class EventSourcesReady:
    """kind "sources_ready": the sources on_sources_ready is given."""
    __slots__ = ("sources",)
    kind: ClassVar[Literal["sources_ready"]] = "sources_ready"
    sources: Tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class EventPlugin:
    """kind "plugin": plugin is what on_plugin is given."""
    __slots__ = ("plugin",)
    kind: ClassVar[Literal["plugin"]] = "plugin"
    plugin: PluginEvent


@dataclasses.dataclass(frozen=True)
class EventSource:
    """kind "source": state is what on_source is given."""
    __slots__ = ("state",)
    kind: ClassVar[Literal["source"]] = "source"
    state: SourceState


@dataclasses.dataclass(frozen=True)
class EventError:
    """kind "error": error is what on_error is given."""
    __slots__ = ("error",)
    kind: ClassVar[Literal["error"]] = "error"
    error: Error


@dataclasses.dataclass(frozen=True)
class EventReconnect:
    """kind "reconnect": reconnect is what on_reconnect is given."""
    __slots__ = ("reconnect",)
    kind: ClassVar[Literal["reconnect"]] = "reconnect"
    reconnect: Reconnect


Event = Union[EventPods, EventSynced, EventSourcesReady, EventPlugin,
              EventSource, EventError, EventReconnect]


class _Bad(Exception):
    pass


class _Msg:
    """One message as parsed; only the members of its type are set."""
    __slots__ = ("type", "seq", "protocol", "op", "source", "pods",
                 "resumed", "sources", "plugin_op", "plugin_json", "socket",
                 "plugin_type", "plugin_name", "error", "reason", "message",
                 "state", "cp_time", "cp_rv")

    def __init__(self, type_: str) -> None:
        self.type = type_
        self.seq = 0
        self.protocol = 0
        self.op = Op.SET
        self.source = ""
        self.pods: List[Pod] = []
        self.resumed = False
        self.sources: List[str] = []
        self.plugin_op: Union[PluginOp, str] = ""
        self.plugin_json = ""
        self.socket = ""
        self.plugin_type = ""
        self.plugin_name = ""
        self.state = ""
        self.cp_time: Optional[str] = None
        self.cp_rv: Optional[str] = None
        self.error: Optional[str] = None
        self.reason = ""
        self.message = ""


def _no_constant(name: str) -> Any:
    raise ValueError("%s is not JSON" % name)


_DEC = json.JSONDecoder(parse_constant=_no_constant)
_WS = " \t\r\n"


def _skip(s: str, i: int) -> int:
    while i < len(s) and s[i] in _WS:
        i += 1
    return i


def _value(s: str, i: int) -> Tuple[Any, int]:
    try:
        return _DEC.raw_decode(s, i)
    except ValueError as e:
        raise _Bad("byte %d: %s" % (i, e)) from None


def _pod(text: str, obj: Any, msg_source: str, own_source: bool,
         seen: Optional[Tuple[int, int]] = None) -> Pod:
    """The pod of one member of "pods": its source is the message's, or
    (own_source: a SET, or source "*") its config.source annotation if it
    has one.  seen: where its config.seen is, when a comparison with a
    cached pod found it on the way (_as_known)."""
    md = obj.get("metadata") if isinstance(obj, dict) else None
    md = md if isinstance(md, dict) else {}
    uid, name, ns = md.get("uid"), md.get("name"), md.get("namespace", "")
    if not isinstance(uid, str) or not uid or not isinstance(name, str):
        raise _Bad("a pod without metadata.uid and metadata.name")
    ann = md.get("annotations")
    a = ann.get(SOURCE_ANNOTATION) if isinstance(ann, dict) else None
    a = a if isinstance(a, str) else ""
    return _new_pod(text, uid, ns if isinstance(ns, str) else "", name,
                    a if own_source and a else msg_source, a, seen)


def _pod_like(text: str, known: Pod, seen: Tuple[int, int],
              msg_source: str, own_source: bool) -> Pod:
    """The pod of text, which is known's text but for config.seen's value,
    found at seen (_as_known): the same identity and annotations.
    _new_pod() written out: one call less for each pod of a restart."""
    a: str = getattr(known, "_ann")
    p: Pod = _NEW(Pod)
    _SET_JSON(p, text)
    _SET_UID(p, known.uid)
    _SET_NS(p, known.namespace)
    _SET_NAME(p, known.name)
    _SET_SOURCE(p, a if own_source and a else msg_source)
    _SET_ANN(p, a)
    _SET_SEEN(p, seen)
    _SET_LIKE(p, id(known))
    return p


def _source_again(pods: List[Pod], msg_source: str,
                  own_source: bool) -> None:
    """Sets each pod's source again, for a message whose "op" or "source"
    was not (or not only) before its pods: they were read with the ones
    seen then (_members)."""
    for p in pods:
        a: str = getattr(p, "_ann")
        _SET_SOURCE(p, a if own_source and a else msg_source)


# ---- a pod already validated, but for config.seen --------------------------
#
# A restarted daemon sends every pod again with a new config.seen and
# nothing else new.  Decoding each (json's raw_decode, some 25 us for a
# pod of 1.3 KB) is how this module checks a pod is JSON; a text that is
# a pod already checked (one the cache holds) with one JSON string put in
# the place of another is JSON too, so checking that string is checking
# the pod, and the pod's identity is the one it had.  Nothing is kept for
# this but the cache itself: every byte of the new text is compared.

_TEXT_HEAD = '{"metadata":{"annotations":{'
_STR = r'"[^"\\]*(?:\\.[^"\\]*)*"'
# A JSON string as json's strict decoder takes it: no control character
# and only the escapes JSON has.
_JSON_STR = r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"'
_SEEN_NAME = json.dumps(_w.ANNOTATION_SEEN)
# The annotations before config.seen, then config.seen (group 1): one
# match run by the re module, where a loop over the annotations in Python
# cost more than the rest of the resync diff.  The repetition is lazy, so
# the first config.seen is the one found, as a walk would find it.
_SEEN = re.compile(re.escape(_TEXT_HEAD) + r'(?:' + _STR + ':' + _STR +
                   r',)*?(' + re.escape(_SEEN_NAME) + ':' + _STR + ')')
_SEEN_MEMBER = re.compile(re.escape(_SEEN_NAME) + ':' + _JSON_STR)
# The value's opening quote, from the start of the member.
_SEEN_VALUE: Final = len(_SEEN_NAME) + 1


_NO_SEEN: Final = (-1, -1)


def seen_span(p: Pod) -> Tuple[int, int]:
    """(start, end) of the member "kubernetes.io/config.seen" (name and
    value) in p's metadata.annotations, for a text laid out as the daemon
    writes pods (compact, annotations first, each a string); else
    _NO_SEEN."""
    span: Optional[Tuple[int, int]] = getattr(p, "_seen", None)
    if span is None:
        m = _SEEN.match(p.json)
        span = m.span(1) if m else _NO_SEEN
        _SET_SEEN(p, span)
    return span


def _as_known(s: str, i: int, known: Pod) -> Tuple[
        int, Optional[Tuple[int, int]]]:
    """Where the pod at s[i:] ends if it is known's text (validated when
    it was parsed) with at most the value of its first config.seen
    annotation replaced by a valid JSON string (as _SEEN finds it), and
    where its config.seen is (relative to i).  Else -1, and where the
    config.seen of the pod at s[i:] is when the comparison got that far
    (its text is known's up to a valid config.seen: the place _SEEN
    finds in it, kept for the pod once decoded), or None.

    Cost when it is not known's text: a pod changed in a live SET gets as
    far as the text after config.seen, so the value is found with a
    search for its closing quote and checked by the strict expression
    only when it holds a backslash or a character str.isprintable()
    refuses (a control character among them)."""
    t = known.json
    if getattr(known, "_ann", None) is None:
        return -1, None   # not a pod this module parsed
    span = seen_span(known)
    a, b = span
    if a < 0:
        return (i + len(t), span) if s.startswith(t, i) else (-1, None)
    # Known's text up to its value's first character, which a text equal
    # to known's passes too.
    v = a + _SEEN_VALUE + 1
    if not s.startswith(t[:v], i):
        return -1, None
    v += i
    q = s.find('"', v)
    if q < 0:
        return -1, None
    w = s[v:q]
    if "\\" in w or not w.isprintable():
        m = _SEEN_MEMBER.match(s, i + a)
        if m is None:
            return -1, None
        end = m.end()
    else:
        end = q + 1   # no escape, no control character: a JSON string
    rest = t[b:]
    if not s.startswith(rest, end):
        return -1, (a, end - i)
    return end + len(rest), (a, end - i)


# A live SET stops comparing its pods with the cache after this many in a
# row were not the cached ones: a SET that changed every pod then pays
# for a few comparisons, not 5,000 (4% of its time); a restart's full
# state compares every pod.
_LIVE_MISSES: Final = 8


class _Known:
    """The pods a message's pods are first compared with (_as_known): the
    client's cache in the daemon's order (pods, and their keys), and where
    the next comparison starts (at: after the last pod found, as a
    restart's full state comes in that order).  sets_only: only the pods
    of a SET are compared (the client sets it while live: an ADD or
    UPDATE carries pods that changed, and comparing them first cost a
    one-pod message a fifth more; a SET in snapshot mode carries every
    pod, most unchanged)."""
    __slots__ = ("pods", "keys", "at", "sets_only")

    def __init__(self, pods: Sequence[Pod],
                 keys: Sequence[Tuple[str, str, str, str]],
                 sets_only: bool = False) -> None:
        self.pods = pods
        self.keys = keys
        self.at = 0
        self.sets_only = sets_only


# The pods of a message as _members() read them: the pods, the (source,
# own source) they were read with (None: "op" or "source" was not read
# yet), and the first element that was no pod.
_Pods = Tuple[List[Pod], Optional[Tuple[str, bool]], Optional[_Bad]]


def _members(s: str, known: Optional[_Known] = None,
             ahead: Optional[_Ahead] = None) -> Tuple[
        Dict[str, Any], Optional[_Pods], Optional[Tuple[str, Any]]]:
    """Walks one line's object: its members decoded, but the pods made
    as they are read (_pod_list: their source from the "op" and "source"
    before them, which the daemon writes first), each with its exact
    text, and the plugin as a (text, decoded) pair.  The daemon writes
    no white space: each _skip() is called only at white space (a call
    per token cost a one-pod message a tenth of its time).  ahead: the
    pods of the line read while it arrived (_read_ahead), taken as they
    are when they are the first elements of its "pods", read as here."""
    n = len(s)
    i = _skip(s, 0)
    if i >= n or s[i] != "{":
        raise _Bad("a line that is not a JSON object")
    i = _skip(s, i + 1)
    members: Dict[str, Any] = {}
    pods: Optional[_Pods] = None
    plugin: Optional[Tuple[str, Any]] = None
    if i < n and s[i] == "}":
        i += 1
    else:
        while True:
            if i < n and s[i] in _WS:
                i = _skip(s, i)
            if i >= n or s[i] != '"':
                raise _Bad("expected a member name")
            key, i = _value(s, i)
            if i < n and s[i] in _WS:
                i = _skip(s, i)
            if i >= n or s[i] != ":":
                raise _Bad("expected ':'")
            i += 1
            if i < n and s[i] in _WS:
                i = _skip(s, i)
            if key == "pods":
                # The daemon writes "op" before "pods"; in another order
                # a SET's pods are decoded, as any pod is.
                op, src = members.get("op"), members.get("source")
                read_as = (src, op == _w.OP_SET or src == "*") if \
                    isinstance(src, str) and isinstance(op, str) and \
                    op in _OP_BY_NAME else None
                k = known if known is None or not known.sets_only or \
                    op == _w.OP_SET else None
                made, bad, i = _pod_list(s, i, k, read_as or ("", True),
                                         _taken(ahead, i, k, read_as))
                ahead = None   # a second "pods" is read whole
                pods = (made, read_as, bad)
            elif key == "plugin":
                start = i
                obj, i = _value(s, i)
                plugin = (s[start:i], obj)   # checked by a plugin message
            else:
                members[key], i = _value(s, i)
            if i < n and s[i] in _WS:
                i = _skip(s, i)
            if i < n and s[i] == "}":
                i += 1
                break
            if i >= n or s[i] != ",":
                raise _Bad("expected ',' or '}'")
            i += 1
    if _skip(s, i) < n:
        raise _Bad("text after the JSON object")
    return members, pods, plugin


def _next_after(known: _Known, obj: Any) -> None:
    """Sets known.at after the pod of obj, where the next pod of the
    daemon's order would be: after the pod it was compared with when it
    is that pod changed (a live SET's pods), else a binary search of the
    keys."""
    try:
        md = obj["metadata"]
        ns, name, uid = md.get("namespace", ""), md["name"], md["uid"]
    except (TypeError, KeyError, AttributeError):
        return   # not a pod: _pod says so
    keys, j = known.keys, known.at
    if j < len(keys):
        kj = keys[j]
        if kj[2] == uid and kj[1] == name and kj[0] == ns:
            known.at = j + 1
            return
    if not isinstance(ns, str) or not isinstance(name, str) or \
            not isinstance(uid, str):
        return
    k = (ns, name, uid)
    j = bisect.bisect_left(keys, k)
    if j < len(keys) and keys[j][:3] == k:
        j += 1
    known.at = j


def _pod_list(s: str, i: int, known: Optional[_Known],
              read_as: Tuple[str, bool],
              ahead: Optional[Tuple[List[Pod], int]] = None) -> Tuple[
                  List[Pod], Optional[_Bad], int]:
    """The array "pods" at i, each element's pod made as it is read
    (read_as: the message's source and whether a pod's own config.source
    wins, as _pod() takes them): the pod of known it is but for
    config.seen (_pod_like), else decoded (_pod); the first element that
    is JSON but no pod, whose error only a "pods" message raises (the
    pods end there); and where the array ends.  ahead: the first pods,
    already read (_read_ahead), and where the next element starts."""
    pods: List[Pod] = []
    n = len(s)
    if i >= n or s[i] != "[":
        # Only a "pods" message raises it: in another, a member this
        # module does not know (doc/protocol.md).
        _, i = _value(s, i)
        return pods, _Bad("pods is not an array"), i
    if ahead is not None:
        pods, i = ahead
    else:
        i = _skip(s, i + 1)
    if i < n and s[i] == "]":
        return pods, None, i + 1
    src, own = read_as
    bad: Optional[_Bad] = None
    misses = 0
    while True:
        if i < n and s[i] in _WS:
            i = _skip(s, i)
        start = i
        k = known.pods[known.at] if known is not None and \
            known.at < len(known.pods) else None
        end, seen = _as_known(s, i, k) if k is not None else (-1, None)
        if end >= 0 and known is not None and k is not None:
            known.at += 1
            misses = 0
            i = end
            pods.append(_pod_like(s[start:i], k, seen or _NO_SEEN, src,
                                  own))
        else:
            obj, i = _value(s, i)
            if bad is None:
                try:
                    pods.append(_pod(s[start:i], obj, src, own, seen))
                except _Bad as e:
                    bad = e
            if known is not None:
                _next_after(known, obj)
                misses += 1
                if known.sets_only and misses >= _LIVE_MISSES:
                    known = None   # a SET of changed pods: decode them

        if i < n and s[i] in _WS:
            i = _skip(s, i)
        if i < n and s[i] == "]":
            return pods, bad, i + 1
        if i >= n or s[i] != ",":
            raise _Bad("expected ',' or ']' in pods")
        i += 1


# ---- a full state read while it arrives --------------------------------------
#
# A restart's full state is one line of 7 MB for 5,000 pods, which the
# daemon's socket hands over some 200 KB at a time: the client waited
# for the whole line, a fifth of its resync, then read every pod.  The
# pods that are cached texts but for config.seen (_as_known) are read
# from the part that came, as they would be from the whole line; the
# rest of the line is read when it ends, by _parse, from where this
# stopped.  Nothing else is taken early: the members, every other pod
# and the end of the line are checked then, as for any line.

# The head of a pods message as the daemon writes it (compact, its
# members in its order): read ahead only after it.
_PODS_HEAD = re.compile(r'\{"type":"pods","seq":[0-9]+,"op":"([A-Z]+)",'
                        r'"source":"([^"\\]*)","pods":\[')
# A line whose first characters are not that head is not read ahead.
_PODS_HEAD_MAX: Final = 256
# An element not read as known's with this many characters more than
# known's text come is not known's (a config.seen value this much
# longer is read at the end, as known's all the same).
_AHEAD_SLACK: Final = 1024


class _Ahead:
    """A pods line being read while it arrives (_read_ahead): text, the
    part that came and is not read yet, from base (in characters of the
    line); the pods read, and where the next element starts (next); the
    line's head up to the array's first element (head; first, its
    length, -1 before it is read), the message's source as _members()
    reads it (read_as), and known, with where it was (at0), to take back
    what was read if _parse does not take it (_taken).  stopped: nothing
    more is read ahead.  cut: the line _parse is given is head + what
    came from next on (the pods read ahead are not decoded again)."""
    __slots__ = ("text", "base", "pods", "next", "first", "head",
                 "read_as", "known", "at0", "stopped", "cut")

    def __init__(self, known: _Known) -> None:
        self.text = ""
        self.head = ""
        self.cut = False
        self.base = 0
        self.pods: List[Pod] = []
        self.next = -1
        self.first = -1
        self.read_as: Tuple[str, bool] = ("", True)
        self.known = known
        self.at0 = known.at
        self.stopped = False


def _read_ahead(ahead: _Ahead, more: str) -> None:
    """Reads the pods of ahead.known, in a row, from the text that came
    after what ahead holds (more, the next characters of the line).
    Stops for good at the first element that is not the next known pod
    followed by a comma (a changed pod, white space, the array's end):
    _parse reads from there.  Cost: the pods read, as _pod_list."""
    if ahead.stopped:
        return
    s = ahead.text + more
    if ahead.first < 0:
        m = _PODS_HEAD.match(s)
        if m is None:
            if len(s) >= _PODS_HEAD_MAX:
                ahead.stopped = True   # not the daemon's head: read whole
            else:
                ahead.text = s
            return
        op, src = m.group(1), m.group(2)
        if op not in _OP_BY_NAME:
            ahead.stopped = True
            return
        ahead.first = ahead.next = m.end()
        ahead.head = m.group(0)
        ahead.read_as = (src, op == _w.OP_SET or src == "*")
    known, src, own = ahead.known, ahead.read_as[0], ahead.read_as[1]
    kpods, n = known.pods, len(s)
    i = ahead.next - ahead.base
    while known.at < len(kpods):
        k = kpods[known.at]
        end, seen = _as_known(s, i, k)
        if end < 0 and n - i >= len(k.json) + _AHEAD_SLACK:
            ahead.stopped = True   # not known's text: read at the end
            break
        if end < 0 or end >= n:
            break   # its end (or the comma after it) has not come
        if s[end] != ",":
            ahead.stopped = True
            break
        ahead.pods.append(_pod_like(s[i:end], k, seen or _NO_SEEN, src,
                                    own))
        known.at += 1
        i = end + 1
    else:
        ahead.stopped = True
    ahead.next = ahead.base + i
    ahead.text = s[i:]
    ahead.base += i


def _taken(ahead: Optional[_Ahead], i: int, known: Optional[_Known],
           read_as: Optional[Tuple[str, bool]]) -> Optional[
               Tuple[List[Pod], int]]:
    """What _pod_list takes of ahead for the array at i: its pods and
    where the next element starts, when it read this array with known
    and read_as; else None, and known back where ahead found it (_Bad
    for a cut line, which misses those pods: the caller reads the line
    whole)."""
    if ahead is None or ahead.first < 0:
        return None
    if ahead.first == i + 1 and ahead.known is known and \
            ahead.read_as == read_as:
        return ahead.pods, ahead.first if ahead.cut else ahead.next
    ahead.known.at = ahead.at0
    if ahead.cut:
        raise _Bad("pods read ahead with other cached pods")
    return None


def _want(members: Dict[str, Any], key: str) -> str:
    v = members.get(key)
    if not isinstance(v, str):
        raise _Bad('"%s" is missing or of the wrong type' % key)
    return _cut(v)


def _cut(s: str) -> str:
    """s up to a NUL, as the C library and the Go package read a string."""
    i = s.find("\0")
    return s if i < 0 else s[:i]


def _parse(line: str, known: Optional[_Known] = None,
           ahead: Optional[_Ahead] = None) -> _Msg:
    """One line into a _Msg; each pod keeps its exact text (the walk steps
    over members itself and decodes each value with raw_decode, but a pod
    that is one of known's but for config.seen: _as_known; ahead: what
    was read of the line while it arrived, _read_ahead)."""
    members, pods, plugin = _members(line, known, ahead)
    t = members.get("type")
    if not isinstance(t, str):
        raise _Bad('a message without a string "type"')
    t = _cut(t)
    m = _Msg(t)
    if t == "hello":
        p = members.get("protocol")
        if not isinstance(p, int) or isinstance(p, bool):
            raise _Bad("a hello without an integer protocol")
        m.protocol = p
        if p != PROTOCOL:
            return m
    seq = members.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        raise _Bad('a message without a non-negative integer "seq"')
    m.seq = seq
    if t == "pods":
        name = _want(members, "op")
        op = _OP_BY_NAME.get(name)
        if op is None:
            raise _Bad('unknown op "%s"' % name)
        m.op = op
        m.source = _want(members, "source")
        if pods is None:   # an empty one, as in the C library and Go
            pods = ([], None, None)
        made, read_as, bad = pods
        if bad is not None:
            raise bad
        own = op is Op.SET or m.source == "*"
        if read_as != (m.source, own):
            _source_again(made, m.source, own)
        m.pods = made
    elif t == "synced":
        r = members.get("resumed", False)
        if not isinstance(r, bool):
            raise _Bad('"resumed" is not a boolean')
        m.resumed = r
    elif t == "sources_ready":
        srcs = members.get("sources")
        if not isinstance(srcs, list) or \
                not all(isinstance(x, str) for x in srcs):
            raise _Bad('"sources" is not an array of names')
        m.sources = list(srcs)
    elif t == "plugin":
        _plugin(m, members, plugin)
    elif t == "source":
        _source(m, members)
    elif t == "error":
        m.reason = _want(members, "reason")
        m.message = _want(members, "message") if "message" in members \
            else ""
    return m


def _source(m: _Msg, members: Dict[str, Any]) -> None:
    """A "source" message: source, state, and checkpoint (an object whose
    time and resource_version are strings or null; absent or null)."""
    m.source = _want(members, "source")
    m.state = _want(members, "state")
    cp = members.get("checkpoint")
    if cp is None:
        return
    if not isinstance(cp, dict):
        raise _Bad('"checkpoint" is not an object')
    tm, rv = cp.get("time"), cp.get("resource_version")
    if not isinstance(tm, (str, type(None))) or \
            not isinstance(rv, (str, type(None))):
        raise _Bad('a member of "checkpoint" is not a string')
    m.cp_time, m.cp_rv = tm, rv


def _plugin(m: _Msg, members: Dict[str, Any],
            plugin: Optional[Tuple[str, Any]]) -> None:
    if plugin is None:
        raise _Bad('a plugin message without "plugin"')
    if not isinstance(plugin[1], dict) or \
            not isinstance(plugin[1].get("socket"), str):
        raise _Bad('"plugin" is not an object with a socket')
    op = _want(members, "op")
    m.plugin_op = _PLUGIN_OP_BY_NAME.get(op, op)
    m.error = _want(members, "error") if "error" in members else None
    m.plugin_json, obj = plugin
    m.socket = obj["socket"]
    typ, name = obj.get("type"), obj.get("name")
    m.plugin_type = typ if isinstance(typ, str) else ""
    m.plugin_name = name if isinstance(name, str) else ""


def record_path(record: Dict[str, Any]) -> Optional[bytes]:
    """The path a record of the files request names, byte for byte
    (doc/protocol.md "Files request", "Paths that are not UTF-8"): record
    is a "file" message's record or the "files" message, decoded by json.
    A name that is not UTF-8 shows with U+FFFD in "path" and comes whole in
    "path_hex"; the bytes are returned either way (os.fsdecode() makes the
    str os functions take).  None when the record names no path (the
    manifest URL's, a daemon without a static pod path); ValueError when a
    member is not a string, "path_hex" is not whole bytes of hex digits,
    or the path holds a zero byte."""
    path = record.get("path")
    hexed = record.get(PATH_HEX)
    if path is None:
        return None
    if not isinstance(path, str) or \
            (hexed is not None and not isinstance(hexed, str)):
        raise ValueError("path and %s must be strings" % PATH_HEX)
    if hexed is None:
        raw = path.encode("utf-8", "surrogatepass")
    elif len(hexed) % 2 or not re.fullmatch(r"[0-9a-fA-F]*", hexed):
        raise ValueError("%s %r: not whole bytes of hex digits" %
                         (PATH_HEX, hexed))
    else:
        raw = bytes.fromhex(hexed)
    if b"\0" in raw:
        raise ValueError("path %r holds a zero byte" % raw)
    return raw
