#!/usr/bin/env python3
"""@kubernetes/client-node against the Kubernetes API view
(doc/kube-api.md): an informer's first list and its add, update and
delete callbacks follow the manifest files written, and when the server
ends a watch (--kube-api-min-request-timeout small) the informer watches
again from its resourceVersion without listing again.  The client is
pinned by tests/node/package-lock.json and installed by
scripts/deps-test-tools into build/test-tools/node; without node or that
install the test is skipped, saying why.  Loopback only."""

import json
import os
import queue
import shutil
import socket
import ssl
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import apitls  # noqa: E402
import harness  # noqa: E402
from harness import T_WAIT, pn, pod_json, test, write_file  # noqa: E402

NODE_DIR = os.path.join(harness.SRCDIR, "build", "test-tools", "node")
PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kube_informer.mjs")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def serving(port, pki):
    """Whether the address lists the pods (200: the sources are in)."""
    ctx = ssl.create_default_context(cafile=pki["ca.crt"])
    ctx.load_cert_chain(pki["client.crt"], pki["client.key"])
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=T_WAIT) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                s.sendall(b"GET /api/v1/pods HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                return s.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


@test("client-node informer: first list, add/update/delete as the files change, re-watch without a list")
def test_informer(t):
    node = shutil.which("node")
    if not node:
        t.skip("no node (Debian's nodejs)")
    if not os.path.isdir(os.path.join(NODE_DIR, "node_modules", "@kubernetes", "client-node")):
        t.skip("no @kubernetes/client-node in %s (scripts/deps-test-tools installs it with npm)" % NODE_DIR)
    pki = apitls.copy_pki(t.path("pki"))
    port = free_port()
    d = t.daemon(extra=["--kube-api-address", "127.0.0.1:%d" % port,
                        "--kube-api-client-ca-file", pki["ca.crt"],
                        "--kube-api-tls-cert-file", pki["server.crt"],
                        "--kube-api-tls-private-key-file", pki["server.key"],
                        "--kube-api-authorization-mode", "AlwaysAllow",
                        "--kube-api-min-request-timeout", "2s"])
    write_file(t.path("manifests", "first.json"), pod_json("first", namespace="default"))
    harness.wait_for(lambda: serving(port, pki), T_WAIT, "the address serving")
    p = subprocess.Popen([node, PROGRAM, NODE_DIR, "https://127.0.0.1:%d" % port, pki["ca.crt"],
                          pki["client.crt"], pki["client.key"]],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t.procs.append(p)
    lines = queue.Queue()

    def pump():
        for line in p.stdout:
            lines.put(json.loads(line))
        lines.put(None)
    threading.Thread(target=pump, daemon=True).start()
    seen = []

    def until(pred, what):
        """Reads the program's lines until pred(seen) holds."""
        while not pred(seen):
            try:
                ev = lines.get(timeout=T_WAIT)
            except queue.Empty:
                raise AssertionError("timed out waiting for %s: %s" % (what, seen))
            assert ev is not None, "the program ended: %s %s" % (seen, p.stderr.read())
            t.note("client-node: %s" % ev)
            seen.append(ev)
        return True

    def changes():
        return [(e["event"], e["name"]) for e in seen if e["event"] in ("add", "update", "delete")]
    until(lambda s: any(e["event"] == "synced" for e in s), "the informer synced")
    assert changes() == [("add", pn("first"))], seen
    write_file(t.path("manifests", "late.json"), pod_json("late", namespace="default", uid="uid-late"))
    until(lambda s: ("add", pn("late")) in changes(), "late added")
    write_file(t.path("manifests", "late.json"),
               pod_json("late", namespace="default", uid="uid-late", labels={"v": "2"}))
    until(lambda s: ("update", pn("late")) in changes(), "late updated")
    os.unlink(t.path("manifests", "late.json"))
    until(lambda s: ("delete", pn("late")) in changes(), "late deleted")
    assert changes() == [("add", pn("first")), ("add", pn("late")), ("update", pn("late")),
                         ("delete", pn("late"))], changes()
    # The server ends each watch after 2 to 4 s: the informer watches
    # again (connect) from its version, and never lists again.
    until(lambda s: sum(e["event"] == "connect" for e in s) >= 3, "two re-watches")
    assert sum(e["event"] == "list" for e in seen) == 1, seen
    assert not [e for e in seen if e["event"] == "error"], seen
    assert changes()[-1] == ("delete", pn("late")), changes()   # nothing replayed
    d.assert_alive()


if __name__ == "__main__":
    harness.main()
