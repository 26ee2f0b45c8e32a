"""The region executor refuses, before it touches memory, every region whose arrays
contradict themselves and every call whose dimension values would take a view, a buffer or
a kernel's operands out of their memory.

Each region here is built as the lowering builds one (`Tensor`, `Kernel`, `build_spec`),
with one thing wrong; run without its check, each reads or writes memory it was not given
(the AddressSanitizer build in CI reports it).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

import shapevm as sv
from shapevm import native
from shapevm.jit.backend import nodes as N
from shapevm.jit.backend.dims import ADDC, FLOORDIV, MUL, DimHeap
from shapevm.jit.backend.nodes import Kernel, Tensor
from tests.jit.backend.test_executor import spec_of as region_spec

F32 = np.dtype(np.float32)
A, B = sv.symbolic_shape("a, b")


spec_of = functools.partial(region_spec, variables=("a",))


def x_a3() -> Tensor:
    return Tensor(0, "input", F32, (A, 3), arg=0)


def copy_of_view(view: Tensor, shape: tuple[Any, ...], variables: tuple[str, ...] = ("a",)) -> Any:
    """input x -> view -> copied into a buffer -> copied to the output."""
    ts = [x_a3() if variables == ("a",) else Tensor(0, "input", F32, (A, B), arg=0), view]
    ts += [Tensor(2, "temp", F32, shape), Tensor(3, "temp", F32, shape)]
    ks = [Kernel(N.OP_COPY, [1], [2]), Kernel(N.OP_COPY, [2], [3])]
    return native.Executor(spec_of(ts, ks, [0], [3], variables=variables))


# -- construction: the arrays must agree with themselves ------------------------------------
def _const_copy_spec() -> dict[str, Any]:
    c = np.arange(3, dtype=np.float32)
    ts = [x_a3(), Tensor(1, "const", F32, (3,), array=c), Tensor(2, "temp", F32, (3,))]
    return spec_of(ts, [Kernel(N.OP_COPY, [1], [2])], [0], [2])


def test_a_dimension_step_that_overwrites_a_constant_is_refused() -> None:
    spec = _const_copy_spec()
    three = int(np.flatnonzero(spec["heap"] == 3)[0])
    # heap[3's cell] = a * a would make the constant's slot [a * a] over 3 floats
    spec["dimprog"] = np.array([[MUL, 0, 0, three]], np.int64)
    with pytest.raises(native.NativeKernelError, match="overwrites a defined cell") as info:
        native.Executor(spec)
    assert "each step writes a cell of its own" in str(info.value)


def test_a_dense_instruction_without_packed_weights_is_refused() -> None:
    """A copy turned into a dense instruction: the object check's own error was left set
    under the constructor's, which Python reported as a SystemError."""
    spec = _const_copy_spec()
    spec["instrs"] = spec["instrs"].copy()
    spec["instrs"][0, 0] = N.OP_DENSE
    with pytest.raises(native.NativeKernelError, match="dense needs a PackedDense"):
        native.Executor(spec)


def test_a_dimension_step_that_reads_a_later_cell_is_refused() -> None:
    ts = [x_a3(), Tensor(1, "temp", F32, ((A + 1) * 2, 3))]
    spec = spec_of(ts, [Kernel(N.OP_FILL, [], [1], fattr=[1.0])], [0], [1])
    spec["dimprog"] = spec["dimprog"][::-1].copy()  # the product before the sum it reads
    with pytest.raises(native.NativeKernelError, match="reads a cell before it is computed"):
        native.Executor(spec)


def test_a_slot_dimension_nothing_computes_is_refused() -> None:
    spec = _const_copy_spec()
    spec["heap"] = np.append(spec["heap"], np.iinfo(np.int64).min)  # a cell left unset
    spec["slots"][2, 5] = len(spec["heap"]) - 1
    with pytest.raises(native.NativeKernelError, match="a cell nothing computes"):
        native.Executor(spec)


def test_writing_through_a_view_of_an_input_is_refused() -> None:
    # x.T is the caller's memory: a copy into it would change the caller's array
    ts = [
        x_a3(),
        Tensor(1, "view", F32, (3, A), base=0, viewop=N.V_TRANSPOSE, params=(1, 0)),
        Tensor(2, "temp", F32, (3, A)),
    ]
    ks = [Kernel(N.OP_FILL, [], [2], fattr=[0.0]), Kernel(N.OP_COPY, [2], [1])]
    spec = spec_of(ts, [*ks, Kernel(N.OP_COPY, [1], [2])], [0], [2])
    with pytest.raises(native.NativeKernelError, match="writes an input or constant") as info:
        native.Executor(spec)
    assert "instruction 1" in str(info.value) and "read only" in str(info.value)


@pytest.mark.parametrize(
    ("op", "dtypes", "message"),
    [
        (N.OP_DENSE, (np.int8, np.float32), "dense: float32 operands"),
        (N.OP_DENSE, (np.float32, np.int8), "dense: x \\[, residual\\] and a float32 result"),
        (N.OP_MATMUL, (np.float32, np.int8), "matmul: float32 a, b and result"),
        (N.OP_COPY, (np.float32, np.int8), "copy: an operand and a result of one dtype"),
    ],
)
def test_operands_of_another_dtype_are_refused(op: int, dtypes: Any, message: str) -> None:
    # a float32 kernel over 1-byte elements would read or write 4x past them
    x_dtype, y_dtype = (np.dtype(d) for d in dtypes)
    w = np.ones((3, 3), np.float32)
    ts = [Tensor(0, "input", x_dtype, (A, 3), arg=0), Tensor(1, "temp", y_dtype, (A, 3))]
    if op == N.OP_DENSE:
        k = Kernel(op, [0], [1], iattr=[0], fattr=[1.0], obj=native.pack_dense(w))
    elif op == N.OP_MATMUL:
        ts.append(Tensor(2, "const", F32, (3, 3), array=w))
        k = Kernel(op, [0, 2], [1], fattr=[1.0])
    else:
        k = Kernel(op, [0], [1])
    with pytest.raises(native.NativeKernelError, match=message):
        native.Executor(spec_of(ts, [k], [0], [1]))


# -- a call: views, buffers and kernels against the dimension values ------------------------
@pytest.mark.parametrize(
    ("view", "shape", "message"),
    [
        (  # x[1:] declared with a rows: one row past x
            Tensor(1, "view", F32, (A, 3), base=0, viewop=N.V_SLICE, params=(1, 0), params2=(1, 1)),
            (A, 3),
            "slice: axis 0 takes 4 elements from 1 by 1 of a base of 4",
        ),
        (  # x[::2] declared with a rows
            Tensor(1, "view", F32, (A, 3), base=0, viewop=N.V_SLICE, params=(0, 0), params2=(2, 1)),
            (A, 3),
            "slice: axis 0 takes 4 elements from 0 by 2 of a base of 4",
        ),
        (  # x[2::-1] (a flip from row 2 back) declared with a rows: one row before x
            Tensor(
                1, "view", F32, (A, 3), base=0, viewop=N.V_SLICE, params=(2, 0), params2=(-1, 1)
            ),
            (A, 3),
            "slice: axis 0 takes 4 elements from 2 by -1 of a base of 4",
        ),
        (  # x.T declared [a, 3]
            Tensor(1, "view", F32, (A, 3), base=0, viewop=N.V_TRANSPOSE, params=(1, 0)),
            (A, 3),
            "transpose: axis 0 has 4 elements, its base axis 1 has 3",
        ),
        (  # x reshaped to [4 * a]
            Tensor(1, "view", F32, (4 * A,), base=0, viewop=N.V_RESHAPE),
            (4 * A,),
            "reshape: 16 elements from a base of 12",
        ),
        (  # x broadcast to [a, a]
            Tensor(1, "view", F32, (A, A), base=0, viewop=N.V_BROADCAST),
            (A, A),
            "broadcast: axis 1 of 4 elements from a base axis of 3",
        ),
    ],
)
def test_a_view_past_its_base_is_refused(view: Tensor, shape: Any, message: str) -> None:
    ex = copy_of_view(view, shape)
    with pytest.raises(native.ExecMismatch, match="slot 1: a view that does not fit its base") as e:
        ex(np.ones((4, 3), np.float32))
    assert message in str(e.value)


def test_a_slice_of_step_0_is_refused() -> None:
    """A step of 0 would read one element for every one taken; below 0 a slice walks back
    (a flipped axis), and its reach is checked at the call as above."""
    view = Tensor(1, "view", F32, (A, 3), base=0, viewop=N.V_SLICE, params=(0, 0), params2=(0, 1))
    with pytest.raises(native.NativeKernelError, match="bad slice start or step"):
        copy_of_view(view, (A, 3))


def _reshape_of_view(base_view: Tensor, shape: tuple[Any, ...]) -> Any:
    """input x [a, 3] -> base_view -> a reshape of it to ``shape`` -> copied out."""
    ts = [x_a3(), base_view, Tensor(2, "view", F32, shape, base=1, viewop=N.V_RESHAPE)]
    ts += [Tensor(3, "temp", F32, shape)]
    return native.Executor(spec_of(ts, [Kernel(N.OP_COPY, [2], [3])], [0], [3]))


def test_a_reshape_of_a_strided_view_reads_it_in_place() -> None:
    """x[:, 1:3] split into [a, 2, 1] and x.T[:, ::2] as [3, 1, k]: the executor works out
    the strides (as NumPy's reshape without a copy) and reads the base's elements."""
    cols = Tensor(1, "view", F32, (A, 2), base=0, viewop=N.V_SLICE, params=(0, 1), params2=(1, 1))
    ex = _reshape_of_view(cols, (A, 2, 1))
    for a in (1, 4, 7):
        x = np.arange(a * 3, dtype=np.float32).reshape(a, 3)
        (got,) = ex(x)
        np.testing.assert_array_equal(got, x[:, 1:3].reshape(a, 2, 1))
    t = Tensor(1, "view", F32, (3, A), base=0, viewop=N.V_TRANSPOSE, params=(1, 0))
    ex = _reshape_of_view(t, (1, 3, A, 1))
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    np.testing.assert_array_equal(ex(x)[0], x.T.reshape(1, 3, 5, 1))


def test_a_reshape_no_view_of_its_strided_base_has_is_refused() -> None:
    """x.T ([3, a], strides 1 and 3) flattened to [3a] needs a copy: refused at the call
    with what it is, never read past x."""
    t = Tensor(1, "view", F32, (3, A), base=0, viewop=N.V_TRANSPOSE, params=(1, 0))
    ex = _reshape_of_view(t, (3 * A,))
    with pytest.raises(native.ExecMismatch, match="a view that does not fit its base") as e:
        ex(np.ones((4, 3), np.float32))
    assert "reshape of a base whose strides no view of that shape has" in str(e.value)
    (one,) = ex(np.ones((1, 3), np.float32))  # a = 1: x.T is [3, 1], contiguous after all
    np.testing.assert_array_equal(one, np.ones(3, np.float32))


def test_a_slot_larger_than_its_buffer_is_refused() -> None:
    ts = [x_a3(), Tensor(1, "temp", F32, (A, 3)), Tensor(2, "temp", F32, (A, 3))]
    spec = spec_of(ts, [Kernel(N.OP_COPY, [0], [1]), Kernel(N.OP_COPY, [1], [2])], [0], [2])
    spec["buffers"][0] = int(np.flatnonzero(spec["heap"] == 3)[0])  # 3 bytes for a * 12
    ex = native.Executor(spec)
    with pytest.raises(native.ExecMismatch, match=r"slot 1 does not fit its buffer \(3 bytes\)"):
        ex(np.ones((5, 3), np.float32))


def test_a_negative_dimension_is_refused() -> None:
    # x[5:] of a rows is a - 5 rows: negative below a = 5
    view = Tensor(
        1, "view", F32, (A - 5, 3), base=0, viewop=N.V_SLICE, params=(5, 0), params2=(1, 1)
    )
    ex = copy_of_view(view, (A - 5, 3))
    assert ex(np.ones((7, 3), np.float32))[0].shape == (2, 3)
    with pytest.raises(native.ExecMismatch, match=r"slot 1 has a negative dimension \(-3\)"):
        ex(np.ones((2, 3), np.float32))


def _dims_spec(consts: list[int], steps: list[tuple[int, int, int]]) -> tuple[dict[str, Any], int]:
    """A region whose variable ``a`` (cell 0) is passed in, its output ``[rows, 3]`` with
    rows the last of ``steps`` appended to the dimension program after the cells
    ``consts``; and the number of cells before them (steps refer to cells by number)."""
    ts = [Tensor(0, "input", F32, (3,), arg=0), Tensor(1, "temp", F32, (A, 3))]
    spec = spec_of(ts, [Kernel(N.OP_FILL, [], [1], fattr=[2.0])], [0], [1])
    n0 = len(spec["heap"])
    unset = np.iinfo(np.int64).min
    spec["heap"] = np.array([*spec["heap"], *consts, *[unset] * len(steps)], np.int64)
    first = n0 + len(consts)
    rows = [[op, x, y, first + i] for i, (op, x, y) in enumerate(steps)]
    spec["dimprog"] = np.array([*spec["dimprog"].tolist(), *rows], np.int64).reshape(-1, 4)
    spec["slots"][1, 5] = len(spec["heap"]) - 1
    return spec, n0


def test_a_dimension_that_overflows_is_refused() -> None:
    n0 = len(_dims_spec([], [])[0]["heap"])
    spec, _ = _dims_spec([], [(MUL, 0, 0), (MUL, n0, 0)])  # rows = a * a * a
    ex = native.Executor(spec)
    x = np.ones(3, np.float32)
    assert ex((4,), x)[0].shape == (64, 3)
    # (2**22)**3 = 2**66 rows would wrap to 0 in int64 arithmetic
    with pytest.raises(native.ExecMismatch, match="does not fit in int64"):
        ex((2**22,), x)


def test_the_smallest_int64_divided_by_minus_one_is_refused() -> None:
    n0 = len(_dims_spec([], [])[0]["heap"])
    spec, _ = _dims_spec([-1], [(ADDC, 0, -1), (FLOORDIV, n0 + 1, n0)])  # (a - 1) // -1
    ex = native.Executor(spec)
    x = np.ones(3, np.float32)
    assert ex((-4,), x)[0].shape == (5, 3)
    with pytest.raises(native.ExecMismatch, match="does not fit in int64"):  # not SIGFPE
        ex((-(2**63) + 1,), x)


def test_a_dense_layer_against_weights_of_another_size_fails_the_instruction() -> None:
    packed = native.pack_dense(np.ones((3, 4), np.float32))  # [3] -> [4]
    for x_cols, y_cols, found in [
        (2, 4, "x [..., 2] -> y [..., 4]"),
        (3, 2, "[..., 3] -> y [..., 2]"),
    ]:
        ts = [Tensor(0, "input", F32, (A, x_cols), arg=0), Tensor(1, "temp", F32, (A, y_cols))]
        k = Kernel(N.OP_DENSE, [0], [1], iattr=[0], fattr=[1.0], obj=packed)
        ex = native.Executor(spec_of(ts, [k], [0], [1]))
        with pytest.raises(RuntimeError, match="instruction 0 failed: dense") as info:
            ex(np.ones((5, x_cols), np.float32))
        assert found in str(info.value) and "packed for 3 -> 4" in str(info.value)


def test_a_residual_broadcast_along_its_rows_fails_the_dense_instruction() -> None:
    """The kernel reads whole residual rows: a residual ``[a, 1]`` broadcast to ``[a, 4]``
    (inner stride 0) would be read past its end, so the instruction refuses it."""
    packed = native.pack_dense(np.ones((3, 4), np.float32))
    ts = [
        Tensor(0, "input", F32, (A, 3), arg=0),
        Tensor(1, "input", F32, (A, 1), arg=1),
        Tensor(2, "view", F32, (A, 4), base=1, viewop=N.V_BROADCAST, contiguous=False),
        Tensor(3, "temp", F32, (A, 4)),
    ]
    k = Kernel(N.OP_DENSE, [0, 2], [3], iattr=[0], fattr=[1.0], obj=packed)
    ex = native.Executor(spec_of(ts, [k], [0, 1], [3]))
    with pytest.raises(RuntimeError, match="dense: operands without unit inner stride"):
        ex(np.ones((5, 3), np.float32), np.ones((5, 1), np.float32))


def test_a_layer_written_into_its_own_input_fails_the_instruction() -> None:
    """A dense layer (or a convolution, or a product) whose result is placed in the memory
    of its input would read rows it has already overwritten: the instruction refuses it,
    whatever the memory plan says (here a plan made by hand puts the result in the
    buffer of its input, which is also its residual)."""
    from shapevm.jit.backend.dims import DimHeap
    from shapevm.jit.backend.nodes import Lowered
    from shapevm.jit.backend.plan import build_spec, plan_memory

    packed = native.pack_dense(np.ones((4, 4), np.float32))
    ts = [
        Tensor(0, "input", F32, (A, 4), arg=0),
        Tensor(1, "temp", F32, (A, 4)),
        Tensor(2, "temp", F32, (A, 4)),
        Tensor(3, "output", F32, (A, 4), out_index=0),
    ]
    ks = [
        Kernel(N.OP_COPY, [0], [1]),
        Kernel(N.OP_DENSE, [1, 1], [2], iattr=[0], fattr=[1.0], obj=packed),
        Kernel(N.OP_COPY, [2], [3]),
    ]
    low = Lowered(ts, ks, [0], [3], [0], [3])
    plan = plan_memory(low)
    ts[2].buffer = ts[1].buffer  # what the plan no longer does
    ex = native.Executor(build_spec(low, plan, DimHeap(("a",))))
    with pytest.raises(RuntimeError, match="dense: its result in the memory of its input"):
        ex(np.ones((5, 4), np.float32))


def test_a_product_of_operands_that_do_not_fit_fails_the_instruction() -> None:
    w = np.ones((4, 2), np.float32)  # a [a, 5] @ w [4, 2] would read a fifth row of w
    ts = [
        Tensor(0, "input", F32, (A, 5), arg=0),
        Tensor(1, "const", F32, (4, 2), array=w),
        Tensor(2, "temp", F32, (A, 2)),
    ]
    ex = native.Executor(spec_of(ts, [Kernel(N.OP_MATMUL, [0, 1], [2], fattr=[1.0])], [0], [2]))
    with pytest.raises(RuntimeError, match=r"matmul: a \[m, k\] @ b \[k, n\]"):
        ex(np.ones((3, 5), np.float32))


def test_a_row_op_over_another_dtype_fails_the_instruction() -> None:
    ts = [Tensor(0, "input", np.dtype(np.int8), (A, 8), arg=0), Tensor(1, "temp", F32, (A, 8))]
    k = Kernel(N.OP_EXTERNAL, [0], [1], obj=native.rowop_kernel("softmax"))
    ex = native.Executor(spec_of(ts, [k], [0], [1]))
    with pytest.raises(RuntimeError, match="row op: a float32 operand and result of one shape"):
        ex(np.ones((2, 8), np.int8))


def test_loading_generated_code_is_not_public() -> None:
    # only tier 3 loads libraries, from its own cache after checking their hashes
    assert not hasattr(native, "load_kernel") and "load_kernel" not in native.__all__
    with pytest.raises(native.NativeKernelError, match="cannot load the generated library"):
        native._load_kernel("/nonexistent/kernel.so", "svg_kernel")


def test_a_reshape_whose_element_count_wraps_past_int64_is_refused() -> None:
    """[b, 4] over a [4, 3] base: b = 2**62 + 3 makes 4 * b wrap to 12, the base's count;
    the copy then walked 2**62 rows."""
    ts = [
        Tensor(0, "input", F32, (A, 3), arg=0),
        Tensor(1, "temp", F32, (A, 3)),
        Tensor(2, "view", F32, (B, 4), base=0, viewop=N.V_RESHAPE),
        Tensor(3, "view", F32, (B, 4), base=1, viewop=N.V_RESHAPE),
    ]
    ex = native.Executor(region_spec(ts, [Kernel(N.OP_COPY, [2], [3])], [0], [1]))
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(ex((4, 3), x)[0], x)
    with pytest.raises(native.ExecMismatch, match="element count past int64"):
        ex((4, 2**62 + 3), x)


def test_a_variable_cell_with_a_value_is_refused() -> None:
    """A value in a variable's cell passed the constants' checks at construction, then a
    caller's dimension replaced it: a [3] constant copied as [50_000_000]."""
    c = np.arange(3, dtype=np.float32)
    ts = [x_a3(), Tensor(1, "const", F32, (3,), array=c), Tensor(2, "temp", F32, (3,))]
    spec = region_spec(ts, [Kernel(N.OP_COPY, [1], [2])], [0], [2])
    spec["heap"][1] = 3  # variable b's cell holds the constant's length
    spec["slots"][1, 5] = spec["slots"][2, 5] = 1  # the constant and the result are [b]
    with pytest.raises(native.NativeKernelError, match="variable's cell holds a value"):
        native.Executor(spec)


def test_an_external_instruction_needs_a_kernel_capsule() -> None:
    spec = _const_copy_spec()
    spec["instrs"] = spec["instrs"].copy()
    spec["instrs"][0, 0] = N.OP_EXTERNAL
    spec["objects"] = [object()]
    with pytest.raises(native.NativeKernelError, match="needs a kernel capsule"):
        native.Executor(spec)


def _take_executor(result: tuple[Any, ...], idx_dtype: Any = np.int64) -> Any:
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    ts = [
        Tensor(0, "input", np.dtype(idx_dtype), (A,), arg=0),
        Tensor(1, "const", F32, (4, 3), array=table),
        Tensor(2, "temp", F32, result),
    ]
    k = Kernel(N.OP_EXTERNAL, [1, 0], [2], obj=native.take_kernel(0))
    return native.Executor(spec_of(ts, [k], [0], [2]))


def test_take_checks_every_index_and_its_result() -> None:
    """An embedding lookup reads the row each index names: an index out of range fails
    the call naming it (negative ones count from the end), and a result that is not the
    table's shape with the axis replaced by the indices' is refused before any copy."""
    ex = _take_executor((A, 3))
    (got,) = ex(np.array([3, -4, 0], np.int64))
    np.testing.assert_array_equal(got, np.take(np.arange(12.0).reshape(4, 3), [3, -4, 0], 0))
    for bad in (4, -5, 2**40, -(2**63)):
        with pytest.raises(native.ExecFailure, match=f"take: index {bad} is out of bounds for "
                           "axis 0 with size 4") as info:  # fmt: skip
            ex(np.array([0, bad], np.int64))
        assert info.value.instruction == 0 and info.value.reason.startswith("take: index")
        assert info.value.data  # the call's data, not the lowering
    (got,) = _take_executor((A, 3), np.int32)(np.array([1], np.int32))
    np.testing.assert_array_equal(got, [[3.0, 4.0, 5.0]])
    with pytest.raises(native.ExecFailure, match="take: a result that is not x's shape") as bad:
        _take_executor((A, 2))(np.array([0], np.int64))
    assert not bad.value.data  # operands the kernel cannot run: a fault of the lowering
    with pytest.raises(RuntimeError, match="take: a result that is not x's shape"):
        _take_executor((A, 3), np.float32)(np.array([0.0], np.float32))
    with pytest.raises(native.NativeKernelError, match="an axis out of range"):
        native.take_kernel(-1)


def test_an_attention_mask_that_does_not_span_the_keys_fails_the_instruction() -> None:
    """The kernel reads whole mask rows of s_k floats: a mask of another key extent would
    be read past its end."""
    q = Tensor(0, "input", F32, (A, 4), arg=0)
    mask = Tensor(1, "input", F32, (A, 3), arg=1)
    ts = [q, mask, Tensor(2, "temp", F32, (A, 4))]
    k = Kernel(N.OP_EXTERNAL, [0, 0, 0, 1], [2], obj=native.attention_kernel(0.5))
    ex = native.Executor(spec_of(ts, [k], [0, 1], [2]))
    ok = np.ones((5, 4), np.float32)
    with pytest.raises(RuntimeError, match="attention: a mask that does not broadcast"):
        ex(ok, np.zeros((5, 3), np.float32))


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.int8])
@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64])
def test_take_of_single_elements_along_a_later_axis(dtype: Any, idx_dtype: Any) -> None:
    """Rows of one element (a bilinear lookup's corners in a flattened image, x[:, ids]),
    for each leading index, with contiguous or strided indices: NumPy's take, and an index
    out of range named."""
    a, b, n = sv.symbolic_shape("a, b, n")
    ts = [
        Tensor(0, "input", np.dtype(idx_dtype), (n,), arg=0),
        Tensor(1, "input", np.dtype(dtype), (a, b), arg=1),
        Tensor(2, "temp", np.dtype(dtype), (a, n)),
    ]
    k = Kernel(N.OP_EXTERNAL, [1, 0], [2], obj=native.take_kernel(1))
    ex = native.Executor(spec_of(ts, [k], [0, 1], [2], variables=("a", "b", "n")))
    rng = np.random.default_rng(5)
    for rows, cols, count in [(1, 1, 1), (3, 7, 20), (2, 600, 3000)]:
        x = rng.integers(-100, 100, (rows, cols)).astype(dtype)
        ids = rng.integers(-cols, cols, 2 * count).astype(idx_dtype)
        for i in (ids[:count], ids[::2]):  # contiguous, then strided
            (got,) = ex(i, x)
            np.testing.assert_array_equal(got, np.take(x, i, axis=1))
        with pytest.raises(native.ExecFailure, match=f"index {cols} is out of bounds for axis 1"):
            ex(np.array([0, cols], idx_dtype), x)


def test_an_int_product_of_mismatched_operands_is_refused_before_any_read() -> None:
    """Operands whose inner dimensions differ, or a float operand, fail the instruction
    naming what it takes, before it reads a value."""
    a, k = sv.symbolic_shape("a, k")
    run = native.int_matmul_kernel()
    for x_shape, w_dtype, names in [((a, k), np.int32, ("a", "k")), ((a, 3), np.float32, ("a",))]:
        ts = [
            Tensor(0, "input", np.dtype(np.int32), x_shape, arg=0),
            Tensor(1, "input", np.dtype(w_dtype), (3, 2), arg=1),
            Tensor(2, "temp", np.dtype(np.int32), (a, 2)),
        ]
        kernels = [Kernel(N.OP_EXTERNAL, [0, 1], [2], obj=run)]
        ex = native.Executor(spec_of(ts, kernels, [0, 1], [2], variables=names))
        x = np.ones((2, x_shape[1] if isinstance(x_shape[1], int) else 4), np.int32)
        with pytest.raises(native.ExecFailure, match="int matmul: int32/int64 operands"):
            ex(x, np.ones((3, 2), w_dtype))


def test_take_copies_rows_whole_or_element_by_element_as_their_strides_allow() -> None:
    """Rows contiguous in the table and the result are copied whole; a transposed table's
    rows (strided) element by element: both give NumPy's take."""
    ts = [
        Tensor(0, "input", np.dtype(np.int64), (A,), arg=0),
        Tensor(1, "input", F32, (4, 3), arg=1),
        Tensor(2, "temp", F32, (A, 3)),
    ]
    k = Kernel(N.OP_EXTERNAL, [1, 0], [2], obj=native.take_kernel(0))
    ex = native.Executor(spec_of(ts, [k], [0, 1], [2]))
    ids = np.array([2, 0, -1, 2], np.int64)
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    for x in (table, np.ascontiguousarray(table.T).T):  # rows contiguous, then strided
        (got,) = ex(ids, x)
        np.testing.assert_array_equal(got, np.take(table, ids, 0))


@pytest.mark.parametrize(
    ("row", "message"),
    [([1, 1, -1], "not a permutation"), ([0, 2, -1], "not a permutation"),
     ([0, -1, 1], "not a permutation"), ([-1, 0, -1], "neither all -1 nor")],
)  # fmt: skip
def test_an_output_permutation_that_is_not_one_is_refused(row: list[int], message: str) -> None:
    """``output_perms`` (a result returned as a transposed view of its slot): a row is all
    -1 or a permutation of the slot's axes, then -1s; anything else is refused before a
    call could hand NumPy a bad transpose."""
    ts = [Tensor(0, "input", F32, (A, B), arg=0), Tensor(1, "temp", F32, (A, B))]
    spec = spec_of(ts, [Kernel(N.OP_COPY, [0], [1])], [0], [1], variables=("a", "b"))
    perm = np.full((1, N.MAXDIM), -1, np.int32)
    perm[0, :3] = row
    spec["output_perms"] = perm
    with pytest.raises(native.NativeKernelError, match=message) as info:
        native.Executor(spec)
    found = " ".join(str(v) for v in perm[0])
    assert f"found:    output_perms row 0, for an output of rank 2: {found}" in str(info.value)
    perm[0, :3] = [1, 0, -1]  # the transpose: a view of the slot's array
    ex = native.Executor(spec)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (y,) = ex((2, 3), x)
    np.testing.assert_array_equal(y, x.T)
    assert y.base is not None and not y.flags["C_CONTIGUOUS"]


def test_an_output_is_an_output_slot_an_argument_or_a_view_of_one() -> None:
    """A result that is an argument or a view of one is returned as the argument itself or
    NumPy's view of the caller's array (writeable as the argument is); a result that is a
    view of a buffer, or a permutation of an argument's view, is refused before any call."""
    ts = [Tensor(0, "input", F32, (A, B), arg=0),
          Tensor(1, "view", F32, (B, A), base=0, viewop=N.V_TRANSPOSE, params=(1, 0),
                 contiguous=False),
          Tensor(2, "temp", F32, (A, B)),
          Tensor(3, "view", F32, (B, A), base=2, viewop=N.V_TRANSPOSE, params=(1, 0),
                 contiguous=False)]  # fmt: skip
    spec = spec_of(ts, [Kernel(N.OP_COPY, [0], [2])], [0], [2], variables=("a", "b"))
    spec["outputs"] = np.array([1, 2, 0], np.int32)
    spec["slots"][2, 3] = 1  # the buffer's result is the second
    ex = native.Executor(spec)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    t, y, same = ex((2, 3), x)
    np.testing.assert_array_equal(t, x.T)
    np.testing.assert_array_equal(y, x)
    assert np.shares_memory(t, x) and t.flags.writeable and same is x
    assert not np.shares_memory(y, x)
    x.flags.writeable = False
    t, _, _ = ex((2, 3), x)
    assert not t.flags.writeable  # as NumPy's view of a read-only array
    xt = np.arange(6, dtype=np.float32).reshape(3, 2).T  # read through a contiguous copy
    t, _, same = ex((2, 3), xt)
    np.testing.assert_array_equal(t, xt.T)
    assert same is xt

    spec["outputs"] = np.array([3, 2, 0], np.int32)  # a view of a buffer: freed memory
    with pytest.raises(native.NativeKernelError, match="an output slot, an argument's slot"):
        native.Executor(spec)
    spec["outputs"] = np.array([1, 2, 0], np.int32)
    perm = np.full((3, N.MAXDIM), -1, np.int32)
    perm[0, :2] = [1, 0]
    spec["output_perms"] = perm
    with pytest.raises(native.NativeKernelError, match="returned as it is"):
        native.Executor(spec)


@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64])
@pytest.mark.parametrize(
    ("dtype", "width"),
    [(np.float32, 1), (np.float32, 2), (np.float32, 4), (np.float64, 4), (np.int8, 3),
     (np.float32, 5)],
)  # fmt: skip
def test_take_copies_rows_of_every_size_of_bytes(dtype: Any, idx_dtype: Any, width: int) -> None:
    """Rows of 4, 8, 16 and 32 bytes (a relative position bias: 4 heads of float32) are
    copied by fixed-size moves, other sizes by memcpy: every one NumPy's take, for indices
    in any order, negative ones counted from the end, and one out of range named."""
    n = sv.symbolic_shape("n")[0]
    ts = [
        Tensor(0, "input", np.dtype(idx_dtype), (A, n), arg=0),
        Tensor(1, "input", np.dtype(dtype), (33, width), arg=1),
        Tensor(2, "temp", np.dtype(dtype), (A, n, width)),
    ]
    k = Kernel(N.OP_EXTERNAL, [1, 0], [2], obj=native.take_kernel(0))
    ex = native.Executor(spec_of(ts, [k], [0, 1], [2], variables=("a", "n")))
    rng = np.random.default_rng(6)
    table = rng.integers(-100, 100, (33, width)).astype(dtype)
    for shape in [(1, 1), (7, 9), (64, 130)]:
        ids = rng.integers(-33, 33, shape).astype(idx_dtype)
        (got,) = ex(ids, table)
        np.testing.assert_array_equal(got, np.take(table, ids, axis=0))
    with pytest.raises(native.ExecFailure, match="index 33 is out of bounds for axis 0"):
        ex(np.array([[0, 33]], idx_dtype), table)


def test_an_output_shape_is_a_reshape_of_an_output_slot_checked_at_each_call() -> None:
    """``output_shapes`` (a result returned as a reshaped view of its slot): a row is -1 or
    a rank and defined heap cells, only for an output slot that is not also permuted; a
    call whose shape has another number of elements than the slot fails, naming the
    output, before NumPy is handed a bad reshape."""
    ts = [Tensor(0, "input", F32, (A, B), arg=0), Tensor(1, "temp", F32, (A, B))]
    spec = spec_of(ts, [Kernel(N.OP_COPY, [0], [1])], [0], [1], variables=("a", "b"))
    heap = DimHeap(("a", "b"))
    rows = np.full((1, N.MAXDIM + 1), -1, np.int32)
    rows[0, :2] = [1, heap.cell(A * B)]  # the flat result: a cell the region must define
    spec["output_shapes"] = rows
    with pytest.raises(native.NativeKernelError, match="not a defined heap cell"):
        native.Executor(spec)
    rows[0, :3] = [2, 1, 0]  # [b, a]: cells of the variables, defined
    ex = native.Executor(spec)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (y,) = ex((2, 3), x)
    np.testing.assert_array_equal(y, x.reshape(3, 2))
    assert y.shape == (3, 2) and y.base is not None
    rows[0, :3] = [1, 1, -1]  # [b]: another size at every call with a > 1
    spec["output_shapes"] = rows
    ex = native.Executor(spec)
    with pytest.raises(native.ExecMismatch, match="output 0 is returned in a shape of another"):
        ex((2, 3), x)
    rows[0, 0] = 9
    with pytest.raises(native.NativeKernelError, match="a rank out of range"):
        native.Executor(spec)
    rows[0, :3] = [2, 1, 0]
    perm = np.full((1, N.MAXDIM), -1, np.int32)
    perm[0, :2] = [1, 0]
    spec["output_perms"] = perm
    with pytest.raises(native.NativeKernelError, match="not an output slot, or is permuted"):
        native.Executor(spec)


def _packed(cin: int, cout: int, **kw: Any) -> native.PackedConv:
    w = np.ones((cout, cin, 3, 3), np.float32)
    return native.pack_conv2d(w, None, stride=kw.get("stride", (1, 1)), padding=(1, 1, 1, 1))


def test_convolutions_by_bands_check_their_operands_before_any_read() -> None:
    """A pair of convolutions and a convolution's mean read x's rows and write y's by bands:
    an x of other channels or a y of another size would be read or written out of its
    memory; each fails the instruction, naming what differs."""
    pair = native.conv_pair_kernel(
        _packed(3, 8), "relu", _packed(8, 4, stride=(2, 2)), "none", False, False
    )
    x = Tensor(0, "input", F32, (A, 3, 8, 8), arg=0)
    ts = [x, Tensor(1, "temp", F32, (A, 4, 5, 4))]  # rows: 4 would follow, not 5
    ex = native.Executor(spec_of(ts, [Kernel(N.OP_EXTERNAL, [0], [1], obj=pair)], [0], [1]))
    with pytest.raises(RuntimeError, match="conv pair: the result's shape does not follow"):
        ex(np.ones((2, 3, 8, 8), np.float32))
    ts = [Tensor(0, "input", F32, (A, 5, 8, 8), arg=0), Tensor(1, "temp", F32, (A, 4, 4, 4))]
    ex = native.Executor(spec_of(ts, [Kernel(N.OP_EXTERNAL, [0], [1], obj=pair)], [0], [1]))
    with pytest.raises(RuntimeError, match="conv pair: channels differ"):
        ex(np.ones((2, 5, 8, 8), np.float32))
    mean = native.conv_mean_kernel(_packed(3, 8), "relu", False)
    ts = [x, Tensor(1, "temp", F32, (A, 7))]
    ex = native.Executor(spec_of(ts, [Kernel(N.OP_EXTERNAL, [0], [1], obj=mean)], [0], [1]))
    with pytest.raises(RuntimeError, match="conv mean: a result of another size"):
        ex(np.ones((2, 3, 8, 8), np.float32))
    ts = [x, Tensor(1, "temp", F32, (A, 8))]
    ex = native.Executor(spec_of(ts, [Kernel(N.OP_EXTERNAL, [0], [1], obj=mean)], [0], [1]))
    (got,) = ex(np.ones((2, 3, 8, 8), np.float32))
    want = np.full((2, 8), 27.0 * 36 / 64 + 18.0 * 24 / 64 + 12.0 * 4 / 64, np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_a_pair_of_convolutions_whose_channels_do_not_follow_is_refused() -> None:
    with pytest.raises(native.NativeKernelError, match="packed2 reads packed1's result"):
        native.conv_pair_kernel(_packed(3, 8), "relu", _packed(4, 4), "none", False, False)
    with pytest.raises(native.NativeKernelError, match="packed2 must be a PackedConv"):
        native.conv_pair_kernel(_packed(3, 8), "relu", object(), "none", False, False)

    wide = native.pack_conv2d(np.ones((8, 3, 3, 3), np.float32), None, padding=(3, 0, 1, 1))
    with pytest.raises(native.NativeKernelError, match="padding top and bottom under"):
        native.conv_pair_kernel(wide, "relu", _packed(8, 4), "none", False, False)
    with pytest.raises(native.NativeKernelError, match="padding 3, 0"):
        native.conv_mean_kernel(wide, "relu", False)
