#!/usr/bin/env python3
"""One daemon per socket: whoever holds the lock file beside a socket
(`<socket>.lock`, flock) serves it.  A second daemon exits 1 with
"another podmux (pid N) serves PATH", also in the window where the first
has bound its socket but not yet listened on it; a leftover socket is
still replaced; the metrics socket follows the same rule."""

import fcntl
import os
import socket
import stat
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import T_WAIT, pn, pod_yaml, test, wait_for, write_file  # noqa: E402

NO_PLUGINS = ["--plugins-registry-dir", ""]
ROUNDS = 8


def manifests(t):
    m = t.mkdir("manifests")
    write_file(os.path.join(m, "web.yaml"), pod_yaml("web"))
    return m


def hold_lock(path, content):
    """Takes the lock the way a daemon does; returns the descriptor that
    holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.ftruncate(fd, 0)
    os.write(fd, content.encode())
    return fd


def bound_not_listening(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    return s


def read(path):
    with open(path) as f:
        return f.read()


def error_lines(d):
    return [x.msg for x in d.logs() if x.level == "error"]


def expect_refused(t, d, want):
    """d exits 1 and its only error line is want."""
    d.start(wait=False)
    rc = d.wait_exit(T_WAIT)
    t.soft(harness_expect, rc, 1, "exit status of the second daemon")
    errs = error_lines(d)
    if errs != [want]:
        raise AssertionError("error lines %r, want exactly [%r]" %
                             (errs, want))


def harness_expect(got, want, what):
    if got != want:
        raise AssertionError("%s: %r, want %r" % (what, got, want))


@test("a daemon that holds the lock and has bound the socket but not yet "
      "listened: a second podmux exits 1 with \"another podmux (pid N) "
      "serves PATH\" and leaves the socket alone")
def test_daemon_holds_lock_has_bound_socket(t):
    m = manifests(t)
    sock = t.path("podmux.sock")
    lock = hold_lock(sock + ".lock", "%d\n" % os.getpid())
    s = bound_not_listening(sock)
    ino = os.stat(sock).st_ino
    d = t.daemon(m, socket_path=sock, start=False, expect_exit=True,
                 extra=NO_PLUGINS)
    expect_refused(t, d, "another podmux (pid %d) serves %s" %
                   (os.getpid(), sock))
    st = os.lstat(sock)
    if not stat.S_ISSOCK(st.st_mode) or st.st_ino != ino:
        raise AssertionError("the other daemon's socket was replaced")
    t.soft(harness_expect, read(sock + ".lock"), "%d\n" % os.getpid(),
           "the lock file")
    # The first daemon goes on to listen and is reachable.
    s.listen(1)
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(sock)
    c.close()
    s.close()
    os.close(lock)


@test("the metrics socket follows the same rule: a lock holder that has "
      "bound it but not listened makes podmux exit 1 naming its pid, and "
      "the metrics socket is left alone")
def test_metrics_socket_follows_same_rule_lock(t):
    m = manifests(t)
    msock = t.path("metrics.sock")
    lock = hold_lock(msock + ".lock", "%d\n" % os.getpid())
    s = bound_not_listening(msock)
    ino = os.stat(msock).st_ino
    d = t.daemon(m, start=False, expect_exit=True,
                 extra=NO_PLUGINS + ["--metrics-address", msock])
    expect_refused(t, d, "metrics: another podmux (pid %d) serves %s" %
                   (os.getpid(), msock))
    st = os.lstat(msock)
    if not stat.S_ISSOCK(st.st_mode) or st.st_ino != ino:
        raise AssertionError("the other daemon's metrics socket was replaced")
    # The daemon took the stream socket and gave it back on the way out.
    for p in (d.sock, d.sock + ".lock"):
        t.soft(harness_expect, os.path.exists(p), False,
               "%s left after the refused start" % p)
    s.close()
    os.close(lock)


@test("two daemons started at once, %d times: exactly one serves, the other "
      "exits 1 naming the first's pid; the winner removes the socket and "
      "the lock file at exit" % ROUNDS)
def test_two_daemons_started_once_d_times(t):
    m = manifests(t)
    for n in range(ROUNDS):
        sock = t.path("r%d.sock" % n)
        a = t.daemon(m, socket_path=sock, start=False, expect_exit=True,
                     extra=NO_PLUGINS)
        b = t.daemon(m, socket_path=sock, start=False, expect_exit=True,
                     extra=NO_PLUGINS)
        a.start(wait=False)
        b.start(wait=False)
        wait_for(lambda: not a.alive() or not b.alive(), T_WAIT,
                 "round %d: one of the two daemons to exit" % n)
        loser, winner = (a, b) if not a.alive() else (b, a)
        rc = loser.wait_exit(T_WAIT)
        want = "another podmux (pid %d) serves %s" % (winner.pid, sock)
        if rc != 1 or error_lines(loser) != [want]:
            raise AssertionError("round %d: the second daemon exited %s with "
                                 "errors %r, want 1 and [%r]" %
                                 (n, harness._rc_str(rc), error_lines(loser),
                                  want))
        c = winner.connect()
        c.wait_until_state([pn("web")])
        winner.assert_alive()
        t.soft(harness_expect, read(sock + ".lock"), "%d\n" % winner.pid,
               "round %d: the lock file" % n)
        c.close()
        rc = winner.stop()
        if rc != 0:
            raise AssertionError("round %d: the serving daemon exited %s" %
                                 (n, harness._rc_str(rc)))
        for p in (sock, sock + ".lock"):
            if os.path.exists(p):
                raise AssertionError("round %d: %s left after exit" % (n, p))


@test("a leftover socket and lock file (no holder) are taken over: the "
      "lock file, mode 0600, holds the serving pid")
def test_leftover_socket_lock_file_no_holder(t):
    m = manifests(t)
    sock = t.path("podmux.sock")
    bound_not_listening(sock).close()
    with open(sock + ".lock", "w") as f:
        f.write("99999999\n")
    d = t.daemon(m, socket_path=sock, extra=NO_PLUGINS)
    c = d.connect()
    c.wait_until_state([pn("web")])
    t.soft(harness_expect, read(sock + ".lock"), "%d\n" % d.pid,
           "the lock file")
    c.close()
    if d.stop() != 0:
        raise AssertionError("exit status on SIGTERM")
    # The file above was ours (umask mode); one podmux makes is 0600.
    d2 = t.daemon(m, socket_path=sock, extra=NO_PLUGINS)
    d2.connect().wait_until_state([pn("web")])
    t.soft(harness_expect, oct(stat.S_IMODE(os.stat(sock + ".lock").st_mode)),
           oct(0o600), "mode of a new lock file")


@test("a lock path that is a symbolic link is not followed: podmux exits 1 "
      "naming it, and the link's target is untouched")
def test_lock_path_symbolic_link_followed_podmux(t):
    m = manifests(t)
    sock = t.path("podmux.sock")
    target = t.path("precious")
    with open(target, "w") as f:
        f.write("keep\n")
    os.symlink(target, sock + ".lock")
    d = t.daemon(m, socket_path=sock, start=False, expect_exit=True,
                 extra=NO_PLUGINS)
    d.start(wait=False)
    rc = d.wait_exit(T_WAIT)
    t.soft(harness_expect, rc, 1, "exit status")
    errs = error_lines(d)
    if len(errs) != 1 or sock + ".lock" not in errs[0] or \
            "symbolic link" not in errs[0]:
        raise AssertionError("error lines %r do not name the link" % errs)
    t.soft(harness_expect, read(target), "keep\n", "the link's target")
    t.soft(harness_expect, os.path.exists(sock), False, "socket made")


if __name__ == "__main__":
    harness.main()
