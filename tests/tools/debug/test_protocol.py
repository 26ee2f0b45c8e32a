"""The DAP framing against malformed input: every bad frame is refused with what was
expected and found, consumed so that the next frame reads, and the adapter answers on."""

from __future__ import annotations

import io
import json

import pytest

from shapevm.tools.debug.protocol import MessageReader, MessageWriter, ProtocolError
from tests.tools.debug.dap import Client


def frame(body: bytes, header: bytes | None = None) -> bytes:
    return (
        (header if header is not None else b"Content-Length: %d" % len(body)) + b"\r\n\r\n" + body
    )


GOOD = frame(b'{"seq": 9}')


def read_all(data: bytes, max_body: int = 1 << 20) -> list[object]:
    """Each frame's message, or the error it raised."""
    reader = MessageReader(io.BytesIO(data), max_body=max_body)
    out: list[object] = []
    while True:
        try:
            msg = reader.read()
        except ProtocolError as exc:
            out.append(exc)
            if exc.truncated:
                return out
            continue
        if msg is None:
            return out
        out.append(msg)


@pytest.mark.parametrize(
    ("data", "what", "found"),
    [
        (frame(b"{}", b"Content-Type: json"), "no Content-Length header", "Content-Type: json"),
        (frame(b"{}", b"Content-Length: two"), "bad Content-Length header", "Content-Length: two"),
        (frame(b"{}", b"Content-Length: -2"), "bad Content-Length header", "Content-Length: -2"),
        (frame(b"{}", b"Content-Length 2"), "malformed header line", "Content-Length 2"),
        (frame(b"{nope}"), "message body is not JSON", "{nope}"),
        (frame(b"[1, 2]"), "message body is not a JSON object", "list"),
        (frame(b'"\xff\xfe"'), "message body is not UTF-8", "can't decode byte 0xff"),
    ],
)
def test_a_malformed_frame_is_refused_and_the_next_one_reads(data, what, found):
    first, second = read_all(data + GOOD)
    assert isinstance(first, ProtocolError) and not first.truncated
    text = str(first)
    assert text.startswith(what)
    assert "found:" in text and found in text
    assert second == {"seq": 9}


def test_a_message_over_the_size_limit_is_skipped_whole():
    big = frame(b'{"x": "' + b"a" * 5000 + b'"}')
    first, second = read_all(big + GOOD, max_body=1000)
    assert str(first).startswith("message too large (skipped)")
    assert "expected: at most 1000 bytes" in str(first)
    assert second == {"seq": 9}


def test_an_endless_header_line_is_refused():
    first, second = read_all(b"X" * 20000 + b"\r\n\r\n" + GOOD)
    assert str(first).startswith("header line too long")
    assert second == {"seq": 9}


def test_a_stream_that_ends_inside_a_frame_is_truncated():
    (err,) = read_all(b'Content-Length: 50\r\n\r\n{"seq":')
    assert err.truncated and "expected: 50 bytes of body" in str(err)
    (err,) = read_all(b"Content-Length: 5\r\n")
    assert err.truncated and str(err).startswith("the stream ended inside a header")
    assert read_all(b"") == []


def test_extra_headers_and_blank_lines_between_messages_are_fine():
    data = b"\r\n" + frame(b'{"a": 1}', b"Content-Type: application/json\r\nContent-Length: 8")
    assert read_all(data + GOOD) == [{"a": 1}, {"seq": 9}]


def test_the_writer_counts_bytes_not_characters():
    out = io.BytesIO()
    MessageWriter(out).write({"text": "µs → ok"})
    data = out.getvalue()
    header, body = data.split(b"\r\n\r\n")
    assert int(header.split(b": ")[1]) == len(body) != len(body.decode())
    assert read_all(data) == [{"text": "µs → ok"}]


@pytest.fixture
def client():
    c = Client()
    yield c
    c.close()


def test_the_adapter_reports_bad_frames_and_answers_on(client):
    client.send_raw(frame(b"{broken"))
    client.send_raw(frame(b"{}", b"Content-Length: x"))
    client.send_raw(frame(json.dumps({"type": "event", "event": "x"}).encode()))
    body = client.ok("initialize", adapterID="t")
    assert body["supportsInstructionBreakpoints"] and body["supportsDisassembleRequest"]
    outputs = [e["body"]["output"] for e in client.events if e["event"] == "output"]
    assert outputs[0].startswith("shapevm debug-adapter: skipped a malformed message: ")
    assert "message body is not JSON" in outputs[0]
    assert "bad Content-Length header" in outputs[1]
    assert "ignored a message that is not a request" in outputs[2]


def test_unknown_and_failing_requests_get_error_responses(client):
    resp = client.request("frobnicate")
    assert not resp["success"]
    assert resp["message"] == "shapevm debug-adapter does not support the 'frobnicate' request"
    resp = client.request("stackTrace", threadId=1)
    assert resp["message"] == "no program is loaded: send 'launch' first"
    client.seq += 1  # arguments that are not an object
    body = json.dumps({"seq": client.seq, "type": "request", "command": "next", "arguments": 3})
    client.send_raw(frame(body.encode()))
    resp = client.response(client.seq)
    assert resp["message"] == "the arguments of 'next' must be an object"
    assert client.ok("threads")["threads"][0]["id"] == 1  # still serving
