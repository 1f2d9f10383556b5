#!/usr/bin/env python3
"""The plugin registry's default, and the suite's guard of
/var/lib/kubelet (tests/integration/harness.py, its docstring).

podmux run watches /var/lib/kubelet/plugins_registry, creating it, only as
root and only when no source is configured (src/cmd/options.c,
options_default_plugins).  Every daemon of the suite names
--plugins-registry-dir, and as root runs with a /var/lib of its test's own;
the tests here show that those checks catch what they must (so the rest of
the suite passing means something) and that a run configuring a source
creates nothing under /var/lib."""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import bare_daemon  # noqa: E402
from harness import BIN, IS_ROOT, NODE, pod_yaml, test, write_file  # noqa

REGISTRY = os.path.join("varlib", "kubelet", "plugins_registry")


def need_confinement(t):
    """As root the suite must be able to confine daemons: a failure, not a
    skip, when it cannot (the guard of /var/lib/kubelet would be off)."""
    if not IS_ROOT:
        t.skip("not root: podmux never defaults to the plugin registry "
               "and cannot create /var/lib/kubelet")
    ok, why = harness.confinement()
    if not ok:
        raise AssertionError("cannot run daemons in a mount namespace with "
                             "a /var/lib of their own, so nothing keeps the "
                             "suite off /var/lib/kubelet: %s" % why)


@test("as root, podmux run with no source and no --plugins-registry-dir "
      "watches /var/lib/kubelet/plugins_registry, which the suite sees "
      "created in the test's own /var/lib and reports")
def test_root_podmux_run_no_source_no(t):
    need_confinement(t)
    d = bare_daemon(t, default_registry=True)
    reg = t.path(REGISTRY)
    if not os.path.isdir(reg):
        raise AssertionError("%s was not created: the default registry is "
                             "off, or the daemon's /var/lib is not the "
                             "test's; stderr: %s" % (reg,
                                                     d.stderr_text()[-600:]))
    mine = os.stat(t.varlib())
    seen = os.stat("/proc/%d/root/var/lib" % d.pid)
    if (seen.st_dev, seen.st_ino) != (mine.st_dev, mine.st_ino):
        raise AssertionError("the daemon's /var/lib is not %s" % t.varlib())
    problems = t.kubelet_problems()
    if not problems or "kubelet" not in problems[0]:
        raise AssertionError("the teardown check does not report the "
                             "created directory: %r" % problems)
    t.kubelet_expected = True


@test("the suite refuses a podmux run without --plugins-registry-dir, "
      "however it is started, before the process exists")
def test_suite_refuses_podmux_run_without_plugins(t):
    sock = t.path("x.sock")
    starts = {
        "run_cmd": lambda: t.run_cmd(["run", "--socket", sock,
                                      "--node-name", NODE]),
        "spawn": lambda: t.spawn(["run", "--socket", sock,
                                  "--node-name", NODE]),
        "subprocess.run behind a prefix": lambda: subprocess.run(
            ["env", BIN, "run", "--socket", sock, "--node-name", NODE],
            capture_output=True, timeout=harness.T_SHORT),
        "Daemon": lambda: harness.Daemon(t, None, socket_path=sock,
                                         plugins_dir=None).start(),
    }
    for how, start in starts.items():
        try:
            start()
        except AssertionError as e:
            if "--plugins-registry-dir" not in str(e):
                raise AssertionError("%s: refused, but the message does not "
                                     "say why: %s" % (how, e))
        else:
            raise AssertionError("%s: a podmux run without "
                                 "--plugins-registry-dir was started" % how)
        if os.path.exists(sock):
            raise AssertionError("%s: the daemon ran (its socket exists)" %
                                 how)
    for ok in (["run", "--help"],
               ["run", "--socket", sock, "--node-name", NODE,
                "--plugins-registry-dir=", "--bogus-flag"]):
        r = t.run_cmd(ok)
        if r.returncode not in (0, 2):
            raise AssertionError("%s: exit %d" % (ok, r.returncode))


def kubeconfig(t):
    path = t.path("kubeconfig")
    write_file(path, json.dumps({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {
            "server": "https://127.0.0.1:1",
            "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x"}))
    return path


def kubelet_config(t):
    return write_file(t.path("kubelet-config.yaml"),
                      "apiVersion: kubelet.config.k8s.io/v1beta1\n"
                      "kind: KubeletConfiguration\n")


SOURCES = {
    "--pod-manifest-path": lambda t: ["--pod-manifest-path",
                                      t.mkdir("manifests")],
    "--manifest-url": lambda t: ["--manifest-url", "http://127.0.0.1:1/pods"],
    "--kubeconfig": lambda t: ["--kubeconfig", kubeconfig(t)],
    "--config": lambda t: ["--config", kubelet_config(t)],
    "--pod-manifest-path \"\"": lambda t: ["--pod-manifest-path", ""],
}


def _source_test(flag, args):
    @test("as root, podmux run with %s and no --plugins-registry-dir runs "
          "no plugin manager and creates nothing under /var/lib" % flag)
    def _(t):
        need_confinement(t)
        d = bare_daemon(t, extra=args(t), default_registry=True)
        made = os.listdir(t.varlib())
        if made:
            raise AssertionError("created under /var/lib: %s" % made)
        if "plugin" in d.stderr_text().lower():
            raise AssertionError("the log mentions plugins: %s" %
                                 d.stderr_text()[-600:])


for _flag, _args in SOURCES.items():
    _source_test(_flag, _args)


@test("as root, a static pod path with an explicit registry in the test's "
      "tree: the registry is created there, nothing under /var/lib")
def test_root_static_pod_path_explicit_registry(t):
    need_confinement(t)
    m = t.mkdir("manifests")
    write_file(os.path.join(m, "web.yaml"), pod_yaml("web"))
    reg = t.path("reg")
    d = t.daemon(m, plugins_dir=reg)
    d.connect().wait_until_state([harness.pn("web")])
    if not os.path.isdir(reg) or os.listdir(t.varlib()):
        raise AssertionError("registry %s made: %s; under /var/lib: %s" % (
            reg, os.path.isdir(reg), os.listdir(t.varlib())))


if __name__ == "__main__":
    harness.main()
