#!/usr/bin/env python3
"""Descriptors: the soft limit is raised to the hard one; --max-consumers
is fitted to the limit; when descriptors run out, connecting clients are
told TooManyConsumers (through a spare descriptor) instead of hanging,
the static pods are never lost, and each episode is logged once.

The daemon is started through a small Python prelude that sets both the
soft and the hard RLIMIT_NOFILE and then execs it, so it cannot raise
them.  To run descriptors out regardless of the clamp, the test lowers
the running daemon's limits with prlimit() to a few above what it holds:
the same as descriptors taken by something else."""

import json
import os
import resource
import signal
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import (T_SHORT, T_WAIT, Consumer, Daemon, pn,  # noqa: E402
                     pod_yaml, test, wait_for, write_file)

NO_PLUGINS = ["--plugins-registry-dir", ""]
PODS = ["a", "b", "c", "d", "e"]
# Free descriptors left to the daemon when the test exhausts them.
HEADROOM = 4

PRELUDE = (
    "import os, resource, sys\n"
    "resource.setrlimit(resource.RLIMIT_NOFILE,"
    " (int(sys.argv[1]), int(sys.argv[2])))\n"
    "os.execvp(sys.argv[3], sys.argv[3:])\n")


class LimitedDaemon(Daemon):
    """A podmux run started with RLIMIT_NOFILE soft/hard set."""

    def __init__(self, t, m, soft, hard, **kw):
        super().__init__(t, m, **kw)
        self.soft = soft
        self.hard = hard

    def argv(self):
        return [sys.executable, "-c", PRELUDE, str(self.soft),
                str(self.hard)] + super().argv()


def limited(t, m, soft, hard, extra=()):
    d = LimitedDaemon(t, m, soft, hard, extra=NO_PLUGINS + list(extra))
    t.daemons.append(d)
    d.start()
    return d


def manifests(t, names=PODS):
    m = t.mkdir("manifests")
    for n in names:
        write_file(os.path.join(m, n + ".yaml"), pod_yaml(n))
    return m


def nofile(pid):
    """(soft, hard) of a process, from /proc."""
    with open("/proc/%d/limits" % pid) as f:
        for line in f:
            if line.startswith("Max open files"):
                parts = line.split()
                return int(parts[3]), int(parts[4])
    raise AssertionError("no 'Max open files' in /proc/%d/limits" % pid)


def open_fds(pid):
    return [int(x) for x in os.listdir("/proc/%d/fd" % pid)]


def first_line(s):
    """The first line the server sends on s (a dict), and whether it
    closed the connection after it."""
    buf = b""
    s.settimeout(T_SHORT)
    while b"\n" not in buf:
        try:
            chunk = s.recv(4096)
        except socket.timeout:
            raise AssertionError("no answer within %.0f s (got %r)" %
                                 (T_SHORT, buf[:200]))
        if not chunk:
            raise AssertionError("closed without an answer (got %r)" %
                                 buf[:200])
        buf += chunk
    return json.loads(buf.split(b"\n")[0].decode())


def connect(sock):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock)
    return s


def msgs(d, text):
    return [x for x in d.logs() if text in x.msg]


def expect(got, want, what):
    if got != want:
        raise AssertionError("%s: %r, want %r" % (what, got, want))


@test("the soft descriptor limit is raised to the hard one, and both are "
      "logged at debug level")
def test_soft_descriptor_limit_raised_hard_one(t):
    m = manifests(t, ["a"])
    d = limited(t, m, 200, 400, extra=["-v", "1"])
    d.wait_log(lambda x: x.level == "debug" and x.msg ==
               "descriptors: soft limit 400, hard limit 400 (the soft limit "
               "was 200)", "the descriptor limits at debug level")
    expect(nofile(d.pid), (400, 400), "the daemon's limits")
    d.connect().wait_until_state([pn("a")])


@test("--max-consumers is lowered to what the descriptor limit allows, "
      "with a log line; the lowered bound is enforced")
def test_max_consumers_lowered_what_descriptor_limit(t):
    m = manifests(t, ["a"])
    d = limited(t, m, 4096, 4096, extra=["--max-consumers", "1000"])
    d.connect().wait_until_state([pn("a")])
    expect(msgs(d, "lowered"), [], "lines about lowering with a high limit")
    d.stop()

    d = limited(t, m, 300, 300, extra=["--max-consumers", "1000"])
    line = d.wait_log(lambda x: "--max-consumers" in x.msg,
                      "the clamp line")
    if not line.msg.startswith("--max-consumers 1000 lowered to 172: the "
                               "descriptor limit is 300") or \
            line.level != "warn":
        raise AssertionError("clamp line %r" % line)
    d.stop()

    # Under twice the margin, half of the limit.
    d = limited(t, m, 100, 100)
    line = d.wait_log(lambda x: "--max-consumers" in x.msg,
                      "the clamp line")
    if not line.msg.startswith("--max-consumers 1024 lowered to 50: "):
        raise AssertionError("clamp line %r" % line)
    held = [connect(d.sock) for _ in range(50)]
    for s in held:
        expect(first_line(s).get("type"), "hello", "a consumer within 50")
    extra = connect(d.sock)
    m51 = first_line(extra)
    if m51.get("reason") != "TooManyConsumers" or \
            "maximum of 50" not in m51.get("message", ""):
        raise AssertionError("the 51st consumer got %r" % m51)
    for s in held + [extra]:
        s.close()


@test("descriptors run out: refused clients get TooManyConsumers, a relist "
      "(SIGHUP) keeps the 5 static pods, an early consumer never sees a "
      "REMOVE, one log line per episode, and a new consumer is served "
      "once the connections close")
def test_descriptors_run_out_refused_clients_get(t):
    if any("valgrind" in x for x in harness.RUN_PREFIX):
        t.skip("valgrind keeps descriptors of its own")
    m = manifests(t)
    names = sorted(pn(n) for n in PODS)
    d = limited(t, m, 256, 256)
    early = d.connect()
    early.wait_until_state(names)
    uids = early.state.uids()

    # Leave the daemon HEADROOM descriptors above what it holds now.
    fds = open_fds(d.pid)
    limit = max(fds) + 1 + HEADROOM
    resource.prlimit(d.pid, resource.RLIMIT_NOFILE, (limit, limit))
    t.note("daemon held %d descriptors; limit lowered to %d" %
           (len(fds), limit))

    served, refused = [], []
    for _ in range(HEADROOM + 40):
        s = connect(d.sock)
        msg = first_line(s)
        if msg.get("type") == "hello":
            s.sendall(b"{}\n")
            served.append(s)
            continue
        if msg.get("type") != "error" or \
                msg.get("reason") != "TooManyConsumers" or \
                "descriptors" not in msg.get("message", ""):
            raise AssertionError("a client got %r" % msg)
        refused.append(s)
        if len(refused) == 3:
            break
    if len(refused) < 3:
        raise AssertionError("%d clients served, none refused" % len(served))
    d.wait_log(lambda x: "out of file descriptors" in x.msg,
               "the line saying descriptors ran out")

    # A relist while exhausted: it fails, and keeps the state.
    d.send_signal(signal.SIGHUP)
    d.wait_log(lambda x: "Too many open files" in x.msg and
               "keeping the last good state" in x.msg,
               "the relist failing for want of descriptors")
    s = connect(d.sock)
    expect(first_line(s).get("reason"), "TooManyConsumers",
           "a client while exhausted, after the relist")
    refused.append(s)

    for s in served + refused:
        s.close()
    # Back to what it held before the flood (the early consumer's among
    # them): the closes were seen.
    wait_for(lambda: len(open_fds(d.pid)) <= len(fds), T_WAIT,
             "the daemon to close the connections")
    late = Consumer(t, d.sock)
    late.wait_until_state(names)
    d.wait_log(lambda x: "available again" in x.msg,
               "the line saying descriptors are available again")
    d.wait_log(lambda x: "listed again" in x.msg,
               "the file source listing again")

    early.drain_available()
    if early.eof:
        raise AssertionError("the early consumer was cut")
    early.assert_kept(uids)
    expect(early.state.names(), names, "the early consumer's pods")
    ops = [x.get("op") for x in early.pods_msgs()]
    if "REMOVE" in ops:
        raise AssertionError("the early consumer saw a REMOVE: %r" % ops)
    out = msgs(d, "out of file descriptors")
    back = msgs(d, "available again")
    expect((len(out), len(back)), (1, 1),
           "log lines for the episode (out, back): %r %r" % (out, back))
    if "%d refused meanwhile" % (len(refused)) not in back[0].msg:
        raise AssertionError("%r does not count %d refused" %
                             (back[0].msg, len(refused)))
    expect(d.stop(), 0, "exit status")


if __name__ == "__main__":
    harness.main()
