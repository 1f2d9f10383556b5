#!/usr/bin/env python3
"""Integration tests of the per-file records (issue 26): what the daemon
made of each file it has seen (podmux status --files, the status
message's "files" member, the files request of doc/protocol.md),
podmux wait, and --static-pod-file-pattern; against the real binary.

Every wait is bounded by a generous timeout (harness.T_*), never an
assertion on speed.  Select tests by substring on the command line."""

import errno
import hashlib
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import (MODES, NODE, T_WAIT, Consumer, msg_uids, pn,  # noqa: E402
                     pod_labels, pod_uid, pod_yaml, read_fixture, test,
                     wait_for, write_file)

FILES_LINE = '{"request":"files"}'
VALIDATE_ERR = re.compile(r'^podmux validate: ("(?:[^"\\]|\\.)*"): (.*)$')
VALIDATE_LINE = re.compile(r'^("(?:[^"\\]|\\.)*"): (\S+)/(\S+) uid=(\S+) ')
WAIT_APPLIED = re.compile(r'^("(?:[^"\\]|\\.)*"): applied (\S+)/(\S+) uid=(\S+) seq=(\d+)$')
WAIT_GONE = re.compile(r'^("(?:[^"\\]|\\.)*"): gone seq=(\S+)$')


# ---------------------------------------------------------------------------
# Helpers

def sha(path):
    with open(path, "rb") as f:
        return "sha256:" + hashlib.sha256(f.read()).hexdigest()


def records(t, d):
    """podmux status --files -o json: {path or url: record}."""
    r = t.run_cmd(["status", "--socket", d.sock, "--files", "-o", "json"])
    if r.returncode != 0:
        raise AssertionError("status --files: exit %d: %s" %
                             (r.returncode, r.stderr))
    return {x.get("path") or x.get("url"): x for x in json.loads(r.stdout)}


def wait_records(t, d, pred, what):
    """Polls status --files until pred(records) holds; returns them."""
    got = [None]

    def ok():
        got[0] = records(t, d)
        return pred(got[0])
    try:
        wait_for(ok, T_WAIT, what, interval=0.05)
    except AssertionError as e:
        raise AssertionError("%s; records: %s" % (e, json.dumps(got[0])[:2000]))
    return got[0]


def state_of(recs, path):
    return recs[path]["state"] if path in recs else None


def validate_uid(t, path):
    """The UID podmux validate gives the file as it is now."""
    r = t.run_cmd(["validate", "--offline", "--node-name", NODE, path])
    m = VALIDATE_LINE.match(r.stdout.strip())
    if not m:
        raise AssertionError("validate %s: %r %r" % (path, r.stdout, r.stderr))
    return m.group(4)


def validate_reason(t, path):
    r = t.run_cmd(["validate", "--offline", "--node-name", NODE, path])
    for line in r.stderr.splitlines():
        m = VALIDATE_ERR.match(line)
        if m and json.loads(m.group(1)) == path:
            return m.group(2)
    raise AssertionError("validate gave no reason for %s: %r" % (path, r.stderr))


def wait_cmd(t, d, *args, timeout=None):
    return t.run_cmd(["wait", "--socket", d.sock] + list(args),
                     timeout=timeout or T_WAIT + 10)


def applied_in(lines, path):
    """The applied line podmux wait printed for path: key, uid, seq."""
    for line in lines:
        m = WAIT_APPLIED.match(line)
        if m and json.loads(m.group(1)) == path:
            return {"key": "%s/%s" % (m.group(2), m.group(3)),
                    "uid": m.group(4), "seq": int(m.group(5))}
    raise AssertionError("wait printed no applied line for %s: %r" %
                         (path, lines))


def applied_line(r, path):
    return applied_in(r.stdout.splitlines(), path)


def files_consumers(t, d):
    """How many files consumers the daemon serves (from its status)."""
    r = t.run_cmd(["status", "--socket", d.sock, "-o", "json"])
    st = json.loads(r.stdout)
    return sum(1 for c in st["consumers"] if c.get("stream") == "files"
               and c.get("state") == "live")


def spawn_wait(t, d, *args):
    """A podmux wait, once the daemon serves its files request."""
    before = files_consumers(t, d)
    w = t.spawn(["wait", "--socket", d.sock] + list(args))
    wait_for(lambda: w.poll() is not None or files_consumers(t, d) > before,
             T_WAIT, "podmux wait to subscribe")
    return w


def carried_by(c, seq):
    """The pods message numbered seq that c receives (or received)."""
    for m in c.msgs:
        if m.get("type") == "pods" and m.get("seq") == seq:
            return m
    return c.expect(lambda m: m.get("type") == "pods" and m.get("seq") == seq,
                    "the pods message numbered %d" % seq)


# ---------------------------------------------------------------------------
# Per-file records

@test("status --files and the status message: every state a file can be "
      "in, the rejection in podmux validate's words, the duplicate naming "
      "the file that holds the pod, what is ignored and why; the applied "
      "record's digest, UID and the seq of the message that carried it")
def test_status_files_status_message_every_state(t):
    m = t.mkdir("m")
    web = write_file(os.path.join(m, "web.yaml"), pod_yaml("web"))
    bad = write_file(os.path.join(m, "bad.yaml"),
                     read_fixture("bad", "syntax-error.yaml"))
    dup = write_file(os.path.join(m, "web2.yaml"),
                     pod_yaml("web", image="other:1"))
    write_file(os.path.join(m, ".hidden.yaml"), pod_yaml("hidden"))
    os.mkdir(os.path.join(m, "sub"))
    d = t.daemon(m)
    c = d.connect()
    c.wait_until_state([pn("web")])
    recs = wait_records(t, d, lambda r: state_of(r, web) == "applied" and
                        len(r) == 5, "five records, web.yaml applied")
    hidden, sub = os.path.join(m, ".hidden.yaml"), os.path.join(m, "sub")
    got = {p: recs[p]["state"] for p in recs}
    assert got == {web: "applied", bad: "rejected", dup: "duplicate",
                   hidden: "ignored", sub: "ignored"}, got
    assert recs[bad]["reason"] == validate_reason(t, bad), \
        (recs[bad]["reason"], validate_reason(t, bad))
    assert recs[bad]["digest"] == sha(bad)
    assert web in recs[dup]["reason"] and "is already defined by" in \
        recs[dup]["reason"], recs[dup]
    assert recs[dup]["pods"][0]["name"] == pn("web")
    assert recs[dup]["pods"][0]["uid"] == validate_uid(t, dup)
    assert "dot file" in recs[hidden]["reason"], recs[hidden]
    assert "directory" in recs[sub]["reason"], recs[sub]
    a = recs[web]
    assert a["digest"] == sha(web) and a["size"] == os.path.getsize(web), a
    assert a["pods"] == [{"namespace": "default", "name": pn("web"),
                          "uid": validate_uid(t, web)}], a
    assert a["reason"] is None and a["mtime"], a
    # Sent before this consumer's initial state (which then has it), or in
    # a message it saw.
    assert a["seq"] < c.initial_seq() or a["seq"] in [
        m["seq"] for m in c.pods_msgs()], (a, c.msgs)
    # The status message: the counts, the records not applied first.
    st = json.loads(t.run_cmd(["status", "--socket", d.sock, "-o",
                               "json"]).stdout)
    files = st["files"]
    assert files["total"] == 5 and files["omitted"] == 0, files
    assert files["states"] == {"pending": 0, "applied": 1, "rejected": 1,
                               "duplicate": 1, "ignored": 2, "unreadable": 0}, files
    assert [r["state"] for r in files["records"]][-1] == "applied", files
    text = t.run_cmd(["status", "--socket", d.sock]).stdout
    assert "FILES (5):" in text and bad in text and recs[bad]["reason"] in \
        text, text
    text = t.run_cmd(["status", "--socket", d.sock, "--files"]).stdout
    for p in (web, bad, dup, hidden, sub):
        assert p in text, (p, text)


@test("the files request streams each change of a record; the seq of an "
      "applied record is the pods message that carried that version of "
      "the pod; bytes that make the same pod are applied at once with "
      "the same seq; a file removed is pending, then gone", params=MODES)
def test_files_request_streams_each_change_record(t):
    m = t.mkdir("m")
    d = t.daemon(m)
    c = d.connect(threaded=True)
    c.read_initial()
    f = Consumer(t, d.sock, first_line=FILES_LINE)
    f.expect_type("synced")
    a = write_file(os.path.join(m, "a.yaml"), pod_yaml("a", labels={"v": "1"}))

    def applied(digest):
        return f.expect(lambda x: x.get("type") == "file" and
                        x["file"]["path"] == a and
                        x["file"]["state"] == "applied" and
                        x["file"]["digest"] == digest,
                        "a.yaml applied with %s" % digest)["file"]
    r1 = applied(sha(a))
    m1 = carried_by(c, r1["seq"])
    assert any(pod_uid(p) == r1["pods"][0]["uid"] and
               pod_labels(p).get("v") == "1" for p in m1["pods"]), m1
    write_file(a, pod_yaml("a", labels={"v": "2"}))
    r2 = applied(sha(a))
    assert r2["seq"] > r1["seq"]
    m2 = carried_by(c, r2["seq"])
    assert any(pod_labels(p).get("v") == "2" for p in m2["pods"]), m2
    write_file(a, "# only a comment more\n" + pod_yaml("a", labels={"v": "2"}))
    r3 = applied(sha(a))
    assert r3["seq"] == r2["seq"], (r2, r3)
    os.unlink(a)
    f.expect(lambda x: x.get("type") == "file" and x["file"]["path"] == a and
             x["file"]["state"] == "pending" and x["file"]["digest"] is None,
             "a.yaml pending, gone from disk")
    g = f.expect(lambda x: x.get("type") == "file" and
                 x["file"]["path"] == a and x["file"]["state"] == "gone",
                 "a.yaml gone")["file"]
    c.wait_until_state([])
    removed = [x["seq"] for x in c.pods_msgs() if x["op"] in ("REMOVE", "SET")
               and r1["pods"][0]["uid"] not in msg_uids(x)]
    assert g["seq"] is not None and g["seq"] >= max(
        s for s in removed if s > r3["seq"]), (g, removed)
    # Only file messages reach a files consumer.
    assert {x["type"] for x in f.msgs} <= {"hello", "files", "file",
                                           "synced"}, f.msgs


@test("the status message holds at most 200 records, those not applied "
      "first, with the counts of all; status --files lists every one")
def test_status_message_holds_most_200_records(t):
    m = t.mkdir("m")
    for i in range(200):
        write_file(os.path.join(m, "p%03d.yaml" % i), pod_yaml("p%03d" % i))
    for i in range(5):
        write_file(os.path.join(m, "zz-bad%d.yaml" % i), "kind: Pod\n")
    d = t.daemon(m)
    c = d.connect()
    c.wait_state(lambda s: len(s.names()) == 200, "200 pods", timeout=T_WAIT)

    def settled():
        st = json.loads(t.run_cmd(["status", "--socket", d.sock, "-o",
                                   "json"]).stdout)
        return st["files"] if st["files"]["states"]["applied"] == 200 \
            else None
    files = wait_for(settled, T_WAIT, "200 applied")
    assert files["total"] == 205 and files["omitted"] == 5, \
        {k: files[k] for k in ("total", "omitted", "states")}
    assert len(files["records"]) == 200
    assert [r["state"] for r in files["records"][:5]] == ["rejected"] * 5
    assert all(r["state"] == "applied" for r in files["records"][5:])
    assert len(records(t, d)) == 205


# ---------------------------------------------------------------------------
# podmux wait

@test("podmux wait right after each of 20 writes returns the outcome of "
      "the bytes written (their UID) with a growing seq; a wait that "
      "begins after the outcome returns at once")
def test_podmux_wait_right_after_each_20(t):
    m = t.mkdir("m")
    d = t.daemon(m, freq="1h")
    web = os.path.join(m, "web.yaml")
    last = 0
    for i in range(20):
        write_file(web, pod_yaml("web", labels={"round": str(i)}),
                   atomic=bool(i % 2))
        r = wait_cmd(t, d, web)
        assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
        got = applied_line(r, web)
        assert got["uid"] == validate_uid(t, web), (i, got)
        assert got["key"] == "default/" + pn("web") and got["seq"] > last
        last = got["seq"]
    r = wait_cmd(t, d, web)
    assert r.returncode == 0 and applied_line(r, web)["seq"] == last


@test("podmux wait started before the file is written returns once it is "
      "applied; two files at once")
def test_podmux_wait_started_before_file_written(t):
    m = t.mkdir("m")
    d = t.daemon(m, freq="1h")
    a, b = os.path.join(m, "a.yaml"), os.path.join(m, "b.json")
    w = spawn_wait(t, d, a, b)
    write_file(a, pod_yaml("a"))
    write_file(b, harness.pod_json("b"))
    assert w.wait() == 0, (w.lines(), w.err_lines())
    assert applied_in(w.lines(), a)["uid"] == validate_uid(t, a)
    assert applied_in(w.lines(), b)["uid"] == validate_uid(t, b)


@test("podmux wait on a rejected file exits 1 with podmux validate's "
      "reason; on a duplicate, naming the file holding the pod; the "
      "holder exits 0")
def test_podmux_wait_rejected_file_exits_1(t):
    m = t.mkdir("m")
    d = t.daemon(m)
    bad = write_file(os.path.join(m, "bad.yaml"),
                     read_fixture("bad", "missing-image.yaml"))
    r = wait_cmd(t, d, bad)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert ("rejected: " + validate_reason(t, bad)) in r.stderr, r.stderr
    a = write_file(os.path.join(m, "a.yaml"), pod_yaml("same"))
    b = write_file(os.path.join(m, "b.yaml"), pod_yaml("same", image="x:2"))
    r = wait_cmd(t, d, b)
    assert r.returncode == 1 and "duplicate: " in r.stderr and \
        ('"%s"' % a) in r.stderr, (r.returncode, r.stderr)
    r = wait_cmd(t, d, a, b)
    assert r.returncode == 1 and applied_line(r, a), (r.stdout, r.stderr)
    os.unlink(a)
    r = wait_cmd(t, d, b)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    assert applied_line(r, b)["uid"] == validate_uid(t, b)


@test("podmux wait and rapid rewrites: after a burst, the last version's "
      "outcome; during one, a version written after the wait began, and "
      "the daemon then holds the last")
def test_podmux_wait_rapid_rewrites_after_burst(t):
    m = t.mkdir("m")
    d = t.daemon(m, freq="1h")
    c = d.connect()
    f = os.path.join(m, "r.yaml")
    for i in range(30):
        write_file(f, pod_yaml("r", labels={"v": str(i)}), atomic=i % 3 != 0)
    r = wait_cmd(t, d, f)
    assert r.returncode == 0 and applied_line(r, f)["uid"] == \
        validate_uid(t, f), (r.stdout, r.stderr)
    w = spawn_wait(t, d, os.path.join(m, "s.yaml"))
    s = os.path.join(m, "s.yaml")
    uids = set()
    for i in range(30):
        write_file(s, pod_yaml("s", labels={"v": str(i)}), atomic=i % 3 != 0)
        uids.add(validate_uid(t, s))
    assert w.wait() == 0, (w.lines(), w.err_lines())
    got = applied_in(w.lines(), s)
    assert got["uid"] in uids, (got, uids)
    c.wait_state(lambda st: any(pod_uid(p) == validate_uid(t, s)
                                for p in st.by_name(pn("s"))),
                 "the last version of s.yaml")


@test("podmux wait outlives a daemon restart: it reconnects and returns "
      "the new daemon's outcome")
def test_podmux_wait_outlives_daemon_restart_reconnects(t):
    m = t.mkdir("m")
    d = t.daemon(m)
    x = os.path.join(m, "x.yaml")
    w = spawn_wait(t, d, "--timeout", "%ds" % int(T_WAIT * 3), x)
    d.stop()
    write_file(x, pod_yaml("x"))
    assert w.poll() is None, (w.lines(), w.err_lines())
    d.start()
    assert w.wait(timeout=T_WAIT * 3) == 0, (w.lines(), w.err_lines())
    assert applied_in(w.lines(), x)["uid"] == validate_uid(t, x)


@test("podmux wait --gone returns once the file's pod is removed, with a "
      "seq after the message that removed it; at once for a file the "
      "daemon does not have")
def test_podmux_wait_gone_returns_once_file(t):
    m = t.mkdir("m")
    d = t.daemon(m, freq="1h")
    c = d.connect(threaded=True)
    x = write_file(os.path.join(m, "x.yaml"), pod_yaml("x"))
    c.wait_until_state([pn("x")])
    assert wait_cmd(t, d, x).returncode == 0
    uid = validate_uid(t, x)
    w = spawn_wait(t, d, "--gone", x)
    os.unlink(x)
    assert w.wait() == 0, (w.lines(), w.err_lines())
    g = WAIT_GONE.match(w.lines()[-1])
    assert g and json.loads(g.group(1)) == x, w.lines()
    c.wait_until_state([])
    removed = [mm["seq"] for mm in c.pods_msgs()
               if mm["op"] == "REMOVE" and uid in msg_uids(mm)]
    assert removed and int(g.group(2)) >= removed[0], (g.group(2), removed)
    never = os.path.join(m, "never.yaml")
    r = wait_cmd(t, d, "--gone", x, never)
    assert r.returncode == 0 and r.stdout.count(" gone seq=") == 2, r.stdout
    # No message removed a pod of a file the daemon never had (podmux(8)).
    assert ("%s: gone seq=-" % json.dumps(never)) in r.stdout.splitlines(), \
        r.stdout


@test("podmux wait times out with exit 3 saying what it knows: a file "
      "never written, a daemon that does not answer")
def test_podmux_wait_times_out_exit_3(t):
    m = t.mkdir("m")
    d = t.daemon(m)
    n = os.path.join(m, "never.yaml")
    r = wait_cmd(t, d, "--timeout", "1s", n)
    assert r.returncode == 3 and "timed out" in r.stderr and \
        "does not exist" in r.stderr, (r.returncode, r.stderr)
    r = t.run_cmd(["wait", "--socket", t.path("nobody.sock"), "--timeout",
                   "1s", n])
    assert r.returncode == 3 and "cannot connect" in r.stderr, \
        (r.returncode, r.stderr)


@test("podmux wait exits 4 when the daemon cannot answer (a file outside "
      "its static pod path, no static pod path) and 2 on bad flags; "
      "--help gives the exit statuses")
def test_podmux_wait_exits_4_daemon_cannot(t):
    m = t.mkdir("m")
    d = t.daemon(m)
    r = wait_cmd(t, d, "/etc/hostname")
    assert r.returncode == 4 and "not in the daemon's static pod path" in \
        r.stderr, (r.returncode, r.stderr)
    d2 = t.daemon(None, socket_path=t.path("other.sock"), start=False)
    d2.manifest_path = None
    d2.start()
    r = t.run_cmd(["wait", "--socket", d2.sock, os.path.join(m, "a.yaml")])
    assert r.returncode == 4 and "no static pod path" in r.stderr, \
        (r.returncode, r.stderr)
    for args, words in ((["--timeout", "soon", "x"], "--timeout"),
                        ([], "no FILE"), (["--bogus", "x"], "--bogus")):
        r = t.run_cmd(["wait"] + args)
        assert r.returncode == 2 and words in r.stderr, (args, r.stderr)
    h = t.run_cmd(["wait", "--help"]).stdout
    for s in ("Exit status: 0", "1 some FILE rejected", "3 timed out",
              "4 the daemon cannot"):
        assert s in h, (s, h)


@test("podmux wait given one file twice (the same spelling, or another "
      "that cleans to it) prints an outcome for each argument, applied or "
      "with --gone, instead of timing out")
def test_podmux_wait_same_file_twice_outcome_each(t):
    m = t.mkdir("m")
    d = t.daemon(m)
    web = write_file(os.path.join(m, "web.yaml"), pod_yaml("web"))
    uid = validate_uid(t, web)
    for args, cwd in (([web, web], None), (["web.yaml", "./web.yaml"], m),
                      ([web, "web.yaml", "./web.yaml"], m)):
        r = t.run_cmd(["wait", "--socket", d.sock, "--timeout", "10s"] + args,
                      cwd=cwd, timeout=T_WAIT + 10)
        assert r.returncode == 0, (args, r.returncode, r.stdout, r.stderr)
        lines = r.stdout.splitlines()
        assert len(lines) == len(args), (args, lines)
        for line in lines:
            assert applied_in([line], web)["uid"] == uid, (args, line)
    os.unlink(web)
    r = wait_cmd(t, d, "--timeout", "10s", "--gone", web, web)
    assert r.returncode == 0 and r.stdout.count(" gone seq=") == 2, \
        (r.returncode, r.stdout, r.stderr)


@test("podmux wait on a file the daemon cannot read (EACCES, EIO) waits "
      "while the daemon tries again, saying once on stderr why (with the "
      "errno) and which pod is kept; exit 0 once it is read, exit 3 at the "
      "timeout naming the error, also for a file never read")
def test_podmux_wait_unreadable_file_waits_and_says_why(t):
    m = t.mkdir("m")
    control = t.path("iofault.control")
    harness.write_iofault(control, {})
    d = t.daemon(m, freq="1h", env=harness.iofault_env(t, control))
    a = write_file(os.path.join(m, "a.yaml"), pod_yaml("a"))
    r = wait_cmd(t, d, a)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    uid0 = applied_line(r, a)["uid"]

    # New bytes the daemon cannot open: it keeps the pod of the old ones
    # and tries again; the wait says so once and goes on.
    harness.write_iofault(control, {a: ("open", errno.EACCES)})
    write_file(a, pod_yaml("a", labels={"v": "2"}))
    w = spawn_wait(t, d, "--timeout", "0", a)
    said = re.compile(r'^podmux wait: "%s": the daemon cannot read it: '
                      r'.*Permission denied \(errno %d\); it keeps the pod '
                      r'it last read, default/a-%s uid=%s, and tries again: '
                      r'waiting$' % (re.escape(a), errno.EACCES, NODE, uid0))
    wait_for(lambda: any(said.match(x) for x in w.err_lines()), T_WAIT,
             "podmux wait to say the daemon cannot read %s" % a)
    # The daemon's retries (1 s, then 2 s) fail again: nothing more said.
    wait_records(t, d, lambda recs: recs[a]["state"] == "unreadable",
                 "a.yaml unreadable")
    assert w.poll() is None, (w.poll(), w.lines(), w.err_lines())
    harness.write_iofault(control, {})
    assert w.wait() == 0, (w.lines(), w.err_lines())
    assert applied_in(w.lines(), a)["uid"] == validate_uid(t, a)
    assert len(w.err_lines()) == 1, w.err_lines()

    # Never read (read() failing with EIO from its creation): no pod
    # kept; the timeout names the error.
    n = os.path.join(m, "n.yaml")
    harness.write_iofault(control, {n: ("read", errno.EIO)})
    write_file(n, pod_yaml("n"))
    wait_records(t, d, lambda recs: recs.get(n, {}).get("state") ==
                 "unreadable", "n.yaml unreadable")
    r = wait_cmd(t, d, "--timeout", "2s", n)
    assert r.returncode == 3, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 2 and lines[0] == (
        'podmux wait: "%s": the daemon cannot read it: read: Input/output '
        'error (errno %d); no pod of it, tries again: waiting' % (
            n, errno.EIO)) and lines[1] == (
        'podmux wait: "%s": timed out: the daemon cannot read it: read: '
        'Input/output error (errno %d)' % (n, errno.EIO)), lines


@test("a file the daemon cannot read that holds no pod says why in the "
      "log: never read, or a duplicate (or refused) when last read; the "
      "pod of the file that holds it stays")
def test_unreadable_without_pod_says_why(t):
    m = t.mkdir("m")
    control = t.path("iofault.control")
    harness.write_iofault(control, {})
    a = write_file(os.path.join(m, "a.yaml"), pod_yaml("a"))
    dup = write_file(os.path.join(m, "b.yaml"), pod_yaml("a", image="other:1"))
    bad = write_file(os.path.join(m, "c.yaml"),
                     read_fixture("bad", "syntax-error.yaml"))
    d = t.daemon(m, freq="1h", env=harness.iofault_env(t, control))
    c = d.connect()
    c.wait_until_state([pn("a")])
    recs = wait_records(t, d, lambda r: state_of(r, dup) == "duplicate" and
                        state_of(r, bad) == "rejected", "b.yaml a duplicate")
    uid_a, since = recs[a]["pods"][0]["uid"], len(c.msgs)

    n = os.path.join(m, "n.yaml")
    harness.write_iofault(control, {dup: ("read", errno.EIO),
                                    bad: ("read", errno.EIO),
                                    n: ("read", errno.EIO)})
    for p, body in ((dup, pod_yaml("a", image="other:2")),
                    (bad, pod_yaml("c")), (n, pod_yaml("n"))):
        write_file(p, body)
    wait_records(t, d, lambda r: all(state_of(r, p) == "unreadable"
                                     for p in (dup, bad, n)),
                 "three files unreadable")
    for p, why in ((dup, "a duplicate when last read"),
                   (bad, "refused when last read"), (n, "never read")):
        lines = [x.msg for x in d.file_errors(p) if "cannot be read" in x.msg]
        assert len(lines) == 1 and ("no pod to keep (%s)" % why) in \
            lines[0], (p, lines)
    # The pod of a.yaml stayed; nothing of the others came (a file
    # written last brings every message before it).
    write_file(os.path.join(m, "z.yaml"), pod_yaml("z"))
    c.wait_until_state([pn("a"), pn("z")])
    c.assert_kept([uid_a], since)
    assert [m["op"] for m in c.pods_msgs(since)] == ["ADD"], \
        c.pods_msgs(since)


@test("podmux wait on the static pod directory itself exits 4 at once, "
      "saying to wait on the manifests in it; with a single file as the "
      "static pod path, the file itself is waited on")
def test_podmux_wait_on_directory_exits_4(t):
    m = t.mkdir("m")
    write_file(os.path.join(m, "a.yaml"), pod_yaml("a"))
    d = t.daemon(m)
    for arg in (m, m + "/", m + "/."):
        r = wait_cmd(t, d, "--timeout", "10s", arg)
        assert r.returncode == 4 and "static pod directory" in r.stderr and \
            "wait on the manifests in it" in r.stderr, \
            (arg, r.returncode, r.stderr)
    r = wait_cmd(t, d, "--timeout", "10s", m, os.path.join(m, "a.yaml"))
    assert r.returncode == 4 and r.stdout == "", (r.returncode, r.stdout)
    one = write_file(t.path("one.yaml"), pod_yaml("one"))
    d2 = t.daemon(one, socket_path=t.path("one.sock"))
    r = t.run_cmd(["wait", "--socket", d2.sock, "--timeout", "10s", one])
    assert r.returncode == 0 and applied_line(r, one)["uid"] == \
        validate_uid(t, one), (r.returncode, r.stdout, r.stderr)


@test("a file whose name is not UTF-8 is named byte for byte: its record "
      "carries path_hex, podmux wait returns its outcome, applied or "
      "--gone; in a static pod directory whose own name is not UTF-8 too")
def test_podmux_wait_name_not_utf8(t):
    for dname in (b"m", b"m\xfe"):
        m = os.fsdecode(os.path.join(os.fsencode(t.path("")), dname))
        os.mkdir(m)
        d = t.daemon(m, socket_path=t.path(os.fsdecode(dname[:1]) +
                                           str(len(dname)) + ".sock"))
        raw = os.path.join(os.fsencode(m), b"w\xffb.yaml")
        web = write_file(os.fsdecode(raw), pod_yaml("web"))
        ok = write_file(os.path.join(m, "ok.yaml"), pod_yaml("ok"))
        r = wait_cmd(t, d, "--timeout", "10s", web, ok)
        assert r.returncode == 0, (dname, r.returncode, r.stdout, r.stderr)
        lines = r.stdout.splitlines()
        assert len(lines) == 2, lines
        for line, f, name in ((lines[0], web, "web"), (lines[1], ok, "ok")):
            assert (" applied default/%s uid=%s " % (
                pn(name), validate_uid(t, f))) in line + " ", (f, line)
        # path_hex exactly when the name is not UTF-8; "path" shows it
        # with U+FFFD, as every other string of the stream.
        by_name = {}
        for x in records(t, d).values():
            b = bytes.fromhex(x["path_hex"]) if "path_hex" in x else \
                x["path"].encode()
            by_name[b] = x
            assert x["path"] == b.decode("utf-8", "replace"), x
            try:
                b.decode()
                assert "path_hex" not in x, x
            except UnicodeDecodeError:
                assert "path_hex" in x, x
        assert by_name[raw]["state"] == "applied" and \
            by_name[os.fsencode(ok)]["state"] == "applied", by_name
        # podmux validate finds the daemon's record of it the same way.
        v = t.run_cmd(["validate", "--node-name", NODE, "--socket", d.sock,
                       web])
        assert v.returncode == 0 and "note: the daemon: applied default/" \
            in v.stderr, (v.returncode, v.stderr)
        w = spawn_wait(t, d, "--timeout", "10s", "--gone", web)
        os.unlink(raw)
        assert w.wait() == 0, (w.lines(), w.err_lines())
        assert len(w.lines()) == 1 and " gone seq=" in w.lines()[0], \
            w.lines()


# ---------------------------------------------------------------------------
# --static-pod-file-pattern

@test("--static-pod-file-pattern: only matching names are read; a copy of "
      "a read file's pod left out is a duplicate, any other name left out "
      "is ignored, in status --files, podmux wait and podmux validate "
      "alike; without it every name not starting with '.' is read")
def test_static_pod_file_pattern_only_matching(t):
    m = t.mkdir("m")
    x = write_file(os.path.join(m, "x.yaml"), pod_yaml("x"))
    xs = write_file(os.path.join(m, "x.yaml~"), pod_yaml("x"))
    xb = write_file(os.path.join(m, "a.bak"), pod_yaml("x", image="old:1"))
    yb = write_file(os.path.join(m, "y.bak"), pod_yaml("y"))
    j = write_file(os.path.join(m, "j.json"), harness.pod_json("j"))
    d = t.daemon(m, extra=["--static-pod-file-pattern", "*.yaml",
                           "--static-pod-file-pattern", "*.json"])
    c = d.connect()
    c.wait_until_state([pn("x"), pn("j")])
    recs = wait_records(t, d, lambda r: state_of(r, x) == "applied" and
                        state_of(r, j) == "applied", "x and j applied")
    assert {p: recs[p]["state"] for p in (xs, xb, yb)} == {
        xs: "duplicate", xb: "duplicate", yb: "ignored"}, recs
    assert recs[yb]["reason"] == "does not match --static-pod-file-pattern"
    assert x in recs[xb]["reason"], recs[xb]
    r = wait_cmd(t, d, yb)
    assert r.returncode == 1 and \
        "ignored: does not match --static-pod-file-pattern" in r.stderr, \
        r.stderr
    r = t.run_cmd(["validate", "--offline", "--node-name", NODE,
                   "--static-pod-file-pattern", "*.yaml",
                   "--static-pod-file-pattern", "*.json", m])
    assert r.returncode == 1, (r.returncode, r.stderr)
    verdicts = {}
    for line in r.stderr.splitlines():
        mm = VALIDATE_ERR.match(line)
        verdicts[json.loads(mm.group(1))] = mm.group(2)
    assert "is already defined by" in verdicts[xs], verdicts
    assert "is already defined by" in verdicts[xb], verdicts
    assert verdicts[yb] == \
        "note: ignored: does not match --static-pod-file-pattern", verdicts
    # The holder goes: the copies are only ignored; it is back: duplicates.
    os.unlink(x)
    c.wait_until_state([pn("j")])
    wait_records(t, d, lambda r: state_of(r, xs) == "ignored" and
                 state_of(r, xb) == "ignored", "the copies ignored")
    write_file(x, pod_yaml("x"))
    c.wait_until_state([pn("x"), pn("j")])
    wait_records(t, d, lambda r: state_of(r, xs) == "duplicate" and
                 state_of(r, xb) == "duplicate", "the copies duplicates")
    # Without the flag, the kubelet's rule: y.bak is read, a.bak is a
    # duplicate of x.yaml (which sorts after it and loses: a.bak wins).
    d.stop()
    d2 = t.daemon(m, socket_path=t.path("plain.sock"))
    c2 = d2.connect()
    c2.wait_until_state([pn("x"), pn("y"), pn("j")])
    recs = wait_records(t, d2, lambda r: state_of(r, yb) == "applied",
                        "y.bak applied")
    assert state_of(recs, xb) == "applied" and \
        state_of(recs, x) == "duplicate", recs


@test("--static-pod-file-pattern refuses what can match no name: empty, a "
      "'/', more than 64, longer than 255 bytes (exit 2, naming the flag), "
      "in podmux run and podmux validate")
def test_static_pod_file_pattern_refuses_what(t):
    m = t.mkdir("m")
    cases = [([""], "must not be empty"), (["a/*.yaml"], "holds no '/'"),
             (["*.yaml"] * 65, "at most 64"), (["x" * 256], "longer than 255")]
    for pats, words in cases:
        flags = []
        for p in pats:
            flags += ["--static-pod-file-pattern", p]
        for cmd in (["run", "--pod-manifest-path", m, "--socket",
                     t.path("s.sock"), "--plugins-registry-dir", ""],
                    ["validate", "--offline"]):
            r = t.run_cmd(cmd + flags + ([m] if cmd[0] == "validate" else []))
            assert r.returncode == 2 and words in r.stderr and \
                "--static-pod-file-pattern" in r.stderr, (cmd[0], words,
                                                          r.stderr)
    r = t.run_cmd(["validate", "--offline", "--static-pod-file-pattern",
                   "*.yaml"] * 1 + [m])
    assert r.returncode == 0, r.stderr


if __name__ == "__main__":
    harness.main()
