#!/usr/bin/env python3
"""Setting podmux up as the README says: scripts/deps (what the build
needs, what the suite needs, apt or not), scripts/demo and scripts/build
beside a tree configured in place, `make install`'s ldconfig, the Python
module's install commands, and `make check` without Check (the systemd
unit is checked in test_notify.py).  The scripts run from copies in the
test's directory, with apt replaced by stubs that record what they were
asked: nothing is installed and the checkout is not written."""

import os
import re
import select
import shutil
import signal
import subprocess
import time

import harness
from harness import test, write_file, pod_yaml, pn, BIN, SRCDIR, T_WAIT

SANITIZED = os.environ.get("PODMUX_SANITIZED") == "1"
DEBIAN_PYTHON = "/usr/bin/python3"
ONCE = "checked once, in the plain build (it does not depend on the binary)"

# What only the suite or the fuzzer needs: never installed by scripts/demo.
TEST_ONLY = {"check", "valgrind", "clang", "python3-grpcio",
             "python3-protobuf", "protobuf-compiler", "python3-venv",
             "systemd", "golang-go", "mypy"}


def readme():
    with open(os.path.join(SRCDIR, "README.md")) as f:
        return f.read()


def copy_scripts(t, *names):
    """A checkout of the test's own holding scripts/NAME...: its top."""
    top = t.mkdir("top")
    os.makedirs(os.path.join(top, "scripts"), exist_ok=True)
    for n in names:
        shutil.copy2(os.path.join(SRCDIR, "scripts", n),
                     os.path.join(top, "scripts", n))
    return top


def stub(bindir, name, body):
    os.makedirs(bindir, exist_ok=True)
    p = os.path.join(bindir, name)
    write_file(p, "#!/bin/sh\n" + body, atomic=False)
    os.chmod(p, 0o755)


def fake_apt(t, installed=False, apt_cache=None):
    """A directory for the front of PATH where dpkg-query says every package
    is (or none is) installed, apt-get records its arguments in
    <tmp>/apt-get.log (update succeeds, install fails: nothing goes
    further), and sudo runs its command.  Returns (PATH, log)."""
    bindir = t.path("stubs")
    log = t.path("apt-get.log")
    stub(bindir, "dpkg-query",
         "echo 'install ok installed'\n" if installed else "exit 1\n")
    stub(bindir, "apt-get", 'echo "$*" >> "%s"\n'
         'case " $* " in *" install "*) exit 100 ;; esac\n' % log)
    stub(bindir, "sudo", 'exec "$@"\n')
    if apt_cache is not None:
        stub(bindir, "apt-cache", apt_cache)
    return bindir + os.pathsep + os.environ["PATH"], log


def installs(log):
    """The packages of every `apt-get install` recorded."""
    if not os.path.exists(log):
        return []
    pkgs = []
    with open(log) as f:
        for line in f:
            words = line.split()
            if "install" in words:
                pkgs += [w for w in words[words.index("install") + 1:]
                         if not w.startswith("-")]
    return pkgs


def clean_env(**kw):
    """The environment without what a caller of the suite may have set
    for these scripts or for make (the suite runs inside `make check`)."""
    e = dict(os.environ)
    for k in ("PODMUX_SKIP_DEPS", "PODMUX_DEMO_BIN", "MAKEFLAGS", "MFLAGS",
              "MAKELEVEL"):
        e.pop(k, None)
    e.update(kw)
    return e


def deps(args, env=None, path=None):
    e = clean_env(**(env or {}))
    if path is not None:
        e["PATH"] = path
    return subprocess.run(["/bin/sh", os.path.join(SRCDIR, "scripts", "deps")]
                          + list(args), capture_output=True, text=True,
                          env=e, timeout=T_WAIT)


def listed(args, **kw):
    r = deps(list(args) + ["--list"], **kw)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


# ---- scripts/deps ----------------------------------------------------------

@test("scripts/deps --list: the build's packages hold no test or fuzz tool; "
      "--test adds the suite's, --fuzz clang and a compiler-rt package")
def test_scripts_deps_list_build_s_packages(t):
    if SANITIZED:
        t.skip(ONCE)
    build = listed([])
    suite = listed(["--test"])
    fuzz = listed(["--fuzz"])
    for p in ("gcc", "make", "autoconf", "libjson-c-dev", "libyaml-dev",
              "libcurl4-openssl-dev", "libinotifytools0-dev",
              "libprotobuf-c-dev", "protobuf-c-compiler", "libmicrohttpd-dev"):
        assert p in build, (p, build)
    assert not TEST_ONLY & set(build), TEST_ONLY & set(build)
    assert not [p for p in build if p.startswith("libclang-rt")], build
    assert set(build) <= set(suite) and set(build) <= set(fuzz)
    for p in ("check", "valgrind", "python3-grpcio", "protobuf-compiler",
              "python3-venv", "python3-pip", "systemd", "mypy"):
        assert p in suite, (p, suite)
    assert "clang" not in suite, suite
    assert "clang" in fuzz, fuzz
    assert [p for p in fuzz if re.match(r"^libclang-rt(-\d+)?-dev$", p)], fuzz
    assert len(suite) == len(set(suite)), suite


@test("scripts/deps names the compiler-rt package of the release at hand: "
      "the metapackage, else the one matching clang's version, else none")
def test_scripts_deps_names_compiler_rt_package(t):
    if SANITIZED:
        t.skip(ONCE)
    for f in ("scripts/deps", "scripts/fuzz", "configure.ac"):
        with open(os.path.join(SRCDIR, f)) as fh:
            assert not re.search(r"libclang-rt-\d", fh.read()), \
                "%s names a release's compiler-rt package" % f
    # apt-cache as three releases would answer.
    cases = [
        ("libclang-rt-dev", "libclang-rt-dev", "14"),
        ("libclang-rt-19-dev", "", "19"),
        (None, "", "11"),
    ]
    for want, meta, ver in cases:
        have = {meta, "libclang-rt-%s-dev" % ver} if want else {meta}
        have.discard("")
        body = ('case "$1" in\n'
                'policy) case " %s " in *" $2 "*) '
                'echo "$2:"; echo "  Candidate: 1:1";; esac ;;\n'
                'depends) echo clang; echo "  Depends: clang-%s" ;;\n'
                'esac\n') % (" ".join(sorted(have)), ver)
        path, _ = fake_apt(t, apt_cache=body)
        got = [p for p in listed(["--fuzz"], path=path)
               if p.startswith("libclang-rt")]
        assert got == ([want] if want else []), (want, got)


@test("scripts/demo installs only what the build needs; scripts/test the "
      "suite's packages as well")
def test_scripts_demo_installs_only_what_build(t):
    if SANITIZED:
        t.skip(ONCE)
    top = copy_scripts(t, "demo", "deps", "build", "test",
                       "deps-test-tools")
    path, log = fake_apt(t)
    env = clean_env(PATH=path)
    r = subprocess.run(["/bin/sh", os.path.join(top, "scripts", "demo")],
                       capture_output=True, text=True, env=env, timeout=T_WAIT,
                       stdin=subprocess.DEVNULL)
    assert r.returncode != 0, "the demo went on after apt-get failed"
    asked = installs(log)
    assert sorted(asked) == sorted(listed([])), (asked, listed([]))
    os.unlink(log)
    r = subprocess.run(["/bin/sh", os.path.join(top, "scripts", "test")],
                       capture_output=True, text=True, env=env, timeout=T_WAIT,
                       stdin=subprocess.DEVNULL)
    assert r.returncode != 0
    assert sorted(installs(log)) == sorted(listed(["--test"])), installs(log)
    # Everything installed: nothing to do, no apt-get call at all.
    os.unlink(log)
    path, log = fake_apt(t, installed=True)
    for args in ([], ["--test"]):
        r = deps(args, path=path)
        assert r.returncode == 0 and not os.path.exists(log), \
            (args, r.stderr)


@test("without apt, scripts/deps prints the packages to install and exits "
      "1; PODMUX_SKIP_DEPS=1 then skips it")
def test_without_apt_scripts_deps_prints_packages(t):
    if SANITIZED:
        t.skip(ONCE)
    empty = t.mkdir("no-apt")       # a PATH with no apt-get (nor anything)
    for args, want in (([], listed([])), (["--test"], listed(["--test"]))):
        r = deps(args, path=empty)
        assert r.returncode == 1, (r.returncode, r.stderr)
        assert "apt-get" in r.stderr and "PODMUX_SKIP_DEPS=1" in r.stderr, \
            r.stderr
        shown = [w.strip() for w in r.stderr.splitlines()
                 if w.startswith("  ")]
        assert shown == want, (shown, want)
    r = deps([], env={"PODMUX_SKIP_DEPS": "1"}, path=empty)
    assert r.returncode == 0 and r.stderr == "", r.stderr


# ---- a tree configured in place -------------------------------------------

def configured_in_place(t):
    """A checkout where `./configure && make` was run: its config.status,
    and a Makefile whose build makes ./podmux (a copy of this build's)."""
    top = copy_scripts(t, "demo", "deps", "build")
    shutil.copytree(os.path.join(SRCDIR, "manifests"),
                    os.path.join(top, "manifests"))
    write_file(os.path.join(top, "config.status"), "#!/bin/sh\n",
               atomic=False)
    write_file(os.path.join(top, "Makefile"),
               "all:\n\tcp '%s' podmux\n" % BIN, atomic=False)
    return top


@test("scripts/demo in a tree configured in place (./configure && make run "
      "there) builds and runs that build instead of failing")
def test_scripts_demo_tree_configured_place_configure(t):
    top = configured_in_place(t)
    env = clean_env(PODMUX_SKIP_DEPS="1", PODMUX_NODE="demo-node")
    argv = ["/bin/sh", os.path.join(top, "scripts", "demo")]
    out = harness.demo_on_pty(argv, env, T_WAIT)
    text = out.decode(errors="replace")
    assert "configured in place" in text, text[-2000:]
    assert "source directory already configured" not in text
    assert os.path.exists(os.path.join(top, "podmux")), "not built in place"
    assert not os.path.exists(os.path.join(top, "build", "demo", "podmux"))
    assert not os.path.exists(os.path.join(top, "build", "demo",
                                           "podmux.sock"))


@test("scripts/build DIR in a tree configured in place stops, saying how "
      "to go on, and leaves that build alone")
def test_scripts_build_dir_tree_configured_place(t):
    if SANITIZED:
        t.skip(ONCE)
    top = configured_in_place(t)
    out = os.path.join(top, "build", "check")
    r = subprocess.run(["/bin/sh", os.path.join(top, "scripts", "build"),
                        out, "--enable-werror"], capture_output=True,
                       text=True, timeout=T_WAIT, stdin=subprocess.DEVNULL)
    assert r.returncode == 1, (r.returncode, r.stderr)
    for words in ("configured in place", "make -C %s distclean" % top,
                  "make -C %s" % top):
        assert words in r.stderr, (words, r.stderr)
    assert not os.path.exists(out)
    assert os.path.exists(os.path.join(top, "config.status"))


# ---- the Python module -----------------------------------------------------

# README.md "Writing a consumer", word for word; SOCK is replaced by the
# test daemon's socket.
VENV_CMDS = [
    "python3 -m venv --system-site-packages ~/.local/share/podmux-venv",
    "~/.local/share/podmux-venv/bin/pip install --no-index "
    "--no-build-isolation ./python",
]
VENV_RUN = ("~/.local/share/podmux-venv/bin/python examples/consumer.py "
            "/run/podmux/podmux.sock")
TARGET_CMDS = [
    "python3 -m pip install --no-index --no-build-isolation --target "
    "~/.local/lib/podmux ./python",
]
TARGET_RUN = ("PYTHONPATH=~/.local/lib/podmux python3 examples/consumer.py "
              "/run/podmux/podmux.sock")


def python_install(t, cmds, run):
    text = readme()
    for c in cmds + [run]:
        assert c in text.splitlines(), "README.md lacks the line: " + c
    if not os.access(DEBIAN_PYTHON, os.X_OK):
        t.skip("no Debian python3 at %s" % DEBIAN_PYTHON)
    # A home and a checkout of the test's own; python3 is Debian's.
    home = t.mkdir("home")
    top = t.mkdir("checkout")
    shutil.copytree(os.path.join(SRCDIR, "python"),
                    os.path.join(top, "python"))
    # Built from pyproject.toml alone (setuptools >= 61 reads [project]).
    assert not os.path.exists(os.path.join(top, "python", "setup.py"))
    shutil.copytree(os.path.join(SRCDIR, "examples"),
                    os.path.join(top, "examples"))
    pybin = t.mkdir("pybin")
    os.symlink(DEBIAN_PYTHON, os.path.join(pybin, "python3"))
    env = dict(os.environ, HOME=home,
               PATH=pybin + os.pathsep + os.environ["PATH"])
    for k in ("PYTHONPATH", "VIRTUAL_ENV", "PIP_INDEX_URL", "PIP_FIND_LINKS"):
        env.pop(k, None)
    for c in cmds:
        r = subprocess.run(["/bin/sh", "-c", c], cwd=top, env=env,
                           capture_output=True, text=True, timeout=300,
                           stdin=subprocess.DEVNULL)
        assert r.returncode == 0, "%s: exit %d\n%s" % (c, r.returncode,
                                                       r.stderr[-2000:])
    m = t.mkdir("manifests")
    write_file(os.path.join(m, "web.yaml"), pod_yaml("web"))
    d = t.daemon(m)
    p = subprocess.Popen(["/bin/sh", "-c",
                          run.replace("/run/podmux/podmux.sock", d.sock)],
                         cwd=top, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         start_new_session=True)
    lines = []
    try:
        want = "ADD file default/" + pn("web")
        deadline = time.monotonic() + T_WAIT
        while not any(x.startswith(want) for x in lines):
            if p.poll() is not None or time.monotonic() > deadline:
                lines += p.stdout.read().decode().splitlines() \
                    if p.poll() is not None else []
                raise AssertionError("the consumer did not print %r: %s" %
                                     (want, lines[-20:]))
            r, _, _ = select.select([p.stdout], [], [], 1.0)
            if r:
                lines.append(p.stdout.readline().decode())
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=T_WAIT)
        p.stdout.close()
    # Installed, not read from the checkout: no source tree on its path.
    return home


@test("README's Python install into a venv with system site packages works "
      "offline with Debian's python3, ships py.typed and runs "
      "examples/consumer.py")
def test_readme_s_python_install_venv_system(t):
    if SANITIZED:
        t.skip(ONCE)
    home = python_install(t, VENV_CMDS, VENV_RUN)
    found = [dp for dp, _, files in os.walk(os.path.join(
        home, ".local", "share", "podmux-venv", "lib"))
        if "__init__.py" in files and dp.endswith(os.sep + "podmux")]
    assert found, "podmux is not installed in the venv"
    assert os.path.exists(os.path.join(found[0], "py.typed")), found


@test("README's Python install with pip --target works offline with "
      "Debian's python3 (pyproject.toml alone, no setup.py), ships py.typed "
      "and runs examples/consumer.py")
def test_readme_s_python_install_pip_target(t):
    if SANITIZED:
        t.skip(ONCE)
    home = python_install(t, TARGET_CMDS, TARGET_RUN)
    # py.typed is installed with it: type checkers read its hints.
    for f in ("__init__.py", "py.typed"):
        assert os.path.exists(os.path.join(home, ".local", "lib", "podmux",
                                           "podmux", f)), f


# ---- make install, make check -----------------------------------------------

@test("README: `make install` into /usr/local is followed by ldconfig")
def test_readme_make_install_usr_local_followed(t):
    if SANITIZED:
        t.skip(ONCE)
    text = readme()
    assert re.search(r"sudo make install && sudo ldconfig", text), \
        "README's build commands do not run ldconfig after make install"
    assert "ldconfig" in text[text.index("## Building by hand"):]


@test("make check without Check runs the rest of the suite and reports "
      "each unit test skipped, by name, with the reason")
def test_make_check_without_check_runs_rest(t):
    if SANITIZED:
        t.skip(ONCE)
    if os.path.exists(os.path.join(SRCDIR, "config.status")):
        t.skip("the source tree is configured in place: no second "
               "configure beside it")
    if not os.path.exists(os.path.join(SRCDIR, "configure")):
        t.skip("no configure script in the source tree")
    pkgconfig = os.environ.get("PKG_CONFIG") or "pkg-config"
    # pkg-config's search path with every .pc but check.pc.
    r = subprocess.run([pkgconfig, "--variable", "pc_path", "pkg-config"],
                       capture_output=True, text=True, timeout=T_WAIT)
    pc = t.mkdir("pc")
    for d in r.stdout.strip().split(":"):
        if os.path.isdir(d):
            for f in os.listdir(d):
                if f.endswith(".pc") and f != "check.pc" and \
                        not os.path.exists(os.path.join(pc, f)):
                    os.symlink(os.path.join(d, f), os.path.join(pc, f))
    build = t.mkdir("build")
    env = clean_env(PKG_CONFIG_LIBDIR=pc)
    env.pop("PKG_CONFIG_PATH", None)
    for k in ("CHECK_CFLAGS", "CHECK_LIBS"):
        env.pop(k, None)
    r = subprocess.run([os.path.join(SRCDIR, "configure"), "--quiet"],
                       cwd=build, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Check not found" in r.stderr and "skip" in r.stderr, r.stderr
    make = os.environ.get("MAKE") or "make"
    write_file(t.path("print.mk"), "print-tests:\n\t@echo $(TESTS)\n"
               "print-units:\n\t@echo $(UNIT_TESTS)\n", atomic=False)

    def var(target):
        r = subprocess.run([make, "-s", "-f", "Makefile", "-f",
                            t.path("print.mk"), target], cwd=build,
                           env=env, capture_output=True, text=True,
                           timeout=T_WAIT)
        assert r.returncode == 0, r.stderr
        return r.stdout.split()
    tests, units = var("print-tests"), var("print-units")
    assert len(units) > 10, units
    assert not set(units) & set(tests), tests
    assert "tests/no-check.sh" in tests, tests
    for x in ("tests/integration/test_cli.py", "tests/style-check.sh",
              "tests/fuzz/fuzz_json"):
        assert x in tests, (x, tests)
    # The skip report as `make check` prints it (the programs it would
    # build first are not needed for it).
    r = subprocess.run([make, "check-TESTS", "TESTS=tests/no-check.sh",
                        "check_PROGRAMS="], cwd=build, env=env,
                       capture_output=True, text=True, timeout=T_WAIT)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    for u in units:
        assert re.search(r"^SKIP: tests/no-check\.sh \d+ - %s # SKIP Check "
                         r"is not installed$" % re.escape(u), r.stdout,
                         re.M), (u, r.stdout[-3000:])
    assert re.search(r"^# SKIP: +%d$" % len(units), r.stdout, re.M), \
        r.stdout[-1500:]


if __name__ == "__main__":
    harness.main()
