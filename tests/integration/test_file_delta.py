#!/usr/bin/env python3
"""The file source's deltas are exact on their own.

Random bursts of file operations on a static-pod directory, with the
relist period at an hour, so that nothing but the events can bring the
consumers to the right state: creates, edits, a pod renamed or moved to
another namespace inside its file, a pinned UID kept or changed, a name
duplicated, a file renamed (also over another), a file made invalid,
deletes, each written in place or by rename.  After each burst every
consumer's state (one reading all along, one connecting fresh) must equal
the file source's own full listing of the directory, `podmux validate
DIR`, in every --mode.  The seed is printed (note) and named on failure;
PODMUX_DELTA_SEED=N replays it, PODMUX_DELTA_BURSTS=N runs longer."""

import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import Consumer, test, to_yaml, write_file  # noqa: E402

BURSTS = int(os.environ.get("PODMUX_DELTA_BURSTS", "25"))
# Stamped by the daemon (when it first saw the pod, which source), not by
# the file: validate has neither.
STAMPS = ("kubernetes.io/config.seen", "kubernetes.io/config.source")


class Files:
    """The directory and what the test wrote there: each file's content
    is a pod (or garbage), written whole in place or by rename."""

    NAMES = ("alpha", "bravo", "charlie", "delta", "echo")
    NAMESPACES = (None, None, "ns-a", "ns-b")

    def __init__(self, d, rng):
        self.dir = d
        self.rng = rng
        self.content = {}   # file name -> the pod dict, or None if bad
        self.gen = 0
        self.lineage = 0
        self.did = []   # what the ops did, for messages

    def describe(self):
        """The files as the test wrote them, in sorted order."""
        out = []
        for f in sorted(self.content):
            p = self.content[f]
            if p is None:
                out.append("%s: bad" % f)
                continue
            m = p["metadata"]
            out.append("%s: %s/%s gen=%s%s" % (
                f, m.get("namespace", "default"), m["name"],
                m["labels"]["gen"], " uid=" + m["uid"] if "uid" in m else ""))
        return "\n  ".join(out)

    def _write(self, name, pod):
        self.gen += 1
        path = os.path.join(self.dir, name)
        if pod is None:
            data = "apiVersion: v1\nkind: Pod\nmetadata: {name: [\n"
        else:
            pod["metadata"].setdefault("labels", {})["gen"] = str(self.gen)
            data = to_yaml(pod)
        atomic = self.rng.random() < 0.5
        write_file(path, data, atomic=atomic)
        self.content[name] = pod
        self.did.append("%s %s" % ("renamed in" if atomic else "in place",
                                   name))

    def _pod(self, name, namespace, uid):
        meta = {"name": name}
        if namespace:
            meta["namespace"] = namespace
        if uid:
            meta["uid"] = uid
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                "spec": {"containers": [{"name": "c",
                                         "image": "busybox:1.36"}]}}

    def _fresh_uid(self):
        """A pinned UID no other file has, a third of the time."""
        if self.rng.random() < 0.67:
            return None
        self.lineage += 1
        return "pin-%d" % self.lineage

    def _pick(self, valid=True):
        fs = [f for f, p in self.content.items()
              if not valid or p is not None]
        return self.rng.choice(sorted(fs)) if fs else None

    # -- operations ---------------------------------------------------------
    def op_create(self):
        name = "f%03d.yaml" % self.rng.randrange(40)
        self._write(name, self._pod(self.rng.choice(self.NAMES),
                                    self.rng.choice(self.NAMESPACES),
                                    self._fresh_uid()))

    def op_edit(self):
        f = self._pick()
        if f:
            self._write(f, self.content[f])

    def op_rename_pod(self):
        f = self._pick()
        if f:
            p = self.content[f]
            p["metadata"]["name"] = self.rng.choice(self.NAMES)
            self._keep_or_change_uid(p)
            self._write(f, p)

    def op_move_namespace(self):
        f = self._pick()
        if f:
            p = self.content[f]
            ns = self.rng.choice(self.NAMESPACES)
            p["metadata"].pop("namespace", None)
            if ns:
                p["metadata"]["namespace"] = ns
            self._keep_or_change_uid(p)
            self._write(f, p)

    def _keep_or_change_uid(self, p):
        if self.rng.random() < 0.5:
            uid = self._fresh_uid()
            p["metadata"].pop("uid", None)
            if uid:
                p["metadata"]["uid"] = uid

    def op_duplicate(self):
        """Another file with a live pod's namespace/name (not its pinned
        UID: two stored pods never share one here)."""
        f = self._pick()
        if f:
            m = self.content[f]["metadata"]
            name = "f%03d.yaml" % self.rng.randrange(40)
            if name != f:
                self._write(name, self._pod(m["name"], m.get("namespace"),
                                            self._fresh_uid()))

    def op_rename_file(self):
        f = self._pick(valid=False)
        if f:
            to = "f%03d.yaml" % self.rng.randrange(40)
            if to != f:
                os.rename(os.path.join(self.dir, f),
                          os.path.join(self.dir, to))
                self.did.append("moved %s to %s" % (f, to))
                self.content[to] = self.content.pop(f)

    def op_invalid(self):
        f = self._pick()
        if f:
            self._write(f, None)

    def op_delete(self):
        f = self._pick(valid=False)
        if f:
            os.unlink(os.path.join(self.dir, f))
            del self.content[f]
            self.did.append("deleted %s" % f)

    OPS = (("op_create", 4), ("op_edit", 3), ("op_rename_pod", 4),
           ("op_move_namespace", 3), ("op_duplicate", 2),
           ("op_rename_file", 2), ("op_invalid", 2), ("op_delete", 2))

    def random_op(self):
        total = sum(w for _, w in self.OPS)
        x = self.rng.random() * total
        for name, w in self.OPS:
            x -= w
            if x < 0:
                self.did = []
                getattr(self, name)()
                return "%s(%s)" % (name[3:], "; ".join(self.did))
        return None


def summary(p):
    """What a pod must agree on: identity, labels, spec and annotations
    but the daemon's own stamps.  A pinned UID's namespace and name are
    left out: the merger keeps those it first stored for a UID (as the
    kubelet's does), while the listing has the file's current ones.  The
    label gen names the content written, and any other UID is a hash of
    the content, name included."""
    m = p.get("metadata", {})
    if m.get("uid", "").startswith("pin-"):
        m = dict(m, namespace=None, name=None)
    ann = dict(m.get("annotations") or {})
    for k in STAMPS:
        ann.pop(k, None)
    return (m.get("namespace"), m.get("name"), tuple(sorted(
        (m.get("labels") or {}).items())), tuple(sorted(ann.items())),
        harness.json.dumps(p.get("spec"), sort_keys=True))


def listing(t, d):
    """uid -> summary of what `podmux validate DIR` lists."""
    r = t.run_cmd(["validate", "-o", "json", "--node-name", harness.NODE, d])
    dec, text, i, out = harness.json.JSONDecoder(), r.stdout, 0, {}
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return out
        p, i = dec.raw_decode(text, i)
        out[p["metadata"]["uid"]] = summary(p)


def held(state):
    return {u: summary(p) for u, p in state.pods.items()}


def diff(want, got):
    lines = []
    for u in sorted(set(want) | set(got)):
        if want.get(u) != got.get(u):
            lines.append("  %s: want %s, have %s" % (u, want.get(u),
                                                     got.get(u)))
    return "\n".join(lines[:20])


@test("file source deltas: random bursts (pod renamed, namespace moved, "
      "pinned UIDs, duplicates, file renames, invalid files, deletes) with "
      "relists off leave every consumer with the directory's full listing",
      params=("incremental", "snapshot-and-updates", "snapshot"))
def test_random_bursts_match_a_full_listing(t):
    seed = int(os.environ.get("PODMUX_DELTA_SEED") or
               random.SystemRandom().randrange(1 << 30))
    t.note("seed %d (PODMUX_DELTA_SEED=%d replays it)" % (seed, seed))
    rng = random.Random(seed)
    d = t.mkdir("manifests")
    files = Files(d, rng)
    for _ in range(6):
        files.op_create()
    daemon = t.daemon(d, freq="1h")
    steady = Consumer(t, daemon.sock, threaded=True)
    for burst in range(BURSTS):
        before = files.describe()
        ops = [files.random_op() for _ in range(rng.randrange(1, 7))]
        want = listing(t, d)
        what = "burst %d (%s), seed %d, files before:\n  %s\n" % (
            burst, ",".join(ops), seed, before)
        try:
            steady.wait_state(lambda s: held(s) == want, what)
        except AssertionError as e:
            raise AssertionError("%s: the steady consumer differs from the "
                                 "listing:\n%s\nfiles:\n  %s\n(%s)" % (
                                     what, diff(want, held(steady.state)),
                                     files.describe(), str(e)[:300]))
        fresh = Consumer(t, daemon.sock)
        fresh.read_initial()
        if held(fresh.state) != want:
            raise AssertionError("%s: a new consumer's state differs from "
                                 "the listing:\n%s" % (
                                     what, diff(want, held(fresh.state))))
        fresh.close()
    daemon.assert_alive()


if __name__ == "__main__":
    harness.main()
