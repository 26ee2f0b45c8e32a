"""Fused elementwise chains: matching, generated code, numerics, the on-disk kernel cache."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import shapevm as sv
import shapevm.numpy as snp
from shapevm.jit import Compiler, find_regions, fusion
from shapevm.jit.graph import build_graph
from shapevm.jit.lowering import make_group
from tests.jit.programs import assert_same, mlp_inputs, softmax_mlp

pytest.importorskip("numba")
(b_,) = sv.symbolic_shape("b")
MLP_SPECS = (
    sv.ShapeDtypeStruct((b_, 8), np.float32),
    sv.ShapeDtypeStruct((8, 4), np.float32),
    sv.ShapeDtypeStruct((4,), np.float32),
)


def executable(fun, *specs):
    return sv.export(sv.jit(fun))(*specs).executable


def graph_of(ex):
    from shapevm.bytecode.verify import infer_types

    (region,) = find_regions(ex.fn, ex.program).compilable
    types = infer_types(ex.fn, ex.program).types
    return build_graph(ex.fn, region, types, ex.slot, ex.scope, ex.constants)


def compiled(ex, ref):
    report = find_regions(ex.fn, ex.program)
    env = dict(zip(ex.binder.variables, ref, strict=True))
    return Compiler(["elementwise_chain"]).compile(ex, report, ("exact", ref), env)


def run_both(ex, variant, *args):
    arrays = ex.binder.convert(args)
    return ex(*args), variant.run(arrays, ex.binder.bind(arrays))


def test_chains_of_elementwise_ops_are_matched_between_reductions():
    graph = graph_of(executable(softmax_mlp, *MLP_SPECS))
    names = [op.info.name if op.info else op.kind for op in graph.ops]
    chains = []
    pos = 0
    while pos < len(graph.ops):
        found = fusion.match_chain(graph, pos)
        if found:
            chains.append([names[p] for p in found])
            pos = found[-1]
        pos += 1
    assert chains == [["add", "maximum"]]  # exp is not fused without SVML; div stands alone


def test_transcendental_ops_join_chains_when_allowed(monkeypatch):
    monkeypatch.setattr(fusion, "FUSE_TRANSCENDENTAL", True)
    graph = graph_of(executable(softmax_mlp, *MLP_SPECS))
    assert [graph.ops[p].info.name for p in fusion.match_chain(graph, 5)] == ["sub", "exp"]


def test_generated_kernel_broadcasts_by_index_and_keeps_float32():
    graph = graph_of(executable(softmax_mlp, *MLP_SPECS))
    group = make_group(graph, fusion.match_chain(graph, 2))
    source, sig = fusion.generate(graph, group)
    assert "a1 = in1[i1]" in source  # the bias [4] against [b, 4]
    assert "C0 = np.float32(0.0)" in source
    assert "np.float32(np.maximum(" in source
    assert "@njit(cache=True, nogil=True" in source
    assert sig == ["float32:2:r", "float32:1:r", "float32:2:w"]


def test_fused_variant_matches_the_interpreter_on_many_shapes_with_one_kernel_each():
    ex = executable(softmax_mlp, *MLP_SPECS)
    variant = compiled(ex, (5,))
    (region,) = variant.regions
    assert region.patterns == ("elementwise_chain",)
    for batch in (5, 1, 17, 64):
        ref, got = run_both(ex, variant, *mlp_inputs(batch))
        assert_same(ref, got)
    assert "elementwise_chain: add+maximum" in variant.describe()


@pytest.mark.parametrize("transcendental", [False, True])
def test_special_values_and_float64_follow_numpy(monkeypatch, transcendental):
    monkeypatch.setattr(fusion, "FUSE_TRANSCENDENTAL", transcendental)

    def f(x, y):
        z = snp.where(x > y, snp.exp(x) - 1.0, snp.maximum(x, y) / y)
        return snp.tanh(z) * 2.0 + snp.sqrt(snp.abs(x))

    specs = [sv.ShapeDtypeStruct((b_, 6), np.float64), sv.ShapeDtypeStruct((6,), np.float64)]
    ex = executable(f, *specs)
    variant = compiled(ex, (3,))
    fused = [s.label for s in variant.regions[0].lowered if s.pattern]
    assert any("tanh" in label for label in fused) == transcendental
    x = np.array([[np.nan, np.inf, -np.inf, 0.0, -0.0, 800.0]] * 3, np.float64)
    x[1] = np.linspace(-3, 3, 6)
    y = np.array([1.0, 0.0, -2.0, np.nan, 3.0, -1.0])
    with np.errstate(all="ignore"):
        ref, got = run_both(ex, variant, x, y)
    assert_same(ref, got, rtol=1e-12)


def test_non_contiguous_operands_are_copied_for_the_kernel():
    ex = executable(lambda x: snp.sqrt(x * 2.0) + 1.0, sv.ShapeDtypeStruct((b_, 3), np.float32))
    variant = compiled(ex, (4,))
    assert variant.regions[0].patterns
    x = np.arange(12, dtype=np.float32).reshape(3, 4).T / 7  # a transposed view
    ref, got = run_both(ex, variant, x)
    assert_same(ref, got)


def test_kernels_are_cached_on_disk_and_rebuilt_when_corrupt(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("SHAPEVM_CACHE_DIR", str(tmp_path))
    fusion.clear_memo()
    ex = executable(softmax_mlp, *MLP_SPECS)
    compiled(ex, (3,))
    (folder,) = (tmp_path / "kernels").iterdir()
    modules = sorted(folder.glob("svk_*.py"))
    assert len(modules) == 1
    cache_files = sorted((folder / "__pycache__").glob("svk_*"))
    assert cache_files  # numba's index and data files
    # corrupt everything: a truncated module, garbage index and data files
    modules[0].write_text(modules[0].read_text()[:40])
    for f in cache_files:
        f.write_bytes(b"\x00garbage")
    fusion.clear_memo()
    with caplog.at_level(logging.WARNING, logger="shapevm.jit"):
        variant = compiled(ex, (3,))
    assert "unusable" in caplog.text and "rebuilding" in caplog.text
    ref, got = run_both(ex, variant, *mlp_inputs(3))
    assert_same(ref, got)
    assert modules[0].read_text().startswith('"""Generated by shapevm.jit.fusion')
    fusion.clear_memo()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="shapevm.jit"):
        compiled(ex, (3,))  # loads cleanly from the rebuilt cache
    assert "unusable" not in caplog.text
    fusion.clear_memo()


def test_kernels_can_be_compiled_in_this_process(tmp_path, monkeypatch):
    monkeypatch.setenv("SHAPEVM_CACHE_DIR", str(tmp_path))
    fusion.clear_memo()
    ex = executable(softmax_mlp, *MLP_SPECS)
    report = find_regions(ex.fn, ex.program)
    variant = Compiler(["elementwise_chain"], kernel_process=False).compile(
        ex, report, ("exact", (2,)), {"b": 2}
    )
    assert variant.regions[0].patterns == ("elementwise_chain",)
    ref, got = run_both(ex, variant, *mlp_inputs(2))
    assert_same(ref, got)
    fusion.clear_memo()


def test_the_kernel_server_reports_errors_and_restarts(tmp_path):
    from shapevm.jit.kernel_server import KernelServer

    server = KernelServer()
    try:
        bad = tmp_path / "svk_bad.py"
        bad.write_text("raise ValueError('broken module')\n")
        with pytest.raises(RuntimeError, match="ValueError: broken module"):
            server.compile(str(bad), "svk_bad", ["float32:1:r"])
        good = tmp_path / "svk_good.py"
        good.write_text(
            "from numba import njit\n\n@njit(cache=True)\ndef kernel(a, o):\n    o[0] = a[0]\n"
        )
        server._proc.kill()  # a dead server is started again on the next request
        server.compile(str(good), "svk_good", ["float32:1:r", "float32:1:w"])
        assert list((tmp_path / "__pycache__").glob("svk_good.kernel-*.nbi"))
    finally:
        server.close()


def test_a_kernel_server_that_does_not_answer_in_time_is_killed(tmp_path):
    from shapevm.jit.kernel_server import KernelServer, KernelServerTimeout

    server = KernelServer()
    slow = tmp_path / "svk_slow.py"
    slow.write_text("import time\ntime.sleep(30)\n")
    try:
        with pytest.raises(KernelServerTimeout, match=r"timed out after 0\.5 s"):
            server.compile(str(slow), "svk_slow", ["float32:1:r"], timeout=0.5)
        assert server._proc is None
    finally:
        server.close()


REDEFINED = """
func @redef(t0: f32[b, 4]) -> f32[b, 4], f32[b, 4]
  L0:
    s0 = SHAPE_PROPAGATE t0, 0
    t1 = TENSOR_CREATE [s0, 4], f32, cpu
    TENSOR_ALLOC t1
    t1 = OP_CALL exp(t0)
    t2: f32[b, 4] = OP_CALL add(t1, 1.0)
    t1 = OP_CALL neg(t0)
    t3: f32[b, 4] = OP_CALL mul(t2, 3.0)
    RETURN t3, t1
"""


def test_a_chain_is_not_fused_across_a_write_to_a_register_it_reads():
    from shapevm.bytecode import parse_program
    from shapevm.runtime.interpreter import Executable

    program = parse_program(REDEFINED)
    ex = Executable(program)
    graph = graph_of(ex)
    names = [op.info.name if op.info else op.kind for op in graph.ops]
    add = names.index("add")
    assert fusion.match_chain(graph, add) == [add, names.index("mul")]
    assert make_group(graph, [add, names.index("mul")]) is None  # t1 is rewritten between
    variant = compiled(ex, (2,))
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    ref, got = run_both(ex, variant, x)
    assert_same(ref, got)
