"""Compile times of the JIT, and what a second process with a warm cache compiles.

Run with ``python benchmarks/compile_bench.py``. For each workload, two fresh processes
share one empty ``SHAPEVM_CACHE_DIR``; each exports the model and compiles a variant per
benchmark shape, one after another in the calling thread (`shapevm.jit.Compiler`, with
generated kernels compiled in-process so that they are counted), and counts numba's
``numba:compile`` events (a kernel compiled rather than loaded). A fourth
program, ``chain``, adds a generated elementwise kernel after a dense layer, so that the
cache has something model-specific to keep. Prints a markdown table.

shapevm's own kernels are compiled once per installation (``python -m shapevm.jit.native``)
and only loaded here; loading them is in the ``library`` column, not in the compiles.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")

_CHILD = r"""
import json, sys, time
from numba.core import event

class Count(event.Listener):
    n = 0
    def on_start(self, ev):
        Count.n += 1
    def on_end(self, ev):
        pass

event.register("numba:compile", Count())
t0 = time.perf_counter()
import importlib
importlib.import_module("shapevm.jit.native.library")
library_s = time.perf_counter() - t0
import numpy as np
import shapevm as sv, shapevm.numpy as snp
from shapevm import nn
from shapevm.jit import Compiler, find_regions
from shapevm.models import traced, workloads as wl

wid = sys.argv[1]
if wid == "chain":
    rng = np.random.default_rng(0)
    w = rng.normal(size=(64, 96)).astype(np.float32)
    b = rng.normal(size=96).astype(np.float32)

    def f(x):
        h = nn.relu(x @ w + b)
        return (h * 0.5 + 1.0) * snp.abs(h)

    exp = sv.export(sv.jit(f))(sv.ShapeDtypeStruct(sv.symbolic_shape("n, 64"), np.float32))
    envs = [{"n": n} for n in (1, 3, 8, 17, 32, 64)]
else:
    exp = traced.export_workload(wid, wl.make_weights(wid))
    spec = [v.strip() for v in wl.get_workload(wid).spec.split(",")]
    names = exp.executable.binder.variables
    envs = [
        {v: shape[spec.index(v)] for v in names} for shape in wl.get_workload(wid).shapes
    ]
ex = exp.executable
report = find_regions(ex.fn, ex.program)
compiler = Compiler(kernel_process=False)  # generated kernels compile here, counted
times, patterns = [], set()
for env in envs:
    key = ("exact", tuple(env[v] for v in ex.binder.variables))
    t = time.perf_counter()
    variant = compiler.compile(ex, report, key, env)
    times.append(time.perf_counter() - t)
    patterns |= {p for r in variant.regions for p in r.patterns}
print(json.dumps({"library_s": library_s, "compile_s": times, "numba_compiles": Count.n,
                  "patterns": sorted(patterns)}))
"""


def run(workload: str, cache: str) -> dict:
    env = {**os.environ, "PYTHONPATH": SRC, "SHAPEVM_CACHE_DIR": cache}
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, workload],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=1200,
    )
    result: dict = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def main() -> None:
    print(
        "| program | process | library load | first variant | later variants (median) |"
        " numba compiles | patterns |"
    )
    print("|---|---|---|---|---|---|---|")
    for workload in ("W1", "W2", "W3", "chain"):
        with tempfile.TemporaryDirectory(prefix="shapevm-compile-bench-") as cache:
            for name in ("cold cache", "warm cache"):
                r = run(workload, cache)
                t = r["compile_s"]
                print(
                    f"| {workload} | {name} | {ms(r['library_s'])} | {ms(t[0])} | "
                    f"{ms(statistics.median(t[1:]))} | {r['numba_compiles']} | "
                    f"{', '.join(r['patterns'])} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
