"""The tracer: runs a Python function on `Tracer` arrays and records bytecode.

A `TraceContext` owns the function being built: its scope (symbolic dimensions), its
blocks, its registers and its constants. Every array operation goes through `bind_op`,
which reads the op's row in the op table, applies the shape and dtype rules to the
operands, decides the conditions the rule needs with the symbolic engine (an undecided or
false condition is a `TracingError` at trace time, never a failure at run time) and
appends one ``OP_CALL``. NumPy arrays the function closes over become constants; Python
scalars become literals. Operations on plain NumPy arrays only (no tracer involved) run
eagerly with the op's reference kernel, as JAX folds constants.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from shapevm.bytecode.isa import Reg
from shapevm.bytecode.program import (
    BindInputs,
    Block,
    Instr,
    LoadConst,
    OpCall,
    Operand,
    TensorType,
)
from shapevm.bytecode.shape_expr import Verdict, decide
from shapevm.frontend.errors import EscapedTracerError, TracingError
from shapevm.ops import (
    AttrKind,
    AttrValue,
    Condition,
    DType,
    Dynamic,
    OpFlag,
    OpInfo,
    RuleAttr,
    ShapeRuleError,
    SymDim,
    get_op,
)
from shapevm.shapes import DimExpr, InconclusiveDimensionOperation, SymbolicScope
from shapevm.shapes.compare import TraceHooks, trace_hooks

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_local = threading.local()


def current_trace() -> TraceContext | None:
    """The innermost active trace of this thread, if any."""
    stack: list[TraceContext] = getattr(_local, "stack", [])
    return stack[-1] if stack else None


def user_location() -> str | None:
    """``file:line`` of the innermost frame outside the shapevm package, or the source the
    active trace names (`TraceContext.source`, e.g. the ONNX node being imported)."""
    ctx = current_trace()
    if ctx is not None and ctx.source is not None:
        return ctx.source
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_PKG_DIR):
            return f"{os.path.basename(filename)}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return None


def user_error(what: str, *, expected: str = "", found: str = "", fix: str = "") -> TracingError:
    """A `TracingError` located at the user's line being traced (`user_location`)."""
    return TracingError(what, expected=expected, found=found, fix=fix, loc=user_location() or "")


def ttype(dt: DType, shape: Sequence[Any]) -> TensorType:
    """A bytecode type for a dtype and symbolic dimensions (kept as canonical text)."""
    return TensorType(dt, tuple(d if isinstance(d, (int, Dynamic)) else str(d) for d in shape))


def fmt_shape(shape: Sequence[Any]) -> str:
    inner = ", ".join(str(d) for d in shape)
    return f"({inner},)" if len(shape) == 1 else f"({inner})"


class DimPredicate:
    """A comparison of symbolic dimensions that the engine cannot decide at trace time.

    Only `shapevm.lax.cond` accepts it (the branch is then chosen when the program runs);
    anything else that needs a Python ``bool`` gets the engine's own
    `InconclusiveDimensionOperation`.
    """

    __slots__ = ("error", "lhs", "op", "rhs")

    def __init__(self, lhs: DimExpr, op: str, rhs: Any, error: Exception) -> None:
        self.lhs, self.op, self.rhs, self.error = lhs, op, rhs, error

    def __bool__(self) -> bool:
        raise self.error

    def __repr__(self) -> str:
        return f"DimPredicate({self.lhs} {self.op} {self.rhs})"


class TraceContext:
    """The function under construction."""

    def __init__(self, scope: SymbolicScope, name: str) -> None:
        self.scope = scope
        self.name = name
        self.active = True
        self._next_tensor = 0
        self._next_shape = 0
        self._next_label = 1
        self.prologue: list[Instr] = []  # BIND_INPUTS and constants: always dominate uses
        self.blocks: list[Block] = []
        self.label = "L0"
        # the fori_loop body or cond branch being traced (0: the function's own code);
        # a traced array records the one it was made in (`Tracer.region`)
        self.region = 0
        self._regions = 0
        self.instrs: list[Instr] = []
        self.constants: list[np.ndarray[Any, Any]] = []
        self._const_regs: dict[int, Tracer] = {}
        self._keepalive: list[Any] = []
        self.dim_regs: dict[str, Reg] = {}
        # where the instructions being emitted come from, when not from Python source
        self.source: str | None = None

    # -- registers and blocks ---------------------------------------------------------------
    @contextmanager
    def inner_region(self) -> Iterator[None]:
        """Trace a fori_loop body or a cond branch: arrays made inside belong to it."""
        outer = self.region
        self._regions += 1
        self.region = self._regions
        try:
            yield
        finally:
            self.region = outer

    def new_tensor(self) -> Reg:
        reg = Reg.tensor(self._next_tensor)
        self._next_tensor += 1
        return reg

    def new_shape(self) -> Reg:
        reg = Reg.shape(self._next_shape)
        self._next_shape += 1
        return reg

    def new_label(self) -> str:
        label = f"L{self._next_label}"
        self._next_label += 1
        return label

    def emit(self, instr: Instr) -> None:
        if not self.active:
            raise EscapedTracerError(_ESCAPED)
        self.instrs.append(instr)

    def end_block(self, terminator: Instr, next_label: str | None) -> None:
        """Close the current block with ``terminator`` and start ``next_label``."""
        self.instrs.append(terminator)
        self.blocks.append(Block(self.label, tuple(self.instrs)))
        self.instrs = []
        if next_label is not None:
            self.label = next_label

    def bind_dims(self, names: Sequence[str]) -> None:
        """``BIND_INPUTS``: one shape register per dimension variable."""
        if not names:
            return
        regs = tuple(self.new_shape() for _ in names)
        self.dim_regs = dict(zip(names, regs, strict=True))
        self.prologue.append(BindInputs(regs, tuple(names)))

    def finish_blocks(self) -> tuple[Block, ...]:
        blocks = list(self.blocks)
        if blocks:
            first = blocks[0]
            blocks[0] = Block(first.label, (*self.prologue, *first.instrs))
        return tuple(blocks)

    # -- constants ------------------------------------------------------------------------
    def const(self, array: np.ndarray[Any, Any]) -> Tracer:
        """The tracer of a constant array (loaded once, in the entry block)."""
        key = id(array)
        hit = self._const_regs.get(key)
        if hit is not None:
            return hit
        arr = np.asarray(array)
        if arr.dtype.byteorder not in ("=", "|", "<"):
            arr = arr.astype(arr.dtype.newbyteorder("="))
        try:
            dtype = DType.from_numpy(arr.dtype)
        except ValueError:
            raise user_error(
                f"cannot use an array of dtype {arr.dtype} as a constant",
                expected="bool, signed or unsigned integers, f16, f32 or f64",
                found=f"a closed-over array of dtype {arr.dtype} and shape {arr.shape}",
                fix="convert it with .astype() before tracing",
            ) from None
        index = len(self.constants)
        self.constants.append(arr)
        reg = self.new_tensor()
        const_type = TensorType(dtype, tuple(int(d) for d in arr.shape))
        self.prologue.append(LoadConst(reg, index, const_type))
        shape = tuple(int(d) for d in arr.shape)
        tracer = Tracer(self, reg, dtype, shape, shared="a NumPy array")
        self._const_regs[key] = tracer
        self._keepalive.append(array)  # ids stay unique while the trace lives
        return tracer

    def made(self, array: np.ndarray[Any, Any]) -> Tracer:
        """An array the function made whose value is known now (``snp.zeros((4, 3))``, an
        ``eye``, what ops on such arrays give): a constant of the program that behaves as
        the NumPy array it stands for (ops on known values are computed now, `float()` and
        `if` read it, NumPy may convert it) and, being the function's own, takes
        assignments (``y[:, 0] = x``), after which its value is the program's."""
        arr = np.asarray(array)
        try:
            dtype = DType.from_numpy(arr.dtype)
        except ValueError:
            return self.const(arr)  # const() says what is wrong with it
        return Tracer(self, None, dtype, tuple(int(d) for d in arr.shape), const=arr)


_ESCAPED = (
    "a traced array was used after the function that made it finished tracing; "
    "return it from the function instead of storing it outside"
)


@contextmanager
def tracing(ctx: TraceContext) -> Iterator[TraceContext]:
    stack: list[TraceContext] = getattr(_local, "stack", None) or []
    _local.stack = stack
    stack.append(ctx)
    try:
        with trace_hooks(_HOOKS):
            yield ctx
    finally:
        stack.pop()
        ctx.active = False


def _dim_nonint_operand(dim: DimExpr, other: Any, method: str) -> Any:
    """A dimension meeting a float or an array becomes an array (as in JAX)."""
    from shapevm.numpy import asarray

    if current_trace() is None:
        return NotImplemented
    arr = asarray(dim)
    return getattr(arr, method)(other)


def _dim_inconclusive(lhs: DimExpr, op: str, rhs: Any, error: Exception) -> Any:
    if current_trace() is None:
        raise error
    return DimPredicate(lhs, op, rhs, error)


_HOOKS = TraceHooks(_dim_nonint_operand, _dim_inconclusive)


# ---------------------------------------------------------------------------------------
# Tracer


class Tracer:
    """An array inside a traced function: a register with a dtype and a symbolic shape.

    The methods and operators mirror NumPy's (see `shapevm.numpy`).
    """

    __slots__ = ("__weakref__", "_const", "_reg", "base", "ctx", "dt", "region", "shape",
                 "shared", "views")  # fmt: skip
    __array_priority__ = 1000

    def __init__(
        self,
        ctx: TraceContext,
        reg: Reg | None,
        dt: DType,
        shape: tuple[SymDim, ...],
        const: np.ndarray[Any, Any] | None = None,
        shared: str = "",
    ) -> None:
        self.ctx = ctx
        self._reg = reg  # None: a made array's constant, loaded when an op first reads it
        self.dt = dt
        self.shape = shape
        self._const = const
        # for `methods.setitem`, which assigns only where NumPy would change this array
        # alone: why another array shares its memory ("" if none: "an argument", "a view",
        # "a NumPy array"); a view's `base` (the array whose memory it shares); the views
        # of an array (weak: a view no name holds any more cannot see an assignment)
        self.shared = shared
        self.base: Tracer | None = None
        self.views: list[weakref.ref[Tracer]] | tuple[()] = ()  # a list from the first view
        self.region = ctx.region

    @property
    def reg(self) -> Reg:
        """The register holding the array (a made array's constant is loaded when first
        read: one whose value only ever fed other known values costs the program nothing)."""
        if self._reg is None:
            assert self._const is not None
            self._reg = self.ctx.const(self._const).reg
        return self._reg

    @reg.setter
    def reg(self, reg: Reg) -> None:
        self._reg = reg

    @property
    def dtype(self) -> np.dtype[Any]:
        out: np.dtype[Any] = self.dt.numpy.newbyteorder("=")
        return out

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> Any:
        out: Any = 1
        for d in self.shape:
            out = out * d
        return out

    def __repr__(self) -> str:
        return f"Traced<{self.dt}[{', '.join(str(d) for d in self.shape)}]>"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d traced array")
        d = self.shape[0]
        if isinstance(d, int):
            return d
        raise InconclusiveDimensionOperation(
            f"len() of a traced array whose first dimension is symbolic ({d}): len() must "
            "return an int. Use x.shape[0] instead, which stays symbolic."
        )


# ---------------------------------------------------------------------------------------
# Binding ops


def _attr_for_rule(kind: AttrKind, value: Any) -> Any:
    if kind is AttrKind.DIMS:
        return tuple(value)
    return value


def _attr_for_bytecode(kind: AttrKind, value: Any) -> AttrValue:
    if kind is AttrKind.DIMS:
        return tuple(d if isinstance(d, int) else str(d) for d in value)
    if kind is AttrKind.INTS:
        return tuple(int(v) for v in value)
    if kind is AttrKind.FLOAT:
        return float(value)
    out: AttrValue = value
    return out


def _is_symbolic(value: Any) -> bool:
    if isinstance(value, DimExpr):
        return True
    if isinstance(value, tuple):
        return any(isinstance(v, DimExpr) for v in value)
    return False


def _operand_text(i: int, shapes: Sequence[Sequence[SymDim]], dtypes: Sequence[Any]) -> str:
    dt = dtypes[i]
    return f"operand {i} ({dt or 'scalar'}[{', '.join(str(d) for d in shapes[i])}])"


def _fill(text: str, shapes: Sequence[Sequence[SymDim]], dtypes: Sequence[Any]) -> str:
    names = [_operand_text(i, shapes, dtypes) for i in range(len(shapes))]
    try:
        return text.format(*names)
    except (IndexError, KeyError, ValueError):
        return text


def _simpler_constraint(lhs: SymDim, rel: str, rhs: SymDim) -> str | None:
    """``min(64, seq) == seq`` holds exactly when ``seq <= 64`` (a table sliced to a
    sequence length): the constraint a person would write, where there is one."""
    if rel != "==":
        return None
    for a, b in ((lhs, rhs), (rhs, lhs)):
        parts = a.min_max() if isinstance(a, DimExpr) else None
        if parts is None:
            continue
        op, x, y = parts
        for this, other in ((x, y), (y, x)):
            if this is b or (isinstance(this, DimExpr) and isinstance(b, DimExpr) and this == b):
                return f"{b} {'<=' if op == 'min' else '>='} {other}"
    return None


def _divisibility_constraints(lhs: SymDim, rhs: SymDim) -> list[str] | None:
    """``16*b*floordiv(s, 2) == 8*b*s`` (a reshape into pairs) holds exactly when
    ``mod(s, 2) == 0``; an image cut into patches needs one such constraint per side. The
    fewest constraints ``mod(x, c) == 0`` on the equation's quotients that make its two
    sides equal, if there are any."""
    from shapevm.shapes import expr as E

    sides = (lhs, rhs)
    if not all(isinstance(d, (int, DimExpr)) for d in sides) or all(
        isinstance(d, int) for d in sides
    ):
        return None  # a data-dependent side, or two numbers
    assert isinstance(lhs, (int, DimExpr)) and isinstance(rhs, (int, DimExpr))
    diff = E.poly_add(E.as_poly(lhs), E.as_poly(rhs), -1)
    found = {
        (a.args[0], a.args[1])
        for mono in diff
        for a, _ in mono
        if a.op in ("floordiv", "mod") and isinstance(a.args[1], int) and a.args[1] > 1
    }
    candidates = sorted(found, key=lambda xc: (str(xc[0]), xc[1]))
    if not candidates or not E.vanishes_if_divisible(diff, candidates):
        return None
    needed = list(candidates)
    for xc in candidates:
        fewer = [c for c in needed if c != xc]
        if E.vanishes_if_divisible(diff, fewer):
            needed = fewer
    return [f"mod({x}, {c}) == 0" for x, c in needed]


def _condition_error(
    info: OpInfo,
    cond: Condition,
    verdict: Verdict,
    shapes: Sequence[Sequence[SymDim]],
    dtypes: Sequence[Any],
) -> TracingError:
    loc = user_location() or ""
    tensor_shapes = ", ".join(fmt_shape(s) for s, d in zip(shapes, dtypes, strict=True) if d)
    if OpFlag.ELEMENTWISE in info.flags:
        what = f"{info.name} got incompatible shapes for broadcasting: {tensor_shapes}."
    else:
        what = f"{info.name}: {cond.what}; got shapes {tensor_shapes}."
    why = (
        "it is false"
        if verdict is Verdict.FAILS
        else "the dimensions are not provably related this way for every value of the "
        "dimension variables allowed by the constraints"
    )
    fix = cond.fix
    needed = None
    if verdict is Verdict.UNKNOWN:
        divisible = _divisibility_constraints(cond.lhs, cond.rhs) if cond.rel == "==" else None
        needed = divisible[0] if divisible else _simpler_constraint(cond.lhs, cond.rel, cond.rhs)
        wanted = divisible or [needed or f"{cond.lhs} {cond.rel} {cond.rhs}"]
        fix = (
            f"{fix}; or add the constraint{'s' * (len(wanted) > 1)} "
            f"{', '.join(repr(w) for w in wanted)} to the symbolic scope (constraints=[...] "
            "of shapevm.jit, symbolic_shape or shapevm.onnx.load)"
        ).lstrip("; ")
    err = TracingError(
        what,
        expected=f"{_fill(cond.expected, shapes, dtypes)} ({cond.lhs} {cond.rel} {cond.rhs})",
        found=f"{why}",
        fix=fix,
        loc=loc,
    )
    err.constraint = needed
    return err


NUMPY_VIEWS = frozenset({"reshape", "transpose", "broadcast_to", "slice", "flip"})
"""Ops whose NumPy counterparts return a view, sharing their operand's memory."""


def bind_op(
    name: str,
    operands: Sequence[Any],
    attrs: Mapping[str, Any] | None = None,
    *,
    lazy: bool = False,
) -> Any:
    """Apply op ``name``: traced when an operand is a `Tracer`, eager otherwise.

    ``lazy=True`` traces it in the active trace even when every operand is concrete (a
    large tensor made from constants is then computed when the program runs, not stored).
    Returns one result, or a tuple for ops with several outputs.
    """
    info = get_op(name)
    assert info is not None, name
    attrs = dict(attrs or {})
    ctx = None
    for x in operands:
        if isinstance(x, Tracer):
            ctx = x.ctx
            break
    if ctx is None:
        if lazy or any(_is_symbolic(v) for v in attrs.values()):
            ctx = current_trace()
        if ctx is None:
            return _eager(info, operands, attrs)
    if not ctx.active:
        raise EscapedTracerError(_ESCAPED)
    view = name in NUMPY_VIEWS
    if (
        not lazy
        and operands
        and all(not isinstance(x, Tracer) or x._const is not None for x in operands)
        and not any(_is_symbolic(v) for v in attrs.values())
    ):  # every value known (arrays the function made from known ones): computed now, as
        # NumPy computes on the arrays they stand for
        got = _eager(info, [x._const if isinstance(x, Tracer) else x for x in operands], attrs)
        made = tuple(ctx.made(np.asarray(r)) for r in (got if isinstance(got, tuple) else (got,)))
        for t in made:
            t.shared = "a view" if view else ""
        return _track_views(made, operands[0], view)
    ins: list[Operand] = []
    shapes: list[tuple[SymDim, ...]] = []
    dtypes: list[DType | None] = []
    for x in operands:
        if isinstance(x, Tracer):
            if x.ctx is not ctx:
                raise EscapedTracerError(_ESCAPED)
            ins.append(x.reg)
            shapes.append(x.shape)
            dtypes.append(x.dt)
        elif isinstance(x, (bool, int, float)):
            ins.append(x)
            shapes.append(())
            dtypes.append(None)
        else:
            t = ctx.const(np.asarray(x))
            ins.append(t.reg)
            shapes.append(t.shape)
            dtypes.append(t.dt)
    filled = info.filled_attrs({})
    rule_attrs: dict[str, RuleAttr] = dict(filled)  # type: ignore[arg-type]
    stored: list[tuple[str, AttrValue]] = []
    for key, value in attrs.items():
        spec = info.attr_spec(key)
        assert spec is not None, (name, key)
        if value is None:
            continue
        rule_attrs[key] = _attr_for_rule(spec.kind, value)
        stored.append((key, _attr_for_bytecode(spec.kind, value)))
    loc = user_location()
    try:
        out_dtypes = info.dtype_rule(dtypes, rule_attrs)
        result = info.shape_rule(shapes, rule_attrs)
    except ShapeRuleError as e:
        raise TracingError(
            f"{name}: {e.what}",
            expected=_fill(e.expected, shapes, dtypes),
            found=_fill(e.found, shapes, dtypes),
            fix=e.fix,
            loc=loc or "",
        ) from None
    for cond in result.conditions:
        verdict = decide(cond.lhs, cond.rel, cond.rhs)
        if verdict in (Verdict.FAILS, Verdict.UNKNOWN):
            raise _condition_error(info, cond, verdict, shapes, dtypes)
    outs = tuple(ctx.new_tensor() for _ in out_dtypes)
    types = tuple(ttype(dt, shape) for dt, shape in zip(out_dtypes, result.shapes, strict=True))
    ctx.emit(OpCall(outs, name, tuple(ins), tuple(stored), types, loc=loc))
    tracers = tuple(
        Tracer(ctx, reg, dt, tuple(shape), shared="a view" if view else "")
        for reg, dt, shape in zip(outs, out_dtypes, result.shapes, strict=True)
    )
    return _track_views(tracers, operands[0] if operands else None, view)


def _track_views(tracers: tuple[Tracer, ...], source: Any, view: bool) -> Any:
    """The result(s) of an op, a view's recorded as sharing its operand's memory."""
    if view and isinstance(source, Tracer):
        base = source.base if source.base is not None else source
        views = list(base.views) if isinstance(base.views, tuple) else base.views
        if len(views) >= 64 and len(views) & (len(views) - 1) == 0:  # at 64, 128, 256...
            views = [v for v in views if v() is not None]  # the dead ones out
        for t in tracers:
            t.base = base
            views.append(weakref.ref(t))
        base.views = views
    return tracers[0] if len(tracers) == 1 else tracers


def _eager(info: OpInfo, operands: Sequence[Any], attrs: Mapping[str, Any]) -> Any:
    args = [x if isinstance(x, (bool, int, float)) else np.asarray(x) for x in operands]
    full = info.filled_attrs({})
    for k, v in attrs.items():
        if v is not None:
            spec = info.attr_spec(k)
            full[k] = tuple(v) if spec is not None and spec.kind is AttrKind.DIMS else v
    results = info.kernel(args, full)
    return results[0] if len(results) == 1 else tuple(results)
