"""shapevm.vm: variants, hit rate, compile times, bytecode traces."""

from __future__ import annotations

import csv
import io
from typing import Any

import numpy as np
import pytest

import shapevm as sv
import shapevm.vm as vm
from shapevm.runtime import bctrace
from tests.jit.programs import jitted_mlp, mlp_inputs


@pytest.fixture(autouse=True)
def _no_trace_left_on():
    yield
    vm.enable_bc_trace(False)


def test_jit_info_hit_rate_and_compile_time():
    j = jitted_mlp(hot_threshold=1, background=False, ahead=False)
    j.wait(30)  # nothing else compiles meanwhile
    vm.reset_jit_stats()
    for _ in range(4):
        j(*mlp_inputs(2))
    (row,) = [r for r in vm.jit_info() if r in j.jit_info()]
    assert set(row) >= {
        "function",
        "key",
        "status",
        "compile_ms",
        "hits",
        "last_use",
        "planned_bytes",
        "naive_bytes",
        "reason",
    }
    assert (row["status"], row["hits"], row["reason"]) == ("ready", 3, "")
    assert vm.get_jit_hit_rate() == pytest.approx(3 / 4)
    assert vm.get_avg_compile_time() == pytest.approx(row["compile_ms"], rel=1e-3)
    stats = vm.jit_stats()
    assert (stats["calls"], stats["compiled_calls"], stats["compiles"]) == (4, 3, 1)
    vm.reset_jit_stats()
    assert vm.get_jit_hit_rate() == 0.0 and vm.get_avg_compile_time() == 0.0
    assert j.jit_info()[0]["hits"] == 0 and j.jit_info()[0]["status"] == "ready"


def test_bc_trace_records_interpreted_instructions_and_compiled_regions(tmp_path):
    j = jitted_mlp(hot_threshold=2, background=False, ahead=False)
    args = mlp_inputs(3)
    j(*args)
    assert bctrace.ACTIVE is None
    vm.enable_bc_trace(True)
    j(*args)  # interpreted (and triggers the compile)
    j(*args)  # compiled
    vm.enable_bc_trace(False, dir=None)
    path = tmp_path / "trace.csv"
    n = vm.bc_trace_to_csv(path)
    with open(path) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == n
    assert list(rows[0]) == ["function", "pc", "opcode", "shapes", "duration_us", "mode"]
    interpreted = [r for r in rows if r["mode"] == "interpreted"]
    compiled = [r for r in rows if r["mode"] == "compiled"]
    assert [r["opcode"] for r in interpreted][:3] == [
        "BIND_INPUTS",
        "OP_CALL matmul",
        "OP_CALL add",
    ]
    matmul = interpreted[1]
    assert (matmul["function"], matmul["pc"], matmul["shapes"]) == ("softmax_mlp", "1", "3x4")
    (region,) = compiled
    assert region["opcode"] == "R0 (#0-#8)" and region["shapes"] == "3x4"
    assert float(region["duration_us"]) > 0
    j(*args)  # not recorded: tracing is off
    assert vm.bc_trace_to_csv(path) == n


def test_bc_trace_covers_plain_interpreted_calls_and_writes_to_a_directory(tmp_path):
    (b,) = sv.symbolic_shape("b")
    exp = sv.export(sv.jit(lambda x: x * 2.0 + 1.0))(sv.ShapeDtypeStruct((b,), np.float32))
    vm.enable_bc_trace(True, dir=tmp_path)
    exp.call(np.ones(5, np.float32))
    vm.enable_bc_trace(False)
    (written,) = tmp_path.glob("bc_trace_*.csv")
    rows = list(csv.DictReader(open(written)))
    assert [r["opcode"] for r in rows] == ["BIND_INPUTS", "OP_CALL mul", "OP_CALL add"]
    assert {r["mode"] for r in rows} == {"interpreted"}


def test_bc_trace_to_csv_needs_a_trace(tmp_path, monkeypatch):
    monkeypatch.setattr(bctrace, "_LAST", [None])
    with pytest.raises(RuntimeError, match=r"call shapevm.vm.enable_bc_trace\(True\) first"):
        vm.bc_trace_to_csv(tmp_path / "none.csv")


def test_kernel_profile_times_each_native_instruction_only_while_on() -> None:
    """`vm.kernel_profile` says where a jitted function's native time goes, per kernel
    with the program instructions it covers; nothing is counted while profiling is off,
    and ``reset`` starts the counts again."""
    import shapevm.numpy as snp

    w = np.ones((16, 16), np.float32)

    @sv.jit(shapes="b, 16", hot_threshold=1, background=False, tier3=False)
    def mlp(x: Any) -> Any:
        h = snp.maximum(x @ w + 1.0, 0.0)
        return snp.exp(h - h.max(axis=-1, keepdims=True))

    x = np.ones((8, 16), np.float32)
    mlp(x)
    was = vm.profile_kernels(False)
    try:
        mlp(x)
        assert vm.kernel_profile(mlp) == []  # off: not counted
        vm.profile_kernels(True)
        for _ in range(4):
            mlp(x)
        rows = vm.kernel_profile(mlp, reset=True)
        assert {r["kernel"] for r in rows} >= {"dense+bias+relu"}, rows
        assert all(r["runs"] == 4 and r["total_ms"] > 0 for r in rows), rows
        assert abs(sum(r["share"] for r in rows) - 1.0) < 1e-9
        assert rows == sorted(rows, key=lambda r: -r["total_ms"])
        assert vm.kernel_profile(mlp) == []  # reset
        mlp(x)
        out = io.StringIO()
        vm.print_kernel_profile(mlp, out)
        assert "dense+bias+relu" in out.getvalue() and "[#" in out.getvalue()
    finally:
        vm.profile_kernels(was)
    with pytest.raises(TypeError, match="kernel_profile takes a jitted function"):
        vm.kernel_profile(lambda x: x)
