"""Row operations recognised by what they compute, not by how they are spelled.

A layer norm, an RMS norm, a softmax or a log-softmax over the last axis, written out with
`shapevm.numpy` in any of the usual ways (``(x - mean) / sqrt(var + eps)``, ``x *
rsqrt(...)``, ``exp(x - max) / sum``, ``x - logsumexp``...), is a subgraph of elementwise
ops and last-axis reductions with one tensor input ``x``, constant vectors of the row's
length and scalars, and one result of ``x``'s shape. `match_row` finds such a subgraph
starting at an op, evaluates it in float64 on probe rows (small values, where ``eps``
matters, and large ones) and compares it with each row op for the scalars and vectors the
subgraph holds. A match becomes one row-op kernel; anything else stays for the fused
chains (still native, a few passes instead of one).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations
from typing import Any

import numpy as np

from shapevm.jit.backend import probe
from shapevm.jit.graph import Op
from shapevm.ops.shape_rules import transpose_perm

ROW_REDUCTIONS = ("sum", "max", "min", "mean")


@dataclass
class RowMatch:
    kind: str  # layer_norm | rms_norm | softmax | log_softmax
    x: int  # value id of the input
    out: int  # value id of the result
    positions: list[int]
    eps: float = 0.0
    scale: float = 1.0
    gamma: np.ndarray[Any, Any] | None = None
    beta: np.ndarray[Any, Any] | None = None


def _last_axis_reduction(low: Any, op: Op) -> bool:
    info = op.info
    if op.kind != "call" or info is None or info.name not in ROW_REDUCTIONS:
        return False
    ndim = len(low.graph.value(op.ins[0]).shape)
    axis = op.attrs.get("axis")
    axes = tuple(range(ndim)) if axis is None else tuple(a % ndim for a in axis)
    return ndim >= 1 and axes == (ndim - 1,) and bool(op.attrs.get("keepdims"))


def match_row(low: Any, start: Op) -> RowMatch | None:
    """The row op that the ops from ``start`` compute, if any (see the module docstring)."""
    from shapevm.jit.backend.lower import _shape_equal

    graph = low.graph
    if start.pos in low.claimed or not (_last_axis_reduction(low, start) or start.fusible):
        return None
    tensors = list(dict.fromkeys(v for v in start.ins if low.const_array(v) is None))
    if len(tensors) != 1:
        return None
    x = tensors[0]
    xv = graph.value(x)
    if xv.dtype != np.float32 or len(xv.shape) < 1:
        return None
    n = xv.shape[-1]
    members: list[Op] = []
    produced: set[int] = set()
    vectors: dict[int, np.ndarray[Any, Any]] = {}
    for op in graph.ops[start.pos :]:
        if op.pos in low.claimed or op.kind != "call":
            continue
        if not (op.fusible or _last_axis_reduction(low, op)):
            continue
        ok = True
        uses_inside = False
        for v in op.ins:
            if v == x or v in produced:
                uses_inside = True
                continue
            array = low.const_array(v)
            if array is not None and array.dtype == np.float32 and array.size == _int(n):
                vectors[v] = array.reshape(-1)
                continue
            if array is not None and array.size == 1:
                continue
            ok = False
        if not ok or not uses_inside or graph.value(op.outs[0]).dtype != np.float32:
            continue
        members.append(op)
        produced.add(op.outs[0])
        if len(members) > 40:
            break
    if not members or members[0] is not start:
        return None
    # the longest chain that is a row op: the last members first, the first match is it
    for end in reversed(members):
        out = end.outs[0]
        if not _shape_equal(graph.value(out).shape, xv.shape):
            continue
        chosen = set(probe.ancestors(graph, (m.pos for m in members), end.pos))
        if start.pos not in chosen:
            continue
        inside = {graph.ops[p].outs[0] for p in chosen}
        if any(
            v in graph.live_out or any(u not in chosen for u in low.users(v))
            for v in inside - {out}
        ):
            continue
        found = _probe(low, x, chosen, vectors, n, len(xv.shape))
        if found is not None:
            kind, eps, scale, gamma, beta = found
            return RowMatch(kind, x, out, sorted(chosen), eps, scale, gamma, beta)
    return None


def _int(d: Any) -> int:
    return d if isinstance(d, int) else -1


def _scalars(low: Any, chosen: set[int]) -> list[float]:
    out: list[float] = []
    for pos in chosen:
        for kind, val in low.literals(low.graph.ops[pos]):
            c = low.scalar(kind, val)
            if c is not None:
                out.append(c)
    return out


def _probe(
    low: Any, x: int, chosen: set[int], vectors: dict[int, Any], n: Any, ndim: int
) -> tuple[str, float, float, Any, Any] | None:
    with np.errstate(all="ignore"):
        return _probe_quiet(low, x, chosen, vectors, n, ndim)


def _probe_quiet(
    low: Any, x: int, chosen: set[int], vectors: dict[int, Any], n: Any, ndim: int
) -> tuple[str, float, float, Any, Any] | None:
    rows = _int(n) if _int(n) > 0 else 7
    shape = (1,) * (ndim - 2) + (3, rows) if ndim >= 2 else (rows,)
    small = probe.spread(shape, 0) * 0.003 + 0.002
    large = probe.spread(shape, 1) * 3.0
    with np.errstate(all="ignore"):
        try:
            got = [probe.evaluate(low, {x: p}, sorted(chosen)) for p in (small, large)]
        except Exception:  # an op that does not evaluate in float64: no row op
            return None
    scalars = sorted(set(_scalars(low, chosen)) | {0.0, 1.0})
    used = [vectors[v] for v in {v for p in chosen for v in low.graph.ops[p].ins} if v in vectors]
    kinds = _softmax_kinds(got)
    for scale in scalars if kinds else ():
        if scale == 0.0:
            continue
        for kind in kinds:
            if all(
                probe.close(g, _softmax(p * scale, kind == "log_softmax"))
                for g, p in zip(got, (small, large), strict=True)
            ):
                return kind, 0.0, scale, None, None
    affine = [(None, None)]
    affine += [(g, None) for g in used] + [(None, b) for b in used]
    affine += list(permutations(used, 2))
    for kind in ("layer_norm", "rms_norm"):
        for eps in scalars:
            if eps < 0 or eps > 1.0:
                continue
            base = [_normalize(p, kind, eps) for p in (small, large)]
            for gamma, beta in affine:
                pairs = zip(got, base, strict=True)
                if all(probe.close(g, _affine(b, gamma, beta)) for g, b in pairs):
                    return kind, eps, 1.0, gamma, beta
    return None


def _softmax_kinds(got: list[Any]) -> tuple[str, ...]:
    """The softmax kinds ``got`` can be, whatever the scale: a softmax's rows sum to 1, a
    log-softmax's exponentials do (a cheap test before the scales are tried)."""
    ones = [np.ones((*g.shape[:-1], 1)) for g in got]
    kinds = []
    for kind, rows in (("softmax", got), ("log_softmax", [np.exp(g) for g in got])):
        sums = [r.sum(axis=-1, keepdims=True) for r in rows]
        if all(probe.close(s, one) for s, one in zip(sums, ones, strict=True)):
            kinds.append(kind)
    return tuple(kinds)


def _softmax(x: Any, log: bool) -> Any:
    z = x - x.max(axis=-1, keepdims=True)
    if log:
        return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def _normalize(x: Any, kind: str, eps: float) -> Any:
    """A layer norm's or an RMS norm's rows before the affine step (float64)."""
    z = x - x.mean(axis=-1, keepdims=True) if kind == "layer_norm" else x
    return z / np.sqrt((z * z).mean(axis=-1, keepdims=True) + eps)


def _affine(y: Any, gamma: Any, beta: Any) -> Any:
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y


def lower_rowop(low: Any, op: Op) -> bool:
    """A row op found by `match_row`, as one kernel of the library's row operations."""
    from shapevm import native
    from shapevm.jit.backend import nodes as N
    from shapevm.jit.backend.nodes import Kernel
    from shapevm.runtime.scheduler import native_enabled

    make = native.rowop_kernel
    found = match_row(low, op)
    if found is None:
        return False
    reductions = {
        low.graph.ops[p].info.name
        for p in found.positions
        if _last_axis_reduction(low, low.graph.ops[p])
    }
    if not all(native_enabled(r, "native_rowop") for r in reductions):
        return False
    x = low.contiguous(low.tensor(found.x), (op.pc,))
    out = low.result(found.out)
    kernel = make(found.kind, eps=found.eps, scale=found.scale, gamma=found.gamma, beta=found.beta)
    pcs = tuple(sorted(low.graph.ops[p].pc for p in found.positions))
    low.emit(
        Kernel(N.OP_EXTERNAL, [x], [out], obj=kernel, pcs=pcs, label=found.kind, inplace=((0, 0),))
    )
    low.claim(*found.positions)
    low.patterns.append(found.kind)
    return True


_CAUSAL_FILL = -1e9  # where(keep, s, fill): a fill at most this excludes the key exactly


# The ops a mask made from indices may use: each is an integer-affine step (or a logical
# one) with constants of at most 1 in size (`_index_pattern`).
_INDEX_OPS = frozenset(
    ("add", "sub", "neg", "cast", "where", "equal", "not_equal", "less", "less_equal",
     "greater", "greater_equal", "logical_and", "logical_or", "logical_xor", "logical_not",
     "maximum", "minimum")
)  # fmt: skip


def _small(low: Any, kind: str, val: Any) -> bool:
    """Whether an operand is a constant of at most 1 in size (a literal, or a constant of one
    element, a boolean among them)."""
    if kind == "c" and isinstance(val, (bool, np.bool_)):
        return True  # tril of a boolean array zeroes with False
    number = low.scalar(kind, val)
    if number is None and kind == "v":
        array = low.const_array(val)
        if array is not None and array.size == 1 and array.dtype == np.bool_:
            return True
    return number is not None and abs(number) <= 1.0


def _index_pattern(low: Any, vid: int) -> list[int] | None:
    """The positions of the ops that compute ``vid`` from indices alone, in order: ``iota``,
    ``full`` of a value of at most 1, reshapes that add or drop axes of one element,
    broadcasts, and the integer-affine and logical elementwise ops of `_INDEX_OPS` with
    constants of at most 1 in size (``tril(ones)``, ONNX's ``Trilu`` and ``Range`` masks
    are such). Each element of such a value is then a fixed function of its indices, a
    combination of half-planes ``a i + b j + c <= 0``, whose offsets ``c`` are checked to
    be a few units at most (`_offsets_small`), so that what it is over a few dozen indices
    it is over all. A large constant would break that (a sliding window's ``j >= i - 4096``
    is a causal mask up to 4097 keys), and so is refused. None when any op is of another
    kind or reads anything else."""
    from shapevm.jit.backend.lower import _unit_axes_only

    graph = low.graph
    need: set[int] = set()
    todo = [vid]
    while todo:
        v = todo.pop()
        p = graph.value(v).producer
        if p < 0:
            return None
        op = graph.ops[p]
        if op.kind != "call" or op.info is None:
            return None
        name = op.info.name
        if name == "reshape":
            shape = graph.value(op.ins[0]).shape
            if _unit_axes_only(shape, graph.value(op.outs[0]).shape) is None:
                return None
        elif name == "full":
            if not _small(low, "c", op.attrs.get("value")) and op.attrs.get("value") is not True:
                return None
        elif name not in ("iota", "broadcast_to") and not (op.fusible and name in _INDEX_OPS):
            return None
        ins: list[int] = []
        for kind, val in low.literals(op):
            if kind == "v" and low.const_array(val) is None:
                ins.append(val)
            elif not _small(low, kind, val):
                return None
        if p not in need:
            need.add(p)
            todo.extend(ins)
    return sorted(need)


_MAX_OFFSET = 8  # the probes' sizes (23 to 37) are well past a half-plane this far out


def _offsets_small(low: Any, positions: list[int]) -> bool:
    """Whether every value of an index pattern (`_index_pattern`) is an affine function of
    the indices whose constant term is at most _MAX_OFFSET in size: each constant adds at
    most 1, but sums of sums could double it at every step."""
    graph = low.graph
    bound: dict[int, float] = {}
    for pos in positions:
        op = graph.ops[pos]
        name = op.info.name
        parts = [
            abs(float(val)) if kind == "c" else bound.get(val, 1.0)
            for kind, val in low.literals(op)
        ]
        if name == "iota":
            b = 0.0
        elif name == "full":
            b = abs(float(op.attrs.get("value", 1)))
        elif name in ("add", "sub"):
            b = sum(parts)
        elif name == "where":
            b = max(parts[1:])
        elif name in ("maximum", "minimum"):
            b = max(parts)
        elif name in ("neg", "cast", "reshape", "broadcast_to"):
            b = parts[0]
        else:  # comparisons and logical ops: 0 or 1
            b = 1.0
        if b > _MAX_OFFSET:
            return False
        bound[op.outs[0]] = b
    return True


def _concrete(shape: Any, env: dict[str, int]) -> tuple[int, ...]:
    return tuple(d if isinstance(d, int) else int(d.evaluate(env)) for d in shape)


def _causal_where(low: Any, op: Op, s: int) -> list[int] | None:
    """``where(keep, s, fill)`` (or ``where(drop, fill, s)``) over the scores ``s`` that lets
    query ``i`` see key ``j`` exactly when ``j <= i``, ``keep`` computed from indices alone
    (a decoder's causal mask: ``iota``, two reshapes, a comparison; see `_index_pattern`)
    and ``fill`` a constant of at most -1e9 (so the key is excluded exactly as the kernel's
    causal mode excludes it): the positions of ``op`` and of the mask's ops that only it
    reads; else None. What the mask is, is found by computing it at two sets of dimension
    values."""
    from shapevm.jit.backend.lower import _shape_equal

    graph = low.graph
    if op.info is None or op.info.name != "where" or op.ins.count(s) != 1:
        return None
    literals = low.literals(op)  # the fill may be a literal, not a value
    if len(literals) != 3 or literals[0][0] != "v" or literals[0][1] == s:
        return None
    keep = literals[1] == ("v", s)
    fill = low.scalar(*(literals[2] if keep else literals[1]))
    if fill is None or not fill <= _CAUSAL_FILL:
        return None
    cond = literals[0][1]
    scores = graph.value(s)
    out = graph.value(op.outs[0])
    if graph.value(cond).dtype != np.bool_ or out.dtype != np.float32:
        return None
    if not _shape_equal(out.shape, scores.shape) or len(scores.shape) < 2:
        return None
    positions = _index_pattern(low, cond)
    if not positions or any(p in low.claimed for p in positions):
        return None
    if not _offsets_small(low, positions):
        return None
    names: set[str] = set()
    for v in (s, *(graph.ops[p].outs[0] for p in positions)):
        for d in graph.value(v).shape:
            names |= set() if isinstance(d, int) else set(d.free_vars())
    for sizes in ((23, 29, 3, 4), (37, 31, 2, 5)):  # past the offsets' reach
        env = {name: sizes[i % 4] + i for i, name in enumerate(sorted(names))}
        try:
            with np.errstate(all="ignore"):
                mask = probe.evaluate(low, {}, positions, env)
            shape = _concrete(scores.shape, env)
            lower_left = np.tril(np.ones(shape[-2:], dtype=bool))
            got = np.broadcast_to(np.asarray(mask, dtype=bool), shape)
        except Exception:  # an op that does not evaluate here, a shape that does not fit
            return None
        if not np.array_equal(got, np.broadcast_to(lower_left if keep else ~lower_left, shape)):
            return None
    inside = {graph.ops[p].outs[0] for p in positions}
    owned = [
        p
        for p in positions
        if graph.ops[p].outs[0] not in graph.live_out
        and all(
            u == op.pos or graph.ops[u].outs[0] in inside for u in low.users(graph.ops[p].outs[0])
        )
    ]
    return [op.pos, *owned]


def _mask_of(low: Any, op: Op, s: int) -> int | None:
    """The mask ``op`` adds to the scores ``s`` (``s + m`` or ``m + s``): a float32 value
    other than ``s`` that broadcasts to them and spans their key axis, the sum keeping their
    shape; else None."""
    from shapevm.jit.backend.chains import _broadcasts
    from shapevm.jit.backend.lower import _equal, _shape_equal

    if op.info is None or op.info.name != "add" or len(op.ins) != 2 or op.ins.count(s) != 1:
        return None
    if any(kind != "v" for kind, _ in low.literals(op)):
        return None
    (m,) = [v for v in op.ins if v != s]
    graph = low.graph
    mask, scores = graph.value(m), graph.value(s)
    shape, big = tuple(mask.shape), tuple(scores.shape)
    if (
        mask.dtype != np.float32
        or graph.value(op.outs[0]).dtype != np.float32
        or not _shape_equal(graph.value(op.outs[0]).shape, big)
        or not 2 <= len(shape) <= len(big)
        or not _equal(shape[-1], big[-1])
        or not _broadcasts(shape, big)
    ):
        return None
    return m


def lower_attention(low: Any, op: Op) -> bool:
    """``softmax(q @ k^T * scale [+ mask]) @ v`` (the softmax written in any way `match_row`
    finds; the mask additive, float32, broadcasting to the scores with their key axis, or a
    causal mask applied with ``where``, see `_causal_where`) as one attention kernel: the
    scores are never materialized whole (nor, with a causal mask, computed above the
    diagonal)."""
    from shapevm import native
    from shapevm.jit.backend import nodes as N
    from shapevm.jit.backend.lower import Unsupported, _scale_of
    from shapevm.jit.backend.nodes import Kernel
    from shapevm.runtime.scheduler import native_enabled

    make = native.attention_kernel
    info = op.info
    if info is None or info.name != "matmul":
        return False
    if not (native_enabled("matmul", "native_matmul") and native_enabled("max", "native_rowop")):
        return False
    graph = low.graph
    q_v, kt_v = op.ins
    kt = graph.value(kt_v)
    if low.const_array(q_v) is not None or low.const_array(kt_v) is not None:
        return False
    producer = graph.ops[kt.producer] if kt.producer >= 0 else None
    nd = len(kt.shape)
    if (
        producer is None
        or producer.info is None
        or producer.info.name != "transpose"
        or nd < 2
        or len(low.users(kt_v)) != 1
    ):
        return False
    # k is k^T with its last two axes swapped back, a view (ONNX's Transpose(k, [0, 2, 3,
    # 1]) of k: [b, s, h, d] too, whose d has unit stride)
    if transpose_perm(producer.attrs, nd)[-2] != nd - 1:
        return False
    chain = [op.pos]
    s = op.outs[0]
    scale = 1.0
    user = low.sole_user(s)
    if user is not None and (alpha := _scale_of(low, user, s)) is not None:
        scale, s = alpha, user.outs[0]
        chain.append(user.pos)
    mask_v = None
    causal: list[int] = []  # the where and the mask ops of a causal mask (`_causal_where`)
    add = low.sole_user(s)
    if add is not None and (m := _mask_of(low, add, s)) is not None:
        mask_v, s = m, add.outs[0]
        chain.append(add.pos)
    elif add is not None and (found := _causal_where(low, add, s)) is not None:
        causal, s = found, add.outs[0]
    readers = low.users(s)
    if not readers or s in graph.live_out:
        return False
    soft = match_row(low, graph.ops[min(readers)])
    if soft is None or soft.kind != "softmax" or soft.x != s:
        return False
    if mask_v is not None and soft.scale != 1.0:
        return False  # softmax((s + mask) * t): the kernel scales the product only
    if causal and not soft.scale > 0.0:
        return False  # a masked score times t <= 0 would not stay excluded
    users = low.users(soft.out)
    if len(users) != 1 or soft.out in graph.live_out:
        return False
    pv = graph.ops[users[0]]
    if pv.info is None or pv.info.name != "matmul" or pv.ins[0] != soft.out:
        return False
    v_v = pv.ins[1]
    for vid in (q_v, kt_v, v_v):
        if graph.value(vid).dtype != np.float32:
            return False
    positions = sorted({*chain, *causal, *soft.positions, pv.pos, producer.pos})
    pcs = tuple(graph.ops[p].pc for p in positions)
    scores = graph.value(op.outs[0]).shape

    def emit() -> None:
        try:
            q = low.contiguous_last(low.tensor(q_v), (op.pc,))
            k_shape = (*kt.shape[:-2], kt.shape[-1], kt.shape[-2])
            swap = (*range(nd - 2), nd - 1, nd - 2)
            k = low.new("view", np.dtype(np.float32), k_shape, base=low.tensor(kt_v),
                        viewop=N.V_TRANSPOSE, contiguous=False, params=swap)  # fmt: skip
            operands = [q, low.contiguous_last(k, (op.pc,))]
            operands.append(low.contiguous_last(low.tensor(v_v), (op.pc,)))
            if mask_v is not None:  # a view of the scores' shape, 0 strides where it broadcasts
                base = low.contiguous_last(low.tensor(mask_v), (op.pc,))
                operands.append(low.broadcast_view(base, scores))
        except Unsupported as exc:
            raise Unsupported(str(exc), op.pc) from exc
        out = low.result_through_layout(pv.outs[0])
        kernel = make(scale * soft.scale, causal=bool(causal))
        label = "attention (causal)" if causal else "attention"
        low.emit(Kernel(N.OP_EXTERNAL, operands, [out], obj=kernel, pcs=pcs, label=label))

    # An operand computed after q @ k^T (ONNX computes the mask, and may transpose v, after
    # it): the kernel is emitted once the last of them is.
    later = max(
        (graph.value(v).producer for v in (q_v, kt_v, v_v, mask_v) if v is not None),
        default=-1,
    )
    if later > op.pos:
        if later >= pv.pos or later in positions:
            return False
        low.defer(later, emit)
    else:
        emit()
    low.claim(*positions)
    low.patterns.append("attention")
    return True
