"""Load test of ``shapevm serve``: concurrent clients sending W1 requests of random batch sizes.

Configurations: shapevm (the JIT) with and without dynamic batching, and, when ``onnx`` and
``onnxruntime`` are installed, ONNX Runtime behind the same server code (``--runtime
onnxruntime``) with and without, and shapevm on the very same ``.onnx`` file through its
importer (batching as its check decides). Each runs as ``python -m shapevm serve`` on
127.0.0.1 and is warmed with every request of the payload pool once (not measured).
Then ``--clients`` concurrent clients (greenlets on keep-alive connections, binary tensor
data) load each server in turn, ``--slice`` seconds at a time, until each has had
``--duration`` seconds (or ``--max-requests`` requests): a change in the machine's load
falls on every configuration alike. Every response is checked against the interpreter
(``Exported.call`` on the same input, max |y - ref| / max |ref| <= 1e-4); a wrong or failed
response is counted and reported, never hidden.

Printed per configuration: requests, throughput (requests and rows per second), p50/p99
latency, mean requests per model call (the server's ``/metrics``), the server's CPU time
per request (user + system, from ``/proc``: on a shared machine it moves much less than the
wall-clock figures), errors, the server's RSS after the warm-up and after the load; then
throughput and p99 as ratios to the first configuration, all measured in the same run.

    python benchmarks/serve_bench.py [--duration 20] [--clients 32] [--batch-sizes 1,3,8,17,32,64]

Needs ``pip install -e '.[test,bench]'`` (geventhttpclient, from ``tritonclient[http]``,
drives the clients). Network traffic goes to 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from shapevm.models import traced
from shapevm.models import workloads as wl


@dataclass
class Config:
    label: str
    model: str  # file name in the work directory
    flags: list[str]


@dataclass
class Result:
    label: str
    requests: int = 0
    rows: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    per_call: float = 0.0
    fallbacks: float = 0.0
    hit_rate: float = float("nan")
    rss_mib: tuple[float, float] = (0.0, 0.0)
    exit_code: int | None = None
    sent: int = 0
    cpu_s: float = 0.0  # the server's CPU time during the measured slices

    def count_error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1


class Server:
    """``python -m shapevm serve`` in its own process, on a free port of 127.0.0.1."""

    def __init__(self, model: Path, flags: list[str]) -> None:
        cmd = [sys.executable, "-m", "shapevm", "serve", str(model), "--port", "0", *flags]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        assert self.proc.stderr is not None
        self.banner: list[str] = []
        for line in self.proc.stderr:
            self.banner.append(line.rstrip())
            found = re.search(r"http://127\.0\.0\.1:(\d+)", line)
            if found:
                self.port = int(found.group(1))
                return
        raise RuntimeError("the server did not start:\n" + "\n".join(self.banner))

    def cpu_seconds(self) -> float:
        """User + system CPU time of the server process so far."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def payloads(exp: Any, sizes: list[int], count: int, seed: int) -> list[tuple[bytes, dict, Any]]:
    """``count`` binary requests of random batch sizes, with the interpreter's answers."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        x = wl.make_input("W1", (int(rng.choice(sizes)), 256), seed=int(rng.integers(1 << 30)))
        header = json.dumps(
            {
                "inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                            "parameters": {"binary_data_size": x.nbytes}}],
                "parameters": {"binary_data_output": True},
            }
        ).encode()  # fmt: skip
        headers = {"Inference-Header-Content-Length": str(len(header))}
        out.append((header + x.tobytes(), headers, exp.call(x)))
    return out


def check(body: bytes, length: str | None, ref: np.ndarray) -> str:
    """'' when the response holds ``ref`` up to float32 rounding, else what is wrong."""
    if length is None:
        return "no binary output"
    n = int(length)
    (out,) = json.loads(body[:n])["outputs"]
    y = np.frombuffer(body[n:], np.float32).reshape(out["shape"])
    if y.shape != ref.shape:
        return "wrong shape"
    err = float(np.max(np.abs(y - ref))) / max(float(np.max(np.abs(ref))), 1e-30)
    return "" if err <= 1e-4 else "wrong values"


def warm_up(server: Server, client: Any, pool: list, result: Result) -> None:
    """Every payload once, checked, not measured; the RSS after it."""
    for body, headers, ref in pool:
        response = client.post("/v2/models/w1/infer", body=body, headers=headers)
        data = response.read()
        if response.status_code != 200:
            raise RuntimeError(f"{result.label}: warm-up request refused: {data[:300]!r}")
        wrong = check(data, response.get("inference-header-content-length"), ref)
        if wrong:
            raise RuntimeError(f"{result.label}: warm-up response: {wrong}")
    result.rss_mib = (server.rss_mib(), 0.0)


def load_slice(
    server: Server, client: Any, pool: list, args: argparse.Namespace, result: Result,
    seconds: float,
) -> None:  # fmt: skip
    """``args.clients`` clients for ``seconds`` (or until the request cap)."""
    import gevent

    cpu = server.cpu_seconds()
    start = time.perf_counter()
    deadline = start + seconds

    def worker(k: int) -> None:
        rng = np.random.default_rng(1000 * len(result.latencies) + k)
        while time.perf_counter() < deadline and result.sent < args.max_requests:
            result.sent += 1
            body, headers, ref = pool[int(rng.integers(len(pool)))]
            t0 = time.perf_counter()
            try:
                response = client.post("/v2/models/w1/infer", body=body, headers=headers)
                data = response.read()
            except Exception as exc:  # counted, and the client goes on
                result.count_error(type(exc).__name__)
                continue
            latency = time.perf_counter() - t0
            if response.status_code != 200:
                result.count_error(f"HTTP {response.status_code}")
                continue
            wrong = check(data, response.get("inference-header-content-length"), ref)
            if wrong:
                result.count_error(wrong)
                continue
            result.requests += 1
            result.rows += ref.shape[0]
            result.latencies.append(latency)

    gevent.joinall([gevent.spawn(worker, k) for k in range(args.clients)])
    result.seconds += time.perf_counter() - start
    result.cpu_s += server.cpu_seconds() - cpu


def finish(server: Server, client: Any, result: Result) -> None:
    """The RSS after the load and the server's own counts."""
    result.rss_mib = (result.rss_mib[0], server.rss_mib())
    metrics = client.get("/metrics").read().decode()
    calls = _metric(metrics, 'shapevm_batch_requests_count{model="w1"}')
    result.per_call = _metric(metrics, 'shapevm_batch_requests_sum{model="w1"}') / max(calls, 1)
    result.fallbacks = sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("shapevm_batch_fallbacks_total{")
    )
    result.hit_rate = _metric(metrics, "shapevm_jit_hit_rate")


def _metric(text: str, key: str) -> float:
    for line in text.splitlines():
        if line.startswith(key + " "):
            return float(line.rsplit(" ", 1)[1])
    return float("nan")


def measure(work: Path, chosen: list[Config], pool: list, args: argparse.Namespace) -> list[Result]:
    """Start every server, warm each up, then load them in turn, ``--slice`` seconds at a
    time, until each has had ``--duration`` seconds: a change in the machine's load falls on
    every configuration alike."""
    from geventhttpclient import HTTPClient

    servers: list[tuple[Server, Any, Result]] = []
    try:
        for config in chosen:
            server = Server(work / config.model, config.flags)
            print(f"{config.label}: {server.banner[0]}", flush=True)
            client = HTTPClient(
                "127.0.0.1", server.port, concurrency=args.clients, network_timeout=60,
                connection_timeout=10,
            )  # fmt: skip
            servers.append((server, client, Result(config.label)))
            warm_up(server, client, pool, servers[-1][2])
        slices = max(1, round(args.duration / args.slice))
        for _ in range(slices):
            for server, client, result in servers:
                load_slice(server, client, pool, args, result, args.duration / slices)
        for server, client, result in servers:
            finish(server, client, result)
    finally:
        for server, client, result in servers:
            client.close()
            result.exit_code = server.stop()
    return [result for _, _, result in servers]


def configs(args: argparse.Namespace, onnx_ok: bool) -> list[Config]:
    batch = ["--max-batch-size", str(args.max_batch_size),
             "--max-batch-delay-ms", str(args.max_batch_delay_ms)]  # fmt: skip
    common = ["--max-queue", "1024"]
    out = [
        Config("shapevm JIT, no batching", "w1.svbc", ["--max-batch-size", "1", *common]),
        Config("shapevm JIT, dynamic batching", "w1.svbc", [*batch, *common]),
    ]
    if onnx_ok:
        ort = ["--runtime", "onnxruntime", *common]
        out += [
            Config("ONNX Runtime, no batching", "w1.onnx", ["--max-batch-size", "1", *ort]),
            Config("ONNX Runtime, dynamic batching", "w1.onnx", [*batch, *ort]),
            # the same graph imported: shapevm and ONNX Runtime on exactly one model
            Config("shapevm JIT, the .onnx imported", "w1.onnx", [*batch, *common]),
        ]
    return out


def write_models(work: Path) -> tuple[Any, bool]:
    weights = wl.make_weights("W1")
    exp = traced.export_workload("W1", weights)
    exp.save(work / "w1.svbc")
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401

        from shapevm.tools.bench.onnx_models import build_onnx
    except ImportError:
        return exp, False
    (work / "w1.onnx").write_bytes(build_onnx("W1", weights).SerializeToString())
    return exp, True


def report(results: list[Result], args: argparse.Namespace) -> None:
    print(
        f"\nW1 ({args.clients} clients, {args.duration:g} s per server in turns of "
        f"{args.slice:g} s, batch sizes {args.batch_sizes}; load average before: "
        f"{args.load_before}; servers and clients share this machine's cores)\n"
    )
    print("| server | requests | req/s | rows/s | p50 ms | p99 ms | requests/call "
          "| server CPU ms/request | errors | RSS MiB (warm -> end) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        lat = sorted(r.latencies) or [float("nan")]
        p50 = statistics.median(lat) * 1e3
        p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))] * 1e3
        errors = ", ".join(f"{k}: {v}" for k, v in r.errors.items()) or "0"
        print(
            f"| {r.label} | {r.requests} | {r.requests / r.seconds:.0f} | "
            f"{r.rows / r.seconds:.0f} | {p50:.2f} | {p99:.2f} | {r.per_call:.2f} | "
            f"{r.cpu_s / max(r.requests, 1) * 1e3:.2f} | {errors} | "
            f"{r.rss_mib[0]:.0f} -> {r.rss_mib[1]:.0f} |"
        )
    base = results[0]
    print(f"\nratios to '{base.label}' (same run):")
    for r in results[1:]:
        throughput = (r.requests / r.seconds) / max(base.requests / base.seconds, 1e-9)
        print(f"  {r.label}: throughput x{throughput:.2f}, p99 x{_p99(r) / _p99(base):.2f}")
    for r in results:
        extra = f", JIT hit rate {r.hit_rate:.3f}" if r.hit_rate == r.hit_rate else ""
        print(f"  {r.label}: server exit {r.exit_code}, batch fallbacks {r.fallbacks:.0f}{extra}")


def _load() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "unknown"


def _p99(r: Result) -> float:
    lat = sorted(r.latencies) or [float("nan")]
    return lat[min(len(lat) - 1, int(0.99 * len(lat)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of load")
    parser.add_argument("--clients", type=int, default=32, help="concurrent clients")
    parser.add_argument("--max-requests", type=int, default=200_000, help="requests per server")
    parser.add_argument("--batch-sizes", default="1,3,8,17,32,64", help="W1 rows per request")
    parser.add_argument("--pool", type=int, default=128, help="distinct payloads")
    parser.add_argument("--max-batch-size", type=int, default=64)
    parser.add_argument("--max-batch-delay-ms", type=float, default=2.0)
    parser.add_argument("--slice", type=float, default=2.0, help="seconds per turn of load")
    parser.add_argument("--only", default="", help="run only configurations containing this")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.batch_sizes.split(",")]
    args.load_before = _load()
    with tempfile.TemporaryDirectory(prefix="serve-bench-") as tmp:
        work = Path(tmp)
        exp, onnx_ok = write_models(work)
        if not onnx_ok:
            print("onnx/onnxruntime not installed: ONNX Runtime rows left out")
        pool = payloads(exp, sizes, args.pool, seed=0)
        chosen = [c for c in configs(args, onnx_ok) if args.only in c.label]
        results = measure(work, chosen, pool, args)
        if results:
            report(results, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
