#!/usr/bin/env python3
"""README.md's commands, word for word, as a new user on a fresh node runs
them: "Using it" (with "Waiting for a static pod instead of sleeping"),
"Edge nodes" and the shell commands of "Writing a consumer".  The
commands are read from README.md itself, so the test follows it.

They run as root in a private mount namespace that leaves the machine
alone: a tmpfs over /run, /var/lib, /etc/kubernetes and /opt (so /run/podmux
and /var/lib/podmux are missing, as on a fresh node), and overlays over
/etc and /usr/local whose writes land in the test's directory.  podmux is installed in that
/usr/local/bin, libpodmux-client in /usr/local/lib with ldconfig, as
"Building by hand" says.  Long-running commands (podmux run, podmux watch,
the consumers) start in the background and are stopped by PID.

The lines for another prefix install under /opt/podmux, a tmpfs there."""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import apitls  # noqa: E402
import harness  # noqa: E402
from fakeapi import FakeAPI  # noqa: E402
from harness import test, pod_yaml, BIN, SRCDIR, T_WAIT  # noqa: E402

SANITIZED = os.environ.get("PODMUX_SANITIZED") == "1"
BUILDDIR = os.environ.get("PODMUX_BUILDDIR") or os.path.dirname(BIN)
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


# ---------------------------------------------------------------------------
# README.md's blocks

def readme():
    with open(os.path.join(SRCDIR, "README.md")) as f:
        return f.read()


def section(text, heading):
    """The text under heading, up to the next heading of its level or
    higher."""
    level = len(heading) - len(heading.lstrip("#"))
    m = re.search(r"^%s *$" % re.escape(heading), text, re.M)
    if not m:
        raise AssertionError("README.md has no heading %r" % heading)
    rest = text[m.end():]
    end = re.search(r"^#{1,%d} " % level, rest, re.M)
    return rest[:end.start()] if end else rest


def sh_blocks(text):
    return re.findall(r"^```sh\n(.*?)^```", text, re.M | re.S)


def commands(block):
    """The block's commands: continuation lines joined, blank lines and
    whole-line comments dropped."""
    out, cur = [], ""
    for line in block.splitlines():
        if line.rstrip().endswith("\\"):
            cur += line.rstrip()[:-1] + " "
            continue
        line = cur + line
        cur = ""
        if line.strip() and not line.lstrip().startswith("#"):
            out.append(line.strip())
    return out


def long_running(cmd):
    words = cmd.split()
    return words[:2] in (["podmux", "run"], ["podmux", "watch"]) and "--help" not in words


# ---------------------------------------------------------------------------
# The namespace

class Node:
    """A mount namespace held by a process of ours; commands enter it
    with nsenter.  Its files are reached from here through
    /proc/HOLDER/root."""

    def __init__(self, t):
        self.t = t
        for tool in ("unshare", "nsenter", "mount"):
            if not shutil.which(tool):
                t.skip("%s is missing" % tool)
        self.home = t.mkdir("home")
        self.work = t.mkdir("work")
        self.holder = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
             "echo up; exec sleep 1000000"], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        t.procs.append(self.holder)
        up = self.holder.stdout.readline().strip()
        self.holder.stdout.close()
        if up != b"up":
            t.skip("unshare --mount failed here")
        mounts = [["mount", "-t", "tmpfs", "tmpfs", "/run"],
                  ["mount", "-t", "tmpfs", "tmpfs", "/var/lib"]]
        for d in ("/etc", "/usr/local"):
            up, wk = t.mkdir("ov" + d, "up"), t.mkdir("ov" + d, "work")
            mounts.append(["mount", "-t", "overlay", "overlay", "-o",
                           "lowerdir=%s,upperdir=%s,workdir=%s" % (d, up, wk), d])
        # /etc/kubernetes empty whatever the machine has there: a node
        # whose manifests are the test's alone.
        mounts += [["mkdir", "-p", "/etc/kubernetes"],
                   ["mount", "-t", "tmpfs", "tmpfs", "/etc/kubernetes"]]
        for m in mounts:
            r = self.run(m, shell=False)
            if r.returncode != 0:
                t.skip("%s: %s" % (" ".join(m), r.stderr.strip()))

    def env(self):
        env = {k: v for k, v in os.environ.items()
               if k not in ("PKG_CONFIG_PATH", "LD_LIBRARY_PATH", "PODMUX_SOCKET", "PYTHONPATH",
                            "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "TESTS")}
        env.update(HOME=self.home, PATH=PATH)
        return env

    def argv(self, cmd, shell=True):
        pre = ["nsenter", "-t", str(self.holder.pid), "-m", "--wd=" + self.work, "--"]
        return pre + (["/bin/sh", "-c", "exec " + cmd if shell is True else cmd] if shell else cmd)

    def run(self, cmd, shell=True, timeout=None, as_script=False, cwd=None):
        argv = self.argv(cmd, "script" if as_script else shell)
        if cwd:
            argv[argv.index("--wd=" + self.work)] = "--wd=" + cwd
        return subprocess.run(argv, cwd=cwd or self.work,
                              env=self.env(), capture_output=True, text=True,
                              timeout=timeout or 300, stdin=subprocess.DEVNULL)

    def must(self, cmd, **kw):
        r = self.run(cmd, **kw)
        if r.returncode != 0:
            raise AssertionError("%s: exit %d\nstdout: %s\nstderr: %s" % (
                cmd, r.returncode, r.stdout[-1500:], r.stderr[-1500:]))
        return r

    def spawn(self, cmd):
        argv = self.argv(cmd)
        if re.match(r"^[A-Za-z_]\w*=", cmd):
            # "exec VAR=x cmd" is no command: bash runs a lone command in
            # place of itself, so the PID is still the command's.
            argv = argv[:-3] + ["/bin/bash", "-c", cmd]
        p = harness.Spawned(argv, env=self.env())
        self.t.procs.append(p)
        return p

    def path(self, p):
        return "/proc/%d/root%s" % (self.holder.pid, p)

    def write(self, p, text, mode=0o644):
        os.makedirs(os.path.dirname(self.path(p)), exist_ok=True)
        with open(self.path(p), "w") as f:
            f.write(text)
        os.chmod(self.path(p), mode)


def _raise(msg):
    raise AssertionError(msg)


def stop(p, what):
    rc = p.stop()
    if rc not in (0, -signal.SIGTERM, 128 + signal.SIGTERM):
        raise AssertionError("%s: exit %s on SIGTERM; stderr: %s" % (what, rc, p.err_lines()[-10:]))


# ---------------------------------------------------------------------------

@test("README's commands, word for word, on a fresh node (a private mount namespace): "
      "Using it, waiting for a static pod, Edge nodes, the C consumer (also under /opt/podmux) and the Python one")
def test_readme_commands_fresh_node(t):
    if SANITIZED:
        t.skip("checked once, in the plain build (a consumer is built with plain cc)")
    if not harness.IS_ROOT:
        t.skip("needs root for a mount namespace")
    text = readme()
    using = sh_blocks(section(text, "## Using it"))
    edge = sh_blocks(section(text, "### Edge nodes"))
    consumer = sh_blocks(section(text, "## Writing a consumer"))
    if len(using) != 2 or len(edge) != 1:
        raise AssertionError("README's blocks changed: %d in Using it, %d in Edge nodes" % (
            len(using), len(edge)))
    cc_lines = [c for b in consumer for c in commands(b) if c.startswith("cc consumer.c")
                and "/opt/podmux" not in c]
    if len(cc_lines) != 1:
        raise AssertionError("README's C consumer command: %s" % cc_lines)
    py_lines = [c for b in consumer for c in commands(b) if "python" in c and "/opt/podmux" not in c]
    if len(py_lines) != 5:
        raise AssertionError("README's Python commands: %s" % py_lines)

    node = Node(t)
    # Installed as "Building by hand" says (make install; ldconfig).
    node.must(["install", "-D", "-m", "755", BIN, "/usr/local/bin/podmux"], shell=False)
    node.must([os.environ.get("MAKE") or "make", "-s", "-C", BUILDDIR, "install-libLTLIBRARIES",
               "install-pkgconfigDATA", "install-podmuxincludeHEADERS"], shell=False)
    node.must(["ldconfig"], shell=False)
    # What the admin has on the node: the manifest directory, a manifest
    # to validate and wait for, the --exec script, a manifest to upgrade.
    node.write("/etc/kubernetes/manifests/web.yaml", pod_yaml("web"))
    node.write("/etc/kubernetes/manifests/new.yaml", pod_yaml("new"))
    node.write("/etc/podmux/on-change.sh",
               "#!/bin/sh\necho \"$PODMUX_OP $PODMUX_NAME\" >>%s/exec.log\n" % node.work, 0o755)
    with open(os.path.join(node.work, "kube-apiserver.yaml"), "w") as f:
        f.write(pod_yaml("kube-apiserver"))
    shutil.copy(os.path.join(SRCDIR, "examples", "consumer.c"), node.work)

    # ---- Using it: the daemon and the watchers in the background, each
    # other command once the daemon serves.
    bg = []
    for cmd in commands(using[0]):
        if long_running(cmd):
            p = node.spawn(cmd)
            bg.append((cmd, p))
            if cmd.startswith("podmux run"):
                harness.wait_for(lambda: p.poll() is None and node.run("test -S /run/podmux/podmux.sock").returncode == 0
                                 or p.poll() is not None and _raise("%r exited: %s" % (cmd, p.err_lines()[-5:])),
                                 T_WAIT, "the socket of %r" % cmd)
            continue
        r = node.must(cmd)
        if cmd.startswith("podmux validate") and "new" not in r.stdout:
            raise AssertionError("%s printed %r" % (cmd, r.stdout[-500:]))
    if node.run("stat -c %a /run/podmux").stdout.strip() != "755":
        raise AssertionError("/run/podmux is not 0755")
    watch_json = [p for cmd, p in bg if "-o json" in cmd][0]
    watch_json.wait_line(lambda x: '"new' in x, what="new's pod in podmux watch -o json")
    harness.wait_for(lambda: os.path.exists(os.path.join(node.work, "exec.log")) and
                     "ADD" in open(os.path.join(node.work, "exec.log")).read(), T_WAIT,
                     "the --exec script's line")
    # Waiting for a static pod: the block as a script, from the directory
    # holding kube-apiserver.yaml.
    try:
        r = node.run("\n".join(["set -u"] + using[1].splitlines()), as_script=True, timeout=T_WAIT)
    except subprocess.TimeoutExpired:
        raise AssertionError("the upgrade step did not end; the daemon said: %s; status --files: %s; ls: %s" % (
            bg[0][1].err_lines()[-10:], node.run("podmux status --files").stdout,
            node.run("ls -la /etc/kubernetes/manifests").stdout))
    if r.returncode != 0:
        raise AssertionError("the upgrade step: exit %d: %s" % (r.returncode, r.stderr[-1000:]))
    # The C consumer: built with the README's command, run on the socket.
    node.must(cc_lines[0])
    c = node.spawn("./a.out /run/podmux/podmux.sock")
    c.wait_line(lambda x: x.startswith("synced (full state): 3 pods"), what="the consumer's synced line")
    stop(c, "the consumer")
    # Installed under /opt/podmux (a tmpfs here): the README's lines for
    # another prefix, as one script (the export holds for the cc line).
    prefix_lines = [c for b in consumer for c in commands(b) if "/opt/podmux" in c]
    if len(prefix_lines) != 2:
        raise AssertionError("README's commands for another prefix: %s" % prefix_lines)
    node.must(["mount", "-t", "tmpfs", "tmpfs", "/opt"], shell=False)
    tree = t.mkdir("tree")
    node.must([os.path.join(SRCDIR, "configure"), "--quiet", "--prefix=/opt/podmux",
               "--with-systemdsystemunitdir=no"], shell=False, cwd=tree)
    node.must([os.environ.get("MAKE") or "make", "-s", "-C", tree, "install-libLTLIBRARIES",
               "install-pkgconfigDATA", "install-podmuxincludeHEADERS"], shell=False)
    os.remove(os.path.join(node.work, "a.out"))
    node.must("\n".join(["set -e"] + prefix_lines), as_script=True)
    c = node.spawn("./a.out /run/podmux/podmux.sock")
    c.wait_line(lambda x: x.startswith("synced (full state): 3 pods"), what="the /opt/podmux consumer's synced line")
    stop(c, "the /opt/podmux consumer")
    # The Python module, both ways, from the top of a checkout (its
    # python/ and examples/ are enough), with Debian's python3.
    for d in ("python", "examples"):
        shutil.copytree(os.path.join(SRCDIR, d), os.path.join(node.work, d))
    for cmd in py_lines:
        if "examples/consumer.py" not in cmd:
            node.must(cmd)
            continue
        p = node.spawn(cmd)
        p.wait_line(lambda x: x.startswith("ADD file default/") and "kube-apiserver" in x,
                    what="kube-apiserver's ADD from %r" % cmd)
        stop(p, cmd)
    for cmd, p in reversed(bg):
        stop(p, cmd)

    # ---- Edge nodes: a server with one pod on this node; the README's
    # kubeconfig path; /var/lib/podmux does not exist.
    srv = FakeAPI(t)
    srv.create("edge", node=socket.gethostname().lower())
    apitls.simple_kubeconfig(t.path("kubeconfig"), srv.url)
    with open(t.path("kubeconfig")) as f:
        node.write("/etc/kubernetes/kubelet.conf", f.read(), 0o600)
    if os.path.exists(node.path("/var/lib/podmux")):
        raise AssertionError("/var/lib/podmux exists before the edge command")
    cmd = commands(edge[0])
    if len(cmd) != 1 or not long_running(cmd[0]):
        raise AssertionError("the edge block: %s" % cmd)
    d = node.spawn(cmd[0])
    harness.wait_for(lambda: d.poll() is None and any("all sources ready" in x for x in d.err_lines()) or
                     d.poll() is not None and _raise("the edge daemon exited: %s" % d.err_lines()[-5:]),
                     T_WAIT, "the edge daemon's sources ready")
    stop(d, cmd[0])
    modes = {p: os.stat(node.path(p)).st_mode & 0o7777
             for p in ("/var/lib/podmux", "/var/lib/podmux/checkpoint")}
    if modes != {"/var/lib/podmux": 0o755, "/var/lib/podmux/checkpoint": 0o700}:
        raise AssertionError("modes: %s" % {k: oct(v) for k, v in modes.items()})
    if not os.path.exists(node.path("/var/lib/podmux/checkpoint/api.checkpoint")):
        raise AssertionError("no checkpoint written at the clean shutdown")
    errors = [x for x in d.err_lines() if " error " in x]
    if errors:
        raise AssertionError("the edge daemon logged errors: %s" % errors[:5])
    srv.close()


if __name__ == "__main__":
    harness.main()
