"""Lowering a region's op graph to executor kernels, whatever the spelling of the model.

The compiler walks the region's ops in order and offers each one to the lowerings of
`LOWERINGS`, one ordered tuple (the first that takes an op wins; a lowering may take later
ops too, e.g. a dense layer takes its bias add and activation). Matching looks at the op
graph, not at how the user wrote it:

- a ``matmul`` whose right operand is a constant (or a layout op of one: ``x @ W.T`` with
  a ``[out, in]`` weight) is a dense layer against weights packed once; the run of
  affine ops per output column that follows it (adds, subtractions, multiplications and
  divisions by constants: a bias, a scale, a batch norm written out) is folded into the
  packed weights and the bias (`affine`), a following elementwise subgraph of its result
  that computes an activation (found by evaluating the subgraph, so any spelling of GELU,
  SiLU, sigmoid, tanh or ReLU counts) its activation, and a following add of a tensor of
  the same shape its residual;
- a ``matmul`` of two activations (attention's ``q @ k^T``) is a batched product reading
  any strides, with a following multiplication by a constant as its scale;
- layout ops (transpose, slice, reshape, broadcast) are views: strides, not copies;
  concatenate and pad are copies into views of their result;
- the other modules of the package (`convs`, `rowpatterns`, `chains`) hold the lowerings of
  convolution, pooling, row ops and fused elementwise chains; `registry.LOWERINGS` orders
  them all.

An op no lowering takes raises `Unsupported`; `native_reason` says beforehand which ops
those are, so the compiler keeps them interpreted and splits the region around them.
"""

from __future__ import annotations

import functools
import heapq
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from shapevm import native
from shapevm.bytecode.isa import Reg
from shapevm.bytecode.program import OpCall
from shapevm.jit.backend import affine, probe
from shapevm.jit.backend import nodes as N
from shapevm.jit.backend.nodes import Kernel, Lowered, Tensor
from shapevm.jit.graph import Op, RegionGraph
from shapevm.native import ACTIVATIONS, Activation, pack_dense, take_kernel
from shapevm.ops import DType, OpFlag
from shapevm.ops.shape_rules import transpose_perm
from shapevm.runtime.scheduler import INT_ARITHMETIC, INT_REDUCTIONS, native_enabled
from shapevm.shapes import InconclusiveDimensionOperation

F32 = np.dtype(np.float32)


class Unsupported(Exception):
    """An op of the region has no native lowering: ``pc`` is its position (the message
    says why); ``pc`` is None for a problem of the whole region."""

    def __init__(self, why: str, pc: int | None = None) -> None:
        super().__init__(why)
        self.pc = pc


class _AheadFailed(Unsupported):
    """An op lowered ahead of its turn (`RegionLowering.lower_ahead`) failed: the region
    is cut at that op, not at the one whose lowering asked for it."""


def _equal(a: Any, b: Any) -> bool:
    """Provably equal dimensions."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    try:
        return bool(a == b)
    except Exception:  # scopes differ, or undecidable: not provably equal
        return False


def _shape_equal(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))


# Ops that make or rearrange a value from the dimensions alone (with the elementwise ops of
# such values: a mask; `tril` and ONNX's `Trilu` are traced as comparisons of `iota`s)
_FROM_DIMS = ("iota", "full", "reshape", "broadcast_to")


class RegionLowering:
    """The state of lowering one region: tensors, kernels, claimed ops."""

    def __init__(
        self,
        graph: RegionGraph,
        constants: Sequence[np.ndarray[Any, Any]],
        check: Callable[[], None] = lambda: None,
    ) -> None:
        self.graph = graph
        self.check = check
        """Raises once the compile has been abandoned; long lowerings call it."""
        self.constants = constants
        self.tensors: list[Tensor] = []
        self.kernels: list[Kernel] = []
        self.of_value: dict[int, int] = {}
        self.claimed: set[int] = set()
        self.copied: dict[int, int] = {}
        """Transposed views a pass reads, and the temps the executor copied them into
        (`chains._rows_copied`), once copied."""
        self.inputs: list[int] = []
        self.input_values: list[int] = []
        self.patterns: list[str] = []
        self.folded: dict[int, np.ndarray[Any, Any]] = {}  # value -> constant it folds to
        self._const_regs: dict[Reg, int] | None = None
        self.blocked: dict[int, int] = {}  # value -> its tensor in the blocked conv layout
        self.deferred: dict[int, list[Callable[[], None]]] = {}  # see `defer`
        self.from_dims: dict[int, Unsupported] = {}  # see `_lower_op`
        self.materializing = False  # lowering a deferred op for a reader (`_materialize`)
        self._lowerings: Sequence[Lowering] = ()

    # -- tensors ----------------------------------------------------------------------------
    def new(self, kind: str, dtype: np.dtype[Any], shape: Sequence[Any], **kw: Any) -> int:
        t = Tensor(len(self.tensors), kind, np.dtype(dtype), tuple(shape), **kw)
        self.tensors.append(t)
        return t.id

    def tensor(self, vid: int) -> int:
        """The tensor of graph value ``vid`` (an argument the first time it is read; a
        value only computed in the blocked layout is reordered to NCHW here, once)."""
        tid = self.of_value.get(vid)
        if tid is None and vid in self.blocked:
            from shapevm.jit.backend.convs import reorder_from_blocked

            return reorder_from_blocked(self, vid)
        if tid is None and self.graph.value(vid).kind == "const":
            array = self.const_array(vid)
            assert array is not None
            # np.require keeps a rank-0 constant rank 0 (ascontiguousarray makes it [1])
            c = np.require(array, None, "C")
            tid = self.new("const", array.dtype, array.shape, value=vid, array=c)
            self.of_value[vid] = tid
        if tid is None:
            v = self.graph.value(vid)
            if v.kind != "input":
                raise Unsupported(f"value {v.reg} is read before it is computed")
            tid = self.new("input", v.dtype, v.shape, value=vid, arg=len(self.inputs))
            self.inputs.append(tid)
            self.input_values.append(vid)
            self.of_value[vid] = tid
        return tid

    def result(self, vid: int) -> int:
        """A fresh tensor for the value ``vid`` that an instruction writes."""
        v = self.graph.value(vid)
        tid = self.new("temp", v.dtype, v.shape, value=vid)
        self.of_value[vid] = tid
        return tid

    def reduced_result(self, red: Op, axes: Sequence[int]) -> int:
        """The tensor a reducing kernel writes for ``red``'s result: the result itself, or,
        with ``keepdims``, a view of it without the reduced unit ``axes`` (of the operand)."""
        out = self.result(red.outs[0])
        if not red.attrs.get("keepdims"):
            return out
        shape = self.graph.value(red.ins[0]).shape
        kept = tuple(n for a, n in enumerate(shape) if a not in axes)
        return self.new("view", self.tensors[out].dtype, kept, base=out, viewop=N.V_RESHAPE,
                        contiguous=True)  # fmt: skip

    def broadcast_view(self, tid: int, shape: Sequence[Any]) -> int:
        """``tid`` itself if it has ``shape``, else a view of it broadcast to ``shape``
        (stride 0 along the axes it broadcasts)."""
        if _shape_equal(self.tensors[tid].shape, shape):
            return tid
        return self.new("view", self.tensors[tid].dtype, tuple(shape), base=tid,
                        viewop=N.V_BROADCAST, contiguous=False)  # fmt: skip

    def result_through_layout(self, vid: int, unit_last: bool = True) -> int:
        """Like `result`, but when the value's only use is ``transpose`` then ``reshape``
        (attention's ``o.transpose(0, 2, 1, 3).reshape(b, s, d)``), the kernel writes the
        reshaped tensor directly, through a transposed view of it: no copy. With
        ``unit_last`` the transpose must keep the last axis last (the kernel writes rows)."""
        graph = self.graph
        t_op = self.sole_user(vid)
        if t_op is None or t_op.info is None or t_op.info.name != "transpose":
            return self.result(vid)
        perm = transpose_perm(t_op.attrs, len(graph.value(vid).shape))
        if unit_last and perm[-1] != len(perm) - 1:
            return self.result(vid)
        r_op = self.sole_user(t_op.outs[0])
        if r_op is None or r_op.info is None or r_op.info.name != "reshape":
            return self.result(vid)
        final = self.result(r_op.outs[0])
        t_shape = graph.value(t_op.outs[0]).shape
        flat = self.bind_view(t_op.outs[0], final, N.V_RESHAPE, True)
        inverse = tuple(perm.index(i) for i in range(len(perm)))
        self.tensors[flat].shape = tuple(t_shape)
        self.claim(t_op.pos, r_op.pos)
        return self.bind_view(vid, flat, N.V_TRANSPOSE, False, params=inverse)

    def bind_view(self, vid: int, base: int, viewop: int, contiguous: bool, **kw: Any) -> int:
        v = self.graph.value(vid)
        tid = self.new(
            "view",
            v.dtype,
            v.shape,
            value=vid,
            base=base,
            viewop=viewop,
            contiguous=contiguous,
            **kw,
        )
        self.of_value[vid] = tid
        return tid

    def slice_of(
        self, base: int, shape: Sequence[Any], starts: Sequence[Any], contiguous: bool = False
    ) -> int:
        """A view of ``base`` of extents ``shape`` from ``starts``, unit steps."""
        return self.new(
            "view",
            self.tensors[base].dtype,
            shape,
            base=base,
            viewop=N.V_SLICE,
            contiguous=contiguous,
            params=tuple(starts),
            params2=(1,) * len(shape),
        )

    def contiguous(self, tid: int, pcs: tuple[int, ...] = ()) -> int:
        """``tid`` itself if it is C-contiguous, else a contiguous copy of it."""
        t = self.tensors[tid]
        if t.contiguous:
            return tid
        copy = self.new("temp", t.dtype, t.shape)
        self.emit(Kernel(N.OP_COPY, [tid], [copy], pcs=pcs, label="copy"))
        return copy

    def contiguous_last(self, tid: int, pcs: tuple[int, ...] = ()) -> int:
        """``tid`` if its last axis surely has unit stride (any other strides), else a
        contiguous copy."""
        t = self.tensors[tid]
        if t.contiguous or self._unit_last(t):
            return tid
        return self.contiguous(tid, pcs)

    def _unit_last(self, t: Tensor) -> bool:
        """Whether a view keeps its base's last axis last with step 1 (through transposes
        that move it and move it back: attention's k read from k^T)."""
        axis = len(t.shape) - 1  # the axis of t's last one in the tensor at hand
        while t.kind == "view":
            if t.viewop == N.V_TRANSPOSE:
                axis = t.params[axis]
                assert t.base is not None
                t = self.tensors[t.base]
                continue
            if axis != len(t.shape) - 1:
                return False
            if t.viewop == N.V_SELECT:
                assert t.base is not None
                if t.params[-1] != self.tensors[t.base].ndim - 1:
                    return False
            if t.viewop == N.V_SLICE and t.params2[-1] != 1:
                return False
            if t.viewop == N.V_BROADCAST:
                return False
            if t.viewop == N.V_RESHAPE and self.tensors[t.base or 0].contiguous:
                return True
            # (a reshape of a strided base splits its last axis: `lower_reshape_value`)
            assert t.base is not None
            t = self.tensors[t.base]
            axis = len(t.shape) - 1
        return axis == len(t.shape) - 1

    def emit(self, k: Kernel) -> None:
        self.kernels.append(k)

    # -- the graph --------------------------------------------------------------------------
    def users(self, vid: int) -> list[int]:
        return self.graph.users.get(vid, [])

    def sole_user(self, vid: int) -> Op | None:
        """The one op reading ``vid`` (once), when nothing else does and it does not leave
        the region."""
        users = self.users(vid)
        if len(users) != 1 or vid in self.graph.live_out:
            return None
        op = self.graph.ops[users[0]]
        if op.kind != "call" or op.pos in self.claimed:
            return None
        return op

    def const_array(self, vid: int) -> np.ndarray[Any, Any] | None:
        """The constant a value is (a ``LOAD_CONST`` or layout ops of one), else None."""
        if vid in self.folded:
            return self.folded[vid]
        v = self.graph.value(vid)
        if v.kind == "const":
            op = self.graph.ops[v.producer]
            instr = op.instr
            array = self.constants[instr.const]  # type: ignore[attr-defined]
            self.folded[vid] = array
            return array
        if v.kind == "input":  # a register that only ever holds a LOAD_CONST of the function
            index = self._const_registers().get(v.reg)
            if index is not None:
                self.folded[vid] = self.constants[index]
                return self.folded[vid]
            return None
        if v.kind != "temp" or v.producer < 0:
            return None
        op = self.graph.ops[v.producer]
        if op.kind != "call" or op.info is None or OpFlag.LAYOUT not in op.info.flags:
            return None
        if op.dims_attrs or len(op.ins) != 1 or len(op.outs) != 1:
            return None
        src = self.const_array(op.ins[0])
        if src is None:
            return None
        (out,) = op.info.kernel([src], op.attrs)
        self.folded[vid] = np.asarray(out)
        return self.folded[vid]

    def _const_registers(self) -> dict[Reg, int]:
        """The registers defined once in the function, by ``LOAD_CONST``, and their constant
        index (one scan of the function, at the first question)."""
        found = self._const_regs
        if found is None:
            from shapevm.bytecode.program import LoadConst

            defs: dict[Reg, list[Any]] = {}
            for _, _, instr in self.graph.function.instructions():
                for reg in instr.defs():
                    defs.setdefault(reg, []).append(instr)
            found = {
                reg: d[0].const
                for reg, d in defs.items()
                if len(d) == 1 and isinstance(d[0], LoadConst)
            }
            self._const_regs = found
        return found

    def literals(self, op: Op) -> list[Any]:
        """The operands of an op call as written: value ids for tensors, literals as is."""
        assert isinstance(op.instr, OpCall)
        out: list[Any] = []
        vids = iter(op.ins)
        for x in op.instr.ins:
            out.append(("v", next(vids)) if isinstance(x, Reg) else ("c", x))
        return out

    def scalar(self, kind: str, val: Any) -> float | None:
        """The number an operand of `literals` is: a numeric literal, or a constant of one
        integer or float element; else None."""
        if kind == "c":
            number = isinstance(val, (int, float, np.integer, np.floating))
            return float(val) if number and not isinstance(val, bool) else None
        array = self.const_array(val)
        if array is None or array.size != 1 or array.dtype.kind not in "iuf":
            return None
        return float(array.reshape(())[()])

    def claim(self, *positions: int) -> None:
        self.claimed.update(positions)

    def external(self, op: Op, ins: list[int], out: int, run: Any, label: str = "") -> None:
        """``op`` as one external kernel ``run`` of the executor reading ``ins`` and writing
        ``out``, labelled ``label`` (the op's name by default), and claimed."""
        name = label or (op.info.name if op.info is not None else "external")
        self.emit(Kernel(N.OP_EXTERNAL, ins, [out], obj=run, pcs=(op.pc,), label=name))
        self.claim(op.pos)

    def lower_ahead(self, op: Op) -> bool:
        """Lower ``op`` before its turn, if all it reads is computed, and say whether its
        values are computed now: a chain reads its value further on and joins only
        computed values (``x * 4.0 + concatenate([y, y])``, traced in that order, has the
        concatenation between the product and the sum). Its deferred kernels follow it, as
        in `run`, whose loop skips it when it comes."""
        graph = self.graph
        if op.pos in self.claimed or op.kind != "call" or op.fusible or self._from_dims(op):
            return False
        if not all(v in self.of_value or graph.value(v).kind != "temp" for v in op.ins):
            return False
        try:
            self._lower_op(op, self._lowerings)
        except Unsupported as exc:  # the op's own failure, not the chain's that asked for it
            raise _AheadFailed(str(exc), op.pc if exc.pc is None else exc.pc) from exc
        if not all(v in self.of_value for v in op.outs):
            return False
        self.claim(op.pos)
        for emit in self.deferred.pop(op.pos, ()):
            emit()
        return True

    def defer(self, pos: int, emit: Callable[[], None]) -> None:
        """Call ``emit`` once the op at ``pos`` is lowered (claimed ops included): a kernel
        claimed at an earlier op that reads what that op computes (attention's mask, built
        after ``q @ k^T`` in ONNX's order) is emitted after it."""
        self.deferred.setdefault(pos, []).append(emit)

    # -- the whole region -------------------------------------------------------------------
    def run(self, lowerings: Sequence[Lowering]) -> Lowered:
        self._lowerings = lowerings
        for op in self.graph.ops:
            self._lower_op(op, lowerings)
            for emit in self.deferred.pop(op.pos, ()):
                emit()
        if self.deferred:  # (a lowering defers to an op of the region only)
            raise Unsupported("a kernel waited for an op past the region's end")
        for pos, exc in self.from_dims.items():
            if pos not in self.claimed:  # no pattern took it after all
                raise exc
        return self.finish()

    def _from_dims(self, op: Op) -> bool:
        """Whether ``op`` computes its value from the dimensions alone: ``iota``, a reshape
        or broadcast of such a value, an elementwise op of such values and constants."""
        info = op.info
        if info is None or not (op.fusible or info.name in _FROM_DIMS):
            return False
        return all(
            self.const_array(v) is not None or self.graph.value(v).producer in self.from_dims
            for v in op.ins
        )

    def _lower_op(self, op: Op, lowerings: Sequence[Lowering]) -> None:
        if op.pos in self.claimed:
            return
        self.check()  # an abandoned compile (or a lowering past its timeout) stops here
        if op.kind == "const":
            return  # a tensor only when a kernel reads it (`tensor`): packed weights
            # are read through `const_array`, and need no C-ordered copy of their own
        if op.kind == "resize":
            lower_reshape_value(self, op.ins[0], op.outs[0])
        elif op.kind == "call":
            if not self._from_dims(op):
                self._materialize_inputs(op)
                if op.pos in self.claimed:  # a chain of its operands took it
                    return
            kernels, claimed = len(self.kernels), len(self.claimed)
            failure: Unsupported | None = None
            try:
                taken = any(lowering(self, op) for lowering in lowerings)
            except _AheadFailed as exc:  # an op lowered ahead for this one: its pc
                taken, failure = False, exc
            except Unsupported as exc:
                taken, failure = False, Unsupported(str(exc), op.pc)
            if not taken:
                name = op.info.name if op.info else "?"
                failure = failure or Unsupported(f"{name} has no native kernel", op.pc)
                # A value made from the dimensions alone (a decoder's causal mask) waits: a
                # pattern further on may take it whole (`rowpatterns._causal_where`); a
                # reader that needs it computed fails at its own op. Only when the attempt
                # left nothing behind (no kernel, no claim, no tensor for its result).
                untouched = (
                    len(self.kernels) == kernels
                    and len(self.claimed) == claimed
                    and not any(v in self.of_value for v in op.outs)
                )
                if not (untouched and self._from_dims(op)):
                    raise failure
                self.from_dims[op.pos] = failure
        # alloc/free/shape: the executor sizes everything itself

    def _materialize_inputs(self, op: Op) -> None:
        """Lower the deferred ops (values from the dimensions alone, `_lower_op`) that
        ``op`` reads: no pattern took them before ``op``, which is not one of them, so it
        needs them computed (``where(arange(s) < n, x, 0)`` outside attention)."""
        for v in op.ins:
            p = self.graph.value(v).producer
            if v not in self.of_value and p in self.from_dims and p not in self.claimed:
                self._materialize(self.graph.ops[p])

    def _materialize(self, op: Op) -> None:
        self._materialize_inputs(op)
        if op.pos in self.claimed:
            return
        self.materializing = True
        try:
            taken = any(lowering(self, op) for lowering in self._lowerings)
        except Unsupported:
            taken = False
        finally:
            self.materializing = False
        if taken:
            del self.from_dims[op.pos]

    def _of_argument(self, t: Tensor) -> bool:
        """Whether ``t`` is a region input or a chain of views of one."""
        while t.kind == "view" and t.base is not None:
            t = self.tensors[t.base]
        return t.kind == "input"

    def finish(self) -> Lowered:
        outputs: list[int] = []
        live = sorted(self.graph.live_out)
        # constants stay where they are: the caller's registers get the arrays themselves
        self.const_outputs = [
            (v, self.const_array(v)) for v in live if self.graph.value(v).kind == "const"
        ]
        output_values = [v for v in live if v not in dict(self.const_outputs)]
        perms: list[tuple[int, ...] | None] = []
        shapes: list[tuple[Any, ...] | None] = []
        for vid in output_values:
            tid = self.of_value.get(vid)
            if tid is None and vid in self.blocked:
                tid = self.tensor(vid)
            if tid is None:
                raise Unsupported(f"value {self.graph.value(vid).reg} leaves the region unset")
            t = self.tensors[tid]
            base = self.tensors[t.base] if t.base is not None else None
            perm: tuple[int, ...] | None = None
            reshape: tuple[Any, ...] | None = None
            if t.kind == "temp":
                t.kind = "output"
            elif t.viewop == N.V_TRANSPOSE and base is not None and base.kind == "temp":
                # a transpose of what the region computes (a model's last x.transpose(0, 3,
                # 1, 2)): the computed tensor is the output, returned as NumPy's view of
                # it (copied, the function was slower than interpreted)
                base.kind = "output"
                perm = tuple(int(a) for a in t.params)
                tid = base.id
            elif (
                t.viewop == N.V_RESHAPE and t.contiguous and base is not None
                and base.kind == "temp"
            ):  # fmt: skip
                # a reshape of what the region computes (a pixel shuffle's or a patch
                # embedding's last reshape of a transposed copy): returned as NumPy's
                # reshaped view of it (copied again, 25 us of a 140 us patchify)
                base.kind = "output"
                reshape = tuple(t.shape)
                tid = base.id
            elif self._of_argument(t):
                # an argument or a view of one (x.T, x[1:], a reshape): the executor returns
                # the argument or NumPy's view of it, as the interpreter does (a copy was a
                # pass over it: 25-85 us for 1 MiB against NumPy's 1 us)
                pass
            else:  # a view of a constant or of a copy: the caller gets its own copy
                out = self.new("output", t.dtype, t.shape, value=vid)
                self.emit(Kernel(N.OP_COPY, [tid], [out], label="copy (result)"))
                tid = out
            self.tensors[tid].out_index = len(outputs)
            outputs.append(tid)
            perms.append(perm)
            shapes.append(reshape)
        return Lowered(
            self.tensors,
            self.kernels,
            self.inputs,
            outputs,
            self.input_values,
            output_values,
            tuple(dict.fromkeys(self.patterns)),
            [(v, a) for v, a in self.const_outputs if a is not None],
            perms if any(p is not None for p in perms) else [],
            shapes if any(r is not None for r in shapes) else [],
        )


Lowering = Callable[[RegionLowering, Op], bool]


# -- layout ops: views ------------------------------------------------------------------------
def lower_reshape_value(low: RegionLowering, src: int, out: int) -> None:
    base = low.tensor(src)
    t = low.tensors[base]
    shape = low.graph.value(out).shape
    if not t.contiguous:
        select = _unit_axes_only(t.shape, shape)
        if select is not None:  # adds or drops unit axes: a view of any strides
            low.bind_view(out, base, N.V_SELECT, False, params=select)
            return
        if _splits_last(t.shape, shape):  # [.., n] as [.., a, b]: a view of any strides
            low.bind_view(out, base, N.V_RESHAPE, False)  # (ONNX's Split, then Reshape)
            return
    low.bind_view(out, low.contiguous(base), N.V_RESHAPE, True)


def _splits_last(base: Sequence[Any], shape: Sequence[Any]) -> bool:
    """Whether ``shape`` is ``base`` with its last axis split into several: the view
    exists whatever the base's strides (the executor works them out, `strided_reshape`)."""
    n = len(base)
    if n == 0 or len(shape) <= n:
        return False
    if not all(_equal(a, b) for a, b in zip(base[:-1], shape[: n - 1], strict=True)):
        return False
    product: Any = 1
    for d in shape[n - 1 :]:
        product = product * d
    return _equal(product, base[-1])


def _unit_axes_only(base: Sequence[Any], shape: Sequence[Any]) -> tuple[int, ...] | None:
    """For a reshape that only adds or drops axes of size 1: the base axis of each axis
    (-1 for a new one); None for any other reshape."""
    keep = [i for i, d in enumerate(base) if not _equal(d, 1)]
    select: list[int] = []
    k = 0
    for d in shape:
        if _equal(d, 1):
            select.append(-1)
        elif k < len(keep) and _equal(base[keep[k]], d):
            select.append(keep[k])
            k += 1
        else:
            return None
    return tuple(select) if k == len(keep) else None


def _slice_contiguous(
    base: Tensor, starts: Sequence[Any], steps: Sequence[int], shape: Sequence[Any]
) -> bool:
    """Whether the view of extents ``shape`` from ``starts`` (with ``steps``) of a
    contiguous ``base`` is C-contiguous for every value of the dimensions: past its
    outermost axis of an extent other than 1 (which may start anywhere, unit step), every
    axis must be whole. ``[b, 1, d]`` from ``[b, s, d]`` is not (its rows are ``s * d``
    apart); ``[1, 1, d]`` is."""
    if not base.contiguous:
        return False
    outer = next((i for i, d in enumerate(shape) if not _equal(d, 1)), None)
    if outer is None:
        return True
    return steps[outer] == 1 and all(
        _equal(starts[i], 0) and _equal(shape[i], base.shape[i]) and steps[i] == 1
        for i in range(outer + 1, len(shape))
    )


def _view_enabled(low: RegionLowering, op: Op, *names: str) -> bool:
    """Whether ``op`` is one of ``names`` (any op when none are given) and the capability
    table lets the executor run it as a view or copy (variant ``native_view``)."""
    if op.info is None or (names and op.info.name not in names):
        return False
    dtype = DType.from_numpy(low.graph.value(op.outs[0]).dtype)
    return native_enabled(op.info.name, "native_view", dtype)


def lower_layout(low: RegionLowering, op: Op) -> bool:
    if not _view_enabled(low, op, "transpose", "reshape", "slice", "flip", "broadcast_to"):
        return False
    info = op.info
    assert info is not None
    (src,) = op.ins
    (out,) = op.outs
    base = low.tensor(src)
    if info.name == "reshape":
        lower_reshape_value(low, src, out)
    elif info.name == "transpose":
        perm = transpose_perm(op.attrs, len(low.graph.value(src).shape))
        low.bind_view(out, base, N.V_TRANSPOSE, perm == tuple(range(len(perm))), params=perm)
    elif info.name == "slice":
        starts, steps = op.attrs["start"], tuple(op.attrs["step"])
        if any(not isinstance(s, int) or s < 1 for s in steps):
            raise Unsupported("slice with a step below 1")
        shape = low.graph.value(out).shape
        contiguous = _slice_contiguous(low.tensors[base], starts, steps, shape)
        low.bind_view(out, base, N.V_SLICE, contiguous, params=tuple(starts), params2=steps)
    elif info.name == "flip":  # x[::-1]: a slice from each flipped axis's last element back
        shape = low.graph.value(out).shape
        axes = {a % len(shape) for a in op.attrs["axes"] if not _equal(shape[a], 1)}
        starts = tuple(n - 1 if d in axes else 0 for d, n in enumerate(shape))
        steps = tuple(-1 if d in axes else 1 for d in range(len(shape)))
        contiguous = _slice_contiguous(low.tensors[base], starts, steps, shape)
        low.bind_view(out, base, N.V_SLICE, contiguous, params=starts, params2=steps)
    else:
        low.bind_view(out, base, N.V_BROADCAST, False)
    low.claim(op.pos)
    return True


def lower_take(low: RegionLowering, op: Op) -> bool:
    """``take(x, i, axis)``. With one constant index and a constant extent along ``axis``
    (ONNX's ``Gather`` splitting a fused q/k/v projection): a view, a slice of width 1 that
    then loses the axis when ``i`` is a scalar; the index is checked here, once (a view has
    no run-time bounds check). With int32/int64 indices computed or passed in (an
    embedding lookup, ``table[ids]``): the executor's take kernel, which checks each index
    at the call and fails it naming the first out of range, as the interpreter does."""
    if not _view_enabled(low, op, "take"):
        return False
    src, idx = op.ins
    index = low.const_array(idx)
    axis = op.attrs["axis"]
    base = low.tensor(src)
    shape = low.tensors[base].shape
    if not -len(shape) <= axis < len(shape):
        return False
    if index is None or index.size != 1 or index.ndim > 1:
        return _lower_gather(low, op, base, axis % len(shape))
    axis %= len(shape)
    extent, i = shape[axis], int(index.reshape(()))
    if not isinstance(extent, int) or not -extent <= i < extent:
        return False
    i %= extent
    starts = tuple(i if d == axis else 0 for d in range(len(shape)))
    steps = (1,) * len(shape)
    sliced = tuple(1 if d == axis else n for d, n in enumerate(shape))
    contiguous = _slice_contiguous(low.tensors[base], starts, steps, sliced)
    if index.ndim == 1:
        low.bind_view(op.outs[0], base, N.V_SLICE, contiguous, params=starts, params2=steps)
    else:
        part = low.slice_of(base, sliced, starts, contiguous)
        keep = tuple(d for d in range(len(shape)) if d != axis)
        low.bind_view(op.outs[0], part, N.V_SELECT, False, params=keep)
    low.claim(op.pos)
    return True


def _lower_gather(low: RegionLowering, op: Op, base: int, axis: int) -> bool:
    src, idx = op.ins
    x, i, y = low.graph.value(src), low.graph.value(idx), low.graph.value(op.outs[0])
    if i.dtype not in (np.int32, np.int64) or y.dtype != x.dtype or len(y.shape) > 8:
        return False
    indices = low.tensor(idx)
    out = low.result(op.outs[0])
    kernel = take_kernel(axis)
    low.external(op, [base, indices], out, kernel, "take")
    low.patterns.append("take")
    return True


def lower_take_along(low: RegionLowering, op: Op) -> bool:
    """``take_along_axis(x, idx, axis)`` with int32/int64 indices of the call (the last real
    token's state, ``take_along_axis(h, (lengths - 1)[:, None, None], 1)``; ONNX's
    ``GatherElements``): the executor's kernel, which checks each index and fails the call
    naming the first out of range, as the interpreter does."""
    if not _view_enabled(low, op, "take_along_axis"):
        return False
    src, idx = op.ins
    x, i = low.graph.value(src), low.graph.value(idx)
    if i.dtype not in (np.int32, np.int64) or not x.shape or len(x.shape) > N.MAXDIM:
        return False
    axis = op.attrs["axis"] % len(x.shape)
    run = native.take_along_kernel(axis)
    low.external(op, [low.tensor(src), low.tensor(idx)], low.result(op.outs[0]), run)
    return True


def lower_concatenate(low: RegionLowering, op: Op) -> bool:
    if not _view_enabled(low, op, "concatenate"):
        return False
    (out,) = op.outs
    res = low.result(out)
    shape = low.graph.value(out).shape
    axis = op.attrs["axis"] % len(shape)  # the op keeps a negative axis as it was written
    offset: Any = 0
    for vid in op.ins:
        src = low.tensor(vid)
        piece = low.graph.value(vid).shape
        starts = tuple(offset if i == axis else 0 for i in range(len(shape)))
        view = low.slice_of(res, piece, starts)
        low.emit(Kernel(N.OP_COPY, [src], [view], pcs=(op.pc,), label="concatenate"))
        offset = offset + piece[axis]
    low.claim(op.pos)
    return True


def lower_pad(low: RegionLowering, op: Op) -> bool:
    if not _view_enabled(low, op, "pad"):
        return False
    (src,) = op.ins
    (out,) = op.outs
    lows = op.attrs["low"]
    if any(isinstance(x, int) and x < 0 for x in (*lows, *op.attrs["high"])):
        raise Unsupported("pad with a negative width")
    x = low.tensor(src)
    res = low.result(out)
    low.emit(
        Kernel(
            N.OP_FILL, [], [res], fattr=[float(op.attrs["value"])], pcs=(op.pc,), label="pad (fill)"
        )
    )
    view = low.slice_of(res, low.tensors[x].shape, lows)
    low.emit(Kernel(N.OP_COPY, [x], [view], pcs=(op.pc,), label="pad"))
    low.claim(op.pos)
    return True


def lower_full(low: RegionLowering, op: Op) -> bool:
    if not _view_enabled(low, op, "full"):
        return False
    (out,) = op.outs
    value = op.attrs["value"]
    if not isinstance(value, (int, float, bool)):
        return False
    res = low.result(out)
    low.emit(Kernel(N.OP_FILL, [], [res], fattr=[float(value)], pcs=(op.pc,), label="full"))
    low.claim(op.pos)
    return True


_IOTA_DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int32), np.dtype(np.int64))


def lower_iota(low: RegionLowering, op: Op) -> bool:
    """``iota`` (``arange(s)``: positions, a rotary embedding's angles) as the executor's
    iota instruction, unless only masks read it: a causal mask made from indices alone
    waits for the attention pattern, which takes it whole (`_only_masks`), and is computed
    only when a reader no pattern took needs it (`RegionLowering._materialize`)."""
    if not _view_enabled(low, op, "iota"):
        return False
    (out,) = op.outs
    if low.graph.value(out).dtype not in _IOTA_DTYPES:
        return False
    if not low.materializing and _only_masks(low, out):
        return False
    res = low.result(out)
    low.emit(Kernel(N.OP_IOTA, [], [res], pcs=(op.pc,), label="iota"))
    low.claim(op.pos)
    return True


def lower_dim_value(low: RegionLowering, op: Op) -> bool:
    """``dim_value``, sizes as values (``h.sum(axis=1) / h.shape[1]``, the row stride of a
    diagonal): the executor's sizes kernel over one element broadcast to those sizes, a view
    whose shape the executor evaluates per call like any other. A size that may be negative
    (``s - 5``: a view cannot have it) stays interpreted."""
    if not _view_enabled(low, op, "dim_value"):
        return False
    (out,) = op.outs
    dims = op.attrs["dims"]
    if low.graph.value(out).dtype not in _IOTA_DTYPES or not 1 <= len(dims) <= N.MAXDIM:
        return False
    try:
        if not all(bool(d >= 0) for d in dims):
            return False
    except InconclusiveDimensionOperation:
        return False
    one = low.new("const", np.dtype(np.uint8), (), array=np.zeros((), np.uint8))
    sizes = low.broadcast_view(one, dims)
    low.external(op, [sizes], low.result(out), native.sizes_kernel(), "sizes")
    return True


def _only_masks(low: RegionLowering, vid: int) -> bool:
    """Whether every op that reads ``vid``, through ops computing from the dimensions and
    constants alone, is a ``where``: the value is a mask's, not a tensor anything else
    needs."""
    graph = low.graph
    todo, seen, readers = [vid], set(), 0
    while todo:
        v = todo.pop()
        if v in seen:
            continue
        seen.add(v)
        if v in graph.live_out:
            return False
        for pos in graph.users.get(v, []):
            op = graph.ops[pos]
            readers += 1
            if op.info is not None and op.info.name == "where":
                continue
            if not all(u == v or _from_dims_alone(low, u) for u in op.ins):
                return False
            todo.extend(op.outs)
    return readers > 0


def _from_dims_alone(low: RegionLowering, vid: int) -> bool:
    """Whether ``vid`` is a constant or computed from the dimensions and constants alone
    (``iota``, ``full``, reshapes, broadcasts and elementwise ops of such values)."""
    if low.const_array(vid) is not None:
        return True
    p = low.graph.value(vid).producer
    if p < 0:
        return False
    op = low.graph.ops[p]
    info = op.info
    if op.kind != "call" or info is None or not (op.fusible or info.name in _FROM_DIMS):
        return False
    return all(_from_dims_alone(low, u) for u in op.ins)


_INT_COMPARISONS = ("less", "less_equal", "greater", "greater_equal", "equal", "not_equal")


def _int_fits(x: Any, dtype: Any) -> bool:
    """Whether the literal ``x`` is an integer (not a bool) that ``dtype`` holds."""
    if not isinstance(x, (int, np.integer)) or isinstance(x, bool):
        return False
    limits = np.iinfo(dtype)
    return bool(limits.min <= int(x) <= limits.max)


def _int_const(low: RegionLowering, x: Any, dtype: Any) -> int:
    """The constant tensor of the integer literal ``x`` in ``dtype`` (see `_int_fits`)."""
    return low.new("const", dtype, (), array=np.array(int(x), dtype))


def _read_by_integer_ops(low: RegionLowering, vid: int) -> bool:
    """Whether every op reading ``vid`` gives an int32/int64 result (an integer `where`),
    and something reads it in the region."""
    users = low.users(vid)
    if not users:
        return False
    for pos in users:
        user = low.graph.ops[pos]
        if user.kind != "call" or not user.outs:
            return False
        if any(low.graph.value(o).dtype not in (np.int32, np.int64) for o in user.outs):
            return False
    return True


def lower_int_compare(low: RegionLowering, op: Op) -> bool:
    """A comparison of two int32/int64 tensors, computed or passed in (a length mask,
    ``arange(s)[None, :] < lengths[:, None]``): the executor's exact compare kernel, over
    views of the operands broadcast to the result. A fused chain reads integers as float32
    lanes, exact only against a constant below 2**24 (`chains`), so such a comparison was
    interpreted and cut its function in two."""
    info = op.info
    if info is None or info.name not in _INT_COMPARISONS:
        return False
    operands = low.literals(op)
    tensors = [vid for kind, vid in operands if kind == "v"]
    if len(operands) != 2 or not tensors:
        return False
    values = [low.graph.value(v) for v in tensors]
    if any(v.dtype not in (np.int32, np.int64) for v in values):
        return False
    # Against a scalar below 2**24 a chain takes it, to fuse it with the float ops that
    # read it (`(ids != 0).astype(float32) * x`); a mask only integer ops read
    # (`where(m > 0, cumsum(m, 1) - 1, -1)`) is this kernel's, at a fifth of a chain's time.
    ints_only = _read_by_integer_ops(low, op.outs[0])
    for kind, v in operands:
        array = np.asarray(v) if kind == "c" else low.const_array(v)
        if array is None or array.size != 1:
            continue
        if not ints_only and abs(int(array.reshape(()))) < 2**24:
            return False
    if not all(
        native_enabled(info.name, "native_chain", DType.from_numpy(v.dtype)) for v in values
    ):
        return False
    dtype = values[0].dtype
    # (a float literal: NumPy compares as floats, a chain's; checked before any tensor is made)
    if not all(kind == "v" or _int_fits(x, dtype) for kind, x in operands):
        return False
    (out,) = op.outs
    shape = low.graph.value(out).shape
    ins = [
        low.broadcast_view(low.tensor(x) if kind == "v" else _int_const(low, x, dtype), shape)
        for kind, x in operands
    ]
    res = low.result(out)
    low.external(op, ins, res, native.compare_kernel(info.name))
    return True


def lower_int_arith(low: RegionLowering, op: Op) -> bool:
    """Arithmetic of int32/int64 tensors and integer literals (positions ``ids + 1``, a
    clipped index ``minimum(ids, n - 1)``, ``abs`` and ``-``), casts between the two types (NumPy's
    promotion of int32 with int64) and ``where`` of a bool condition between them
    (padding ids masked, ``where(ids >= 0, ids, 0)``): the executor's exact integer kernel,
    over views of the operands broadcast to the result; it wraps around in the result's
    type, as NumPy does. A fused chain reads integers as float32 lanes, so such an op was
    interpreted and cut its function in two. A literal that does not fit the result's
    type stays interpreted, where NumPy says so."""
    info = op.info
    if info is None or info.name not in INT_ARITHMETIC:
        return False
    (out,) = op.outs
    result = low.graph.value(out)
    if result.dtype not in (np.int32, np.int64):
        return False
    operands = low.literals(op)
    arity = {"cast": 1, "abs": 1, "neg": 1, "where": 3}.get(info.name, 2)
    if len(operands) != arity or all(kind != "v" for kind, _ in operands):
        return False
    for i, (kind, x) in enumerate(operands):  # checked before any tensor is made
        want = (np.bool_,) if info.name == "where" and i == 0 else (np.int32, np.int64)
        if kind == "v":
            dtype = low.graph.value(x).dtype
            if dtype not in want:
                return False
        elif want == (np.bool_,) or not _int_fits(x, result.dtype):
            return False
        else:
            dtype = result.dtype
        if not native_enabled(info.name, "native_chain", DType.from_numpy(dtype)):
            return False
    ins = [
        low.broadcast_view(
            low.tensor(x) if kind == "v" else _int_const(low, x, result.dtype), result.shape
        )
        for kind, x in operands
    ]
    res = low.result(out)
    low.external(op, ins, res, native.int_arith_kernel(info.name))
    return True


def lower_arg(low: RegionLowering, op: Op) -> bool:
    """``argmax``/``argmin`` along one axis (greedy decoding's next token, a router's expert,
    a vote count's class) of float32, float64, an integer or bool: the executor's search
    kernel, which returns the first index of the extreme (a NaN's, if any), as NumPy does.
    Over the flattened operand (``axis=None``) it stays interpreted."""
    info = op.info
    if info is None or info.name not in ("argmax", "argmin"):
        return False
    (src,) = op.ins
    value = low.graph.value(src)
    axis = op.attrs.get("axis")
    if axis is None or not value.shape:
        return False  # the dtypes: the capability table's (`scheduler._SORTED`)
    if not native_enabled(info.name, "native_index", DType.from_numpy(value.dtype)):
        return False
    axis %= len(value.shape)
    tid = low.tensor(src)
    out = low.reduced_result(op, (axis,))
    low.external(op, [tid], out, native.arg_kernel(info.name, axis))
    return True


def lower_int_reduce(low: RegionLowering, op: Op) -> bool:
    """``sum``, ``max``, ``min`` or ``prod`` of an int32/int64 tensor over any axes (the
    lengths of a padding mask, ``mask.sum(axis=1)``), or a count of a bool one (``(x >
    0).sum(-1)``, into int64 as NumPy's): the executor's integer reduction,
    exact and wrapping around in the result's type as NumPy's, over a view that puts the
    reduced axes last (a chain reads integers as float32 lanes, exact only below 2**24)."""
    info = op.info
    if info is None or info.name not in INT_REDUCTIONS:
        return False
    (src,) = op.ins
    x, y = low.graph.value(src), low.graph.value(op.outs[0])
    ints = (np.dtype(np.int32), np.dtype(np.int64))
    if x.dtype not in (*ints, np.bool_) or y.dtype not in ints or not x.shape:
        return False
    if not native_enabled(info.name, "native_chain", DType.from_numpy(x.dtype)):
        return False
    nd = len(x.shape)
    axis = op.attrs.get("axis")
    axes = tuple(range(nd)) if axis is None else tuple(sorted({a % nd for a in axis}))
    kept = tuple(d for d in range(nd) if d not in axes)
    tid = low.tensor(src)
    if kept + axes != tuple(range(nd)):  # the reduced axes last, as a view
        shape = tuple(x.shape[d] for d in kept + axes)
        tid = low.new("view", x.dtype, shape, base=tid, viewop=N.V_TRANSPOSE,
                      params=kept + axes, contiguous=False)  # fmt: skip
    out = low.reduced_result(op, axes)
    run = native.int_reduce_kernel(info.name, len(kept), nd)
    low.external(op, [tid], out, run)
    return True


def lower_argsort(low: RegionLowering, op: Op) -> bool:
    """``argsort`` along one axis of the dtypes the capability table lists for it (floats,
    signed integers, uint8, bool: a router's or a beam's top k, ``argsort(-p)[..., :k]``):
    the executor's stable radix sort of each line's indices, NaN last ascending and first
    descending, as the interpreter's; only the first k of each line when the readers take
    no more (`_first_taken`)."""
    if op.info is None or op.info.name != "argsort":
        return False
    (src,) = op.ins
    x = low.graph.value(src)
    if not x.shape:
        return False
    if not native_enabled("argsort", "native_index", DType.from_numpy(x.dtype)):
        return False
    axis = op.attrs["axis"] % len(x.shape)
    first = _first_taken(low, op, axis)
    run = native.argsort_kernel(axis, bool(op.attrs["descending"]), first)
    label = f"argsort (first {first})" if first else "argsort"
    low.external(op, [low.tensor(src)], low.result(op.outs[0]), run, label)
    return True


def _first_taken(low: RegionLowering, op: Op, axis: int) -> int:
    """How many positions of each line of ``argsort``'s result are read, when every reader
    is a slice of its first positions along the axis (a top k, ``argsort(-p)[..., :k]``) and
    the result does not leave the region: the kernel then selects those (at most 64) and
    does not sort the line; 0 (the whole line) otherwise."""
    graph = low.graph
    (vid,) = op.outs
    if vid in graph.live_out:
        return 0
    most = 0
    for pos in graph.users.get(vid, ()):
        user = graph.ops[pos]
        if user.info is None or user.info.name != "slice":
            return 0
        start, step = user.attrs["start"][axis], user.attrs["step"][axis]
        k = graph.value(user.outs[0]).shape[axis]
        if not (isinstance(start, int) and start == 0 and step == 1 and isinstance(k, int)):
            return 0
        most = max(most, k)
    n = graph.value(vid).shape[axis]
    return most if 0 < most <= 64 and not (isinstance(n, int) and most >= n) else 0


def lower_cast(low: RegionLowering, op: Op) -> bool:
    """A cast a chain does not read (a uint8 image to float32, float16 in and out, float32
    to float64, a quantized float32 to int8, int8 ids to int64): the executor's cast kernel,
    which converts between any two of its dtypes as NumPy's ``astype`` does on x86-64 (a
    float into an integer truncated, a NaN or a value out of range as the processor's
    conversion gives it). Casts a chain reads (int64 ids to float32, a comparison to
    float32) are left to it, which fuses them with what follows."""
    from shapevm.jit.backend.chains import tile_cast

    if op.info is None or op.info.name != "cast":
        return False
    (src,) = op.ins
    x, y = low.graph.value(src).dtype, low.graph.value(op.outs[0]).dtype
    if tile_cast(x, y) or y not in N.DTYPE_CODES:  # (no uint16/32/64 tensors in the executor)
        return False
    if not native_enabled("cast", "native_chain", DType.from_numpy(x)):  # the sources listed
        return False
    low.external(op, [low.tensor(src)], low.result(op.outs[0]), native.cast_kernel())
    return True


def lower_cumsum(low: RegionLowering, op: Op) -> bool:
    """``cumsum`` along one axis (positions from a padding mask, ``cumsum(mask, 1) - 1``;
    ONNX's ``CumSum``, exclusive or reversed) of float32, float64, int32 or int64: the
    executor's scan kernel, which adds in NumPy's order (float32 sums round as its do) and
    wraps integers around in their type."""
    if op.info is None or op.info.name != "cumsum":
        return False
    (src,) = op.ins
    (out,) = op.outs
    x = low.graph.value(src)
    if low.graph.value(out).dtype != x.dtype or not x.shape:
        return False
    if not native_enabled("cumsum", "native_index", DType.from_numpy(x.dtype)):
        return False
    axis = op.attrs["axis"] % len(x.shape)
    scan = native.scan_kernel(axis, bool(op.attrs["exclusive"]), bool(op.attrs["reverse"]))
    low.external(op, [low.tensor(src)], low.result(out), scan, "cumsum")
    return True


# -- matrix products ----------------------------------------------------------------------------
_PROBE = np.concatenate([np.linspace(-8.0, 8.0, 161), [-0.3, -0.1, -1e-3, 1e-3, 0.1, 0.3]])


@functools.cache
def _act_reference(name: str) -> np.ndarray[Any, Any]:
    """The activation ``name`` on the probe values."""
    h = _PROBE
    if name == "relu":
        return np.asarray(np.maximum(h, 0.0))
    if name == "gelu_tanh":
        return 0.5 * h * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * h**3)))
    if name == "gelu_erf":
        erf = np.vectorize(math.erf)
        return 0.5 * h * (1.0 + erf(h / math.sqrt(2.0)))  # type: ignore[no-any-return]
    if name == "silu":
        return h / (1.0 + np.exp(-h))  # type: ignore[no-any-return]
    if name == "sigmoid":
        return 1.0 / (1.0 + np.exp(-h))  # type: ignore[no-any-return]
    if name == "tanh":
        return np.tanh(h)  # type: ignore[no-any-return]
    if name == "hard_swish":
        return h * np.clip(h + 3.0, 0.0, 6.0) / 6.0
    if name == "relu6":
        return np.asarray(np.clip(h, 0.0, 6.0))
    raise ValueError(f"no float64 reference for activation {name!r}")


def _elementwise_of(low: RegionLowering, op: Op, shape: Sequence[Any]) -> bool:
    """An elementwise op of an activation: float32, or a comparison that a ``where`` of
    the activation reads (ONNX's LeakyRelu is ``where(x < 0, x * a, x)``)."""
    info = op.info
    if info is None:
        return False
    dtype = low.graph.value(op.outs[0]).dtype
    return (
        op.fusible
        and (dtype == F32 or (OpFlag.COMPARISON in info.flags and dtype == np.bool_))
        and op.pos not in low.claimed
        and _shape_equal(low.graph.value(op.outs[0]).shape, shape)
        and native_enabled(info.name, "native_chain")
    )


def match_activation(low: RegionLowering, h: int) -> tuple[Activation, list[int], int] | None:
    """An activation computed from ``h`` alone by the elementwise ops after it: (its name,
    or ``("leaky_relu", slope)``; the ops' positions; the value holding the result)."""
    graph = low.graph
    shape = graph.value(h).shape
    members: list[int] = []
    inside = {h}
    # the readers of the values found so far, in program order (a reader comes after what
    # it reads, so an op is looked at once every member before it is known)
    pending = list(low.users(h))
    heapq.heapify(pending)
    seen = set(pending)
    while pending:
        op = graph.ops[heapq.heappop(pending)]
        if not _elementwise_of(low, op, shape):
            continue
        tensors = set(op.ins) - _scalar_consts(low, op)  # ONNX's scalars are rank-0 tensors
        if tensors and tensors <= inside:
            members.append(op.pos)
            inside.add(op.outs[0])
            for u in low.users(op.outs[0]):
                if u not in seen:
                    seen.add(u)
                    heapq.heappush(pending, u)
    best: tuple[Activation, list[int], int] | None = None
    for end in members:
        chosen = probe.ancestors(graph, members, end)
        produced = {graph.ops[p].outs[0] for p in chosen}
        exit_value = graph.ops[end].outs[0]
        closed = (
            all(u in chosen for v in produced - {exit_value} for u in low.users(v))
            and all(u in chosen for u in low.users(h))
            and h not in graph.live_out
        )
        if not closed or any(v in graph.live_out for v in produced - {exit_value}):
            continue
        name = _probe(low, h, chosen)
        if name is not None:
            best = (name, chosen, exit_value)
    return best


def _scalar_consts(low: RegionLowering, op: Op) -> set[int]:
    """The operands of ``op`` that are constants holding one value."""
    out = set()
    for vid in op.ins:
        array = low.const_array(vid)
        if array is not None and array.size == 1:
            out.add(vid)
    return out


def _probe(low: RegionLowering, h: int, chosen: Sequence[int]) -> Activation | None:
    with np.errstate(all="ignore"):
        try:
            got = probe.evaluate(low, {h: _PROBE.copy()}, chosen)
        except Exception:  # an op that does not evaluate in float64: not an activation
            return None
    for name in ACTIVATIONS:  # leaky_relu has a slope to find (below)
        if name in ("none", "leaky_relu"):
            continue
        if probe.close(got, _act_reference(name)):
            return name
    # leaky ReLU (max(h, a * h), where(h > 0, h, a * h)...): the slope that h = -8 gives
    with np.errstate(all="ignore"):  # (a huge one overflows float32: not a leaky ReLU)
        slope = float(np.float32(got[0] / _PROBE[0]))
        leaky = np.where(_PROBE < 0, slope * _PROBE, _PROBE)
    if math.isfinite(slope) and slope != 1.0 and probe.close(got, leaky):
        return ("leaky_relu", slope)
    return None


def act_name(act: Activation) -> str:
    """The name of an activation (``leaky_relu`` for ``("leaky_relu", slope)``)."""
    return act if isinstance(act, str) else act[0]


def act_label(act: Activation) -> str:
    """``+name`` for a kernel's label (with a leaky ReLU's slope), empty for none."""
    if isinstance(act, tuple):
        return f"+{act[0]}({act[1]:g})"
    return "" if act == "none" else f"+{act}"


def _residual_of(
    low: RegionLowering, op: Op, h: int, kinds: tuple[str, ...] = ("add",)
) -> int | None:
    """The other operand of ``op`` when ``op`` combines ``h`` with a computed float32 value
    of its shape by one of ``kinds`` (``add``: a residual; ``mul``: a gate), else None."""
    if op.info is None or op.info.name not in kinds or len(op.ins) != 2:
        return None
    if not native_enabled(op.info.name, "native_chain"):
        return None
    other = op.ins[1] if op.ins[0] == h else op.ins[0]
    computed = other in low.of_value or other in low.blocked
    if other == h or (not computed and low.graph.value(other).kind != "input"):
        return None
    v, hv = low.graph.value(other), low.graph.value(h)
    if v.dtype != F32 or not _shape_equal(v.shape, hv.shape) or low.const_array(other) is not None:
        return None
    return other


def lower_dense(low: RegionLowering, op: Op) -> bool:
    """``x @ W`` with a constant ``W``, and its bias, activation and residual (added) or
    gate (multiplied: the product of a gated linear unit, whose other branch came first)."""
    if op.info is None or op.info.name != "matmul":
        return False
    x_v, w_v = op.ins
    w = low.const_array(w_v)
    x = low.graph.value(x_v)
    if w is None or w.ndim != 2 or w.dtype != F32 or x.dtype != F32 or len(x.shape) < 1:
        return False
    if not native_enabled("matmul", "native_dense"):
        return False
    n = w.shape[1]
    if n == 1:
        return _lower_matvec(low, op, w)
    (h,) = op.outs
    chain = [op.pos]
    act: Activation = "none"
    # per-column affine ops after it (a bias, a scale, a batch norm written out) fold into
    # the packed weights and the bias (see `affine`)
    folded = affine.fold(low, h, n, affine.last_axis, w, 1, None)
    h, w, bias = folded.h, folded.weights, folded.bias
    chain += folded.positions
    found = match_activation(low, h)
    if found is not None:
        act, positions, h = found
        chain += positions
    residual, gated = None, False
    user = low.sole_user(h)
    if user is not None and (r := _residual_of(low, user, h, ("add", "mul"))) is not None:
        residual, h, gated = r, user.outs[0], user.info is not None and user.info.name == "mul"
        chain.append(user.pos)
    packed = pack_dense(w, bias)
    xt = low.contiguous(low.tensor(x_v), (op.pc,))
    ins = [xt]
    if residual is not None:
        ins.append(low.contiguous(low.tensor(residual), (op.pc,)))
    out = low.result(h)
    label = "dense" + ("+bias" if bias is not None else "") + act_label(act)
    label += "" if residual is None else "*gate" if gated else "+residual"
    pcs = tuple(sorted(low.graph.ops[p].pc for p in chain))
    low.emit(
        Kernel(
            N.OP_DENSE,
            ins,
            [out],
            iattr=[ACTIVATIONS.index(act_name(act)), int(gated)],
            fattr=[1.0, 0.0 if isinstance(act, str) else act[1]],
            obj=packed,
            pcs=pcs,
            label=label,
            inplace=((0, 1),) if residual is not None else (),
        )
    )
    low.claim(*chain)
    low.patterns.append("dense")
    return True


def _lower_matvec(low: RegionLowering, op: Op, w: np.ndarray[Any, Any]) -> bool:
    """``x @ w`` with a constant ``w`` of one column (``img @ [0.299, 0.587, 0.114]``, a
    score head ``h @ v``): each row's dot product, as one pass of the tile interpreter that
    multiplies by the column and sums over the last axis; the dense kernel computes panels
    of 16 or 32 columns, and took 179 us on [8, 96, 96, 3] against NumPy's 52 (this: 57).
    What follows (a bias, an activation) is a chain of its own."""
    from shapevm.jit.backend.chains import Chain, Node
    from shapevm.jit.backend.tiles import tile_kernel

    if not native_enabled("mul", "native_chain") or not native_enabled("sum", "native_chain"):
        return False
    x_v = op.ins[0]
    shape = tuple(low.graph.value(x_v).shape)
    column = low.new("const", F32, (w.shape[0],), array=np.ascontiguousarray(w[:, 0]))
    chain = Chain(
        shape,
        [low.tensor(x_v), column],
        [Node("mul", (("in", 0), ("in", 1)), F32, {}, shape)],
        [],
        input_dtypes=[F32, F32],
    )
    chain.reduce, chain.reduce_axes, chain.keepdims = "sum", 1, True
    out = low.result(op.outs[0])
    chain.outputs.append((0, out))
    k = Kernel(N.OP_EXTERNAL, [*chain.inputs], [out], obj=tile_kernel(chain), pcs=(op.pc,),
               label="matvec[1]")  # fmt: skip
    k.chain = chain
    low.emit(k)
    low.claim(op.pos)
    low.patterns.append("dense")
    return True


def _scale_of(low: RegionLowering, op: Op, h: int) -> float | None:
    """The factor ``op`` scales ``h`` by (``h * c``, ``c * h``, ``h / c``), for ``c`` a
    literal or a one-element float constant (ONNX's ``Div(scores, sqrt_d)`` initializer) that
    changes neither the shape nor the dtype of ``h``; else None. ``h / c`` becomes the factor
    ``1 / c``: exact for a power of two, otherwise about an ulp from the interpreter's
    quotient (float32 rounding of a product instead of a division)."""
    if op.info is None or op.info.name not in ("mul", "div"):
        return None
    lits = low.literals(op)
    if len(lits) != 2 or lits.count(("v", h)) != 1:
        return None
    ((kind, c),) = [lit for lit in lits if lit != ("v", h)]
    if kind == "v":
        array = low.const_array(c)
        out, scaled = low.graph.value(op.outs[0]), low.graph.value(h)
        if (
            array is None
            or array.size != 1
            or array.dtype.kind != "f"
            or out.dtype != F32
            or not _shape_equal(out.shape, scaled.shape)
        ):
            return None
        c = array.reshape(())[()]
    elif kind != "c":
        return None
    if op.info.name == "mul":
        return float(c)
    if lits[0] == ("v", h) and float(c) != 0.0:
        return 1.0 / float(c)
    return None


def lower_matmul(low: RegionLowering, op: Op) -> bool:
    """A product of two activations (batched, broadcast), with a following scale."""
    if op.info is None or op.info.name != "matmul":
        return False
    a_v, b_v = op.ins
    a, b = low.graph.value(a_v), low.graph.value(b_v)
    if a.dtype != F32 or b.dtype != F32 or len(a.shape) < 2 or len(b.shape) < 2:
        return False
    if not native_enabled("matmul", "native_matmul"):
        return False
    (h,) = op.outs
    chain = [op.pos]
    alpha = 1.0
    user = low.sole_user(h)
    if user is not None and (s := _scale_of(low, user, h)) is not None:
        alpha, h = s, user.outs[0]
        chain.append(user.pos)
    ins = [low.tensor(a_v), low.tensor(b_v)]
    out = low.result_through_layout(h)
    pcs = tuple(sorted(low.graph.ops[p].pc for p in chain))
    low.emit(
        Kernel(
            N.OP_MATMUL,
            ins,
            [out],
            fattr=[alpha],
            pcs=pcs,
            label="matmul" + (f"*{alpha:g}" if alpha != 1.0 else ""),
        )
    )
    low.claim(*chain)
    low.patterns.append("matmul")
    return True


def lower_int_matmul(low: RegionLowering, op: Op) -> bool:
    """A product of int32/int64 tensors (a path count over an int adjacency, ``A @ A``; a
    co-occurrence count ``X.T @ X``), batched and broadcast: the executor's integer
    product, added in 64 bits and wrapped into the result's type as NumPy's. A chain reads
    integers as float32 lanes, so such a product stayed interpreted and cut its function."""
    if op.info is None or op.info.name != "matmul":
        return False
    a_v, b_v = op.ins
    a, b = low.graph.value(a_v), low.graph.value(b_v)
    (out,) = op.outs
    y = low.graph.value(out)
    ints = (np.dtype(np.int32), np.dtype(np.int64))
    if a.dtype not in ints or b.dtype not in ints or y.dtype not in ints:
        return False
    if len(a.shape) < 2 or len(b.shape) < 2 or len(y.shape) > N.MAXDIM:
        return False  # (a 1-D operand's product drops an axis: not this kernel's)
    if not all(
        native_enabled("matmul", "native_matmul", DType.from_numpy(d)) for d in (a.dtype, b.dtype)
    ):
        return False
    batch = tuple(y.shape[:-2])
    ins = [
        low.broadcast_view(low.tensor(a_v), (*batch, *a.shape[-2:])),
        low.broadcast_view(low.tensor(b_v), (*batch, *b.shape[-2:])),
    ]
    low.external(op, ins, low.result(out), native.int_matmul_kernel(), label="matmul (int)")
    return True


def lower_region(
    graph: RegionGraph,
    constants: Sequence[np.ndarray[Any, Any]],
    lowerings: Sequence[Lowering],
    check: Callable[[], None] = lambda: None,
) -> Lowered:
    """The region as executor kernels, by ``lowerings`` in their order (`registry.LOWERINGS`
    or a selection of it); `Unsupported` if an op cannot be lowered."""
    return RegionLowering(graph, constants, check).run(lowerings)


__all__ = [
    "Lowering",
    "RegionLowering",
    "Unsupported",
    "lower_region",
    "match_activation",
]
