"""The static memory plan: reuse, in-place, escaping values, buckets, threads."""

from __future__ import annotations

import threading

import numpy as np

import shapevm as sv
import shapevm.numpy as snp
from shapevm.jit import Compiler, find_regions
from tests.jit.programs import assert_same, mlp_inputs, softmax_mlp

(b_,) = sv.symbolic_shape("b")


def compile_for(fun, specs, ref, lowerings=(), mem_optimize=True):
    exp = sv.export(sv.jit(fun))(*specs)
    ex = exp.executable
    report = find_regions(ex.fn, ex.program)
    env = dict(zip(ex.binder.variables, ref, strict=True))
    variant = Compiler(lowerings, mem_optimize).compile(ex, report, ("exact", ref), env)
    return ex, variant


def run_both(ex, variant, *args):
    arrays = ex.binder.convert(args)
    env = ex.binder.bind(arrays)
    return ex(*args), variant.run(arrays, env)


MLP_SPECS = (
    sv.ShapeDtypeStruct((b_, 8), np.float32),
    sv.ShapeDtypeStruct((8, 4), np.float32),
    sv.ShapeDtypeStruct((4,), np.float32),
)


def test_buffers_are_reused_and_the_peak_is_below_the_naive_plan():
    ex, variant = compile_for(softmax_mlp, MLP_SPECS, (16,))
    (region,) = variant.regions
    mem = region.memory
    assert len(mem.slots) == 2  # the [b, 4] and [b, 1] temporaries share two buffers
    assert sum(len(s.members) for s in mem.slots) == 7  # all but the result
    assert mem.inplace  # e.g. sub writes into maximum's buffer, which dies there
    assert variant.planned_bytes < variant.naive_bytes
    # the naive plan: 8 tensors the interpreter allocates ([b, 4] x6 and [b, 1] x2)
    assert variant.naive_bytes == 16 * 4 * 4 * 6 + 16 * 1 * 4 * 2
    ref, got = run_both(ex, variant, *mlp_inputs(16))
    assert_same(ref, got)


def test_results_never_live_in_the_arena():
    ex, variant = compile_for(softmax_mlp, MLP_SPECS, (5,))
    first_in = mlp_inputs(5)
    _, first = run_both(ex, variant, *first_in)
    kept = first[0].copy()
    _, second = run_both(ex, variant, *mlp_inputs(5))
    np.testing.assert_array_equal(first[0], kept)  # the second call did not overwrite it
    arena = variant.regions[0].memory.arena()
    assert arena is not None and not np.shares_memory(first[0], arena)
    assert not np.shares_memory(second[0], arena)


def test_views_of_escaping_temporaries_are_not_planned():
    def f(x):
        y = x * 2.0
        z = (y + 1.0) * 3.0
        return y.T, z.reshape((-1,))

    ex, variant = compile_for(f, (sv.ShapeDtypeStruct((b_, 3), np.float32),), (4,))
    region = variant.regions[0]
    planned = [
        region.graph.ops[region.graph.value(v).producer].info.name for v in region.memory.slot_of
    ]
    assert planned == ["add"]  # y and z are seen by the caller through views
    x1 = np.arange(12, dtype=np.float32).reshape(4, 3)
    _, out1 = run_both(ex, variant, x1)
    kept = [o.copy() for o in out1]
    ref2, out2 = run_both(ex, variant, x1 + 100.0)
    assert_same(kept, out1)
    assert_same(ref2, out2)


def test_elementwise_steps_write_into_operands_that_die():
    def f(x):
        return ((x * 2.0 + 1.0) * 3.0 - 4.0).sum(axis=1)

    ex, variant = compile_for(f, (sv.ShapeDtypeStruct((b_, 3), np.float32),), (4,))
    mem = variant.regions[0].memory
    assert len(mem.slots) == 1 and len(mem.inplace) == 3
    ref, got = run_both(ex, variant, np.ones((4, 3), np.float32))
    assert_same(ref, got)


def test_a_bucket_plan_serves_every_shape_of_its_bucket_without_growing():
    ex, variant = compile_for(softmax_mlp, MLP_SPECS, (31,))  # bucket [8, 32)
    mem = variant.regions[0].memory
    for i, batch in enumerate((8, 20, 31, 9)):
        ref, got = run_both(ex, variant, *mlp_inputs(batch))
        assert_same(ref, got)
        if i == 0:
            grown = mem.growths  # 1 unless an earlier region on this thread left it larger
            assert grown <= 1 and mem.arena().nbytes >= mem.arena_bytes
    assert mem.growths == grown


def test_the_arena_grows_for_a_shape_above_the_reference():
    ex, variant = compile_for(softmax_mlp, MLP_SPECS, (4,))
    mem = variant.regions[0].memory
    for batch in (4, 100, 3):
        ref, got = run_both(ex, variant, *mlp_inputs(batch))
        assert_same(ref, got)
    assert mem.arena().nbytes > mem.arena_bytes


def test_without_mem_optimize_every_tensor_is_allocated():
    ex, variant = compile_for(softmax_mlp, MLP_SPECS, (8,), mem_optimize=False)
    assert not variant.regions[0].memory.slots
    assert variant.planned_bytes == variant.naive_bytes
    ref, got = run_both(ex, variant, *mlp_inputs(8))
    assert_same(ref, got)


def test_each_thread_runs_in_its_own_arena():
    ex, variant = compile_for(softmax_mlp, MLP_SPECS, (32,))
    errors: list[BaseException] = []
    arenas = []

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            for _ in range(50):
                batch = int(rng.integers(1, 33))
                ref, got = run_both(ex, variant, *mlp_inputs(batch))
                assert_same(ref, got)
            arenas.append(variant.regions[0].memory.arena())
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert len({id(a) for a in arenas}) == 4


def test_regions_of_different_variants_share_the_thread_arena_correctly():
    ex_a, small = compile_for(softmax_mlp, MLP_SPECS, (4,))
    ex_b, large = compile_for(softmax_mlp, MLP_SPECS, (64,))
    for batch in (4, 64, 3, 50, 4):  # the arena grows under the small plan's cached frames
        for ex, variant in ((ex_a, small), (ex_b, large)):
            ref, got = run_both(ex, variant, *mlp_inputs(batch))
            assert_same(ref, got)
    assert small.regions[0].memory.arena() is large.regions[0].memory.arena()


def test_shape_registers_and_symbolic_reshapes_inside_a_region():
    def f(x):
        h = x.shape[0]
        return (x * 2.0).reshape((h * 3,)) + 1.0, snp.tanh(x)

    ex, variant = compile_for(f, (sv.ShapeDtypeStruct((b_, 3), np.float32),), (6,))
    for batch in (6, 2, 9):
        ref, got = run_both(
            ex, variant, np.linspace(-1, 1, batch * 3, dtype=np.float32).reshape(batch, 3)
        )
        assert_same(ref, got)
