#!/usr/bin/env python3
"""No misconfiguration is silent, and one reason makes one line.

Driven from the outside, as an operator meets podmux: the real binary, its
log read at the default level (JSON lines), `podmux status` and `podmux
validate`.  Each condition that would repeat (a relist every period, a
retry every second) is held over several relists or retries, and its log
lines are counted: one line when it starts, one (info) when it clears.

Relists are observed without a log line: with a Probe (a relist barrier,
harness.Probe), or, for a path that does not exist, by the file source's
last success in `podmux status` changing.  Retries of a watch happen on no
timer a test can see from outside, so those tests run at -v 1, where each
retry leaves a debug line, and count the lines above debug, which are what
the default level prints."""

import json
import os
import shutil
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import (BIN, IS_ROOT, NODE, T_WAIT, Daemon, Probe,  # noqa: E402
                     pn, pod_uid, pod_yaml, test, wait_for, write_file)

ABOVE_DEBUG = ("error", "warn", "warning", "info")
ANY = ABOVE_DEBUG + ("debug",)


def lines_with(d, *words, levels=ABOVE_DEBUG):
    """The log lines at one of levels that contain every one of words."""
    return [x for x in d.logs()
            if x.level in levels and all(w in x.msg for w in words)]


def expect_lines(d, n, what, *words, levels=ABOVE_DEBUG):
    got = lines_with(d, *words, levels=levels)
    if len(got) != n:
        raise AssertionError("%d %s line(s) (%s), want %d: %s" % (
            len(got), what, "/".join(levels), n, got[:6]))
    return got


def status(t, d):
    r = t.run_cmd(["status", "--socket", d.sock, "-o", "json"])
    if r.returncode != 0:
        raise AssertionError("podmux status: exit %d: %s" % (r.returncode,
                                                            r.stderr[-400:]))
    return json.loads(r.stdout)


def file_status(t, d):
    got = [s for s in status(t, d)["sources"] if s["name"] == "file"]
    if len(got) != 1:
        raise AssertionError("status has no file source: %s" % got)
    return got[0]


def relist_barrier(d, c, pr):
    """SIGHUP and a probe change: a relist ran after the call."""
    pr.round += 1
    pr._write()
    want = str(pr.round)
    d.send_signal(signal.SIGHUP)
    c.wait_state(lambda s: any(harness.pod_labels(p).get("round") == want
                               for p in s.by_name(pr.pod_name())),
                 "after a relist (probe round %s)" % want)


class UnprivilegedDaemon(Daemon):
    """podmux run as uid/gid 65534 with no capabilities (tests of
    permissions: root reads and watches everything)."""

    def argv(self):
        return ["setpriv", "--reuid", "65534", "--regid", "65534",
                "--clear-groups", "--inh-caps=-all", "--bounding-set=-all",
                "--no-new-privs"] + super().argv()


def unprivileged(t, manifest_path, **kw):
    if not IS_ROOT or not shutil.which("setpriv"):
        t.skip("needs root and setpriv to run podmux as another user")
    os.chmod(t.path(), 0o755)
    run = t.mkdir("run")
    os.chown(run, 65534, 65534)
    d = UnprivilegedDaemon(t, manifest_path,
                           socket_path=os.path.join(run, "podmux.sock"), **kw)
    t.daemons.append(d)
    d.start()
    return d


# ---------------------------------------------------------------------------
# 3. No misconfiguration is silent

@test("a --pod-manifest-path that does not exist: one warning naming it "
      "(\"path does not exist\") however many relists find it missing, "
      "status shows the path and \"absent\"; one info line when it "
      "appears (state ok); gone again, one more warning")
def test_pod_manifest_path_does_exist_one(t):
    m = t.path("manifests")
    d = t.daemon(m, freq="1s")
    d.wait_log(lambda x: x.level in ("warn", "warning") and m in x.msg and
               "path does not exist" in x.msg, "a warning naming %s" % m)
    seen = set()

    def three_relists():
        seen.add(file_status(t, d).get("last_success"))
        return len(seen - {None}) >= 3
    wait_for(three_relists, T_WAIT, "three relists of the missing path")
    expect_lines(d, 1, "missing path", m, "does not exist")
    expect_lines(d, 0, "error", m, levels=("error",))
    st = file_status(t, d)
    if (st.get("target"), st.get("state")) != (m, "absent"):
        raise AssertionError("status file source: %s" % json.dumps(st))
    text = t.run_cmd(["status", "--socket", d.sock]).stdout
    row = [x for x in text.splitlines() if x.split()[:1] == ["file"]]
    if not row or "absent" not in row[0] or ("path " + m) not in text:
        raise AssertionError("podmux status (text) does not show the path "
                             "and its state: %r" % text)

    os.mkdir(m)
    write_file(os.path.join(m, "web.yaml"), pod_yaml("web"))
    c = d.connect()
    c.wait_until_state([pn("web")])
    d.wait_log(lambda x: x.level == "info" and m in x.msg and
               "exists now" in x.msg, "an info line: the path exists now")
    wait_for(lambda: file_status(t, d).get("state") == "ok", T_WAIT,
             "status state ok")
    expect_lines(d, 1, "missing path", m, "does not exist")

    shutil.rmtree(m)
    c.wait_until_state([])
    d.wait_log(lambda x: len(lines_with(d, m, "does not exist")) == 2,
               "a second warning, the path gone again")
    expect_lines(d, 1, "exists now", m, "exists now")
    expect_lines(d, 0, "removed or moved", "removed or moved")
    d.assert_alive()


@test("a relative --pod-manifest-path and podmux validate name one file "
      "one way: validate prints one UID for nginx.yaml, ./nginx.yaml, "
      "m/../m/nginx.yaml and the absolute path, and it is the UID the "
      "daemon gives the pod (its path given relative, status shows it "
      "absolute)")
def test_relative_pod_manifest_path_podmux_validate(t):
    m = t.mkdir("m")
    f = os.path.join(m, "nginx.yaml")
    write_file(f, pod_yaml("nginx"))

    def uid_of(arg, cwd):
        r = t.run_cmd(["validate", "--node-name", NODE, arg], cwd=cwd)
        if r.returncode != 0:
            raise AssertionError("validate %s: exit %d: %s" % (
                arg, r.returncode, r.stderr))
        line = r.stdout.strip()
        if not line.startswith(json.dumps(f) + ":"):
            raise AssertionError("validate %s names the file %r, want the "
                                 "absolute, cleaned path" % (arg, line))
        return line.split(" uid=", 1)[1].split()[0]
    uids = {arg: uid_of(arg, cwd) for arg, cwd in (
        ("nginx.yaml", m), ("./nginx.yaml", m), ("m/../m//nginx.yaml",
                                                 t.path()), (f, "/"))}
    if len(set(uids.values())) != 1:
        raise AssertionError("one file, several UIDs: %s" % uids)
    r = t.run_cmd(["validate", "--node-name", NODE, "./m/"], cwd=t.path())
    if r.returncode != 0 or uids[f] not in r.stdout:
        raise AssertionError("validate ./m/: %r" % r.stdout)

    d = t.daemon("./m/", cwd=t.path())
    c = d.connect()
    c.wait_until_state([pn("nginx")])
    if pod_uid(c.state.one(pn("nginx"))) != uids[f]:
        raise AssertionError("the daemon's UID %s is not validate's %s" % (
            pod_uid(c.state.one(pn("nginx"))), uids[f]))
    if file_status(t, d).get("target") != m:
        raise AssertionError("status target %r, want %r" % (
            file_status(t, d).get("target"), m))

    # With no working directory a relative path cannot be placed: said.
    gone = t.path("gone")
    r = subprocess.run(["/bin/sh", "-c", 'mkdir "$1" && cd "$1" && rmdir '
                        '"$1" && exec "$2" validate --node-name n x.yaml',
                        "sh", gone, BIN], capture_output=True, text=True,
                       timeout=T_WAIT)
    if r.returncode != 1 or "working directory" not in r.stderr:
        raise AssertionError("validate in a removed directory: exit %d, %r"
                             % (r.returncode, r.stderr))


@test("--config: a relative staticPodPath is taken from the file's "
      "directory, not the working directory; the fields KubeletConfiguration "
      "does not define are listed in one warning, those podmux merely "
      "ignores are not")
def test_config_relative_staticpodpath_taken_file_s(t):
    etc = t.mkdir("etc")
    m = t.mkdir("etc", "manifests")
    t.mkdir("manifests")     # where a path taken from the cwd would point
    write_file(os.path.join(m, "web.yaml"), pod_yaml("web"))
    write_file(os.path.join(etc, "kubelet.yaml"),
               "apiVersion: kubelet.config.k8s.io/v1beta1\n"
               "kind: KubeletConfiguration\n"
               "staticPodPath: manifests\n"
               "fileCheckFrequency: 1s\n"
               "cgroupDriver: systemd\n"
               "staticPodURl: http://127.0.0.1:1/typo\n"
               "bogusField: 1\n")
    d = Daemon(t, None, cwd=t.path(), freq=None,
               extra=["--config", "etc/kubelet.yaml"])
    t.daemons.append(d)
    d.start()
    c = d.connect()
    c.wait_until_state([pn("web")])
    w = expect_lines(d, 1, "unknown fields", "etc/kubelet.yaml", "unknown",
                     levels=("warn", "warning"))[0]
    for name in ("staticPodURl", "bogusField"):
        if '"%s"' % name not in w.msg:
            raise AssertionError("the warning does not list %s: %r" %
                                 (name, w.msg))
    for name in ("cgroupDriver", "staticPodPath", "fileCheckFrequency"):
        if name in w.msg:
            raise AssertionError("the warning lists %s: %r" % (name, w.msg))
    if file_status(t, d).get("target") != m:
        raise AssertionError("status target %r, want %r" % (
            file_status(t, d).get("target"), m))


@test("no pod source at all (none given, or every one turned off): one "
      "warning; with a source, none")
def test_no_pod_source_all_none_given(t):
    for extra in ([], ["--pod-manifest-path", "", "--manifest-url", ""]):
        d = Daemon(t, None, extra=extra)
        t.daemons.append(d)
        d.start()
        c = d.connect()
        c.expect_type("sources_ready")
        expect_lines(d, 1, "no source", "no pod source",
                     levels=("warn", "warning"))
        d.stop()
    d = t.daemon()
    d.connect().expect_type("sources_ready")
    expect_lines(d, 0, "no source", "no pod source")


@test("--hostname-override is taken as the kubelet takes it, trimmed and "
      "lower-cased (the node in hello, the pods' names); blank, it is "
      "refused; run --help lists it")
def test_hostname_override_taken_kubelet_takes_trimmed(t):
    m = t.mkdir("manifests")
    write_file(os.path.join(m, "web.yaml"), pod_yaml("web"))
    d = t.daemon(m, node=None, extra=["--hostname-override", " Node1\t"])
    c = d.connect()
    if c.hello.get("node") != "node1":
        raise AssertionError("hello node %r" % c.hello.get("node"))
    c.wait_until_state([pn("web", "node1")])
    # With --node-name, the two must agree once the override is taken so.
    d2 = t.daemon(m, socket_path=t.path("2.sock"), node="node1",
                  extra=["--hostname-override", "NODE1"])
    d2.connect().wait_until_state([pn("web", "node1")])
    r = t.run_cmd(["run", "--plugins-registry-dir", "", "--socket",
                   t.path("3.sock"), "--hostname-override", "  "])
    if r.returncode != 2 or "--hostname-override" not in r.stderr or \
            "empty hostname" not in r.stderr:
        raise AssertionError("blank --hostname-override: exit %d, %r" %
                             (r.returncode, r.stderr))
    r = t.run_cmd(["run", "--help"])
    if "--hostname-override" not in r.stdout:
        raise AssertionError("run --help does not list --hostname-override")


@test("a manifest with two YAML documents: one warning naming the file "
      "(only the first is used), not repeated by relists or rewrites; "
      "three documents, one more; one document, no more")
def test_manifest_two_yaml_documents_one_warning(t):
    m = t.mkdir("manifests")
    f = os.path.join(m, "two.yaml")
    first = pod_yaml("first")
    write_file(f, first + "---\n" + pod_yaml("second"))
    pr = Probe(t, m)
    d = t.daemon(m, freq="1h")
    c = d.connect()
    c.wait_until_state([pn("first"), pn("probe")])
    relist_barrier(d, c, pr)
    write_file(f, first + "---\n" + pod_yaml("second", image="x:2"))
    relist_barrier(d, c, pr)
    relist_barrier(d, c, pr)
    w = expect_lines(d, 1, "documents", f, "documents")[0]
    if w.level not in ("warn", "warning") or "2" not in w.msg:
        raise AssertionError("not a warning about 2 documents: %r" % w)
    write_file(f, first + "---\n" + pod_yaml("second") + "---\n{}\n")
    d.wait_log(lambda x: len(lines_with(d, f, "3 YAML documents")) == 1,
               "a warning about 3 documents")
    write_file(f, first)
    relist_barrier(d, c, pr)
    relist_barrier(d, c, pr)
    expect_lines(d, 2, "documents", f, "documents")
    c.assert_never_named([pn("second")])


# ---------------------------------------------------------------------------
# 4. One reason, one line

@test("a duplicate manifest (web.yaml and web.yaml.bak): one warning "
      "naming both over several relists and edits of the copy; when "
      "web.yaml goes, one info line: the copy defines the pod now")
def test_duplicate_manifest_web_yaml_web_yaml(t):
    m = t.mkdir("manifests")
    a, b = os.path.join(m, "web.yaml"), os.path.join(m, "web.yaml.bak")
    write_file(a, pod_yaml("web", image="nginx:1"))
    write_file(b, pod_yaml("web", image="nginx:2"))
    pr = Probe(t, m)
    d = t.daemon(m, freq="1s")
    c = d.connect()
    c.wait_until_state([pn("probe"), pn("web")])
    for i in range(3):
        relist_barrier(d, c, pr)
    write_file(b, pod_yaml("web", image="nginx:3"))
    relist_barrier(d, c, pr)
    relist_barrier(d, c, pr)
    w = expect_lines(d, 1, "duplicate", b, a)[0]
    if w.level not in ("warn", "warning"):
        raise AssertionError("the duplicate is not a warning: %r" % w)
    # A leftover copy: the warning points to the fix.
    if "--static-pod-file-pattern" not in w.msg:
        raise AssertionError("no hint for a leftover copy: %r" % w)
    os.remove(a)
    c.wait_state(lambda s: [harness.pod_image(p) for p in
                            s.by_name(pn("web"))] == ["nginx:3"],
                 "web from web.yaml.bak")
    relist_barrier(d, c, pr)
    relist_barrier(d, c, pr)
    expect_lines(d, 1, "no longer a duplicate", b, "no longer a duplicate",
                 levels=("info",))
    # The copy is the pod's only file now: nothing more about it but the
    # outcome line of the pod it now gives.
    expect_lines(d, 1, "outcome", "static pod", "replaced", b,
                 levels=("info",))
    if len(lines_with(d, b)) != 3:
        raise AssertionError("lines naming %s: %s" % (b, lines_with(d, b)))


@test("one line per static pod outcome at the default log level: "
      "applied, replaced, removed (info), rejected (error), each naming "
      "the pod and the file")
def test_static_pod_outcome_lines(t):
    m = t.mkdir("manifests")
    a, bad = os.path.join(m, "web.yaml"), os.path.join(m, "bad.yaml")
    key = '"default/%s"' % pn("web")
    write_file(a, pod_yaml("web", image="nginx:1"))
    d = t.daemon(m)     # no -v: the default level
    c = d.connect()
    c.wait_until_state([pn("web")])

    def one(what, level="info", *words):
        d.wait_log(lambda x: len(lines_with(d, *words, levels=(level,)))
                   >= 1, "the %s line" % what)
        expect_lines(d, 1, what, *words, levels=(level,))

    one("applied", "info", key, "applied", a)
    write_file(a, pod_yaml("web", image="nginx:2"))
    one("replaced", "info", key, "replaced", a)
    write_file(bad, "apiVersion: v1\nkind: Pod\nmetadata: {name: [\n")
    one("rejected", "error", bad)
    os.remove(a)
    c.wait_state(lambda s: not s.by_name(pn("web")), "web removed")
    one("removed", "info", key, "removed", a)


@test("duplicates: the warning suggests --static-pod-file-pattern for "
      "leftover copies (~, .bak, .swp, .orig, .dpkg-*, sed's temp file), "
      "not for another manifest")
def test_duplicate_leftover_hint(t):
    m = t.mkdir("manifests")
    a = os.path.join(m, "a-web.yaml")
    write_file(a, pod_yaml("web"))
    copies = ["web.yaml~", "web.yaml.bak", ".web.yaml.swp", "web.yaml.swp",
              "web.yaml.orig", "web.yaml.dpkg-old", "sedAb12Xy",
              "web2.yaml"]
    for name in copies:
        write_file(os.path.join(m, name), pod_yaml("web"))
    d = t.daemon(m)
    c = d.connect()
    c.wait_until_state([pn("web")])
    for name in copies:
        if name.startswith("."):
            continue    # a dot file is never read
        path = os.path.join(m, name)
        w = expect_lines(d, 1, "duplicate", path, a)[0]
        hint = "--static-pod-file-pattern" in w.msg
        if hint != (name != "web2.yaml"):
            raise AssertionError("%s: hint %s: %r" % (name, hint, w))


@test("cannot watch the static pod path (Permission denied, as an "
      "unprivileged daemon): one error line however many retries; when it "
      "can be read, one info line and the pods")
def test_cannot_watch_static_pod_path_permission(t):
    m = t.mkdir("manifests")
    write_file(os.path.join(m, "web.yaml"), pod_yaml("web"))
    os.chmod(os.path.join(m, "web.yaml"), 0o644)
    os.chmod(m, 0o711)      # 65534 may stat it, not list or watch it
    d = unprivileged(t, m, extra=["-v", "1"])
    d.wait_log(lambda x: len(lines_with(d, "cannot watch", m,
                                        levels=ANY)) >= 4,
               "the watch and three retries", timeout=3 * T_WAIT)
    expect_lines(d, 1, "cannot watch", "cannot watch", m)
    expect_lines(d, 1, "cannot open directory", "cannot open directory", m)
    os.chmod(m, 0o755)
    c = d.connect()
    c.wait_until_state([pn("web")], timeout=2 * T_WAIT)
    d.wait_log(lambda x: x.level == "info" and "watching" in x.msg and
               "again" in x.msg and m in x.msg, "an info line: watching again",
               timeout=2 * T_WAIT)
    expect_lines(d, 1, "cannot watch", "cannot watch", m)


@test("the plugin registry: a directory in it that cannot be watched "
      "(Permission denied, as an unprivileged daemon): one error line "
      "however many retries; one info line when it can")
def test_plugin_registry_directory_cannot_watched_permission(t):
    reg = t.mkdir("registry")
    os.chmod(reg, 0o755)
    locked = t.mkdir("registry", "locked")
    os.chmod(locked, 0o700)     # root's: 65534 may not read it
    d = unprivileged(t, None, plugins_dir=reg, freq=None,
                     extra=["-v", "1"])
    d.wait_log(lambda x: len(lines_with(d, locked, "reading the registry",
                                        levels=ANY)) >= 4,
               "a walk and three retries", timeout=3 * T_WAIT)
    expect_lines(d, 1, "cannot watch", locked)
    os.chmod(locked, 0o755)
    d.wait_log(lambda x: x.level == "info" and "read again" in x.msg,
               "an info line: the registry read again")
    expect_lines(d, 1, "cannot watch", locked)


if __name__ == "__main__":
    harness.main()
