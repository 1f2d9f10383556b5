#!/usr/bin/env python3
"""Integration tests of the observability surface: the Prometheus endpoint
(`podmux run --metrics-address`) and `podmux status`, against the real
binary with every source it can count (file, manifest URL through
manifest_server.py, API server through fakeapi.py, plugins through
scripts/fake-plugin).

Every scrape is checked by a small strict parser of the Prometheus text
format (version 0.0.4): HELP and TYPE before a family's first sample,
well-formed names, labels and values, no duplicate series, families not
interleaved, histogram buckets cumulative and ending with +Inf equal to
_count.

Counters are checked for exact values where the daemon's behaviour fixes
them.  Waits poll with generous bounds; nothing asserts speed.  Negative
checks ("the counter stays at 1") are made after a settle window of a few
source periods or after further polls the server has seen.

Select tests by substring: test_observability.py 'unix socket' api"""

import http.client
import json
import math
import os
import re
import socket
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import apitls  # noqa: E402
import harness  # noqa: E402
from harness import open_for_a_second, expect_true, bare_daemon  # noqa: E402
from fakeapi import FakeAPI  # noqa: E402
from harness import (BIN, IS_ROOT, T_LONG, T_SHORT, T_WAIT,  # noqa: E402
                     ConsumerClosed, pn, pod_yaml, summarize, test,
                     wait_for, write_file)
from manifest_server import ManifestServer  # noqa: E402
from plugin_harness import (FakePlugin, norm, plugin_daemon,  # noqa: E402
                            read_for, wait_plugin)

# The manifest and API servers are local: never through a proxy.
for _k in ("no_proxy", "NO_PROXY"):
    os.environ[_k] = ",".join(x for x in (os.environ.get(_k), "127.0.0.1",
                                          "localhost") if x)

NO_PLUGINS = ["--plugins-registry-dir", ""]
PIN_WEB = "7d1f3c2a-5b6e-4f70-8a91-0b2c3d4e5f60"
ISO_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
SETTLE = 2.5   # a few file relists (--file-check-frequency 1s)


# ===========================================================================
# A strict parser of the Prometheus text exposition format (0.0.4)

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
NAME_RE = re.compile("^%s$" % _NAME)
LABEL_RE = re.compile("^%s$" % _LABEL)
VALUE_RE = re.compile(r"^(?:[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|"
                      r"[+-]?Inf|NaN)$")
TS_RE = re.compile(r"^-?\d+$")
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")


class ExpositionError(AssertionError):
    pass


def _pfloat(s):
    if s in ("+Inf", "Inf"):
        return math.inf
    if s == "-Inf":
        return -math.inf
    if s == "NaN":
        return math.nan
    return float(s)


def _parse_labels(s, i, lineno):
    """Parses {a="b",...} from s[i] == "{"; returns (dict, next index)."""
    labels = {}
    i += 1
    while True:
        while i < len(s) and s[i] in " \t":
            i += 1
        if i < len(s) and s[i] == "}":
            return labels, i + 1
        m = re.compile(_LABEL).match(s, i)
        if not m:
            raise ExpositionError("line %d: bad label name at %r" %
                                  (lineno, s[i:i + 30]))
        name = m.group(0)
        i = m.end()
        while i < len(s) and s[i] in " \t":
            i += 1
        if s[i:i + 2] != '="':
            raise ExpositionError("line %d: label %s not followed by =\"" %
                                  (lineno, name))
        i += 2
        val = []
        while True:
            if i >= len(s):
                raise ExpositionError("line %d: unterminated label value" %
                                      lineno)
            ch = s[i]
            if ch == "\\":
                nxt = s[i + 1:i + 2]
                if nxt not in ("\\", '"', "n"):
                    raise ExpositionError("line %d: bad escape \\%s in "
                                          "label %s" % (lineno, nxt, name))
                val.append("\n" if nxt == "n" else nxt)
                i += 2
            elif ch == '"':
                i += 1
                break
            else:
                val.append(ch)
                i += 1
        if name in labels:
            raise ExpositionError("line %d: label %s given twice" %
                                  (lineno, name))
        if name.startswith("__"):
            raise ExpositionError("line %d: reserved label name %s" %
                                  (lineno, name))
        labels[name] = "".join(val)
        while i < len(s) and s[i] in " \t":
            i += 1
        if i < len(s) and s[i] == ",":
            i += 1
            continue
        if i < len(s) and s[i] == "}":
            return labels, i + 1
        raise ExpositionError("line %d: expected , or } after label %s" %
                              (lineno, name))


class Exposition:
    """A parsed and validated scrape.  families: name -> {"help", "type",
    "samples": [(sample name, labels, value)]}."""

    def __init__(self, text):
        self.text = text
        self.families = {}
        self._parse(text)
        self._check_histograms()

    def _family_of(self, name):
        if name in self.families:
            return name
        for suffix in ("_bucket", "_sum", "_count"):
            if name.endswith(suffix):
                base = name[:-len(suffix)]
                f = self.families.get(base)
                if f and f["type"] in ("histogram", "summary") and not (
                        suffix == "_bucket" and f["type"] == "summary"):
                    return base
        return None

    def _parse(self, text):
        if text and not text.endswith("\n"):
            raise ExpositionError("the exposition does not end with a "
                                  "newline")
        seen_series = set()
        current = None      # family whose samples are being read
        closed = set()      # families whose sample block has ended
        for lineno, line in enumerate(text.split("\n")[:-1], 1):
            if line.strip() == "":
                continue
            if line.startswith("#"):
                parts = line.split(None, 3)
                if len(parts) >= 2 and parts[1] in ("HELP", "TYPE"):
                    if len(parts) < 3:
                        raise ExpositionError("line %d: %s without a metric "
                                              "name" % (lineno, parts[1]))
                    name = parts[2]
                    if not NAME_RE.match(name):
                        raise ExpositionError("line %d: bad metric name %r" %
                                              (lineno, name))
                    f = self.families.setdefault(
                        name, {"help": None, "type": None, "samples": []})
                    if f["samples"]:
                        raise ExpositionError("line %d: %s for %s after its "
                                              "samples" % (lineno, parts[1],
                                                           name))
                    if parts[1] == "HELP":
                        if f["help"] is not None:
                            raise ExpositionError("line %d: second HELP for "
                                                  "%s" % (lineno, name))
                        doc = parts[3] if len(parts) > 3 else ""
                        if re.search(r"\\(?![\\n])", doc):
                            raise ExpositionError("line %d: bad escape in "
                                                  "HELP of %s" % (lineno,
                                                                  name))
                        f["help"] = doc
                    else:
                        if f["type"] is not None:
                            raise ExpositionError("line %d: second TYPE for "
                                                  "%s" % (lineno, name))
                        typ = parts[3].strip() if len(parts) > 3 else ""
                        if typ not in TYPES:
                            raise ExpositionError("line %d: unknown TYPE %r "
                                                  "for %s" % (lineno, typ,
                                                              name))
                        f["type"] = typ
                continue
            m = re.compile(_NAME).match(line)
            if not m:
                raise ExpositionError("line %d: no metric name: %r" %
                                      (lineno, line[:80]))
            name = m.group(0)
            i = m.end()
            labels = {}
            if i < len(line) and line[i] == "{":
                labels, i = _parse_labels(line, i, lineno)
            rest = line[i:]
            if not rest or rest[0] not in " \t":
                raise ExpositionError("line %d: no space before the value: "
                                      "%r" % (lineno, line[:80]))
            fields = rest.split()
            if len(fields) not in (1, 2) or not VALUE_RE.match(fields[0]) or \
                    (len(fields) == 2 and not TS_RE.match(fields[1])):
                raise ExpositionError("line %d: bad value or timestamp: %r" %
                                      (lineno, line[:120]))
            value = _pfloat(fields[0])
            fam = self._family_of(name)
            if fam is None:
                raise ExpositionError("line %d: sample %s has no HELP/TYPE "
                                      "before it" % (lineno, name))
            f = self.families[fam]
            if f["help"] is None or f["type"] is None:
                raise ExpositionError("line %d: family %s lacks %s before "
                                      "its first sample" % (
                                          lineno, fam, "HELP" if f["help"]
                                          is None else "TYPE"))
            if fam != current:
                if fam in closed:
                    raise ExpositionError("line %d: samples of %s are not "
                                          "contiguous" % (lineno, fam))
                if current is not None:
                    closed.add(current)
                current = fam
            key = (name, tuple(sorted(labels.items())))
            if key in seen_series:
                raise ExpositionError("line %d: duplicate series %s%s" %
                                      (lineno, name, labels))
            seen_series.add(key)
            if f["type"] == "counter":
                if math.isnan(value) or value < 0:
                    raise ExpositionError("line %d: counter %s is %s" %
                                          (lineno, name, fields[0]))
            if f["type"] == "histogram":
                if name == fam:
                    raise ExpositionError("line %d: histogram sample %s "
                                          "without _bucket/_sum/_count" %
                                          (lineno, name))
                if (name.endswith("_bucket")) != ("le" in labels):
                    raise ExpositionError("line %d: le label on %s" %
                                          (lineno, name) if "le" in labels
                                          else "line %d: bucket without le" %
                                          lineno)
                if "le" in labels and not VALUE_RE.match(labels["le"]):
                    raise ExpositionError("line %d: le=%r is not a float" %
                                          (lineno, labels["le"]))
            f["samples"].append((name, labels, value))

    def _check_histograms(self):
        for fam, f in self.families.items():
            if f["type"] != "histogram":
                continue
            groups = {}
            for name, labels, value in f["samples"]:
                rest = tuple(sorted((k, v) for k, v in labels.items()
                                    if k != "le"))
                g = groups.setdefault(rest, {"buckets": [], "sum": None,
                                             "count": None})
                if name == fam + "_bucket":
                    g["buckets"].append((_pfloat(labels["le"]), value))
                elif name == fam + "_sum":
                    g["sum"] = value
                else:
                    g["count"] = value
            if not groups:
                raise ExpositionError("histogram %s has no samples" % fam)
            for rest, g in groups.items():
                b = g["buckets"]
                if not b:
                    raise ExpositionError("histogram %s%s has no buckets" %
                                          (fam, dict(rest)))
                for (le0, c0), (le1, c1) in zip(b, b[1:]):
                    if not le1 > le0:
                        raise ExpositionError("histogram %s: le %s after %s "
                                              "(not increasing)" %
                                              (fam, le1, le0))
                    if c1 < c0:
                        raise ExpositionError("histogram %s: bucket le=%s "
                                              "has %s < %s of le=%s (not "
                                              "cumulative)" % (fam, le1, c1,
                                                               c0, le0))
                if b[-1][0] != math.inf:
                    raise ExpositionError("histogram %s: the last bucket is "
                                          "le=%s, not +Inf" % (fam, b[-1][0]))
                if g["count"] is None or g["sum"] is None:
                    raise ExpositionError("histogram %s: _count or _sum "
                                          "missing" % fam)
                if g["count"] != b[-1][1]:
                    raise ExpositionError("histogram %s: _count %s != +Inf "
                                          "bucket %s" % (fam, g["count"],
                                                         b[-1][1]))
                if any(c != int(c) for _, c in b):
                    raise ExpositionError("histogram %s: a bucket count is "
                                          "not an integer" % fam)

    # -- lookups --------------------------------------------------------------
    def series(self, name):
        """[(labels, value)] of samples named name."""
        fam = self._family_of(name)
        if fam is None:
            return []
        return [(lb, v) for n, lb, v in self.families[fam]["samples"]
                if n == name]

    def get(self, name, **labels):
        """The value of the sample with exactly these labels, or None."""
        for lb, v in self.series(name):
            if lb == labels:
                return v
        return None

    def need(self, name, **labels):
        v = self.get(name, **labels)
        if v is None:
            raise AssertionError("no sample %s%s in the scrape; %s: %s" % (
                name, labels, name, self.series(name)))
        return v

    def type_of(self, name):
        f = self.families.get(name)
        return f and f["type"]

    def by_label(self, name, *keys):
        """{tuple(label values for keys): value} of samples named name."""
        return {tuple(lb.get(k) for k in keys): v
                for lb, v in self.series(name)}


def selftest_parser():
    """The parser rejects what it must (run once, cheaply, by test 1)."""
    good = ("# HELP a_total x\n# TYPE a_total counter\na_total{k=\"v\"} 1\n"
            "# HELP h y\n# TYPE h histogram\nh_bucket{le=\"0.1\"} 1\n"
            "h_bucket{le=\"+Inf\"} 2\nh_sum 0.3\nh_count 2\n")
    Exposition(good)
    bad = {
        "sample before HELP": "a 1\n",
        "no TYPE": "# HELP a x\na 1\n",
        "bad label": "# HELP a x\n# TYPE a gauge\na{1k=\"v\"} 1\n",
        "duplicate": "# HELP a x\n# TYPE a gauge\na 1\na 2\n",
        "no final newline": "# HELP a x\n# TYPE a gauge\na 1",
        "not cumulative": good.replace("h_bucket{le=\"+Inf\"} 2",
                                       "h_bucket{le=\"+Inf\"} 0"),
        "no +Inf": "# HELP h y\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\n"
                   "h_sum 1\nh_count 1\n",
        "count != +Inf": good.replace("h_count 2", "h_count 3"),
        "interleaved": "# HELP a x\n# TYPE a gauge\n# HELP b x\n# TYPE b "
                       "gauge\na{x=\"1\"} 1\nb 1\na{x=\"2\"} 1\n",
        "bad value": "# HELP a x\n# TYPE a gauge\na one\n",
    }
    for why, text in bad.items():
        try:
            Exposition(text)
        except ExpositionError:
            continue
        raise AssertionError("the test's exposition parser accepted a bad "
                             "exposition (%s)" % why)


# ===========================================================================
# Scraping

class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self._path)
        self.sock = s


class Scraper:
    """GET /metrics (and other requests) on a unix socket or a TCP port."""

    def __init__(self, unix=None, host=None, port=None):
        self.unix, self.host, self.port = unix, host, port
        self.last = None

    def where(self):
        return "unix:%s" % self.unix if self.unix else "%s:%s" % (self.host,
                                                                  self.port)

    def request(self, method="GET", path="/metrics", body=None,
                headers=None):
        """(status, {lower-case header: value}, body bytes)."""
        if self.unix:
            conn = _UnixHTTPConnection(self.unix, T_SHORT)
        else:
            conn = http.client.HTTPConnection(self.host, self.port,
                                              timeout=T_SHORT)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            data = r.read()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, data
        except OSError as e:
            raise AssertionError("%s %s on %s failed: %s" % (
                method, path, self.where(), e))
        finally:
            conn.close()

    def metrics(self):
        status, hdrs, body = self.request()
        if status != 200:
            raise AssertionError("GET /metrics on %s: HTTP %d %r" % (
                self.where(), status, body[:200]))
        ctype = hdrs.get("content-type", "")
        if not ctype.startswith("text/plain") or "version=0.0.4" not in ctype:
            raise AssertionError("GET /metrics: Content-Type %r, want "
                                 "text/plain; version=0.0.4" % ctype)
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as e:
            raise AssertionError("the exposition is not UTF-8: %s" % e)
        self.last = Exposition(text)
        return self.last


def wait_metrics(s, pred, what, timeout=None, names=()):
    """Scrapes until pred(exposition) holds; returns the exposition.  On
    timeout the diagnostic shows the samples of names."""
    box = [None]

    def ok():
        box[0] = s.metrics()
        return box[0] if pred(box[0]) else None
    try:
        return wait_for(ok, timeout or T_WAIT, what, interval=0.1)
    except AssertionError as e:
        if box[0] is None or "timed out" not in str(e):
            raise
        shown = ["%s%s=%s" % (n, lb, v) for n in names
                 for lb, v in box[0].series(n)]
        raise AssertionError("%s; last scrape: %s" % (e, "; ".join(shown)
                                                       or "(see below)"))


def wait_socket_file(path, d, timeout=None):
    """Until the daemon listens on path (a stale file there, or one it has
    bound but not yet given its mode and group, is not enough)."""
    harness.wait_listening(path, d.assert_alive, timeout)


def metrics_port(d):
    """The port of `metrics on 127.0.0.1:NNNNN (GET /metrics)`."""
    pat = re.compile(r"^metrics on (127\.0\.0\.1|\[::1\]):(\d+) "
                     r"\(GET /metrics\)$")
    line = d.wait_log(lambda x: pat.match(x.msg.strip()),
                      "metrics on 127.0.0.1:PORT (GET /metrics)")
    m = pat.match(line.msg.strip())
    return m.group(1), int(m.group(2))


def expect_eq(got, want, what):
    if got != want:
        raise AssertionError("%s: %r, want %r" % (what, got, want))


# ===========================================================================
# podmux status

def run_status(t, sock, *args, as_user=None):
    argv = ["status", "--socket", sock] + list(args)
    if as_user is None:
        return t.run_cmd(argv)
    cmd = ["setpriv", "--reuid", str(as_user), "--regid", str(as_user),
           "--clear-groups", BIN] + argv
    try:
        return subprocess.run(cmd, capture_output=True, text=True,
                              timeout=T_WAIT, errors="replace")
    except subprocess.TimeoutExpired:
        raise AssertionError("%s did not finish" % " ".join(cmd))


def status_json(t, sock):
    r = run_status(t, sock, "-o", "json")
    if r.returncode != 0:
        raise AssertionError("podmux status -o json: exit %d, stderr %r" %
                             (r.returncode, r.stderr[-500:]))
    lines = [x for x in r.stdout.splitlines() if x.strip()]
    if len(lines) != 1:
        raise AssertionError("podmux status -o json printed %d lines, want "
                             "1: %r" % (len(lines), r.stdout[:500]))
    try:
        st = json.loads(lines[0])
    except ValueError as e:
        raise AssertionError("podmux status -o json: not JSON (%s): %r" %
                             (e, lines[0][:300]))
    if st.get("type") != "status":
        raise AssertionError("not a status message: %r" % lines[0][:300])
    for key in ("sources", "consumers", "plugins"):
        if not isinstance(st.get(key), list):
            raise AssertionError("status without a %s list: %r" %
                                 (key, lines[0][:300]))
    return st


def status_text(t, sock):
    r = run_status(t, sock)
    if r.returncode != 0:
        raise AssertionError("podmux status: exit %d, stderr %r" %
                             (r.returncode, r.stderr[-500:]))
    return r.stdout


def source_of(st, name):
    got = [s for s in st["sources"] if s.get("name") == name]
    if len(got) != 1:
        raise AssertionError("status lists source %r %d times: %s" % (
            name, len(got), json.dumps(st["sources"])[:500]))
    return got[0]


def text_source_block(text, name):
    """The two lines of source `name` in the SOURCES table of the text
    output."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.split()[:1] == [name] and i + 1 < len(lines) and \
                "parse errors" in lines[i + 1]:
            return line + "\n" + lines[i + 1]
    raise AssertionError("no row for source %s in podmux status: %r" %
                         (name, text[:1500]))


# ===========================================================================
# Processes and sockets

def tcp_listeners(pid):
    """The listening TCP sockets (IPv4 and IPv6) whose descriptors process
    pid holds: [(local address hex, port)]."""
    inodes = set()
    fd_dir = "/proc/%d/fd" % pid
    for fd in os.listdir(fd_dir):
        try:
            link = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    out = []
    for table in ("tcp", "tcp6"):
        try:
            with open("/proc/%d/net/%s" % (pid, table)) as f:
                rows = f.read().splitlines()[1:]
        except FileNotFoundError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) < 10:
                continue
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and inode in inodes:   # TCP_LISTEN
                addr, port = local.split(":")
                out.append((addr, int(port, 16)))
    return out


def started(t, files, extra=(), **kw):
    """A daemon on a manifest dir holding files (name -> text), and a
    consumer that has its initial state and sources_ready."""
    m = t.mkdir("manifests")
    for name, text in files.items():
        write_file(os.path.join(m, name), text)
    d = t.daemon(m, extra=list(extra) + NO_PLUGINS, **kw)
    c = d.connect()
    c.read_initial()
    c.expect_type("sources_ready")
    return m, d, c


def with_servers(fn):
    """Stops the manifest servers a test made (t.mserver())."""
    def wrapped(t):
        servers = []

        def mserver():
            s = ManifestServer()
            servers.append(s)
            return s
        t.mserver = mserver
        try:
            fn(t)
        finally:
            for s in servers:
                s.stop()
    wrapped.__name__ = fn.__name__
    return wrapped


# ===========================================================================
# 1. unix socket, exact file counters, status last_error

@test("metrics on a unix socket: the socket is 0660 by default and follows "
      "--socket-mode/--socket-group; 2 good + 1 bad manifest give exactly "
      "updates{ADD,file}=1 carrying 2 pods, parse_errors{file}=1, "
      "source_pods{file}=2; an edit adds updates{UPDATE,file}=1; the bad "
      "file's error is the file source's last_error in `podmux status` "
      "(text and -o json); fixing it keeps the counters; every scrape is "
      "valid Prometheus text")
def test_metrics_unix_socket_socket_0660_default(t):
    selftest_parser()
    t0 = time.time()
    bad_text = "apiVersion: v1\nkind: Pod\nmetadata: {name: [\n"
    msock = t.path("metrics.sock")
    m, d, c = started(t, {"web.yaml": pod_yaml("web", uid=PIN_WEB),
                          "db.yaml": pod_yaml("db"),
                          "bad.yaml": bad_text},
                      extra=["--metrics-address", "unix:" + msock])
    bad = os.path.join(m, "bad.yaml")
    wait_socket_file(msock, d)
    mode = stat.S_IMODE(os.stat(msock).st_mode)
    t.soft(expect_eq, oct(mode), oct(0o660), "metrics socket mode")
    err_line = d.wait_file_error(bad)
    s = Scraper(unix=msock)
    names = ("podmux_updates_total", "podmux_update_pods_total",
             "podmux_parse_errors_total", "podmux_source_pods")
    e = wait_metrics(s, lambda e: e.get("podmux_parse_errors_total",
                                        source="file") == 1 and
                     e.get("podmux_updates_total", op="ADD",
                           source="file") == 1,
                     "parse_errors{file}=1 and updates{ADD,file}=1",
                     names=names)

    def exact_start(e):
        expect_eq(e.by_label("podmux_updates_total", "op", "source"),
                  {("ADD", "file"): 1}, "podmux_updates_total")
        expect_eq(e.by_label("podmux_update_pods_total", "op", "source"),
                  {("ADD", "file"): 2}, "podmux_update_pods_total")
        expect_eq(e.by_label("podmux_source_pods", "source"),
                  {("file",): 2}, "podmux_source_pods")
        expect_eq(e.by_label("podmux_parse_errors_total", "source"),
                  {("file",): 1}, "podmux_parse_errors_total")
        expect_eq(e.by_label("podmux_source_errors_total", "source"),
                  {("file",): 1}, "podmux_source_errors_total")
        expect_eq(e.need("podmux_consumers"), 1, "podmux_consumers")
        expect_eq(e.need("podmux_consumers_dropped_total"), 0,
                  "podmux_consumers_dropped_total")
        expect_eq(e.need("podmux_plugins_registered"), 0,
                  "podmux_plugins_registered")
        for n in ("podmux_api_relists_total",
                  "podmux_api_watch_restarts_total"):
            expect_true(not e.series(n), "%s without an API source: %s" %
                        (n, e.series(n)))
        types = {"podmux_updates_total": "counter",
                 "podmux_update_pods_total": "counter",
                 "podmux_source_pods": "gauge",
                 "podmux_source_errors_total": "counter",
                 "podmux_parse_errors_total": "counter",
                 "podmux_source_last_success_timestamp_seconds": "gauge",
                 "podmux_consumers": "gauge",
                 "podmux_consumers_dropped_total": "counter",
                 "podmux_plugins_registered": "gauge",
                 "podmux_plugin_registrations_total": "counter",
                 "podmux_plugin_deregistrations_total": "counter",
                 "podmux_plugin_registration_failures_total": "counter",
                 "podmux_merge_duration_seconds": "histogram",
                 "podmux_stream_last_seq": "gauge"}
        for n, ty in types.items():
            expect_eq(e.type_of(n), ty, "TYPE of %s" % n)
        last = e.need("podmux_source_last_success_timestamp_seconds",
                      source="file")
        expect_true(t0 - 1 <= last <= time.time() + 1,
                    "last_success{file} %s is not between the test's start "
                    "%.0f and now" % (last, t0))
        expect_true(e.need("podmux_merge_duration_seconds_count") >= 1,
                    "no merge observed")
        expect_true(e.need("podmux_stream_last_seq") >= c.last_seq,
                    "podmux_stream_last_seq %s < the last seq a consumer "
                    "got %s" % (e.need("podmux_stream_last_seq"),
                                c.last_seq))
    t.soft(exact_start, e)

    # The bad file stays bad over several relists: counted once.
    read_for(c, SETTLE)
    e = s.metrics()
    t.soft(expect_eq, e.get("podmux_parse_errors_total", source="file"), 1,
           "parse_errors{file} after a few relists of the same bad file")
    t.soft(expect_eq, e.by_label("podmux_updates_total", "op", "source"),
           {("ADD", "file"): 1}, "updates after relists with no change")

    # status: the bad file's error is the file source's last error.
    st = status_json(t, d.sock)
    src = source_of(st, "file")
    le = src.get("last_error")
    if not isinstance(le, dict) or not le.get("message"):
        raise AssertionError("file source has no last_error in status: %s"
                             % json.dumps(src))
    t.soft(expect_eq, le["message"], err_line.msg.strip(),
           "status last_error.message vs the logged error")
    t.soft(expect_true, bad in le["message"],
           "last_error %r does not name %s" % (le["message"], bad))
    t.soft(expect_true, ISO_RE.match(str(le.get("time"))),
           "last_error.time %r" % le.get("time"))
    t.soft(expect_eq, (src.get("pods"), src.get("errors"),
                       src.get("parse_errors")), (2, 1, 1),
           "status file (pods, errors, parse_errors)")
    t.soft(expect_true, ISO_RE.match(str(src.get("last_success"))),
           "last_success %r" % src.get("last_success"))
    t.soft(expect_eq, st.get("metrics_address"), "unix:" + msock,
           "status metrics_address")
    t.soft(expect_eq, [x.get("pid") for x in st["consumers"]],
           [os.getpid()], "status consumers' pids")
    text = status_text(t, d.sock)
    block = text_source_block(text, "file")
    t.soft(expect_true, le["message"] in block,
           "podmux status (text) does not show the last error %r: %r" %
           (le["message"], block))
    t.soft(expect_true, "errors 1, parse errors 1" in block,
           "podmux status (text): %r" % block)
    t.soft(expect_true, "unix:" + msock in text,
           "podmux status (text) does not show the metrics address")

    # On the wire: hello, one status message, then the server closes.
    raw = d.connect(first_line='{"request":"status"}')
    m1 = raw.recv(T_SHORT)
    t.soft(expect_eq, (m1.get("type"), m1.get("protocol")), ("status", 1),
           "the message after hello")
    try:
        extra_msg = raw.recv(T_SHORT)
        t.soft_failures.append("a message after the status: %s" %
                               summarize(extra_msg))
    except ConsumerClosed:
        pass

    # An edit of a pinned-uid pod: UPDATE.
    write_file(os.path.join(m, "web.yaml"),
               pod_yaml("web", uid=PIN_WEB, labels={"v": "2"}))
    c.expect_pods("UPDATE", names=[pn("web")])
    e = wait_metrics(s, lambda e: e.get("podmux_updates_total", op="UPDATE",
                                        source="file") == 1,
                     "updates{UPDATE,file}=1", names=names)
    t.soft(expect_eq, e.by_label("podmux_updates_total", "op", "source"),
           {("ADD", "file"): 1, ("UPDATE", "file"): 1},
           "podmux_updates_total after an edit")
    t.soft(expect_eq, e.by_label("podmux_update_pods_total", "op", "source"),
           {("ADD", "file"): 2, ("UPDATE", "file"): 1},
           "podmux_update_pods_total after an edit")
    t.soft(expect_eq, e.get("podmux_source_pods", source="file"), 2,
           "source_pods{file} after an edit")

    # Fixing the bad file: a third pod; the error counters stay.
    write_file(bad, pod_yaml("fixed"))
    c.wait_until_state([pn("db"), pn("fixed"), pn("web")])
    e = wait_metrics(s, lambda e: e.get("podmux_source_pods",
                                        source="file") == 3,
                     "source_pods{file}=3", names=names)
    t.soft(expect_eq, e.get("podmux_parse_errors_total", source="file"), 1,
           "parse_errors{file} after the fix")
    t.soft(expect_eq, e.get("podmux_source_errors_total", source="file"), 1,
           "source_errors{file} after the fix")
    t.soft(expect_eq, e.by_label("podmux_updates_total", "op", "source"),
           {("ADD", "file"): 2, ("UPDATE", "file"): 1},
           "podmux_updates_total after the fix")
    t.soft(expect_eq, e.by_label("podmux_update_pods_total", "op", "source"),
           {("ADD", "file"): 3, ("UPDATE", "file"): 1},
           "podmux_update_pods_total after the fix")
    st = status_json(t, d.sock)
    src = source_of(st, "file")
    t.soft(expect_eq, (src.get("pods"), src.get("errors"),
                       src.get("parse_errors")), (3, 1, 1),
           "status file (pods, errors, parse_errors) after the fix")
    if isinstance(src.get("last_error"), dict):
        t.soft(expect_true, str(src.get("last_success")) >=
               str(src["last_error"].get("time")),
               "after the fix last_success %r is older than last_error %r"
               % (src.get("last_success"), src["last_error"].get("time")))

    # --socket-mode and --socket-group apply to the metrics socket too
    # (here given as a plain path, without "unix:").
    d.stop()
    t.soft(expect_true, not os.path.exists(msock),
           "the metrics socket %s is left after shutdown" % msock)
    msock2 = t.path("metrics2.sock")
    # A stale socket file (nobody listens) is replaced, as for the stream.
    sk = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sk.bind(msock2)
    sk.close()
    extra = ["--socket-mode", "0640", "--metrics-address", msock2]
    if IS_ROOT:
        extra += ["--socket-group", "65534"]
    d2 = t.daemon(m, socket_path=t.path("b.sock"), extra=extra + NO_PLUGINS)
    wait_socket_file(msock2, d2)
    st2 = os.stat(msock2)
    t.soft(expect_eq, oct(stat.S_IMODE(st2.st_mode)), oct(0o640),
           "metrics socket mode with --socket-mode 0640")
    if IS_ROOT:
        t.soft(expect_eq, st2.st_gid, 65534,
               "metrics socket group with --socket-group 65534")
    Scraper(unix=msock2).metrics()


# ===========================================================================
# 2. TCP loopback, 404/405, refused addresses, no TCP unless asked

@test("metrics on 127.0.0.1:0: the logged port serves GET and HEAD "
      "/metrics, 404 for /other, 405 for POST; non-loopback addresses and "
      "a relative unix path are refused with exit 2 naming the flag; "
      "without --metrics-address the daemon listens on no TCP socket")
def test_metrics_127_0_0_1_0(t):
    m, d, c = started(t, {"web.yaml": pod_yaml("web")},
                      extra=["--metrics-address", "127.0.0.1:0"])
    host, port = metrics_port(d)
    t.soft(expect_true, port > 0, "port 0 was logged")
    s = Scraper(host="127.0.0.1", port=port)
    e = wait_metrics(s, lambda e: e.get("podmux_updates_total", op="ADD",
                                        source="file") == 1,
                     "updates{ADD,file}=1")
    t.soft(expect_eq, e.get("podmux_source_pods", source="file"), 1,
           "source_pods{file}")
    status, hdrs, body = s.request("HEAD")
    t.soft(expect_eq, (status, body), (200, b""), "HEAD /metrics")
    for path in ("/other", "/", "/metrics/x", "/metricsx"):
        status, _, body = s.request("GET", path)
        t.soft(expect_eq, status, 404, "GET %s" % path)
    for method in ("POST", "PUT", "DELETE"):
        status, _, body = s.request(method, "/metrics", body=b"")
        t.soft(expect_eq, status, 405, "%s /metrics" % method)
    status, _, _ = s.request("POST", "/metrics", body=b"x=1",
                             headers={"Content-Type":
                                      "application/x-www-form-urlencoded"})
    t.soft(expect_eq, status, 405, "POST /metrics with a body")
    s.metrics()   # still serving after the refused requests
    st = status_json(t, d.sock)
    t.soft(expect_eq, st.get("metrics_address"), "127.0.0.1:%d" % port,
           "status metrics_address")
    listening = tcp_listeners(d.pid)
    t.soft(expect_eq, [p for _, p in listening], [port],
           "the daemon's listening TCP ports with --metrics-address "
           "127.0.0.1:0")

    # Refused at flag parsing.
    for addr, words in (("0.0.0.0:9100", ("loopback",)),
                        ("10.0.0.1:1", ("loopback",)),
                        ("[::]:9100", ("loopback",)),
                        (":9100", ("loopback", "host")),
                        ("unix:relative", ("absolute",)),
                        ("unix:relative/m.sock", ("absolute",)),
                        ("127.0.0.1:99999", ("port",)),
                        ("", ("empty",))):
        r = t.run_cmd(["run", "--socket", t.path("x.sock"), "--node-name",
                       "n", "--metrics-address", addr] + NO_PLUGINS,
                      timeout=T_SHORT)

        def refused(r=r, addr=addr, words=words):
            if r.returncode != 2:
                raise AssertionError("--metrics-address %r: exit %d, want 2; "
                                     "stderr %r" % (addr, r.returncode,
                                                    r.stderr[-300:]))
            if "--metrics-address" not in r.stderr:
                raise AssertionError("--metrics-address %r: the message does "
                                     "not name the flag: %r" %
                                     (addr, r.stderr[-300:]))
            if not any(w in r.stderr.lower() for w in words):
                raise AssertionError("--metrics-address %r: the message says "
                                     "none of %s: %r" % (addr, words,
                                                         r.stderr[-300:]))
        t.soft(refused)
    t.soft(expect_true, not os.path.exists(t.path("x.sock")),
           "a refused run created its stream socket")

    # Valid addresses that cannot be used: exit 1 naming the address,
    # nothing left behind, what was there untouched.
    taken = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    regular = t.path("not-a-socket")
    write_file(regular, "keep me\n")
    try:
        for addr in ("127.0.0.1:%d" % taken.getsockname()[1],
                     "unix:" + regular):
            r = t.run_cmd(["run", "--socket", t.path("y.sock"), "--node-name",
                           "n", "--metrics-address", addr] + NO_PLUGINS,
                          timeout=T_SHORT)

            def fails(r=r, addr=addr):
                if r.returncode != 1:
                    raise AssertionError("--metrics-address %s (unusable): "
                                         "exit %d, want 1; stderr %r" % (
                                             addr, r.returncode,
                                             r.stderr[-300:]))
                if addr.split("unix:")[-1] not in r.stderr:
                    raise AssertionError("--metrics-address %s: the error "
                                         "does not name it: %r" %
                                         (addr, r.stderr[-300:]))
                if os.path.exists(t.path("y.sock")):
                    raise AssertionError("--metrics-address %s: the stream "
                                         "socket was left behind" % addr)
            t.soft(fails)
    finally:
        taken.close()
    with open(regular) as f:
        t.soft(expect_eq, f.read(), "keep me\n",
               "a regular file given as the metrics socket")

    # Without the flag: no TCP listener at all.
    d.stop()
    d2 = t.daemon(m, socket_path=t.path("plain.sock"), extra=NO_PLUGINS)
    c2 = d2.connect()
    c2.read_initial()
    c2.expect_type("sources_ready")
    listening = tcp_listeners(d2.pid)
    if listening:
        raise AssertionError("without --metrics-address podmux (pid %d) "
                             "listens on TCP: %s" % (d2.pid, listening))
    st = status_json(t, d2.sock)
    t.soft(expect_eq, st.get("metrics_address"), None,
           "status metrics_address without the flag")
    t.soft(expect_true, "metrics: off" in status_text(t, d2.sock),
           "podmux status (text) does not say metrics: off")


@test("metrics on [::1]:0 (IPv6 loopback) when the host has it")
def test_metrics_1_0_ipv6_loopback_host(t):
    try:
        probe = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        probe.bind(("::1", 0))
        probe.close()
    except OSError as e:
        t.skip("no IPv6 loopback here: %s" % e)
    m, d, c = started(t, {"web.yaml": pod_yaml("web")},
                      extra=["--metrics-address", "[::1]:0"])
    host, port = metrics_port(d)
    expect_eq(host, "[::1]", "logged host")
    conn = http.client.HTTPConnection("::1", port, timeout=T_SHORT)
    conn.request("GET", "/metrics")
    r = conn.getresponse()
    body = r.read().decode()
    conn.close()
    expect_eq(r.status, 200, "GET /metrics on [::1]")
    Exposition(body)


# ===========================================================================
# 3. consumers

def wait_printed(w, needle, start, timeout=None):
    """Waits until watch process w printed a line containing needle at or
    after line index start; returns the index after it."""
    def find():
        lines = w.lines()
        for i in range(start, len(lines)):
            if needle in lines[i]:
                return i + 1
        if w.poll() is not None:
            raise AssertionError("podmux watch (pid %d) exited (%s) before "
                                 "printing %s; stderr %r" % (
                                     w.pid, w.poll(), needle,
                                     w.err_lines()[-5:]))
        return None
    return wait_for(find, timeout or T_WAIT, "podmux watch (pid %d) to "
                    "print %s" % (w.pid, needle), interval=0.02)


@test("consumers: two `podmux watch` count as podmux_consumers 2 and are "
      "listed by pid and uid in `podmux status`; a consumer that never "
      "reads is dropped past --max-consumer-backlog (error SlowConsumer): "
      "podmux_consumers_dropped_total 1, podmux_consumers back to 2, "
      "status dropped_consumers 1")
def test_consumers_two_podmux_watch_count_podmux(t):
    msock = t.path("metrics.sock")
    m, d, c0 = started(t, {"web.yaml": pod_yaml("web")},
                       extra=["--metrics-address", "unix:" + msock,
                              "--max-consumer-backlog", "262144"])
    c0.close()
    s = Scraper(unix=msock)
    watches = [t.spawn(["watch", "--socket", d.sock, "-o", "json"])
               for _ in range(2)]
    pos = [wait_printed(w, '"type":"synced"', 0) for w in watches]
    e = wait_metrics(s, lambda e: e.get("podmux_consumers") == 2,
                     "podmux_consumers 2", names=("podmux_consumers",))
    t.soft(expect_eq, e.get("podmux_consumers_dropped_total"), 0,
           "dropped before any slow consumer")
    st = status_json(t, d.sock)
    t.soft(expect_eq, sorted(x.get("pid") for x in st["consumers"]),
           sorted(w.pid for w in watches), "status consumers' pids")
    for x in st["consumers"]:
        t.soft(expect_eq, x.get("uid"), os.getuid(), "consumer uid")
        t.soft(expect_true, ISO_RE.match(str(x.get("since"))),
               "consumer since %r" % x.get("since"))
        t.soft(expect_true, isinstance(x.get("backlog"), int) and
               isinstance(x.get("state"), str) and x["state"],
               "consumer state/backlog: %s" % json.dumps(x))
    text = status_text(t, d.sock)
    for w in watches:
        t.soft(expect_true, re.search(r"^%d\s" % w.pid, text, re.M),
               "podmux status (text) does not list consumer pid %d: %r" %
               (w.pid, text[-800:]))
    t.soft(expect_true, "CONSUMERS (2)" in text,
           "podmux status (text): %r" % text[-800:])

    # A third consumer that never reads.
    slow = d.connect()
    wait_metrics(s, lambda e: e.get("podmux_consumers") == 3,
                 "podmux_consumers 3", names=("podmux_consumers",))
    st = status_json(t, d.sock)
    t.soft(expect_eq, sorted(x.get("pid") for x in st["consumers"]),
           sorted([w.pid for w in watches] + [os.getpid()]),
           "status consumers' pids with the silent one")
    dropped = None
    for i in range(300):
        name = "big%03d" % i
        write_file(os.path.join(m, name + ".yaml"), pod_yaml(name, big=30000))
        # Paced by the two watches: they never fall behind.
        pos = [wait_printed(w, '"name":"%s"' % pn(name), p)
               for w, p in zip(watches, pos)]
        e = s.metrics()
        if e.get("podmux_consumers_dropped_total") >= 1:
            dropped = i
            break
    if dropped is None:
        raise AssertionError("the silent consumer was never dropped "
                             "(podmux_consumers_dropped_total stays 0)")
    t.note("dropped after %d big pods" % (dropped + 1))
    error = None
    while True:
        try:
            x = slow.recv(T_LONG)
        except ConsumerClosed:
            break
        if x.get("type") == "error":
            error = x
    t.soft(expect_eq, error and error.get("reason"), "SlowConsumer",
           "the silent consumer's error")
    e = wait_metrics(s, lambda e: e.get("podmux_consumers") == 2,
                     "podmux_consumers back to 2",
                     names=("podmux_consumers",
                            "podmux_consumers_dropped_total"))
    t.soft(expect_eq, e.get("podmux_consumers_dropped_total"), 1,
           "podmux_consumers_dropped_total")
    st = status_json(t, d.sock)
    t.soft(expect_eq, st.get("dropped_consumers"), 1,
           "status dropped_consumers")
    t.soft(expect_eq, sorted(x.get("pid") for x in st["consumers"]),
           sorted(w.pid for w in watches),
           "status consumers after the drop")
    for w in watches:
        t.soft(expect_true, w.poll() is None,
               "podmux watch %d exited (%s): it kept up and must not be "
               "dropped" % (w.pid, w.poll()))
    # A watch that leaves is no longer counted.
    watches[0].stop()
    wait_metrics(s, lambda e: e.get("podmux_consumers") == 1,
                 "podmux_consumers 1 after a watch exits",
                 names=("podmux_consumers",))
    e = s.metrics()
    t.soft(expect_eq, e.get("podmux_consumers_dropped_total"), 1,
           "a consumer that leaves is not counted as dropped")


# ===========================================================================
# 4. HTTP source

@test("http source: a bad body counts parse_errors{http} 1 (once while it "
      "stays the same), last_success stays 0; a good body sets "
      "last_success and source_pods; one HTTP 500 counts "
      "source_errors{http} but no parse error")
@with_servers
def test_http_source_bad_body_counts_parse(t):
    t0 = time.time()
    srv = t.mserver()
    srv.set(body="apiVersion: v1\nkind: Pod\nmetadata: {name: [\n")
    msock = t.path("metrics.sock")
    d = bare_daemon(t, ["--manifest-url", srv.url(),
                        "--http-check-frequency", "500ms",
                        "--metrics-address", "unix:" + msock])
    c = d.connect()
    c.expect_type("synced")
    wait_socket_file(msock, d)
    s = Scraper(unix=msock)
    names = ("podmux_parse_errors_total", "podmux_source_errors_total",
             "podmux_source_pods",
             "podmux_source_last_success_timestamp_seconds")
    e = wait_metrics(s, lambda e: e.get("podmux_parse_errors_total",
                                        source="http") == 1,
                     "parse_errors{http}=1", names=names)
    t.soft(expect_eq, e.get("podmux_source_errors_total", source="http"), 1,
           "source_errors{http} after a bad body")
    t.soft(expect_eq, e.get("podmux_source_last_success_timestamp_seconds",
                            source="http"), 0,
           "last_success{http} before any good body")
    t.soft(expect_eq, e.by_label("podmux_source_pods", "source"),
           {("http",): 0}, "source_pods with only the http source")
    t.soft(expect_true, e.get("podmux_parse_errors_total",
                              source="file") is None,
           "a file series without a file source")
    st = status_json(t, d.sock)
    src = source_of(st, "http")
    t.soft(expect_eq, src.get("last_success"), None,
           "status http last_success before any good body")
    t.soft(expect_true, isinstance(src.get("last_error"), dict) and
           src["last_error"].get("message"),
           "status http last_error: %s" % json.dumps(src))
    t.soft(expect_true, "never" in text_source_block(status_text(t, d.sock),
                                                     "http"),
           "podmux status (text) does not say the http source never "
           "succeeded")
    # The same bad body polled again: not counted again.
    srv.wait_more(3, T_WAIT)
    e = s.metrics()
    t.soft(expect_eq, (e.get("podmux_parse_errors_total", source="http"),
                       e.get("podmux_source_errors_total", source="http")),
           (1, 1), "(parse_errors, errors){http} after the same bad body "
           "was polled again")

    srv.set(body=pod_yaml("web"))
    c.wait_until_state([pn("web")])
    e = wait_metrics(s, lambda e: e.get("podmux_source_pods",
                                        source="http") == 1 and
                     e.get("podmux_source_last_success_timestamp_seconds",
                           source="http") > 0,
                     "source_pods{http}=1 and a last success", names=names)
    last = e.get("podmux_source_last_success_timestamp_seconds",
                 source="http")
    t.soft(expect_true, t0 - 1 <= last <= time.time() + 1,
           "last_success{http} %s not between the test's start and now" %
           last)
    t.soft(expect_eq, e.by_label("podmux_updates_total", "op", "source"),
           {("ADD", "http"): 1}, "podmux_updates_total")
    t.soft(expect_eq, (e.get("podmux_parse_errors_total", source="http"),
                       e.get("podmux_source_errors_total", source="http")),
           (1, 1), "(parse_errors, errors){http} after a good body")
    st = status_json(t, d.sock)
    t.soft(expect_true, ISO_RE.match(str(source_of(st, "http").get(
        "last_success"))), "status http last_success after a good body")

    # One 500, then the good body again.
    n = srv.count()
    srv.script([{"status": 500, "body": "boom"}], then={"body":
                                                        pod_yaml("web")})
    e = wait_metrics(s, lambda e: e.get("podmux_source_errors_total",
                                        source="http") == 2,
                     "source_errors{http}=2 after a 500", names=names)
    srv.wait_count(n + 3, T_WAIT)
    e = s.metrics()
    t.soft(expect_eq, (e.get("podmux_parse_errors_total", source="http"),
                       e.get("podmux_source_errors_total", source="http")),
           (1, 2), "(parse_errors, errors){http} after one 500")
    t.soft(expect_eq, e.get("podmux_source_pods", source="http"), 1,
           "source_pods{http} after a 500 (the pods stay)")
    src = source_of(status_json(t, d.sock), "http")
    t.soft(expect_true, "500" in str((src.get("last_error") or {}).get(
        "message")), "status http last_error after a 500: %s" %
        json.dumps(src))
    t.soft(expect_eq, (src.get("errors"), src.get("parse_errors")), (2, 1),
           "status http (errors, parse_errors)")


# ===========================================================================
# 5. API source

def api_counts(srv):
    """(lists started after the first, watches that ended) by the fake
    server's request log."""
    lists = srv.requests(kind="list")
    open_ids = set(srv.watchers())
    watches = srv.requests(kind="watch")
    ended = [w for w in watches if w["id"] not in open_ids]
    return max(len(lists) - 1, 0), len(ended)


@test("api source: a dropped watch counts podmux_api_watch_restarts_total "
      "(no relist); a 410 on the watch counts a relist and a restart; "
      "relists = lists after the first, watch_restarts = watches ended (by "
      "the server's log); status shows the api source's relists and watch "
      "restarts")
def test_api_source_dropped_watch_counts_podmux(t):
    srv = FakeAPI(t)
    try:
        srv.create("a")
        kc = apitls.simple_kubeconfig(t.path("kubeconfig"), srv.url)
        msock = t.path("metrics.sock")
        d = bare_daemon(t, ["--kubeconfig", kc, "--metrics-address",
                            "unix:" + msock])
        c = d.connect()
        c.wait_until_state(["a"])
        wait_socket_file(msock, d)
        s = Scraper(unix=msock)
        names = ("podmux_api_relists_total",
                 "podmux_api_watch_restarts_total")
        open_for_a_second(srv)
        e = s.metrics()
        t.soft(expect_eq, (e.get("podmux_api_relists_total"),
                           e.get("podmux_api_watch_restarts_total")),
               (0, 0), "(relists, watch_restarts) after the first list and "
               "watch")
        t.soft(expect_eq, e.by_label("podmux_source_pods", "source"),
               {("api",): 1}, "source_pods")
        t.soft(expect_eq, e.by_label("podmux_updates_total", "op", "source"),
               {("ADD", "api"): 1}, "podmux_updates_total")
        t.soft(expect_eq, e.type_of("podmux_api_relists_total"), "counter",
               "TYPE of podmux_api_relists_total")

        # A dropped watch: watched again from lastRV, no relist.
        mark = srv.last_id()
        srv.action("close")
        srv.wait_watch(mark)
        e = wait_metrics(s, lambda e: e.get(
            "podmux_api_watch_restarts_total") == 1,
            "watch_restarts 1 after a dropped watch", names=names)
        t.soft(expect_eq, e.get("podmux_api_relists_total"), 0,
               "relists after a dropped watch (it resumes, no list)")

        # A 410 ERROR event: relist from lastRV, then a new watch.
        open_for_a_second(srv, mark)
        mark = srv.last_id()
        srv.action("expire")
        srv.wait_watch(mark)
        e = wait_metrics(s, lambda e: e.get("podmux_api_relists_total") == 1
                         and e.get("podmux_api_watch_restarts_total") == 2,
                         "relists 1 and watch_restarts 2 after a 410",
                         names=names)
        srv.create("b")
        c.wait_until_state(["a", "b"])

        def by_log():
            e = s.metrics()
            want = api_counts(srv)
            got = (e.get("podmux_api_relists_total"),
                   e.get("podmux_api_watch_restarts_total"))
            return got == want
        try:
            wait_for(by_log, T_SHORT, "the counters to match the server's "
                     "request log")
        except AssertionError:
            e = s.metrics()
            t.soft_failures.append(
                "(relists, watch_restarts) = (%s, %s), the server's log "
                "says (lists after the first, watches ended) = %s" % (
                    e.get("podmux_api_relists_total"),
                    e.get("podmux_api_watch_restarts_total"),
                    api_counts(srv)))
        st = status_json(t, d.sock)
        src = source_of(st, "api")
        t.soft(expect_eq, (src.get("relists"), src.get("watch_restarts"),
                           src.get("pods")), (1, 2, 2),
               "status api (relists, watch_restarts, pods)")
        block = text_source_block(status_text(t, d.sock), "api")
        t.soft(expect_true, "relists 1, watch restarts 2" in block,
               "podmux status (text): %r" % block)
    finally:
        srv.close()


# ===========================================================================
# 6. Plugins

@test("plugins (real gRPC plugins): a good one gives "
      "plugin_registrations_total 1, plugins_registered 1 and is listed by "
      "`podmux status`; one with an unsupported version gives "
      "registration_failures_total 1 (not more while retried); removing "
      "the good one's socket gives deregistrations_total 1 and "
      "plugins_registered 0")
def test_plugins_real_grpc_plugins_good_one(t):
    msock = t.path("metrics.sock")
    d = plugin_daemon(t, extra=["--metrics-address", "unix:" + msock])
    c = d.connect()
    c.expect_type("synced")
    wait_socket_file(msock, d)
    s = Scraper(unix=msock)
    names = ("podmux_plugins_registered",
             "podmux_plugin_registrations_total",
             "podmux_plugin_deregistrations_total",
             "podmux_plugin_registration_failures_total")

    def counts(e):
        return tuple(e.get(n) for n in names)
    t.soft(expect_eq, counts(s.metrics()), (0, 0, 0, 0),
           "(registered, registrations, deregistrations, failures) at start")

    good = FakePlugin(t, os.path.join(d.reg, "csi", "good.sock"),
                      type="CSIPlugin", name="good.csi.example.com",
                      versions=["1.0.0"])
    wait_plugin(c, "REGISTERED", good.sock)
    e = wait_metrics(s, lambda e: counts(e) == (1, 1, 0, 0),
                     "plugins_registered 1, registrations 1", names=names)
    st = status_json(t, d.sock)
    ps = st["plugins"]
    if len(ps) != 1:
        raise AssertionError("status plugins: %s" % json.dumps(ps))
    t.soft(expect_eq, (ps[0].get("type"), ps[0].get("name"),
                       ps[0].get("versions"), ps[0].get("socket")),
           ("CSIPlugin", "good.csi.example.com", ["1.0.0"], norm(good.sock)),
           "status plugin (type, name, versions, socket)")
    text = status_text(t, d.sock)
    t.soft(expect_true, re.search(r"^CSIPlugin\s+good\.csi\.example\.com\s+"
                                  r"1\.0\.0\s", text, re.M),
           "podmux status (text) does not list the plugin: %r" % text[-600:])
    t.soft(expect_true, "PLUGINS (1)" in text, "podmux status (text): %r" %
           text[-600:])

    bad = FakePlugin(t, os.path.join(d.reg, "old.sock"), type="CSIPlugin",
                     name="old.csi.example.com", versions=["0.3.0"])
    wait_plugin(c, "FAILED", bad.sock)
    e = wait_metrics(s, lambda e: e.get(
        "podmux_plugin_registration_failures_total") == 1,
        "registration_failures_total 1", names=names)
    # Retries with backoff (0.5 s, 1 s, ...) must not count again.
    try:
        bad.wait_getinfo(2, timeout=T_SHORT)
    except AssertionError:
        t.note("the failing plugin was not retried within %.0f s" % T_SHORT)
    read_for(c, SETTLE)
    t.soft(expect_eq, counts(s.metrics()), (1, 1, 0, 1),
           "(registered, registrations, deregistrations, failures) after a "
           "failing plugin was retried (GetInfo calls: %d)" %
           bad.getinfo_count())
    st = status_json(t, d.sock)
    t.soft(expect_eq, [p.get("name") for p in st["plugins"]],
           ["good.csi.example.com"], "status plugins with a failed one")

    os.unlink(good.sock)
    wait_plugin(c, "DEREGISTERED", good.sock)
    e = wait_metrics(s, lambda e: e.get("podmux_plugins_registered") == 0
                     and e.get("podmux_plugin_deregistrations_total") == 1,
                     "plugins_registered 0, deregistrations 1", names=names)
    t.soft(expect_eq, counts(e), (0, 1, 1, 1),
           "(registered, registrations, deregistrations, failures) after "
           "the socket was removed")
    st = status_json(t, d.sock)
    t.soft(expect_eq, st["plugins"], [], "status plugins after removal")
    t.soft(expect_true, "PLUGINS (0)" in status_text(t, d.sock),
           "podmux status (text) still lists plugins")


# ===========================================================================
# 7. podmux status errors

@test("podmux status: no socket, a stale socket, a listener that never "
      "answers: exit 1 with a message naming the socket; refused by "
      "--allow-uids (another uid): exit 1 \"refused ... Forbidden\"; bad "
      "flags: exit 2")
def test_podmux_status_no_socket_stale_socket(t):
    missing = t.path("nobody.sock")
    r = run_status(t, missing)
    t.soft(expect_eq, r.returncode, 1, "status on a missing socket: exit")
    t.soft(expect_true, missing in r.stderr and "connect" in r.stderr and
           "No such file" in r.stderr and not r.stdout,
           "status on a missing socket: stdout %r stderr %r" % (r.stdout,
                                                                r.stderr))

    stale = t.path("stale.sock")
    sk = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sk.bind(stale)
    sk.close()
    r = run_status(t, stale)
    t.soft(expect_eq, r.returncode, 1, "status on a stale socket: exit")
    t.soft(expect_true, stale in r.stderr and "refused" in r.stderr.lower()
           and not r.stdout,
           "status on a stale socket: stdout %r stderr %r" % (r.stdout,
                                                              r.stderr))

    # Accepts connections (the kernel's backlog) but never answers.
    mute = t.path("mute.sock")
    lk = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lk.bind(mute)
    lk.listen(4)
    try:
        r = run_status(t, mute)
    finally:
        lk.close()
    t.soft(expect_eq, r.returncode, 1, "status on a mute listener: exit")
    t.soft(expect_true, mute in r.stderr and r.stderr.startswith(
        "podmux status:") and not r.stdout,
        "status on a mute listener: stdout %r stderr %r" % (r.stdout,
                                                            r.stderr))

    for args, needle in ((["--bogus"], "--bogus"),
                         (["-o", "yaml"], "yaml"),
                         (["extra-arg"], "extra-arg"),
                         (["--socket"], "--socket")):
        r = t.run_cmd(["status"] + args)
        t.soft(expect_eq, r.returncode, 2, "podmux status %s: exit" %
               " ".join(args))
        t.soft(expect_true, needle in r.stderr,
               "podmux status %s: stderr %r does not name %s" % (
                   " ".join(args), r.stderr[-300:], needle))

    if not IS_ROOT:
        t.skip("needs root to run `podmux status` as another user (the "
               "checks without it passed)")
    os.chmod(t.path(), 0o755)
    m, d, c = started(t, {"web.yaml": pod_yaml("web")},
                      extra=["--socket-mode", "0666", "--allow-uids",
                             "1000"])
    r = run_status(t, d.sock, as_user=65534)
    t.soft(expect_eq, r.returncode, 1, "status as uid 65534 (not allowed): "
           "exit")
    t.soft(expect_true, re.search(r"refused.*Forbidden", r.stderr) and
           not r.stdout,
           "status as uid 65534: stdout %r stderr %r" % (r.stdout, r.stderr))
    # Root (the daemon's own user) always gets in.
    st = status_json(t, d.sock)
    t.soft(expect_eq, [x.get("pid") for x in st["consumers"]],
           [os.getpid()], "status consumers")
    d.assert_alive()


# ===========================================================================
# 8. Secrets

@test("the metrics scrape and `podmux status` (text and json) never show "
      "the API bearer token, --manifest-url-header values or the manifest "
      "URL's user info and query, even with errors recorded for both "
      "sources")
@with_servers
def test_metrics_scrape_podmux_status_text_json(t):
    token = "apitok-SECRET-4f1d9b7e"
    hdr_a = "hdr-SECRET-b3c2"
    hdr_b = "key-SECRET-77aa"
    url_pw = "pw-SECRET-1e0f"
    url_q = "q-SECRET-9c8d"
    secrets = (token, hdr_a, hdr_b, url_pw, url_q, "SECRET")
    api = FakeAPI(t, tokens=[token])
    try:
        api.create("a")
        api.fail(match="list", status=500, count=1)
        kc = apitls.simple_kubeconfig(t.path("kubeconfig"), api.url,
                                      user={"token": token})
        ms = t.mserver()
        ms.script([{"status": 500, "body": "no"},
                   {"body": "kind: [\n"}], then={"body": pod_yaml("web")})
        url = ms.url(userinfo="user:" + url_pw, query="sig=" + url_q)
        d = bare_daemon(t, [
            "--kubeconfig", kc, "--manifest-url", url,
            "--manifest-url-header",
            "Authorization:Bearer %s,X-Api-Key:%s" % (hdr_a, hdr_b),
            "--http-check-frequency", "500ms",
            "--metrics-address", "127.0.0.1:0"])
        c = d.connect()
        c.wait_until_state(["a", pn("web")])
        host, port = metrics_port(d)
        s = Scraper(host="127.0.0.1", port=port)
        wait_metrics(s, lambda e: e.get("podmux_source_errors_total",
                                        source="api") >= 1 and
                     e.get("podmux_source_errors_total",
                           source="http") >= 2,
                     "errors recorded for api and http",
                     names=("podmux_source_errors_total",))
        # The secrets were really in use.
        reqs = ms.requests()
        t.soft(expect_true, any(r.header_values("X-Api-Key") == [hdr_b]
                                for r in reqs),
               "the manifest server never got the X-Api-Key header")
        t.soft(expect_true, any(r.get("auth") == "token:0" and
                                r.get("status") == 200
                                for r in api.requests()),
               "the API server never got the bearer token")
        _, _, body = s.request()
        outputs = {"GET /metrics": body.decode("utf-8", "replace")}
        st = status_json(t, d.sock)
        for name in ("api", "http"):
            t.soft(expect_true, isinstance(source_of(st, name).get(
                "last_error"), dict), "status %s has no last_error: %s" %
                (name, json.dumps(source_of(st, name))))
        outputs["status -o json"] = json.dumps(st)
        outputs["status"] = status_text(t, d.sock)
        for what, text in outputs.items():
            for secret in secrets:
                if secret in text:
                    line = [x for x in text.splitlines() if secret in x][0]
                    t.soft_failures.append("%s shows %r: %r" % (
                        what, secret, line[:300]))
        # The scrape stays valid with every source configured.
        e = Exposition(outputs["GET /metrics"])
        t.soft(expect_eq, sorted(k[0] for k in e.by_label(
            "podmux_source_pods", "source")), ["api", "http"],
            "source_pods series")
    finally:
        api.close()


if __name__ == "__main__":
    harness.main()
