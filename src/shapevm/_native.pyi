# Type information for the C kernel library (src/shapevm/native/c); see shapevm.native.
from typing import Any

import numpy as np

_Array = np.ndarray[Any, Any]

ABI_VERSION: int

class NativeKernelError(ValueError):
    kernel: str
    what: str
    expected: str
    found: str
    fix: str

class PackedDense:
    @property
    def k(self) -> int: ...
    @property
    def n(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def has_bias(self) -> bool: ...

def info() -> dict[str, Any]: ...
def set_isa(name: str, /) -> None: ...
def set_num_threads(n: int, /) -> None: ...
def vmath(name: str, x: _Array, /) -> _Array: ...
def pack_dense(w: _Array, bias: _Array | None = None, transposed: bool = False) -> PackedDense: ...
def dense(
    x: _Array,
    packed: PackedDense,
    out: _Array | None = None,
    residual: _Array | None = None,
    activation: str | None = "none",
    alpha: float = 1.0,
    threads: int = 0,
) -> _Array: ...
def matmul(a: _Array, b: _Array, alpha: float = 1.0) -> _Array: ...
