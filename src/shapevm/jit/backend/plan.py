"""The symbolic memory plan of a lowered region, and the executor's arrays built from it.

Every buffer of a region (a value that no caller sees) lives in the calling thread's arena.
The plan is made once per program, for every shape at once:

1. liveness in kernel order: a tensor lives from the kernel that writes it to the last
   kernel that reads it or any view of it;
2. with ``mem_optimize``, a kernel's result takes the buffer of an operand that dies there
   when the kernel allows it (same size: elementwise chains, a dense layer's residual);
   then, largest first (sizes compared with every variable at 64), each tensor goes into
   the first buffer none of whose tensors lives at the same time, else a new one; without
   it, each tensor has its own buffer;
3. a buffer's size is the largest of its tensors' sizes, as an expression of the
   dimension variables (a cell of the dimension heap), so one plan serves every shape.

``planned_bytes`` and ``naive_bytes`` (every tensor in its own allocation, as the
interpreter runs it) are evaluated for given dimension values by `MemoryPlan.bytes`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shapevm.jit.backend import nodes as N
from shapevm.jit.backend.dims import MAX, DimHeap
from shapevm.jit.backend.nodes import Lowered


def _key(d: Any) -> Any:
    return d if isinstance(d, int) else ("e", d)


@dataclass
class Buffer:
    sizes: list[Any] = field(default_factory=list)  # byte-size expressions of its tensors
    spans: list[tuple[int, int]] = field(default_factory=list)  # (first, last) kernel of each


@dataclass
class MemoryPlan:
    buffers: list[Buffer]
    temps: list[int]  # tensor ids that live in the arena
    inplace: list[tuple[int, int]]  # (result tensor, operand tensor) sharing a buffer

    def bytes(self, low: Lowered, graph: Any, env: Mapping[str, int]) -> tuple[int, int]:
        """(planned, naive) bytes at ``env``: the arena plus the outputs, against what the
        interpreter allocates (every op's result but the views of layout ops)."""

        def ev(d: Any) -> int:
            return max(0, d if isinstance(d, int) else int(d.evaluate(env)))

        arena = sum(_align(max((ev(s) for s in b.sizes), default=0)) for b in self.buffers)
        outputs = sum(ev(low.tensors[t].nbytes_expr()) for t in low.outputs)
        naive = sum(
            v.nbytes(env)
            for v in graph.values
            if v.kind == "temp"
            and graph.ops[v.producer].kind == "call"
            and not _is_view_op(graph.ops[v.producer])
        )
        return arena + outputs, max(naive, outputs)


def _is_view_op(op: Any) -> bool:
    return op.info is not None and op.info.name in ("reshape", "transpose", "slice", "broadcast_to")


def _align(n: int) -> int:
    return (n + 63) & ~63


_REFERENCE_SIZE = 64
"""Every dimension variable's value when sizes are compared to order the assignment (the
order only: a buffer's size is the largest of its tensors' at each call)."""


def _reference_bytes(size: Any) -> int:
    if isinstance(size, int):
        return size
    try:
        return int(size.evaluate(defaultdict(lambda: _REFERENCE_SIZE)))
    except (ArithmeticError, KeyError, ValueError):
        return 0


def plan_memory(low: Lowered, optimize: bool = True) -> MemoryPlan:
    tensors = low.tensors
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    root = {t.id: t.id for t in tensors}
    for t in tensors:  # a view keeps its base alive
        if t.kind == "view" and t.base is not None:
            root[t.id] = root[t.base]
    for i, k in enumerate(low.kernels):
        for tid in (*k.ins, *k.outs):
            last[root[tid]] = max(last.get(root[tid], -1), i)
        for tid in k.outs:
            first.setdefault(root[tid], i)
    # The temporaries in the order kernels write them; with `optimize`, a result joins the
    # group of an operand that dies at its kernel when the kernel allows it (same size).
    temps: list[int] = []
    inplace: list[tuple[int, int]] = []
    group: dict[int, int] = {}  # temp -> the first temp of its in-place group
    for i, k in enumerate(low.kernels):
        for oi, written in enumerate(k.outs):
            tid = root[written]
            if tensors[tid].kind != "temp" or tid in group:
                continue
            temps.append(tid)
            group[tid] = tid
            if not optimize:
                continue
            for out_index, in_index in k.inplace:
                if out_index != oi or in_index >= len(k.ins) or written != tid:
                    continue
                u = k.ins[in_index]
                if (
                    u in group
                    and root[u] == u
                    and last.get(u) == i
                    and _key(tensors[u].nbytes_expr()) == _key(tensors[tid].nbytes_expr())
                    # nor when the kernel reads it as another operand too: `relu(x @ W) + x`
                    # in x's memory would overwrite rows of x the product still reads
                    and all(root[v] != u for j, v in enumerate(k.ins) if j != in_index)
                ):
                    group[tid] = group[u]
                    inplace.append((tid, u))
                    break
    members: dict[int, list[int]] = {}
    for tid in temps:
        members.setdefault(group[tid], []).append(tid)
    buffers: list[Buffer] = []
    # Groups largest first (sizes compared at one set of values), each into the first buffer
    # none of whose groups lives at the same time: the large tensors get buffers of their
    # own and the small ones fill in around them. Kernel order instead (a free buffer for
    # each result as it comes) put a transformer block's residual in the buffer of its
    # q, k, v and gave the MLP's hidden tensor one more: 8 KiB a token where 6 will do.
    order = sorted(
        members,
        key=lambda g: (-max(_reference_bytes(tensors[t].nbytes_expr()) for t in members[g]), g),
    )
    for g in order:
        lo = min(first[t] for t in members[g])
        hi = max(last[t] for t in members[g])
        free = (i for i, b in enumerate(buffers) if all(hi < a or z < lo for a, z in b.spans))
        index = next(free, None) if optimize else None
        if index is None:
            index = len(buffers)
            buffers.append(Buffer())
        buffers[index].spans.append((lo, hi))
        for tid in members[g]:
            buffers[index].sizes.append(tensors[tid].nbytes_expr())
            tensors[tid].buffer = index
    for t in tensors:  # temps nothing reads or writes (dead views' bases) still need room
        if t.kind == "temp" and t.id not in group:
            t.buffer = len(buffers)
            buffers.append(Buffer([t.nbytes_expr()]))
            temps.append(t.id)
    return MemoryPlan(buffers, temps, inplace)


def _perm_rows(perms: list[tuple[int, ...] | None]) -> np.ndarray[Any, Any]:
    """The executor's ``output_perms``: per output, its permutation then -1s (all -1: none)."""
    rows = np.full((len(perms), N.MAXDIM), -1, np.int32)
    for o, perm in enumerate(perms):
        if perm is not None:
            rows[o, : len(perm)] = perm
    return rows


def _shape_rows(shapes: list[tuple[Any, ...] | None], heap: DimHeap) -> np.ndarray[Any, Any]:
    """The executor's ``output_shapes``: per output, -1 (its slot's shape) or a rank and
    the heap cells of the shape it is returned in."""
    rows = np.full((len(shapes), N.MAXDIM + 1), -1, np.int32)
    for o, shape in enumerate(shapes):
        if shape is not None:
            rows[o, 0] = len(shape)
            rows[o, 1 : 1 + len(shape)] = [heap.cell(d) for d in shape]
    return rows


def build_spec(low: Lowered, plan: MemoryPlan, heap: DimHeap, threads: int = 0) -> dict[str, Any]:
    """The arrays `shapevm.native.Executor` takes."""
    slot_rows = []
    consts: list[np.ndarray[Any, Any]] = []
    for t in low.tensors:
        row = np.zeros(5 + 3 * N.MAXDIM, np.int32)
        if t.ndim > N.MAXDIM:
            raise ValueError(f"rank {t.ndim} is above the executor's {N.MAXDIM}")
        kind = {
            "input": N.S_INPUT,
            "const": N.S_CONST,
            "temp": N.S_BUFFER,
            "output": N.S_OUTPUT,
            "view": N.S_VIEW,
        }[t.kind]
        if t.kind == "input":
            index = t.arg
        elif t.kind == "const":
            assert t.array is not None
            index = len(consts)
            consts.append(t.array)
        elif t.kind == "temp":
            index = t.buffer
        elif t.kind == "output":
            index = t.out_index
        else:
            assert t.base is not None
            index = t.base
        row[:5] = (kind, N.DTYPE_CODES[t.dtype], t.ndim, index, t.viewop)
        for d, dim in enumerate(t.shape):
            row[5 + d] = heap.cell(dim)
        if t.viewop in (N.V_TRANSPOSE, N.V_SELECT):
            row[5 + N.MAXDIM : 5 + N.MAXDIM + t.ndim] = t.params
        elif t.viewop == N.V_SLICE:
            for d, start in enumerate(t.params):
                row[5 + N.MAXDIM + d] = heap.cell(start)
            row[5 + 2 * N.MAXDIM : 5 + 2 * N.MAXDIM + t.ndim] = t.params2
        slot_rows.append(row)
    buffer_cells = []
    for b in plan.buffers:
        cells = [heap.cell(s) for s in b.sizes]
        cell = cells[0]
        for c in cells[1:]:
            cell = heap._step(MAX, cell, c)
        buffer_cells.append(cell)
    instr_rows, fattrs, objects = [], [], []
    for k in low.kernels:
        row = np.zeros(3 + N.MAXIN + N.MAXOUT + N.NIATTR, np.int32)
        row[:3] = (k.op, len(k.ins), len(k.outs))
        row[3 : 3 + len(k.ins)] = k.ins
        row[3 + N.MAXIN : 3 + N.MAXIN + len(k.outs)] = k.outs
        base = 3 + N.MAXIN + N.MAXOUT
        row[base : base + len(k.iattr)] = k.iattr
        instr_rows.append(row)
        f = np.zeros(N.NFATTR, np.float32)
        f[: len(k.fattr)] = k.fattr
        fattrs.append(f)
        objects.append(k.obj)
    init, prog, checks = heap.arrays()
    return {
        "nvars": len(heap.variables),
        "ninputs": len(low.inputs),
        "heap": init,
        "dimprog": prog,
        "checks": checks,
        "slots": np.array(slot_rows, np.int32).reshape(-1, 5 + 3 * N.MAXDIM),
        "buffers": np.array(buffer_cells, np.int32),
        "outputs": np.array(low.outputs, np.int32),
        **({"output_perms": _perm_rows(low.output_perms)} if low.output_perms else {}),
        **({"output_shapes": _shape_rows(low.output_shapes, heap)} if low.output_shapes else {}),
        "instrs": np.array(instr_rows, np.int32).reshape(-1, 3 + N.MAXIN + N.MAXOUT + N.NIATTR),
        "fattrs": np.array(fattrs, np.float32).reshape(-1, N.NFATTR),
        "objects": objects,
        "consts": consts,
        "threads": threads,
    }
