"""Convolutions and pooling, with the blocked channel layout kept between convolutions.

`lower_conv` takes ``conv2d`` with constant weights, then the adds, subtractions, products
and divisions by constants per channel that follow (a bias, a batch norm written out: folded
into the weights and the bias), the activation the following elementwise ops compute (any
spelling, as for dense layers) and an add of a same-shaped tensor (its residual): one
kernel with the weights packed once. When every reader of a convolution's result is another
convolution or a global average pool, the result stays in the blocked layout ``[n,
ceil(c/16), h, w, 16]`` (NCHW16c), which the next convolution reads as it is; the first
convolution of such a chain reorders its input once. A reader that needs NCHW gets a
reorder when it asks for the value (`RegionLowering.tensor`). `lower_global_pool` takes
``mean`` over the two spatial axes (either layout); `lower_pool` takes ``max_pool2d`` and
``avg_pool2d``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from shapevm import native
from shapevm.jit.backend import affine
from shapevm.jit.backend import nodes as N
from shapevm.jit.backend.nodes import Kernel
from shapevm.jit.graph import Op
from shapevm.runtime.scheduler import native_enabled

F32 = np.dtype(np.float32)
CB = 16  # channels per block of the blocked layout


def _blocks(c: int) -> int:
    return (c + CB - 1) // CB


def blocked_shape(shape: tuple[Any, ...]) -> tuple[Any, ...]:
    n, c, h, w = shape
    return (n, _blocks(int(c)), h, w, CB)


def to_blocked(low: Any, vid: int, pcs: tuple[int, ...]) -> int:
    """The blocked tensor of value ``vid`` (reordered once, then remembered)."""
    found = low.blocked.get(vid)
    if found is not None:
        return int(found)
    src = low.contiguous(low.tensor(vid), pcs)
    shape = low.graph.value(vid).shape
    out = low.new("temp", F32, blocked_shape(shape))
    low.emit(
        Kernel(
            N.OP_EXTERNAL,
            [src],
            [out],
            obj=native.reorder_kernel(True, int(shape[1])),
            pcs=pcs,
            label="to blocked",
        )
    )
    low.blocked[vid] = out
    return int(out)


def reorder_from_blocked(low: Any, vid: int) -> int:
    """The NCHW tensor of a value computed in the blocked layout (a reorder kernel)."""
    v = low.graph.value(vid)
    out = low.result(vid)
    low.emit(
        Kernel(
            N.OP_EXTERNAL,
            [low.blocked[vid]],
            [out],
            obj=native.reorder_kernel(False, int(v.shape[1])),
            label="from blocked",
        )
    )
    return int(out)


def _blocked_reader(low: Any, op: Op, vid: int, depth: int = 4) -> bool:
    """Whether ``op`` reads ``vid`` in the blocked layout when lowered: as a convolution's
    input, a global average pool's, or as the residual another convolution adds (a ResNet
    block's shortcut) when that sum stays blocked too (looked at ``depth`` blocks ahead)."""
    info = op.info
    if info is None:
        return False
    if info.name == "conv2d":
        return (
            op.ins[0] == vid
            and low.const_array(op.ins[1]) is not None
            and native_enabled("conv2d", "native_conv")
        )
    if info.name == "add" and len(op.ins) == 2 and vid in op.ins:
        from shapevm.jit.backend.lower import _shape_equal

        other = op.ins[1] if op.ins[0] == vid else op.ins[0]
        g = low.graph
        if (
            other == vid
            or g.value(other).dtype != F32
            or not _shape_equal(g.value(other).shape, g.value(vid).shape)
            or not _from_conv(low, other)
        ):
            return False
        if depth <= 0:
            return True
        out = op.outs[0]  # through the activation of the sum, to the block's result
        for _ in range(8):
            user = low.sole_user(out)
            if user is None or user.info is None or not user.fusible or len(user.outs) != 1:
                break
            if [i for i in user.ins if low.const_array(i) is None] != [out]:
                break
            out = user.outs[0]
        return _stays_blocked(low, out, depth - 1)
    return _global_mean(low, op) and op.ins[0] == vid


def _global_mean(low: Any, op: Op) -> bool:
    info = op.info
    if info is None or info.name != "mean" or len(op.ins) != 1:
        return False
    x = low.graph.value(op.ins[0])
    if len(x.shape) != 4 or x.dtype != F32:
        return False
    axis = op.attrs.get("axis")
    return axis is not None and sorted(a % 4 for a in axis) == [2, 3]


def _from_conv(low: Any, vid: int, steps: int = 8) -> bool:
    """Whether ``vid`` is a convolution's result, possibly through elementwise ops of one
    tensor operand each (its bias, a batch norm written out), each read only by the next:
    what `lower_conv` takes before a residual add."""
    graph = low.graph
    for _ in range(steps):
        v = graph.value(vid)
        if v.kind != "temp" or v.producer < 0 or len(low.users(vid)) != 1:
            return False
        op = graph.ops[v.producer]
        if op.info is None or op.kind != "call":
            return False
        if op.info.name == "conv2d":
            return low.const_array(op.ins[1]) is not None
        tensors = [i for i in op.ins if low.const_array(i) is None]
        if len(tensors) != 1 or len(op.outs) != 1:
            return False
        vid = tensors[0]
    return False


def _stays_blocked(low: Any, vid: int, depth: int = 4) -> bool:
    """Whether a convolution's result ``vid`` is written in the blocked layout: every
    reader takes it so, and it does not leave the region."""
    readers = [low.graph.ops[p] for p in low.users(vid)]
    return (
        bool(readers)
        and vid not in low.graph.live_out
        and all(_blocked_reader(low, r, vid, depth) for r in readers)
    )


@dataclass
class _ConvMatch:
    """A convolution with what folds into its kernel: the ops it takes (``chain``), its
    weights and bias with the affine ops folded in, activation, residual and the value it
    ends with (``h``). The weights are packed when a kernel is made of them (`packed`), not
    while a pair is only considered."""

    op: Op
    chain: list[int]
    weights: np.ndarray[Any, Any]
    bias: np.ndarray[Any, Any] | None
    act: native.Activation
    h: int
    residual: int | None
    residual_first: bool
    written: tuple[Any, ...] | None  # the 3-D result of a 1-D convolution

    @functools.cached_property
    def packed(self) -> native.PackedConv:
        cout, attrs = int(self.weights.shape[0]), self.op.attrs
        return native.pack_conv2d(
            self.weights,
            None if self.bias is None else np.ascontiguousarray(self.bias.reshape(cout)),
            stride=tuple(attrs["stride"]),
            padding=tuple(attrs["padding"]),
            dilation=tuple(attrs["dilation"]),
            groups=int(attrs["groups"]),
        )


def _match_conv(low: Any, op: Op) -> _ConvMatch | None:
    from shapevm.jit.backend.lower import _residual_of, match_activation

    info = op.info
    if info is None or info.name != "conv2d" or not native_enabled("conv2d", "native_conv"):
        return None
    graph = low.graph
    x_v, w_v = op.ins[0], op.ins[1]
    b_v = op.ins[2] if len(op.ins) > 2 else None
    w = low.const_array(w_v)
    bias = None if b_v is None else low.const_array(b_v)
    x = graph.value(x_v)
    if w is None or w.dtype != F32 or x.dtype != F32 or len(x.shape) != 4:
        return None
    if b_v is not None and (bias is None or bias.dtype != F32):
        return None
    cout = int(w.shape[0])
    h = op.outs[0]
    chain = [op.pos]
    # per-channel affine ops after it (a bias, a batch norm written out) fold into the
    # weights and the bias (see `affine`)
    folded = affine.fold(low, h, cout, affine.channel_axis, w, 0, bias)
    h, w, bias = folded.h, folded.weights, folded.bias
    chain += folded.positions
    # a 1-D convolution (ONNX's Conv on [b, c, t], imported as a 2-D one on [b, c, 1, t]
    # between reshapes): what follows the reshape back to [b, c, t] (a batch norm, GELU, a
    # residual) fuses as it does after a 2-D one; the kernel writes the 3-D result through
    # a 4-D view of it
    written: tuple[Any, ...] | None = None
    squeeze = _squeeze_of(low, h)
    if squeeze is not None:
        written = tuple(graph.value(h).shape)
        chain.append(squeeze.pos)
        folded = affine.fold(low, squeeze.outs[0], cout, affine.channel_axis_1d, w, 0, bias)
        h, w, bias = folded.h, folded.weights, folded.bias
        chain += folded.positions
    act: native.Activation = "none"
    found = match_activation(low, h)
    if found is not None:
        act, positions, h = found
        chain += positions
    residual, residual_first = None, False
    user = low.sole_user(h)
    if user is not None and (r := _residual_of(low, user, h)) is not None:
        # the residual add, and the activation of the sum where the convolution has none
        # (a ResNet block's end: act(conv(x) + bias + shortcut))
        residual, h = r, user.outs[0]
        chain.append(user.pos)
        after = match_activation(low, h) if act == "none" else None
        if after is not None:
            act, positions, h = after
            chain += positions
            residual_first = True
    return _ConvMatch(op, chain, w, bias, act, h, residual, residual_first, written)


def _label(m: _ConvMatch) -> str:
    from shapevm.jit.backend.lower import act_label

    label = "conv" + ("+bias" if m.bias is not None else "")
    if m.residual_first:
        return label + "+residual" + act_label(m.act)
    return label + act_label(m.act) + ("+residual" if m.residual is not None else "")


def _layouts_label(in_blocked: bool, out_blocked: bool) -> str:
    return {(False, False): "", (True, True): " (blocked)", (False, True): " (to blocked)"}.get(
        (in_blocked, out_blocked), " (from blocked)"
    )


def _bands_read_rows(m: _ConvMatch) -> bool:
    """Whether every band of the convolution's output rows reads a row of its input (its
    padding top and bottom within its window), as the kernels by bands need."""
    top, bottom = m.op.attrs["padding"][:2]  # (top, bottom, left, right), checked when traced
    span = m.op.attrs["dilation"][0] * (m.weights.shape[2] - 1) + 1
    return bool(top < span and bottom < span)


def _downsampling_reader(low: Any, m: _ConvMatch) -> _ConvMatch | None:
    """The strided convolution that alone reads ``m``'s result, with nothing between them:
    the pair runs as one kernel by bands of the second one's rows, so that the first
    result (a CNN's largest tensor, at full resolution) is never written whole. A second
    convolution of stride 1 is left alone: each band would recompute ``kh - 1`` rows of the
    first result, and its Winograd path works on whole images."""
    if m.residual is not None or m.written is not None or not _bands_read_rows(m):
        return None
    user = low.sole_user(m.h)
    if user is None or user.info is None or user.info.name != "conv2d" or user.ins[0] != m.h:
        return None
    if user.attrs["stride"][0] < 2:  # the bands are of rows: their stride is the one that counts
        return None
    second = _match_conv(low, user)
    if second is None or second.residual is not None or second.written is not None:
        return None
    if not _bands_read_rows(second):
        return None
    return second


def _mean_reader(low: Any, m: _ConvMatch) -> Op | None:
    """The global average pool that alone reads ``m``'s result: the convolution then sums
    each band of its rows as it makes it, and its result is never written whole."""
    if (
        m.residual is not None
        or m.written is not None
        or not native_enabled("mean", "native_chain")
        or not _bands_read_rows(m)
    ):
        return None
    user: Op | None = low.sole_user(m.h)
    if user is None or not _global_mean(low, user) or user.ins[0] != m.h:
        return None
    return user


def lower_conv(low: Any, op: Op) -> bool:
    m = _match_conv(low, op)
    if m is None:
        return False
    graph = low.graph
    x_v = op.ins[0]
    in_blocked = x_v in low.blocked
    mean = _mean_reader(low, m)
    if mean is not None:
        chain = [*m.chain, mean.pos]
        pcs = tuple(sorted(graph.ops[p].pc for p in chain))
        xt = low.blocked[x_v] if in_blocked else low.contiguous(low.tensor(x_v), pcs)
        low.emit(
            Kernel(
                N.OP_EXTERNAL,
                [xt],
                [low.result(mean.outs[0])],
                obj=native.conv_mean_kernel(m.packed, m.act, in_blocked),
                pcs=pcs,
                label=f"{_label(m)} > global average pool (by bands)"
                + (" (blocked)" if in_blocked else ""),
            )
        )
        low.claim(*chain)
        low.patterns += ["conv", "pool"]
        return True
    second = _downsampling_reader(low, m)
    last = m if second is None else second
    # blocked when every reader takes it so; a residual then comes blocked too (else the
    # result is NCHW, and the next convolution reorders it as it reads it)
    out_blocked = (
        last.written is None
        and _stays_blocked(low, last.h)
        and (last.residual is None or last.residual in low.blocked)
    )
    chain = m.chain + ([] if second is None else second.chain)
    pcs = tuple(sorted(graph.ops[p].pc for p in chain))
    # the kernel reads and writes either layout: NCHW in and blocked out starts a chain of
    # blocked convolutions, blocked in and NCHW out ends one, with no reorder of their own
    xt = low.blocked[x_v] if in_blocked else low.contiguous(low.tensor(x_v), pcs)
    if out_blocked:
        ins = [xt] + ([low.blocked[last.residual]] if last.residual is not None else [])
        out = low.new("temp", F32, blocked_shape(graph.value(last.h).shape))
        low.blocked[last.h] = out
    else:
        ins = [xt]
        if last.residual is not None:
            ins.append(
                _as_written(low, low.contiguous(low.tensor(last.residual), pcs), last.written)
            )
        out = _as_written(low, low.result(last.h), last.written)
    if second is None:
        obj = native.conv_kernel(m.packed, m.act, in_blocked, out_blocked, m.residual_first)
        label = _label(m)
    else:
        obj = native.conv_pair_kernel(m.packed, m.act, second.packed, second.act, in_blocked,
                                      out_blocked)  # fmt: skip
        label = f"{_label(m)} > {_label(second)} (by bands)"
    low.emit(
        Kernel(
            N.OP_EXTERNAL,
            ins,
            [out],
            obj=obj,
            pcs=pcs,
            label=label + _layouts_label(in_blocked, out_blocked),
            inplace=((0, 1),) if last.residual is not None and last.written is None else (),
        )
    )
    low.claim(*chain)
    low.patterns.append("conv")
    return True


def _squeeze_of(low: Any, h: int) -> Op | None:
    """The reshape of a ``[b, c, 1, w]`` result ``h`` to ``[b, c, w]``, when it is the one
    reader of ``h``; else None."""
    from shapevm.jit.backend.lower import _shape_equal

    user = low.sole_user(h)
    if user is None or user.info is None or user.info.name != "reshape":
        return None
    shape, out = low.graph.value(h).shape, low.graph.value(user.outs[0]).shape
    if len(shape) != 4 or not isinstance(shape[2], int) or shape[2] != 1:
        return None
    return user if _shape_equal(out, (shape[0], shape[1], shape[3])) else None


def _as_written(low: Any, tid: int, shape: tuple[Any, ...] | None) -> int:
    """``tid`` (C-contiguous), or a view of it with the 4-D ``shape`` the kernel writes."""
    if shape is None:
        return tid
    view: int = low.new("view", F32, shape, base=tid, viewop=N.V_RESHAPE, contiguous=True)
    return view


def lower_global_pool(low: Any, op: Op) -> bool:
    if not _global_mean(low, op) or not native_enabled("mean", "native_chain"):
        return False
    x_v = op.ins[0]
    channels = (
        int(low.graph.value(x_v).shape[1])
        if isinstance(low.graph.value(x_v).shape[1], int)
        else None
    )
    if channels is None:
        return False
    blocked = x_v in low.blocked
    xt = low.blocked[x_v] if blocked else low.contiguous(low.tensor(x_v), (op.pc,))
    out = low.result(op.outs[0])
    low.emit(
        Kernel(
            N.OP_EXTERNAL,
            [xt],
            [out],
            obj=native.global_pool_kernel(blocked, channels),
            pcs=(op.pc,),
            label="global average pool" + (" (blocked)" if blocked else ""),
        )
    )
    low.claim(op.pos)
    low.patterns.append("pool")
    return True


def lower_pool(low: Any, op: Op) -> bool:
    info = op.info
    if info is None or info.name not in ("max_pool2d", "avg_pool2d"):
        return False
    if not native_enabled(info.name, "native_pool"):
        return False
    x = low.graph.value(op.ins[0])
    if x.dtype != F32 or len(x.shape) != 4:
        return False
    attrs = op.attrs
    kernel = tuple(attrs["kernel"])
    stride = tuple(attrs.get("stride") or kernel)
    padding = tuple(attrs["padding"])
    if info.name == "max_pool2d":
        kind = "max"
    else:
        kind = "avg" if attrs.get("count_include_pad", True) else "avg_exclude_pad"
    try:
        run = native.pool_kernel(kind, kernel, stride, padding)
    except native.NativeKernelError:
        return False
    xt = low.contiguous(low.tensor(op.ins[0]), (op.pc,))
    out = low.result(op.outs[0])
    low.external(op, [xt], out, run)
    low.patterns.append("pool")
    return True
