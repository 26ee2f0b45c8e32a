# Type information for the C kernel library (src/shapevm/native/c); see shapevm.native.
from collections.abc import Sequence
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

class TileProgram:
    def __init__(
        self,
        in_dtypes: Sequence[int],
        consts: Sequence[float],
        const_dtypes: Sequence[int],
        code: Sequence[tuple[int, int, int, int, int, int]],
        out_reg: int,
        n_regs: int,
        reduce: int = 0,
        reduce_axes: int = 0,
        keepdims: bool = False,
    ) -> None: ...
    @property
    def out_dtype(self) -> str: ...
    @property
    def n_inputs(self) -> int: ...
    @property
    def kernels(self) -> tuple[str, ...]: ...

def info() -> dict[str, Any]: ...
def set_isa(name: str, /) -> None: ...
def _set_conv_winograd(on: bool, /) -> bool: ...
def set_num_threads(n: int, /) -> None: ...
def vmath(name: str, x: _Array, /) -> _Array: ...
def pack_dense(w: _Array, bias: _Array | None = None, transposed: bool = False) -> PackedDense: ...
def dense(
    x: _Array,
    packed: PackedDense,
    out: _Array | None = None,
    residual: _Array | None = None,
    activation: str | tuple[str, float] | None = "none",
    alpha: float = 1.0,
    threads: int = 0,
    residual_mul: bool = False,
) -> _Array: ...
def matmul(a: _Array, b: _Array, alpha: float = 1.0) -> _Array: ...

class PackedConv:
    @property
    def cin(self) -> int: ...
    @property
    def cout(self) -> int: ...
    @property
    def kernel(self) -> tuple[int, int]: ...
    @property
    def stride(self) -> tuple[int, int]: ...
    @property
    def padding(self) -> tuple[int, int, int, int]: ...
    @property
    def dilation(self) -> tuple[int, int]: ...
    @property
    def groups(self) -> int: ...
    @property
    def has_bias(self) -> bool: ...
    @property
    def depthwise(self) -> bool: ...
    @property
    def nbytes(self) -> int: ...

def pack_conv2d(
    w: _Array,
    bias: _Array | None = None,
    stride: tuple[int, ...] = (1, 1),
    padding: tuple[int, ...] = (0, 0, 0, 0),
    dilation: tuple[int, ...] = (1, 1),
    groups: int = 1,
) -> PackedConv: ...
def conv2d(
    x: _Array,
    packed: PackedConv,
    out: _Array | None = None,
    residual: _Array | None = None,
    activation: str | tuple[str, float] | None = "none",
    threads: int = 0,
    residual_first: bool = False,
) -> _Array: ...
def conv2d_blocked(
    x: _Array,
    packed: PackedConv,
    out: _Array | None = None,
    residual: _Array | None = None,
    activation: str | tuple[str, float] | None = "none",
    threads: int = 0,
    residual_first: bool = False,
) -> _Array: ...
def to_blocked(x: _Array, out: _Array | None = None, threads: int = 0) -> _Array: ...
def from_blocked(
    x: _Array, channels: int, out: _Array | None = None, threads: int = 0
) -> _Array: ...
def pool2d(
    x: _Array,
    kind: str,
    kernel: tuple[int, ...],
    stride: tuple[int, ...],
    padding: tuple[int, ...],
    out: _Array | None = None,
    threads: int = 0,
) -> _Array: ...
def global_avg_pool(
    x: _Array, out: _Array | None = None, threads: int = 0, channels: int = 0
) -> _Array: ...
def layer_norm(
    x: _Array,
    gamma: _Array | None = None,
    beta: _Array | None = None,
    eps: float = 1e-5,
    residual: _Array | None = None,
    out: _Array | None = None,
    sum_out: _Array | None = None,
    threads: int = 0,
    rms: bool = False,
) -> _Array: ...
def softmax(
    x: _Array,
    scale: float = 1.0,
    mask: _Array | None = None,
    out: _Array | None = None,
    threads: int = 0,
    log: bool = False,
) -> _Array: ...
def attention(
    q: _Array,
    k: _Array,
    v: _Array,
    scale: float | None = None,
    mask: _Array | None = None,
    causal: bool = False,
    out: _Array | None = None,
    threads: int = 0,
) -> _Array: ...
def tile_run(
    program: TileProgram, inputs: Sequence[_Array], out: _Array | None = None, threads: int = 0
) -> _Array: ...
def tile_ops() -> tuple[tuple[tuple[str, int], ...], tuple[str, ...], tuple[str, ...]]: ...

class ExecMismatch(ValueError): ...

class ExecFailure(RuntimeError):
    instruction: int
    reason: str
    data: bool

class Executor:
    def __init__(self, spec: dict[str, Any]) -> None: ...
    def __call__(self, *arrays: Any) -> tuple[_Array, ...]: ...
    def stats(self) -> dict[str, int]: ...
    def profile(self, reset: bool = False) -> list[tuple[int, float]]: ...
    def heap(self, *arrays: _Array) -> tuple[int | None, ...]: ...
    @property
    def ninputs(self) -> int: ...
    @property
    def ninstrs(self) -> int: ...

def load_kernel(path: str, symbol: str, /) -> Any: ...
def chain_kernel(programs: Sequence[TileProgram], /) -> Any: ...
def rowop_kernel(
    kind: str,
    eps: float = 0.0,
    scale: float = 1.0,
    gamma: _Array | None = None,
    beta: _Array | None = None,
) -> Any: ...
def attention_kernel(scale: float, causal: bool = False) -> Any: ...
def take_kernel(axis: int) -> Any: ...
def take_along_kernel(axis: int) -> Any: ...
def sizes_kernel() -> Any: ...
def cast_kernel() -> Any: ...
def argsort_kernel(axis: int, descending: bool, first: int = 0, /) -> Any: ...
def scan_kernel(axis: int, exclusive: bool, reverse: bool, /) -> Any: ...
def reduce_kernel(kind: str, first: int, stop: int, /) -> Any: ...
def compare_kernel(kind: str, /) -> Any: ...
def int_arith_kernel(kind: str, /) -> Any: ...
def int_matmul_kernel() -> Any: ...
def int_reduce_kernel(kind: str, first: int, stop: int, /) -> Any: ...
def arg_kernel(kind: str, axis: int, /) -> Any: ...
def set_profiling(on: bool) -> bool: ...
def arena_pools() -> list[dict[str, Any]]: ...
def conv_kernel(
    packed: PackedConv,
    activation: str | tuple[str, float],
    in_blocked: bool,
    out_blocked: bool,
    residual_first: bool = False,
    /,
) -> Any: ...
def conv_pair_kernel(
    packed1: PackedConv,
    activation1: str | tuple[str, float],
    packed2: PackedConv,
    activation2: str | tuple[str, float],
    in_blocked: bool,
    out_blocked: bool,
    /,
) -> Any: ...
def conv_mean_kernel(
    packed: PackedConv, activation: str | tuple[str, float], in_blocked: bool, /
) -> Any: ...
def reorder_kernel(to_blocked: bool, channels: int, /) -> Any: ...
def pool_kernel(
    kind: str,
    kernel: tuple[int, int],
    stride: tuple[int, int],
    padding: tuple[int, int, int, int],
    /,
) -> Any: ...
def global_pool_kernel(blocked: bool, channels: int, /) -> Any: ...
