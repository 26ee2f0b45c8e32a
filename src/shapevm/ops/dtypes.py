"""Element types of tensors, with the short names the bytecode prints (``f32``, ``i64``...).

The numeric ``code`` of each dtype is part of the binary bytecode format: never renumber.
"""

from __future__ import annotations

import enum

import numpy as np


class DType(enum.Enum):
    """An element type, printed by its short name.

    >>> str(DType.F32), DType.parse("f32").numpy == np.float32
    ('f32', True)
    >>> DType.from_numpy(np.dtype("int64"))
    <DType.I64: 'i64'>
    """

    BOOL = "bool"
    I8 = "i8"
    I16 = "i16"
    I32 = "i32"
    I64 = "i64"
    U8 = "u8"
    U16 = "u16"
    U32 = "u32"
    U64 = "u64"
    F16 = "f16"
    F32 = "f32"
    F64 = "f64"

    @property
    def numpy(self) -> np.dtype[np.generic]:
        """The little-endian NumPy dtype (the byte order of the binary format)."""
        dt: np.dtype[np.generic] = np.dtype(_NUMPY[self]).newbyteorder("<")
        return dt

    @property
    def code(self) -> int:
        """Stable number used by the binary format."""
        return _CODES[self]

    @property
    def itemsize(self) -> int:
        return self.numpy.itemsize

    @property
    def is_float(self) -> bool:
        return self in (DType.F16, DType.F32, DType.F64)

    @property
    def is_int(self) -> bool:
        return self.value[0] in "iu"

    @classmethod
    def parse(cls, text: str) -> DType:
        """The dtype printed as ``text``; raises ``ValueError`` naming the known ones."""
        try:
            return cls(text)
        except ValueError:
            known = ", ".join(d.value for d in cls)
            raise ValueError(f"unknown dtype {text!r}; known dtypes: {known}") from None

    @classmethod
    def from_code(cls, code: int) -> DType | None:
        return _BY_CODE.get(code)

    @classmethod
    def from_numpy(cls, dtype: np.dtype[np.generic] | type) -> DType:
        """The dtype of a NumPy dtype of any byte order; ``ValueError`` if it has none."""
        dt = np.dtype(dtype)
        for d, name in _NUMPY.items():
            if dt.kind == np.dtype(name).kind and dt.itemsize == np.dtype(name).itemsize:
                return d
        raise ValueError(f"NumPy dtype {dt} has no shapevm dtype")

    def __str__(self) -> str:
        return self.value


_NUMPY: dict[DType, str] = {
    DType.BOOL: "bool",
    DType.I8: "int8",
    DType.I16: "int16",
    DType.I32: "int32",
    DType.I64: "int64",
    DType.U8: "uint8",
    DType.U16: "uint16",
    DType.U32: "uint32",
    DType.U64: "uint64",
    DType.F16: "float16",
    DType.F32: "float32",
    DType.F64: "float64",
}

_CODES: dict[DType, int] = {
    DType.BOOL: 1,
    DType.I8: 2,
    DType.I16: 3,
    DType.I32: 4,
    DType.I64: 5,
    DType.U8: 6,
    DType.U16: 7,
    DType.U32: 8,
    DType.U64: 9,
    DType.F16: 10,
    DType.F32: 11,
    DType.F64: 12,
}
_BY_CODE: dict[int, DType] = {c: d for d, c in _CODES.items()}
