"""Fused elementwise chains: the elementwise ops of a region grouped into one pass each.

`lower_elementwise` takes an elementwise op (any op the op table marks ``ELEMENTWISE`` and
``FUSIBLE``) and grows a `Chain` from it: the later ops whose result has the chain's shape
(or a shape that broadcasts to it, when nothing outside the chain reads it) and whose
operands are values of the chain, tensors already computed, constants or literals, as
long as what they compute meets the chain (each term of a sum joins the chain of the
sum), and while the chain reads at most `MAX_INPUTS` tensors. A
reduction over trailing axes of a chain value that nothing else reads closes the chain
(sum, max, min, prod, mean). Values that something outside the chain reads are its
outputs. A reduction of a plain tensor is a chain of no ops and a reduction; over other
axes than the trailing ones (mean pooling over a sequence, ``x.sum(axis=1)``) it reads a
transposed view that moves them last.

A `Chain` is plain data keyed by op-table names: the tile interpreter of the kernel
library runs it without compiling (tier 2) and `codegen` turns it into C (tier 3).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from shapevm.jit.backend import nodes as N
from shapevm.jit.backend.nodes import MAXIN, Kernel
from shapevm.jit.graph import Op
from shapevm.ops import DType
from shapevm.runtime.scheduler import int_comparison, kernel_dtype, native_enabled

Ref = tuple[str, Any]  # ("in", i) | ("lit", value) | ("node", j)
REDUCTIONS = ("sum", "max", "min", "prod", "mean")


@dataclass
class Node:
    op: str
    args: tuple[Ref, ...]
    dtype: np.dtype[Any]
    attrs: dict[str, Any] = field(default_factory=dict)
    shape: tuple[Any, ...] = ()


MAX_OUTPUTS = 4
"""Results one executor instruction writes (``SVX_MAXOUT`` in ``exec.h``)."""
MAX_INPUTS = MAXIN
"""Tensors one executor instruction reads (``SVX_MAXIN``; the tile interpreter takes 16).
A chain that grew past it failed to lower, and took its region's native code with it."""


@dataclass
class Chain:
    """One fused pass: inputs broadcast to ``shape``, nodes in order, outputs, and an
    optional trailing reduction of the last node over its last ``reduce_axes`` axes."""

    shape: tuple[Any, ...]
    inputs: list[int]  # tensor ids
    nodes: list[Node]
    outputs: list[tuple[int, int]]  # (node index, tensor id)
    reduce: str | None = None
    reduce_axes: int = 0
    keepdims: bool = False
    input_dtypes: list[np.dtype[Any]] = field(default_factory=list)
    copies: list[tuple[int, int]] = field(default_factory=list)
    """(view, temp): transposed inputs copied into temps before the pass (`_rows_copied`)."""
    order: tuple[int, ...] | None = None
    """When the pass runs in its operands' memory order (`_operand_order`): the axes of that
    order the results' axes are (each result is a transposed view of what the pass wrote);
    ``shape``, the nodes' shapes and the inputs are then in that order."""

    def text(self) -> str:
        """A canonical one-line form (for labels, and the key of generated code)."""

        def ref(r: Ref) -> str:
            kind, v = r
            return f"in{v}" if kind == "in" else f"n{v}" if kind == "node" else repr(v)

        body = "; ".join(
            f"n{i}={n.op}({', '.join(ref(a) for a in n.args)})"
            + (f"[{','.join(f'{k}={v}' for k, v in sorted(n.attrs.items()))}]" if n.attrs else "")
            for i, n in enumerate(self.nodes)
        )
        red = f" -> {self.reduce}(last {self.reduce_axes}{', keepdims' if self.keepdims else ''})"
        return body + (red if self.reduce else "")


def _scalar_exponent(low: Any, op: Op, i: int, kind: str, val: Any) -> float | None:
    """The number operand ``i`` of ``op`` is when it is a pow's exponent and a constant of
    one element that broadcasts nothing (no more axes than the base); else None."""
    if i != 1 or kind != "v" or op.info is None or op.info.name != "pow":
        return None
    array = low.const_array(val)
    if array is None or array.ndim > len(low.graph.value(op.ins[0]).shape):
        return None
    number: float | None = low.scalar(kind, val)
    return number


def _fusible(low: Any, op: Op) -> bool:
    return (
        op.fusible
        and op.info is not None
        and native_enabled(op.info.name, "native_chain", _kernel_dtype(low, op))
        and ints_stay_exact(low, op)
        and (
            op.info.name != "cast"
            or tile_cast(low.graph.value(op.ins[0]).dtype, low.graph.value(op.outs[0]).dtype)
        )
    )


_TILE_READS = frozenset(np.dtype(t) for t in (np.float32, np.bool_, np.int32, np.int64))


def tile_cast(src: np.dtype[Any], dst: np.dtype[Any]) -> bool:
    """Whether the tile interpreter runs a cast: of float32, bool or int32/int64 lanes to
    float32 or bool (others, a uint8 image to float32, are the executor's cast kernel's,
    `lower.lower_cast`)."""
    return src in _TILE_READS and dst in (np.float32, np.bool_)


_INTS = (np.dtype(np.int32), np.dtype(np.int64))


def ints_stay_exact(low: Any, op: Op) -> bool:
    """Whether ``op`` reads its int32/int64 tensors (if any) exactly as float32 lanes, the
    way the tile interpreter reads them: a cast to float32 (NumPy rounds as the conversion
    does) or bool, or a comparison with a scalar float32 holds whose magnitude is below
    2**24 (an integer past 2**24 still rounds to a float past it, on its side). An op doing
    anything else with an integer (``ids + 1``, two id tensors compared) stays out."""
    lits = low.literals(op)
    ints = _int_tensors(low, lits)
    if not ints:
        return True
    assert op.info is not None
    if op.info.name == "cast":
        return low.graph.value(op.outs[0]).dtype in (np.dtype(np.float32), np.dtype(np.bool_))
    if not int_comparison(op.info) or len(lits) != 2 or len(ints) != 1:
        return False
    from shapevm.jit.backend.lower import _shape_equal

    c = low.scalar(*lits[1 - ints[0]])
    ids = low.graph.value(lits[ints[0]][1])
    return (
        c is not None
        and abs(c) < 2**24
        and float(np.float32(c)) == c
        # the scalar becomes a literal: it must not broadcast the comparison to more axes
        and _shape_equal(low.graph.value(op.outs[0]).shape, ids.shape)
    )


def _int_tensors(low: Any, lits: Sequence[tuple[str, Any]]) -> list[int]:
    """Positions of the operands that are int32/int64 tensors, one-element constants aside
    (ONNX's ``Equal(ids, zero)`` has its zero as a rank-0 int64 initializer)."""
    return [
        i
        for i, (kind, v) in enumerate(lits)
        if kind == "v" and low.graph.value(v).dtype in _INTS and low.scalar(kind, v) is None
    ]


def _kernel_dtype(low: Any, op: Op) -> DType:
    """The dtype the capability db keys the op by, as the interpreter computes it
    (`scheduler.kernel_dtype`: a literal has none)."""
    operands = [
        None if kind == "c" else DType.from_numpy(low.graph.value(val).dtype)
        for kind, val in low.literals(op)
    ]
    results = [DType.from_numpy(low.graph.value(v).dtype) for v in op.outs]
    return kernel_dtype(operands, results)


def _broadcasts(small: Sequence[Any], big: Sequence[Any]) -> bool:
    from shapevm.jit.backend.lower import _equal

    if len(small) > len(big):
        return False
    return all(_equal(s, 1) or _equal(s, b) for s, b in zip(small[::-1], big[::-1], strict=False))


def _trailing_axes(op: Op, ndim: int) -> int | None:
    """How many trailing axes a reduction reduces (None: not a trailing block)."""
    axis = op.attrs.get("axis")
    axes = tuple(range(ndim)) if axis is None else tuple(a % ndim for a in axis)
    if not axes or sorted(axes) != list(range(ndim - len(axes), ndim)):
        return None
    return len(axes)


Grown = tuple[list[Op], tuple[Any, ...], "Op | None"]
"""A chain's ops in order, its shape, and the reduction that closes it."""


def grow_chain(low: Any, start: Op, pull: bool = True) -> Grown | None:
    """The ops of the chain that starts at ``start`` (not a reduction of a computed
    tensor: `_reduction_only`), its shape and closing reduction, or None.

    ``pull``: a later op also joins when its operands are only tensors already computed
    (or inputs, constants), if what it computes meets the chain further on: each term of
    ``log(1 + exp(x)) + tanh(x) * x`` reads ``x`` alone, and the sum joins them. Without
    it (the fallback when that chain is too large for the tile interpreter), an op joins
    only when it reads a value of the chain."""
    from shapevm.jit.backend.lower import _shape_equal

    graph = low.graph
    if not _fusible(low, start):
        return None
    shape = graph.value(start.outs[0]).shape
    members: list[Op] = []
    inside: set[int] = set()
    outside: set[int] = set()  # the tensors the chain reads
    for op in graph.ops[start.pos :]:
        if op.pos in low.claimed or op.kind != "call" or not _fusible(low, op):
            continue
        out_shape = graph.value(op.outs[0]).shape
        if op is not start:
            if not pull and not any(v in inside for v in op.ins):
                continue
            if not _shape_equal(out_shape, shape) and not _broadcasts(out_shape, shape):
                continue
        if not all(v in inside or v in low.of_value or _readable(low, v) for v in op.ins):
            continue
        reads = outside | {v for v in op.ins if v not in inside}
        if len(reads) > MAX_INPUTS:
            continue  # one instruction reads no more: the rest makes a chain of its own
        outside = reads
        members.append(op)
        inside.add(op.outs[0])
    if pull:
        members = _joined(members, start)
    members = _drop_small_escapes(low, members, shape)
    if not members:
        return None
    inside = {op.outs[0] for op in members}
    reduce_op = None
    last = members[-1]
    positions = {op.pos for op in members}
    for op in graph.ops[last.pos + 1 :]:
        if _is_reduction(low, op) and op.ins[0] == last.outs[0]:
            users = low.users(last.outs[0])
            if (
                users == [op.pos]
                and last.outs[0] not in graph.live_out
                and not any(_escapes(low, m, positions) for m in members[:-1])
            ):
                reduce_op = op  # (a chain with a reduction writes its reduced value only)
            break
    return members, tuple(shape), reduce_op


def _lower_what_blocks(low: Any, start: Op) -> None:
    """Lower ahead (`RegionLowering.lower_ahead`) the ops that are not elementwise, come
    after ``start`` and compute what a later elementwise op reading the chain also reads,
    with those they need in turn, where all they read is computed: a chain joins computed
    values only, and the program's order alone would cut ``x * 4.0 + concatenate([y, y])``
    (traced in that order) in two. The order of the ops is the trace's, not the graph's:
    ``concatenate([y, y]) + x * 4.0`` was one chain."""
    graph = low.graph
    reach = {start.outs[0]}
    seen: set[int] = set()

    def ahead(pos: int) -> bool:
        op = graph.ops[pos]
        if pos in seen or pos <= start.pos:
            return False
        seen.add(pos)
        for v in op.ins:
            q = graph.value(v).producer
            if graph.value(v).kind == "temp" and v not in low.of_value and q > start.pos:
                ahead(q)
        # a fusible op joins the chain itself once what it reads is computed (a weighted
        # sum of an image's channels reads a slice for each term: 0.299 * x[..., 0] +
        # 0.587 * x[..., 1] + ... was three chains, one per slice the program took later)
        return False if op.fusible else bool(low.lower_ahead(op))

    for op in graph.ops[start.pos + 1 :]:
        if op.kind != "call" or not op.fusible or not any(v in reach for v in op.ins):
            continue
        reach.add(op.outs[0])
        for v in op.ins:
            if v not in reach and v not in low.of_value and graph.value(v).kind == "temp":
                ahead(graph.value(v).producer)


def _joined(members: list[Op], start: Op) -> list[Op]:
    """The members that meet ``start`` through values they share: computations of the
    chain's shape that never meet it stay chains of their own."""
    made = {op.outs[0]: op.pos for op in members}
    parent = {op.pos: op.pos for op in members}
    if start.pos not in parent:  # it could not run here: nothing joins it
        return []

    def root(p: int) -> int:
        while parent[p] != p:
            parent[p] = parent[parent[p]]
            p = parent[p]
        return p

    for op in members:
        for v in op.ins:
            if v in made:
                parent[root(made[v])] = root(op.pos)
    home = root(start.pos)
    return [op for op in members if root(op.pos) == home]


def _escapes(low: Any, op: Op, positions: set[int]) -> bool:
    """Whether something outside the chain (or the function's result) reads ``op``'s value."""
    v = op.outs[0]
    return v in low.graph.live_out or any(u not in positions for u in low.users(v))


def _readable(low: Any, vid: int) -> bool:
    v = low.graph.value(vid)
    return v.kind in ("input", "const")


def _reduced_axes(op: Op, ndim: int) -> tuple[int, ...]:
    axis = op.attrs.get("axis")
    return tuple(range(ndim)) if axis is None else tuple(sorted({a % ndim for a in axis}))


def _is_reduction(low: Any, op: Op, any_axes: bool = False) -> bool:
    info = op.info
    if op.kind != "call" or info is None or info.name not in REDUCTIONS:
        return False
    if not native_enabled(info.name, "native_chain"):
        return False
    if op.pos in low.claimed:
        return False
    src = low.graph.value(op.ins[0])
    if not src.shape:
        return False
    if src.dtype == np.bool_ and info.name in ("sum", "prod"):
        return False  # counts: NumPy sums bools into int64 (`lower.lower_int_reduce`)
    return any_axes or _trailing_axes(op, len(src.shape)) is not None


def _drop_small_escapes(low: Any, members: list[Op], shape: Sequence[Any]) -> list[Op]:
    """Drop ops of a smaller shape whose result something outside the chain reads (a
    chain writes outputs of its own shape only), and the ops that depend on them."""
    from shapevm.jit.backend.lower import _shape_equal

    graph = low.graph
    while True:
        positions = {op.pos for op in members}
        bad = {
            op.outs[0]
            for op in members
            if not _shape_equal(graph.value(op.outs[0]).shape, shape)
            and (
                any(u not in positions for u in low.users(op.outs[0]))
                or op.outs[0] in graph.live_out
            )
        }
        if not bad:
            return members
        kept: list[Op] = []
        gone = set(bad)
        for op in members:
            if op.outs[0] in gone or any(v in gone for v in op.ins):
                gone.add(op.outs[0])
            else:
                kept.append(op)
        members = kept


def _rows_copied(low: Any, tid: int, copies: list[tuple[int, int]]) -> int:
    """A transposed view whose rows run down its base's columns (``x.T``, ``swapaxes(x, -1,
    -2)``) is copied into a temp first, by the executor's blocked transpose, and the pass
    reads the temp: the tile interpreter gathers a tile's elements along a row, one cache
    line each (``x.T + 1`` on 512 x 512 float32: 150 us as one pass, NumPy's 21 as it keeps
    x's memory order; copied, then added: about 75). Any other tensor: itself."""
    t = low.tensors[tid]
    if t.kind != "view" or t.viewop != N.V_TRANSPOSE or t.ndim < 2:
        return tid
    perm = tuple(t.params)
    if perm[-1] == t.ndim - 1 or perm[-2] != t.ndim - 1:
        return tid
    for view, temp in copies:
        if view == tid:
            return temp
    if tid in low.copied:  # copied for an earlier pass
        return int(low.copied[tid])
    temp = int(low.new("temp", t.dtype, t.shape))
    copies.append((tid, temp))
    return temp


def _operand_order(low: Any, members: list[Op], shape: Any) -> tuple[int, ...] | None:
    """The permutation ``p`` of a chain whose full-size operands are all views ``x.
    transpose(p)`` of one permutation that moves the last axis (``img.transpose(0, 3, 1,
    2)`` normalized): the pass then runs in the operands' memory order and each result is
    the transposed view of what it wrote, the layout NumPy's ufuncs give such operands (as
    one pass it gathered every element down a column: 20.6 us for [4, 64, 64, 3] against
    NumPy's 8.3). Only where every other operand is of the chain's rank (permuted as a
    view) or a scalar, every node of its rank or a scalar, and no later op of the region
    reads a result (it leaves the region, where the executor returns the view); else None.
    """
    from shapevm.jit.backend.lower import _equal

    n = len(shape)
    graph = low.graph
    made = {op.outs[0] for op in members}
    positions = {op.pos for op in members}
    perm: tuple[int, ...] | None = None
    for op in members:
        out = graph.value(op.outs[0])
        if len(out.shape) not in (0, n) or any(u not in positions for u in low.users(op.outs[0])):
            return None
        for kind, val in low.literals(op):
            if kind == "c" or val in made:
                continue
            dims = graph.value(val).shape
            if all(_equal(d, 1) for d in dims):
                continue  # a scalar, whatever its rank
            if len(dims) != n:
                return None
            tid = low.of_value.get(val)
            found = _transposed(low, tid) if tid is not None else None
            full = all(_equal(a, b) for a, b in zip(dims, shape, strict=True))
            if full and found is not None:
                if perm is not None and found[1] != perm:
                    return None
                perm = found[1]
            elif full:
                return None
    if n < 2 or perm is None or perm[-1] == n - 1:
        return None
    return perm


def _transposed(low: Any, tid: int) -> tuple[int, tuple[int, ...]] | None:
    """``(base, p)`` when tensor ``tid`` is ``base.transpose(p)`` through one or more
    transposed views (``img.transpose(0, 3, 1, 2).T``), ``base`` not one; else None."""
    t = low.tensors[tid]
    perm: tuple[int, ...] | None = None
    while t.kind == "view" and t.viewop == N.V_TRANSPOSE and t.base is not None:
        step = tuple(int(a) for a in t.params)
        perm = step if perm is None else tuple(step[a] for a in perm)
        t = low.tensors[t.base]
    return (t.id, perm) if perm is not None else None


def _build(
    low: Any, members: list[Op], shape: Any, reduce_op: Op | None, dry: bool = False
) -> tuple[Chain, list[int]]:
    """The chain of ``members`` and the positions it covers. ``dry``: its inputs and
    results are the graph's value ids and the lowering is left as it was (no tensors
    made), to see whether the tile interpreter takes it."""
    from shapevm.jit.backend.lower import _equal

    graph = low.graph
    copies: list[tuple[int, int]] = []
    order = None if dry or reduce_op is not None else _operand_order(low, members, shape)
    inv = tuple(int(a) for a in np.argsort(order)) if order is not None else ()

    def in_order(dims: Any) -> tuple[Any, ...]:
        return tuple(dims[a] for a in inv) if order is not None and len(dims) else tuple(dims)

    def source(val: int) -> int:
        if dry:
            return val
        tid: int = low.tensor(val) if val not in low.of_value else low.of_value[val]
        if order is None:
            return _rows_copied(low, tid, copies)
        t = low.tensors[tid]
        found = _transposed(low, tid)
        if found is not None and found[1] == order:
            return found[0]  # the full-size operands: their bases, as they lie
        if all(_equal(d, 1) for d in t.shape):
            return tid  # a scalar, whatever its rank
        return int(low.new("view", t.dtype, in_order(t.shape), base=tid,
                           viewop=N.V_TRANSPOSE, params=inv, contiguous=False))  # fmt: skip

    def result(val: int) -> int:
        if dry:
            return val
        if order is None:
            tid: int = low.result(val)
            return tid
        v = graph.value(val)
        written = int(low.new("temp", v.dtype, in_order(v.shape), value=val))
        low.bind_view(val, written, N.V_TRANSPOSE, False, params=order)
        return written

    inputs: list[int] = []
    in_index: dict[int, int] = {}
    node_of: dict[int, int] = {}
    nodes: list[Node] = []
    for op in members:
        args: list[Ref] = []
        lits = low.literals(op)
        ints = _int_tensors(low, lits)
        for i, (kind, val) in enumerate(lits):
            exponent = _scalar_exponent(low, op, i, kind, val)
            if kind == "c":
                args.append(("lit", val))
            elif exponent is not None:
                # a constant exponent of one element (ONNX's Pow(x, two)): a literal, as
                # `x ** 2` writes it, so that 2 is a square, not a power per element
                args.append(("lit", exponent))
            elif ints and i not in ints:
                # the scalar an integer is compared with: a constant of the program (the
                # tile interpreter compares integers with constants only)
                args.append(("lit", low.scalar(kind, val)))
            elif val in node_of:
                args.append(("node", node_of[val]))
            else:
                if val not in in_index:
                    in_index[val] = len(inputs)
                    inputs.append(source(val))
                args.append(("in", in_index[val]))
        value = graph.value(op.outs[0])
        assert op.info is not None
        attrs = {k: v for k, v in op.attrs.items() if v is not None}
        nodes.append(Node(op.info.name, tuple(args), value.dtype, attrs, in_order(value.shape)))
        node_of[op.outs[0]] = len(nodes) - 1
    positions = {op.pos for op in members}
    chain = Chain(in_order(shape), inputs, nodes, [], copies=copies, order=order)
    chain.input_dtypes = [graph.value(t).dtype if dry else low.tensors[t].dtype for t in inputs]
    if reduce_op is not None:
        ndim = len(shape)
        chain.reduce = reduce_op.info.name  # type: ignore[union-attr]
        chain.reduce_axes = _trailing_axes(reduce_op, ndim) or 0
        chain.keepdims = bool(reduce_op.attrs.get("keepdims"))
        out = result(reduce_op.outs[0])
        chain.outputs.append((len(nodes) - 1, out))
        positions.add(reduce_op.pos)
    else:
        for op in members:
            v = op.outs[0]
            escapes = v in graph.live_out or any(u not in positions for u in low.users(v))
            if escapes:
                chain.outputs.append((node_of[v], result(v)))
    return chain, sorted(positions)


def _middle_axes(low: Any, red: Op) -> tuple[int, ...] | None:
    """The axes a float32 reduction reduces when they are adjacent and the last is kept."""
    value = low.graph.value(red.ins[0])
    ndim = len(value.shape)
    reduced = _reduced_axes(red, ndim)
    if (
        value.dtype != np.float32
        or _trailing_axes(red, ndim) is not None
        or not reduced
        or list(reduced) != list(range(reduced[0], reduced[-1] + 1))
    ):
        return None
    return reduced


def _lower_weighted_reduction(low: Any, op: Op) -> bool:
    """``sum``/``mean`` over middle axes of a product ``x * w`` that nothing else reads
    (masked mean pooling, ``(x * mask[..., None]).sum(axis=1)``): the reduce kernel
    reduces the product in the pass that reads ``x``, without writing it."""
    from shapevm import native
    from shapevm.jit.backend.lower import _shape_equal

    graph = low.graph
    if op.info is None or op.info.name != "mul" or op.pos in low.claimed or len(op.ins) != 2:
        return False
    (prod,) = op.outs
    readers = graph.users.get(prod, [])
    if len(readers) != 1 or prod in graph.live_out:
        return False
    red = graph.ops[readers[0]]
    if red.info is None or red.info.name not in ("sum", "mean") or red.ins[0] != prod:
        return False
    if not (_is_reduction(low, red, any_axes=True) and native_enabled("mul", "native_chain")):
        return False
    reduced = _middle_axes(low, red)
    if reduced is None or any(k != "v" for k, _ in low.literals(op)):
        return False
    shape = tuple(graph.value(prod).shape)
    if any(graph.value(v).dtype != np.float32 for v in op.ins):
        return False
    if not all(v in low.of_value or _readable(low, v) for v in op.ins):
        return False
    operands = list(op.ins)
    if _shape_equal(graph.value(operands[1]).shape, shape):
        operands.reverse()  # the full-sized operand first: its rows are read in place
    ins = [low.broadcast_view(low.tensor(v), shape) for v in operands]
    out = low.reduced_result(red, reduced)
    run = native.reduce_kernel(red.info.name, reduced[0], reduced[-1] + 1)
    pcs = (op.pc, red.pc)
    low.emit(Kernel(N.OP_EXTERNAL, ins, [out], obj=run, pcs=pcs, label=f"{red.info.name}(x*w)"))
    low.claim(op.pos, red.pos)
    low.patterns.append("elementwise")
    return True


def _lower_middle_reduction(low: Any, op: Op) -> bool:
    """A float32 reduction of a computed tensor over a group of adjacent axes before the
    last (``x.mean(axis=1)`` of ``[b, s, d]``: mean pooling; ``x.sum(axis=0)``): the
    executor's reduce kernel, which adds whole rows in memory order. Read as a view that
    moved the axes last (`_reduction_only`), the tile interpreter went along a strided
    axis: 7x NumPy's time on ``[32, 128, 256]``."""
    from shapevm import native

    reduced = _middle_axes(low, op)
    if reduced is None:
        return False
    assert op.info is not None
    src = op.ins[0]
    tid = low.of_value[src] if src in low.of_value else low.tensor(src)
    out = low.reduced_result(op, reduced)
    run = native.reduce_kernel(op.info.name, reduced[0], reduced[-1] + 1)
    low.external(op, [tid], out, run)
    low.patterns.append("elementwise")
    return True


def _reduction_only(low: Any, op: Op) -> tuple[Chain, list[int]]:
    src = op.ins[0]
    shape = tuple(low.graph.value(src).shape)
    tid = low.of_value[src] if src in low.of_value else low.tensor(src)
    value = low.graph.value(src)
    assert op.info is not None
    trailing = _trailing_axes(op, len(shape))
    keepdims = bool(op.attrs.get("keepdims"))
    if trailing is not None:
        out = low.result(op.outs[0])
    else:  # the reduced axes moved last, in a view; the result without its unit axes
        reduced = _reduced_axes(op, len(shape))
        perm = tuple(a for a in range(len(shape)) if a not in reduced) + reduced
        out = low.reduced_result(op, reduced)
        shape = tuple(shape[a] for a in perm)
        tid = low.new("view", value.dtype, shape, base=tid, viewop=N.V_TRANSPOSE,
                      contiguous=False, params=perm)  # fmt: skip
        trailing, keepdims = len(reduced), False
    chain = Chain(
        shape,
        [tid],
        [Node("identity", (("in", 0),), value.dtype, {}, shape)],
        [],
        input_dtypes=[value.dtype],
    )
    chain.reduce, chain.reduce_axes, chain.keepdims = op.info.name, trailing, keepdims
    chain.outputs.append((0, out))
    return chain, [op.pos]


def _needed(chain: Chain, node: int) -> set[int]:
    """The nodes ``node`` is computed from, itself included."""
    seen: set[int] = set()
    todo = [node]
    while todo:
        i = todo.pop()
        if i in seen:
            continue
        seen.add(i)
        todo.extend(v for kind, v in chain.nodes[i].args if kind == "node")
    return seen


_COSTLY = frozenset(
    ("exp", "log", "tanh", "sigmoid", "erf", "sin", "cos", "pow", "softplus", "expm1", "log1p",
     "log2", "log10", "atan", "asin", "acos", "atan2", "hypot", "floordiv", "mod")
)  # fmt: skip
"""Ops of many vector instructions each (vmath.h's functions, per-element division)."""


def _dependent_split(chain: Chain) -> list[Chain]:
    """``chain`` as passes that each compute a node once: where a result of the chain is
    computed from another result (``g = a * sigmoid(b)`` kept, and ``g * g``), the tile
    interpreter's program of the later one computed the earlier one again (one program per
    result): the results the others are computed from go first, and a second pass reads
    them back instead (a GLU and its square on [8, 200, 32]: 78 us as one pass, twice the
    sigmoid's). Only where the second pass would compute a costly op again (a few adds
    and multiplies cost less again than a pass over memory); a chain with a trailing
    reduction stays whole."""
    if chain.reduce or len(chain.outputs) < 2:
        return [chain]
    needs = {n: _needed(chain, n) for n, _ in chain.outputs}
    base = [(n, t) for n, t in chain.outputs if any(n in needs[m] for m in needs if m != n)]
    rest = [(n, t) for n, t in chain.outputs if (n, t) not in base]
    if not base or not rest:
        return [chain]
    done = set().union(*(needs[n] for n, _ in base))
    again = done & set().union(*(needs[n] for n, _ in rest))
    if not any(chain.nodes[i].op in _COSTLY for i in again):
        return [chain]
    if len(chain.inputs) + len(base) > MAX_INPUTS:
        return [chain]
    read = {n: len(chain.inputs) + k for k, (n, _) in enumerate(base)}
    nodes = [
        Node("identity", (("in", read[i]),), node.dtype, {}, node.shape) if i in read else node
        for i, node in enumerate(chain.nodes)
    ]
    first = _only_read(replace(chain, outputs=base, copies=[]))
    second = replace(
        chain,
        inputs=chain.inputs + [t for _, t in base],
        nodes=nodes,
        outputs=rest,
        input_dtypes=chain.input_dtypes + [chain.nodes[n].dtype for n, _ in base],
        copies=[],
    )
    return [*_dependent_split(first), *_dependent_split(_only_read(second))]


def _only_read(chain: Chain) -> Chain:
    """``chain`` with only the nodes its results are computed from, and only the inputs
    those read (the tile interpreter gathers every input of a program for each tile, read
    or not)."""
    needed = sorted(set().union(*(_needed(chain, n) for n, _ in chain.outputs)))
    used = sorted({v for i in needed for kind, v in chain.nodes[i].args if kind == "in"})
    if len(needed) == len(chain.nodes) and len(used) == len(chain.inputs):
        return chain
    node_at = {old: new for new, old in enumerate(needed)}
    in_at = {old: new for new, old in enumerate(used)}

    def moved(ref: Ref) -> Ref:
        kind, v = ref
        return ("in", in_at[v]) if kind == "in" else ("node", node_at[v]) if kind == "node" else ref

    return replace(
        chain,
        inputs=[chain.inputs[i] for i in used],
        nodes=[
            replace(chain.nodes[i], args=tuple(map(moved, chain.nodes[i].args))) for i in needed
        ],
        outputs=[(node_at[n], t) for n, t in chain.outputs],
        input_dtypes=[chain.input_dtypes[i] for i in used],
    )


def lower_elementwise(low: Any, op: Op) -> bool:
    """A fused chain from ``op`` (see the module docstring), run by the tile interpreter
    (tier 2) until generated code for it is patched in (tier 3)."""
    from shapevm.jit.backend.lower import Unsupported
    from shapevm.jit.backend.tiles import programs, tile_kernel

    progs = None
    if _lower_weighted_reduction(low, op):
        return True
    if _is_reduction(low, op, any_axes=True) and _lower_middle_reduction(low, op):
        return True
    if _is_reduction(low, op, any_axes=True):
        chain, positions = _reduction_only(low, op)  # a reduction of a tensor computed before
    else:
        _lower_what_blocks(low, op)
        # Pulling in the terms that meet the chain may make it larger than the tile
        # interpreter takes (64 registers, 128 instructions): tried first on a dry chain.
        grown = grow_chain(low, op, pull=True)
        if grown is not None:
            dry, _ = _build(low, *grown, dry=True)
            try:
                progs = programs(dry) if dry.outputs else None
            except Unsupported:
                grown = grow_chain(low, op, pull=False)
        if grown is None:
            return False
        chain, positions = _build(low, *grown)
        if chain.order is not None:  # the dry chain's programs are of the other order
            progs = None
    if not chain.outputs:  # nothing reads what the chain computes: dead code
        low.claim(*positions)
        return True
    # One executor instruction writes at most MAX_OUTPUTS results; a chain with more is
    # run as several passes over the same inputs, each writing a share of the results
    # (the tile programs are one per result, in the order of the results).
    groups = _dependent_split(chain)
    parts: list[Chain] = []
    runs = []
    for group in groups:
        cuts = range(0, len(group.outputs), MAX_OUTPUTS)
        for i in cuts:
            part = replace(group, outputs=group.outputs[i : i + MAX_OUTPUTS])
            given = None if progs is None or group is not chain else progs[i : i + MAX_OUTPUTS]
            parts.append(part)
            runs.append(tile_kernel(part, given))  # Unsupported: no tier-2 form
    pcs = tuple(sorted(low.graph.ops[p].pc for p in positions))
    for view, temp in chain.copies:
        low.emit(Kernel(N.OP_COPY, [view], [temp], pcs=pcs, label="copy (transposed)"))
        low.copied[view] = temp
    label = "chain" if chain.nodes[0].op != "identity" else chain.reduce or "chain"
    for part, run in zip(parts, runs, strict=True):
        k = Kernel(
            N.OP_EXTERNAL,
            list(part.inputs),
            [t for _, t in part.outputs],
            obj=run,
            pcs=pcs,
            label=f"{label}[{len(part.nodes)}]",
        )
        k.chain = part
        low.emit(k)
    low.claim(*positions)
    low.patterns.append("elementwise")
    return True
