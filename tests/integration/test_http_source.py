#!/usr/bin/env python3
"""Integration tests of the HTTP manifest source (doc/pod-config.md
section 7, merge output 3.6-3.8), run against the real podmux binary and a
manifest server running in this process (manifest_server.py).

Tests poll every 500ms (local answers of a few KB) or every 1s where the
request timeout, min(10 s, period), matters (slow server: 1s timeout, 3s
delay; 10 MiB bodies).  Waits are bounded by generous timeouts, never
assertions on speed; absence is only asserted after the server has seen
further polls (each poll's result is merged and streamed before the next
poll starts).

Select tests by substring: test_http_source.py 'HTTP 404' redirects"""

import base64
import hashlib
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import quiet, expect_true, index_of, check_sources  # noqa: E402
from harness import (MIB10, NODE, SEEN_RE, T_LONG, T_SHORT, T_WAIT,  # noqa: E402
                     UID_RE, ConsumerClosed, msg_names, msg_uids, pn,
                     pod_ann, pod_image, pod_json, pod_labels, pod_name,
                     pod_obj, pod_uid, pod_yaml, sized_manifest, summarize,
                     test, to_yaml, write_file)
from manifest_server import ManifestServer, RawListener  # noqa: E402

# The manifest server is local: never reach it through a proxy from the
# environment (podmux honours http_proxy like the kubelet).
for _k in ("no_proxy", "NO_PROXY"):
    os.environ[_k] = ",".join(x for x in (os.environ.get(_k), "127.0.0.1",
                                          "localhost") if x)

PINNED = "5b0c7e1d-2f4a-4c39-8d7e-6a1b2c3d4e5f"
PINNED2 = "5b0c7e1d-2f4a-4c39-8d7e-000000000002"
SOURCE_ANN = "kubernetes.io/config.source"
HASH_ANN = "kubernetes.io/config.hash"
SEEN_ANN = "kubernetes.io/config.seen"


# ---------------------------------------------------------------------------
# Helpers

def http_test(name, params=None):
    """harness.test, plus: t.server() gives a ManifestServer and
    t.raw_listener() a RawListener, both stopped when the test ends."""
    def deco(fn):
        def wrapped(t):
            servers = []

            def server():
                s = ManifestServer()
                servers.append(s)
                return s

            def raw_listener(**kw):
                s = RawListener(**kw)
                servers.append(s)
                return s
            t.server = server
            t.raw_listener = raw_listener
            try:
                fn(t)
            finally:
                for s in servers:
                    s.stop()
        wrapped.__name__ = fn.__name__
        return test(name, params)(wrapped)
    return deco


def http_daemon(t, url=None, extra=(), manifest_path=None, mode="incremental",
                period="1s", socket_name="podmux.sock", start=True):
    """A `podmux run` with the HTTP source (and the file source only if
    manifest_path is given)."""
    args = []
    if url is not None:
        args += ["--manifest-url", url]
    if period:
        args += ["--http-check-frequency", period]
    d = harness.Daemon(t, manifest_path, socket_path=t.path(socket_name),
                       mode=mode, extra=args + list(extra))
    t.daemons.append(d)
    if start:
        d.start()
    return d


def pod_list(*pods, fmt="json"):
    obj = {"apiVersion": "v1", "kind": "PodList", "metadata": {},
           "items": list(pods)}
    if fmt == "yaml":
        return to_yaml(obj, comment="a pod list")
    return json.dumps(obj, indent=1) + "\n"


def redacted(srv, path="/pods"):
    return srv.url(path)


def url_lines(d, url, levels=("error",)):
    return [x for x in d.logs() if x.level in levels and url in x.msg]


def wait_url_error(d, url, n=1, timeout=None, words=None):
    """Waits for the n-th error line naming url; checks it is one line with
    a reason after the URL (containing one of words if given); returns
    it."""
    def enough():
        ls = url_lines(d, url)
        return ls[n - 1] if len(ls) >= n else None
    try:
        line = harness.wait_for(enough, timeout or T_WAIT,
                                "error log line #%d naming %s" % (n, url))
    except AssertionError as e:
        raise AssertionError("%s; last log lines: %s" %
                             (e, [repr(x) for x in d.logs()[-6:]]))
    if "\n" in line.msg.strip():
        raise AssertionError("the error is not one line: %r" % line.msg)
    rest = line.msg.split(url, 1)[1].strip(" \"':-\t")
    if len(rest) < 3:
        raise AssertionError("the error names the URL but gives no reason: "
                             "%r" % line.msg)
    if words:
        harness.assert_reason(rest, words, "error for %s" % url)
    return line


def pods_since(c, i):
    return [m for m in c.msgs[i:] if m.get("type") == "pods"]


def no_pods_since(c, i, why):
    got = pods_since(c, i)
    if got:
        raise AssertionError("%s, but got: %s" %
                             (why, " | ".join(summarize(m) for m in got)))


def tolerations(p):
    return ((p.get("spec") or {}).get("tolerations")) or []


def http_errors(t, d):
    """The http source's error count in `podmux status`."""
    r = t.run_cmd(["status", "--socket", d.sock, "-o", "json"])
    src = [x for x in json.loads(r.stdout)["sources"] if x["name"] == "http"]
    return src[0]["errors"] if src else 0


def start_with(t, body, path="/pods", **kw):
    """Server serving body, daemon polling it, consumer holding its pods.
    Returns (srv, d, c, url)."""
    srv = t.server()
    srv.set(body=body)
    url = srv.url(path)
    d = http_daemon(t, url, **kw)
    c = d.connect()
    return srv, d, c, url


# ===========================================================================
# Delivery and merge output

@http_test("single pod: ADD from source http, name <name>-<node>, "
           "config.source=http, config.hash=uid, no NoExecute toleration; "
           "sources_ready [http]")
def test_single_pod_add_source_http_name(t):
    srv, d, c, url = start_with(t, pod_yaml("web", labels={"app": "web"}))
    m = c.expect_pods("ADD", names=[pn("web")])
    if m.get("source") != "http":
        raise AssertionError("source must be http: %s" % summarize(m))
    r = c.expect_type("sources_ready")
    if r.get("sources") != ["http"]:
        raise AssertionError("sources_ready must list [http]: %s" % r)
    p = m["pods"][0]
    uid = pod_uid(p)
    meta = p.get("metadata") or {}
    problems = []
    if not UID_RE.match(uid):
        problems.append("uid %r is not 32 lowercase hex digits" % uid)
    if pod_ann(p, SOURCE_ANN) != "http":
        problems.append("config.source %r" % pod_ann(p, SOURCE_ANN))
    if pod_ann(p, HASH_ANN) != uid:
        problems.append("config.hash %r != uid %r" % (pod_ann(p, HASH_ANN),
                                                     uid))
    if not SEEN_RE.match(str(pod_ann(p, SEEN_ANN, ""))):
        problems.append("config.seen %r" % pod_ann(p, SEEN_ANN))
    if meta.get("namespace") != "default":
        problems.append("namespace %r (want default)" % meta.get("namespace"))
    if (p.get("spec") or {}).get("nodeName") != NODE:
        problems.append("spec.nodeName %r" % p["spec"].get("nodeName"))
    if (p.get("status") or {}).get("phase") != "Pending":
        problems.append("status.phase %r" % p.get("status"))
    if (p.get("spec") or {}).get("restartPolicy") != "Always":
        problems.append("restartPolicy not defaulted: %r" %
                        p["spec"].get("restartPolicy"))
    if pod_labels(p) != {"app": "web"}:
        problems.append("labels %r" % pod_labels(p))
    bad = [x for x in tolerations(p) if x.get("effect") == "NoExecute"]
    if bad:
        problems.append("the HTTP source must add no toleration: %s" % bad)
    if problems:
        raise AssertionError("; ".join(problems) + " in " +
                             json.dumps(p)[:600])

    # A consumer connecting later: ADD from http, synced, sources_ready.
    c2 = d.connect()
    init = c2.read_initial()
    pods = [x for x in init if x["type"] == "pods"]
    if len(pods) != 1 or pods[0]["op"] != "ADD" or \
            pods[0].get("source") != "http" or \
            msg_uids(pods[0]) != [uid]:
        raise AssertionError("late consumer's initial state: %s" %
                             [summarize(x) for x in init])
    nxt = c2.recv(T_SHORT)
    if nxt.get("type") != "sources_ready" or nxt.get("sources") != ["http"]:
        raise AssertionError("after synced expected sources_ready [http], "
                             "got %s" % summarize(nxt))
    c2.close()

    # Same URL + content + node after a restart: same uid.  Another URL
    # serving the same content: another uid (url:<url> salts it).
    d2 = http_daemon(t, srv.url("/other"), socket_name="b.sock")
    c3 = d2.connect()
    m2 = c3.expect_pods("ADD", names=[pn("web")])
    if pod_uid(m2["pods"][0]) == uid:
        raise AssertionError("two URLs with the same content gave the same "
                             "uid %s" % uid)
    d2.stop()
    d.restart()
    c4 = d.connect()
    c4.wait_until_state([pn("web")])
    if pod_uid(c4.state.one(pn("web"))) != uid:
        raise AssertionError("uid changed across a restart: %s -> %s" %
                             (uid, pod_uid(c4.state.one(pn("web")))))


@http_test("SIGHUP fetches the manifest URL at once: with an hour's "
           "period, the new body's pod arrives after the signal")
def test_sighup_fetches_manifest_url_once_hour(t):
    srv, d, c, url = start_with(t, pod_yaml("web"), period="1h")
    c.wait_until_state([pn("web")])
    harness.wait_for(lambda: srv.count() >= 1, T_SHORT, "the first poll")
    srv.set(body=pod_yaml("db"))
    d.send_signal(signal.SIGHUP)
    c.wait_until_state([pn("db")])
    if srv.count() != 2:
        raise AssertionError("polls: %d, want the first and the SIGHUP's"
                             % srv.count())


@http_test("PodList of 3 then 2: ADD of the 3 in one message, then only "
           "REMOVE of the dropped pod; an unpinned pod edited: REMOVE(old "
           "uid) then ADD(new uid), never UPDATE")
def test_podlist_3_2_add_3_one(t):
    a, b, cc = pod_obj("a"), pod_obj("b", image="redis:7"), pod_obj("c")
    srv, d, c, url = start_with(t, pod_list(a, b, cc), period="500ms")
    m = c.expect_pods("ADD", names=[pn("a"), pn("b"), pn("c")])
    if m.get("source") != "http":
        raise AssertionError("source must be http: %s" % summarize(m))
    uids = {pod_name(p): pod_uid(p) for p in m["pods"]}
    if len(set(uids.values())) != 3:
        raise AssertionError("uids not distinct: %s" % uids)

    i = len(c.msgs)
    srv.set(body=pod_list(a, b))
    rm = c.expect(lambda x: x.get("type") == "pods", "a pods message")
    if rm["op"] != "REMOVE" or msg_uids(rm) != [uids[pn("c")]]:
        raise AssertionError("3 -> 2 must give exactly REMOVE [c], got %s" %
                             summarize(rm))
    quiet(c)
    if len(pods_since(c, i)) != 1:
        raise AssertionError("3 -> 2 gave more than one pods message: %s" %
                             [summarize(x) for x in pods_since(c, i)])

    i = len(c.msgs)
    srv.set(body=pod_list(pod_obj("a", image="nginx:1.26"), b))
    c.wait_state(lambda s: [pod_image(p) for p in s.by_name(pn("a"))] ==
                 ["nginx:1.26"], "a with image nginx:1.26")
    new = pod_uid(c.state.one(pn("a")))
    old = uids[pn("a")]
    if new == old or not UID_RE.match(new):
        raise AssertionError("unpinned edit must change the uid: %s -> %s" %
                             (old, new))
    ri, ai = index_of(c, "REMOVE", old, i), index_of(c, "ADD", new, i)
    if ri is None or ai is None or ri > ai:
        raise AssertionError("expected REMOVE(old a) then ADD(new a): %s" %
                             [summarize(x) for x in pods_since(c, i)])
    for x in pods_since(c, i):
        if x["op"] == "UPDATE" or uids[pn("b")] in msg_uids(x):
            raise AssertionError("unexpected message for the edit: %s" %
                                 summarize(x))
    if pod_ann(c.state.one(pn("a")), HASH_ANN) != new:
        raise AssertionError("config.hash must follow the new uid")
    check_sources(c, ("http",))


@http_test("PodList with pinned uids: spec change -> UPDATE (uid and "
           "config.seen kept), status-only change -> RECONCILE, "
           "deletionTimestamp -> DELETE, dropped -> REMOVE")
def test_podlist_pinned_uids_spec_change_update(t):
    def p(**kw):
        kw.setdefault("uid", PINNED)
        return pod_obj("web", **kw)
    other = pod_obj("db", uid=PINNED2, image="redis:7")
    srv, d, c, url = start_with(t, pod_list(p(labels={"v": "1"}), other,
                                            fmt="yaml"), period="500ms")
    c.expect_pods("ADD", uids=[PINNED, PINNED2])
    seen = pod_ann(c.state.pods[PINNED], SEEN_ANN)
    if pod_ann(c.state.pods[PINNED], HASH_ANN) != PINNED:
        raise AssertionError("config.hash must be the pinned uid")

    i = len(c.msgs)
    srv.set(body=pod_list(p(labels={"v": "2"}, image="nginx:1.26"), other,
                          fmt="yaml"))
    m = c.expect(lambda x: x.get("type") == "pods", "a pods message")
    if m["op"] != "UPDATE" or msg_uids(m) != [PINNED]:
        raise AssertionError("pinned spec change must be UPDATE [web], got "
                             "%s" % summarize(m))
    up = m["pods"][0]
    if pod_image(up) != "nginx:1.26" or pod_labels(up).get("v") != "2":
        raise AssertionError("UPDATE lacks the new spec/labels: %s" %
                             json.dumps(up)[:400])
    if pod_ann(up, SEEN_ANN) != seen:
        raise AssertionError("config.seen changed on UPDATE: %r -> %r" %
                             (seen, pod_ann(up, SEEN_ANN)))

    srv.set(body=pod_list(p(labels={"v": "2"}, image="nginx:1.26",
                            status={"message": "second"}), other,
                          fmt="yaml"))
    m = c.expect(lambda x: x.get("type") == "pods", "a pods message")
    if m["op"] != "RECONCILE" or msg_uids(m) != [PINNED]:
        raise AssertionError("status-only change must be RECONCILE [web], "
                             "got %s" % summarize(m))
    if (m["pods"][0].get("status") or {}).get("message") != "second":
        raise AssertionError("RECONCILE lacks the new status: %s" %
                             m["pods"][0].get("status"))

    srv.set(body=pod_list(p(labels={"v": "2"}, image="nginx:1.26",
                            status={"message": "second"},
                            deletion="2030-01-01T00:00:00Z", grace=30),
                          other, fmt="yaml"))
    m = c.expect(lambda x: x.get("type") == "pods", "a pods message")
    if m["op"] != "DELETE" or msg_uids(m) != [PINNED]:
        raise AssertionError("deletionTimestamp must give DELETE [web], got "
                             "%s" % summarize(m))
    if not str((m["pods"][0].get("metadata") or {}).get(
            "deletionTimestamp", "")).startswith("2030-01-01T00:00:00"):
        raise AssertionError("DELETE lacks the deletionTimestamp")

    srv.set(body=pod_list(other, fmt="yaml"))
    m = c.expect(lambda x: x.get("type") == "pods", "a pods message")
    if m["op"] != "REMOVE" or msg_uids(m) != [PINNED]:
        raise AssertionError("dropping the pod must give REMOVE [web], got "
                             "%s" % summarize(m))
    for x in pods_since(c, i):
        if PINNED2 in msg_uids(x):
            raise AssertionError("the unchanged pod was touched: %s" %
                                 summarize(x))
    check_sources(c, ("http",))


@http_test("unchanged content: several polls (counted by the server) and no "
           "pods message between them")
def test_unchanged_content_several_polls_counted_server(t):
    srv, d, c, url = start_with(t, pod_list(pod_obj("a"), pod_obj("b")),
                                period="500ms")
    c.expect_pods("ADD", names=[pn("a"), pn("b")])
    c.expect_type("sources_ready")
    i = len(c.msgs)
    srv.wait_more(4, T_WAIT)
    quiet(c)
    no_pods_since(c, i, "identical bodies must give no update")
    errs = url_lines(d, url, ("error", "warn"))
    if errs:
        raise AssertionError("identical bodies logged problems: %s" % errs)


@http_test("a body re-spelling the same pods (a quantity as a number, a "
           "zero hostNetwork, an unknown field) gives no pods message; the "
           "unknown fields never reach consumers and are warned about once "
           "per URL, again only when the list changes")
def test_body_re_spelling_same_pods_quantity(t):
    def body(cpu, extra=""):
        return ("apiVersion: v1\nkind: PodList\nitems:\n"
                "- metadata: {name: web}\n  spec:\n    containers:\n"
                "    - name: c\n      image: nginx:1.25\n"
                "      imagePullPolicyy: Never\n"
                "      resources: {limits: {cpu: %s}}\n" % cpu + extra)
    srv, d, c, url = start_with(t, body("1"), period="500ms")
    c.expect_pods("ADD", names=[pn("web")])
    ctr = c.state.one(pn("web"))["spec"]["containers"][0]
    if "imagePullPolicyy" in ctr or ctr["resources"]["limits"]["cpu"] != "1":
        raise AssertionError("container as a consumer got it: %s" % ctr)

    def warnings():
        return [x for x in url_lines(d, url, ("warn", "warning"))
                if "unknown field" in x.msg]
    i = len(c.msgs)
    srv.set(body=body("'1'", "    hostNetwork: false\n"))
    srv.wait_more(3, T_WAIT)
    quiet(c)
    no_pods_since(c, i, "the same pods re-spelled must give no update")
    w = warnings()
    if len(w) != 1 or '"items[0].spec.containers[0].imagePullPolicyy"' \
            not in w[0].msg:
        raise AssertionError("want one warning naming the field: %s" % w)
    srv.set(body=body("'1'", "    hostNetwork: false\n    bogus: 1\n"))
    harness.wait_for(lambda: len(warnings()) == 2, T_WAIT,
                     "a second warning for a changed list")
    if '"items[0].spec.bogus"' not in warnings()[1].msg:
        raise AssertionError("the new warning: %s" % warnings()[1])
    srv.wait_more(3, T_WAIT)
    quiet(c)
    no_pods_since(c, i, "unknown fields must give no update")
    if len(warnings()) != 2:
        raise AssertionError("warned again for an unchanged list: %s" %
                             warnings())


@http_test("empty body: REMOVE of every http pod (and a warning); the same "
           "earlier content coming back is ADDed again (podmux deviation)")
def test_empty_body_remove_every_http_pod(t):
    body = pod_list(pod_obj("a"), pod_obj("b"))
    srv, d, c, url = start_with(t, body, period="500ms")
    m = c.expect_pods("ADD", names=[pn("a"), pn("b")])
    uids = msg_uids(m)
    srv.set(body=b"")
    rm = c.expect(lambda x: x.get("type") == "pods", "a pods message")
    if rm["op"] != "REMOVE" or sorted(msg_uids(rm)) != sorted(uids) or \
            rm.get("source") != "http":
        raise AssertionError("empty body must REMOVE both http pods, got %s"
                             % summarize(rm))
    d.wait_log(lambda x: x.level in ("warn", "warning", "error") and
               url in x.msg, "a warning naming %s" % url)
    srv.set(body=body)
    ad = c.expect_pods("ADD", names=[pn("a"), pn("b")])
    if sorted(msg_uids(ad)) != sorted(uids):
        raise AssertionError("same content must give the same uids: %s vs "
                             "%s" % (msg_uids(ad), uids))
    c.wait_until_state([pn("a"), pn("b")])
    check_sources(c, ("http",))


@http_test("empty body as the very first answer: zero-pod ADD marker from "
           "http and sources_ready [http]")
def test_empty_body_very_first_answer_zero(t):
    srv, d, c, url = start_with(t, b"")
    m = c.expect_type("pods")
    if m["op"] != "ADD" or m["pods"] != [] or m.get("source") != "http":
        raise AssertionError("expected the empty ADD marker from http, got "
                             "%s" % summarize(m))
    r = c.expect_type("sources_ready")
    if r.get("sources") != ["http"]:
        raise AssertionError("sources_ready: %s" % r)
    srv.set(body=pod_yaml("web"))
    c.expect_pods("ADD", names=[pn("web")])


# ===========================================================================
# Failures: error logged, last pods kept, polling goes on, recovery

def _set_404(t, srv):
    srv.set(status=404, body=pod_yaml("evil"))


def _set_500(t, srv):
    srv.set(status=500, body=pod_yaml("evil"))


def _set_204(t, srv):
    srv.set(status=204, body=b"")


def _set_down(t, srv):
    srv.stop()


def _set_tls(t, srv):
    # The next hop answers plain text where a TLS handshake is expected.
    raw = t.raw_listener()
    srv.redirects("/pods", 1, "https://127.0.0.1:%d/tls" % raw.port)


def _set_slow(t, srv):
    srv.set(body=pod_yaml("evil"), delay=3)


def _set_cut(t, srv):
    body = pod_yaml("evil") + "#" + "x" * 4000 + "\n"
    srv.set(body=body, cut=200)


def _valid_prefix_list():
    """A YAML PodList of two pods and the length of its first part, which
    is itself a valid PodList of the first pod alone: a body cut there
    must not be mistaken for the whole."""
    body = pod_list(pod_obj("evil"), pod_obj("evil2"), fmt="yaml")
    cut = body.index("\n  - ", body.index("\n  - ") + 1) + 1
    return body, cut


def _set_reset(t, srv):
    body, cut = _valid_prefix_list()
    srv.set(body=body, cut=cut, reset=True)


def _set_chunked_cut(t, srv):
    body, cut = _valid_prefix_list()
    srv.set(body=body, chunked=True, cut=cut)


def _set_chunked_reset(t, srv):
    body, cut = _valid_prefix_list()
    srv.set(body=body, chunked=True, cut=cut, reset=True)


def _set_10mib(t, srv):
    srv.set(body=sized_manifest("evil", MIB10))


def _set_10mib_nolen(t, srv):
    srv.set(body=sized_manifest("evil", MIB10), content_length=False)


def _set_10mib_gzip(t, srv):
    srv.set(body=sized_manifest("evil", MIB10), gzip=True)


def _set_not_pod(t, srv):
    srv.set(body=to_yaml({"apiVersion": "apps/v1", "kind": "Deployment",
                          "metadata": {"name": "evil"},
                          "spec": {"replicas": 1}}))


def _set_garbage(t, srv):
    srv.set(body=harness.garbage_bytes())


def _set_bad_item(t, srv):
    srv.set(body=pod_list(pod_obj("evil"), pod_obj("web"),
                          pod_obj("Bad_Name")))


# name -> (make the server fail, words one of which the reason contains,
#          poll period, a bad body (remembered: reported once))
FAILURES = {
    "HTTP 404": (_set_404, ("404",), "500ms", False),
    "HTTP 500": (_set_500, ("500",), "500ms", False),
    "HTTP 204 (no content, still not 200)": (_set_204, ("204",), "500ms",
                                              False),
    "server down (connection refused)": (
        _set_down, ("refused", "connect", "couldn't", "could not"), "500ms",
        False),
    "TLS error (redirect to https:// on a port that does not speak TLS)": (
        _set_tls, ("ssl", "tls", "handshake", "certificate",
                   "wrong version", "connect"), "500ms", False),
    "slow server beyond the 1s timeout": (
        _set_slow, ("timeout", "timed out", "time out"), "1s", False),
    "connection closed mid-body": (
        _set_cut, ("partial", "closed", "incomplete", "transfer", "short",
                   "receive", "recv", "eof"), "500ms", False),
    # A reset can also meet the next request on its way out, on the
    # connection kept alive ("Failed sending data to the peer").
    "connection reset mid-body (what came is a valid PodList)": (
        _set_reset, ("partial", "reset", "receiv", "recv", "transfer",
                     "sending"), "500ms", False),
    "chunked body cut before its last chunk (what came is a valid PodList)": (
        _set_chunked_cut, ("partial", "closed", "transfer", "chunk",
                           "receiv", "recv"), "500ms", False),
    "chunked body cut by a reset (what came is a valid PodList)": (
        _set_chunked_reset, ("partial", "reset", "transfer", "chunk",
                             "receiv", "recv", "sending"), "500ms", False),
    "body of exactly 10 MiB (Content-Length)": (
        _set_10mib, harness.TOO_LARGE_WORDS, "1s", False),
    "body of exactly 10 MiB (no Content-Length)": (
        _set_10mib_nolen, harness.TOO_LARGE_WORDS, "1s", False),
    "body of exactly 10 MiB once decoded (gzip, small on the wire)": (
        _set_10mib_gzip, harness.TOO_LARGE_WORDS, "1s", False),
    "body that is not a pod (Deployment)": (
        _set_not_pod, ("pod", "kind", "deployment"), "500ms", True),
    "body that is binary garbage": (
        _set_garbage, harness.GARBAGE_WORDS, "500ms", True),
    "PodList with one invalid item": (
        _set_bad_item, ("name", "dns", "subdomain", "lower", "items[2]",
                        "bad_name", "invalid"), "500ms", True),
}


@http_test("failure: error log line naming the redacted URL with a reason, "
           "last pods kept (no REMOVE), polling goes on; then good content "
           "updates the pods", params=list(FAILURES))
def test_failure_error_log_line_naming_redacted(t):
    setter, words, period, bad_body = FAILURES[t.param]
    srv, d, c, url = start_with(t, pod_yaml("web"), period=period)
    m = c.expect_pods("ADD", names=[pn("web")])
    web = pod_uid(m["pods"][0])
    c.expect_type("sources_ready")
    i = len(c.msgs)
    setter(t, srv)
    line = wait_url_error(d, url, 1, words=words)
    t.note("error line: %r" % line)
    # Polling goes on (a bad body: two more polls, both fully handled
    # before the last one started, so "reported once" can be checked).
    if srv.running():
        srv.wait_more(3 if bad_body else 1, T_WAIT, path="/pods")
    else:
        # A failure that repeats is logged once: the polls are seen in
        # the error count of `podmux status`.
        harness.wait_for(lambda: http_errors(t, d) >= 3, T_WAIT,
                         "three failed polls counted")
        if len(url_lines(d, url)) != 1:
            raise AssertionError("a server that stays down is logged once: "
                                 "%s" % url_lines(d, url))
    quiet(c, 0.3)
    no_pods_since(c, i, "a failing poll must keep the last pods")
    if c.state.uids() != {web}:
        raise AssertionError("state changed: %s" % c.state)
    if bad_body:
        n = len(url_lines(d, url))
        if n != 1:
            raise AssertionError("a bad body must be reported once while it "
                                 "stays identical, got %d error lines: %s"
                                 % (n, url_lines(d, url)))
    # Recovery: new good content (a 10 MiB - 1 body, for the size cases).
    if "10 MiB" in t.param:
        good = sized_manifest("fresh", MIB10 - 1)
    else:
        good = pod_yaml("fresh")
    srv.unroute("/pods")
    srv.set(body=good)
    srv.start()
    c.wait_until_state([pn("fresh")])
    if index_of(c, "REMOVE", web, i) is None:
        raise AssertionError("recovery must REMOVE the old pod")
    c.assert_never_named([pn("evil")])
    d.wait_log(lambda x: "succeeded again" in x.msg.lower(),
               "a 'succeeded again' line")
    check_sources(c, ("http",))


@http_test("repeated failures: one error line for one reason however many "
           "polls fail (the rest at debug, each poll counted in status), a "
           "new reason is one more line; success logs 'succeeded again' once "
           "and the next failure is an error line again; at the default "
           "level too")
def test_repeated_failures_one_error_line_one(t):
    srv = t.server()
    srv.set(status=500, body="boom\n")
    url = srv.url("/pods")
    d = http_daemon(t, url, period="500ms", extra=["--v", "1"])
    srv.wait_count(8, T_WAIT)
    # The 7th poll finished before the 8th started.
    harness.wait_for(lambda: len([y for y in url_lines(d, url, ("debug",))
                                  if "500" in y.msg]) >= 6, T_WAIT,
                     "debug lines for the 2nd to 7th failures")
    errs = url_lines(d, url, ("error", "warn", "info"))
    if len(errs) != 1 or "500" not in errs[0].msg:
        raise AssertionError("want exactly 1 line above debug after 7 "
                             "failures of one reason, got %d: %s" %
                             (len(errs), errs))
    if any(w in errs[0].msg.lower() for w in ("quiet", "further errors",
                                                "verbosity")):
        raise AssertionError("the one line need not say it goes quiet: %s" %
                             errs[0])
    srv.set(status=503, body="busy\n")
    wait_url_error(d, url, 2, words=("503",))
    srv.set(body=pod_yaml("web"))
    c = d.connect()
    c.expect_pods("ADD", names=[pn("web")])
    srv.wait_more(1, T_WAIT)
    ok = [x for x in d.logs() if "succeeded again" in x.msg.lower()]
    if len(ok) != 1 or ok[0].level != "info":
        raise AssertionError("want one 'succeeded again' info line, got %s" %
                             ok)
    # The reason starts over: the same failure is an error line again.
    srv.set(status=500, body="boom\n")
    wait_url_error(d, url, 3, words=("500",))
    c.wait_until_state([pn("web")])
    if len(url_lines(d, url)) != 3:
        raise AssertionError("error lines: %s" % url_lines(d, url))

    # At the default level: polls are counted by the server.
    d.stop()
    srv.set(status=500, body="boom\n")
    d2 = http_daemon(t, url, period="500ms", socket_name="2.sock")
    srv.wait_more(5, T_WAIT)    # the 4th poll was handled before the 5th
    if len(url_lines(d2, url, ("error", "warn", "warning", "info"))) != 1:
        raise AssertionError("default level, 4 failed polls: %s" %
                             url_lines(d2, url, ("error", "warn", "info")))


@http_test("an empty body that stays empty: one warning, not one per poll; "
           "content and then empty again, one more")
def test_empty_body_stays_empty_one_warning(t):
    srv, d, c, url = start_with(t, b"", period="500ms")
    c.expect_type("sources_ready")
    srv.wait_more(4, T_WAIT)

    def warnings():
        return [x for x in d.logs() if x.level in ("warn", "warning") and
                url in x.msg and "zero-length" in x.msg]
    if len(warnings()) != 1:
        raise AssertionError("4 empty polls: %s" % warnings())
    srv.set(body=pod_yaml("web"))
    c.wait_until_state([pn("web")])
    srv.set(body=b"")
    c.wait_until_state([])
    srv.wait_more(3, T_WAIT)
    if len(warnings()) != 2:
        raise AssertionError("empty, content, empty: %s" % warnings())


@http_test("failures that are not consecutive (each followed by a poll "
           "that returns the same good content as before): every one is "
           "logged at error level, none says it goes quiet, and each "
           "recovery logs 'succeeded again'")
def test_failures_consecutive_each_followed_poll_returns(t):
    body = pod_yaml("web")
    srv, d, c, url = start_with(t, body, period="500ms")
    c.expect_pods("ADD", names=[pn("web")])
    i = len(c.msgs)
    srv.script([{"status": 500, "body": "boom\n"}, {"body": body}] * 4,
               then={"body": body})
    harness.wait_for(lambda: srv.script_left() == 0, T_WAIT,
                     "the scripted answers to be served")
    srv.wait_more(1, T_WAIT)
    quiet(c, 0.3)
    no_pods_since(c, i, "failures between identical good bodies")
    errs = url_lines(d, url)
    t.note("error lines: %s" % errs)
    t.note("'succeeded' lines: %s" % [x for x in d.logs()
                                      if "succeeded" in x.msg.lower()])

    def four_loud():
        if len(errs) != 4:
            raise AssertionError("want 4 error-level lines for 4 separate "
                                 "failures, got %d" % len(errs))
        quiet_ones = [x for x in errs if any(
            w in x.msg.lower() for w in ("quiet", "further errors",
                                         "repeatedly", "verbosity"))]
        if quiet_ones:
            raise AssertionError(
                "failures 1-4 were never consecutive (a good poll between "
                "each), yet the log went quiet: %s" % quiet_ones)

    def recovered():
        ok = [x for x in d.logs() if "succeeded again" in x.msg.lower()]
        if len(ok) != 4:
            raise AssertionError(
                "each good poll after a failure (content identical to the "
                "last good body) must log 'succeeded again' once: want 4, "
                "got %d" % len(ok))
    t.soft(four_loud)
    t.soft(recovered)


# ===========================================================================
# Requests: headers, encoding, redirects, no pile-up, credentials

HEADER_VALUES = ("val-alpha-1", "val-beta-2", "val-alpha-3")


def podmux_version(t):
    r = t.run_cmd(["version"])
    words = r.stdout.split()
    return words[1] if len(words) > 1 else None


def check_headers(req, d):
    problems = []
    xa = req.header_values("X-A")
    xb = req.header_values("X-B")
    if sorted(xa) != sorted([HEADER_VALUES[0], HEADER_VALUES[2]]):
        problems.append("X-A values %r (want %s and %s)" %
                        (xa, HEADER_VALUES[0], HEADER_VALUES[2]))
    if xb != [HEADER_VALUES[1]]:
        problems.append("X-B values %r (want [%s])" % (xb, HEADER_VALUES[1]))
    ua = req.header_values("User-Agent")
    if len(ua) != 1 or not ua[0].startswith("podmux/"):
        problems.append("User-Agent %r (want podmux/<version>)" % ua)
    ae = ",".join(req.header_values("Accept-Encoding")).lower()
    if "gzip" not in [x.strip().split(";")[0] for x in ae.split(",")]:
        problems.append("Accept-Encoding %r lacks gzip" % ae)
    if problems:
        raise AssertionError("; ".join(problems) + " (headers: %r)" %
                             req.headers)
    leaked = [x for x in d.logs() for v in HEADER_VALUES if v in x.raw]
    if leaked:
        raise AssertionError("header values in the log: %s" % leaked[:3])


@http_test("headers from --manifest-url-header (repeatable; a repeated "
           "name is sent twice), User-Agent podmux/..., Accept-Encoding "
           "gzip, gzip-encoded body decoded; header values never logged")
def test_headers_manifest_url_header_repeatable_repeated(t):
    srv = t.server()
    srv.set(body=pod_json("web"), gzip=True)
    url = srv.url("/pods")
    d = http_daemon(t, url, extra=[
        "--v", "4",
        "--manifest-url-header",
        "X-A:%s,X-B:%s" % (HEADER_VALUES[0], HEADER_VALUES[1]),
        "--manifest-url-header", "X-A:%s" % HEADER_VALUES[2],
        "--manifest-url-header", "X-C:a:b,X-Empty:"])
    c = d.connect()
    c.expect_pods("ADD", names=[pn("web")])
    srv.wait_more(1, T_WAIT)
    for r in srv.requests():
        check_headers(r, d)
    r = srv.requests()[0]
    t.soft(expect_true, r.header_values("X-C") == ["a:b"],
           "X-C:a:b must be sent as 'X-C: a:b' (split at the first colon); "
           "got %r" % r.header_values("X-C"))
    t.soft(expect_true, r.header_values("X-Empty") == [""],
           "X-Empty: must be sent with an empty value; got %r" %
           r.header_values("X-Empty"))
    ver = podmux_version(t)
    t.soft(expect_true, r.header_values("User-Agent") == ["podmux/%s" % ver],
           "User-Agent must be podmux/%s; got %r" % (
               ver, r.header_values("User-Agent")))
    if len(url_lines(d, url)) != 0:
        raise AssertionError("errors: %s" % url_lines(d, url))


@http_test("headers from --config (staticPodURL, staticPodURLHeader, "
           "httpCheckFrequency)")
def test_headers_config_staticpodurl_staticpodurlheader_httpcheckfrequency(t):
    srv = t.server()
    srv.set(body=pod_yaml("web"))
    url = srv.url("/pods")
    cfg = t.path("kubelet.yaml")
    write_file(cfg, to_yaml({
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "staticPodURL": url,
        "staticPodURLHeader": {"X-A": [HEADER_VALUES[0], HEADER_VALUES[2]],
                               "X-B": [HEADER_VALUES[1]]},
        "httpCheckFrequency": "1s"}))
    d = http_daemon(t, None, period=None, extra=["--v", "4", "--config", cfg])
    c = d.connect()
    c.expect_pods("ADD", names=[pn("web")])
    r = c.expect_type("sources_ready")
    if r.get("sources") != ["http"]:
        raise AssertionError("sources_ready: %s" % r)
    # httpCheckFrequency 1s is honoured (the default would be 20s).
    t.soft(srv.wait_more, 2, 15)
    for req in srv.requests():
        check_headers(req, d)


@http_test("redirects: a chain of 3 is followed; 10 is still followed; 11 "
           "fails (error, pods kept); a redirect to file:// is refused")
def test_redirects_chain_3_followed_10_still(t):
    srv = t.server()
    srv.route("/final", body=pod_yaml("web"))
    srv.redirects("/start", 3, "/final")
    url = srv.url("/start")
    d = http_daemon(t, url, period="500ms")
    c = d.connect()
    m = c.expect_pods("ADD", names=[pn("web")])
    web = pod_uid(m["pods"][0])
    first = [r.path for r in srv.requests()[:4]]
    if first != ["/start", "/hop/1", "/hop/2", "/final"]:
        raise AssertionError("the 3 hops were not followed in order: %s" %
                             first)

    # 11 redirects: more than allowed.
    i = len(c.msgs)
    srv.route("/final", body=pod_yaml("eleven"))
    srv.redirects("/start", 11, "/final")
    wait_url_error(d, url, 1, words=("redirect", "maximum", "too many"))
    finals = srv.count("/final")
    srv.wait_more(12, T_WAIT, path=None)
    quiet(c)
    no_pods_since(c, i, "too many redirects must keep the last pods")
    if srv.count("/final") != finals:
        raise AssertionError("the target of 11 redirects was fetched")
    if srv.count("/hop/10") == 0:
        raise AssertionError("hops seen: %s" % sorted(
            set(r.path for r in srv.requests())))

    # 10 redirects: "up to 10" are followed.
    srv.route("/final", body=pod_yaml("ten"))
    srv.redirects("/start", 10, "/final")
    t.soft(c.wait_until_state, [pn("ten")])

    # A redirect to file:// (a valid manifest there) is refused.
    evil = t.path("evil.yaml")
    write_file(evil, pod_yaml("evil"))
    before = len(url_lines(d, url))
    i = len(c.msgs)
    srv.redirects("/start", 1, "file://" + evil)
    wait_url_error(d, url, before + 1)
    srv.wait_more(1, T_WAIT, path="/start")
    quiet(c)
    no_pods_since(c, i, "a redirect to file:// must keep the last pods")
    c.assert_never_named([pn("evil")])

    # Back to a good chain: the pods update.
    srv.route("/final", body=pod_yaml("again"))
    srv.redirects("/start", 2, "/final")
    c.wait_until_state([pn("again")])
    if web in c.state.uids():
        raise AssertionError("old pod still held")


@http_test("no pile-up: period 3s, server delays each answer 2s: never two "
           "requests at once, next poll one period after the previous "
           "finished; identical answers give no update")
def test_no_pile_up_period_3s_server(t):
    srv = t.server()
    srv.set(body=pod_yaml("web"), delay=2)
    url = srv.url("/pods")
    d = http_daemon(t, url, period="3s")
    c = d.connect()
    c.expect_pods("ADD", names=[pn("web")], timeout=T_WAIT)
    i = len(c.msgs)
    srv.wait_count(3, T_LONG)
    quiet(c)
    if srv.max_inflight != 1:
        raise AssertionError("the server saw %d requests at once" %
                             srv.max_inflight)
    reqs = srv.requests()
    for a, b in zip(reqs, reqs[1:]):
        if a.t_end is None or b.t_start < a.t_end:
            raise AssertionError("a request started before the previous one "
                                 "finished: %s" % reqs)
        if a.outcome != "sent":
            raise AssertionError("a 2s answer did not complete within the "
                                 "3s timeout: %s" % reqs)
    gaps = ["%.2f" % (b.t_start - a.t_end) for a, b in zip(reqs, reqs[1:])]
    t.note("gaps end->start: %s" % gaps)

    def sliding():
        if any(float(g) < 2.5 for g in gaps):
            raise AssertionError("next poll less than a period after the "
                                 "previous finished: gaps %s" % gaps)
    t.soft(sliding)
    no_pods_since(c, i, "identical answers must give no update")


@http_test("URL with user:password@ and ?token=secret: used for the request "
           "but neither appears in the log (even at -v 4) nor the stream")
def test_url_user_password_token_secret_used(t):
    srv = t.server()
    srv.set(status=500, body="boom\n")
    url = srv.url("/pods", userinfo="alice:password", query="token=secret")
    d = http_daemon(t, url, period="500ms", extra=["--v", "4"])
    wait_url_error(d, redacted(srv), 1, words=("500",))
    srv.set(body=pod_yaml("web"))
    c = d.connect()
    c.expect_pods("ADD", names=[pn("web")])
    srv.set(body=b"")
    c.wait_until_state([])
    srv.wait_more(1, T_WAIT)
    r = srv.requests()[0]
    if r.query != "token=secret":
        raise AssertionError("query not sent: %r" % r.query)
    auth = r.header_values("Authorization")
    if auth != ["Basic " + base64.b64encode(b"alice:password").decode()]:
        raise AssertionError("user info not sent as basic auth: %r" % auth)
    text = d.stderr_text()
    with open(d.stdout_path, "rb") as f:
        text += f.read().decode("utf-8", "replace")
    for w in ("password", "secret", "alice", "cGFzc3dvcmQ"):
        if w in text:
            raise AssertionError("%r appears in the log: %s" % (
                w, [x for x in text.splitlines() if w in x][:3]))
    if "token=" in text:
        raise AssertionError("the query string was logged")
    if any(w in json.dumps(c.msgs) for w in ("password", "secret")):
        raise AssertionError("credentials in the stream")


# ===========================================================================
# Together with the file source; modes; flags

@http_test("HTTP and file sources together: pods keyed apart by source; "
           "sources_ready waits for both (none while the URL answers 500), "
           "then [file, http]")
def test_http_file_sources_together_pods_keyed(t):
    m = t.mkdir("manifests")
    write_file(os.path.join(m, "web.yaml"), pod_yaml("web"))
    srv = t.server()
    srv.set(status=500, body="boom\n")
    url = srv.url("/pods")
    d = http_daemon(t, url, manifest_path=m, period="500ms")
    c = d.connect()
    fm = c.expect_pods("ADD", names=[pn("web")])
    if fm.get("source") != "file":
        raise AssertionError("first ADD must be from file: %s" %
                             summarize(fm))
    file_uid = pod_uid(fm["pods"][0])
    srv.wait_more(2, T_WAIT)
    quiet(c)
    early = [x for x in c.msgs if x.get("type") == "sources_ready"]
    if early:
        raise AssertionError("sources_ready before http delivered: %s" %
                             early)
    srv.set(body=pod_list(pod_obj("web"), pod_obj("api")))
    hm = c.expect_pods("ADD", names=[pn("api"), pn("web")])
    if hm.get("source") != "http":
        raise AssertionError("http pods from source %s" % hm.get("source"))
    r = c.expect_type("sources_ready")
    if r.get("sources") != ["file", "http"]:
        raise AssertionError("sources_ready: %s" % r)
    webs = c.state.by_name(pn("web"))
    srcs = sorted(pod_ann(p, SOURCE_ANN) for p in webs)
    if len(webs) != 2 or srcs != ["file", "http"] or \
            len(set(pod_uid(p) for p in webs)) != 2:
        raise AssertionError("the same manifest from file and http must be "
                             "two pods with distinct uids: %s" % webs)
    # A late consumer: one ADD per source, synced, sources_ready.
    c2 = d.connect()
    init = c2.read_initial()
    by_src = sorted((x["source"], tuple(msg_names(x))) for x in init
                    if x["type"] == "pods")
    want = [("file", (pn("web"),)), ("http", (pn("api"), pn("web")))]
    if by_src != want:
        raise AssertionError("late consumer's initial state %s, want %s" %
                             (by_src, want))
    nxt = c2.recv(T_SHORT)
    if nxt.get("type") != "sources_ready" or \
            nxt.get("sources") != ["file", "http"]:
        raise AssertionError("late consumer: %s" % summarize(nxt))
    # Emptying the URL removes only the http pods.
    srv.set(body=b"")
    rm = c.expect_pods("REMOVE", names=[pn("api"), pn("web")])
    if rm.get("source") != "http" or file_uid in msg_uids(rm):
        raise AssertionError("empty http body touched the file pod: %s" %
                             summarize(rm))
    c.wait_until_state([pn("web")])
    if c.state.uids() != {file_uid}:
        raise AssertionError("the file pod must stay: %s" % c.state)


@http_test("snapshot mode: a change gives a SET from source http carrying "
           "every pod (http and file)")
def test_snapshot_mode_change_gives_set_source(t):
    m = t.mkdir("manifests")
    write_file(os.path.join(m, "local.yaml"), pod_yaml("local"))
    srv = t.server()
    srv.set(body=pod_list(pod_obj("a"), fmt="yaml"))
    d = http_daemon(t, srv.url("/pods"), manifest_path=m, mode="snapshot",
                    period="500ms")
    c = d.connect()
    c.wait_until_state([pn("a"), pn("local")])
    c.expect_type("sources_ready")
    srv.set(body=pod_list(pod_obj("a"), pod_obj("b"), fmt="yaml"))
    s = c.expect(lambda x: x.get("type") == "pods", "a pods message")
    if s["op"] != "SET" or s.get("source") != "http" or \
            msg_names(s) != [pn("a"), pn("b"), pn("local")]:
        raise AssertionError("expected SET from http with a, b, local: %s" %
                             summarize(s))
    srcs = {pod_name(p): pod_ann(p, SOURCE_ANN) for p in s["pods"]}
    if srcs != {pn("a"): "http", pn("b"): "http", pn("local"): "file"}:
        raise AssertionError("config.source annotations: %s" % srcs)
    srv.set(body=pod_list(pod_obj("b"), fmt="yaml"))
    s = c.expect(lambda x: x.get("type") == "pods", "a pods message")
    if s["op"] != "SET" or msg_names(s) != [pn("b"), pn("local")]:
        raise AssertionError("expected SET with b, local: %s" % summarize(s))
    for x in pods_since(c, 0):
        if x["op"] != "SET":
            raise AssertionError("snapshot mode emitted %s" % summarize(x))


def _bad_flag(t, args, codes, words, secrets=()):
    r = t.run_cmd(["run", "--socket", t.path("bad.sock"),
                   "--node-name", NODE, "--plugins-registry-dir", ""] + args,
                  timeout=T_SHORT)
    leaked = [w for w in secrets if w in r.stdout + r.stderr]
    if leaked:
        raise AssertionError("podmux run %s: %s in the output: %r" %
                             (" ".join(args), leaked, r.stderr[-400:]))
    if r.returncode not in codes:
        raise AssertionError("podmux run %s: exit %d (want %s); stderr %r" %
                             (" ".join(args), r.returncode, codes,
                              r.stderr[-400:]))
    if not r.stderr.strip():
        raise AssertionError("podmux run %s: no message" % " ".join(args))
    harness.assert_reason(r.stderr, words, "podmux run %s" % " ".join(args))


@http_test("bad flags: --manifest-url ftp://x, 'not a url' -> exit 1 or 2 "
           "with a message; --http-check-frequency 0s -> exit 2")
def test_bad_flags_manifest_url_ftp_x(t):
    t.soft(_bad_flag, t, ["--manifest-url", "ftp://x"], (1, 2),
           ("url", "http", "ftp", "scheme"))
    t.soft(_bad_flag, t, ["--manifest-url", "not a url"], (1, 2),
           ("url", "http", "scheme", "pars"))
    t.soft(_bad_flag, t, ["--manifest-url",
                          "ftp://alice:password@x/p?token=secret"], (1, 2),
           ("url", "http", "ftp", "scheme"), secrets=("password", "secret"))
    t.soft(_bad_flag, t, ["--manifest-url", "http://127.0.0.1:9/x",
                          "--http-check-frequency", "0s"], (2,),
           ("http-check-frequency", "duration"))
    t.soft(_bad_flag, t, ["--manifest-url", "http://127.0.0.1:9/x",
                          "--http-check-frequency", "soon"], (2,),
           ("http-check-frequency", "duration"))


@http_test("the files request's \"files\" message names the manifest URL as "
           "the HTTP source does: without its credentials, and whole even "
           "when longer than the metrics keep of it")
def test_files_message_names_whole_url(t):
    srv = t.server()
    srv.set(body=pod_list(pod_obj("a")))
    path = "/pods/" + "x" * 5000
    d = http_daemon(t, srv.url(path, userinfo="user:secret"))
    f = harness.Consumer(t, d.sock, first_line='{"request":"files"}')
    head = f.expect_type("files")
    assert head["url"] == redacted(srv, path), head["url"][:200]
    assert "secret" not in json.dumps(head)


@http_test("the manifest URL has a record (podmux status --files): applied "
           "with the digest of the body, its pods and the seq of the message "
           "that carried them; a bad body is rejected with the reason while "
           "the last pods stay named; a good one again is applied")
def test_manifest_url_has_record_podmux_status(t):
    srv = t.server()
    body = pod_list(pod_obj("a"), pod_obj("b"))
    srv.set(body=body)
    d = http_daemon(t, srv.url())
    c = d.connect(threaded=True)
    c.read_initial()
    c.wait_until_state([pn("a"), pn("b")])

    def record(state):
        def get():
            r = t.run_cmd(["status", "--socket", d.sock, "--files", "-o",
                           "json"])
            recs = [x for x in json.loads(r.stdout) if x.get("url")]
            return recs[0] if recs and recs[0]["state"] == state else None
        return harness.wait_for(get, T_WAIT, "the URL's record %s" % state)
    rec = record("applied")
    assert rec["source"] == "http" and rec["url"] == redacted(srv), rec
    assert rec["digest"] == "sha256:" + hashlib.sha256(
        body.encode()).hexdigest() and rec["size"] == len(body), rec
    assert sorted(p["name"] for p in rec["pods"]) == [pn("a"), pn("b")], rec
    # Polled before this consumer's initial state (which then has them), or
    # in a message it saw.
    assert rec["seq"] < c.initial_seq() or [
        m for m in c.pods_msgs() if m["seq"] == rec["seq"]], (rec, c.msgs)
    srv.set(body="apiVersion: v1\nkind: Pod\nmetadata: [\n")
    rec = record("rejected")
    assert rec["reason"] and "line" in rec["reason"], rec
    assert sorted(p["name"] for p in rec["pods"]) == [pn("a"), pn("b")], rec
    srv.set(body=pod_list(pod_obj("a", image="nginx:2")))
    c.wait_state(lambda st: [pod_image(p) for p in st.by_name(pn("a"))] ==
                 ["nginx:2"] and st.names() == [pn("a")], "a at nginx:2")
    rec = record("applied")
    assert [p["name"] for p in rec["pods"]] == [pn("a")], rec
    carried = [m for m in c.pods_msgs() if m["seq"] == rec["seq"]]
    assert carried and [pod_image(p) for p in carried[0]["pods"]] == \
        ["nginx:2"], (rec, c.pods_msgs())


if __name__ == "__main__":
    harness.main()
