"""Faults against ``shapevm serve`` in its own process: clients that disconnect mid-request,
malformed requests interleaved with good ones, and SIGTERM under load. Nothing answered
200 may be wrong or lost, and the server must neither crash nor hang."""

from __future__ import annotations

import gzip
import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.serve import helpers
from tests.tools.tooling import require

require("starlette")
require("uvicorn")


EXP = helpers.mlp()


class ServerProcess:
    """``python -m shapevm serve`` on a free port, its address read from its stderr."""

    def __init__(self, *args: str | Path) -> None:
        cmd = [sys.executable, "-m", "shapevm", "serve", "--port", "0", *map(str, args)]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            found = re.search(r"shapevm serve: http://127\.0\.0\.1:(\d+)", line)
            if found:
                self.port = int(found.group(1))
                break
        else:
            raise AssertionError(f"the server did not start: {''.join(self.lines)}")
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def request(self, method: str, path: str, body: bytes = b"", headers: Any = None) -> Any:
        return helpers.http_request(f"127.0.0.1:{self.port}", method, path, body, headers)

    def metric(self, name: str, **labels: str) -> float:
        return helpers.metric(self.request("GET", "/metrics")[2].decode(), name, **labels)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(60)


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("faults") / "mlp.svbc"
    EXP.save(path)
    helpers.elementwise().save(path.with_name("ew.svbc"))
    return path


@pytest.fixture
def interpreted(model_file: Path) -> Iterator[ServerProcess]:
    # ew's requests may be joined: a lone one waits a second for others
    ew = model_file.with_name("ew.svbc")
    flags = ["--no-jit", "--max-body-mb", "0.25", "--max-batch-delay-ms", "1000"]
    server = ServerProcess(model_file, ew, *flags)
    yield server
    assert server.stop() == 0, "".join(server.lines)
    assert server.lines[-1] == "shapevm serve: stopped\n"


def binary_request(x: np.ndarray, output: str = "output_0") -> tuple[bytes, dict[str, str]]:
    header = json.dumps(
        {
            "inputs": [
                {"name": "x", "shape": list(x.shape), "datatype": "FP32",
                 "parameters": {"binary_data_size": x.nbytes}}
            ],
            "outputs": [{"name": output, "parameters": {"binary_data": True}}],
        }
    ).encode()  # fmt: skip
    return header + x.tobytes(), {"Inference-Header-Content-Length": str(len(header))}


def output_of(status: int, headers: dict[str, str], body: bytes) -> np.ndarray:
    assert status == 200, body[:300]
    n = int(headers["inference-header-content-length"])
    (out,) = json.loads(body[:n])["outputs"]
    return np.frombuffer(body[n:], np.float32).reshape(out["shape"])


def test_clients_that_disconnect_mid_request(interpreted: ServerProcess) -> None:
    def head(model: str, body: bytes, headers: dict[str, str]) -> bytes:
        return (
            f"POST /v2/models/{model}/infer HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}"
            f"\r\nInference-Header-Content-Length: {headers['Inference-Header-Content-Length']}"
            "\r\n\r\n"
        ).encode()

    x = np.ones((2, 16), np.float32)
    body, headers = binary_request(x)
    with socket.create_connection(("127.0.0.1", interpreted.port)) as s:  # half a body
        s.sendall(head("mlp", body, headers) + body[:40])
    ew_body, ew_headers = binary_request(np.ones((1, 4), np.float32), output="output_0")
    with socket.create_connection(("127.0.0.1", interpreted.port)) as s:  # gone while queued
        s.sendall(head("ew", ew_body, ew_headers) + ew_body)
        time.sleep(0.2)
    gone = "shapevm_inference_failures_total"
    helpers.wait_for(lambda: interpreted.metric(gone, model="ew", reason="disconnected"), 30)
    helpers.wait_for(lambda: interpreted.metric(gone, model="mlp", reason="disconnected"), 30)
    y = output_of(*interpreted.request("POST", "/v2/models/mlp/infer", body, headers))
    assert y.tobytes() == EXP.call(x).tobytes()
    assert interpreted.metric("shapevm_batch_requests_count", model="ew") == 0  # never ran


def _bad_requests(rng: np.random.Generator) -> list[tuple[str, bytes, dict[str, str]]]:
    x = rng.standard_normal((2, 16)).astype(np.float32)
    good, headers = binary_request(x)
    n = headers["Inference-Header-Content-Length"]
    wrong = json.dumps({"inputs": [{"name": "x", "shape": [2, 16], "datatype": "INT32",
                                    "data": [1] * 32}]}).encode()  # fmt: skip
    return [
        ("mlp", b"{", {}),
        ("mlp", wrong, {}),
        ("mlp", good[:-8], headers),
        ("mlp", good, {"Inference-Header-Content-Length": str(int(n) + 3)}),
        ("mlp", good, {"Inference-Header-Content-Length": "-1"}),
        ("nope", good, headers),
        ("mlp", b"\x1f\x8b garbage", {"Content-Encoding": "gzip"}),
        ("mlp", gzip.compress(b" " * 300_000), {"Content-Encoding": "gzip"}),
        ("mlp", b"[" + b"0," * 200_000 + b"0]", {}),
    ]


def test_malformed_requests_interleaved_with_good_ones(interpreted: ServerProcess) -> None:
    rng = np.random.default_rng(5)
    bad = _bad_requests(rng)
    jobs: list[tuple[np.ndarray | None, str, bytes, dict[str, str]]] = []
    for i in range(180):
        if i % 2:
            model, body, headers = bad[i // 2 % len(bad)]
            jobs.append((None, model, body, headers))
        else:
            x = rng.standard_normal((int(rng.integers(1, 9)), 16)).astype(np.float32)
            jobs.append((x, "mlp", *binary_request(x)))

    def send(job: Any) -> tuple[Any, Any]:
        x, model, body, headers = job
        return x, interpreted.request("POST", f"/v2/models/{model}/infer", body, headers)

    with ThreadPoolExecutor(8) as pool:
        for x, (status, headers, body) in pool.map(send, jobs):
            if x is None:
                assert status == 400 and json.loads(body)["error"], body[:200]
            else:
                assert output_of(status, headers, body).tobytes() == EXP.call(x).tobytes()
    assert (
        interpreted.metric("shapevm_inference_failures_total", model="mlp", reason="bad_request")
        > 0
    )
    assert interpreted.request("GET", "/v2/health/ready")[0] == 200


def test_sigterm_under_load_finishes_what_is_in_flight(model_file: Path) -> None:
    flags = ["--max-batch-delay-ms", "1500", "--max-batch-size", "64"]
    server = ServerProcess(model_file, *flags)
    rng = np.random.default_rng(9)
    stop = threading.Event()
    answered: list[tuple[np.ndarray, np.ndarray]] = []
    refused: list[str] = []

    def load() -> None:
        while not stop.is_set():
            x = rng.standard_normal((int(rng.integers(1, 9)), 16)).astype(np.float32)
            try:
                status, headers, body = server.request(
                    "POST", "/v2/models/mlp/infer", *binary_request(x)
                )
            except OSError as exc:  # refused once the server stops listening
                refused.append(type(exc).__name__)
                time.sleep(0.01)
                continue
            if status == 503:
                refused.append("503")
                continue
            answered.append((x, output_of(status, headers, body)))

    try:
        workers = [threading.Thread(target=load) for _ in range(6)]
        for w in workers:
            w.start()
        helpers.wait_for(lambda: len(answered) >= 12, 60)
        # These wait in the batcher (1.5 s for others to join) when SIGTERM arrives.
        in_flight = [rng.standard_normal((2, 16)).astype(np.float32) for _ in range(4)]
        with ThreadPoolExecutor(4) as pool:
            futures = [
                pool.submit(server.request, "POST", "/v2/models/mlp/infer", *binary_request(x))
                for x in in_flight
            ]
            time.sleep(0.4)
            server.proc.send_signal(signal.SIGTERM)
            finished = [output_of(*f.result(60)) for f in futures]
        assert server.proc.wait(60) == 0, "".join(server.lines)
    finally:
        stop.set()
        server.stop()
    for w in workers:
        w.join(60)
    for x, y in [*answered, *zip(in_flight, finished, strict=True)]:
        ref = EXP.call(x)
        assert np.allclose(y, ref, rtol=1e-5, atol=1e-5)
    assert not any("Traceback" in line for line in server.lines), "".join(server.lines)
    assert server.lines[-1] == "shapevm serve: stopped\n"
