"""The native kernels as compiled regions call them: argument types fixed, compiled once.

A numba dispatcher compiles a new specialization whenever it meets new argument types (a
read-only array, a view numba types as non-contiguous); in a compiled region that would
be a compile of seconds inside a user's call. The callables here are built while a variant
compiles, in the background: each wraps dispatchers made with explicit signatures
(`typed`), which compile (or load from the disk cache) when they are made and never again;
at call time the arguments are brought to those types (C-contiguous, writable float32)
with cheap checks. The public functions (`packed_matmul`, `conv2d_3x3`) run the same
callables after checking their arguments; compiled regions skip those checks because the
compiler has proved shapes and dtypes already.

Every callable takes its inputs and a caller-provided ``out`` and returns nothing. Kernels
big enough to gain from numba's thread pool use it when it is measured to be faster than
the calling thread (`ThreadChoice`), and never while compile work runs in the background
(`shapevm.jit.worker.busy`).

Dense layers use the micro-kernel tiles at every row count, on one copy of the weights
(16-column panels). Below six rows the tile computes only its own rows
(`ukernel.tile_1x16` ... `tile_5x16`). Dot-product kernels reading a transposed copy of the
weights used to take fewer than five rows: on a stream that alternates W1's batch sizes the
two copies (2 x 6.3 MB) pushed each other out of the cache, and one row took 300 us
instead of 134 us in the middle layer (one thread). They are gone.

Compiled regions never call NumPy's BLAS: in a process that also runs numba's parallel
kernels, two thread pools take turns on the cores; each pool's workers busy-wait after a
call, and on two cores a call of one pool waits for the other's spinning threads to be
descheduled (measured on W1's stream: 5 ms per call at 64 rows instead of 1.6).
"""

from __future__ import annotations

import threading
from time import perf_counter
from typing import Any, Final

import numba
import numpy as np
from numba import types as _types

from shapevm.jit.native import conv as _conv
from shapevm.jit.native import gemm as _gemm
from shapevm.jit.native import rowops as _rowops
from shapevm.jit.native import ukernel as _ukernel
from shapevm.jit.native._core import ACTIVATIONS, NativeKernelError
from shapevm.jit.native._threads import note_pool, pool_available
from shapevm.jit.native.conv import PackedConv, conv_out_hw
from shapevm.jit.worker import busy

Array = np.ndarray[Any, Any]
nt: Any = _types  # numba's type objects (its stubs do not cover building them from names)

_TYPED: dict[tuple[Any, tuple[Any, ...]], Any] = {}
_LOCK = threading.Lock()


def arr(ndim: int, layout: str = "C") -> Any:
    """The numba type of a writable float32 array."""
    return nt.Array(nt.float32, ndim, layout)


F32 = nt.float32
I64 = nt.int64


def typed(dispatcher: Any, *sigs: tuple[Any, ...]) -> Any:
    """``dispatcher``'s function compiled for exactly ``sigs`` (loaded from numba's disk
    cache when it is there), with compiling at call time disabled; one per process."""
    key = (dispatcher.py_func, tuple(sigs))
    with _LOCK:
        found = _TYPED.get(key)
        if found is None:
            options = dict(dispatcher.targetoptions)
            options.pop("nopython", None)
            found = numba.njit(list(sigs), cache=True, **options)(dispatcher.py_func)
            _TYPED[key] = found
        return found


# The argument types of every entry point: fixed, whatever the model.
TILES_GEMM_SIG = (arr(2), arr(1), arr(3), arr(1), arr(2), I64)  # x, ap, panels, bias, out, act


def ln_sig(residual: bool) -> tuple[Any, ...]:
    return (arr(2), arr(2) if residual else nt.none, arr(1), arr(1), F32, arr(2))


SOFTMAX_SIG = (arr(2), arr(2), F32, nt.boolean)  # x, out, scale, x is out
ATTENTION_SIG = (arr(4, "A"),) * 4 + (F32,)  # q, k, v, out, scale
CONV_TILES_SIG = (arr(4), arr(1), arr(1), arr(1), arr(4), I64, I64)  # x, xp, aw, bias, out, s, act
CONV_PX_SIG = (arr(4), arr(1), arr(3), arr(1), arr(4), I64, I64)  # x, xp, panels, bias, out...
MEAN_ROWS_SIG = (arr(2), arr(1), I64, I64)
MEAN_ROWS_PARALLEL_SIG = (arr(2), arr(1))


def library() -> list[tuple[Any, tuple[Any, ...]]]:
    """Every (dispatcher, signature) the compiled regions call."""
    return [
        (_ukernel.gemm_serial, TILES_GEMM_SIG),
        (_ukernel.gemm_parallel, TILES_GEMM_SIG),
        (_rowops._ln_serial, ln_sig(False)),
        (_rowops._ln_parallel, ln_sig(False)),
        (_rowops._ln_serial, ln_sig(True)),
        (_rowops._ln_parallel, ln_sig(True)),
        (_rowops._softmax_serial, SOFTMAX_SIG),
        (_rowops._softmax_parallel, SOFTMAX_SIG),
        (_rowops._attention_serial, ATTENTION_SIG),
        (_rowops._attention_parallel, ATTENTION_SIG),
        (_ukernel.conv3x3_serial, CONV_TILES_SIG),
        (_ukernel.conv3x3_parallel, CONV_TILES_SIG),
        (_ukernel.conv3x3_px_serial, CONV_PX_SIG),
        (_ukernel.conv3x3_px_parallel, CONV_PX_SIG),
        (_conv._mean_rows, MEAN_ROWS_SIG),
        (_conv._mean_rows_parallel, MEAN_ROWS_PARALLEL_SIG),
    ]


def build_library() -> int:
    """Load (or compile, once per installation) every entry point; how many there are."""
    entries = library()
    for dispatcher, sig in entries:
        typed(dispatcher, sig)
    return len(entries)


class ThreadChoice:
    """Whether a kernel runs on numba's thread pool or the calling thread, by measured speed.

    numba's parallel loops split the work into one fixed share per thread and wait for every
    share. When another process holds one of the two cores, the share of the descheduled
    thread starts a time slice later: measured on W1 with a busy neighbour, 24-36 ms per call
    on the pool against 0.3-2.7 ms on the calling thread, while on an idle machine the pool
    is up to 1.9x faster. So each kernel keeps, per size class (the bit length of its work),
    the smoothed seconds per unit of work of both ways and takes the faster. The slower way
    is tried again now and then: after 4 calls, then twice as many each time it loses (up to
    `MAX_PROBE_GAP`), counted over all kernels, since a busy neighbour slows them all.

    A probe of the pool lasts `PROBE_BURST` consecutive kernel calls, and a pool call is
    measured only when the call before it (of any kernel) ran on the pool too: the workers
    of a pool left idle have gone to sleep (`_threads.SPIN_COUNT`), and waking them (86 us
    here) is a cost of switching, not of the kernel. Without this, a lone probe always
    looked slower than the calling thread and the pool was never chosen.

    A size class never seen (the first call on a new shape) takes the way that was faster
    at the nearest class where both were measured: its work per unit is much the same, and
    new shapes must not be the slow calls of a stream. With nothing measured yet, work of
    `POOL_FIRST` times the floor or more starts on the pool, the rest on the calling thread.

    Work below ``min_work`` always runs on the calling thread, and so does everything while
    a compile runs in the background (`shapevm.jit.worker.busy`) or while other processes,
    or this process's other threads (OpenBLAS's spinning workers after a NumPy product),
    keep the cores busy (`_threads.pool_available`). Those forced calls are not measured:
    with a compile on the other core, the calling thread ran W3's dense layers at 11-16
    GMAC/s instead of ~40, and those rates, kept, made the calling thread look 3x slower
    than it is for the rest of the process.
    """

    __slots__ = ("min_work", "stats")

    def __init__(self, min_work: int) -> None:
        self.min_work = min_work
        self.stats: dict[int, list[float]] = {}  # size class -> [serial, parallel] s/unit

    def pick(self, work: int) -> int:
        """How to run a call: bit 0 set, on the pool; bit 1 set, as a probe of the way that
        looks slower; bit 2 set, on the calling thread because it had to be (pass it on to
        `record`)."""
        if work < self.min_work:
            return 0
        if busy() or not pool_available():
            return FORCED
        cls = work.bit_length()
        stat = self.stats.get(cls)
        if stat is None or (stat[0] == 0.0 and stat[1] == 0.0):
            # A new size (a new shape): the way measured faster at the nearest size class
            # where both were measured; with none, the pool for big work (the cores are
            # free, checked above), the calling thread for the rest.
            near = self._nearest(cls)
            if near is not None:
                return int(near[1] < near[0])
            return int(work >= POOL_FIRST * self.min_work)
        g = _PROBES
        g[0] += 1
        if g[3] > 0:  # inside a burst of pool probes
            g[3] -= 1
            return 3
        probe = g[0] >= g[1]
        if stat[0] == 0.0:  # only the pool measured so far: a probe tries the calling thread
            pool = not probe
        elif stat[1] == 0.0:
            pool = probe
        else:
            pool = (stat[1] < stat[0]) != probe
        if probe and pool:
            g[3] = PROBE_BURST - 1
        return int(pool) | (2 if probe else 0)

    def _nearest(self, cls: int) -> list[float] | None:
        best: list[float] | None = None
        dist = 0
        for c, stat in self.stats.items():
            if stat[0] != 0.0 and stat[1] != 0.0 and (best is None or abs(c - cls) < dist):
                best, dist = stat, abs(c - cls)
        return best

    def record(self, work: int, how: int, seconds: float) -> None:
        if work < self.min_work:
            return
        g = _PROBES
        i = how & 1
        if i:
            note_pool(seconds)
        warm = g[4]
        g[4] = i
        if how & FORCED:
            return  # a compile or a neighbour shares the core: not the kernel's own speed
        if i and not warm:
            return  # the workers were asleep: a wake-up, not the kernel's speed
        cls = work.bit_length()
        stat = self.stats.get(cls)
        if stat is None:
            stat = self.stats[cls] = [0.0, 0.0]
        rate = seconds / work
        if how & 2 and g[3] == 0:  # a probe ends: did the other way win?
            other = stat[1 - i]
            won = other == 0.0 or rate < other
            g[2] = 4 if won else min(2 * g[2], MAX_PROBE_GAP)
            g[1] = g[0] + g[2]
        old = stat[i]
        stat[i] = rate if old == 0.0 else 0.7 * old + 0.3 * rate


FORCED: Final = 4
"""`ThreadChoice.pick` ran a call on the calling thread because the pool was not available."""
MAX_PROBE_GAP = 1024
POOL_FIRST = 8
"""Work of this many times a kernel's floor goes to the pool at once when nothing is known
about its size (W1's dense layers: the pool 1.6-1.8x faster from 8 rows on; a new shape's
first call on the calling thread cost 2-3x its later ones)."""
PROBE_BURST = 6
"""Consecutive kernel calls a probe of the pool lasts (W1 makes 4 per call, W3 about 8)."""
_PROBES = [0, 1, 4, 0, 0]
"""Calls that could have used the pool, call of the next probe, gap, pool calls left in the
current probe, whether the last measured kernel call ran on the pool."""


def c_rows(x: Array, k: int) -> Array:
    """``x`` as a C-contiguous writable float32 matrix of rows of ``k`` (a copy only when it
    must be)."""
    if not (x.flags.c_contiguous and x.flags.writeable) or x.dtype != np.float32:
        x = np.array(x, dtype=np.float32, order="C")
    return x.reshape(-1, k)


def _c(x: Array) -> Array:
    if not (x.flags.c_contiguous and x.flags.writeable) or x.dtype != np.float32:
        return np.array(x, dtype=np.float32, order="C")
    return x


# ------------------------------------------------------------------------------- dense


class Dense:
    """``out = act(x @ w + bias)`` against weights packed once; x is [..., K], out [..., N].

    Every row count runs on the register-blocked micro-kernel of `ukernel`, with the
    weights in 16-column panels (`ukernel.pack_b16`) and the bias padded to whole panels;
    see the module's docstring. ``w`` is f32[K, N] (the ``x @ w`` orientation).
    """

    def __init__(self, w: Array, bias: Array | None = None, epilogue: str = "none") -> None:
        if w.ndim != 2 or w.dtype != np.float32:
            raise NativeKernelError(
                "Dense: the weights must be a float32 matrix",
                expected="w: f32[K, N] (x @ w orientation)",
                found=f"w: {w.dtype}{list(w.shape)}",
                fix="pass a linear layer's weight [out, in] as weight.T, as float32",
            )
        self.act = ACTIVATIONS[epilogue]
        self.k, self.n = int(w.shape[0]), int(w.shape[1])
        self.panels = _ukernel.pack_b16(w)
        self.bias = np.zeros(self.panels.shape[0] * _ukernel.NR, np.float32)
        if bias is not None:
            self.bias[: self.n] = bias
        self._tiles = typed(_ukernel.gemm_serial, TILES_GEMM_SIG)
        self._tiles_parallel = typed(_ukernel.gemm_parallel, TILES_GEMM_SIG)
        self._local = threading.local()
        self._choice = ThreadChoice(_gemm.PARALLEL_MIN_MACS)

    @property
    def nbytes(self) -> int:
        return int(self.panels.nbytes + self.bias.nbytes)

    def _scratch(self, m: int) -> Array:
        n = -(-m // _ukernel.MR) * _ukernel.MR * self.k
        buf: Array | None = getattr(self._local, "ap", None)
        if buf is None or buf.size < n:
            buf = self._local.ap = np.empty(n, np.float32)
        return buf

    def __call__(self, x: Array, out: Array, act: int | None = None) -> None:
        """``out = act(x @ w + bias)``; ``act`` (an `ACTIVATIONS` code) overrides the
        layer's epilogue."""
        x2 = c_rows(x, self.k)
        m = x2.shape[0]
        if m == 0:
            return
        out2 = out.reshape(m, self.n)
        work = m * self.k * self.n
        how = self._choice.pick(work)
        fn = self._tiles_parallel if how & 1 else self._tiles
        t0 = perf_counter()
        fn(x2, self._scratch(m), self.panels, self.bias, out2, self.act if act is None else act)
        self._choice.record(work, how, perf_counter() - t0)

    def warm(self) -> None:
        """Call each kernel once per process, on a 16 x 16 layer: its machine code is
        mapped and numba's thread pool started. (Warming every layer on its own weights
        cost 13 ms of W3's first compile, all of it reading weights.)"""
        if _ukernel.gemm_parallel in _WARMED:
            return
        panels = np.zeros((1, 16, _ukernel.NR), np.float32)
        bias = np.zeros(_ukernel.NR, np.float32)
        for m in (1, _ukernel.MR):
            x = np.zeros((m, 16), np.float32)
            out = np.empty((m, 16), np.float32)
            ap = np.empty(_ukernel.MR * 16, np.float32)
            self._tiles(x, ap, panels, bias, out, self.act)
            self._tiles_parallel(x, ap, panels, bias, out, self.act)
        _WARMED.add(_ukernel.gemm_parallel)


_WARMED: set[Any] = set()
"""Kernels `Dense.warm` already ran in this process."""


# -------------------------------------------------------------------------- layer norm


class LayerNorm:
    """``out = LN(x [+ residual]) * gamma + beta`` over the last axis."""

    def __init__(self, eps: float, residual: bool) -> None:
        self.eps = np.float32(eps)
        self.residual = residual
        sig = ln_sig(residual)
        self._choice = ThreadChoice(_rowops.PARALLEL_MIN_ELEMENTS)
        self._serial = typed(_rowops._ln_serial, sig)
        self._parallel = typed(_rowops._ln_parallel, sig)

    def __call__(
        self, x: Array, gamma: Array, beta: Array, out: Array, residual: Array | None = None
    ) -> None:
        d = out.shape[-1]
        x2 = c_rows(x, d)
        r2 = c_rows(residual, d) if residual is not None else None
        out2 = out.reshape(-1, d)
        how = self._choice.pick(out2.size)
        parallel = bool(how & 1)
        t0 = perf_counter()
        fn = self._parallel if parallel else self._serial
        fn(x2, r2, _c(gamma), _c(beta), self.eps, out2)
        self._choice.record(out2.size, how, perf_counter() - t0)

    def warm(self, d: int) -> None:
        g = np.ones(d, np.float32)
        x = np.zeros((1, d), np.float32)
        r = x.copy() if self.residual else None
        for fn in (self._serial, self._parallel):
            fn(x, r, g, g, self.eps, np.empty_like(x))


# ----------------------------------------------------------------------------- softmax


class Softmax:
    """``out = softmax(scale * x)`` over the last axis."""

    def __init__(self, scale: float) -> None:
        self.scale = np.float32(scale)
        self._choice = ThreadChoice(_rowops.PARALLEL_MIN_ELEMENTS)
        self._serial = typed(_rowops._softmax_serial, SOFTMAX_SIG)
        self._parallel = typed(_rowops._softmax_parallel, SOFTMAX_SIG)

    def __call__(self, x: Array, out: Array) -> None:
        d = out.shape[-1]
        x2 = c_rows(x, d)
        out2 = out.reshape(-1, d)
        how = self._choice.pick(out2.size)
        parallel = bool(how & 1)
        t0 = perf_counter()
        fn = self._parallel if parallel else self._serial
        x2, inplace = _rowops._alias(x2, out2)
        fn(x2, out2, self.scale, inplace)
        self._choice.record(out2.size, how, perf_counter() - t0)

    def warm(self, d: int) -> None:
        x = np.zeros((1, d), np.float32)
        for fn in (self._serial, self._parallel):
            fn(x, np.empty_like(x), self.scale, False)


# --------------------------------------------------------------------------- attention


class Attention:
    """``out = softmax(q @ k^T * scale) @ v`` per batch and head; any strides (views of a
    fused qkv buffer; ``out`` may be a transposed view)."""

    def __init__(self, scale: float) -> None:
        self.scale = np.float32(scale)
        self._choice = ThreadChoice(_rowops.ATTENTION_PARALLEL_MIN)
        self._serial = typed(_rowops._attention_serial, ATTENTION_SIG)
        self._parallel = typed(_rowops._attention_parallel, ATTENTION_SIG)

    def __call__(self, q: Array, k: Array, v: Array, out: Array) -> None:
        if q.dtype != np.float32 or not q.flags.writeable:
            q = np.array(q, np.float32)
        if k.dtype != np.float32 or not k.flags.writeable:
            k = np.array(k, np.float32)
        if v.dtype != np.float32 or not v.flags.writeable:
            v = np.array(v, np.float32)
        heads = q.shape[0] * q.shape[1]
        work = q.size * k.shape[2] if heads > 1 else 0
        how = self._choice.pick(work)
        parallel = bool(how & 1)
        t0 = perf_counter()
        fn = self._parallel if parallel else self._serial
        fn(q, k, v, out, self.scale)
        self._choice.record(work, how, perf_counter() - t0)

    def warm(self, d: int) -> None:
        q = np.zeros((1, 2, 2, d), np.float32)
        for fn in (self._serial, self._parallel):
            fn(q, q, q, np.empty_like(q), self.scale)


# ------------------------------------------------------------------------- convolution


class Conv3x3:
    """``out = act(conv3x3(x, w, padding=1, stride) + bias)`` in NCHW, weights packed once;
    the zero-bordered copy of the input lives in a per-thread scratch buffer.

    On the micro-kernel tiles of `ukernel` (measured on W2's shapes): with stride 1, tiles
    of 6 output channels by 16 pixels loaded as vectors (1.4-2.1x the former direct
    kernel at 32 input channels; at 3 input channels, a K of 27, 1.3-1.9x since bias and
    activation run once per finished row); with stride 2, tiles of 6 pixels (gathered) by
    16 output channels (1.1-1.3x the former patch kernel).
    """

    def __init__(self, packed: PackedConv, stride: int, epilogue: str = "none") -> None:
        self.packed = packed
        self.stride = stride
        self.act = ACTIVATIONS[epilogue]
        self._local = threading.local()
        self._choice = ThreadChoice(_conv.PARALLEL_MIN_MACS)
        self.tiles = stride == 1
        if self.tiles:
            self.panels = _ukernel.pack_conv_a6(packed.w)
            self._serial = typed(_ukernel.conv3x3_serial, CONV_TILES_SIG)
            self._parallel = typed(_ukernel.conv3x3_parallel, CONV_TILES_SIG)
        else:
            self.panels = _ukernel.pack_conv_b16(packed.w)
            self._bias16 = np.zeros(self.panels.shape[0] * _ukernel.NR, np.float32)
            self._bias16[: packed.c_out] = packed.bias
            self._serial = typed(_ukernel.conv3x3_px_serial, CONV_PX_SIG)
            self._parallel = typed(_ukernel.conv3x3_px_parallel, CONV_PX_SIG)

    def _scratch(self, shape: tuple[int, ...]) -> Array:
        n = int(np.prod(shape))
        buf: Array | None = getattr(self._local, "buf", None)
        if buf is None or buf.size < n:
            buf = self._local.buf = np.empty(n, np.float32)
        return buf[:n].reshape(shape)

    def _run(self, fn: Any, x: Array, out: Array) -> None:
        p = self.packed
        batch, _, h, w = x.shape
        if self.tiles:
            n, _ = _ukernel.phase_shape(batch, p.c_in, h, w, 1)
            fn(x, self._scratch((n,)), self.panels, p.bias, out, 1, self.act)
        else:
            n = _ukernel.padded_size(batch, p.c_in, h, w)
            fn(x, self._scratch((n,)), self.panels, self._bias16, out, self.stride, self.act)

    def __call__(self, x: Array, out: Array) -> None:
        x = _c(x)
        p = self.packed
        batch, _, h, w = x.shape
        ho, wo = conv_out_hw(h, w, self.stride)
        work = batch * ho * wo * p.c_out * 9 * p.c_in
        how = self._choice.pick(work)
        parallel = bool(how & 1)
        t0 = perf_counter()
        self._run(self._parallel if parallel else self._serial, x, out)
        self._choice.record(work, how, perf_counter() - t0)

    def warm(self) -> None:
        p = self.packed
        x = np.zeros((1, p.c_in, 2, 2), np.float32)
        ho, wo = conv_out_hw(2, 2, self.stride)
        out = np.empty((1, p.c_out, ho, wo), np.float32)
        for fn in (self._serial, self._parallel):
            self._run(fn, x, out)


class GlobalAvgPool:
    """``out[b, c] = mean(x[b, c, :, :])``."""

    def __init__(self) -> None:
        self._choice = ThreadChoice(1 << 16)
        self._serial = typed(_conv._mean_rows, MEAN_ROWS_SIG)
        self._parallel = typed(_conv._mean_rows_parallel, MEAN_ROWS_PARALLEL_SIG)

    def __call__(self, x: Array, out: Array) -> None:
        x = _c(x)
        rows = x.shape[0] * x.shape[1]
        x2 = x.reshape(rows, -1)
        out1 = out.reshape(-1)
        how = self._choice.pick(x.size)
        parallel = bool(how & 1)
        t0 = perf_counter()
        if parallel:
            self._parallel(x2, out1)
        else:
            self._serial(x2, out1, 0, rows)
        self._choice.record(x.size, how, perf_counter() - t0)

    def warm(self) -> None:
        x2 = np.zeros((2, 4), np.float32)
        out1 = np.empty(2, np.float32)
        self._serial(x2, out1, 0, 2)
        self._parallel(x2, out1)


__all__ = [
    "Attention",
    "Conv3x3",
    "Dense",
    "GlobalAvgPool",
    "LayerNorm",
    "Softmax",
    "build_library",
    "c_rows",
    "library",
    "typed",
]
