"""The rows of ``benchmarks/conv_bench.py`` compute the same in shapevm as in NumPy (and in
ONNX Runtime, in the slow suite), so that its table compares equal work."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from shapevm.tools.bench.kernels import KernelConfig, measure_case
from tests.native.reference import rel_err

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "conv_bench.py"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("conv_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rows_cover_w2_and_agree_with_numpy() -> None:
    cases = _module().kernel_cases(quick=True)
    assert [c.group for c in cases] == ["conv", "conv", "conv", "pool"]
    assert [c.name for c in cases][:2] == ["conv3×3 3→32", "conv3×3 32→32 stride 2"]
    for case in cases:
        assert case.shapevm is not None and case.numpy is not None
        y, ref = case.shapevm(), case.numpy()
        assert y.shape == ref.shape and rel_err(y, np.asarray(ref, np.float64)) < 1e-5


@pytest.mark.slow  # importing onnx takes seconds
def test_onnx_graphs_compute_the_same() -> None:
    pytest.importorskip("onnxruntime")
    config = KernelConfig(rounds=1, block=1, warmup=1, retries=0)
    for case in _module().kernel_cases(quick=True):
        row = measure_case(case, 1, config)
        assert row.errors == {}
        assert row.max_rel_diff["shapevm"] < 1e-5 and row.max_rel_diff["onnxruntime"] < 1e-5
