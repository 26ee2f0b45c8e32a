"""The monitor's web server: the standard library's threaded HTTP server, in this process.

Why not an ASGI stack (Starlette and uvicorn): the monitor runs inside whatever program a
user turns it on in, so it must add no dependency, no event loop and no import cost; it
serves one page, three JSON answers and a server-sent event stream to a few local
browsers, which `http.server.ThreadingHTTPServer` does with one thread per connection.

Security (``docs/monitor.md``):

- it binds to ``127.0.0.1`` unless told otherwise;
- every request's ``Host`` header must name this server (a loopback name and the bound
  port; for another address, that address, the machine's name or an IP literal), which
  defeats DNS rebinding: a page of another site that resolves its own name to 127.0.0.1
  sends its own name;
- bound to any other address it needs a token, carried by the URL (``?token=...``) and
  sent back by the page with every request; a request without it is refused;
- it sends no CORS headers, so other sites' pages cannot read its answers.
"""

from __future__ import annotations

import hmac
import importlib.resources
import ipaddress
import json
import secrets
import socket
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from shapevm import vm
from shapevm.bytecode.errors import format_message
from shapevm.tools.monitor import MonitorError
from shapevm.tools.monitor.state import LatencyLog, jsonable, snapshot

EVENT_INTERVAL_S = 0.5  # the page updates twice a second
IDLE_S = 10.0  # no page polled or connected for this long: stop recording calls
STATIC = {
    "index.html": "text/html; charset=utf-8",
    "monitor.js": "text/javascript; charset=utf-8",
    "chart.js": "text/javascript; charset=utf-8",
    "monitor.css": "text/css; charset=utf-8",
}
HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'"
    ),
}


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Watchers:
    """Whether a page is watching: an open event stream, or a poll in the last `IDLE_S`.
    Calls are recorded only meanwhile."""

    def __init__(self, latency: LatencyLog) -> None:
        self.latency = latency
        self._lock = threading.Lock()
        self._streams = 0
        self._last = 0.0
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def touch(self, stream: int = 0) -> None:
        with self._lock:
            self._streams += stream
            self._last = time.monotonic()
            if self._thread is None:
                self.latency.watch(True)
                self._thread = threading.Thread(
                    target=self._expire, name="shapevm-monitor-watch", daemon=True
                )
                self._thread.start()

    def _expire(self) -> None:
        while not self._stop.wait(1.0):
            with self._lock:
                if self._streams == 0 and time.monotonic() - self._last > IDLE_S:
                    self.latency.watch(False)
                    self._thread = None
                    return

    def close(self) -> None:
        self._stop.set()
        self.latency.watch(False)


class MonitorServer(ThreadingHTTPServer):
    """Serves the page, ``/api/state``, ``/api/events`` and ``/api/code``."""

    daemon_threads = True

    def __init__(self, host: str, port: int, token: str | None) -> None:
        if not is_loopback(host) and not token:
            token = secrets.token_urlsafe(18)
        self.token = token
        self.latency = LatencyLog()
        self.watchers = Watchers(self.latency)
        self.stopping = threading.Event()
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            super().__init__((host.strip("[]"), port), Handler)
        except OSError as exc:
            raise MonitorError(
                format_message(
                    f"cannot serve the monitor on {host}:{port}: {exc.strerror or exc}",
                    fix="choose another port (port=0 takes a free one) or address",
                )
            ) from None
        self.host = host
        self.port = int(self.server_address[1])
        self.allowed = self._allowed_hosts(host)

    def _allowed_hosts(self, host: str) -> set[str] | None:
        """Host names a request may use (``None``: any IP literal or this machine's name)."""
        if is_loopback(host):
            return {"127.0.0.1", "localhost", "[::1]", host if ":" not in host else f"[{host}]"}
        if host in ("0.0.0.0", "::", ""):
            return None
        return {host if ":" not in host else f"[{host.strip('[]')}]", "localhost", "127.0.0.1"}

    @property
    def url(self) -> str:
        name = self.host if ":" not in self.host else f"[{self.host.strip('[]')}]"
        if name in ("0.0.0.0", "[::]"):
            name = socket.gethostname()
        query = f"?token={self.token}" if self.token else ""
        return f"http://{name}:{self.port}/{query}"

    def host_ok(self, header: str | None) -> bool:
        if not header:
            return False
        name, sep, port = header.rpartition(":")
        if not sep or not port.isdigit() or int(port) != self.port or "]" in port:
            return False
        if self.allowed is not None:
            return name.lower() in self.allowed
        if name.lower() in {"localhost", socket.gethostname().lower(), socket.getfqdn().lower()}:
            return True
        try:
            ipaddress.ip_address(name.strip("[]"))
        except ValueError:
            return False
        return True

    def token_ok(self, query: dict[str, list[str]]) -> bool:
        if not self.token:
            return True
        given = query.get("token", [""])[0]
        return hmac.compare_digest(given.encode(), self.token.encode())

    def close(self) -> None:
        self.stopping.set()
        waiter = threading.Thread(target=self.shutdown, daemon=True)
        waiter.start()
        while waiter.is_alive():  # wake the serving loop's select instead of awaiting its poll
            try:
                with socket.create_connection(self._local_address(), timeout=1):
                    pass
            except OSError:
                pass
            waiter.join(0.05)
        self.server_close()
        self.watchers.close()

    def _local_address(self) -> tuple[str, int]:
        host = self.host.strip("[]")
        if host in ("0.0.0.0", ""):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        return host, self.port


class Handler(BaseHTTPRequestHandler):
    server: MonitorServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet: not the program's output
        pass

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        if not self.server.host_ok(self.headers.get("Host")):
            allowed = sorted(self.server.allowed or ["this machine's name or address"])
            self._refuse(
                f"Host header {self.headers.get('Host')!r} does not name this monitor",
                f"one of {', '.join(allowed)} with port {self.server.port}",
                "open the URL that start_monitor printed (this check stops DNS rebinding)",
            )
            return
        if url.path.startswith("/static/"):
            self._static(url.path[len("/static/") :])
            return
        if not self.server.token_ok(query):
            self._refuse(
                "missing or wrong token",
                "the token= of the URL that start_monitor printed",
                "open that URL; a monitor bound to another address than 127.0.0.1 needs it",
            )
            return
        if url.path in ("/", "/index.html"):
            self._static("index.html")
        elif url.path == "/api/state":
            self._state()
        elif url.path == "/api/events":
            self._events()
        elif url.path == "/api/code":
            self._code(query)
        else:
            self._send(HTTPStatus.NOT_FOUND, f"no page {url.path!r}: try /", "text/plain")

    def do_POST(self) -> None:
        self._send(HTTPStatus.METHOD_NOT_ALLOWED, "the monitor only reads: use GET", "text/plain")

    do_PUT = do_DELETE = do_PATCH = do_POST

    def _refuse(self, what: str, expected: str, fix: str) -> None:
        text = format_message(f"refused: {what}", expected=expected, fix=fix)
        self._send(HTTPStatus.FORBIDDEN, text, "text/plain; charset=utf-8")

    def _send(self, status: HTTPStatus, body: str | bytes, ctype: str) -> None:
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in HEADERS.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _json(self, obj: Any, status: HTTPStatus = HTTPStatus.OK) -> None:
        self._send(status, json.dumps(obj), "application/json")

    def _static(self, name: str) -> None:
        ctype = STATIC.get(name)
        if ctype is None:
            self._send(HTTPStatus.NOT_FOUND, f"no file {name!r}", "text/plain")
            return
        data = (importlib.resources.files(__package__) / "static" / name).read_bytes()
        self._send(HTTPStatus.OK, data, ctype)

    def _state(self) -> None:
        self.server.watchers.touch()
        latency = self.server.latency
        latency.poll()
        points, _ = latency.since(0)
        self._json(snapshot(points))

    def _code(self, query: dict[str, list[str]]) -> None:
        function = query.get("function", [""])[0]
        key = query.get("key", [""])[0]
        try:
            self._json(jsonable(vm.variant_code(function, key)))
        except KeyError as exc:
            self._json({"error": exc.args[0]}, HTTPStatus.NOT_FOUND)

    def _events(self) -> None:
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.close_connection = True
        server = self.server
        server.watchers.touch(+1)
        seq, first = 0, True
        try:
            while not server.stopping.is_set():
                server.latency.poll()
                points, seq = server.latency.since(seq)
                state = snapshot(points)
                state["latency_incremental"] = not first  # the first event has every point
                first = False
                self.wfile.write(f"event: state\ndata: {json.dumps(state)}\n\n".encode())
                self.wfile.flush()
                server.stopping.wait(EVENT_INTERVAL_S)
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass  # the page went away
        finally:
            server.watchers.touch(-1)
