#!/usr/bin/env python3
"""Integration tests of the podmux command line (podmux(8), doc/podmux.8):
version, validate, watch, and run's flag handling and logging."""

import json
import os
import re
import socket
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import (BAD_FIXTURES, MIB10, NODE, T_SHORT, UID_RE,  # noqa: E402
                     assert_reason, fixture, garbage_bytes, pn, pod_json,
                     pod_yaml, sized_manifest, test, write_file)

GOOD = {  # fixture -> manifest name
    "nginx.yaml": "nginx",
    "pod.json": "json-pod",
    "multi-doc.yaml": "first-doc",
    "pinned-uid.yaml": "pinned",
    "kube-system-etcd.yaml": "etcd",
    "flow-style.yaml": "flow",
}


def json_values(text):
    """Every JSON value in text (concatenated or one per line); lists are
    flattened."""
    dec = json.JSONDecoder()
    out, i = [], 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return out
        try:
            v, i = dec.raw_decode(text, i)
        except ValueError as e:
            raise AssertionError("stdout is not JSON at offset %d (%s): %r"
                                 % (i, e, text[i:i + 200]))
        out.extend(v if isinstance(v, list) else [v])


def check_validated_pod(p, name):
    meta = p.get("metadata") or {}
    if p.get("kind") != "Pod" or p.get("apiVersion") != "v1":
        raise AssertionError("%s: not a v1 Pod: %s" %
                             (name, json.dumps(p)[:300]))
    if not str(meta.get("name", "")).startswith(name + "-"):
        raise AssertionError("%s: name %r lacks the node suffix" %
                             (name, meta.get("name")))
    uid = meta.get("uid", "")
    if name != "pinned" and not UID_RE.match(uid):
        raise AssertionError("%s: uid %r" % (name, uid))
    if (meta.get("annotations") or {}).get("kubernetes.io/config.hash") != \
            uid:
        raise AssertionError("%s: config.hash != uid" % name)
    spec = p.get("spec") or {}
    if spec.get("restartPolicy") != "Always" or \
            spec.get("dnsPolicy") != "ClusterFirst":
        raise AssertionError("%s: not defaulted: %r" % (name, spec))
    if (p.get("status") or {}).get("phase") != "Pending":
        raise AssertionError("%s: status %r" % (name, p.get("status")))


def check_bad_output(r, path, words):
    if r.returncode != 1:
        raise AssertionError("validate %s: exit %d, want 1; stderr %r" %
                             (os.path.basename(path), r.returncode,
                              r.stderr[-300:]))
    key = '"%s": ' % path
    lines = [x for x in r.stderr.splitlines() if key in x]
    if not lines:
        raise AssertionError("stderr does not contain %r: %r" %
                             (key, r.stderr[-400:]))
    assert_reason(lines[0].split(key, 1)[1], words, os.path.basename(path))


# ---------------------------------------------------------------------------

@test("podmux version prints a version and exits 0")
def test_podmux_version_prints_version_exits_0(t):
    r = t.run_cmd(["version"])
    if r.returncode != 0 or not re.search(r"\d+\.\d+", r.stdout):
        raise AssertionError("exit %d, stdout %r" % (r.returncode, r.stdout))


@test("podmux version names the core/v1 schema it decodes manifests with")
def test_podmux_version_names_core_v1_schema(t):
    r = t.run_cmd(["version"])
    if r.returncode != 0 or not re.search(
            r"^core/v1 schema: Kubernetes 1\.\d+\b", r.stdout, re.M):
        raise AssertionError("exit %d, stdout %r" % (r.returncode, r.stdout))


@test("podmux validate lists the fields core/v1 does not define (exit 0) "
      "and prints the pod without them")
def test_podmux_validate_lists_fields_core_v1(t):
    path = write_file(t.path("typo.yaml"),
                      "apiVersion: v1\nkind: Pod\nmetadata:\n  name: typo\n"
                      "  labelz: {a: b}\nspec:\n  containers:\n  - name: c\n"
                      "    image: nginx:1.25\n    imagePullPolicyy: Never\n")
    r = t.run_cmd(["validate", "-o", "json", "--node-name", NODE, path])
    if r.returncode != 0:
        raise AssertionError("exit %d, stderr %r" % (r.returncode, r.stderr))
    for field in ("metadata.labelz", "spec.containers[0].imagePullPolicyy"):
        lines = [x for x in r.stderr.splitlines()
                 if 'unknown field "%s"' % field in x and "typo.yaml" in x]
        if len(lines) != 1:
            raise AssertionError("want one warning naming %s, stderr %r" %
                                 (field, r.stderr))
    pods = json_values(r.stdout)
    c = pods[0]["spec"]["containers"][0]
    if len(pods) != 1 or "labelz" in pods[0]["metadata"] or \
            "imagePullPolicyy" in c or c.get("imagePullPolicy") != "IfNotPresent":
        raise AssertionError("the printed pod still has an unknown field: %s"
                             % r.stdout[:500])
    r = t.run_cmd(["validate", "--node-name", NODE, fixture("good", "nginx.yaml")])
    if r.returncode != 0 or "unknown field" in r.stderr:
        raise AssertionError("a clean manifest: exit %d, stderr %r" %
                             (r.returncode, r.stderr))


@test("podmux validate on each good fixture: exit 0, the defaulted pod "
      "JSON on stdout")
def test_podmux_validate_each_good_fixture_exit(t):
    for f, name in GOOD.items():
        r = t.run_cmd(["validate", "-o", "json", fixture("good", f)])
        if r.returncode != 0:
            raise AssertionError("validate %s: exit %d, stderr %r" %
                                 (f, r.returncode, r.stderr[-400:]))
        pods = json_values(r.stdout)
        if len(pods) != 1:
            raise AssertionError("validate %s printed %d values" %
                                 (f, len(pods)))
        check_validated_pod(pods[0], name)


@test("podmux validate on each bad fixture: exit 1, stderr "
      "'\"<path>\": <reason>'")
def test_podmux_validate_each_bad_fixture_exit(t):
    for f, (desc, words) in BAD_FIXTURES.items():
        path = fixture("bad", f)
        check_bad_output(t.run_cmd(["validate", path]), path, words)


@test("podmux validate on generated bad inputs (binary garbage, exactly "
      "10 MiB, a FIFO, a dangling symlink, a missing path): "
      "exit 1 with the path and a reason")
def test_podmux_validate_generated_bad_inputs_binary(t):
    d = t.mkdir("in")
    cases = []
    p = write_file(os.path.join(d, "garbage.yaml"), garbage_bytes())
    cases.append((p, harness.GARBAGE_WORDS))
    p = write_file(os.path.join(d, "huge.yaml"), sized_manifest("huge",
                                                                 MIB10))
    cases.append((p, harness.TOO_LARGE_WORDS))
    p = os.path.join(d, "pipe.yaml")
    os.mkfifo(p)
    cases.append((p, ("regular", "fifo", "pipe", "not a file")))
    p = os.path.join(d, "dangling.yaml")
    os.symlink(os.path.join(d, "nowhere.yaml"), p)
    cases.append((p, ("no such", "not exist", "missing", "dangling",
                      "stat")))
    p = os.path.join(d, "absent.yaml")
    cases.append((p, ("no such", "not exist", "missing", "stat")))
    for path, words in cases:
        check_bad_output(t.run_cmd(["validate", path]), path, words)


@test("podmux validate with several good paths prints every pod, exit 0")
def test_podmux_validate_several_good_paths_prints(t):
    paths = [fixture("good", f) for f in GOOD]
    r = t.run_cmd(["validate", "-o", "json"] + paths)
    if r.returncode != 0:
        raise AssertionError("exit %d, stderr %r" % (r.returncode,
                                                     r.stderr[-400:]))
    pods = json_values(r.stdout)
    if len(pods) != len(GOOD):
        raise AssertionError("%d pods printed for %d files" %
                             (len(pods), len(GOOD)))
    for p in pods:
        nm = p["metadata"]["name"]
        if not any(nm.startswith(v + "-") for v in GOOD.values()):
            raise AssertionError("unexpected pod %s" % nm)


@test("podmux validate with good and bad paths: exit 1, each bad path "
      "named with its reason, good paths not reported as errors")
def test_podmux_validate_good_bad_paths_exit(t):
    good = [fixture("good", "nginx.yaml"), fixture("good", "pod.json")]
    bad = ["podlist.yaml", "invalid-name.yaml", "syntax-error.yaml"]
    paths = [good[0], fixture("bad", bad[0]), good[1], fixture("bad", bad[1]),
             fixture("bad", bad[2])]
    r = t.run_cmd(["validate"] + paths)
    for b in bad:
        check_bad_output(r, fixture("bad", b), BAD_FIXTURES[b][1])
    for g in good:
        if '"%s": ' % g in r.stderr:
            raise AssertionError("good file reported: %r" % r.stderr)


def strip_local(p):
    p = json.loads(json.dumps(p))
    ann = p.get("metadata", {}).get("annotations") or {}
    for k in ("kubernetes.io/config.source", "kubernetes.io/config.seen"):
        ann.pop(k, None)
    return p


@test("podmux validate --node-name N DIR prints exactly the pods the daemon "
      "delivers for that directory (same uids, same JSON apart from "
      "config.source/config.seen)")
def test_podmux_validate_node_name_n_dir(t):
    m = t.mkdir("manifests")
    for f in GOOD:
        write_file(os.path.join(m, f), harness.read_fixture("good", f))
    r = t.run_cmd(["validate", "-o", "json", "--node-name", NODE, m])
    if r.returncode != 0:
        raise AssertionError("exit %d, stderr %r" % (r.returncode,
                                                     r.stderr[-400:]))
    printed = {p["metadata"]["uid"]: strip_local(p)
               for p in json_values(r.stdout)}
    d = t.daemon(m)
    c = d.connect()
    c.wait_until_state([pn(v) for v in GOOD.values()])
    got = {u: strip_local(p) for u, p in c.state.pods.items()}
    if sorted(printed) != sorted(got):
        raise AssertionError("uids differ: validate %s, daemon %s" %
                             (sorted(printed), sorted(got)))
    for u in got:
        if printed[u] != got[u]:
            raise AssertionError("pod %s differs:\n validate %s\n daemon   "
                                 "%s" % (got[u]["metadata"]["name"],
                                         json.dumps(printed[u],
                                                    sort_keys=True)[:600],
                                         json.dumps(got[u],
                                                    sort_keys=True)[:600]))


VALIDATE_ERR = re.compile(r'^podmux validate: ("(?:[^"\\]|\\.)*"): (.*)$')
LINE_RE = re.compile(r'^("(?:[^"\\]|\\.)*"): (\S+)/(\S+) uid=(\S+) node=(\S+) '
                     r'config\.hash=(\S+)$')


def every_kind_of_input(t):
    """A manifest directory holding every kind of entry the file source
    meets: each good and bad fixture, generated bad inputs, entries it
    skips, two files defining one pod, unknown fields, odd names."""
    m = t.mkdir("manifests")
    for f in GOOD:
        write_file(os.path.join(m, f), harness.read_fixture("good", f))
    for f in BAD_FIXTURES:
        write_file(os.path.join(m, "bad-" + f), harness.read_fixture("bad", f))
    write_file(os.path.join(m, "garbage.bin"), garbage_bytes())
    write_file(os.path.join(m, "huge.yaml"), sized_manifest("huge", MIB10))
    write_file(os.path.join(m, "edge.yaml"),
               sized_manifest("edge", MIB10 - 1))
    os.mkfifo(os.path.join(m, "pipe.yaml"))
    os.symlink(os.path.join(m, "nowhere.yaml"),
               os.path.join(m, "dangling.yaml"))
    outside = t.mkdir("outside")
    write_file(os.path.join(outside, "linked.yaml"), pod_yaml("linked"))
    os.symlink(os.path.join(outside, "linked.yaml"),
               os.path.join(m, "linked.yaml"))
    sub = t.mkdir("manifests", "sub")
    write_file(os.path.join(sub, "inner.yaml"), pod_yaml("inner"))
    write_file(os.path.join(m, ".hidden.yaml"), pod_yaml("hidden"))
    write_file(os.path.join(m, "dup-a.yaml"), pod_yaml("dup"))
    write_file(os.path.join(m, "dup-b.yaml"), pod_yaml("dup",
                                                        image="busybox:1"))
    write_file(os.path.join(m, "typo.yaml"),
               "apiVersion: v1\nkind: Pod\nmetadata:\n  name: typo\n"
               "  labelz: {a: b}\nspec:\n  containers:\n  - name: c\n"
               "    image: nginx:1.25\n    imagePullPolicyy: Never\n"
               "    resources: {limits: {cpu: 1, memory: 1.5Gi}}\n")
    write_file(os.path.join(m, "odd name \u00e9.yaml"), pod_yaml("odd"))
    write_file(os.path.join(m, "pinned.json"),
               pod_json("pinned", uid="0c1d2e3f-0000-4000-8000-000000000001",
                        namespace="kube-system"))
    write_file(os.path.join(m, "bad-quantity.yaml"),
               pod_yaml("q", spec_extra={"containers": [{
                   "name": "c", "image": "x", "resources": {
                       "limits": {"cpu": "1ki"}}}]}))
    write_file(os.path.join(m, "wrong-type.yaml"),
               pod_yaml("w", spec_extra={"terminationGracePeriodSeconds":
                                         "thirty"}))
    return m


def daemon_verdicts(d):
    """{path: reason} of the daemon's error lines naming a file, the
    paths it ignored as duplicates, {path: unknown-field list}."""
    errors, dups, unknown = {}, set(), {}
    for x in d.logs():
        mm = re.match(r'^file ("(?:[^"\\]|\\.)*"): (.*)$', x.msg)
        if not mm:
            continue
        path, reason = json.loads(mm.group(1)), mm.group(2)
        if x.level == "error":
            errors[path] = reason
        elif x.level == "warn" and "is already defined by" in reason:
            dups.add(path)
        elif x.level == "warn" and reason.startswith("unknown fields"):
            unknown[path] = sorted(json.loads("[%s]" % reason.split(": ", 1)[1]))
    return errors, dups, unknown


def validate_verdicts(stderr):
    errors, dups, unknown = {}, set(), {}
    for line in stderr.splitlines():
        mm = VALIDATE_ERR.match(line)
        if not mm:
            raise AssertionError("validate stderr line of no known form: %r" %
                                 line)
        path, reason = json.loads(mm.group(1)), mm.group(2)
        if reason.startswith("note:"):
            continue
        if reason.startswith("warning: unknown field "):
            field = json.loads(reason.split("field ", 1)[1].split(" ignored")[0])
            unknown.setdefault(path, []).append(field)
        elif "is already defined by" in reason:
            dups.add(path)
        else:
            errors[path] = reason
    return errors, dups, {p: sorted(f) for p, f in unknown.items()}


@test("podmux validate DIR and the daemon on the same directory of every "
      "kind of input agree exactly: the same pods (JSON with -o json, "
      "identity lines by default), the same files refused with the same "
      "reasons, the same duplicates ignored, the same unknown fields")
def test_podmux_validate_dir_daemon_same_directory(t):
    m = every_kind_of_input(t)
    rj = t.run_cmd(["validate", "-o", "json", "--node-name", NODE, m])
    rt = t.run_cmd(["validate", "--node-name", NODE, m])
    for r in (rj, rt):
        if r.returncode != 1:
            raise AssertionError("exit %d, want 1 (bad files); stderr %r" %
                                 (r.returncode, r.stderr[-600:]))
    if rj.stderr != rt.stderr:
        raise AssertionError("-o json and text report differently:\n%s\n%s"
                             % (rj.stderr[-600:], rt.stderr[-600:]))
    printed = {p["metadata"]["uid"]: strip_local(p)
               for p in json_values(rj.stdout)}
    d = t.daemon(m, freq="1h")
    c = d.connect()
    # sources_ready: the first relist is complete, and everything it
    # logged is in the log already (a file is reported before the state
    # that leaves it out is sent).
    c.expect_type("sources_ready", timeout=harness.T_LONG)
    got = {u: strip_local(p) for u, p in c.state.pods.items()}
    if sorted(printed) != sorted(got):
        raise AssertionError("pods differ: validate %s, daemon %s" % (
            sorted(p["metadata"]["name"] for p in printed.values()),
            sorted(p["metadata"]["name"] for p in got.values())))
    for u in got:
        if printed[u] != got[u]:
            raise AssertionError("pod %s differs:\n validate %s\n daemon   %s"
                                 % (got[u]["metadata"]["name"],
                                    json.dumps(printed[u], sort_keys=True)[:600],
                                    json.dumps(got[u], sort_keys=True)[:600]))
    lines = {}
    for line in rt.stdout.splitlines():
        mm = LINE_RE.match(line)
        if not mm:
            raise AssertionError("not a pod line: %r" % line)
        lines[mm.group(4)] = (mm.group(2), mm.group(3), mm.group(5),
                              mm.group(6))
    want = {u: ((p["metadata"].get("namespace")), p["metadata"]["name"],
                p["spec"]["nodeName"],
                p["metadata"]["annotations"]["kubernetes.io/config.hash"])
            for u, p in got.items()}
    if lines != want:
        raise AssertionError("identity lines %s, the daemon's pods %s" %
                             (lines, want))
    dv, vv = daemon_verdicts(d), validate_verdicts(rt.stderr)
    for what, a, b in zip(("refused files", "ignored duplicates",
                           "unknown fields"), dv, vv):
        if a != b:
            raise AssertionError("%s differ:\n daemon   %s\n validate %s" % (
                what, a, b))
    if len(dv[0]) < len(BAD_FIXTURES) + 6 or not dv[1] or not dv[2]:
        raise AssertionError("the directory did not exercise every verdict: "
                             "%s" % (dv,))


@test("podmux validate output: one identity line per pod by default, "
      "the whole pod with -o json / --output=json, an array per file with "
      "--manifest-url-mode -o json; an unknown format is a usage error")
def test_podmux_validate_output_one_identity_line(t):
    path = fixture("good", "nginx.yaml")
    r = t.run_cmd(["validate", "--node-name", NODE, path])
    mm = LINE_RE.match(r.stdout.strip())
    if r.returncode != 0 or not mm or json.loads(mm.group(1)) != path or \
            (mm.group(2), mm.group(3), mm.group(5)) != ("default", pn("nginx"),
                                                        NODE) or \
            not UID_RE.match(mm.group(4)) or mm.group(6) != mm.group(4):
        raise AssertionError("exit %d, stdout %r" % (r.returncode, r.stdout))
    for flags in (["-o", "json"], ["--output=json"], ["--output", "json"]):
        rj = t.run_cmd(["validate", "--node-name", NODE] + flags + [path])
        pods = json_values(rj.stdout)
        if rj.returncode != 0 or len(pods) != 1 or \
                pods[0]["metadata"]["uid"] != mm.group(4):
            raise AssertionError("%s: exit %d, stdout %r" % (
                flags, rj.returncode, rj.stdout[:300]))
    ru = t.run_cmd(["validate", "--manifest-url-mode", "-o", "json", path])
    if ru.returncode != 0 or not isinstance(json.loads(ru.stdout), list):
        raise AssertionError("url mode: %r" % ru.stdout[:300])
    empty = write_file(t.path("empty-list.json"),
                       '{"apiVersion":"v1","kind":"PodList","items":[]}')
    re_ = t.run_cmd(["validate", "--manifest-url-mode", empty])
    if re_.returncode != 0 or re_.stdout.strip() != '"%s": no pods' % empty:
        raise AssertionError("empty list: %r" % re_.stdout)
    for flags in (["-o", "yaml"], ["-o"], ["--output=table"]):
        rb = t.run_cmd(["validate"] + flags + [path])
        if rb.returncode != 2 or "validate --help" not in rb.stderr:
            raise AssertionError("%s: exit %d, stderr %r" % (
                flags, rb.returncode, rb.stderr))


def one_shot_server(t, name, answer):
    """A unix socket at t.path(name) that reads a request line, writes
    answer (bytes) and closes, for every connection: a daemon that
    refuses or says too little (None: nothing, the connection kept open).  Returns the path and the listening
    socket (the caller closes it)."""
    path = t.path(name)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(8)

    held = []

    def serve():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                for c in held:
                    c.close()
                return
            conn.recv(4096)
            if answer is None:
                held.append(conn)   # a daemon that never answers
                continue
            with conn:
                conn.sendall(answer)
    threading.Thread(target=serve, daemon=True).start()
    return path, srv


@test("podmux validate --socket S FILE without --node-name computes with "
      "the daemon's node name: the UID printed is the one the daemon "
      "holds; --node-name another name is said in a note; a daemon that "
      "refuses, closes or does not answer is a note and the host's name "
      "is used")
def test_podmux_validate_socket_daemon_s_node(t):
    m = t.mkdir("manifests")
    web = os.path.join(m, "web.yaml")
    write_file(web, pod_yaml("web"))
    d = t.daemon(m, node="daemon-node-7")
    c = d.connect()
    c.wait_until_state(["web-daemon-node-7"])
    held = list(c.state.pods)
    r = t.run_cmd(["validate", "--socket", d.sock, web])
    mm = LINE_RE.match(r.stdout.strip())
    if r.returncode != 0 or not mm or [mm.group(4)] != held or \
            mm.group(5) != "daemon-node-7":
        raise AssertionError("validate printed %r (stderr %r); the daemon "
                             "holds uid %s on node daemon-node-7" %
                             (r.stdout, r.stderr, held))
    rn = t.run_cmd(["validate", "--socket", d.sock, "--node-name", "other",
                    web])
    mn = LINE_RE.match(rn.stdout.strip())
    if rn.returncode != 0 or not mn or mn.group(5) != "other" or \
            mn.group(4) == held[0] or \
            'the daemon\'s node is "daemon-node-7"' not in rn.stderr:
        raise AssertionError("--node-name other: %r %r" % (rn.stdout,
                                                           rn.stderr))
    host = t.run_cmd(["validate", "--offline", web])
    hm = LINE_RE.match(host.stdout.strip())
    for name, answer in (
            ("refuses.sock", b'{"type":"error","reason":"Forbidden",'
                             b'"message":"uid 1 is not allowed"}\n'),
            ("closes.sock", b'{"type":"hello","protocol":1}\n'),
            ("silent.sock", None)):
        sock, srv = one_shot_server(t, name, answer)
        try:
            rb = t.run_cmd(["validate", "--socket", sock, web])
        finally:
            srv.close()
        mb = LINE_RE.match(rb.stdout.strip())
        if rb.returncode != 0 or not mb or not hm or \
                mb.group(4) != hm.group(4) or \
                "note: cannot ask the daemon at" not in rb.stderr or \
                ("Forbidden" in (answer or b"").decode()) != \
                ("Forbidden" in rb.stderr) or \
                (answer is None) != ("no answer in time" in rb.stderr):
            raise AssertionError("%s: %r %r (offline: %r)" % (
                name, rb.stdout, rb.stderr, host.stdout))


@test("podmux validate DIR with good and bad files: exit 1, good pods on "
      "stdout, each bad file named on stderr, hidden files ignored")
def test_podmux_validate_dir_good_bad_files(t):
    m = t.mkdir("manifests")
    write_file(os.path.join(m, "nginx.yaml"),
               harness.read_fixture("good", "nginx.yaml"))
    write_file(os.path.join(m, "podlist.yaml"),
               harness.read_fixture("bad", "podlist.yaml"))
    write_file(os.path.join(m, ".hidden.yaml"), "not: [valid")
    r = t.run_cmd(["validate", "-o", "json", "--node-name", NODE, m])
    check_bad_output(r, os.path.join(m, "podlist.yaml"),
                     BAD_FIXTURES["podlist.yaml"][1])
    names = [p["metadata"]["name"] for p in json_values(r.stdout)]
    if names != [pn("nginx")]:
        raise AssertionError("stdout pods %s" % names)
    if ".hidden.yaml" in r.stderr:
        raise AssertionError("hidden file read: %r" % r.stderr)


@test("podmux watch -o json against a running daemon prints one JSON "
      "message per line: hello, state, synced, then live updates")
def test_podmux_watch_o_json_against_running(t):
    m = t.mkdir("manifests")
    write_file(os.path.join(m, "web.yaml"), pod_yaml("web"))
    d = t.daemon(m)
    w = t.spawn(["watch", "--socket", d.sock, "-o", "json"])

    def typ(line, ty, name=None):
        try:
            x = json.loads(line)
        except ValueError:
            return False
        if x.get("type") != ty:
            return False
        return name is None or any(
            p["metadata"]["name"] == name for p in x.get("pods") or [])
    w.wait_line(lambda x: typ(x, "synced"), what="a synced line")
    write_file(os.path.join(m, "db.yaml"), pod_yaml("db"))
    w.wait_line(lambda x: typ(x, "pods", pn("db")),
                what="a pods line with %s" % pn("db"))
    lines = w.lines()
    for line in lines:
        x = json.loads(line)
        if "type" not in x or "seq" not in x:
            raise AssertionError("line without type/seq: %r" % line[:200])
    if json.loads(lines[0]).get("type") != "hello":
        raise AssertionError("first line is not hello: %r" % lines[0][:200])
    w.stop()


@test("podmux watch (table) shows the pod names as pods are added and "
      "removed")
def test_podmux_watch_table_shows_pod_names(t):
    m = t.mkdir("manifests")
    write_file(os.path.join(m, "web.yaml"), pod_yaml("web"))
    d = t.daemon(m)
    w = t.spawn(["watch", "--socket", d.sock])
    w.wait_line(lambda x: pn("web") in x, what="a line with %s" % pn("web"))
    write_file(os.path.join(m, "db.yaml"), pod_yaml("db"))
    w.wait_line(lambda x: pn("db") in x, what="a line with %s" % pn("db"))
    def db_lines():
        return len([x for x in w.lines() if pn("db") in x])
    n = db_lines()
    os.remove(os.path.join(m, "db.yaml"))
    harness.wait_for(lambda: db_lines() > n, harness.T_WAIT,
                     "another line with %s (its removal); output: %r" %
                     (pn("db"), w.lines()[-6:]))
    for line in w.lines():
        if line.lstrip().startswith("{"):
            raise AssertionError("table output contains JSON: %r" % line)
    w.stop()


def expect_eq(got, want, what):
    if got != want:
        raise AssertionError("%s: %r, want %r" % (what, got, want))


def table_starts(line):
    """Where each cell of a table line starts (cells are apart by two
    spaces or more)."""
    return [m.start() for m in re.finditer(r"\S+(?: \S+)*", line)]


def check_table(lines, width, wide=False):
    """No line wider than width; every row's cells start where the
    header's titles do (-o wide: SEQ first)."""
    header = [x for x in lines if x.startswith("SEQ " if wide else "OP ")]
    if len(header) != 1:
        raise AssertionError("want one header line: %r" % lines[:8])
    cols = table_starts(header[0])
    if len(cols) != (7 if wide else 6):
        raise AssertionError("header %r" % header[0])
    for line in lines:
        if len(line) > width:
            raise AssertionError("%d characters wide (> %d): %r" %
                                 (len(line), width, line))
        if not line.startswith("-- ") and table_starts(line) != cols:
            raise AssertionError("row out of line with the header:\n%s\n%s"
                                 % (header[0], line))


@test("podmux watch fits the table to $COLUMNS: with COLUMNS=80 and long "
      "names no line is wider than 80, every row lines up under the "
      "header, a long name shows its start and end; '1 pod', '2 pods'")
def test_podmux_watch_fits_table_columns_columns(t):
    m = t.mkdir("manifests")
    long_name = "a-static-pod-with-a-name-much-longer-than-any-column-" \
                "could-hold"
    write_file(os.path.join(m, "long.yaml"),
               pod_yaml(long_name, namespace="kube-system-and-more"))
    d = t.daemon(m)
    env = dict(os.environ, COLUMNS="80")
    w = t.spawn(["watch", "--socket", d.sock], env=env)
    w.wait_line(lambda x: x.startswith("-- synced"), what="the synced note")
    synced = [x for x in w.lines() if x.startswith("-- synced")]
    t.soft(expect_eq, synced, ["-- synced: full state, 1 pod"], "synced note")
    write_file(os.path.join(m, "db.yaml"), pod_yaml("db"))
    w.wait_line(lambda x: pn("db") in x, what="a row with %s" % pn("db"))
    rows = [x for x in w.lines() if "ADD" in x]
    long_row = [x for x in rows if "a-static" in x]
    if len(long_row) != 1 or not long_row[0].rstrip().endswith("Pending") \
            or "-node1" not in long_row[0] or "kub" not in long_row[0]:
        t.soft(expect_eq, rows, "one row with the long name's start and "
               "end, its namespace and phase", "the long name's row")
    w2 = t.spawn(["watch", "--socket", d.sock],
                 env=dict(os.environ, COLUMNS="100"))
    w2.wait_line(lambda x: x.startswith("-- synced"), what="the synced note")
    t.soft(expect_eq, [x for x in w2.lines() if x.startswith("-- synced")],
           ["-- synced: full state, 2 pods"], "synced note")
    w.stop()
    w2.stop()
    t.soft(check_table, w.lines(), 80)
    t.soft(check_table, w2.lines(), 100)


@test("podmux watch's table at 80 columns shows a control-plane pod's "
      "namespace and name whole, the UID cut first, and no SEQ; -o wide "
      "has each row's SEQ; -o bogus is a usage error")
def test_podmux_watch_80_columns_namespace_name(t):
    m = t.mkdir("manifests")
    write_file(os.path.join(m, "kube-apiserver.yaml"),
               pod_yaml("kube-apiserver", namespace="kube-system"))
    d = t.daemon(m)
    c = d.connect()
    c.wait_until_state([pn("kube-apiserver")])
    (uid,) = list(c.state.pods)
    env = dict(os.environ, COLUMNS="80")
    w = t.spawn(["watch", "--socket", d.sock], env=env)
    ww = t.spawn(["watch", "--socket", d.sock, "-o", "wide"], env=env)
    for p in (w, ww):
        p.wait_line(lambda x: x.startswith("-- synced"),
                    what="the synced note")
    ww.stop()
    w.stop()
    rows = [x for x in w.lines() if x.startswith("ADD ")]
    want = "  kube-system  %s  " % pn("kube-apiserver")
    if len(rows) != 1 or want not in rows[0] or uid in rows[0] or \
            uid[:4] not in rows[0]:
        raise AssertionError("want one row with %r whole and the uid %s "
                             "cut: %r" % (want, uid, w.lines()))
    t.soft(check_table, w.lines(), 80)
    t.soft(check_table, ww.lines(), 80, wide=True)
    # The full state's rows say "state" in SEQ; a live change its number.
    write_file(os.path.join(m, "db.yaml"), pod_yaml("db"))
    ww = t.spawn(["watch", "--socket", d.sock, "-o", "wide"], env=env)
    ww.wait_line(lambda x: x.startswith("-- synced"), what="the synced note")
    write_file(os.path.join(m, "etcd.yaml"), pod_yaml("etcd"))
    ww.wait_line(lambda x: pn("etcd") in x, what="etcd's row")
    ww.stop()
    seqs = [x.split()[0] for x in ww.lines() if " ADD " in x]
    if seqs[:2] != ["state", "state"] or len(seqs) != 3 or \
            not seqs[2].lstrip("\u2026.").isdigit():
        raise AssertionError("-o wide: want a SEQ cell: %r" % ww.lines())
    r = t.run_cmd(["watch", "--socket", d.sock, "-o", "bogus"])
    if r.returncode != 2 or "want table, wide or json" not in r.stderr:
        raise AssertionError("-o bogus: %d %r" % (r.returncode, r.stderr))


@test("podmux watch with no daemon exits 1 with a message naming the "
      "socket")
def test_podmux_watch_no_daemon_exits_1(t):
    sock = t.path("nobody.sock")
    r = t.run_cmd(["watch", "--socket", sock], timeout=T_SHORT)
    if r.returncode != 1:
        raise AssertionError("exit %d, want 1" % r.returncode)
    if sock not in r.stderr:
        raise AssertionError("stderr does not name %s: %r" %
                             (sock, r.stderr))


@test("podmux status (and --files) with no daemon says what podmux watch says: the socket, "
      "the error and the hint")
def test_podmux_status_no_daemon_same_hint_as_watch(t):
    sock = t.path("nobody.sock")
    w = t.run_cmd(["watch", "--socket", sock], timeout=T_SHORT)
    said = w.stderr.strip().split(": ", 1)[1]     # after "podmux watch: "
    if "(is podmux run serving this path?)" not in said:
        raise AssertionError("podmux watch's hint changed: %r" % said)
    for args in (["status"], ["status", "--files"]):
        r = t.run_cmd(args + ["--socket", sock], timeout=T_SHORT)
        if r.returncode != 1 or r.stderr.strip() != "podmux status: " + said:
            raise AssertionError("%s: exit %d, stderr %r; want %r" % (
                " ".join(args), r.returncode, r.stderr, "podmux status: " + said))


def run_args(t):
    m = t.mkdir("manifests")
    return ["run", "--pod-manifest-path", m, "--socket",
            t.path("podmux.sock"), "--node-name", NODE,
            "--plugins-registry-dir", ""]


def check_usage_error(r, words):
    if r.returncode != 2:
        raise AssertionError("exit %d, want 2; stderr %r" % (r.returncode,
                                                             r.stderr[-300:]))
    if not any(w in r.stderr for w in words):
        raise AssertionError("stderr does not name %s: %r" %
                             (" or ".join(words), r.stderr[-300:]))


@test("podmux run with an unknown flag: exit 2, the message names the flag")
def test_podmux_run_unknown_flag_exit_2(t):
    r = t.run_cmd(run_args(t) + ["--no-such-flag"], timeout=T_SHORT)
    check_usage_error(r, ["--no-such-flag", "no-such-flag"])


def check_one_line(r, cmd, first):
    """A usage error as every subcommand gives it: exit 2, nothing on
    stdout, on stderr the reason naming the flag and where help is."""
    where = "podmux %s" % cmd if cmd else "podmux"
    want = ["%s: %s" % (where, first),
            "Try '%s --help' for more information." % where]
    if r.returncode != 2 or r.stdout or r.stderr.splitlines() != want:
        raise AssertionError("exit %d, stdout %r, stderr %r; want exit 2 "
                             "and stderr %r" % (r.returncode, r.stdout[:200],
                                                r.stderr[:600], want))


@test("a mistyped flag gets the same two lines from every subcommand: "
      "'podmux CMD: FLAG: unknown flag' and where the help is, exit 2; so "
      "do a missing value, an ambiguous abbreviation, a value for a flag "
      "that takes none and an unknown command")
def test_mistyped_flag_gets_same_two_lines(t):
    for cmd in ("run", "watch", "validate", "status"):
        pre = run_args(t) if cmd == "run" else [cmd]
        t.soft(check_one_line, t.run_cmd(pre + ["--sockt"]), cmd,
               "--sockt: unknown flag")
        t.soft(check_one_line, t.run_cmd(pre + ["-Z"]), cmd,
               "-Z: unknown flag")
        t.soft(check_one_line, t.run_cmd(pre + ["--help=x"]), cmd,
               "--help=x: takes no value")
        t.soft(check_one_line, t.run_cmd(pre + ["--node-name"]
                                         if cmd in ("run", "validate")
                                         else pre + ["--socket"]), cmd,
               "--%s: missing value" % ("node-name" if cmd in ("run",
                                                              "validate")
                                        else "socket"))
    t.soft(check_one_line, t.run_cmd(run_args(t) + ["--so", "x"]),
           "run", "--so: ambiguous: --socket, --socket-mode, --socket-group")
    t.soft(check_one_line, t.run_cmd(["watch", "extra"]), "watch",
           'unexpected argument "extra"')
    t.soft(check_one_line, t.run_cmd(["status", "-o", "yaml"]), "status",
           '-o "yaml": want text or json')
    t.soft(check_one_line, t.run_cmd(["validate", "-o", "yaml", "x"]),
           "validate", '-o "yaml": want text or json')
    t.soft(check_one_line, t.run_cmd(["validate"]), "validate",
           "no PATH given")
    t.soft(check_one_line, t.run_cmd(["wach"]), None,
           "wach: unknown command")


@test("podmux run --file-check-frequency 5x (bad duration): exit 2, the "
      "message names the flag")
def test_podmux_run_file_check_frequency_5x(t):
    r = t.run_cmd(run_args(t) + ["--file-check-frequency", "5x"],
                  timeout=T_SHORT)
    check_usage_error(r, ["file-check-frequency"])


@test("podmux run --mode fastest (bad mode): exit 2, the message names "
      "the flag")
def test_podmux_run_mode_fastest_bad_mode(t):
    r = t.run_cmd(run_args(t) + ["--mode", "fastest"], timeout=T_SHORT)
    check_usage_error(r, ["--mode", "mode"])


@test("podmux run --log-format xml (bad format): exit 2, the message "
      "names the flag")
def test_podmux_run_log_format_xml_bad(t):
    r = t.run_cmd(run_args(t) + ["--log-format", "xml"], timeout=T_SHORT)
    check_usage_error(r, ["log-format"])


@test("podmux run --file-check-frequency without a value: exit 2, the "
      "message names the flag")
def test_podmux_run_file_check_frequency_without(t):
    r = t.run_cmd(run_args(t) + ["--file-check-frequency"], timeout=T_SHORT)
    check_usage_error(r, ["file-check-frequency"])


def tree(root):
    """Every path under root (the test's tree), to see what a run made."""
    out = set()
    for d, dirs, files in os.walk(root):
        out |= {os.path.join(d, n) for n in dirs + files}
    return out


# Every pair of flags that contradict each other (src/cmd/options.c,
# check_conflicts): (the two names the message must give, one flag with
# its value, the other).
def conflicting_pairs(t):
    m, reg = t.path("m"), t.path("reg")
    cfg = write_file(t.path("kubelet.yaml"),
                     "kind: KubeletConfiguration\nstaticPodPath: %s\n" % m)
    sock = t.path("p.sock")
    return [
        (("--kubeconfig", "--in-cluster"),
         ["--kubeconfig", t.path("kubeconfig")], ["--in-cluster"]),
        (("--node-name", "--hostname-override"),
         ["--node-name", "a"], ["--hostname-override", "b"]),
        (("--socket", "--metrics-address"),
         ["--socket", sock], ["--metrics-address", "unix:" + sock]),
        (("--socket", "--metrics-address"),
         ["--socket", sock], ["--metrics-address", sock + ".lock"]),
        (("--socket", "--pod-manifest-path"),
         ["--socket", os.path.join(m, "p.sock")], ["--pod-manifest-path", m]),
        (("--metrics-address", "--pod-manifest-path"),
         ["--metrics-address", os.path.join(m, "metrics.sock")],
         ["--pod-manifest-path", m]),
        (("--socket", "staticPodPath"),
         ["--socket", os.path.join(m, "p.sock")], ["--config", cfg]),
        (("--socket", "--plugins-registry-dir"),
         ["--socket", os.path.join(reg, "sub", "p.sock")],
         ["--plugins-registry-dir", reg]),
        (("--metrics-address", "--plugins-registry-dir"),
         ["--metrics-address", "unix:" + os.path.join(reg, "m.sock")],
         ["--plugins-registry-dir", reg]),
        (("--pod-manifest-path", "--plugins-registry-dir"),
         ["--pod-manifest-path", reg], ["--plugins-registry-dir", reg + "/"]),
    ]


@test("every pair of conflicting podmux run flags, in either order: exit 2 "
      "naming both, with the usage hint, before anything is created")
def test_every_pair_conflicting_podmux_run_flags(t):
    t.varlib()  # the harness's, made before the runs (as root)
    for names, a, b in conflicting_pairs(t):
        for order in (a + b, b + a):
            before = tree(t.tmp)
            # The base gives a socket and no registry; the pair's own come
            # later and win.
            r = t.run_cmd(["run", "--node-name", NODE, "--socket",
                           t.path("base.sock"), "--plugins-registry-dir",
                           ""] + order, timeout=T_SHORT)
            what = " ".join(order)
            if r.returncode != 2:
                raise AssertionError("%s: exit %d, want 2; stderr %r" % (
                    what, r.returncode, r.stderr[-400:]))
            if not all(n in r.stderr for n in names):
                raise AssertionError("%s: the message does not name %s: %r"
                                     % (what, " and ".join(names),
                                        r.stderr[-400:]))
            if "podmux run --help" not in r.stderr:
                raise AssertionError("%s: no usage hint: %r" % (
                    what, r.stderr[-400:]))
            made = tree(t.tmp) - before
            if made:
                raise AssertionError("%s: created %s" % (what, sorted(made)))


@test("podmux run --help lists the flags and exits 0")
def test_podmux_run_help_lists_flags_exits(t):
    r = t.run_cmd(["run", "--help"], timeout=T_SHORT)
    if r.returncode != 0:
        raise AssertionError("exit %d" % r.returncode)
    out = r.stdout + r.stderr
    missing = [f for f in ("--pod-manifest-path", "--file-check-frequency",
                           "--node-name", "--socket", "--mode",
                           "--socket-mode", "--log-format", "-v",
                           "--max-consumer-backlog")
               if f not in out]
    if missing:
        raise AssertionError("help lacks %s: %r" % (missing, out[:600]))


@test("podmux with an unknown subcommand exits non-zero with a usage "
      "message")
def test_podmux_unknown_subcommand_exits_non_zero(t):
    r = t.run_cmd(["frobnicate"], timeout=T_SHORT)
    if r.returncode == 0 or not r.stderr.strip():
        raise AssertionError("exit %d, stderr %r" % (r.returncode, r.stderr))


@test("Go-style durations are accepted by --file-check-frequency "
      "(1m30s, 1.5s, 300ms)")
def test_go_style_durations_accepted_file_check(t):
    m = t.mkdir("manifests")
    write_file(os.path.join(m, "web.yaml"), pod_yaml("web"))
    for dur in ("1m30s", "1.5s", "300ms"):
        d = t.daemon(m, freq=dur)
        c = d.connect()
        c.wait_until_state([pn("web")])
        rc = d.stop()
        if rc != 0:
            raise AssertionError("--file-check-frequency %s: exit %s" %
                                 (dur, rc))


@test("--log-format json: every stderr line is a JSON object with time, "
      "level and msg; a bad manifest gives an error line with "
      "file \"<path>\"")
def test_log_format_json_every_stderr_line(t):
    m = t.mkdir("manifests")
    bad = write_file(os.path.join(m, "bad.yaml"), "kind: Pod\n")
    d = t.daemon(m, log_format="json")
    d.wait_file_error(bad)
    for line in d.stderr_text().splitlines():
        if not line.strip():
            continue
        try:
            x = json.loads(line)
        except ValueError:
            raise AssertionError("not a JSON log line: %r" % line)
        if not {"time", "level", "msg"} <= set(x):
            raise AssertionError("log line lacks time/level/msg: %r" % line)


@test("--log-format text: a bad manifest gives one text line at level "
      "error with file \"<path>\" and a reason")
def test_log_format_text_bad_manifest_gives(t):
    m = t.mkdir("manifests")
    bad = write_file(os.path.join(m, "bad.yaml"), "kind: Pod\n")
    d = t.daemon(m, log_format="text")
    d.wait_file_error(bad)
    for line in d.stderr_text().splitlines():
        if line.lstrip().startswith("{"):
            raise AssertionError("JSON line in text format: %r" % line)


@test("--log-format json: stderr holds only JSON log lines even when the "
      "watched directory is deleted and re-created and the daemon stops")
def test_log_format_json_stderr_holds_only(t):
    m = t.mkdir("manifests")
    write_file(os.path.join(m, "web.yaml"), pod_yaml("web"))
    d = t.daemon(m, log_format="json")
    c = d.connect()
    c.wait_until_state([pn("web")])
    harness.shutil.rmtree(m)
    c.wait_until_state([])
    os.mkdir(m)
    write_file(os.path.join(m, "web.yaml"), pod_yaml("web"))
    c.wait_until_state([pn("web")])
    rc = d.stop()
    if rc != 0:
        raise AssertionError("exit %s on SIGTERM" % harness._rc_str(rc))
    bad = []
    for line in d.stderr_text().splitlines():
        try:
            ok = isinstance(json.loads(line), dict)
        except ValueError:
            ok = False
        if not ok:
            bad.append(line)
    if bad:
        raise AssertionError("stderr lines that are not JSON log lines: %r"
                             % bad[:5])


# ---------------------------------------------------------------------------
# The installed manual (tests/doc-check.sh renders the pages of the tree)

BUILDDIR = os.environ.get("PODMUX_BUILDDIR") or os.path.dirname(harness.BIN)


@test("make install: each alias page (podmux-run(8), podmux_client_fd(3), "
      "...) is a symbolic link to its page; `man -M` shows the whole page, "
      "and so does `man -l` from any directory, with no warning")
def test_make_install_each_alias_page_podmux(t):
    dest = t.path("dest")
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "TESTS")}
    r = subprocess.run([os.environ.get("MAKE") or "make", "-s", "-C",
                        BUILDDIR, "install", "DESTDIR=" + dest],
                       capture_output=True, text=True, env=env, timeout=600)
    if r.returncode != 0:
        raise AssertionError("make install: %s" % r.stderr[-2000:])
    roots = [d for d, _, files in os.walk(dest) if "podmux.8" in files]
    if len(roots) != 1:
        raise AssertionError("podmux.8 installed in %s" % roots)
    root = os.path.dirname(roots[0])
    env = dict(os.environ, MANWIDTH="80", MAN_DISABLE_SECCOMP="1",
               MANPAGER="cat", PAGER="cat", LC_ALL="C.UTF-8")
    pages = {"podmux-run": ("man8", "podmux.8", "PODMUX RUN"),
             "podmux-status": ("man8", "podmux.8", "PODMUX STATUS"),
             "podmux_client_fd": ("man3", "podmux_client.3", "SYNOPSIS"),
             "podmux_pod_object": ("man3", "podmux_client.3", "SYNOPSIS")}
    for name, (sect, page, heading) in sorted(pages.items()):
        alias = os.path.join(root, sect, name + "." + sect[-1])
        # A ".so man8/podmux.8" stub is found by `man -l` only from the
        # manual's root; a link, from anywhere.
        if not os.path.islink(alias) or os.readlink(alias) != page:
            raise AssertionError("%s is not a link to %s" % (alias, page))
        for argv, cwd in ((["man", "--warnings=w", "-M", root, name], t.path(".")),
                          (["man", "--warnings=w", "-l", alias], "/")):
            r = subprocess.run(argv, capture_output=True, text=True, env=env,
                               timeout=T_SHORT * 3, cwd=cwd)
            if r.returncode != 0 or r.stderr or heading not in r.stdout:
                raise AssertionError("%s (in %s): exit %d, stderr %r, %d "
                                     "lines" % (" ".join(argv), cwd,
                                                r.returncode, r.stderr[-600:],
                                                len(r.stdout.splitlines())))


if __name__ == "__main__":
    harness.main()
