#!/usr/bin/env python3
"""Integration tests of the API source's checkpoint (doc/checkpoint.md),
run against the real podmux binary and scripts/fake-apiserver.

What is checked: a daemon restarted while the API server is down serves
the checkpoint's pods at once (a refused connection, a server that
refuses the list) or after --checkpoint-grace (a server that does not
answer); when the server answers, only the differences reach consumers,
and sources_ready comes only then; the latest state is written at a clean
shutdown; a status-only change waits for the refresh while a change of
what runs is written within the interval; a checkpoint that is not
provably ours and whole is refused with one error line and a status
entry, and the source waits for the server, serving nothing; a directory
that cannot be trusted stops the daemon at start.  Status and metrics
show whose pods the source serves and the checkpoint's counters.  The C
and Go client libraries (and the Python module once it has
Client.source_state) say the source serves its checkpoint across a daemon
restart, with its time and resourceVersion, then that it is live.

Timing: nothing asserts speed.  The waits for the server to be listed
again follow the API source's backoff (0.8 s doubling), so they are
generous.
"""

import hashlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import apitls  # noqa: E402
import harness  # noqa: E402
from fakeapi import FakeAPI  # noqa: E402
from harness import NODE, T_SHORT, T_WAIT, msg_names, pod_ann, pod_labels, summarize, test  # noqa: E402

sys.path.insert(0, os.path.join(harness.SRCDIR, "python"))
import podmux  # noqa: E402

HEADER = 56
BUILDDIR = os.environ.get("PODMUX_BUILDDIR") or os.path.dirname(harness.BIN)
T_RELIST = 60 * harness.SCALE   # the backoff after a few failures, and more


# ---------------------------------------------------------------------------
# Setup

class Env:
    """A fake API server with pods on this node, a kubeconfig for it and a
    checkpoint directory."""

    def __init__(self, t, pods=("a", "b", "c")):
        self.t = t
        # A bookmark every half second to each watch that allows them
        # (the API server sends one about every minute): what confirms a
        # watch resumed from the checkpoint (doc/checkpoint.md section 7).
        self.srv = FakeAPI(t, extra=["--bookmark-interval", "0.5"])
        for name in pods:
            self.srv.create(name)
        self.kc = apitls.simple_kubeconfig(t.path("kubeconfig"), self.srv.url)
        self.dir = t.path("ckpt")
        self.file = os.path.join(self.dir, "api.checkpoint")

    def daemon(self, extra=(), node=NODE, kubeconfig=None, start=True, expect_exit=False):
        d = harness.Daemon(self.t, None, node=node, freq=None, expect_exit=expect_exit,
                           extra=["--kubeconfig", kubeconfig or self.kc, "--checkpoint-dir", self.dir] +
                           list(extra))
        self.t.daemons.append(d)
        if start:
            d.start()
        return d

    def close(self):
        self.srv.close()


def api_names(state):
    return sorted(harness.pod_name(p) for p in state.pods.values()
                  if pod_ann(p, "kubernetes.io/config.source") == "api")


def wait_api_names(c, names, timeout=None):
    want = sorted(names)
    return c.wait_state(lambda s: api_names(s) == want, "api pods %s" % want, timeout or T_WAIT)


def truth_names(srv):
    return sorted(p["metadata"]["name"] for p in srv.truth(NODE))


def read_checkpoint(path):
    """(meta, pods) of a checkpoint file, checked as podmux checks it."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"PODMUXCP" or struct.unpack("<I", data[8:12])[0] != 1:
        raise AssertionError("not a version 1 checkpoint: %r" % data[:16])
    if struct.unpack("<Q", data[16:24])[0] != len(data) - HEADER:
        raise AssertionError("length mismatch")
    if hashlib.sha256(data[:24] + data[HEADER:]).digest() != data[24:HEADER]:
        raise AssertionError("checksum mismatch")
    lines = data[HEADER:].decode().split("\n")
    if lines[-1] != "":
        raise AssertionError("content does not end with a newline")
    meta = json.loads(lines[0])
    return meta, [json.loads(x) for x in lines[1:-1]]


def write_raw(path, data):
    """Replaces the checkpoint with data, mode 0600."""
    os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def status(d):
    """The daemon's status message."""
    c = d.connect(first_line='{"request":"status"}')
    m = c.expect(lambda x: x.get("type") == "status", "the status message")
    c.close()
    return m


def api_status(d):
    for s in status(d).get("sources") or []:
        if s.get("name") == "api":
            return s
    raise AssertionError("no api source in the status")


def metrics(path):
    """GET /metrics over the unix socket: {name{labels}: value}."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(T_SHORT)
    s.connect(path)
    s.sendall(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    body = data.split(b"\r\n\r\n", 1)[1].decode()
    out = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.rpartition(" ")
            out[k] = float(v)
    return out


def seen_or_expect(c, pred, what, timeout=None):
    """The first message received so far, or from now on, that pred
    accepts."""
    for m in c.msgs:
        if pred(m):
            return m
    return c.expect(pred, what, timeout)


def records(c, since):
    """The pods messages since since that carry pods: the empty ADD that
    marks a source's first delivery in incremental mode
    (doc/pod-config.md 4.1) is not a record of a pod."""
    return [x for x in c.pods_msgs(since) if x.get("pods")]


def serving_lines(d):
    return [x for x in d.logs() if "serving the checkpoint" in x.msg]


def first_run(env, extra=()):
    """A daemon that lists the server and writes the checkpoint, stopped
    cleanly; then the server stops.  Returns the checkpoint's pods."""
    d = env.daemon(extra)
    c = d.connect()
    wait_api_names(c, truth_names(env.srv))
    harness.wait_for(lambda: os.path.exists(env.file), T_WAIT, "the checkpoint %s" % env.file)
    d.stop()
    env.srv.stop()
    return read_checkpoint(env.file)


# ---------------------------------------------------------------------------
# Offline restart

@test("offline restart: the checkpoint's pods at once from source api, no sources_ready; "
      "when the server answers, only the differences, then sources_ready")
def test_offline_restart_checkpoint_s_pods_once(t):
    env = Env(t)
    msock = t.path("metrics.sock")
    d = env.daemon(["--metrics-address", msock])
    c = d.connect()
    wait_api_names(c, ["a", "b", "c"])
    harness.wait_for(lambda: os.path.exists(env.file), T_WAIT, "the first checkpoint")
    st = api_status(d)
    if st.get("serving") != "live" or (st.get("checkpoint") or {}).get("writes", 0) < 1:
        raise AssertionError("status after the first list: %s" % st)
    m = metrics(msock)
    for k, want in (('podmux_api_source_serving{state="live"}', 1), ("podmux_checkpoint_writes_total", 1)):
        if m.get(k, -1) < want:
            raise AssertionError("metrics: %s is %s, want >= %s" % (k, m.get(k), want))
    # A change just before a clean shutdown: written at the shutdown (the
    # interval of a minute has not passed).
    env.srv.label("a", v="2")
    c.wait_state(lambda s: any(pod_labels(p).get("v") == "2" for p in s.pods.values()), "a labelled")
    d.stop()
    meta, pods = read_checkpoint(env.file)
    by = {p["metadata"]["name"]: p for p in pods}
    if sorted(by) != ["a", "b", "c"] or by["a"]["metadata"].get("labels", {}).get("v") != "2":
        raise AssertionError("the checkpoint after a clean shutdown lacks the last change: %s" % sorted(by))
    if meta["node"] != NODE or not meta["server"].startswith(env.srv.url):
        raise AssertionError("checkpoint identity: %s" % meta)
    for p in pods:
        anns = p["metadata"].get("annotations") or {}
        if "kubernetes.io/config.source" in anns or "kubernetes.io/config.seen" in anns:
            raise AssertionError("the merger's stamp was written: %s" % anns)

    # The server goes away; meanwhile b is deleted, d created, c changed.
    env.srv.stop()
    env.srv.delete("b")
    env.srv.create("d")
    env.srv.set_image("c", "nginx:2")
    d.start()
    c = d.connect()
    wait_api_names(c, ["a", "b", "c"], T_SHORT)
    if [x for x in c.msgs if x.get("type") == "sources_ready"]:
        raise AssertionError("sources_ready while serving the checkpoint: %s" % [summarize(x) for x in c.msgs])
    lines = serving_lines(d)
    if len(lines) != 1 or lines[0].level != "warn":
        raise AssertionError("want one warning that the checkpoint is served: %s" % lines)
    st = api_status(d)
    served = (st.get("checkpoint") or {}).get("served") or {}
    if st.get("serving") != "checkpoint" or served.get("resource_version") != meta["resourceVersion"]:
        raise AssertionError("status while serving the checkpoint: %s" % st)
    m = metrics(msock)
    if m.get('podmux_api_source_serving{state="checkpoint"}') != 1 or "podmux_checkpoint_age_seconds" not in m:
        raise AssertionError("metrics while serving the checkpoint: %s" %
                             {k: v for k, v in m.items() if "checkpoint" in k or "serving" in k})
    # The stream says so (doc/protocol.md "source"): live, or, to a later
    # consumer, right after its synced.
    said = seen_or_expect(c, lambda x: x.get("type") == "source", "the source message", T_SHORT)
    late = d.connect()
    late.read_initial()
    after = late.expect(lambda x: x.get("type") == "source", "the source message after synced", T_SHORT)
    for x in (said, after):
        ck = x.get("checkpoint") or {}
        if x.get("source") != "api" or x.get("state") != "checkpoint" or \
                ck.get("resource_version") != meta["resourceVersion"] or not ck.get("time"):
            raise AssertionError("source message: %s" % x)
    if late.msgs.index(after) != [x.get("type") for x in late.msgs].index("synced") + 1:
        raise AssertionError("the state is said right after synced: %s" % [summarize(x) for x in late.msgs])

    mark = len(c.msgs)
    env.srv.start()
    wait_api_names(c, ["a", "c", "d"], T_RELIST)
    c.expect_type("sources_ready", T_WAIT)
    live = [i for i, x in enumerate(c.msgs) if x.get("type") == "source" and x.get("state") == "live"]
    first = min(c.msgs.index(x) for x in c.pods_msgs(mark))
    if len(live) != 1 or live[0] > first:
        raise AssertionError("want one message saying api is live, before the server's records: %s" %
                             [summarize(x) for x in c.msgs[mark:]])
    fresh = d.connect()
    fresh.expect_type("sources_ready", T_SHORT)
    if [x for x in fresh.msgs if x.get("type") == "source"]:
        raise AssertionError("a consumer of a live source is told of a checkpoint: %s" % fresh.msgs)
    got = sorted((x["op"], tuple(msg_names(x))) for x in c.pods_msgs(mark))
    want = sorted([("REMOVE", ("b",)), ("ADD", ("d",)), ("UPDATE", ("c",))])
    if got != want:
        raise AssertionError("after the checkpoint, want only the differences %s, got %s" % (
            want, [summarize(x) for x in c.pods_msgs(mark)]))
    if [x for x in d.logs() if x.level == "info" and "replace the checkpoint's" in x.msg] == []:
        raise AssertionError("no line saying the server's pods replace the checkpoint's")
    if api_status(d).get("serving") != "live":
        raise AssertionError("not live after the list: %s" % api_status(d))
    # The live state is written again (a change of what runs).
    harness.wait_for(lambda: sorted(p["metadata"]["name"] for p in read_checkpoint(env.file)[1]) ==
                     ["a", "c", "d"], T_WAIT, "the live state written")
    env.close()


@test("a server that refuses the list (403) has the checkpoint served at once, not after the grace")
def test_server_refuses_list_403_has_checkpoint(t):
    env = Env(t, pods=("a", "b"))
    first_run(env)
    env.srv.start()
    env.srv.fail(match="any", status=403, count=1000)
    d = env.daemon(["--checkpoint-grace", "1h"])
    c = d.connect()
    wait_api_names(c, ["a", "b"], T_SHORT)
    line = serving_lines(d)[0].msg
    if "403" not in line:
        raise AssertionError("the line does not say why: %r" % line)
    env.srv.cmd("clear_faults")
    mark = len(c.msgs)
    c.expect_type("sources_ready", T_RELIST)
    if records(c, mark):
        raise AssertionError("the same pods listed live gave records: %s" %
                             [summarize(x) for x in c.pods_msgs(mark)])
    env.close()


@test("the operator's view: podmux watch's table says when api serves its checkpoint (time, "
      "resourceVersion), then when it is live; podmux status shows no last success for api until "
      "a list succeeds, and says it serves the checkpoint of that time")
def test_operator_s_view_checkpoint_then(t):
    env = Env(t, pods=("a", "b"))
    meta, _ = first_run(env)
    env.srv.start()
    env.srv.fail(match="any", status=403, count=1000)
    msock = t.path("metrics.sock")
    d = env.daemon(["--checkpoint-grace", "1h", "--metrics-address", msock])
    # At 80 columns the line is whole.
    w = t.spawn(["watch", "--socket", d.sock], env=dict(os.environ, COLUMNS="80"))
    note = w.wait_line(lambda x: x.startswith("-- source api:"), T_SHORT, "a note on what api serves")
    served = api_status(d)["checkpoint"]["served"]
    want = "-- source api: checkpoint of %s (resourceVersion %s)" % (
        served["time"], meta["resourceVersion"])
    if note != want:
        raise AssertionError("note %r, want %r" % (note, want))
    st = api_status(d)
    if st.get("last_success") is not None or st.get("serving") != "checkpoint":
        raise AssertionError("a last success while serving the checkpoint: %s" % st)
    last = 'podmux_source_last_success_timestamp_seconds{source="api"}'
    if metrics(msock).get(last) != 0:
        raise AssertionError("metrics while serving the checkpoint: %s is %s" % (last, metrics(msock).get(last)))
    text = t.run_cmd(["status", "--socket", d.sock]).stdout.splitlines()
    row = [x for x in text if x.startswith("api ")]
    if len(row) != 1 or row[0].split()[3] != "never" or \
            "       serving its checkpoint of %s (resourceVersion %s): the API server has not answered " \
            "since the start" % (served["time"], meta["resourceVersion"]) not in text:
        raise AssertionError("podmux status while serving the checkpoint:\n%s" % "\n".join(text))
    env.srv.cmd("clear_faults")
    w.wait_line(lambda x: x == "-- source api: live", T_RELIST, "the note that api is live")
    notes = [x for x in w.lines() if x.startswith("-- source ")]
    if notes != [want, "-- source api: live"]:
        raise AssertionError("notes %s" % notes)
    harness.wait_for(lambda: api_status(d).get("last_success"), T_WAIT, "a last success once live")
    text = t.run_cmd(["status", "--socket", d.sock]).stdout.splitlines()
    row = [x for x in text if x.startswith("api ")]
    if len(row) != 1 or row[0].split()[3] == "never" or "       serving live" not in text:
        raise AssertionError("podmux status once live:\n%s" % "\n".join(text))
    w.stop()
    env.close()


@test("a server that does not answer in time: the checkpoint after --checkpoint-grace, "
      "then the live list with no record for unchanged pods")
def test_server_does_answer_time_checkpoint_after(t):
    env = Env(t, pods=("a",))
    first_run(env)
    env.srv.start()
    # Answered "come back in 5 s": the list waits, the grace does not.
    env.srv.fail(match="any", status=503, count=1, retry_after=5)
    d = env.daemon(["--checkpoint-grace", "1s"])
    c = d.connect()
    wait_api_names(c, ["a"], T_SHORT)
    line = serving_lines(d)[0].msg
    if "no list within 1.0 s" not in line:
        raise AssertionError("the line does not say the grace passed: %r" % line)
    mark = len(c.msgs)
    c.expect_type("sources_ready", T_WAIT)
    if records(c, mark):
        raise AssertionError("unchanged pods gave records: %s" % [summarize(x) for x in c.pods_msgs(mark)])
    env.close()


@test("a server that answers within the grace: the checkpoint is not served")
def test_server_answers_within_grace_checkpoint_served(t):
    env = Env(t, pods=("a",))
    first_run(env)
    env.srv.start()
    d = env.daemon()
    c = d.connect()
    c.expect_type("sources_ready", T_WAIT)
    if serving_lines(d):
        raise AssertionError("the checkpoint was served: %s" % serving_lines(d))
    if api_status(d).get("serving") != "live":
        raise AssertionError("status: %s" % api_status(d))
    env.close()


@test("once a list succeeded, a 410, SIGHUP and an outage behave as without a checkpoint: "
      "the pods are kept, the checkpoint is never served")
def test_once_list_succeeded_410_sighup_outage(t):
    env = Env(t, pods=("a", "b"))
    d = env.daemon()
    c = d.connect()
    wait_api_names(c, ["a", "b"])
    c.expect_type("sources_ready", T_WAIT)
    lists = len(env.srv.requests(kind="list"))
    env.srv.wait_watch()  # "expire" ends the watches open now
    env.srv.action("expire")
    harness.wait_for(lambda: len(env.srv.requests(kind="list")) > lists, T_RELIST, "the relist after a 410")
    d.send_signal(signal.SIGHUP)
    mark = len(c.msgs)
    env.srv.stop()
    harness.settle(2)
    if records(c, mark) or serving_lines(d) or api_names(c.state) != ["a", "b"]:
        raise AssertionError("an outage after a list changed the pods or served the checkpoint: %s %s" % (
            [summarize(x) for x in c.pods_msgs(mark)], serving_lines(d)))
    if api_status(d).get("serving") != "live":
        raise AssertionError("status: %s" % api_status(d))
    env.close()


# ---------------------------------------------------------------------------
# A restart resumes from the checkpoint

def api_pods_exact(state):
    """{name: (image, labels)} of the api pods a consumer holds."""
    return {harness.pod_name(p): (p["spec"]["containers"][0]["image"], pod_labels(p))
            for p in state.pods.values() if pod_ann(p, "kubernetes.io/config.source") == "api"}


def truth_exact(srv):
    return {p["metadata"]["name"]: (p["spec"]["containers"][0]["image"], p["metadata"].get("labels") or {})
            for p in srv.truth(NODE)}


def churn_while_down(srv):
    """b deleted, d created, c's image changed, a labelled."""
    srv.delete("b")
    srv.create("d")
    srv.set_image("c", "nginx:2")
    srv.label("a", v="3")


@test("a restart within the server's window: a watch from the checkpoint's resourceVersion, no list; "
      "the exact state, then sources_ready")
def test_restart_within_window_no_list(t):
    env = Env(t)
    meta, _ = first_run(env)
    env.srv.start()
    churn_while_down(env.srv)
    since = env.srv.last_id()
    d = env.daemon(["--checkpoint-interval", "1s"])
    c = d.connect()
    c.expect_type("sources_ready", T_WAIT)
    if api_pods_exact(c.state) != truth_exact(env.srv):
        raise AssertionError("state %s, want %s" % (api_pods_exact(c.state), truth_exact(env.srv)))
    lists = env.srv.requests(since, kind=("list", "continue"))
    watches = env.srv.requests(since, kind="watch")
    if lists:
        raise AssertionError("a resumed start listed: %s" % env.srv.summary(since))
    if not watches or watches[0]["params"].get("resourceVersion") != meta["resourceVersion"]:
        raise AssertionError("the first watch is not from the checkpoint's resourceVersion %s: %s" % (
            meta["resourceVersion"], env.srv.summary(since)))
    if serving_lines(d) or [x for x in c.msgs if x.get("type") == "source"]:
        raise AssertionError("the checkpoint was served though the server answered: %s" % serving_lines(d))
    if api_status(d).get("serving") != "live":
        raise AssertionError("status: %s" % api_status(d))
    # Live from now on: a change comes as usual, and is written.
    env.srv.create("e")
    wait_api_names(c, ["a", "c", "d", "e"])
    harness.wait_for(lambda: sorted(p["metadata"]["name"] for p in read_checkpoint(env.file)[1]) ==
                     ["a", "c", "d", "e"], T_WAIT, "the live state written")
    env.close()


@test("a pod deleted while the daemon was down is REMOVEd after a resumed start, with no list")
def test_pod_deleted_while_down_removed(t):
    env = Env(t)
    first_run(env)
    # The server is down at the start: the checkpoint is served, then the
    # resumed watch brings what changed.
    env.srv.delete("b")
    d = env.daemon()
    c = d.connect()
    wait_api_names(c, ["a", "b", "c"], T_SHORT)
    since = env.srv.last_id()
    mark = len(c.msgs)
    env.srv.start()
    c.expect_type("sources_ready", T_RELIST)
    got = [(x["op"], tuple(msg_names(x))) for x in records(c, mark)]
    if got != [("REMOVE", ("b",))]:
        raise AssertionError("want b REMOVEd only, got %s" % [summarize(x) for x in c.pods_msgs(mark)])
    if env.srv.requests(since, kind=("list", "continue")):
        raise AssertionError("a resumed start listed: %s" % env.srv.summary(since))
    env.close()


@test("a restart outside the server's window: the resumed watch gets 410, then one list; the exact state")
def test_restart_outside_window_410_list(t):
    env = Env(t)
    meta, _ = first_run(env)
    env.srv.start()
    churn_while_down(env.srv)
    env.srv.compact()   # the checkpoint's version is history now
    since = env.srv.last_id()
    d = env.daemon()
    c = d.connect()
    c.expect_type("sources_ready", T_RELIST)
    if api_pods_exact(c.state) != truth_exact(env.srv):
        raise AssertionError("state %s, want %s" % (api_pods_exact(c.state), truth_exact(env.srv)))
    pods = env.srv.requests(since, pods_only=True)
    first = pods[0] if pods else {}
    if first.get("kind") != "watch" or first["params"].get("resourceVersion") != meta["resourceVersion"] or \
            first.get("outcome") != "expired":
        raise AssertionError("want a watch from %s answered 410 first: %s" % (
            meta["resourceVersion"], env.srv.summary(since)))
    lists = [r for r in pods if r.get("kind") in ("list", "continue")]
    if len(lists) != 1:
        raise AssertionError("want one list after the 410: %s" % env.srv.summary(since))
    if not [x for x in d.logs() if "cannot watch on from resourceVersion %s" % meta["resourceVersion"] in x.msg]:
        raise AssertionError("no line saying the checkpoint's version could not be resumed")
    if serving_lines(d):
        raise AssertionError("the checkpoint was served though the server answered: %s" % serving_lines(d))
    env.close()


@test("a resumed watch refused with a plain 410, or from a version the server does not have (its store "
      "restored: too large), falls back to one list; the exact state", params=("status-410", "too-large"))
def test_resume_refused_falls_back_list(t):
    env = Env(t)
    meta, _ = first_run(env)
    env.srv.start()
    if t.param == "status-410":
        env.srv.fail(match="watch", status=410, count=1, message="too old resource version")
    else:
        env.srv.config(too_large_wait=0.1)
        env.srv.cmd("set_rv", rv=int(meta["resourceVersion"]) - 5)
    churn_while_down(env.srv)
    since = env.srv.last_id()
    d = env.daemon()
    c = d.connect()
    c.expect_type("sources_ready", T_RELIST)
    if api_pods_exact(c.state) != truth_exact(env.srv):
        raise AssertionError("state %s, want %s" % (api_pods_exact(c.state), truth_exact(env.srv)))
    pods = env.srv.requests(since, pods_only=True)
    first = pods[0] if pods else {}
    if first.get("kind") != "watch" or first["params"].get("resourceVersion") != meta["resourceVersion"]:
        raise AssertionError("want the watch from %s first: %s" % (meta["resourceVersion"], env.srv.summary(since)))
    if len([r for r in pods if r.get("kind") in ("list", "continue")]) != 1:
        raise AssertionError("want one list: %s" % env.srv.summary(since))
    if serving_lines(d):
        raise AssertionError("the checkpoint was served though the server answered: %s" % serving_lines(d))
    env.close()


@test("a resumed watch answered 504 with an empty body (no word of the version) is tried again "
      "from the checkpoint's version: no list")
def test_resume_504_empty_body_watch_again(t):
    env = Env(t)
    meta, _ = first_run(env)
    env.srv.start()
    env.srv.fail(match="watch", status=504, count=1, body="empty")
    since = env.srv.last_id()
    d = env.daemon()
    c = d.connect()
    c.expect_type("sources_ready", T_RELIST)
    watches = env.srv.requests(since, kind="watch")
    if env.srv.requests(since, kind=("list", "continue")) or len(watches) < 2 or \
            watches[0]["status"] != 504 or watches[1]["params"].get("resourceVersion") != meta["resourceVersion"]:
        raise AssertionError("want the watch from %s again, no list: %s" % (
            meta["resourceVersion"], env.srv.summary(since)))
    env.close()


def server_snapshot(srv, rv):
    """{name: resourceVersion} of this node's pods at rv, by the server."""
    import urllib.request
    url = "%s/api/v1/pods?fieldSelector=spec.nodeName%%3D%s&resourceVersion=%s&resourceVersionMatch=Exact" % (
        srv.url, NODE, rv)
    with urllib.request.urlopen(url, timeout=T_SHORT) as r:
        body = json.loads(r.read().decode())
    return {p["metadata"]["name"]: p["metadata"]["resourceVersion"] for p in body["items"]}


@test("kill -9 at random during churn: the checkpoint's resourceVersion and pods always agree, and each "
      "restart resumes to the server's exact state")
def test_kill_9_during_churn_checkpoint_agrees(t):
    import random
    import threading
    seed = int(os.environ.get("PODMUX_TEST_SEED") or random.randrange(1 << 30))
    rnd = random.Random(seed)
    t.note("seed %d" % seed)
    env = Env(t, pods=["p%d" % i for i in range(8)])
    stop = threading.Event()
    errors = []

    def churn():
        r = random.Random(seed + 1)
        n = 100
        try:
            while not stop.is_set():
                names = [p["metadata"]["name"] for p in env.srv.truth(NODE)]
                k = r.random()
                if k < 0.3 or len(names) < 3:
                    env.srv.create("q%d" % n)
                    n += 1
                elif k < 0.55:
                    env.srv.delete(r.choice(names))
                elif k < 0.8:
                    env.srv.label(r.choice(names), v=str(n))
                    n += 1
                else:
                    env.srv.status(r.choice(names), {"phase": r.choice(["Pending", "Running"])})
                stop.wait(0.01)
        except Exception as e:  # noqa: BLE001 (reported by the test)
            errors.append(e)

    th = threading.Thread(target=churn, daemon=True)
    th.start()
    try:
        d = env.daemon(["--checkpoint-interval", "50ms"])
        checked = 0
        for _ in range(6):
            c = d.connect()
            c.expect_type("sources_ready", T_RELIST)
            c.close()
            harness.settle(rnd.uniform(0.05, 0.6))
            d.stop(signal.SIGKILL)
            if not os.path.exists(env.file):
                d.start()
                continue
            meta, pods = read_checkpoint(env.file)
            got = {p["metadata"]["name"]: p["metadata"]["resourceVersion"] for p in pods}
            want = server_snapshot(env.srv, meta["resourceVersion"])
            if got != want:
                raise AssertionError("checkpoint at resourceVersion %s holds %s; the server had %s (seed %d)" % (
                    meta["resourceVersion"], got, want, seed))
            checked += 1
            d.start()
        if checked < 3:
            raise AssertionError("only %d checkpoint(s) to check (seed %d)" % (checked, seed))
    finally:
        stop.set()
        th.join(T_SHORT)
    if errors:
        raise errors[0]
    c = d.connect()
    c.expect_type("sources_ready", T_RELIST)
    want = truth_exact(env.srv)
    c.wait_state(lambda s: api_pods_exact(s) == want, "the server's state (seed %d)" % seed, T_WAIT)
    env.close()


# ---------------------------------------------------------------------------
# What is written when

@test("a status-only change waits for the refresh; a change of what runs is written within the interval")
def test_status_only_change_waits_refresh_change(t):
    env = Env(t, pods=("a",))
    d = env.daemon(["--checkpoint-interval", "1s"])
    c = d.connect()
    wait_api_names(c, ["a"])
    harness.wait_for(lambda: os.path.exists(env.file), T_WAIT, "the first checkpoint")
    first = os.stat(env.file).st_ino
    env.srv.status("a", {"phase": "Running"})
    c.wait_state(lambda s: (s.one("a").get("status") or {}).get("phase") == "Running", "a running")
    harness.settle(3)
    if os.stat(env.file).st_ino != first:
        raise AssertionError("a status-only change was written before the refresh")
    env.srv.label("a", v="2")
    harness.wait_for(lambda: os.stat(env.file).st_ino != first, T_WAIT, "the label written")
    _, pods = read_checkpoint(env.file)
    if pods[0]["metadata"]["labels"].get("v") != "2" or pods[0]["status"].get("phase") != "Running":
        raise AssertionError("the write holds the whole state: %s" % pods[0])
    env.close()


# ---------------------------------------------------------------------------
# Refused checkpoints

def corrupt(env):
    data = bytearray(open(env.file, "rb").read())
    data[HEADER + 10] ^= 0x20
    write_raw(env.file, bytes(data))
    return "checksum mismatch: corrupt", []


def truncated(env):
    data = open(env.file, "rb").read()
    write_raw(env.file, data[:len(data) // 2])
    return "truncated or corrupt", []


def version(env):
    data = bytearray(open(env.file, "rb").read())
    data[8:12] = struct.pack("<I", 2)
    data[24:HEADER] = hashlib.sha256(bytes(data[:24]) + bytes(data[HEADER:])).digest()
    write_raw(env.file, bytes(data))
    return "format version 2, and this podmux reads version 1", []


def other_node(env):
    return 'written for node "node1", and this is node "node2"', ["node2"]


def other_server(env):
    kc = apitls.simple_kubeconfig(env.t.path("kubeconfig-localhost"), env.srv.url_host("localhost"))
    return "written for API server", ["kubeconfig", kc]


def too_old(env):
    return "older than the maximum age", ["--checkpoint-max-age", "1ms"]


def mode(env):
    os.chmod(env.file, 0o644)
    return "has mode 0644, not 0600", []


def owner(env):
    os.chown(env.file, 4242, -1)
    return "is owned by uid 4242", []


REFUSALS = {"corrupt": corrupt, "truncated": truncated, "version": version, "node": other_node,
            "server": other_server, "too-old": too_old, "mode": mode, "owner": owner}


@test("a checkpoint not provably ours and whole is refused with one error line and a status entry; "
      "the source waits for the server and serves nothing", params=sorted(REFUSALS))
def test_checkpoint_provably_ours_whole_refused_one(t):
    if t.param == "owner" and os.geteuid() != 0:
        t.note("skipped: only root can give the file another owner")
        return
    env = Env(t, pods=("a", "b"))
    first_run(env)
    reason, how = REFUSALS[t.param](env)
    kw = {}
    if how and how[0] == "node2":
        kw["node"] = "node2"
    elif how and how[0] == "kubeconfig":
        kw["kubeconfig"] = how[1]
    elif how:
        kw["extra"] = how
    d = env.daemon(**kw)
    c = d.connect()
    line = d.wait_log(lambda x: "checkpoint refused" in x.msg, "the refusal", T_SHORT)
    if line.level != "error" or reason not in line.msg or "waiting for the API server" not in line.msg:
        raise AssertionError("want one error line with the reason %r: %r" % (reason, line.msg))
    st = api_status(d)
    if st.get("serving") != "waiting" or reason not in ((st.get("checkpoint") or {}).get("refused") or ""):
        raise AssertionError("status: %s" % st)
    harness.settle(1.5)
    if c.pods_msgs() or serving_lines(d):
        raise AssertionError("a refused checkpoint was served or taken for no pods: %s" %
                             [summarize(x) for x in c.pods_msgs()])
    if len([x for x in d.logs() if "checkpoint refused" in x.msg]) != 1:
        raise AssertionError("the refusal is said more than once")
    if t.param in ("node", "server"):
        env.close()
        return      # the server is not this daemon's
    env.srv.start()
    wait_api_names(c, ["a", "b"], T_RELIST)
    env.close()


@test("no checkpoint yet: an info line, the source waits as without one")
def test_no_checkpoint_yet_info_line_source(t):
    env = Env(t, pods=("a",))
    env.srv.stop()
    d = env.daemon()
    c = d.connect()
    line = d.wait_log(lambda x: "no checkpoint" in x.msg, "no checkpoint yet", T_SHORT)
    if line.level != "info":
        raise AssertionError("a missing checkpoint is no error: %r" % line)
    harness.settle(1)
    if c.pods_msgs():
        raise AssertionError("pods without a checkpoint: %s" % [summarize(x) for x in c.pods_msgs()])
    env.srv.start()
    wait_api_names(c, ["a"], T_RELIST)
    env.close()


@test("a checkpoint directory others may write, or not a directory: podmux stops at start, saying why")
def test_checkpoint_directory_others_may_write_directory(t):
    env = Env(t, pods=())
    os.mkdir(env.dir, 0o700)
    os.chmod(env.dir, 0o775)
    d = env.daemon(start=False, expect_exit=True)
    d.start(wait=False)
    if d.wait_exit() != 1:
        raise AssertionError("exit status")
    err = d.stderr_text()
    if "writable by its group or others (mode 0775)" not in err:
        raise AssertionError("stderr does not say why: %s" % err[-600:])
    os.rmdir(env.dir)
    with open(env.dir, "w") as f:
        f.write("x")
    d2 = env.daemon(start=False, expect_exit=True)
    d2.start(wait=False)
    if d2.wait_exit() != 1 or env.dir not in d2.stderr_text():
        raise AssertionError("a file as --checkpoint-dir: %s" % d2.stderr_text()[-600:])
    env.close()


@test("missing parents of the socket, the metrics socket and the checkpoint directory are made "
      "as mkdir -p (parents 0755, the checkpoint directory 0700); existing ones keep their mode; "
      "a parent that cannot be made stops the daemon with one line naming it")
def test_missing_parents_made_mkdir_p(t):
    env = Env(t, pods=("a",))
    old = os.umask(0o022)
    try:
        os.mkdir(t.path("run"), 0o711)          # exists: left as it is
        os.chmod(t.path("run"), 0o711)
        sock = t.path("run", "podmux", "podmux.sock")
        msock = t.path("run", "m", "metrics.sock")
        ck = t.path("var", "lib", "podmux", "checkpoint")
        d = harness.Daemon(t, None, socket_path=sock, node=NODE, freq=None,
                           extra=["--kubeconfig", env.kc, "--checkpoint-dir", ck,
                                  "--metrics-address", "unix:" + msock])
        t.daemons.append(d)
        d.start()
        c = d.connect()
        wait_api_names(c, ["a"])
        modes = {p: os.stat(p).st_mode & 0o7777 for p in
                 (t.path("run"), os.path.dirname(sock), os.path.dirname(msock),
                  t.path("var"), t.path("var", "lib"), t.path("var", "lib", "podmux"), ck)}
        want = {t.path("run"): 0o711, os.path.dirname(sock): 0o755, os.path.dirname(msock): 0o755,
                t.path("var"): 0o755, t.path("var", "lib"): 0o755,
                t.path("var", "lib", "podmux"): 0o755, ck: 0o700}
        if modes != want:
            raise AssertionError("modes %s, want %s" % (
                {k: oct(v) for k, v in modes.items()}, {k: oct(v) for k, v in want.items()}))
        if not os.path.exists(msock):
            raise AssertionError("no metrics socket")
        d.stop()
        # A file where a parent should be: one line naming it, and exit 1.
        with open(t.path("blocker"), "w") as f:
            f.write("x")
        blocked = t.path("blocker")
        for sp, extra in (
                (os.path.join(blocked, "s", "podmux.sock"), ["--checkpoint-dir", ck]),
                (t.path("p2.sock"), ["--checkpoint-dir", ck,
                                     "--metrics-address", "unix:" + os.path.join(blocked, "m", "metrics.sock")]),
                (t.path("p3.sock"), ["--checkpoint-dir", os.path.join(blocked, "ck")])):
            name = extra[-2] if sp.endswith("p2.sock") or sp.endswith("p3.sock") else "--socket"
            d2 = harness.Daemon(t, None, socket_path=sp, node=NODE, freq=None, expect_exit=True,
                                extra=["--kubeconfig", env.kc] + extra)
            t.daemons.append(d2)
            d2.start(wait=False)
            if d2.wait_exit() != 1:
                raise AssertionError("%s: exit status" % name)
            errs = [x for x in d2.logs() if x.level == "error"]
            want = 'cannot create directory "%s": File exists (not a directory)' % blocked
            if len(errs) != 1 or want not in errs[0].msg:
                raise AssertionError("%s: want one error line with %r, got %s" % (name, want, errs))
        if os.stat(t.path("run")).st_mode & 0o7777 != 0o711:
            raise AssertionError("an existing directory's mode changed")
    finally:
        os.umask(old)
    env.close()


# ---------------------------------------------------------------------------
# What the client libraries say

def go_consumer():
    """go/'s test binary, whose TestScenarioConsumer answers commands as
    chaos_client does (go/consumer_test.go), built offline as
    tests/go-test.sh builds it; None when go is not installed."""
    go = os.environ.get("GO") or shutil.which("go")
    if not go:
        return None
    exe = os.path.join(BUILDDIR, "go-consumer.test")
    env = dict(os.environ, GOPROXY="off", GOFLAGS="-mod=mod", GOTOOLCHAIN="local", GOENV="off",
               GOCACHE=os.path.join(BUILDDIR, "go-cache"),
               GOPATH=os.path.join(BUILDDIR, "go-path"))
    r = subprocess.run([go, "test", "-c", "-o", exe, "."], cwd=os.path.join(harness.SRCDIR, "go"), env=env,
                       capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise AssertionError("go test -c: %s" % r.stderr[-2000:])
    return exe


class LibConsumer(harness.Driven):
    """tests/client/chaos_client (libpodmux-client) or the Go consumer,
    driven on its standard input; stopped by its PID when the test ends."""

    def __init__(self, t, argv, env=None):
        super().__init__(t, argv, env)

    def api_pods(self):
        d = self.ask("dump")
        return sorted(harness.pod_name(x["pod"]) for x in d["pods"] if x["source"] == "api") \
            if d["synced"] else None

    def source(self):
        return self.ask("source api")


class PyLib:
    """The Python module, once it has Client.source_state (the same API as
    the Go package's SourceState: (state, not_live), the state with
    .state, .checkpoint_time, .checkpoint_resource_version)."""

    def __init__(self, sock):
        self.c = podmux.Client(sock)
        self.c.on_source = lambda st: self.log.append(
            "source %s %s%s" % (st.source, st.state, " resync" if st.resync else ""))
        self.log = []

    def _drain(self):
        import select
        for _ in range(50):
            self.c.process()
            if not self.c.fileno() or not select.select([self.c.fileno()], [], [], 0.05)[0]:
                return

    def api_pods(self):
        self._drain()
        return sorted(p.name for p in self.c.pods() if p.source == "api") if self.c.has_synced else None

    def source(self):
        self._drain()
        st, not_live = self.c.source_state("api")
        return {"not_live": not_live, "state": st.state, "time": st.checkpoint_time,
                "resource_version": st.checkpoint_resource_version}

    def source_log(self):
        self._drain()
        x, self.log = self.log, []
        return x


def wait_sources(cs, want, what):
    """Waits until every consumer says of api what want (a dict of the
    members of a "source" answer) says."""
    for name, x in cs.items():
        harness.wait_for(lambda: all(x.source().get(k) == v for k, v in want.items()), T_RELIST,
                         "%s: the %s consumer's source state %s" % (what, name, want), interval=0.2)


@test("the client libraries say what api serves: live, then its checkpoint (time, resourceVersion) "
      "after a daemon restarted offline, then live when the server answers")
def test_client_libraries_say_what_api_serves(t):
    env = Env(t, pods=("a", "b"))
    d = env.daemon()
    c = d.connect()
    wait_api_names(c, ["a", "b"])
    harness.wait_for(lambda: os.path.exists(env.file), T_WAIT, "the first checkpoint")
    cs = {"C": LibConsumer(t, [os.path.join(BUILDDIR, "tests", "client", "chaos_client"), d.sock])}
    go = go_consumer()
    if go:
        cs["Go"] = LibConsumer(t, [go, "-test.run=^TestScenarioConsumer$", "-test.count=1"],
                               env=dict(os.environ, PODMUX_CONSUMER_SOCKET=d.sock))
    else:
        t.note("go is not installed: the Go client is not checked")
    if hasattr(podmux.Client, "source_state"):
        cs["Python"] = PyLib(d.sock)
    else:
        t.note("the Python module has no Client.source_state yet: not checked")
    for name, x in cs.items():
        harness.wait_for(lambda: x.api_pods() == ["a", "b"], T_WAIT, "the %s consumer's api pods" % name,
                         interval=0.2)
    wait_sources(cs, {"not_live": False, "state": "live"}, "never said otherwise")

    # Restarted while the server is down: the new run serves the
    # checkpoint, and the consumers, which reconnect by themselves, say so.
    d.stop()
    env.srv.stop()
    d.start()
    said = d.connect().expect(lambda x: x.get("type") == "source", "the source message", T_SHORT)
    ck = said.get("checkpoint") or {}
    wait_sources(cs, {"not_live": True, "state": "checkpoint", "time": ck.get("time"),
                      "resource_version": ck.get("resource_version")}, "serving the checkpoint")
    for name, x in cs.items():
        if x.api_pods() != ["a", "b"]:
            raise AssertionError("the %s consumer's api pods while the checkpoint is served: %s" % (
                name, x.api_pods()))
    if cs["C"].source()["serving"] != "checkpoint" or ("Go" in cs and cs["Go"].source()["serving"] != "checkpoint"):
        raise AssertionError("serving: %s" % {n: x.source() for n, x in cs.items() if n != "Python"})

    # The server answers, with b deleted: live, and the server's pods.
    env.srv.delete("b")
    env.srv.start()
    wait_sources(cs, {"not_live": False, "state": "live", "time": None}, "the server answered")
    for name, x in cs.items():
        harness.wait_for(lambda: x.api_pods() == ["a"], T_WAIT, "the %s consumer's live pods" % name, interval=0.2)
    logs = {"C": [e for e in cs["C"].ask("log") if e.startswith("source ")]}
    if "Go" in cs:
        logs["Go"] = cs["Go"].ask("slog")
    if "Python" in cs:
        logs["Python"] = cs["Python"].source_log()
    for name, log in logs.items():
        if log != ["source api checkpoint", "source api live"]:
            raise AssertionError("the %s consumer was told %s, want checkpoint then live" % (name, log))
    env.close()


if __name__ == "__main__":
    harness.main()
