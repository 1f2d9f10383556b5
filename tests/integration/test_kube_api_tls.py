#!/usr/bin/env python3
"""The Kubernetes API view over TCP (--kube-api-address, doc/kube-api.md):
always TLS, clients authenticated by a certificate of
--kube-api-client-ca-file (anonymous and other CAs get 401; without the
file, by tokens only), the serving
pair from files or self-signed in --kube-api-cert-dir, and kubectl
unmodified: get pods -A, -o json, get pod NAME -n NS, -l, --field-selector
and get pods -w (add, modify, delete in order).  With an API server
configured (--kubeconfig, the test API server), bearer tokens verified by
TokenReview and Webhook authorization by SubjectAccessReview, failing
closed when the API server is unreachable.  Loopback only."""

import http.client
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import apitls  # noqa: E402
import harness  # noqa: E402
from fakeapi import FakeAPI  # noqa: E402
from harness import T_WAIT, pn, pod_json, test, write_file  # noqa: E402


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def tls_daemon(t, extra=(), own_cert=False, env=None, mode="AlwaysAllow", client_ca=True):
    pki = apitls.copy_pki(t.path("pki"))
    port = free_port()
    args = ["--kube-api-address", "127.0.0.1:%d" % port]
    if client_ca:
        args += ["--kube-api-client-ca-file", pki["ca.crt"]]
    if mode:
        args += ["--kube-api-authorization-mode", mode]
    if own_cert:
        args += ["--kube-api-tls-cert-file", pki["server.crt"],
                 "--kube-api-tls-private-key-file", pki["server.key"]]
        server_ca = pki["ca.crt"]
    else:
        args += ["--kube-api-cert-dir", t.path("certs", "sub")]
        server_ca = t.path("certs", "sub", "podmux-kube-api.crt")
    d = t.daemon(extra=args + list(extra), env=env)

    def listening():
        d.assert_alive()
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False
    harness.wait_for(listening, T_WAIT, "the kube-api address")
    d.port, d.pki, d.server_ca = port, pki, server_ca
    return d


def https_get(d, path, cert=None, token=None):
    ctx = ssl.create_default_context(cafile=d.server_ca)
    if cert:
        ctx.load_cert_chain(d.pki[cert + ".crt"], d.pki[cert + ".key"])
    c = http.client.HTTPSConnection("127.0.0.1", d.port, context=ctx, timeout=T_WAIT)
    try:
        c.request("GET", path, headers={"Authorization": "Bearer " + token} if token else {})
        r = c.getresponse()
        return r.status, json.loads(r.read())
    finally:
        c.close()


def manifest(t, name, **kw):
    write_file(t.path("manifests", name + ".json"), pod_json(name, namespace="default", **kw))


def find_kubectl():
    k = shutil.which("kubectl")
    if k:
        return k
    k = os.path.join(harness.SRCDIR, "build", "test-tools", "usr", "bin", "kubectl")
    return k if os.access(k, os.X_OK) else None


@test("--kube-api-address: TLS; a client certificate of the client CA is served, none or another CA's gets 401")
def test_tls_auth(t):
    d = tls_daemon(t)
    manifest(t, "a")
    harness.wait_for(lambda: https_get(d, "/api/v1/pods", "client")[1].get("items"), T_WAIT, "the pod served")
    status, body = https_get(d, "/api/v1/pods", "client")
    assert [p["metadata"]["name"] for p in body["items"]] == [pn("a")], body
    for cert in (None, "other-client"):
        status, body = https_get(d, "/api/v1/pods", cert)
        assert status == 401 and body["reason"] == "Unauthorized", (cert, status, body)
    # The self-signed pair was made in the cert dir, the key private.
    assert oct(os.stat(t.path("certs", "sub", "podmux-kube-api.key")).st_mode & 0o777) == "0o600"
    # Restarted, the daemon keeps its pair.
    before = open(t.path("certs", "sub", "podmux-kube-api.crt")).read()
    d.stop()
    d2 = tls_daemon_again(t, d)
    assert open(t.path("certs", "sub", "podmux-kube-api.crt")).read() == before
    d2.stop()


@test("a certificate of the client CA with no CN names no user: 401")
def test_cert_without_cn(t):
    d = tls_daemon(t)
    manifest(t, "a")
    harness.wait_for(lambda: https_get(d, "/api/v1/pods", "client")[1].get("items"), T_WAIT, "the pod served")
    apitls._leaf(os.path.dirname(d.pki["ca.crt"]), "noname", "ca", "/O=no-name", apitls.CLIENT_EXT)
    d.pki["noname.crt"] = os.path.join(os.path.dirname(d.pki["ca.crt"]), "noname.crt")
    d.pki["noname.key"] = os.path.join(os.path.dirname(d.pki["ca.crt"]), "noname.key")
    status, body = https_get(d, "/api/v1/pods", "noname")
    assert status == 401 and body["reason"] == "Unauthorized", (status, body)
    assert https_get(d, "/api/v1/pods", "client")[0] == 200


def tls_daemon_again(t, d):
    d.start()

    def serving():
        # The address listens once every module is made, after the
        # stream socket the start waits for.
        try:
            return https_get(d, "/api", "client")[0] == 200
        except OSError:
            return False
    harness.wait_for(serving, T_WAIT, "the address again")
    return d


@test("--kube-api-address with neither a client CA nor an API server, with Webhook authorization and no API "
      "server, or half a pair: refused at start (exit 2)")
def test_tls_flags(t):
    nobody = ("--kube-api-address: nobody could authenticate, and anonymous requests are refused: give "
              "--kube-api-client-ca-file (client certificates), or an API server (--kubeconfig or --in-cluster) "
              "to verify bearer tokens")
    for flags, needle in (
            (["--kube-api-address", "127.0.0.1:1"], nobody),
            (["--kube-api-address", "127.0.0.1:1", "--kube-api-authorization-mode", "AlwaysAllow"], nobody),
            (["--kube-api-address", "127.0.0.1:1", "--kube-api-client-ca-file", "/x"],
             "Webhook (the default) asks the API server, and none is configured"),
            (["--kube-api-address", "127.0.0.1:1", "--kube-api-client-ca-file", "/x",
              "--kube-api-authorization-mode", "AlwaysAllow", "--kube-api-tls-cert-file", "/c"], "go together"),
            (["--kube-api-address", "nope"], "expected HOST:PORT"),
            (["--kube-api-authorization-mode", "Maybe"], "expected AlwaysAllow or Webhook"),
            (["--kube-api-client-ca-file", "/x"], "not given")):
        p = t.run_cmd(["run", "--socket", t.path("s.sock"), "--plugins-registry-dir", ""] + flags)
        assert p.returncode == 2 and needle in p.stderr, (flags, p.returncode, p.stderr)


@test("--kube-api-address whose files cannot be read, or whose cert dir cannot be made: exit 1 naming the file")
def test_tls_start_failures(t):
    pki = apitls.copy_pki(t.path("pki"))
    write_file(t.path("not-a-dir"), "x")
    base = ["run", "--socket", t.path("s.sock"), "--plugins-registry-dir", "", "--kube-api-address",
            "127.0.0.1:%d" % free_port(), "--kube-api-authorization-mode", "AlwaysAllow",
            "--kube-api-cert-dir", t.path("certs")]
    for flags, needle in (
            (["--kube-api-client-ca-file", t.path("nope.crt")], "nope.crt"),
            (["--kube-api-client-ca-file", pki["ca.crt"], "--kube-api-tls-cert-file", t.path("none.crt"),
              "--kube-api-tls-private-key-file", pki["server.key"]], "none.crt"),
            (["--kube-api-client-ca-file", pki["ca.crt"], "--kube-api-cert-dir", t.path("not-a-dir", "pki")],
             "not-a-dir"),
            (["--kube-api-client-ca-file", pki["ca.crt"], "--kube-api-tls-cert-file", pki["ca.key"],
              "--kube-api-tls-private-key-file", pki["server.key"]], "libmicrohttpd could not start")):
        p = t.run_cmd(base + flags)
        assert p.returncode == 1 and needle in p.stderr, (flags, p.returncode, p.stderr[-500:])
        assert not os.path.exists(t.path("s.sock")), "the stream socket was left behind"


@test("kubectl against --kube-api-address: get pods -A, -o json, get pod NAME -n NS, -l, --field-selector, -w")
def test_kubectl(t):
    kubectl = find_kubectl()
    if not kubectl:
        t.skip("no kubectl (scripts/deps-test-tools installs Debian's kubernetes-client)")
    d = tls_daemon(t, own_cert=True)
    manifest(t, "web", labels={"app": "web"})
    manifest(t, "db", labels={"app": "db"})
    harness.wait_for(lambda: len(https_get(d, "/api/v1/pods", "client")[1].get("items", [])) == 2, T_WAIT,
                     "two pods")
    kc = apitls.simple_kubeconfig(
        t.path("kube.yaml"), "https://127.0.0.1:%d" % d.port,
        cluster={"certificate-authority": d.pki["ca.crt"]},
        user={"client-certificate": d.pki["client.crt"], "client-key": d.pki["client.key"]})
    env = dict(os.environ, HOME=t.tmp)
    env.pop("KUBECONFIG", None)

    def run(*args):
        p = subprocess.run([kubectl, "--kubeconfig", kc] + list(args), capture_output=True, text=True,
                           timeout=60, env=env)
        t.note("kubectl %s -> %d: %s %s" % (" ".join(args), p.returncode, p.stdout[-400:], p.stderr[-300:]))
        assert p.returncode == 0, (args, p.stderr)
        return p.stdout
    rows = sorted(tuple(r.split()[:2]) for r in run("get", "pods", "-A").splitlines()[1:])
    assert rows == [("default", pn("db")), ("default", pn("web"))], rows
    lst = json.loads(run("get", "pods", "-A", "-o", "json"))
    assert sorted(p["metadata"]["name"] for p in lst["items"]) == [pn("db"), pn("web")]
    one = json.loads(run("get", "pod", pn("web"), "-n", "default", "-o", "json"))
    assert one["metadata"]["labels"] == {"app": "web"}, one["metadata"]
    assert run("get", "pods", "-A", "-l", "app=web", "-o", "name").split() == ["pod/" + pn("web")]
    assert run("get", "pods", "-A", "--field-selector", "metadata.name=" + pn("db"), "-o", "name").split() == \
        ["pod/" + pn("db")]
    w = subprocess.Popen([kubectl, "--kubeconfig", kc, "get", "pods", "-A", "-w", "--output-watch-events"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    t.procs.append(w)
    events = []

    def saw(n):
        """Waits for n events: (EVENT, NAME) of each line but the header."""
        while len(events) < n:
            line = w.stdout.readline()
            assert line, "kubectl -w ended: %s" % w.stderr.read()
            cols = line.split()
            if cols[0] != "EVENT":
                events.append((cols[0], cols[2]))
        return True
    try:
        saw(2)                                    # the initial state
        manifest(t, "late", uid="uid-late")
        saw(3)
        manifest(t, "late", uid="uid-late", labels={"v": "2"})
        saw(4)
        os.unlink(t.path("manifests", "late.json"))
        saw(5)
    finally:
        w.kill()
        w.wait()
    assert sorted(events[:2]) == [("ADDED", pn("db")), ("ADDED", pn("web"))], events
    assert events[2:] == [("ADDED", pn("late")), ("MODIFIED", pn("late")), ("DELETED", pn("late"))], events


ALICE = {"username": "alice", "uid": "u-1", "groups": ["devs"], "extra": {"team": ["a"]}}
BOB = {"username": "bob", "uid": "u-2", "groups": ["others"]}


def webhook_daemon(t, mode=None, client_ca=True):
    """A daemon on the test API server (plain HTTP), whose tokens are
    alice's (allowed to read pods of default) and bob's (no rule)."""
    srv = FakeAPI(t)
    srv.set_reviews(tokens={"alice-token": ALICE, "bob-token": BOB},
                    access=[{"user": "alice", "namespace": "default", "allowed": True},
                            {"user": apitls.CLIENT_CN, "allowed": True}])
    kc = apitls.simple_kubeconfig(t.path("api.kubeconfig"), srv.url)
    d = tls_daemon(t, extra=["--kubeconfig", kc], mode=mode, client_ca=client_ca)
    manifest(t, "a")
    return srv, d


@test("Webhook: a client certificate's CN and O, and a token's user, go into the SubjectAccessReview; "
      "a bad token gets 401, a refused access 403")
def test_webhook(t):
    srv, d = webhook_daemon(t)
    harness.wait_for(lambda: https_get(d, "/api/v1/pods", "client")[1].get("items"), T_WAIT, "the pod served")
    spec = srv.reviews()["access"][-1]
    assert spec["user"] == apitls.CLIENT_CN, spec
    assert sorted(spec["groups"]) == ["system:authenticated", "system:nodes"], spec
    assert spec["resourceAttributes"] == {"group": "", "version": "v1", "resource": "pods", "verb": "list",
                                          "namespace": ""}, spec
    # alice: her token is reviewed, then her access, with all she is.
    status, body = https_get(d, "/api/v1/namespaces/default/pods/" + pn("a"), token="alice-token")
    assert status == 200 and body["metadata"]["name"] == pn("a"), (status, body)
    spec = srv.reviews()["access"][-1]
    assert spec["user"] == "alice" and spec["uid"] == "u-1" and spec["extra"] == {"team": ["a"]}, spec
    assert sorted(spec["groups"]) == ["devs", "system:authenticated"], spec
    assert spec["resourceAttributes"] == {"group": "", "version": "v1", "resource": "pods", "verb": "get",
                                          "namespace": "default", "name": pn("a")}, spec
    status, body = https_get(d, "/api/v1/namespaces/default/pods?watch=1&timeoutSeconds=1", token="alice-token")
    assert status == 200, (status, body)
    assert srv.reviews()["access"][-1]["resourceAttributes"]["verb"] == "watch"
    # Not at the cluster scope: 403, in the API server's words.
    status, body = https_get(d, "/api/v1/pods", token="alice-token")
    assert status == 403 and body["reason"] == "Forbidden", (status, body)
    assert 'User "alice" cannot list resource "pods"' in body["message"], body
    status, body = https_get(d, "/api/v1/pods", token="bob-token")
    assert status == 403 and body["code"] == 403, (status, body)
    # A token the API server does not know, or none: 401.
    for token in ("nobody-token", None):
        status, body = https_get(d, "/api/v1/pods", token=token)
        assert status == 401 and body["reason"] == "Unauthorized", (token, status, body)
    # Discovery needs authentication only; a write is 405 to whoever asks.
    assert https_get(d, "/api", token="bob-token")[0] == 200
    assert https_get(d, "/api", token="nobody-token")[0] == 401
    ctx = ssl.create_default_context(cafile=d.server_ca)
    c = http.client.HTTPSConnection("127.0.0.1", d.port, context=ctx, timeout=T_WAIT)
    c.request("POST", "/api/v1/namespaces/default/pods", body=b"{}",
              headers={"Authorization": "Bearer alice-token"})
    r = c.getresponse()
    assert r.status == 405 and json.loads(r.read())["reason"] == "MethodNotAllowed", r.status
    # The same connection (and its TLS session) serves the next requests.
    sock = c.sock
    for path in ("/api/v1/namespaces/default/pods", "/version"):
        c.request("GET", path, headers={"Authorization": "Bearer alice-token"})
        r = c.getresponse()
        assert r.status == 200 and not r.will_close, (path, r.status, r.getheader("Connection"))
        r.read()
        assert c.sock is sock, path
    c.close()
    d.assert_alive()


@test("AlwaysAllow with an API server: tokens still by TokenReview, no SubjectAccessReview")
def test_always_allow_tokens(t):
    srv, d = webhook_daemon(t, mode="AlwaysAllow")
    harness.wait_for(lambda: https_get(d, "/api/v1/pods", token="bob-token")[1].get("items"), T_WAIT,
                     "the pod served to bob")
    assert https_get(d, "/api/v1/pods", token="nobody-token")[0] == 401
    counts = srv.reviews()
    assert counts["subjectaccessreviews"] == 0 and counts["tokenreviews"] >= 2, counts


@test("the API server unreachable: cached decisions hold; a new token gets 401, a new access 403")
def test_webhook_unreachable(t):
    srv, d = webhook_daemon(t)
    harness.wait_for(lambda: https_get(d, "/api/v1/namespaces/default/pods", token="alice-token")[0] == 200,
                     T_WAIT, "alice served")
    assert https_get(d, "/api/v1/namespaces/default/pods", cert="client")[0] == 200
    srv.stop()
    # Cached: the token (2 min) and the access (5 min).
    status, body = https_get(d, "/api/v1/namespaces/default/pods", token="alice-token")
    assert status == 200 and body["items"], (status, body)
    # A token never seen: it cannot be verified.
    status, body = https_get(d, "/api/v1/namespaces/default/pods", token="bob-token")
    assert status == 401, (status, body)
    # A known user, an access never asked: it cannot be decided.
    status, body = https_get(d, "/api/v1/namespaces/default/pods/" + pn("a"), token="alice-token")
    assert status == 403 and body["reason"] == "Forbidden", (status, body)
    status, body = https_get(d, "/api/v1/namespaces/kube-system/pods", cert="client")
    assert status == 403, (status, body)
    d.assert_alive()


def conn_inode(local_port, remote_port):
    """The socket inode of the daemon's side of a loopback connection
    (/proc/net/tcp), or None."""
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            cols = line.split()
            if int(cols[1].split(":")[1], 16) == local_port and int(cols[2].split(":")[1], 16) == remote_port:
                return cols[9]
    return None


def holds_socket(pid, inode):
    """Whether process pid still has the socket open (a reset takes the
    connection out of /proc/net/tcp, not out of the process)."""
    fds = "/proc/%d/fd" % pid
    for fd in os.listdir(fds):
        try:
            if os.readlink(os.path.join(fds, fd)) == "socket:[%s]" % inode:
                return True
        except OSError:
            pass
    return False


@test("a client gone while its token is reviewed drops its wait at once; the review goes on")
def test_review_wait_cancelled(t):
    srv, d = webhook_daemon(t)
    harness.wait_for(lambda: https_get(d, "/api/v1/namespaces/default/pods", "client")[0] == 200, T_WAIT,
                     "the pods served")
    srv.review_fault("hang")
    ctx = ssl.create_default_context(cafile=d.server_ca)
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", d.port), timeout=T_WAIT), server_hostname="127.0.0.1")
    cport = s.getsockname()[1]
    s.sendall(b"GET /api/v1/pods HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer alice-token\r\n\r\n")

    def hanging():
        return [r for r in srv.requests(kind="tokenreview") if r.get("fault") == "hang"]
    harness.wait_for(hanging, T_WAIT, "the TokenReview in flight")
    inode = conn_inode(d.port, cport)
    assert inode and holds_socket(d.proc.pid, inode), inode
    s.close()
    harness.wait_for(lambda: not holds_socket(d.proc.pid, inode), T_WAIT, "the connection closed by the daemon")
    # Closed while the review still hangs: the wait was dropped, not answered.
    assert hanging()[0]["outcome"] == "hang", hanging()
    srv.release()
    status, _ = https_get(d, "/api/v1/namespaces/default/pods", token="alice-token")
    assert status == 200, status
    d.assert_alive()


@test("kubectl with a bearer token, Webhook authorization")
def test_kubectl_token(t):
    kubectl = find_kubectl()
    if not kubectl:
        t.skip("no kubectl (scripts/deps-test-tools installs Debian's kubernetes-client)")
    srv, d = webhook_daemon(t)
    harness.wait_for(lambda: https_get(d, "/api/v1/namespaces/default/pods", token="alice-token")[0] == 200,
                     T_WAIT, "alice served")
    kc = apitls.simple_kubeconfig(
        t.path("kube.yaml"), "https://127.0.0.1:%d" % d.port,
        cluster={"certificate-authority": d.server_ca}, user={"token": "alice-token"})
    env = dict(os.environ, HOME=t.tmp)
    env.pop("KUBECONFIG", None)
    p = subprocess.run([kubectl, "--kubeconfig", kc, "get", "pods", "-n", "default", "-o", "name"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0 and p.stdout.split() == ["pod/" + pn("a")], (p.returncode, p.stdout, p.stderr)
    p = subprocess.run([kubectl, "--kubeconfig", kc, "get", "pods", "-A"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode != 0 and "forbidden" in p.stderr.lower(), (p.returncode, p.stderr)


@test("no client CA, an API server: tokens only; kubectl with a token is served, a client certificate "
      "names nobody (401)")
def test_tokens_only(t):
    srv, d = webhook_daemon(t, client_ca=False)
    harness.wait_for(lambda: https_get(d, "/api/v1/namespaces/default/pods", token="alice-token")[0] == 200,
                     T_WAIT, "alice served")
    # The certificate the CA signed (whose user the API server allows)
    # is not asked for, and is no identity: 401, with no review.
    before = srv.reviews()["subjectaccessreviews"]
    for cert in ("client", None):
        status, body = https_get(d, "/api/v1/namespaces/default/pods", cert)
        assert status == 401 and body["reason"] == "Unauthorized", (cert, status, body)
    assert srv.reviews()["subjectaccessreviews"] == before
    assert https_get(d, "/api/v1/namespaces/default/pods", token="bob-token")[0] == 403
    kubectl = find_kubectl()
    if not kubectl:
        t.skip("no kubectl (scripts/deps-test-tools installs Debian's kubernetes-client)")
    kc = apitls.simple_kubeconfig(
        t.path("kube.yaml"), "https://127.0.0.1:%d" % d.port,
        cluster={"certificate-authority": d.server_ca}, user={"token": "alice-token"})
    env = dict(os.environ, HOME=t.tmp)
    env.pop("KUBECONFIG", None)
    p = subprocess.run([kubectl, "--kubeconfig", kc, "get", "pods", "-n", "default", "-o", "name"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0 and p.stdout.split() == ["pod/" + pn("a")], (p.returncode, p.stdout, p.stderr)
    d.assert_alive()


PY_CLIENT = r"""
import json, sys
from kubernetes import client, watch
from kubernetes.client.rest import ApiException
port, ca, crt, key = sys.argv[1:5]
conf = client.Configuration()
conf.host = "https://127.0.0.1:%s" % port
conf.ssl_ca_cert, conf.cert_file, conf.key_file = ca, crt, key
v1 = client.CoreV1Api(client.ApiClient(conf))
def out(*a):
    print(json.dumps(a), flush=True)
lst = v1.list_pod_for_all_namespaces(label_selector="app=web")
out("web", sorted(p.metadata.name for p in lst.items))
lst = v1.list_namespaced_pod("default", field_selector="metadata.name!=nothing")
out("fields", sorted(p.metadata.name for p in lst.items))
names, cont = [], None
while True:
    page = v1.list_pod_for_all_namespaces(limit=1, _continue=cont)
    names += [p.metadata.name for p in page.items]
    cont = page.metadata._continue
    if not cont:
        break
out("paged", names)
rv = page.metadata.resource_version
out("watching", rv)
w = watch.Watch()
seen = []
for ev in w.stream(v1.list_pod_for_all_namespaces, resource_version=rv, allow_watch_bookmarks=True,
                   timeout_seconds=3):
    obj = ev["object"]
    if isinstance(obj, dict):   # an ERROR's Status stays a dict
        seen.append((ev["type"], obj.get("reason")))
    else:
        seen.append((ev["type"], obj.metadata.name))
out("events", seen)
try:
    for ev in watch.Watch().stream(v1.list_pod_for_all_namespaces, resource_version="5", timeout_seconds=3):
        out("unexpected", ev["type"])
except ApiException as e:
    out("expired", e.status)
# What an application does on 410: list again, and watch from that list.
lst = v1.list_pod_for_all_namespaces()
again = []
for ev in watch.Watch().stream(v1.list_pod_for_all_namespaces, resource_version=lst.metadata.resource_version,
                               timeout_seconds=1):
    again.append(ev["type"])
out("relisted", [len(lst.items), again])
"""


@test("python-kubernetes against --kube-api-address: selectors, paging, a watch from the list's version with "
      "bookmarks and a timeout, 410 for a version too old, then a relist watched from")
def test_python_kubernetes(t):
    if subprocess.run(["/usr/bin/python3", "-c", "import kubernetes"], capture_output=True).returncode != 0:
        t.skip("no python3-kubernetes (scripts/deps-test-tools installs it)")
    d = tls_daemon(t, own_cert=True, env={"PODMUX_KUBE_API_BOOKMARK_INTERVAL": "500ms"})
    manifest(t, "web", labels={"app": "web"})
    manifest(t, "db", labels={"app": "db"})
    harness.wait_for(lambda: len(https_get(d, "/api/v1/pods", "client")[1].get("items", [])) == 2, T_WAIT,
                     "two pods")
    p = subprocess.Popen(["/usr/bin/python3", "-c", PY_CLIENT, str(d.port), d.pki["ca.crt"], d.pki["client.crt"],
                          d.pki["client.key"]], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t.procs.append(p)
    got = {}
    try:
        while True:
            line = p.stdout.readline()
            if not line:
                break
            what, value = json.loads(line)
            got[what] = value
            if what == "watching":
                manifest(t, "late", labels={"app": "late"})
        p.wait(timeout=T_WAIT)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, p.stderr.read()
    assert got["web"] == [pn("web")], got
    assert got["fields"] == [pn("db"), pn("web")], got
    assert got["paged"] == [pn("db"), pn("web")], got
    events = [tuple(e) for e in got["events"]]
    assert ("ADDED", pn("late")) in events, events
    assert any(e[0] == "BOOKMARK" for e in events), events
    assert {e[0] for e in events} <= {"ADDED", "BOOKMARK"}, events
    assert got["expired"] == 410, got
    # The relist after the 410 holds the three pods, and its version
    # watches without another 410 (a timeout ends it cleanly).
    assert got["relisted"][0] == 3, got
    assert "ERROR" not in got["relisted"][1], got


if __name__ == "__main__":
    harness.main()
