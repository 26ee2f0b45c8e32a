"""A failing step says what failed, and blames data-dependent sizes only when they are involved."""

from __future__ import annotations

import numpy as np
import pytest

from shapevm import RuntimeOpError
from shapevm.bytecode import parse_program, verify
from shapevm.runtime import Executable

DYNAMIC_NOTE = "depends on data-dependent (dynamic) dimensions"


def _run(text: str, *args: np.ndarray) -> None:
    program = parse_program(text)
    verify(program)  # every failure below is one the verifier cannot see
    Executable(program)(*args)


def test_out_of_memory_is_not_blamed_on_dynamic_dimensions() -> None:
    text = """
func @f(t0: f32[b]) -> f32[b]
  L0:
    t1 = TENSOR_CREATE [1099511627776, 4], f32, cpu
    TENSOR_ALLOC t1
    TENSOR_FREE t1
    RETURN t0
"""
    with pytest.raises(RuntimeOpError) as info:
        _run(text, np.ones(3, np.float32))
    message = str(info.value)
    assert message.startswith("TENSOR_ALLOC t1 failed: Unable to allocate 16.0 TiB")
    assert "  found:    not enough memory for this step\n" in message
    assert "  fix:      call with smaller shapes, or free memory in this process" in message
    assert DYNAMIC_NOTE not in message


def test_a_kernel_failure_on_static_shapes_is_not_blamed_on_dynamic_dimensions() -> None:
    text = """
func @f(t0: f32[0, 3]) -> i64[3]
  L0:
    t1: i64[3] = OP_CALL argmax(t0, axis=0)
    RETURN t1
"""
    with pytest.raises(RuntimeOpError) as info:
        _run(text, np.ones((0, 3), np.float32))
    assert str(info.value) == (
        "t1: i64[3] = OP_CALL argmax(t0, axis=0) failed: attempt to get argmax of an empty "
        "sequence\n"
        "  the shapes were verified before running; the op failed on these operands"
    )


def test_a_failure_on_a_data_dependent_size_says_so() -> None:
    text = """
func @f(t0: f32[b], t3: bool[b]) -> f32[2, 2]
  L0:
    t1: f32[dynamic] = OP_CALL mask_select(t0, t3)
    t2: f32[2, 2] = OP_CALL reshape(t1, shape=[2, 2])
    RETURN t2
"""
    with pytest.raises(RuntimeOpError) as info:
        _run(text, np.ones(3, np.float32), np.array([True, False, True]))
    assert str(info.value) == (
        "t2: f32[2, 2] = OP_CALL reshape(t1, shape=[2, 2]) failed: cannot reshape array of "
        "size 2 into shape (2,2)\n"
        "  this check depends on data-dependent (dynamic) dimensions and could not be proved "
        "before running"
    )
