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
# A refused client is written its error and closed unread: the send may
# fail (EPIPE) and a read after the answer may be reset; the answer counts.
try:
    s.sendall(b"{}\n")
except OSError:
    pass
buf = b""
while b"\n" not in buf:
    try:
        chunk = s.recv(4096)
    except ConnectionResetError:
        break
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
def test_socket_group_socket_file_gets_group(t):
    need_root(t)
    d = t.daemon(extra=["--socket-group", "daemon"])
    harness.wait_listening(d.sock, d.assert_alive)
    st = os.stat(d.sock)
    assert st.st_gid == 1, "socket group %d, want 1 (daemon)" % st.st_gid
    assert stat.S_IMODE(st.st_mode) == 0o660, oct(st.st_mode)
    d.stop()
    d2 = t.daemon(extra=["--socket-group", "65534"], socket_path=t.path("b.sock"))
    harness.wait_listening(d2.sock, d2.assert_alive)
    assert os.stat(d2.sock).st_gid == 65534


@test("--socket-group with an unknown group or bad --allow-uids/--allow-gids: exit 2 naming the flag")
def test_socket_group_unknown_group_bad_allow(t):
    for flags, needle in ((["--socket-group", "no-such-group-podmux"], "--socket-group"),
                          (["--allow-uids", "12a"], "--allow-uids"),
                          (["--allow-gids", ""], "--allow-gids"),
                          (["--allow-uids", "-1"], "--allow-uids")):
        r = t.run_cmd(["run", "--socket", t.path("x.sock"), "--node-name", "n",
                       "--plugins-registry-dir", ""] + flags)
        assert r.returncode == 2, "%s: exit %d" % (flags, r.returncode)
        assert needle in r.stderr, "%s: %r" % (flags, r.stderr)


@test("--allow-uids/--allow-gids: a listed user or group gets hello, another user gets error Forbidden, root always gets in")
def test_allow_uids_allow_gids_listed_user(t):
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
def test_without_allow_lists_socket_mode_decides(t):
    need_root(t)
    d = t.daemon()
    line = connect_as(d.sock, 65534, 65534)
    assert line.startswith("CONNECT-FAILED 13"), line  # EACCES
    d.stop()
    d2 = t.daemon(extra=["--socket-mode", "0666"], socket_path=t.path("open.sock"))
    line = connect_as(d2.sock, 65534, 65534)
    assert '"type":"hello"' in line, line


class UnprivilegedDaemon(Daemon):
    """podmux run as uid/gid 65534 with no capabilities at all (setpriv),
    as README "Running without root" describes."""

    def argv(self):
        a = super().argv()
        return ["setpriv", "--reuid", "65534", "--regid", "65534",
                "--clear-groups", "--inh-caps=-all", "--bounding-set=-all",
                "--no-new-privs"] + a


def proc_status(pid):
    with open("/proc/%d/status" % pid) as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f
                    if ":\t" in line)


@test("unprivileged: as uid 65534 with no capabilities, podmux serves the "
      "manifests it can read and its stream and metrics sockets in a "
      "directory it owns; a manifest it may not read is a clear error that "
      "costs nothing else; no plugin registry by default")
def test_unprivileged_uid_65534_no_capabilities_podmux(t):
    need_root(t)
    m = t.mkdir("manifests")
    os.chmod(m, 0o755)
    harness.write_file(os.path.join(m, "web.yaml"), harness.pod_yaml("web"))
    os.chmod(os.path.join(m, "web.yaml"), 0o644)
    secret = os.path.join(m, "secret.yaml")
    harness.write_file(secret, harness.pod_yaml("secret"))
    os.chmod(secret, 0o600)
    run = t.mkdir("run")
    os.chown(run, 65534, 65534)
    os.chmod(run, 0o750)
    metrics = os.path.join(run, "metrics.sock")
    # The default registry is what this test checks.
    t.allow_default_registry()
    d = UnprivilegedDaemon(t, m, socket_path=os.path.join(run, "podmux.sock"),
                           extra=["--metrics-address", "unix:" + metrics],
                           plugins_dir=None)
    t.daemons.append(d)
    d.start()
    st = proc_status(d.pid)
    assert st["Uid"].split()[:2] == ["65534", "65534"], st["Uid"]
    assert int(st["CapEff"], 16) == 0 and int(st["CapBnd"], 16) == 0, st
    sock = os.stat(d.sock)
    assert (sock.st_uid, stat.S_IMODE(sock.st_mode)) == (65534, 0o660), sock
    c = d.connect()
    c.wait_until_state([harness.pn("web")])
    line = d.wait_file_error(secret)
    assert "ermission denied" in line.msg, line.msg
    out = subprocess.run(["curl", "-sS", "--unix-socket", metrics,
                          "http://localhost/metrics"], capture_output=True,
                         text=True, timeout=30)
    assert 'podmux_parse_errors_total{source="file"} 0' in out.stdout and \
        'podmux_source_errors_total{source="file"} 1' in out.stdout, out
    stat_out = subprocess.run([harness.BIN, "status", "--socket", d.sock],
                              capture_output=True, text=True, timeout=30)
    assert stat_out.returncode == 0 and "secret.yaml" in stat_out.stdout, \
        stat_out
    assert "plugin manager" not in d.stderr_text(), d.stderr_text()[-800:]
    d.stop()
    assert not os.path.exists(d.sock) and not os.path.exists(metrics)


@test("unprivileged: a socket directory it may not write is a clear error "
      "(exit 1, naming the socket), not a crash")
def test_unprivileged_socket_directory_may_write_clear(t):
    need_root(t)
    m = t.mkdir("manifests")
    os.chmod(m, 0o755)
    run = t.mkdir("run")
    os.chmod(run, 0o755)   # root's: 65534 may not create the socket
    d = UnprivilegedDaemon(t, m, socket_path=os.path.join(run, "podmux.sock"),
                           expect_exit=True)
    t.daemons.append(d)
    d.start(wait=False)
    rc = d.proc.wait(timeout=harness.T_SHORT)
    err = d.stderr_text()
    assert rc == 1, (rc, err)
    assert "podmux.sock" in err and "ermission denied" in err, err[-800:]


if __name__ == "__main__":
    harness.main()
