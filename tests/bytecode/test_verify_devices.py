"""Verifier: what the runtime would otherwise find only while running (devices, sizes)."""

from __future__ import annotations

import numpy as np
import pytest

from shapevm.bytecode import VerifyError, check, parse_program, verify
from shapevm.runtime import Executable

_CREATE = """
func @f(t0: f32[b]) -> f32[b]
  L0:
    t1 = TENSOR_CREATE {spec}, f32, {device}
    TENSOR_ALLOC t1
    TENSOR_FREE t1
    RETURN t0
"""


def _only(text: str, kind: str) -> str:
    found = check(parse_program(text))
    assert len(found) == 1, "\n\n".join(d.render() for d in found)
    assert found[0].check == kind
    return found[0].render()


def test_allocating_a_tensor_of_data_dependent_size_is_refused() -> None:
    text = _CREATE.format(spec="[dynamic, 4]", device="cpu")
    assert _only(text, "alloc") == (
        "instruction 1 (TENSOR_ALLOC) in @f: t1 cannot be allocated: its size is only known "
        "from the data\n"
        "  expected: every dimension of t1 known before TENSOR_ALLOC (constants or shape "
        "registers)\n"
        "  found:    dimension 0 of t1 is dynamic (TENSOR_CREATE at instruction 0)\n"
        "  fix:      remove TENSOR_ALLOC and TENSOR_FREE of t1: the op that computes it "
        "allocates its result; or give the size in a shape register\n"
        "       | L0:\n"
        "     0 | t1 = TENSOR_CREATE [dynamic, 4], f32, cpu  (f32[dynamic, 4])\n"
        "  -->1 | TENSOR_ALLOC t1\n"
        "     2 | TENSOR_FREE t1"
    )


def test_a_verified_allocation_runs() -> None:
    program = parse_program(_CREATE.format(spec="[4]", device="cpu"))
    verify(program)
    x = np.ones(3, np.float32)
    (y,) = Executable(program)(x)
    assert y is x


@pytest.mark.parametrize("device", ["cuda", "cuda:0", "ascend", "npu", "cpu:1"])
def test_a_device_the_runtime_does_not_have_is_refused(device: str) -> None:
    message = _only(_CREATE.format(spec="[4]", device=device), "device")
    assert message.startswith(
        f"instruction 0 (TENSOR_CREATE) in @f: device '{device}' is not a device of this runtime\n"
        "  expected: one of cpu\n"
        f"  found:    {device}\n"
        "  fix:      create t1 on cpu: the interpreter and the JIT run on the CPU\n"
    )
    with pytest.raises(VerifyError, match="not a device of this runtime"):
        verify(parse_program(_CREATE.format(spec="[4]", device=device)))


@pytest.mark.parametrize("device", ["cpu", "cpu:0"])
def test_the_cpu_is_a_device(device: str) -> None:
    verify(parse_program(_CREATE.format(spec="[4]", device=device)))


@pytest.mark.parametrize(
    ("spec", "device", "match"),
    [("[4]", "cuda", "not a device of this runtime"), ("[dynamic]", "cpu", "cannot be allocated")],
)
def test_an_executable_verifies_its_program(spec: str, device: str, match: str) -> None:
    # Built directly, not through Exported: it ran on the CPU, or called np.empty with -1.
    program = parse_program(_CREATE.format(spec=spec, device=device))
    with pytest.raises(VerifyError, match=match):
        Executable(program)
