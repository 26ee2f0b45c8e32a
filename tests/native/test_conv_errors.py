"""Every convolution and pooling entry point refuses bad arguments before touching memory,
with the kernel's name, what it expected, what it found and a fix."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from shapevm import _native, native

F32 = np.float32


def _packed(**kw: Any) -> native.PackedConv:
    return native.pack_conv2d(np.ones((4, 3, 3, 3), F32), **kw)


def _x(*shape: int) -> np.ndarray[Any, Any]:
    return np.ones(shape, F32)


def _shared_out() -> np.ndarray[Any, Any]:
    x = np.zeros((1, 3, 8, 8), F32)
    return native.conv2d(x, native.pack_conv2d(_x(3, 3, 3, 3), padding=1), out=x)


def _partly_shared_residual() -> np.ndarray[Any, Any]:
    big = np.zeros(2 * 4 * 36, F32)
    out, res = big[: 4 * 36].reshape(1, 4, 6, 6), big[36 : 5 * 36].reshape(1, 4, 6, 6)
    return native.conv2d(_x(1, 3, 8, 8), _packed(), out=out, residual=res)


CASES: list[tuple[Callable[[], object], str, str]] = [
    (lambda: native.pack_conv2d([[[[1.0]]]]), "pack_conv2d: w must be a NumPy array", "list"),
    (lambda: native.pack_conv2d(np.ones((2, 1, 1, 1))), "pack_conv2d: w must be float32",
     "f64[2, 1, 1, 1]"),
    (lambda: native.pack_conv2d(_x(2, 1, 3)), "pack_conv2d: w has the wrong rank 3",
     "f32[2, 1, 3]"),
    (lambda: _packed(stride=0), "pack_conv2d: stride out of range", "stride=(0, 0)"),
    (lambda: _packed(padding=(1, -1)), "pack_conv2d: padding out of range",
     "padding=(1, 1, -1, -1)"),
    (lambda: _packed(dilation=(1, 0)), "pack_conv2d: dilation out of range", "dilation=(1, 0)"),
    (lambda: _packed(groups=0), "pack_conv2d: groups out of range", "groups=(0)"),
    (lambda: _packed(stride=(1, 2, 3)), "pack_conv2d: stride must be an int or 2 ints",
     "stride=(1, 2, 3)"),
    (lambda: _packed(padding=1.5), "pack_conv2d: padding must be an int or 2 or 4 ints",
     "padding=1.5"),
    (lambda: native.pack_conv2d(_x(2, 0, 3, 3)), "pack_conv2d: w has an empty dimension",
     "f32[2, 0, 3, 3]"),
    (lambda: _packed(groups=3), "pack_conv2d: output channels do not split into the groups",
     "f32[4, 3, 3, 3]"),
    (lambda: native.pack_conv2d(_x(4, 3, 3, 3), _x(3)),
     "pack_conv2d: bias does not match the output channels", "f32[3]"),
    (lambda: native.pack_conv2d(_x(4, 3, 3, 3), np.ones(4)), "pack_conv2d: bias must be float32",
     "f64[4]"),
    (lambda: native.conv2d(_x(1, 3, 5, 5), _x(4, 3, 3, 3)), "conv2d: packed must be a PackedConv",
     "f32[4, 3, 3, 3]"),
    (lambda: native.conv2d(np.ones((1, 3, 5, 5)), _packed()), "conv2d: x must be float32",
     "f64[1, 3, 5, 5]"),
    (lambda: native.conv2d(_x(3, 5, 5), _packed()), "conv2d: x has the wrong rank 3",
     "f32[3, 5, 5]"),
    (lambda: native.conv2d(_x(1, 5, 5, 3).transpose(0, 3, 1, 2), _packed()),
     "conv2d: x must be C-contiguous", "not C-contiguous"),
    (lambda: native.conv2d(_x(1, 4, 5, 5), _packed()),
     "conv2d: x does not match the packed weights' input channels", "f32[1, 4, 5, 5]"),
    (lambda: native.conv2d(_x(1, 3, 2, 5), _packed(dilation=2, padding=1)),
     "conv2d: the window is larger than the padded input", "f32[1, 3, 2, 5]"),
    (lambda: native.conv2d(_x(1, 3, 5, 5), _packed(), activation="gelu"),
     "conv2d: unknown activation", "gelu"),
    (lambda: native.conv2d(_x(1, 3, 5, 5), _packed(), out=_x(1, 4, 5, 5)),
     "conv2d: out has the wrong shape", "f32[1, 4, 5, 5]"),
    (lambda: native.conv2d(_x(1, 3, 5, 5), _packed(), out=_x(1, 4, 3, 6)[..., :3]),
     "conv2d: out must be C-contiguous", "not C-contiguous"),
    (lambda: native.conv2d(_x(1, 3, 5, 5), _packed(), out=np.broadcast_to(_x(1), (1, 4, 3, 3))),
     "conv2d: out is read-only", "f32[1, 4, 3, 3]"),
    (_shared_out, "conv2d: out overlaps the input", "shared memory"),
    (lambda: native.conv2d(_x(1, 3, 5, 5), _packed(), residual=_x(1, 4, 5, 5)),
     "conv2d: residual does not match the output", "f32[1, 4, 5, 5]"),
    (lambda: native.conv2d(_x(1, 3, 5, 5), _packed(), residual=np.ones((1, 4, 3, 3))),
     "conv2d: residual must be float32", "f64[1, 4, 3, 3]"),
    (_partly_shared_residual, "conv2d: residual partly overlaps out", "partly shared memory"),
    (lambda: native.conv2d_blocked(_x(3, 5, 5), _packed()),
     "conv2d_blocked: x has the wrong rank 3", "f32[3, 5, 5]"),
    (lambda: native.conv2d_blocked(_x(1, 1, 5, 5, 8), _packed()),
     "conv2d_blocked: x does not match the packed weights' input channels",
     "f32[1, 1, 5, 5, 8]"),
    (lambda: native.to_blocked(_x(3, 5, 5)), "to_blocked: x has the wrong rank 3", "f32[3, 5, 5]"),
    (lambda: native.to_blocked(_x(1, 3, 5, 5), out=_x(1, 1, 5, 5, 8)),
     "to_blocked: out has the wrong shape", "f32[1, 1, 5, 5, 8]"),
    (lambda: native.from_blocked(_x(1, 2, 5, 5, 16), 40),
     "from_blocked: channels do not match the blocks of x", "channels=40"),
    (lambda: native.from_blocked(_x(1, 2, 5, 5), 20), "from_blocked: x has the wrong rank 4",
     "f32[1, 2, 5, 5]"),
    (lambda: _native.pool2d(_x(1, 1, 4, 4), "min", (2, 2), (2, 2), (0, 0, 0, 0)),
     "pool2d: unknown pooling", "min"),
    (lambda: native.max_pool2d(_x(1, 1, 4, 4), 0), "pool2d: kernel out of range",
     "kernel=(0, 0)"),
    (lambda: native.max_pool2d(_x(1, 1, 4, 4), 2, stride=(1, 0)), "pool2d: stride out of range",
     "stride=(1, 0)"),
    (lambda: native.avg_pool2d(_x(1, 1, 4, 4), 3, padding=-1), "pool2d: padding out of range",
     "padding=(-1, -1, -1, -1)"),
    (lambda: native.max_pool2d(_x(1, 1, 4, 4), 3, padding=(2, 0)),
     "pool2d: padding is more than half the kernel", "kernel=(3, 3), padding=(2, 2, 0, 0)"),
    (lambda: native.max_pool2d(_x(4, 4), 2), "pool2d: x has the wrong rank 2", "f32[4, 4]"),
    (lambda: native.max_pool2d(_x(1, 1, 0, 4), 1), "pool2d: x has no pixels to pool",
     "f32[1, 1, 0, 4]"),
    (lambda: native.max_pool2d(_x(1, 1, 2, 9), 3), "pool2d: the window is larger than the padded"
     " input", "f32[1, 1, 2, 9]"),
    (lambda: native.avg_pool2d(_x(2, 1, 4, 4), 2, out=_x(2, 1, 2, 3)),
     "pool2d: out has the wrong shape", "f32[2, 1, 2, 3]"),
    (lambda: native.max_pool2d(_x(1, 1, 4, 4), "2"), "max_pool2d: kernel must be an int or 2 ints",
     "kernel='2'"),
    (lambda: native.global_avg_pool(_x(2, 3, 4)), "global_avg_pool: x has the wrong rank 3",
     "f32[2, 3, 4]"),
    (lambda: native.global_avg_pool(_x(2, 3, 0, 4)), "global_avg_pool: x has no pixels to average",
     "f32[2, 3, 0, 4]"),
    (lambda: native.global_avg_pool(_x(2, 3, 4, 4), out=_x(3, 2)),
     "global_avg_pool: out has the wrong shape", "f32[3, 2]"),
    (lambda: native.global_avg_pool_blocked(_x(1, 2, 3, 3, 16), 8),
     "global_avg_pool: channels do not match the blocks of x", "f32[1, 2, 3, 3, 16]"),
    (lambda: native.global_avg_pool_blocked(_x(1, 1, 3, 3, 16), 0),
     "global_avg_pool: channels must be positive", "channels=0"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "headline", "found"), CASES, ids=[c[1] for c in CASES])
def test_refusals_name_the_kernel_and_show_what_was_found(
    call: Callable[[], object], headline: str, found: str
) -> None:
    with pytest.raises(native.NativeKernelError) as info:
        call()
    message = str(info.value)
    assert message.startswith(headline), message
    assert "\n  expected: " in message and "\n  fix:      " in message, message
    err: Any = info.value
    assert message.startswith(f"{err.kernel}: {err.what}")
    assert found in err.found and f"\n  found:    {err.found}\n" in message
