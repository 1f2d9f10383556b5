#!/usr/bin/env python3
"""make install under a prefix that is not /usr/local, as an admin and a
consumer author meet it: the systemd unit names the podmux of that prefix,
lands in --with-systemdsystemunitdir (default: systemd's own directory, as
pkg-config says; "no": none) and passes systemd-analyze verify; the alias
manual pages open with `man -l` from any directory; examples/consumer.c
builds and runs against the library there as the README says.  Each test
configures a tree of its own (configure only; it builds just what it
installs), so this build is not touched; the binary is this build's."""

import os
import re
import shutil
import subprocess

import harness
from harness import test, write_file, pod_yaml, pn, BIN, SRCDIR, T_WAIT

SANITIZED = os.environ.get("PODMUX_SANITIZED") == "1"
ONCE = "checked once, in the plain build (configure and make install do not depend on it)"


def env_clean():
    return {k: v for k, v in os.environ.items()
            if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "TESTS")}


def configure(t, *flags):
    """A tree of SRCDIR configured in the test's directory: its path."""
    tree = t.mkdir("tree")
    r = subprocess.run([os.path.join(SRCDIR, "configure"), "--quiet"] + list(flags),
                       cwd=tree, capture_output=True, text=True, env=env_clean(), timeout=300)
    if r.returncode != 0:
        raise AssertionError("configure %s: %s" % (" ".join(flags), r.stderr[-2000:]))
    return tree


def make(tree, *targets, **kw):
    r = subprocess.run([os.environ.get("MAKE") or "make", "-s", "-C", tree] + list(targets),
                       capture_output=True, text=True, env=env_clean(), timeout=900, **kw)
    if r.returncode != 0:
        raise AssertionError("make %s: %s" % (" ".join(targets), (r.stdout + r.stderr)[-2000:]))
    return r


def make_var(tree, name):
    with open(os.path.join(tree, "Makefile")) as f:
        for line in f:
            m = re.match(r"%s = (.*)$" % re.escape(name), line)
            if m:
                return m.group(1).strip()
    return None


@test("make install under a non-default prefix: the unit names PREFIX/bin/podmux, is in "
      "--with-systemdsystemunitdir, passes systemd-analyze verify and keeps /var/lib/podmux "
      "writable (StateDirectory=); the alias man pages open with man -l from any directory")
def test_unit_under_non_default_prefix(t):
    if SANITIZED:
        t.skip(ONCE)
    prefix = t.path("opt", "podmux")
    unitdir = os.path.join(prefix, "lib", "systemd", "system")
    tree = configure(t, "--prefix=" + prefix, "--with-systemdsystemunitdir=" + unitdir)
    make(tree, "install-data")
    # The binary the unit names: this build's, as make install-exec
    # would put it there (no need to build it again).
    os.makedirs(os.path.join(prefix, "bin"))
    shutil.copy(BIN, os.path.join(prefix, "bin", "podmux"))
    unit = os.path.join(unitdir, "podmux.service")
    if not os.path.exists(unit):
        raise AssertionError("no unit in %s: %s" % (unitdir, os.listdir(prefix)))
    if os.path.exists(os.path.join(prefix, "share", "podmux", "podmux.service")):
        raise AssertionError("the unit is also where systemd never looks")
    with open(unit) as f:
        text = f.read()
    lines = [x.strip() for x in text.splitlines() if x.strip() and not x.startswith("#")]
    exec_start = [x for x in lines if x.startswith("ExecStart=")]
    if exec_start != [x for x in exec_start if x.startswith("ExecStart=%s/bin/podmux run " % prefix)] \
            or len(exec_start) != 1 or "@bindir@" in text:
        raise AssertionError("ExecStart= does not name this prefix's podmux: %s" % exec_start)
    for want in ("StateDirectory=podmux", "ProtectSystem=strict", "RuntimeDirectory=podmux"):
        if want not in lines:
            raise AssertionError("%s is not in the unit" % want)
    analyze = shutil.which("systemd-analyze")
    if analyze:
        args = [analyze, "verify"] + ([] if shutil.which("man") else ["--man=no"])
        r = subprocess.run(args + [unit], capture_output=True, text=True, timeout=T_WAIT,
                           env=dict(os.environ, MANPATH=os.path.join(prefix, "share", "man")))
        if r.returncode != 0 or r.stdout.strip() or r.stderr.strip():
            raise AssertionError("systemd-analyze verify: exit %d\n%s%s" % (r.returncode, r.stdout, r.stderr))
    else:
        t.note("systemd-analyze is missing: the unit was not verified")
    # Every alias page opens with man -l, from a directory that is not
    # the manual's root.
    if not shutil.which("man"):
        t.skip("man is missing")
    mandir = os.path.join(prefix, "share", "man")
    pages = 0
    for sec, title in (("man8", "PODMUX(8)"), ("man3", "PODMUX_CLIENT(3)")):
        for name in sorted(os.listdir(os.path.join(mandir, sec))):
            page = os.path.join(mandir, sec, name)
            r = subprocess.run(["man", "-l", page], cwd="/", capture_output=True, text=True,
                               timeout=T_WAIT, env=dict(os.environ, MANWIDTH="80", MAN_KEEP_FORMATTING="0"))
            if r.returncode != 0 or title not in r.stdout or r.stderr.strip():
                raise AssertionError("man -l %s from /: exit %d: %s" % (page, r.returncode, r.stderr[-500:]))
            pages += 1
    if pages < 20:
        raise AssertionError("only %d pages installed" % pages)


@test("configure --with-systemdsystemunitdir: systemd's own directory by default (pkg-config), "
      "none with no")
def test_unit_dir_default_and_no(t):
    if SANITIZED:
        t.skip(ONCE)
    pkgconf = os.environ.get("PKG_CONFIG") or "pkg-config"
    r = subprocess.run([pkgconf, "--variable=systemdsystemunitdir", "systemd"],
                       capture_output=True, text=True)
    want = r.stdout.strip()
    tree = configure(t, "--prefix=" + t.path("p1"))
    got = make_var(tree, "systemdsystemunitdir")
    if want and got != want:
        raise AssertionError("default unit directory %r, pkg-config says %r" % (got, want))
    shutil.rmtree(tree)
    tree = configure(t, "--prefix=" + t.path("p2"), "--with-systemdsystemunitdir=no")
    dest = t.path("dest")
    make(tree, "install-data", "DESTDIR=" + dest)
    found = [os.path.join(d, f) for d, _, fs in os.walk(dest) for f in fs if f.startswith("podmux.service")]
    if found:
        raise AssertionError("--with-systemdsystemunitdir=no installed %s" % found)


def readme_block_after(marker):
    """The lines of the first ```sh block after marker in README.md."""
    with open(os.path.join(SRCDIR, "README.md")) as f:
        text = f.read()
    if marker not in text:
        raise AssertionError("README.md no longer says %r" % marker)
    rest = text[text.index(marker):]
    m = re.search(r"```sh\n(.*?)```", rest, re.S)
    return [x for x in m.group(1).splitlines() if x.strip()]


@test("README: examples/consumer.c builds with the README's commands against libpodmux-client "
      "installed under another prefix (PKG_CONFIG_PATH, rpath) and runs")
def test_consumer_under_non_default_prefix(t):
    if SANITIZED:
        t.skip(ONCE)
    cmds = readme_block_after("Installed under another prefix")
    if not any("PKG_CONFIG_PATH=/opt/podmux/" in c for c in cmds) or \
            not any(c.startswith("cc consumer.c") for c in cmds):
        raise AssertionError("README's commands for another prefix: %s" % cmds)
    # The README's prefix, /opt/podmux, is the machine's: the test's own
    # stands in for it, in the commands as written otherwise.
    prefix = t.path("opt", "podmux")
    tree = configure(t, "--prefix=" + prefix, "--with-systemdsystemunitdir=no")
    make(tree, "install-libLTLIBRARIES", "install-pkgconfigDATA", "install-podmuxincludeHEADERS")
    work = t.mkdir("work")
    shutil.copy(os.path.join(SRCDIR, "examples", "consumer.c"), work)
    script = "set -e\n" + "\n".join(c.replace("/opt/podmux", prefix) for c in cmds) + "\n"
    env = {k: v for k, v in env_clean().items() if k not in ("PKG_CONFIG_PATH", "LD_LIBRARY_PATH")}
    r = subprocess.run(["/bin/sh", "-c", script], cwd=work, capture_output=True, text=True, env=env,
                       timeout=300)
    if r.returncode != 0:
        raise AssertionError("%s: exit %d\n%s" % (script, r.returncode, r.stderr[-2000:]))
    m = t.mkdir("manifests")
    write_file(os.path.join(m, "web.yaml"), pod_yaml("web"))
    d = t.daemon(m)
    saved = os.environ.pop("LD_LIBRARY_PATH", None)
    try:
        p = harness.Spawned([os.path.join(work, "a.out"), d.sock])
    finally:
        if saved is not None:
            os.environ["LD_LIBRARY_PATH"] = saved
    t.procs.append(p)
    p.wait_line(lambda x: x.startswith("ADD file default/" + pn("web")), what="web's ADD")
    p.wait_line(lambda x: x.startswith("synced (full state): 1 pods"), what="synced")
    p.stop()
    d.stop()


if __name__ == "__main__":
    harness.main()
