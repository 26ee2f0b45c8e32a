"""The monitor page: the JIT of this process, live in a browser.

`start` serves it from a thread of this process and returns its URL (``shapevm.vm.
start_monitor``); ``shapevm monitor script.py`` runs a script with it, and the environment
variable ``SHAPEVM_MONITOR=PORT`` (or ``HOST:PORT``) starts it in any program that imports
shapevm. What it shows and its JSON API are described in ``docs/monitor.md``.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import TYPE_CHECKING

from shapevm.bytecode.errors import format_message

if TYPE_CHECKING:  # the server imports the JIT: loaded when a monitor starts
    from shapevm.tools.monitor.server import MonitorServer

ENV = "SHAPEVM_MONITOR"

_lock = threading.Lock()
_server: list[MonitorServer] = []  # the one running server, if any


class MonitorError(ValueError):
    """The monitor cannot start with these arguments."""


def start(host: str = "127.0.0.1", port: int = 0, token: str | None = None) -> str:
    """Start serving the page (once per process); returns its URL."""
    with _lock:
        if _server:
            running = _server[0]
            if running.host == host and port in (0, running.port):
                return running.url
            raise MonitorError(
                format_message(
                    f"a monitor already runs at {running.url}",
                    fix="use it, or call shapevm.vm.stop_monitor() first",
                )
            )
        from shapevm.tools.monitor.server import MonitorServer

        server = MonitorServer(host, port, token)
        thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.5}, daemon=True
        )
        thread.name = "shapevm-monitor"
        thread.start()
        _server.append(server)
        return server.url


def stop() -> None:
    """Stop the server (its open event streams end within half a second)."""
    with _lock:
        if _server:
            _server.pop().close()


def parse_address(text: str) -> tuple[str, int]:
    """``PORT`` or ``HOST:PORT`` (``[::1]:PORT`` for IPv6) as ``(host, port)``.

    >>> parse_address("8765"), parse_address("0.0.0.0:80"), parse_address("[::1]:0")
    (('127.0.0.1', 8765), ('0.0.0.0', 80), ('::1', 0))
    """
    host, sep, port = text.strip().rpartition(":")
    if not port.isdigit() or int(port) > 65535:
        raise MonitorError(
            format_message(
                f"bad monitor address {text!r}",
                expected="PORT or HOST:PORT, e.g. 8765 or 127.0.0.1:8765 (0: any free port)",
                found=text,
            )
        )
    return (host.strip("[]") if sep and host else "127.0.0.1"), int(port)


def start_from_env() -> str | None:
    """Start the monitor if ``SHAPEVM_MONITOR`` asks for it; prints the URL on standard
    error. A bad value or a port in use is reported there, never raised: the program
    runs on without the page."""
    text = os.environ.get(ENV, "").strip()
    if not text:
        return None
    try:
        url = start(*parse_address(text))
    except MonitorError as exc:
        print(f"shapevm: {ENV}={text}: {exc}", file=sys.stderr)
        return None
    print(f"shapevm monitor: {url}", file=sys.stderr)
    return url


__all__ = ["ENV", "MonitorError", "parse_address", "start", "start_from_env", "stop"]
