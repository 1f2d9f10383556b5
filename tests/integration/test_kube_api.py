#!/usr/bin/env python3
"""The pods through the Kubernetes API (--kube-api-socket, doc/kube-api.md),
over raw HTTP on the unix socket, against the real daemon: discovery,
errors as Status bodies, list with selectors and paging, get, watches
(order, identity, bookmarks, timeouts, 410, WatchList framing) and 503
before the sources are ready.  Pods change by writing manifest files and
through the project's fake API server."""

import base64
import http.client
import json
import os
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from fakeapi import FakeAPI  # noqa: E402
import apitls  # noqa: E402
from harness import T_WAIT, pn, pod_json, test, write_file  # noqa: E402


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path, timeout=T_WAIT):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


def kube_daemon(t, extra=(), env=None, manifest_path=None, **kw):
    sock = t.path("kube.sock")
    d = t.daemon(manifest_path=manifest_path, start=False,
                 extra=["--kube-api-socket", sock] + list(extra), env=env, **kw)
    d.start()
    d.kube = sock
    # The file exists from bind(), a moment before listen().
    harness.wait_listening(sock, d.assert_alive)
    return d


def request(d, path, method="GET", body=None):
    c = UnixHTTP(d.kube)
    try:
        c.request(method, path, body=body)
        r = c.getresponse()
        data = r.read()
        return r.status, dict(r.getheaders()), json.loads(data) if data else None
    finally:
        c.close()


def get_ok(d, path):
    status, _, body = request(d, path)
    assert status == 200, "%s: %s %s" % (path, status, body)
    return body


def wait_ready(d):
    harness.wait_for(lambda: request(d, "/api/v1/pods")[0] == 200, T_WAIT,
                     "the view to serve")


def names(lst):
    return sorted(p["metadata"]["name"] for p in lst["items"])


def wait_names(d, want, path="/api/v1/pods"):
    """Polls until the view serves exactly want (a 503 before the sources
    are ready is polled through)."""
    def served():
        status, _, body = request(d, path)
        return status == 200 and names(body) == sorted(want)
    harness.wait_for(served, T_WAIT, "pods %s" % sorted(want))


class Watch:
    """A watch in progress: its JSON lines as they come."""

    def __init__(self, d, query, base="/api/v1/pods", watch="watch=1"):
        self.c = UnixHTTP(d.kube, timeout=T_WAIT)
        self.c.request("GET", base + "?" + watch + "&" + query)
        self.r = self.c.getresponse()
        self.status = self.r.status
        assert self.r.getheader("Content-Type") == "application/json"

    def next(self):
        """The next event, or None at the end of the stream."""
        line = self.r.readline()
        if not line:
            return None
        assert line.endswith(b"\n"), line
        return json.loads(line)

    def until(self, n, pred=lambda e: True):
        out = []
        while len(out) < n:
            e = self.next()
            assert e is not None, "the watch ended after %s" % summary(out)
            if os.environ.get("KDEBUG"):
                sys.stderr.write("EVENT %s\n" % summary([e]))
            if pred(e):
                out.append(e)
        return out

    def rest(self):
        out = []
        while True:
            e = self.next()
            if e is None:
                return out
            out.append(e)

    def close(self):
        self.c.close()


def summary(events):
    return ["%s %s" % (e["type"], e["object"].get("metadata", {}).get("name"))
            for e in events]


def not_bookmark(e):
    return e["type"] != "BOOKMARK"


def rv_of(e):
    return int(e["object"]["metadata"]["resourceVersion"])


def manifest(t, name, **kw):
    write_file(t.path("manifests", name + ".json"), pod_json(name, namespace="default", **kw))


@test("discovery: /api, /api/v1, /apis and /version in the API server's shapes")
def test_discovery(t):
    d = kube_daemon(t)
    assert get_ok(d, "/api")["versions"] == ["v1"]
    res = get_ok(d, "/api/v1")
    assert res["kind"] == "APIResourceList" and res["groupVersion"] == "v1"
    pods = [r for r in res["resources"] if r["name"] == "pods"][0]
    assert pods["namespaced"] is True and pods["kind"] == "Pod"
    assert sorted(pods["verbs"]) == ["get", "list", "watch"]
    assert get_ok(d, "/apis") == {"kind": "APIGroupList", "apiVersion": "v1", "groups": []}
    assert get_ok(d, "/version")["major"] == "1"
    # One connection serves request after request, as the API server's
    # does (keep-alive), answers and errors alike.
    c = UnixHTTP(d.kube)
    for path in ("/version", "/api/v1/pods", "/api/v1/nodes", "/api/v1/namespaces/default/pods/nope", "/apis"):
        c.request("GET", path)
        r = c.getresponse()
        r.read()
        assert not r.will_close, (path, r.status, r.getheader("Connection"))
        if path == "/version":
            sock = c.sock
        assert c.sock is sock, path
    c.close()


@test("errors are Status bodies: unknown path 404, unknown pod 404 with details, writes 405, bad selectors 400")
def test_errors(t):
    d = kube_daemon(t)
    manifest(t, "a")
    wait_ready(d)
    status, _, body = request(d, "/api/v1/nodes")
    assert status == 404 and body["kind"] == "Status" and body["reason"] == "NotFound", body
    status, _, body = request(d, "/api/v1/namespaces/default/pods/nope")
    assert status == 404 and body["reason"] == "NotFound" and body["code"] == 404, body
    assert body["details"] == {"name": "nope", "kind": "pods"}, body
    assert body["message"] == 'pods "nope" not found', body
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        status, _, body = request(d, "/api/v1/namespaces/default/pods", method, body=b"{}")
        assert status == 405 and body["reason"] == "MethodNotAllowed", (method, status, body)
    # A write to what is not served is 404, as on the API server; to a
    # discovery document 405.
    for path in ("/foo", "/api/v1/nodes", "/api/v1/namespaces/default/pods/a/b", "/api/v1/namespaces//pods"):
        status, _, body = request(d, path, "POST", body=b"{}")
        assert status == 404 and body["reason"] == "NotFound", (path, status, body)
    for path in ("/api", "/api/v1/", "/version"):
        status, _, body = request(d, path, "DELETE")
        assert status == 405 and body["reason"] == "MethodNotAllowed", (path, status, body)
    for q in ("labelSelector=app+in+(x", "labelSelector=-x=y", "fieldSelector=spec.foo%3Dbar",
              "fieldSelector=metadata.name"):
        status, _, body = request(d, "/api/v1/pods?" + q)
        assert status == 400 and body["reason"] == "BadRequest", (q, status, body)
    status, _, body = request(d, "/api/v1/pods?fieldSelector=spec.foo%3Dbar")
    assert body["message"] == "field label not supported: spec.foo", body
    # Selectors up to KUBE_API_MAX_SELECTOR (8192) bytes, not one more.
    at_limit = "aa" + ",a" * 4095
    assert len(at_limit) == 8192
    assert get_ok(d, "/api/v1/pods?labelSelector=" + at_limit)["items"] == []
    status, _, body = request(d, "/api/v1/pods?labelSelector=" + at_limit + "a")
    assert status == 400 and "selector longer than 8192" in body["message"], (status, body)
    # Nothing else was lost: the daemon serves on.
    assert names(get_ok(d, "/api/v1/pods")) == [pn("a")]


@test("list: selectors (every operator), namespaces, get, limit and continue")
def test_list(t):
    d = kube_daemon(t)
    for i, (app, tier) in enumerate((("web", "fe"), ("web", "be"), ("db", "be"), ("cache", None), ("web", "fe"))):
        labels = {"app": app}
        if tier:
            labels["tier"] = tier
        write_file(t.path("manifests", "p%d.json" % i),
                   pod_json("p%d" % i, namespace="ns%d" % (i % 2), labels=labels))
    want = [pn("p%d" % i) for i in range(5)]
    wait_names(d, want)
    lst = get_ok(d, "/api/v1/pods")
    assert lst["kind"] == "PodList" and int(lst["metadata"]["resourceVersion"]) > 0
    for p in lst["items"]:
        assert p["kind"] == "Pod" and p["apiVersion"] == "v1"
        assert int(p["metadata"]["resourceVersion"]) <= int(lst["metadata"]["resourceVersion"])
    cases = {
        "app=web": [0, 1, 4], "app==web": [0, 1, 4], "app!=web": [2, 3],
        "app+in+(db,cache)": [2, 3], "app+notin+(db,cache)": [0, 1, 4],
        "tier": [0, 1, 2, 4], "!tier": [3], "app=web,tier=fe": [0, 4],
    }
    for q, idx in cases.items():
        got = names(get_ok(d, "/api/v1/pods?labelSelector=" + q))
        assert got == sorted(pn("p%d" % i) for i in idx), (q, got)
    got = names(get_ok(d, "/api/v1/namespaces/ns1/pods"))
    assert got == [pn("p1"), pn("p3")], got
    got = names(get_ok(d, "/api/v1/pods?fieldSelector=metadata.name%3D" + pn("p2")))
    assert got == [pn("p2")], got
    got = names(get_ok(d, "/api/v1/pods?fieldSelector=metadata.namespace!%3Dns1,status.phase%3DPending"))
    assert got == [pn("p0"), pn("p2"), pn("p4")], got
    got = names(get_ok(d, "/api/v1/pods?fieldSelector=spec.nodeName%3D" + harness.NODE))
    assert got == sorted(want), got
    p = get_ok(d, "/api/v1/namespaces/ns0/pods/" + pn("p2"))
    assert p["metadata"]["name"] == pn("p2") and p["kind"] == "Pod"
    # Paging: pages of 2, every pod once, one version for all pages.
    seen, cont, rvs = [], None, set()
    while True:
        q = "/api/v1/pods?limit=2" + ("&continue=" + cont if cont else "")
        page = get_ok(d, q)
        assert len(page["items"]) <= 2
        seen += [x["metadata"]["name"] for x in page["items"]]
        rvs.add(page["metadata"]["resourceVersion"])
        cont = page["metadata"].get("continue")
        if not cont:
            break
        assert page["metadata"]["remainingItemCount"] > 0
    assert sorted(seen) == sorted(want) and len(seen) == 5, seen
    assert len(rvs) == 1, rvs
    # kubectl's limit=500 is one page.
    assert "continue" not in get_ok(d, "/api/v1/pods?limit=500")["metadata"]


@test("list: resourceVersion and resourceVersionMatch as the API server takes them")
def test_list_versions(t):
    d = kube_daemon(t)
    manifest(t, "a")
    wait_names(d, [pn("a")])
    rv = int(get_ok(d, "/api/v1/pods")["metadata"]["resourceVersion"])
    for q in ("resourceVersion=0", "resourceVersion=%d" % rv,
              "resourceVersion=%d&resourceVersionMatch=NotOlderThan" % (rv - 5),
              "resourceVersion=%d&resourceVersionMatch=Exact" % rv):
        assert names(get_ok(d, "/api/v1/pods?" + q)) == [pn("a")], q
    status, hdrs, body = request(d, "/api/v1/pods?resourceVersion=%d" % (rv + 1000))
    assert status == 504 and body["reason"] == "Timeout", body
    status, _, body = request(d, "/api/v1/pods?resourceVersionMatch=Exact")
    assert status == 422 and body["reason"] == "Invalid", body
    status, _, body = request(d, "/api/v1/pods?resourceVersion=%d&resourceVersionMatch=Exact" % (rv - 1))
    assert status == 410 and body["reason"] == "Expired", body
    status, _, body = request(d, "/api/v1/pods?resourceVersion=abc")
    assert status == 400, body
    # The list options the API server refuses, as it refuses them.
    status, _, body = request(d, "/api/v1/pods?resourceVersion=%d&continue=x" % rv)
    assert status == 400 and body["reason"] == "BadRequest", body
    assert body["message"] == "specifying resource version is not allowed when using continue", body
    status, _, body = request(d, "/api/v1/pods?resourceVersion=0&resourceVersionMatch=NotOlderThan&continue=x")
    assert status == 422 and "forbidden when continue is provided" in body["message"], body
    for v in ("true", "false"):
        status, _, body = request(d, "/api/v1/pods?sendInitialEvents=" + v)
        assert status == 422 and "sendInitialEvents is forbidden for list" in body["message"], (v, body)
    status, _, body = request(d, "/api/v1/pods?resourceVersion=00&continue=x")
    assert status == 400 and body["reason"] == "BadRequest", body
    status, _, body = request(d, "/api/v1/pods?timeoutSeconds=abc")
    assert status == 400 and body["reason"] == "BadRequest", body
    for v in ("5", "%2B5", "-1"):
        assert names(get_ok(d, "/api/v1/pods?timeoutSeconds=" + v)) == [pn("a")], v
    # A read's body is ignored, as the API server ignores it.
    status, _, body = request(d, "/api/v1/pods", body=b'{"x":1}')
    assert status == 200 and names(body) == [pn("a")], (status, body)
    # A watch of one pod by a name a field selector would have to escape.
    for name in ("a%5C", "a%3Db", "a%2Cb"):
        w = Watch(d, "timeoutSeconds=1", base="/api/v1/namespaces/default/pods/" + name)
        assert w.status == 200 and w.rest() == [], name
        w.close()


@test("boolean parameters as the API server decodes them: absent, 0 or false (in any case) is false; "
      "any other value is true, an empty one too")
def test_boolean_params(t):
    d = kube_daemon(t)
    manifest(t, "a")
    wait_names(d, [pn("a")])
    for spelling in ("watch", "watch=", "watch=yes", "watch=TRUE", "watch=1"):
        w = Watch(d, "timeoutSeconds=5&allowWatchBookmarks=on", watch=spelling)
        assert w.status == 200, spelling
        assert summary(w.until(1)) == ["ADDED " + pn("a")], spelling
        w.close()
    for spelling in ("watch=0", "watch=false", "watch=FaLsE", "WATCH=1", "Watch"):
        assert get_ok(d, "/api/v1/pods?" + spelling)["kind"] == "PodList", spelling
    # A parameter's name is matched exactly, as the API server matches it.
    assert names(get_ok(d, "/api/v1/pods?LabelSelector=app%3Dnone")) == [pn("a")]
    assert names(get_ok(d, "/api/v1/pods?labelSelector=app%3Dnone")) == []
    # A get of one pod, and no bookmarks with allowWatchBookmarks=0.
    assert get_ok(d, "/api/v1/namespaces/default/pods/%s?watch=false" % pn("a"))["kind"] == "Pod"
    w = Watch(d, "resourceVersion=0&timeoutSeconds=1&allowWatchBookmarks=0")
    assert [e["type"] for e in w.rest()] == ["ADDED"]
    w.close()


@test("watch: add, modify, delete in order, each with its own increasing version")
def test_watch_order(t):
    d = kube_daemon(t)
    wait_ready(d)
    rv = get_ok(d, "/api/v1/pods")["metadata"]["resourceVersion"]
    w = Watch(d, "resourceVersion=" + rv)
    assert w.status == 200
    manifest(t, "a", uid="uid-a", labels={"v": "1"})
    manifest(t, "b", uid="uid-b")
    ev = w.until(2)
    manifest(t, "a", uid="uid-a", labels={"v": "2"})
    ev += w.until(1)
    os.unlink(t.path("manifests", "b.json"))
    ev += w.until(1)
    got = summary(ev)
    assert sorted(got[:2]) == sorted(["ADDED " + pn("a"), "ADDED " + pn("b")]), got
    assert got[2:] == ["MODIFIED " + pn("a"), "DELETED " + pn("b")], got
    assert ev[2]["object"]["metadata"]["labels"] == {"v": "2"}
    rvs = [rv_of(e) for e in ev]
    assert rvs == sorted(set(rvs)) and rvs[0] > int(rv), rvs
    # The served object carries the version of its last event.
    p = get_ok(d, "/api/v1/namespaces/default/pods/" + pn("a"))
    assert int(p["metadata"]["resourceVersion"]) == rvs[2]
    w.close()


@test("watch: a UID change is DELETED then ADDED; a rename is DELETED old, ADDED new")
def test_watch_identity(t):
    d = kube_daemon(t)
    manifest(t, "a")                      # UID from the content
    manifest(t, "r")
    wait_names(d, [pn("a"), pn("r")])
    rv = get_ok(d, "/api/v1/pods")["metadata"]["resourceVersion"]
    old_uid = get_ok(d, "/api/v1/namespaces/default/pods/" + pn("a"))["metadata"]["uid"]
    w = Watch(d, "resourceVersion=" + rv)
    manifest(t, "a", image="nginx:2")     # edited without a uid: a new UID
    ev = w.until(2)
    assert summary(ev) == ["DELETED " + pn("a"), "ADDED " + pn("a")], summary(ev)
    assert ev[0]["object"]["metadata"]["uid"] == old_uid
    assert ev[1]["object"]["metadata"]["uid"] != old_uid
    # Renamed in its file.  (The merger keeps a stored pod's name on an
    # UPDATE, so the one-UPDATE rename is the view's unit test's.)
    write_file(t.path("manifests", "r.json"), pod_json("r2", namespace="default"))
    ev = w.until(2)
    assert summary(ev) == ["DELETED " + pn("r"), "ADDED " + pn("r2")], summary(ev)
    assert rv_of(ev[1]) > rv_of(ev[0])
    w.close()


@test("watch: bookmarks when asked for, and timeoutSeconds ends the watch cleanly after a last bookmark")
def test_watch_bookmarks_timeout(t):
    d = kube_daemon(t, env={"PODMUX_KUBE_API_BOOKMARK_INTERVAL": "200ms"})
    manifest(t, "a")
    wait_names(d, [pn("a")])
    rv = get_ok(d, "/api/v1/pods")["metadata"]["resourceVersion"]
    w = Watch(d, "resourceVersion=%s&allowWatchBookmarks=true&timeoutSeconds=2" % rv)
    ev = w.rest()                         # ends by itself
    marks = [e for e in ev if e["type"] == "BOOKMARK"]
    assert len(marks) >= 2 and len(marks) == len(ev), summary(ev)
    for m in marks:
        o = m["object"]
        assert o["kind"] == "Pod" and list(o["metadata"]) == ["resourceVersion"], o
        assert int(o["metadata"]["resourceVersion"]) >= int(rv)
    # Without allowWatchBookmarks: none, and the end is as clean.
    w = Watch(d, "resourceVersion=%s&timeoutSeconds=1" % rv)
    assert w.rest() == []


@test("watch: without timeoutSeconds it ends after the server's own time (--kube-api-min-request-timeout)")
def test_watch_server_timeout(t):
    d = kube_daemon(t, extra=["--kube-api-min-request-timeout", "1s"])
    wait_ready(d)
    rv = get_ok(d, "/api/v1/pods")["metadata"]["resourceVersion"]
    w = Watch(d, "resourceVersion=" + rv)
    assert w.rest() == []


@test("watch: a version older than the history, or from another run, gets 200 then an ERROR 410; the latest never does")
def test_watch_expired(t):
    d = kube_daemon(t, extra=["--kube-api-history", "2"])
    manifest(t, "a", uid="uid-a")
    wait_names(d, [pn("a")])
    rv0 = get_ok(d, "/api/v1/pods")["metadata"]["resourceVersion"]
    for v in range(3):
        manifest(t, "a", uid="uid-a", labels={"v": str(v)})
        harness.wait_for(lambda: get_ok(d, "/api/v1/namespaces/default/pods/" + pn("a"))
                         ["metadata"].get("labels") == {"v": str(v)}, T_WAIT, "change %d" % v)
    for q in ("resourceVersion=" + rv0, "resourceVersion=5"):
        w = Watch(d, q)
        assert w.status == 200
        ev = w.rest()
        assert len(ev) == 1 and ev[0]["type"] == "ERROR", summary(ev)
        st = ev[0]["object"]
        assert st["kind"] == "Status" and st["code"] == 410 and st["reason"] == "Expired", st
    latest = get_ok(d, "/api/v1/pods")["metadata"]["resourceVersion"]
    w = Watch(d, "resourceVersion=" + latest)
    manifest(t, "a", uid="uid-a", labels={"v": "last"})
    ev = w.until(1)
    assert summary(ev) == ["MODIFIED " + pn("a")], summary(ev)
    w.close()


@test("a daemon restart: versions go on growing, and a watch from a version of the earlier run gets 410")
def test_restart(t):
    d = kube_daemon(t)
    manifest(t, "a")
    wait_names(d, [pn("a")])
    before = get_ok(d, "/api/v1/pods")["metadata"]["resourceVersion"]
    d.restart()
    harness.wait_listening(d.kube, d.assert_alive)
    wait_ready(d)
    wait_names(d, [pn("a")])
    after = get_ok(d, "/api/v1/pods")["metadata"]["resourceVersion"]
    assert int(after) > int(before), (before, after)
    w = Watch(d, "resourceVersion=" + before)
    ev = w.rest()
    assert [e["type"] for e in ev] == ["ERROR"] and ev[0]["object"]["code"] == 410, summary(ev)


@test("WatchList: initial ADDED events, the annotated bookmark with the list blueprint, then live changes")
def test_watchlist(t):
    d = kube_daemon(t)
    manifest(t, "a")
    manifest(t, "b")
    wait_names(d, [pn("a"), pn("b")])
    w = Watch(d, "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true")
    ev = w.until(3)
    assert summary(ev[:2]) == ["ADDED " + pn("a"), "ADDED " + pn("b")], summary(ev)
    mark = ev[2]
    assert mark["type"] == "BOOKMARK", summary(ev)
    ann = mark["object"]["metadata"]["annotations"]
    assert ann["k8s.io/initial-events-end"] == "true", ann
    blueprint = json.loads(base64.b64decode(ann["kubernetes.io/initial-events-list-blueprint"]))
    assert blueprint["kind"] == "PodList" and blueprint["items"] == [], blueprint
    assert rv_of(mark) >= max(rv_of(e) for e in ev[:2])
    w.close()
    # A watch from "" or "0" also starts with the state, but its bookmarks
    # (here the last one, at its timeout) carry no annotation.
    for q in ("resourceVersion=0&allowWatchBookmarks=true&timeoutSeconds=1",
              "allowWatchBookmarks=true&timeoutSeconds=1"):
        ev = Watch(d, q).rest()
        assert summary(ev[:2]) == ["ADDED " + pn("a"), "ADDED " + pn("b")], (q, summary(ev))
        assert ev[2:] and all(e["type"] == "BOOKMARK" for e in ev[2:]), (q, summary(ev))
        assert not any(e["object"]["metadata"].get("annotations") for e in ev[2:]), (q, ev[2:])
    w = Watch(d, "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true")
    w.until(3)
    manifest(t, "c")
    ev = w.until(1, not_bookmark)
    assert summary(ev) == ["ADDED " + pn("c")], summary(ev)
    w.close()
    # From a version above the current one: 200, then the 504 as an
    # ERROR event, as the API server's watch cache answers it.
    rv = int(get_ok(d, "/api/v1/pods")["metadata"]["resourceVersion"])
    w = Watch(d, "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
              "&resourceVersion=%d" % (rv + 1000))
    ev = w.rest()
    assert w.status == 200 and [e["type"] for e in ev] == ["ERROR"], summary(ev)
    st = ev[0]["object"]
    assert st["code"] == 504 and st["reason"] == "Timeout", st
    assert st["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge", st
    w.close()
    # Without bookmarks, sendInitialEvents is refused as the API server does.
    status, _, body = request(d, "/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan")
    assert status == 422 and body["reason"] == "Invalid", body


@test("watch with selectors: a change out of the selector is DELETED, into it ADDED; a namespace watch")
def test_watch_selectors(t):
    d = kube_daemon(t)
    manifest(t, "a", uid="uid-a", labels={"app": "web"})
    wait_names(d, [pn("a")])
    rv = get_ok(d, "/api/v1/pods")["metadata"]["resourceVersion"]
    w = Watch(d, "labelSelector=app%3Dweb&resourceVersion=" + rv, base="/api/v1/namespaces/default/pods")
    manifest(t, "a", uid="uid-a", labels={"app": "db"})
    ev = w.until(1)
    manifest(t, "a", uid="uid-a", labels={"app": "web"})
    ev += w.until(1)
    assert summary(ev) == ["DELETED " + pn("a"), "ADDED " + pn("a")], summary(ev)
    w.close()


@test("503 with Retry-After until every source has delivered; then the API server's pods are served and watched")
def test_not_before_sources(t):
    srv = FakeAPI(t)
    try:
        srv.create("api1", labels={"src": "api"})
        srv.stop()
        kc = apitls.simple_kubeconfig(t.path("kubeconfig"), srv.url)
        d = kube_daemon(t, extra=["--kubeconfig", kc])
        for path in ("/api/v1/pods", "/api/v1/pods?watch=1", "/api/v1/namespaces/default/pods/x"):
            status, hdrs, body = request(d, path)
            assert status == 503 and hdrs.get("Retry-After") == "1", (path, status, hdrs)
            assert body["reason"] == "ServiceUnavailable", body
        assert get_ok(d, "/api")["versions"] == ["v1"]      # discovery is served
        srv.start()
        wait_ready(d)
        wait_names(d, ["api1"])
        rv = get_ok(d, "/api/v1/pods")["metadata"]["resourceVersion"]
        w = Watch(d, "resourceVersion=" + rv)
        srv.label("api1", src="api", v="2")
        srv.create("api2")
        ev = w.until(2)
        assert summary(ev) == ["MODIFIED api1", "ADDED api2"], summary(ev)
        srv.delete("api1")
        ev = w.until(1)
        assert summary(ev) == ["DELETED api1"], summary(ev)
        p = get_ok(d, "/api/v1/namespaces/default/pods/api2")
        anns = p["metadata"]["annotations"]
        assert anns["kubernetes.io/config.source"] == "api"
        assert "podmux.dev/source-resource-version" in anns, anns
        w.close()
    finally:
        srv.close()


@test("served from the API source's checkpoint while the API server is unreachable (no sources_ready)")
def test_checkpoint_served(t):
    srv = FakeAPI(t)
    try:
        srv.create("api1")
        kc = apitls.simple_kubeconfig(t.path("kubeconfig"), srv.url)
        ckpt = t.path("ckpt")
        d = kube_daemon(t, extra=["--kubeconfig", kc, "--checkpoint-dir", ckpt])
        wait_names(d, ["api1"])
        harness.wait_for(lambda: os.path.exists(os.path.join(ckpt, "api.checkpoint")), T_WAIT, "the checkpoint")
        d.stop()                          # a clean stop writes it whole
        srv.stop()
        d.start()
        harness.wait_listening(d.kube, d.assert_alive)
        wait_names(d, ["api1"])           # 200: the checkpoint counts as delivered
    finally:
        srv.close()


@test("--allow-uids: a user not listed gets 403 Forbidden")
def test_allow_uids(t):
    if os.geteuid() != 0:
        t.skip("needs root to run a client as another user")
    os.chmod(t.path(), 0o755)
    d = kube_daemon(t, extra=["--allow-uids", "4242", "--socket-mode", "0666"])
    wait_ready(d)
    code = ("import http.client,socket,sys\n"
            "c=http.client.HTTPConnection('x')\n"
            "s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); c.sock=s\n"
            "c.request('GET','/api/v1/pods'); print(c.getresponse().status)\n")

    def run_as(uid):
        def drop():
            os.setgroups([])
            os.setgid(65534)
            os.setuid(uid)
        return subprocess.run([sys.executable, "-c", code, d.kube], preexec_fn=drop,
                              capture_output=True, text=True, timeout=30).stdout.strip()
    assert run_as(65534) == "403"
    assert run_as(4242) == "200"


if __name__ == "__main__":
    harness.main()
