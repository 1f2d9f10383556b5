#!/usr/bin/env python3
"""What the API source's integration tests share (test_api_source.py and
test_api_watch.py): the fake server and the daemon set up against it,
and the checks of what the consumer and the server saw.  The split in two
files lets `make -j` run the two halves together (each is minutes of
the daemon's real timeouts)."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import apitls  # noqa: E402
import harness  # noqa: E402
from fakeapi import FakeAPI, describe  # noqa: E402
from harness import (  # noqa: E402
    NODE, SEEN_RE, T_SHORT, T_WAIT, msg_names, pod_ann, pod_name,
    summarize, test
)

SOURCE_ANN = "kubernetes.io/config.source"
SEEN_ANN = "kubernetes.io/config.seen"
LOCAL_ANNS = (SOURCE_ANN, SEEN_ANN, "kubernetes.io/config.mirror")
SLOW = os.environ.get("PODMUX_SLOW_TESTS") == "1"
SYS_PYTHON = "/usr/bin/python3"


# ---------------------------------------------------------------------------
# Setup helpers

def api_test(name, params=None):
    """harness.test, plus the fake servers' log tails in the diagnostics
    when the test fails."""
    def deco(fn):
        def wrapped(t):
            t.servers = []
            try:
                fn(t)
            except BaseException:
                for s in t.servers:
                    try:
                        t.note("fake-apiserver %d requests: %s" % (
                            s.n, s.summary()))
                    except BaseException:  # noqa: B902
                        pass
                    tail = s.log().strip().splitlines()[-6:]
                    if tail:
                        t.note("fake-apiserver %d log: %s" % (
                            s.n, " / ".join(tail)))
                raise
            finally:
                for s in t.servers:
                    s.close()
        wrapped.__name__ = fn.__name__
        return test(name, params)(wrapped)
    return deco


def server(t, **kw):
    s = FakeAPI(t, **kw)
    t.servers.append(s)
    return s


class ApiDaemon(harness.Daemon):
    """A Daemon that can be started with extra environment variables
    (None removes one)."""

    def __init__(self, *a, env=None, **kw):
        super().__init__(*a, **kw)
        self.env = env

    def start(self, wait=True):
        saved = {}
        for k, v in (self.env or {}).items():
            saved[k] = os.environ.get(k)
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        try:
            return super().start(wait)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def api_daemon(t, kubeconfig=None, extra=(), manifest_path=None, node=NODE,
               env=None, start=True, verbosity=None, in_cluster=False):
    args = []
    if kubeconfig is not None:
        args += ["--kubeconfig", kubeconfig]
    if in_cluster:
        args += ["--in-cluster"]
    if verbosity is not None:
        args += ["-v", str(verbosity)]
    d = ApiDaemon(t, manifest_path, node=node, env=env,
                  freq="1s" if manifest_path else None,
                  extra=args + list(extra))
    t.daemons.append(d)
    if start:
        d.start()
    return d


def plain_kubeconfig(t, srv, user=None, name="kubeconfig"):
    """A kubeconfig for a plain-http fake server."""
    return apitls.simple_kubeconfig(t.path(name), srv.url, user=user)


def setup(t, pods=(), other=(), node=NODE, server_kw=None, user=None,
          extra=(), connect=True, verbosity=None):
    """A plain-http fake server holding pods (names, on node) and other
    (names, on node2), a podmux on it and one consumer."""
    srv = server(t, **(server_kw or {}))
    for name in pods:
        srv.create(name, node=node)
    for name in other:
        srv.create(name, node="node2")
    kc = plain_kubeconfig(t, srv, user=user)
    d = api_daemon(t, kc, node=node, extra=extra, verbosity=verbosity)
    c = d.connect() if connect else None
    return srv, d, c


# ---------------------------------------------------------------------------
# Checks

def api_pods(state):
    return {u: p for u, p in state.pods.items()
            if pod_ann(p, SOURCE_ANN) == "api"}


def _public_anns(p):
    anns = (p.get("metadata") or {}).get("annotations") or {}
    return {k: v for k, v in anns.items() if k not in LOCAL_ANNS}


def diff_truth(state, truth):
    """Why the consumer's api pods differ from the server's pods (None if
    they do not).  Compared: uid, namespace/name, spec, labels,
    annotations (minus local ones), deletionTimestamp, status."""
    have = api_pods(state)
    want = {p["metadata"]["uid"]: p for p in truth}
    if set(have) != set(want):
        return "uids differ: consumer has %s, server has %s" % (
            sorted("%s(%s)" % (pod_name(p), u[:8]) for u, p in have.items()),
            sorted("%s(%s)" % (pod_name(p), u[:8]) for u, p in want.items()))
    for u, w in want.items():
        h = have[u]
        hm, wm = h.get("metadata") or {}, w["metadata"]
        for k in ("name", "namespace", "deletionTimestamp"):
            if hm.get(k) != wm.get(k):
                return "%s: %s %r != server's %r" % (wm["name"], k,
                                                      hm.get(k), wm.get(k))
        if (hm.get("labels") or {}) != (wm.get("labels") or {}):
            return "%s: labels %r != %r" % (wm["name"], hm.get("labels"),
                                            wm.get("labels"))
        if _public_anns(h) != _public_anns(w):
            return "%s: annotations %r != %r" % (wm["name"], _public_anns(h),
                                                 _public_anns(w))
        for k in ("spec", "status"):
            if h.get(k) != w.get(k):
                return "%s: %s %s != server's %s" % (
                    wm["name"], k, json.dumps(h.get(k))[:200],
                    json.dumps(w.get(k))[:200])
    return None


def converge(c, srv, node=NODE, timeout=None):
    """Reads until the consumer's api pods equal the server's pods on node
    (the server's state is read once: call it after the last change)."""
    truth = srv.truth(node)
    why = [None]

    def ok(state):
        why[0] = diff_truth(state, truth)
        return why[0] is None
    try:
        c.wait_state(ok, "equal to the server's %d pods on %s" % (
            len(truth), node), timeout or T_WAIT)
    except AssertionError as e:
        raise AssertionError("%s; last difference: %s" % (e, why[0]))
    return truth


def check_annotations(c):
    for p in api_pods(c.state).values():
        if not SEEN_RE.match(pod_ann(p, SEEN_ANN) or ""):
            raise AssertionError("%s: config.seen %r is not RFC 3339" % (
                pod_name(p), pod_ann(p, SEEN_ANN)))


def expect_whole_first_push(c, names):
    """The first api message holds exactly names: no partial list."""
    m = c.expect(lambda x: x.get("type") == "pods" and x.get("source") ==
                 "api", "the first api message")
    if msg_names(m) != names:
        raise AssertionError("first push must hold all %d pods (a partial "
                             "list was handed on?): %s" % (len(names),
                                                           summarize(m)))


def pods_reqs(srv, since=0):
    return srv.requests(since, kind=("list", "continue", "watch"))


def is_watch(r):
    return r.get("kind") == "watch"


def rv_of(r):
    return (r.get("params") or {}).get("resourceVersion")


def wait_last_rv(srv):
    """Waits until the client has been sent the server's newest resource
    version (by the server's log); returns it."""
    def sent():
        rv = last_rv(srv)
        return rv if rv is not None and str(rv) == str(srv.rv()) else None
    return harness.wait_for(sent, T_SHORT, "the client to be sent resource "
                            "version %s" % srv.rv())


def last_rv(srv):
    """The newest resource version the client has been sent: from the last
    watch that got an event or bookmark, else the last list's or watch's
    RV."""
    for r in reversed(pods_reqs(srv)):
        if is_watch(r):
            if r.get("last_rv"):
                return r["last_rv"]
            if r.get("status") == 200 and (r.get("outcome") or "").startswith(
                    ("open", "closed", "timeout")):
                return rv_of(r)
        elif r.get("status") == 200 and r["kind"] == "list":
            return r.get("list_rv")
    return None


def wait_settled(srv, since=0, secs=0.6):
    """Waits for one open watch after since, then a little: requests that
    would follow by mistake (a relist) have a chance to show up."""
    w = srv.wait_watch(since)
    harness.settle(secs)
    return w


def assert_no_list(srv, since, what):
    lists = srv.requests(since, kind=("list", "continue"))
    if lists:
        raise AssertionError("%s, but the client listed: %s" % (
            what, " | ".join(describe(r) for r in lists)))


def note_gaps(t, reqs, what):
    if len(reqs) > 1:
        gaps = ["%.2f" % (b["t"] - (a["t_end"] or a["t"]))
                for a, b in zip(reqs, reqs[1:])]
        t.note("%s: gaps between requests (s): %s" % (what, gaps))


def watch_param_ok(w, rv, node=NODE):
    p = w.get("params") or {}
    errs = []
    if p.get("watch") not in ("true", "1"):
        errs.append("watch=%r" % p.get("watch"))
    if p.get("allowWatchBookmarks") != "true":
        errs.append("allowWatchBookmarks=%r" % p.get("allowWatchBookmarks"))
    if rv is not None and p.get("resourceVersion") != str(rv):
        errs.append("resourceVersion=%r (want %s)" % (
            p.get("resourceVersion"), rv))
    if p.get("fieldSelector") != "spec.nodeName=" + node:
        errs.append("fieldSelector=%r" % p.get("fieldSelector"))
    try:
        ts = int(p.get("timeoutSeconds"))
        if not 300 <= ts < 600:
            errs.append("timeoutSeconds=%d not in [300, 600)" % ts)
    except (TypeError, ValueError):
        errs.append("timeoutSeconds=%r" % p.get("timeoutSeconds"))
    for k in ("limit", "continue", "resourceVersionMatch"):
        if k in p:
            errs.append("%s must not be sent on a watch" % k)
    if errs:
        raise AssertionError("watch #%d: %s (query %s)" % (
            w["id"], ", ".join(errs), w.get("query")))


def first_after(srv, since, pred, what, timeout=None):
    return srv.wait_request(lambda r: r.get("kind") in (
        "list", "continue", "watch") and pred(r), what, since, timeout)


def next_pods_req(srv, since, what, timeout=None):
    """The first pods request (list, continue or watch) after since."""
    return first_after(srv, since, lambda r: True, what, timeout)
