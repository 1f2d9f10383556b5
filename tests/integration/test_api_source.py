#!/usr/bin/env python3
"""Integration tests of the API server source (doc/api-source.md,
doc/pod-config.md sections 3.6 and 8), run against the real podmux binary
and scripts/fake-apiserver (driven through tests/integration/fakeapi.py).

What is checked: the wire protocol (the exact queries of list, continue and
watch; how the client reacts to every error, framing fault and dropped
connection: the conformance checklist of section 11), what the consumer
sees (ADD/UPDATE/DELETE/REMOVE/RECONCILE from source api, always converging
to the server's true set of this node's pods), authentication and TLS,
kubeconfig variants and errors, in-cluster settings, and all three sources
together.  How a watch ends and what follows (410s, resets, garbage, hung
watches, failed lists, Retry-After) is tested in test_api_watch.py, so
that the two halves run together under make -j; the helpers both use are
in api_harness.py.  The fake server itself is checked against real clients (kubectl
and Debian's python3-kubernetes) so that what it serves is what a real API
server serves.

Timing: nothing asserts speed.  Bounds are generous failure limits; the
only lower bounds asserted are the Retry-After waits doc/api-source.md 7.2 requires.
Backoff gaps are recorded as notes.  The hung-server test (test_api_watch.py) takes about 30 s
(the daemon's response-header deadline); the known-slow test of token
rotation without a 401 (about a minute) runs only with PODMUX_SLOW_TESTS=1.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import apitls  # noqa: E402
import harness  # noqa: E402
from api_harness import (  # noqa: E402
    SLOW, SOURCE_ANN, SYS_PYTHON, api_daemon, api_pods, api_test,
    check_annotations, converge, expect_whole_first_push, last_rv,
    note_gaps, plain_kubeconfig, pods_reqs, rv_of, server, setup,
    watch_param_ok
)
from fakeapi import FakeAPI, describe  # noqa: E402
from harness import (  # noqa: E402
    NODE, T_SHORT, T_WAIT, check_sources, msg_names, msg_uids,
    open_for_a_second, pn, pod_ann, pod_labels, pod_name, pod_uid,
    pod_yaml, quiet, summarize, write_file
)

# ===========================================================================
# The fake server against real clients, and its own wire behaviour

def find_kubectl():
    k = shutil.which("kubectl")
    if k:
        return k
    k = os.path.join(harness.SRCDIR, "build", "test-tools", "usr", "bin",
                     "kubectl")
    return k if os.access(k, os.X_OK) else None


def tls_server(t, **kw):
    pki = apitls.copy_pki(t.path("pki"))
    return server(t, tls=True, pki=pki, **kw), pki


@api_test("fake-apiserver against kubectl: get pods -A (token over TLS, "
          "then a client certificate), get -w sees create/status/delete")
def test_fake_apiserver_against_kubectl_get_pods(t):
    kubectl = find_kubectl()
    if not kubectl:
        t.skip("no kubectl (scripts/deps-test-tools installs Debian's "
               "kubernetes-client)")
    srv, pki = tls_server(t, tokens=["kubectl-tok"], client_ca=True,
                          client_cert="optional")
    srv.create("web", labels={"app": "web"})
    srv.create("db", node="node2", namespace="kube-system")
    kc = apitls.simple_kubeconfig(
        t.path("kube", "token.yaml"), srv.url,
        cluster={"certificate-authority-data": apitls.b64file(pki["ca.crt"])},
        user={"token": "kubectl-tok"})
    shutil.copytree(t.path("pki"), t.path("kube", "pki"))
    kc_cert = apitls.simple_kubeconfig(
        t.path("kube", "cert.yaml"), srv.url,
        cluster={"certificate-authority": "pki/ca.crt"},
        user={"client-certificate": "pki/client.crt",
              "client-key": "pki/client.key"})
    env = dict(os.environ, HOME=t.tmp, KUBECONFIG="")
    env.pop("KUBECONFIG")

    def run(*args):
        p = subprocess.run([kubectl] + list(args), capture_output=True,
                           text=True, timeout=60, env=env)
        t.note("kubectl %s -> %d: %s %s" % (" ".join(args), p.returncode,
                                            p.stdout[-500:], p.stderr[-300:]))
        return p
    for kcf, auth in ((kc, "token:0"), (kc_cert, "cert")):
        mark = srv.last_id()
        p = run("--kubeconfig", kcf, "get", "pods", "-A", "-o", "wide")
        if p.returncode != 0:
            raise AssertionError("kubectl get pods -A failed: %s" % p.stderr)
        rows = [ln.split() for ln in p.stdout.splitlines()[1:]]
        got = sorted((r[0], r[1], r[3]) for r in rows)
        if got != [("default", "web", "Pending"),
                   ("kube-system", "db", "Pending")]:
            raise AssertionError("kubectl listed %s" % got)
        auths = {r.get("auth") for r in srv.requests(mark)}
        if auths != {auth}:
            raise AssertionError("requests authenticated as %s, want %s" %
                                 (auths, auth))
    p = run("--kubeconfig", kc, "get", "pods", "-A", "--field-selector",
            "spec.nodeName=node1", "-o", "name")
    if p.stdout.split() != ["pod/web"]:
        raise AssertionError("field selector: %r" % p.stdout)
    w = subprocess.Popen([kubectl, "--kubeconfig", kc, "get", "pods", "-A",
                          "-w"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env)
    t.procs.append(w)
    try:
        mark = srv.last_id()
        srv.wait_request(lambda r: r["kind"] == "watch" and
                         r.get("outcome") == "open", "kubectl's watch", mark)
        srv.create("late")
        srv.status("late", {"phase": "Running"})
        srv.delete("web", grace=30)
        srv.delete("web")
        deadline = time.monotonic() + T_WAIT
        seen = []
        os.set_blocking(w.stdout.fileno(), False)
        buf = b""
        while time.monotonic() < deadline:
            chunk = w.stdout.read() or b""
            buf += chunk
            seen = [ln.split() for ln in buf.decode().splitlines()]
            if any(r[:2] == ["default", "late"] and "Running" in r
                   for r in seen) and sum(
                       1 for r in seen if r[:2] == ["default", "web"]) >= 3:
                break
            time.sleep(0.1)   # a poll's interval
        t.note("kubectl -w printed: %r" % buf.decode()[-800:])
        if not any(r[:2] == ["default", "late"] and "Running" in r
                   for r in seen):
            raise AssertionError("kubectl -w did not show late Running")
        if not any(r[:2] == ["default", "web"] and "Terminating" in r
                   for r in seen):
            raise AssertionError("kubectl -w did not show web Terminating")
    finally:
        w.kill()
        w.wait()
    wreq = [r for r in srv.requests(kind="watch")]
    if not wreq or wreq[-1]["headers"].get("user-agent", "").split("/")[0] \
            != "kubectl":
        raise AssertionError("no watch from kubectl in the log")


PYCLIENT = r'''
import json, sys
from kubernetes import client, config, watch
config.load_kube_config(config_file=sys.argv[1])
v1 = client.CoreV1Api()
lst = v1.list_pod_for_all_namespaces(field_selector="spec.nodeName=node1")
print(json.dumps({"list": sorted(p.metadata.namespace + "/" + p.metadata.name
                                 for p in lst.items),
                  "rv": lst.metadata.resource_version}), flush=True)
w = watch.Watch()
for ev in w.stream(v1.list_pod_for_all_namespaces,
                   field_selector="spec.nodeName=node1",
                   resource_version=lst.metadata.resource_version,
                   timeout_seconds=int(sys.argv[2])):
    o = ev["object"]
    print(json.dumps({"type": ev["type"], "name": o.metadata.name,
                      "rv": o.metadata.resource_version,
                      "phase": o.status.phase if o.status else None}),
          flush=True)
    if ev["type"] == "DELETED" and o.metadata.name == "b1":
        w.stop()
print(json.dumps({"done": True}), flush=True)
'''


@api_test("fake-apiserver against python3-kubernetes: "
          "list_pod_for_all_namespaces(field_selector) and "
          "watch.Watch().stream(), with a client certificate",
          params=("client-cert", "token"))
def test_fake_apiserver_against_python3_kubernetes_list(t):
    probe = subprocess.run([SYS_PYTHON, "-c", "import kubernetes"],
                           capture_output=True)
    if probe.returncode != 0:
        t.skip("python3-kubernetes is not installed for %s "
               "(scripts/deps-test-tools installs it)" % SYS_PYTHON)
    if t.param == "client-cert":
        srv, pki = tls_server(t, client_ca=True)
        user = {"client-certificate-data": apitls.b64file(pki["client.crt"]),
                "client-key-data": apitls.b64file(pki["client.key"])}
        want_auth = "cert"
    else:
        srv, pki = tls_server(t, tokens=["py-tok"])
        user = {"token": "py-tok"}
        want_auth = "token:0"
    kc = apitls.simple_kubeconfig(
        t.path("kubeconfig"), srv.url,
        cluster={"certificate-authority": pki["ca.crt"]}, user=user)
    srv.create("a1")
    srv.create("x1", node="node2")
    script = t.path("pyclient.py")
    with open(script, "w") as f:
        f.write(PYCLIENT)
    p = subprocess.Popen([SYS_PYTHON, script, kc, "20"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=dict(os.environ, HOME=t.tmp))
    t.procs.append(p)
    import select
    if not select.select([p.stdout], [], [], T_WAIT)[0]:
        raise AssertionError("the python client printed nothing in %.0f s" %
                             T_WAIT)
    first = json.loads(p.stdout.readline().decode() or "{}")
    if first.get("list") != ["default/a1"]:
        raise AssertionError("python client listed %s; stderr %s" % (
            first, p.stderr.read()[-600:] if p.poll() is not None else ""))
    srv.wait_request(lambda r: r["kind"] == "watch" and
                     r.get("outcome") == "open", "the python client's watch")
    srv.create("b1")
    srv.create("x2", node="node2")
    srv.status("b1", {"phase": "Running"})
    srv.delete("b1")
    try:
        out, err = p.communicate(timeout=T_WAIT)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    evs = [json.loads(x) for x in out.decode().splitlines() if x.strip()]
    t.note("python client: %s; stderr: %s" % (evs, err.decode()[-400:]))
    got = [(e["type"], e["name"]) for e in evs if "type" in e]
    if got != [("ADDED", "b1"), ("MODIFIED", "b1"), ("DELETED", "b1")]:
        raise AssertionError("python client's watch saw %s" % got)
    if evs[1].get("phase") != "Running" or not evs[-1].get("done"):
        raise AssertionError("unexpected python client output %s" % evs)
    auths = {r.get("auth") for r in srv.requests(kind=("list", "watch"))}
    if auths != {want_auth}:
        raise AssertionError("python client authenticated as %s" % auths)


def raw_request(srv, target, headers=None, read_for=1.0, ca=None):
    """One GET over a raw (TLS) socket; returns (status line, headers,
    [chunk payloads], body bytes, how it ended)."""
    import socket
    import ssl
    s = socket.create_connection((srv.host, srv.port), timeout=5)
    if srv.tls:
        ctx = ssl.create_default_context(cafile=ca)
        s = ctx.wrap_socket(s, server_hostname="127.0.0.1")
    h = {"Host": "127.0.0.1", "Accept": "application/json"}
    h.update(headers or {})
    req = "GET %s HTTP/1.1\r\n%s\r\n" % (target, "".join(
        "%s: %s\r\n" % kv for kv in h.items()))
    s.sendall(req.encode())
    data = b""
    end = "timeout"
    deadline = time.monotonic() + read_for
    s.settimeout(0.05)
    while time.monotonic() < deadline:
        try:
            d = s.recv(65536)
        except OSError as e:
            if "timed out" in str(e):
                continue
            end = "reset" if "reset" in str(e).lower() else "error"
            break
        if not d:
            end = "eof"
            break
        data += d
        if _complete(data):
            end = "complete"
            break
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    hdrs = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    chunks = []
    if hdrs.get("transfer-encoding") == "chunked":
        rest = body
        while rest:
            size_line, sep, rest = rest.partition(b"\r\n")
            if not sep:
                break
            n = int(size_line, 16)
            if n == 0:
                break
            chunks.append(rest[:n])
            rest = rest[n + 2:]
    return lines[0] if lines else "", hdrs, chunks, body, end


def _complete(data):
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        return False
    if re.search(rb"(?i)transfer-encoding: chunked", head):
        return body == b"0\r\n\r\n" or body.endswith(b"\r\n0\r\n\r\n")
    m = re.search(rb"(?i)content-length: (\d+)", head)
    return bool(m) and len(body) >= int(m.group(1))


@api_test("fake-apiserver wire self-check: selectors, paging, RV rules, "
          "410 after compaction, framing modes, faults, auth")
def test_fake_apiserver_wire_self_check_selectors(t):
    srv = server(t, tokens=["tk-secret-xyz"])
    auth = {"Authorization": "Bearer tk-secret-xyz"}
    for i in range(5):
        srv.create("p%d" % i)
    srv.create("q", node="node2")
    fs = "fieldSelector=spec.nodeName%3Dnode1"

    def get(target, **kw):
        kw.setdefault("headers", auth)
        return raw_request(srv, target, **kw)
    st, h, _, body, _ = get("/api/v1/pods?" + fs, headers={})
    assert " 401 " in st, st
    st, h, _, body, _ = get("/api/v1/pods?fieldSelector=foo%3Dbar")
    assert " 400 " in st and b"field label not supported" in body, body
    st, h, _, body, _ = get("/api/v1/pods?%s&limit=2&resourceVersion=0" % fs)
    page = json.loads(body)
    assert [i["metadata"]["name"] for i in page["items"]] == ["p0", "p1"]
    tok = page["metadata"]["continue"]
    assert page["metadata"]["remainingItemCount"] == 3
    st, h, _, body, _ = get("/api/v1/pods?%s&limit=2&continue=%s&"
                            "resourceVersion=5" % (fs, tok))
    assert " 400 " in st, st
    st, h, _, body, _ = get("/api/v1/pods?%s&limit=2&continue=%s" % (fs, tok))
    assert [i["metadata"]["name"] for i in json.loads(body)["items"]] == \
        ["p2", "p3"]
    srv.cmd("expire_continue")
    st, h, _, body, _ = get("/api/v1/pods?%s&limit=2&continue=%s" % (fs, tok))
    assert " 410 " in st and json.loads(body)["reason"] == "Expired", body
    rv_before = srv.rv()
    srv.patch("p0", {"metadata": {"labels": {"x": "1"}}})
    srv.compact()
    st, h, _, body, _ = get("/api/v1/pods?%s&limit=500&resourceVersion=%d"
                            % (fs, rv_before))
    assert " 410 " in st, st
    st, h, _, body, _ = get("/api/v1/pods?%s&resourceVersion=%d" % (
        fs, rv_before))
    assert " 200 " in st, st
    st, h, chunks, body, _ = get("/api/v1/pods?%s&watch=true&"
                                 "resourceVersion=%d" % (fs, rv_before))
    assert " 200 " in st and len(chunks) == 1, (st, chunks)
    ev = json.loads(chunks[0])
    assert ev["type"] == "ERROR" and ev["object"]["code"] == 410 and \
        ev["object"]["message"].startswith("too old resource version"), ev
    srv.config(too_large_wait=0.2)
    st, h, _, body, _ = get("/api/v1/pods?%s&resourceVersion=%d" % (
        fs, srv.rv() + 50))
    assert " 504 " in st and b"ResourceVersionTooLarge" in body, body
    # framing: one event per chunk, split, batch, trickle
    for mode, check in (
            ("normal", lambda c, n: len(c) == n),
            ("split", lambda c, n: len(c) == 3 * n),
            ("batch", lambda c, n: len(c) == 1),
            ("trickle", lambda c, n: all(len(x) == 1 for x in c))):
        srv.config(framing=mode)
        rv = srv.rv()
        srv.batch({"cmd": "patch", "name": "p1", "patch": {
            "metadata": {"labels": {"m": mode}}}},
            {"cmd": "patch", "name": "p2", "patch": {
                "metadata": {"labels": {"m": mode}}}})
        st, h, chunks, body, _ = get("/api/v1/pods?%s&watch=1&"
                                     "resourceVersion=%d&timeoutSeconds=1"
                                     % (fs, rv), read_for=3)
        evs = b"".join(chunks).splitlines()
        assert len(evs) == 2 and check(chunks, 2), (mode, len(chunks), evs)
        assert [json.loads(e)["type"] for e in evs] == ["MODIFIED"] * 2
    srv.config(framing="normal", bookmark_interval=0.3)
    st, h, chunks, body, _ = get("/api/v1/pods?%s&watch=true&"
                                 "allowWatchBookmarks=true&resourceVersion=%d"
                                 "&timeoutSeconds=1" % (fs, srv.rv()),
                                 read_for=3)
    evs = [json.loads(x) for x in b"".join(chunks).splitlines()]
    assert len(evs) >= 2 and all(e["type"] == "BOOKMARK" and e["object"][
        "metadata"]["resourceVersion"] == str(srv.rv()) for e in evs), evs
    srv.config(bookmark_interval=0)
    srv.create("p0", namespace="other", labels={"app": "x"})
    st, h, _, body, _ = get("/api/v1/namespaces/other/pods")
    assert [i["metadata"]["namespace"] for i in json.loads(body)[
        "items"]] == ["other"], body
    st, h, _, body, _ = get("/api/v1/pods?labelSelector=app%20in%20(x,y)")
    assert [i["metadata"]["name"] for i in json.loads(body)["items"]] == \
        ["p0"], body
    srv.fail(match="list", status=503, retry_after=3, body="html")
    st, h, _, body, _ = get("/api/v1/pods?" + fs)
    assert " 503 " in st and h.get("retry-after") == "3" and \
        body.startswith(b"<html>"), (st, h, body)
    reqs = srv.requests()
    assert all(r.get("headers", {}).get("authorization") in (
        None, "Bearer <present>") for r in reqs)
    assert "tk-secret-xyz" not in json.dumps(reqs)


# ===========================================================================
# Conformance: the wire

@api_test("first list is GET /api/v1/pods?fieldSelector=spec.nodeName%3D"
          "<node>&limit=500&resourceVersion=0; the watch carries watch, "
          "allowWatchBookmarks, the list RV and timeoutSeconds in [300, 600)")
def test_first_list_get_api_v1_pods(t):
    node = "node-1.example"
    srv, d, c = setup(t, pods=["web"], other=["db"], node=node)
    converge(c, srv, node=node)
    w = srv.wait_watch()
    reqs = pods_reqs(srv)
    first = reqs[0]
    if first["kind"] != "list" or first["path"] != "/api/v1/pods":
        raise AssertionError("first request %s %s" % (first["kind"],
                                                      first["path"]))
    want = ["fieldSelector=spec.nodeName%3Dnode-1.example", "limit=500",
            "resourceVersion=0"]
    got = first["query"].split("&")
    if sorted(got) != want:
        raise AssertionError("first list query %r, want %r" % (
            first["query"], "&".join(want)))
    if got != want:
        t.note("query parameters in another order than client-go's: %r" %
               first["query"])
    ua = first["headers"].get("user-agent", "")
    if not ua.startswith("podmux/"):
        raise AssertionError("User-Agent %r does not start with podmux/" % ua)
    if "application/json" not in first["headers"].get("accept", ""):
        raise AssertionError("Accept %r" % first["headers"].get("accept"))
    if reqs[1]["id"] != w["id"]:
        raise AssertionError("the request after the list is not the watch: "
                             "%s" % describe(reqs[1]))
    watch_param_ok(w, first["list_rv"], node=node)
    if w["path"] != "/api/v1/pods":
        raise AssertionError("watch path %s" % w["path"])
    if "fieldSelector=spec.nodeName%3Dnode-1.example" not in w["query"]:
        raise AssertionError("watch query not percent-encoded: %s" %
                             w["query"])
    c.assert_never_named(["db"])
    if w["headers"].get("user-agent") != ua:
        raise AssertionError("the watch's User-Agent differs: %r" %
                             w["headers"].get("user-agent"))


@api_test("empty initial list: an ADD with zero pods from source api, "
          "synced, sources_ready [\"api\"]")
def test_empty_initial_list_add_zero_pods(t):
    srv, d, c = setup(t, other=["elsewhere"])
    m = c.expect_type("sources_ready")
    if m.get("sources") != ["api"]:
        raise AssertionError("sources_ready %s" % summarize(m))
    marker = [x for x in c.pods_msgs() if x["op"] == "ADD" and
              x.get("source") == "api" and not x["pods"]]
    if not marker:
        raise AssertionError("no empty ADD marker from api: %s" %
                             [summarize(x) for x in c.msgs])
    c2 = d.connect()
    init = c2.read_initial()
    pods = [x for x in init if x["type"] == "pods"]
    if len(pods) != 1 or pods[0]["op"] != "ADD" or pods[0].get(
            "source") != "api" or pods[0]["pods"]:
        raise AssertionError("a late consumer's initial state: %s" %
                             [summarize(x) for x in init])
    nxt = c2.recv(T_SHORT)
    if nxt.get("type") != "sources_ready" or nxt.get("sources") != ["api"]:
        raise AssertionError("after synced: %s" % summarize(nxt))
    srv.create("first")
    c.expect_pods("ADD", names=["first"])
    if any(x["pods"] for x in c.pods_msgs() if x["op"] != "ADD"):
        raise AssertionError("unexpected messages: %s" % [
            summarize(x) for x in c.pods_msgs()])


@api_test("create/update/delete converge to the server's set of this "
          "node's pods; other nodes' pods are ignored; same name in two "
          "namespaces are two pods; pods pass through untouched")
def test_create_update_delete_converge_server_s(t):
    srv, d, c = setup(t, pods=["a", "b"], other=["x1"])
    c.expect_pods("ADD", names=["a", "b"])
    converge(c, srv)
    srv.create("c", labels={"tier": "db"},
               annotations={"example.com/note": "hi"})
    srv.create("x2", node="node2")
    srv.patch("x1", {"metadata": {"labels": {"moved": "no"}}})
    srv.create("web", namespace="default")
    srv.create("web", namespace="kube-system")
    converge(c, srv)
    webs = c.state.by_name("web")
    if sorted(p["metadata"]["namespace"] for p in webs) != [
            "default", "kube-system"]:
        raise AssertionError("two pods named web expected: %s" % webs)
    srv.delete("a")
    srv.delete("web", namespace="kube-system")
    converge(c, srv)
    c.assert_never_named(["x1", "x2"])
    check_annotations(c)
    check_sources(c, ("api",))
    for p in api_pods(c.state).values():
        anns = p["metadata"].get("annotations") or {}
        if "kubernetes.io/config.hash" in anns:
            raise AssertionError("api pods get no config.hash: %s" % anns)
        if p["spec"].get("tolerations"):
            raise AssertionError("api pods get no toleration: %s" %
                                 p["spec"])


@api_test("label or image change gives UPDATE; a status-only change gives "
          "RECONCILE (not UPDATE)")
def test_label_image_change_gives_update_status(t):
    srv, d, c = setup(t, pods=["web", "db"])
    converge(c, srv)
    start = len(c.msgs)
    srv.label("web", tier="front")
    m = c.expect_pods("UPDATE", names=["web"])
    if pod_labels(m["pods"][0]).get("tier") != "front":
        raise AssertionError("UPDATE without the new label: %s" %
                             m["pods"][0]["metadata"])
    srv.set_image("db", "redis:7.2")
    c.expect_pods("UPDATE", names=["db"])
    srv.status("web", {"phase": "Running", "podIP": "10.0.0.7"})
    m = c.expect_pods("RECONCILE", names=["web"])
    if m["pods"][0]["status"].get("podIP") != "10.0.0.7":
        raise AssertionError("RECONCILE without the new status: %s" %
                             m["pods"][0]["status"])
    srv.patch("db", {"metadata": {"annotations": {"example.com/a": "1"}}})
    c.expect_pods("UPDATE", names=["db"])
    converge(c, srv)
    ops = [(x["op"], msg_names(x)) for x in c.pods_msgs(start)]
    if ops != [("UPDATE", ["web"]), ("UPDATE", ["db"]),
               ("RECONCILE", ["web"]), ("UPDATE", ["db"])]:
        raise AssertionError("messages: %s" % ops)


@api_test("graceful delete: DELETE (deletionTimestamp set) while the pod "
          "terminates, then REMOVE when it is gone")
def test_graceful_delete_delete_deletiontimestamp_set_while(t):
    srv, d, c = setup(t, pods=["web", "keep"])
    converge(c, srv)
    uid = pod_uid(c.state.one("web"))
    srv.delete("web", grace=30)
    m = c.expect_pods("DELETE", names=["web"])
    p = m["pods"][0]
    if not p["metadata"].get("deletionTimestamp") or \
            p["metadata"].get("deletionGracePeriodSeconds") != 30:
        raise AssertionError("DELETE without deletionTimestamp/grace: %s" %
                             p["metadata"])
    converge(c, srv)
    srv.delete("web")
    c.expect_pods("REMOVE", uids=[uid])
    converge(c, srv)
    ops = [x["op"] for x in c.pods_msgs() if uid in msg_uids(x)]
    if ops != ["ADD", "DELETE", "REMOVE"]:
        raise AssertionError("ops for the pod: %s" % ops)


@api_test("same name re-created with a new uid: REMOVE(old uid) then "
          "ADD(new uid), both when the events come together and apart")
def test_same_name_re_created_new_uid(t):
    srv, d, c = setup(t, pods=["web"])
    converge(c, srv)
    old = pod_uid(c.state.one("web"))
    srv.batch({"cmd": "delete", "name": "web", "namespace": "default"},
              {"cmd": "create", "pod": FakeAPI.pod("web", image="nginx:2")})
    converge(c, srv)
    new = pod_uid(c.state.one("web"))
    if new == old:
        raise AssertionError("the uid did not change")
    srv.delete("web")
    srv.create("web", image="nginx:3")
    converge(c, srv)
    newer = pod_uid(c.state.one("web"))
    seq = [(x["op"], msg_uids(x)) for x in c.pods_msgs()]
    for a, b in ((old, new), (new, newer)):
        ir = [i for i, (op, us) in enumerate(seq) if op == "REMOVE" and
              a in us]
        ia = [i for i, (op, us) in enumerate(seq) if op == "ADD" and b in us]
        if not ir or not ia or ir[0] > ia[0]:
            raise AssertionError("want REMOVE(%s) before ADD(%s): %s" % (
                a[:8], b[:8], seq))
    if any(op in ("UPDATE", "DELETE") for op, _ in seq):
        raise AssertionError("a re-created pod is not an UPDATE: %s" % seq)


@api_test("paging: the client follows continue to the end with the same "
          "selector and limit and no resourceVersion; one push with every "
          "pod; the watch starts at the first page's RV")
def test_paging_client_follows_continue_end_same(t):
    srv = server(t)
    srv.config(page_size=2)
    names = ["p%d" % i for i in range(5)]
    for n in names:
        srv.create(n)
    for n in ("o1", "o2", "o3"):
        srv.create(n, node="node2")
    d = api_daemon(t, plain_kubeconfig(t, srv))
    c = d.connect()
    m = c.expect(lambda x: x.get("type") == "pods" and x.get("source") ==
                 "api", "the first api message")
    if m["op"] != "ADD" or msg_names(m) != names:
        raise AssertionError("first push must hold all 5 pods: %s" %
                             summarize(m))
    w = srv.wait_watch()
    reqs = pods_reqs(srv)
    kinds = [r["kind"] for r in reqs]
    if kinds[:4] != ["list", "continue", "continue", "watch"]:
        raise AssertionError("requests: %s" % [describe(r) for r in reqs])
    first = reqs[0]
    prev = first
    for r in reqs[1:3]:
        p = r["params"]
        if p.get("continue") != prev.get("continue"):
            raise AssertionError("continue %r is not the token the previous "
                                 "page returned (%r)" % (p.get("continue"),
                                                         prev.get(
                                                             "continue")))
        if "resourceVersion" in p:
            raise AssertionError("a continuation sent resourceVersion: %s" %
                                 r["query"])
        if p.get("limit") != "500" or p.get("fieldSelector") != \
                "spec.nodeName=" + NODE:
            raise AssertionError("continuation query %s" % r["query"])
        prev = r
    watch_param_ok(w, first["list_rv"])
    converge(c, srv)


@api_test("a continue token that expires mid-list: one full non-paged list "
          "(no limit, no continue, the RV first asked for)")
def test_continue_token_expires_mid_list_one(t):
    srv = server(t)
    srv.config(page_size=2)
    names = ["p%d" % i for i in range(5)]
    for n in names:
        srv.create(n)
    srv.fail(match="continue", status=410, count=1)
    d = api_daemon(t, plain_kubeconfig(t, srv))
    c = d.connect()
    m = c.expect(lambda x: x.get("type") == "pods" and x.get("source") ==
                 "api", "the first api message")
    if msg_names(m) != names:
        raise AssertionError("first push must hold all 5 pods: %s" %
                             summarize(m))
    srv.wait_watch()
    reqs = pods_reqs(srv)
    if [r["kind"] for r in reqs[:3]] != ["list", "continue", "list"] or \
            reqs[1]["status"] != 410:
        raise AssertionError("requests: %s" % [describe(r) for r in reqs])
    p = reqs[2]["params"]
    if "limit" in p or "continue" in p or p.get("resourceVersion") != "0":
        raise AssertionError("the fallback list must have no limit, no "
                             "continue and resourceVersion=0: %s" %
                             reqs[2]["query"])
    if reqs[2]["continue"]:
        raise AssertionError("the fake server paged the fallback list")
    converge(c, srv)


@api_test("an error on a continuation page abandons the whole list: no "
          "partial push; after backoff the list starts again")
def test_error_continuation_page_abandons_whole_list(t):
    srv = server(t)
    srv.config(page_size=2)
    names = ["p%d" % i for i in range(5)]
    for n in names:
        srv.create(n)
    srv.fail(match="continue", status=500, count=1)
    d = api_daemon(t, plain_kubeconfig(t, srv))
    c = d.connect()
    expect_whole_first_push(c, names)
    srv.wait_watch()
    reqs = pods_reqs(srv)
    if [r["kind"] for r in reqs[:3]] != ["list", "continue", "list"]:
        raise AssertionError("requests: %s" % [describe(r) for r in reqs])
    note_gaps(t, reqs[:3], "500 on a continuation")
    converge(c, srv)


@api_test("a list answered 200 that is cut half way, or has a byte no "
          "JSON has in its items, hands nothing on: the pods decoded before "
          "the fault are dropped, the error is logged, and the list after "
          "the backoff brings every pod",
          params=("cut", "garbage"))
def test_list_answered_200_cut_half_way(t):
    srv = server(t)
    names = ["p%02d" % i for i in range(40)]
    for n in names:
        srv.create(n, annotations={"example.com/pad": "x" * 400})
    srv.list_fault(t.param)
    d = api_daemon(t, plain_kubeconfig(t, srv))
    c = d.connect()
    expect_whole_first_push(c, names)
    lists = srv.requests(kind="list")
    if [r.get("fault") for r in lists[:2]] != [t.param, None]:
        raise AssertionError("lists: %s" % [describe(r) for r in lists])
    want = ("the response is not a PodList" if t.param == "garbage" else
            "list failed")
    d.wait_log(lambda x: want in x.msg, want)
    converge(c, srv)


@api_test("watch events split across chunks, batched in one chunk, "
          "trickled byte by byte or cut at random give the same store, with "
          "no relist and no re-watch",
          params=("split", "batch", "trickle", "mixed"))
def test_watch_events_split_across_chunks_batched(t):
    srv = server(t)
    srv.config(framing=t.param)
    srv.create("seed", annotations={"example.com/pad": "y" * 1500})
    d = api_daemon(t, plain_kubeconfig(t, srv))
    c = d.connect()
    converge(c, srv)
    srv.wait_watch()
    pod = FakeAPI.pod
    srv.batch({"cmd": "create", "pod": pod("b1")},
              {"cmd": "create", "pod": pod("b2", labels={"a": "b"})},
              {"cmd": "create", "pod": pod("x", node="node2")},
              {"cmd": "create", "pod": pod("b3", annotations={
                  "example.com/pad": "z" * 3000})})
    srv.batch({"cmd": "patch", "name": "b1", "patch": {
        "metadata": {"labels": {"v": "2"}}}},
        {"cmd": "status", "name": "b2", "status": {"phase": "Running"}},
        {"cmd": "delete", "name": "seed", "grace": 10})
    srv.batch({"cmd": "delete", "name": "seed"},
              {"cmd": "delete", "name": "b3"})
    converge(c, srv)
    harness.settle(0.5)   # a re-watch or relist by mistake would show
    reqs = pods_reqs(srv)
    if [r["kind"] for r in reqs] != ["list", "watch"]:
        raise AssertionError("framing %s made the client re-watch or "
                             "relist: %s" % (t.param, [describe(r)
                                                       for r in reqs]))
    ops = [x["op"] for x in c.pods_msgs()]
    for op in ("ADD", "UPDATE", "RECONCILE", "DELETE", "REMOVE"):
        if op not in ops:
            raise AssertionError("no %s among %s" % (op, ops))


# ===========================================================================
# Authentication, TLS, kubeconfig

@api_test("token file rotation: a 401 makes the client re-read the token "
          "file; the new token is used and the consumer converges")
def test_token_file_rotation_401_makes_client(t):
    srv, pki = tls_server(t, tokens=["tok-one"])
    kdir = t.mkdir("kube")
    shutil.copyfile(pki["ca.crt"], os.path.join(kdir, "ca.crt"))
    write_file(os.path.join(kdir, "token"), "tok-one\n")
    kc = apitls.simple_kubeconfig(
        os.path.join(kdir, "config"), srv.url,
        cluster={"certificate-authority": "ca.crt"},
        user={"tokenFile": "token"})
    srv.create("a")
    d = api_daemon(t, kc)
    c = d.connect()
    converge(c, srv)
    open_for_a_second(srv)
    write_file(os.path.join(kdir, "token"), "  tok-two\n")
    srv.set_tokens("tok-two")
    mark = srv.last_id()
    srv.action("close")
    srv.wait_request(lambda r: r.get("auth") == "token:0" and
                     r.get("status") == 200, "a request with the new token",
                     mark, timeout=40)
    srv.create("b")
    converge(c, srv, timeout=40)
    reqs = srv.requests(mark, kind=("list", "continue", "watch"))
    auths = [r.get("auth") for r in reqs]
    if "token:0" not in auths:
        raise AssertionError("the new token was never used: %s" % auths)
    if "token-mismatch" in auths:
        first_ok = auths.index("token:0")
        if any(a != "token:0" for a in auths[first_ok:]):
            raise AssertionError("the old token came back after the new "
                                 "one: %s" % auths)
    else:
        t.note("the client re-read the file before any 401: %s" % auths)


@api_test("a rotated token file is picked up within about a minute even "
          "without a 401 [known-slow]")
def test_rotated_token_file_picked_up_within(t):
    if not SLOW:
        t.skip("known-slow (about 60 s); run with PODMUX_SLOW_TESTS=1")
    srv = server(t, tokens=["tok-one", "tok-two"])
    write_file(t.path("token"), "tok-one")
    kc = plain_kubeconfig(t, srv, user={"tokenFile": t.path("token")})
    srv.create("a")
    d = api_daemon(t, kc)
    c = d.connect()
    converge(c, srv)
    write_file(t.path("token"), "tok-two")
    t0 = time.monotonic()
    mark = srv.last_id()
    deadline = t0 + 100 * harness.SCALE
    while time.monotonic() < deadline:
        if any(r.get("auth") == "token:1" for r in srv.requests(mark)):
            break
        try:
            open_for_a_second(srv, srv.last_id() - 5)
        except AssertionError:
            pass
        srv.action("close")
        time.sleep(3)   # a poll's interval: the loop's condition is the token
    else:
        raise AssertionError("the rotated token was not used within 100 s")
    t.note("new token used after %.0f s" % (time.monotonic() - t0))


@api_test("the token never appears in the daemon's output at -v 4 (inline "
          "token and token file; the file wins over the inline token)")
def test_token_never_appears_daemon_s_output(t):
    inline, in_file = "inline-SECRET-a1b2c3d4", "file-SECRET-e5f6a7b8"
    srv = server(t, tokens=[in_file])
    write_file(t.path("tok"), in_file + "\n")
    kc = plain_kubeconfig(t, srv, user={"token": inline,
                                        "tokenFile": t.path("tok")})
    srv.create("a")
    d = api_daemon(t, kc, verbosity=4)
    c = d.connect()
    converge(c, srv)
    open_for_a_second(srv)
    srv.set_tokens("something-else")
    srv.action("close")
    srv.wait_request(lambda r: r.get("status") == 401, "a 401")
    srv.set_tokens(in_file)
    srv.create("b")
    converge(c, srv, timeout=40)
    auths = {r.get("auth") for r in pods_reqs(srv)}
    if "token:0" not in auths:
        raise AssertionError("the token from the file was not used: %s" %
                             auths)
    d.stop()
    with open(d.stdout_path, "rb") as f:
        out = f.read().decode("utf-8", "replace")
    text = d.stderr_text() + out
    for secret in (inline, in_file, "SECRET"):
        if secret in text:
            line = [ln for ln in text.splitlines() if secret in ln][0]
            raise AssertionError("the token appears in the output: %r" %
                                 line[:300])
    if len(d.stderr_text().splitlines()) < 3:
        t.note("few log lines at -v 4: %r" % d.stderr_text()[-500:])


@api_test("TLS: bearer token with the CA as a file (absolute, relative to "
          "the kubeconfig's folder, or inline data), the localhost name, a "
          "server without scheme",
          params=("ca-relative", "ca-absolute", "ca-data", "localhost",
                  "no-scheme"))
def test_tls_bearer_token_ca_file_absolute(t):
    srv, pki = tls_server(t, tokens=["tls-tok"])
    kdir = t.mkdir("conf", "kube")
    shutil.copytree(t.path("pki"), os.path.join(kdir, "pki"))
    cluster = {"certificate-authority": "pki/ca.crt"}
    url = srv.url
    if t.param == "ca-absolute":
        cluster = {"certificate-authority": pki["ca.crt"]}
    elif t.param == "ca-data":
        cluster = {"certificate-authority-data": apitls.b64file(pki[
            "ca.crt"])}
    elif t.param == "localhost":
        url = srv.url_host("localhost")
    elif t.param == "no-scheme":
        url = "127.0.0.1:%d" % srv.port
    kc = apitls.simple_kubeconfig(os.path.join(kdir, "config"), url,
                                  cluster=cluster, user={"token": "tls-tok"})
    srv.create("a")
    d = api_daemon(t, kc)
    c = d.connect()
    converge(c, srv)
    reqs = pods_reqs(srv)
    if {r.get("auth") for r in reqs} != {"token:0"}:
        raise AssertionError("auth: %s" % [r.get("auth") for r in reqs])
    if srv.requests(kind="tls-error"):
        raise AssertionError("TLS errors: %s" % srv.requests(
            kind="tls-error"))


@api_test("TLS: client certificate authentication (inline data, relative "
          "files, and together with a token)",
          params=("cert-data", "cert-files", "cert-and-token"))
def test_tls_client_certificate_authentication_inline_data(t):
    tokens = ["both-tok"] if t.param == "cert-and-token" else None
    srv, pki = tls_server(t, client_ca=True, tokens=tokens)
    kdir = t.mkdir("kube")
    shutil.copytree(t.path("pki"), os.path.join(kdir, "certs"))
    if t.param == "cert-data":
        user = {"client-certificate-data": apitls.b64file(
            pki["client.crt"]), "client-key-data": apitls.b64file(
                pki["client.key"])}
        cluster = {"certificate-authority-data": apitls.b64file(
            pki["ca.crt"])}
    else:
        user = {"client-certificate": "certs/client.crt",
                "client-key": "certs/client.key"}
        cluster = {"certificate-authority": "certs/ca.crt"}
        if tokens:
            user["token"] = tokens[0]
    kc = apitls.simple_kubeconfig(os.path.join(kdir, "config"), srv.url,
                                  cluster=cluster, user=user)
    srv.create("a")
    d = api_daemon(t, kc)
    c = d.connect()
    converge(c, srv)
    for r in pods_reqs(srv):
        if r.get("client_cert") != apitls.CLIENT_CN:
            raise AssertionError("request without the client certificate: "
                                 "%s" % r)
        want = "token:0" if tokens else "cert"
        if r.get("auth") != want:
            raise AssertionError("auth %s, want %s" % (r.get("auth"), want))


@api_test("TLS: with tls-server-name the certificate (and SNI) is checked "
          "against that name while the connection goes to the server URL's "
          "host, which the Host header keeps; without it the same server "
          "is refused")
def test_tls_tls_server_name_certificate_sni(t):
    pki = apitls.copy_pki(t.path("pki"))
    srv = server(t, tls=True, pki=pki, tokens=["tk"],
                 server_cert=(pki["named-server.crt"],
                              pki["named-server.key"]))
    srv.create("a")
    kc = apitls.simple_kubeconfig(
        t.path("kubeconfig"), srv.url,
        cluster={"certificate-authority": pki["ca.crt"],
                 "tls-server-name": apitls.NAMED_HOST},
        user={"token": "tk"})
    d = api_daemon(t, kc)
    c = d.connect()
    converge(c, srv)
    for r in pods_reqs(srv):
        host = (r.get("headers") or {}).get("host")
        if host != "127.0.0.1:%d" % srv.port:
            raise AssertionError("Host header %r, want the server URL's "
                                 "host 127.0.0.1:%d" % (host, srv.port))
    d.stop()
    mark = srv.last_id()
    kc2 = apitls.simple_kubeconfig(
        t.path("kubeconfig2"), srv.url,
        cluster={"certificate-authority": pki["ca.crt"]},
        user={"token": "tk"})
    d2 = api_daemon(t, kc2)
    c2 = d2.connect()
    d2.wait_log(lambda x: x.level in ("error", "warn", "warning") and
                "api source" in x.msg, "the refused certificate logged")
    msgs = quiet(c2, 1.0)
    if any(x.get("type") == "pods" for x in msgs) or pods_reqs(srv, mark):
        raise AssertionError("a certificate for another name was accepted")


@api_test("a failure to reach the API server names its kind: refused, "
          "DNS, TLS, HTTP status (not libcurl's words alone)")
def test_failure_names_its_kind(t):
    import socket
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, never listening: refused
    pki = apitls.copy_pki(t.path("pki"))
    tls = server(t, tls=True, pki=pki, tokens=["tk"])
    plain = server(t, tokens=["tk"])
    cases = [
        ("refused", "http://127.0.0.1:%d" % closed.getsockname()[1], {},
         {"token": "tk"}, "list failed: connection refused"),
        ("dns", "http://nonexistent.invalid:6443", {}, {"token": "tk"},
         'list failed: DNS: cannot resolve "nonexistent.invalid"'),
        ("tls", tls.url, {"certificate-authority": pki["other-ca.crt"]},
         {"token": "tk"}, "list failed: TLS: certificate verify failed"),
        ("http", plain.url, {}, {"token": "wrong"}, "list: HTTP 401"),
    ]
    try:
        for name, url, cluster, user, want in cases:
            kc = apitls.simple_kubeconfig(t.path("kc-" + name), url,
                                          cluster=cluster, user=user)
            d = api_daemon(t, kc)
            line = d.wait_log(lambda x: "api source" in x.msg and
                              want in x.msg, want)
            t.note("%s: %s" % (name, line.msg))
            d.stop()
    finally:
        closed.close()


@api_test("TLS: a watch reset during the TLS handshake (a restarting "
          "server or load balancer) is opened again from the last "
          "resourceVersion, with no relist")
def test_tls_watch_reset_during_tls_handshake(t):
    pki = apitls.copy_pki(t.path("pki"))
    srv = server(t, tls=True, pki=pki, tokens=["tk"])
    srv.create("a")
    kc = apitls.simple_kubeconfig(
        t.path("kubeconfig"), srv.url,
        cluster={"certificate-authority": pki["ca.crt"]},
        user={"token": "tk"})
    d = api_daemon(t, kc)
    c = d.connect()
    converge(c, srv)
    open_for_a_second(srv)   # a watch that lasted: its end is no "short watch"
    rv = last_rv(srv)
    mark = srv.last_id()
    srv.cmd("handshake_reset", count=2)
    srv.action("reset")
    w = srv.wait_watch(mark, timeout=harness.T_WAIT)
    resets = [r for r in srv.requests(mark) if r.get("kind") == "tls-reset"]
    if len(resets) != 2:
        raise AssertionError("%d handshakes reset, want 2" % len(resets))
    lists = [r for r in pods_reqs(srv, mark) if r["kind"] == "list"]
    if lists:
        raise AssertionError("a reset during the handshake made the client "
                             "relist: %s" % [describe(r) for r in lists])
    if rv_of(w) != rv:
        raise AssertionError("the watch did not resume from %s: %s" %
                             (rv, describe(w)))
    srv.create("b")
    converge(c, srv)


@api_test("TLS: insecure-skip-tls-verify without a CA talks to a server "
          "whose certificate no trusted CA signed")
def test_tls_insecure_skip_tls_verify_without(t):
    pki = apitls.copy_pki(t.path("pki"))
    srv = server(t, tls=True, pki=pki, tokens=["tk"],
                 server_cert=(pki["other-server.crt"],
                              pki["other-server.key"]))
    kc = apitls.simple_kubeconfig(t.path("kubeconfig"), srv.url,
                                  cluster={"insecure-skip-tls-verify": True},
                                  user={"token": "tk"})
    srv.create("a")
    d = api_daemon(t, kc)
    c = d.connect()
    converge(c, srv)


@api_test("TLS: a server certificate from an unknown CA is refused: no pods, "
          "no sources_ready, the daemon keeps running and logs the error")
def test_tls_server_certificate_unknown_ca_refused(t):
    pki = apitls.copy_pki(t.path("pki"))
    srv = server(t, tls=True, pki=pki, tokens=["tk"],
                 server_cert=(pki["other-server.crt"],
                              pki["other-server.key"]))
    kc = apitls.simple_kubeconfig(
        t.path("kubeconfig"), srv.url,
        cluster={"certificate-authority": pki["ca.crt"]},
        user={"token": "tk"})
    srv.create("a")
    d = api_daemon(t, kc)
    c = d.connect()
    srv.wait_request(lambda r: r["kind"] == "tls-error", "a refused TLS "
                     "handshake")
    msgs = quiet(c, 2.5)
    if any(x.get("type") in ("pods", "sources_ready") for x in msgs):
        raise AssertionError("the daemon trusted an unknown CA: %s" % [
            summarize(x) for x in msgs])
    if pods_reqs(srv):
        raise AssertionError("requests got through: %s" % pods_reqs(srv))
    d.assert_alive()
    errs = [x for x in d.logs() if x.level in ("error", "warn", "warning")]
    if not errs:
        raise AssertionError("nothing logged about the TLS failure: %s" %
                             d.logs()[-5:])


@api_test("kubeconfig: current-context selects the cluster and the user "
          "among several; JSON kubeconfig; server with a path prefix and a "
          "trailing slash")
def test_kubeconfig_current_context_selects_cluster_user(t):
    srv = server(t, tokens=["good"], prefix="/k8s")
    dead = server(t, tokens=["good"])
    dead.stop()                       # a closed port
    srv.create("a")
    clusters = {"dead": {"server": dead.url},
                "live": {"server": srv.url + "/"},
                "noprefix": {"server": "http://127.0.0.1:%d" % srv.port}}
    users = {"bad": {"token": "bad"}, "good": {"token": "good"}}
    contexts = {"a-dead": {"cluster": "dead", "user": "good"},
                "b-baduser": {"cluster": "live", "user": "bad"},
                "c-right": {"cluster": "live", "user": "good"},
                "d-noprefix": {"cluster": "noprefix", "user": "good"}}
    kc = apitls.write_kubeconfig(t.path("kubeconfig.json"), clusters, users,
                                 contexts, current="c-right", fmt="json")
    d = api_daemon(t, kc)
    c = d.connect()
    converge(c, srv)
    for r in pods_reqs(srv):
        if r.get("auth") != "token:0":
            raise AssertionError("used the wrong user: %s" % r)
        if not r["path"].startswith("/k8s/api/v1/"):
            raise AssertionError("path prefix lost: %s" % r["path"])
        if "//" in r["path"]:
            raise AssertionError("doubled slash: %s" % r["path"])


KUBECONFIG_ERRORS = {
    # name: (clusters, users, contexts, current, words one of which the
    # message must contain, lower case)
    "no-current-context": ({"c": {"server": "https://127.0.0.1:1"}},
                           {"u": {"token": "t"}},
                           {"x": {"cluster": "c", "user": "u"}}, None,
                           ("current-context", "context")),
    "unknown-context": ({"c": {"server": "https://127.0.0.1:1"}},
                        {"u": {"token": "t"}},
                        {"x": {"cluster": "c", "user": "u"}}, "nosuchctx",
                        ("nosuchctx",)),
    "unknown-cluster": ({"c": {"server": "https://127.0.0.1:1"}},
                        {"u": {"token": "t"}},
                        {"x": {"cluster": "nosuchcluster", "user": "u"}}, "x",
                        ("nosuchcluster",)),
    "unknown-user": ({"c": {"server": "https://127.0.0.1:1"}},
                     {"u": {"token": "t"}},
                     {"x": {"cluster": "c", "user": "nosuchuser"}}, "x",
                     ("nosuchuser",)),
    "no-server": ({"c": {"insecure-skip-tls-verify": True}},
                  {"u": {"token": "t"}},
                  {"x": {"cluster": "c", "user": "u"}}, "x", ("server",)),
    "cert-without-key": ({"c": {"server": "https://127.0.0.1:1"}},
                         {"u": {"client-certificate-data": "QUJD"}},
                         {"x": {"cluster": "c", "user": "u"}}, "x",
                         ("client-key", "key")),
    "key-without-cert": ({"c": {"server": "https://127.0.0.1:1"}},
                         {"u": {"client-key-data": "QUJD"}},
                         {"x": {"cluster": "c", "user": "u"}}, "x",
                         ("client-certificate", "certificate")),
    "ca-and-insecure": ({"c": {"server": "https://127.0.0.1:1",
                               "certificate-authority-data": "QUJD",
                               "insecure-skip-tls-verify": True}},
                        {"u": {"token": "t"}},
                        {"x": {"cluster": "c", "user": "u"}}, "x",
                        ("insecure",)),
    "exec-plugin": ({"c": {"server": "https://127.0.0.1:1"}},
                    {"u": {"exec": {"apiVersion":
                                    "client.authentication.k8s.io/v1",
                                    "command": "aws-iam-authenticator"}}},
                    {"x": {"cluster": "c", "user": "u"}}, "x", ("exec",)),
    "auth-provider": ({"c": {"server": "https://127.0.0.1:1"}},
                      {"u": {"auth-provider": {"name": "oidc"}}},
                      {"x": {"cluster": "c", "user": "u"}}, "x",
                      ("auth-provider",)),
    "username-password": ({"c": {"server": "https://127.0.0.1:1"}},
                          {"u": {"username": "admin", "password": "pw"}},
                          {"x": {"cluster": "c", "user": "u"}}, "x",
                          ("username", "password", "basic")),
    "impersonation": ({"c": {"server": "https://127.0.0.1:1"}},
                      {"u": {"token": "t", "as": "system:admin"}},
                      {"x": {"cluster": "c", "user": "u"}}, "x",
                      ("\"as\"", " as ", "as:", "impersonat")),
    "proxy-url": ({"c": {"server": "https://127.0.0.1:1",
                         "proxy-url": "http://127.0.0.1:3128"}},
                  {"u": {"token": "t"}},
                  {"x": {"cluster": "c", "user": "u"}}, "x", ("proxy-url",)),
}


def run_refused(t, args, words, env=None):
    sock = t.path("podmux.sock")
    cmd = [harness.BIN, "run", "--node-name", NODE, "--socket", sock,
           "--plugins-registry-dir", ""] + args
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=10,
                           errors="replace",
                           env=env if env is not None else None)
    except subprocess.TimeoutExpired:
        raise AssertionError("podmux run did not exit within 10 s on a "
                             "bad configuration")
    err = p.stderr.strip()
    t.note("exit %d, stderr: %r" % (p.returncode, err[-400:]))
    if p.returncode == 0:
        raise AssertionError("podmux run exited 0 on a bad configuration")
    if p.returncode < 0:
        raise AssertionError("podmux run died from signal %d" %
                             -p.returncode)
    low = err.lower()
    if not any(w in low for w in words):
        raise AssertionError("the message %r names none of %s" % (
            err[-300:], list(words)))
    if os.path.exists(sock):
        t.note("the socket was created before the configuration was "
               "checked")
    return err


@api_test("kubeconfig error: podmux run exits non-zero naming the field",
          params=sorted(KUBECONFIG_ERRORS))
def test_kubeconfig_error_podmux_run_exits_non(t):
    clusters, users, contexts, current, words = KUBECONFIG_ERRORS[t.param]
    kc = apitls.write_kubeconfig(t.path("kubeconfig"), clusters, users,
                                 contexts, current=current)
    err = run_refused(t, ["--kubeconfig", kc], words)
    if "pw" in users.get("u", {}).get("password", "") and ": pw" in err:
        raise AssertionError("the password is in the message: %r" % err)


@api_test("kubeconfig error: a missing file, and a file that is not YAML",
          params=("missing", "not-yaml"))
def test_kubeconfig_error_missing_file_file_yaml(t):
    kc = t.path("kubeconfig")
    if t.param == "not-yaml":
        write_file(kc, "clusters: [unclosed\n  - {{{\n")
        words = ("yaml", "parse", "syntax", "line", "invalid", "expected",
                 "mapping", "flow")
    else:
        words = ("no such file", "not found", "cannot", "open", "missing",
                 "read")
    run_refused(t, ["--kubeconfig", kc], words)


def in_cluster_env(srv, sa_dir):
    return {"KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": str(srv.port),
            "PODMUX_SERVICE_ACCOUNT_DIR": sa_dir}


@api_test("in-cluster: KUBERNETES_SERVICE_HOST/PORT and the service account "
          "folder from PODMUX_SERVICE_ACCOUNT_DIR (token + ca.crt)")
def test_cluster_kubernetes_service_host_port_service(t):
    srv, pki = tls_server(t, tokens=["sa-token"])
    sa = t.mkdir("serviceaccount")
    shutil.copyfile(pki["ca.crt"], os.path.join(sa, "ca.crt"))
    write_file(os.path.join(sa, "token"), "sa-token")
    write_file(os.path.join(sa, "namespace"), "kube-system")
    srv.create("a")
    srv.create("b", namespace="kube-system")
    d = api_daemon(t, in_cluster=True, env=in_cluster_env(srv, sa))
    c = d.connect()
    converge(c, srv)
    if {r.get("auth") for r in pods_reqs(srv)} != {"token:0"}:
        raise AssertionError("auth: %s" % [r.get("auth")
                                           for r in pods_reqs(srv)])


@api_test("in-cluster without KUBERNETES_SERVICE_HOST: exit non-zero naming "
          "it")
def test_cluster_without_kubernetes_service_host_exit(t):
    env = dict(os.environ)
    env.pop("KUBERNETES_SERVICE_HOST", None)
    env["KUBERNETES_SERVICE_PORT"] = "443"
    env["PODMUX_SERVICE_ACCOUNT_DIR"] = t.mkdir("sa")
    run_refused(t, ["--in-cluster"], ("kubernetes_service_host",), env=env)


# ===========================================================================
# All three sources

@api_test("file + http + api together: the consumer holds the union, each "
          "pod once with its source; sources_ready [api, file, http]; "
          "changes stay within their source")
def test_file_http_api_together_consumer_holds(t):
    from manifest_server import ManifestServer
    ms = ManifestServer()
    try:
        ms.set(body=pod_yaml("from-http"))
        m = t.mkdir("manifests")
        write_file(os.path.join(m, "web.yaml"), pod_yaml("from-file"))
        srv = server(t)
        srv.create("from-api")
        srv.create("from-file")           # the same name as the static pod
        srv.create("elsewhere", node="node2")
        kc = plain_kubeconfig(t, srv)
        d = api_daemon(t, kc, manifest_path=m,
                       extra=["--manifest-url", ms.url("/pod"),
                              "--http-check-frequency", "1s"])
        c = d.connect()
        r = c.expect_type("sources_ready", timeout=T_WAIT)
        if r.get("sources") != ["api", "file", "http"]:
            raise AssertionError("sources_ready %s" % summarize(r))
        want = sorted(["from-api", "from-file", pn("from-file"),
                       pn("from-http")])
        c.wait_until_state(want)
        by_src = {}
        for p in c.state.pods.values():
            by_src.setdefault(pod_ann(p, SOURCE_ANN), []).append(pod_name(p))
        if {k: sorted(v) for k, v in by_src.items()} != {
                "api": ["from-api", "from-file"], "file": [pn("from-file")],
                "http": [pn("from-http")]}:
            raise AssertionError("pods by source: %s" % by_src)
        for x in c.pods_msgs():
            for p in x["pods"]:
                if pod_ann(p, SOURCE_ANN) != x.get("source"):
                    raise AssertionError("a %s pod in a %s message: %s" % (
                        pod_ann(p, SOURCE_ANN), x.get("source"),
                        summarize(x)))
        adds = {}
        for x in c.pods_msgs():
            if x["op"] == "ADD":
                for p in x["pods"]:
                    adds[pod_uid(p)] = adds.get(pod_uid(p), 0) + 1
        if any(v != 1 for v in adds.values()):
            raise AssertionError("a pod was added twice: %s" % adds)
        start = len(c.msgs)
        srv.label("from-file", v="2")
        upd = c.expect_pods("UPDATE", names=["from-file"])
        if upd.get("source") != "api":
            raise AssertionError("update from %s" % summarize(upd))
        os.unlink(os.path.join(m, "web.yaml"))
        rem = c.expect_pods("REMOVE", names=[pn("from-file")])
        if rem.get("source") != "file":
            raise AssertionError("remove from %s" % summarize(rem))
        c.wait_until_state(sorted(["from-api", "from-file",
                                   pn("from-http")]))
        for x in c.msgs[start:]:
            if x.get("type") == "pods" and x.get("source") == "http":
                raise AssertionError("the http source moved: %s" %
                                     summarize(x))
        converge(c, srv)
        c2 = d.connect()
        init = [x for x in c2.read_initial() if x["type"] == "pods"]
        srcs = sorted(x.get("source") for x in init)
        if srcs != ["api", "file", "http"] or any(x["op"] != "ADD"
                                                 for x in init):
            raise AssertionError("a late consumer's initial state: %s" % [
                summarize(x) for x in init])
    finally:
        ms.stop()



@api_test("--relist-spread: the list after a 410 waits a random part of the "
          "spread, said in the log; a watch that can go on (a dropped "
          "connection, a server restart that kept its history) never waits")
def test_relist_spread_410_waits_watch_not(t):
    srv = server(t)
    srv.create("a")
    d = api_daemon(t, plain_kubeconfig(t, srv),
                   extra=["--relist-spread", "1h"])
    c = d.connect()
    converge(c, srv)
    srv.wait_watch()
    # A server restart that kept its history, and a dropped watch: the
    # watch goes on from its version, with no list and no spread.
    # (Each watch has had an event first: one closed at once with none
    # would be backed off from, with a list.)
    mark = srv.last_id()
    srv.create("b")
    converge(c, srv)
    srv.restart()
    srv.create("c")
    converge(c, srv)
    srv.wait_watch(mark)
    srv.action("close")
    srv.create("d")
    converge(c, srv)
    if srv.requests(mark, kind=("list", "continue")):
        raise AssertionError("a watch that could go on listed: %s" %
                             srv.summary(mark))
    # A 410: the list waits for the spread (here up to an hour).
    srv.wait_watch(mark)
    mark = srv.last_id()
    srv.action("expire")
    line = d.wait_log(lambda x: "after a 410 the lists of a fleet spread "
                      "over 3600 s" in x.msg, "the spread's line")
    harness.settle(2)   # a list that did not wait would come by now
    if srv.requests(mark, kind=("list", "continue")):
        raise AssertionError("the list after a 410 did not wait (%s): %s" % (
            line.msg, srv.summary(mark)))


@api_test("a watch's ERROR event (410) is read to the end of its response: "
          "the relist goes on the same TLS connection, with no new handshake")
def test_410_error_event_connection_reused(t):
    srv, pki = tls_server(t)
    srv.create("a")
    kc = apitls.simple_kubeconfig(
        t.path("kubeconfig"), srv.url,
        cluster={"certificate-authority-data": apitls.b64file(pki["ca.crt"])})
    d = api_daemon(t, kc)
    c = d.connect()
    converge(c, srv)
    w = srv.wait_watch()
    srv.create("b")
    converge(c, srv)
    mark = srv.last_id()
    srv.action("expire")
    relist = srv.wait_request(lambda r: r["kind"] == "list", "the relist",
                              since=mark)
    srv.wait_watch(mark)
    converge(c, srv)
    if relist.get("conn") != w.get("conn"):
        raise AssertionError("the relist went on connection %s, the expired "
                             "watch on %s: a new TLS handshake" % (
                                 relist.get("conn"), w.get("conn")))
    hs = [r for r in srv.requests(mark) if r.get("kind") == "tls-error"]
    if hs:
        raise AssertionError("handshake failures: %s" % hs)


def api_status(t, d):
    r = t.run_cmd(["status", "--socket", d.sock, "-o", "json"])
    return [x for x in json.loads(r.stdout)["sources"] if x["name"] == "api"][0]


def retry_pauses(d):
    """The pauses the source chose, in seconds, from its debug lines."""
    out = []
    for x in d.logs():
        m = re.search(r"api source: retrying in ([0-9.]+) s", x.msg)
        if m:
            out.append(float(m.group(1)))
    return out


@api_test("a watch that resumes after an outage, answered 200, makes the "
          "source ok again with no event: not failing until one comes")
def test_resumed_watch_200_is_ok(t):
    srv = server(t)
    srv.create("a")
    d = api_daemon(t, plain_kubeconfig(t, srv))
    c = d.connect()
    converge(c, srv)
    srv.wait_watch()
    # An event first: a watch closed at once with none is a failure,
    # followed by a list.
    srv.create("b")
    converge(c, srv)
    srv.stop()
    harness.wait_for(lambda: api_status(t, d)["state"] == "failing",
                     T_WAIT, "the source failing while the server is down")
    mark = srv.last_id()
    srv.start()
    srv.wait_watch(mark)
    # No event comes (no change, no bookmark): the 200 alone says it.
    harness.wait_for(lambda: api_status(t, d)["state"] == "ok", T_WAIT,
                     "the source ok once its watch is answered 200")
    if srv.requests(mark, kind=("list", "continue")):
        raise AssertionError("the watch could go on, yet a list: %s" %
                             srv.summary(mark))


@api_test("a watch that worked ends the failures before it: the next "
          "failure waits the first pause again, not a doubled one")
def test_backoff_reset_after_working_watch(t):
    srv = server(t)
    srv.create("a")
    srv.fail(match="watch", status=500, count=2)
    d = api_daemon(t, plain_kubeconfig(t, srv), verbosity=1)
    c = d.connect()
    converge(c, srv)
    w = srv.wait_watch()
    srv.create("b")     # an event on the working watch
    converge(c, srv)
    before = retry_pauses(d)
    if len(before) != 2:
        raise AssertionError("two failed watches, pauses %s" % before)
    mark = srv.last_id()
    srv.fail(match="watch", status=500, count=1)
    srv.action("close")
    harness.wait_for(lambda: len(retry_pauses(d)) == 3, T_WAIT,
                     "the pause after the next failure")
    p = retry_pauses(d)[2]
    # The first pause is 0.8 s plus up to as much jitter (logged rounded
    # to 0.1 s: at most 1.6); a doubled one (the third in a row) would be
    # at least 3.2 s.
    if p > 2.0:
        raise AssertionError("after a working watch (%s) the pause is "
                             "%.1f s (pauses %s)" % (describe(w), p,
                                                     retry_pauses(d)))
    srv.wait_watch(mark)
    converge(c, srv)


@api_test("while the server does not answer, the reconnect pause never "
          "passes its 10 s cap; once back, the watch goes on with no list")
def test_reconnect_pause_capped(t):
    srv = server(t)
    srv.create("a")
    d = api_daemon(t, plain_kubeconfig(t, srv), verbosity=1)
    c = d.connect()
    converge(c, srv)
    srv.wait_watch()
    srv.create("b")     # an event first, as above
    converge(c, srv)
    srv.stop()
    # Doubling from 0.8 s, the fifth pause of client-go's backoff is at
    # least 12.8 s; the reconnect's stays within 10 s.
    harness.wait_for(lambda: len(retry_pauses(d)) >= 5, 90,
                     "five pauses while the server is down")
    p = retry_pauses(d)
    if max(p) > 10.0:
        raise AssertionError("reconnect pauses %s: over the 10 s cap" % p)
    mark = srv.last_id()
    srv.start()
    srv.wait_watch(mark)
    srv.create("c")
    converge(c, srv)
    if srv.requests(mark, kind=("list", "continue")):
        raise AssertionError("a reconnect listed: %s" % srv.summary(mark))


@api_test("a server that keeps losing its history: three lists after a "
          "410, then the budget makes the next one wait (said once, "
          "warn); the node keeps its pods meanwhile")
def test_relist_budget_410_loop(t):
    srv = server(t)
    srv.create("a")
    # The budget scales with the spread: 3 lists, then one per 5
    # spreads (here 50 s).  Three cycles (each at most the first pause,
    # 1.6 s, the spread, 10 s, and a list) take well under the 50 s that
    # would give the fourth a token.
    d = api_daemon(t, plain_kubeconfig(t, srv),
                   extra=["--relist-spread", "10s"])
    c = d.connect()
    converge(c, srv)
    srv.wait_watch()
    for i in range(3):
        # A watch that worked first (an event), so each 410 is a cycle
        # of its own and the backoff starts over.
        srv.create("p%d" % i)
        converge(c, srv)
        mark = srv.last_id()
        srv.action("expire")
        srv.wait_request(lambda r: r["kind"] == "list", "relist %d" % i,
                         since=mark, timeout=30)
        srv.wait_watch(mark)
    srv.create("late")
    converge(c, srv)
    mark = srv.last_id()
    srv.action("expire")
    line = d.wait_log(lambda x: "keeps losing its history" in x.msg,
                      "the budget's line")
    if line.level not in ("warn", "warning"):
        raise AssertionError("budget line at %s: %s" % (line.level, line.msg))
    harness.settle(3)   # a list that did not wait would come by now
    if srv.requests(mark, kind=("list", "continue")):
        raise AssertionError("a fourth list after a 410 did not wait "
                             "(%s): %s" % (line.msg, srv.summary(mark)))
    if sorted(pod_name(p) for p in c.state.pods.values()) != \
            ["a", "late", "p0", "p1", "p2"]:
        raise AssertionError("pods while waiting: %s" % sorted(
            c.state.pods))


def watch_lists(srv, since=0):
    return [r for r in srv.requests(since, kind="watch")
            if "sendInitialEvents=true" in (r.get("query") or "")]


@api_test("--watch-list: the start and the relist after a 410 are "
          "streaming lists (no LIST): the store is replaced at the "
          "initial-events-end bookmark, and the same watch goes on")
def test_watch_list_streams(t):
    srv = server(t)
    srv.create("a")
    srv.create("b")
    srv.create("elsewhere", node="node2")
    d = api_daemon(t, plain_kubeconfig(t, srv), extra=["--watch-list"])
    c = d.connect()
    c.expect_type("sources_ready", timeout=T_WAIT)
    converge(c, srv)
    wl = watch_lists(srv)
    if len(wl) != 1 or "resourceVersionMatch=NotOlderThan" not in \
            wl[0]["query"] or "allowWatchBookmarks=true" not in \
            wl[0]["query"]:
        raise AssertionError("the start: %s" % srv.summary())
    srv.create("c")             # on the same watch
    srv.delete("a")
    converge(c, srv)
    mark = srv.last_id()
    srv.action("expire")
    srv.wait_request(lambda r: r["kind"] == "watch" and
                     "sendInitialEvents=true" in (r.get("query") or ""),
                     "the relist, streaming", since=mark)
    srv.create("d")
    converge(c, srv)
    if srv.requests(kind=("list", "continue")):
        raise AssertionError("a LIST with --watch-list: %s" % srv.summary())
    if any(x.level in ("warn", "warning") and "streaming" in x.msg
           for x in d.logs()):
        raise AssertionError("a fallback said: %s" % [
            x.msg for x in d.logs() if "streaming" in x.msg])


@api_test("--watch-list against a server that refuses it (422) or lets the "
          "parameters by and never ends the initial events: LIST+WATCH "
          "from then on, said once; nothing lost",
          params=("refuse", "ignore"))
def test_watch_list_fallback(t):
    how = t.param
    srv = server(t)
    srv.config(watch_list=how)
    srv.create("a")
    d = api_daemon(t, plain_kubeconfig(t, srv), extra=["--watch-list"])
    c = d.connect()
    # "ignore": the fallback comes after the 30 s bound.
    converge(c, srv, timeout=90)
    said = [x for x in d.logs() if "does not serve streaming lists" in x.msg]
    if len(said) != 1 or said[0].level not in ("warn", "warning"):
        raise AssertionError("the fallback said %s" % [x.msg for x in said])
    if len(srv.requests(kind=("list",))) != 1:
        raise AssertionError("one LIST after the fallback: %s" %
                             srv.summary())
    srv.create("b")
    converge(c, srv)
    mark = srv.last_id()
    srv.action("expire")
    srv.wait_request(lambda r: r["kind"] == "list", "the relist",
                     since=mark)
    srv.create("c")
    converge(c, srv)
    if watch_lists(srv, mark):
        raise AssertionError("a streaming list after the fallback: %s" %
                             srv.summary(mark))
    if len([x for x in d.logs()
            if "does not serve streaming lists" in x.msg]) != 1:
        raise AssertionError("the fallback said more than once")


@api_test("a watch event larger than the 16 MiB limit ends the watch with an error logged; the relist still brings the pod")
def test_watch_event_larger_16_mib_limit(t):
    srv = server(t)
    srv.create("small")
    d = api_daemon(t, plain_kubeconfig(t, srv))
    c = d.connect()
    converge(c, srv)
    # 17 MiB of annotation: the ADDED event is over the limit; the list
    # that follows (limit 64 MiB) carries it.
    srv.create("huge", annotations={"example.com/blob": "x" * (17 * 1024 * 1024)})
    d.wait_log(lambda l: "larger than" in l.msg and "event" in l.msg,
               "the oversized event logged", timeout=60)
    c.wait_until_state(["small", "huge"], timeout=90)
    d.assert_alive()


if __name__ == "__main__":
    harness.main()
