"""podmux.cache — the client's local copy of the node's pods and plugins
(as C's client_cache.c), the difference between two copies after a full
state, the rule that says whether a pod changed (doc/protocol.md, "Which
pods changed"), and the indexes of Client.add_index()."""

from __future__ import annotations

import bisect
import collections
import itertools
import json
import operator
from typing import (Any, Callable, DefaultDict, Dict, Final, Iterable, List,
                    Optional, Set, Tuple, Union)

from . import _words as _w
from .wire import (_SEEN, Op, PluginOp, Pod, _Msg, _no_constant,
                   seen_span)
# A custom index's function (Client.add_index): a pod's keys.
IndexFunc = Callable[[Pod], Iterable[str]]

# The built-in indexes of Client.by_index().
INDEX_NAMESPACE: Final = "namespace"
INDEX_SOURCE: Final = "source"


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


def _seen_span(text: str) -> Optional[Tuple[int, int]]:
    """(start, end) of the member "kubernetes.io/config.seen" (name and
    value) in metadata.annotations, for a text laid out as the daemon
    writes pods (compact, annotations first, each a string); else None."""
    m = _SEEN.match(text)
    return m.span(1) if m else None


def _same_but_seen(a: str, sa: Tuple[int, int], b: str,
                   sb: Tuple[int, int]) -> bool:
    """Whether a and b differ at most in the config.seen members at sa and
    sb (seen_span())."""
    return sa[0] >= 0 and sa[0] == sb[0] and \
        len(a) - sa[1] == len(b) - sb[1] and \
        b.startswith(a[:sa[0]]) and b.endswith(a[sa[1]:])


def _same(a: str, b: str) -> bool:
    """Whether two texts of one pod (same source and UID) are the same for
    the resync diff: equal, or the same name and namespace and equal in
    every member the merger compares.  Cost: a comparison of the texts
    when they are equal or differ only in config.seen as the daemon writes
    it (what a restart gives every unchanged pod); else both decoded."""
    if a == b:
        return True
    sa, sb = _seen_span(a), _seen_span(b)
    return (sa is not None and sb is not None and
            _same_but_seen(a, sa, b, sb)) or _compared(a) == _compared(b)


def _same_pod(a: Pod, b: Pod) -> bool:
    """_same() of two pods' texts, with where config.seen is in each worked
    out once a pod (seen_span()); true at once when b was read as a's
    text but for config.seen (wire._pod_like).  a is the older pod (the
    cache's, or the one handed on before): it was alive when b was read,
    as was the pod b was read as, so an id() equal to a's is a's."""
    return getattr(b, "_like", None) == id(a) or a.json == b.json or \
        _same_but_seen(a.json, seen_span(a), b.json, seen_span(b)) or \
        _compared(a.json) == _compared(b.json)


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
        # uid -> its pod, or {source: pod} once two sources hold it; and
        # (namespace, name) -> its pod, or {(source, uid): pod}.  A pod
        # alone is kept as it is: a dict for each cost a full state's
        # cache build two thirds of its time.
        self._by_uid: Dict[str, _Entry] = {}
        self._by_name: Dict[Tuple[str, str], _Entry] = {}

    def _index(self, p: Pod) -> None:
        _enter(self._by_uid, p.uid, p.source, p, _source)
        _enter(self._by_name, (p.namespace, p.name), (p.source, p.uid), p,
               Pod.source_uid)

    def _unindex(self, p: Pod) -> None:
        _leave(self._by_uid, p.uid, p.source)
        _leave(self._by_name, (p.namespace, p.name), (p.source, p.uid))
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
        """Replaces every pod: a pass over them for each structure, as
        a comprehension (the interpreter's fastest loop; map() of an
        attrgetter cost more), and the pods entered one by one only in
        an index where some share a key."""
        before = self.pods
        self.held = set()
        self.pods = {(p.source, p.uid): p for p in pods}
        # Each pod's key made once (two pods of the cache never share
        # one); a full state comes in the daemon's order, which is
        # checked rather than sorted.
        order = list(self.pods.values())
        keys = [(p.namespace, p.name, p.uid, p.source) for p in order]
        if not all(map(operator.lt, keys, itertools.islice(keys, 1, None))):
            at = sorted(range(len(order)), key=keys.__getitem__)
            order = [order[i] for i in at]
            keys = [keys[i] for i in at]
        self._order, self._keys = order, keys
        by_uid: Dict[str, _Entry] = {p.uid: p for p in order}
        if len(by_uid) < len(order):
            by_uid = {}
            for p in order:
                _enter_other(by_uid, p.uid, p.source, p, _source)
        by_name: Dict[Tuple[str, str], _Entry] = {
            (p.namespace, p.name): p for p in order}
        if len(by_name) < len(order):
            by_name = {}
            for p in order:
                _enter_other(by_name, (p.namespace, p.name),
                             (p.source, p.uid), p, Pod.source_uid)
        self._by_uid, self._by_name = by_uid, by_name
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

    def keys(self) -> List[Tuple[str, str, str, str]]:
        """The keys (Pod.key()) of ordered(), in its order."""
        return self._keys

    def by_uid(self, uid: str) -> Optional[Pod]:
        return _first(self._by_uid.get(uid))

    def by_name(self, namespace: str, name: str) -> Optional[Pod]:
        return _first(self._by_name.get((namespace, name)))


# An entry of _Cache's indexes by uid and by name: a pod alone, or the
# pods sharing the key (by source, or by source and uid).
_Entry = Union[Pod, Dict[Any, Pod]]


def _source(p: Pod) -> str:
    return p.source


def _enter_other(index: Dict[Any, _Entry], key: Any, inner: Any, p: Pod,
                 inner_of: Callable[[Pod], Any]) -> None:
    """Puts p at key: alone, or among the pods there by inner key, for an
    index whose pods are all of different inner keys (a new cache)."""
    q = index.setdefault(key, p)
    if q is p:
        return
    if isinstance(q, dict):
        q[inner] = p
    else:
        index[key] = {inner_of(q): q, inner: p}


def _enter(index: Dict[Any, _Entry], key: Any, inner: Any, p: Pod,
           inner_of: Callable[[Pod], Any]) -> None:
    """Puts p at key: alone, in place of the pod of the same inner key
    (its older version), or among the others by inner key."""
    q = index.setdefault(key, p)
    if q is p:
        return
    if isinstance(q, dict):
        q[inner] = p
    elif inner_of(q) == inner:
        index[key] = p
    else:
        index[key] = {inner_of(q): q, inner: p}


def _leave(index: Dict[Any, _Entry], key: Any, inner: Any) -> None:
    """Takes the pod of inner key inner out of key's entry."""
    q = index[key]
    if isinstance(q, dict):
        del q[inner]
        if q:
            return
    del index[key]


def _first(q: Optional[_Entry]) -> Optional[Pod]:
    """The pod of an entry first in the daemon's order."""
    if q is None or not isinstance(q, dict):
        return q
    if len(q) > 1:
        return min(q.values(), key=Pod.key)
    return next(iter(q.values()))


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
    old_pods = old.pods
    for k, p in new.pods.items():
        o = old_pods.get(k)
        if o is None:
            ch[(p.source, Op.ADD)].append(p)
        elif getattr(p, "_like", None) != id(o) and not _same_pod(o, p):
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
