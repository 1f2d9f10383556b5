#!/usr/bin/env python3
"""The fleet simulation, small: scripts/fleet with 3 daemons of 5 pods over
TLS through the scenarios whose request counts are known whatever the
backoff does, so that the instrument (the fake API server's stats, the
synced check, the stop of everything) does not rot.  The figures of a real
run are timing, which belongs to scripts/bench --only fleet; here only
counts are checked."""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import BIN, SRCDIR, test  # noqa: E402

FLEET = os.path.join(SRCDIR, "scripts", "fleet")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") \
    else sys.executable
N = 3


def pids_alive(pids):
    out = []
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                if f.read().split(")")[-1].split()[0] != "Z":
                    out.append(pid)
        except OSError:
            pass
    return out


@test("fleet: 3 daemons against the fake API server; a cold start costs "
      "one LIST and one WATCH per node, churn and a server restart that "
      "kept its history no LIST, a lost history a LIST from every node, a "
      "restart of every daemon at most one LIST per node, a 429 "
      "window is answered 429 and counted, and LIST, WATCH and Event "
      "requests wait out its Retry-After (no early retry); every agent "
      "synced after each; nothing left running")
def test_fleet_counts(t):
    out = t.path("fleet.json")
    argv = [PYTHON, FLEET, "--binary", BIN, "--agents", str(N), "--pods",
            "5", "--scenarios",
            "cold,churn,restart_kept,restart_lost,upgrade,overload,"
            "overload_relist",
            "--churn", "2", "--churn-rate", "10", "--down", "0.5",
            # Longer than a LIST after a 410 can wait here (the backoff,
            # 1.6 s at most, and the spread of 1 s): every one meets it.
            "--overload", "3", "--retry-after", "1",
            # Bookmarks often, so a daemon resumed from its checkpoint is
            # confirmed soon; LISTs after a 410 spread over a second only.
            "--bookmark-interval", "0.5", "--daemon-arg=--relist-spread=1s",
            "--sync-timeout", str(int(harness.T_LONG * 2)), "--json", out]
    try:
        r = subprocess.run(argv, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, errors="replace",
                           timeout=harness.T_TEST - 10)
    except subprocess.TimeoutExpired as e:
        raise AssertionError("scripts/fleet did not finish: %s" % (
            e.stderr or "")[-3000:])
    if r.returncode != 0:
        raise AssertionError("scripts/fleet exited %d:\n%s\n%s" % (
            r.returncode, r.stdout[-3000:], r.stderr[-3000:]))
    with open(out) as f:
        res = json.load(f)["scenarios"]
    t.note("\n".join(r.stdout.splitlines()[-8:]))

    def check(name, cond, what):
        if not cond:
            raise AssertionError("%s: %s; figures: %s" % (
                name, what, json.dumps(res[name], sort_keys=True)))

    for name, s in res.items():
        check(name, s["synced"] == N and not s["laggards"],
              "every agent synced")
    cold = res["cold"]
    check("cold", cold["verbs"].get("LIST") == N and
          cold["lists_max_per_node"] == 1, "one LIST per node")
    check("cold", cold["verbs"].get("WATCH") == N, "one WATCH per node")
    check("cold", cold["handshakes"] == cold["connections"] >= N,
          "a TLS handshake per connection")
    check("cold", cold["list_bytes"] > 5 * N * 1000,
          "the LISTs' bytes counted (5 pods of about 2 KB per node)")
    check("churn", res["churn"]["verbs"].get("LIST", 0) == 0,
          "no LIST during churn")
    check("restart_kept", res["restart_kept"]["verbs"].get("LIST", 0) == 0,
          "no LIST when the history was kept")
    check("restart_kept", res["restart_kept"]["verbs"].get("WATCH", 0) >= N,
          "every watch resumed")
    lost = res["restart_lost"]
    check("restart_lost", lost["list_nodes"] == N,
          "every node LISTs once the history is lost")
    up = res["upgrade"]
    check("upgrade", up["lists_max_per_node"] <= 1,
          "at most one LIST per restarted daemon")
    ov = res["overload"]
    n429 = sum(v for k, v in ov["codes"].items() if k.endswith(" 429"))
    check("overload", n429 >= 1, "requests answered 429 are counted")
    # Every kind of request met the 429 and waited out its Retry-After:
    # the WATCHes and the Events (a rejected static pod) in overload, the
    # LISTs of the relist in overload_relist.
    for name, verbs in (("overload", ("WATCH", "POST events")),
                        ("overload_relist", ("LIST", "POST events"))):
        th = res[name]["throttled"]
        for verb in verbs:
            check(name, th.get(verb, {}).get("sent", 0) >= 1,
                  "%s requests answered 429" % verb)
        for verb, x in th.items():
            check(name, x["no_retry_after"] == 0,
                  "every %s 429 carried Retry-After" % verb)
            check(name, x["early"] == 0,
                  "no %s retried before its Retry-After" % verb)
    # The script stopped every daemon and the server it started.
    pids = []
    for ln in r.stderr.splitlines():
        if ln.startswith("fleet: pids "):
            pids = [int(x) for x in ln.split()[2:]]
    if not pids:
        raise AssertionError("scripts/fleet printed no pids line")
    left = pids_alive(pids)
    if left:
        raise AssertionError("still running after scripts/fleet: %s" % left)


if __name__ == "__main__":
    harness.main()
