"""Small models for the server's tests, and a server running in a thread of the test."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

import shapevm as sv
import shapevm.numpy as snp
from shapevm.frontend.export import Exported

F32 = np.float32


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def mlp() -> Exported:
    """x[b, 16] -> tanh(x @ w1 + b1) @ w2 + b2, b <= 512: dense layers (the JIT's path)."""
    rng = _rng(1)
    w1, b1 = rng.standard_normal((16, 32)).astype(F32), rng.standard_normal(32).astype(F32)
    w2, b2 = rng.standard_normal((32, 8)).astype(F32), rng.standard_normal(8).astype(F32)

    def mlp(x: Any) -> Any:
        return snp.tanh(x @ w1 + b1) @ w2 + b2

    (b,) = sv.symbolic_shape("b", constraints=["b <= 512"])
    return sv.export(sv.jit(mlp))(sv.ShapeDtypeStruct((b, 16), F32))


def matmul() -> Exported:
    """x[b, 64] @ w: a NumPy matrix product when interpreted."""
    w = _rng(2).standard_normal((64, 64)).astype(F32)

    def mm(x: Any) -> Any:
        return x @ w

    (b,) = sv.symbolic_shape("b")
    return sv.export(sv.jit(mm))(sv.ShapeDtypeStruct((b, 64), F32))


def elementwise() -> Exported:
    """x[b, 4] -> x * 2 + 1: elementwise, so joined rows are computed like single rows."""

    def ew(x: Any) -> Any:
        return x * 2.0 + 1.0

    (b,) = sv.symbolic_shape("b")
    return sv.export(sv.jit(ew))(sv.ShapeDtypeStruct((b, 4), F32))


def mixed() -> Exported:
    """Three inputs of three dtypes, a dict of three results."""

    def mixed(a: Any, m: Any, h: Any) -> Any:
        return {"a2": a * 2, "not_m": snp.logical_not(m), "h2": h * 2.0}

    (b,) = sv.symbolic_shape("b", constraints=["b <= 512"])
    specs = [sv.ShapeDtypeStruct((b, 2), t) for t in (np.int32, np.bool_, np.float16)]
    return sv.export(sv.jit(mixed))(*specs)


def sequence() -> Exported:
    """x[b, s, 4] -> sum over s: requests join only when their s agree."""

    def seq(x: Any) -> Any:
        return x.sum(axis=1) * 2.0

    b, s = sv.symbolic_shape("b, s")
    return sv.export(sv.jit(seq))(sv.ShapeDtypeStruct((b, s, 4), F32))


def scaled() -> Exported:
    """(n, x[b, 4]) -> x * n, with n a dimension passed as an integer."""

    def scaled(n: Any, x: Any) -> Any:
        return x * snp.asarray(n).astype(F32)

    b, n = sv.symbolic_shape("b, n")
    return sv.export(sv.jit(scaled))(n, sv.ShapeDtypeStruct((b, 4), F32))


@contextmanager
def live_server(app: Any) -> Iterator[str]:
    """Serve the ASGI ``app`` with uvicorn in a thread; yields ``host:port``."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, 60)
        yield f"127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(60)
        sock.close()


def http_request(
    address: str, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """One request on a fresh connection to ``host:port``: status, headers, body."""
    host, port = address.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def wait_for(condition: Callable[[], Any], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        time.sleep(0.01)


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample of a Prometheus text page (0 when absent)."""
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        key, _, rest = head.partition("{")
        got = ",".join(sorted(rest.rstrip("}").split(","))) if rest else ""
        if key == name and got == want:
            return float(value)
    return 0.0
