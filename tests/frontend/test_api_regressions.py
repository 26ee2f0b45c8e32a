"""Regressions found using the guide as a new user would: each failed before its fix."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

import shapevm as sv
import shapevm.numpy as snp


def _export_and_run(f: Any, n: int) -> Any:
    (b,) = sv.symbolic_shape("b")
    exp = sv.export(sv.jit(f))(sv.ShapeDtypeStruct((b,), np.float32))
    return exp.call(np.ones(n, np.float32))


def test_two_threads_tracing_at_once_keep_their_own_dimension_handlers() -> None:
    # A starts tracing, B starts, A finishes while B still traces; B then multiplies a
    # dimension by a float, which only the tracing frontend turns into an array.
    a_tracing, b_tracing, a_done = threading.Event(), threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def f_a(x: Any) -> Any:
        a_tracing.set()
        b_tracing.wait(10)
        return x + 1.0

    def f_b(x: Any) -> Any:
        b_tracing.set()
        a_done.wait(10)
        return x * (x.shape[0] * 0.5)

    def thread_a() -> None:
        try:
            np.testing.assert_allclose(_export_and_run(f_a, 4), np.full(4, 2.0))
        except BaseException as exc:
            errors.append(exc)
        finally:
            a_done.set()

    def thread_b() -> None:
        a_tracing.wait(10)
        try:
            np.testing.assert_allclose(_export_and_run(f_b, 4), np.full(4, 2.0))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=thread_a), threading.Thread(target=thread_b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert not errors, errors


def test_many_concurrent_traces_agree() -> None:
    def f(x: Any) -> Any:
        n = x.shape[0]
        return sv.lax.cond(n >= 3, lambda: x * (n * 0.5), lambda: x - 1.0)

    results: list[tuple[int, Any]] = []
    failures: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            for _ in range(5):
                results.append((k + 1, _export_and_run(f, k + 1)))
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failures, failures
    assert len(results) == 30
    for n, y in results:
        np.testing.assert_allclose(y, np.full(n, n * 0.5 if n >= 3 else 0.0))


_INVALID = """
func @f(t0: f32[b]) -> f32[b, 2]
  L0:
    RETURN t0
"""


def test_every_way_to_build_an_exported_verifies(tmp_path: Any) -> None:
    from shapevm.bytecode import parse_program, save, serialize

    program = parse_program(_INVALID)
    with pytest.raises(sv.VerifyError, match="result 0 does not match the signature"):
        sv.Exported.from_program(program)
    with pytest.raises(sv.VerifyError, match="result 0 does not match the signature"):
        sv.deserialize(serialize(program))
    save(program, tmp_path / "bad.svbc")
    with pytest.raises(sv.VerifyError, match="result 0 does not match the signature"):
        sv.load(tmp_path / "bad.svbc")


def test_in_and_out_avals_are_one_type() -> None:
    (b,) = sv.symbolic_shape("b")

    def f(x: Any) -> Any:
        return x * 2.0, x[x > 0.0]

    exp = sv.export(sv.jit(f))(sv.ShapeDtypeStruct((b, 4), np.float32))
    assert all(type(a) is sv.ShapeDtypeStruct for a in (*exp.in_avals, *exp.out_avals))
    assert exp.out_avals[0] == sv.ShapeDtypeStruct((exp.in_avals[0].shape[0], 4), np.float32)
    assert exp.out_avals[1].shape == (sv.shapes.DYNAMIC,)
    assert repr(exp.out_avals[1]) == "ShapeDtypeStruct(shape=(dynamic,), dtype=float32)"


def test_public_submodules_are_attributes_after_import_shapevm() -> None:
    import subprocess
    import sys

    code = (
        "import shapevm as sv, numpy as np\n"
        "assert sv.lax.top_k(np.arange(5.0), 2)[0].tolist() == [4.0, 3.0]\n"
        "assert sv.numpy.ones is not None and sv.nn.relu is not None\n"
        "assert callable(sv.vm.jit_info) and callable(sv.jit)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_list_or_scalar_argument_converts_as_asarray_would() -> None:
    f = sv.jit(lambda x: snp.sum(x * 2))
    assert f([1.0, 2.0, 3.0]) == 12.0
    assert f([[1, 2], [3, 4]]) == 20
    out = sv.jit(lambda x: x + 1)(2.5)
    assert out.dtype == np.asarray(2.5).dtype and out == 3.5
    lists = sv.jit(lambda xs: xs[0] + xs[1])([np.ones(2, np.float32), np.ones(2, np.float32)])
    np.testing.assert_array_equal(lists, np.full(2, 2.0, np.float32))  # a list of arrays: a pytree


def test_slicing_past_a_symbolic_end_suggests_the_constraint_that_keeps_it_in() -> None:
    (b,) = sv.symbolic_shape("b")
    with pytest.raises(sv.InconclusiveDimensionOperation) as info:
        sv.export(sv.jit(lambda x: x[0:16]))(sv.ShapeDtypeStruct((b,), np.float32))
    message = str(info.value)
    assert message.startswith(
        "Slicing an axis of size b with stop 16: whether the slice stays within the axis is "
        "inconclusive\n"
        "  expected: 'b >= 16' for every allowed shape, or a stop that cannot pass the end\n"
    )
    assert "fix:      add the constraint constraints=['b >= 16'], or slice to " in message
    assert "'b < 16'" not in message
    (b,) = sv.symbolic_shape("b", constraints=["b >= 16"])
    exp = sv.export(sv.jit(lambda x: x[0:16]))(sv.ShapeDtypeStruct((b,), np.float32))
    assert exp.call(np.arange(20, dtype=np.float32)).shape == (16,)


def test_an_unknown_dimension_variable_gets_a_fix_in_python_terms() -> None:
    (b,) = sv.symbolic_shape("b")
    (k,) = sv.symbolic_shape("k", scope=b.scope)
    with pytest.raises(sv.VerifyError) as info:
        sv.export(sv.jit(lambda x: snp.zeros((k,)) + x[0]))(sv.ShapeDtypeStruct((b,), np.float32))
    message = str(info.value)
    assert "unknown dimension variable 'k'" in message
    assert "dim_args" not in message.split("fix:")[1]
    assert (
        "fix:      give an argument a dimension k (ShapeDtypeStruct((k, ...), dtype)), or make "
        "k an argument of the function and pass the symbolic dimension k to export "
        "(export(jit(f))(x_spec, k)); callers then pass its value as an int"
    ) in message

    def with_k(x: Any, n: Any) -> Any:
        return snp.zeros((n,)) + x[0]

    exp = sv.export(sv.jit(with_k))(sv.ShapeDtypeStruct((b,), np.float32), k)
    assert exp.call(np.ones(3, np.float32), 5).shape == (5,)


def test_a_reshape_that_needs_divisible_sides_names_the_constraints() -> None:
    """Pairs of tokens, patches of an image: the fix names 'mod(s, 2) == 0' (one per side
    for the patches), not the equation of element counts; with them the function runs."""
    w = np.ones((4, 48), np.float32)

    def pairs(x: Any) -> Any:
        b, s, d = x.shape
        return x.reshape(b, s // 2, 2 * d).mean(-1)

    def patches(img: Any) -> Any:
        b, c, h, ww = img.shape
        p = img.reshape(b, c, h // 4, 4, ww // 4, 4).transpose(0, 2, 4, 1, 3, 5)
        return p.reshape(b, (h // 4) * (ww // 4), c * 16) @ w.T

    cases = [
        (pairs, "b, s, 8", ["mod(s, 2) == 0"], (2, 6, 8)),
        (patches, "b, 3, h, w", ["mod(h, 4) == 0", "mod(w, 4) == 0"], (2, 3, 8, 12)),
    ]
    for fn, spec, needed, shape in cases:
        with pytest.raises(sv.TracingError) as info:
            sv.jit(fn, shapes=[spec])(np.ones(shape, np.float32))
        fix = str(info.value).split("fix:")[1]
        assert ", ".join(repr(c) for c in needed) in fix and "==" not in fix.replace(" == 0", ""), (
            fix
        )
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        got = sv.jit(fn, shapes=[spec], constraints=needed)(x)
        np.testing.assert_allclose(got, fn(x), rtol=1e-5, atol=1e-5)


def test_keyword_arguments_call_as_their_positions() -> None:
    """``f(x, scale=3.0)`` is ``f(x, 3.0)``: traced and cached as the positional call, a
    default between two given arguments filled in; keyword-only parameters are refused
    with the fix."""

    def layer(x: Any, scale: float = 2.0, shift: Any = 0.0) -> Any:
        return x * scale + shift

    f = sv.jit(layer)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(f(x, scale=3.0), x * 3)
    np.testing.assert_array_equal(f(x=x, shift=np.float32(1)), x * 2 + 1)
    np.testing.assert_array_equal(f(x, 3.0), x * 3)
    assert f.trace_count == 2  # (x, scale) once, (x, scale, shift) once
    g = sv.jit(layer, shapes=("b, 3", None))
    np.testing.assert_array_equal(g(x, scale=0.5), x * 0.5)
    with pytest.raises(TypeError, match="unexpected keyword argument 'bias'"):
        f(x, bias=1.0)

    def kw_only(x: Any, *, scale: float) -> Any:
        return x * scale

    with pytest.raises(TypeError, match=r"keyword-only arguments \(scale\)(.|\n)*partial"):
        sv.jit(kw_only)(x, scale=2.0)


def test_a_jitted_function_called_in_a_trace_is_traced_inline() -> None:
    """A jitted layer used inside another jitted function is part of that function's
    program (it raised 'conversion to a NumPy array of a traced array')."""
    inner = sv.jit(lambda a: snp.maximum(a * 2.0, 0.0))
    outer = sv.jit(lambda a: inner(a) + inner(a + 1.0).sum(), shapes="b, 4")
    x = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    want = np.maximum(x * 2, 0) + np.maximum((x + 1) * 2, 0).sum()
    np.testing.assert_allclose(outer(x), want, rtol=1e-6)
    np.testing.assert_allclose(inner(x), np.maximum(x * 2, 0))  # still callable alone
