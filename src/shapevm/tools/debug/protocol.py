"""The Debug Adapter Protocol's wire format: JSON messages framed by a ``Content-Length``
header, over a byte stream (the adapter's standard input and output).

`MessageReader.read` returns one message, ``None`` at the end of the stream, or raises
`ProtocolError` for a malformed frame after consuming it, so that the next read starts at
the next frame (after a header without a usable length, at the next ``Content-Length``
header): a client's mistake costs one message, never the session.

>>> import io
>>> stream = io.BytesIO(b'Content-Length: 10\\r\\n\\r\\n{"seq": 1}Content-Length: x\\r\\n\\r\\n')
>>> reader = MessageReader(stream)
>>> reader.read()
{'seq': 1}
>>> reader.read()
Traceback (most recent call last):
...
shapevm.tools.debug.protocol.ProtocolError: bad Content-Length header
  expected: Content-Length: <number of bytes of the JSON body>
  found:    Content-Length: x
>>> reader.read() is None
True
"""

from __future__ import annotations

import json
import threading
from typing import Any, BinaryIO

from shapevm.bytecode.errors import format_message

MAX_BODY = 64 * 2**20  # a larger message is refused (and skipped)
MAX_HEADER_LINE = 8192
EXPECTED = "Content-Length: <number of bytes of the JSON body>"


class ProtocolError(ValueError):
    """A frame that is not a DAP message; ``truncated``: the stream ended inside it."""

    def __init__(
        self, what: str, *, expected: str = "", found: str = "", truncated: bool = False
    ) -> None:
        super().__init__(format_message(what, expected=expected, found=found))
        self.truncated = truncated


class MessageReader:
    """Reads framed messages from a binary stream."""

    def __init__(self, stream: BinaryIO, max_body: int = MAX_BODY) -> None:
        self.stream = stream
        self.max_body = max_body
        self._resync = False  # after a header without a usable length: skip to the next one

    def read(self) -> dict[str, Any] | None:
        headers = self._headers()
        if headers is None:
            return None
        length = self._length(headers)
        if length > self.max_body:
            self._discard(length)
            raise ProtocolError(
                "message too large (skipped)",
                expected=f"at most {self.max_body} bytes",
                found=f"{length}",
            )
        body = self.stream.read(length)
        if len(body) < length:
            raise ProtocolError(
                "the stream ended inside a message",
                expected=f"{length} bytes of body",
                found=f"{len(body)}",
                truncated=True,
            )
        return _decode(body)

    def _headers(self) -> list[str] | None:
        lines: list[str] = []
        while True:
            raw = self.stream.readline(MAX_HEADER_LINE + 1)
            if not raw:
                if lines:
                    raise ProtocolError(
                        "the stream ended inside a header", found=repr(lines[-1]), truncated=True
                    )
                return None
            if len(raw) > MAX_HEADER_LINE and not raw.endswith(b"\n"):
                self._skip_line()
                raise ProtocolError(
                    "header line too long", expected=f"at most {MAX_HEADER_LINE} bytes"
                )
            line = raw.rstrip(b"\r\n").decode("latin-1")
            if self._resync:  # the body of the bad frame is unknown: find the next header
                at = line.lower().find("content-length:")
                if at < 0:
                    continue
                line, self._resync = line[at:], False
            if not line:
                if lines:
                    return lines
                continue  # blank lines between messages are tolerated
            lines.append(line)

    def _skip_line(self) -> None:
        while True:
            raw = self.stream.readline(MAX_HEADER_LINE)
            if not raw or raw.endswith(b"\n"):
                return

    def _length(self, headers: list[str]) -> int:
        try:
            return self._parse_length(headers)
        except ProtocolError:
            self._resync = True
            raise

    def _parse_length(self, headers: list[str]) -> int:
        length: int | None = None
        for line in headers:
            name, sep, value = line.partition(":")
            if not sep:
                raise ProtocolError("malformed header line", expected=EXPECTED, found=line)
            if name.strip().lower() == "content-length":
                text = value.strip()
                if not text.isdigit():
                    raise ProtocolError("bad Content-Length header", expected=EXPECTED, found=line)
                length = int(text)
        if length is None:
            raise ProtocolError(
                "no Content-Length header", expected=EXPECTED, found=" | ".join(headers)
            )
        return length

    def _discard(self, n: int) -> None:
        while n > 0:
            chunk = self.stream.read(min(n, 1 << 20))
            if not chunk:
                return
            n -= len(chunk)


def _decode(body: bytes) -> dict[str, Any]:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError(
            "message body is not UTF-8", expected="UTF-8 JSON", found=str(exc)
        ) from None
    try:
        msg = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProtocolError(
            "message body is not JSON", expected="one JSON object", found=f"{exc}: {text[:80]!r}"
        ) from None
    if not isinstance(msg, dict):
        raise ProtocolError(
            "message body is not a JSON object", expected="{...}", found=type(msg).__name__
        )
    return msg


class MessageWriter:
    """Writes framed messages; safe to call from several threads."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self._lock = threading.Lock()

    def write(self, message: dict[str, Any]) -> None:
        body = json.dumps(message, ensure_ascii=False, allow_nan=False).encode("utf-8")
        with self._lock:
            self.stream.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            self.stream.flush()
