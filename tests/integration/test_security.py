#!/usr/bin/env python3
"""Who may read the pod stream: the socket's group and mode, and the
peer-credential allow lists (SO_PEERCRED)."""

import os
import stat
import subprocess
import sys

import harness
from harness import test, Daemon

CLIENT = r"""
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(10)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print("CONNECT-FAILED", e.errno); sys.exit(0)
s.sendall(b"{}\n")
buf = b""
while b"\n" not in buf:
    chunk = s.recv(4096)
    if not chunk:
        break
    buf += chunk
print(buf.split(b"\n")[0].decode())
"""


def connect_as(sock, uid, gid):
    """The first line the server sends to a client running as uid/gid."""
    def drop():
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
    out = subprocess.run([sys.executable, "-c", CLIENT, sock], preexec_fn=drop,
                         capture_output=True, text=True, timeout=30)
    return out.stdout.strip()


def need_root(t):
    if os.geteuid() != 0:
        t.skip("needs root to run clients as other users and to chown the socket")
    # The test's temp dir is 0700: let other users reach the socket, so the
    # socket's own mode and the allow lists are what decide.
    os.chmod(t.path(), 0o755)


@test("--socket-group: the socket file gets that group (by name and by number), with the default mode 0660")
def _(t):
    need_root(t)
    d = t.daemon(extra=["--socket-group", "daemon"])
    st = os.stat(d.sock)
    assert st.st_gid == 1, "socket group %d, want 1 (daemon)" % st.st_gid
    assert stat.S_IMODE(st.st_mode) == 0o660, oct(st.st_mode)
    d.stop()
    d2 = t.daemon(extra=["--socket-group", "65534"], socket_path=t.path("b.sock"))
    assert os.stat(d2.sock).st_gid == 65534


@test("--socket-group with an unknown group or bad --allow-uids/--allow-gids: exit 2 naming the flag")
def _(t):
    for flags, needle in ((["--socket-group", "no-such-group-podmux"], "--socket-group"),
                          (["--allow-uids", "12a"], "--allow-uids"),
                          (["--allow-gids", ""], "--allow-gids"),
                          (["--allow-uids", "-1"], "--allow-uids")):
        r = t.run_cmd(["run", "--socket", t.path("x.sock"), "--node-name", "n",
                       "--plugins-registry-dir", ""] + flags)
        assert r.returncode == 2, "%s: exit %d" % (flags, r.returncode)
        assert needle in r.stderr, "%s: %r" % (flags, r.stderr)


@test("--allow-uids/--allow-gids: a listed user or group gets hello, another user gets error Forbidden, root always gets in")
def _(t):
    need_root(t)
    d = t.daemon(extra=["--socket-mode", "0666", "--allow-uids", "1000", "--allow-gids", "4242"])
    line = connect_as(d.sock, 65534, 65534)
    assert '"type":"error"' in line and '"reason":"Forbidden"' in line, line
    line = connect_as(d.sock, 1000, 1000)
    assert '"type":"hello"' in line, line
    line = connect_as(d.sock, 2000, 4242)
    assert '"type":"hello"' in line, line
    c = d.connect()
    assert c.hello.get("type") == "hello"
    d.assert_alive()


@test("without allow lists the socket mode decides: 0660 root:root keeps other users out, 0666 lets them read")
def _(t):
    need_root(t)
    d = t.daemon()
    line = connect_as(d.sock, 65534, 65534)
    assert line.startswith("CONNECT-FAILED 13"), line  # EACCES
    d.stop()
    d2 = t.daemon(extra=["--socket-mode", "0666"], socket_path=t.path("open.sock"))
    line = connect_as(d2.sock, 65534, 65534)
    assert '"type":"hello"' in line, line


if __name__ == "__main__":
    harness.main()
