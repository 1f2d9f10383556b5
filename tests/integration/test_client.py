#!/usr/bin/env python3
"""The consumer libraries against the real daemon: `podmux watch --exec`
(built on libpodmux-client), examples/consumer.c compiled against the
*installed* library through pkg-config, and the Python module installed
with pip from python/ and driven both against the daemon and against a
scripted server for the protocol's corners (doc/protocol.md)."""

import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading

import harness
from harness import test, write_file, pod_yaml, pn, SRCDIR, T_WAIT, \
    T_LONG, MODES

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


class AwayDaemon:
    """Stands in at path for a daemon that is away: accepts each
    connection, reads the request and closes it.  Each connection is one
    retry of the client, so a test sees retries happen without timing
    them; every retry fails alike ("closed the connection")."""

    def __init__(self, path):
        self.path = path
        self.accepted = 0
        self.lis = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.lis.bind(path)
        self.lis.listen(16)
        self.th = threading.Thread(target=self._serve, daemon=True)
        self.th.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.lis.accept()
            except OSError:
                return
            with conn:
                try:
                    conn.settimeout(5)
                    conn.recv(4096)
                except OSError:
                    pass
            self.accepted += 1

    def close(self):
        self.lis.shutdown(socket.SHUT_RDWR)
        self.lis.close()
        self.th.join(5)
        os.unlink(self.path)


def retries_said_once(d, err_lines, prefix):
    """With daemon d stopped: the consumer whose stderr is err_lines()
    retries at least 4 times against an AwayDaemon, and says each
    condition once (lines starting with prefix)."""
    mark = len(err_lines())
    away = AwayDaemon(d.sock)
    try:
        # The 5th connection comes after the 4th failed and was said.
        harness.wait_for(lambda: away.accepted >= 5, T_WAIT,
                         "5 connections of the retrying consumer")
        harness.wait_for(lambda: any("closed the connection" in x and
                                     "ShuttingDown" not in x
                                     for x in err_lines()[mark:]),
                         T_WAIT, "the line about the connection closed")
    finally:
        away.close()
    said = [x for x in err_lines() if x.startswith(prefix)]
    if len(said) != len(set(said)) or len(said) > 4:
        raise AssertionError("one line per condition while the daemon is "
                             "away, after %d retries: %s" % (away.accepted,
                                                             said))


@test("podmux watch --exec runs the command once per pod change, in order, "
      "with the pod's JSON on stdin and PODMUX_* in its environment; a "
      "failing command is logged and the stream goes on")
def test_podmux_watch_exec_runs_command_once(t):
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
      "changed meanwhile come as resync rows (-o wide)")
def test_podmux_watch_reconnect_follows_daemon_restart(t):
    m = t.mkdir("manifests")
    write_file(os.path.join(m, "web.yaml"), pod_yaml("web"))
    d = t.daemon(m)
    w = t.spawn(["watch", "--socket", d.sock, "--reconnect", "-o", "wide"])
    w.wait_line(lambda x: pn("web") in x, what="web's row")
    d.stop()
    retries_said_once(d, w.err_lines, "podmux watch: ")
    os.remove(os.path.join(m, "web.yaml"))
    write_file(os.path.join(m, "db.yaml"), pod_yaml("db"))
    d.start()
    w.wait_line(lambda x: x.startswith("resync") and "ADD" in x and
                pn("db") in x, what="db's resync ADD row")
    w.wait_line(lambda x: x.startswith("resync") and "REMOVE" in x and
                pn("web") in x, what="web's resync REMOVE row")
    again = [x for x in w.err_lines() if "connected again" in x]
    if again != ['podmux watch: connected again to "%s" (full state)' %
                 d.sock]:
        raise AssertionError("want one line when the failure clears: %s" %
                             w.err_lines())
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


# Names libpodmux-client uses inside (src/util/buf.c, src/client/
# client_cache.c), defined again by the consumer program: the installed
# static archive must not clash with them.
CLASHING_NAMES = """\
int buf_append(const char *s);
void cache_free(void *p);
int buf_append(const char *s) { return s != 0; }
void cache_free(void *p) { (void)p; }
"""


def static_consumer(t, dest, cc, pkgconf, env, sock):
    """The installed libpodmux-client.a holds only podmux_* as global
    symbols, and examples/consumer.c linked statically with it and with
    a file defining buf_append and cache_free prints the pods of sock."""
    a = find(dest, "libpodmux-client.a")
    if not a:
        raise AssertionError("libpodmux-client.a is not installed")
    nm = subprocess.run(["nm", "-g", "--defined-only", a],
                        capture_output=True, text=True, check=True).stdout
    syms = [x.split()[-1] for x in nm.splitlines()
            if len(x.split()) == 3]
    other = [s for s in syms if not s.startswith("podmux_")]
    if other or "podmux_client_new" not in syms:
        raise AssertionError("global symbols of libpodmux-client.a beyond "
                             "podmux_*: %s" % other[:10])
    cflags = subprocess.run([pkgconf, "--cflags", "podmux-client"],
                            capture_output=True, text=True, env=env,
                            check=True).stdout.split()
    libs = subprocess.run([pkgconf, "--libs", "json-c"], capture_output=True,
                          text=True, check=True).stdout.split()
    clash = t.path("clash.c")
    write_file(clash, CLASHING_NAMES)
    exe = t.path("consumer-static")
    extra = ["-fsanitize=address,undefined"] if SANITIZED else []
    r = subprocess.run([cc, "-std=gnu11", "-Wall", "-Werror"] + extra +
                       cflags + ["-o", exe, os.path.join(SRCDIR, "examples",
                                                         "consumer.c"),
                                 clash, a] + libs,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError("linking the static consumer: %s" %
                             r.stderr[-2000:])
    p = harness.Spawned([exe, sock])
    t.procs.append(p)
    p.wait_line(lambda x: x.startswith("ADD file default/" + pn("web")),
                what="web's ADD (static consumer)")
    p.wait_line(lambda x: x.startswith("synced (full state): 1 pods"),
                what="synced (static consumer)")
    p.stop()


@test("libpodmux-client is installed with a versioned soname, its header, "
      "podmux-client.pc and man pages, exports only podmux_* symbols, and "
      "examples/consumer.c built against it with pkg-config keeps the "
      "cache across a daemon restart; its static archive holds only "
      "podmux_* as global and links with a consumer defining buf_append "
      "and cache_free")
def test_libpodmux_client_installed_versioned_soname_header(t):
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
    static_consumer(t, dest, cc, pkgconf, env, d.sock)
    d.stop()
    retries_said_once(d, p.err_lines, "consumer: ")
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
def test_python_module_installs_offline_pip_python(t):
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
    retries_said_once(d, p.err_lines, "consumer: ")
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

    def __init__(self, t, name="s.sock"):
        self.path = t.path(name)
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
        """The records seen, applied in order, give the cache: the same
        pods, each with the text seen or one the same for the resync diff
        (a restarted daemon's config.seen, say)."""
        have = {(p.source, p.uid): p.json for p in c.pods()}
        if set(have) != set(self.model) or not all(
                podmux._same(self.model[k], v) for k, v in have.items()):
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


def reconnect(s, c, rec, seq):
    """The daemon says it is shutting down (error at seq); the client
    reconnects, is accepted again, and what it reported is dropped."""
    s.send({"type": "error", "seq": seq, "reason": "ShuttingDown",
            "message": "bye"})
    drain(c)
    wait_due(c)
    s.accept(c)
    rec.take()


@test("python: record_path names a file of the files request byte for "
      "byte: path_hex when the name is not UTF-8, else path; the daemon's "
      "records of such a file and of a plain one; bad members refused as "
      "the C library and the Go package refuse them")
def test_python_record_path(t):
    for rec, want in (({"path": "/m/a.yaml"}, b"/m/a.yaml"),
                      ({"path": "/m/w\ufffd.y", "path_hex": "2f6d2f77ff2e79"},
                       b"/m/w\xff.y"),
                      ({"path": "/m\ufffd", "path_hex": "2F6DFE"}, b"/m\xfe"),
                      ({"path": "/m", "path_hex": None}, b"/m"),
                      ({"url": "http://x/m"}, None), ({"path": None}, None)):
        got = podmux.record_path(rec)
        assert got == want, (rec, got, want)
    for rec in ({"path": "/m", "path_hex": "2f6"}, {"path": "/m",
                "path_hex": "2g"}, {"path": "/m", "path_hex": "2f00"},
                {"path": "/m", "path_hex": " 2f"}, {"path": "/a\0b"},
                {"path": []}, {"path": "/m", "path_hex": 7}):
        try:
            podmux.record_path(rec)
        except ValueError:
            continue
        raise AssertionError("record_path(%r) did not refuse it" % (rec,))
    m = t.mkdir("m")
    d = t.daemon(m)
    raw = os.path.join(os.fsencode(m), b"w\xffb.yaml")
    write_file(os.fsdecode(raw), pod_yaml("web"))
    write_file(os.path.join(m, "ok.yaml"), pod_yaml("ok"))

    def names():
        r = t.run_cmd(["status", "--socket", d.sock, "--files", "-o", "json"])
        return sorted(podmux.record_path(x) for x in json.loads(r.stdout))
    want = sorted([raw, os.path.join(os.fsencode(m), b"ok.yaml")])
    harness.wait_for(lambda: names() == want, T_WAIT,
                     "both records, named by their bytes")


@test("python: full state, live ops with seq gaps, replay after a cut with "
      "a partial line, failed resume as a resync diff, unknown types, "
      "protocol mismatch")
def test_python_full_state_live_ops_seq(t):
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
    # api did not deliver in this full state: its pod c is held over.
    if log != ["error server SlowConsumer", "reconnect 91",
               "REMOVE file d resync", "ADD file e resync",
               "UPDATE file a resync", "synced False"] or \
            c.pod_by_uid("c") is None:
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


@test("python: stop() from a handler in a replay applies nothing more and "
      "keeps the resume point the handlers' last; from a source handler as "
      "the first live message ends the confirmation, that message is not "
      "applied; outside a handler the next process() is due at once")
def test_python_stop_keeps_what_was_told(t):
    s = Script(t)
    c = podmux.Client(s.path)
    rec = Rec(c)
    s.accept(c)
    s.send(hello(5), pods(6, "ADD", "file", spod("a", "alpha")),
           synced(10, False),
           pods(20, "UPDATE", "file", spod("a", "alpha", gen=2)))
    drain(c)
    s.close()
    drain(c)
    wait_due(c)
    s.accept(c)
    assert s.first == {"resume_after": 20}, s.first
    rec.take()
    stop_on = rec.pods

    def stopping(u):
        stop_on(u)
        c.stop()
    c.on_pods = stopping
    s.send(hello(40), pods(21, "ADD", "file", spod("e", "eps")),
           pods(25, "UPDATE", "file", spod("a", "alpha", gen=3)),
           synced(41, True))
    drain(c)
    assert rec.take() == ["ADD file e"], rec.log
    assert c.resume_point == 21, c.resume_point
    assert c.pod_by_uid("a").obj()["spec"]["gen"] == 2
    assert c.process() is False
    rec.check(c)
    c.close()

    # The source handler's stop.
    s2 = Script(t, "s2.sock")
    c = podmux.Client(s2.path)
    rec = Rec(c)
    s2.accept(c)
    s2.send(hello(100), synced(101, False),
            {"type": "source", "seq": 102, "source": "api",
             "state": "checkpoint"})
    drain(c)
    s2.close()
    drain(c)
    wait_due(c)
    s2.accept(c)
    rec.take()
    c.on_source = lambda st: c.stop()
    s2.send(hello(200), synced(201, True),
            pods(202, "ADD", "file", spod("a", "alpha")))
    drain(c)
    assert c.resume_point == 201 and len(c.pods()) == 0, (c.resume_point,
                                                          c.pods())
    c.close()

    # Outside a handler: process() is due at once, and closes.
    c = podmux.Client(s2.path)
    s2.accept(c)
    s2.send(hello(300), synced(301, False))
    drain(c)
    assert c.timeout() is None
    c.stop()
    assert c.timeout() == 0.0 and c.process() is False
    s2.conn.settimeout(5)
    assert s2.conn.recv(1) == b"", "the connection is still open"
    assert c.timeout() is None
    c.close()


@test("python: the log handler told of held-over pods removed at "
      "sources_ready finds them gone from the cache")
def test_python_log_after_held_dropped(t):
    s = Script(t)
    c = podmux.Client(s.path)
    rec = Rec(c)
    s.accept(c)
    s.send(hello(5), pods(6, "ADD", "file", spod("a", "alpha")),
           pods(7, "ADD", "api", spod("b", "beta", "api")), synced(10, False),
           {"type": "sources_ready", "seq": 11, "sources": ["api", "file"]})
    drain(c)
    s.send({"type": "error", "seq": 12, "reason": "ShuttingDown",
            "message": "bye"})
    drain(c)
    wait_due(c)
    s.accept(c)
    seen = []

    def log(level, text):
        if "not delivered again" in text:
            seen.append((c.pod_by_uid("b"), len(c.by_index(
                podmux.INDEX_NAMESPACE, "default"))))
    c.on_log = log
    s.send(hello(900), pods(901, "ADD", "file", spod("a", "alpha")),
           synced(902, False),
           {"type": "sources_ready", "seq": 903, "sources": ["file"]})
    drain(c)
    assert seen == [(None, 1)], seen
    assert [p.uid for p in c.pods()] == ["a"]
    rec.check(c)
    c.close()


@test("python: a path that is a regular file or a directory is no socket: "
      "the connect error says ENOTSOCK")
def test_python_not_a_socket(t):
    import errno
    f = t.path("regular")
    write_file(f, "x")
    for path in (f, t.mkdir("adir")):
        c = podmux.Client(path, reconnect=False)
        try:
            c.process()
            raise AssertionError("connected to %s" % path)
        except podmux.Error as e:
            assert e.kind == podmux.CONNECT and e.err == errno.ENOTSOCK, \
                (path, e.kind, e.err)
        finally:
            c.close()


def fixture_table(name, key):
    """The table key of tests/fixtures/NAME, which must not be empty."""
    with open(os.path.join(SRCDIR, "tests", "fixtures", name)) as f:
        table = json.load(f)[key]
    if not table:
        raise AssertionError("%s: no %s" % (name, key))
    return table


def resync_cases():
    return fixture_table("resync-diff.json", "cases")


def pods_line(seq, op, src, texts):
    """A pods message carrying pod texts as they are (not re-encoded)."""
    return '{"type":"pods","seq":%d,"op":"%s","source":"%s","pods":[%s]}\n' \
        % (seq, op, src, ",".join(texts))


@test("python: tests/fixtures/message-lines.json: each line taken or "
      "refused as malformed as the C library and the Go package take it; "
      "\"pods\" and \"plugin\" count only in a message of their own type")
def test_python_message_lines_fixture(t):
    from podmux import wire
    for c in fixture_table("message-lines.json", "cases"):
        try:
            m = wire._parse(c["line"])
        except wire._Bad as e:
            if c["ok"]:
                raise AssertionError("%s: refused: %s" % (c["name"], e))
            continue
        if not c["ok"]:
            raise AssertionError("%s: taken" % c["name"])
        if (m.type != "pods" and m.pods) or \
                (m.type != "plugin" and m.plugin_json):
            raise AssertionError("%s: a %s message holds pods or a plugin"
                                 % (c["name"], m.type))


@test("python: the span of config.seen in a pod's text is the one a walk "
      "over the annotations finds: the first config.seen, none when an "
      "annotation before it is not a string or the text is not laid out "
      "as the daemon writes it")
def test_python_seen_span_as_walk(t):
    import random
    import re
    from podmux import cache
    head = '{"metadata":{"annotations":{'
    ann = re.compile(r'"((?:[^"\\]|\\.)*)":"(?:[^"\\]|\\.)*"')

    def walk(text):
        if not text.startswith(head):
            return None
        i = len(head)
        while True:
            m = ann.match(text, i)
            if m is None:
                return None
            if m.group(1) == "kubernetes.io/config.seen":
                return m.span()
            if text[m.end():m.end() + 1] != ",":
                return None
            i = m.end() + 1
    parts = ['"a":"x"', '"kubernetes.io/config.seen":"2026"', '"k\\"q":"v\\\\"',
             '"b":1', '"kubernetes.io/config.seen":"z\\"y"', '"c":"d\n"',
             '"kubernetes.io\\/config.seen":"w"', '"e":"\\u0041"']
    rng = random.Random(3)
    found = 0
    for _ in range(5000):
        text = head + ",".join(rng.choice(parts)
                               for _ in range(rng.randint(0, 5)))
        text = rng.choice(["", " "]) + text + rng.choice(
            ["}}", ",}", "", '}},"spec":{}}'])
        if cache._seen_span(text) != walk(text):
            raise AssertionError("%r: %r, a walk finds %r" % (
                text, cache._seen_span(text), walk(text)))
        found += walk(text) is not None
    if found < 500:
        raise AssertionError("only %d texts with config.seen" % found)


@test("python: after a daemon restart the resync diff tells a pod as "
      "changed the way the merger counts changes "
      "(tests/fixtures/resync-diff.json): not for a new config.seen or an "
      "API pod's resourceVersion; the cache takes every new text")
def test_python_after_daemon_restart_resync_diff(t):
    cases = resync_cases()
    s = Script(t)
    c = podmux.Client(s.path)
    rec = Rec(c)
    s.accept(c)
    s.send(hello(5), *[pods_line(6 + i, "ADD", "file", [x["before"]])
                       for i, x in enumerate(cases)], synced(100, False))
    drain(c)
    rec.take()
    reconnect(s, c, rec, 101)
    s.send(hello(9000), *[pods_line(9001 + i, "ADD", "file", [x["after"]])
                          for i, x in enumerate(cases)], synced(9900, False))
    drain(c)
    changed = sorted(x["name"] for x in cases if x["changed"])
    want = ["UPDATE file %s resync" % ",".join(changed), "synced False"]
    log = rec.take()
    if log and log[0].startswith("UPDATE file "):  # in the cache's order
        log[0] = "UPDATE file %s resync" % ",".join(
            sorted(log[0].split()[2].split(",")))
    if log != want:
        raise AssertionError("handlers saw %r, want %r" % (log, want))
    for x in cases:
        if c.pod_by_uid(x["name"]).json != x["after"]:
            raise AssertionError("the cache holds an old text of %s" %
                                 x["name"])
        for a, b in ((x["before"], x["after"]), (x["after"], x["before"])):
            if podmux._same(a, b) == x["changed"]:
                raise AssertionError("case %s: _same says %s" % (
                    x["name"], not x["changed"]))
    rec.check(c)
    c.close()


def seen_text(uid, name, seen, src="file", ns="default", extra=""):
    """A pod's text laid out as the daemon writes it: annotations first,
    config.seen among them."""
    return ('{"metadata":{"annotations":{"a":"b","kubernetes.io/config.seen":'
            '%s,"kubernetes.io/config.source":"%s"},"name":"%s",'
            '"namespace":"%s","uid":"%s"},"spec":{"n":[1,2.5]%s}}' % (
                seen, src, name, ns, uid, extra))


@test("python: after a daemon restart that changed nothing but config.seen "
      "no pod's text is decoded again: each is the cached text it was but "
      "for config.seen's value, checked to be a JSON string (the records, "
      "the cache and its texts as before)")
def test_python_restart_seen_only_decodes_no_pod(t):
    from podmux import wire
    n = 50
    first = [seen_text("u%02d" % i, "p%02d" % i, '"2026-01-01T00:00:%02dZ"' % i)
             for i in range(n)]
    again = [x.replace("2026-01-01", "2026-11-28") for x in first]
    s = Script(t)
    c = podmux.Client(s.path)
    rec = Rec(c)
    s.accept(c)
    s.send(hello(5), pods_line(6, "SET", "file", first), synced(7, False))
    drain(c)
    reconnect(s, c, rec, 8)
    decoded = []
    real = wire._DEC

    class Counting:
        def raw_decode(self, text, i):
            v, end = real.raw_decode(text, i)
            if isinstance(v, dict) and "metadata" in v:
                decoded.append(v["metadata"].get("uid"))
            return v, end
    wire._DEC = Counting()
    try:
        s.send(hello(9000), pods_line(9001, "SET", "file", again),
               synced(9002, False))
        drain(c)
    finally:
        wire._DEC = real
    log = rec.take()
    if log != ["synced False"]:
        raise AssertionError("handlers saw %r, want only synced" % log)
    if decoded:
        raise AssertionError("%d pods decoded again: %r" % (
            len(decoded), decoded[:5]))
    got = [(p.uid, p.name, p.namespace, p.source, p.json) for p in c.pods()]
    want = [("u%02d" % i, "p%02d" % i, "default", "file", again[i])
            for i in range(n)]
    if got != want:
        raise AssertionError("cache %r, want %r" % (got[:2], want[:2]))
    rec.check(c)
    c.close()


@test("python: a pod that is a cached text but for config.seen is read "
      "exactly as a decode reads it, in every corner: a bad config.seen "
      "(a bad escape, a raw control character, a number, a cut) refused "
      "or taken as the decode does, the source from the annotation or the "
      "message, renames; a bad line after a restart refused with the cache "
      "kept whole")
def test_python_known_text_as_decoded(t):
    import random
    from podmux import wire
    rng = random.Random(7)
    values = ['"x"', '"\\u00e9\\n"', '"a\\q"', '"a\x01"', '7', '"a', '"a"x',
              '""', '"\\"', '"k\\/v"', 'null', '"a\\ud800"', '"\\u12"',
              '"a\x7f"', '"\u00e9"', '"a\u00a0b"', '"a\\"b"', '"a\x1fb"',
              '"\u2028"', '"a\\\\"', '"a\\\\"b"']
    srcs = ["file", "http", ""]
    for _ in range(3000):
        uid = "u%d" % rng.randint(0, 3)
        src = rng.choice(srcs)
        old = seen_text(uid, "p" + uid, '"s"', src)
        base = wire._parse(pods_line(1, rng.choice(["ADD", "SET"]),
                                     rng.choice(["file", "api", "*"]),
                                     [old]))
        known = wire._Known(base.pods, [p.key() for p in base.pods])
        new = seen_text(uid, "p" + uid, rng.choice(values), src,
                        extra=rng.choice(["", "", ',"x":1']))
        if rng.random() < 0.2:
            new = new.replace("p" + uid, "q" + uid)
        line = pods_line(2, rng.choice(["ADD", "UPDATE", "SET"]),
                         rng.choice(["file", "http", "*"]), [new])
        results = []
        for k in (None, known):
            if k is not None:
                k.at = 0
            try:
                m = wire._parse(line, k)
                results.append([(p.json, p.uid, p.name, p.namespace,
                                 p.source) for p in m.pods])
            except wire._Bad:
                results.append("bad")
        if results[0] != results[1]:
            raise AssertionError("%r after %r: decoded %r, as known %r" % (
                line, old, results[0], results[1]))
    # A bad config.seen after a restart: refused, nothing of the cache lost.
    first = [seen_text("u%d" % i, "p%d" % i, '"s%d"' % i) for i in range(3)]
    s = Script(t)
    c = podmux.Client(s.path)
    rec = Rec(c)
    s.accept(c)
    s.send(hello(5), pods_line(6, "SET", "file", first), synced(7, False))
    drain(c)
    reconnect(s, c, rec, 8)
    bad = [first[0], first[1].replace('"s1"', '"s\\q"'), first[2]]
    s.send(hello(9000), pods_line(9001, "SET", "file", bad),
           synced(9002, False))
    drain(c)
    log = rec.take()
    if log != ["error bad_message None", "reconnect 7"]:
        raise AssertionError("handlers saw %r, want bad_message and a "
                             "resume after 7" % log)
    if [p.json for p in c.pods()] != first:
        raise AssertionError("the cache lost its pods: %r" % c.pods())
    c.close()


@test("python: a message's pods are made as they are read, with the source "
      "of the \"op\" and \"source\" before them; in another order, or "
      "with a member said twice, each pod's source is set again from the "
      "members that count; an element that is JSON but no pod refuses a "
      "pods message and nothing else; every slot of a pod read is set")
def test_python_pods_made_as_read(t):
    from podmux import wire
    texts = [seen_text("u1", "p1", '"s1"', "http"),
             seen_text("u2", "p2", '"s2"', ""),
             seen_text("u3", "p3", '"s3"', "api")]
    arr = "[%s]" % ",".join(texts)
    cached = wire._parse(pods_line(1, "SET", "file", texts)).pods
    lines = {
        "daemon's order": '{"type":"pods","seq":2,"op":"%s",'
                          '"source":"%s","pods":' + arr + '}',
        "pods first": '{"pods":' + arr + ',"type":"pods","seq":2,'
                      '"op":"%s","source":"%s"}',
        "op after": '{"type":"pods","seq":2,"source":"%s","pods":' + arr +
                    ',"op":"%s"}',
        "op twice": '{"type":"pods","seq":2,"op":"REMOVE","source":"api",'
                    '"pods":' + arr + ',"op":"%s","source":"%s"}',
        "bad op first": '{"type":"pods","seq":2,"op":7,"source":"x",'
                        '"pods":' + arr + ',"op":"%s","source":"%s"}',
    }
    for op, src in (("SET", "file"), ("ADD", "http"), ("UPDATE", "*"),
                    ("REMOVE", "api")):
        want = None
        for what, fmt in lines.items():
            args = (src, op) if what == "op after" else (op, src)
            line = fmt % args
            for k in (None, wire._Known(cached, [p.key() for p in cached])):
                m = wire._parse(line, k)
                got = [(p.json, p.uid, p.source) for p in m.pods]
                if want is None:
                    want = got
                    own = op == "SET" or src == "*"
                    srcs = [("http" if own else src),
                            src, ("api" if own else src)]
                    if [x[2] for x in got] != srcs:
                        raise AssertionError("%s %s: sources %r, want %r" % (
                            op, src, [x[2] for x in got], srcs))
                elif got != want:
                    raise AssertionError("%s %s %s: %r, want %r" % (
                        what, op, src, got, want))
                for p in m.pods:
                    for slot in wire.Pod.__slots__:
                        try:
                            getattr(p, slot)
                        except AttributeError:
                            raise AssertionError("%s: %s not set" % (
                                what, slot)) from None
    # An element that is no pod: a pods message refused, whether it
    # comes first or after a cached pod; a message of another type that
    # carries one is read, as before.
    for k in (None, wire._Known(cached, [p.key() for p in cached])):
        for bad in ('{"x":1}', '{"metadata":{"name":"n"}}', '7'):
            for where in ([bad] + texts, texts[:1] + [bad]):
                try:
                    wire._parse(pods_line(3, "ADD", "file", where), k)
                    raise AssertionError("%r read as pods" % bad)
                except wire._Bad as e:
                    if "metadata.uid" not in str(e):
                        raise AssertionError("%r: %s" % (bad, e))
            m = wire._parse('{"type":"later","seq":4,"pods":[%s,%s]}' % (
                texts[0], bad), k)
            if m.type != "later":
                raise AssertionError("a later type with %r: %r" % (bad,
                                                                     m.type))


@test("python: live, only a SET's pods are compared with the cache before "
      "a decode (an ADD or UPDATE carries pods that changed: no comparison, "
      "as a one-pod message cost a fifth more with one), and a SET stops "
      "comparing after 8 changed pods in a row; a changed pod that was "
      "compared keeps the config.seen place the comparison found, so the "
      "next SET runs no search for it")
def test_python_live_compares_only_sets(t):
    from podmux import wire
    n = 20
    texts = [seen_text("u%02d" % i, "p%02d" % i, '"2026-01-01T00:00:00Z"')
             for i in range(n)]
    s = Script(t)
    c = podmux.Client(s.path)
    rec = Rec(c)
    s.accept(c)
    s.send(hello(5), pods_line(6, "SET", "file", texts), synced(7, False))
    drain(c)
    rec.take()
    compared = []
    real_as_known, real_seen = wire._as_known, wire._SEEN

    def counting(text, i, known):
        compared.append(known.uid)
        return real_as_known(text, i, known)

    class Searches:
        uids = []

        def match(self, text, *a):
            Searches.uids.append(json.loads(text)["metadata"]["uid"])
            return real_seen.match(text, *a)
    seq = 8

    def live_set(pods):
        nonlocal seq
        del compared[:]
        del Searches.uids[:]
        s.send(pods_line(seq, "SET", "file", pods))
        seq += 1
        drain(c)
        if [p.json for p in c.pods()] != pods:
            raise AssertionError("the SET's pods were not read as sent")
    wire._as_known = counting
    try:
        # Live UPDATEs and ADDs, each a pod changed (extra) but for one
        # whose text is the cached one but for config.seen: decoded all.
        for i in range(n):
            new = seen_text("u%02d" % i, "p%02d" % i,
                            '"2026-01-01T00:00:0%dZ"' % (i % 10),
                            extra=',"g":%d' % i if i else "")
            s.send(pods_line(seq, "UPDATE" if i % 2 else "ADD", "file",
                             [new]))
            seq += 1
        drain(c)
        if compared:
            raise AssertionError("live ADD/UPDATE pods compared with the "
                                 "cache: %r" % compared[:5])
        if len(rec.take()) != n:
            raise AssertionError("not every live message was handed on")
        # A live SET of changed pods: the first 8 compared, in order.
        changed = [seen_text("u%02d" % i, "p%02d" % i, '"2026-02-0%dZ"' %
                             (i % 10), extra=',"h":1') for i in range(n)]
        live_set(changed)
        if compared != ["u%02d" % i for i in range(8)]:
            raise AssertionError("a live SET of changed pods compared %r" %
                                 compared)
        for p in c.pods():
            m = real_seen.match(p.json)
            want = m.span(1) if p.uid < "u08" else None
            if getattr(p, "_seen", None) != want:
                raise AssertionError("%s: config.seen kept at %r, want %r" %
                                     (p.uid, getattr(p, "_seen", None), want))
        # Twice the same pods but for config.seen: every pod compared and
        # read as known; a search only for the pods decoded without a
        # comparison, then none.
        wire._SEEN = Searches()
        again = [x.replace("2026-02-0", "2026-03-0") for x in changed]
        live_set(again)
        if compared != ["u%02d" % i for i in range(n)] or \
                Searches.uids != ["u%02d" % i for i in range(8, n)]:
            raise AssertionError("compared %r, searched %r" % (
                compared, Searches.uids))
        third = [x.replace("2026-03-0", "2026-04-0") for x in changed]
        live_set(third)
    finally:
        wire._as_known, wire._SEEN = real_as_known, real_seen
    if Searches.uids or len(compared) != n or \
            any(getattr(p, "_like", None) is None for p in c.pods()):
        raise AssertionError("the last SET: searched %r, compared %d" % (
            Searches.uids, len(compared)))
    rec.check(c)
    c.close()


@test("python: a full state is read while it arrives: the pods that are "
      "cached texts but for config.seen are read from the part that came "
      "(in pieces of any size, a character's bytes cut), the rest when the "
      "line ends, with the same records and cache as a line read whole; a "
      "changed pod, a bad one, text after the array, bytes not UTF-8, a "
      "cut, another head, no memory, or on_line set: read at the end as "
      "before, the cache kept whole when the line is refused")
def test_python_full_state_read_ahead(t):
    from podmux import client as pclient, wire
    n = 40
    first = [seen_text("u%02d" % i, "p\u00e9%02d" % i,
                       '"2026-01-01T00:00:%02dZ"' % i) for i in range(n)]
    again = [x.replace("2026-01-01", "2026-11-28") for x in first]

    def state(texts, head=None):
        line = pods_line(9001, "SET", "file", texts)
        return (line if head is None else line.replace(
            '{"type":"pods","seq":9001,"op":"SET",', head, 1)).encode()

    def run(line, piece=97, on_line=False, cut=False, last=0):
        """Two connections: the first state, then line in pieces; returns
        the records after the restart, the cache's texts, and the pods
        read ahead before the line's end (its last bytes and newline
        come together)."""
        s = Script(t)
        c = podmux.Client(s.path)
        rec = Rec(c)
        if on_line:
            c.on_line = lambda x: rec.log.append("line %d" % len(x))
        s.accept(c)
        s.send(hello(5), state(first), synced(7, False))
        drain(c)
        reconnect(s, c, rec, 8)

        def feed(data):
            # What _read() does with each piece it receives.
            c._buf.extend(data)
            c._dispatch()
        feed(b'{"type":"hello","protocol":1,"seq":9000}\n')
        body = line[:-1 - last]
        for i in range(0, len(body), piece):
            feed(body[i:i + piece])
        read = len(c._ahead.pods) if c._ahead is not None else 0
        if cut:
            s.close()
            drain(c)
            wait_due(c)
            s.accept(c)
            rec.take()
            s.send(hello(9100), state(again))
        else:
            feed(line[-1 - last:])
        s.send(synced(9002, False))
        drain(c)
        log = rec.take()
        texts = [p.json for p in c.pods()]
        c.close()
        s.lis.close()
        os.unlink(s.path)
        return log, texts, read

    real_min = pclient.AHEAD_MIN
    pclient.AHEAD_MIN = 200
    try:
        # Every pod read ahead but the last (whose comma never comes), in
        # pieces of any size: the same as a line read whole, and each
        # character of it copied a bounded number of times, however
        # small the pieces.
        real_ahead = pclient._read_ahead
        copied = [0]

        def counting(a, more):
            copied[0] += len(a.text) + len(more)
            real_ahead(a, more)
        pclient._read_ahead = counting
        try:
            for piece in (1, 7, 97, 1000, 1 << 20):
                copied[0] = 0
                log, texts, read = run(state(again), piece)
                if log != ["synced False"] or texts != again or \
                        read != n - 1 or copied[0] > 3 * len(state(again)):
                    raise AssertionError("pieces of %d: %r, %d read ahead, "
                                         "%d copied" % (piece, log, read,
                                                        copied[0]))
        finally:
            pclient._read_ahead = real_ahead
        # A changed pod: read ahead up to it, the rest at the end.
        changed = list(again)
        changed[20] = changed[20].replace('"n":[1,2.5]', '"n":[1,2.6]')
        log, texts, read = run(state(changed))
        if log != ["UPDATE file u20 resync", "synced False"] or \
                texts != changed or read != 20:
            raise AssertionError("a changed pod: %r, %d" % (log, read))
        # Refused at the end, the cache whole: a bad config.seen, text
        # after the array, bytes that are not UTF-8.
        bad_seen = list(again)
        bad_seen[25] = bad_seen[25].replace("2026-11-28", "2026\\q")
        for what, line in (
                ("a bad config.seen", state(bad_seen)),
                ("text after the array", state(again)[:-2] + b"x}\n"),
                ("not UTF-8", state(again).replace(
                    "p\u00e930".encode(), b"p\xff30", 1))):
            log, texts, read = run(line)
            if log != ["error bad_message None", "reconnect 7"] or \
                    texts != first or read < 25:
                raise AssertionError("%s: %r, %d read ahead" % (what, log,
                                                                 read))
        # Bytes not UTF-8 that come after the last piece read ahead.
        log, texts, read = run(state(again).replace(
            ("p\u00e9%02d" % (n - 1)).encode(), b"p\xff%02d" % (n - 1), 1),
            last=150)
        if log != ["error bad_message None", "reconnect 7"] or \
                texts != first or read != n - 1:
            raise AssertionError("not UTF-8 at the end: %r, %d" % (log, read))
        # Not read ahead: another head, an unknown op, on_line set.
        for what, line, kw in (
                ("another head", state(again, '{"type":"pods","op":"SET",'
                                              '"seq":9001,'), {}),
                ("on_line", state(again), {"on_line": True})):
            log, texts, read = run(line, **kw)
            if log[-1:] != ["synced False"] or texts != again or read:
                raise AssertionError("%s: %r, %d read ahead" % (what, log,
                                                                 read))
        log, texts, read = run(state(again, '{"type":"pods","seq":9001,'
                                            '"op":"BOGUS",'))
        if log != ["error bad_message None", "reconnect 7"] or read:
            raise AssertionError("an unknown op: %r, %d" % (log, read))
        # A cut inside the line after pods were read ahead: the next
        # connection's full state is read anew.
        log, texts, read = run(state(again), cut=True)
        if log != ["synced False"] or texts != again or read != n - 1:
            raise AssertionError("a cut: %r, %d" % (log, read))
        # No memory while reading ahead, after a pod was read: what was
        # read is dropped, the line read whole at the end.

        def no_memory(a, more):
            if a.first >= 0:
                raise MemoryError()
            real_ahead(a, more)
        pclient._read_ahead = no_memory
        try:
            log, texts, read = run(state(again))
        finally:
            pclient._read_ahead = real_ahead
        if log != ["synced False"] or texts != again or read < 1:
            raise AssertionError("no memory: %r, %d" % (log, read))
        # on_line set while the line was read ahead: it gets the line.
        real_more = pclient.Client._read_more
        seen = []

        def more_then_on_line(c):
            real_more(c)
            if c._ahead is not None and c._ahead.pods:
                c.on_line = lambda x: seen.append(x)
        pclient.Client._read_more = more_then_on_line
        try:
            log, texts, read = run(state(again))
        finally:
            pclient.Client._read_more = real_more
        if log != ["synced False"] or texts != again or read < 1 or \
                seen[:1] != [state(again).decode()[:-1]]:
            raise AssertionError("on_line set: %r, %d, %d lines" % (
                log, read, len(seen)))
    finally:
        pclient.AHEAD_MIN = real_min
    # What was read ahead with other cached pods is not taken, and the
    # cache's place is given back.
    base = wire._parse(state(first).decode())
    line = state(again).decode()
    for other in (True, False):
        k1 = wire._Known(base.pods, [p.key() for p in base.pods])
        a = wire._Ahead(k1)
        wire._read_ahead(a, line[:len(line) // 2])
        k2 = wire._Known(base.pods, [p.key() for p in base.pods]) \
            if other else k1
        m = wire._parse(line, k2, a)
        if not a.pods or k1.at != (0 if other else n) or \
                [p.json for p in m.pods] != again or \
                (m.pods[0] is a.pods[0]) == other:
            raise AssertionError("other=%s: %d read ahead, at %d" % (
                other, len(a.pods), k1.at))
        # Cut (what was read ahead not in the text): refused, so the
        # client reads the line whole.
        k1 = wire._Known(base.pods, [p.key() for p in base.pods])
        a = wire._Ahead(k1)
        wire._read_ahead(a, line[:len(line) // 2])
        a.cut = True
        cut = a.head + a.text + line[len(line) // 2:]
        try:
            m = wire._parse(cut, k2 if other else k1, a)
            if other:
                raise AssertionError("a cut line read with other pods")
        except wire._Bad:
            if not other:
                raise
        if not other and [p.json for p in m.pods] != again:
            raise AssertionError("a cut line: %r" % m.pods[:1])


@test("python: a line of any length is read as UTF-8: a long one (a full "
      "state past 64 KB, decoded from a view of the read buffer) and a short "
      "one give the same pods; a long or short line that is not UTF-8 is "
      "refused as a bad message, the cache kept whole")
def test_python_long_lines_utf8(t):
    from podmux import client as pclient
    big = pclient._VIEW_LINE
    for long_line in (True, False):
        n = 60 if long_line else 2
        texts = [seen_text("u%03d" % i, "p\u00e9%03d" % i,
                           '"%s"' % ("\u00e9" * (big // 50 if long_line
                                                else 1)))
                 for i in range(n)]
        line = pods_line(6, "SET", "file", texts).encode()
        if (len(line) > big) != long_line:
            raise AssertionError("a line of %d bytes" % len(line))
        s = Script(t)
        c = podmux.Client(s.path)
        rec = Rec(c)
        s.accept(c)
        s.send(hello(5), line, synced(7, False))
        drain(c)
        if [p.json for p in c.pods()] != texts or \
                rec.take() != ["ADD file " + ",".join(
                    "u%03d" % i for i in range(n)), "synced False"]:
            raise AssertionError("long=%s: the pods read %r" % (
                long_line, [p.name for p in c.pods()][:3]))
        bad = pods_line(8, "SET", "file", texts).encode().replace(
            "\u00e9".encode(), b"\xff", 1)
        s.send(bad)
        drain(c)
        log = rec.take()
        if log[:1] != ["error bad_message None"] or \
                [p.json for p in c.pods()] != texts:
            raise AssertionError("long=%s: after a line not UTF-8: %r, "
                                 "%d pods" % (long_line, log, len(c)))
        c.close()
        s.lis.close()
        os.unlink(s.path)


@test("python: the cache's look-ups by uid and by name give the first pod "
      "of the daemon's order holding it, whatever ops brought the pods "
      "(several sources sharing uids and names, renames, REMOVEs, SETs): "
      "a key held by one pod and by several, and back")
def test_python_cache_lookups_as_a_walk(t):
    import random
    from podmux import cache, wire
    rng = random.Random(11)
    c = cache._Cache()
    for step in range(3000):
        op = rng.choice(["ADD", "UPDATE", "REMOVE", "REMOVE", "SET"])
        src = rng.choice(["file", "http", "api"])
        texts = [json.dumps(spod("u%d" % rng.randint(0, 5),
                                 "n%d" % rng.randint(0, 3),
                                 rng.choice(["file", "http", "api"]),
                                 gen=step), separators=(",", ":"))
                 for _ in range(rng.randint(1, 3 if op != "SET" else 6))]
        c.apply_pods(wire._parse(pods_line(step + 1, op, src, texts)))
        if c.ordered() != sorted(c.pods.values(), key=wire.Pod.key) or \
                c.keys() != [p.key() for p in c.ordered()]:
            raise AssertionError("step %d: the order %r" % (step,
                                                             c.ordered()))
        for uid in ["u%d" % i for i in range(6)]:
            want = next((p for p in c.ordered() if p.uid == uid), None)
            if c.by_uid(uid) is not want:
                raise AssertionError("step %d: by_uid(%s) %r, want %r" % (
                    step, uid, c.by_uid(uid), want))
        for name in ["n%d" % i for i in range(4)]:
            want = next((p for p in c.ordered() if p.name == name), None)
            if c.by_name("default", name) is not want:
                raise AssertionError("step %d: by_name(%s) %r, want %r" % (
                    step, name, c.by_name("default", name), want))


@test("python: a pod is its source and uid: a live UPDATE carrying it "
      "under another name replaces it (no second entry), a REMOVE finds it "
      "whatever name it carries, a SET holds one pod per source and uid")
def test_python_pod_source_uid_live_update(t):
    s = Script(t)
    c = podmux.Client(s.path)
    rec = Rec(c)
    s.accept(c)
    s.send(hello(5), pods(6, "ADD", "file", spod("a", "alpha"),
                          spod("b", "beta")), synced(7, False))
    drain(c)
    rec.take()
    s.send(pods(8, "UPDATE", "file", spod("a", "zeta", gen=2)))
    drain(c)
    if len(c) != 2 or c.pod_by_name("default", "alpha") is not None or \
            c.pod_by_name("default", "zeta").uid != "a" or \
            [p.name for p in c.pods()] != ["beta", "zeta"]:
        raise AssertionError("after the rename: %r" % c.pods())
    s.send(pods(9, "ADD", "api", spod("a", "alpha", "api")),
           pods(10, "REMOVE", "file", spod("a", "old-name")))
    drain(c)
    if len(c) != 2 or c.pod_by_uid("a").source != "api":
        raise AssertionError("after the REMOVE: %r" % c.pods())
    rec.check(c)
    s.send(pods(11, "SET", "file", spod("x", "one"), spod("y", "aaa"),
                spod("x", "two", gen=2)))
    drain(c)
    if len(c) != 2 or c.pod_by_uid("x").name != "two" or \
            c.pod_by_name("default", "one") is not None:
        raise AssertionError("after the SET: %r" % c.pods())
    if rec.take() != ["UPDATE file a", "ADD api a", "REMOVE file a",
                      "SET file x,y,x"]:
        raise AssertionError(rec.log)
    rec.check(c)
    c.close()


def src_msg(seq, state, time=None, rv=None):
    m = {"type": "source", "seq": seq, "source": "api", "state": state}
    if time or rv:
        m["checkpoint"] = {"time": time, "resource_version": rv}
    return m


@test("python: a source's state (the \"source\" message): checkpoint "
      "then live, kept across a resume and said again, a state not said "
      "again after synced ends as live (resync), bad source messages "
      "refused by name (tests/unit/test_client.c test_source_state)")
def test_python_source_state(t):
    s = Script(t)
    c = podmux.Client(s.path)
    rec = Rec(c)
    told = []
    c.on_source = told.append
    st, not_live = c.source_state("api")
    if not_live or st.serving != podmux.Serving.LIVE or st.state != "live":
        raise AssertionError("before any message: %r %r" % (st, not_live))
    s.accept(c)
    s.send(hello(5), pods(6, "ADD", "api", spod("a", "alpha", "api")),
           synced(7, False), src_msg(8, "checkpoint", "2026-11-27T10:00:00Z",
                                     "42"))
    drain(c)
    st, not_live = c.source_state("api")
    if not not_live or st.serving != "checkpoint" or \
            st.checkpoint_time != "2026-11-27T10:00:00Z" or \
            st.checkpoint_resource_version != "42" or st.seq != 8 or \
            st.resync or [x.state for x in told] != ["checkpoint"]:
        raise AssertionError("checkpoint: %r %r %r" % (st, not_live, told))
    # Cut, resumed: the daemon says the state again; unchanged, not told.
    s.close()
    drain(c)
    wait_due(c)
    s.accept(c)
    s.send(hello(5), synced(9, True), src_msg(10, "checkpoint",
                                             "2026-11-27T10:00:00Z", "42"),
           pods(11, "UPDATE", "api", spod("a", "alpha", "api", gen=2)))
    drain(c)
    if len(told) != 1 or not c.source_state("api")[1]:
        raise AssertionError("said again: %r" % told)
    s.send(src_msg(12, "live"))
    drain(c)
    if c.source_state("api")[1] or told[-1].state != "live" or \
            told[-1].seq != 12 or told[-1].resync:
        raise AssertionError("live: %r" % told)
    # A checkpoint again, then a new daemon run that does not say it:
    # live, told with resync at the first message after synced.
    s.send(src_msg(13, "checkpoint", "2026-11-27T11:00:00Z", "43"))
    drain(c)
    s.close()
    drain(c)
    wait_due(c)
    s.accept(c)
    s.send(hello(900), pods(901, "ADD", "api", spod("a", "alpha", "api",
                                                    gen=2)),
           synced(902, False))
    drain(c)
    if not c.source_state("api")[1]:
        raise AssertionError("ended before the first message after synced")
    s.send(pods(903, "ADD", "api", spod("b", "beta", "api")))
    drain(c)
    st, not_live = c.source_state("api")
    if not_live or not told[-1].resync or told[-1].seq != 0 or \
            [x.state for x in told] != ["checkpoint", "live", "checkpoint",
                                        "live"]:
        raise AssertionError("not said again: %r" % told)
    rec.check(c)
    c.close()
    # Bad source messages: refused, naming what is wrong.
    for bad, why in ((b'{"type":"source","seq":20,"state":"live"}',
                      '"source" is missing'),
                     (b'{"type":"source","seq":20,"source":"api"}',
                      '"state" is missing'),
                     (b'{"type":"source","seq":20,"source":"api",'
                      b'"state":"checkpoint","checkpoint":1}',
                      '"checkpoint" is not an object'),
                     (b'{"type":"source","seq":20,"source":"api",'
                      b'"state":"checkpoint","checkpoint":{"time":5}}',
                      'a member of "checkpoint" is not a string')):
        c = podmux.Client(s.path, reconnect=False)
        errs = []
        c.on_error = errs.append
        s.accept(c)
        s.send(hello(5), synced(6, False), bad + b"\n")
        try:
            drain(c)
        except podmux.Error:
            pass            # reconnect=False: process() raises the end
        if not errs or errs[0].kind != podmux.BAD_MESSAGE or \
                why not in errs[0].message or c.source_state("api")[1]:
            raise AssertionError("%r: %r" % (bad, [e.message for e in errs]))
        c.close()
        s.close()


def start_three_sources(t, mode="incremental"):
    """A client that held file a, b; api c, d, e, x; http h, and the
    daemon's ShuttingDown: (script, client, recorder) after the cut."""
    s = Script(t)
    c = podmux.Client(s.path)
    rec = Rec(c)
    s.accept(c)
    s.send(dict(hello(5), mode=mode),
           pods(6, "ADD", "file", spod("a", "alpha"), spod("b", "beta")),
           pods(7, "ADD", "api", *[spod(u, n, "api") for u, n in (
               ("c", "gamma"), ("d", "delta"), ("e", "eps"), ("x", "xi"))]),
           pods(8, "ADD", "http", spod("h", "eta", "http")),
           synced(10, False),
           {"type": "sources_ready", "seq": 11,
            "sources": ["api", "file", "http"]},
           {"type": "error", "seq": 12, "reason": "ShuttingDown",
            "message": "bye"})
    drain(c)
    wait_due(c)
    s.accept(c)
    rec.take()
    return s, c, rec


def ready(seq, *sources):
    return {"type": "sources_ready", "seq": seq, "sources": list(sources)}


@test("python: a restarted daemon whose api source delivers late: no api "
      "pod removed at the resync; then an unchanged pod not told, a changed "
      "one an UPDATE resync after the ADD of the new one, another op as "
      "sent; sources_ready removes the one not delivered again "
      "(doc/protocol.md, \"A restarted daemon's late sources\")")
def test_python_restarted_daemon_whose_api_source(t):
    s, c, rec = start_three_sources(t)
    s.send(hello(900), pods(901, "ADD", "file", spod("a", "alpha"),
                            spod("b", "beta", gen=2)),
           pods(902, "ADD", "http"), synced(903, False))
    drain(c)
    log = rec.take()
    if log != ["UPDATE file b resync", "REMOVE http h resync",
               "synced False"] or not c.has_synced or len(c) != 6:
        raise AssertionError("%r, %d pods" % (log, len(c)))
    rec.check(c)
    s.send(pods(904, "UPDATE", "file", spod("a", "alpha", gen=3)),
           pods(905, "UPDATE", "api", spod("x", "xi", "api", gen=2)),
           pods(906, "ADD", "api", spod("c", "gamma", "api"),
                spod("d", "delta", "api", gen=2), spod("f", "phi", "api")))
    drain(c)
    log = rec.take()
    if log != ["UPDATE file a", "UPDATE api x", "ADD api f",
               "UPDATE api d resync"] or len(c) != 7:
        raise AssertionError("%r, %d pods" % (log, len(c)))
    rec.check(c)
    s.send(ready(907, "api", "file", "http"))
    drain(c)
    log = rec.take()
    if log != ["REMOVE api e resync"] or c.pod_by_uid("e") or len(c) != 6:
        raise AssertionError("%r, %d pods" % (log, len(c)))
    rec.check(c)
    s.send(pods(908, "ADD", "api", spod("c", "gamma", "api")))
    drain(c)
    if rec.take() != ["ADD api c"]:
        raise AssertionError("an ADD after sources_ready is filtered")
    c.close()


@test("python: a pod held over whose source is not in the new run's "
      "sources_ready (no longer configured) is removed then")
def test_python_pod_held_over_whose_source(t):
    s, c, rec = start_three_sources(t)
    s.send(hello(900), pods(901, "ADD", "file", spod("a", "alpha"),
                            spod("b", "beta")),
           pods(902, "ADD", "api", *[spod(u, n, "api") for u, n in (
               ("c", "gamma"), ("d", "delta"), ("e", "eps"), ("x", "xi"))]),
           synced(903, False), ready(904, "api", "file"))
    drain(c)
    log = rec.take()
    if log != ["synced False", "REMOVE http h resync"] or len(c) != 6:
        raise AssertionError("%r, %d pods" % (log, len(c)))
    rec.check(c)
    c.close()


@test("python: the hold-over lasts across connections: a replay applies "
      "as live, a further full state holds again what its sources did not "
      "deliver and compares what they did")
def test_python_hold_over_lasts_across_connections(t):
    s, c, rec = start_three_sources(t)
    slow = {"type": "error", "seq": 0, "reason": "SlowConsumer",
            "message": "slow"}
    s.send(hello(900), pods(901, "ADD", "file", spod("a", "alpha"),
                            spod("b", "beta")), synced(903, False),
           dict(slow, seq=904))
    drain(c)
    wait_due(c)
    s.accept(c)
    if rec.take() != ["synced False", "error server SlowConsumer",
                      "reconnect 903"]:
        raise AssertionError(rec.log)
    s.send(hello(1000), pods(905, "ADD", "http", spod("h", "eta", "http")),
           synced(1001, True), dict(slow, seq=1002))
    drain(c)
    wait_due(c)
    s.accept(c)
    if rec.take() != ["ADD http ", "synced True", "error server SlowConsumer",
                      "reconnect 1001"]:
        raise AssertionError(rec.log)
    s.send(hello(2000), pods(2001, "ADD", "file", spod("a", "alpha"),
                             spod("b", "beta")),
           pods(2002, "ADD", "http", spod("h", "eta", "http")),
           synced(2003, False), dict(slow, seq=2004))
    drain(c)
    wait_due(c)
    s.accept(c)
    if rec.take() != ["synced False", "error server SlowConsumer",
                      "reconnect 2003"] or len(c) != 7:
        raise AssertionError(rec.log)
    s.send(hello(3000), pods(3001, "ADD", "api", spod("c", "gamma", "api", 2),
                             spod("d", "delta", "api"), spod("x", "xi", "api")),
           pods(3002, "ADD", "file", spod("a", "alpha"), spod("b", "beta")),
           pods(3003, "ADD", "http", spod("h", "eta", "http")),
           synced(3004, False))
    drain(c)
    if rec.take() != ["REMOVE api e resync", "UPDATE api c resync",
                      "synced False"]:
        raise AssertionError(rec.log)
    rec.check(c)
    c.close()


@test("python: the snapshot modes: a live SET of the late source replaces "
      "the pods it carries, keeps the held ones it does not, and is handed "
      "on with the whole cache; sources_ready removes those")
def test_python_snapshot_modes_live_set_late(t):
    for mode in ("snapshot", "snapshot-and-updates"):
        s, c, rec = start_three_sources(t, mode)
        merged = [spod("a", "alpha"), spod("b", "beta"),
                  spod("h", "eta", "http")]
        s.send(dict(hello(900), mode=mode), pods(901, "SET", "file", *merged),
               pods(902, "SET", "http", *merged), synced(903, False))
        drain(c)
        if rec.take() != ["synced False"] or len(c) != 7:
            raise AssertionError(rec.log)
        s.send(pods(904, "SET", "api", spod("a", "alpha"), spod("b", "beta"),
                    spod("c", "gamma", "api", 2), spod("d", "delta", "api"),
                    spod("h", "eta", "http"), spod("g", "gimel", "api")))
        drain(c)
        if rec.take() != ["SET api a,b,d,e,h,c,g,x"] or len(c) != 8:
            raise AssertionError(rec.log)
        rec.check(c)
        s.send(ready(905, "api", "file", "http"))
        drain(c)
        if rec.take() != ["REMOVE api e,x resync"] or len(c) != 6:
            raise AssertionError(rec.log)
        rec.check(c)
        c.close()
        s.lis.close()
        os.unlink(s.path)


@test("python: resume_after= a saved point: after the replay has_synced is "
      "False (the cache holds only the replayed pods); a full state is "
      "handed on whole as one SET and every plugin REGISTERED; then "
      "has_synced is True and later full states are compared")
def test_python_resume_after_saved_point_after(t):
    s = Script(t)
    c = podmux.Client(s.path, resume_after=77)
    rec = Rec(c)
    if c.has_synced:
        raise AssertionError("has_synced before anything")
    s.accept(c)
    if s.first != {"resume_after": 77}:
        raise AssertionError("first line %r" % s.first)
    s.send(hello(200), pods(80, "UPDATE", "file", spod("a", "alpha", gen=2)),
           synced(201, True))
    drain(c)
    if rec.take() != ["UPDATE file a", "synced True"] or c.has_synced or \
            len(c) != 1 or c.resume_point != 201:
        raise AssertionError("after the replay: %r, has_synced %s, %d pods"
                             % (rec.log, c.has_synced, len(c)))
    reconnect(s, c, rec, 202)
    s.send(hello(9000), pods(9001, "ADD", "file", spod("a", "alpha", gen=2),
                             spod("b", "beta")),
           {"type": "plugin", "seq": 9002, "op": "REGISTERED",
            "plugin": {"socket": "/p/a.sock", "type": "CSIPlugin",
                       "name": "a"}},
           synced(9003, False))
    drain(c)
    log = rec.take()
    if log != ["SET * a,b resync", "plugin REGISTERED /p/a.sock True",
               "synced False"] or not c.has_synced:
        raise AssertionError("the full state: %r, has_synced %s" % (
            log, c.has_synced))
    rec.check(c)
    s.send({"type": "error", "seq": 9004, "reason": "SlowConsumer",
            "message": "slow"})
    drain(c)
    wait_due(c)
    s.accept(c)
    rec.take()
    s.send(hello(9100), pods(9101, "ADD", "file", spod("a", "alpha", gen=2)),
           {"type": "plugin", "seq": 9102, "op": "REGISTERED",
            "plugin": {"socket": "/p/a.sock", "type": "CSIPlugin",
                       "name": "a"}},
           synced(9103, False))
    drain(c)
    log = rec.take()
    if log != ["REMOVE file b resync", "synced False"] or not c.has_synced:
        raise AssertionError("a later full state: %r" % log)
    rec.check(c)
    c.close()


@test("python: events() leaves the on_* handlers set on the client: each "
      "is still called, and stays set afterwards")
def test_python_events_leaves_handlers_set_client(t):
    s = Script(t)
    c = podmux.Client(s.path)
    seen = []

    def on_pods(u):
        seen.append(("pods", u.op))

    def on_synced(r):
        seen.append(("synced", r))
    c.on_pods, c.on_synced = on_pods, on_synced
    s.accept(c)
    s.send(hello(5), pods(6, "ADD", "file", spod("a", "alpha")),
           synced(7, False), pods(8, "UPDATE", "file", spod("a", "alpha", 2)))
    events = []
    for ev in c.events(timeout=T_WAIT):
        # Each kind carries only its own member.
        if ev.kind == "pods":
            events.append((ev.kind, ev.update.op))
            if hasattr(ev, "resumed") or not isinstance(ev, podmux.EventPods):
                raise AssertionError("pods event %r" % (ev,))
        else:
            events.append((ev.kind, ev.resumed))
            if hasattr(ev, "update") or \
                    not isinstance(ev, podmux.EventSynced):
                raise AssertionError("synced event %r" % (ev,))
        if ev.kind == "pods" and ev.update.op == "UPDATE":
            break
    want = [("pods", "ADD"), ("synced", False), ("pods", "UPDATE")]
    if events != want or seen != want:
        raise AssertionError("events %r, handlers %r, want %r" % (
            events, seen, want))
    if c.on_pods is not on_pods or c.on_synced is not on_synced:
        raise AssertionError("events() replaced the handlers")
    # A second iterator after the first: the handlers go on.
    s.send(pods(9, "REMOVE", "file", spod("a", "alpha", 2)))
    for ev in c.events(timeout=T_WAIT):
        if ev.kind == "pods":
            break
    if seen[-1] != ("pods", "REMOVE"):
        raise AssertionError("handlers after a second events(): %r" % seen)
    c.close()


@test("python: the records are frozen dataclasses and each event kind its "
      "own class; ops, plugin ops and error kinds are enums equal to and "
      "printed as their strings; `with Client() as c` closes the client")
def test_python_records_frozen_dataclasses_each_event(t):
    import dataclasses
    s = Script(t)
    with podmux.Client(s.path) as c:
        got = []
        c.on_pods = c.on_plugin = c.on_error = got.append
        s.accept(c)
        s.send(hello(5), synced(6, False),
               pods(7, "ADD", "file", spod("a", "alpha")),
               {"type": "plugin", "seq": 8, "op": "REGISTERED",
                "plugin": {"socket": "/p/a.sock", "type": "CSIPlugin",
                           "name": "a"}},
               {"type": "plugin", "seq": 9, "op": "RETIRED",
                "plugin": {"socket": "/p/a.sock"}},
               {"type": "error", "seq": 10, "reason": "SlowConsumer",
                "message": "slow"})
        drain(c)
        u, reg, new, err = got
        if not (type(u) is podmux.Update and u.op is podmux.Op.ADD and
                u.op == "ADD" and "%s %s" % (u.op, u.pods[0].source) ==
                "ADD file" and "{}".format(u.op) == "ADD" and
                isinstance(u.pods, tuple) and
                type(u.pods[0]) is podmux.Pod):
            raise AssertionError("update %r" % (u,))
        if not (reg.op is podmux.PluginOp.REGISTERED and
                reg.op == "REGISTERED" and type(new.op) is str and
                new.op == "RETIRED"):
            raise AssertionError("plugin ops %r %r" % (reg, new))
        if not (err.kind is podmux.ErrorKind.SERVER and
                err.kind is podmux.SERVER and err.kind == "server" and
                "%s" % err.kind == "server" and
                {"server": 1}.get(err.kind) == 1):
            raise AssertionError("error kind %r" % (err.kind,))
        for rec, field in ((u, "op"), (u.pods[0], "source"), (reg, "op")):
            if not dataclasses.is_dataclass(rec):
                raise AssertionError("%r is not a dataclass" % (rec,))
            try:
                setattr(rec, field, "x")
                raise AssertionError("%r is not frozen" % (rec,))
            except dataclasses.FrozenInstanceError:
                pass
        if [f.name for f in dataclasses.fields(podmux.EventPods)] != \
                ["update"] or podmux.EventPods.kind != "pods" or \
                podmux.EventReconnect(None).kind != "reconnect":
            raise AssertionError("event classes")
        wait_due(c)
        s.accept(c)
        if c.fileno() is None:
            raise AssertionError("not connected")
    # Out of the block: closed, and stopped for good.
    s.conn.settimeout(T_WAIT)
    if s.conn.recv(1) != b"" or c.fileno() is not None or c.process():
        raise AssertionError("the with block did not close the client")
    c.close()   # again: nothing
    s.close()


class Chunk(bytes):
    """What a fake socket's recv() returns: counts the bytes copied when
    the client joins it to what it already holds with + (a join that
    copies the whole buffer on every read is quadratic in a long line)."""
    copied = [0]

    def __radd__(self, other):
        Chunk.copied[0] += len(other) + len(self)
        return bytes(other) + bytes(self)

    def __add__(self, other):
        Chunk.copied[0] += len(self) + len(other)
        return bytes(self) + bytes(other)


class ChunkedSock:
    """Serves data in chunks of the given sizes, then would block."""

    def __init__(self, data, sizes):
        self.data, self.sizes, self.off, self.i = data, sizes, 0, 0

    def recv(self, n):
        if self.off >= len(self.data):
            raise BlockingIOError()
        k = min(n, self.sizes[self.i % len(self.sizes)])
        self.i += 1
        piece = Chunk(self.data[self.off:self.off + k])
        self.off += k
        return piece

    def recv_into(self, buf):
        piece = self.recv(len(buf))
        buf[:len(piece)] = piece
        return len(piece)

    def fileno(self):
        return -1

    def close(self):
        pass


@test("python: the read path is linear: a 4 MiB SET line arriving in "
      "small pieces is never copied whole per piece, and lines split "
      "across pieces (or many in one) come out whole")
def test_python_read_path_linear_4_mib(t):
    s = Script(t)
    c = podmux.Client(s.path)
    rec = Rec(c)
    s.accept(c)
    real = c._sock
    big = [spod("u%05d" % i, "n%05d" % i) for i in range(12000)]
    for p in big:
        p["spec"]["pad"] = "x" * 300
    data = b"".join((json.dumps(m, separators=(",", ":")) + "\n").encode()
                    for m in (hello(5), pods(6, "SET", "file", *big),
                              synced(7, False), pods(8, "ADD", "file",
                                                     spod("z", "zz"))))
    if len(data) < 4 << 20:
        raise AssertionError("the test's line is too short: %d" % len(data))
    c._sock = ChunkedSock(data, [4096, 1, 4095, 7000, 3])
    Chunk.copied[0] = 0
    for _ in range(200):
        c.process()
        if c._sock.off >= len(data):
            break
    if Chunk.copied[0] > 2 * len(data):
        raise AssertionError("%d bytes copied joining %d bytes read" % (
            Chunk.copied[0], len(data)))
    if rec.take() != ["ADD file " + ",".join(p["metadata"]["uid"]
                                             for p in big), "synced False",
                      "ADD file z"] or len(c) != len(big) + 1:
        raise AssertionError("the stream did not come out whole: %d pods" %
                             len(c))
    c._sock = real
    c.close()


def traced(fn, *args):
    """The lines and calls of the podmux module run by fn(*args)."""
    n = [0]
    mod = podmux.__file__

    def tr(frame, event, arg):
        if frame.f_code.co_filename == mod:
            n[0] += 1
        return tr
    sys.settrace(tr)
    try:
        fn(*args)
    finally:
        sys.settrace(None)
    return n[0]


@test("python: pod_by_uid and pod_by_name are index look-ups, and pods() "
      "does not sort: their work does not grow with the pods held")
def test_python_pod_uid_pod_name_index(t):
    work = {}
    for n in (10, 3000):
        s = Script(t)
        c = podmux.Client(s.path)
        s.accept(c)
        th = threading.Thread(target=s.send, args=(
            hello(5), pods(6, "ADD", "file", *[
                spod("u%05d" % i, "n%05d" % i) for i in range(n)]),
            pods(7, "ADD", "api", spod("u00003", "a-other", "api")),
            synced(8, False)))
        th.start()
        harness.wait_for(lambda: c.process() and c.has_synced, T_WAIT,
                         "the state")
        th.join()
        if len(c) != n + 1:
            raise AssertionError("%d pods held" % len(c))
        if c.pod_by_uid("u00003").source != "api" or \
                c.pod_by_name("default", "n00004").uid != "u00004" or \
                c.pod_by_uid("nope") or c.pod_by_name("default", "nope"):
            raise AssertionError("look-ups")
        order = c.pods()
        if [p.key() for p in order] != sorted(p.key() for p in order):
            raise AssertionError("pods() is not in the daemon's order")
        work[n] = (traced(c.pod_by_uid, "u00003"),
                   traced(c.pod_by_name, "default", "n00004"),
                   traced(c.pods))
        c.close()
        s.lis.close()
        os.unlink(s.path)
    if work[10] != work[3000]:
        raise AssertionError("work with 10 pods %r, with 3000 %r" % (
            work[10], work[3000]))


# ---- a daemon restart is not a change ---------------------------------------

SEEN = "kubernetes.io/config.seen"


class ChaosClient(harness.Driven):
    """tests/client/chaos_client (libpodmux-client) driven on its standard
    input; stopped by its PID when the test ends.  argv and env: another
    program answering the same commands (the Go consumer)."""

    def __init__(self, t, sock, args=(), argv=None, env=None):
        super().__init__(t, argv or [os.path.join(
            BUILDDIR, "tests", "client", "chaos_client"), sock] + list(args),
            env, "chaos_client")

    def seen(self):
        """{uid: config.seen} of its cache, once synced."""
        d = self.ask("dump")
        if not d["model_ok"]:
            raise AssertionError("chaos_client: %s" % d["model_diff"])
        if not d["synced"]:
            return {}
        return {x["uid"]: harness.pod_ann(x["pod"], SEEN) for x in d["pods"]}


def py_seen(c):
    c.process()
    if not c.has_synced:
        return {}
    return {p.uid: harness.pod_ann(p.obj(), SEEN) for p in c.pods()}


def converged(what, get, want):
    """Waits until get() == want (a dict {uid: config.seen})."""
    harness.wait_for(lambda: get() == want, T_LONG, what, interval=0.2)


class Restarts:
    """A daemon and two consumers of it, one on libpodmux-client
    (tests/client/chaos_client) and one on the Python module (in this
    process), through a link to its socket made only once the daemon holds
    the state a test waits for: a consumer that came between the daemon's
    start and its sources' first delivery would see a state without them
    (doc/protocol.md, "Full state")."""

    def __init__(self, t, d, state_ok):
        self.t, self.d, self.state_ok = t, d, state_ok
        self.link = t.path("consumers.sock")
        self.seen = self._serve()
        self.cc = ChaosClient(t, self.link)
        self.pc = podmux.Client(self.link)
        self.rec = Rec(self.pc)
        self.converge()
        if self.cc.ask("resyncs") != [] or \
                any("resync" in x for x in self.rec.take()):
            raise AssertionError("resync records before any restart")

    def _serve(self):
        probe = self.d.connect()
        st = probe.wait_state(self.state_ok, "the state wanted", T_LONG)
        probe.close()
        os.symlink(self.d.sock, self.link)
        return {u: harness.pod_ann(p, SEEN) for u, p in st.pods.items()}

    def converge(self):
        converged("the C consumer's state", self.cc.seen, self.seen)
        converged("the Python consumer's state", lambda: py_seen(self.pc),
                  self.seen)

    def stop(self, sig):
        os.unlink(self.link)
        self.d.stop(sig)

    def start(self):
        """Starts the daemon again; returns what each consumer was handed
        as resync records: (["OP source ns/name"], ["OP source uid,..."])."""
        old = self.seen
        self.d.start()
        self.seen = self._serve()
        if any(self.seen[u] == old[u] for u in old if u in self.seen):
            raise AssertionError("the new run kept a config.seen: the test "
                                 "shows nothing")
        self.converge()
        self.rec.check(self.pc)
        return (self.cc.ask("resyncs"),
                [x[:-len(" resync")] for x in self.rec.take()
                 if x.endswith(" resync")])


@test("a daemon restart is not a change: 500 file pods, 50 edited while "
      "the daemon was down (stopped with SIGTERM or SIGKILL): a consumer "
      "on libpodmux-client and one on the Python module get exactly those "
      "50, as resync UPDATEs, and their caches the new run's config.seen",
      params=["%s %s" % (m, sig) for m in MODES
              for sig in ("SIGTERM", "SIGKILL")])
def test_daemon_restart_change_500_file_pods(t):
    mode, sig = t.param.split()
    m = t.mkdir("manifests")
    names = ["p%03d" % i for i in range(500)]
    changed = names[::10]
    edited = {pn(x) for x in changed}

    def uid(name):
        return "uid-" + name

    def state_ok(s):
        return len(s.pods) == len(names) and all(
            harness.pod_image(p) == ("nginx:2" if d.starts > 1 and
                                     harness.pod_name(p) in edited
                                     else "nginx:1.25")
            for p in s.pods.values())

    for x in names:
        write_file(os.path.join(m, x + ".yaml"), pod_yaml(x, uid=uid(x)))
    d = t.daemon(m, mode=mode)
    r = Restarts(t, d, state_ok)
    r.stop(getattr(signal, sig))
    for x in changed:
        write_file(os.path.join(m, x + ".yaml"),
                   pod_yaml(x, uid=uid(x), image="nginx:2"))
    c_recs, py_recs = r.start()
    want = ["UPDATE file default/%s" % pn(x) for x in changed]
    if c_recs != want:
        raise AssertionError("libpodmux-client: %d resync pods %r, want the "
                             "%d UPDATEs" % (len(c_recs), c_recs[:8],
                                             len(want)))
    want = ["UPDATE file %s" % ",".join(uid(x) for x in changed)]
    if py_recs != want:
        raise AssertionError("python: resync records %r, want %r" % (
            [x[:120] for x in py_recs], [x[:120] for x in want]))
    r.pc.close()


@test("a daemon restart is not a change for API pods either: a pod "
      "relabelled during the last run (which kept the resourceVersion it "
      "first stored) is not handed on again; one relabelled while the "
      "daemon was down is, as a resync UPDATE", params=MODES)
def test_daemon_restart_change_api_pods_either(t):
    from fakeapi import FakeAPI
    import apitls
    srv = FakeAPI(t)
    try:
        kc = apitls.simple_kubeconfig(t.path("kubeconfig"), srv.url)
        for x in ("web", "db", "cache"):
            srv.create(x)
        d = t.daemon(None, freq=None, extra=["--kubeconfig", kc])
        r = Restarts(t, d, lambda s: len(s.pods) == 3 and (
            d.starts == 1 or harness.pod_labels(s.one("db")) == {"x": "y"}))
        srv.label("web", app="v2")
        for what, labels in (
                ("C", lambda: [harness.pod_labels(x["pod"]) for x in
                               r.cc.ask("dump")["pods"]
                               if harness.pod_name(x["pod"]) == "web"]),
                ("Python", lambda: r.pc.process() and [harness.pod_labels(
                    r.pc.pod_by_name("default", "web").obj())])):
            harness.wait_for(lambda: labels() == [{"app": "v2"}], T_WAIT,
                             "web's new label on the %s consumer" % what)
        def web_rv():
            return r.pc.pod_by_name("default", "web").obj()["metadata"][
                "resourceVersion"]
        kept = web_rv()
        r.stop(signal.SIGTERM)
        srv.label("db", x="y")
        c_recs, py_recs = r.start()
        if web_rv() == kept:
            raise AssertionError("web's resourceVersion is the same in both "
                                 "runs: the test shows nothing")
        if c_recs != ["UPDATE api default/db"]:
            raise AssertionError("libpodmux-client: resync pods %r" % c_recs)
        db = r.pc.pod_by_name("default", "db").uid
        if py_recs != ["UPDATE api " + db]:
            raise AssertionError("python: resync records %r" % py_recs)
        r.pc.close()
    finally:
        srv.close()



# ---- a restarted daemon's late sources ----------------------------------------

def short(name):
    """h1 for the pod h1-node1 (C) or the uid uid-h1 (Python)."""
    return name[len("uid-"):] if name.startswith("uid-") else \
        name[:-len("-" + harness.NODE)] if name.endswith("-" + harness.NODE) \
        else name


def changes(log):
    """[(op, source, short name, resync)] of every pod in the pods records
    of a log ("OP source a,b[ resync]"), SETs left out."""
    out = []
    for x in log:
        w = x.split(" ")
        if w[0] in podmux.OPS and w[0] != "SET" and len(w) > 2 and w[2]:
            out += [(w[0], w[1], short(n), w[-1] == "resync")
                    for n in w[2].split(",")]
    return out


@test("a daemon restart while the manifest URL is down: consumers on "
      "libpodmux-client and on the Python module reconnect during the "
      "window and keep the HTTP pods (no REMOVE, no ADD again) until the URL "
      "answers; then exactly what changed while the daemon was away "
      "(doc/protocol.md, \"A restarted daemon's late sources\")",
      params=MODES)
def test_daemon_restart_while_manifest_url_down(t):
    from manifest_server import ManifestServer
    srv = ManifestServer()
    try:
        late_http(t, t.param, srv)
    finally:
        srv.stop()


def late_http(t, mode, srv):
    m = t.mkdir("manifests")

    def serve(*pods):
        srv.set(body=json.dumps({"apiVersion": "v1", "kind": "PodList",
                                 "metadata": {}, "items": [
                                     harness.pod_obj(n, uid="uid-" + n,
                                                     image=i)
                                     for n, i in pods]}))

    for x in ("f1", "f2", "f3"):
        write_file(os.path.join(m, x + ".yaml"), pod_yaml(x, uid="uid-" + x))
    serve(("h1", "nginx:1.25"), ("h2", "nginx:1.25"), ("h3", "nginx:1.25"))
    d = t.daemon(m, mode=mode, extra=["--manifest-url", srv.url(),
                                      "--http-check-frequency", "1s"])
    cc = ChaosClient(t, d.sock)
    pc = podmux.Client(d.sock)
    rec = Rec(pc)
    pc.on_sources_ready = lambda s: rec.log.append("ready " + ",".join(s))
    logs = {"C": [], "Python": []}

    def pump():
        pc.process()
        logs["C"] += cc.ask("log")
        logs["Python"] += rec.take()

    def caches():
        """{consumer: sorted short names} of the pods each holds."""
        return {"C": sorted(short(harness.pod_name(x["pod"]))
                            for x in cc.ask("dump")["pods"]),
                "Python": sorted(short(p.uid) for p in pc.pods())}

    def until(what, pred):
        harness.wait_for(lambda: pump() or pred(), T_LONG, what,
                         interval=0.05)

    until("both consumers hold the six pods, sources ready", lambda: all(
        "ready file,http" in x for x in logs.values()) and all(
        len(v) == 6 for v in caches().values()))
    logs["C"], logs["Python"] = [], []
    # The URL goes down, the daemon restarts; meanwhile f2 changed, f4
    # came, h2 changed, h3 went, h4 came.
    srv.stop()
    d.stop()
    write_file(os.path.join(m, "f2.yaml"),
               pod_yaml("f2", uid="uid-f2", image="nginx:2"))
    write_file(os.path.join(m, "f4.yaml"), pod_yaml("f4", uid="uid-f4"))
    serve(("h1", "nginx:1.25"), ("h2", "nginx:2"), ("h4", "nginx:1.25"))
    d.start()
    window = ["f1", "f2", "f3", "f4", "h1", "h2", "h3"]
    until("both consumers synced with the new run and hold its file pods",
          lambda: all(any(x.startswith("synced") for x in v)
                      for v in logs.values()) and all(
              v == window for v in caches().values()))
    probe = d.connect()
    st = probe.wait_state(lambda s: len(s.pods) == 4, "the file pods")
    if any(harness.pod_name(p).startswith("h") for p in st.pods.values()):
        raise AssertionError("the daemon has HTTP pods with the URL down: "
                             "the test shows nothing")
    probe.close()
    for who, log in logs.items():
        bad = [x for x in changes(log) if x[2].startswith("h")]
        if bad:
            raise AssertionError("%s: HTTP pods told in the window: %r" % (
                who, bad))
    srv.start()
    # sources_ready (the same list as the last run's: not told again)
    # removes h3.
    want_final = ["f1", "f2", "f3", "f4", "h1", "h2", "h4"]
    until("the URL's pods on both consumers, h3 gone",
          lambda: all(v == want_final for v in caches().values()))
    for who, log in logs.items():
        ch = changes(log)
        told = sorted((op, n) for op, _, n, _ in ch)
        if mode == "incremental":
            want = [("ADD", "f4"), ("ADD", "h4"), ("REMOVE", "h3"),
                    ("UPDATE", "f2"), ("UPDATE", "h2")]
        else:
            # The SET of the late source carries its changes.
            want = [x for x in [("ADD", "f4"), ("REMOVE", "h3"),
                                ("UPDATE", "f2")] if x in told]
            if ("REMOVE", "h3") not in want:
                want.append(("REMOVE", "h3"))
            want.sort()
        if told != want:
            raise AssertionError("%s in %s mode was told %r, want %r "
                                 "(log %r)" % (who, mode, told, want, log))
        for op, src, n, resync in ch:
            if (n in ("h2", "h3", "f2") and not resync) or \
                    (n == "h4" and resync):
                raise AssertionError("%s: %s %s with resync %s (log %r)" % (
                    who, op, n, resync, log))
    probe = d.connect()
    probe.wait_state(lambda s: len(s.pods) == 7, "the whole state")
    want_seen = {u: harness.pod_ann(p, SEEN) for u, p in probe.state.pods.items()}
    probe.close()
    converged("the C consumer's state", cc.seen, want_seen)
    converged("the Python consumer's state", lambda: py_seen(pc), want_seen)
    rec.check(pc)
    pc.close()


class HRec:
    """An informer-style handler writing the records of
    tests/fixtures/informer-scenarios.json into a shared log."""

    def __init__(self, name, log, c):
        self.name, self.log, self.c = name, log, c

    @staticmethod
    def gen(p):
        return p.obj()["spec"]["gen"]

    def on_add(self, p, initial):
        if self.c.pod_by_uid(p.uid) is None:
            raise AssertionError("on_add before the cache holds %s" % p.uid)
        self.log.append("%s add%s %s/%s %d" % (
            self.name, "*" if initial else "", p.source, p.uid, self.gen(p)))

    def in_source_index(self, p):
        return any(q.uid == p.uid
                   for q in self.c.by_index(podmux.INDEX_SOURCE, p.source))

    def on_update(self, old, p):
        if not self.in_source_index(p):
            raise AssertionError("on_update: %r not in the index" % p)
        self.log.append("%s update %s/%s %d>%d" % (
            self.name, p.source, p.uid, self.gen(old), self.gen(p)))

    def on_delete(self, old):
        if self.in_source_index(old):
            raise AssertionError("on_delete: %r still in the index" % old)
        self.log.append("%s delete %s/%s %d" % (
            self.name, old.source, old.uid, self.gen(old)))


def gen_keys(p):
    """The scenario table's custom index gen."""
    n = HRec.gen(p)
    return (["odd"] if n % 2 else []) + (["gen=%d" % n] if n < 4 else [])


def seen_keys(p):
    """The scenario table's custom index seen."""
    v = harness.pod_ann(p.obj(), SEEN)
    return [v] if v else []


def run_scenario(t, sc):
    s = Script(t)
    c = podmux.Client(s.path)
    c.add_index("gen", gen_keys)
    c.add_index("seen", seen_keys)
    log = []
    c.on_source = lambda st: log.append("source %s %s %d%s" % (
        st.source, st.state, st.seq, " resync" if st.resync else ""))
    for step in sc["steps"]:
        where = "%s: step %r" % (sc["name"], step)
        if "add_handler" in step:
            c.add_handler(HRec(step["add_handler"], log, c))
        if "accept" in step:
            wait_due(c)
            s.accept(c)
            if s.first != json.loads(step["accept"]):
                raise AssertionError("%s: first line %r" % (where, s.first))
        if "send" in step:
            s.send(*[x + "\n" for x in step["send"]])
            if "partial" in step:
                s.send(step["partial"])
                s.close()
            drain(c)
        if step.get("close"):
            s.close()
            drain(c)
        if "expect" in step:
            if log != step["expect"]:
                raise AssertionError("%s: records %r" % (where, log))
            del log[:]
        if "cache" in step:
            have = ["%s/%s %d" % (p.source, p.uid, HRec.gen(p))
                    for p in c.pods()]
            if have != step["cache"] or c.has_synced != step["has_synced"]:
                raise AssertionError("%s: cache %r, has_synced %s" % (
                    where, have, c.has_synced))
        if "source" in step:
            name, state, tm, rv = step["source"]
            st, not_live = c.source_state(name)
            if [st.state, st.checkpoint_time, st.checkpoint_resource_version,
                    not_live] != [state, tm, rv, state != "live"]:
                raise AssertionError("%s: source %r %s" % (where, st,
                                                          not_live))
        for name, key, want in step.get("index", []):
            have = ["%s/%s" % (p.source, p.uid) for p in c.by_index(name, key)]
            if have != want:
                raise AssertionError("%s: index %s %s: %r" % (
                    where, name, key, have))
    if log:
        raise AssertionError("%s: records not expected %r" % (sc["name"], log))
    c.close()
    s.lis.close()
    os.unlink(s.path)


@test("python: informer-style handlers hand on the records of "
      "tests/fixtures/informer-scenarios.json (the table the C and Go "
      "clients run too)")
def test_python_informer_style_handlers_hand_records(t):
    for sc in fixture_table("informer-scenarios.json", "scenarios"):
        run_scenario(t, sc)
    c = podmux.Client(t.path("none.sock"))
    for bad in (lambda: c.add_index(podmux.INDEX_NAMESPACE, gen_keys),
                lambda: c.by_index("nope", "x")):
        try:
            bad()
            raise AssertionError("no error")
        except (ValueError, KeyError) as e:
            if "index" not in str(e):
                raise AssertionError("error %r" % e)
    if c.by_index(podmux.INDEX_SOURCE, "file") != []:
        raise AssertionError("empty index")


@test("python: each reason of server_errors in "
      "tests/fixtures/informer-scenarios.json gives its error kind, errno "
      "and fatality (the table the C and Go clients run too)")
def test_python_server_error_reasons(t):
    for k in fixture_table("informer-scenarios.json", "server_errors"):
        s = Script(t)
        c = podmux.Client(s.path)
        got = []
        c.on_error = got.append
        s.accept(c)
        # A refused connection gets the error without a hello.
        s.send({"type": "error", "seq": 4, "reason": k["reason"],
                "message": "m"})
        try:
            drain(c)
            stopped = None
        except podmux.Error as e:   # a fatal error stops the client
            stopped = e
        if (stopped is not None) != k["fatal"] or \
                (stopped is not None and stopped is not got[-1]):
            raise AssertionError("%s: process() raised %r" % (k["reason"],
                                                              stopped))
        want = (k["kind"], getattr(errno, k["errno"]), k["reason"], k["fatal"])
        if [(e.kind, e.err, e.reason, e.fatal) for e in got] != [want]:
            raise AssertionError("%s: errors %r, want %r" % (
                k["reason"], [(e.kind, e.err, e.reason, e.fatal)
                              for e in got], want))
        c.close()
        s.close()
        s.lis.close()
        os.unlink(s.path)


# ---- the three clients against the real daemon --------------------------------

def go_consumer():
    """go/'s test binary, whose TestScenarioConsumer is the Go consumer
    (go/consumer_test.go), built offline with the suite's Go caches as
    tests/go-test.sh does; None when go is not installed."""
    go = os.environ.get("GO") or shutil.which("go")
    if not go:
        return None
    exe = os.path.join(BUILDDIR, "go-consumer.test")
    env = dict(os.environ, GOPROXY="off", GOFLAGS="-mod=mod",
               GOTOOLCHAIN="local", GOENV="off",
               GOCACHE=os.path.join(BUILDDIR, "go-cache"),
               GOPATH=os.path.join(BUILDDIR, "go-path"))
    r = subprocess.run([go, "test", "-c", "-o", exe, "."],
                       cwd=os.path.join(SRCDIR, "go"), env=env,
                       capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise AssertionError("go test -c: %s" % r.stderr[-2000:])
    return exe


def label_gen(obj):
    """The label gen of a pod (its JSON object) as a number, -1 if none."""
    try:
        return int(obj["metadata"]["labels"]["gen"])
    except (KeyError, TypeError, ValueError):
        return -1


def label_gen_keys(p):
    """The index gen of tests/fixtures/informer-scenarios.json, from the
    label gen (as chaos_client --informer and go/consumer_test.go)."""
    n = label_gen(p.obj())
    return (["odd"] if n % 2 == 1 else []) + \
        (["gen=%d" % n] if 0 <= n < 4 else [])


class LabelHRec:
    """An informer-style handler writing the records of the scenario
    table, with the label gen."""

    def __init__(self, name, log):
        self.name, self.log = name, log

    def on_add(self, p, initial):
        self.log.append("%s add%s %s/%s %d" % (
            self.name, "*" if initial else "", p.source, p.uid,
            label_gen(p.obj())))

    def on_update(self, old, p):
        self.log.append("%s update %s/%s %d>%d" % (
            self.name, p.source, p.uid, label_gen(old.obj()),
            label_gen(p.obj())))

    def on_delete(self, old):
        self.log.append("%s delete %s/%s %d" % (
            self.name, old.source, old.uid, label_gen(old.obj())))


class PyConsumer:
    """The Python module in this process, answering as the others do."""

    def __init__(self, sock):
        self.c = podmux.Client(sock)
        self.c.add_index("gen", label_gen_keys)
        self.log, self.synced = [], []
        self.c.on_synced = self.synced.append
        self.c.add_handler(LabelHRec("h1", self.log))

    def cache(self):
        drain(self.c)
        return [] if not self.c.has_synced else [
            "%s/%s %d" % (p.source, p.uid, label_gen(p.obj()))
            for p in self.c.pods()]

    def hlog(self):
        drain(self.c)
        x, self.log[:] = list(self.log), []
        return x

    def handler(self, name):
        self.c.add_handler(LabelHRec(name, self.log))

    def index(self, name, key):
        return ["%s/%s" % (p.source, p.uid)
                for p in self.c.by_index(name, key)]


class ProcConsumer:
    """chaos_client --informer or the Go consumer, answering as PyConsumer."""

    def __init__(self, cl):
        self.cl = cl

    def cache(self):
        d = self.cl.ask("dump")
        return [] if not d["synced"] else [
            "%s/%s %d" % (x["source"], x["uid"], label_gen(x["pod"]))
            for x in d["pods"]]

    def hlog(self):
        return self.cl.ask("hlog")

    def handler(self, name):
        self.cl.tell("handler " + name)

    def index(self, name, key):
        return self.cl.ask("index %s %s" % (name, key))


class Three:
    """A daemon (--history 1: every resume after a cut fails) and the C,
    Go and Python consumers of it, through a link to its socket made only
    once the daemon holds the state written (as Restarts does).  The
    manifests: name -> (namespace, gen); the UID of name x is uid-x."""

    QUERIES = [("namespace", "default"), ("namespace", "kube-system"),
               ("source", "file"), ("source", "http"), ("gen", "odd"),
               ("gen", "gen=1"), ("gen", "gen=2"), ("gen", "gen=3")]

    def __init__(self, t, mode, go_exe):
        self.t, self.pods = t, {}
        self.m = t.mkdir("manifests")
        self.link = t.path("consumers.sock")
        for x, ns, gen in (("a", "default", 1), ("b", "kube-system", 1),
                           ("c", "default", 2)):
            self.write(x, ns, gen)
        self.d = t.daemon(self.m, mode=mode, extra=[
            "--history", "1", "--max-consumer-backlog", "262144"])
        self.serve()
        self.cs = {"C": ProcConsumer(ChaosClient(t, self.link, ["--informer"])),
                   "Python": PyConsumer(self.link)}
        if go_exe:
            self.cs["Go"] = ProcConsumer(ChaosClient(
                t, self.link, argv=[go_exe, "-test.run=^TestScenarioConsumer$",
                                    "-test.count=1"],
                env=dict(os.environ, PODMUX_CONSUMER_SOCKET=self.link)))

    def write(self, x, ns, gen, big=0):
        self.pods[x] = (ns, gen)
        write_file(os.path.join(self.m, x + ".yaml"), pod_yaml(
            x, uid="uid-" + x, namespace=ns, labels={"gen": str(gen)},
            big=big))

    def remove(self, x):
        del self.pods[x]
        os.unlink(os.path.join(self.m, x + ".yaml"))

    def want(self):
        """The cache: "file/uid gen" in the daemon's order."""
        return ["file/uid-%s %d" % (x, g) for (ns, _, x), g in sorted(
            ((ns, pn(x), x), g) for x, (ns, g) in self.pods.items())]

    def serve(self):
        want = {"uid-" + x: str(g) for x, (_, g) in self.pods.items()}
        probe = self.d.connect()
        probe.wait_state(lambda s: {u: harness.pod_labels(p).get("gen")
                                    for u, p in s.pods.items()} == want,
                         "the manifests written", T_LONG)
        probe.close()
        os.symlink(self.d.sock, self.link)

    def step(self, what, records=None, exact=True):
        """Waits until every consumer's cache is the manifests'; then
        checks that they handed the same records to their handlers (in
        the same order if exact), the records wanted (if given, in any
        order), and that every index gives each key's pods in the cache's
        order."""
        want = self.want()
        for name, c in self.cs.items():
            harness.wait_for(lambda: c.cache() == want, T_LONG,
                             "%s: the %s consumer's cache" % (what, name),
                             interval=0.2)
        logs = {name: c.hlog() for name, c in self.cs.items()}
        first = logs["C"]
        for name, log in logs.items():
            if (log if exact else sorted(log)) != \
                    (first if exact else sorted(first)):
                raise AssertionError("%s: the %s consumer was handed %r, the "
                                     "C one %r" % (what, name, log, first))
        if records is not None and sorted(first) != sorted(records):
            raise AssertionError("%s: records %r, want %r" % (
                what, first, records))
        for key in self.QUERIES:
            pods = [w.split(" ")[0] for w in want if any(
                key == k for k in self.keys(w))]
            for name, c in self.cs.items():
                if c.index(*key) != pods:
                    raise AssertionError("%s: the %s consumer's index %s %s "
                                         "gives %r, want %r" % (
                                             what, name, key[0], key[1],
                                             c.index(*key), pods))

    def keys(self, w):
        uid, gen = w.split(" ")[0][len("file/uid-"):], int(w.split(" ")[1])
        return [("namespace", self.pods[uid][0]), ("source", "file")] + \
            ([("gen", "odd")] if gen % 2 == 1 else []) + \
            ([("gen", "gen=%d" % gen)] if gen < 4 else [])


@test("the C, Go and Python clients against the real daemon hand their "
      "informer-style handlers the same records, keep the same cache and "
      "give the same index results (built-in namespace and source, a "
      "custom one by a label): the first state, live changes, a handler "
      "added late, a restart with changes made while the daemon was down, "
      "a slow-consumer cut whose resume fails (--history 1)", params=MODES)
def test_c_go_python_clients_against_real(t):
    go_exe = go_consumer()
    if go_exe is None:
        t.skip("go is not installed (scripts/deps installs golang-go)")
    r = Three(t, t.param, go_exe)
    r.step("the first state", ["h1 add file/uid-%s" % w[len("file/uid-"):]
                               for w in r.want()])
    r.write("a", "default", 2)
    r.remove("b")
    r.write("d", "default", 3)
    r.step("live changes", ["h1 update file/uid-a 1>2",
                            "h1 delete file/uid-b 1", "h1 add file/uid-d 3"],
           exact=False)
    for c in r.cs.values():
        c.handler("h2")
    r.step("a handler added late", ["h2 add* file/uid-%s" %
                                    w[len("file/uid-"):] for w in r.want()])
    os.unlink(r.link)
    r.d.stop(signal.SIGTERM)
    r.write("c", "default", 3)
    r.write("e", "kube-system", 1)
    r.d.start()
    r.serve()
    r.step("a restart", ["h1 add file/uid-e 1", "h2 add file/uid-e 1",
                         "h1 update file/uid-c 2>3",
                         "h2 update file/uid-c 2>3"])
    # A cut: C and Go stop reading (Python reads only when asked), the
    # daemon drops them once their backlog passes 256 KiB; the history of
    # one message cannot resume them: a full state, told as the difference.
    r.cs["C"].cl.ask("resyncs")  # the restart's, left out
    r.cs["C"].cl.tell("stall 600000")
    r.cs["Go"].cl.tell("stall 1")
    del r.cs["Python"].synced[:]
    for i in range(40):
        r.write("big%02d" % i, "default", 1 + i % 2, big=30000)
    harness.wait_for(lambda: json.loads(t.run_cmd([
        "status", "--socket", r.d.sock, "-o", "json"]).stdout).get(
            "dropped_consumers", 0) >= 3, T_LONG, "the daemon to drop the "
        "three consumers")
    r.cs["C"].cl.tell("stall 0")
    r.cs["Go"].cl.tell("stall 0")
    r.step("a cut and a failed resume",
           ["%s add file/uid-big%02d %d" % (h, i, 1 + i % 2)
            for i in range(40) for h in ("h1", "h2")], exact=False)
    if False not in r.cs["Python"].synced or not r.cs["C"].cl.ask("resyncs"):
        raise AssertionError("a consumer resumed (Python's synced %r)" %
                             r.cs["Python"].synced)
    for name in ("C", "Go"):
        r.cs[name].cl.tell("quit")
    r.cs["Python"].c.close()

if __name__ == "__main__":
    harness.main()
