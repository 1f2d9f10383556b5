#!/usr/bin/env python3
"""Integration tests of the plugin manager (doc/plugin-manager.md) against
the real podmux binary and real gRPC plugins (scripts/fake-plugin, which
serves src/plugins/pluginregistration.proto with grpcio).

Every daemon gets its own registry directory (--plugins-registry-dir under
the test's temp dir).  Timeouts are failure bounds only.  Negative checks
("nothing happens") read the stream for a settle window of a few reconcile
periods (1 s each) after a positive barrier."""

import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import IS_ROOT, T_LONG, T_SHORT, T_WAIT, test, wait_for  # noqa
from plugin_harness import (FakePlugin, check_all_shapes,  # noqa: E402
                            check_failed_once, check_registered, check_shape,
                            initial_plugins, make_socket_file, norm,
                            plugin_daemon, plugin_msgs, plugin_ops, psock,
                            pinfo, read_for, summary, wait_plugin,
                            wait_plugins)

SETTLE = 3.0   # a few reconcile passes (1 s period)


def ensure(cond, msg):
    if not cond:
        raise AssertionError(msg)


def only_registered_true(statuses):
    return statuses == [{"registered": True, "error": ""}]


def assert_not_contacted(p, i=0, what=""):
    """Nothing was sent to plugin i (no NotifyRegistrationStatus)."""
    if p.statuses(i):
        raise AssertionError("%s%s was sent NotifyRegistrationStatus: %s" %
                             (what, p.socks[i], p.statuses(i)))


def log_mentions(d, levels, words):
    return [x for x in d.logs() if x.level in levels and
            any(w in x.msg for w in words)]


def check_logged(d, levels, words, what):
    if not log_mentions(d, levels, words):
        raise AssertionError("no %s log line mentioning %s (%s); last "
                             "lines: %s" % ("/".join(levels), words, what,
                                            d.logs()[-6:]))


# ===========================================================================
# Registration

@test("a plugin present at start registers: REGISTERED with type, name, "
      "endpoint (defaulted to the socket path), versions, socket; the "
      "plugin is told registered=true; no re-registration on later passes")
def test_plugin_present_start_registers_registered_type(t):
    reg = t.mkdir("reg")
    p = FakePlugin(t, os.path.join(reg, "csi", "csi.example.com-reg.sock"),
                   type="CSIPlugin", name="csi.example.com",
                   versions=["1.0.0"])
    d = plugin_daemon(t, reg)
    c = d.connect()
    m = wait_plugin(c, "REGISTERED", p.sock)
    check_registered(m, p)
    p.wait_status(lambda s: s, "has a line")
    if not only_registered_true(p.statuses()):
        raise AssertionError("the plugin was told %s, want exactly one "
                             "{registered: true, error: \"\"}" % p.statuses())
    read_for(c, SETTLE)
    t.soft(ensure, p.getinfo_count() == 1,
           "GetInfo called %d times for a registered plugin (want 1: the "
           "reconciler must not re-register)" % p.getinfo_count())
    ops = plugin_ops(c, p.sock)
    if ops != ["REGISTERED"]:
        raise AssertionError("messages for %s: %s (want one REGISTERED)" %
                             (p.sock, summary(c)))
    t.soft(check_logged, d, ("info",), ["csi.example.com", p.sock],
           "registration")
    t.soft(check_all_shapes, c)


@test("a daemon restart registers every plugin again (each told "
      "registered=true a second time; a new consumer gets them all)")
def test_daemon_restart_registers_every_plugin_again(t):
    reg = t.mkdir("reg")
    ps = [FakePlugin(t, os.path.join(reg, "r%d.sock" % i),
                     name="r%d.csi.example.com" % i, wait=False)
          for i in range(3)]
    for p in ps:
        p.wait_ready()
    d = plugin_daemon(t, reg)
    c = d.connect()
    wait_plugins(c, "REGISTERED", [p.sock for p in ps])
    c.close()
    d.restart()
    c = d.connect()
    got = wait_plugins(c, "REGISTERED", [p.sock for p in ps])
    for p in ps:
        t.soft(check_registered, got[p.sock], p)
        t.soft(p.wait_status, lambda s: s == [{"registered": True,
                                               "error": ""}] * 2,
               "= [registered true] twice")


@test("a plugin added after start with an explicit endpoint registers "
      "with that endpoint")
def test_plugin_added_after_start_explicit_endpoint(t):
    d = plugin_daemon(t)
    c = d.connect()
    c.expect_type("synced")
    ep = t.path("gpu-service.sock")
    p = FakePlugin(t, os.path.join(d.reg, "vendor.example-gpu.sock"),
                   type="DevicePlugin", name="vendor.example/gpu",
                   endpoint=ep, versions=["v1beta1"])
    m = wait_plugin(c, "REGISTERED", p.sock)
    check_registered(m, p, endpoint=ep)
    p.wait_status(lambda s: s, "has a line")
    if not only_registered_true(p.statuses()):
        raise AssertionError("the plugin was told %s" % p.statuses())
    t.soft(check_all_shapes, c)


@test("valid plugins of each built-in type register: CSI (0.3.0,1.2.0,"
      "2.0.0: highest usable is 1.2.0), DevicePlugin (v1beta1), DRAPlugin "
      "(v1beta1.DRAPlugin; and v2.DRAPlugin,v1.DRAPlugin on a second "
      "socket of the same driver)")
def test_valid_plugins_each_built_type_register(t):
    reg = t.mkdir("reg")
    ps = [
        FakePlugin(t, os.path.join(reg, "csi.sock"), type="CSIPlugin",
                   name="mixed.csi.example.com",
                   versions=["0.3.0", "1.2.0", "2.0.0"], wait=False),
        FakePlugin(t, os.path.join(reg, "dp.sock"), type="DevicePlugin",
                   name="vendor.example/fpga",
                   versions=["v1alpha1", "v1beta1"], wait=False),
        FakePlugin(t, os.path.join(reg, "dra", "a.sock"), type="DRAPlugin",
                   name="dra.example.com", versions=["v1beta1.DRAPlugin"],
                   wait=False),
        FakePlugin(t, os.path.join(reg, "dra", "b.sock"), type="DRAPlugin",
                   name="dra.example.com",
                   versions=["v2.DRAPlugin", "v1.DRAPlugin"], wait=False),
    ]
    for p in ps:
        p.wait_ready()
    d = plugin_daemon(t, reg)
    c = d.connect()
    got = wait_plugins(c, "REGISTERED", [p.sock for p in ps])
    for p in ps:
        t.soft(check_registered, got[p.sock], p)
        t.soft(p.wait_status, only_registered_true, "= [registered true]")
    t.soft(check_all_shapes, c)
    if plugin_msgs(c, "FAILED"):
        raise AssertionError("unexpected FAILED: %s" % summary(c))


# ===========================================================================
# Re-registration and removal

@test("a plugin restarting on the same path: DEREGISTERED then REGISTERED "
      "(clean restart that removes its socket, and a crash leaving a stale "
      "socket that the new instance renames over)")
def test_plugin_restarting_same_path_deregistered_registered(t):
    reg = t.mkdir("reg")
    path = os.path.join(reg, "csi.example.com", "csi.sock")
    kw = dict(type="CSIPlugin", name="csi.example.com", versions=["1.0.0"])
    p1 = FakePlugin(t, path, **kw)
    d = plugin_daemon(t, reg)
    c = d.connect()
    wait_plugin(c, "REGISTERED", path)

    # 1. clean restart: SIGTERM removes the socket, a new process creates
    #    it again (at once, possibly within one reconcile period).
    mark = len(c.msgs)
    p1.stop()
    p2 = FakePlugin(t, path, **kw)
    wait_plugin(c, "DEREGISTERED", path, since=mark)
    m = wait_plugin(c, "REGISTERED", path, since=mark)
    check_registered(m, p2)
    p2.wait_status(only_registered_true, "= [registered true]")
    ops = plugin_ops(c, path, since=mark)
    if ops != ["DEREGISTERED", "REGISTERED"]:
        raise AssertionError("after a restart expected DEREGISTERED, "
                             "REGISTERED; got %s" % ops)

    # 2. crash: the socket stays; the next instance renames its new socket
    #    over it (one IN_MOVED_TO, no delete): a new generation of the path.
    mark = len(c.msgs)
    p2.kill()
    read_for(c, 1.5)
    if plugin_ops(c, path, since=mark):
        raise AssertionError("a dead plugin whose socket still exists must "
                             "not be touched: %s" % summary(c, mark))
    p3 = FakePlugin(t, path, **kw)
    wait_plugin(c, "DEREGISTERED", path, since=mark)
    m = wait_plugin(c, "REGISTERED", path, since=mark)
    check_registered(m, p3)
    p3.wait_status(only_registered_true, "= [registered true]")
    read_for(c, SETTLE)
    ops = plugin_ops(c, path, since=mark)
    if ops != ["DEREGISTERED", "REGISTERED"]:
        raise AssertionError("after a socket re-created by rename expected "
                             "DEREGISTERED, REGISTERED; got %s" % ops)
    t.soft(check_all_shapes, c)


@test("socket deleted: DEREGISTERED (plugin not contacted); the other "
      "plugin stays; a new consumer does not get the removed one")
def test_socket_deleted_deregistered_plugin_contacted_other(t):
    reg = t.mkdir("reg")
    a = FakePlugin(t, os.path.join(reg, "a.sock"), type="DevicePlugin",
                   name="vendor.example/a", versions=["v1beta1"])
    b = FakePlugin(t, os.path.join(reg, "b.sock"), type="CSIPlugin",
                   name="b.csi.example.com")
    d = plugin_daemon(t, reg)
    c = d.connect()
    wait_plugins(c, "REGISTERED", [a.sock, b.sock])
    a.wait_status(lambda s: s, "has a line")
    mark = len(c.msgs)
    os.unlink(a.sock)
    m = wait_plugin(c, "DEREGISTERED", a.sock, since=mark)
    check_shape(m)
    t.soft(ensure, pinfo(m).get("name") == "vendor.example/a",
           "DEREGISTERED names %r" % pinfo(m).get("name"))
    t.soft(check_logged, d, ("info",), ["vendor.example/a", a.sock],
           "deregistration")
    read_for(c, SETTLE)
    if a.statuses() != [{"registered": True, "error": ""}] or \
            a.getinfo_count() != 1:
        raise AssertionError("the removed plugin was contacted: status %s, "
                             "%d GetInfo" % (a.statuses(), a.getinfo_count()))
    if plugin_ops(c, b.sock, since=mark):
        raise AssertionError("the other plugin was touched: %s" %
                             summary(c, mark))
    c2 = d.connect()
    init = initial_plugins(c2)
    socks = sorted(psock(m) for m in init)
    if socks != [b.sock] or any(m.get("op") != "REGISTERED" for m in init):
        raise AssertionError("initial state of a new consumer: %s (want "
                             "REGISTERED of %s only)" %
                             ([(m.get("op"), psock(m)) for m in init],
                              b.sock))


# ===========================================================================
# Failures

def started(t, reg=None):
    """A daemon and a consumer that has read its initial state.  FAILED is
    a live message only (a new consumer's initial state holds registered
    plugins), so plugins expected to fail are started after this."""
    d = plugin_daemon(t, reg)
    c = d.connect()
    c.expect_type("synced")
    return d, c


@test("GetInfo fails with a gRPC status: FAILED with the error, nothing "
      "sent to the plugin, retried with backoff (GetInfo count grows, not "
      "by hundreds), FAILED not repeated")
def test_getinfo_fails_grpc_status_failed_error(t):
    d, c = started(t)
    p = FakePlugin(t, os.path.join(d.reg, "sick.sock"),
                   getinfo_error="UNAVAILABLE:driver not ready (50% warm)")
    m = wait_plugin(c, "FAILED", p.sock)
    check_shape(m)
    t.soft(ensure, "driver not ready" in m["error"],
           "the FAILED error %r does not carry the plugin's status message"
           % m["error"])
    t.soft(ensure, "(50% warm)" in m["error"],
           "grpc-message not percent-decoded: %r" % m["error"])
    p.wait_getinfo(3, timeout=T_WAIT)
    read_for(c, 5)
    n = p.getinfo_count()
    t.note("GetInfo calls: %d" % n)
    if n > 40:
        raise AssertionError("%d GetInfo calls within about 10 s: no "
                             "backoff" % n)
    assert_not_contacted(p)
    if plugin_msgs(c, "REGISTERED", p.sock):
        raise AssertionError("a plugin whose GetInfo fails was registered")
    check_failed_once(c, p.sock)
    t.soft(check_logged, d, ("error", "warn", "warning"), [p.sock],
           "registration failure")


@test("unknown plugin type (GPUPlugin; csiplugin, case differs): FAILED; "
      "the plugin is told registered=false with an error naming the type; "
      "retried, FAILED not repeated")
def test_unknown_plugin_type_gpuplugin_csiplugin_case(t):
    d, c = started(t)
    ps = [FakePlugin(t, os.path.join(d.reg, "gpu.sock"), type="GPUPlugin",
                     name="gpu.example.com", wait=False),
          FakePlugin(t, os.path.join(d.reg, "lower.sock"), type="csiplugin",
                     name="lower.example.com", wait=False)]
    for p in ps:
        p.wait_ready()
    for p in ps:
        p.wait_status(lambda s: s, "has a line")
        st = p.statuses()[0]
        if st["registered"] is not False or p.type not in st["error"]:
            raise AssertionError("%s was told %s; want registered=false "
                                 "with an error naming %r" %
                                 (p.sock, st, p.type))
    for p in ps:
        m = wait_plugin(c, "FAILED", p.sock)
        check_shape(m)
        t.soft(ensure, p.type in m["error"],
               "FAILED error %r does not name the type %s" %
               (m["error"], p.type))
    for p in ps:
        p.wait_getinfo(2)   # retried: a handler may appear later
    read_for(c, 1)
    for p in ps:
        if any(s["registered"] for s in p.statuses()):
            raise AssertionError("%s told registered=true: %s" %
                                 (p.sock, p.statuses()))
        check_failed_once(c, p.sock)
        if plugin_msgs(c, "REGISTERED", p.sock):
            raise AssertionError("unknown type registered: %s" % summary(c))


UNSUPPORTED = [
    # (socket, type, name, versions, why)
    ("csi-03.sock", "CSIPlugin", "old.csi.example.com", ["0.3.0"],
     "CSI highest version 0.x"),
    ("csi-2.sock", "CSIPlugin", "future.csi.example.com", ["2.0.0"],
     "CSI only 2.x (ignored) leaves nothing"),
    ("csi-none.sock", "CSIPlugin", "none.csi.example.com", [],
     "CSI without versions"),
    ("dp-alpha.sock", "DevicePlugin", "vendor.example/gpu", ["v1alpha1"],
     "DevicePlugin without v1beta1"),
    ("dp-k8s.sock", "DevicePlugin", "kubernetes.io/gpu", ["v1beta1"],
     "DevicePlugin resource in kubernetes.io"),
    ("dp-plain.sock", "DevicePlugin", "gpu", ["v1beta1"],
     "DevicePlugin name not domain-qualified"),
    ("dra-v2.sock", "DRAPlugin", "dra.example.com", ["v2.DRAPlugin"],
     "DRA with only v2.DRAPlugin"),
]


@test("unsupported versions / invalid names: FAILED, and the plugin is "
      "told registered=false with the validation error (" +
      "; ".join(x[4] for x in UNSUPPORTED) + ")")
def test_unsupported_versions_invalid_names_failed_plugin(t):
    d, c = started(t)
    ps = [FakePlugin(t, os.path.join(d.reg, s), type=ty, name=n, versions=v,
                     wait=False) for s, ty, n, v, _ in UNSUPPORTED]
    good = FakePlugin(t, os.path.join(d.reg, "zz-good.sock"),
                      type="CSIPlugin", name="good.csi.example.com",
                      versions=["1.1.0"], wait=False)
    for p in ps + [good]:
        p.wait_ready()
    wait_plugin(c, "REGISTERED", good.sock)

    def told(p, why):
        p.wait_status(lambda s: s, "has a line")
        st = p.statuses()[0]
        if st["registered"] is not False or not st["error"].strip():
            raise AssertionError("%s (%s): told %s, want registered=false "
                                 "with the error" % (p.sock, why, st))
        if "validat" not in st["error"].lower():
            raise AssertionError("%s (%s): the error %r does not say "
                                 "validation failed" % (p.sock, why,
                                                        st["error"]))
    for p, x in zip(ps, UNSUPPORTED):
        t.soft(told, p, x[4])
    got = t.soft(wait_plugins, c, "FAILED", [p.sock for p in ps]) or {}
    for m in got.values():
        t.soft(check_shape, m)
    read_for(c, 1)
    for p, x in zip(ps, UNSUPPORTED):
        if plugin_msgs(c, "REGISTERED", p.sock):
            t.soft_failures.append("%s (%s) was registered" % (p.sock, x[4]))
        t.soft(check_failed_once, c, p.sock)


@test("CSI: a second socket with an already registered driver name needs a "
      "strictly higher version (same version: FAILED + registered=false; "
      "higher: REGISTERED)")
def test_csi_second_socket_already_registered_driver(t):
    reg = t.mkdir("reg")
    d = plugin_daemon(t, reg)
    c = d.connect()
    kw = dict(type="CSIPlugin", name="dup.csi.example.com")
    a = FakePlugin(t, os.path.join(reg, "a.sock"), versions=["1.1.0"], **kw)
    wait_plugin(c, "REGISTERED", a.sock)
    same = FakePlugin(t, os.path.join(reg, "b.sock"), versions=["1.1.0"],
                      **kw)
    wait_plugin(c, "FAILED", same.sock)
    same.wait_status(lambda s: s, "has a line")
    if same.statuses()[0]["registered"] is not False:
        raise AssertionError("same-version duplicate told %s" %
                             same.statuses())
    higher = FakePlugin(t, os.path.join(reg, "c.sock"), versions=["1.2.0"],
                        **kw)
    m = wait_plugin(c, "REGISTERED", higher.sock)
    check_registered(m, higher)
    higher.wait_status(only_registered_true, "= [registered true]")


@test("handler register fails (DRA: endpoint already registered for the "
      "driver): FAILED, the plugin is told registered=false, and it is not "
      "retried (the kubelet keeps it in the actual state, quirk Q1)")
def test_handler_register_fails_dra_endpoint_already(t):
    d, c = started(t)
    ep = t.path("dra-service.sock")
    kw = dict(type="DRAPlugin", name="dup.dra.example.com", endpoint=ep,
              versions=["v1.DRAPlugin"])
    a = FakePlugin(t, os.path.join(d.reg, "a.sock"), **kw)
    m = wait_plugin(c, "REGISTERED", a.sock)
    check_registered(m, a)
    b = FakePlugin(t, os.path.join(d.reg, "b.sock"), **kw)
    b.wait_status(lambda s: s, "has a line")
    st = b.statuses()[0]
    if st["registered"] is not False or not st["error"].strip():
        raise AssertionError("second socket with the same DRA endpoint told "
                             "%s; want registered=false with the error" % st)
    m = wait_plugin(c, "FAILED", b.sock)
    check_shape(m)
    t.soft(ensure, "validat" not in st["error"].lower(),
           "a handler register failure reported as validation: %r" %
           st["error"])
    read_for(c, SETTLE)
    t.soft(ensure, b.getinfo_count() == 1 and len(b.statuses()) == 1,
           "a register failure was retried: %d GetInfo, statuses %s (the "
           "kubelet keeps the entry and does not retry until the socket "
           "changes)" % (b.getinfo_count(), b.statuses()))
    t.soft(ensure, not plugin_msgs(c, "REGISTERED", b.sock),
           "the refused socket was reported REGISTERED: %s" % summary(c))
    t.soft(ensure, not plugin_ops(c, a.sock)[1:],
           "the first DRA socket was touched: %s" % summary(c))


@test("NotifyRegistrationStatus(true) fails: the plugin still counts as "
      "registered (REGISTERED, not re-registered, DEREGISTERED when its "
      "socket goes; quirk Q2)")
def test_notifyregistrationstatus_true_fails_plugin_still_counts(t):
    d, c = started(t)
    p = FakePlugin(t, os.path.join(d.reg, "deaf.sock"),
                   name="deaf.csi.example.com",
                   notify_error="INTERNAL:cannot take the news")
    m = wait_plugin(c, "REGISTERED", p.sock)
    check_registered(m, p)
    p.wait_status(lambda s: s, "has a line")
    if p.statuses()[0] != {"registered": True, "error": ""}:
        raise AssertionError("told %s" % p.statuses())
    read_for(c, SETTLE)
    t.soft(ensure, p.getinfo_count() == 1,
           "re-registered after a failed Notify: %d GetInfo calls" %
           p.getinfo_count())
    c2 = d.connect()
    t.soft(ensure, [psock(x) for x in initial_plugins(c2)] == [p.sock],
           "a new consumer does not get it as registered")
    os.unlink(p.sock)
    wait_plugin(c, "DEREGISTERED", p.sock)


@test("a failing plugin restarted still failing is reported FAILED again "
      "(new generation); restarted fixed, it registers")
def test_failing_plugin_restarted_still_failing_reported(t):
    d, c = started(t)
    path = os.path.join(d.reg, "flaky.sock")
    p1 = FakePlugin(t, path, type="CSIPlugin", name="flaky.csi.example.com",
                    versions=["0.4.0"])
    wait_plugin(c, "FAILED", path)
    mark = len(c.msgs)
    p1.stop()
    p2 = FakePlugin(t, path, type="CSIPlugin", name="flaky.csi.example.com",
                    versions=["0.4.0"])
    p2.wait_status(lambda s: s, "has a line")
    wait_plugin(c, "FAILED", path, since=mark)
    mark = len(c.msgs)
    p2.stop()
    p3 = FakePlugin(t, path, type="CSIPlugin", name="flaky.csi.example.com",
                    versions=["0.4.0", "1.0.0"])
    m = wait_plugin(c, "REGISTERED", path, since=mark)
    check_registered(m, p3)
    p3.wait_status(only_registered_true, "= [registered true]")


@test("socket deleted while its GetInfo is held: never REGISTERED nor "
      "DEREGISTERED; a plugin later created on the path registers")
def test_socket_deleted_while_getinfo_held_never(t):
    d, c = started(t)
    path = os.path.join(d.reg, "slow.sock")
    p = FakePlugin(t, path, hang=True)
    p.wait_getinfo(1)
    os.unlink(path)
    read_for(c, SETTLE)
    ops = plugin_ops(c, path)
    if "REGISTERED" in ops or "DEREGISTERED" in ops:
        raise AssertionError("a plugin deleted before answering GetInfo: %s"
                             % summary(c))
    assert_not_contacted(p)
    p2 = FakePlugin(t, path, name="after.csi.example.com")
    m = wait_plugin(c, "REGISTERED", path)
    check_registered(m, p2)


@test("socket deleted while NotifyRegistrationStatus(true) is in flight: "
      "REGISTERED then DEREGISTERED; the plugin ends up not registered")
def test_socket_deleted_while_notifyregistrationstatus_true_flight(t):
    d, c = started(t)
    path = os.path.join(d.reg, "racy.sock")
    p = FakePlugin(t, path, name="racy.csi.example.com", notify_delay=2)
    p.wait_status(lambda s: s, "has a line")    # Notify received, held 2 s
    os.unlink(path)
    wait_plugin(c, "DEREGISTERED", path)
    ops = plugin_ops(c, path)
    if ops != ["REGISTERED", "DEREGISTERED"]:
        raise AssertionError("expected REGISTERED, DEREGISTERED; got %s" %
                             summary(c))
    c2 = d.connect()
    init = initial_plugins(c2)
    if init:
        raise AssertionError("still registered: %s" %
                             [json.dumps(m)[:200] for m in init])


@test("a symlink in the registry to a socket elsewhere is a plugin (stat "
      "follows symlinks); the socket field is the path in the registry")
def test_symlink_registry_socket_elsewhere_plugin_stat(t):
    d, c = started(t)
    real = FakePlugin(t, t.path("elsewhere", "real.sock"),
                      name="linked.csi.example.com")
    link = os.path.join(d.reg, "linked.sock")
    os.symlink(real.sock, link)
    m = wait_plugin(c, "REGISTERED", link)
    if pinfo(m).get("name") != "linked.csi.example.com":
        raise AssertionError("registered as %s" % json.dumps(m))
    real.wait_status(only_registered_true, "= [registered true]")


@test("a registry dir given as an unclean path (x/../reg/) reports "
      "lexically cleaned socket paths (as the kubelet's filepath.Join / "
      "fsnotify paths are, and as podmux names manifest files)")
def test_registry_dir_given_unclean_path_x(t):
    reg = t.mkdir("reg")
    t.mkdir("x")
    d = plugin_daemon(t, os.path.join(t.tmp, "x", "..", "reg") + "/")
    c = d.connect()
    c.expect_type("synced")
    p = FakePlugin(t, os.path.join(reg, "sub", "p.sock"))
    m = c.expect(lambda m: m.get("type") == "plugin" and
                 m.get("op") == "REGISTERED", "a REGISTERED message")
    check_registered(m, p)


@test("plugins that accept and never answer (GetInfo held: --hang; raw "
      "socket never speaking HTTP/2: --hang-accept), started first, do not "
      "delay the others; they never register")
def test_plugins_accept_never_answer_getinfo_held(t):
    reg = t.mkdir("reg")
    hang = FakePlugin(t, many=4, dir=reg, prefix="a-hang-", hang=True)
    raw = FakePlugin(t, many=4, dir=reg, prefix="a-raw-", hang_accept=True)
    good1 = FakePlugin(t, os.path.join(reg, "z-good-1.sock"),
                       name="good1.csi.example.com")
    d = plugin_daemon(t, reg)
    c = d.connect()
    # Eight hung attempts take >= 4 x 1 s + 4 x 10 s if done one after the
    # other; T_WAIT is well below that and far above a concurrent run.
    m = wait_plugin(c, "REGISTERED", good1.sock, timeout=T_WAIT)
    check_registered(m, good1)
    for i in range(4):
        hang.wait_getinfo(1, i=i)
        raw.wait_getinfo(1, i=i)
    good2 = FakePlugin(t, os.path.join(reg, "z-good-2.sock"),
                       name="good2.csi.example.com")
    m = wait_plugin(c, "REGISTERED", good2.sock, timeout=T_WAIT)
    check_registered(m, good2)
    # Hung plugins appearing while a consumer listens: the attempt ends
    # (GetInfo deadline 1 s, dial timeout 10 s) with FAILED; the plugin is
    # not notified.  (Those present at start may fail before the consumer
    # connects; FAILED is not part of a consumer's initial state.)
    late = [FakePlugin(t, os.path.join(reg, "late-hang.sock"), hang=True),
            FakePlugin(t, os.path.join(reg, "late-raw.sock"),
                       hang_accept=True)]
    for p in late:
        p.wait_getinfo(1)
    t.soft(wait_plugins, c, "FAILED", [p.sock for p in late], timeout=T_WAIT)
    for i in range(4):
        t.soft(assert_not_contacted, hang, i, "hung plugin ")
        t.soft(assert_not_contacted, raw, i, "hung plugin ")
    for p in late:
        t.soft(assert_not_contacted, p, 0, "hung plugin ")
    hung = hang.socks + raw.socks + [p.sock for p in late]
    bad = [m for m in plugin_msgs(c, "REGISTERED") if psock(m) in hung]
    if bad:
        raise AssertionError("a hung plugin was registered: %s" % bad)
    d.assert_alive()


@test("ignored: a regular file, a FIFO, a dangling symlink, a hidden "
      "socket (.x.sock, served) at start and one created later, a hidden "
      "socket in a sub-directory: no message, no GetInfo")
def test_ignored_regular_file_fifo_dangling_symlink(t):
    reg = t.mkdir("reg")
    plain = os.path.join(reg, "plain.sock")
    with open(plain, "w") as f:
        f.write("not a socket\n")
    fifo = os.path.join(reg, "fifo.sock")
    os.mkfifo(fifo)
    dangling = os.path.join(reg, "dangling.sock")
    os.symlink(os.path.join(reg, "nowhere.sock"), dangling)
    h1 = FakePlugin(t, os.path.join(reg, ".x.sock"), rename=False)
    h2 = FakePlugin(t, os.path.join(reg, "sub", ".y.sock"), rename=False)
    d = plugin_daemon(t, reg)
    c = d.connect()
    h3 = FakePlugin(t, os.path.join(reg, ".late.sock"), rename=False)
    with open(os.path.join(reg, "late-plain.sock"), "w") as f:
        f.write("x")
    good = FakePlugin(t, os.path.join(reg, "zz-good.sock"))
    wait_plugin(c, "REGISTERED", good.sock)
    read_for(c, SETTLE)
    others = [m for m in plugin_msgs(c) if psock(m) != good.sock]
    if others:
        raise AssertionError("messages about ignored paths: %s" %
                             [json.dumps(m)[:300] for m in others])
    for h in (h1, h2, h3):
        if h.getinfo_count():
            raise AssertionError("hidden socket %s got %d GetInfo calls" %
                                 (h.sock, h.getinfo_count()))
    errs = log_mentions(d, ("error",), [plain, fifo, dangling])
    t.soft(ensure, not errs, "ignored paths logged as errors: %s" % errs[:3])


@test("nested folders: a socket two directories deep at start; a directory "
      "tree created after start with a socket inside; a directory moved "
      "into the tree holding a socket")
def test_nested_folders_socket_two_directories_deep(t):
    reg = t.mkdir("reg")
    deep = FakePlugin(t, os.path.join(reg, "a", "b", "deep.sock"))
    d = plugin_daemon(t, reg)
    c = d.connect()
    wait_plugin(c, "REGISTERED", deep.sock)
    # mkdir -p then the socket at once (races the new watch: the walk of a
    # created directory must find it).
    late = FakePlugin(t, os.path.join(reg, "late", "x", "y", "p.sock"))
    m = wait_plugin(c, "REGISTERED", late.sock)
    check_registered(m, late)
    # A directory created, then the socket a little later.
    os.mkdir(os.path.join(reg, "late2"))
    read_for(c, 0.5)
    late2 = FakePlugin(t, os.path.join(reg, "late2", "q.sock"))
    wait_plugin(c, "REGISTERED", late2.sock)
    # A directory built outside, served, then renamed into the tree.
    outside = t.mkdir("outside", "movedir")
    mv = FakePlugin(t, os.path.join(outside, "m.sock"),
                    name="moved.csi.example.com")
    os.rename(outside, os.path.join(reg, "movedir"))
    moved = norm(os.path.join(reg, "movedir", "m.sock"))
    m = wait_plugin(c, "REGISTERED", moved)
    if pinfo(m).get("name") != "moved.csi.example.com":
        raise AssertionError("moved plugin registered as %s" % m)
    for p in (deep, late, late2):
        t.soft(p.wait_status, only_registered_true, "= [registered true]")
    t.soft(mv.wait_status, only_registered_true, "= [registered true]")
    t.soft(check_all_shapes, c)


# ===========================================================================
# Scale and consumers

@test("20 plugins appearing at once all register; a consumer connecting "
      "afterwards gets all 20 REGISTERED in its initial state")
def test_20_plugins_appearing_once_all_register(t):
    reg = t.mkdir("reg")
    d = plugin_daemon(t, reg)
    c = d.connect()
    c.expect_type("synced")
    p = FakePlugin(t, many=20, dir=os.path.join(reg, "many"),
                   prefix="plugin-", name="plugin-{i}.csi.example.com")
    got = wait_plugins(c, "REGISTERED", p.socks, timeout=T_LONG)
    for i in range(20):
        t.soft(check_registered, got[p.socks[i]], p, i)
    for i in range(20):
        t.soft(p.wait_status, only_registered_true, "= [registered true]",
               i)
    c2 = d.connect()
    init = initial_plugins(c2)
    socks = sorted(psock(m) for m in init)
    if socks != sorted(p.socks) or any(m.get("op") != "REGISTERED"
                                       for m in init):
        raise AssertionError("initial state of a new consumer has %d plugin "
                             "messages (%s...), want one REGISTERED for each"
                             " of the 20" % (len(init), [
                                 (m.get("op"), psock(m)) for m in init][:4]))
    for m in init:
        i = p.socks.index(psock(m))
        t.soft(check_registered, m, p, i)
    mark = len(c.msgs)
    p.stop()    # removes its 20 sockets
    wait_plugins(c, "DEREGISTERED", p.socks, since=mark, timeout=T_LONG)


@test("a consumer connecting after registrations gets one REGISTERED per "
      "registered plugin before synced (not the removed, not the failing)")
def test_consumer_connecting_after_registrations_gets_one(t):
    reg = t.mkdir("reg")
    csi = FakePlugin(t, os.path.join(reg, "csi.sock"),
                     name="c.csi.example.com", versions=["1.0.0", "1.3.0"],
                     wait=False)
    dp = FakePlugin(t, os.path.join(reg, "dp.sock"), type="DevicePlugin",
                    name="vendor.example/nic", versions=["v1beta1"],
                    endpoint=t.path("nic.sock"), wait=False)
    dra = FakePlugin(t, os.path.join(reg, "dra.sock"), type="DRAPlugin",
                     name="gpu.dra.example.com",
                     versions=["v1.DRAPlugin"], wait=False)
    gone = FakePlugin(t, os.path.join(reg, "gone.sock"),
                      name="gone.csi.example.com", wait=False)
    bad = FakePlugin(t, os.path.join(reg, "bad.sock"), type="NoSuchPlugin",
                     wait=False)
    for p in (csi, dp, dra, gone, bad):
        p.wait_ready()
    d = plugin_daemon(t, reg)
    c = d.connect()
    live = {p.sock: wait_plugin(c, "REGISTERED", p.sock)
            for p in (csi, dp, dra, gone)}
    bad.wait_status(lambda s: s, "has a line")   # failed (told false)
    os.unlink(gone.sock)
    wait_plugin(c, "DEREGISTERED", gone.sock)
    del live[gone.sock]
    c2 = d.connect()
    init = initial_plugins(c2)
    got = {psock(m): m for m in init}
    if sorted(got) != sorted(live) or len(init) != len(live) or \
            any(m.get("op") != "REGISTERED" for m in init):
        raise AssertionError("initial plugin messages %s; want REGISTERED of "
                             "%s" % ([(m.get("op"), psock(m)) for m in init],
                                     sorted(live)))
    for p in (csi, dp, dra):
        t.soft(check_registered, got[p.sock], p)
        if pinfo(got[p.sock]) != pinfo(live[p.sock]):
            t.soft_failures.append("initial %s differs from the live one %s"
                                   % (got[p.sock], live[p.sock]))


@test("resume_after: a consumer resuming from before a registration gets "
      "the REGISTERED replayed")
def test_resume_after_consumer_resuming_before_registration(t):
    d = plugin_daemon(t)
    c = d.connect()
    c.expect_type("synced")
    a = FakePlugin(t, os.path.join(d.reg, "a.sock"), name="a.example.com")
    wait_plugin(c, "REGISTERED", a.sock)
    last = c.last_seq
    c.close()
    b = FakePlugin(t, os.path.join(d.reg, "b.sock"), name="b.example.com")
    c3 = d.connect()
    wait_plugin(c3, "REGISTERED", b.sock)
    c2 = d.connect(first_line=last)
    m = wait_plugin(c2, "REGISTERED", b.sock, timeout=T_SHORT)
    check_registered(m, b)
    if plugin_msgs(c2, "REGISTERED", a.sock):
        raise AssertionError("replay after seq %d repeated an older "
                             "message: %s" % (last, summary(c2)))


# ===========================================================================
# Directories

@test("socket directory deleted: every plugin in it DEREGISTERED, the "
      "others stay; then the registry root itself deleted: all the rest "
      "DEREGISTERED; the daemon keeps running")
def test_socket_directory_deleted_every_plugin_deregistered(t):
    reg = t.mkdir("reg")
    sub = FakePlugin(t, many=3, dir=os.path.join(reg, "vendor", "sub"),
                     prefix="s-", wait=False)
    top = FakePlugin(t, os.path.join(reg, "top.sock"), wait=False)
    other = FakePlugin(t, os.path.join(reg, "other", "o.sock"), wait=False)
    for p in (sub, top, other):
        p.wait_ready()
    d = plugin_daemon(t, reg)
    c = d.connect()
    wait_plugins(c, "REGISTERED", sub.socks + [top.sock, other.sock])
    mark = len(c.msgs)
    shutil.rmtree(os.path.join(reg, "vendor"))
    wait_plugins(c, "DEREGISTERED", sub.socks, since=mark)
    read_for(c, 1.5)
    bad = [m for m in plugin_msgs(c, since=mark)
           if psock(m) in (top.sock, other.sock)]
    if bad:
        raise AssertionError("plugins outside the deleted directory were "
                             "touched: %s" % summary(c, mark))
    mark = len(c.msgs)
    shutil.rmtree(reg)
    wait_plugins(c, "DEREGISTERED", [top.sock, other.sock], since=mark)
    d.assert_alive()
    c2 = d.connect()
    init = initial_plugins(c2)
    if init:
        raise AssertionError("plugins still reported after the registry was "
                             "deleted: %s" % [psock(m) for m in init])
    t.soft(check_all_shapes, c)


@test("plugin messages are the same in every notification mode "
      "(live REGISTERED, and in a new consumer's initial state)",
      params=harness.MODES)
def test_plugin_messages_same_every_notification_mode(t):
    d = plugin_daemon(t)     # t.daemon uses the param's mode
    c = d.connect()
    c.expect_type("synced")
    p = FakePlugin(t, os.path.join(d.reg, "p.sock"), name="m.example.com")
    check_registered(wait_plugin(c, "REGISTERED", p.sock), p)
    init = initial_plugins(d.connect())
    if [psock(m) for m in init] != [p.sock]:
        raise AssertionError("initial plugin messages: %s" %
                             [json.dumps(m)[:200] for m in init])
    check_registered(init[0], p)


@test("a missing registry directory is created (with parents, mode 0755) "
      "and plugins put there register")
def test_missing_registry_directory_created_parents_mode(t):
    reg = t.path("var", "lib", "kubelet", "plugins_registry")
    d = plugin_daemon(t, reg)
    c = d.connect()
    c.expect_type("synced")
    wait_for(lambda: os.path.isdir(reg), T_SHORT, "%s created" % reg)
    mode = os.stat(reg).st_mode & 0o7777
    t.soft(ensure, mode == 0o755, "registry dir mode %o, want 755" % mode)
    p = FakePlugin(t, os.path.join(reg, "p", "p.sock"))
    wait_plugin(c, "REGISTERED", p.sock)


@test("--plugins-registry-dir \"\" turns the plugin manager off: the daemon "
      "serves pods, no plugin message, the default directory is not created")
def test_plugins_registry_dir_turns_plugin_manager(t):
    default = "/var/lib/kubelet/plugins_registry"
    existed = os.path.exists(default)
    d = t.daemon(extra=["--plugins-registry-dir", ""])
    c = d.connect()
    c.expect_type("synced")
    read_for(c, 1.5)
    if plugin_msgs(c):
        raise AssertionError("plugin messages with the manager off: %s" %
                             summary(c))
    if IS_ROOT and not existed and os.path.exists(default):
        raise AssertionError("%s was created although the manager is off" %
                             default)
    d.assert_alive()


@test("a stale socket (nobody listening) does not hold up a live plugin; "
      "it is not registered")
def test_stale_socket_nobody_listening_does_hold(t):
    reg = t.mkdir("reg")
    stale = make_socket_file(os.path.join(reg, "a-stale.sock"))
    d = plugin_daemon(t, reg)
    c = d.connect()
    good = FakePlugin(t, os.path.join(reg, "b-good.sock"))
    wait_plugin(c, "REGISTERED", good.sock)
    read_for(c, 1.5)
    if plugin_msgs(c, "REGISTERED", stale):
        raise AssertionError("a stale socket was registered: %s" %
                             summary(c))
    t.soft(check_failed_once, c, stale)


def stop_cleanly(d, what):
    """SIGTERM to d: it must exit 0 within the stop bound, with no
    sanitizer report (the sanitizer build exits 1 after one)."""
    rc = d.stop()
    err = d.stderr_text()
    if d.killed:
        raise AssertionError("podmux hung on SIGTERM %s (killed after 10 s)"
                             % what)
    for word in ("AddressSanitizer", "LeakSanitizer", "runtime error:"):
        if word in err:
            at = err.index(word)
            raise AssertionError("%s %s:\n%s" % (word, what,
                                                 err[max(0, at - 200):at + 2500]))
    if rc != 0:
        raise AssertionError("podmux exited with %s on SIGTERM %s; last "
                             "stderr: %s" % (harness._rc_str(rc), what,
                                             err[-1500:]))


def barrier(t, c, reg, n):
    """A plugin made now in the registry root and registered: every event
    before it has been handled."""
    p = FakePlugin(t, os.path.join(reg, "zz-barrier-%d.sock" % n),
                   name="barrier%d.example.com" % n)
    wait_plugin(c, "REGISTERED", p.sock)


@test("mv a b inside the registry: the moved plugin registers as b/..., "
      "the directory is watched under its new name (a plugin started in b "
      "registers), a new a/ made afterwards is watched and its plugin "
      "registers; the socket renamed away stays registered, as in the "
      "kubelet")
def test_mv_b_inside_registry_moved_plugin(t):
    reg = t.mkdir("reg")
    # Device plugins: one name may have several sockets (a CSI driver's
    # second socket of the same version would be refused, by the kubelet
    # too, since the socket renamed away stays registered).
    dev = dict(type="DevicePlugin", versions=["v1beta1"])
    p = FakePlugin(t, os.path.join(reg, "a", "p.sock"),
                   name="vendor.example/p", **dev)
    d = plugin_daemon(t, reg)
    c = d.connect()
    wait_plugin(c, "REGISTERED", p.sock)
    os.rename(os.path.join(reg, "a"), os.path.join(reg, "b"))
    moved = norm(os.path.join(reg, "b", "p.sock"))
    m = wait_plugin(c, "REGISTERED", moved)
    got = pinfo(m)
    if (got["type"], got["name"], got["endpoint"]) != ("DevicePlugin", p.name,
                                                       moved):
        raise AssertionError("the moved plugin registered as %s" % got)
    q = FakePlugin(t, os.path.join(reg, "b", "q.sock"),
                   name="vendor.example/q", **dev)
    wait_plugin(c, "REGISTERED", q.sock)
    os.mkdir(os.path.join(reg, "a"))
    barrier(t, c, reg, 1)     # a/ is empty when its creation is handled
    n = FakePlugin(t, os.path.join(reg, "a", "n.sock"),
                   name="vendor.example/n", **dev)
    check_registered(wait_plugin(c, "REGISTERED", n.sock), n)
    if plugin_msgs(c, "DEREGISTERED", p.sock):
        raise AssertionError("the socket renamed away was deregistered: %s"
                             % summary(c))
    t.soft(check_all_shapes, c)
    stop_cleanly(d, "after the renames")


@test("SIGTERM after mv a b (and a new a/) inside the registry: podmux "
      "exits 0 at once, every watch ended once (no crash, no hang, no "
      "sanitizer report)")
def test_sigterm_after_mv_b_new_inside(t):
    reg = t.mkdir("reg")
    os.makedirs(os.path.join(reg, "a", "sub"))
    d = plugin_daemon(t, reg)
    c = d.connect()
    c.expect_type("synced")
    barrier(t, c, reg, 1)
    os.rename(os.path.join(reg, "a"), os.path.join(reg, "b"))
    os.mkdir(os.path.join(reg, "a"))
    barrier(t, c, reg, 2)
    stop_cleanly(d, "after mv a b")


if __name__ == "__main__":
    harness.main()
