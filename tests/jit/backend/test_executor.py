"""The region executor (C): views, copies, fills and products over the dimension heap;
mismatched calls refused with ExecMismatch; corrupt regions refused at construction,
never run; calls from several threads at once."""

from __future__ import annotations

import platform
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import shapevm as sv
from shapevm import native
from shapevm.jit.backend import nodes as N
from shapevm.jit.backend.dims import DimHeap
from shapevm.jit.backend.nodes import Kernel, Lowered, Tensor
from shapevm.jit.backend.plan import build_spec, plan_memory
from shapevm.ops import get_op

F32 = np.dtype(np.float32)
A, B = sv.symbolic_shape("a, b")


def spec_of(
    tensors: list[Tensor],
    kernels: list[Kernel],
    inputs: list[int],
    outputs: list[int],
    constraints: Sequence[Any] = (),
    variables: tuple[str, ...] = ("a", "b"),
) -> dict[str, Any]:
    """The executor's arrays for a region made by hand, as the lowering makes them."""
    for i, t in enumerate(outputs):
        tensors[t].kind = "output"
        tensors[t].out_index = i
    low = Lowered(tensors, kernels, inputs, outputs, list(inputs), list(outputs))
    heap = DimHeap(variables)
    for c in constraints:
        heap.check_nonnegative(c)
    return build_spec(low, plan_memory(low), heap)


def executor(*args: Any, **kwargs: Any) -> Any:
    """`native.Executor` over `spec_of`'s arrays."""
    return native.Executor(spec_of(*args, **kwargs))


def test_transpose_slice_reshape_views_and_a_product() -> None:
    # y = (x^T)[1:, :] reshaped to [(b - 1) * a]; z = x @ x^T
    ts = [
        Tensor(0, "input", F32, (A, B), arg=0),
        Tensor(
            1, "view", F32, (B, A), base=0, viewop=N.V_TRANSPOSE, params=(1, 0), contiguous=False
        ),
        Tensor(
            2,
            "view",
            F32,
            (B - 1, A),
            base=1,
            viewop=N.V_SLICE,
            params=(1, 0),
            params2=(1, 1),
            contiguous=False,
        ),
        Tensor(3, "temp", F32, (B - 1, A)),
        Tensor(4, "view", F32, ((B - 1) * A,), base=3, viewop=N.V_RESHAPE),
        Tensor(5, "temp", F32, ((B - 1) * A,)),
        Tensor(6, "temp", F32, (A, A)),
    ]
    ks = [
        Kernel(N.OP_COPY, [2], [3]),
        Kernel(N.OP_COPY, [4], [5]),
        Kernel(N.OP_MATMUL, [0, 1], [6], fattr=[0.5]),
    ]
    ex = executor(ts, ks, [0], [5, 6])
    for a, b in [(1, 2), (3, 5), (7, 4)]:
        x = np.random.default_rng(a).standard_normal((a, b)).astype(np.float32)
        y, z = ex(x)
        np.testing.assert_array_equal(y, x.T[1:].reshape(-1))
        np.testing.assert_allclose(z, 0.5 * x @ x.T, rtol=1e-5, atol=1e-6)


def test_fill_and_broadcast() -> None:
    ts = [
        Tensor(0, "input", F32, (B,), arg=0),
        Tensor(1, "view", F32, (A, B), base=0, viewop=N.V_BROADCAST, contiguous=False),
        Tensor(2, "temp", F32, (A, B)),
        Tensor(3, "temp", np.dtype(np.int64), (A,)),
    ]
    ks = [Kernel(N.OP_COPY, [1], [2]), Kernel(N.OP_FILL, [], [3], fattr=[7.0])]
    ex = executor(ts, ks, [0], [2, 3])
    y, k = ex((4, 3), np.arange(3, dtype=np.float32))
    np.testing.assert_array_equal(y, np.tile(np.arange(3, dtype=np.float32), (4, 1)))
    assert k.dtype == np.int64 and k.tolist() == [7, 7, 7, 7]


def _copy_executor(constraints: list[Any] = ()) -> Any:  # type: ignore[assignment]
    ts = [Tensor(0, "input", F32, (A, 3), arg=0), Tensor(1, "temp", F32, (A, 3))]
    return executor(ts, [Kernel(N.OP_COPY, [0], [1])], [0], [1], constraints, ("a",))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((np.zeros((2, 4), np.float32),), "argument 0: dimension 1 does not match"),
        ((np.zeros((2, 3)),), "argument 0 has another dtype or rank"),
        ((np.zeros(3, np.float32),), "argument 0 has another dtype or rank"),
        (([[1.0, 2.0, 3.0]],), "argument 0 is not an array"),
        ((), "expected 1 arrays, found 0"),
        ((np.zeros((20, 3), np.float32),), "constraint 0 does not hold"),
    ],
)
def test_mismatched_calls_raise_exec_mismatch(args: tuple[Any, ...], message: str) -> None:
    ex = _copy_executor([16 - A])  # a <= 16
    with pytest.raises(native.ExecMismatch, match=message):
        ex(*args)
    assert ex.stats()["mismatches"] == 1


def test_inputs_that_are_not_contiguous_are_copied_first() -> None:
    ex = _copy_executor()
    x = np.arange(30, dtype=np.float32).reshape(5, 6)[:, ::2]
    (y,) = ex(x)
    np.testing.assert_array_equal(y, x)


def test_outputs_are_fresh_arrays_every_call() -> None:
    ex = _copy_executor()
    x = np.ones((2, 3), np.float32)
    (y1,), (y2,) = ex(x), ex(x)
    assert y1 is not y2 and not np.shares_memory(y1, y2)


def _spec() -> dict[str, Any]:
    ts = [
        Tensor(0, "input", F32, (A, 3), arg=0),
        Tensor(1, "temp", F32, (A, 3)),
        Tensor(2, "temp", F32, (A, 3)),
    ]
    ks = [Kernel(N.OP_COPY, [0], [1]), Kernel(N.OP_COPY, [1], [2])]
    ts[2].kind, ts[2].out_index = "output", 0
    low = Lowered(ts, ks, [0], [2], [0], [2])
    return build_spec(low, plan_memory(low), DimHeap(["a"]))


@settings(max_examples=300)
@given(
    field=st.sampled_from(["slots", "instrs", "buffers", "outputs", "dimprog", "heap"]),
    index=st.integers(0, 200),
    value=st.integers(-(2**31), 2**31 - 1),
)
def test_a_corrupt_region_is_refused_not_run(field: str, index: int, value: int) -> None:
    spec = _spec()
    array = spec[field].copy()
    flat = array.reshape(-1)
    if flat.size == 0:
        return
    flat[index % flat.size] = value
    spec[field] = array
    try:
        ex = native.Executor(spec)
    except (native.NativeKernelError, ValueError, TypeError):
        return
    x = np.ones((2, 3), np.float32)  # whatever was accepted must run safely or refuse
    try:
        ex(x)
    except (native.ExecMismatch, RuntimeError, MemoryError, ValueError):
        pass


def test_missing_fields_are_named() -> None:
    spec = _spec()
    del spec["slots"]
    with pytest.raises(native.NativeKernelError, match="missing field"):
        native.Executor(spec)


def test_many_threads_call_one_executor() -> None:
    ex = _copy_executor()
    errors: list[str] = []

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(200):
            a = int(rng.integers(1, 40))
            x = rng.standard_normal((a, 3)).astype(np.float32)
            (y,) = ex(x)
            if not np.array_equal(x, y):
                errors.append("mismatch")

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert ex.stats()["calls"] == 800


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_iota_counts_in_each_dtype(dtype: Any) -> None:
    """``arange(a)`` of the call's length, NumPy's conversion of each integer."""
    ts = [Tensor(0, "input", F32, (A,), arg=0), Tensor(1, "temp", np.dtype(dtype), (A,))]
    ex = executor(ts, [Kernel(N.OP_IOTA, [], [1])], [0], [1])
    for n in (0, 1, 300):
        (y,) = ex((n, 1), np.zeros(n, np.float32))
        assert y.dtype == dtype
        np.testing.assert_array_equal(y, np.arange(n, dtype=dtype))


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
def test_arg_kernel_over_an_empty_axis_fails_the_call(kind: str) -> None:
    ts = [Tensor(0, "input", F32, (A, B), arg=0), Tensor(1, "temp", np.dtype(np.int64), (A,))]
    ex = executor(ts, [Kernel(N.OP_EXTERNAL, [0], [1], obj=native.arg_kernel(kind, 1))],
                  [0], [1])  # fmt: skip
    with pytest.raises(native.ExecFailure, match=f"{kind} of an empty sequence"):
        ex((2, 0), np.zeros((2, 0), np.float32))
    (y,) = ex((2, 3), np.array([[1, 3, 3], [2, 0, 0]], np.float32))
    assert y.tolist() == ([1, 0] if kind == "argmax" else [0, 1])
    with pytest.raises(native.NativeKernelError, match="arg_kernel: an unknown search"):
        native.arg_kernel("argsort", 0)


@pytest.mark.parametrize("kind", ["less", "less_equal", "greater", "greater_equal", "equal",
                                  "not_equal"])  # fmt: skip
@pytest.mark.parametrize(
    ("da", "db"), [(np.int64, np.int64), (np.int32, np.int64), (np.int32, np.int32)]
)
def test_compare_kernel_is_exact_for_any_integers(kind: str, da: Any, db: Any) -> None:
    """Two integer tensors compared exactly (past 2**24, where float32 lanes would round
    16777217 to 16777216), the second broadcast along the first axis."""
    ts = [
        Tensor(0, "input", np.dtype(da), (A, B), arg=0),
        Tensor(1, "input", np.dtype(db), (B,), arg=1),
        Tensor(2, "view", np.dtype(db), (A, B), base=1, viewop=N.V_BROADCAST, contiguous=False),
        Tensor(3, "temp", np.dtype(np.bool_), (A, B)),
    ]
    run = native.compare_kernel(kind)
    ex = executor(ts, [Kernel(N.OP_EXTERNAL, [0, 2], [3], obj=run)], [0, 1], [3])
    big = 2**24
    a = np.array([[big + 1, -5, 0, big], [3, 3, -(2**31), 2**31 - 1]], da)
    b = np.array([big, -5, 1, big + 1], db)
    (y,) = ex((2, 4), a, b)
    np.testing.assert_array_equal(y, getattr(np, kind)(a, b))


@pytest.mark.parametrize("kind", ["add", "sub", "mul", "maximum", "minimum", "floordiv", "mod"])
@pytest.mark.parametrize(("da", "dy"), [(np.int64, np.int64), (np.int32, np.int32),
                                        (np.int32, np.int64)])  # fmt: skip
def test_int_arith_kernel_wraps_around_as_numpy_does(kind: str, da: Any, dy: Any) -> None:
    """Integer arithmetic at the ends of the type's range (where NumPy wraps around), the
    second operand an int64 row broadcast along the first axis."""
    ts = [
        Tensor(0, "input", np.dtype(da), (A, B), arg=0),
        Tensor(1, "input", np.dtype(np.int64), (B,), arg=1),
        Tensor(2, "view", np.dtype(np.int64), (A, B), base=1, viewop=N.V_BROADCAST,
               contiguous=False),
        Tensor(3, "temp", np.dtype(dy), (A, B)),
    ]  # fmt: skip
    run = native.int_arith_kernel(kind)
    ex = executor(ts, [Kernel(N.OP_EXTERNAL, [0, 2], [3], obj=run)], [0, 1], [3])
    top = np.iinfo(da).max
    a = np.array([[top, -top - 1, 0, 7], [3, -3, 2**20, -(2**20)]], da)
    b = np.array([1, -1, 2**40 + 5, -9], np.int64)
    (y,) = ex((2, 4), a, b)
    ufuncs = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "floordiv": np.floor_divide}
    ufunc = ufuncs.get(kind) or getattr(np, kind)
    with np.errstate(over="ignore"):
        want = ufunc(a.astype(np.int64), b).astype(dy)
    assert y.dtype == dy
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("kind", ["abs", "neg"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_int_abs_and_neg_wrap_at_the_types_minimum(kind: str, dtype: Any) -> None:
    ts = [
        Tensor(0, "input", np.dtype(dtype), (A,), arg=0),
        Tensor(1, "temp", np.dtype(dtype), (A,)),
    ]
    ex = executor(ts, [Kernel(N.OP_EXTERNAL, [0], [1], obj=native.int_arith_kernel(kind))],
                  [0], [1])  # fmt: skip
    info = np.iinfo(dtype)
    x = np.array([info.min, info.min + 1, -7, 0, 7, info.max], dtype)
    (y,) = ex((6, 1), x)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(y, np.abs(x) if kind == "abs" else np.negative(x))
    two = [Tensor(0, "input", np.dtype(dtype), (A,), arg=0),
           Tensor(1, "temp", np.dtype(dtype), (A,))]  # fmt: skip
    run = native.int_arith_kernel(kind)
    bad = executor(two, [Kernel(N.OP_EXTERNAL, [0, 0], [1], obj=run)], [0], [1])
    with pytest.raises(native.ExecFailure, match="abs or negative: takes one tensor"):
        bad((2, 1), np.zeros(2, dtype))


@pytest.mark.parametrize("kind", ["add", "sub", "mul"])
def test_int64_arith_of_a_column_broadcast_along_the_rows(kind: str) -> None:
    """A flat index (row * width + column, width a column of the call): an operand of no
    stride along the rows, wrapping as NumPy's."""
    ts = [
        Tensor(0, "input", np.dtype(np.int64), (A, B), arg=0),
        Tensor(1, "input", np.dtype(np.int64), (A, 1), arg=1),
        Tensor(2, "view", np.dtype(np.int64), (A, B), base=1, viewop=N.V_BROADCAST,
               contiguous=False),
        Tensor(3, "temp", np.dtype(np.int64), (A, B)),
    ]  # fmt: skip
    run = native.int_arith_kernel(kind)
    ex = executor(ts, [Kernel(N.OP_EXTERNAL, [2, 0], [3], obj=run)], [0, 1], [3])
    top = np.iinfo(np.int64).max
    a = np.array([[top, -top - 1, 0, 7, 5], [3, -3, 2**40, -(2**20), 1]], np.int64)
    col = np.array([[2**40 + 5], [-9]], np.int64)
    (y,) = ex((2, 5), a, col)
    with np.errstate(over="ignore"):
        want = {"add": np.add, "sub": np.subtract, "mul": np.multiply}[kind](col, a)
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("kind", ["floordiv", "mod"])
def test_integer_division_by_zero_or_minus_one_is_numpys(kind: str) -> None:
    """x // 0 and x % 0 are 0 (NumPy warns), the smallest int64 // -1 wraps around to
    itself (C's division would trap), signs round down as NumPy's."""
    i64 = np.dtype(np.int64)
    ts = [Tensor(0, "input", i64, (A,), arg=0), Tensor(1, "input", i64, (A,), arg=1),
          Tensor(2, "temp", i64, (A,))]  # fmt: skip
    run = native.int_arith_kernel(kind)
    ex = executor(ts, [Kernel(N.OP_EXTERNAL, [0, 1], [2], obj=run)], [0, 1], [2])
    low = np.iinfo(np.int64).min
    a = np.array([7, -7, 7, -7, 5, low, low, -5, 0], np.int64)
    b = np.array([2, 2, -2, -2, 0, -1, 3, -1, 0], np.int64)
    (y,) = ex((9, 1), a, b)
    with np.errstate(divide="ignore", over="ignore"):
        want = np.floor_divide(a, b) if kind == "floordiv" else np.mod(a, b)
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize(("da", "db", "dy"), [(np.int64, np.int64, np.int64),
                                              (np.int32, np.int32, np.int32),
                                              (np.int32, np.int64, np.int64)])  # fmt: skip
def test_int_where_picks_exact_integers(da: Any, db: Any, dy: Any) -> None:
    """where(condition, a, b) of integers past 2**24 (a float32 lane would round them),
    the condition a column broadcast along the rows and b a row broadcast down them."""
    boolean = np.dtype(np.bool_)
    ts = [
        Tensor(0, "input", boolean, (A, 1), arg=0),
        Tensor(1, "input", np.dtype(da), (A, B), arg=1),
        Tensor(2, "input", np.dtype(db), (B,), arg=2),
        Tensor(3, "view", boolean, (A, B), base=0, viewop=N.V_BROADCAST, contiguous=False),
        Tensor(4, "view", np.dtype(db), (A, B), base=2, viewop=N.V_BROADCAST, contiguous=False),
        Tensor(5, "temp", np.dtype(dy), (A, B)),
    ]
    run = native.int_arith_kernel("where")
    ex = executor(ts, [Kernel(N.OP_EXTERNAL, [3, 1, 4], [5], obj=run)], [0, 1, 2], [5])
    c = np.array([[True], [False], [True]])
    a = np.array([[2**24 + 1, -1, 7], [3, 2**30 + 3, -(2**31)], [0, 5, 2**31 - 1]], da)
    b = np.array([-(2**24) - 1, 9, -2], db)
    (y,) = ex((3, 3), c, a, b)
    assert y.dtype == dy
    np.testing.assert_array_equal(y, np.where(c, a, b).astype(dy))
    i32 = np.dtype(np.int32)  # a condition of integers: the kernel refuses it
    ts[0] = Tensor(0, "input", i32, (A, 1), arg=0)
    ts[3] = Tensor(3, "view", i32, (A, B), base=0, viewop=N.V_BROADCAST, contiguous=False)
    ex = executor(ts, [Kernel(N.OP_EXTERNAL, [3, 1, 4], [5], obj=run)], [0, 1, 2], [5])
    with pytest.raises(native.ExecFailure, match="int where: a bool condition"):
        ex((3, 3), c.astype(np.int32), a, b)


def test_int_arith_kernel_checks_its_operands() -> None:
    ts = [Tensor(0, "input", F32, (A,), arg=0), Tensor(1, "temp", np.dtype(np.int64), (A,))]
    ex = executor(ts, [Kernel(N.OP_EXTERNAL, [0], [1], obj=native.int_arith_kernel("cast"))],
                  [0], [1])  # fmt: skip
    with pytest.raises(native.ExecFailure, match="int32 or int64 operands"):
        ex((3, 1), np.zeros(3, np.float32))
    with pytest.raises(native.NativeKernelError, match="int_arith_kernel: an unknown integer"):
        native.int_arith_kernel("floor_divide")


def test_an_unknown_comparison_is_refused() -> None:
    with pytest.raises(native.NativeKernelError, match="compare_kernel: an unknown comparison"):
        native.compare_kernel("less_than")


@pytest.mark.parametrize(
    ("args", "found"),
    [(("median", 1, 2), "median"), (("sum", 2, 1), "axes [2, 1)"), (("sum", 0, 9), "axes [0, 9)")],
)
def test_a_reduce_kernel_of_an_unknown_kind_or_axes_is_refused(args: Any, found: str) -> None:
    with pytest.raises(native.NativeKernelError, match="reduce_kernel") as info:
        native.reduce_kernel(*args)
    assert f"found:    {found}" in str(info.value)


@pytest.mark.parametrize("kind", ["sum", "mean", "prod", "max", "min"])
def test_a_middle_reduction_over_an_empty_axis(kind: str) -> None:
    """Over no rows: sum 0, prod 1, mean NaN (as NumPy, without its warning); max and min
    have no identity and fail the call, as NumPy raises."""
    ts = [Tensor(0, "input", F32, (2, A, B), arg=0), Tensor(1, "temp", F32, (2, B))]
    ex = executor(ts, [Kernel(N.OP_EXTERNAL, [0], [1], obj=native.reduce_kernel(kind, 1, 2))],
                  [0], [1])  # fmt: skip
    x = np.zeros((2, 0, 3), np.float32)
    if kind in ("max", "min"):
        with pytest.raises(native.ExecFailure, match="no identity"):
            ex((0, 3), x)
        return
    (y,) = ex((0, 3), x)
    want = {"sum": 0.0, "mean": np.nan, "prod": 1.0}[kind]
    np.testing.assert_array_equal(y, np.full((2, 3), want, np.float32))


@pytest.mark.parametrize(
    ("dtype", "shape"), [(np.bool_, (A,)), (np.int16, (A,)), (np.float32, (A, 2))]
)
def test_an_iota_of_another_dtype_or_rank_is_refused(dtype: Any, shape: Any) -> None:
    ts = [Tensor(0, "input", F32, (A,), arg=0), Tensor(1, "temp", np.dtype(dtype), shape)]
    with pytest.raises(native.NativeKernelError, match="iota: a result of rank 1"):
        executor(ts, [Kernel(N.OP_IOTA, [], [1])], [0], [1])


@pytest.mark.parametrize(
    ("dtype", "value"),
    [(np.float32, -1.5), (np.float64, 2.25), (np.int64, -7.0), (np.int32, 9.0),
     (np.int16, -3.0), (np.int8, 5.0), (np.uint8, 200.0), (np.bool_, 1.0)],
)  # fmt: skip
def test_fill_writes_every_dtype(dtype: Any, value: float) -> None:
    """A fill of each item size (typed stores, 8 down to 1 byte), of a size past one row."""
    ts = [Tensor(0, "input", F32, (A,), arg=0), Tensor(1, "temp", np.dtype(dtype), (A, B))]
    ex = executor(ts, [Kernel(N.OP_FILL, [], [1], fattr=[value])], [0], [1])
    (y,) = ex((3, 257), np.zeros(3, np.float32))
    assert y.dtype == dtype and y.shape == (3, 257)
    np.testing.assert_array_equal(y, np.full((3, 257), value).astype(dtype))


OWN = np.random.default_rng(23)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
@pytest.mark.parametrize(("exclusive", "reverse"), [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_scan_kernel_adds_in_numpys_order(dtype: Any, exclusive: int, reverse: int) -> None:
    """cumsum along axis 0 of a transposed view (strides on both sides), exclusive or from
    the end: float32 sums equal NumPy's bit for bit (the same order of additions), integers
    wrap around in their type."""
    dt = np.dtype(dtype)
    ts = [
        Tensor(0, "input", dt, (A, B), arg=0),
        Tensor(1, "view", dt, (B, A), base=0, viewop=N.V_TRANSPOSE, params=(1, 0),
               contiguous=False),
        Tensor(2, "temp", dt, (B, A)),
    ]  # fmt: skip
    run = native.scan_kernel(0, bool(exclusive), bool(reverse))
    ex = executor(ts, [Kernel(N.OP_EXTERNAL, [1], [2], obj=run)], [0], [2])
    ref = get_op("cumsum")
    assert ref is not None
    for a, b in [(3, 5), (1, 1), (40, 300), (2, 0)]:
        if dt.kind == "f":
            x = (OWN.standard_normal((a, b)) * 1e3).astype(dt)
        else:
            x = OWN.integers(np.iinfo(dt).min, np.iinfo(dt).max, (a, b), dtype=dt)
        (y,) = ex((a, b), x)
        attrs = {"axis": 0, "exclusive": bool(exclusive), "reverse": bool(reverse)}
        with np.errstate(over="ignore"):
            (want,) = ref.kernel([x.T], attrs)
        assert y.dtype == dt
        np.testing.assert_array_equal(y, want)


def test_scan_kernel_checks_its_operands_and_axis() -> None:
    ts = [Tensor(0, "input", F32, (A,), arg=0), Tensor(1, "temp", np.dtype(np.int64), (A,))]
    ex = executor(ts, [Kernel(N.OP_EXTERNAL, [0], [1], obj=native.scan_kernel(0, False, False))],
                  [0], [1])  # fmt: skip
    with pytest.raises(native.ExecFailure, match="a result of its shape and dtype"):
        ex((3, 1), np.zeros(3, np.float32))
    with pytest.raises(native.NativeKernelError, match="scan_kernel: an axis out of range"):
        native.scan_kernel(8, False, False)


def test_sizes_kernel_writes_the_calls_sizes() -> None:
    """The sizes of a view of one element broadcast to ``(a, b, a * b)`` (the executor
    evaluates them per call), as a vector; one size as a scalar; a result of the wrong
    length is refused."""
    i8 = np.dtype(np.uint8)
    ts = [
        Tensor(0, "input", F32, (A, B), arg=0),
        Tensor(1, "const", i8, (), array=np.zeros((), i8)),
        Tensor(2, "view", i8, (A, B, A * B), base=1, viewop=N.V_BROADCAST, contiguous=False),
        Tensor(3, "temp", np.dtype(np.int64), (3,)),
        Tensor(4, "view", i8, (B,), base=1, viewop=N.V_BROADCAST, contiguous=False),
        Tensor(5, "temp", np.dtype(np.float32), ()),
    ]
    run = native.sizes_kernel()
    kernels = [Kernel(N.OP_EXTERNAL, [2], [3], obj=run), Kernel(N.OP_EXTERNAL, [4], [5], obj=run)]
    ex = executor(ts, kernels, [0], [3, 5])
    for a, b in [(2, 7), (0, 3), (1000, 1)]:
        sizes, one = ex((a, b), np.zeros((a, b), np.float32))
        assert sizes.tolist() == [a, b, a * b] and one.dtype == np.float32 and one == b
    bad = [Tensor(0, "input", F32, (A, B), arg=0), Tensor(1, "temp", np.dtype(np.int64), (3,))]
    ex = executor(bad, [Kernel(N.OP_EXTERNAL, [0], [1], obj=run)], [0], [1])
    with pytest.raises(native.ExecFailure, match="one value per axis"):
        ex((2, 2), np.zeros((2, 2), np.float32))


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
def test_arg_kernel_picks_numpys_index_on_rows_of_any_length(kind: str) -> None:
    """Rows searched lane by lane (16 at a time) give NumPy's index: the first of tied
    extremes (0.0 and -0.0 tie), the first NaN's when a row has one, infinities, lengths
    around the lane count; short rows (under 64) side by side, alone or on the pool."""
    ts = [Tensor(0, "input", F32, (A, B), arg=0), Tensor(1, "temp", np.dtype(np.int64), (A,))]
    ex = executor(ts, [Kernel(N.OP_EXTERNAL, [0], [1], obj=native.arg_kernel(kind, 1))],
                  [0], [1])  # fmt: skip
    values = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 2.0], np.float32)
    for n, rows in [(1, 40), (2, 40), (5, 40), (12, 40), (15, 40), (5, 9000), (12, 3001),
                    (16, 40), (17, 40), (31, 40), (33, 40), (30, 5000), (63, 130), (64, 40),
                    (70, 40)]:  # fmt: skip
        x = OWN.choice(values[:-2], (rows, n)).astype(np.float32)  # many ties
        x[::3] = OWN.standard_normal((len(x[::3]), n)).astype(np.float32)
        x[1::5, OWN.integers(0, n)] = np.nan
        x[2::7, -1] = np.nan
        (y,) = ex((rows, n), x)
        np.testing.assert_array_equal(y, getattr(np, kind)(x, axis=1))


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
def test_arg_kernel_along_a_middle_axis_searches_the_lines_side_by_side(kind: str) -> None:
    """float32 along an axis that is not the last (a segmentation head's class per pixel):
    the lines of a block compared element by element, in chunks of the block, alone or on
    the pool: NumPy's index, the first of ties, the first NaN's."""
    c = sv.symbolic_shape("c")[0]
    ts = [Tensor(0, "input", F32, (A, B, c), arg=0), Tensor(1, "temp", np.dtype(np.int64), (A, c))]
    ex = executor(ts, [Kernel(N.OP_EXTERNAL, [0], [1], obj=native.arg_kernel(kind, 1))],
                  [0], [1], variables=("a", "b", "c"))  # fmt: skip
    values = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf], np.float32)
    for shape in [(1, 1, 2), (2, 5, 7), (3, 4, 300), (2, 9, 2100), (1, 70, 600)]:
        x = OWN.choice(values, shape).astype(np.float32)  # many ties
        x[:, :, ::3] = OWN.standard_normal(x[:, :, ::3].shape).astype(np.float32)
        x[:, OWN.integers(0, shape[1]), 1::5] = np.nan
        x[:, -1, 2::7] = np.nan
        (y,) = ex(shape, x)
        np.testing.assert_array_equal(y, getattr(np, kind)(x, axis=1))


@pytest.mark.parametrize("kind", ["max", "min"])
def test_a_middle_max_or_min_propagates_nan_and_keeps_signed_zeros(kind: str) -> None:
    ts = [Tensor(0, "input", F32, (2, A, B), arg=0), Tensor(1, "temp", F32, (2, B))]
    ex = executor(ts, [Kernel(N.OP_EXTERNAL, [0], [1], obj=native.reduce_kernel(kind, 1, 2))],
                  [0], [1])  # fmt: skip
    for shape in [(2, 1, 1), (2, 5, 7), (2, 33, 300), (2, 300, 90)]:
        x = OWN.standard_normal(shape).astype(np.float32)
        x[:, ::4, ::3] = np.inf if kind == "max" else -np.inf
        x[0, OWN.integers(0, shape[1]), 1::5] = np.nan
        (y,) = ex(shape[1:], x)
        np.testing.assert_array_equal(y, getattr(np, kind)(x, axis=1))


@pytest.mark.parametrize(
    "dtype", [np.float64, np.int32, np.int64, np.int16, np.int8, np.uint8, np.bool_]
)
@pytest.mark.parametrize("kind", ["argmax", "argmin"])
def test_arg_kernel_of_other_dtypes_along_any_axis(kind: str, dtype: Any) -> None:
    """Vote counts, class ids, masks, float64 scores: NumPy's index along either axis of a
    strided operand (the first of ties, the first NaN's), the types' ends included."""
    dt = np.dtype(dtype)
    for axis in (0, 1):
        ts = [Tensor(0, "input", dt, (A, B), arg=0), Tensor(1, "temp", np.dtype(np.int64), (A,))]
        if axis == 0:
            ts[1] = Tensor(1, "temp", np.dtype(np.int64), (B,))
        ex = executor(ts, [Kernel(N.OP_EXTERNAL, [0], [1], obj=native.arg_kernel(kind, axis))],
                      [0], [1])  # fmt: skip
        for shape in [(1, 1), (7, 3), (40, 33), (3, 70)]:
            if dt.kind == "f":
                x = OWN.integers(-3, 4, shape).astype(dt)
                x[1::5, 0] = np.nan
            elif dt.kind == "b":
                x = OWN.integers(0, 2, shape).astype(dt)
            else:
                info = np.iinfo(dt)
                x = (
                    OWN.integers(-3, 4, shape).astype(dt)
                    if info.min < 0
                    else OWN.integers(0, 4, shape).astype(dt)
                )
                x[::4, -1] = info.max
                x[2::5, 0] = info.min
            (y,) = ex(shape, x)
            np.testing.assert_array_equal(y, getattr(np, kind)(x, axis=axis))


@pytest.mark.parametrize(
    "dtype", [np.float32, np.float64, np.int32, np.int64, np.int16, np.int8, np.uint8, np.bool_]
)
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize(("axis", "first"), [(0, 0), (1, 0), (1, 1), (1, 3), (0, 2), (1, 64)])
def test_argsort_kernel_is_stable_with_nan_where_the_reference_puts_it(
    dtype: Any, descending: bool, axis: int, first: int
) -> None:
    """Indices sorting each line along an axis of a transposed view (axis 0: lines of the
    base's rows; 1: strided lines down its columns): equal values by lower index first in
    both orders (-0.0 ties with 0.0), NaN last ascending and first descending, infinities
    and the integer types' ends where they belong, as the op table's reference; lines of 0,
    1, a few and many elements. With ``first`` (a top k), the first positions of each line
    as the reference's, selected where the line is longer, sorted where it is not."""
    dt = np.dtype(dtype)
    ts = [
        Tensor(0, "input", dt, (A, B), arg=0),
        Tensor(1, "view", dt, (B, A), base=0, viewop=N.V_TRANSPOSE, params=(1, 0),
               contiguous=False),
        Tensor(2, "temp", np.dtype(np.int64), (B, A)),
    ]  # fmt: skip
    run = native.argsort_kernel(axis, descending, first)
    ex = executor(ts, [Kernel(N.OP_EXTERNAL, [1], [2], obj=run)], [0], [2])
    ref = get_op("argsort")
    assert ref is not None
    # lines of 32-bit keys up to 192 long are merged (runs of 16), float64/int64 ones up to
    # 48 sorted by insertion, longer ones by radix passes; the last split over threads
    for a, b in [(7, 3), (1, 1), (16, 3), (17, 3), (33, 2), (48, 4), (49, 4), (192, 2), (193, 2),
                 (300, 5), (0, 2), (2000, 40)]:  # fmt: skip
        x = OWN.integers(-3, 4, (a, b)).astype(dt)  # many ties
        if dt.kind == "f" and a > 2:
            x[::4, 0] = np.nan
            x[1, :] = -0.0
            x[2, :] = np.inf
            x[3, 1] = -np.inf
        if dt.kind in "iu" and a > 2:  # the type's ends
            x[0, :] = np.iinfo(dt).min
            x[2, :] = np.iinfo(dt).max
        (y,) = ex((a, b), x)
        (want,) = ref.kernel([x.T], {"axis": axis, "descending": descending})
        if first:  # the rest of each line is not written
            y, want = (np.moveaxis(v, axis, 0)[:first] for v in (y, want))
        np.testing.assert_array_equal(y, want)


def test_argsort_kernel_checks_its_operands_and_axis() -> None:
    ts = [Tensor(0, "input", F32, (A,), arg=0), Tensor(1, "temp", F32, (A,))]
    ex = executor(ts, [Kernel(N.OP_EXTERNAL, [0], [1], obj=native.argsort_kernel(0, False))],
                  [0], [1])  # fmt: skip
    with pytest.raises(native.ExecFailure, match="an int64 result of its shape"):
        ex((3, 1), np.zeros(3, np.float32))
    with pytest.raises(native.NativeKernelError, match="argsort_kernel: an axis out of range"):
        native.argsort_kernel(-1, False)
    for first in (-1, 65):
        with pytest.raises(native.NativeKernelError, match="a selection out of range"):
            native.argsort_kernel(0, False, first)


CAST_DTYPES = [np.float32, np.float64, np.float16, np.int32, np.int64, np.int16, np.int8,
               np.uint8, np.bool_]  # fmt: skip
X86 = platform.machine().lower() in ("x86_64", "amd64")


def _cast_source(s: np.dtype[Any]) -> np.ndarray[Any, Any]:
    if s.kind == "f":
        x = (OWN.standard_normal((5, 9)) * (30 if s == np.float16 else 1e3)).astype(s)
        x[0, :4] = [0.5, -2.5, 126.99, -0.0]  # ties, truncation, a signed zero
        x[3, :3] = [np.nan, np.inf, -np.inf]
        if s == np.float64:
            x[1, :3] = [1e300, -1e300, 1 + 2**-30]
            x[2, :3] = [65519.99, 65520.0, 2**-25 * 1.5]  # float16's last finite, a subnormal
        if s == np.float32:
            x[1, :2] = [2.0**-24 * 1.5, 2.0**-25]  # float16 subnormals: rounded, a tie to 0
        return x
    if s.kind == "b":
        return OWN.integers(0, 2, (5, 9)).astype(s)
    info = np.iinfo(s)
    x = OWN.integers(info.min, info.max, (5, 9), endpoint=True).astype(s)
    if s == np.int64:
        x[0, :2] = [2**40 + 7, -(2**35) - 1]
    return x


@pytest.mark.parametrize("dst", CAST_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("src", CAST_DTYPES, ids=lambda d: np.dtype(d).name)
def test_cast_kernel_converts_as_numpy_astype(src: Any, dst: Any) -> None:
    """Every conversion between the executor's dtypes gives NumPy's ``astype`` bits: into
    floats rounded to nearest even (float64 to float32 and float16 once, past the range to
    inf, float16's subnormals), integers wrapping into a narrower type, floats truncated
    into integers; a transposed operand (strides) and a contiguous one."""
    s, d = np.dtype(src), np.dtype(dst)
    ts = [
        Tensor(0, "input", s, (A, B), arg=0),
        Tensor(1, "view", s, (B, A), base=0, viewop=N.V_TRANSPOSE, params=(1, 0),
               contiguous=False),
        Tensor(2, "temp", d, (B, A)),
        Tensor(3, "temp", d, (A, B)),
    ]  # fmt: skip
    run = native.cast_kernel()
    kernels = [Kernel(N.OP_EXTERNAL, [1], [2], obj=run), Kernel(N.OP_EXTERNAL, [0], [3], obj=run)]
    ex = executor(ts, kernels, [0], [2, 3])
    x = _cast_source(s)
    if s.kind == "f" and d.kind in "iu" and not X86:
        x = np.nan_to_num(np.clip(x, -100, 100))  # out of range: the processor's answer
    with np.errstate(over="ignore", invalid="ignore"):
        want = x.astype(d)
    t, y = ex((5, 9), x)
    assert y.dtype == d
    np.testing.assert_array_equal(t.view(np.uint8), want.T.copy().view(np.uint8))
    np.testing.assert_array_equal(y.view(np.uint8), want.view(np.uint8))


def test_float16_rows_convert_as_numpy_bit_for_bit() -> None:
    """Contiguous float16 <-> float32 rows take branch-free conversions: every float16
    value, and float32 bit patterns at random and across float16's range (subnormals,
    ties, the overflow to inf, NaN payloads), give NumPy's bits."""
    every_half = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    near = np.arange(0x30000000, 0x48000000, 4099, dtype=np.uint32)
    anything = OWN.integers(0, 2**32, 1 << 16, dtype=np.uint64).astype(np.uint32)
    floats = np.concatenate([near, near | 0x80000000, anything]).view(np.float32)
    for x, dst in ((every_half, np.float32), (floats, np.float16)):
        ts = [Tensor(0, "input", x.dtype, (A,), arg=0), Tensor(1, "temp", np.dtype(dst), (A,))]
        ex = executor(ts, [Kernel(N.OP_EXTERNAL, [0], [1], obj=native.cast_kernel())], [0], [1])
        (y,) = ex((len(x), 1), x)
        with np.errstate(over="ignore", invalid="ignore"):
            want = x.astype(dst)
        np.testing.assert_array_equal(y.view(np.uint8), want.view(np.uint8))


@pytest.mark.skipif(not X86, reason="NumPy's conversion of an out-of-range float is the CPU's")
@pytest.mark.parametrize("dst", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.bool_])
@pytest.mark.parametrize("src", [np.float16, np.float32, np.float64])
def test_cast_kernel_gives_numpys_values_out_of_range(src: Any, dst: Any) -> None:
    """A NaN, an infinity, values past int32 and int64, and values that wrap into a narrow
    type give what NumPy gives on x86-64 (the conversion's indefinite value, then the low
    bits), not C's undefined behaviour."""
    v = [np.nan, np.inf, -np.inf, 200.7, -200.7, 3e9, -3e9, 1e10, 2.0**31, -(2.0**31) - 0.5,
         2.0**63, -(2.0**63), 1e30, 65536 + 5.5, -129.5, 127.9]  # fmt: skip
    with np.errstate(over="ignore", invalid="ignore"):
        x = np.array(v, np.float64).astype(src)
        want = x.astype(dst)
    ts = [Tensor(0, "input", np.dtype(src), (A,), arg=0), Tensor(1, "temp", np.dtype(dst), (A,))]
    ex = executor(ts, [Kernel(N.OP_EXTERNAL, [0], [1], obj=native.cast_kernel())], [0], [1])
    (y,) = ex((len(v), 1), x)
    np.testing.assert_array_equal(y, want)
