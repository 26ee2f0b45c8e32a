"""jit on streams of shapes, export/serialize/load, entry errors, control flow."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import shapevm as sv
import shapevm.numpy as snp
from shapevm import lax

RNG = np.random.default_rng(0)
W = RNG.standard_normal((16, 8)).astype(np.float32)


def mlp(x):
    return snp.tanh(x @ W) * 2.0 + 1.0


def ref(x):
    return np.tanh(x @ W) * 2.0 + 1.0


def test_jit_without_specs_makes_the_varying_dimension_symbolic() -> None:
    f = sv.jit(mlp)
    for b in (1, 3, 7, 64, 5, 3):
        x = RNG.standard_normal((b, 16)).astype(np.float32)
        np.testing.assert_allclose(f(x), ref(x), rtol=1e-5, atol=1e-6)
    assert f.trace_count == 2  # concrete first, then once with b symbolic
    assert f.report == ["mlp: made symbolic: x.shape[0] as d0"]


def test_dimensions_that_vary_together_share_a_variable() -> None:
    f = sv.jit(lambda x, y: x + y)
    for n in (2, 5, 9):
        out = f(np.ones((n, 3), np.float32), np.ones((n, 3), np.float32))
        assert out.shape == (n, 3)
    assert f.trace_count == 2
    assert "as d0" in f.report[0] and "d1" not in f.report[0]


def test_jit_falls_back_to_one_trace_per_shape_and_says_why() -> None:
    def needs_concrete(x):
        return x[:16]  # needs the axis to be >= 16, unknown for a symbolic axis

    f = sv.jit(needs_concrete)
    for n in (20, 30, 40):
        assert f(np.arange(n, dtype=np.float32)).shape == (16,)
    assert f.trace_count == 3  # one per shape; the symbolic attempt failed
    assert "could not trace with symbolic dimensions" in f.report[0]


def test_jit_with_shapes_traces_once() -> None:
    f = sv.jit(mlp, shapes="b, 16", constraints=["b <= 128"])
    for b in (1, 2, 128):
        f(np.ones((b, 16), np.float32))
    assert f.trace_count == 1
    with pytest.raises(ValueError, match="b <= 128"):
        f(np.ones((129, 16), np.float32))


def test_pytrees_and_static_arguments() -> None:
    def f(params, x, scale):
        return {"y": x @ params["w"] * scale, "n": x.shape[0]}

    g = sv.jit(f, static_argnums=2)
    out = g({"w": W}, np.ones((3, 16), np.float32), 2.0)
    np.testing.assert_allclose(out["y"], np.ones((3, 16)) @ W * 2.0, rtol=1e-5)
    assert int(out["n"]) == 3


def test_export_serialize_roundtrip_and_constraints_travel() -> None:
    (b,) = sv.symbolic_shape("b", constraints=["b <= 64"])
    exp = sv.export(sv.jit(mlp))(sv.ShapeDtypeStruct((b, 16), np.float32))
    back = sv.deserialize(exp.serialize())
    assert repr(back) == repr(exp) == "Exported(mlp: (f32[b, 16]) -> (f32[b, 8]) where b <= 64)"
    x = np.ones((5, 16), np.float32)
    np.testing.assert_array_equal(back.call(x), exp.call(x))
    with pytest.raises(ValueError, match="b <= 64"):
        back.call(np.ones((65, 16), np.float32))


def test_exported_file_runs_in_a_fresh_process_without_the_source(tmp_path: Path) -> None:
    (b,) = sv.symbolic_shape("b")
    exp = sv.export(sv.jit(mlp))(sv.ShapeDtypeStruct((b, 16), np.float32))
    path = tmp_path / "mlp.svbc"
    exp.save(path)
    x = RNG.standard_normal((4, 16)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    code = textwrap.dedent(
        f"""
        import numpy as np, shapevm as sv
        exp = sv.load({str(path)!r})
        y = exp.call(np.load({str(tmp_path / "x.npy")!r}))
        np.save({str(tmp_path / "y.npy")!r}, y)
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path)
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), ref(x), rtol=1e-5, atol=1e-6)


def test_wrong_inputs_get_clear_errors() -> None:
    (b,) = sv.symbolic_shape("b")
    exp = sv.export(sv.jit(mlp))(sv.ShapeDtypeStruct((b, 16), np.float32))
    with pytest.raises(sv.InputDTypeError, match=r"x has dtype float64, but .* f32\[b, 16\]"):
        exp.call(np.ones((2, 16)))
    with pytest.raises(ValueError, match="Rank mismatch for x"):
        exp.call(np.ones((2, 16, 1), np.float32))
    with pytest.raises(ValueError, match=r"x.shape\[1\] must be 16, found 15"):
        exp.call(np.ones((2, 15), np.float32))
    with pytest.raises(TypeError, match="called with arguments structured as"):
        exp.call(np.ones((2, 16), np.float32), np.ones(3))
    # a nested list is named as one, not shown as a structure of one '*' per number
    rows = np.ones((40, 16)).tolist()
    for call in (exp.call, exp.jit()):
        with pytest.raises(TypeError, match=r"'x' of 'mlp' is a list, not an array") as err:
            call(rows)
        assert "f32[b, 16]" in str(err.value) and "np.asarray(x, np.float32)" in str(err.value)
        assert len(str(err.value)) < 300
        # ONNX Runtime's habit: a dict of feeds
        with pytest.raises(TypeError, match=r"takes its inputs in order, not as a dict") as err:
            call({"x": np.ones((2, 16), np.float32)})
        assert "(x: f32[b, 16])" in str(err.value) and "keys ['x']" in str(err.value)


def test_corrupt_bytes_are_a_format_error() -> None:
    (b,) = sv.symbolic_shape("b")
    blob = bytearray(sv.export(sv.jit(mlp))(sv.ShapeDtypeStruct((b, 16), np.float32)).serialize())
    blob[100] ^= 0xFF
    with pytest.raises(sv.BytecodeFormatError):
        sv.deserialize(bytes(blob))


def test_traced_values_cannot_be_used_as_python_values() -> None:
    def f(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(sv.ConcreteValueError, match=r"lax\.cond"):
        sv.jit(f)(np.ones(3, np.float32))
    with pytest.raises(
        sv.InconclusiveDimensionOperation, match=r"snp\.asarray|shapevm\.numpy\.asarray"
    ):
        sv.export(sv.jit(lambda x: x * int(x.shape[0])))(
            sv.ShapeDtypeStruct(sv.symbolic_shape("b"), np.float32)
        )


def test_a_numpy_table_indexed_by_a_traced_array_says_how_to_index_it() -> None:
    """NumPy converts a traced index to an array (nothing dispatches ``ndarray[...]``): the
    error names that case and the spelling that traces, which then runs."""
    table = np.arange(12, dtype=np.float32).reshape(6, 2)
    with pytest.raises(sv.ConcreteValueError, match=r"shapevm\.numpy\.asarray\(table\)\[ids\]"):
        sv.jit(lambda x: x + table[snp.arange(x.shape[0])], shapes="b, 2")(
            np.ones((3, 2), np.float32)
        )
    y = sv.jit(lambda x: x + snp.asarray(table)[snp.arange(x.shape[0])], shapes="b, 2")(
        np.ones((3, 2), np.float32)
    )
    np.testing.assert_array_equal(y, 1.0 + table[:3])


def test_cond_on_data_and_on_undecided_dimensions() -> None:
    f = sv.jit(lambda x: lax.cond(x.sum() > 0, lambda: x * 2.0, lambda: x - 1.0), shapes="b")
    np.testing.assert_array_equal(f(np.ones(3, np.float32)), [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(f(-np.ones(2, np.float32)), [-2.0, -2.0])
    g = sv.jit(lambda x: lax.cond(x.shape[0] >= 4, lambda: x * 0.0, lambda: x[:1]), shapes="b")
    assert g(np.ones(6, np.float32)).tolist() == [0.0] * 6
    assert g(np.ones(3, np.float32)).tolist() == [1.0]
    text = sv.export(g)(sv.ShapeDtypeStruct(sv.symbolic_shape("b"), np.float32)).text()
    assert "BRANCH_IF s0 >= 4" in text and "f32[dynamic] = TENSOR_PHI" in text


def test_fori_loop_with_a_symbolic_trip_count() -> None:
    f = sv.jit(
        lambda x: lax.fori_loop(0, x.shape[0], lambda i, c: c + i, snp.zeros((), np.int32)),
        shapes="n",
    )
    assert int(f(np.ones(5, np.float32))) == 10
    assert int(f(np.ones(1, np.float32))) == 0


def test_data_dependent_dimension_from_a_mask() -> None:
    f = sv.jit(lambda x: x[x > 0].sum() + snp.sum(x > 0), shapes="b")
    x = np.array([1.0, -2.0, 3.0], np.float32)
    assert float(f(x)) == 6.0


def test_a_data_dependent_size_used_as_a_number_says_how_to_count_it() -> None:
    """``x[mask].shape[0]`` is known only from the data: as an operand (``sum / n``) or in
    Python arithmetic it is refused naming the count that stands for it."""
    x = np.array([1.0, -2.0, 3.0], np.float32)
    for body in (
        lambda v: v[v > 0].sum() / v[v > 0].shape[0],
        lambda v: snp.maximum(v[v > 0].shape[0], 1),
        lambda v: v[v > 0].sum() / (v[v > 0].shape[0] + 1),
    ):
        with pytest.raises(TypeError, match="a data-dependent size") as err:
            sv.jit(body, shapes="b")(x)
        assert "snp.count_nonzero(mask)" in str(err.value) and "found:    dynamic" in str(err.value)

    def mean_of_positives(v: Any) -> Any:  # the fix the message gives
        m = v > 0
        return snp.sum(snp.where(m, v, 0)) / snp.maximum(snp.count_nonzero(m), 1)

    assert float(sv.jit(mean_of_positives, shapes="b")(x)) == 2.0
