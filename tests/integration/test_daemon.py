#!/usr/bin/env python3
"""The daemon as a process: no leak at exit under valgrind, no wake-ups when
idle, and README command 1 (scripts/demo) stopped cleanly by Ctrl-C."""

import os
import re
import shutil
import signal
import subprocess
import time

import harness
from harness import test, Daemon, write_file, pod_yaml, pn, BIN, SRCDIR

SANITIZED = os.environ.get("PODMUX_SANITIZED") == "1"


class ValgrindDaemon(Daemon):
    def __init__(self, t, m, log, **kw):
        super().__init__(t, m, **kw)
        self.vlog = log

    def argv(self):
        return ["valgrind", "--leak-check=full", "--show-leak-kinds=definite,indirect",
                "--errors-for-leak-kinds=definite,indirect", "--error-exitcode=99",
                "--log-file=" + self.vlog] + super().argv()


@test("valgrind: a daemon that served files and consumers exits 0 on SIGTERM with no leak and no memory error")
def test_valgrind_daemon_served_files_consumers_exits(t):
    if SANITIZED:
        t.skip("the sanitizer build is checked by ASan/LSan instead")
    if not shutil.which("valgrind"):
        t.skip("valgrind is not installed")
    m = t.mkdir("manifests")
    write_file(os.path.join(m, "a.yaml"), pod_yaml("alpha"))
    vlog = t.path("valgrind.log")
    d = ValgrindDaemon(t, m, vlog)
    t.daemons.append(d)
    d.start()
    c = d.connect(timeout=60)
    c.wait_until_state([pn("alpha")], timeout=60)
    write_file(os.path.join(m, "b.yaml"), pod_yaml("bravo"))
    c.wait_until_state([pn("alpha"), pn("bravo")], timeout=60)
    os.unlink(os.path.join(m, "a.yaml"))
    c.wait_until_state([pn("bravo")], timeout=60)
    write_file(os.path.join(m, "bad.yaml"), "kind: [")
    d.wait_file_error(os.path.join(m, "bad.yaml"), timeout=60)
    c2 = d.connect(timeout=60)
    c2.wait_until_state([pn("bravo")], timeout=60)
    rc = d.stop(timeout=60)
    with open(vlog) as f:
        report = f.read()
    lost = re.findall(r"(definitely|indirectly) lost: ([\d,]+) bytes", report)
    errors = re.search(r"ERROR SUMMARY: (\d+) errors", report)
    assert rc == 0, "exit status %r; valgrind says:\n%s" % (rc, report[-3000:])
    assert errors and errors.group(1) == "0", report[-3000:]
    assert all(n == "0" for _, n in lost), report[-3000:]


def ctxt_switches(pid):
    """Voluntary + involuntary context switches of every thread of pid."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
            for line in f:
                if "ctxt_switches" in line:
                    total += int(line.split()[1])
    return total


@test("an idle daemon does not wake up: no thread is scheduled while nothing happens and no timer is due")
def test_idle_daemon_does_wake_up_no(t):
    m = t.mkdir("manifests")
    write_file(os.path.join(m, "a.yaml"), pod_yaml("alpha"))
    d = t.daemon(m, freq="1h")
    c = d.connect()
    c.wait_until_state([pn("alpha")])
    # Start-up is over (the consumer's flush, the watch settling) once a
    # quarter of a second goes by without the daemon being scheduled.
    def idle():
        n = ctxt_switches(d.pid)
        time.sleep(0.25)   # sampled a quarter of a second apart
        return ctxt_switches(d.pid) == n
    harness.wait_for(idle, harness.T_WAIT, "the daemon to go idle", interval=0)
    before = ctxt_switches(d.pid)
    harness.settle(2.0)   # then nothing at all for 2 s (scaled)
    after = ctxt_switches(d.pid)
    assert after == before, "the idle daemon was scheduled %d times in 2 s" % (after - before)


@test("README command 1 (scripts/demo): serves manifests/, the consumer shows the example pods, Ctrl-C stops both and removes the socket")
def test_readme_command_1_scripts_demo_serves(t):
    if SANITIZED:
        t.skip("scripts/demo builds its own plain binary; run once, in the plain suite")
    if not os.access(SRCDIR, os.W_OK):
        t.skip("read-only source tree (make distcheck): the demo writes under the checkout")
    demo_build = os.path.join(SRCDIR, "build", "demo")
    if not os.path.exists(os.path.join(demo_build, "podmux")):
        # The demo builds into build/demo; reuse this build's binary there
        # rather than configuring a third tree inside the suite.
        os.makedirs(demo_build, exist_ok=True)
    env = dict(os.environ, PODMUX_DEMO_BIN=BIN, PODMUX_NODE="demo-node")
    # As root, in a /var/lib of the test's own (tests/integration/harness.py):
    # teardown fails the test if the demo created /var/lib/kubelet.
    argv = t.confine(["/bin/sh", os.path.join(SRCDIR, "scripts", "demo")])
    def wait_hint(out):
        # The hint to podmux wait, and the command it gives works.
        hint = re.search(rb"  (\S+) wait --socket (\S+) (\S+)\r?\n", out)
        if not hint:
            raise AssertionError("the demo gives no podmux wait hint:\n%s" %
                                 out.decode(errors="replace")[-2000:])
        r = subprocess.run([hint.group(1).decode(), "wait", "--socket",
                            hint.group(2).decode(), hint.group(3).decode()],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0 or "applied" not in r.stdout:
            raise AssertionError("the demo's wait hint: exit %d: %r %r" %
                                 (r.returncode, r.stdout, r.stderr))
    out = harness.demo_on_pty(argv, env, 120, before_stop=wait_hint)
    sock = os.path.join(demo_build, "podmux.sock")
    assert not os.path.exists(sock), "the demo left its socket behind"
    assert b"SIGINT" in out or b"ShuttingDown" in out or \
        b"shutting down" in out, out.decode(errors="replace")[-2000:]

if __name__ == "__main__":
    harness.main()
