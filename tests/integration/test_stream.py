#!/usr/bin/env python3
"""Integration tests of the update stream (doc/protocol.md, protocol
1): hello, initial state, synced, sources_ready, resume_after,
fan-out, slow consumers, socket handling and shutdown."""

import json
import os
import signal
import socket
import stat
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import (MODES, NODE, T_LONG, T_SHORT, T_WAIT,  # noqa: E402
                     ConsumerClosed, msg_names, pn, pod_image, pod_yaml,
                     summarize, test, write_file)

INCR = "incremental"


def start(t, files=None, **kw):
    m = t.mkdir("manifests")
    for name, text in (files or {"web.yaml": pod_yaml("web")}).items():
        write_file(os.path.join(m, name), text)
    return m, t.daemon(m, **kw)


def ready(d, **kw):
    """A consumer that has its initial state and sources_ready."""
    c = d.connect(**kw)
    c.read_initial()
    c.expect_type("sources_ready")
    return c


def live_pods(c, after_seq):
    return [m for m in c.msgs if m.get("type") == "pods" and
            m["seq"] > after_seq]


def read_until_seq(c, seq, timeout=None):
    """Reads until a message with seq >= seq; returns what was read."""
    start = len(c.msgs)
    c.expect(lambda m: m["seq"] >= seq, "a message with seq >= %d" % seq,
             timeout)
    return c.msgs[start:]


def make_changes(m, c):
    """Add, delete, edit: waits until consumer c has seen them all."""
    write_file(os.path.join(m, "new.yaml"), pod_yaml("new"))
    c.wait_until_state([pn("db"), pn("new"), pn("web")])
    os.remove(os.path.join(m, "db.yaml"))
    c.wait_until_state([pn("new"), pn("web")])
    write_file(os.path.join(m, "web.yaml"), pod_yaml("web", image="nginx:2"),
               atomic=False)
    c.wait_state(lambda s: [pod_image(p) for p in s.by_name(pn("web"))] ==
                 ["nginx:2"], "web with image nginx:2")
    c.wait_until_state([pn("new"), pn("web")])


TWO = {"web.yaml": pod_yaml("web"), "db.yaml": pod_yaml("db")}


# ---------------------------------------------------------------------------

@test("hello comes first (protocol 1, mode, node, integer seq) and seq is "
      "strictly increasing over initial state and live updates",
      params=MODES)
def test_hello_comes_first_protocol_1_mode(t):
    m, d = start(t, TWO)
    c = d.connect()
    h = c.hello
    if h.get("protocol") != 1 or h.get("mode") != t.mode or \
            h.get("node") != NODE:
        raise AssertionError("bad hello: %s" % json.dumps(h))
    c.read_initial()
    c.expect_type("sources_ready")
    make_changes(m, c)   # the harness checks every seq on the way
    if len([x for x in c.msgs if x["type"] == "hello"]) != 1:
        raise AssertionError("more than one hello")


@test("initial state in order: pods (ADD/SET per mode) from source file, "
      "then synced, then sources_ready [\"file\"], then live messages",
      params=MODES)
def test_initial_state_order_pods_add_set(t):
    m, d = start(t, TWO)
    ready(d)
    c = d.connect()
    init = c.read_initial()
    if len(init) != 1 or init[0]["type"] != "pods":
        raise AssertionError("initial state: %s" % [summarize(x)
                                                   for x in init])
    want_op = "ADD" if t.mode == INCR else "SET"
    if init[0]["op"] != want_op or \
            msg_names(init[0]) != [pn("db"), pn("web")]:
        raise AssertionError("initial pods message: %s" % summarize(init[0]))

    def source_is_file(msg):
        if msg.get("source") != "file":
            raise AssertionError("the state of source file must carry "
                                 "source \"file\": %s" % summarize(msg))
    t.soft(source_is_file, init[0])
    sr = c.recv(T_SHORT)
    if sr.get("type") != "sources_ready" or sr.get("sources") != ["file"]:
        raise AssertionError("expected sources_ready [file], got %s" %
                             summarize(sr))
    write_file(os.path.join(m, "new.yaml"), pod_yaml("new"))
    live = c.recv(T_WAIT)
    if live.get("type") != "pods" or pn("new") not in msg_names(live):
        raise AssertionError("first live message: %s" % summarize(live))
    if [x for x in c.msgs if x["type"] == "sources_ready"] != [sr]:
        raise AssertionError("sources_ready sent more than once")


@test("a client that sends nothing gets the full state after the grace "
      "period (pods, synced, sources_ready)")
def test_client_sends_nothing_gets_full_state(t):
    m, d = start(t, TWO)
    ready(d)
    c = d.connect(first_line=None)
    init = c.read_initial()
    if [x["op"] for x in init] != ["ADD"] or c.state.names() != \
            [pn("db"), pn("web")]:
        raise AssertionError("state: %s" % [summarize(x) for x in init])
    c.expect_type("sources_ready")


@test("a client may send its first line before reading hello; hello still "
      "comes first")
def test_client_may_send_first_line_before(t):
    m, d = start(t, TWO)
    c = d.connect(read_hello=False, first_line="{}")
    h = c.recv(T_SHORT)
    if h.get("type") != "hello":
        raise AssertionError("first message: %s" % summarize(h))
    c.read_initial()
    if c.state.names() != [pn("db"), pn("web")]:
        raise AssertionError("state: %s" % c.state)


@test("resume_after the seq of the last live message seen: exact replay of "
      "the messages missed while disconnected, no full state", params=MODES)
def test_resume_after_seq_last_live_message(t):
    m, d = start(t, TWO)
    b = ready(d, threaded=True)
    a = ready(d)
    # One live change that both see, so a's last seq is a broadcast.
    write_file(os.path.join(m, "db.yaml"), pod_yaml("db", image="redis:7"))
    a.wait_state(lambda s: [pod_image(p) for p in s.by_name(pn("db"))] ==
                 ["redis:7"], "db with image redis:7")
    b.wait_state(lambda s: [pod_image(p) for p in s.by_name(pn("db"))] ==
                 ["redis:7"], "db with image redis:7")
    last = a.last_seq
    a_state = a.state.copy()
    a.close()
    make_changes(m, b)
    missed = [x for x in b.msgs if x["seq"] > last and
              x["type"] in ("pods", "sources_ready")]
    if not missed:
        raise AssertionError("no changes were broadcast")
    a2 = d.connect(first_line=last, state=a_state)
    got = read_until_seq(a2, missed[-1]["seq"])
    pods = [x for x in got if x["type"] != "synced"]
    if pods != missed:
        raise AssertionError(
            "replay after %d differs from what a connected consumer got:\n"
            "  replay: %s\n  live:   %s" %
            (last, " | ".join(summarize(x) for x in got),
             " | ".join(summarize(x) for x in missed)))
    if a2.state.pods != b.state.pods:
        raise AssertionError("resumed state %s != live state %s" %
                             (a2.state, b.state))


@test("resume_after the last seq of a consumer that only saw the initial "
      "state (idle since): replay of what it missed")
def test_resume_after_last_seq_consumer_only(t):
    m, d = start(t, TWO)
    b = ready(d, threaded=True)
    a = ready(d)
    last = a.last_seq
    a_state = a.state.copy()
    a.close()
    make_changes(m, b)
    missed = [x for x in b.msgs if x["seq"] > last and x["type"] == "pods"]
    a2 = d.connect(first_line=last, state=a_state)
    got = read_until_seq(a2, missed[-1]["seq"])
    pods = [x for x in got if x["type"] == "pods"]
    if pods != missed:
        raise AssertionError(
            "replay after %d: %s; expected: %s" %
            (last, " | ".join(summarize(x) for x in got),
             " | ".join(summarize(x) for x in missed)))
    if a2.state.pods != b.state.pods:
        raise AssertionError("resumed state %s != live state %s" %
                             (a2.state, b.state))


def _full_state_after(t, resume):
    m, d = start(t, TWO)
    b = ready(d)
    make_changes(m, b)
    value = resume(b.last_seq)
    c = d.connect(first_line=json.dumps({"resume_after": value}))
    init = c.read_initial()
    if [x["op"] for x in init] != ["ADD"]:
        raise AssertionError("expected a full state (one ADD), got %s" %
                             [summarize(x) for x in init])
    if c.state.pods.keys() != b.state.pods.keys():
        raise AssertionError("full state %s != live state %s" %
                             (c.state, b.state))
    c.expect_type("sources_ready")


@test("resume_after older than the history (1): full state, synced, "
      "sources_ready")
def test_resume_after_older_history_1_full(t):
    _full_state_after(t, lambda last: 1)


@test("resume_after a seq the server never sent (far in the future): full "
      "state")
def test_resume_after_seq_server_never_sent(t):
    _full_state_after(t, lambda last: last + 10 ** 12)


@test("resume_after a seq from before a daemon restart: full state")
def test_resume_after_seq_before_daemon_restart(t):
    m, d = start(t, TWO)
    a = ready(d)
    last = a.last_seq
    a.close()
    d.restart()
    c = d.connect(first_line=last)
    init = c.read_initial()
    if [x["op"] for x in init] != ["ADD"] or c.state.names() != \
            [pn("db"), pn("web")]:
        raise AssertionError("expected the full state, got %s" %
                             [summarize(x) for x in init])
    if c.hello["seq"] <= last:
        raise AssertionError("seq went back after a restart: hello %d <= %d"
                             % (c.hello["seq"], last))


@test("50 consumers connected at once all get the state and converge to "
      "the same state through the same messages")
def test_50_consumers_connected_once_all_get(t):
    m, d = start(t, TWO)
    cs = [d.connect(read_hello=False, first_line="{}") for _ in range(50)]
    for c in cs:
        h = c.recv(T_SHORT)
        if h.get("type") != "hello":
            raise AssertionError("first message %s" % summarize(h))
        c.read_initial(T_LONG)
        c.expect_type("sources_ready", T_LONG)
    marks = [len(c.msgs) for c in cs]
    make_changes(m, cs[0])
    want = cs[0].state.pods
    for i, c in enumerate(cs[1:], 1):
        c.wait_state(lambda s: s.pods == want, "equal to consumer 0's "
                     "(%s)" % cs[0].state, T_LONG)
    ref_msgs = [json.dumps(x, sort_keys=True) for x in cs[0].msgs[marks[0]:]]
    for i, c in enumerate(cs[1:], 1):
        if c.state.pods != cs[0].state.pods:
            raise AssertionError("consumer %d state %s != %s" %
                                 (i, c.state, cs[0].state))
        got = [json.dumps(x, sort_keys=True) for x in c.msgs[marks[i]:]]
        if got != ref_msgs:
            raise AssertionError("consumer %d got different live messages" %
                                 i)
    d.assert_alive()


@test("a consumer that never reads is sent error SlowConsumer and closed "
      "once its backlog passes --max-consumer-backlog, at a line boundary; "
      "a consumer that keeps reading gets everything")
def test_consumer_never_reads_sent_error_slowconsumer(t):
    m, d = start(t, extra=["--max-consumer-backlog", "262144"])
    fast = ready(d, threaded=True)
    slow = d.connect()   # reads hello, sends {}, then never reads
    names = [pn("web")]
    # ~30 KB per pod, one ADD per file: paced by the fast consumer so no
    # single message or burst is near the bound for a reading consumer,
    # while the silent one falls ~6 MB behind.
    for i in range(200):
        name = "big%03d" % i
        write_file(os.path.join(m, name + ".yaml"),
                   pod_yaml(name, big=30000))
        names.append(pn(name))
        fast.wait_until_state(names, T_WAIT)
    # Now read what the slow one was sent: whole lines, ending with the
    # error, then the connection is closed.
    error = None
    while True:
        try:
            x = slow.recv(T_LONG)
        except ConsumerClosed:
            break
        if error is not None:
            raise AssertionError("message after the error: %s" %
                                 summarize(x))
        if x["type"] == "error":
            error = x
    if error is None or error.get("reason") != "SlowConsumer":
        raise AssertionError("the slow consumer got no error SlowConsumer "
                             "before being closed (last: %s)" %
                             summarize(slow.msgs[-1]))
    if len(slow.state.pods) == len(names):
        raise AssertionError("the slow consumer got everything: the backlog "
                             "bound was never passed")
    if any(x["type"] == "error" for x in fast.msgs):
        raise AssertionError("the fast consumer got an error")
    # The fast consumer is still served, the daemon still accepts.
    write_file(os.path.join(m, "after.yaml"), pod_yaml("after"))
    fast.wait_until_state(names + [pn("after")])
    d.assert_alive()


@test("a consumer dropped as SlowConsumer reconnects with resume_after "
      "(its last seq) and gets exactly the messages it missed")
def test_consumer_dropped_slowconsumer_reconnects_resume_after(t):
    m, d = start(t, extra=["--max-consumer-backlog", "262144"])
    fast = ready(d, threaded=True)
    slow = d.connect()
    names = [pn("web")]
    for i in range(120):
        name = "big%03d" % i
        write_file(os.path.join(m, name + ".yaml"),
                   pod_yaml(name, big=30000))
        names.append(pn(name))
        fast.wait_until_state(names, T_WAIT)
    try:
        while True:
            slow.recv(T_LONG)
    except ConsumerClosed:
        pass
    if not any(x["type"] == "error" and x.get("reason") == "SlowConsumer"
               for x in slow.msgs):
        raise AssertionError("the silent consumer was not dropped as slow")
    last = max(x["seq"] for x in slow.msgs if x["type"] != "error")
    missed = [x for x in fast.msgs if x["seq"] > last and
              x["type"] == "pods"]
    r = d.connect(first_line=last, state=slow.state)
    got = read_until_seq(r, missed[-1]["seq"], T_LONG)
    pods = [x for x in got if x["type"] == "pods"]
    if [x["seq"] for x in pods] != [x["seq"] for x in missed] or \
            pods != missed:
        raise AssertionError("replay after %d: %d pods messages, expected "
                             "%d" % (last, len(pods), len(missed)))
    if r.state.pods != fast.state.pods:
        raise AssertionError("resumed state %d pods, live %d pods" %
                             (len(r.state.pods), len(fast.state.pods)))
    d.assert_alive()


@test("consumers that disconnect early or with unread data do not hurt "
      "the daemon or other consumers")
def test_consumers_disconnect_early_unread_data_do(t):
    m, d = start(t)
    a = d.connect(read_hello=False, first_line=None)
    a.close()                                  # before hello
    b = d.connect()
    b.close()                                  # right after {}
    e = d.connect(first_line=None)
    e.sock.shutdown(socket.SHUT_WR)            # half-closed
    other = ready(d, threaded=True)
    c = ready(d)
    names = [pn("web")]
    for i in range(30):
        name = "big%02d" % i
        write_file(os.path.join(m, name + ".yaml"),
                   pod_yaml(name, big=20000))
        names.append(pn(name))
        if i == 2:
            c.recv(T_WAIT)
            c.close()                          # with unread data queued
    other.wait_until_state(names, 2 * T_LONG)
    d.assert_alive()
    f = d.connect()
    f.read_initial()
    if f.state.pods != other.state.pods:
        raise AssertionError("a new consumer sees %s" % f.state)
    e.close()


@test("socket mode is 0660 by default whatever the umask, and never wider "
      "at any moment from its creation on")
def test_socket_mode_whatever_the_umask(t):
    for umask in (0o000, 0o077):
        old = os.umask(umask)
        try:
            m, d = start(t, start=False)
            d.start(wait=False)
        finally:
            os.umask(old)
        seen = set()

        def listening():
            try:
                seen.add(stat.S_IMODE(os.stat(d.sock).st_mode))
            except FileNotFoundError:
                return False
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(d.sock)
                return True
            except OSError:
                return False
            finally:
                s.close()
        harness.wait_for(listening, T_SHORT, "the daemon to listen",
                         interval=0)
        wide = [m for m in seen if m & ~0o660]
        if wide:
            raise AssertionError("umask %03o: the socket was mode %04o "
                                 "before it listened" % (umask, wide[0]))
        mode = stat.S_IMODE(os.stat(d.sock).st_mode)
        if mode != 0o660:
            raise AssertionError("umask %03o: socket mode %04o, want 0660" %
                                 (umask, mode))
        ready(d)
        d.stop()
        if d.stop() != 0:
            raise AssertionError("exit status on SIGTERM")


@test("--socket-mode 0600 is honored")
def test_socket_mode_0600_honored(t):
    m, d = start(t, extra=["--socket-mode", "0600"])
    mode = stat.S_IMODE(os.stat(d.sock).st_mode)
    if mode != 0o600:
        raise AssertionError("socket mode %04o, want 0600" % mode)
    ready(d)


@test("a stale socket file (nobody listening) is replaced at start")
def test_stale_socket_file_nobody_listening_replaced(t):
    sock = t.path("podmux.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(sock)
    s.close()
    if not stat.S_ISSOCK(os.stat(sock).st_mode):
        raise AssertionError("could not create a stale socket")
    m, d = start(t, socket_path=sock)
    c = ready(d)
    if c.state.names() != [pn("web")]:
        raise AssertionError("state %s" % c.state)


@test("a second podmux on a live socket exits non-zero saying \"another "
      "podmux\"; the first keeps serving")
def test_second_podmux_live_socket_exits_non(t):
    m, d = start(t)
    c = ready(d)
    m2 = t.mkdir("manifests2")
    d2 = t.daemon(m2, socket_path=d.sock, start=False, expect_exit=True)
    d2.start(wait=False)
    rc = d2.wait_exit(T_WAIT)
    if rc == 0 or rc is None or rc < 0:
        raise AssertionError("second instance exit status %s, want a "
                             "non-zero exit" % harness._rc_str(rc))
    if "another podmux" not in d2.stderr_text():
        raise AssertionError("message lacks 'another podmux': %r" %
                             d2.stderr_text()[-500:])
    if not stat.S_ISSOCK(os.stat(d.sock).st_mode):
        raise AssertionError("the socket file is gone")
    c2 = ready(d)
    if c2.state.names() != [pn("web")]:
        raise AssertionError("first daemon state %s" % c2.state)
    write_file(os.path.join(m, "db.yaml"), pod_yaml("db"))
    c.wait_until_state([pn("db"), pn("web")])
    d.assert_alive()


@test("shutdown signal: consumers get error ShuttingDown then EOF, the "
      "socket is removed, exit status 0", params=("SIGTERM", "SIGINT"))
def test_shutdown_signal_consumers_get_error_shuttingdown(t):
    m, d = start(t)
    cs = [ready(d) for _ in range(3)]
    d.send_signal(getattr(signal, t.param))
    for c in cs:
        e = c.expect_type("error", T_SHORT)
        if e.get("reason") != "ShuttingDown":
            raise AssertionError("error reason %r" % e.get("reason"))
        try:
            x = c.recv(T_SHORT)
            raise AssertionError("message after ShuttingDown: %s" %
                                 summarize(x))
        except ConsumerClosed:
            pass
    rc = d.wait_exit(T_SHORT)
    if rc != 0:
        raise AssertionError("exit %s" % harness._rc_str(rc))
    if os.path.exists(d.sock):
        raise AssertionError("socket file not removed")


BAD_LINES = {
    "not JSON": "hello there",
    "a JSON array": "[1, 2, 3]",
    "longer than 4096 bytes": '{"resume_after": 1' + " " * 8192 + "}",
}


@test("bad first line from the client: error BadRequest, connection "
      "closed, daemon and other consumers unaffected", params=BAD_LINES)
def test_bad_first_line_client_error_badrequest(t):
    m, d = start(t)
    other = ready(d)
    c = d.connect(first_line=BAD_LINES[t.param])
    e = c.expect_type("error", T_SHORT)
    if e.get("reason") != "BadRequest":
        raise AssertionError("reason %r" % e.get("reason"))
    try:
        while True:
            x = c.recv(T_SHORT)
            if x["type"] == "pods":
                raise AssertionError("pods sent after BadRequest: %s" %
                                     summarize(x))
    except ConsumerClosed:
        pass
    write_file(os.path.join(m, "db.yaml"), pod_yaml("db"))
    other.wait_until_state([pn("db"), pn("web")])
    d.assert_alive()


@test("resume_after of the wrong type (a string): BadRequest or the full "
      "state, and the daemon keeps serving")
def test_resume_after_wrong_type_string_badrequest(t):
    m, d = start(t)
    c = d.connect(first_line='{"resume_after": "yesterday"}')
    try:
        x = c.expect(lambda x: x["type"] in ("error", "synced"),
                     "error or synced", T_SHORT)
    except ConsumerClosed:
        raise AssertionError("closed without an error message")
    if x["type"] == "error" and x.get("reason") != "BadRequest":
        raise AssertionError("reason %r" % x.get("reason"))
    if x["type"] == "synced" and c.state.names() != [pn("web")]:
        raise AssertionError("state %s" % c.state)
    ready(d)
    d.assert_alive()


@test("a plugin FAILED published while a consumer waits for its first "
      "line (the 100 ms grace) reaches it once, right after hello and "
      "before its state (pods, REGISTERED), every number growing; one "
      "published later arrives live")
def test_plugin_failed_published_while_consumer_waits(t):
    from plugin_harness import FakePlugin, is_plugin, norm, plugin_daemon
    m = t.mkdir("manifests")
    write_file(os.path.join(m, "web.yaml"), pod_yaml("web"))
    d = plugin_daemon(t, manifest_path=m)
    a = d.connect()             # sees every FAILED live
    a.expect_type("synced")
    # A plugin of a type nobody handles fails at once.  It is started
    # outside the registry and its socket renamed in under a new name for
    # each try, so each try is a new socket (no backoff) published anew.
    p = FakePlugin(t, os.path.join(t.mkdir("out"), "f0.sock"),
                   type="FooPlugin", name="foo.example.com")
    cur, exercised, late = p.sock, 0, 0
    for i in range(1, 16):
        b = d.connect(first_line=None)      # hello read, nothing sent
        nxt = norm(os.path.join(d.reg, "f%d.sock" % i))
        os.rename(cur, nxt)
        cur = nxt
        f = a.expect(lambda x: is_plugin(x, "FAILED", nxt),
                     "FAILED of %s" % nxt)["seq"]
        syn = b.expect_type("synced")
        if syn["resumed"]:
            raise AssertionError("a consumer that sent nothing resumed")
        got = [x for x in b.msgs if is_plugin(x, "FAILED", nxt)]
        if f < syn["seq"]:
            # Published during b's wait: before its state was built.
            exercised += 1
            if len(got) != 1 or got[0]["seq"] != f:
                raise AssertionError(
                    "FAILED seq %d (after hello %d, before synced %d) "
                    "reached the consumer %d times: %s" %
                    (f, b.hello["seq"], syn["seq"], len(got),
                     [summarize(x) for x in b.msgs]))
            at = b.msgs.index(got[0])
            first_state = next(j for j, x in enumerate(b.msgs)
                               if x["type"] in ("pods", "synced") or
                               is_plugin(x, "REGISTERED"))
            if at > first_state:
                raise AssertionError("the FAILED came after the state "
                                     "began: %s" %
                                     [summarize(x) for x in b.msgs])
        else:
            late += 1
            b.expect(lambda x: is_plugin(x, "FAILED", nxt),
                     "the FAILED live, after synced")
        b.close()
        if exercised >= 3:
            break
    if not exercised:
        t.skip("no FAILED landed in a consumer's 100 ms wait in 15 tries "
               "(%d came later)" % late)


if __name__ == "__main__":
    harness.main()
