#!/usr/bin/env python3
"""fakeapi — runs scripts/fake-apiserver for a test and drives it.

    srv = FakeAPI(t, tls=True, tokens=["tok"])   # started, port known
    srv.url                                      # https://127.0.0.1:PORT
    srv.create("web")                            # a pod on node1
    srv.create("db", node="node2")               # another node's pod
    srv.patch("web", {"metadata": {"labels": {"a": "b"}}})
    srv.status("web", {"phase": "Running"})
    srv.delete("web", grace=30)                  # deletionTimestamp set
    srv.delete("web")                            # gone
    srv.fail(match="list", status=500, count=2)
    srv.requests(kind="list")                    # the request log
    srv.set_reviews(tokens={"t": {"username": "alice"}},
                    access=[{"user": "alice", "verb": "get",
                             "allowed": True}])
    srv.reviews()                                # review counts
    srv.truth()                                  # node1's pods, by the server

The server is a separate process (/usr/bin/python3 scripts/fake-apiserver),
registered in t.procs so the harness stops it by its PID when the test
ends; its log is t.path("fake-apiserver.log").
"""

import json
import os
import socket
import subprocess
import sys
import time

import harness
from harness import NODE, T_SHORT, T_WAIT

PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") \
    else sys.executable
SCRIPT = os.path.join(harness.SRCDIR, "scripts", "fake-apiserver")


class ControlError(AssertionError):
    pass


class FakeAPI:
    _n = 0

    def __init__(self, t, tls=False, tokens=None, client_ca=False,
                 client_cert="required", prefix="", pki=None, extra=(),
                 server_cert=None):
        FakeAPI._n += 1
        self.t = t
        self.n = FakeAPI._n
        self.tls = tls or client_ca
        self.pki = pki
        self.prefix = prefix.rstrip("/")
        self.ctl_path = t.path("fake-api-%d.ctl" % self.n)
        self.port_file = t.path("fake-api-%d.port" % self.n)
        self.log_path = t.path("fake-apiserver-%d.log" % self.n)
        args = [PYTHON, SCRIPT, "--listen", "127.0.0.1:0", "--port-file",
                self.port_file, "--control", self.ctl_path, "--log",
                self.log_path]
        if self.tls:
            if pki is None:
                raise ValueError("tls needs pki (apitls.copy_pki)")
            crt, key = server_cert or (pki["server.crt"], pki["server.key"])
            args += ["--tls-cert", crt, "--tls-key", key]
            if client_ca:
                args += ["--client-ca", pki["ca.crt"], "--client-cert",
                         client_cert]
        for tok in tokens or ():
            args += ["--token", tok]
        if self.prefix:
            args += ["--path-prefix", self.prefix]
        args += list(extra)
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        t.procs.append(self.proc)
        deadline = time.monotonic() + T_SHORT
        while not os.path.exists(self.port_file):
            if self.proc.poll() is not None:
                raise AssertionError("fake-apiserver exited (%s): %s" %
                                     (self.proc.returncode, self.log()))
            if time.monotonic() > deadline:
                raise AssertionError("fake-apiserver did not start: %s" %
                                     self.log())
            time.sleep(0.02)   # a poll's interval
        with open(self.port_file) as f:
            self.port = int(f.read().strip())
        self.host = "127.0.0.1"
        self._sock = None
        self._buf = b""
        self.cmd("ping")

    # -- addresses -----------------------------------------------------------
    @property
    def url(self):
        return "%s://127.0.0.1:%d%s" % ("https" if self.tls else "http",
                                        self.port, self.prefix)

    def url_host(self, host):
        return "%s://%s:%d%s" % ("https" if self.tls else "http", host,
                                 self.port, self.prefix)

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")[-3000:]
        except OSError:
            return ""

    # -- control -------------------------------------------------------------
    def _connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(T_WAIT)
        s.connect(self.ctl_path)
        return s

    def cmd(self, cmd, **kw):
        """Sends one control command; returns the reply (dict).  Raises
        ControlError when the server says no."""
        req = dict(kw, cmd=cmd)
        for attempt in (0, 1):
            try:
                if self._sock is None:
                    self._sock = self._connect()
                    self._buf = b""
                self._sock.sendall(json.dumps(req).encode() + b"\n")
                while b"\n" not in self._buf:
                    data = self._sock.recv(1 << 20)
                    if not data:
                        raise ConnectionResetError("control socket closed")
                    self._buf += data
                break
            except (OSError, ConnectionResetError):
                if self._sock is not None:
                    self._sock.close()
                self._sock = None
                if attempt or self.proc.poll() is not None:
                    raise AssertionError("fake-apiserver control failed (%s);"
                                         " server log: %s" % (
                                             self.proc.poll(), self.log()))
        line, _, self._buf = self._buf.partition(b"\n")
        res = json.loads(line.decode())
        if not res.get("ok"):
            raise ControlError("fake-apiserver %s: %s" % (cmd,
                                                         res.get("error")))
        return res

    def close(self):
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    # -- pods ----------------------------------------------------------------
    @staticmethod
    def pod(name, node=NODE, namespace="default", image="nginx:1.25",
            labels=None, annotations=None, status=None, uid=None, **kw):
        p = harness.pod_obj(name, image=image, namespace=namespace,
                            labels=labels, annotations=annotations,
                            status=status, uid=uid, **kw)
        p["spec"]["nodeName"] = node
        return p

    def create(self, name, **kw):
        return self.cmd("create", pod=self.pod(name, **kw))["pod"]

    def create_pod(self, pod):
        return self.cmd("create", pod=pod)["pod"]

    def patch(self, name, patch, namespace="default"):
        return self.cmd("patch", name=name, namespace=namespace,
                        patch=patch)["pod"]

    def label(self, name, namespace="default", **labels):
        return self.patch(name, {"metadata": {"labels": labels}}, namespace)

    def set_image(self, name, image, namespace="default"):
        cur = self.get(name, namespace)
        spec = cur["spec"]
        spec["containers"][0]["image"] = image
        return self.patch(name, {"spec": spec}, namespace)

    def status(self, name, status, namespace="default"):
        return self.cmd("status", name=name, namespace=namespace,
                        status=status)["pod"]

    def delete(self, name, namespace="default", grace=0):
        return self.cmd("delete", name=name, namespace=namespace,
                        grace=grace)

    def batch(self, *ops):
        return self.cmd("batch", ops=list(ops))

    def get(self, name, namespace="default"):
        for p in self.cmd("state")["pods"]:
            md = p["metadata"]
            if md["name"] == name and md["namespace"] == namespace:
                return p
        raise AssertionError("no pod %s/%s on the server" % (namespace, name))

    def truth(self, node=NODE):
        """The server's pods on node (list of pod objects)."""
        return self.cmd("state", node=node)["pods"]

    def rv(self):
        return self.cmd("ping")["rv"]

    # -- faults and knobs ----------------------------------------------------
    def config(self, **kw):
        return self.cmd("config", **kw)

    def fail(self, match="any", status=500, count=1, retry_after=None,
             body="status", reason=None, message=None):
        return self.cmd("fail", match=match, status=status, count=count,
                        retry_after=retry_after, body=body, reason=reason,
                        message=message)

    def list_fault(self, kind, count=1):
        return self.cmd("list_fault", kind=kind, count=count)

    def watch_fault(self, kind, count=1, **kw):
        return self.cmd("watch_fault", kind=kind, count=count, **kw)

    def review_fault(self, kind="hang", count=1):
        return self.cmd("review_fault", kind=kind, count=count)

    def release(self):
        return self.cmd("release")

    def stream_fault(self, kind, count=1, **kw):
        return self.cmd("stream_fault", kind=kind, count=count, **kw)

    def action(self, action, **kw):
        return self.cmd("stream_action", action=action, **kw)

    def bookmark(self):
        return self.cmd("bookmark")

    def compact(self, rv=None):
        return self.cmd("compact", **({} if rv is None else {"rv": rv}))

    def set_tokens(self, *tokens):
        return self.cmd("set_token", tokens=list(tokens))

    # -- reviews -------------------------------------------------------------
    def set_reviews(self, tokens=None, access=None):
        """What TokenReview ({token: user}) and SubjectAccessReview
        ([{user, verb, namespace, name, allowed, reason}], first match)
        answer; each table given replaces the one held."""
        kw = {}
        if tokens is not None:
            kw["tokens"] = tokens
        if access is not None:
            kw["access"] = access
        return self.cmd("set_reviews", **kw)

    def reviews(self):
        """{"tokenreviews": N, "subjectaccessreviews": N, "access": [spec]}"""
        return self.cmd("reviews")

    def clear_reviews(self):
        return self.cmd("clear_reviews")

    def stop(self):
        return self.cmd("stop")

    def start(self):
        return self.cmd("start")

    def restart(self, down=0):
        return self.cmd("restart", down=down)

    # -- request log -------------------------------------------------------
    def requests(self, since=0, kind=None, pods_only=False):
        rs = self.cmd("requests", since=since)["requests"]
        if kind is not None:
            kinds = (kind,) if isinstance(kind, str) else tuple(kind)
            rs = [r for r in rs if r.get("kind") in kinds]
        if pods_only:
            rs = [r for r in rs if r.get("kind") in ("list", "continue",
                                                     "watch")]
        return rs

    def last_id(self):
        rs = self.cmd("requests", since=0)["requests"]
        return rs[-1]["id"] if rs else 0

    def watchers(self):
        return self.cmd("watchers")["watchers"]

    def wait_request(self, pred, what, since=0, timeout=None):
        """Waits for a request (in the log after id since) with pred(r);
        returns it."""
        def find():
            for r in self.requests(since):
                if pred(r):
                    return r
            return None
        try:
            return harness.wait_for(find, timeout or T_WAIT, what,
                                    interval=0.05)
        except AssertionError as e:
            raise AssertionError("%s; requests: %s" % (e, self.summary(
                since)))

    def wait_watch(self, since=0, timeout=None, rv=None):
        """Waits until a watch that arrived after id since is open (and is
        the only open one); returns its log entry."""
        def find():
            open_ids = self.watchers()
            for r in self.requests(since, kind="watch"):
                if r["id"] in open_ids and r.get("outcome") == "open" and \
                        len(open_ids) == 1 and (
                            rv is None or r["params"].get(
                                "resourceVersion") == str(rv)):
                    return r
            return None
        try:
            return harness.wait_for(find, timeout or T_WAIT,
                                    "an open watch%s" % (
                                        "" if rv is None else
                                        " from rv %s" % rv), interval=0.05)
        except AssertionError as e:
            raise AssertionError("%s; requests: %s" % (e, self.summary(
                since)))

    def summary(self, since=0, limit=25):
        """One line per pods request, for failure messages."""
        out = []
        for r in self.requests(since):
            if r.get("kind") in ("discovery", "other"):
                continue
            out.append(describe(r))
        if len(out) > limit:
            out = ["(%d earlier)" % (len(out) - limit)] + out[-limit:]
        return " | ".join(out) or "none"


def describe(r):
    k = r.get("kind")
    if k == "tls-error":
        return "#%d tls-error %s" % (r["id"], r.get("error", "")[:80])
    p = r.get("params") or {}
    bits = []
    for key in ("resourceVersion", "limit", "continue", "timeoutSeconds"):
        if key in p:
            v = p[key]
            if key == "continue":
                v = v[:6] + ".."
            bits.append("%s=%s" % ({"resourceVersion": "rv"}.get(key, key),
                                   v))
    s = "#%d %s %s" % (r["id"], k, " ".join(bits))
    s += " -> %s" % r.get("status")
    if r.get("outcome") not in (None, "sent"):
        s += " (%s)" % r["outcome"]
    if r.get("list_rv"):
        s += " rv %s" % r["list_rv"]
    return s


def pod_key(p):
    md = p.get("metadata") or {}
    return "%s/%s" % (md.get("namespace", ""), md.get("name", ""))
