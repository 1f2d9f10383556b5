#!/usr/bin/env python3
"""Chaos with ground truth, briefly: runs scripts/chaos (every source at
once, random file/URL/API/plugin churn, stalling and reconnecting
consumers, then two API-server outages with a daemon restart in each,
by SIGTERM and by SIGKILL, served from the checkpoint) in each --mode,
with 24 s of churn in incremental mode and 10 s in each snapshot mode (the
outages take the rest of the time the churn had), with a fixed seed and
op cap, and requires exit 0: every consumer's rebuilt state equals the
truth (during an outage: the checkpoint, which after SIGTERM is the last
live state), nothing duplicated, no fd leak, RSS bounded (the RSS bound
is not applied under PODMUX_SANITIZED=1, where the op rate is also
lower).  A longer run: scripts/chaos --duration 240 --seed N --mode all
--outages 6."""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
import plugin_harness  # noqa: E402
from harness import BIN, SRCDIR, test  # noqa: E402

SANITIZED = os.environ.get("PODMUX_SANITIZED") == "1"
CHAOS = os.path.join(SRCDIR, "scripts", "chaos")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") \
    else sys.executable


@test("chaos: random churn on every source with stalling and "
      "reconnecting consumers; each ends with exactly the true state, no "
      "duplicate op, no op the mode does not send, no fd leak, bounded RSS; "
      "then API-server outages with daemon restarts, the consumers holding "
      "the checkpoint, then the truth",
      params=("incremental", "snapshot-and-updates", "snapshot"))
def test_chaos_random_churn_every_source_stalling(t):
    if subprocess.run([plugin_harness.PLUGIN_PYTHON, "-c", "import grpc"],
                      capture_output=True).returncode != 0:
        t.skip("python3-grpcio is not installed (the fake plugins need it)")
    short = t.param != "incremental"
    argv = [PYTHON, CHAOS, "--binary", BIN, "--mode", t.param,
            "--duration", "10" if short else "24", "--outages", "2",
            "--seed", "4242", "--converge-timeout",
            "100" if SANITIZED else "60",
            # In the test's directory, kept when it fails: the source tree
            # may be read-only (make distcheck).
            "--log-dir", t.path("chaos-logs")]
    if SANITIZED:
        argv += ["--ops", "120" if short else "250", "--rate", "6"]
    else:
        argv += ["--ops", "400" if short else "800", "--rate", "20"]
    try:
        r = subprocess.run(argv, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, errors="replace",
                           timeout=harness.T_TEST - 10)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode("utf-8", "replace") if isinstance(
            e.stdout, bytes) else (e.stdout or "")
        raise AssertionError("scripts/chaos did not finish; output:\n" +
                             out[-4000:])
    lines = r.stdout.splitlines()
    for line in lines:
        if line.startswith(("chaos: ops", "chaos: consumers total",
                            "chaos: RSS", "chaos: fds", "chaos: fake API",
                            "chaos: converged", "chaos: wall",
                            "chaos: outage")):
            t.note(line)
    if r.returncode != 0:
        raise AssertionError(
            "scripts/chaos exited %d:\n%s\n%s" % (
                r.returncode, "\n".join(lines[-60:]), r.stderr[-2000:]))
    if os.environ.get("PODMUX_TEST_TIMING") == "1":
        for n in t.notes:
            print("# " + n)


if __name__ == "__main__":
    harness.main()
