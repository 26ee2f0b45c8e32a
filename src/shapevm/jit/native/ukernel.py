"""A register-blocked matrix-product micro-kernel written in LLVM IR, and the GEMM built on it.

The micro-kernel computes one tile ``C[6, 16] (+)= A[6, K] @ B[K, 16]`` the way BLAS
libraries do: twelve 8-wide accumulators stay in registers for the whole K loop; each step
loads two vectors of B (16 columns), broadcasts six scalars of A and issues twelve fused
multiply-adds. That is eight loads for twelve FMAs, so the FMA units, not the loads, set the
pace (about 48 GMAC/s per core on the AVX2 machines of BENCHMARKS.md, where the dot-product
kernels this one replaced reached 20-25 and OpenBLAS 29-41 on these shapes).

numba cannot express it: its loop vectorizer handles one loop at a time, and the SLP
vectorizer (off by default) keeps loop-carried accumulators as scalars and shuffles them
every step. So `tile_6x16` is a numba ``@intrinsic`` that emits the loop as IR with
``<8 x float>`` values and ``llvm.fma``; numba inlines it into the kernels below, and its
machine code is cached like theirs.

B comes in two forms:

- *packed* (dense layers): `pack_b16` lays the weights out once as panels of 16 columns,
  ``bp[jb, k, 0:16] = w[k, 16 jb : 16 jb + 16]`` (zeros past N), so step k of a tile reads
  16 consecutive floats at ``16 k``;
- *indirect* (convolutions): step k reads 16 consecutive floats at ``base + offsets[k]``:
  for a 3x3 convolution with stride 1, ``offsets`` are the positions of the (channel,
  ky, kx) taps in the zero-bordered input, and the 16 floats are 16 neighbouring output
  pixels of one row, so the image is never copied into patches.

A is packed per call into panels of six rows, ``ap[ib, k, 0:6]`` (zeros past M).
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
from llvmlite import ir
from numba import prange, types
from numba.core import cgutils as _cgutils
from numba.extending import intrinsic

from shapevm.jit.native._core import (
    act_rows_inplace,
    act_vec_inplace,
    kernel,
    parallel_kernel,
)

MR: Final = 6
"""Rows of a tile (broadcast from A)."""
NR: Final = 16
"""Columns of a tile (two 8-wide vectors of B)."""
_NV = NR // 8

cgutils: Any = _cgutils  # untyped helpers
_F = ir.FloatType()
_V8 = ir.VectorType(_F, 8)
_I64 = ir.IntType(64)
_I32 = ir.IntType(32)


def _data(context: Any, builder: Any, aty: Any, value: Any) -> Any:
    return context.make_array(aty)(context, builder, value).data


def _tile_codegen(mode: str, rows: int) -> Any:
    """``mode``: ``"packed"`` (A at ``6 k + r``, B at ``16 k``), ``"indirect_b"`` (B at
    ``offs[k]``) or ``"indirect_a"`` (A at ``offs[k] + r a_step``); the tile has ``rows``
    rows (`MR` at most; A keeps its stride of `MR` either way)."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        a, a_off, b, b_off, offs, kc, c, c_off, ldc, mr, accumulate, a_step = args
        aty, _, bty, _, oty, _, cty = signature.args[:7]
        ap = builder.gep(_data(context, builder, aty, a), [a_off])
        bp = builder.gep(_data(context, builder, bty, b), [b_off])
        cp = builder.gep(_data(context, builder, cty, c), [c_off])
        op = _data(context, builder, oty, offs) if mode != "packed" else None
        fma = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(_V8, [_V8, _V8, _V8]), "llvm.fma.v8f32"
        )
        fn = builder.function
        pre = builder.block
        head = fn.append_basic_block("tile.head")
        body = fn.append_basic_block("tile.body")
        done = fn.append_basic_block("tile.done")
        zero = ir.Constant(_V8, [0.0] * 8)
        builder.branch(head)

        builder.position_at_end(head)
        k = builder.phi(_I64, "k")
        k.add_incoming(ir.Constant(_I64, 0), pre)
        accs = []
        for _ in range(rows * _NV):
            p = builder.phi(_V8)
            p.add_incoming(zero, pre)
            accs.append(p)
        builder.cbranch(builder.icmp_signed("<", k, kc), body, done)

        builder.position_at_end(body)
        if mode == "indirect_b":
            row = builder.load(builder.gep(op, [k]))
        else:
            row = builder.mul(k, ir.Constant(_I64, NR))
        bvec = []
        for v in range(_NV):
            q = builder.gep(bp, [builder.add(row, ir.Constant(_I64, 8 * v))])
            bvec.append(builder.load(builder.bitcast(q, _V8.as_pointer()), align=4))
        if mode == "indirect_a":
            a_row = builder.load(builder.gep(op, [k]))
        else:
            a_row = builder.mul(k, ir.Constant(_I64, MR))
        mask = ir.Constant(ir.VectorType(_I32, 8), [0] * 8)
        new = []
        for r in range(rows):
            if mode == "indirect_a":
                at = builder.add(a_row, builder.mul(a_step, ir.Constant(_I64, r)))
            else:
                at = builder.add(a_row, ir.Constant(_I64, r))
            s = builder.load(builder.gep(ap, [at]))
            sv = builder.insert_element(ir.Constant(_V8, ir.Undefined), s, ir.Constant(_I32, 0))
            sv = builder.shuffle_vector(sv, ir.Constant(_V8, ir.Undefined), mask)
            for v in range(_NV):
                new.append(builder.call(fma, [sv, bvec[v], accs[r * _NV + v]]))
        k.add_incoming(builder.add(k, ir.Constant(_I64, 1)), builder.block)
        for p, n in zip(accs, new, strict=True):
            p.add_incoming(n, builder.block)
        builder.branch(head)

        builder.position_at_end(done)
        for r in range(rows):
            with builder.if_then(builder.icmp_signed("<", ir.Constant(_I64, r), mr)):
                row_p = builder.gep(cp, [builder.mul(ldc, ir.Constant(_I64, r))])
                for v in range(_NV):
                    q = builder.bitcast(
                        builder.gep(row_p, [ir.Constant(_I64, 8 * v)]), _V8.as_pointer()
                    )
                    value = accs[r * _NV + v]
                    with builder.if_else(accumulate) as (add, store):
                        with add:
                            old = builder.load(q, align=4)
                            builder.store(builder.fadd(old, value), q, align=4)
                        with store:
                            builder.store(value, q, align=4)
        return context.get_dummy_value()

    return codegen


def _tile_typer(mode: str, rows: int = MR) -> Any:
    def typer(
        typingctx: Any,
        a: Any,
        a_off: Any,
        b: Any,
        b_off: Any,
        offs: Any,
        kc: Any,
        c: Any,
        c_off: Any,
        ldc: Any,
        mr: Any,
        accumulate: Any,
        a_step: Any,
    ) -> Any:
        for arr in (a, b, c):
            if not isinstance(arr, types.Array) or arr.dtype != types.float32:
                return None
        indirect = mode != "packed"
        if indirect and (not isinstance(offs, types.Array) or offs.dtype != types.int64):
            return None
        sig = types.void(
            a,
            types.int64,
            b,
            types.int64,
            offs,
            types.int64,
            c,
            types.int64,
            types.int64,
            types.int64,
            types.boolean,
            types.int64,
        )
        return sig, _tile_codegen(mode, rows)

    typer.__name__ = f"tile_{rows}x16_{mode}"
    return typer


tile_6x16: Any = intrinsic(_tile_typer("packed"))
"""``tile_6x16(a, a_off, b, b_off, _, kc, c, c_off, ldc, mr, accumulate, _)``: rows
``r < mr`` of ``C[r, 0:16]`` at ``c[c_off + r ldc]`` get (``accumulate``: plus) the sum over
``k < kc`` of ``a[a_off + 6 k + r] * b[b_off + 16 k : ... + 16]``."""
tile_1x16: Any = intrinsic(_tile_typer("packed", 1))
tile_2x16: Any = intrinsic(_tile_typer("packed", 2))
tile_3x16: Any = intrinsic(_tile_typer("packed", 3))
tile_4x16: Any = intrinsic(_tile_typer("packed", 4))
tile_5x16: Any = intrinsic(_tile_typer("packed", 5))
"""`tile_6x16` computing only its first 1 to 5 rows (``mr`` must not exceed them): a
panel of fewer than six rows of A (few rows in all, or the last panel) costs the FMAs of
its own rows, not of six."""
tile_6x16_indirect: Any = intrinsic(_tile_typer("indirect_b"))
"""The same with step k of B at ``b[b_off + offs[k] : ... + 16]``."""
tile_6x16_gather_a: Any = intrinsic(_tile_typer("indirect_a"))
"""The same with step k of A at ``a[a_off + offs[k] + r a_step]`` (row r of the tile is
output pixel r, ``a_step`` apart in the input: the stride)."""


# -------------------------------------------------------------------------------- packing


def pack_b16(w: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Weights ``w: f32[K, N]`` as panels of 16 columns ``[ceil(N / 16), K, 16]``, zero
    padded, 64-byte aligned.

    >>> import numpy as np
    >>> bp = pack_b16(np.arange(6, dtype=np.float32).reshape(2, 3))
    >>> bp.shape, bp[0, 1, :4].tolist()
    ((1, 2, 16), [3.0, 4.0, 5.0, 0.0])
    """
    k, n = w.shape
    nb = -(-n // NR)
    count = nb * k * NR
    raw = np.empty(count * 4 + 64, np.uint8)
    start = (-raw.ctypes.data) % 64
    bp: np.ndarray[Any, Any] = raw[start : start + count * 4].view(np.float32).reshape(nb, k, NR)
    full = n // NR  # whole panels straight from w, without a padded copy of all of it
    bp[:full] = w[:, : full * NR].reshape(k, full, NR).transpose(1, 0, 2)
    if full < nb:
        bp[full:] = 0.0
        bp[full, :, : n - full * NR] = w[:, full * NR :]
    return bp


@kernel
def pack_a6(x: Any, ap: Any) -> None:
    """Rows of ``x: f32[M, K]`` into ``ap`` as panels of six: ``ap[(ib K + k) 6 + r] =
    x[6 ib + r, k]``, zeros past M (``ap`` holds at least ``ceil(M / 6) 6 K`` floats)."""
    m, k = x.shape
    for ib in range(-(-m // MR)):
        base = ib * MR * k
        for r in range(MR):
            i = ib * MR + r
            if i < m:
                xr = x[i]
                for kk in range(k):
                    ap[base + kk * MR + r] = xr[kk]
            else:
                for kk in range(k):
                    ap[base + kk * MR + r] = 0.0


# ------------------------------------------------------------------------------------ GEMM


KC: Final = 256
"""K is split into blocks of this many steps (with more than ``1.5 KC``): the B panel block
(``KC x 16`` floats, 16 KiB) stays in L1 while every row panel of A passes through it."""


@kernel
def _tile_rows(
    ap: Any,
    a_off: int,
    bp: Any,
    b_off: int,
    kc: int,
    c: Any,
    c_off: int,
    ldc: int,
    mr: int,
    accumulate: bool,
) -> None:
    """The packed tile with just ``mr`` rows of FMAs (`tile_6x16` when ``mr >= 6``)."""
    if mr >= MR:
        tile_6x16(ap, a_off, bp, b_off, ap, kc, c, c_off, ldc, mr, accumulate, 1)
    elif mr == 5:
        tile_5x16(ap, a_off, bp, b_off, ap, kc, c, c_off, ldc, mr, accumulate, 1)
    elif mr == 4:
        tile_4x16(ap, a_off, bp, b_off, ap, kc, c, c_off, ldc, mr, accumulate, 1)
    elif mr == 3:
        tile_3x16(ap, a_off, bp, b_off, ap, kc, c, c_off, ldc, mr, accumulate, 1)
    elif mr == 2:
        tile_2x16(ap, a_off, bp, b_off, ap, kc, c, c_off, ldc, mr, accumulate, 1)
    else:
        tile_1x16(ap, a_off, bp, b_off, ap, kc, c, c_off, ldc, mr, accumulate, 1)


@kernel
def _panel(ap: Any, bp: Any, bias: Any, out: Any, act: int, jb: int) -> None:
    """Columns ``16 jb : 16 jb + 16`` of ``out = act(x @ w + bias)`` (every row)."""
    m, n = out.shape
    k = bp.shape[1]
    j0 = jb * NR
    j1 = min(j0 + NR, n)
    panels = -(-m // MR)
    if j1 - j0 < NR:  # the last, partial panel: whole K at once, through a scratch tile
        tile = np.empty((MR, NR), np.float32)
        for ib in range(panels):
            i0 = ib * MR
            mr = min(MR, m - i0)
            _tile_rows(ap, ib * MR * k, bp, jb * k * NR, k, tile, 0, NR, mr, False)
            for r in range(mr):
                for j in range(j1 - j0):
                    out[i0 + r, j0 + j] = tile[r, j]
            act_rows_inplace(out[i0 : i0 + mr], bias, act, j0, j1)
        return
    kc = k if k <= KC + KC // 2 else KC
    for k0 in range(0, k, kc):
        steps = min(kc, k - k0)
        for ib in range(panels):
            i0 = ib * MR
            mr = min(MR, m - i0)
            a_off = ib * MR * k + k0 * MR
            b_off = jb * k * NR + k0 * NR
            _tile_rows(ap, a_off, bp, b_off, steps, out, i0 * n + j0, n, mr, k0 > 0)
    for ib in range(panels):
        i0 = ib * MR
        act_rows_inplace(out[i0 : i0 + min(MR, m - i0)], bias, act, j0, j1)


@kernel
def gemm_serial(x: Any, ap: Any, bp: Any, bias: Any, out: Any, act: int) -> None:
    """``out = act(x @ w + bias)`` with ``bp = pack_b16(w)``; ``ap`` is scratch for
    `pack_a6`; ``bias`` has at least N entries."""
    pack_a6(x, ap)
    for jb in range(bp.shape[0]):
        _panel(ap, bp, bias, out, act, jb)


@parallel_kernel
def gemm_parallel(x: Any, ap: Any, bp: Any, bias: Any, out: Any, act: int) -> None:
    """`gemm_serial` with the column panels spread over numba's threads."""
    pack_a6(x, ap)
    for jb in prange(bp.shape[0]):
        _panel(ap, bp, bias, out, act, jb)


# ------------------------------------------------------------------- 3x3 convolution


def pack_conv_a6(w: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """A 3x3 convolution weight ``w: f32[Co, Ci, 3, 3]`` as panels of six output channels,
    ``a[((cb K) + k) 6 + r] = w[6 cb + r, ci, ky, kx]`` with ``k = 9 ci + 3 ky + kx``,
    ``K = 9 Ci`` (zeros past Co).

    >>> import numpy as np
    >>> a = pack_conv_a6(np.arange(18, dtype=np.float32).reshape(2, 1, 3, 3))
    >>> a.shape, a[:4].tolist()
    ((54,), [0.0, 9.0, 0.0, 0.0])
    """
    co, ci = w.shape[:2]
    k = 9 * ci
    panels = -(-co // MR)
    padded = np.zeros((panels * MR, k), np.float32)
    padded[:co] = w.reshape(co, k)
    out: np.ndarray[Any, Any] = np.ascontiguousarray(
        padded.reshape(panels, MR, k).transpose(0, 2, 1)
    ).reshape(-1)
    return out


def phase_shape(batch: int, c_in: int, h: int, w: int, stride: int) -> tuple[int, int]:
    """``(floats, row width)`` of the zero-bordered, column-phase-split copy of the input
    that `conv3x3_serial` reads (16 floats of slack at the end)."""
    wp = -(-(w + 2) // stride)
    return stride * batch * c_in * (h + 2) * wp + NR, wp


@kernel
def _fill_phases(x: Any, xp: Any, stride: int, wp: int, b: int, c: int) -> None:
    """Plane ``(b, c)`` of ``x`` with a zero border of 1 into ``xp``: padded column ``col``
    goes to phase ``col % stride`` at ``col // stride`` (so that the taps of 16 neighbouring
    output pixels are 16 consecutive floats whatever the stride)."""
    c_in, h, w = x.shape[1], x.shape[2], x.shape[3]
    hp = h + 2
    phase = x.shape[0] * c_in * hp * wp
    plane = (b * c_in + c) * hp * wp
    for p in range(stride):
        # padded column j * stride + p holds x column j * stride + p - 1 for j in [lo, hi)
        lo = 1 if p == 0 else 0
        hi = min(wp, (w - p) // stride + 1)
        for row in range(hp):
            dst = xp[p * phase + plane + row * wp : p * phase + plane + (row + 1) * wp]
            if row == 0 or row == hp - 1:
                for j in range(wp):
                    dst[j] = 0.0
                continue
            src = x[b, c, row - 1]
            for j in range(lo):
                dst[j] = 0.0
            if stride == 1:
                inner = dst[lo:hi]
                part = src[lo - 1 : hi - 1]
                for j in range(inner.size):
                    inner[j] = part[j]
            else:
                for j in range(lo, hi):
                    dst[j] = src[j * stride + p - 1]
            for j in range(max(hi, lo), wp):
                dst[j] = 0.0


@kernel
def _conv_offsets(c_in: int, h: int, wp: int, stride: int, phase: int, offs: Any) -> None:
    hp = h + 2
    for ci in range(c_in):
        for ky in range(3):
            for kx in range(3):
                k = (ci * 3 + ky) * 3 + kx
                offs[k] = (kx % stride) * phase + (ci * hp + ky) * wp + kx // stride


@kernel
def _conv_row(
    xp: Any, offs: Any, aw: Any, bias: Any, out: Any, stride: int, wp: int, act: int, t: int
) -> None:
    """Output row ``t`` (``b = t // Ho``, ``y = t % Ho``), every channel and pixel."""
    batch, c_out, ho, wo = out.shape
    k = offs.size
    c_in = k // 9
    hp = (xp.size - NR) // (stride * batch * c_in * wp)
    b = t // ho
    y = t % ho
    base_row = (b * c_in * hp + y * stride) * wp
    flat = out.reshape(batch * c_out * ho * wo)
    tile = np.empty((MR, NR), np.float32)
    # Pixel tiles outside, channel panels inside: the input taps of a tile (9 C_in runs of
    # 16 floats) stay in L1 while every panel of weights passes over them.
    for x0 in range(0, wo, NR):
        for cb in range(-(-c_out // MR)):
            co0 = cb * MR
            mr = min(MR, c_out - co0)
            a_off = cb * k * MR
            c_off = ((b * c_out + co0) * ho + y) * wo + x0
            if x0 + NR <= wo:
                tile_6x16_indirect(
                    aw, a_off, xp, base_row + x0, offs, k, flat, c_off, ho * wo, mr, False, 1
                )
            else:
                tile_6x16_indirect(aw, a_off, xp, base_row + x0, offs, k, tile, 0, NR, mr, False, 1)
                for r in range(mr):
                    o = flat[c_off + r * ho * wo : c_off + r * ho * wo + (wo - x0)]
                    for j in range(wo - x0):
                        o[j] = tile[r, j]
    # Bias and activation once per channel over the finished row (one vector loop of wo
    # floats, not one call per tile row of 16).
    for co in range(c_out):
        o0 = ((b * c_out + co) * ho + y) * wo
        act_vec_inplace(flat[o0 : o0 + wo], bias[co], act)


@kernel
def conv3x3_serial(x: Any, xp: Any, aw: Any, bias: Any, out: Any, stride: int, act: int) -> None:
    """``out = act(conv3x3(x, w, padding=1, stride) + bias)`` in NCHW, every tile on the
    micro-kernel; ``aw = pack_conv_a6(w)``, ``xp`` scratch of `phase_shape` floats."""
    batch, c_in, h, w = x.shape
    wp = -(-(w + 2) // stride)
    for t in range(batch * c_in):
        _fill_phases(x, xp, stride, wp, t // c_in, t % c_in)
    offs = np.empty(9 * c_in, np.int64)
    _conv_offsets(c_in, h, wp, stride, batch * c_in * (h + 2) * wp, offs)
    for t in range(batch * out.shape[2]):
        _conv_row(xp, offs, aw, bias, out, stride, wp, act, t)


@parallel_kernel
def conv3x3_parallel(x: Any, xp: Any, aw: Any, bias: Any, out: Any, stride: int, act: int) -> None:
    """`conv3x3_serial` with planes and output rows spread over numba's threads."""
    batch, c_in, h, w = x.shape
    wp = -(-(w + 2) // stride)
    for t in prange(batch * c_in):
        _fill_phases(x, xp, stride, wp, t // c_in, t % c_in)
    offs = np.empty(9 * c_in, np.int64)
    _conv_offsets(c_in, h, wp, stride, batch * c_in * (h + 2) * wp, offs)
    for t in prange(batch * out.shape[2]):
        _conv_row(xp, offs, aw, bias, out, stride, wp, act, t)


# ---------------------------------------------- 3x3 convolution, pixels as tile rows


def pack_conv_b16(w: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """A 3x3 convolution weight ``w: f32[Co, Ci, 3, 3]`` as `pack_b16` panels of 16 output
    channels over ``K = 9 Ci`` steps ``k = 9 ci + 3 ky + kx``: ``[ceil(Co / 16), K, 16]``.

    >>> import numpy as np
    >>> pack_conv_b16(np.ones((20, 2, 3, 3), np.float32)).shape
    (2, 18, 16)
    """
    co, ci = w.shape[:2]
    return pack_b16(np.ascontiguousarray(w.reshape(co, 9 * ci).T))


def padded_size(batch: int, c_in: int, h: int, w: int) -> int:
    """Floats of the zero-bordered copy `conv3x3_px_serial` reads, with the slack that the
    last, partial tile of pixels reads past the end."""
    return batch * c_in * (h + 2) * (w + 2) + 4 * MR + 16


@kernel
def _pad_flat(x: Any, xp: Any, b: int, c: int) -> None:
    """Plane ``(b, c)`` of ``x`` with a zero border of 1 into ``xp`` ([B, C, H+2, W+2] flat)."""
    c_in, h, w = x.shape[1], x.shape[2], x.shape[3]
    wp = w + 2
    base = (b * c_in + c) * (h + 2) * wp
    for j in range(wp):
        xp[base + j] = 0.0
        xp[base + (h + 1) * wp + j] = 0.0
    for y in range(h):
        row = xp[base + (y + 1) * wp : base + (y + 2) * wp]
        src = x[b, c, y]
        row[0] = 0.0
        row[w + 1] = 0.0
        inner = row[1 : w + 1]
        for i in range(w):
            inner[i] = src[i]


@kernel
def _px_row(
    xp: Any, offs: Any, bp: Any, bias: Any, out: Any, stride: int, act: int, t: int, hp: int
) -> None:
    """Output row ``t`` (``b = t // Ho``, ``y = t % Ho``): tiles of 6 pixels (the rows of
    the tile, gathered from the input at ``offs[k] + r stride``) by 16 output channels (the
    packed weights), bias and activation on the way out to NCHW."""
    batch, c_out, ho, wo = out.shape
    k = offs.size
    c_in = k // 9
    wp = offs[3] - offs[0]  # tap (ci 0, ky 1, kx 0) is one padded row after (0, 0, 0)
    b = t // ho
    y = t % ho
    base = (b * c_in * hp + y * stride) * wp
    plane = ho * wo
    flat = out.reshape(batch * c_out * plane)
    tile = np.empty((MR, NR), np.float32)
    for x0 in range(0, wo, MR):
        mr = min(MR, wo - x0)
        a_off = base + x0 * stride
        for cb in range(bp.shape[0]):
            co0 = cb * NR
            nc = min(NR, c_out - co0)
            tile_6x16_gather_a(xp, a_off, bp, cb * k * NR, offs, k, tile, 0, NR, mr, False, stride)
            o0 = ((b * c_out + co0) * ho + y) * wo + x0
            for j in range(nc):
                dst = flat[o0 + j * plane : o0 + j * plane + mr]
                for r in range(mr):
                    dst[r] = tile[r, j]
    # Bias and activation once per channel over the finished row: a vector loop of wo
    # floats instead of a branch per element inside the transposing copy above.
    for co in range(c_out):
        o0 = ((b * c_out + co) * ho + y) * wo
        act_vec_inplace(flat[o0 : o0 + wo], bias[co], act)


@kernel
def _px_offsets(c_in: int, h: int, w: int, offs: Any) -> None:
    wp = w + 2
    hp = h + 2
    for ci in range(c_in):
        for ky in range(3):
            for kx in range(3):
                offs[(ci * 3 + ky) * 3 + kx] = (ci * hp + ky) * wp + kx


@kernel
def conv3x3_px_serial(x: Any, xp: Any, bp: Any, bias: Any, out: Any, stride: int, act: int) -> None:
    """``out = act(conv3x3(x, w, padding=1, stride) + bias)`` in NCHW with ``bp =
    pack_conv_b16(w)``, ``bias`` of at least ``16 ceil(Co / 16)`` entries; ``xp`` scratch of
    `padded_size` floats. Any stride: the pixels of a tile are gathered, not loaded as a
    vector."""
    batch, c_in, h, w = x.shape
    for t in range(batch * c_in):
        _pad_flat(x, xp, t // c_in, t % c_in)
    offs = np.empty(9 * c_in, np.int64)
    _px_offsets(c_in, h, w, offs)
    for t in range(batch * out.shape[2]):
        _px_row(xp, offs, bp, bias, out, stride, act, t, h + 2)


@parallel_kernel
def conv3x3_px_parallel(
    x: Any, xp: Any, bp: Any, bias: Any, out: Any, stride: int, act: int
) -> None:
    """`conv3x3_px_serial` with planes and output rows spread over numba's threads."""
    batch, c_in, h, w = x.shape
    for t in prange(batch * c_in):
        _pad_flat(x, xp, t // c_in, t % c_in)
    offs = np.empty(9 * c_in, np.int64)
    _px_offsets(c_in, h, w, offs)
    for t in prange(batch * out.shape[2]):
        _px_row(xp, offs, bp, bias, out, stride, act, t, h + 2)


__all__ = [
    "MR",
    "NR",
    "conv3x3_parallel",
    "conv3x3_px_parallel",
    "conv3x3_px_serial",
    "conv3x3_serial",
    "gemm_parallel",
    "gemm_serial",
    "pack_a6",
    "pack_b16",
    "pack_conv_a6",
    "pack_conv_b16",
    "padded_size",
    "phase_shape",
    "tile_6x16",
    "tile_6x16_gather_a",
    "tile_6x16_indirect",
]
