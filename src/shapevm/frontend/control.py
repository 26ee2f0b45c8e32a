"""Control flow in traced functions: `cond` and `fori_loop` as bytecode blocks.

``cond`` on a value known at trace time (a Python bool, a decided dimension comparison)
traces one branch. On a scalar boolean array, or on a comparison of symbolic dimensions
that the engine cannot decide at trace time, it traces both branches and the choice is
made when the program runs: ``BRANCH_IF`` and one ``TENSOR_PHI`` per result. Results whose
dimensions differ between the branches get a ``dynamic`` dimension there.

``fori_loop`` with traced operands becomes a loop of blocks: a header with one PHI per
carried value and the counter, a body, and an exit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from shapevm import _pytree
from shapevm.bytecode.isa import Reg
from shapevm.bytecode.program import Block, BranchIf, Jump, TensorPhi
from shapevm.bytecode.shape_expr import ShapeBin, ShapeCmp, ShapeExpr
from shapevm.frontend import numpy_api as snp
from shapevm.frontend.trace import _as_result
from shapevm.frontend.tracer import (
    DimPredicate,
    TraceContext,
    Tracer,
    current_trace,
    ttype,
    user_error,
    user_location,
)
from shapevm.ops import DYNAMIC, DType, SymDim
from shapevm.shapes import DimExpr
from shapevm.shapes import expr as E


def _shape_expr(d: Any, regs: dict[str, Reg]) -> ShapeExpr | None:
    """``d`` over the shape registers of the dimension variables, if it has no max/min."""
    if isinstance(d, int):
        return d
    assert isinstance(d, DimExpr)
    total: ShapeExpr | None = None
    for mono, coeff in d._terms:
        term: ShapeExpr = coeff
        for atom, exp in mono:
            factor = _atom_expr(atom, regs)
            if factor is None:
                return None
            for _ in range(exp):
                term = factor if term == 1 else ShapeBin("*", term, factor)
        total = term if total is None else ShapeBin("+", total, term)
    return 0 if total is None else total


def _atom_expr(atom: E.Atom, regs: dict[str, Reg]) -> ShapeExpr | None:
    if atom.op == "var":
        return regs.get(str(atom.args[0]))
    if atom.op in ("floordiv", "mod"):
        a = _shape_expr(atom.args[0], regs)
        b = _shape_expr(atom.args[1], regs)
        if a is None or b is None:
            return None
        return ShapeBin("//" if atom.op == "floordiv" else "%", a, b)
    return None


def _predicate(ctx: TraceContext, pred: DimPredicate) -> ShapeCmp | Tracer:
    lhs = _shape_expr(pred.lhs, ctx.dim_regs)
    rhs = _shape_expr(pred.rhs, ctx.dim_regs)
    if lhs is not None and rhs is not None:
        return ShapeCmp(pred.op, lhs, rhs)
    diff = snp.asarray(pred.lhs - pred.rhs, np.int64)
    ops = {">=": snp.greater_equal, ">": snp.greater, "<=": snp.less_equal, "<": snp.less}
    out: Tracer = ops[pred.op](diff, 0)
    return out


def _join_dims(a: Sequence[SymDim], b: Sequence[SymDim]) -> tuple[SymDim, ...]:
    return tuple(x if x == y else DYNAMIC for x, y in zip(a, b, strict=True))


def cond(
    pred: Any, true_fun: Callable[..., Any], false_fun: Callable[..., Any], *operands: Any
) -> Any:
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``."""
    if isinstance(pred, (bool, np.bool_)):
        return true_fun(*operands) if pred else false_fun(*operands)
    if isinstance(pred, np.ndarray) and pred.shape == ():
        return true_fun(*operands) if bool(pred) else false_fun(*operands)
    ctx = pred.ctx if isinstance(pred, Tracer) else current_trace()
    if ctx is None or not isinstance(pred, (Tracer, DimPredicate)):
        raise TypeError(
            "cond needs a bool, a scalar boolean array or a comparison of dimensions as "
            f"its predicate, found {type(pred).__name__}"
        )
    if isinstance(pred, DimPredicate):
        cond_value: Reg | ShapeCmp | Tracer = _predicate(ctx, pred)
    else:
        if pred.shape != ():
            raise user_error(
                "the predicate of cond must be a scalar",
                expected="a bool[] array",
                found=repr(pred),
                fix="reduce it first, e.g. snp.sum(mask) > 0",
            )
        cond_value = pred if pred.dt is DType.BOOL else snp.not_equal(pred, 0)
    cond_arg = cond_value.reg if isinstance(cond_value, Tracer) else cond_value
    l_true, l_false, l_merge = ctx.new_label(), ctx.new_label(), ctx.new_label()
    ctx.end_block(BranchIf(cond_arg, l_true, l_false, loc=user_location()), l_true)
    outs_t, tree_t, end_t = _branch(ctx, true_fun, operands, l_merge)
    ctx.label = l_false
    outs_f, tree_f, end_f = _branch(ctx, false_fun, operands, l_merge)
    ctx.label = l_merge
    if tree_t != tree_f:
        raise user_error(
            "the branches of cond return different structures",
            expected=f"the true branch's {tree_t}",
            found=f"the false branch's {tree_f}",
            fix="return the same tuple/list/dict of arrays from both branches",
        )
    merged = []
    for i, (a, b) in enumerate(zip(outs_t, outs_f, strict=True)):
        if a.dt is not b.dt or a.ndim != b.ndim:
            raise user_error(
                f"result {i} of cond has different types in the two branches",
                expected=f"{a.dt}[rank {a.ndim}] in both",
                found=f"{a.dt}{list(a.shape)} and {b.dt}{list(b.shape)}",
                fix="cast or reshape one branch's result",
            )
        shape = _join_dims(a.shape, b.shape)
        reg = ctx.new_tensor()
        ctx.emit(TensorPhi(reg, ((end_t, a.reg), (end_f, b.reg)), ttype(a.dt, shape)))
        merged.append(Tracer(ctx, reg, a.dt, shape))
    return _pytree.unflatten(tree_t, merged)


def _branch(
    ctx: TraceContext, fun: Callable[..., Any], operands: Sequence[Any], merge: str
) -> tuple[list[Tracer], _pytree.TreeDef, str]:
    with ctx.inner_region():
        out = fun(*operands)
    leaves, tree = _pytree.flatten(out)
    tracers = [_as_result(ctx, x, i) for i, x in enumerate(leaves)]
    end = ctx.label
    ctx.end_block(Jump(merge), None)
    return tracers, tree, end


def fori_loop(lower: Any, upper: Any, body_fun: Callable[[Any, Any], Any], init_val: Any) -> Any:
    """``for i in range(lower, upper): val = body_fun(i, val)``; returns ``val``.

    Bounds may be ints, symbolic dimensions or scalar integer arrays; the carried values
    must keep their dtypes and shapes.
    """
    leaves, tree = _pytree.flatten(init_val)
    ctx = current_trace()
    traced = any(isinstance(x, (Tracer, DimExpr)) for x in (*leaves, lower, upper))
    if ctx is None or not traced:
        val = init_val
        for i in range(int(lower), int(upper)):
            val = body_fun(i, val)
        return val
    i0 = snp.astype(_as_result(ctx, snp.asarray(lower), 0), np.int32)
    ub = snp.astype(_as_result(ctx, snp.asarray(upper), 0), np.int32)
    init = [_as_result(ctx, x, i) for i, x in enumerate(leaves)]
    head, body, exit_ = ctx.new_label(), ctx.new_label(), ctx.new_label()
    pre = ctx.label
    ctx.end_block(Jump(head), head)
    head_index = len(ctx.blocks)
    i_reg = ctx.new_tensor()
    i_t = Tracer(ctx, i_reg, DType.I32, ())
    carry = [Tracer(ctx, ctx.new_tensor(), t.dt, t.shape) for t in init]
    keep = snp.less(i_t, ub)
    ctx.end_block(BranchIf(keep.reg, body, exit_, loc=user_location()), body)
    with ctx.inner_region():
        new = body_fun(i_t, _pytree.unflatten(tree, carry))
    new_leaves, new_tree = _pytree.flatten(new)
    if new_tree != tree:
        raise user_error(
            "fori_loop's body returns a different structure than init_val",
            expected=str(tree),
            found=str(new_tree),
            fix="return the carried values in the same structure",
        )
    new_t = [_as_result(ctx, x, i) for i, x in enumerate(new_leaves)]
    for k, (a, b) in enumerate(zip(carry, new_t, strict=True)):
        if a.dt is not b.dt or tuple(map(str, a.shape)) != tuple(map(str, b.shape)):
            raise user_error(
                f"carried value {k} of fori_loop changes type in the body",
                expected=f"{a.dt}{list(a.shape)}",
                found=f"{b.dt}{list(b.shape)}",
                fix="keep the dtype and shape of every carried value (cast or reshape)",
            )
    i_next = snp.add(i_t, 1)
    end = ctx.label
    ctx.end_block(Jump(head), exit_)
    phis = [TensorPhi(i_reg, ((pre, i0.reg), (end, i_next.reg)), ttype(DType.I32, ()))]
    for a, b, c in zip(init, new_t, carry, strict=True):
        phis.append(TensorPhi(c.reg, ((pre, a.reg), (end, b.reg)), ttype(c.dt, c.shape)))
    blk = ctx.blocks[head_index]
    ctx.blocks[head_index] = Block(blk.label, (*phis, *blk.instrs))
    return _pytree.unflatten(tree, carry)
