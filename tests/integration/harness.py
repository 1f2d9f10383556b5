#!/usr/bin/env python3
"""harness — a tiny TAP framework for podmux's integration tests.

Standard library only.  Every test file does

    import harness
    from harness import test, MODES

    @test("what the test checks")
    def _(t):
        d = t.daemon()
        c = d.connect()
        c.wait_until_state([...])

    if __name__ == "__main__":
        harness.main()

and prints TAP (`1..N`, `ok N - name`, `not ok N - name` followed by a
`# ` diagnostic block).  The process exits 0 iff every test is ok (skips
count as ok).

Each test runs in a fresh temporary directory (kept on failure, removed on
success unless PODMUX_KEEP_TMP=1).  Daemons started by a test are stopped by
their PID (SIGTERM, then SIGKILL after 10 s) when the test ends; a daemon
that died on its own, or died from a signal when asked to stop, fails the
test.

Timeouts are failure bounds only, never assertions about speed; they are
generous and scale with PODMUX_TEST_TIMEOUT_SCALE (for valgrind/sanitizer
runs).  Select tests with substrings on the command line or in
PODMUX_TEST_FILTER (comma separated).

/var/lib/kubelet is never touched.  podmux run as root watches (and
creates) /var/lib/kubelet/plugins_registry when no source is configured
and --plugins-registry-dir is not given.  Two checks keep the suite off
the machine's, whatever a test does:
  - every `podmux run` a test starts, through this module (Daemon,
    run_cmd, spawn) or any subprocess.Popen or subprocess.run of the test
    process, must name --plugins-registry-dir: the launch raises otherwise
    (Daemon passes --plugins-registry-dir "" unless told; a test of the
    default says so with t.allow_default_registry());
  - as root, each `podmux run` and each script that starts one
    (scripts/demo, scripts/chaos, scripts/bench) runs in a mount namespace
    of its own where /var/lib is the test's empty <tmp>/varlib, so what it
    would create under /var/lib lands in the test's tree; a test after
    which <tmp>/varlib/kubelet exists fails, and so does one after which
    the machine's /var/lib/kubelet exists when it did not before.
tests/integration/test_registry.py shows that both checks catch what they
must, so neither can stop working silently.

Environment:
  PODMUX_BIN     the binary (default: $PODMUX_SRCDIR/podmux)
  PODMUX_SRCDIR  the source tree (default: two levels above this file)
  PODMUX_RUN_PREFIX  a command prefix for the daemon, e.g. "valgrind -q"
"""

import json
import os
import queue
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
# Normalised: podmux names files by their lexically cleaned path.
SRCDIR = os.path.normpath(os.environ.get("PODMUX_SRCDIR") or os.path.abspath(
    os.path.join(HERE, "..", "..")))
BIN = os.environ.get("PODMUX_BIN") or os.path.join(SRCDIR, "podmux")
FIXTURES = os.path.join(SRCDIR, "tests", "fixtures")
RUN_PREFIX = shlex.split(os.environ.get("PODMUX_RUN_PREFIX", ""))

SCALE = float(os.environ.get("PODMUX_TEST_TIMEOUT_SCALE", "1") or "1")
T_SHORT = 10 * SCALE   # something that should happen at once
T_WAIT = 20 * SCALE    # something bound by a relist period (1 s) or two
T_LONG = 30 * SCALE    # floods, many consumers
T_TEST = 150 * SCALE   # hard bound on one test

MODES = ("incremental", "snapshot", "snapshot-and-updates")
NODE = "node1"
UID_RE = re.compile(r"^[0-9a-f]{32}$")
SEEN_RE = re.compile(
    r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$")

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0

# A suite run by a service manager (a CI job as a systemd unit) must not
# hand its notify socket and watchdog to every daemon it starts: a test
# that wants them gives them to its daemon (Daemon's env=,
# tests/integration/test_notify.py).
for _k in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
    os.environ.pop(_k, None)


# ---------------------------------------------------------------------------
# /var/lib/kubelet stays untouched (see the module's docstring)

_CURRENT = [None]               # the TestContext running, if any
_REAL_POPEN = subprocess.Popen
_BIN_REAL = os.path.realpath(BIN)
REGISTRY_FLAG = "--plugins-registry-dir"
# Scripts that start `podmux run` themselves.
DAEMON_SCRIPTS = {os.path.realpath(os.path.join(SRCDIR, "scripts", n))
                  for n in ("demo", "chaos", "bench")}
# In a namespace of its own, /var/lib becomes the directory given after
# mount ($1); the rest is the command.
_CONFINE = [shutil.which("unshare") or "unshare", "--mount",
            "--propagation", "private", "--", "/bin/sh", "-c",
            '"$0" --bind "$1" /var/lib && shift && exec "$@"',
            shutil.which("mount") or "/bin/mount"]
_NAMESPACE = {}                 # "ok": bool, "why": str, once probed


def _is_path(a, real):
    return isinstance(a, (str, bytes, os.PathLike)) and \
        os.path.realpath(os.fsdecode(a)) == real


def daemon_args(argv):
    """The arguments after `run` when argv runs `podmux run` (possibly
    behind a prefix such as valgrind or setpriv), else None."""
    if isinstance(argv, (str, bytes, os.PathLike)):
        argv = [argv]
    argv = list(argv)
    for i in range(len(argv) - 1):
        if argv[i + 1] == "run" and _is_path(argv[i], _BIN_REAL):
            return [os.fsdecode(a) for a in argv[i + 2:]]
    return None


def registry_given(args):
    return any(a == REGISTRY_FLAG or a.startswith(REGISTRY_FLAG + "=")
               for a in args)


def confinement():
    """(True, "") when processes can be put in a mount namespace with a
    /var/lib of their own, else (False, why).  Probed once."""
    if not _NAMESPACE:
        probe = tempfile.mkdtemp(prefix="podmux-varlib-probe-")
        try:
            with open(os.path.join(probe, "marker"), "w"):
                pass
            r = subprocess.run(
                _CONFINE[:-2] + [_CONFINE[-2].replace(
                    'exec "$@"', "test -e /var/lib/marker"),
                    _CONFINE[-1], probe],
                capture_output=True, text=True, errors="replace",
                timeout=T_SHORT)
            _NAMESPACE["ok"] = r.returncode == 0
            _NAMESPACE["why"] = "unshare/mount exit %d: %s" % (
                r.returncode, r.stderr.strip()[-300:])
        except (OSError, subprocess.SubprocessError) as e:
            _NAMESPACE["ok"], _NAMESPACE["why"] = False, repr(e)
        finally:
            shutil.rmtree(probe, ignore_errors=True)
    return _NAMESPACE["ok"], "" if _NAMESPACE["ok"] else _NAMESPACE["why"]


def confine(argv):
    """argv as the suite runs it: refused (AssertionError) when it is a
    `podmux run` without --plugins-registry-dir the test did not allow;
    as root, a daemon or a script that starts one is put in a mount
    namespace where /var/lib is <tmp>/varlib of the running test."""
    t = _CURRENT[0]
    args = daemon_args(argv)
    if args is not None and not registry_given(args) and \
            "--help" not in args and "-h" not in args and \
            not (t is not None and t.default_registry):
        raise AssertionError(
            "podmux run started without %s, so as root it could watch and "
            "create the machine's /var/lib/kubelet/plugins_registry: give "
            "it (\"\" for none), or call t.allow_default_registry() in a "
            "test of the default; argv: %s" % (REGISTRY_FLAG, argv))
    if isinstance(argv, (str, bytes, os.PathLike)) or not IS_ROOT or \
            t is None:
        return argv
    if args is None and not any(_is_path(a, r) for a in argv
                                for r in DAEMON_SCRIPTS):
        return argv
    if not confinement()[0]:
        return argv     # test_registry.py fails, saying why
    return _CONFINE + [t.varlib()] + list(argv)


class _ConfinedPopen(_REAL_POPEN):
    """subprocess.Popen for the whole test process (subprocess.run and
    every module that calls subprocess.Popen get it), through confine()."""

    def __init__(self, args, *a, **kw):
        super().__init__(confine(args), *a, **kw)


subprocess.Popen = _ConfinedPopen


# ---------------------------------------------------------------------------
# Registration and running

class Skip(Exception):
    pass


class TestTimeout(Exception):
    pass


_TESTS = []


def test(name, params=None):
    """Registers a test.  With params, one test per value: the name gets a
    "[value] " prefix and t.param holds the value."""
    def deco(fn):
        if params is None:
            _TESTS.append((name, fn, None))
        else:
            for p in params:
                _TESTS.append(("[%s] %s" % (p, name), fn, p))
        return fn
    return deco


def _selected(argv):
    pats = [a for a in argv if a]
    env = os.environ.get("PODMUX_TEST_FILTER", "")
    pats += [p for p in env.split(",") if p]
    if not pats:
        return list(_TESTS)
    return [x for x in _TESTS if any(p in x[0] for p in pats)]


def _alarm(signum, frame):
    raise TestTimeout("test exceeded its hard bound of %.0f s" % T_TEST)


def _diag(lines):
    for line in lines:
        for sub in str(line).splitlines() or [""]:
            print("# " + sub)


def main(argv=None):
    if argv is None:
        argv = sys.argv[1:]
    tests = _selected(argv)
    print("1..%d" % len(tests), flush=True)
    failed = 0
    signal.signal(signal.SIGALRM, _alarm)
    for i, (name, fn, param) in enumerate(tests, 1):
        t = TestContext(name, param)
        t0 = time.monotonic()
        status, diag = t.run(fn)
        left = _stop_podmux_children()
        if left:
            status = "not ok"
            diag = diag + ["podmux left running after the test (stopped "
                           "now): %s" % "; ".join(left)]
        if os.environ.get("PODMUX_TEST_TIMING") == "1":
            diag = diag + ["took %.1f s" % (time.monotonic() - t0)]
        if status == "ok":
            print("ok %d - %s" % (i, name))
        elif status == "skip":
            print("ok %d - %s # SKIP %s" % (i, name, diag[0] if diag else ""))
            diag = diag[1:]
        else:
            failed += 1
            print("not ok %d - %s" % (i, name))
        _diag(diag)
        sys.stdout.flush()
    if failed:
        _diag(["%d of %d tests failed" % (failed, len(tests))])
    sys.exit(1 if failed else 0)


class TestContext:
    """Passed to every test: a temp dir, the param, helpers that clean up."""

    def __init__(self, name, param):
        self.name = name
        self.param = param
        self.tmp = None
        self.daemons = []   # t.daemon()'s: checked at the end (_teardown)
        self.started = []   # every Daemon started, however made: stopped
        self.consumers = []
        self.procs = []
        self.notes = []
        self.soft_failures = []
        self.default_registry = False
        self.kubelet_expected = False

    # -- running ----------------------------------------------------------
    def run(self, fn):
        self.tmp = tempfile.mkdtemp(prefix="podmux-it-")
        status, diag = "ok", []
        host_kubelet = os.path.lexists("/var/lib/kubelet")
        _CURRENT[0] = self
        signal.alarm(int(T_TEST))
        try:
            if not os.path.exists(BIN):
                raise AssertionError("podmux binary not found at %s "
                                     "(set PODMUX_BIN)" % BIN)
            fn(self)
        except Skip as e:
            status, diag = "skip", [str(e)]
        except BaseException as e:  # noqa: B902 — report everything
            if isinstance(e, KeyboardInterrupt):
                raise
            status = "fail"
            diag = self._describe(e)
        finally:
            signal.alarm(0)
        try:
            problems = self._teardown()
        except BaseException as e:  # noqa: B902
            problems = ["teardown failed: %r" % (e,)]
        _CURRENT[0] = None
        problems += self.kubelet_problems()
        if not host_kubelet and os.path.lexists("/var/lib/kubelet"):
            problems.append("/var/lib/kubelet was created on this machine "
                            "during the test")
        if status != "skip" and self.soft_failures:
            problems = ["also failed: " + x for x in self.soft_failures] + \
                problems
            if status == "ok":
                problems = [x.replace("also failed: ", "", 1)
                            for x in problems]
        if problems and status != "fail":
            status = "fail"
            diag = ["the test body passed, but:"] + problems
        elif problems:
            diag += problems
        if status == "fail":
            diag += self._daemon_logs()
            diag.append("temp dir kept: %s" % self.tmp)
        elif os.environ.get("PODMUX_KEEP_TMP") != "1":
            _rmtree(self.tmp)
        return status, diag

    def _describe(self, e):
        out = ["%s: %s" % (type(e).__name__, e)]
        tb = traceback.extract_tb(e.__traceback__)
        frames = [f for f in tb if not f.filename.endswith("harness.py")]
        frames = frames or tb
        for f in frames[-4:]:
            out.append("  at %s:%d in %s: %s" % (
                os.path.basename(f.filename), f.lineno, f.name, f.line))
        return out + self.notes

    def _teardown(self):
        problems = []
        for c in self.consumers:
            c.close()
        for p in self.procs:
            if p.poll() is None:
                _stop_pid(p, signal.SIGTERM, 5)
        for d in self.daemons:
            if d.proc is None:
                continue
            rc = d.proc.poll()
            if rc is not None and not d.stopped and not d.expect_exit:
                problems.append("podmux (pid %d) died on its own during the "
                                "test with %s" % (d.proc.pid, _rc_str(rc)))
                continue
            if rc is None:
                problems += _stop_at_end(d)
        # A Daemon a test made itself (not with t.daemon()) and left
        # running: stopped here all the same, or it would outlive the
        # suite.
        for d in self.started:
            if d not in self.daemons and d.proc.poll() is None:
                problems += _stop_at_end(d)
        return problems

    def _daemon_logs(self):
        out = []
        for d in self.daemons:
            if not d.stderr_path or not os.path.exists(d.stderr_path):
                continue
            with open(d.stderr_path, "rb") as f:
                lines = f.read().decode("utf-8", "replace").splitlines()
            out.append("--- last stderr lines of podmux pid %s (%s):" % (
                d.proc.pid if d.proc else "?", d.stderr_path))
            for line in lines[-25:]:
                out.append("  " + line[:400])
        return out

    def varlib(self):
        """The directory the test's daemons see as /var/lib (as root)."""
        return self.mkdir("varlib")

    def kubelet_problems(self):
        """What teardown reports about <tmp>/varlib/kubelet."""
        kub = os.path.join(self.tmp, "varlib", "kubelet")
        if self.kubelet_expected or not os.path.lexists(kub):
            return []
        found = []
        for root, dirs, files in os.walk(kub):
            found += [os.path.join(root, n)[len(self.tmp) + 1:]
                      for n in dirs + files]
        return ["a process of this test created /var/lib/kubelet (in its "
                "private /var/lib, %s: %s)" % (
                    os.path.join(self.tmp, "varlib"), found[:5] or "empty")]

    # -- helpers ----------------------------------------------------------
    def allow_default_registry(self):
        """This test starts `podmux run` without --plugins-registry-dir on
        purpose (a test of the default); as root it runs confined."""
        self.default_registry = True

    def confine(self, argv):
        """argv for a process started without subprocess (pty.fork and
        exec): the same checks and confinement as every Popen."""
        return confine(argv)

    def skip(self, reason):
        raise Skip(reason)

    def soft(self, fn, *args, **kw):
        """Runs a check; an AssertionError is recorded (the test fails at
        the end) instead of stopping the test, so one run reports every
        independent violation.  Returns fn's value or None."""
        try:
            return fn(*args, **kw)
        except AssertionError as e:
            self.soft_failures.append("%s: %s" % (
                getattr(fn, "__name__", "check"), e))
            return None

    def note(self, msg):
        self.notes.append(msg)

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def mkdir(self, *parts):
        p = self.path(*parts)
        os.makedirs(p, exist_ok=True)
        return p

    @property
    def mode(self):
        return self.param if self.param in MODES else "incremental"

    def daemon(self, manifest_path=None, start=True, **kw):
        """A podmux run.  manifest_path defaults to <tmp>/manifests
        (created).  Keyword args: see Daemon."""
        if manifest_path is None:
            manifest_path = self.mkdir("manifests")
        kw.setdefault("mode", self.mode)
        d = Daemon(self, manifest_path, **kw)
        self.daemons.append(d)
        if start:
            d.start()
        return d

    def run_cmd(self, args, timeout=None, input=None, cwd=None):
        """Runs `podmux ARGS...` to completion (in cwd if given); returns
        CompletedProcess with text stdout/stderr.  Fails the test if it does
        not finish."""
        timeout = timeout or T_WAIT
        try:
            return subprocess.run([BIN] + list(args), input=input,
                                  capture_output=True, timeout=timeout,
                                  text=True, errors="replace", cwd=cwd)
        except subprocess.TimeoutExpired:
            raise AssertionError("podmux %s did not finish within %.0f s" %
                                 (" ".join(args), timeout))

    def spawn(self, args, env=None):
        """Starts `podmux ARGS...` with stdout/stderr read by threads (env:
        its environment, default this process's)."""
        p = Spawned([BIN] + list(args), env=env)
        self.procs.append(p)
        return p



def unix_listening(path):
    """Whether a socket bound to path listens, by /proc/net/unix (no
    connection made, so the daemon sees no consumer come and go).  The
    daemon gives the file its group and mode between bind() and listen():
    a file that merely exists may still be owner-only."""
    names = {path, os.path.abspath(path)}
    with open("/proc/net/unix") as f:
        next(f)
        for line in f:
            cols = line.split(None, 7)
            # Flags 00010000 is __SO_ACCEPTCON: listen() was called.
            if len(cols) == 8 and int(cols[3], 16) & 0x10000 and \
                    cols[7].rstrip("\n") in names:
                return True
    return False


def wait_listening(path, alive=None, timeout=None):
    """Waits until a socket bound to the unix path listens (unix_listening:
    no connection made): the daemon has then set the socket's group and
    mode, and a stale file of that name has been replaced.
    alive: called on each try (to fail at once if the daemon died)."""
    def ready():
        if alive:
            alive()
        return unix_listening(path)
    wait_for(ready, timeout or T_SHORT, "a listener on %s" % path)


def demo_on_pty(argv, env, timeout, before_stop=None):
    """Runs the demo (argv) on a terminal until it shows both example pods
    (within timeout s), calls before_stop(printed so far) if given, then
    types Ctrl-C and waits (T_WAIT) for it to stop.  Returns everything
    it printed."""
    import pty
    import select
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(argv[0], argv, env)
    out = b""

    def read(wait):
        nonlocal out
        r, _, _ = select.select([fd], [], [], wait)
        if r:
            try:
                out += os.read(fd, 65536)
            except OSError:
                return False
        return True
    try:
        deadline = time.monotonic() + timeout
        # As the consumer's table shows them: the daemon's log names them
        # too, as "namespace/name".
        while not (re.search(rb"(?<![/\w-])nginx-demo-node", out) and
                   re.search(rb"(?<![/\w-])etcd-demo-node", out)):
            if time.monotonic() > deadline:
                raise AssertionError("the demo did not show the example "
                                     "pods:\n%s" %
                                     out.decode(errors="replace")[-2000:])
            if not read(1.0):
                break
        if before_stop:
            before_stop(out)
        os.write(fd, b"\x03")       # Ctrl-C on the terminal
        deadline = time.monotonic() + T_WAIT
        while not os.waitpid(pid, os.WNOHANG)[0]:
            if time.monotonic() > deadline:
                raise AssertionError("the demo did not stop on Ctrl-C")
            read(0.2)
        pid = 0
        # What it printed last (the daemon's "shutting down") may still be
        # in the terminal's buffer: read to its end (EIO once drained).
        while True:
            r, _, _ = select.select([fd], [], [], 1.0)
            if not r:
                break
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    finally:
        if pid:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    return out

def _rc_str(rc):
    if rc is None:
        return "no exit"
    if rc < 0:
        try:
            return "signal %s" % signal.Signals(-rc).name
        except ValueError:
            return "signal %d" % -rc
    return "exit status %d" % rc


def _rmtree(path):
    # Restore permissions a test may have removed, then delete.
    for root, dirs, files in os.walk(path):
        for n in dirs + files:
            p = os.path.join(root, n)
            try:
                if not os.path.islink(p):
                    os.chmod(p, 0o700)
            except OSError:
                pass
    shutil.rmtree(path, ignore_errors=True)


def _stop_pid(proc, sig, timeout):
    """Signals one process we started, by its PID; SIGKILL after timeout.
    Returns (returncode, killed)."""
    if proc.poll() is not None:
        return proc.returncode, False
    try:
        os.kill(proc.pid, sig)
    except ProcessLookupError:
        pass
    try:
        return proc.wait(timeout=timeout), False
    except subprocess.TimeoutExpired:
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return proc.wait(), True


def settle(secs):
    """A pause before a test asserts an absence (no relist, no further
    message, nothing scheduled): what must not happen gets secs, scaled
    like every bound here, to show up.  Never a wait for what must
    happen: poll for that (wait_for)."""
    time.sleep(secs * SCALE)   # the pause itself, scaled


def wait_for(pred, timeout, what, interval=0.02):
    """Polls pred() until it returns a true value (returned) or fails."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %.0f s waiting for %s" %
                                 (timeout, what))
        time.sleep(interval)   # a poll's interval


# ---------------------------------------------------------------------------
# Processes

class Spawned:
    """A podmux subcommand with its stdout/stderr collected line by line."""

    def __init__(self, argv, env=None):
        self.argv = argv
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env)
        self.pid = self.proc.pid
        self.out = []
        self.err = []
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._pump, args=(self.proc.stdout,
                                                      self.out), daemon=True),
            threading.Thread(target=self._pump, args=(self.proc.stderr,
                                                      self.err), daemon=True),
        ]
        for th in self._threads:
            th.start()

    def _pump(self, f, sink):
        for raw in iter(f.readline, b""):
            with self._lock:
                sink.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def poll(self):
        return self.proc.poll()

    def wait(self, timeout=None):
        try:
            rc = self.proc.wait(timeout=timeout or T_WAIT)
        except subprocess.TimeoutExpired:
            raise AssertionError("%s did not exit within %.0f s" %
                                 (" ".join(self.argv[1:]), timeout or T_WAIT))
        for th in self._threads:
            th.join(timeout=5)
        return rc

    def lines(self):
        with self._lock:
            return list(self.out)

    def err_lines(self):
        with self._lock:
            return list(self.err)

    def wait_line(self, pred, timeout=None, what="an output line"):
        timeout = timeout or T_WAIT

        def find():
            for line in self.lines():
                if pred(line):
                    return line
            if self.proc.poll() is not None:
                raise AssertionError(
                    "%s exited (%s) before printing %s; stdout=%r stderr=%r"
                    % (" ".join(self.argv[1:]), _rc_str(self.proc.poll()),
                       what, self.lines()[-10:], self.err_lines()[-10:]))
            return None
        try:
            return wait_for(find, timeout, what)
        except AssertionError as e:
            if "timed out" in str(e):
                raise AssertionError("%s; stdout so far: %r" %
                                     (e, self.lines()[-10:]))
            raise

    def stop(self, sig=signal.SIGTERM, timeout=10):
        rc, _ = _stop_pid(self.proc, sig, timeout)
        for th in self._threads:
            th.join(timeout=5)
        return rc


class LogLine:
    __slots__ = ("level", "msg", "raw")

    def __init__(self, level, msg, raw):
        self.level, self.msg, self.raw = level, msg, raw

    def __repr__(self):
        return self.raw[:300]


_TEXT_LOG = re.compile(r"^\S+\s+(error|warn|warning|info|debug|trace)\s+(.*)$",
                       re.I)


def parse_log_line(raw):
    try:
        obj = json.loads(raw)
        if isinstance(obj, dict):
            return LogLine(str(obj.get("level", "")).lower(),
                           str(obj.get("msg", obj.get("message", ""))), raw)
    except ValueError:
        pass
    m = _TEXT_LOG.match(raw)
    if m:
        return LogLine(m.group(1).lower(), m.group(2), raw)
    return LogLine(None, raw, raw)


def _stop_podmux_children():
    """Our child processes still running the podmux binary once a test
    has ended and cleaned up: each stopped by its PID (SIGTERM, then
    SIGKILL after 10 s) and described.  A daemon left running outlives
    the suite."""
    left = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                st = f.read()
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        state, ppid = st[st.rindex(")") + 2:].split()[:2]
        if int(ppid) != os.getpid() or state == "Z" or \
                BIN.encode() not in argv:
            continue
        pid = int(pid)
        left.append("pid %d: %s" % (pid, b" ".join(argv).decode(
            "utf-8", "replace")[:200]))
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                break
            time.sleep(0.05)  # the poll's interval
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    return left


def _stop_at_end(d):
    """Stops a test's daemon still running at its end: what went wrong,
    as a list of problems."""
    rc = d.stop()
    if d.killed:
        return ["podmux (pid %d) ignored SIGTERM for 10 s and was killed" %
                d.proc.pid]
    if rc is not None and rc < 0:
        return ["podmux (pid %d) died from %s when stopped with SIGTERM" %
                (d.proc.pid, _rc_str(rc))]
    return []


class Daemon:
    """One `podmux run`.  Started by PID, stopped only by that PID; the
    test's context stops it at the end if it is still running."""

    _count = 0

    def __init__(self, t, manifest_path, socket_path=None, mode="incremental",
                 node=NODE, freq="1s", log_format="json", extra=(),
                 expect_exit=False, plugins_dir="", env=None, cwd=None):
        Daemon._count += 1
        self.t = t
        self.n = Daemon._count
        self.manifest_path = manifest_path
        self.sock = socket_path or t.path("podmux.sock")
        self.mode = mode
        self.node = node
        self.freq = freq
        self.log_format = log_format
        self.extra = list(extra)
        # --plugins-registry-dir before extra (which may give its own);
        # None: not given, see TestContext.allow_default_registry.
        self.plugins_dir = plugins_dir
        self.expect_exit = expect_exit
        self.env = env              # added to the environment, if given
        self.cwd = cwd              # the daemon's working directory (None: ours)
        self.proc = None
        self.stopped = False
        self.killed = False
        self.stderr_path = None

    def argv(self):
        a = [BIN, "run"]
        if self.manifest_path is not None:
            a += ["--pod-manifest-path", self.manifest_path]
        a += ["--socket", self.sock]
        if self.node is not None:       # None: the daemon's default
            a += ["--node-name", self.node]
        a += ["--mode", self.mode]
        if self.freq:
            a += ["--file-check-frequency", self.freq]
        if self.log_format:
            a += ["--log-format", self.log_format]
        if self.plugins_dir is not None:
            a += [REGISTRY_FLAG, self.plugins_dir]
        if ("--kubeconfig" in self.extra or "--in-cluster" in self.extra) \
                and "--relist-spread" not in self.extra:
            # A list after a 410 comes after the backoff alone: the
            # spread (a minute by default) is for fleets, and the tests
            # that check it give their own.
            a += ["--relist-spread", "0"]
        return RUN_PREFIX + a + self.extra

    def start(self, wait=True):
        self.starts = getattr(self, "starts", 0) + 1
        self.stderr_path = self.t.path("podmux-%d.%d.stderr" %
                                       (self.n, self.starts))
        self.stdout_path = self.t.path("podmux-%d.%d.stdout" %
                                       (self.n, self.starts))
        with open(self.stderr_path, "wb") as ferr, \
                open(self.stdout_path, "wb") as fout:
            self.proc = subprocess.Popen(
                self.argv(), stdin=subprocess.DEVNULL, stdout=fout,
                stderr=ferr, cwd=self.cwd,
                env=dict(os.environ, **self.env) if self.env else None)
        self.pid = self.proc.pid
        self.stopped = False
        if self not in self.t.started:
            self.t.started.append(self)
        if wait:
            self.wait_socket()
        return self

    def wait_socket(self, timeout=None):
        def alive():
            if self.proc.poll() is not None:
                raise AssertionError(
                    "podmux exited with %s before creating its socket; "
                    "stderr: %s" % (_rc_str(self.proc.returncode),
                                    self.stderr_text()[-1500:]))
        wait_listening(self.sock, alive, timeout)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def assert_alive(self):
        if not self.alive():
            raise AssertionError("podmux is no longer running (%s)" %
                                 _rc_str(self.proc.poll()))

    def send_signal(self, sig):
        if self.alive():
            os.kill(self.proc.pid, sig)

    def wait_exit(self, timeout=None):
        try:
            rc = self.proc.wait(timeout=timeout or T_SHORT)
        except subprocess.TimeoutExpired:
            raise AssertionError("podmux did not exit within %.0f s" %
                                 (timeout or T_SHORT))
        self.stopped = True
        return rc

    def stop(self, sig=signal.SIGTERM, timeout=10):
        """SIGTERM (or sig) to our PID; SIGKILL after timeout.  Returns the
        exit status (negative: killed by a signal)."""
        if self.proc is None:
            return None
        self.stopped = True
        rc, self.killed = _stop_pid(self.proc, sig, timeout)
        return rc

    def restart(self):
        self.stop()
        self.start()
        return self

    # -- logs ---------------------------------------------------------------
    def stderr_text(self):
        if not self.stderr_path or not os.path.exists(self.stderr_path):
            return ""
        with open(self.stderr_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def logs(self):
        return [parse_log_line(line)
                for line in self.stderr_text().splitlines() if line.strip()]

    def wait_log(self, pred, what, timeout=None):
        def find():
            for line in self.logs():
                if pred(line):
                    return line
            if not self.alive():
                raise AssertionError("podmux died (%s) while waiting for "
                                     "log line: %s" %
                                     (_rc_str(self.proc.poll()), what))
            return None
        try:
            return wait_for(find, timeout or T_WAIT, "log line: " + what)
        except AssertionError as e:
            if "timed out" in str(e):
                tail = [repr(x) for x in self.logs()[-8:]]
                raise AssertionError("%s; last log lines: %s" % (e, tail))
            raise

    def file_errors(self, path, levels=("error",)):
        """Log lines at one of levels that contain `file "<path>"`."""
        key = 'file "%s"' % path
        return [x for x in self.logs() if x.level in levels and key in x.msg]

    def wait_file_error(self, path, levels=("error",), timeout=None):
        """Waits for a log line at one of levels containing `file "<path>"`
        followed by a reason; returns it."""
        key = 'file "%s"' % path

        def ok(x):
            return x.level in levels and key in x.msg
        line = self.wait_log(ok, "%s line with %s" % ("/".join(levels), key),
                             timeout)
        if "\n" in line.msg.strip():
            raise AssertionError("the error is not one line: %r" % line.msg)
        rest = line.msg.split(key, 1)[1].strip(" :-\t")
        if len(rest) < 3:
            raise AssertionError("the log line names the file but gives no "
                                 "reason: %r" % line.msg)
        return line

    # -- consumers --------------------------------------------------------
    def connect(self, **kw):
        c = Consumer(self.t, self.sock, **kw)
        return c


# ---------------------------------------------------------------------------
# Stream consumer and state

class ConsumerClosed(AssertionError):
    pass


def pod_uid(p):
    return (p.get("metadata") or {}).get("uid", "")


def pod_name(p):
    return (p.get("metadata") or {}).get("name", "")


def pod_ann(p, key, default=None):
    return ((p.get("metadata") or {}).get("annotations") or {}).get(key,
                                                                   default)


def pod_labels(p):
    return (p.get("metadata") or {}).get("labels") or {}


def pod_image(p):
    try:
        return p["spec"]["containers"][0]["image"]
    except (KeyError, IndexError, TypeError):
        return None


def msg_uids(m):
    return [pod_uid(p) for p in m.get("pods") or []]


def msg_names(m):
    return sorted(pod_name(p) for p in m.get("pods") or [])


def summarize(m):
    if not isinstance(m, dict):
        return repr(m)[:200]
    if m.get("type") == "pods":
        pods = ", ".join("%s(%s)" % (pod_name(p), pod_uid(p)[:8])
                         for p in m.get("pods") or [])
        return "seq=%s pods %s source=%s [%s]" % (m.get("seq"), m.get("op"),
                                                  m.get("source"), pods)
    rest = {k: v for k, v in m.items() if k not in ("type", "seq")}
    return "seq=%s %s %s" % (m.get("seq"), m.get("type"),
                             json.dumps(rest)[:200])


class State:
    """Pods a consumer holds, rebuilt from the stream: uid -> pod.

    Applying a message checks what the protocol promises: ADD of a new uid,
    UPDATE/DELETE/RECONCILE/REMOVE of a known one."""

    def __init__(self, pods=None):
        self.pods = dict(pods or {})

    def copy(self):
        return State(self.pods)

    def apply(self, m):
        op, src, pods = m.get("op"), m.get("source"), m.get("pods")
        if not isinstance(pods, list):
            raise AssertionError("pods message without a pods list: %s" %
                                 summarize(m))
        if op == "SET":
            if src == "*":
                self.pods.clear()
            else:
                for uid in [u for u, p in self.pods.items()
                            if pod_ann(p, "kubernetes.io/config.source",
                                       src) == src]:
                    del self.pods[uid]
            for p in pods:
                self.pods[pod_uid(p)] = p
        elif op == "ADD":
            for p in pods:
                if pod_uid(p) in self.pods:
                    raise AssertionError("ADD of a uid the consumer already "
                                         "holds: %s" % summarize(m))
                self.pods[pod_uid(p)] = p
        elif op in ("UPDATE", "DELETE", "RECONCILE"):
            for p in pods:
                if pod_uid(p) not in self.pods:
                    raise AssertionError("%s of a uid the consumer does not "
                                         "hold: %s" % (op, summarize(m)))
                self.pods[pod_uid(p)] = p
        elif op == "REMOVE":
            for p in pods:
                if pod_uid(p) not in self.pods:
                    raise AssertionError("REMOVE of a uid the consumer does "
                                         "not hold: %s" % summarize(m))
                del self.pods[pod_uid(p)]
        else:
            raise AssertionError("unknown op %r in %s" % (op, summarize(m)))

    def names(self):
        return sorted(pod_name(p) for p in self.pods.values())

    def uids(self):
        return set(self.pods)

    def by_name(self, name):
        return [p for p in self.pods.values() if pod_name(p) == name]

    def one(self, name):
        ps = self.by_name(name)
        if len(ps) != 1:
            raise AssertionError("expected exactly one pod named %s, have %d "
                                 "(state: %s)" % (name, len(ps), self))
        return ps[0]

    def __repr__(self):
        return "{%s}" % ", ".join(sorted("%s(%s)" % (pod_name(p), u[:8])
                                         for u, p in self.pods.items()))


class Consumer:
    """A stream client.

    first_line: "{}" (default), None (send nothing), an int (sent as
    {"resume_after": N}) or any other str (sent raw, newline added).
    threaded: read continuously in a background thread (a consumer that must
    never fall behind); otherwise the socket is read only inside recv().
    state: a State to start from (a resuming client keeps its state)."""

    def __init__(self, t, sock_path, first_line="{}", threaded=False,
                 state=None, read_hello=True, timeout=None):
        self.t = t
        self.path = sock_path
        self.msgs = []
        self.state = state.copy() if state is not None else State()
        self.last_seq = None
        self.eof = False
        self.hello = None
        self.synced_index = None
        self._buf = b""
        self._q = None
        # A resuming client's replay may carry seqs older than the hello it
        # got before saying where to resume: seq order is checked from the
        # first message after hello.
        self.resuming = isinstance(first_line, int) and \
            not isinstance(first_line, bool)
        self.sock = self._connect(timeout or T_SHORT)
        t.consumers.append(self)
        if read_hello:
            self.hello = self.recv(timeout or T_SHORT)
            if self.hello.get("type") != "hello":
                raise AssertionError("first message is not hello: %s" %
                                     summarize(self.hello))
        if first_line is not None:
            if isinstance(first_line, int) and not isinstance(first_line,
                                                              bool):
                first_line = json.dumps({"resume_after": first_line})
            self.send(first_line + "\n")
        if threaded:
            self._q = queue.Queue()
            self._thread = threading.Thread(target=self._reader, daemon=True)
            self._thread.start()

    def _connect(self, timeout):
        deadline = time.monotonic() + timeout
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(self.path)
                return s
            except (FileNotFoundError, ConnectionRefusedError) as e:
                s.close()
                if time.monotonic() >= deadline:
                    raise AssertionError("cannot connect to %s: %s" %
                                         (self.path, e))
                time.sleep(0.02)   # a poll's interval

    def send(self, text):
        self.sock.sendall(text.encode() if isinstance(text, str) else text)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    # -- reading -----------------------------------------------------------
    def _read_line(self, deadline):
        """Returns one line (bytes, no newline), None when nothing complete
        arrived by deadline (a past deadline still reads what is already
        there), or raises ConsumerClosed at EOF."""
        while b"\n" not in self._buf:
            if self.eof:
                if self._buf:
                    junk, self._buf = self._buf, b""
                    raise AssertionError("connection closed in the middle "
                                         "of a line: %r" % junk[:200])
                raise ConsumerClosed("the server closed the connection")
            remaining = deadline - time.monotonic()
            self.sock.settimeout(max(remaining, 0.0))
            try:
                data = self.sock.recv(1 << 18)
            except (socket.timeout, BlockingIOError):
                return None
            except ConnectionResetError:
                data = b""
            if not data:
                self.eof = True
            self._buf += data
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def _reader(self):
        try:
            while True:
                line = self._read_line(time.monotonic() + 3600)
                if line is None:
                    continue
                self._q.put(("line", line))
        except ConsumerClosed:
            self._q.put(("eof", None))
        except BaseException as e:  # noqa: B902
            self._q.put(("exc", e))

    def _next_line(self, deadline):
        if self._q is None:
            return self._read_line(deadline)
        try:
            kind, v = self._q.get(timeout=max(0, deadline - time.monotonic()))
        except queue.Empty:
            return None
        if kind == "eof":
            self.eof = True
            self._q.put(("eof", None))  # sticky
            raise ConsumerClosed("the server closed the connection")
        if kind == "exc":
            self._q.put(("exc", v))
            raise v
        return v

    def recv(self, timeout=None):
        """Next message (dict), applied to the state.  Raises AssertionError
        on timeout, ConsumerClosed at EOF."""
        timeout = T_WAIT if timeout is None else timeout
        deadline = time.monotonic() + timeout
        line = self._next_line(deadline)
        if line is None:
            raise AssertionError("no message within %.0f s" % timeout)
        return self._accept(line)

    def _accept(self, line):
        try:
            m = json.loads(line.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise AssertionError("the server sent a line that is not JSON "
                                 "(%s): %r" % (e, line[:300]))
        if not isinstance(m, dict) or "type" not in m:
            raise AssertionError("message without a type: %r" % line[:300])
        seq = m.get("seq")
        if not isinstance(seq, int) or isinstance(seq, bool):
            raise AssertionError("message without an integer seq: %s" %
                                 summarize(m))
        if self.last_seq is not None and seq <= self.last_seq:
            raise AssertionError("seq not strictly increasing: %d after %d "
                                 "(%s)" % (seq, self.last_seq, summarize(m)))
        if not (m["type"] == "hello" and self.resuming):
            self.last_seq = seq
        self.msgs.append(m)
        if m["type"] == "pods":
            self.state.apply(m)
        elif m["type"] == "synced" and self.synced_index is None:
            self.synced_index = len(self.msgs) - 1
        return m

    def drain_available(self):
        """Reads every complete message already buffered (no waiting)."""
        out = []
        while True:
            try:
                line = self._next_line(time.monotonic())
            except ConsumerClosed:
                return out
            if line is None:
                return out
            out.append(self._accept(line))

    def expect(self, pred, what="a matching message", timeout=None):
        """Reads until a message satisfies pred; returns it."""
        timeout = T_WAIT if timeout is None else timeout
        deadline = time.monotonic() + timeout
        start = len(self.msgs)
        while True:
            remaining = deadline - time.monotonic()
            try:
                if remaining <= 0:
                    raise AssertionError("timeout")
                m = self.recv(remaining)
            except ConsumerClosed:
                raise ConsumerClosed("connection closed while waiting for "
                                     "%s; got: %s" %
                                     (what, self._recent(start)))
            except AssertionError as e:
                if "no message within" in str(e) or str(e) == "timeout":
                    raise AssertionError(
                        "timed out after %.0f s waiting for %s; got: %s; "
                        "state: %s" % (timeout, what, self._recent(start),
                                       self.state))
                raise
            if pred(m):
                return m

    def _recent(self, start):
        ms = self.msgs[start:]
        if not ms:
            return "nothing"
        parts = [summarize(m) for m in ms[-8:]]
        if len(ms) > 8:
            parts.insert(0, "(%d earlier)" % (len(ms) - 8))
        return " | ".join(parts)

    def expect_type(self, typ, timeout=None):
        return self.expect(lambda m: m.get("type") == typ, "a %s message" %
                           typ, timeout)

    def expect_pods(self, op, names=None, uids=None, contains=None,
                    pred=None, timeout=None):
        """A pods message with this op; names/uids: exactly these pods;
        contains: at least these pod names; pred(msg): extra check."""
        def ok(m):
            if m.get("type") != "pods" or m.get("op") != op:
                return False
            if names is not None and msg_names(m) != sorted(names):
                return False
            if uids is not None and sorted(msg_uids(m)) != sorted(uids):
                return False
            if contains is not None and not set(contains) <= set(
                    msg_names(m)):
                return False
            return pred is None or pred(m)
        desc = "pods %s" % op
        if names is not None:
            desc += " with exactly %s" % sorted(names)
        if uids is not None:
            desc += " with uids %s" % sorted(u[:8] for u in uids)
        if contains is not None:
            desc += " containing %s" % sorted(contains)
        return self.expect(ok, desc, timeout)

    def initial_seq(self):
        """The seq of the first message after hello, where this consumer's
        initial state starts: what the daemon sent before it is in that
        state.  The hello's own seq can be older than a message the
        consumer never saw (one sent before the daemon made its state)."""
        return next(m["seq"] for m in self.msgs if m.get("type") != "hello")

    def read_initial(self, timeout=None):
        """Reads up to and including synced; returns the messages before it.
        Only pods (and plugin) messages may come before synced."""
        start = len(self.msgs)
        self.expect_type("synced", timeout)
        before = self.msgs[start:-1]
        for m in before:
            if m.get("type") not in ("pods", "plugin"):
                raise AssertionError("unexpected message before synced: %s" %
                                     summarize(m))
        return before

    def wait_state(self, pred, what, timeout=None):
        """Reads messages until pred(state) holds."""
        if pred(self.state):
            return self.state
        timeout = T_WAIT if timeout is None else timeout
        deadline = time.monotonic() + timeout
        start = len(self.msgs)
        while True:
            remaining = deadline - time.monotonic()
            try:
                if remaining <= 0:
                    raise AssertionError("timeout")
                self.recv(remaining)
            except ConsumerClosed:
                raise ConsumerClosed("connection closed while waiting for "
                                     "state %s; state: %s; got: %s" %
                                     (what, self.state, self._recent(start)))
            except AssertionError as e:
                if "no message within" in str(e) or str(e) == "timeout":
                    raise AssertionError(
                        "timed out after %.0f s waiting for state %s; "
                        "state: %s; got: %s" % (timeout, what, self.state,
                                                self._recent(start)))
                raise
            if pred(self.state):
                return self.state

    def wait_until_state(self, expected_names, timeout=None):
        """Reads until the pod names held are exactly expected_names (a
        multiset).  Returns the state."""
        exp = sorted(expected_names)
        return self.wait_state(lambda s: s.names() == exp,
                               "with pods %s" % exp, timeout)

    # -- checks over what was received ---------------------------------------
    def pods_msgs(self, since=0):
        return [m for m in self.msgs[since:] if m.get("type") == "pods"]

    def assert_kept(self, uids, since=0):
        """None of uids was ever removed: no REMOVE names them and every SET
        (of source file or *) still carries them."""
        uids = set(uids)
        for m in self.pods_msgs(since):
            got = set(msg_uids(m))
            if m["op"] == "REMOVE" and got & uids:
                raise AssertionError("pods that must stay were removed: %s" %
                                     summarize(m))
            if m["op"] == "SET" and not uids <= got:
                raise AssertionError("a SET lacks pods that must stay: %s" %
                                     summarize(m))

    def assert_never_named(self, names):
        for m in self.pods_msgs():
            bad = set(msg_names(m)) & set(names)
            if bad:
                raise AssertionError("pods %s must never appear, but: %s" %
                                     (sorted(bad), summarize(m)))


# ---------------------------------------------------------------------------
# Manifests

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_./-]*$")
_YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null",
               "~"}


def _yaml_key(k):
    if _PLAIN_KEY.match(k) and k.lower() not in _YAML_WORDS:
        return k
    return json.dumps(k)


def _yaml_scalar(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, dict):
        return "{}"
    if isinstance(v, list):
        return "[]"
    return json.dumps(v)


def _yaml_emit(v, ind, out):
    pad = "  " * ind
    if isinstance(v, dict):
        for k, x in v.items():
            if isinstance(x, (dict, list)) and x:
                out.append("%s%s:" % (pad, _yaml_key(k)))
                _yaml_emit(x, ind + 1, out)
            else:
                out.append("%s%s: %s" % (pad, _yaml_key(k), _yaml_scalar(x)))
    else:
        for x in v:
            if isinstance(x, (dict, list)) and x:
                sub = []
                _yaml_emit(x, ind + 1, sub)
                sub[0] = pad + "- " + sub[0][len(pad) + 2:]
                out.extend(sub)
            else:
                out.append("%s- %s" % (pad, _yaml_scalar(x)))


def to_yaml(obj, comment=None):
    out = ["# " + comment] if comment else []
    _yaml_emit(obj, 0, out)
    return "\n".join(out) + "\n"


def pod_obj(name, image="nginx:1.25", uid=None, namespace=None, labels=None,
            annotations=None, status=None, deletion=None, grace=None,
            big=0, kind="Pod", api_version="v1", spec_extra=None):
    meta = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if uid is not None:
        meta["uid"] = uid
    if labels:
        meta["labels"] = dict(labels)
    ann = dict(annotations or {})
    if big:
        ann["example.com/padding"] = "x" * big
    if ann:
        meta["annotations"] = ann
    if deletion is not None:
        meta["deletionTimestamp"] = deletion
    if grace is not None:
        meta["deletionGracePeriodSeconds"] = grace
    spec = {"containers": [{"name": "main", "image": image}]}
    if spec_extra:
        spec.update(spec_extra)
    obj = {}
    if api_version is not None:
        obj["apiVersion"] = api_version
    if kind is not None:
        obj["kind"] = kind
    obj["metadata"] = meta
    obj["spec"] = spec
    if status is not None:
        obj["status"] = status
    return obj


def pod_yaml(name, **kw):
    return to_yaml(pod_obj(name, **kw), comment="pod %s" % name)


def pod_json(name, **kw):
    return json.dumps(pod_obj(name, **kw), indent=2) + "\n"


def pn(name, node=NODE):
    """The name podmux gives the pod of manifest name `name`."""
    return "%s-%s" % (name, node.lower())


_tmp_counter = [0]


def write_file(path, data, atomic=True):
    """Writes a file.  atomic: through a hidden temp name in the same
    directory and a rename (the watcher sees one moved-to); otherwise in
    place (truncate + write)."""
    if isinstance(data, str):
        data = data.encode()
    if not atomic:
        with open(path, "wb") as f:
            f.write(data)
        return path
    d, base = os.path.split(path)
    _tmp_counter[0] += 1
    tmp = os.path.join(d, ".%s.tmp%d" % (base, _tmp_counter[0]))
    with open(tmp, "wb") as f:
        f.write(data)
    os.rename(tmp, path)
    return path


# Bad manifests in tests/fixtures/bad: file -> (what is wrong, words one of
# which the logged/printed reason must contain, lower case).
_PARSE_WORDS = ("line", "yaml", "json", "parse", "syntax", "expected",
                "invalid", "unexpected", "scan", "flow")
_EMPTY_WORDS = ("empty", "null", "no document", "nothing", "no content")
BAD_FIXTURES = {
    "syntax-error.yaml": ("unparsable YAML", _PARSE_WORDS + ("mapping",)),
    "syntax-error.json": ("JSON syntax error", _PARSE_WORDS + ("sequence",)),
    "deployment.yaml": ("not a Pod (a Deployment)",
                        ("pod", "kind", "deployment", "apps/v1")),
    "podlist.yaml": ("a PodList in a file", ("list", "single")),
    "invalid-name.yaml": ("upper-case pod name",
                          ("name", "dns", "subdomain", "lower")),
    "bad-namespace.yaml": ("invalid namespace", ("namespace",)),
    "missing-apiversion.yaml": ("no apiVersion", ("apiversion", "version")),
    "missing-kind.yaml": ("no kind", ("kind",)),
    "wrong-apiversion.yaml": ("unknown apiVersion v1betta2",
                              ("v1betta2", "version")),
    "empty.yaml": ("empty file", _EMPTY_WORDS),
    "null-document.yaml": ("a null document", _EMPTY_WORDS),
    "missing-name.yaml": ("no metadata.name", ("name",)),
    "no-containers.yaml": ("no containers", ("container",)),
    "missing-image.yaml": ("a container without image", ("image",)),
    "service-account.yaml": ("static pod references a service account",
                             ("serviceaccount", "service account")),
    "secret-volume.yaml": ("static pod references a secret", ("secret",)),
    "not-a-mapping.yaml": ("a YAML sequence, not an object",
                           ("object", "mapping", "map", "kind", "pod",
                            "apiversion", "array", "sequence", "list")),
}
GARBAGE_WORDS = _PARSE_WORDS + ("character", "utf", "control", "binary",
                                "byte", "kind", "apiversion", "object",
                                "mapping", "pod", "document")
TOO_LARGE_WORDS = ("large", "size", "limit", "mib", "bytes", "big", "10")
UNREADABLE_WORDS = ("permission", "denied", "read", "access")


def garbage_bytes():
    """Deterministic binary garbage: NULs, control bytes, invalid UTF-8."""
    out = bytearray()
    x = 0x2545F491
    for _ in range(4096):
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        out.append(x & 0xFF)
    return b"\x00\xff\xfe" + bytes(out)


def assert_reason(text, words, what):
    low = text.lower()
    if not any(w in low for w in words):
        raise AssertionError("%s: the reason %r contains none of %s" %
                             (what, text, list(words)))


MIB10 = 10 * 1024 * 1024


def sized_manifest(name, size):
    """A valid pod manifest padded with a YAML comment to exactly size
    bytes."""
    head = pod_yaml(name).encode()
    pad = size - len(head) - 3
    assert pad > 0
    return head + b"#" + b"x" * pad + b"\n" + b"\n"


def fixture(*parts):
    return os.path.join(FIXTURES, *parts)


def read_fixture(*parts):
    with open(fixture(*parts), "rb") as f:
        return f.read()


def iofault_env(t, control):
    """The daemon's environment (Daemon's env=) that preloads
    tests/integration/iofault.c reading the control file control: lines
    "open|read ERRNO PATH" fail that call on PATH (write_iofault()).
    Under ASan its runtime must come first in LD_PRELOAD."""
    build = os.environ.get("PODMUX_BUILDDIR")
    if not build:
        t.skip("PODMUX_BUILDDIR unset: the iofault shim is built by make "
               "check")
    shim = os.path.join(build, "tests", "integration", ".libs",
                        "libiofault.so")
    if not os.path.exists(shim):
        raise AssertionError("%s is missing: make check builds it" % shim)
    preload = [shim]
    if os.environ.get("PODMUX_SANITIZED"):
        cc = shlex.split(os.environ.get("CC") or "cc")
        try:
            asan = subprocess.run(cc + ["-print-file-name=libasan.so"],
                                  capture_output=True, text=True,
                                  timeout=T_SHORT).stdout.strip()
        except (OSError, subprocess.SubprocessError) as e:
            asan = repr(e)
        if not os.path.isabs(asan) or not os.path.exists(asan):
            t.skip("sanitizer build: libasan, which must come first in "
                   "LD_PRELOAD, not found (%s -print-file-name=libasan.so "
                   "said %r)" % (" ".join(cc), asan))
        preload.insert(0, asan)
    return {"LD_PRELOAD": " ".join(preload), "PODMUX_IOFAULT_FILE": control}


def write_iofault(control, faults):
    """The iofault shim's control file: faults maps a path to (call,
    errno); written by rename, so the daemon never reads half of it."""
    with open(control + ".tmp", "w") as f:
        for path, (call, err) in sorted(faults.items()):
            f.write("%s %d %s\n" % (call, err, path))
    os.rename(control + ".tmp", control)


class Probe:
    """A relist barrier.  A pinned-uid pod whose manifest in the watched
    directory is a symlink to a file outside it: changing the target is
    seen by no watch, only by a relist.  barrier() changes a label and waits
    until the consumer holds the new label, so everything a relist reads
    (every file written before the call) has been through one relist."""

    UID = "0e5c6b7a-0000-4000-8000-00000000beef"

    def __init__(self, t, manifest_dir, name="probe", node=NODE):
        self.t = t
        self.name = name
        self.node = node
        self.round = 0
        outside = t.mkdir("outside-probe")
        self.target = os.path.join(outside, "%s.yaml" % name)
        self._write()
        self.link = os.path.join(manifest_dir, "zz-%s.yaml" % name)
        os.symlink(self.target, self.link)

    def _write(self):
        write_file(self.target, pod_yaml(self.name, image="busybox:1.36",
                                         uid=self.UID,
                                         labels={"round": str(self.round)}))

    def pod_name(self):
        return pn(self.name, self.node)

    def barrier(self, c, timeout=None):
        self.round += 1
        self._write()
        want = str(self.round)

        def ok(s):
            return any(pod_labels(p).get("round") == want
                       for p in s.by_name(self.pod_name()))
        c.wait_state(ok, "after a relist (probe round %s)" % want,
                     timeout or T_WAIT)


# ---- helpers shared by the test files ---------------------------------------

def quiet(c, secs=0.4):
    """Reads whatever arrives on consumer c within secs (scaled: it shows
    an absence); returns the messages."""
    out = []
    end = time.monotonic() + secs * SCALE
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return out
        try:
            out.append(c.recv(left))
        except ConsumerClosed:
            raise
        except AssertionError as e:
            if "no message within" in str(e):
                return out
            raise


def open_for_a_second(srv, since=0):
    """Waits for an open watch on the fake API server srv and until it has
    been open for over a second (closing it then is not a "very short
    watch", which would back off and relist); returns its log entry."""
    w = srv.wait_watch(since)
    # Not scaled: the daemon's rule is a second of wall-clock time.
    rest = 1.2 - (time.time() - w["t"])
    if rest > 0:
        time.sleep(rest)   # the rest of that second
    return w


def expect_true(cond, what):
    """Fails the test with what unless cond holds."""
    if not cond:
        raise AssertionError(what)


def index_of(c, op, uid, since=0, last=False):
    """The index in c.msgs (from since) of the first pods message op that
    carries uid, or of the last with last; None if there is none."""
    idx = [i for i, m in enumerate(c.msgs)
           if i >= since and m.get("type") == "pods" and m["op"] == op and
           uid in msg_uids(m)]
    if not idx:
        return None
    return idx[-1] if last else idx[0]


def check_sources(c, allowed, since=0):
    """Every pods message of c (from since) is from a source in allowed."""
    for m in c.pods_msgs(since):
        if m.get("source") not in allowed:
            raise AssertionError("unexpected source: %s" % summarize(m))


def bare_daemon(t, extra=(), manifest_path=None, default_registry=False):
    """A started `podmux run` with no file source unless manifest_path
    (t.daemon() always has one).  The plugin manager is off; with
    default_registry it runs with no --plugins-registry-dir (the default
    rule, allowed for this test) and the daemon is returned once a
    consumer is synced (the loop runs, the manager has made its
    directory: src/cmd/run.c starts it before the loop)."""
    if default_registry:
        t.allow_default_registry()
        d = Daemon(t, manifest_path, freq=None, plugins_dir=None,
                   extra=list(extra))
    else:
        d = Daemon(t, manifest_path, freq=None,
                   extra=list(extra) + ["--plugins-registry-dir", ""])
    t.daemons.append(d)
    d.start()
    if default_registry:
        d.connect().read_initial()
    return d


class Driven:
    """A program that answers commands on its standard input with one JSON
    line each (tests/client/chaos_client, the Go consumer): stopped by its
    PID when the test ends."""

    def __init__(self, t, argv, env=None, what="the consumer"):
        self.what = what
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True,
                                     env=env)
        t.procs.append(self.proc)
        self.lines = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.put(line)

    def tell(self, cmd):
        """A command without an answer."""
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()

    def ask(self, cmd):
        """A command and its answer, decoded."""
        self.tell(cmd)
        try:
            return json.loads(self.lines.get(timeout=T_WAIT))
        except queue.Empty:
            raise AssertionError("%s did not answer %r (%s)" % (
                self.what, cmd, self.proc.poll())) from None
