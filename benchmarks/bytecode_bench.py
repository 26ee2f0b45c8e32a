"""Serialize, deserialize and verify a 1,000-instruction program with 1 MB and 256 MB of
constants. Deserializing maps the constants without copying, so its time must not grow with
their size; the table prints both sizes and the ratio.

Run: ``python benchmarks/bytecode_bench.py`` (``--quick`` for fewer repetitions).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
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


def median_time(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(size: int, repeat: int, tmp: Path) -> dict[str, float]:
    program = build(N_INSTRUCTIONS, size)
    blob = serialize(program)
    path = tmp / f"bench_{size}.svbc"
    path.write_bytes(blob)
    loaded = deserialize(path, verify=False)
    assert np.shares_memory(loaded.constants[1].array, loaded.constants[1].array.base)
    return {
        "serialize": median_time(lambda: serialize(program), max(2, repeat // 10)),
        "deserialize (bytes)": median_time(lambda: deserialize(blob, verify=False), repeat),
        "deserialize (mmap file)": median_time(lambda: deserialize(path, verify=False), repeat),
        "verify": median_time(lambda: verify(loaded), repeat),
        "file MB": len(blob) / 2**20,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    repeat = 5 if args.quick else 21
    with tempfile.TemporaryDirectory() as tmp:
        results = {name: measure(size, repeat, Path(tmp)) for name, size in SIZES.items()}
    small, big = (results[name] for name in SIZES)
    print(f"bytecode: {N_INSTRUCTIONS} instructions, median of {repeat} runs (serialize fewer)")
    print(f"{'step':<26}{'1 MB':>12}{'256 MB':>12}{'256/1':>9}")
    for step in ("serialize", "deserialize (bytes)", "deserialize (mmap file)", "verify"):
        a, b = small[step] * 1e3, big[step] * 1e3
        print(f"{step:<26}{a:>9.3f} ms{b:>9.3f} ms{b / a:>8.2f}x")
    print(f"{'file size':<26}{small['file MB']:>9.1f} MB{big['file MB']:>9.1f} MB")


if __name__ == "__main__":
    main()
