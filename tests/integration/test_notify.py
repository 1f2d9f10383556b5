#!/usr/bin/env python3
"""podmux run under a service manager (doc/design.md "Service manager"):
the messages systemd's Type=notify protocol carries, read from a notify
socket the test binds itself, as systemd does; and scripts/podmux.service.in
as systemd-analyze verify reads it."""

import itertools
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import time

import harness
from harness import test, write_file, pod_yaml, BIN, SRCDIR, T_SHORT, T_WAIT
from manifest_server import ManifestServer

SANITIZED = os.environ.get("PODMUX_SANITIZED") == "1"
_ABSTRACT = itertools.count()


class Notify:
    """The service manager's end: a datagram socket at a path in the
    test's directory, or in the abstract namespace ("@name")."""

    def __init__(self, t, name="notify.sock", abstract=False, bind=True):
        if abstract:
            self.address = "@podmux-test-notify-%d-%d" % (os.getpid(),
                                                          next(_ABSTRACT))
            self._bind_to = "\0" + self.address[1:]
        else:
            self.address = t.path(name)
            self._bind_to = self.address
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.msgs = []
        if bind:
            self.bind()

    def bind(self):
        self.sock.bind(self._bind_to)

    def _read(self, timeout):
        r, _, _ = select.select([self.sock], [], [], timeout)
        if not r:
            return None
        m = self.sock.recv(65536).decode()
        self.msgs.append(m)
        return m

    def expect(self, pred, what, timeout=None):
        """The next message for which pred holds (those before it are kept
        in self.msgs)."""
        deadline = time.monotonic() + (timeout or T_WAIT)
        while True:
            left = deadline - time.monotonic()
            m = self._read(max(left, 0)) if left > 0 else None
            if m is not None and pred(m):
                return m
            if m is None:
                raise AssertionError("no %s on the notify socket; got %r" %
                                     (what, self.msgs[-10:]))

    def drain(self):
        while self._read(0) is not None:
            pass
        return self.msgs

    def close(self):
        self.sock.close()


def status(m):
    """The STATUS= value of a message, or None."""
    for line in m.split("\n"):
        if line.startswith("STATUS="):
            return line[len("STATUS="):]
    return None


def answers(path):
    """Connects once, with no retry, and reads the hello."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(T_SHORT)
    try:
        s.connect(path)
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(4096)
            if not chunk:
                break
            buf += chunk
        return json.loads(buf.split(b"\n")[0]).get("type") == "hello"
    finally:
        s.close()


class PidDaemon(harness.Daemon):
    """A daemon given WATCHDOG_PID=<its own pid>, as systemd does."""

    def argv(self):
        return ["/bin/sh", "-c", 'export WATCHDOG_PID=$$; exec "$0" "$@"'] + \
            super().argv()


@test("Type=notify: READY=1 (with a STATUS) first, once the stream socket "
      "answers; STATUS= lines as each source delivers; STOPPING=1 on "
      "SIGTERM, then exit 0", params=("path", "abstract"))
def test_type_notify_ready_1_status_first(t):
    m = t.mkdir("manifests")
    write_file(os.path.join(m, "a.yaml"), pod_yaml("alpha"))
    srv = ManifestServer()
    try:
        srv.set(status=500, body="not yet")
        n = Notify(t, abstract=t.param == "abstract")
        d = harness.Daemon(t, m, extra=["--manifest-url", srv.url(),
                                        "--http-check-frequency", "1s"],
                           env={"NOTIFY_SOCKET": n.address})
        t.daemons.append(d)
        d.start(wait=False)
        first = n.expect(lambda x: True, "first message")
        assert first.split("\n")[0] == "READY=1", first
        # Told ready: the socket must answer now, with no retry.
        assert answers(d.sock), "no hello right after READY=1"
        sock = d.sock
        assert status(first) == "serving %s; waiting for sources: file http" \
            % sock, first
        part = n.expect(lambda x: status(x) is not None, "a STATUS line")
        assert status(part) == \
            "serving %s; sources ready: file; waiting for: http" % sock, part
        srv.set(body=pod_yaml("web"))
        done = n.expect(lambda x: status(x) is not None, "a STATUS line")
        assert status(done) == "serving %s; all sources ready: file http" % \
            sock, done
        d.send_signal(signal.SIGTERM)
        bye = n.expect(lambda x: "STOPPING=1" in x.split("\n"), "STOPPING=1")
        assert status(bye) == "shutting down", bye
        assert d.wait_exit() == 0
        assert all("READY=1" not in x for x in n.msgs[1:]), n.msgs
    finally:
        srv.stop()


@test("WATCHDOG_USEC: WATCHDOG=1 pings at half the period when "
      "WATCHDOG_PID is the daemon's, none when it names another process")
def test_watchdog_usec_watchdog_1_pings_half(t):
    m = t.mkdir("manifests")
    write_file(os.path.join(m, "a.yaml"), pod_yaml("alpha"))
    # Another process's watchdog: started first, it runs the longer.
    other = Notify(t, "other.sock")
    d1 = harness.Daemon(t, m, socket_path=t.path("other-podmux.sock"),
                        env={"NOTIFY_SOCKET": other.address,
                             "WATCHDOG_USEC": "100000",
                             "WATCHDOG_PID": str(os.getpid())})
    t.daemons.append(d1)
    d1.start(wait=False)
    other.expect(lambda x: x.startswith("READY=1"), "READY=1")
    mine = Notify(t, "mine.sock")
    d2 = PidDaemon(t, m, socket_path=t.path("mine-podmux.sock"),
                   env={"NOTIFY_SOCKET": mine.address,
                        "WATCHDOG_USEC": "100000"})
    t.daemons.append(d2)
    d2.start(wait=False)
    mine.expect(lambda x: x.startswith("READY=1"), "READY=1")
    for i in range(5):
        mine.expect(lambda x: x == "WATCHDOG=1", "ping %d" % (i + 1))
    # Five periods of d2 went by, all of them in d1's life too.
    assert "WATCHDOG=1" not in other.drain(), other.msgs
    assert d1.alive() and d2.alive()


@test("a NOTIFY_SOCKET that is not an address, or a WATCHDOG_USEC that is "
      "not a number, is logged once, naming it, and the daemon serves")
def test_notify_socket_address_watchdog_usec_number(t):
    m = t.mkdir("manifests")
    write_file(os.path.join(m, "a.yaml"), pod_yaml("alpha"))
    for bad in ("notify.sock", "vsock:2:1234"):
        d = harness.Daemon(t, m, socket_path=t.path("a.sock"),
                           env={"NOTIFY_SOCKET": bad})
        t.daemons.append(d)
        d.start()
        line = d.wait_log(lambda x: x.level == "warn" and
                          'NOTIFY_SOCKET "%s"' % bad in x.msg,
                          "the NOTIFY_SOCKET warning")
        assert "absolute path" in line.msg, line.msg
        assert answers(d.sock)
        assert d.stop() == 0
    n = Notify(t)
    d = harness.Daemon(t, m, socket_path=t.path("b.sock"),
                       env={"NOTIFY_SOCKET": n.address,
                            "WATCHDOG_USEC": "ten"})
    t.daemons.append(d)
    d.start(wait=False)
    n.expect(lambda x: x.startswith("READY=1"), "READY=1")
    d.wait_log(lambda x: x.level == "warn" and
               'WATCHDOG_USEC "ten"' in x.msg, "the WATCHDOG_USEC warning")
    d.send_signal(signal.SIGTERM)
    n.expect(lambda x: x.startswith("STOPPING=1"), "STOPPING=1")
    assert "WATCHDOG=1" not in n.msgs, n.msgs
    assert d.wait_exit() == 0


@test("a notify socket nobody listens on: one warning however many sends "
      "fail, one line when sending works again, and the pings go on")
def test_notify_socket_nobody_listens_one_warning(t):
    m = t.mkdir("manifests")
    n = Notify(t, bind=False)
    d = harness.Daemon(t, m, env={"NOTIFY_SOCKET": n.address,
                                  "WATCHDOG_USEC": "50000"})
    t.daemons.append(d)
    d.start()

    def failed(x):
        return x.level == "warn" and "cannot send to NOTIFY_SOCKET" in x.msg
    line = d.wait_log(failed, "the send failure")
    assert "No such file" in line.msg, line.msg
    n.bind()
    for i in range(3):
        n.expect(lambda x: x == "WATCHDOG=1", "ping %d" % (i + 1))
    d.wait_log(lambda x: x.level == "info" and
               "sending to NOTIFY_SOCKET again" in x.msg, "the recovery line")
    assert len([x for x in d.logs() if failed(x)]) == 1, d.logs()
    d.send_signal(signal.SIGTERM)
    n.expect(lambda x: x.startswith("STOPPING=1"), "STOPPING=1")
    assert d.wait_exit() == 0


# ---- scripts/podmux.service.in (test_install.py: the unit as installed) ------

def unit_lines():
    with open(os.path.join(SRCDIR, "scripts", "podmux.service.in")) as f:
        return [x.strip() for x in f if x.strip() and not
                x.lstrip().startswith("#")]


@test("scripts/podmux.service.in: systemd-analyze verify finds nothing; "
      "Type=notify with a watchdog; it starts whether or not the plugin "
      "registry exists")
def test_scripts_podmux_service_systemd_analyze_verify(t):
    if SANITIZED:
        t.skip("checked once, in the plain build")
    lines = unit_lines()
    assert "Type=notify" in lines, lines
    assert [x for x in lines if re.match(r"WatchdogSec=\d+s$", x)], lines
    # systemd refuses to start a unit whose ReadWritePaths= directory is
    # absent, unless the path has a "-": every one has, and is created
    # first, outside the sandbox.
    rw = [p for x in lines if x.startswith("ReadWritePaths=")
          for p in x.split("=", 1)[1].split()]
    assert rw, lines
    for p in rw:
        assert p.startswith("-"), "ReadWritePaths=%s has no \"-\"" % p
        assert any(re.match(r"ExecStartPre=-?\+/bin/mkdir -p %s$" %
                            re.escape(p[1:]), x) for x in lines), \
            "%s is not created before the service starts" % p[1:]
    analyze = shutil.which("systemd-analyze")
    if not analyze:
        t.skip("systemd-analyze is missing (scripts/deps --test installs "
               "systemd)")
    # The unit as installed, with ExecStart= on this build's binary and
    # Documentation=man:podmux(8) found in this tree's page.
    unit = t.path("podmux.service")
    with open(os.path.join(SRCDIR, "scripts", "podmux.service.in")) as f:
        text = f.read()
    assert "ExecStart=@bindir@/podmux run" in text
    write_file(unit, text.replace("@bindir@/podmux", BIN), atomic=False)
    man8 = t.mkdir("man", "man8")
    shutil.copy(os.path.join(SRCDIR, "doc", "podmux.8"), man8)
    env = dict(os.environ, MANPATH=t.path("man"))
    args = [analyze, "verify"]
    if not shutil.which("man"):
        args.append("--man=no")
    r = subprocess.run(args + [unit], capture_output=True, text=True,
                       env=env, timeout=T_WAIT)
    assert r.returncode == 0 and not r.stderr.strip() and \
        not r.stdout.strip(), "systemd-analyze verify: exit %d\n%s%s" % (
            r.returncode, r.stdout, r.stderr)


if __name__ == "__main__":
    harness.main()
