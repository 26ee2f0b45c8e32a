"""A second process with a warm cache compiles nothing: its kernels load from disk.

The first process compiles a generated elementwise kernel (and any library kernel not yet
built); the second, with the same ``SHAPEVM_CACHE_DIR``, must not start a single numba
compile (counted with numba's ``numba:compile`` events) and must give the same results.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numba")

ROOT = Path(__file__).resolve().parents[2]

_PROGRAM = """
import json, numpy as np
from numba.core import event

class Count(event.Listener):
    n = 0
    def on_start(self, ev):
        Count.n += 1
    def on_end(self, ev):
        pass

event.register("numba:compile", Count())
import shapevm as sv, shapevm.numpy as snp
from shapevm import nn

rng = np.random.default_rng(0)
w = rng.normal(size=(16, 24)).astype(np.float32)
b = rng.normal(size=24).astype(np.float32)

def f(x):
    h = nn.relu(x @ w + b)                  # the native dense kernel
    return (h * 0.5 + 1.0) * snp.abs(h)     # a generated elementwise kernel

j = sv.jit(f, shapes="n, 16", hot_threshold=1, background=False, kernel_process=False)
out = []
for n in (3, 9):
    x = rng.normal(size=(n, 16)).astype(np.float32)
    j(x)
    out.append(float(np.asarray(j(x)).sum()))
patterns = sorted({p for r in j.jit_info() for p in r["patterns"]})
print(json.dumps({"compiles": Count.n, "patterns": patterns, "sums": out}))
"""


def _run(cache: Path) -> dict:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "SHAPEVM_CACHE_DIR": str(cache),
        "NUMBA_CACHE_DIR": str(cache / "numba-elsewhere"),  # must not matter
    }
    done = subprocess.run(
        [sys.executable, "-c", _PROGRAM],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=True,
    )
    result: dict = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.slow
def test_a_second_process_with_a_warm_cache_compiles_nothing(tmp_path: Path) -> None:
    first = _run(tmp_path)
    second = _run(tmp_path)
    assert first["patterns"] == second["patterns"] == ["dense", "elementwise_chain"]
    assert first["compiles"] >= 1  # the generated kernel, at least
    assert second["compiles"] == 0
    assert second["sums"] == pytest.approx(first["sums"], rel=1e-6)
