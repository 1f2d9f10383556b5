#!/usr/bin/env python3
"""The consumer libraries against the real daemon: `podmux watch --exec`
(built on libpodmux-client), examples/consumer.c compiled against the
*installed* library through pkg-config, and the Python module installed
with pip from python/ and driven both against the daemon and against a
scripted server for the protocol's corners (doc/protocol.md)."""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading

import harness
from harness import test, write_file, pod_yaml, pn, SRCDIR, T_WAIT

SANITIZED = os.environ.get("PODMUX_SANITIZED") == "1"
BUILDDIR = os.environ.get("PODMUX_BUILDDIR") or os.path.dirname(harness.BIN)
PY = os.environ.get("PYTHON3") or "/usr/bin/python3"

sys.path.insert(0, os.path.join(SRCDIR, "python"))
import podmux  # noqa: E402


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


@test("podmux watch --exec runs the command once per pod change, in order, "
      "with the pod's JSON on stdin and PODMUX_* in its environment; a "
      "failing command is logged and the stream goes on")
def _(t):
    m = t.mkdir("manifests")
    out = t.mkdir("out")
    write_file(os.path.join(m, "web.yaml"), pod_yaml("web"))
    d = t.daemon(m)
    script = t.path("hook.sh")
    with open(script, "w") as f:
        f.write('#!/bin/sh\n'
                'n=$(($(cat "%s/log" 2>/dev/null | wc -l) + 1))\n'
                'cat > "%s/$n.json"\n'
                'env | grep "^PODMUX_" | sort > "%s/$n.env"\n'
                'echo "$PODMUX_OP $PODMUX_NAME" >> "%s/log"\n'
                '[ "$PODMUX_NAME" != "%s" ]\n' % (out, out, out, out,
                                                   pn("bad")))
    os.chmod(script, 0o755)
    w = t.spawn(["watch", "--socket", d.sock, "--exec", script])
    harness.wait_for(lambda: "ADD " + pn("web") in read(t.path("out", "log")),
                     T_WAIT, "the hook run for web")
    write_file(os.path.join(m, "bad.yaml"), pod_yaml("bad"))
    harness.wait_for(lambda: "ADD " + pn("bad") in read(
        t.path("out", "log")), T_WAIT, "the hook run for bad")
    write_file(os.path.join(m, "db.yaml"), pod_yaml("db"))
    harness.wait_for(lambda: "ADD " + pn("db") in read(
        t.path("out", "log")), T_WAIT, "the hook run for db (after a "
        "failing one)")
    os.remove(os.path.join(m, "web.yaml"))
    harness.wait_for(lambda: "REMOVE " + pn("web") in read(
        t.path("out", "log")), T_WAIT, "the hook run for web's removal")
    log = read(t.path("out", "log")).splitlines()
    want = ["ADD " + pn("web"), "ADD " + pn("bad"), "ADD " + pn("db"),
            "REMOVE " + pn("web")]
    if log != want:
        raise AssertionError("hook runs %r, want %r" % (log, want))
    first = json.loads(read(t.path("out", "1.json")))
    if first["metadata"]["name"] != pn("web"):
        raise AssertionError("stdin of the first run: %r" % first)
    want_env = {"PODMUX_OP": "ADD", "PODMUX_SOURCE": "file",
                "PODMUX_UID": first["metadata"]["uid"],
                "PODMUX_NAMESPACE": "default", "PODMUX_NAME": pn("web"),
                "PODMUX_RESYNC": "0"}
    env = {k: v for k, v in (x.split("=", 1) for x in
                             read(t.path("out", "1.env")).split())
           if k in want_env}
    if env != want_env:
        raise AssertionError("environment %r, want %r" % (env, want_env))
    harness.wait_for(lambda: any(pn("bad") in x and "status 1" in x
                                 for x in w.err_lines()), T_WAIT,
                     "the failing run logged")
    if w.poll() is not None:
        raise AssertionError("watch exited after a failing command")
    w.stop()


@test("podmux watch --reconnect follows a daemon restart: the pods "
      "changed meanwhile come as resync rows")
def _(t):
    m = t.mkdir("manifests")
    write_file(os.path.join(m, "web.yaml"), pod_yaml("web"))
    d = t.daemon(m)
    w = t.spawn(["watch", "--socket", d.sock, "--reconnect"])
    w.wait_line(lambda x: pn("web") in x, what="web's row")
    d.stop()
    os.remove(os.path.join(m, "web.yaml"))
    write_file(os.path.join(m, "db.yaml"), pod_yaml("db"))
    d.start()
    w.wait_line(lambda x: x.startswith("resync") and "ADD" in x and
                pn("db") in x, what="db's resync ADD row")
    w.wait_line(lambda x: x.startswith("resync") and "REMOVE" in x and
                pn("web") in x, what="web's resync REMOVE row")
    if w.poll() is not None:
        raise AssertionError("watch --reconnect exited")
    w.stop()


def make_install(t):
    """`make install DESTDIR=...` of this build: the staged root."""
    dest = t.path("dest")
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "TESTS")}
    make = os.environ.get("MAKE") or "make"
    r = subprocess.run([make, "-s", "-C", BUILDDIR, "install",
                        "DESTDIR=" + dest], capture_output=True, text=True,
                       env=env, timeout=600)
    if r.returncode != 0:
        raise AssertionError("make install: %s" % r.stderr[-2000:])
    return dest


def find(root, name):
    for d, _, files in os.walk(root):
        if name in files:
            return os.path.join(d, name)
    return None


@test("libpodmux-client is installed with a versioned soname, its header, "
      "podmux-client.pc and man pages, exports only podmux_* symbols, and "
      "examples/consumer.c built against it with pkg-config keeps the "
      "cache across a daemon restart")
def _(t):
    cc = os.environ.get("CC") or "cc"
    pkgconf = os.environ.get("PKG_CONFIG") or "pkg-config"
    dest = make_install(t)
    so = find(dest, "libpodmux-client.so.0")
    pc = find(dest, "podmux-client.pc")
    if not so or not pc or not find(dest, "client.h") or \
            not find(dest, "podmux_client.3"):
        raise AssertionError("installed files missing: so %s pc %s" % (so,
                                                                      pc))
    if not os.path.dirname(find(dest, "client.h")).endswith("include/podmux"):
        raise AssertionError("header not under include/podmux")
    nm = subprocess.run(["nm", "-D", "--defined-only", so],
                        capture_output=True, text=True, check=True).stdout
    syms = [x.split()[-1] for x in nm.splitlines() if x.strip()]
    other = [s for s in syms if not s.startswith("podmux_")]
    if other or "podmux_client_process" not in syms:
        raise AssertionError("exported symbols beyond podmux_*: %s" %
                             other[:10])
    env = dict(os.environ, PKG_CONFIG_SYSROOT_DIR=dest,
               PKG_CONFIG_PATH=os.path.dirname(pc))
    flags = subprocess.run([pkgconf, "--cflags", "--libs", "podmux-client"],
                           capture_output=True, text=True, env=env,
                           check=True).stdout.split()
    exe = t.path("consumer")
    extra = ["-fsanitize=address,undefined"] if SANITIZED else []
    r = subprocess.run([cc, "-std=gnu11", "-Wall", "-Werror"] + extra +
                       ["-o", exe, os.path.join(SRCDIR, "examples",
                                                "consumer.c")] + flags,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError("compiling the example: %s" % r.stderr[-2000:])
    m = t.mkdir("manifests")
    write_file(os.path.join(m, "web.yaml"), pod_yaml("web"))
    d = t.daemon(m)
    # Spawned passes our environment on: the staged library's directory
    # goes in it for this one start.
    os.environ["LD_LIBRARY_PATH"] = os.path.dirname(so)
    try:
        p = harness.Spawned([exe, d.sock])
    finally:
        del os.environ["LD_LIBRARY_PATH"]
    t.procs.append(p)
    p.wait_line(lambda x: x.startswith("ADD file default/" + pn("web")),
                what="web's ADD")
    p.wait_line(lambda x: x.startswith("synced (full state): 1 pods"),
                what="synced")
    d.stop()
    write_file(os.path.join(m, "db.yaml"), pod_yaml("db"))
    d.start()
    p.wait_line(lambda x: x.startswith("ADD file default/" + pn("db")) and
                "(resync)" in x, what="db's resync ADD")
    p.wait_line(lambda x: x.startswith("synced (full state): 2 pods"),
                what="synced with 2 pods")
    if p.poll() is not None:
        raise AssertionError("the example exited")
    p.stop()


@test("the Python module installs offline with pip from python/, and "
      "examples/consumer.py keeps the cache across a daemon restart")
def _(t):
    venv = t.path("venv")
    subprocess.run([PY, "-m", "venv", "--system-site-packages", venv],
                   check=True, capture_output=True, timeout=300)
    src = t.path("python")
    shutil.copytree(os.path.join(SRCDIR, "python"), src)
    # README.md's command (test_setup.py runs it as written).
    r = subprocess.run([os.path.join(venv, "bin", "pip"), "install",
                        "--no-index", "--no-build-isolation", src],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise AssertionError("pip install: %s" % r.stderr[-2000:])
    m = t.mkdir("manifests")
    write_file(os.path.join(m, "web.yaml"), pod_yaml("web"))
    d = t.daemon(m)
    p = harness.Spawned([os.path.join(venv, "bin", "python"),
                         os.path.join(SRCDIR, "examples", "consumer.py"),
                         d.sock])
    t.procs.append(p)
    p.wait_line(lambda x: x.startswith("ADD file default/" + pn("web")),
                what="web's ADD")
    p.wait_line(lambda x: x.startswith("synced (full state): 1 pods"),
                what="synced")
    os.remove(os.path.join(m, "web.yaml"))
    p.wait_line(lambda x: x.startswith("REMOVE file default/" + pn("web")),
                what="web's REMOVE")
    d.stop()
    write_file(os.path.join(m, "db.yaml"), pod_yaml("db"))
    d.start()
    p.wait_line(lambda x: x.startswith("ADD file default/" + pn("db")) and
                "(resync)" in x, what="db's resync ADD")
    if p.poll() is not None:
        raise AssertionError("the example exited")
    p.stop()


# ---- the Python module against a scripted server ---------------------------

class Script:
    """A unix socket the test writes protocol lines to by hand."""

    def __init__(self, t):
        self.path = t.path("s.sock")
        self.lis = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.lis.bind(self.path)
        self.lis.listen(8)
        self.conn = None
        self.first = None

    def accept(self, client):
        client.process()                      # connects
        self.conn, _ = self.lis.accept()
        buf = b""
        while not buf.endswith(b"\n"):
            buf += self.conn.recv(1)
        self.first = json.loads(buf)
        return self

    def send(self, *msgs):
        for m in msgs:
            if isinstance(m, (bytes, str)):
                data = m.encode() if isinstance(m, str) else m
            else:
                data = (json.dumps(m, separators=(",", ":")) + "\n").encode()
            self.conn.sendall(data)

    def close(self):
        self.conn.close()
        self.conn = None


def spod(uid, name, src="file", gen=1):
    return {"metadata": {"name": name, "namespace": "default", "uid": uid,
                         "annotations": {"kubernetes.io/config.source": src}},
            "spec": {"gen": gen}}


def hello(seq):
    return {"type": "hello", "protocol": 1, "mode": "incremental",
            "node": "n1", "seq": seq}


def pods(seq, op, src, *ps):
    return {"type": "pods", "seq": seq, "op": op, "source": src,
            "pods": list(ps)}


def synced(seq, resumed):
    return {"type": "synced", "seq": seq, "resumed": resumed}


class Rec:
    def __init__(self, c):
        self.log = []
        self.model = {}
        c.on_pods = self.pods
        c.on_synced = lambda r: self.log.append("synced %s" % r)
        c.on_error = lambda e: self.log.append("error %s %s" % (e.kind,
                                                                e.reason))
        c.on_reconnect = lambda r: self.log.append("reconnect %s" %
                                                   r.resume_after)
        c.on_plugin = lambda e: self.log.append("plugin %s %s %s" % (
            e.op, e.socket, e.resync))

    def pods(self, u):
        self.log.append("%s %s %s%s" % (u.op, u.source, ",".join(
            p.uid for p in u.pods), " resync" if u.resync else ""))
        if u.op == "SET":
            self.model = {}
        for p in u.pods:
            if u.op == "REMOVE":
                self.model.pop((p.source, p.uid), None)
            else:
                self.model[(p.source, p.uid)] = p.json

    def check(self, c):
        have = {(p.source, p.uid): p.json for p in c.pods()}
        if have != self.model:
            raise AssertionError("cache %r != what the handlers saw %r" % (
                sorted(have), sorted(self.model)))

    def take(self):
        x, self.log = self.log, []
        return x


def drain(c):
    for _ in range(50):
        c.process()
        import select
        if not c.fileno() or not select.select([c.fileno()], [], [], 0.05)[0]:
            return


def wait_due(c):
    import time
    w = c.timeout()
    if w:
        time.sleep(w)   # until the client's own timer is due: the condition


@test("python: full state, live ops with seq gaps, replay after a cut with "
      "a partial line, failed resume as a resync diff, unknown types, "
      "protocol mismatch")
def _(t):
    s = Script(t)
    c = podmux.Client(s.path)
    rec = Rec(c)
    s.accept(c)
    if s.first != {}:
        raise AssertionError("first line %r" % s.first)
    s.send(hello(5), pods(6, "ADD", "file", spod("a", "alpha"),
                          spod("b", "beta")),
           {"type": "future", "seq": 7, "x": [1]},
           pods(8, "ADD", "api", spod("c", "gamma", "api")), synced(10, False))
    drain(c)
    if rec.take() != ["ADD api c", "ADD file a,b", "synced False"]:
        raise AssertionError(rec.log)
    s.send(pods(20, "UPDATE", "file", spod("a", "alpha", gen=2)),
           pods(57, "REMOVE", "file", spod("b", "beta")),
           b'{"type":"pods","seq":58,"op":"ADD","source":"file","pods":[{"me')
    s.close()
    drain(c)
    if rec.take() != ["UPDATE file a", "REMOVE file b", "error closed None",
                      "reconnect 57"]:
        raise AssertionError(rec.log)
    wait_due(c)
    s.accept(c)
    if s.first != {"resume_after": 57}:
        raise AssertionError("first line %r" % s.first)
    s.send(hello(90), pods(60, "ADD", "file", spod("d", "delta")),
           synced(91, True))
    drain(c)
    if rec.take() != ["ADD file d", "synced True"]:
        raise AssertionError(rec.log)
    s.send({"type": "error", "seq": 92, "reason": "SlowConsumer",
            "message": "slow"})
    drain(c)
    wait_due(c)
    s.accept(c)
    s.send(hello(500), pods(501, "ADD", "file", spod("a", "alpha", gen=3),
                            spod("e", "eps")), synced(502, False))
    drain(c)
    log = rec.take()
    if log != ["error server SlowConsumer", "reconnect 91",
               "REMOVE api c resync", "REMOVE file d resync",
               "ADD file e resync", "UPDATE file a resync", "synced False"]:
        raise AssertionError(log)
    rec.check(c)
    if c.pod_by_uid("e").name != "eps" or \
            c.pod_by_name("default", "alpha").uid != "a" or \
            c.pod_by_uid("a").obj()["spec"]["gen"] != 3:
        raise AssertionError("look-ups")
    s.send({"type": "pods", "seq": 502, "op": "ADD", "source": "file",
            "pods": []})
    drain(c)
    if rec.take()[0] != "error bad_message None":
        raise AssertionError("a number going back is not refused")
    wait_due(c)
    s.accept(c)
    s.send({"type": "hello", "protocol": 2, "seq": "x"})
    try:
        drain(c)
        raise AssertionError("no error for protocol 2")
    except podmux.Error as e:
        if e.kind != podmux.PROTOCOL_MISMATCH or not e.fatal:
            raise AssertionError("error %r" % e.kind)
    c.close()


if __name__ == "__main__":
    harness.main()
