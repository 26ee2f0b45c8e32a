"""Serialize, deserialize and verify a 1,000-instruction program with 1 MB and 256 MB of
constants. Deserializing maps the constants without copying, so its time must not grow with
their size; the table prints both sizes and the ratio.

Run: ``python benchmarks/bytecode_bench.py`` (``--quick`` for fewer repetitions).
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from shapevm.bytecode import Constant, Program, deserialize, parse_program, serialize, verify

N_INSTRUCTIONS = 1000
SIZES = {"1 MB": 1 << 20, "256 MB": 256 << 20}


def build(n_instructions: int, const_bytes: int) -> Program:
    """A straight-line MLP-like body: elementwise ops and matmuls on symbolic ``b``."""
    lines = [
        "func @bench(t0: f32[b, 64], t1: f32[64, 64]) -> f32[b, 64]",
        "    where b <= 4096",
        "  L0:",
        "    s0 = SHAPE_PROPAGATE t0, 0",
        "    t2: f32[16] = LOAD_CONST k0",
    ]
    last = 0
    for i in range(3, n_instructions):
        op = ("matmul(t{last}, t1)", "add(t{last}, t0)", "maximum(t{last}, 0.0)")[i % 3]
        lines.append(f"    t{i}: f32[b, 64] = OP_CALL " + op.format(last=last))
        last = i
    lines.append(f"    RETURN t{last}")
    program = parse_program("\n".join(lines) + "\n")
    assert sum(fn.num_instructions for fn in program.functions) == n_instructions
    weights = Constant("weights", np.arange(const_bytes // 4, dtype=np.float32))
    small = Constant("bias", np.zeros(16, dtype=np.float32))
    return Program(program.functions, (small, weights))


def interleaved(steps: dict[str, list[Callable[[], Any]]], repeat: int) -> dict[str, list[float]]:
    """Best time of ``repeat`` runs for each size of each step.

    Sizes run alternately so that noise from other processes falls on both alike, and the
    minimum is reported, the least disturbed estimate of the cost itself.
    """
    best: dict[str, list[float]] = {}
    for step, fns in steps.items():
        times: list[list[float]] = [[] for _ in fns]
        n = max(2, repeat // 10) if step == "serialize" else repeat
        for fn in fns:  # warm up caches and lazy imports outside the timing
            fn()
        gc.collect()
        for _ in range(n):
            for i, fn in enumerate(fns):
                start = time.perf_counter()
                fn()
                times[i].append(time.perf_counter() - start)
        best[step] = [min(t) for t in times]
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    repeat = 5 if args.quick else 21
    programs = [build(N_INSTRUCTIONS, size) for size in SIZES.values()]
    with tempfile.TemporaryDirectory() as tmp:
        blobs = [serialize(p) for p in programs]
        paths = [Path(tmp) / f"bench_{i}.svbc" for i in range(len(blobs))]
        loaded = []
        for path, blob in zip(paths, blobs, strict=True):
            path.write_bytes(blob)
            program = deserialize(path, verify=False)
            weights = program.constants[1].array
            assert not weights.flags.owndata and not weights.flags.writeable  # a mapped view
            loaded.append(program)
        steps: dict[str, list[Callable[[], Any]]] = {
            "serialize": [partial(serialize, p) for p in programs],
            "deserialize (bytes)": [partial(deserialize, b, verify=False) for b in blobs],
            "deserialize (mmap file)": [partial(deserialize, p, verify=False) for p in paths],
            "verify": [partial(verify, p) for p in loaded],
        }
        best = interleaved(steps, repeat)
    print(f"bytecode: {N_INSTRUCTIONS} instructions, best of {repeat} runs (serialize fewer)")
    print(f"{'step':<26}{'1 MB':>12}{'256 MB':>12}{'256/1':>9}")
    for step, (a, b) in best.items():
        print(f"{step:<26}{a * 1e3:>9.3f} ms{b * 1e3:>9.3f} ms{b / a:>8.2f}x")
    sizes = [len(b) / 2**20 for b in blobs]
    print(f"{'file size':<26}{sizes[0]:>9.1f} MB{sizes[1]:>9.1f} MB")


if __name__ == "__main__":
    main()
