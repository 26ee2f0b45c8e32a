"""Small programs written as NumPy users write them, each run three ways in one process:
`shapevm.jit` with default options, its interpreter (``enabled=False``) and NumPy itself.

Each program is first checked against NumPy on its timed shape; then the three are timed in
interleaved rounds (the machine is shared and noisy) and the medians printed, with the JIT's
time as a ratio to NumPy's and to the interpreter's. A ratio above 1 against the
interpreter is a program the native tier makes slower: each row here was one once.

Run: ``python benchmarks/models_bench.py`` (``--quick`` for fewer calls, ``--only a,b`` for
some rows).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
sys.path.insert(0, SRC)  # this checkout, even if another one is installed

import numpy as np  # noqa: E402

import shapevm as sv  # noqa: E402
import shapevm.numpy as snp  # noqa: E402

RNG = np.random.default_rng(0)
F32 = np.float32
IMAGE = RNG.standard_normal((20, 30)).astype(F32)
W_ONEHOT = RNG.standard_normal((12, 16)).astype(F32)
W_F16 = RNG.standard_normal((32, 8)).astype(F32)
W_INT = RNG.integers(-5, 5, (16, 8)).astype(np.int32)


def seg_head(xp: Any, logits: Any) -> Any:  # softmax and class over the channels
    e = xp.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True), xp.argmax(logits, axis=1)


def bilinear(xp: Any, pts: Any) -> Any:  # an image sampled at points
    x, y = xp.clip(pts[:, 0], 0.0, 28.999), xp.clip(pts[:, 1], 0.0, 18.999)
    x0, y0 = xp.floor(x), xp.floor(y)
    fx, fy = x - x0, y - y0
    i0 = y0.astype(np.int64) * 30 + x0.astype(np.int64)
    flat = xp.asarray(IMAGE).reshape(-1)
    a, b = xp.take(flat, i0), xp.take(flat, i0 + 1)
    c, d = xp.take(flat, i0 + 30), xp.take(flat, i0 + 31)
    return (a * (1 - fx) + b * fx) * (1 - fy) + (c * (1 - fx) + d * fx) * fy


def f16_io(xp: Any, x: Any) -> Any:  # float16 in and out
    return xp.tanh(x.astype(np.float32) @ W_F16).astype(np.float16)


def onehot_dense(xp: Any, ids: Any, x: Any) -> Any:
    return (ids[:, None] == xp.arange(12)[None, :]).astype(np.float32) @ W_ONEHOT + x


def int_layer(xp: Any, q: Any) -> Any:  # int32 weights
    return (q @ W_INT).astype(np.float32) * 0.01


def buckets(xp: Any, a: Any, b: Any) -> Any:  # integer // and % with an abs
    return a // b, a % b, (a * 3 - b) // 7, xp.abs(a) % 5


def positions(xp: Any, m: Any) -> Any:  # positions from a mask
    return xp.where(m > 0, xp.cumsum(m, axis=1) - 1, -1), m.sum(axis=1)


def robust_scale(xp: Any, x: Any) -> Any:  # median and range per column
    return (x - xp.median(x, axis=0)) / xp.maximum(xp.ptp(x, axis=0), 1e-6)


def nll(xp: Any, logits: Any, labels: Any) -> Any:  # picked log-probabilities
    m = logits.max(axis=-1, keepdims=True)
    lp = logits - m - xp.log(xp.exp(logits - m).sum(axis=-1, keepdims=True))
    return -lp[xp.arange(logits.shape[0]), labels].mean()


def triplet(xp: Any, a: Any, p: Any, n: Any) -> Any:  # a margin loss of squared distances
    dp = xp.sqrt(((a - p) ** 2).sum(1))
    dn = xp.sqrt(((a - n) ** 2).sum(1))
    return xp.maximum(dp - dn + 0.2, 0).mean()


def quantize(xp: Any, x: Any) -> Any:  # int8 round trip with a per-tensor scale
    scale = xp.abs(x).max() / 127.0
    q = xp.clip(xp.round(x / scale), -127, 127).astype(xp.int8)
    return q, q.astype(xp.float32) * scale


def mish(xp: Any, x: Any) -> Any:  # x * tanh(softplus(x)), softplus written out
    return x * xp.tanh(xp.log1p(xp.exp(-xp.abs(x))) + xp.maximum(x, 0))


CASES: dict[str, tuple[Callable[..., Any], tuple[str, ...], tuple[Any, ...]]] = {
    "seg_head": (seg_head, ("b, 5, h, w",), (RNG.standard_normal((2, 5, 64, 48)).astype(F32),)),
    "bilinear": (bilinear, ("n, 2",), (RNG.uniform(0, 30, (3000, 2)).astype(F32),)),
    "f16_io": (f16_io, ("b, 32",), (RNG.standard_normal((300, 32)).astype(np.float16),)),
    "onehot_dense": (
        onehot_dense,
        ("b", "b, 16"),
        (RNG.integers(0, 12, 500), RNG.standard_normal((500, 16)).astype(F32)),
    ),
    "int_layer": (int_layer, ("b, 16",), (RNG.integers(-100, 100, (400, 16)).astype(np.int32),)),
    "buckets": (
        buckets,
        ("n", "n"),
        (
            RNG.integers(-50, 50, 1000).astype(np.int32),
            RNG.choice([-7, -3, 2, 5, 9], 1000).astype(np.int32),
        ),
    ),
    "positions": (positions, ("b, s",), (RNG.integers(0, 2, (16, 500)).astype(np.int64),)),
    "robust_scale": (robust_scale, ("n, 8",), (RNG.standard_normal((400, 8)).astype(F32),)),
    "nll": (
        nll,
        ("b, c", "b"),
        (RNG.standard_normal((64, 10)).astype(F32), RNG.integers(0, 10, 64)),
    ),
    "triplet": (
        triplet,
        ("b, 64",) * 3,
        tuple(RNG.standard_normal((512, 64)).astype(F32) for _ in range(3)),
    ),
    "quantize": (quantize, ("n, 32",), (RNG.standard_normal((500, 32)).astype(F32),)),
    "mish": (mish, ("n, 64",), (RNG.standard_normal((300, 64)).astype(F32) * 3,)),
}


def _as_list(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _median_us(fn: Callable[[], Any], n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(times)


def run(names: list[str], calls: int, rounds: int) -> None:
    print(f"medians of {rounds} rounds of {calls} calls (load average "
          + " ".join(f"{v:.1f}" for v in os.getloadavg()) + ")")  # fmt: skip
    print("| program | jit | interpreter | NumPy | jit / NumPy | jit / interpreter |")
    print("|---|---|---|---|---|---|")
    for name in names:
        model, shapes, args = CASES[name]
        jitted = sv.jit(lambda *a, m=model: m(snp, *a), shapes=shapes)
        plain = sv.jit(lambda *a, m=model: m(snp, *a), shapes=shapes, enabled=False)
        want = _as_list(model(np, *args))
        for _ in range(5):
            jitted(*args)
        jitted.wait(60)
        for got in (jitted(*args), plain(*args)):
            for g, w in zip(_as_list(got), want, strict=True):
                np.testing.assert_allclose(
                    np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=2e-3, atol=2e-3
                )
        rows: dict[str, list[float]] = {"jit": [], "interp": [], "numpy": []}
        for _ in range(rounds):
            rows["jit"].append(_median_us(lambda j=jitted, a=args: j(*a), calls))
            rows["interp"].append(_median_us(lambda p=plain, a=args: p(*a), calls))
            rows["numpy"].append(_median_us(lambda m=model, a=args: m(np, *a), calls))
        jit, interp, ref = (statistics.median(rows[k]) for k in ("jit", "interp", "numpy"))
        print(f"| {name} | {jit:.1f} us | {interp:.1f} us | {ref:.1f} us | "
              f"{jit / ref:.2f} | {jit / interp:.2f} |")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls and rounds")
    parser.add_argument("--only", help="comma separated rows: " + ", ".join(CASES))
    args = parser.parse_args(argv)
    names = args.only.split(",") if args.only else list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        parser.error(f"unknown rows {unknown}; the rows are {', '.join(CASES)}")
    run(names, 30 if args.quick else 200, 3 if args.quick else 5)


if __name__ == "__main__":
    main()
