#!/usr/bin/env python3
"""Integration tests of the static-pod file source (doc/pod-config.md
sections 3-6), run against the real podmux binary.

Scenarios whose output depends on the notification mode run once per mode
(incremental, snapshot, snapshot-and-updates) with per-mode expectations;
the rest run in incremental mode (the kubelet's)."""

import json
import os
import shutil
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import index_of  # noqa: E402
from harness import (BAD_FIXTURES, IS_ROOT, MIB10, MODES, NODE,  # noqa: E402
                     SEEN_RE, UID_RE, Probe, assert_reason,
                     garbage_bytes, msg_names, msg_uids, pn, pod_ann,
                     pod_image, pod_json, pod_labels, pod_name, pod_obj,
                     pod_uid, pod_yaml, read_fixture, sized_manifest, test,
                     to_yaml, write_file)

INCR, SNAP, SNAPUPD = MODES
# Ops each mode may emit for a single source (doc/pod-config.md 3.6).
MODE_OPS = {
    INCR: {"ADD", "UPDATE", "DELETE", "REMOVE", "RECONCILE"},
    SNAP: {"SET"},
    SNAPUPD: {"SET", "UPDATE", "DELETE"},
}
PINNED = "7f3d9a52-1c4b-4e8a-9b6f-2d5e8c1a0b93"


def initial_op(mode):
    return "ADD" if mode == INCR else "SET"


def setup(t, files, probe=False, node=NODE, **kw):
    """Writes files (name -> text) into <tmp>/manifests, optionally a relist
    probe, starts podmux and connects one consumer."""
    m = t.mkdir("manifests")
    for name, text in files.items():
        write_file(os.path.join(m, name), text)
    pr = Probe(t, m, node=node) if probe else None
    d = t.daemon(m, node=node, **kw)
    c = d.connect()
    return m, d, c, pr


def logged_once(d, path):
    """After at least one relist, a bad file has one error line (not one
    per relist or per event)."""
    n = len(d.file_errors(path))
    if n != 1:
        raise AssertionError("%d error lines for %s (want one): %s" %
                             (n, path, d.file_errors(path)[:3]))


def check_mode_ops(c, mode):
    """Every pods message uses an op the mode may emit, from source file."""
    for m in c.pods_msgs():
        if m["op"] not in MODE_OPS[mode]:
            raise AssertionError("mode %s must not emit %s: %s" %
                                 (mode, m["op"], harness.summarize(m)))
        if m.get("source") != "file":
            raise AssertionError("source is not file: %s" %
                                 harness.summarize(m))


def expect_added(c, mode, added, all_names):
    """Incremental: an ADD of exactly `added`; snapshot modes: a SET of the
    whole state (doc/pod-config.md 3.6: SET when pods are added)."""
    if mode == INCR:
        return c.expect_pods("ADD", names=added)
    return c.expect_pods("SET", names=all_names)


def expect_removed(c, mode, uids, all_names):
    if mode == INCR:
        return c.expect_pods("REMOVE", uids=uids)
    return c.expect_pods("SET", names=all_names)


def assert_replaced(c, mode, old_uid, new_uid):
    """An unpinned manifest's pod was replaced: new uid, and in incremental
    mode REMOVE(old) before ADD(new), never UPDATE (doc/pod-config.md 3.7)."""
    if old_uid == new_uid:
        raise AssertionError("the uid did not change (%s)" % old_uid)
    if not UID_RE.match(new_uid):
        raise AssertionError("new uid %r is not 32 lowercase hex" % new_uid)
    if mode == INCR:
        rem = index_of(c, "REMOVE", old_uid)
        add = index_of(c, "ADD", new_uid, last=True)
        if rem is None or add is None or rem > add:
            raise AssertionError(
                "expected REMOVE(%s) then ADD(%s); messages: %s" %
                (old_uid[:8], new_uid[:8],
                 " | ".join(harness.summarize(m) for m in c.pods_msgs())))
    for m in c.pods_msgs():
        if m["op"] == "UPDATE" and (old_uid in msg_uids(m) or
                                    new_uid in msg_uids(m)):
            raise AssertionError("an unpinned edit must not be an UPDATE: "
                                 "%s" % harness.summarize(m))


def check_initial(d, mode, names):
    """A consumer connecting after the source is ready gets exactly: one
    pods message (ADD in incremental mode, SET otherwise) from source file
    with these pods, then synced, then sources_ready ["file"]."""
    c = d.connect()
    init = c.read_initial()
    pods = [m for m in init if m["type"] == "pods"]
    if len(pods) != 1:
        raise AssertionError("expected one pods message before synced, got "
                             "%s" % [harness.summarize(m) for m in init])
    m = pods[0]
    if m["op"] != initial_op(mode) or m.get("source") != "file":
        raise AssertionError("initial state must be %s from source file, "
                             "got %s" % (initial_op(mode),
                                         harness.summarize(m)))
    if msg_names(m) != sorted(names):
        raise AssertionError("initial pods %s, expected %s" %
                             (msg_names(m), sorted(names)))
    nxt = c.recv(harness.T_SHORT)
    if nxt.get("type") != "sources_ready" or nxt.get("sources") != ["file"]:
        raise AssertionError("after synced expected sources_ready "
                             "[\"file\"], got %s" % harness.summarize(nxt))
    c.close()


# ===========================================================================
# Mode-parametrized scenarios

@test("manifests present at start: one pods message (ADD/SET) with every "
      "pod, then synced, then sources_ready [file]", params=MODES)
def test_manifests_present_start_one_pods_message(t):
    m, d, c, _ = setup(t, {"web.yaml": pod_yaml("web"),
                           "api.json": pod_json("api", image="busybox")})
    c.expect_type("sources_ready")
    c.wait_until_state([pn("api"), pn("web")])
    t.soft(check_initial, d, t.mode, [pn("api"), pn("web")])
    t.soft(check_mode_ops, c, t.mode)


@test("empty directory at start: a pods message with zero pods (the "
      "source-seen marker), synced, sources_ready [file]", params=MODES)
def test_empty_directory_start_pods_message_zero(t):
    m, d, c, _ = setup(t, {})
    c.expect_type("sources_ready")
    if c.state.names():
        raise AssertionError("pods from an empty directory: %s" % c.state)
    t.soft(check_initial, d, t.mode, [])
    t.soft(check_mode_ops, c, t.mode)


@test("manifest directory absent at start: zero-pod marker and "
      "sources_ready, then creating it with a manifest adds the pod",
      params=MODES)
def test_manifest_directory_absent_start_zero_pod(t):
    m = t.path("manifests")  # not created
    d = t.daemon(m)
    c = d.connect()
    c.expect_type("sources_ready")
    t.soft(check_initial, d, t.mode, [])
    os.mkdir(m)
    write_file(os.path.join(m, "web.yaml"), pod_yaml("web"))
    expect_added(c, t.mode, [pn("web")], [pn("web")])
    c.wait_until_state([pn("web")])
    d.assert_alive()
    t.soft(check_mode_ops, c, t.mode)


@test("new manifest file: ADD of its pod (snapshot modes: SET of all)",
      params=MODES)
def test_new_manifest_file_add_pod_snapshot(t):
    m, d, c, _ = setup(t, {"web.yaml": pod_yaml("web")})
    c.wait_until_state([pn("web")])
    web = pod_uid(c.state.one(pn("web")))
    write_file(os.path.join(m, "db.yaml"), pod_yaml("db", image="redis:7"))
    expect_added(c, t.mode, [pn("db")], [pn("db"), pn("web")])
    c.wait_until_state([pn("db"), pn("web")])
    c.assert_kept([web])
    t.soft(check_mode_ops, c, t.mode)


@test("a JSON manifest as Python's json.dumps() writes it, an emoji as an "
      "escaped surrogate pair (YAML cannot read it, the kubelet's JSON "
      "decoder can): its pod arrives with the emoji, and validate takes it")
def test_json_manifest_escaped_surrogates(t):
    m, d, c, _ = setup(t, {"web.yaml": pod_yaml("web")})
    c.wait_until_state([pn("web")])
    text = pod_json("smile", annotations={"example.com/mood": "\U0001F600"})
    if "\\ud83d\\ude00" not in text:
        raise AssertionError("json.dumps() wrote no surrogate pair: %s" % text)
    write_file(os.path.join(m, "smile.json"), text)
    c.wait_until_state([pn("smile"), pn("web")])
    ann = c.state.one(pn("smile"))["metadata"]["annotations"]
    if ann.get("example.com/mood") != "\U0001F600":
        raise AssertionError("annotations: %r" % ann)
    r = t.run_cmd(["validate", "--node-name", NODE, os.path.join(m, "smile.json")])
    if r.returncode != 0 or pn("smile") not in r.stdout:
        raise AssertionError("validate: %d %s %s" % (r.returncode, r.stdout, r.stderr))


@test("deleted manifest file: REMOVE of its stored pod (snapshot modes: "
      "SET without it)", params=MODES)
def test_deleted_manifest_file_remove_stored_pod(t):
    m, d, c, _ = setup(t, {"web.yaml": pod_yaml("web"),
                           "db.yaml": pod_yaml("db", image="redis:7")})
    c.wait_until_state([pn("db"), pn("web")])
    web = pod_uid(c.state.one(pn("web")))
    db = pod_uid(c.state.one(pn("db")))
    os.remove(os.path.join(m, "db.yaml"))
    msg = expect_removed(c, t.mode, [db], [pn("web")])
    if t.mode == INCR and pod_image(msg["pods"][0]) != "redis:7":
        raise AssertionError("REMOVE must carry the stored pod: %s" % msg)
    c.wait_until_state([pn("web")])
    c.assert_kept([web])
    t.soft(check_mode_ops, c, t.mode)


@test("manifest without pinned uid edited in place: REMOVE(old uid) + "
      "ADD(new uid), never UPDATE", params=MODES)
def test_manifest_without_pinned_uid_edited_place(t):
    m, d, c, _ = setup(t, {"web.yaml": pod_yaml("web", image="nginx:1.25"),
                           "db.yaml": pod_yaml("db", image="redis:7")})
    c.wait_until_state([pn("db"), pn("web")])
    old = pod_uid(c.state.one(pn("web")))
    db = pod_uid(c.state.one(pn("db")))
    write_file(os.path.join(m, "web.yaml"),
               pod_yaml("web", image="nginx:1.26"), atomic=False)
    c.wait_state(lambda s: [pod_image(p) for p in s.by_name(pn("web"))] ==
                 ["nginx:1.26"], "web with image nginx:1.26")
    c.wait_until_state([pn("db"), pn("web")])
    assert_replaced(c, t.mode, old, pod_uid(c.state.one(pn("web"))))
    c.assert_kept([db])
    t.soft(check_mode_ops, c, t.mode)


@test("manifest with pinned uid, spec and labels changed: UPDATE keeping "
      "uid and config.seen (snapshot: SET)", params=MODES)
def test_manifest_pinned_uid_spec_labels_changed(t):
    m, d, c, _ = setup(t, {
        "web.yaml": pod_yaml("web", uid=PINNED, labels={"app": "web"}),
        "db.yaml": pod_yaml("db", image="redis:7")})
    c.wait_until_state([pn("db"), pn("web")])
    before = c.state.one(pn("web"))
    seen = pod_ann(before, "kubernetes.io/config.seen")
    db = pod_uid(c.state.one(pn("db")))
    write_file(os.path.join(m, "web.yaml"),
               pod_yaml("web", uid=PINNED, image="nginx:1.26",
                        labels={"app": "web", "tier": "front"}))
    if t.mode in (INCR, SNAPUPD):
        msg = c.expect_pods("UPDATE", uids=[PINNED])
    else:
        msg = c.expect_pods("SET", pred=lambda mm: any(
            pod_uid(p) == PINNED and pod_image(p) == "nginx:1.26"
            for p in mm["pods"]))
    p = [x for x in msg["pods"] if pod_uid(x) == PINNED][0]
    if pod_image(p) != "nginx:1.26" or pod_labels(p).get("tier") != "front":
        raise AssertionError("updated pod lacks the new spec/labels: %s" %
                             json.dumps(p)[:400])
    if pod_ann(p, "kubernetes.io/config.seen") != seen:
        raise AssertionError("config.seen changed on update: %r -> %r" %
                             (seen, pod_ann(p, "kubernetes.io/config.seen")))
    if pod_ann(p, "kubernetes.io/config.hash") != PINNED:
        raise AssertionError("config.hash must be the pinned uid: %r" %
                             pod_ann(p, "kubernetes.io/config.hash"))
    c.assert_kept([PINNED, db])
    if t.mode == INCR and index_of(c, "ADD", PINNED, last=True) != \
            index_of(c, "ADD", PINNED):
        raise AssertionError("the pinned pod was ADDed twice")
    t.soft(check_mode_ops, c, t.mode)


@test("manifest with pinned uid, status-only change: RECONCILE in "
      "incremental mode, silent in snapshot modes (status still stored)",
      params=MODES)
def test_manifest_pinned_uid_status_only_change(t):
    m, d, c, _ = setup(t, {
        "web.yaml": pod_yaml("web", uid=PINNED, status={"message": "first"})})
    c.wait_until_state([pn("web")])
    p = c.state.one(pn("web"))
    if (p.get("status") or {}).get("message") != "first" or \
            p["status"].get("phase") != "Pending":
        raise AssertionError("status must keep message and get phase "
                             "Pending: %s" % p.get("status"))
    write_file(os.path.join(m, "web.yaml"),
               pod_yaml("web", uid=PINNED, status={"message": "second"}))
    if t.mode == INCR:
        msg = c.expect_pods("RECONCILE", uids=[PINNED])
        st = msg["pods"][0].get("status") or {}
        if st.get("message") != "second":
            raise AssertionError("RECONCILE must carry the new status: %s" %
                                 st)
    else:
        # Silent: the next pods message is the SET for the marker file,
        # and it carries the new status.
        write_file(os.path.join(m, "db.yaml"), pod_yaml("db"))
        msg = c.expect(lambda mm: mm.get("type") == "pods", "a pods message")
        if msg["op"] != "SET" or msg_names(msg) != [pn("db"), pn("web")]:
            raise AssertionError(
                "status-only change must be silent in %s mode; first pods "
                "message after it: %s" % (t.mode, harness.summarize(msg)))
        web = [x for x in msg["pods"] if pod_uid(x) == PINNED][0]
        if (web.get("status") or {}).get("message") != "second":
            raise AssertionError("the stored status was not replaced: %s" %
                                 web.get("status"))
    c.assert_kept([PINNED])
    for mm in c.pods_msgs()[1:]:
        if mm["op"] in ("UPDATE", "ADD", "DELETE") and PINNED in msg_uids(mm):
            raise AssertionError("status-only change gave %s" %
                                 harness.summarize(mm))
    t.soft(check_mode_ops, c, t.mode)


@test("manifest with pinned uid gets a deletionTimestamp: DELETE (snapshot: "
      "SET), pod kept until the file is removed (REMOVE)", params=MODES)
def test_manifest_pinned_uid_gets_deletiontimestamp_delete(t):
    m, d, c, _ = setup(t, {"web.yaml": pod_yaml("web", uid=PINNED),
                           "db.yaml": pod_yaml("db")})
    c.wait_until_state([pn("db"), pn("web")])
    db = pod_uid(c.state.one(pn("db")))
    write_file(os.path.join(m, "web.yaml"),
               pod_yaml("web", uid=PINNED, deletion="2030-01-01T00:00:00Z",
                        grace=30))

    def deleting(p):
        return str((p.get("metadata") or {}).get(
            "deletionTimestamp", "")).startswith("2030-01-01T00:00:00")
    if t.mode in (INCR, SNAPUPD):
        msg = c.expect_pods("DELETE", uids=[PINNED])
        if not deleting(msg["pods"][0]):
            raise AssertionError("DELETE lacks deletionTimestamp: %s" %
                                 json.dumps(msg["pods"][0])[:400])
    else:
        c.expect_pods("SET", pred=lambda mm: any(
            pod_uid(p) == PINNED and deleting(p) for p in mm["pods"]))
    if not deleting(c.state.pods[PINNED]):
        raise AssertionError("state lacks the deletionTimestamp")
    if c.state.names() != [pn("db"), pn("web")]:
        raise AssertionError("a graceful delete must keep the pod: %s" %
                             c.state)
    os.remove(os.path.join(m, "web.yaml"))
    expect_removed(c, t.mode, [PINNED], [pn("db")])
    c.wait_until_state([pn("db")])
    c.assert_kept([db])
    t.soft(check_mode_ops, c, t.mode)


def typed_manifest(name, uid=None, cpu="1", spec="", container=""):
    """A manifest written by hand, so each test controls how every value
    is spelled (pod_yaml() writes one canonical form)."""
    return ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n" % name +
            ("  uid: %s\n" % uid if uid else "") +
            "spec:\n" + spec +
            "  containers:\n  - name: c\n    image: nginx:1.25\n" + container +
            "    resources:\n      limits:\n        cpu: %s\n" % cpu)


def msgs_naming(c, uids, since):
    return [m for m in c.pods_msgs(since) if set(msg_uids(m)) & set(uids)]


@test("equality is Go's: re-spelled quantities, explicit zero values of "
      "plain fields and unknown fields give no UPDATE (and keep a generated "
      "uid); pointers at zero, empty slices and other spellings do")
def test_equality_go_s_re_spelled_quantities(t):
    m, d, c, pr = setup(t, {
        "web.yaml": typed_manifest("web", uid=PINNED),
        "plain.yaml": typed_manifest("plain")}, probe=True)
    c.wait_until_state([pn("plain"), pn("probe"), pn("web")])
    plain = pod_uid(c.state.one(pn("plain")))
    same = [
        dict(cpu='"1"'),
        dict(cpu='"1"', spec="  hostNetwork: false\n"),
        dict(cpu='"1"', spec="  hostNetwork: false\n  hostname: \"\"\n"),
        dict(cpu='"1"', spec="  hostNetwork: false\n  hostname: \"\"\n",
             container="    tty: false\n"),
        dict(cpu='"1"', spec="  hostNetwork: false\n  hostname: \"\"\n",
             container="    tty: false\n    imagePullPolicyy: Never\n"),
    ]
    for kw in same:
        since = len(c.msgs)
        write_file(os.path.join(m, "web.yaml"),
                   typed_manifest("web", uid=PINNED, **kw))
        write_file(os.path.join(m, "plain.yaml"), typed_manifest("plain", **kw))
        pr.barrier(c)
        got = msgs_naming(c, [PINNED, plain], since)
        if got:
            raise AssertionError("no semantic change (%s), yet: %s" % (
                kw, " | ".join(harness.summarize(x) for x in got)))
    differ = [
        ("automountServiceAccountToken: false",
         dict(spec="  automountServiceAccountToken: false\n"),
         lambda s: s.get("automountServiceAccountToken") is False),
        ("terminationGracePeriodSeconds: 0",
         dict(spec="  terminationGracePeriodSeconds: 0\n"),
         lambda s: s.get("terminationGracePeriodSeconds") == 0),
        ("securityContext.runAsUser: 0",
         dict(spec="  securityContext:\n    runAsUser: 0\n"),
         lambda s: s.get("securityContext") == {"runAsUser": 0}),
        ("volumes: []", dict(spec="  volumes: []\n"),
         lambda s: s.get("volumes") == []),
        ("cpu: 1000m", dict(cpu="1000m"),
         lambda s: s["containers"][0]["resources"]["limits"]["cpu"] == "1000m"),
    ]
    spec = ""
    for what, kw, check in differ:
        spec += kw.get("spec", "")
        cpu = kw.get("cpu", '"1"')
        write_file(os.path.join(m, "web.yaml"),
                   typed_manifest("web", uid=PINNED, cpu=cpu, spec=spec))
        write_file(os.path.join(m, "plain.yaml"),
                   typed_manifest("plain", cpu=cpu, spec=spec))
        msg = c.expect_pods("UPDATE", uids=[PINNED])
        if not check(msg["pods"][0]["spec"]):
            raise AssertionError("%s: the UPDATE does not carry it: %s" %
                                 (what, json.dumps(msg["pods"][0]["spec"])[:500]))
        c.wait_state(lambda s: [pod_uid(x) for x in s.by_name(pn("plain"))]
                     not in ([], [plain]),
                     "a new uid for plain.yaml after %s" % what)
        plain = pod_uid(c.state.one(pn("plain")))
    c.assert_kept([PINNED])


@test("fields core/v1 does not define never reach consumers and are "
      "warned about once per file, again only when the list changes")
def test_fields_core_v1_does_define_never(t):
    bad = typed_manifest("web", spec="  bogusField: 1\n",
                         container="    imagePullPolicyy: Never\n")
    m, d, c, pr = setup(t, {"web.yaml": bad,
                            "db.yaml": pod_yaml("db")}, probe=True)
    c.wait_until_state([pn("db"), pn("probe"), pn("web")])
    web = c.state.one(pn("web"))
    ctr = web["spec"]["containers"][0]
    if "bogusField" in web["spec"] or "imagePullPolicyy" in ctr:
        raise AssertionError("an unknown field reached a consumer: %s" %
                             json.dumps(web["spec"])[:500])
    if ctr.get("imagePullPolicy") != "IfNotPresent":
        raise AssertionError("the misspelt field must not count: %s" % ctr)
    fresh = d.connect()
    fresh.read_initial()
    if "bogusField" in fresh.state.one(pn("web"))["spec"]:
        raise AssertionError("an unknown field reached a new consumer")

    def warnings(name):
        return [x for x in d.logs() if x.level in ("warn", "warning") and
                name in x.msg and "unknown field" in x.msg]
    pr.barrier(c)
    pr.barrier(c)
    w = warnings("web.yaml")
    if len(w) != 1:
        raise AssertionError("want one warning for web.yaml after two "
                             "relists, got %d: %s" % (len(w), w))
    for path in ('"spec.bogusField"', '"spec.containers[0].imagePullPolicyy"'):
        if path not in w[0].msg:
            raise AssertionError("the warning does not name %s: %s" %
                                 (path, w[0].msg))
    if warnings("db.yaml"):
        raise AssertionError("db.yaml has no unknown field: %s" %
                             warnings("db.yaml"))
    uid = pod_uid(web)
    since = len(c.msgs)
    write_file(os.path.join(m, "web.yaml"),
               bad.replace("  name: web\n", "  name: web\n  labelz: {a: b}\n"))
    pr.barrier(c)
    w = warnings("web.yaml")
    if len(w) != 2 or '"metadata.labelz"' not in w[1].msg:
        raise AssertionError("a changed list must be warned about once "
                             "more: %s" % w)
    got = msgs_naming(c, [uid], since)
    if got:
        raise AssertionError("an unknown field changed the pod: %s" %
                             " | ".join(harness.summarize(x) for x in got))


@test("atomic replace through a hidden temp name (write .x.tmp, rename "
      "over x.yaml): pod replaced once, temp file never read", params=MODES)
def test_atomic_replace_through_hidden_temp_name(t):
    m, d, c, _ = setup(t, {"web.yaml": pod_yaml("web"),
                           "db.yaml": pod_yaml("db")})
    c.wait_until_state([pn("db"), pn("web")])
    old = pod_uid(c.state.one(pn("web")))
    db = pod_uid(c.state.one(pn("db")))
    tmp = os.path.join(m, ".web.yaml.swp")
    with open(tmp, "w") as f:
        f.write(pod_yaml("web", image="nginx:1.26"))
    os.rename(tmp, os.path.join(m, "web.yaml"))
    c.wait_state(lambda s: [pod_image(p) for p in s.by_name(pn("web"))] ==
                 ["nginx:1.26"], "web with image nginx:1.26")
    assert_replaced(c, t.mode, old, pod_uid(c.state.one(pn("web"))))
    c.assert_kept([db])
    noisy = [x for x in d.logs() if ".web.yaml.swp" in x.msg and
             x.level in ("error", "warn")]
    if noisy:
        raise AssertionError("the hidden temp file was read: %s" % noisy)
    t.soft(check_mode_ops, c, t.mode)


@test("rename a.yaml -> b.yaml: REMOVE of a's pod, ADD of b's (new uid: "
      "the path is part of it)", params=MODES)
def test_rename_yaml_b_yaml_remove_s(t):
    m, d, c, _ = setup(t, {"a.yaml": pod_yaml("web"),
                           "db.yaml": pod_yaml("db")})
    c.wait_until_state([pn("db"), pn("web")])
    old = pod_uid(c.state.one(pn("web")))
    db = pod_uid(c.state.one(pn("db")))
    os.rename(os.path.join(m, "a.yaml"), os.path.join(m, "b.yaml"))
    c.wait_state(lambda s: [pod_uid(p) for p in s.by_name(pn("web"))] not in
                 ([old], []), "web under a new uid")
    c.wait_until_state([pn("db"), pn("web")])
    assert_replaced(c, t.mode, old, pod_uid(c.state.one(pn("web"))))
    c.assert_kept([db])
    t.soft(check_mode_ops, c, t.mode)


@test("manifest directory deleted (rm -rf): all pods removed; re-created "
      "with manifests: pods added again, same uids, no restart",
      params=MODES)
def test_manifest_directory_deleted_rm_rf_all(t):
    m, d, c, _ = setup(t, {"web.yaml": pod_yaml("web"),
                           "db.yaml": pod_yaml("db")})
    c.wait_until_state([pn("db"), pn("web")])
    uids = {pod_name(p): u for u, p in c.state.pods.items()}
    pid = d.pid
    shutil.rmtree(m)
    c.wait_until_state([])
    if t.mode != INCR and not any(
            mm["op"] == "SET" and mm["pods"] == [] for mm in c.pods_msgs()):
        raise AssertionError("expected an empty SET")
    os.mkdir(m)
    write_file(os.path.join(m, "web.yaml"), pod_yaml("web"))
    c.wait_until_state([pn("web")])
    if pod_uid(c.state.one(pn("web"))) != uids[pn("web")]:
        raise AssertionError("same node+path+content must give the same uid")
    # Later changes in the re-created directory are still picked up.
    write_file(os.path.join(m, "db.yaml"), pod_yaml("db"))
    c.wait_until_state([pn("db"), pn("web")])
    d.assert_alive()
    if d.pid != pid:
        raise AssertionError("daemon restarted")
    t.soft(check_mode_ops, c, t.mode)


@test("ConfigMap-style layout: swapping the ..data symlink (rename "
      "..data_tmp over ..data) replaces the pod (seen by the relist)",
      params=MODES)
def test_configmap_style_layout_swapping_data_symlink(t):
    m = t.mkdir("manifests")
    v1 = os.path.join(m, "..2024_01_01_00_00_00.000000001")
    os.mkdir(v1)
    write_file(os.path.join(v1, "web.yaml"), pod_yaml("web"))
    os.symlink(os.path.basename(v1), os.path.join(m, "..data"))
    os.symlink("..data/web.yaml", os.path.join(m, "web.yaml"))
    write_file(os.path.join(m, "db.yaml"), pod_yaml("db"))
    d = t.daemon(m)
    c = d.connect()
    c.wait_until_state([pn("db"), pn("web")])
    old = pod_uid(c.state.one(pn("web")))
    db = pod_uid(c.state.one(pn("db")))
    v2 = os.path.join(m, "..2024_01_02_00_00_00.000000002")
    os.mkdir(v2)
    write_file(os.path.join(v2, "web.yaml"), pod_yaml("web",
                                                      image="nginx:1.26"))
    os.symlink(os.path.basename(v2), os.path.join(m, "..data_tmp"))
    os.rename(os.path.join(m, "..data_tmp"), os.path.join(m, "..data"))
    c.wait_state(lambda s: [pod_image(p) for p in s.by_name(pn("web"))] ==
                 ["nginx:1.26"], "web with image nginx:1.26")
    assert_replaced(c, t.mode, old, pod_uid(c.state.one(pn("web"))))
    c.assert_kept([db])
    t.soft(check_mode_ops, c, t.mode)


@test("bad manifest added, then fixed: error logged, then its pod is added",
      params=MODES)
def test_bad_manifest_added_fixed_error_logged(t):
    m, d, c, _ = setup(t, {"web.yaml": pod_yaml("web")})
    c.wait_until_state([pn("web")])
    web = pod_uid(c.state.one(pn("web")))
    path = os.path.join(m, "fixme.yaml")
    write_file(path, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: fixme\n"
               "  labels: {app: fixme\nspec: {}\n")
    d.wait_file_error(path)
    write_file(path, pod_yaml("fixme"))
    expect_added(c, t.mode, [pn("fixme")], [pn("fixme"), pn("web")])
    c.wait_until_state([pn("fixme"), pn("web")])
    c.assert_kept([web])
    t.soft(check_mode_ops, c, t.mode)


@test("bad manifests present at start are each logged once with a reason "
      "and skipped; the good pods are delivered and kept across relists",
      params=MODES)
def test_bad_manifests_present_start_each_logged(t):
    m = t.mkdir("manifests")
    write_file(os.path.join(m, "web.yaml"), pod_yaml("web"))
    bad = {}
    for name in BAD_FIXTURES:
        p = os.path.join(m, "bad-" + name)
        write_file(p, read_fixture("bad", name))
        bad[p] = BAD_FIXTURES[name][1]
    p = os.path.join(m, "garbage.bin")
    write_file(p, garbage_bytes())
    bad[p] = harness.GARBAGE_WORDS
    pr = Probe(t, m)
    d = t.daemon(m)
    c = d.connect()
    c.wait_until_state([pn("probe"), pn("web")])
    first = c.pods_msgs()[0]
    if first["op"] != initial_op(t.mode):
        raise AssertionError("first pods message: %s" %
                             harness.summarize(first))
    uids = c.state.uids()
    for p, words in bad.items():
        line = d.wait_file_error(p)
        assert_reason(line.msg.split('file "%s"' % p, 1)[1], words,
                      os.path.basename(p))
    pr.barrier(c)
    pr.barrier(c)
    c.assert_kept(uids)
    if c.state.names() != [pn("probe"), pn("web")]:
        raise AssertionError("state changed: %s" % c.state)
    for p in bad:
        t.soft(logged_once, d, p)
    d.assert_alive()
    t.soft(check_mode_ops, c, t.mode)


# ===========================================================================
# Incremental-only scenarios (the mode does not change what they check)

@test("good fixtures: pods carry source annotations, generated uid = "
      "config.hash, name-node suffix, namespace default, nodeName, Pending, "
      "NoExecute toleration and API defaults")
def test_good_fixtures_pods_carry_source_annotations(t):
    m = t.mkdir("manifests")
    for name in os.listdir(harness.fixture("good")):
        write_file(os.path.join(m, name), read_fixture("good", name))
    d = t.daemon(m)
    c = d.connect()
    want = [pn(x) for x in ("nginx", "json-pod", "first-doc", "pinned",
                            "etcd", "flow")]
    c.wait_until_state(want)
    uids = set()
    for p in c.state.pods.values():
        name = pod_name(p)
        meta = p["metadata"]
        uid = meta.get("uid", "")
        if p.get("apiVersion") != "v1" or p.get("kind") != "Pod":
            raise AssertionError("%s: apiVersion/kind %r/%r" %
                                 (name, p.get("apiVersion"), p.get("kind")))
        if name == pn("pinned"):
            if uid != "5a1c2f3e-7b8d-4e9f-a0b1-c2d3e4f5a6b7":
                raise AssertionError("pinned uid not used verbatim: %r" %
                                     uid)
        elif not UID_RE.match(uid):
            raise AssertionError("%s: uid %r is not 32 lowercase hex" %
                                 (name, uid))
        uids.add(uid)
        ns = "kube-system" if name == pn("etcd") else "default"
        if meta.get("namespace") != ns:
            raise AssertionError("%s: namespace %r" % (name,
                                                       meta.get("namespace")))
        src = pod_ann(p, "kubernetes.io/config.source")
        if src != "file":
            raise AssertionError("%s: config.source %r" % (name, src))
        if pod_ann(p, "kubernetes.io/config.hash") != uid:
            raise AssertionError("%s: config.hash %r != uid %r" %
                                 (name, pod_ann(p,
                                                "kubernetes.io/config.hash"),
                                  uid))
        seen = pod_ann(p, "kubernetes.io/config.seen") or ""
        frac = SEEN_RE.match(seen)
        if not frac or (frac.group(1) or "").endswith("0"):
            raise AssertionError("%s: config.seen %r is not RFC 3339 with "
                                 "trimmed nanoseconds" % (name, seen))
        spec = p["spec"]
        if spec.get("nodeName") != NODE:
            raise AssertionError("%s: nodeName %r" % (name,
                                                      spec.get("nodeName")))
        if (p.get("status") or {}).get("phase") != "Pending":
            raise AssertionError("%s: status %r" % (name, p.get("status")))
        tol = spec.get("tolerations") or []
        if {"operator": "Exists", "effect": "NoExecute"} not in tol:
            raise AssertionError("%s: no {operator: Exists, effect: "
                                 "NoExecute} toleration: %r" % (name, tol))
        for key, val in (("restartPolicy", "Always"),
                         ("dnsPolicy", "ClusterFirst"),
                         ("terminationGracePeriodSeconds", 30),
                         ("schedulerName", "default-scheduler"),
                         ("enableServiceLinks", True)):
            if spec.get(key) != val:
                raise AssertionError("%s: spec.%s is %r, want %r" %
                                     (name, key, spec.get(key), val))
        if not isinstance(spec.get("securityContext"), dict):
            raise AssertionError("%s: no securityContext" % name)
        for ct in spec["containers"]:
            if ct.get("terminationMessagePath") != "/dev/termination-log" or \
                    ct.get("terminationMessagePolicy") != "File":
                raise AssertionError("%s: container %s lacks termination "
                                     "message defaults: %r" %
                                     (name, ct.get("name"), ct))
    ng = c.state.one(pn("nginx"))
    ct = ng["spec"]["containers"][0]
    if ct.get("imagePullPolicy") != "IfNotPresent":
        raise AssertionError("tagged image: imagePullPolicy %r" %
                             ct.get("imagePullPolicy"))
    if ct["ports"][0].get("protocol") != "TCP":
        raise AssertionError("port protocol default: %r" % ct["ports"])
    if pod_labels(ng) != {"app": "nginx", "tier": "web"}:
        raise AssertionError("labels: %r" % pod_labels(ng))
    jp = c.state.one(pn("json-pod"))["spec"]["containers"][0]
    if jp.get("imagePullPolicy") != "Always":
        raise AssertionError("untagged image: imagePullPolicy %r" %
                             jp.get("imagePullPolicy"))
    if len(uids) != len(want):
        raise AssertionError("uids are not distinct")
    c.assert_never_named([pn("second-doc")])
    errs = [x for x in d.logs() if x.level == "error"]
    if errs:
        raise AssertionError("good fixtures logged errors: %s" % errs)


@test("node name with upper case: pod name suffix is lower-cased, "
      "spec.nodeName is kept as given")
def test_node_name_upper_case_pod_name(t):
    m, d, c, _ = setup(t, {"web.yaml": pod_yaml("web")}, node="Worker-1")
    c.wait_until_state(["web-worker-1"])
    p = c.state.one("web-worker-1")
    if p["spec"].get("nodeName") != "Worker-1":
        raise AssertionError("spec.nodeName %r" % p["spec"].get("nodeName"))
    if d.connect().hello.get("node") != "Worker-1":
        raise AssertionError("hello node")


@test("hidden files (leading '.') are ignored at start and at runtime; "
      "renames to/from hidden names look like delete/create")
def test_hidden_files_leading_ignored_start_runtime(t):
    m, d, c, pr = setup(t, {"web.yaml": pod_yaml("web"),
                            ".hidden.yaml": pod_yaml("hidden"),
                            "db.yaml": pod_yaml("db")}, probe=True)
    c.wait_until_state([pn("db"), pn("probe"), pn("web")])
    write_file(os.path.join(m, ".later.yaml"), pod_yaml("later"),
               atomic=False)
    write_file(os.path.join(m, ".broken.yaml"), "{{{ not yaml", atomic=False)
    pr.barrier(c)
    c.assert_never_named([pn("hidden"), pn("later")])
    db = pod_uid(c.state.one(pn("db")))
    os.rename(os.path.join(m, "db.yaml"), os.path.join(m, ".db.yaml"))
    c.expect_pods("REMOVE", uids=[db])
    os.rename(os.path.join(m, ".later.yaml"), os.path.join(m, "later.yaml"))
    c.expect_pods("ADD", names=[pn("later")])
    pr.barrier(c)
    c.wait_until_state([pn("later"), pn("probe"), pn("web")])
    c.assert_never_named([pn("hidden")])
    noisy = [x for x in d.logs() if x.level in ("error", "warn") and
             (".hidden.yaml" in x.msg or ".broken.yaml" in x.msg)]
    if noisy:
        raise AssertionError("hidden files were read: %s" % noisy)


@test("subdirectories are skipped (no recursion), at start and at runtime")
def test_subdirectories_skipped_no_recursion_start_runtime(t):
    m = t.mkdir("manifests")
    write_file(os.path.join(m, "web.yaml"), pod_yaml("web"))
    os.mkdir(os.path.join(m, "sub"))
    write_file(os.path.join(m, "sub", "inner.yaml"), pod_yaml("inner"))
    pr = Probe(t, m)
    d = t.daemon(m)
    c = d.connect()
    c.wait_until_state([pn("probe"), pn("web")])
    os.mkdir(os.path.join(m, "sub2.yaml"))
    write_file(os.path.join(m, "sub2.yaml", "inner2.yaml"),
               pod_yaml("inner2"))
    write_file(os.path.join(m, "db.yaml"), pod_yaml("db"))
    c.wait_until_state([pn("db"), pn("probe"), pn("web")])
    pr.barrier(c)
    c.assert_never_named([pn("inner"), pn("inner2")])
    c.wait_until_state([pn("db"), pn("probe"), pn("web")])
    d.assert_alive()


@test("a FIFO in the directory is skipped with a log line naming it and "
      "never blocks the daemon (at start and at runtime)")
def test_fifo_directory_skipped_log_line_naming(t):
    m = t.mkdir("manifests")
    write_file(os.path.join(m, "web.yaml"), pod_yaml("web"))
    fifo = os.path.join(m, "pipe.yaml")
    os.mkfifo(fifo)
    pr = Probe(t, m)
    d = t.daemon(m)
    c = d.connect()
    c.wait_until_state([pn("probe"), pn("web")])
    d.wait_file_error(fifo, levels=("error", "warn"))
    fifo2 = os.path.join(m, "pipe2.yaml")
    os.mkfifo(fifo2)
    write_file(os.path.join(m, "db.yaml"), pod_yaml("db"))
    c.wait_until_state([pn("db"), pn("probe"), pn("web")])
    pr.barrier(c)
    d.wait_file_error(fifo2, levels=("error", "warn"))
    c2 = d.connect()
    c2.read_initial()
    if c2.state.names() != [pn("db"), pn("probe"), pn("web")]:
        raise AssertionError("a new consumer sees %s" % c2.state)
    d.assert_alive()


@test("a dangling symlink is skipped with a log line naming it; the pod "
      "appears once the target exists (relist)")
def test_dangling_symlink_skipped_log_line_naming(t):
    m = t.mkdir("manifests")
    out = t.mkdir("outside")
    write_file(os.path.join(m, "web.yaml"), pod_yaml("web"))
    link = os.path.join(m, "link.yaml")
    os.symlink(os.path.join(out, "later.yaml"), link)
    d = t.daemon(m)
    c = d.connect()
    c.wait_until_state([pn("web")])
    pr = Probe(t, m)
    c.wait_until_state([pn("probe"), pn("web")])   # a relist has run
    t.soft(d.wait_file_error, link, levels=("error", "warn"), timeout=1)
    web = pod_uid(c.state.one(pn("web")))
    write_file(os.path.join(out, "later.yaml"), pod_yaml("linked"))
    c.expect_pods("ADD", names=[pn("linked")])
    c.wait_until_state([pn("linked"), pn("probe"), pn("web")])
    c.assert_kept([web])


@test("a symlinked manifest is read through the link; a change of the "
      "target outside the directory is picked up by the relist")
def test_symlinked_manifest_read_through_link_change(t):
    m = t.mkdir("manifests")
    out = t.mkdir("outside")
    write_file(os.path.join(out, "web.yaml"), pod_yaml("web"))
    os.symlink(os.path.join(out, "web.yaml"), os.path.join(m, "web.yaml"))
    write_file(os.path.join(m, "db.yaml"), pod_yaml("db"))
    d = t.daemon(m)
    c = d.connect()
    c.wait_until_state([pn("db"), pn("web")])
    old = pod_uid(c.state.one(pn("web")))
    db = pod_uid(c.state.one(pn("db")))
    write_file(os.path.join(out, "web.yaml"), pod_yaml("web",
                                                       image="nginx:1.26"))
    c.wait_state(lambda s: [pod_image(p) for p in s.by_name(pn("web"))] ==
                 ["nginx:1.26"], "web with image nginx:1.26")
    assert_replaced(c, INCR, old, pod_uid(c.state.one(pn("web"))))
    c.assert_kept([db])


@test("symlink policy (the kubelet's): a link to a file outside the "
      "directory is followed; a link to a directory outside is not recursed "
      "into; links to a device or a FIFO outside are skipped with a log line "
      "and never block or exhaust the daemon; a link loop is reported")
def test_symlink_policy_kubelet_s_link_file(t):
    m = t.mkdir("manifests")
    out = t.mkdir("outside")
    write_file(os.path.join(out, "far.yaml"), pod_yaml("far"))
    os.symlink(os.path.join(out, "far.yaml"), os.path.join(m, "far.yaml"))
    os.mkdir(os.path.join(out, "dir"))
    write_file(os.path.join(out, "dir", "inner.yaml"), pod_yaml("inner"))
    os.symlink(os.path.join(out, "dir"), os.path.join(m, "dir.yaml"))
    zero = os.path.join(m, "zero.yaml")
    os.symlink("/dev/zero", zero)
    fifo = os.path.join(out, "pipe")
    os.mkfifo(fifo)
    os.symlink(fifo, os.path.join(m, "pipe.yaml"))
    loop = os.path.join(m, "loop.yaml")
    os.symlink(loop, loop)
    write_file(os.path.join(m, "web.yaml"), pod_yaml("web"))
    pr = Probe(t, m)
    d = t.daemon(m)
    c = d.connect()
    c.wait_until_state([pn("far"), pn("probe"), pn("web")])
    d.wait_file_error(zero, levels=("error", "warn"))
    d.wait_file_error(os.path.join(m, "pipe.yaml"), levels=("error", "warn"))
    d.wait_file_error(loop, levels=("error", "warn"))
    pr.barrier(c)
    c.assert_never_named([pn("inner")])
    d.assert_alive()


@test("manifest moved out of the directory: REMOVE; moved back in: ADD "
      "with the same uid (same node, path and content)")
def test_manifest_moved_out_directory_remove_moved(t):
    m, d, c, _ = setup(t, {"web.yaml": pod_yaml("web"),
                           "db.yaml": pod_yaml("db")})
    out = t.mkdir("outside")
    c.wait_until_state([pn("db"), pn("web")])
    web = pod_uid(c.state.one(pn("web")))
    db = pod_uid(c.state.one(pn("db")))
    os.rename(os.path.join(m, "web.yaml"), os.path.join(out, "web.yaml"))
    c.expect_pods("REMOVE", uids=[web])
    c.wait_until_state([pn("db")])
    os.rename(os.path.join(out, "web.yaml"), os.path.join(m, "web.yaml"))
    c.expect_pods("ADD", uids=[web])
    c.wait_until_state([pn("db"), pn("web")])
    c.assert_kept([db])


@test("manifest directory moved away: pods removed; moved back: pods "
      "return with the same uids and later edits are still seen")
def test_manifest_directory_moved_away_pods_removed(t):
    m, d, c, _ = setup(t, {"web.yaml": pod_yaml("web"),
                           "db.yaml": pod_yaml("db")})
    c.wait_until_state([pn("db"), pn("web")])
    uids = sorted(c.state.uids())
    os.rename(m, t.path("manifests.away"))
    c.wait_until_state([])
    os.rename(t.path("manifests.away"), m)
    c.wait_until_state([pn("db"), pn("web")])
    if sorted(c.state.uids()) != uids:
        raise AssertionError("uids changed after moving the directory back")
    write_file(os.path.join(m, "new.yaml"), pod_yaml("new"))
    c.wait_until_state([pn("db"), pn("new"), pn("web")])
    d.assert_alive()


@test("duplicate pod in two files: the first file in sorted order wins, "
      "a log line names both files, relists and edits of the loser keep it")
def test_duplicate_pod_two_files_first_file(t):
    m = t.mkdir("manifests")
    a = os.path.join(m, "web.yaml")
    b = os.path.join(m, "web.yaml.bak")
    write_file(a, pod_yaml("web", image="nginx:1.1"))
    write_file(b, pod_yaml("web", image="nginx:1.2"))
    pr = Probe(t, m)
    d = t.daemon(m)
    c = d.connect()
    c.wait_until_state([pn("probe"), pn("web")])
    web = c.state.one(pn("web"))
    if pod_image(web) != "nginx:1.1":
        raise AssertionError("the later file won: image %s" % pod_image(web))
    d.wait_log(lambda x: x.level in ("warn", "error") and b in x.msg and
               a in x.msg.replace(b, ""),
               "a warning/error naming both %s and %s" % (a, b))
    pr.barrier(c)
    write_file(b, pod_yaml("web", image="nginx:1.3"))
    write_file(b, pod_yaml("web", image="nginx:1.4"), atomic=False)
    pr.barrier(c)
    now = c.state.one(pn("web"))
    if pod_uid(now) != pod_uid(web) or pod_image(now) != "nginx:1.1":
        raise AssertionError("the duplicate replaced the first file's pod: "
                             "%s" % json.dumps(now)[:300])
    c.assert_kept([pod_uid(web)])


@test("duplicate pod in two files: deleting the winning file hands the pod "
      "to the other file")
def test_duplicate_pod_two_files_deleting_winning(t):
    m = t.mkdir("manifests")
    a = os.path.join(m, "a-web.yaml")
    b = os.path.join(m, "b-web.yaml")
    write_file(a, pod_yaml("web", image="nginx:1.1"))
    write_file(b, pod_yaml("web", image="nginx:1.2"))
    d = t.daemon(m)
    c = d.connect()
    c.wait_until_state([pn("web")])
    if pod_image(c.state.one(pn("web"))) != "nginx:1.1":
        raise AssertionError("a-web.yaml must win")
    os.remove(a)
    c.wait_state(lambda s: [pod_image(p) for p in s.by_name(pn("web"))] ==
                 ["nginx:1.2"], "web from b-web.yaml")


@test("x.yaml and six backups define one pod: deleting x.yaml hands the "
      "pod to the first remaining file in sorted order, and the next "
      "relists keep it there (its uid changed exactly once); three such "
      "groups at once")
def test_x_yaml_six_backups_define_one(t):
    m = t.mkdir("manifests")
    backups = (".yaml~", ".yaml.save", ".yaml.orig", ".yaml.old",
               ".yaml.bak", ".yaml.0")
    groups = ("x", "y", "z")
    for g in groups:
        write_file(os.path.join(m, g + ".yaml"),
                   pod_yaml(g, image="nginx:1.99"))
        for i, ext in enumerate(backups):
            write_file(os.path.join(m, g + ext),
                       pod_yaml(g, image="nginx:1.%d" % i))
    # The first remaining file in bytewise order: g.yaml.0.
    heir = "nginx:1.%d" % backups.index(sorted(backups)[0])
    pr = Probe(t, m)
    d = t.daemon(m)
    c = d.connect()
    c.wait_until_state(sorted([pn("probe")] + [pn(g) for g in groups]))
    before = {}
    for g in groups:
        p = c.state.one(pn(g))
        if pod_image(p) != "nginx:1.99":
            raise AssertionError("%s.yaml must win, got image %s" %
                                 (g, pod_image(p)))
        before[g] = pod_uid(p)
    mark = len(c.msgs)
    for g in groups:
        os.remove(os.path.join(m, g + ".yaml"))

    def handed(s):
        return all([pod_image(p) for p in s.by_name(pn(g))] == [heir]
                   for g in groups)
    c.wait_state(handed, "every pod from its %s file (image %s)" %
                 (sorted(backups)[0], heir))
    after = {g: pod_uid(c.state.one(pn(g))) for g in groups}
    pr.barrier(c)
    pr.barrier(c)           # two relists since
    for g in groups:
        p = c.state.one(pn(g))
        if pod_uid(p) != after[g] or pod_image(p) != heir:
            raise AssertionError("a relist moved %s again: uid %s image %s "
                                 "(handed to uid %s)" % (g, pod_uid(p),
                                                         pod_image(p),
                                                         after[g]))
        added = [pod_uid(q) for x in c.msgs[mark:]
                 if x.get("type") == "pods" and x["op"] in ("ADD", "SET")
                 for q in x["pods"] if pod_name(q) == pn(g)]
        uids = []
        for u in added:
            if u not in uids:
                uids.append(u)
        if before[g] in uids or uids != [after[g]]:
            raise AssertionError("%s's uid changed %d times after the "
                                 "delete (want once, %s -> %s): %s" %
                                 (g, len(uids), before[g], after[g], uids))


@test("uid is stable across restarts for the same node, path and content, "
      "and changes with the node name")
def test_uid_stable_across_restarts_same_node(t):
    m, d, c, _ = setup(t, {"web.yaml": pod_yaml("web")})
    c.wait_until_state([pn("web")])
    u1 = pod_uid(c.state.one(pn("web")))
    rc = d.stop()
    if rc != 0:
        raise AssertionError("SIGTERM exit status %s" % rc)
    d2 = t.daemon(m)
    c2 = d2.connect()
    c2.wait_until_state([pn("web")])
    if pod_uid(c2.state.one(pn("web"))) != u1:
        raise AssertionError("uid changed across a restart")
    d2.stop()
    d3 = t.daemon(m, node="node2")
    c3 = d3.connect()
    c3.wait_until_state([pn("web", "node2")])
    if pod_uid(c3.state.one(pn("web", "node2"))) == u1:
        raise AssertionError("uid did not change with the node name")


@test("reformatting a manifest (YAML->JSON, key order, comments, quoting, "
      "an ignored extra document) keeps the uid: nothing emitted")
def test_reformatting_manifest_yaml_json_key_order(t):
    obj = pod_obj("web", labels={"app": "web", "tier": "front"})
    obj["spec"]["containers"][0]["args"] = ["-g", "daemon off;"]
    m, d, c, pr = setup(t, {"web.yaml": to_yaml(obj, "original")},
                        probe=True)
    c.wait_until_state([pn("probe"), pn("web")])
    u = pod_uid(c.state.one(pn("web")))
    mark = len(c.msgs)

    def rev(x):
        if isinstance(x, dict):
            return {k: rev(x[k]) for k in reversed(list(x))}
        if isinstance(x, list):
            return [rev(v) for v in x]
        return x
    path = os.path.join(m, "web.yaml")
    variants = [
        json.dumps(rev(obj)),
        json.dumps(obj, indent=8) + "\n\n",
        "# hand written\nkind: Pod\napiVersion: v1\nspec:\n  containers:\n"
        "  - image: nginx:1.25   # plain scalar\n    name: main\n"
        "    args: ['-g', \"daemon off;\"]\nmetadata:\n"
        "  labels: {tier: front, app: 'web'}\n  name: web\n",
        to_yaml(obj) + "---\n" + pod_yaml("other"),
    ]
    for text in variants:
        write_file(path, text)
        pr.barrier(c)
        if pod_uid(c.state.one(pn("web"))) != u:
            raise AssertionError("uid changed for the equivalent text %r" %
                                 text[:200])
    for mm in c.pods_msgs(mark):
        if pn("web") in msg_names(mm):
            raise AssertionError("an equivalent rewrite emitted %s" %
                                 harness.summarize(mm))


@test("pod renamed inside its file: the new pod is added and the old one "
      "removed (at the latest by the relist)")
def test_pod_renamed_inside_file_new_pod(t):
    m, d, c, _ = setup(t, {"web.yaml": pod_yaml("web"),
                           "db.yaml": pod_yaml("db")})
    c.wait_until_state([pn("db"), pn("web")])
    db = pod_uid(c.state.one(pn("db")))
    write_file(os.path.join(m, "web.yaml"), pod_yaml("web2"))
    c.wait_until_state([pn("db"), pn("web2")])
    c.assert_kept([db])


@test("manifest edited into an invalid state: error logged, its pod removed "
      "by the relist, others kept; fixed again: the same pod returns")
def test_manifest_edited_invalid_state_error_logged(t):
    m, d, c, _ = setup(t, {"web.yaml": pod_yaml("web"),
                           "db.yaml": pod_yaml("db")})
    c.wait_until_state([pn("db"), pn("web")])
    web = pod_uid(c.state.one(pn("web")))
    db = pod_uid(c.state.one(pn("db")))
    path = os.path.join(m, "db.yaml")
    write_file(path, "apiVersion: v1\nkind: Pod\nmetadata: [oops\n")
    d.wait_file_error(path)
    c.expect_pods("REMOVE", uids=[db])
    c.wait_until_state([pn("web")])
    write_file(path, pod_yaml("db"))
    c.expect_pods("ADD", uids=[db])
    c.wait_until_state([pn("db"), pn("web")])
    c.assert_kept([web])


@test("pod-manifest-path is a single file: its pod is delivered, edits "
      "are picked up, deleting it removes the pod")
def test_pod_manifest_path_single_file_pod(t):
    out = t.mkdir("etc")
    path = os.path.join(out, "web.yaml")
    write_file(path, pod_yaml("web"))
    d = t.daemon(path)
    c = d.connect()
    c.wait_until_state([pn("web")])
    write_file(path, pod_yaml("web", image="nginx:1.26"))
    c.wait_state(lambda s: [pod_image(p) for p in s.by_name(pn("web"))] ==
                 ["nginx:1.26"], "web with image nginx:1.26")
    os.remove(path)
    c.wait_until_state([])
    d.assert_alive()


@test("a manifest of 10 MiB - 1 byte is accepted (size limit boundary)")
def test_manifest_10_mib_1_byte_accepted(t):
    m, d, c, _ = setup(t, {"web.yaml": pod_yaml("web")})
    c.wait_until_state([pn("web")])
    write_file(os.path.join(m, "big.yaml"), sized_manifest("big", MIB10 - 1))
    c.expect_pods("ADD", names=[pn("big")])
    c.wait_until_state([pn("big"), pn("web")])


def relist_barrier(d, c, pr):
    """SIGHUP, then wait until the consumer holds the probe's new label:
    a relist ran after every file written before the call."""
    pr.round += 1
    pr._write()
    want = str(pr.round)
    d.send_signal(signal.SIGHUP)
    c.wait_state(lambda s: any(pod_labels(p).get("round") == want
                               for p in s.by_name(pr.pod_name())),
                 "after a relist (probe round %s)" % want)


def file_lines(d, path):
    """(level, text after 'file "<path>": ') of every log line naming the
    file."""
    key = 'file "%s": ' % path
    return [(x.level, x.msg.split(key, 1)[1]) for x in d.logs()
            if key in x.msg]


@test("one error, one line: a bad manifest is logged once at error level "
      "when the file's state changes (written bad, bad again after a fix) "
      "and once more only when the error text changes; a write in "
      "progress is logged at trace only, a repeat of the same reason never "
      "above debug")
def test_one_error_one_line_bad_manifest(t):
    m = t.mkdir("manifests")
    pr = Probe(t, m)
    d = t.daemon(m, freq="1h", extra=["-v", "4"])
    c = d.connect()
    c.wait_until_state([pn("probe")])
    path = os.path.join(m, "bad.yaml")
    head = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bad\n"

    # Written in two steps: the first step's event is a write in
    # progress (no close yet).
    with open(path, "w") as f:
        f.write(head)
        f.flush()
        d.wait_log(lambda x: x.level == "trace" and
                   ('file "%s"' % path) in x.msg and "still being written"
                   in x.msg, "a trace line for the write in progress")
        f.write("spec: {}\n")
    first = d.wait_file_error(path)
    reason1 = first.msg.split('file "%s": ' % path, 1)[1]

    def errors():
        return [r for lv, r in file_lines(d, path) if lv == "error"]

    def check(want_errors, allowed_debug):
        lines = file_lines(d, path)
        errs = [r for lv, r in lines if lv == "error"]
        if errs != want_errors:
            raise AssertionError("error lines %s, want %s" % (errs,
                                                              want_errors))
        for lv, r in lines:
            if lv in ("warn", "warning") or (lv == "info" and
                                              r != "valid again"):
                raise AssertionError("a %s line: %r" % (lv, r))
            if lv == "debug" and r not in allowed_debug:
                raise AssertionError("a debug line that repeats no reason: "
                                     "%r" % r)
            if lv == "trace" and "still being written" not in r:
                raise AssertionError("a trace line for another event: %r" %
                                     r)

    # Re-read unchanged (two relists), rewritten in place with the same
    # bytes, touched: no new error line.
    relist_barrier(d, c, pr)
    relist_barrier(d, c, pr)
    write_file(path, head + "spec: {}\n", atomic=False)
    os.utime(path)
    relist_barrier(d, c, pr)
    check([reason1], {reason1})

    # Another error text: one more line, and only one.
    write_file(path, head + "spec:\n  containers:\n  - name: c\n")
    d.wait_log(lambda x: x.level == "error" and len(errors()) == 2,
               "a second error line for the new reason")
    reason2 = errors()[1]
    if reason2 == reason1:
        raise AssertionError("the second line repeats the first reason")
    relist_barrier(d, c, pr)
    relist_barrier(d, c, pr)
    check([reason1, reason2], {reason1, reason2})

    # Fixed, then broken again the first way: the state changed twice,
    # so the first reason is an error line again.
    write_file(path, pod_yaml("bad"))
    c.wait_until_state([pn("bad"), pn("probe")])
    write_file(path, head + "spec: {}\n")
    d.wait_log(lambda x: len(errors()) == 3, "an error line after the fix")
    relist_barrier(d, c, pr)
    check([reason1, reason2, reason1], {reason1, reason2})
    d.assert_alive()


# ---------------------------------------------------------------------------
# Bad inputs dropped into a running daemon (one test each)

def bad_runtime(t, fname, data, words, chmod=None):
    m, d, c, pr = setup(t, {"web.yaml": pod_yaml("web"),
                            "db.yaml": pod_yaml("db")}, probe=True)
    names = [pn("db"), pn("probe"), pn("web")]
    c.wait_until_state(names)
    uids = c.state.uids()
    path = os.path.join(m, fname)
    write_file(path, data)
    if chmod is not None:
        os.chmod(path, chmod)
    line = d.wait_file_error(path)
    assert_reason(line.msg.split('file "%s"' % path, 1)[1], words, fname)
    pr.barrier(c)
    pr.barrier(c)
    c.assert_kept(uids)
    if c.state.names() != names:
        raise AssertionError("state changed: %s" % c.state)
    t.soft(logged_once, d, path)
    d.assert_alive()
    c2 = d.connect()
    c2.read_initial()
    if c2.state.names() != names:
        raise AssertionError("a new consumer sees %s" % c2.state)


def _bad_fixture_test(fname, desc, words):
    @test("bad input at runtime, %s (%s): error logged once naming the "
          "file with a reason, other pods kept, daemon alive" % (desc, fname))
    def _(t):
        bad_runtime(t, fname, read_fixture("bad", fname), words)


for _name, (_desc, _words) in BAD_FIXTURES.items():
    _bad_fixture_test(_name, _desc, _words)


@test("bad input at runtime, binary garbage: error logged once naming the "
      "file with a reason, other pods kept, daemon alive")
def test_bad_input_runtime_binary_garbage_error(t):
    bad_runtime(t, "garbage.yaml", garbage_bytes(), harness.GARBAGE_WORDS)


@test("bad input at runtime, too large (exactly 10 MiB): error logged once "
      "naming the file with a reason, other pods kept, daemon alive")
def test_bad_input_runtime_too_large_exactly(t):
    bad_runtime(t, "huge.yaml", sized_manifest("huge", MIB10),
                harness.TOO_LARGE_WORDS)


@test("bad input at runtime, unreadable (chmod 000): error logged once "
      "naming the file with a reason, other pods kept, daemon alive")
def test_bad_input_runtime_unreadable_chmod_000(t):
    if IS_ROOT:
        t.skip("running as root, which reads a chmod 000 file; the FIFO "
               "and dangling-symlink tests cover unreadable entries")
    bad_runtime(t, "secret.yaml", pod_yaml("secret"),
                harness.UNREADABLE_WORDS, chmod=0)


@test("a burst of 5,000 manifests: during it, status requests are answered, "
      "a new consumer is brought in sync and SIGHUP is taken; every pod "
      "arrives, then every deletion; SIGTERM ends the daemon cleanly")
def test_burst_5_000_manifests_during_status(t):
    n = 5000
    m, d, c, _ = setup(t, {}, freq="1h")
    c.read_initial()
    stage = t.mkdir("stage")
    names = []
    for i in range(n):
        fname = "b%05d.yaml" % i
        write_file(os.path.join(stage, fname), pod_yaml("b%05d" % i))
        names.append(fname)
    for fname in names:
        os.rename(os.path.join(stage, fname), os.path.join(m, fname))
    # The loop answers while the burst is read (no timing is asserted:
    # that each is served at all, before every pod is in, is the point).
    r = t.run_cmd(["status", "--socket", d.sock, "-o", "json"])
    if r.returncode != 0:
        raise AssertionError("podmux status during the burst: exit %d: %s" %
                             (r.returncode, r.stderr[-300:]))
    st = json.loads(r.stdout)
    late = d.connect()
    late.read_initial()
    d.send_signal(signal.SIGHUP)
    c.wait_state(lambda s: len(s.names()) == n, "all %d pods" % n,
                 timeout=harness.T_WAIT * 4)
    late.wait_state(lambda s: len(s.names()) == n, "all %d pods (late "
                    "consumer)" % n, timeout=harness.T_WAIT * 4)
    if not isinstance(st.get("sources"), list):
        raise AssertionError("status without sources: %r" % st)
    for fname in names:
        os.unlink(os.path.join(m, fname))
    c.wait_state(lambda s: not s.names(), "no pods", timeout=harness.T_WAIT * 4)
    rc = d.stop()
    if rc != 0:
        raise AssertionError("podmux exited %s after SIGTERM" % rc)


@test("a bad manifest deleted or moved away is forgotten without a line "
      "(no 'valid again'); written bad again, its error is logged again")
def test_bad_manifest_deleted_moved_away_forgotten(t):
    m = t.mkdir("manifests")
    pr = Probe(t, m)
    d = t.daemon(m, freq="1h")
    c = d.connect()
    c.wait_until_state([pn("probe")])
    path = os.path.join(m, "bad.yaml")
    write_file(path, "kind: Pod\n")
    d.wait_file_error(path)
    os.unlink(path)
    relist_barrier(d, c, pr)
    info = [r for lv, r in file_lines(d, path) if lv != "error"]
    if info:
        raise AssertionError("lines about a deleted bad file: %s" % info)
    write_file(path, "kind: Pod\n")
    relist_barrier(d, c, pr)
    errs = [r for lv, r in file_lines(d, path) if lv == "error"]
    if len(errs) != 2:
        raise AssertionError("the error of the file written bad again was "
                             "not logged again: %s" % errs)


if __name__ == "__main__":
    harness.main()
