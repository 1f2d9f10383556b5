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

import collections
import importlib.machinery
import importlib.util
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
import manifest_server  # noqa: E402
import plugin_harness  # noqa: E402
from harness import BIN, SRCDIR, T_LONG, T_WAIT, test  # noqa: E402

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


def load_chaos():
    """scripts/chaos as a module (its name has no .py)."""
    loader = importlib.machinery.SourceFileLoader("chaos", CHAOS)
    spec = importlib.util.spec_from_loader("chaos", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


class NoFiles:
    def truth(self):
        return {}, [], []


class NoPlugins:
    def truth(self):
        return {}


@test("chaos: the URL's truth at the end is a body the daemon received, "
      "though its poll of the last good body sent timed out (the server "
      "sent it all) and the URL then failed")
def test_chaos_http_truth_after_a_timed_out_poll(t):
    chaos = load_chaos()
    mode = "snapshot-and-updates"
    http = chaos.HttpWorld(t, random.Random(31), collections.Counter())
    try:
        metrics = t.path("metrics.sock")
        d = harness.Daemon(t, None, mode=mode, node=chaos.NODE, extra=[
            "--manifest-url", http.url, "--http-check-frequency", "1s",
            "--metrics-address", "unix:" + metrics]).start()

        def holds_truth():
            want, _, probs = chaos.expected_view(
                BIN, NoFiles(), http, chaos.Pods([]), NoPlugins(), mode,
                t.tmp)
            fresh = chaos.fresh_state(d.sock, mode)
            if probs or isinstance(fresh, str):
                raise AssertionError("%s %s" % (probs, fresh))
            have, probs = chaos.consumer_view(fresh[0], mode)
            return not probs and have == want and want

        harness.wait_for(holds_truth, T_WAIT, "the first body", interval=0.3)
        # A new body whose poll times out: the server writes all of it
        # (outcome "sent") but keeps the connection, and without a
        # Content-Length the daemon cannot know the body ended; its poll
        # timeout is its period (1 s).  Under load, a stalled daemon or
        # server does the same (issue 31, section 5).
        def errors():
            return chaos.scrape(metrics).get(
                'podmux_source_errors_total{source="http"}', 0)

        errors0 = errors()
        good = None
        while not good or not good.chaos_pods:
            http.set_good()
            good = http.srv._default
        good.content_length, good.linger = False, 2.0
        harness.wait_for(lambda: any(
            resp is good and req.outcome == "sent"
            for req, resp in list(http.srv.served)), T_WAIT,
            "the new body sent in full")
        harness.wait_for(lambda: errors() > errors0, T_WAIT,
                         "the daemon's poll to fail (time out)", interval=0.2)
        # The stall is over; the URL fails from here on, as it may when
        # the churn stops.
        good.content_length, good.linger = True, 0.0
        bad = manifest_server.Response(status=503, body=b"oops\n")
        bad.chaos_pods = None
        http.srv.serve(bad)
        failures = http.quiesce(metrics)
        if failures:
            raise AssertionError("; ".join(failures))
        harness.wait_for(holds_truth, T_LONG,
                         "the daemon to hold the URL's truth, the body sent "
                         "last in full", interval=0.3)
    finally:
        http.srv.stop()


if __name__ == "__main__":
    harness.main()
