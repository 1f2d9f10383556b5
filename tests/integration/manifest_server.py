#!/usr/bin/env python3
"""manifest_server — a local HTTP manifest server for the HTTP source tests.

Standard library only.  The server runs in threads of the test process
(http.server on 127.0.0.1, an ephemeral port kept across stop()/start(), so
a stopped server gives "connection refused" and a restarted one serves the
same URL again).  The test controls every response and the server records
every request:

    srv = ManifestServer()
    srv.set(body=pod_yaml("web"))              # what /anything returns
    srv.set(status=500, body="boom")
    srv.set(body=..., delay=3)                 # answer after 3 s
    srv.set(body=..., gzip=True)               # Content-Encoding: gzip
    srv.set(body=..., cut=100)                 # close after 100 body bytes
    srv.set(body=..., cut=100, reset=True)     # ... with a TCP reset (RST)
    srv.set(body=..., chunked=True)            # HTTP/1.1 chunked encoding
    srv.set(body=..., chunked=True, cut=100)   # no last chunk: cut short
    srv.set(body=..., content_length=False)    # body delimited by close
    srv.set(body=..., content_length=False, linger=3)  # ... 3 s after it
    srv.script([{"status": 500}, {"body": b"..."}])  # one per request
    srv.redirects("/start", 3, "/final")       # /start -> ... -> /final
    srv.route("/final", body=...)              # a per-path response
    srv.stop(); srv.start()
    srv.count(); srv.wait_more(2); srv.requests(); srv.max_inflight

HTTP/1.0 is used on purpose: every response ends its connection, so a
stopped server really refuses the next poll (no kept-alive connection).

A delayed response watches its socket while it waits: when the client gives
up (timeout), the request counts as finished at that moment, so the
in-flight count is what the client sees.
"""

import gzip as _gzip
import http.server
import select
import socket
import struct
import threading
import time
import urllib.parse


class Response:
    """What the server answers for one path."""

    def __init__(self, body=b"", status=200, delay=0.0, gzip=False,
                 headers=(), cut=None, content_length=True, location=None,
                 reset=False, chunked=False, linger=0.0):
        if isinstance(body, str):
            body = body.encode()
        self.body = body
        self.status = status
        self.delay = delay
        self.gzip = gzip
        self.headers = list(headers)
        self.cut = cut
        self.content_length = content_length
        # Seconds the connection stays open after the whole body: with no
        # Content-Length the client cannot tell the body is complete, so
        # one whose timeout is shorter gives up on a response the server
        # sent in full ("sent").
        self.linger = linger
        self.location = location
        self.reset = reset
        self.chunked = chunked


class Request:
    """One request as the server saw it."""

    __slots__ = ("path", "query", "headers", "t_start", "t_end", "outcome")

    def __init__(self, path, query, headers, t_start):
        self.path = path
        self.query = query
        self.headers = headers       # [(name, value)], repeats kept, order
        self.t_start = t_start
        self.t_end = None
        self.outcome = None          # "sent", "cut", "client-gone", "error"

    def header_values(self, name):
        n = name.lower()
        return [v for k, v in self.headers if k.lower() == n]

    def __repr__(self):
        return "<%s%s %s>" % (self.path, "?" + self.query if self.query
                              else "", self.outcome)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        pass  # broken pipes after a client gave up are expected


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    server_version = "manifest-server/1"

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        owner = self.server.owner
        parts = urllib.parse.urlsplit(self.path)
        req = Request(parts.path, parts.query, list(self.headers.items()),
                      time.monotonic())
        resp = owner._begin(req)
        try:
            req.outcome = self._answer(resp)
        except OSError:
            req.outcome = "error"
        finally:
            owner._end(req)

    def _client_gone_during(self, secs):
        """Waits secs; returns True as soon as the client closes."""
        end = time.monotonic() + secs
        conn = self.connection
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return False
            r, _, _ = select.select([conn], [], [], min(left, 0.05))
            if r:
                try:
                    data = conn.recv(1, socket.MSG_PEEK)
                except OSError:
                    return True
                if not data:
                    return True
                time.sleep(min(left, 0.05))  # pipelined bytes: just wait

    def _answer(self, resp):
        if resp.delay and self._client_gone_during(resp.delay):
            return "client-gone"
        body = resp.body
        if resp.gzip:
            body = _gzip.compress(body)
        if resp.chunked:
            return self._answer_chunked(resp, body)
        self.send_response(resp.status)
        if resp.location is not None:
            self.send_header("Location", resp.location)
        if resp.gzip:
            self.send_header("Content-Encoding", "gzip")
        for k, v in resp.headers:
            self.send_header(k, v)
        if resp.content_length:
            self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Type", "application/yaml")
        self.end_headers()
        if resp.cut is not None:
            self.wfile.write(body[:resp.cut])
            self.wfile.flush()
            # Abrupt end: no more bytes although Content-Length promised
            # more.
            self._end_abruptly(resp.reset)
            return "cut"
        view = memoryview(body)
        for i in range(0, len(body), 1 << 16):
            self.wfile.write(view[i:i + (1 << 16)])
        if resp.linger:
            self.wfile.flush()
            self._client_gone_during(resp.linger)
        return "sent"

    def _end_abruptly(self, reset):
        """Closes the connection: with a TCP reset (SO_LINGER 0), or an
        orderly FIN."""
        try:
            if reset:
                self.connection.setsockopt(socket.SOL_SOCKET,
                                           socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
                self.connection.close()
            else:
                self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.close_connection = True

    def _answer_chunked(self, resp, body):
        """HTTP/1.1 with Transfer-Encoding: chunked, in chunks of 64 bytes;
        with cut, the stream ends after that many body bytes, without the
        last (empty) chunk."""
        head = ["HTTP/1.1 %d X" % resp.status,
                "Transfer-Encoding: chunked", "Connection: close",
                "Content-Type: application/yaml"]
        if resp.gzip:
            head.append("Content-Encoding: gzip")
        head += ["%s: %s" % kv for kv in resp.headers]
        self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode())
        end = len(body) if resp.cut is None else resp.cut
        for i in range(0, end, 64):
            piece = body[i:min(i + 64, end)]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        self.wfile.flush()
        if resp.cut is not None:
            self._end_abruptly(resp.reset)
            return "cut"
        self.wfile.write(b"0\r\n\r\n")
        self.close_connection = True
        return "sent"


class ManifestServer:
    def __init__(self, host="127.0.0.1"):
        self.host = host
        self.port = 0
        self._cond = threading.Condition()
        self._requests = []
        self._default = Response()
        self._routes = {}
        self._script = []
        self.inflight = 0
        self.max_inflight = 0
        self._srv = None
        self._thread = None
        self.start()

    # -- lifecycle -----------------------------------------------------------
    def start(self):
        if self._srv is not None:
            return
        srv = _Server((self.host, self.port), _Handler)
        srv.owner = self
        self.port = srv.server_address[1]
        self._srv = srv
        self._thread = threading.Thread(
            target=srv.serve_forever, kwargs={"poll_interval": 0.05},
            daemon=True)
        self._thread.start()

    def stop(self):
        """Stops listening: later connections are refused."""
        srv, self._srv = self._srv, None
        if srv is None:
            return
        srv.shutdown()
        srv.server_close()
        self._thread.join(timeout=5)

    def running(self):
        return self._srv is not None

    # -- URLs and responses -------------------------------------------------
    def base(self):
        return "http://%s:%d" % (self.host, self.port)

    def url(self, path="/pods", userinfo=None, query=None):
        auth = (userinfo + "@") if userinfo else ""
        return "http://%s%s:%d%s%s" % (auth, self.host, self.port, path,
                                       ("?" + query) if query else "")

    def set(self, **kw):
        """The default response (every path without a route).  Drops a
        pending script."""
        with self._cond:
            self._default = Response(**kw)
            self._script = []

    def script(self, responses, then=None):
        """The next requests without a route get these responses (dicts of
        Response arguments), one each, in order; then the default (or
        `then`, which becomes the default)."""
        with self._cond:
            self._script = [Response(**kw) for kw in responses]
            if then is not None:
                self._default = Response(**then)

    def script_left(self):
        with self._cond:
            return len(self._script)

    def route(self, path, **kw):
        with self._cond:
            self._routes[path] = Response(**kw)

    def unroute(self, path):
        with self._cond:
            self._routes.pop(path, None)

    def redirects(self, start, n, final, prefix="/hop"):
        """A chain of n redirects: start -> prefix/1 -> ... ->
        prefix/(n-1) -> final (n responses 302 in all).  final may be a
        path or an absolute URL.  Returns the hop paths."""
        hops = [start] + ["%s/%d" % (prefix, i) for i in range(1, n)]
        with self._cond:
            for k in [p for p in self._routes if p.startswith(prefix + "/")]:
                del self._routes[k]
            for i, p in enumerate(hops):
                nxt = hops[i + 1] if i + 1 < len(hops) else final
                self._routes[p] = Response(status=302, location=nxt,
                                           body=b"moved\n")
        return hops

    # -- records --------------------------------------------------------------
    def _begin(self, req):
        with self._cond:
            self._requests.append(req)
            self.inflight += 1
            self.max_inflight = max(self.max_inflight, self.inflight)
            resp = self._routes.get(req.path)
            if resp is None:
                resp = self._script.pop(0) if self._script else \
                    self._default
            self._cond.notify_all()
            return resp

    def _end(self, req):
        with self._cond:
            req.t_end = time.monotonic()
            self.inflight -= 1
            self._cond.notify_all()

    def requests(self, path=None):
        with self._cond:
            return [r for r in self._requests if path is None or
                    r.path == path]

    def count(self, path=None):
        return len(self.requests(path))

    def last(self):
        with self._cond:
            return self._requests[-1] if self._requests else None

    def wait_count(self, n, timeout, path=None, what=None):
        """Waits until at least n requests (to path) arrived."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                have = len([r for r in self._requests
                            if path is None or r.path == path])
                if have >= n:
                    return have
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        "timed out after %.0f s waiting for %s (the server "
                        "saw %d request(s)%s)" % (
                            timeout, what or "%d request(s)" % n, have,
                            " to %s" % path if path else ""))
                self._cond.wait(min(left, 0.2))

    def wait_more(self, k, timeout, path=None, what=None):
        """Waits until k more requests arrive than have arrived now."""
        return self.wait_count(self.count(path) + k, timeout, path,
                               what or "%d more poll(s)" % k)


class RawListener:
    """A TCP listener on 127.0.0.1 that answers every connection with fixed
    bytes at once and closes it (e.g. plain text where a TLS handshake is
    expected)."""

    def __init__(self, reply=b"HTTP/1.0 400 this is not TLS\r\n\r\n"):
        self.reply = reply
        self.accepted = 0
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._sock.settimeout(0.05)
        self.port = self._sock.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.accepted += 1
            try:
                conn.sendall(self.reply)
                conn.shutdown(socket.SHUT_WR)
                # Let the client read the reply before the socket goes.
                conn.settimeout(1)
                try:
                    conn.recv(65536)
                except OSError:
                    pass
            except OSError:
                pass
            finally:
                conn.close()

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=5)
        self._sock.close()
