"""A small DAP client for the Python tests: the adapter runs in a thread of the test
process, on pipes, framed as over standard input and output."""

from __future__ import annotations

import json
import os
import queue
import threading
from typing import Any

from shapevm.tools.debug.adapter import serve
from shapevm.tools.debug.protocol import MessageReader


class Client:
    def __init__(self) -> None:
        to_adapter_r, to_adapter_w = os.pipe()
        from_adapter_r, from_adapter_w = os.pipe()
        self._in = os.fdopen(to_adapter_r, "rb")
        self._out = os.fdopen(from_adapter_w, "wb")
        self.pipe = os.fdopen(to_adapter_w, "wb")
        self.reader = MessageReader(os.fdopen(from_adapter_r, "rb"))
        self.adapter = threading.Thread(target=self._serve, daemon=True)
        self.adapter.start()
        self.messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.events: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.seq = 0

    def _serve(self) -> None:
        serve(self._in, self._out)
        self._out.close()

    def _read(self) -> None:
        while True:
            msg = self.reader.read()
            self.messages.put(msg)
            if msg is None:
                return

    def send_raw(self, data: bytes) -> None:
        self.pipe.write(data)
        self.pipe.flush()

    def send(self, command: str, **arguments: Any) -> int:
        self.seq += 1
        body = json.dumps(
            {"seq": self.seq, "type": "request", "command": command, "arguments": arguments}
        ).encode()
        self.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        return self.seq

    def next_message(self, timeout: float = 30) -> dict[str, Any]:
        msg = self.messages.get(timeout=timeout)
        assert msg is not None, "the adapter closed its output"
        if msg["type"] == "event":
            self.events.append(msg)
        return msg

    def response(self, seq: int) -> dict[str, Any]:
        while True:
            msg = self.next_message()
            if msg["type"] == "response" and msg["request_seq"] == seq:
                return msg

    def request(self, command: str, **arguments: Any) -> dict[str, Any]:
        return self.response(self.send(command, **arguments))

    def ok(self, command: str, **arguments: Any) -> dict[str, Any]:
        resp = self.request(command, **arguments)
        assert resp["success"], resp.get("message")
        return resp.get("body") or {}

    def event(self, name: str) -> dict[str, Any]:
        for i, e in enumerate(self.events):
            if e["event"] == name:
                return self.events.pop(i)["body"]
        while True:
            msg = self.next_message()
            if msg["type"] == "event" and msg["event"] == name:
                self.events.remove(msg)
                return msg["body"]

    def output(self, category: str) -> str:
        """The text of the next ``output`` event of ``category``."""
        while True:
            body = self.event("output")
            if body["category"] == category:
                return str(body["output"])

    def launch(self, **arguments: Any) -> None:
        self.ok("initialize", adapterID="shapevm")
        self.ok("launch", **arguments)
        self.event("initialized")

    def variables(self, ref: int) -> dict[str, dict[str, Any]]:
        return {v["name"]: v for v in self.ok("variables", variablesReference=ref)["variables"]}

    def close(self) -> None:
        if self.adapter.is_alive():
            try:
                self.request("disconnect")
            except (OSError, AssertionError):
                pass
        self.pipe.close()
        self.adapter.join(10)
