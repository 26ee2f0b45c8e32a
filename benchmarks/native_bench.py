"""Native kernels against NumPy on the BENCHMARKS.md workload shapes, plus compile times.

Run with ``python benchmarks/native_bench.py`` (``--quick`` for fewer repetitions,
``--only gemm,conv`` for some sections). Prints markdown tables. Every row times the numba
kernel and the NumPy code a user would write for the same result in the same run,
interleaved round by round so that a noisy neighbour slows both (each side's calls start
once the other's threads sleep: `settle`), and
reports medians of single calls in milliseconds and the ratio NumPy / native (above 1:
native is faster).

``--cpu`` measures per-core efficiency instead: one thread for OpenBLAS and numba, and CPU
time per call (``time.process_time``) rather than wall time, which on a shared machine stays
meaningful when the neighbours are busy (wall-time medians there include waits for a time
slice of 8-40 ms).

Compile times of generated kernels: the first in a fresh process (numba's own start-up
included), the later ones (distinct DAGs, same process), and a second process that loads the
same kernels from the disk cache; CPU seconds are shown next to wall seconds because on a
shared machine wall time also counts the neighbours.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
sys.path.insert(0, SRC)  # this checkout, even if another one is installed
CPU_MODE = "--cpu" in sys.argv
if CPU_MODE:  # before NumPy and numba start their thread pools
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ[var] = "1"
CLOCK = time.process_time if CPU_MODE else time.perf_counter

import numpy as np  # noqa: E402

Array = np.ndarray[Any, Any]
SECTIONS = ["gemm", "w1", "pool", "rowops", "attention", "conv", "compile"]


SETTLE_MAX_S = 0.5
"""Longest wait before each candidate's calls for the process's other threads to sleep."""


def _others_running() -> bool:
    """Whether a thread of this process other than the calling one is running (Linux)."""
    me = str(threading.get_native_id())
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return False
    for tid in tasks:
        if tid == me:
            continue
        try:
            with open(f"/proc/self/task/{tid}/stat", encoding="ascii") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state == "R":
            return True
    return False


def settle() -> None:
    """Wait until the other threads of the process sleep, then start fresh samples.

    OpenBLAS's worker spins for a while after a product on two threads, and numba's
    kernels keep off the pool while another thread of the process holds a core
    (`shapevm.jit.native._threads`); a kernel timed right after NumPy's would measure
    that, not itself. So each side is timed as in a program that runs only it."""
    deadline = time.monotonic() + SETTLE_MAX_S
    while _others_running() and time.monotonic() < deadline:
        time.sleep(0.005)
    from shapevm.jit.native import _threads

    _threads.forget_samples()


def compare(cands: dict[str, Callable[[], object]], rounds: int, per: int) -> dict[str, float]:
    """Median milliseconds per call of each candidate, interleaved in rounds."""
    for f in cands.values():
        for _ in range(3):
            f()
    times: dict[str, list[float]] = {k: [] for k in cands}
    for _ in range(rounds):
        for name, f in cands.items():
            settle()
            for _ in range(per):
                t = CLOCK()
                f()
                times[name].append(CLOCK() - t)
    return {k: statistics.median(v) * 1e3 for k, v in times.items()}


def table(title: str, header: list[str], rows: list[list[str]]) -> None:
    print(f"\n### {title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    sys.stdout.flush()


def ms(v: float) -> str:
    return f"{v:.4f}" if v < 1 else f"{v:.3f}"


def ratio(numpy_ms: float, native_ms: float) -> str:
    return f"**{numpy_ms / native_ms:.2f}x**"


def gelu_tanh(v: Array) -> Array:
    c = np.float32(math.sqrt(2 / math.pi))
    return 0.5 * v * (1 + np.tanh(c * (v + np.float32(0.044715) * v**3)))


def layer_norm_np(x: Array, g: Array, b: Array, eps: float = 1e-5) -> Array:
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * g + b


def softmax_np(x: Array) -> Array:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def linear(rng: np.random.Generator, k: int, n: int) -> tuple[Array, Array]:
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    return w, (0.1 * rng.standard_normal(n)).astype(np.float32)


# ----------------------------------------------------------------------------- sections

W1_ROWS = [1, 3, 8, 17, 32, 64]
W1_LAYERS = [(256, 1024), (1024, 1024), (1024, 256)]


def bench_gemm(nat: Any, rounds: int, per: int) -> None:
    rng = np.random.default_rng(0)
    rows = []
    for k, n in W1_LAYERS:
        w, _ = linear(rng, k, n)
        packed = nat.pack_weights(w)
        for m in W1_ROWS:
            x = rng.standard_normal((m, k)).astype(np.float32)
            out = np.empty((m, n), np.float32)
            r = compare(
                {
                    "numpy": lambda: np.matmul(x, w, out=out),
                    "native": lambda: nat.packed_matmul(x, packed, out),
                },
                rounds,
                per,
            )
            rows.append(
                [
                    f"{k}x{n}",
                    str(m),
                    ms(r["numpy"]),
                    ms(r["native"]),
                    ratio(r["numpy"], r["native"]),
                ]
            )
    table(
        "Dense x @ w (W1 shapes): np.matmul(out=) vs packed_matmul",
        ["K x N", "M", "NumPy ms", "native ms", "NumPy/native"],
        rows,
    )


def bench_w1(nat: Any, rounds: int, per: int) -> None:
    """The whole W1 MLP: three dense layers, residual, layer norm."""
    rng = np.random.default_rng(2)
    (w1, b1), (w2, b2), (w3, b3) = (linear(rng, k, n) for k, n in W1_LAYERS)
    g = (1 + 0.1 * rng.standard_normal(256)).astype(np.float32)
    beta = (0.1 * rng.standard_normal(256)).astype(np.float32)
    p1, p2, p3 = nat.pack_weights(w1, b1), nat.pack_weights(w2, b2), nat.pack_weights(w3, b3)
    rows = []
    for m in W1_ROWS:
        x = rng.standard_normal((m, 256)).astype(np.float32)
        h1 = np.empty((m, 1024), np.float32)
        h2 = np.empty((m, 1024), np.float32)
        h3 = np.empty((m, 256), np.float32)
        y = np.empty((m, 256), np.float32)

        def numpy_w1() -> Array:
            a = np.maximum(x @ w1 + b1, 0)
            a = gelu_tanh(a @ w2 + b2)
            return layer_norm_np(a @ w3 + b3 + x, g, beta)

        def native_w1() -> Array:
            nat.packed_matmul(x, p1, h1, "relu")
            nat.packed_matmul(h1, p2, h2, "gelu_tanh")
            nat.packed_matmul(h2, p3, h3)
            return nat.layer_norm(h3, g, beta, 1e-5, y, residual=x)

        err = float(np.max(np.abs(native_w1() - numpy_w1())) / np.max(np.abs(numpy_w1())))
        r = compare({"numpy": numpy_w1, "native": native_w1}, rounds, per)
        rows.append(
            [str(m), ms(r["numpy"]), ms(r["native"]), ratio(r["numpy"], r["native"]), f"{err:.1e}"]
        )
    table(
        "W1 forward (3 dense + residual + layer norm), preallocated buffers",
        ["b", "NumPy ms", "native ms", "NumPy/native", "max err / max |y|"],
        rows,
    )


def bench_rowops(nat: Any, rounds: int, per: int) -> None:
    rng = np.random.default_rng(3)
    rows = []
    g = np.ones(256, np.float32)
    b = np.zeros(256, np.float32)
    for shape in [(3, 256), (64, 256), (4 * 128, 256), (200, 256)]:
        x = rng.standard_normal(shape).astype(np.float32)
        res = rng.standard_normal(shape).astype(np.float32)
        out = np.empty_like(x)
        r = compare(
            {
                "numpy": lambda: layer_norm_np(x + res, g, b),
                "native": lambda: nat.layer_norm(x, g, b, 1e-5, out, residual=res),
            },
            rounds,
            per,
        )
        rows.append(
            [
                "layer_norm(x + r)",
                str(list(shape)),
                ms(r["numpy"]),
                ms(r["native"]),
                ratio(r["numpy"], r["native"]),
            ]
        )
    for shape in [(1, 4, 16, 16), (2, 4, 64, 64), (4, 4, 128, 128), (1, 4, 200, 200)]:
        x = rng.standard_normal(shape).astype(np.float32)
        out = np.empty_like(x)
        r = compare(
            {
                "numpy": lambda: softmax_np(x / np.float32(8)),
                "native": lambda: nat.softmax_rows(x, out, 0.125),
            },
            rounds,
            per,
        )
        rows.append(
            [
                "softmax_rows",
                str(list(shape)),
                ms(r["numpy"]),
                ms(r["native"]),
                ratio(r["numpy"], r["native"]),
            ]
        )
    for shape in [(16, 1024), (128, 1024), (512, 1024)]:
        x = rng.standard_normal(shape).astype(np.float32)
        bias = rng.standard_normal(1024).astype(np.float32)
        out = np.empty_like(x)
        r = compare(
            {
                "numpy": lambda: gelu_tanh(x + bias),
                "native": lambda: nat.bias_act(x, bias, "gelu_tanh", out),
            },
            rounds,
            per,
        )
        rows.append(
            [
                "bias_act gelu_tanh",
                str(list(shape)),
                ms(r["numpy"]),
                ms(r["native"]),
                ratio(r["numpy"], r["native"]),
            ]
        )
    table("Row kernels", ["op", "shape", "NumPy ms", "native ms", "NumPy/native"], rows)


def bench_attention(nat: Any, rounds: int, per: int) -> None:
    rng = np.random.default_rng(4)
    rows = []
    for bsz, s in [(1, 16), (1, 37), (2, 64), (4, 128), (1, 200)]:
        qkv = rng.standard_normal((bsz, s, 768)).astype(np.float32)
        qkv5 = qkv.reshape(bsz, s, 3, 4, 64).transpose(2, 0, 3, 1, 4)
        q, k, v = qkv5[0], qkv5[1], qkv5[2]
        o = np.empty((bsz, s, 4, 64), np.float32)
        o_view = o.transpose(0, 2, 1, 3)

        def numpy_att() -> Array:
            att = softmax_np((q @ k.transpose(0, 1, 3, 2)) / np.float32(8.0))
            return (att @ v).transpose(0, 2, 1, 3).reshape(bsz, s, 256)

        def native_att() -> Array:
            nat.attention(q, k, v, o_view, 0.125)
            return o.reshape(bsz, s, 256)

        err = float(np.max(np.abs(native_att() - numpy_att())) / np.max(np.abs(numpy_att())))
        r = compare({"numpy": numpy_att, "native": native_att}, rounds, per)
        rows.append(
            [
                f"({bsz}, {s})",
                ms(r["numpy"]),
                ms(r["native"]),
                ratio(r["numpy"], r["native"]),
                f"{err:.1e}",
            ]
        )
    table(
        "W3 attention (4 heads of 64, from the fused qkv views to [b, s, 256])",
        ["(b, s)", "NumPy ms", "native ms", "NumPy/native", "max err / max |y|"],
        rows,
    )


def im2col_conv(x: Array, w: Array, b: Array, stride: int) -> Array:
    """Conv3x3 (pad 1) + bias + relu as NumPy users write it: im2col and one matmul."""
    bsz, c, h, wd = x.shape
    co = w.shape[0]
    ho, wo = (h - 1) // stride + 1, (wd - 1) // stride + 1
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.empty((bsz, c, 3, 3, ho, wo), np.float32)
    for ky in range(3):
        for kx in range(3):
            cols[:, :, ky, kx] = xp[
                :,
                :,
                ky : ky + stride * (ho - 1) + 1 : stride,
                kx : kx + stride * (wo - 1) + 1 : stride,
            ]
    y = w.reshape(co, -1) @ cols.reshape(bsz, c * 9, ho * wo)
    return np.maximum(y + b[:, None], 0).reshape(bsz, co, ho, wo)


def bench_conv(nat: Any, rounds: int, per: int) -> None:
    rng = np.random.default_rng(5)
    layers = [(3, 32, 1), (32, 32, 2), (32, 64, 1)]
    weights = []
    for c_in, c_out, _ in layers:
        w = (rng.standard_normal((c_out, c_in, 3, 3)) / np.sqrt(9 * c_in)).astype(np.float32)
        weights.append((w, (0.1 * rng.standard_normal(c_out)).astype(np.float32)))
    packs = [nat.pack_conv3x3(w, b) for w, b in weights]
    rows = []
    for bsz, h, wd in [(1, 64, 64), (1, 96, 128), (4, 64, 64), (2, 128, 128), (1, 224, 224)]:
        x = rng.standard_normal((bsz, 3, h, wd)).astype(np.float32)
        total_np = total_nat = 0.0
        for (c_in, c_out, stride), (w, b), p in zip(layers, weights, packs, strict=True):
            ho, wo = nat.conv_out_hw(x.shape[2], x.shape[3], stride)
            out = np.empty((bsz, c_out, ho, wo), np.float32)
            r = compare(
                {
                    "numpy": lambda: im2col_conv(x, w, b, stride),
                    "native": lambda: nat.conv2d_3x3(x, p, out, stride, "relu"),
                },
                rounds,
                per,
            )
            total_np += r["numpy"]
            total_nat += r["native"]
            rows.append(
                [
                    f"{bsz}x{h}x{wd}",
                    f"{c_in}->{c_out} s{stride}",
                    ms(r["numpy"]),
                    ms(r["native"]),
                    ratio(r["numpy"], r["native"]),
                ]
            )
            x = out
        pooled = np.empty((bsz, 64), np.float32)
        r = compare(
            {"numpy": lambda: x.mean((2, 3)), "native": lambda: nat.global_avg_pool(x, pooled)},
            rounds,
            per,
        )
        total_np += r["numpy"]
        total_nat += r["native"]
        rows.append(
            [
                f"{bsz}x{h}x{wd}",
                "global avg pool",
                ms(r["numpy"]),
                ms(r["native"]),
                ratio(r["numpy"], r["native"]),
            ]
        )
        rows.append(
            [f"{bsz}x{h}x{wd}", "**sum**", ms(total_np), ms(total_nat), ratio(total_np, total_nat)]
        )
    table(
        "W2 convolutions (3x3, pad 1, + bias + relu) vs NumPy im2col + matmul",
        ["b x h x w", "layer", "NumPy ms", "native ms", "NumPy/native"],
        rows,
    )


_COMPILE_PROGRAM = r"""
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
sys.path.insert(0, sys.argv[2])
from shapevm.jit.native import codegen
from shapevm.jit.native.expr import binary, const, input, unary
imported = (time.perf_counter() - t0, time.process_time() - c0)
x, y = input(0), input(1)
dags = [
    (unary("exp", x) * y + binary("maximum", x, const(0.0)), None),
    (unary("tanh", x) + y, None),
    (x * y + 1.0, "sum"),
    (binary("pow", unary("abs", x) + 0.5, y), None),
    (unary("sigmoid", x - y) * x, "max"),
    (unary("log", unary("abs", x) + 1.0) / y, "mean"),
    (x + y, None),
    (x * y - x, None),
    (binary("maximum", x, y) * 2.0, None),
    (unary("sqrt", unary("abs", x)) * unary("cos", y), None),
    (unary("erf", x) - y * 3.0, "min"),
]
rows = []
for e, reduce in dags:
    t, c = time.perf_counter(), time.process_time()
    k = codegen.compile_fused(e, ["float32", "float32"], [2, 1], reduce, cache_dir=sys.argv[1])
    rows.append((k.origin, time.perf_counter() - t, time.process_time() - c))
print(json.dumps({"import": imported, "kernels": rows}))
"""


def _compile_run(cache_dir: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", _COMPILE_PROGRAM, cache_dir, SRC],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def bench_compile(nat: Any, rounds: int, per: int) -> None:
    with tempfile.TemporaryDirectory() as cache_dir:
        first = _compile_run(cache_dir)
        second = _compile_run(cache_dir)
    rows = []
    for name, run in (("fresh cache", first), ("second process", second)):
        k = run["kernels"]
        origins = sorted({o for o, _, _ in k})
        later_wall = statistics.median(w for _, w, _ in k[1:])
        later_cpu = statistics.median(c for _, _, c in k[1:])
        rows.append(
            [
                name,
                "/".join(origins),
                f"{run['import'][0]:.3f} / {run['import'][1]:.3f}",
                f"{k[0][1]:.3f} / {k[0][2]:.3f}",
                f"{later_wall:.3f} / {later_cpu:.3f}",
                f"{max(w for _, w, _ in k[1:]):.3f}",
            ]
        )
    table(
        f"Generated kernels: {len(first['kernels'])} distinct DAGs, seconds (wall / CPU)",
        [
            "process",
            "origin",
            "import numba + shapevm",
            "first kernel",
            "later kernels (median)",
            "later (max)",
        ],
        rows,
    )


def bench_pool(nat: Any, rounds: int, per: int) -> None:
    """The dense layers of W1 as compiled regions call them (`entries.Dense`), three in a
    row as in a call, on the calling thread and on numba's pool; and the launch of an empty
    parallel region right after another (workers spinning) and 1 ms after (asleep)."""
    from numba import njit, prange

    from shapevm.jit.native import entries

    rng = np.random.default_rng(3)
    layers = [entries.Dense(*linear(rng, k, n)) for k, n in W1_LAYERS]
    for d in layers:
        d.warm()
    rows = []
    for m in (1, 3, 8, 17, 64):
        xs = [rng.standard_normal((m, d.k)).astype(np.float32) for d in layers]
        outs = [np.empty((m, d.n), np.float32) for d in layers]

        def chain(pool: bool, xs: list[Array] = xs, outs: list[Array] = outs) -> None:
            for d, x, out in zip(layers, xs, outs, strict=True):
                fn = d._tiles_parallel if pool else d._tiles
                fn(x, d._scratch(x.shape[0]), d.panels, d.bias, out, d.act)

        r = compare({"one": lambda: chain(False), "pool": lambda: chain(True)}, rounds, per)
        rows.append([str(m), ms(r["one"]), ms(r["pool"]), ratio(r["one"], r["pool"])])
    table(
        "W1's three dense layers: calling thread vs numba's pool (ms per call)",
        ["rows", "calling thread", "pool", "thread / pool"],
        rows,
    )

    @njit(parallel=True)
    def empty(a: Array) -> None:
        for i in prange(2):
            a[i] += 1.0

    a = np.zeros(2)
    empty(a)

    def after(gap_s: float) -> float:
        times = []
        for _ in range(rounds * per):
            empty(a)
            t = time.perf_counter()
            while time.perf_counter() - t < gap_s:
                pass
            t = time.perf_counter()
            empty(a)
            times.append(time.perf_counter() - t)
        return statistics.median(times) * 1e6

    table(
        "launch of an empty 2-thread parallel region (us)",
        ["right after another", "1 ms after another"],
        [[f"{after(0.0):.1f}", f"{after(1e-3):.1f}"]],
    )


# --------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    parser.add_argument("--cpu", action="store_true", help="one thread each, CPU time per call")
    args = parser.parse_args(argv)
    import importlib

    import numba

    nat = importlib.import_module("shapevm.jit.native")  # shapevm.jit is also a function

    rounds, per = (5, 5) if args.quick else (15, 10)
    print("## shapevm native kernels vs NumPy\n")
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, numba {numba.__version__}, "
        f"{os.cpu_count()} CPUs ({platform.processor() or platform.machine()}), numba threads "
        f"{numba.get_num_threads()}; medians of {rounds * per} calls, interleaved; "
        + ("CPU time per call, one thread each" if CPU_MODE else "wall time per call")
    )
    benches = {
        "gemm": bench_gemm,
        "w1": bench_w1,
        "pool": bench_pool,
        "rowops": bench_rowops,
        "attention": bench_attention,
        "conv": bench_conv,
        "compile": bench_compile,
    }
    for name in args.only.split(","):
        benches[name](nat, rounds, per)
    print(f"\nthread pool decisions of the native kernels: {nat.thread_stats()}")


if __name__ == "__main__":
    main()
