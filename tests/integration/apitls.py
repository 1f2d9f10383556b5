#!/usr/bin/env python3
"""apitls — TLS material and kubeconfig files for the API source tests.

Standard library plus the `openssl` command (Python's stdlib cannot make
certificates).  One set of material is generated per test process, in a
temporary directory removed at exit, and copied into each test's folder:

    pki = apitls.material()             # dict of paths (PEM files)
    d = apitls.copy_pki(t.path("pki"))  # the same files in the test's dir

    pki["ca.crt"], pki["server.crt"], pki["server.key"]   # CA, 127.0.0.1
                                                          # + localhost SANs
    pki["client.crt"], pki["client.key"]                  # client cert
                                                          # CN=system:node:...
    pki["other-ca.crt"], pki["other-server.crt"/"-key"]   # an unrelated CA
    pki["named-server.crt"/"-key"]    # DNS:kubernetes.internal only

Keys are EC P-256 (fast to make; libcurl, Go and Python all accept them).

Kubeconfig files are written with write_kubeconfig(path, clusters=...,
users=..., contexts=..., current=...) from plain dicts (YAML by default, or
JSON) so a test can build valid and broken variants alike.
"""

import atexit
import base64
import json
import os
import shutil
import subprocess
import tempfile

import harness

OPENSSL = shutil.which("openssl") or "/usr/bin/openssl"
_CACHE = {}


class NoOpenSSL(Exception):
    pass


def _run(args, cwd):
    try:
        p = subprocess.run([OPENSSL] + args, cwd=cwd, capture_output=True,
                           text=True, timeout=60)
    except FileNotFoundError:
        raise NoOpenSSL("the openssl command is not installed")
    if p.returncode != 0:
        raise AssertionError("openssl %s failed: %s" % (" ".join(args),
                                                        p.stderr[-800:]))


def _key(d, name):
    _run(["genpkey", "-algorithm", "EC", "-pkeyopt",
          "ec_paramgen_curve:P-256", "-out", name], d)


def _ca(d, prefix, cn):
    _key(d, prefix + ".key")
    with open(os.path.join(d, prefix + ".ext"), "w") as f:
        f.write("basicConstraints=critical,CA:TRUE\n"
                "keyUsage=critical,keyCertSign,cRLSign,digitalSignature\n"
                "subjectKeyIdentifier=hash\n")
    _run(["req", "-new", "-key", prefix + ".key", "-subj", "/CN=" + cn,
          "-out", prefix + ".csr"], d)
    _run(["x509", "-req", "-in", prefix + ".csr", "-signkey",
          prefix + ".key", "-days", "3650", "-extfile", prefix + ".ext",
          "-out", prefix + ".crt"], d)


def _leaf(d, prefix, ca, subj, ext):
    _key(d, prefix + ".key")
    with open(os.path.join(d, prefix + ".ext"), "w") as f:
        f.write(ext)
    _run(["req", "-new", "-key", prefix + ".key", "-subj", subj,
          "-out", prefix + ".csr"], d)
    _run(["x509", "-req", "-in", prefix + ".csr", "-CA", ca + ".crt",
          "-CAkey", ca + ".key", "-CAcreateserial", "-days", "3650",
          "-extfile", prefix + ".ext", "-out", prefix + ".crt"], d)


SERVER_EXT = ("basicConstraints=CA:FALSE\n"
              "keyUsage=critical,digitalSignature,keyEncipherment\n"
              "extendedKeyUsage=serverAuth\n"
              "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
# A server known only by a DNS name (kubeconfig's tls-server-name).
NAMED_EXT = ("basicConstraints=CA:FALSE\n"
             "keyUsage=critical,digitalSignature,keyEncipherment\n"
             "extendedKeyUsage=serverAuth\n"
             "subjectAltName=DNS:kubernetes.internal\n")
NAMED_HOST = "kubernetes.internal"
CLIENT_EXT = ("basicConstraints=CA:FALSE\n"
              "keyUsage=critical,digitalSignature,keyEncipherment\n"
              "extendedKeyUsage=clientAuth\n")
CLIENT_CN = "system:node:node1"

FILES = ("ca.crt", "ca.key", "server.crt", "server.key", "client.crt",
         "client.key", "other-ca.crt", "other-server.crt", "other-server.key",
         "other-client.crt", "other-client.key", "named-server.crt",
         "named-server.key")


def material():
    """Generates (once per process) and returns {file name: path}."""
    if _CACHE:
        return dict(_CACHE)
    d = tempfile.mkdtemp(prefix="podmux-pki-")
    atexit.register(shutil.rmtree, d, True)
    _ca(d, "ca", "podmux-test-ca")
    _leaf(d, "server", "ca", "/CN=fake-apiserver", SERVER_EXT)
    _leaf(d, "client", "ca", "/O=system:nodes/CN=" + CLIENT_CN, CLIENT_EXT)
    _leaf(d, "named-server", "ca", "/CN=" + NAMED_HOST, NAMED_EXT)
    _ca(d, "other-ca", "some-other-ca")
    _leaf(d, "other-server", "other-ca", "/CN=impostor", SERVER_EXT)
    _leaf(d, "other-client", "other-ca", "/CN=intruder", CLIENT_EXT)
    for n in FILES:
        os.chmod(os.path.join(d, n), 0o600)
        _CACHE[n] = os.path.join(d, n)
    return dict(_CACHE)


def copy_pki(dest):
    """Copies the material into dest (created); returns {name: path}."""
    src = material()
    os.makedirs(dest, exist_ok=True)
    out = {}
    for n, p in src.items():
        q = os.path.join(dest, n)
        shutil.copyfile(p, q)
        os.chmod(q, 0o600)
        out[n] = q
    return out


def b64file(path):
    with open(path, "rb") as f:
        return base64.b64encode(f.read()).decode()


# ---------------------------------------------------------------------------
# kubeconfig

def to_yaml(obj):
    """The harness's YAML writer (one writer for every fixture)."""
    return harness.to_yaml(obj)


def kubeconfig_obj(clusters, users, contexts, current="test"):
    """clusters/users/contexts: {name: fields}.  current None: no
    current-context key."""
    obj = {"apiVersion": "v1", "kind": "Config", "preferences": {}}
    obj["clusters"] = [{"name": n, "cluster": c} for n, c in clusters.items()]
    obj["users"] = [{"name": n, "user": u} for n, u in users.items()]
    obj["contexts"] = [{"name": n, "context": c}
                       for n, c in contexts.items()]
    if current is not None:
        obj["current-context"] = current
    return obj


def write_kubeconfig(path, clusters, users, contexts, current="test",
                     fmt="yaml"):
    obj = kubeconfig_obj(clusters, users, contexts, current)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        if fmt == "json":
            json.dump(obj, f, indent=2)
        else:
            f.write(to_yaml(obj))
    os.chmod(path, 0o600)
    return path


def simple_kubeconfig(path, server, cluster=None, user=None, fmt="yaml"):
    """One cluster "c", one user "u", one context "test" selecting them."""
    return write_kubeconfig(path, {"c": dict(cluster or {}, server=server)},
                            {"u": dict(user or {})},
                            {"test": {"cluster": "c", "user": "u"}},
                            fmt=fmt)
