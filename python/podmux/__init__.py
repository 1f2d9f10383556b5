"""podmux — a consumer of podmux's update stream (protocol 1, see
doc/protocol.md in the podmux repository), standard library only.

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
    c = podmux.Client("/run/podmux/podmux.sock")
    for ev in c.events():
        if ev.kind == "pods":
            for p in ev.update.pods:
                print(ev.update.op, p.namespace, p.name)

A client is used by one thread at a time.  It never logs by itself: log
lines go to on_log if set.
"""

import bisect
import collections
import errno
import json
import re
import selectors
import socket
import time

__all__ = ["Client", "Pod", "Update", "PluginEvent", "Error", "Reconnect",
           "Event", "PROTOCOL", "DEFAULT_SOCKET", "OPS"]

PROTOCOL = 1
DEFAULT_SOCKET = "/run/podmux/podmux.sock"
OPS = ("SET", "ADD", "UPDATE", "DELETE", "REMOVE", "RECONCILE")
BACKOFF_MIN = 0.1
BACKOFF_MAX = 5.0
DEFAULT_MAX_LINE = 256 * 1024 * 1024
READ_BUDGET = 4 * 1024 * 1024
SOURCE_ANNOTATION = "kubernetes.io/config.source"

# Error kinds, as in the C library.
CONNECT, PERMISSION, PROTOCOL_MISMATCH, SERVER, CLOSED, BAD_MESSAGE, NOMEM = (
    "connect", "permission", "protocol", "server", "closed", "bad_message",
    "nomem")

_SERVER_ERRORS = {
    "Forbidden": (PERMISSION, errno.EACCES),
    "SlowConsumer": (SERVER, errno.ENOBUFS),
    "ResourceExhausted": (SERVER, errno.ENOMEM),
    "TooManyConsumers": (SERVER, errno.EUSERS),
    "ShuttingDown": (SERVER, errno.ESHUTDOWN),
    "BadRequest": (SERVER, errno.EINVAL),
}


class Pod:
    """One pod: its JSON text exactly as the daemon sent it, its identity,
    and the decoded object on demand (obj())."""
    __slots__ = ("json", "uid", "namespace", "name", "source")

    def __init__(self, text, uid, namespace, name, source):
        self.json = text
        self.uid = uid
        self.namespace = namespace
        self.name = name
        self.source = source

    def obj(self):
        return json.loads(self.json)

    def key(self):
        return (self.namespace, self.name, self.uid, self.source)

    def source_uid(self):
        """What identifies the pod: (source, uid)."""
        return (self.source, self.uid)

    def __repr__(self):
        return "Pod(%s %s/%s %s)" % (self.source, self.namespace, self.name,
                                     self.uid)


Update = collections.namedtuple("Update", "op source pods seq resync")

# The built-in indexes of Client.by_index().
INDEX_NAMESPACE = "namespace"
INDEX_SOURCE = "source"
PluginEvent = collections.namedtuple(
    "PluginEvent", "op socket type name plugin_json error seq resync")
Reconnect = collections.namedtuple("Reconnect",
                                   "delay attempt resume resume_after")
Event = collections.namedtuple("Event", "kind update resumed sources plugin "
                               "error reconnect")


class Error(Exception):
    """What went wrong: kind (CONNECT, PERMISSION, PROTOCOL_MISMATCH,
    SERVER, CLOSED, BAD_MESSAGE, NOMEM), err (an errno value), reason (the
    daemon's, for SERVER), message (one line naming the socket), fatal (the
    client has stopped)."""

    def __init__(self, kind, err, message, reason=None, fatal=False):
        super().__init__(message)
        self.kind = kind
        self.err = err
        self.reason = reason
        self.message = message
        self.fatal = fatal


class _Bad(Exception):
    pass


class _Msg:
    __slots__ = ("type", "seq", "protocol", "op", "source", "pods",
                 "resumed", "sources", "plugin_op", "plugin_json", "socket",
                 "plugin_type", "plugin_name", "error", "reason", "message")

    def __init__(self):
        for k in self.__slots__:
            setattr(self, k, None)


def _no_constant(name):
    raise ValueError("%s is not JSON" % name)


_DEC = json.JSONDecoder(parse_constant=_no_constant)
_WS = " \t\r\n"


# ---- the resync comparison (doc/protocol.md, "Which pods changed") ---------

class _Num:
    """A JSON number as written: 1 and 1.0 differ, as in the C library and
    the rule the protocol states."""
    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text

    def __eq__(self, other):
        return type(other) is _Num and other.text == self.text

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(self.text)


_CMP_DEC = json.JSONDecoder(parse_int=_Num, parse_float=_Num,
                            parse_constant=_no_constant)
# What a run of the daemon writes or keeps on its own, left out.
_LOCAL_ANNOTATIONS = ("kubernetes.io/config.source",
                      "kubernetes.io/config.seen",
                      "kubernetes.io/config.mirror")
_COMPARED_META = ("labels", "annotations", "deletionTimestamp",
                  "deletionGracePeriodSeconds")
_COMPARED_TOP = ("spec", "status")
_ABSENT = object()


def _compared(text):
    """The parts of a pod's text the resync diff compares, as values: its
    name and namespace as the pod's identity reads them (a namespace that is
    missing or not a string is ""), then the members."""
    obj = _CMP_DEC.decode(text)
    top = obj if isinstance(obj, dict) else {}
    md = top.get("metadata")
    md = md if isinstance(md, dict) else {}
    name, ns = md.get("name"), md.get("namespace")
    parts = [name if isinstance(name, str) else None,
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
_SEEN_KEY = "kubernetes.io/config.seen"


def _seen_span(text):
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


def _same_but_seen(a, b):
    sa, sb = _seen_span(a), _seen_span(b)
    return sa is not None and sb is not None and sa[0] == sb[0] and \
        a[:sa[0]] == b[:sb[0]] and a[sa[1]:] == b[sb[1]:]


def _same(a, b):
    """Whether two texts of one pod (same source and UID) are the same for
    the resync diff: equal, or the same name and namespace and equal in
    every member the merger compares.  Cost: a comparison of the texts when they are equal
    or differ only in config.seen as the daemon writes it (what a restart
    gives every unchanged pod); else both decoded."""
    return a == b or _same_but_seen(a, b) or _compared(a) == _compared(b)


def _skip(s, i):
    while i < len(s) and s[i] in _WS:
        i += 1
    return i


def _value(s, i):
    try:
        return _DEC.raw_decode(s, i)
    except ValueError as e:
        raise _Bad("byte %d: %s" % (i, e)) from None


def _pod(text, obj, msg_source):
    md = obj.get("metadata") if isinstance(obj, dict) else None
    md = md if isinstance(md, dict) else {}
    uid, name, ns = md.get("uid"), md.get("name"), md.get("namespace", "")
    if not isinstance(uid, str) or not uid or not isinstance(name, str):
        raise _Bad("a pod without metadata.uid and metadata.name")
    ann = md.get("annotations")
    src = ann.get(SOURCE_ANNOTATION) if isinstance(ann, dict) else None
    return Pod(text, uid, ns if isinstance(ns, str) else "", name,
               src if isinstance(src, str) else "")


def _parse(line):
    """One line into a _Msg; each pod keeps its exact text (the walk steps
    over members itself and decodes each value with raw_decode)."""
    s = line
    i = _skip(s, 0)
    if i >= len(s) or s[i] != "{":
        raise _Bad("a line that is not a JSON object")
    i = _skip(s, i + 1)
    members, pods, plugin = {}, None, None
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
                pods = []
                if i >= len(s) or s[i] != "[":
                    raise _Bad("pods is not an array")
                i = _skip(s, i + 1)
                if i < len(s) and s[i] == "]":
                    i += 1
                else:
                    while True:
                        i = _skip(s, i)
                        start = i
                        obj, i = _value(s, i)
                        pods.append((s[start:i], obj))
                        i = _skip(s, i)
                        if i < len(s) and s[i] == "]":
                            i += 1
                            break
                        if i >= len(s) or s[i] != ",":
                            raise _Bad("expected ',' or ']' in pods")
                        i += 1
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
    m = _Msg()
    m.type = members.get("type")
    if not isinstance(m.type, str):
        raise _Bad('a message without a string "type"')

    def want(key, required=True, kind=str):
        v = members.get(key)
        if v is None and key not in members and not required:
            return None
        if not isinstance(v, kind) or isinstance(v, bool) != (kind is bool):
            raise _Bad('"%s" is missing or of the wrong type' % key)
        return v

    if m.type == "hello":
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
    if m.type == "pods":
        m.op = want("op")
        if m.op not in OPS:
            raise _Bad('unknown op "%s"' % m.op)
        m.source = want("source")
        if pods is None:
            raise _Bad("a pods message without pods")
        m.pods = []
        for text, obj in pods:
            p = _pod(text, obj, m.source)
            if not ((m.op == "SET" or m.source == "*") and p.source):
                p.source = m.source
            m.pods.append(p)
    elif m.type == "synced":
        r = members.get("resumed", False)
        if not isinstance(r, bool):
            raise _Bad('"resumed" is not a boolean')
        m.resumed = r
    elif m.type == "sources_ready":
        srcs = members.get("sources")
        if not isinstance(srcs, list) or \
                not all(isinstance(x, str) for x in srcs):
            raise _Bad('"sources" is not an array of names')
        m.sources = list(srcs)
    elif m.type == "plugin":
        if plugin is None:
            raise _Bad('a plugin message without "plugin"')
        m.plugin_op = want("op")
        m.error = want("error", required=False)
        m.plugin_json, obj = plugin
        m.socket = obj["socket"]
        m.plugin_type = obj.get("type") if isinstance(obj.get("type"),
                                                      str) else ""
        m.plugin_name = obj.get("name") if isinstance(obj.get("name"),
                                                      str) else ""
    elif m.type == "error":
        m.reason = want("reason")
        m.message = want("message", required=False) or ""
    return m


class _Cache:
    """Pods by (source, uid), with what C's cache has: the pods in the
    daemon's order (a sorted list: an insert or removal is a search and a
    memmove), and indexes by uid and by (namespace, name).

    Every pod that changes is reported to watch (when set) as (old, new),
    None for an added or a removed pod, as it changes: the client's
    indexes follow the cache inside each apply (go/store.go does the
    same)."""

    def __init__(self):
        self.pods = {}       # (source, uid) -> Pod
        self.watch = None    # fn(old, new)
        self.held = set()    # (source, uid) of the pods held over
        self.plugins = {}    # socket -> (plugin_json, type, name)
        self._keys = []      # Pod.key() of each pod, sorted
        self._order = []     # the pods in that order
        self._by_uid = {}    # uid -> {source: Pod}
        self._by_name = {}   # (namespace, name) -> {(source, uid): Pod}

    def _index(self, p):
        self._by_uid.setdefault(p.uid, {})[p.source] = p
        self._by_name.setdefault((p.namespace, p.name), {})[
            (p.source, p.uid)] = p

    def _unindex(self, p):
        d = self._by_uid[p.uid]
        del d[p.source]
        if not d:
            del self._by_uid[p.uid]
        d = self._by_name[(p.namespace, p.name)]
        del d[(p.source, p.uid)]
        if not d:
            del self._by_name[(p.namespace, p.name)]
        i = bisect.bisect_left(self._keys, p.key())
        del self._keys[i]
        del self._order[i]

    def _put(self, p):
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

    def _drop(self, k):
        self.held.discard(k)
        old = self.pods.pop(k, None)
        if old is not None:
            self._unindex(old)
            if self.watch is not None:
                self.watch(old, None)

    def _set(self, pods):
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

    def take_over(self, old):
        """Takes the place of old (a full state built beside it): old's
        watch is told the difference and watches this cache from now on.
        O(old + this)."""
        if old.watch is not None:
            _report(old.watch, old.pods, self.pods)
        self.watch = old.watch

    def apply_pods(self, m):
        if m.op == "SET":
            self._set(m.pods)
            return
        for p in m.pods:
            if m.op == "REMOVE":
                self._drop((p.source, p.uid))
            else:
                self._put(p)

    def hold_over(self, old, delivered):
        """Puts in the pods of old whose source is not in delivered (a
        full state being built: it holds none of them), held over."""
        for k, p in old.pods.items():
            if p.source not in delivered:
                self._put(p)
                self.held.add(k)

    def set_keeping_held(self, pods):
        """A SET that keeps the held pods it does not carry (of a source
        and uid, the SET's wins)."""
        held = {k: self.pods[k] for k in self.held}
        self._set(list(held.values()) + list(pods))
        self.held = {k for k, p in held.items() if self.pods.get(k) is p}

    def drop_held(self):
        """Takes the held pods out: REMOVE records per source (sorted),
        pods in the daemon's order."""
        gone = collections.defaultdict(list)
        for p in self._order:
            if (p.source, p.uid) in self.held:
                gone[p.source].append(p)
        for k in list(self.held):
            self._drop(k)
        return [("REMOVE", src, gone[src]) for src in sorted(gone)]

    def apply_plugin(self, m):
        if m.plugin_op == "REGISTERED":
            self.plugins[m.socket] = (m.plugin_json, m.plugin_type,
                                      m.plugin_name)
        elif m.plugin_op == "DEREGISTERED":
            self.plugins.pop(m.socket, None)

    def ordered(self):
        return self._order

    def by_uid(self, uid):
        d = self._by_uid.get(uid)
        if not d:
            return None
        return min(d.values(), key=Pod.key) if len(d) > 1 else \
            next(iter(d.values()))

    def by_name(self, namespace, name):
        d = self._by_name.get((namespace, name))
        if not d:
            return None
        return min(d.values(), key=Pod.key) if len(d) > 1 else \
            next(iter(d.values()))


def _report(watch, before, after):
    """Tells watch each pod that is not the same object in before and
    after."""
    for k, o in before.items():
        n = after.get(k)
        if n is not o:
            watch(o, n)
    for k, n in after.items():
        if k not in before:
            watch(None, n)


class _Index:
    """One index of Client.add_index(): the pods of each key, and each
    pod's keys (so a pod is taken out without calling fn again).  pods is
    None until the index is built (a built-in one by the first by_index
    that reads it: a client that never reads it pays nothing)."""
    __slots__ = ("fn", "pods", "keys")

    def __init__(self, fn):
        self.fn = fn
        self.pods = None     # key -> {(source, uid): Pod}
        self.keys = {}       # (source, uid) -> keys

    def build(self, pods):
        self.pods, self.keys = {}, {}
        for p in pods:
            self.put(p)

    def put(self, p):
        keys = list(self.fn(p))
        if not keys:
            return
        k = (p.source, p.uid)
        self.keys[k] = keys
        for key in keys:
            self.pods.setdefault(key, {})[k] = p

    def drop(self, p):
        k = (p.source, p.uid)
        for key in self.keys.pop(k, ()):
            d = self.pods[key]
            del d[k]
            if not d:
                del self.pods[key]


def _diff(old, new):
    """The records from old to new: per source (sorted) REMOVE, ADD,
    UPDATE, pods in the daemon's order; then plugins.  Pods are matched by
    source and uid, and compared with _same() (a pod renamed with its uid
    kept is an UPDATE)."""
    ch = collections.defaultdict(list)
    for k, p in old.pods.items():
        if k not in new.pods:
            ch[(p.source, "REMOVE")].append(p)
    for k, p in new.pods.items():
        o = old.pods.get(k)
        if o is None:
            ch[(p.source, "ADD")].append(p)
        elif not _same(o.json, p.json):
            ch[(p.source, "UPDATE")].append(p)
    recs = []
    for src in sorted({s for s, _ in ch}):
        for op in ("REMOVE", "ADD", "UPDATE"):
            if (src, op) in ch:
                recs.append((op, src, sorted(ch[(src, op)],
                                             key=Pod.key)))
    plugins = []
    for sock in sorted(set(old.plugins) | set(new.plugins)):
        o, n = old.plugins.get(sock), new.plugins.get(sock)
        if n is None:
            plugins.append(("DEREGISTERED", sock, o))
        elif o is None or o[0] != n[0]:
            plugins.append(("REGISTERED", sock, n))
    return recs, plugins


_ONE_LINE = {c: "?" for c in list(range(0x20)) + [0x7f]}

# Event's member for each kind of event (the handler is on_<kind>).
_EVENT_FIELD = {"pods": "update", "synced": "resumed",
                "sources_ready": "sources", "plugin": "plugin",
                "error": "error", "reconnect": "reconnect"}
_NO_EVENT = dict.fromkeys(_EVENT_FIELD.values())


class Client:
    """A client of the socket at path.  Handlers are attributes, each
    called with one argument: on_pods(Update), on_synced(resumed),
    on_sources_ready(list), on_plugin(PluginEvent), on_error(Error),
    on_reconnect(Reconnect), on_log(level, line), on_line(line).
    on_sources_ready is called when the list is first seen or changes;
    pods held over after a daemon restart and not delivered again are
    removed just before it (REMOVE updates, resync=True), list changed or
    not.

    resume_after: a point saved by an earlier run of the program (which
    keeps its state up to it): the first connection resumes after it, and
    the cache then holds only what comes after it (see has_synced)."""

    def __init__(self, path=None, resume_after=None, reconnect=True,
                 max_line=DEFAULT_MAX_LINE):
        self.path = path or DEFAULT_SOCKET
        self.reconnect = reconnect
        self.max_line = max_line
        self.on_pods = self.on_synced = self.on_sources_ready = None
        self.on_plugin = self.on_error = self.on_reconnect = None
        self.on_log = self.on_line = None
        self._cache = _Cache()
        self._point = resume_after
        self._synced_once = False
        # The cache holds only what came after a saved point; cleared by a
        # full state.
        self._partial = resume_after is not None
        self._events = None       # events()'s queue while it runs
        self._handlers = []       # add_handler()
        # (source, uid) -> Pod last given to the handlers of
        # add_handler(): built from the cache by the first one, so a
        # client without them pays nothing.
        self._seen = None
        # add_index(): kept in step with the cache through its watch.
        self._indexes = {
            INDEX_NAMESPACE: _Index(lambda p: (p.namespace,)),
            INDEX_SOURCE: _Index(lambda p: (p.source,)),
        }
        self._ready = None
        self._sock = None
        self._next_attempt = 0.0
        self._backoff = BACKOFF_MIN
        self._attempt = 0
        self._stopped = None      # None while running, else the Error or
        self._stop_requested = False  # "stopped"
        self._sel = selectors.DefaultSelector()
        self._reset_conn()

    # -- the cache -----------------------------------------------------------
    @property
    def has_synced(self):
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
    def resume_point(self):
        return self._point

    def __len__(self):
        return len(self._cache.pods)

    def pods(self):
        """The pods in the daemon's order (namespace, name, uid, source):
        a new list, kept sorted as changes come (no sort here)."""
        return list(self._cache.ordered())

    def __iter__(self):
        return iter(self.pods())

    def pod_by_uid(self, uid):
        """The pod with this uid (the first in the daemon's order if two
        sources hold it), or None.  O(1)."""
        return self._cache.by_uid(uid)

    def pod_by_name(self, namespace, name):
        """The pod namespace/name (the first in the daemon's order if
        several sources hold one), or None.  O(1)."""
        return self._cache.by_name(namespace, name)

    def plugins(self):
        """{socket: plugin object text} of the registered plugins."""
        return {k: v[0] for k, v in self._cache.plugins.items()}

    @property
    def sources_ready(self):
        return list(self._ready) if self._ready is not None else None

    # -- loop integration ----------------------------------------------------
    def fileno(self):
        """The current connection's descriptor, or None between
        connections (then timeout() says when to call process())."""
        return self._sock.fileno() if self._sock else None

    def timeout(self):
        """Seconds until process() must run without input; None if none."""
        if self._stopped is not None or self._sock is not None:
            return None
        return max(0.0, self._next_attempt - time.monotonic())

    def stop(self):
        self._stop_requested = True

    def process(self):
        """Connects when due, reads what is there, dispatches it.  Raises
        Error once the client has stopped on a fatal error; returns False
        once stopped with stop(), else True."""
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

    def run(self, timeout=None):
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

    def events(self, timeout=None):
        """An iterator of Event(kind, ...) over run(): kind is "pods",
        "synced", "sources_ready", "plugin", "error" or "reconnect".  The
        on_* handlers set on the client are still called, each before its
        event is queued."""
        if self._events is not None:
            raise RuntimeError("events() is already running on this client")
        queue = self._events = collections.deque()
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

    def close(self):
        self._close()
        self._sel.close()

    # -- internals -----------------------------------------------------------
    def _log(self, level, text):
        if self.on_log:
            self.on_log(level, text)

    def _tell(self, kind, arg):
        """Hands one event to its handler (on_<kind>) and to events()."""
        if self._stop_requested and kind not in ("error", "reconnect"):
            if kind == "pods" and self._seen is not None:
                self._follow(arg)  # the map stays in step; no calls
            return
        fn = getattr(self, "on_" + kind)
        if fn:
            fn(arg)
        if self._events is not None:
            ev = dict(_NO_EVENT)
            ev[_EVENT_FIELD[kind]] = arg
            self._events.append(Event(kind, **ev))
        if kind == "pods" and self._seen is not None:
            self._follow(arg)

    # -- informer-style handlers ---------------------------------------------
    def add_handler(self, handler):
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
        self._ensure_seen()
        self._handlers.append(handler)
        fn = getattr(handler, "on_add", None)
        if fn:
            for p in self._cache.ordered():
                if self._stop_requested:
                    break
                fn(self._seen.get(p.source_uid(), p), True)

    def _call(self, name, *args):
        for h in self._handlers:
            if self._stop_requested:
                return
            fn = getattr(h, name, None)
            if fn:
                fn(*args)

    def add_index(self, name, fn):
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

    def by_index(self, name, key):
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
        return sorted(x.pods.get(key, {}).values(), key=Pod.key)

    def _index_watch(self, old, new):
        """The cache's watch: each built index follows one pod."""
        for x in self._indexes.values():
            if x.pods is None:
                continue
            if old is not None:
                x.drop(old)
            if new is not None:
                x.put(new)

    def _ensure_seen(self):
        if self._seen is None:
            self._seen = {p.source_uid(): p for p in self._cache.ordered()}

    def _seen_put(self, k, p):
        self._seen[k] = p

    def _seen_drop(self, k):
        return self._seen.pop(k, None)

    def _upsert(self, p, quiet):
        old = self._seen.get(p.source_uid())
        if old is p:
            return  # given already (the map was built after the cache took it)
        self._seen_put(p.source_uid(), p)
        if old is None:
            self._call("on_add", p, False)
        elif not quiet or not _same(old.json, p.json):
            self._call("on_update", old, p)

    def _follow(self, u):
        """Turns one Update into the handlers' calls."""
        if u.op == "SET":
            now = {p.source_uid() for p in u.pods}
            gone = sorted((p for k, p in self._seen.items() if k not in now),
                          key=Pod.key)
            for p in gone:
                self._seen_drop(p.source_uid())
                self._call("on_delete", p)
            for p in u.pods:
                self._upsert(p, True)
            return
        for p in u.pods:
            if u.op != "REMOVE":
                self._upsert(p, False)
                continue
            old = self._seen_drop(p.source_uid())
            if old is not None:
                self._call("on_delete", old)

    def _reset_conn(self):
        self._buf = bytearray()
        self._scan = 0            # no newline in _buf before this
        self._hello = False
        self._live = False
        self._held = []
        self._end = None

    def _close(self):
        if self._sock is not None:
            try:
                self._sel.unregister(self._sock)
            except (KeyError, ValueError):
                pass
            self._sock.close()
        self._sock = None
        self._reset_conn()

    def _halt(self, why):
        self._close()
        self._stopped = why

    def _set_end(self, kind, err, message, reason=None):
        if self._end is None:
            # One line whatever went into it (the daemon's own message, the
            # path): control characters become "?".
            message = message.translate(_ONE_LINE)
            self._end = (kind, err, message, reason)

    def _end_connection(self):
        kind, err, message, reason = self._end
        fatal = (not self.reconnect or kind in (PERMISSION, PROTOCOL_MISMATCH)
                 or (kind == SERVER and reason == "BadRequest"))
        self._close()
        e = Error(kind, err, message, reason, fatal)
        self._log("warning" if not fatal else "error", message)
        self._tell("error", e)
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
        self._tell("reconnect", rc)

    def _connect(self):
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

    def _read(self):
        """Reads what is there (up to READ_BUDGET) and dispatches each whole
        line.  Linear in what arrives: new bytes are appended in place and
        only they are searched for a newline; a line is copied once."""
        total = 0
        while total < READ_BUDGET and self._end is None and \
                not self._stop_requested:
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

    def _dispatch(self):
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

    def _too_long(self):
        self._set_end(BAD_MESSAGE, errno.EMSGSIZE,
                      '"%s" sent a line longer than %d bytes' % (
                          self.path, self.max_line))

    def _bad(self, what):
        self._set_end(BAD_MESSAGE, errno.EBADMSG,
                      '"%s" sent a line that is not a protocol %d message '
                      "(%s)" % (self.path, PROTOCOL, what))

    def _line(self, raw):
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
            kind, err = _SERVER_ERRORS.get(m.reason, (SERVER, errno.EIO))
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
            elif m.type in ("pods", "plugin", "sources_ready"):
                self._held.append(m)
        elif self._point is not None and m.seq <= self._point:
            self._bad("message %d after %d (numbers must grow)" % (
                m.seq, self._point))
        else:
            self._apply(m)

    def _apply(self, m):
        try:
            if m.type == "pods" and self._cache.held:
                told = self._apply_held(m)
            elif m.type == "pods":
                self._cache.apply_pods(m)
                told = [Update(m.op, m.source, list(m.pods), m.seq, False)]
            elif m.type == "plugin":
                self._cache.apply_plugin(m)
            elif m.type == "sources_ready" and self._cache.held:
                self._log("info", 'sources ready on "%s": %d pods held over '
                          "since the last full state were not delivered "
                          "again: removed" % (self.path,
                                              len(self._cache.held)))
                told = [Update(op, src, pods, 0, True)
                        for op, src, pods in self._cache.drop_held()]
            else:
                told = []
        except MemoryError:
            self._set_end(NOMEM, errno.ENOMEM, "out of memory applying "
                          "message %d; resynchronizing" % m.seq)
            return False
        self._point = m.seq
        if m.type in ("pods", "sources_ready"):
            for u in told:
                self._tell("pods", u)
        elif m.type == "plugin":
            self._tell("plugin", PluginEvent(
                m.plugin_op, m.socket, m.plugin_type, m.plugin_name,
                m.plugin_json, m.error, m.seq, False))
        if m.type == "sources_ready":
            self._set_ready(m.sources)
        return True

    def _apply_held(self, m):
        """A pods message while pods are held over (doc/protocol.md, "A
        restarted daemon's late sources"): an ADD that carries a held pod
        again ends its hold-over, and the pod is told only if it changed,
        in an UPDATE (resync) after the ADD, which goes on with the other
        pods; a SET keeps the held pods it does not carry and is told with
        the whole cache; other ops as live.  Returns the updates to tell."""
        cache = self._cache
        if m.op == "SET":
            cache.set_keeping_held(m.pods)
            return [Update("SET", m.source, list(cache.ordered()), m.seq,
                           False)]
        if m.op != "ADD":
            cache.apply_pods(m)
            return [Update(m.op, m.source, list(m.pods), m.seq, False)]
        keep, changed = [], []
        for p in m.pods:
            k = (p.source, p.uid)
            if k not in cache.held:
                keep.append(p)
            elif not _same(cache.pods[k].json, p.json):
                changed.append(p)
        cache.apply_pods(m)
        told = [Update("ADD", m.source, keep, m.seq, False)]
        if changed:
            told.append(Update("UPDATE", m.source, changed, 0, True))
        return told

    def _set_ready(self, sources):
        if sources != self._ready:
            self._ready = list(sources)
            self._tell("sources_ready", list(sources))

    def _synced(self, m):
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
        self._live = True
        self._synced_once = True
        self._backoff = BACKOFF_MIN
        self._attempt = 0
        self._tell("synced", m.resumed)

    def _full_state(self):
        """The held messages are the whole state: they replace the cache,
        and the difference is told (or, after resume_after=, the state
        whole: what went away before that point is not known here)."""
        fresh, ready = _Cache(), None
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
        if self._partial:
            recs = [("SET", "*", list(fresh.ordered()))]
            plugs = [("REGISTERED", sock, fresh.plugins[sock])
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
            self._tell("pods", Update(op, src, pods, 0, resync))
        for op, sock, (text, typ, name) in plugs:
            self._tell("plugin", PluginEvent(op, sock, typ, name, text, None,
                                             0, resync))
