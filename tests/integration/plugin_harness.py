"""plugin_harness — helpers for the plugin manager's integration tests.

FakePlugin runs scripts/fake-plugin (a real gRPC registration server built
from src/plugins/pluginregistration.proto) as a child process of the test,
stopped by its PID when the test ends.  The plugin_* functions read the
`plugin` messages of the update stream (doc/protocol.md):

  {"type":"plugin","seq":N,"op":"REGISTERED"|"DEREGISTERED"|"FAILED",
   "plugin":{"type","name","endpoint","versions","socket"}, "error": "..."}

Standard library only (the fake plugin itself needs python3-grpcio and
python3-protobuf, run with /usr/bin/python3 or $PODMUX_PLUGIN_PYTHON)."""

import json
import os
import signal
import stat
import subprocess
import time

import harness
from harness import SRCDIR, T_SHORT, T_WAIT, wait_for

FAKE_PLUGIN = os.path.join(SRCDIR, "scripts", "fake-plugin")
PLUGIN_PYTHON = os.environ.get("PODMUX_PLUGIN_PYTHON", "/usr/bin/python3")
OPS = ("REGISTERED", "DEREGISTERED", "FAILED")

_count = [0]


def norm(path):
    return os.path.normpath(os.path.abspath(path))


# ---------------------------------------------------------------------------
# The daemon

def plugin_daemon(t, reg=None, extra=(), **kw):
    """`podmux run` with --plugins-registry-dir reg (default <tmp>/reg,
    created).  Returns the Daemon, with .reg set."""
    if reg is None:
        reg = t.mkdir("reg")
    d = t.daemon(extra=["--plugins-registry-dir", reg] + list(extra), **kw)
    d.reg = reg
    return d


# ---------------------------------------------------------------------------
# Fake plugins

class FakePlugin:
    """One scripts/fake-plugin process (one plugin, or `many` plugins).

    sock: the socket path (one plugin); many/dir/prefix: N plugins
    dir/<prefix>I.sock, I = 1..N, named <prefix>I unless name has "{i}".
    Every plugin gets a status file and a GetInfo count file in the test's
    temp dir.  wait: return once every socket is in place and served."""

    def __init__(self, t, sock=None, type="CSIPlugin", name=None,
                 endpoint=None, versions=("1.0.0",), getinfo_error=None,
                 notify_error=None, notify_delay=None,
                 hang=False, hang_accept=False, rename=True,
                 keep_socket=False, many=0, dir=None, prefix="plugin-",
                 wait=True):
        _count[0] += 1
        self.t = t
        self.n = _count[0]
        self.many = many
        self.type = type
        self.versions = list(versions)
        self.endpoint = endpoint
        base = t.path("fp%d" % self.n)
        if many:
            self.socks = [norm(os.path.join(dir, "%s%d.sock" % (prefix, i)))
                          for i in range(1, many + 1)]
            if name is None:
                self.names = ["%s%d" % (prefix, i)
                              for i in range(1, many + 1)]
            else:
                self.names = [name.replace("{i}", str(i))
                              for i in range(1, many + 1)]
            self.status_paths = ["%s.%d.status" % (base, i)
                                 for i in range(1, many + 1)]
            self.count_paths = ["%s.%d.getinfo" % (base, i)
                                for i in range(1, many + 1)]
        else:
            self.socks = [norm(sock)]
            if name is None:
                name = os.path.basename(sock)
                if name.endswith(".sock"):
                    name = name[:-5]
            self.names = [name]
            self.status_paths = [base + ".status"]
            self.count_paths = [base + ".getinfo"]
        self.sock = self.socks[0]
        self.name = self.names[0]
        argv = [PLUGIN_PYTHON, FAKE_PLUGIN, "--type", type,
                "--versions", ",".join(self.versions)]
        if endpoint is not None:
            argv += ["--endpoint", endpoint]
        if many:
            argv += ["--many", str(many), "--dir", dir, "--prefix", prefix,
                     "--status-file", base + ".{i}.status",
                     "--getinfo-count-file", base + ".{i}.getinfo"]
            if name is not None:
                argv += ["--name", name]
        else:
            argv += ["--socket", self.sock, "--name", self.name,
                     "--status-file", self.status_paths[0],
                     "--getinfo-count-file", self.count_paths[0]]
        if getinfo_error:
            argv += ["--getinfo-error", getinfo_error]
        if notify_error:
            argv += ["--notify-error", notify_error]
        if notify_delay:
            argv += ["--notify-delay", str(notify_delay)]
        if hang:
            argv.append("--hang")
        if hang_accept:
            argv.append("--hang-accept")
        if not rename:
            argv.append("--no-rename")
        if keep_socket:
            argv.append("--keep-socket-on-exit")
        self.argv = argv
        self.out_path = base + ".stdout"
        self.err_path = base + ".stderr"
        with open(self.out_path, "wb") as fo, open(self.err_path, "wb") as fe:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                         stdout=fo, stderr=fe)
        self.pid = self.proc.pid
        t.procs.append(self.proc)
        if wait:
            self.wait_ready()

    def _read(self, path):
        try:
            with open(path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def wait_ready(self, timeout=None):
        want = len(self.socks)

        def ready():
            n = sum(1 for line in self._read(self.out_path).splitlines()
                    if line.startswith("ready "))
            if n >= want:
                return True
            if self.proc.poll() is not None:
                raise AssertionError(
                    "fake-plugin exited (%s) before serving %s; stderr: %s"
                    % (self.proc.returncode, self.socks[:3],
                       self._read(self.err_path)[-1500:]))
            return False
        wait_for(ready, timeout or T_WAIT, "fake-plugin serving %s" %
                 (self.sock if want == 1 else "%d sockets" % want))
        return self

    def stop(self, sig=signal.SIGTERM):
        """Stops the process (SIGTERM: it removes its sockets; SIGKILL: a
        crash that leaves them)."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
        try:
            self.proc.wait(timeout=T_SHORT)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            raise AssertionError("fake-plugin %s ignored signal %d" %
                                 (self.sock, sig))

    def kill(self):
        self.stop(signal.SIGKILL)

    def statuses(self, i=0):
        """NotifyRegistrationStatus calls received by plugin i (0-based):
        [{"registered": bool, "error": str}, ...]."""
        text = self._read(self.status_paths[i])
        return [json.loads(line) for line in text.splitlines() if line]

    def getinfo_count(self, i=0):
        text = self._read(self.count_paths[i]).strip()
        return int(text) if text else 0

    def wait_status(self, pred, what, i=0, timeout=None):
        return wait_for(lambda: pred(self.statuses(i)), timeout or T_WAIT,
                        "%s: status file %s" % (self.socks[i], what))

    def wait_getinfo(self, n, i=0, timeout=None):
        return wait_for(lambda: self.getinfo_count(i) >= n,
                        timeout or T_WAIT,
                        "%s: %d GetInfo call(s) (have %d)" %
                        (self.socks[i], n, self.getinfo_count(i)))

    def log_tail(self):
        return self._read(self.err_path)[-1500:]


def make_socket_file(path):
    """A unix socket nobody listens on (bound, then the fd closed)."""
    import socket as _s
    s = _s.socket(_s.AF_UNIX, _s.SOCK_STREAM)
    s.bind(path)
    s.close()
    return path


def is_socket(path):
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except FileNotFoundError:
        return False


# ---------------------------------------------------------------------------
# Plugin messages on the stream

def pinfo(m):
    p = m.get("plugin")
    return p if isinstance(p, dict) else {}


def psock(m):
    return pinfo(m).get("socket")


def is_plugin(m, op=None, sock=None):
    if m.get("type") != "plugin":
        return False
    if op is not None and m.get("op") != op:
        return False
    return sock is None or psock(m) == norm(sock)


def plugin_msgs(c, op=None, sock=None, since=0):
    return [m for m in c.msgs[since:] if is_plugin(m, op, sock)]


def plugin_ops(c, sock, since=0):
    return [m.get("op") for m in plugin_msgs(c, sock=sock, since=since)]


def summary(c, since=0, limit=12):
    ms = [m for m in c.msgs[since:] if m.get("type") == "plugin"]
    parts = ["%s %s%s" % (m.get("op"), psock(m),
                          (" error=%r" % m.get("error")[:120])
                          if m.get("error") else "") for m in ms[-limit:]]
    if len(ms) > limit:
        parts.insert(0, "(%d earlier)" % (len(ms) - limit))
    return " | ".join(parts) or "no plugin messages"


def wait_plugin(c, op, sock, since=0, timeout=None):
    """The first `op` message for sock at or after c.msgs[since] (already
    received or read now)."""
    for m in c.msgs[since:]:
        if is_plugin(m, op, sock):
            return m
    try:
        return c.expect(lambda m: is_plugin(m, op, sock),
                        "plugin %s of %s" % (op, sock), timeout or T_WAIT)
    except AssertionError as e:
        raise AssertionError("%s\nplugin messages: %s" % (e, summary(c)))


def wait_plugins(c, op, socks, since=0, timeout=None):
    """One `op` message per socket in socks; returns {socket: message}."""
    want = set(norm(s) for s in socks)
    got = {}
    for m in c.msgs[since:]:
        if is_plugin(m, op) and psock(m) in want and psock(m) not in got:
            got[psock(m)] = m
    deadline = time.monotonic() + (timeout or T_WAIT)
    while len(got) < len(want):
        left = deadline - time.monotonic()
        try:
            if left <= 0:
                raise AssertionError("timeout")
            m = c.expect(lambda m: is_plugin(m, op) and psock(m) in want,
                         "plugin %s" % op, left)
        except AssertionError as e:
            missing = sorted(want - set(got))
            raise AssertionError(
                "waiting for %s of %d sockets, %d missing (%s...): %s\n"
                "plugin messages: %s" % (op, len(want), len(missing),
                                         missing[:3], e, summary(c)))
        got.setdefault(psock(m), m)
    return got


def read_for(c, seconds):
    """Reads whatever arrives for `seconds` (a settle window for negative
    checks: nothing must happen)."""
    deadline = time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        try:
            c.recv(left)
        except harness.ConsumerClosed:
            raise
        except AssertionError as e:
            if "no message within" in str(e):
                return
            raise


def check_shape(m):
    """What every plugin message must carry (doc/protocol.md)."""
    if m.get("op") not in OPS:
        raise AssertionError("plugin message with op %r: %s" %
                             (m.get("op"), harness.summarize(m)))
    p = m.get("plugin")
    if not isinstance(p, dict):
        raise AssertionError("plugin message without a plugin object: %s" %
                             harness.summarize(m))
    if not isinstance(p.get("socket"), str) or not p["socket"]:
        raise AssertionError("plugin.socket missing: %s" %
                             harness.summarize(m))
    if m["op"] == "REGISTERED":
        for k in ("type", "name", "endpoint"):
            if not isinstance(p.get(k), str) or not p[k]:
                raise AssertionError("REGISTERED without plugin.%s: %s" %
                                     (k, harness.summarize(m)))
        v = p.get("versions")
        if not isinstance(v, list) or not all(isinstance(x, str)
                                              for x in v):
            raise AssertionError("REGISTERED without a versions list: %s" %
                                 harness.summarize(m))
    if m["op"] == "DEREGISTERED":
        for k in ("type", "name"):
            if not isinstance(p.get(k), str) or not p[k]:
                raise AssertionError("DEREGISTERED without plugin.%s: %s" %
                                     (k, harness.summarize(m)))
    if m["op"] == "FAILED":
        if not isinstance(m.get("error"), str) or not m["error"].strip():
            raise AssertionError("FAILED without a non-empty error: %s" %
                                 harness.summarize(m))


def check_all_shapes(c):
    for m in c.msgs:
        if m.get("type") == "plugin":
            check_shape(m)


def check_failed_once(c, sock):
    """FAILED is sent at most once per (socket, generation, error text):
    with one generation, no error text repeats."""
    seen = {}
    for m in plugin_msgs(c, "FAILED", sock):
        e = m.get("error")
        seen[e] = seen.get(e, 0) + 1
    dup = {e: n for e, n in seen.items() if n > 1}
    if dup:
        raise AssertionError("FAILED repeated for %s (backoff retries must "
                             "not flood): %s" % (sock, dup))


def check_registered(m, p, i=0, endpoint=None):
    """A REGISTERED message describes FakePlugin p's plugin i."""
    check_shape(m)
    got = pinfo(m)
    want = {"type": p.type, "name": p.names[i],
            "endpoint": endpoint if endpoint is not None else (
                p.endpoint or p.socks[i]),
            "versions": p.versions, "socket": p.socks[i]}
    bad = {k: (got.get(k), v) for k, v in want.items() if got.get(k) != v}
    if bad:
        raise AssertionError("REGISTERED of %s: fields (got, want): %s; "
                             "message: %s" % (p.socks[i], bad,
                                              json.dumps(m)[:600]))


def initial_plugins(c):
    """Reads a fresh consumer's initial state up to synced; returns the
    plugin messages in it."""
    return [m for m in c.read_initial() if m.get("type") == "plugin"]
