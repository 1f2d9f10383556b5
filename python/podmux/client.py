"""podmux.client — the Client: the connection, hello/replay/full state,
resume and reconnection, handlers and events (see the package's
docstring for what it promises)."""

from __future__ import annotations

import codecs
import collections
import dataclasses
import errno
import json
import os
import selectors
import socket
import stat
import time
from typing import (Any, Callable, Deque, Dict, Final, Iterator, List, Literal,
                    Optional, Protocol, Tuple, Union)

from . import _words as _w
from .cache import (INDEX_NAMESPACE, INDEX_SOURCE, IndexFunc, _Cache, _Index,
                    _Key, _PluginEntry, _Record, _diff, _same_pod)
from .wire import (BAD_MESSAGE, CLOSED, CONNECT, Error, ErrorKind, Event,
                   EventError, EventPlugin, EventPods, EventReconnect,
                   EventSource, EventSourcesReady, EventSynced, LogLevel,
                   NOMEM, Op, PERMISSION, PROTOCOL, PROTOCOL_MISMATCH,
                   PluginEvent, PluginOp, Pod, Reconnect, SERVER, Serving,
                   SourceState, Update, _Ahead, _Bad, _Known, _Msg,
                   _OTHER_ERROR, _SERVER_ERRORS, _live, _parse, _read_ahead)


DEFAULT_SOCKET: Final = "/run/podmux/podmux.sock"
# Not Final: scripts/bench shortens the backoff (podmux.client.BACKOFF_MIN).
BACKOFF_MIN = 0.1
BACKOFF_MAX = 5.0
DEFAULT_MAX_LINE: Final = 256 * 1024 * 1024
READ_BUDGET: Final = 4 * 1024 * 1024


def _not_socket(path: str) -> bool:
    """Whether path is there and is no socket."""
    try:
        return not stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


class Handler(Protocol):
    """An informer-style handler (Client.add_handler, client-go's event
    handler).  A class that subclasses Handler gets a no-op for each
    method it does not write; any object with the three methods will do
    (a Protocol)."""

    def on_add(self, pod: Pod, initial: bool) -> None:
        """A pod new to the handlers; initial for the pods the cache held
        when the handler was added."""

    def on_update(self, old: Pod, new: Pod) -> None:
        """A pod the handlers were given, changed (a graceful DELETE is an
        update that sets deletionTimestamp)."""

    def on_delete(self, old: Pod) -> None:
        """A pod the handlers were given, gone."""


@dataclasses.dataclass(frozen=True)
class SourceStatus:
    """What Client.source_state() says of a source: what it serves
    (state), and whether that is not live (not_live).  Unpacks as
    (state, not_live), the pair it was before it had names."""
    state: SourceState
    not_live: bool

    def __iter__(self) -> Iterator[Union[SourceState, bool]]:
        yield self.state
        yield self.not_live

    def __getitem__(self, i: int) -> Union[SourceState, bool]:
        return (self.state, self.not_live)[i]


_ONE_LINE: Final = {c: "?" for c in list(range(0x20)) + [0x7f]}
_UTF8 = codecs.getincrementaldecoder("utf-8")

# Why the client stopped: an Error (fatal), or "stopped" (stop(), close()).
_Stopped = Union[None, Error, Literal["stopped"]]


# A line this long is decoded from a view of the read buffer: copying it
# out first cost a restart's full state of 7 MB some 3 ms (the copy's
# fresh pages), where a short line is cheaper to copy than to view.
_VIEW_LINE: Final = 1 << 16


# A partial line this long, before synced, is read as it arrives
# (wire._read_ahead).  Not Final: the tests lower it.
AHEAD_MIN = 1 << 20


def _text(buf: bytearray, start: int, end: int) -> Optional[str]:
    """buf[start:end] decoded from UTF-8, or None if it is not UTF-8."""
    try:
        if end - start < _VIEW_LINE:
            return buf[start:end].decode("utf-8")
        with memoryview(buf) as mv, mv[start:end] as view:
            return str(view, "utf-8")
    except UnicodeDecodeError:
        return None


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
        # The cache's pods as the parser compares a message's pods with
        # them (wire._as_known), and where it compares next.
        self._known = _Known(self._cache.ordered(), self._cache.keys())
        self._point = resume_after
        self._synced_once = False
        # The cache holds only what came after a saved point; cleared by a
        # full state.
        self._partial = resume_after is not None
        self._events: Optional[Deque[Event]] = None  # events()'s queue
        self._handlers: List[Handler] = []           # add_handler()
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
        # Where each read lands before it joins the buffer: one for the
        # client's life, where a new bytes object a read gave each
        # 256 KB of a long line fresh memory to fault in.
        self._rbuf = bytearray(1 << 18)
        self._rview = memoryview(self._rbuf)
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

    def source_state(self, source: str) -> SourceStatus:
        """What source serves now (state), and whether that is not live
        (not_live): its state and True while the daemon says it serves
        something else (its checkpoint); a live state and False when no
        state was said or "live" was said since.  Cost: O(1)."""
        kept = self._srcs.get(source)
        if kept is None:
            return SourceStatus(_live(source), False)
        return SourceStatus(kept[0], True)

    # -- loop integration ----------------------------------------------------
    def fileno(self) -> Optional[int]:
        """The current connection's descriptor, or None between
        connections (then timeout() says when to call process())."""
        return self._sock.fileno() if self._sock else None

    def timeout(self) -> Optional[float]:
        """Seconds until process() must run without input; None if none."""
        if self._stop_requested and self._stopped is None:
            return 0.0   # process() closes the connection
        if self._stopped is not None or self._sock is not None:
            return None
        return max(0.0, self._next_attempt - time.monotonic())

    def stop(self) -> None:
        """Stops the client: nothing more is applied or dispatched after
        the current handler returns, the connection is closed by the next
        process() (timeout() says 0 until then) and process() returns
        False.  The cache stays readable."""
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
    def add_handler(self, handler: Handler) -> None:
        """Adds an informer-style handler (client-go's event handler): a
        Handler, with on_add(pod, initial), on_update(old, new) and
        on_delete(old) (subclass Handler for no-op ones).  Any number per client; each is called for every
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
        for p in self._cache.ordered():
            if self._stop_requested:
                break
            handler.on_add(seen.get(p.source_uid(), p), True)

    def _handlers_now(self) -> Iterator[Handler]:
        """The handlers in the order they were added, until one stops the
        client."""
        for h in self._handlers:
            if self._stop_requested:
                return
            yield h

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
            for h in self._handlers_now():
                h.on_add(p, False)
        elif not quiet or not _same_pod(old, p):
            for h in self._handlers_now():
                h.on_update(old, p)

    def _follow(self, u: Update) -> None:
        """Turns one Update into the handlers' calls."""
        seen = self._ensure_seen()
        if u.op is Op.SET:
            # Of two pods of one source and UID (a malformed SET) the
            # later wins, as in the cache, and is handed on once.
            now = {p.source_uid(): i for i, p in enumerate(u.pods)}
            gone = sorted((p for k, p in seen.items() if k not in now),
                          key=Pod.key)
            for p in gone:
                del seen[p.source_uid()]
                for h in self._handlers_now():
                    h.on_delete(p)
            for i, p in enumerate(u.pods):
                if now[p.source_uid()] == i:
                    self._upsert(seen, p, True)
            return
        for p in u.pods:
            if u.op is not Op.REMOVE:
                self._upsert(seen, p, False)
                continue
            old = seen.pop(p.source_uid(), None)
            if old is not None:
                for h in self._handlers_now():
                    h.on_delete(old)

    def _reset_conn(self) -> None:
        self._buf = bytearray()
        self._scan = 0            # no newline in _buf before this
        self._hello = False
        self._live = False
        self._held: List[_Msg] = []
        self._end: Optional[Tuple[ErrorKind, int, str, Optional[str]]] = None
        # The partial line read ahead (_read_more), and its bytes decoded.
        self._ahead: Optional[_Ahead] = None
        self._ahead_fed = 0
        self._ahead_dec = _UTF8()

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
                err = e.errno or errno.EIO
                # Linux refuses a connection to a path that is no socket
                # as it does one nobody listens on: say which.
                if err == errno.ECONNREFUSED and _not_socket(self.path):
                    err = errno.ENOTSOCK
                self._set_end(CONNECT, err,
                              'cannot connect to "%s": %s (is podmux run '
                              "serving this path?)" % (self.path,
                                                       os.strerror(err)))
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
                got = self._sock.recv_into(self._rbuf)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                self._set_end(CLOSED, e.errno or errno.EIO,
                              'the connection to "%s" failed: %s' % (
                                  self.path, e))
                return
            if not got:
                if self._buf:
                    self._log("info", "dropped a partial line of %d bytes: "
                              'the connection to "%s" was cut inside a '
                              "message" % (len(self._buf), self.path))
                self._set_end(CLOSED, errno.ECONNRESET,
                              '"%s" closed the connection' % self.path)
                return
            total += got
            with self._rview[:got] as data:
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
                if start == 0 and self._ahead is not None and \
                        self._ahead.first >= 0 and self.on_line is None:
                    start = nl + 1
                    self._line_ahead(nl)
                else:
                    line, start = _text(buf, start, nl), nl + 1
                    self._line(line)
        finally:
            if buf is self._buf:  # not replaced by a close() in a handler
                del buf[:start]   # O(1) amortized at a bytearray's front
                self._scan -= start
        if self._end is None and buf is self._buf and \
                len(buf) > self.max_line:
            self._too_long()
        elif self._end is None and buf is self._buf and \
                len(buf) >= AHEAD_MIN and not self._live and self._hello \
                and self.on_line is None and not self._stop_requested:
            self._read_more()

    def _read_more(self) -> None:
        """Reads ahead the partial line at the front of the buffer, a full
        state's pods message still arriving (wire._read_ahead): what came
        since the last call is decoded and read.  Any trouble (not
        UTF-8, no memory) stops it, and what it read is dropped: the
        line is read whole when it ends, which says what is wrong with
        it."""
        a = self._ahead
        if a is None:
            self._refresh_known()
            a = self._ahead = _Ahead(self._known)
            self._ahead_fed = 0
            self._ahead_dec.reset()
        # Read when what came is as long as the part still waiting
        # (a pod cut by the last read): each character is copied a bounded
        # number of times, however small the reads.
        if a.stopped or len(self._buf) - self._ahead_fed < max(
                AHEAD_MIN >> 4, len(a.text)):
            return
        try:
            with memoryview(self._buf) as mv, \
                    mv[self._ahead_fed:] as more:
                text = self._ahead_dec.decode(more)
            self._ahead_fed = len(self._buf)
            _read_ahead(a, text)
        except (UnicodeDecodeError, MemoryError):
            a.stopped = True
            a.first = -1
            a.known.at = a.at0

    def _line_ahead(self, nl: int) -> None:
        """The line buf[:nl], read ahead while it came: given to _parse
        cut (its head and what was not read ahead, decoding none of the
        pods read), which takes the pods read ahead.  Any trouble (not
        UTF-8, a line that is not what it was read as) reads it whole
        as before, which says what is wrong with it."""
        a, self._ahead = self._ahead, None
        assert a is not None
        try:
            with memoryview(self._buf) as mv, \
                    mv[self._ahead_fed:nl] as rest:
                cut = a.head + a.text + self._ahead_dec.decode(rest, True)
            a.cut = True
            self._refresh_known()
            m: Optional[_Msg] = _parse(cut, self._known, a)
        except (UnicodeDecodeError, MemoryError, _Bad):
            m = None
        if m is not None:
            self._message(m)
            return
        a.known.at = a.at0
        self._line(_text(self._buf, 0, nl))

    def _refresh_known(self) -> None:
        """The cache's pods as the parser compares a line's pods with
        them: made again when the cache changed.  Live, an ADD or UPDATE
        carries pods that changed: only a SET's pods are compared with
        the cache first; a full state's are all."""
        if self._known.pods is not self._cache.ordered():
            self._known = _Known(self._cache.ordered(), self._cache.keys())
        self._known.sets_only = self._live

    def _too_long(self) -> None:
        self._set_end(BAD_MESSAGE, errno.EMSGSIZE,
                      '"%s" sent a line longer than %d bytes' % (
                          self.path, self.max_line))

    def _bad(self, what: str) -> None:
        self._set_end(BAD_MESSAGE, errno.EBADMSG,
                      '"%s" sent a line that is not a protocol %d message '
                      "(%s)" % (self.path, PROTOCOL, what))

    def _line(self, line: Optional[str]) -> None:
        if line is None:
            self._bad("not UTF-8")
            return
        if self.on_line:
            self.on_line(line)
        self._refresh_known()
        ahead, self._ahead = self._ahead, None
        try:
            m = _parse(line, self._known, ahead)
        except _Bad as e:
            self._bad(str(e))
            return
        except MemoryError:
            self._set_end(NOMEM, errno.ENOMEM, "out of memory reading a "
                          'message from "%s"; resynchronizing' % self.path)
            return
        self._message(m)

    def _message(self, m: _Msg) -> None:
        """A line parsed (_line), acted on."""
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
            # Unless a source handler _confirm_end called stopped it.
            if not self._stop_requested:
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
                n = len(self._cache.held)
                # Dropped before the log handler runs: it may read the
                # cache, which must be whole.
                told = [Update(op, src, tuple(pods), 0, True)
                        for op, src, pods in self._cache.drop_held()]
                self._log("info", 'sources ready on "%s": %d pods held over '
                          "since the last full state were not delivered "
                          "again: removed" % (self.path, n))
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
            elif not _same_pod(cache.pods[k], p):
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
                # A handler stopped the client: nothing more is applied,
                # and the point stays the last message applied.
                if self._stop_requested:
                    return
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
