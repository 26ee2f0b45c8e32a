"""Every entry point refuses bad arguments before touching memory, with the kernel's name,
what it expected, what it found and a fix."""

from __future__ import annotations

import numpy as np
import pytest

from shapevm import native


def _packed() -> object:
    return native.pack_dense(np.ones((4, 3), np.float32))


@pytest.mark.parametrize(
    ("call", "headline", "found"),
    [
        (lambda: native.pack_dense(np.ones((4, 3))), "pack_dense: w must be float32", "f64[4, 3]"),
        (
            lambda: native.pack_dense(np.ones(4, np.float32)),
            "pack_dense: w has the wrong rank 1",
            "f32[4]",
        ),
        (lambda: native.pack_dense([[1.0]]), "pack_dense: w must be a NumPy array", "list"),
        (
            lambda: native.pack_dense(np.ones((4, 3), np.float32), np.ones(4, np.float32)),
            "pack_dense: bias does not match the weights' outputs",
            "f32[4]",
        ),
        (
            lambda: native.pack_dense(np.ones((4, 3), np.float32), layout="rows"),
            "pack_dense: unknown layout",
            "'rows'",
        ),
        (
            lambda: native.dense(np.ones((2, 5), np.float32), _packed()),
            "dense: x does not match the packed weights",
            "f32[2, 5]",
        ),
        (
            lambda: native.dense(np.ones((2, 4), np.float32), np.ones((4, 3), np.float32)),
            "dense: packed must be a PackedDense",
            "f32[4, 3]",
        ),
        (
            lambda: native.dense(np.ones((4, 2), np.float32).T, _packed()),
            "dense: x must have unit stride along its last axis",
            "not C-contiguous",
        ),
        (
            lambda: native.dense(np.ones((2, 4), np.float32), _packed(), activation="gelu"),
            "dense: unknown activation",
            "gelu",
        ),
        (
            lambda: native.dense(
                np.ones((2, 4), np.float32), _packed(), out=np.ones((3, 3), np.float32)
            ),
            "dense: out has the wrong shape",
            "f32[3, 3]",
        ),
        (
            lambda: native.dense(
                np.ones((2, 4), np.float32), _packed(), out=np.ones((2, 3), np.float32)[:, ::-1]
            ),
            "dense: out must have unit stride along its last axis",
            "not C-contiguous",
        ),
        (
            lambda: native.dense(
                np.ones((2, 4), np.float32), _packed(), residual=np.ones((2, 4), np.float32)
            ),
            "dense: residual does not match out",
            "f32[2, 4]",
        ),
        (
            lambda: native.matmul(np.ones((2, 3), np.float32), np.ones((4, 2), np.float32)),
            "matmul: inner dimensions differ",
            "a: f32[2, 3], b: f32[4, 2]",
        ),
        (
            lambda: native.matmul(np.ones((2, 2, 3), np.float32), np.ones((3, 3, 2), np.float32)),
            "matmul: batch dimensions do not broadcast",
            "a: f32[2, 2, 3]",
        ),
        (lambda: native.vmath("cosh", np.ones(3, np.float32)), "vmath: unknown function", "cosh"),
        (lambda: native.set_isa("sse9"), "set_isa: unknown instruction-set level", "sse9"),
        (lambda: native.set_num_threads(-2), "set_num_threads: thread count out of range", "-2"),
    ],
)
def test_bad_arguments_raise_with_expected_found_fix(call, headline: str, found: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(native.NativeKernelError) as info:
        call()
    text = str(info.value)
    assert text.startswith(headline), text
    assert found in text
    assert "expected:" in text
    assert isinstance(info.value, ValueError)


def test_read_only_out_is_refused() -> None:
    out = np.empty((2, 3), np.float32)
    out.flags.writeable = False
    with pytest.raises(native.NativeKernelError, match="out is read-only"):
        native.dense(np.ones((2, 4), np.float32), _packed(), out=out)


def test_out_overlapping_x_is_refused() -> None:
    buf = np.ones((2, 8), np.float32)
    packed = native.pack_dense(np.ones((4, 4), np.float32))
    with pytest.raises(native.NativeKernelError, match="out overlaps x"):
        native.dense(buf[:, :4], packed, out=buf[:, 2:6])


def test_error_fields_are_attributes() -> None:
    with pytest.raises(native.NativeKernelError) as info:
        native.pack_dense(np.ones((4, 3)))
    err = info.value
    assert (err.kernel, err.found) == ("pack_dense", "f64[4, 3]")  # type: ignore[attr-defined]
    assert "astype" in err.fix  # type: ignore[attr-defined]


def test_unsupported_level_names_the_supported_ones() -> None:
    missing = [lvl for lvl in ("avx512", "avx2") if lvl not in native.isa_levels()]
    if not missing:
        pytest.skip("this CPU supports every level")
    with pytest.raises(native.NativeKernelError, match="does not support") as info:
        native.set_isa(missing[0])
    assert "generic" in str(info.value)
