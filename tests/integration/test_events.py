#!/usr/bin/env python3
"""Integration tests of Kubernetes Events (doc/events.md), run against the
real podmux binary and scripts/fake-apiserver (its events endpoints).

What is checked: the exact bodies written (POST of a new event, PATCH of a
repeat's count), that a duplicate pod name is a FailedValidation Warning
on the pod and a rejected static pod or manifest URL body a Warning on
the Node, client-go's aggregation and spam filter as the server sees them,
--event-qps and --event-burst, --events=false, a server that refuses
events (403, 404, 500, reset: one log line each, one when it clears, pods
flowing meanwhile), Retry-After, a PATCH that finds its event gone, a
burst of 1,000 bad files, and `kubectl get events`.

Timing: nothing asserts speed.  The only lower bounds asserted are the
ones podmux guarantees: the --event-qps spacing and Retry-After.  The
test of a reset connection waits for the recorder's retry (a random part
of 10 s, as client-go's).
"""

import datetime
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import apitls  # noqa: E402
import harness  # noqa: E402
from fakeapi import FakeAPI  # noqa: E402
from harness import (NODE, T_LONG, T_SHORT, T_WAIT, pn, pod_obj,  # noqa: E402
                     pod_yaml, test, wait_for, write_file)
from manifest_server import ManifestServer  # noqa: E402

WRITES = ("event_create", "event_patch")
NAME_RE = re.compile(r'"name":"(%s)\.([0-9a-f]+)"' % NODE)
TS_RE = re.compile(r'"(first|last)Timestamp":"(\d{4}-\d\d-\d\dT\d\d:\d\d:'
                   r'\d\dZ)"')
COMBINED = "(combined from similar events): "


# ---------------------------------------------------------------------------
# Setup

class _UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=T_SHORT)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(T_SHORT)
        self.sock.connect(self.unix_path)


class Env:
    """A fake API server, a podmux on it with a static pod directory and a
    metrics socket, and one consumer."""

    def __init__(self, t, extra=(), url=None, server=None, kubeconfig=None,
                 connect=True):
        self.t = t
        self.srv = server or FakeAPI(t)
        self.kc = kubeconfig or apitls.simple_kubeconfig(t.path("kc.yaml"),
                                                         self.srv.url)
        self.dir = t.mkdir("manifests")
        self.metrics_sock = t.path("metrics.sock")
        args = ["--kubeconfig", self.kc, "--metrics-address",
                self.metrics_sock] + list(extra)
        if url:
            args += ["--manifest-url", url, "--http-check-frequency", "1s"]
        self.d = harness.Daemon(t, self.dir, extra=args)
        t.daemons.append(self.d)
        self.d.start()
        self.c = self.d.connect() if connect else None
        if self.c:
            self.c.read_initial()

    def close(self):
        self.srv.close()

    # -- files --------------------------------------------------------------
    def path(self, name):
        return os.path.join(self.dir, name)

    def bad(self, name, text=None):
        """A manifest that does not parse; returns its path."""
        return write_file(self.path(name), text or "kind: [%s\n" % name)

    def good(self, name, **kw):
        write_file(self.path(name + ".yaml"), pod_yaml(name, **kw))
        self.c.wait_state(lambda s: s.by_name(pn(name)),
                          "holding %s" % pn(name))

    def reason(self, path):
        """The reason podmux logged for the file (the event's words)."""
        line = self.d.wait_file_error(path)
        return line.msg.split('file "%s": ' % path, 1)[1].strip()

    # -- the server's view ---------------------------------------------------
    def writes(self, since=0):
        """The event writes the server has answered (or ended)."""
        return [r for r in self.srv.requests(since, kind=WRITES)
                if r.get("t_end") is not None]

    def wait_writes(self, n, since=0, timeout=None):
        def ok():
            w = self.writes(since)
            return w if len(w) >= n else None
        try:
            return wait_for(ok, timeout or T_WAIT, "%d event writes" % n,
                            interval=0.05)
        except AssertionError as e:
            raise AssertionError("%s; got: %s" % (e, [
                (r["method"], r["path"], r["status"])
                for r in self.writes(since)]))

    def events(self):
        return self.srv.cmd("events")["events"]

    # -- metrics -------------------------------------------------------------
    def metrics(self):
        conn = _UnixHTTP(self.metrics_sock)
        try:
            conn.request("GET", "/metrics")
            text = conn.getresponse().read().decode()
        finally:
            conn.close()
        out = {}
        for line in text.splitlines():
            if line.startswith("podmux_event"):
                k, v = line.rsplit(" ", 1)
                out[k] = int(v)
        return out

    def wait_metrics(self, pred, what, timeout=None):
        box = [None]

        def ok():
            box[0] = self.metrics()
            return pred(box[0])
        try:
            wait_for(ok, timeout or T_WAIT, what, interval=0.1)
        except AssertionError as e:
            raise AssertionError("%s; metrics: %s" % (e, box[0]))
        return box[0]

    def log_count(self, needle, level=None):
        return sum(1 for x in self.d.logs() if needle in x.msg and (
            level is None or x.level == level))


def dropped(m, reason):
    return m.get('podmux_events_dropped_total{reason="%s"}' % reason, 0)


def node_body(message, count=1):
    """The event podmux writes about the node, its name and times masked."""
    return ('{"kind":"Event","apiVersion":"v1","metadata":{"name":"%s.HEX",'
            '"namespace":"default"},"involvedObject":{"kind":"Node","name":'
            '"%s","uid":"%s"},"reason":"StaticPodRejected","message":%s,'
            '"source":{"component":"podmux","host":"%s"},"firstTimestamp":'
            '"TS","lastTimestamp":"TS","count":%d,"type":"Warning",'
            '"eventTime":null,"reportingComponent":"podmux",'
            '"reportingInstance":"%s"}' % (NODE, NODE, NODE,
                                           json.dumps(message), NODE, count,
                                           NODE))


def masked(body):
    """body with the name's time and the timestamps masked, after checking
    both are about now."""
    now = time.time()
    for m in TS_RE.finditer(body):
        t = datetime.datetime.strptime(m.group(2), "%Y-%m-%dT%H:%M:%SZ") \
            .replace(tzinfo=datetime.timezone.utc).timestamp()
        if abs(t - now) > 300:
            raise AssertionError("%sTimestamp %s is not about now" % (
                m.group(1), m.group(2)))
    for m in NAME_RE.finditer(body):
        if abs(int(m.group(2), 16) / 1e9 - now) > 300:
            raise AssertionError("event name %s.%s: not a time of now" % (
                m.group(1), m.group(2)))
    body = NAME_RE.sub(r'"name":"\1.HEX"', body)
    return TS_RE.sub(r'"\1Timestamp":"TS"', body)


def expect_eq(got, want, what):
    if got != want:
        raise AssertionError("%s:\n got: %s\nwant: %s" % (what, got, want))


def event_name(body):
    return json.loads(body)["metadata"]["name"]


def find_kubectl():
    k = shutil.which("kubectl")
    if k:
        return k
    k = os.path.join(harness.SRCDIR, "build", "test-tools", "usr", "bin",
                     "kubectl")
    return k if os.access(k, os.X_OK) else None


# ===========================================================================
# What is written

@test("events: a rejected static pod manifest is a Warning on the Node; "
      "the POST body is exactly the kubelet's shape")
def test_events_rejected_static_pod_manifest_warning(t):
    e = Env(t)
    path = e.bad("bad.yaml")
    why = e.reason(path)
    w = e.wait_writes(1)
    r = w[0]
    expect_eq((r["method"], r["path"], r["status"], r["content_type"]),
              ("POST", "/api/v1/namespaces/default/events", 201,
               "application/json"), "the request")
    expect_eq(masked(r["body"]), node_body(
        'static pod manifest "%s" rejected: %s' % (path, why)), "the body")
    if not r["headers"].get("user-agent", "").startswith("podmux/"):
        raise AssertionError("user agent %r" % r["headers"].get(
            "user-agent"))
    ev = e.events()
    expect_eq([(x["reason"], x["count"], x["involvedObject"]["kind"])
               for x in ev], [("StaticPodRejected", 1, "Node")],
              "the server's events")
    m = e.wait_metrics(lambda m: m.get("podmux_events_sent_total") == 1,
                       "one event sent")
    expect_eq((m["podmux_events_recorded_total"],
               m["podmux_event_queue_depth"]), (1, 0), "recorded, depth")


@test("events: the same rejection again is a PATCH of the first event's "
      "count, lastTimestamp and message")
def test_events_same_rejection_again_patch_first(t):
    e = Env(t)
    path = e.bad("web.yaml", "kind: [web\n")
    why = e.reason(path)
    first = e.wait_writes(1)[0]
    name = event_name(first["body"])
    # Fixed, then broken the same way: logged again, so an event again.
    e.good("web")
    mark = e.srv.last_id()
    e.bad("web.yaml", "kind: [web\n")
    r = e.wait_writes(1, since=mark)[0]
    expect_eq((r["method"], r["path"], r["status"], r["content_type"]),
              ("PATCH", "/api/v1/namespaces/default/events/" + name, 200,
               "application/strategic-merge-patch+json"), "the request")
    expect_eq(masked(r["body"]), '{"count":2,"lastTimestamp":"TS","message":'
              '%s}' % json.dumps('static pod manifest "%s" rejected: %s' % (
                  path, why)), "the patch")
    expect_eq([x["count"] for x in e.events()], [2], "the server's count")


@test("events: a PATCH that finds its event gone writes it again with its "
      "count (client-go)")
def test_events_patch_finds_event_gone_writes(t):
    e = Env(t)
    e.bad("web.yaml", "kind: [web\n")
    name = event_name(e.wait_writes(1)[0]["body"])
    e.srv.cmd("clear_events")
    e.good("web")
    mark = e.srv.last_id()
    e.bad("web.yaml", "kind: [web\n")
    w = e.wait_writes(2, since=mark)
    expect_eq([(r["method"], r["status"]) for r in w],
              [("PATCH", 404), ("POST", 201)], "the writes")
    ev = e.events()
    expect_eq([(x["metadata"]["name"], x["count"]) for x in ev], [(name, 2)],
              "the event written again")
    e.d.assert_alive()
    if e.log_count("events:", "warn"):
        raise AssertionError("a gone event is no problem to log: %s" % [
            x.msg for x in e.d.logs() if "events:" in x.msg])
    t.note("requests: %s" % e.srv.summary())


@test("events: a duplicate pod name from the manifest URL is a "
      "FailedValidation Warning on the dropped pod; a bad body a Warning "
      "on the Node")
def test_events_duplicate_pod_name_manifest_url(t):
    ms = ManifestServer()
    try:
        web1 = pod_obj("web", uid="11111111-1111-4111-8111-111111111111")
        web2 = pod_obj("web", uid="22222222-2222-4222-8222-222222222222",
                       image="busybox:1.36")
        ms.set(body=json.dumps({"apiVersion": "v1", "kind": "PodList",
                                "items": [web1, web2]}))
        e = Env(t, url=ms.url())
        e.c.wait_state(lambda s: s.by_name(pn("web")), "holding web")
        r = e.wait_writes(1)[0]
        body = json.loads(r["body"])
        expect_eq(r["path"], "/api/v1/namespaces/default/events", "path")
        expect_eq(body["involvedObject"], {
            "kind": "Pod", "namespace": "default", "name": pn("web"),
            "uid": "22222222-2222-4222-8222-222222222222",
            "apiVersion": "v1"}, "involvedObject")
        expect_eq((body["type"], body["reason"], body["count"],
                   body["source"], body["metadata"]["namespace"]),
                  ("Warning", "FailedValidation", 1,
                   {"component": "podmux", "host": NODE}, "default"),
                  "the event")
        if not body["metadata"]["name"].startswith(pn("web") + "."):
            raise AssertionError("name %r" % body["metadata"]["name"])
        if "duplicate pod name" not in body["message"]:
            raise AssertionError("message %r" % body["message"])
        mark = e.srv.last_id()
        ms.set(body="kind: [nope\n")
        r = e.wait_writes(1, since=mark)[0]
        body = json.loads(r["body"])
        want = 'manifest URL "%s" rejected: ' % ms.url()
        if not body["message"].startswith(want):
            raise AssertionError("message %r, want it to start with %r" % (
                body["message"], want))
        expect_eq((body["involvedObject"]["kind"], body["reason"]),
                  ("Node", "StaticPodRejected"), "the event")
    finally:
        ms.stop()


# ===========================================================================
# Correlation, as the server sees it

@test("events: the tenth distinct rejection within 10 minutes is the "
      "combined event; later ones PATCH its count")
def test_events_tenth_distinct_rejection_within_10(t):
    e = Env(t, connect=False)
    paths = [e.bad("bad-%02d.yaml" % i) for i in range(1, 13)]
    w = e.wait_writes(12)
    got = [(r["method"], json.loads(r["body"]).get("message", "")
            .startswith(COMBINED)) for r in w]
    expect_eq(got, [("POST", False)] * 9 + [("POST", True)] +
              [("PATCH", True)] * 2, "writes (method, combined)")
    agg = event_name(w[9]["body"])
    for r, n in ((w[10], 2), (w[11], 3)):
        expect_eq(r["path"], "/api/v1/namespaces/default/events/" + agg,
                  "the combined event's PATCH")
        expect_eq(json.loads(r["body"])["count"], n, "its count")
    # Each message names its file (the combined one the latest).
    named = [p for p in paths if any(p in r["body"] for r in w)]
    if len(named) != 12:
        raise AssertionError("files not named by any event: %s" % sorted(
            set(paths) - set(named)))


@test("events: client-go's spam filter: 25 writes about the node, the rest "
      "counted as dropped")
def test_events_client_go_s_spam_filter(t):
    e = Env(t, connect=False)
    for i in range(40):
        e.bad("bad-%02d.yaml" % i)
    m = e.wait_metrics(lambda m: m.get("podmux_events_recorded_total") == 40
                       and m.get("podmux_event_queue_depth") == 0,
                       "40 events recorded and written")
    expect_eq((m["podmux_events_sent_total"], dropped(m, "spam_filter"),
               dropped(m, "queue_full")), (25, 15, 0),
              "sent, throttled, queue full")
    expect_eq(len(e.writes()), 25, "writes the server saw")


@test("events: --event-qps 2 --event-burst 1: the k-th write no sooner "
      "than k/2 s after the first event")
def test_events_event_qps_2_event_burst(t):
    e = Env(t, extra=["--event-qps", "2", "--event-burst", "1"],
            connect=False)
    start = time.time()
    for i in range(4):
        e.bad("bad-%d.yaml" % i)
    w = e.wait_writes(4)
    after = [r["t"] - start for r in w]
    t.note("writes after %s s" % ["%.2f" % a for a in after])
    # The bucket's guarantee: one token at the start, one every 0.5 s;
    # every event came after start.
    for k, a in enumerate(after):
        if a < 0.5 * k:
            raise AssertionError("write %d after %.2f s, before %.1f s: %s"
                                 % (k + 1, a, 0.5 * k, after))


@test("events: --events=false records nothing (no recorder, no metrics)")
def test_events_events_false_records_nothing_no(t):
    e = Env(t, extra=["--events=false"])
    path = e.bad("bad.yaml")
    e.reason(path)
    e.good("web")
    m = e.metrics()
    if m:
        raise AssertionError("event metrics without events: %s" % m)
    if e.log_count("events: recording"):
        raise AssertionError("the recorder was made")
    expect_eq(e.writes(), [], "event writes")


# ===========================================================================
# A server that refuses events

@test("events: a server refusing events (403, 404, 500, reset): one line "
      "per reason, pods flow, one line when writes work again")
def test_events_server_refusing_events_403_404(t):
    e = Env(t)
    n = [0]

    def bad_file():
        n[0] += 1
        e.bad("bad-%02d.yaml" % n[0])

    def refuse(status, body="status"):
        e.srv.cmd("clear_faults")
        e.srv.fail(match="events", status=status, count=10000, body=body)

    for status, needle in ((403, "HTTP 403 Forbidden"),
                           (404, "HTTP 404 NotFound"),
                           (500, "HTTP 500 InternalError")):
        refuse(status)
        before = e.metrics()
        bad_file()
        bad_file()
        e.wait_metrics(lambda m: dropped(m, "rejected") ==
                       dropped(before, "rejected") + 2,
                       "two more events rejected (%d)" % status)
        e.good("web-%d" % status)
        expect_eq(e.log_count(needle, "warn"), 1, "lines naming %s" % needle)
    refuse(0, body="reset")
    mark = e.srv.last_id()
    bad_file()
    e.d.wait_log(lambda x: "no answer from the API server" in x.msg,
                 "no answer from the API server")
    e.good("web-reset")
    e.srv.cmd("clear_faults")
    e.d.wait_log(lambda x: "accepts events again" in x.msg,
                 "the API server accepts events again", timeout=T_LONG)
    expect_eq(e.log_count("no answer from the API server"), 1,
              "lines for the resets")
    expect_eq(e.log_count("accepts events again"), 1, "lines when it clears")
    line = [x.msg for x in e.d.logs() if "accepts events again" in x.msg][0]
    if "(6 dropped meanwhile)" not in line:
        raise AssertionError("the clearing line: %r" % line)
    w = e.writes(mark)
    if w[-1]["status"] != 201:
        raise AssertionError("the reset write was not written in the end: "
                             "%s" % [(r["status"], r["outcome"]) for r in w])
    e.d.assert_alive()


@test("events: a 401 to an event makes the API source's client read its "
      "token file again, as after a 401 of its own")
def test_events_401_event_makes_api_source(t):
    srv = FakeAPI(t, tokens=["tok-1"])
    tok = t.path("token")
    write_file(tok, "tok-1\n")
    kc = apitls.simple_kubeconfig(t.path("kc.yaml"), srv.url,
                                  user={"tokenFile": tok})
    e = Env(t, server=srv, kubeconfig=kc, connect=False)
    e.bad("one.yaml")
    expect_eq([r["status"] for r in e.wait_writes(1)], [201], "first write")
    # Rotated while the watch stays open: only a 401 tells.
    srv.set_tokens("tok-2")
    write_file(tok, "tok-2\n")
    e.bad("two.yaml")
    e.d.wait_log(lambda x: "HTTP 401" in x.msg, "the refused event")
    e.bad("three.yaml")
    w = e.wait_writes(3)
    expect_eq([(r["status"], r["auth"]) for r in w],
              [(201, "token:0"), (401, "token-mismatch"), (201, "token:0")],
              "writes (status, token)")


@test("events: 429 and 503 with Retry-After are written again after it",
      params=("429", "503"))
def test_events_429_503_retry_after_written(t):
    e = Env(t, connect=False)
    e.srv.fail(match="event_create", status=int(t.param), count=1,
               retry_after=1)
    e.bad("bad.yaml")
    w = e.wait_writes(2)
    expect_eq([r["status"] for r in w], [int(t.param), 201], "statuses")
    gap = w[1]["t"] - w[0]["t"]
    t.note("retried after %.2f s" % gap)
    if gap < 0.99:
        raise AssertionError("retried after %.2f s, before Retry-After 1" %
                             gap)
    if e.log_count("events:", "warn"):
        raise AssertionError("a Retry-After is no problem to log")


@test("events: a write answered 429 more often than it is retried is "
      "dropped, and the next write still waits out the last Retry-After")
def test_events_retry_after_spent_next_waits(t):
    e = Env(t, connect=False)
    e.srv.fail(match="event_create", status=429, count=11, retry_after=1)
    e.bad("one.yaml")
    e.bad("two.yaml")
    w = e.wait_writes(12, timeout=T_LONG)
    expect_eq([r["status"] for r in w], [429] * 11 + [201], "statuses")
    expect_eq([r["body"].count("one.yaml") > 0 for r in w],
              [True] * 11 + [False], "the first 11 writes are one.yaml's")
    # The lower bound podmux guarantees: the next write begins no sooner
    # than Retry-After after the 429 before it (and so after its start).
    gap = w[11]["t"] - w[10]["t"]
    t.note("the next write began %.2f s after the last 429" % gap)
    if gap < 0.99:
        raise AssertionError("the next write began %.2f s after the last "
                             "429, before its Retry-After 1" % gap)


# ===========================================================================
# Load

@test("events: a burst of 1,000 bad files: the loop answers all along, "
      "pods still flow, the queue stays small")
def test_events_burst_1_000_bad_files(t):
    e = Env(t)
    answered = 0
    for i in range(1000):
        e.bad("bad-%04d.yaml" % i, "kind: [x%d\n" % i)
    # The daemon answers `podmux status` while it works through them.
    while e.metrics().get("podmux_events_recorded_total") != 1000:
        p = t.run_cmd(["status", "--socket", e.d.sock], timeout=T_WAIT)
        if p.returncode != 0:
            raise AssertionError("status failed during the burst: %s" %
                                 p.stderr)
        answered += 1
        if answered > 5000:
            raise AssertionError("the burst never ended: %s" % e.metrics())
    e.good("after-burst")
    m = e.wait_metrics(lambda m: m.get("podmux_event_queue_depth") == 0,
                       "the queue drained")
    t.note("status answers during the burst: %d; metrics: %s" % (
        answered, m))
    expect_eq((m["podmux_events_sent_total"], dropped(m, "spam_filter"),
               dropped(m, "queue_full")), (25, 975, 0),
              "sent, throttled, queue full")
    if m["podmux_event_queue_peak"] > 25:
        raise AssertionError("queue peak %d" % m["podmux_event_queue_peak"])
    e.d.assert_alive()


# ===========================================================================
# Real clients, and the same client as the API source

@test("events: kubectl get events shows them (TLS and a token, as the API "
      "source's own requests)")
def test_events_kubectl_get_events_shows_them(t):
    kubectl = find_kubectl()
    if not kubectl:
        t.skip("no kubectl (scripts/deps-test-tools installs Debian's "
               "kubernetes-client)")
    pki = apitls.copy_pki(t.path("pki"))
    srv = FakeAPI(t, tls=True, pki=pki, tokens=["ev-tok"])
    kc = apitls.simple_kubeconfig(
        t.path("kc.yaml"), srv.url,
        cluster={"certificate-authority-data": apitls.b64file(pki["ca.crt"])},
        user={"token": "ev-tok"})
    e = Env(t, server=srv, kubeconfig=kc)
    path = e.bad("broken.yaml")
    e.wait_writes(1)
    auths = {r.get("auth") for r in e.writes()}
    expect_eq(auths, {"token:0"}, "how event writes authenticated")
    env = dict(os.environ, HOME=t.tmp)
    env.pop("KUBECONFIG", None)

    def run(*args):
        p = subprocess.run([kubectl, "--kubeconfig", kc] + list(args),
                           capture_output=True, text=True, timeout=60,
                           env=env)
        t.note("kubectl %s -> %d: %s %s" % (" ".join(args), p.returncode,
                                            p.stdout[-600:], p.stderr[-300:]))
        if p.returncode != 0:
            raise AssertionError("kubectl %s failed: %s" % (" ".join(args),
                                                            p.stderr))
        return p.stdout
    out = run("get", "events")
    lines = out.splitlines()
    if lines[0].split() != ["LAST", "SEEN", "TYPE", "REASON", "OBJECT",
                            "MESSAGE"]:
        raise AssertionError("kubectl's header: %r" % lines[0])
    hit = [ln for ln in lines[1:] if ln.split()[1:4] == [
        "Warning", "StaticPodRejected", "node/%s" % NODE] and path in ln]
    if not hit:
        raise AssertionError("kubectl get events lacks the node's event: %r"
                             % out)
    out = run("get", "events", "-A", "--field-selector",
              "involvedObject.kind=Node", "-o", "jsonpath={.items[*].reason}")
    expect_eq(out.split(), ["StaticPodRejected"], "selected by kind")


if __name__ == "__main__":
    harness.main()
