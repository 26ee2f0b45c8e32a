"""Errors of the runtime, rendered like every other shapevm error: what, expected, found, fix."""

from __future__ import annotations

from shapevm.bytecode.errors import format_message


class UnsupportedKernelError(LookupError):
    """No kernel variant can run an op for this dtype, shapes and device.

    ``available`` maps each variant the capability db lists for the op on the device to
    its dtype names, so a caller can offer a cast or a fallback device.

    >>> err = UnsupportedKernelError(
    ...     "conv2d", "i32", "cpu", {"reference": ["f32"]},
    ...     what="no variant of conv2d on cpu takes i32",
    ...     expected="one of the dtypes f32", found="i32", fix="cast the operands to f32")
    >>> print(err)
    no variant of conv2d on cpu takes i32
      expected: one of the dtypes f32
      found:    i32
      fix:      cast the operands to f32
    """

    def __init__(
        self,
        op: str,
        dtype: str,
        device: str,
        available: dict[str, list[str]],
        *,
        what: str,
        expected: str = "",
        found: str = "",
        fix: str = "",
    ) -> None:
        self.op = op
        self.dtype = dtype
        self.device = device
        self.available = available
        self.what = what
        self.expected = expected
        self.found = found
        self.fix = fix
        super().__init__(format_message(what, expected=expected, found=found, fix=fix))
