"""podmux — a consumer of podmux's update stream (protocol 1, see
doc/protocol.md in the podmux repository), standard library only, typed
(py.typed: a type checker reads the hints here).

The same semantics as the C library libpodmux-client
(include/podmux/client.h): an always-consistent local cache of the node's
merged pods and registered plugins; handlers (or an iterator of events)
that see each change once and in order, whether it came live, replayed
after a resume, or as a full state replacing the cache (then as the
computed difference, REMOVE / ADD / UPDATE records with resync=True);
reconnection with backoff (0.1 s doubling to 5 s) resuming after the last
message applied.

The difference after a full state counts a pod as changed the way the
daemon's merger does (doc/protocol.md, "Which pods changed"): pods are
matched by source and UID (a pod is its source and UID: the cache holds one
per source and UID), and a matched pod is an UPDATE only if its name,
namespace, labels, annotations (leaving out kubernetes.io/config.source,
.seen and .mirror), deletionTimestamp, deletionGracePeriodSeconds, spec or
status differ as JSON values.  So a daemon restart is not a change: a pod
whose only difference is the new run's config.seen (or, for an API pod,
the resourceVersion and other metadata each run keeps from the version it
first stored) is not handed on, but the cache takes its new text, so a
lookup shows the current run's config.seen.

A full state after a daemon restart lacks the sources the new run has not
heard from yet (an unreachable API server, a slow manifest URL): their
pods are held over, as the kubelet makes no deletion before it has seen
all its sources (doc/protocol.md, "A restarted daemon's late sources").
They stay in the cache and nothing is handed on for them.  When the source
delivers, a held-over pod that a live ADD carries again is handed on only
if it changed, as an UPDATE (resync=True, seq 0) after the ADD, which goes
on with its other pods (maybe none); in the snapshot modes a live SET
keeps the held-over pods it does not carry and is handed on with the whole
cache; another op on a held-over pod goes as sent.  When sources_ready
comes, the pods still held over are removed: REMOVE updates with
resync=True, before on_sources_ready.

A client given resume_after= (a point saved by an earlier run of the
program, which keeps its own state up to it) holds in its cache only what
comes after that point: has_synced stays False after the replay.  A full
state then cannot be compared with state the client never saw, so it is
handed on whole: one SET of every pod (source "*", resync=True) and a
REGISTERED for every plugin; replace what you hold with these.

    import podmux
    with podmux.Client("/run/podmux/podmux.sock") as c:
        for ev in c.events():
            if ev.kind == "pods":          # ev is an EventPods
                for p in ev.update.pods:
                    print(ev.update.op, p.namespace, p.name)

The records (Pod, Update, PluginEvent, Reconnect and the events) are
frozen dataclasses; ops and error kinds are enums whose members are their
strings (Op.ADD == "ADD", printed as ADD).  A client is used by one thread
at a time.  It never logs by itself: log lines go to on_log if set.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import enum
import errno
import json
import re
import selectors
import socket
import time
from typing import (Any, Callable, ClassVar, DefaultDict, Deque, Dict,
                    Final, Iterable, Iterator, List, Literal, Optional, Set,
                    Tuple, Union)

from . import _words as _w

__all__ = ["Client", "Pod", "Update", "PluginEvent", "Error", "Reconnect",
           "Op", "PluginOp", "ErrorKind", "LogLevel", "IndexFunc",
           "Serving", "SourceState",
           "Event", "EventPods", "EventSynced", "EventSourcesReady",
           "EventPlugin", "EventSource", "EventError", "EventReconnect",
           "PROTOCOL", "DEFAULT_SOCKET", "OPS", "INDEX_NAMESPACE",
           "INDEX_SOURCE", "CONNECT", "PERMISSION", "PROTOCOL_MISMATCH",
           "SERVER", "CLOSED", "BAD_MESSAGE", "NOMEM"]

PROTOCOL: Final = 1
DEFAULT_SOCKET: Final = "/run/podmux/podmux.sock"
# Not Final: a test (or scripts/bench) may shorten the backoff.
BACKOFF_MIN = 0.1
BACKOFF_MAX = 5.0
DEFAULT_MAX_LINE: Final = 256 * 1024 * 1024
READ_BUDGET: Final = 4 * 1024 * 1024
SOURCE_ANNOTATION: Final = _w.ANNOTATION_SOURCE


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
    __slots__ = ("json", "uid", "namespace", "name", "source")
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

# A custom index's function (Client.add_index): a pod's keys.
IndexFunc = Callable[[Pod], Iterable[str]]

# The built-in indexes of Client.by_index().
INDEX_NAMESPACE: Final = "namespace"
INDEX_SOURCE: Final = "source"


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


# ---- the resync comparison (doc/protocol.md, "Which pods changed") ---------

class _Num:
    """A JSON number as written: 1 and 1.0 differ, as in the C library and
    the rule the protocol states."""
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Num) and other.text == self.text

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self.text)


_CMP_DEC = json.JSONDecoder(parse_int=_Num, parse_float=_Num,
                            parse_constant=_no_constant)
# What a run of the daemon writes or keeps on its own, left out.
_LOCAL_ANNOTATIONS = _w.LOCAL_ANNOTATIONS
_COMPARED_META = _w.COMPARED_META
_COMPARED_TOP = _w.COMPARED_TOP
_ABSENT = object()


def _compared(text: str) -> List[Any]:
    """The parts of a pod's text the resync diff compares, as values: its
    name and namespace as the pod's identity reads them (a namespace that is
    missing or not a string is ""), then the members."""
    obj = _CMP_DEC.decode(text)
    top = obj if isinstance(obj, dict) else {}
    md = top.get("metadata")
    md = md if isinstance(md, dict) else {}
    name, ns = md.get("name"), md.get("namespace")
    parts: List[Any] = [name if isinstance(name, str) else None,
                        ns if isinstance(ns, str) else ""]
    for k in _COMPARED_META:
        v = md.get(k, _ABSENT)
        if k == "annotations" and isinstance(v, dict):
            v = {a: x for a, x in v.items() if a not in _LOCAL_ANNOTATIONS}
            v = v or _ABSENT  # only local ones: as if none
        parts.append(v)
    return parts + [top.get(k, _ABSENT) for k in _COMPARED_TOP]


_TEXT_HEAD = '{"metadata":{"annotations":{'
_ANNOTATION = re.compile(r'"((?:[^"\\]|\\.)*)":"(?:[^"\\]|\\.)*"')
_SEEN_KEY = _w.ANNOTATION_SEEN


def _seen_span(text: str) -> Optional[Tuple[int, int]]:
    """(start, end) of the member "kubernetes.io/config.seen" (name and
    value) in metadata.annotations, for a text laid out as the daemon
    writes pods (compact, annotations first, each a string); else None."""
    if not text.startswith(_TEXT_HEAD):
        return None
    i = len(_TEXT_HEAD)
    while True:
        m = _ANNOTATION.match(text, i)
        if m is None:
            return None
        if m.group(1) == _SEEN_KEY:
            return m.span()
        if text[m.end():m.end() + 1] != ",":
            return None
        i = m.end() + 1


def _same_but_seen(a: str, b: str) -> bool:
    sa, sb = _seen_span(a), _seen_span(b)
    return sa is not None and sb is not None and sa[0] == sb[0] and \
        a[:sa[0]] == b[:sb[0]] and a[sa[1]:] == b[sb[1]:]


def _same(a: str, b: str) -> bool:
    """Whether two texts of one pod (same source and UID) are the same for
    the resync diff: equal, or the same name and namespace and equal in
    every member the merger compares.  Cost: a comparison of the texts
    when they are equal or differ only in config.seen as the daemon writes
    it (what a restart gives every unchanged pod); else both decoded."""
    return a == b or _same_but_seen(a, b) or _compared(a) == _compared(b)


def _skip(s: str, i: int) -> int:
    while i < len(s) and s[i] in _WS:
        i += 1
    return i


def _value(s: str, i: int) -> Tuple[Any, int]:
    try:
        return _DEC.raw_decode(s, i)
    except ValueError as e:
        raise _Bad("byte %d: %s" % (i, e)) from None


def _pod(text: str, obj: Any, msg_source: str, own_source: bool) -> Pod:
    """The pod of one member of "pods": its source is the message's, or
    (own_source: a SET, or source "*") its config.source annotation if it
    has one."""
    md = obj.get("metadata") if isinstance(obj, dict) else None
    md = md if isinstance(md, dict) else {}
    uid, name, ns = md.get("uid"), md.get("name"), md.get("namespace", "")
    if not isinstance(uid, str) or not uid or not isinstance(name, str):
        raise _Bad("a pod without metadata.uid and metadata.name")
    src = msg_source
    if own_source:
        ann = md.get("annotations")
        a = ann.get(SOURCE_ANNOTATION) if isinstance(ann, dict) else None
        if isinstance(a, str) and a:
            src = a
    return Pod(text, uid, ns if isinstance(ns, str) else "", name, src)


def _members(s: str) -> Tuple[Dict[str, Any],
                              Optional[List[Tuple[str, Any]]],
                              Optional[Tuple[str, Any]]]:
    """Walks one line's object: its members decoded, but the pods and the
    plugin each with its exact text ((text, decoded) pairs)."""
    i = _skip(s, 0)
    if i >= len(s) or s[i] != "{":
        raise _Bad("a line that is not a JSON object")
    i = _skip(s, i + 1)
    members: Dict[str, Any] = {}
    pods: Optional[List[Tuple[str, Any]]] = None
    plugin: Optional[Tuple[str, Any]] = None
    if i < len(s) and s[i] == "}":
        i += 1
    else:
        while True:
            i = _skip(s, i)
            if i >= len(s) or s[i] != '"':
                raise _Bad("expected a member name")
            key, i = _value(s, i)
            i = _skip(s, i)
            if i >= len(s) or s[i] != ":":
                raise _Bad("expected ':'")
            i = _skip(s, i + 1)
            if key == "pods":
                pods, i = _pod_texts(s, i)
            elif key == "plugin":
                start = i
                obj, i = _value(s, i)
                if not isinstance(obj, dict) or \
                        not isinstance(obj.get("socket"), str):
                    raise _Bad('"plugin" is not an object with a socket')
                plugin = (s[start:i], obj)
            else:
                members[key], i = _value(s, i)
            i = _skip(s, i)
            if i < len(s) and s[i] == "}":
                i += 1
                break
            if i >= len(s) or s[i] != ",":
                raise _Bad("expected ',' or '}'")
            i += 1
    if _skip(s, i) < len(s):
        raise _Bad("text after the JSON object")
    return members, pods, plugin


def _pod_texts(s: str, i: int) -> Tuple[List[Tuple[str, Any]], int]:
    """The array "pods" at i: each element's (text, decoded), and where
    the array ends."""
    pods: List[Tuple[str, Any]] = []
    if i >= len(s) or s[i] != "[":
        raise _Bad("pods is not an array")
    i = _skip(s, i + 1)
    if i < len(s) and s[i] == "]":
        return pods, i + 1
    while True:
        i = _skip(s, i)
        start = i
        obj, i = _value(s, i)
        pods.append((s[start:i], obj))
        i = _skip(s, i)
        if i < len(s) and s[i] == "]":
            return pods, i + 1
        if i >= len(s) or s[i] != ",":
            raise _Bad("expected ',' or ']' in pods")
        i += 1


def _want(members: Dict[str, Any], key: str) -> str:
    v = members.get(key)
    if not isinstance(v, str):
        raise _Bad('"%s" is missing or of the wrong type' % key)
    return v


def _parse(line: str) -> _Msg:
    """One line into a _Msg; each pod keeps its exact text (the walk steps
    over members itself and decodes each value with raw_decode)."""
    members, pods, plugin = _members(line)
    t = members.get("type")
    if not isinstance(t, str):
        raise _Bad('a message without a string "type"')
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
        if pods is None:
            raise _Bad("a pods message without pods")
        own = op is Op.SET or m.source == "*"
        m.pods = [_pod(text, obj, m.source, own) for text, obj in pods]
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
    op = _want(members, "op")
    m.plugin_op = _PLUGIN_OP_BY_NAME.get(op, op)
    m.error = _want(members, "error") if "error" in members else None
    m.plugin_json, obj = plugin
    m.socket = obj["socket"]
    typ, name = obj.get("type"), obj.get("name")
    m.plugin_type = typ if isinstance(typ, str) else ""
    m.plugin_name = name if isinstance(name, str) else ""


_Key = Tuple[str, str]                    # (source, uid)
_PluginEntry = Tuple[str, str, str]       # (plugin_json, type, name)
_Watch = Callable[[Optional[Pod], Optional[Pod]], None]
_Record = Tuple[Op, str, List[Pod]]       # op, source, pods


class _Cache:
    """Pods by (source, uid), with what C's cache has: the pods in the
    daemon's order (a sorted list: an insert or removal is a search and a
    memmove), and indexes by uid and by (namespace, name).

    Every pod that changes is reported to watch (when set) as (old, new),
    None for an added or a removed pod, as it changes: the client's
    indexes follow the cache inside each apply (go/store.go does the
    same)."""

    def __init__(self) -> None:
        self.pods: Dict[_Key, Pod] = {}
        self.held: Set[_Key] = set()       # the pods held over
        self.plugins: Dict[str, _PluginEntry] = {}   # by socket
        self.watch: Optional[_Watch] = None
        self._keys: List[Tuple[str, str, str, str]] = []  # Pod.key(), sorted
        self._order: List[Pod] = []        # the pods in that order
        self._by_uid: Dict[str, Dict[str, Pod]] = {}   # uid -> source -> Pod
        self._by_name: Dict[Tuple[str, str], Dict[_Key, Pod]] = {}

    def _index(self, p: Pod) -> None:
        self._by_uid.setdefault(p.uid, {})[p.source] = p
        self._by_name.setdefault((p.namespace, p.name), {})[
            (p.source, p.uid)] = p

    def _unindex(self, p: Pod) -> None:
        d = self._by_uid[p.uid]
        del d[p.source]
        if not d:
            del self._by_uid[p.uid]
        n = self._by_name[(p.namespace, p.name)]
        del n[(p.source, p.uid)]
        if not n:
            del self._by_name[(p.namespace, p.name)]
        i = bisect.bisect_left(self._keys, p.key())
        del self._keys[i]
        del self._order[i]

    def _put(self, p: Pod) -> None:
        k = (p.source, p.uid)
        self.held.discard(k)
        old = self.pods.get(k)
        if old is not None and old.key() == p.key():
            i = bisect.bisect_left(self._keys, p.key())
            self._order[i] = p
            self.pods[k] = p
            self._index(p)
        else:
            if old is not None:
                self._unindex(old)
            self.pods[k] = p
            self._index(p)
            pk = p.key()
            i = bisect.bisect_left(self._keys, pk)
            self._keys.insert(i, pk)
            self._order.insert(i, p)
        if self.watch is not None:
            self.watch(old, p)

    def _drop(self, k: _Key) -> None:
        self.held.discard(k)
        old = self.pods.pop(k, None)
        if old is not None:
            self._unindex(old)
            if self.watch is not None:
                self.watch(old, None)

    def _set(self, pods: Iterable[Pod]) -> None:
        before = self.pods
        self.held = set()
        self.pods = {(p.source, p.uid): p for p in pods}
        self._order = sorted(self.pods.values(), key=Pod.key)
        self._keys = [p.key() for p in self._order]
        self._by_uid, self._by_name = {}, {}
        for p in self._order:
            self._index(p)
        if self.watch is not None:
            _report(self.watch, before, self.pods)

    def take_over(self, old: _Cache) -> None:
        """Takes the place of old (a full state built beside it): old's
        watch is told the difference and watches this cache from now on.
        O(old + this)."""
        if old.watch is not None:
            _report(old.watch, old.pods, self.pods)
        self.watch = old.watch

    def apply_pods(self, m: _Msg) -> None:
        if m.op is Op.SET:
            self._set(m.pods)
            return
        for p in m.pods:
            if m.op is Op.REMOVE:
                self._drop((p.source, p.uid))
            else:
                self._put(p)

    def hold_over(self, old: _Cache, delivered: Set[str]) -> None:
        """Puts in the pods of old whose source is not in delivered (a
        full state being built: it holds none of them), held over."""
        for k, p in old.pods.items():
            if p.source not in delivered:
                self._put(p)
                self.held.add(k)

    def set_keeping_held(self, pods: Iterable[Pod]) -> None:
        """A SET that keeps the held pods it does not carry (of a source
        and uid, the SET's wins)."""
        held = {k: self.pods[k] for k in self.held}
        self._set(list(held.values()) + list(pods))
        self.held = {k for k, p in held.items() if self.pods.get(k) is p}

    def drop_held(self) -> List[_Record]:
        """Takes the held pods out: REMOVE records per source (sorted),
        pods in the daemon's order."""
        gone: DefaultDict[str, List[Pod]] = collections.defaultdict(list)
        for p in self._order:
            if (p.source, p.uid) in self.held:
                gone[p.source].append(p)
        for k in list(self.held):
            self._drop(k)
        return [(Op.REMOVE, src, gone[src]) for src in sorted(gone)]

    def apply_plugin(self, m: _Msg) -> None:
        if m.plugin_op == PluginOp.REGISTERED:
            self.plugins[m.socket] = (m.plugin_json, m.plugin_type,
                                      m.plugin_name)
        elif m.plugin_op == PluginOp.DEREGISTERED:
            self.plugins.pop(m.socket, None)

    def ordered(self) -> List[Pod]:
        return self._order

    def by_uid(self, uid: str) -> Optional[Pod]:
        d = self._by_uid.get(uid)
        if not d:
            return None
        return min(d.values(), key=Pod.key) if len(d) > 1 else \
            next(iter(d.values()))

    def by_name(self, namespace: str, name: str) -> Optional[Pod]:
        d = self._by_name.get((namespace, name))
        if not d:
            return None
        return min(d.values(), key=Pod.key) if len(d) > 1 else \
            next(iter(d.values()))


def _report(watch: _Watch, before: Dict[_Key, Pod],
            after: Dict[_Key, Pod]) -> None:
    """Tells watch each pod that is not the same object in before and
    after."""
    for k, o in before.items():
        n = after.get(k)
        if n is not o:
            watch(o, n)
    for k, n in after.items():
        if k not in before:
            watch(None, n)


def _diff(old: _Cache, new: _Cache) -> Tuple[
        List[_Record], List[Tuple[PluginOp, str, _PluginEntry]]]:
    """The records from old to new: per source (sorted) REMOVE, ADD,
    UPDATE, pods in the daemon's order; then plugins.  Pods are matched by
    source and uid, and compared with _same() (a pod renamed with its uid
    kept is an UPDATE)."""
    ch: DefaultDict[Tuple[str, Op], List[Pod]] = \
        collections.defaultdict(list)
    for k, p in old.pods.items():
        if k not in new.pods:
            ch[(p.source, Op.REMOVE)].append(p)
    for k, p in new.pods.items():
        o = old.pods.get(k)
        if o is None:
            ch[(p.source, Op.ADD)].append(p)
        elif not _same(o.json, p.json):
            ch[(p.source, Op.UPDATE)].append(p)
    recs: List[_Record] = []
    for src in sorted({s for s, _ in ch}):
        for op in (Op.REMOVE, Op.ADD, Op.UPDATE):
            if (src, op) in ch:
                recs.append((op, src, sorted(ch[(src, op)], key=Pod.key)))
    plugins: List[Tuple[PluginOp, str, _PluginEntry]] = []
    for sock in sorted(set(old.plugins) | set(new.plugins)):
        was, now = old.plugins.get(sock), new.plugins.get(sock)
        if now is None and was is not None:
            plugins.append((PluginOp.DEREGISTERED, sock, was))
        elif now is not None and (was is None or was[0] != now[0]):
            plugins.append((PluginOp.REGISTERED, sock, now))
    return recs, plugins


class _Index:
    """One index of Client.add_index(): the pods of each key, and each
    pod's keys (so a pod is taken out without calling fn again).  pods is
    None until the index is built (a built-in one by the first by_index
    that reads it: a client that never reads it pays nothing)."""
    __slots__ = ("fn", "pods", "keys")

    def __init__(self, fn: IndexFunc) -> None:
        self.fn = fn
        self.pods: Optional[Dict[str, Dict[_Key, Pod]]] = None
        self.keys: Dict[_Key, List[str]] = {}

    def build(self, pods: Iterable[Pod]) -> None:
        self.pods, self.keys = {}, {}
        for p in pods:
            self.put(p)

    def put(self, p: Pod) -> None:
        assert self.pods is not None
        keys = list(self.fn(p))
        if not keys:
            return
        k = (p.source, p.uid)
        self.keys[k] = keys
        for key in keys:
            self.pods.setdefault(key, {})[k] = p

    def drop(self, p: Pod) -> None:
        assert self.pods is not None
        k = (p.source, p.uid)
        for key in self.keys.pop(k, ()):
            d = self.pods[key]
            del d[k]
            if not d:
                del self.pods[key]


_ONE_LINE: Final = {c: "?" for c in list(range(0x20)) + [0x7f]}

# Why the client stopped: an Error (fatal), or "stopped" (stop(), close()).
_Stopped = Union[None, Error, Literal["stopped"]]


class Client:
    """A client of the socket at path (default DEFAULT_SOCKET).  Handlers
    are attributes, each called with one argument: on_pods(Update),
    on_synced(resumed), on_sources_ready(list), on_plugin(PluginEvent),
    on_source(SourceState), on_error(Error), on_reconnect(Reconnect),
    on_log(level, line),
    on_line(line).  on_sources_ready is called when the list is first seen
    or changes; pods held over after a daemon restart and not delivered
    again are removed just before it (REMOVE updates, resync=True), list
    changed or not.

    resume_after: a point saved by an earlier run of the program (which
    keeps its state up to it): the first connection resumes after it, and
    the cache then holds only what comes after it (see has_synced).

    A context manager: `with Client(path) as c:` closes the client (and
    its connection) when the block ends."""

    on_pods: Optional[Callable[[Update], None]]
    on_synced: Optional[Callable[[bool], None]]
    on_sources_ready: Optional[Callable[[List[str]], None]]
    on_plugin: Optional[Callable[[PluginEvent], None]]
    on_source: Optional[Callable[[SourceState], None]]
    on_error: Optional[Callable[[Error], None]]
    on_reconnect: Optional[Callable[[Reconnect], None]]
    on_log: Optional[Callable[[LogLevel, str], None]]
    on_line: Optional[Callable[[str], None]]

    def __init__(self, path: Optional[str] = None,
                 resume_after: Optional[int] = None, reconnect: bool = True,
                 max_line: int = DEFAULT_MAX_LINE) -> None:
        self.path = path or DEFAULT_SOCKET
        self.reconnect = reconnect
        self.max_line = max_line
        self.on_pods = self.on_synced = self.on_sources_ready = None
        self.on_plugin = self.on_error = self.on_reconnect = None
        self.on_source = None
        self.on_log = self.on_line = None
        self._cache = _Cache()
        self._point = resume_after
        self._synced_once = False
        # The cache holds only what came after a saved point; cleared by a
        # full state.
        self._partial = resume_after is not None
        self._events: Optional[Deque[Event]] = None  # events()'s queue
        self._handlers: List[object] = []            # add_handler()
        # (source, uid) -> Pod last given to the handlers of
        # add_handler(): built from the cache by the first one, so a
        # client without them pays nothing.
        self._seen: Optional[Dict[_Key, Pod]] = None
        # add_index(): kept in step with the cache through its watch.
        self._indexes: Dict[str, _Index] = {
            INDEX_NAMESPACE: _Index(lambda p: (p.namespace,)),
            INDEX_SOURCE: _Index(lambda p: (p.source,)),
        }
        self._ready: Optional[List[str]] = None
        # The sources not live: source -> (state, said again since the
        # last synced); _confirming until the first message after synced
        # that is not a "source" message.
        self._srcs: Dict[str, Tuple[SourceState, bool]] = {}
        self._confirming = False
        self._sock: Optional[socket.socket] = None
        self._next_attempt = 0.0
        self._backoff = BACKOFF_MIN
        self._attempt = 0
        self._stopped: _Stopped = None    # None while running
        self._stop_requested = False
        self._sel = selectors.DefaultSelector()
        self._reset_conn()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the cache -----------------------------------------------------------
    @property
    def has_synced(self) -> bool:
        """True when the cache is the daemon's whole state: once a
        connection reached synced with a full state, and from then on (a
        resume keeps the cache, a replay adds to it).  After a daemon
        restart, until sources_ready, the cache is the daemon's state plus
        the pods held over from the sources it has not heard from yet,
        each with the text last handed on.  After resume_after=
        a replay does not make it true (the cache holds only the pods the
        replay carried; on_synced(True) says you are up to date); a full
        state does."""
        return self._synced_once and not self._partial

    @property
    def resume_point(self) -> Optional[int]:
        """The number of the last message applied (what resume_after= of
        a later run takes), or None."""
        return self._point

    def __len__(self) -> int:
        return len(self._cache.pods)

    def pods(self) -> List[Pod]:
        """The pods in the daemon's order (namespace, name, uid, source):
        a new list, kept sorted as changes come (no sort here)."""
        return list(self._cache.ordered())

    def __iter__(self) -> Iterator[Pod]:
        return iter(self.pods())

    def pod_by_uid(self, uid: str) -> Optional[Pod]:
        """The pod with this uid (the first in the daemon's order if two
        sources hold it), or None.  O(1)."""
        return self._cache.by_uid(uid)

    def pod_by_name(self, namespace: str, name: str) -> Optional[Pod]:
        """The pod namespace/name (the first in the daemon's order if
        several sources hold one), or None.  O(1)."""
        return self._cache.by_name(namespace, name)

    def plugins(self) -> Dict[str, str]:
        """{socket: plugin object text} of the registered plugins."""
        return {k: v[0] for k, v in self._cache.plugins.items()}

    @property
    def sources_ready(self) -> Optional[List[str]]:
        return list(self._ready) if self._ready is not None else None

    def source_state(self, source: str) -> Tuple[SourceState, bool]:
        """What source serves now, and whether that is not live: (its
        state, True) while the daemon says it serves something else (its
        checkpoint); (a live state, False) when no state was said or
        "live" was said since.  Cost: O(1)."""
        kept = self._srcs.get(source)
        if kept is None:
            return _live(source), False
        return kept[0], True

    # -- loop integration ----------------------------------------------------
    def fileno(self) -> Optional[int]:
        """The current connection's descriptor, or None between
        connections (then timeout() says when to call process())."""
        return self._sock.fileno() if self._sock else None

    def timeout(self) -> Optional[float]:
        """Seconds until process() must run without input; None if none."""
        if self._stopped is not None or self._sock is not None:
            return None
        return max(0.0, self._next_attempt - time.monotonic())

    def stop(self) -> None:
        self._stop_requested = True

    def process(self) -> bool:
        """Connects when due, reads what is there, dispatches it.  Raises
        Error once the client has stopped on a fatal error; returns False
        once stopped with stop() or close(), else True."""
        if self._stop_requested and self._stopped is None:
            self._halt("stopped")
        if self._stopped is None:
            if self._sock is None and \
                    time.monotonic() >= self._next_attempt:
                self._connect()
            if self._sock is not None and self._end is None:
                self._read()
            if self._end is not None:
                self._end_connection()
            if self._stop_requested and self._stopped is None:
                self._halt("stopped")
        if isinstance(self._stopped, Error):
            raise self._stopped
        return self._stopped is None

    def run(self, timeout: Optional[float] = None) -> None:
        """Blocks: processes until timeout seconds (None: no limit) or
        stop().  Raises Error on a fatal one."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.process():
            wait = self.timeout()
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                wait = left if wait is None else min(wait, left)
            if self._sock is not None:
                self._sel.select(wait)
            elif wait:
                time.sleep(wait)

    def events(self, timeout: Optional[float] = None) -> Iterator[Event]:
        """An iterator of events over run(), one per handler call: an
        EventPods (kind "pods", update), EventSynced ("synced", resumed),
        EventSourcesReady ("sources_ready", sources), EventPlugin
        ("plugin", plugin), EventError ("error", error) or EventReconnect
        ("reconnect", reconnect).  The on_* handlers set on the client are
        still called, each before its event is queued."""
        if self._events is not None:
            raise RuntimeError("events() is already running on this client")
        queue: Deque[Event] = collections.deque()
        self._events = queue
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while True:
                while queue:
                    yield queue.popleft()
                left = None if deadline is None else \
                    deadline - time.monotonic()
                if left is not None and left <= 0:
                    return
                try:
                    self.run(min(left, 0.5) if left is not None else 0.5)
                except Error:
                    while queue:
                        yield queue.popleft()
                    raise
                if self._stopped is not None and not queue:
                    return
        finally:
            self._events = None

    def close(self) -> None:
        """Closes the connection and stops the client for good (process()
        returns False from then on).  Idempotent."""
        self._close()
        if self._stopped is None:
            self._stopped = "stopped"
        self._sel.close()

    # -- internals -----------------------------------------------------------
    def _log(self, level: LogLevel, text: str) -> None:
        if self.on_log:
            self.on_log(level, text)

    def _tell_pods(self, u: Update) -> None:
        """Hands one Update to on_pods, events() and the handlers of
        add_handler() (whose map follows it even when stopping)."""
        if not self._stop_requested:
            if self.on_pods:
                self.on_pods(u)
            if self._events is not None:
                self._events.append(EventPods(u))
        if self._seen is not None:
            self._follow(u)

    def _tell(self, ev: Event) -> None:
        """Hands one event of another kind to its handler (on_<kind>) and
        to events(); once stop() was called, only errors and reconnects."""
        if isinstance(ev, EventPods):
            self._tell_pods(ev.update)
            return
        if isinstance(ev, EventError):
            if self.on_error:
                self.on_error(ev.error)
        elif isinstance(ev, EventReconnect):
            if self.on_reconnect:
                self.on_reconnect(ev.reconnect)
        elif self._stop_requested:
            return
        elif isinstance(ev, EventSynced):
            if self.on_synced:
                self.on_synced(ev.resumed)
        elif isinstance(ev, EventSourcesReady):
            if self.on_sources_ready:
                self.on_sources_ready(list(ev.sources))
        elif isinstance(ev, EventSource):
            if self.on_source:
                self.on_source(ev.state)
        elif self.on_plugin:
            self.on_plugin(ev.plugin)
        if self._events is not None:
            self._events.append(ev)

    # -- informer-style handlers ---------------------------------------------
    def add_handler(self, handler: object) -> None:
        """Adds an informer-style handler (client-go's event handler): an
        object with any of on_add(pod, initial), on_update(old, new) and
        on_delete(old).  Any number per client; each is called for every
        change, in the order the handlers were added, after on_pods, once
        the cache holds the change.  A handler added when the cache holds
        pods is first given each of them, in the cache's order, as
        on_add(pod, initial=True) (client-go's isInInitialList).  Not from
        a handler of the same client.

        The ops of an Update map, pod by pod (a pod is its source and uid):
        ADD is on_add(pod, False), or on_update(old, pod) if the handlers
        were given that pod already; UPDATE, RECONCILE and DELETE are
        on_update(old, pod), old being the pod last given (a graceful
        DELETE is an update that sets deletionTimestamp), or on_add(pod,
        False) for a pod not given yet; REMOVE is on_delete(old), nothing
        for a pod not given.  A SET (snapshot modes, and the SET of source
        "*" after resume_after) is diffed against the pods given, matched
        by source and uid: on_delete for each pod it lacks, in the cache's
        order, then for each of its pods in order on_add, or on_update
        when the texts differ by the rule of "Which pods changed"
        (doc/protocol.md), or nothing.  The updates computed after a full
        state and for held-over pods map the same way.  Cost: O(pods in
        the update), a SET O(cache)."""
        seen = self._ensure_seen()
        self._handlers.append(handler)
        fn = getattr(handler, "on_add", None)
        if fn:
            for p in self._cache.ordered():
                if self._stop_requested:
                    break
                fn(seen.get(p.source_uid(), p), True)

    def _call(self, name: str, *args: Any) -> None:
        for h in self._handlers:
            if self._stop_requested:
                return
            fn = getattr(h, name, None)
            if fn:
                fn(*args)

    def add_index(self, name: str, fn: IndexFunc) -> None:
        """Adds an index (client-go's AddIndexers): fn(pod) gives a pod's
        keys, zero or more (an iterable of str).  Built from the cache at
        once, then kept in step with it inside each apply, pod by pod,
        before on_pods and the handlers of add_handler() are called: a
        handler that reads an index sees the state after its change.
        Cost: O(changed pods x their keys) per update.  The built-in ones
        are INDEX_NAMESPACE and INDEX_SOURCE (built by the first by_index()
        that reads them).  ValueError if the name is taken."""
        if name in self._indexes:
            raise ValueError("podmux: index %r: already added" % name)
        x = _Index(fn)
        x.build(self._cache.ordered())
        self._indexes[name] = x
        self._cache.watch = self._index_watch

    def by_index(self, name: str, key: str) -> List[Pod]:
        """The pods of the cache whose keys in the index name include key,
        in the daemon's order (namespace, name, uid, source): a new list;
        the pods are those pods() holds (after a daemon restart, say, each
        with the new run's text even when nothing was handed on for it),
        as the Go package's ByIndex gives them.  KeyError if no such index
        was added.  Cost: O(k log k) for k pods found; the first read of a
        built-in index builds it, O(cache)."""
        x = self._indexes.get(name)
        if x is None:
            raise KeyError("podmux: no index %r" % name)
        if x.pods is None:
            x.build(self._cache.ordered())
            self._cache.watch = self._index_watch
            assert x.pods is not None
        return sorted(x.pods.get(key, {}).values(), key=Pod.key)

    def _index_watch(self, old: Optional[Pod], new: Optional[Pod]) -> None:
        """The cache's watch: each built index follows one pod."""
        for x in self._indexes.values():
            if x.pods is None:
                continue
            if old is not None:
                x.drop(old)
            if new is not None:
                x.put(new)

    def _ensure_seen(self) -> Dict[_Key, Pod]:
        if self._seen is None:
            self._seen = {p.source_uid(): p for p in self._cache.ordered()}
        return self._seen

    def _upsert(self, seen: Dict[_Key, Pod], p: Pod, quiet: bool) -> None:
        k = p.source_uid()
        old = seen.get(k)
        if old is p:
            return  # given already (the map was built after the cache took it)
        seen[k] = p
        if old is None:
            self._call("on_add", p, False)
        elif not quiet or not _same(old.json, p.json):
            self._call("on_update", old, p)

    def _follow(self, u: Update) -> None:
        """Turns one Update into the handlers' calls."""
        seen = self._ensure_seen()
        if u.op is Op.SET:
            now = {p.source_uid() for p in u.pods}
            gone = sorted((p for k, p in seen.items() if k not in now),
                          key=Pod.key)
            for p in gone:
                del seen[p.source_uid()]
                self._call("on_delete", p)
            for p in u.pods:
                self._upsert(seen, p, True)
            return
        for p in u.pods:
            if u.op is not Op.REMOVE:
                self._upsert(seen, p, False)
                continue
            old = seen.pop(p.source_uid(), None)
            if old is not None:
                self._call("on_delete", old)

    def _reset_conn(self) -> None:
        self._buf = bytearray()
        self._scan = 0            # no newline in _buf before this
        self._hello = False
        self._live = False
        self._held: List[_Msg] = []
        self._end: Optional[Tuple[ErrorKind, int, str, Optional[str]]] = None

    def _close(self) -> None:
        if self._sock is not None:
            try:
                self._sel.unregister(self._sock)
            except (KeyError, ValueError):
                pass
            self._sock.close()
        self._sock = None
        self._reset_conn()

    def _halt(self, why: Union[Error, Literal["stopped"]]) -> None:
        self._close()
        self._stopped = why

    def _set_end(self, kind: ErrorKind, err: int, message: str,
                 reason: Optional[str] = None) -> None:
        if self._end is None:
            # One line whatever went into it (the daemon's own message, the
            # path): control characters become "?".
            message = message.translate(_ONE_LINE)
            self._end = (kind, err, message, reason)

    def _end_connection(self) -> None:
        assert self._end is not None
        kind, err, message, reason = self._end
        fatal = (not self.reconnect or kind in (PERMISSION, PROTOCOL_MISMATCH)
                 or (kind is SERVER and reason == _w.REASON_BAD_REQUEST))
        self._close()
        e = Error(kind, err, message, reason, fatal)
        self._log("warning" if not fatal else "error", message)
        self._tell(EventError(e))
        if fatal:
            self._halt(e)
            return
        if self._stop_requested:
            self._halt("stopped")
            return
        self._attempt += 1
        rc = Reconnect(self._backoff, self._attempt, self._point is not None,
                       self._point)
        self._next_attempt = time.monotonic() + self._backoff
        self._backoff = min(self._backoff * 2, BACKOFF_MAX)
        self._tell(EventReconnect(rc))

    def _connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(self.path)
        except OSError as e:
            s.close()
            if e.errno in (errno.EACCES, errno.EPERM):
                self._set_end(PERMISSION, e.errno,
                              'cannot connect to "%s": %s (the socket\'s mode '
                              "and group decide who may read the stream)" % (
                                  self.path, e.strerror))
            else:
                self._set_end(CONNECT, e.errno or errno.EIO,
                              'cannot connect to "%s": %s (is podmux run '
                              "serving this path?)" % (self.path,
                                                       e.strerror or e))
            return
        self._sock = s
        self._reset_conn()
        first = "{}" if self._point is None else \
            json.dumps({"resume_after": self._point})
        try:
            s.sendall(first.encode() + b"\n")
        except OSError:
            pass  # the daemon may have said why; reading tells
        s.setblocking(False)
        self._sel.register(s, selectors.EVENT_READ)

    def _read(self) -> None:
        """Reads what is there (up to READ_BUDGET) and dispatches each whole
        line.  Linear in what arrives: new bytes are appended in place and
        only they are searched for a newline; a line is copied once."""
        total = 0
        while total < READ_BUDGET and self._end is None and \
                not self._stop_requested and self._sock is not None:
            try:
                data = self._sock.recv(1 << 18)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                self._set_end(CLOSED, e.errno or errno.EIO,
                              'the connection to "%s" failed: %s' % (
                                  self.path, e))
                return
            if not data:
                if self._buf:
                    self._log("info", "dropped a partial line of %d bytes: "
                              'the connection to "%s" was cut inside a '
                              "message" % (len(self._buf), self.path))
                self._set_end(CLOSED, errno.ECONNRESET,
                              '"%s" closed the connection' % self.path)
                return
            total += len(data)
            self._buf.extend(data)
            self._dispatch()

    def _dispatch(self) -> None:
        buf, start = self._buf, 0
        try:
            while self._end is None and not self._stop_requested:
                nl = buf.find(b"\n", self._scan)
                if nl < 0:
                    self._scan = len(buf)
                    break
                self._scan = nl + 1
                if nl - start > self.max_line:
                    self._too_long()
                    return
                line, start = buf[start:nl], nl + 1
                self._line(line)
        finally:
            if buf is self._buf:  # not replaced by a close() in a handler
                del buf[:start]   # O(1) amortized at a bytearray's front
                self._scan -= start
        if self._end is None and buf is self._buf and \
                len(buf) > self.max_line:
            self._too_long()

    def _too_long(self) -> None:
        self._set_end(BAD_MESSAGE, errno.EMSGSIZE,
                      '"%s" sent a line longer than %d bytes' % (
                          self.path, self.max_line))

    def _bad(self, what: str) -> None:
        self._set_end(BAD_MESSAGE, errno.EBADMSG,
                      '"%s" sent a line that is not a protocol %d message '
                      "(%s)" % (self.path, PROTOCOL, what))

    def _line(self, raw: bytearray) -> None:
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            self._bad("not UTF-8")
            return
        if self.on_line:
            self.on_line(line)
        try:
            m = _parse(line)
        except _Bad as e:
            self._bad(str(e))
            return
        except MemoryError:
            self._set_end(NOMEM, errno.ENOMEM, "out of memory reading a "
                          'message from "%s"; resynchronizing' % self.path)
            return
        if m.type == "hello" and m.protocol != PROTOCOL:
            self._set_end(PROTOCOL_MISMATCH, errno.EPROTONOSUPPORT,
                          '"%s" speaks protocol %s; this module speaks '
                          "protocol %d" % (self.path, m.protocol, PROTOCOL))
            return
        if m.type == "error":
            kind, err = _SERVER_ERRORS.get(m.reason, _OTHER_ERROR)
            self._set_end(kind, err, '"%s" closed the connection: %s: %s' % (
                self.path, m.reason, m.message), m.reason)
        elif not self._hello:
            if m.type != "hello":
                self._bad("a message before its hello")
            else:
                self._hello = True
        elif m.type == "hello":
            self._bad("a second hello")
        elif not self._live:
            if m.type == "synced":
                self._synced(m)
            elif m.type in ("pods", "plugin", "sources_ready", "source"):
                self._held.append(m)
        elif self._point is not None and m.seq <= self._point:
            self._bad("message %d after %d (numbers must grow)" % (
                m.seq, self._point))
        else:
            if self._confirming and m.type != "source":
                self._confirm_end()
            self._apply(m)

    def _apply(self, m: _Msg) -> bool:
        told: List[Update] = []
        try:
            if m.type == "pods" and self._cache.held:
                told = self._apply_held(m)
            elif m.type == "pods":
                self._cache.apply_pods(m)
                told = [Update(m.op, m.source, tuple(m.pods), m.seq, False)]
            elif m.type == "plugin":
                self._cache.apply_plugin(m)
            elif m.type == "sources_ready" and self._cache.held:
                self._log("info", 'sources ready on "%s": %d pods held over '
                          "since the last full state were not delivered "
                          "again: removed" % (self.path,
                                              len(self._cache.held)))
                told = [Update(op, src, tuple(pods), 0, True)
                        for op, src, pods in self._cache.drop_held()]
        except MemoryError:
            self._set_end(NOMEM, errno.ENOMEM, "out of memory applying "
                          "message %d; resynchronizing" % m.seq)
            return False
        self._point = m.seq
        for u in told:
            self._tell_pods(u)
        if m.type == "plugin":
            self._tell(EventPlugin(PluginEvent(
                m.plugin_op, m.socket, m.plugin_type, m.plugin_name,
                m.plugin_json, m.error, m.seq, False)))
        elif m.type == "sources_ready":
            self._set_ready(m.sources)
        elif m.type == "source":
            self._apply_source(m)
        return True

    def _apply_source(self, m: _Msg) -> None:
        """A "source" message: the state kept (dropped for "live"), told
        when it changed."""
        kept = self._srcs.get(m.source)
        if kept is not None and kept[0].state == m.state and \
                kept[0].checkpoint_time == m.cp_time and \
                kept[0].checkpoint_resource_version == m.cp_rv:
            self._srcs[m.source] = (kept[0], True)   # said again
        elif m.state == _w.SERVING_LIVE:
            if kept is not None:
                del self._srcs[m.source]
                self._tell_source(_live(m.source, m.seq))
        else:
            serving = Serving.CHECKPOINT \
                if m.state == _w.SERVING_CHECKPOINT \
                else Serving.UNKNOWN
            st = SourceState(m.source, serving, m.state, m.cp_time, m.cp_rv,
                             m.seq, False)
            self._srcs[m.source] = (st, True)
            self._tell_source(st)

    def _confirm_end(self) -> None:
        """The first message after synced that is not a "source" message:
        a state not said again is live now (told, resync)."""
        self._confirming = False
        for name, (st, said) in list(self._srcs.items()):
            if not said:
                del self._srcs[name]
                self._tell_source(_live(name, 0, True))

    def _tell_source(self, st: SourceState) -> None:
        self._log("info", 'source %s on "%s": %s%s%s%s' % (
            st.source, self.path, st.state,
            " of " + st.checkpoint_time if st.checkpoint_time else "",
            " at resourceVersion " + st.checkpoint_resource_version
            if st.checkpoint_resource_version else "",
            " (not said again after synced)" if st.resync else ""))
        self._tell(EventSource(st))

    def _apply_held(self, m: _Msg) -> List[Update]:
        """A pods message while pods are held over (doc/protocol.md, "A
        restarted daemon's late sources"): an ADD that carries a held pod
        again ends its hold-over, and the pod is told only if it changed,
        in an UPDATE (resync) after the ADD, which goes on with the other
        pods; a SET keeps the held pods it does not carry and is told with
        the whole cache; other ops as live.  Returns the updates to tell."""
        cache = self._cache
        if m.op is Op.SET:
            cache.set_keeping_held(m.pods)
            return [Update(Op.SET, m.source, tuple(cache.ordered()), m.seq,
                           False)]
        if m.op is not Op.ADD:
            cache.apply_pods(m)
            return [Update(m.op, m.source, tuple(m.pods), m.seq, False)]
        keep, changed = [], []
        for p in m.pods:
            k = (p.source, p.uid)
            if k not in cache.held:
                keep.append(p)
            elif not _same(cache.pods[k].json, p.json):
                changed.append(p)
        cache.apply_pods(m)
        told = [Update(Op.ADD, m.source, tuple(keep), m.seq, False)]
        if changed:
            told.append(Update(Op.UPDATE, m.source, tuple(changed), 0, True))
        return told

    def _set_ready(self, sources: List[str]) -> None:
        if sources != self._ready:
            self._ready = list(sources)
            self._tell(EventSourcesReady(tuple(sources)))

    def _synced(self, m: _Msg) -> None:
        if m.resumed:
            if self._point is None:
                self._bad("a replay to a client that did not ask to resume")
                return
            for h in self._held:
                if h.seq <= self._point:
                    self._bad("replayed message %d, not after %d" % (
                        h.seq, self._point))
                    return
                if not self._apply(h):
                    return
        else:
            self._full_state()
        self._point = m.seq
        self._held = []
        # The daemon says again, right after synced, every state that is
        # not live.
        self._srcs = {k: (v[0], False) for k, v in self._srcs.items()}
        self._confirming = bool(self._srcs)
        self._live = True
        self._synced_once = True
        self._backoff = BACKOFF_MIN
        self._attempt = 0
        self._tell(EventSynced(m.resumed))

    def _full_state(self) -> None:
        """The held messages are the whole state: they replace the cache,
        and the difference is told (or, after resume_after=, the state
        whole: what went away before that point is not known here)."""
        fresh = _Cache()
        ready: Optional[List[str]] = None
        for h in self._held:
            if h.type == "pods":
                fresh.apply_pods(h)
            elif h.type == "plugin":
                fresh.apply_plugin(h)
            elif h.type == "sources_ready":
                ready = h.sources
        if not self._partial and self._cache.pods and ready is None:
            # The sources this state has not heard from keep their pods
            # until they deliver or sources_ready (doc/protocol.md, "A
            # restarted daemon's late sources").
            delivered = {h.source for h in self._held if h.type == "pods"}
            delivered |= {p.source for p in fresh.pods.values()}
            fresh.hold_over(self._cache, delivered)
        plugs: List[Tuple[PluginOp, str, _PluginEntry]]
        if self._partial:
            recs: List[_Record] = [(Op.SET, "*", list(fresh.ordered()))]
            plugs = [(PluginOp.REGISTERED, sock, fresh.plugins[sock])
                     for sock in sorted(fresh.plugins)]
            resync = True
        else:
            recs, plugs = _diff(self._cache, fresh)
            resync = self._synced_once
        fresh.take_over(self._cache)
        self._cache = fresh
        self._partial = False
        if ready is not None:
            self._set_ready(ready)
        for op, src, pods in recs:
            self._tell_pods(Update(op, src, tuple(pods), 0, resync))
        for pop, sock, (text, typ, name) in plugs:
            self._tell(EventPlugin(PluginEvent(pop, sock, typ, name, text,
                                               None, 0, resync)))
