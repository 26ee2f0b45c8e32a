"""Tracing a Python function once into a verified bytecode `Program`.

The arguments are a pytree whose leaves are array specifications (`ShapeDtypeStruct`,
possibly with symbolic dimensions) or dimension variables passed as integer arguments
(a symbolic dimension in an argument position). The program has one function; its
signature holds the constraints of the scope, so they travel with the bytes.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from shapevm import _pytree
from shapevm.bytecode.errors import Diagnostic, VerifyError
from shapevm.bytecode.program import Constant, Function, Param, Program, Return
from shapevm.bytecode.verify import check
from shapevm.frontend import methods as _methods  # noqa: F401  (Tracer operators)
from shapevm.frontend.errors import TracingError
from shapevm.frontend.tracer import TraceContext, Tracer, tracing, ttype
from shapevm.ops import DType
from shapevm.shapes import DimExpr, ShapeDtypeStruct, SymbolicScope


@dataclass(frozen=True)
class LeafKind:
    """What one leaf of the arguments is: an array, or a dimension variable by name."""

    dim: str | None = None

    @property
    def is_array(self) -> bool:
        return self.dim is None

    def encode(self) -> str:
        return "array" if self.dim is None else f"dim:{self.dim}"

    @classmethod
    def decode(cls, text: str) -> LeafKind:
        if text == "array":
            return cls()
        if text.startswith("dim:") and len(text) > 4:
            return cls(text[4:])
        raise ValueError(f"bad argument kind {text!r}")


@dataclass
class Traced:
    program: Program
    in_tree: _pytree.TreeDef
    out_tree: _pytree.TreeDef
    leaf_kinds: tuple[LeafKind, ...]
    in_avals: tuple[ShapeDtypeStruct, ...]
    scope: SymbolicScope


def scope_of_specs(leaves: Sequence[Any]) -> SymbolicScope:
    scopes: list[SymbolicScope] = []
    for leaf in leaves:
        dims = (leaf,) if isinstance(leaf, DimExpr) else getattr(leaf, "shape", ())
        for d in dims:
            if isinstance(d, DimExpr) and all(d.scope is not s for s in scopes):
                scopes.append(d.scope)
    if len(scopes) > 1:
        a, b = scopes[0], scopes[1]
        raise ValueError(
            "Invalid mixing of symbolic scopes in the argument specifications.\n"
            f"Expected {a.describe()}\nand found {b.describe()}\n"
            "  fix: create all symbolic shapes of one export with one scope "
            "(symbolic_shape(..., scope=first.scope))"
        )
    return scopes[0] if scopes else SymbolicScope()


def trace(
    fun: Callable[..., Any],
    args: Sequence[Any],
    static: dict[int, Any],
    name: str,
    arg_names: Sequence[str] | None = None,
) -> Traced:
    """Trace ``fun`` with positional ``args`` (specs) and ``static`` values by position."""
    leaves, in_tree = _pytree.flatten(tuple(args))
    scope = scope_of_specs(leaves)
    ctx = TraceContext(scope, name)
    kinds: list[LeafKind] = []
    params: list[Param] = []
    values: list[Any] = []
    in_avals: list[ShapeDtypeStruct] = []
    variables: set[str] = set()
    dim_args: list[str] = []
    for leaf in leaves:
        if isinstance(leaf, DimExpr):
            names = leaf.free_vars()
            if str(leaf) not in names:
                raise TypeError(
                    f"a dimension argument must be a single dimension variable, found '{leaf}'"
                )
            kinds.append(LeafKind(str(leaf)))
            dim_args.append(str(leaf))
            variables.add(str(leaf))
            values.append(leaf)
            continue
        spec = _as_spec(leaf)
        try:
            dt = DType.from_numpy(spec.dtype)
        except ValueError:
            raise TracingError(
                f"argument {len(kinds)} has dtype {spec.dtype}, which shapevm does not support",
                expected="bool, int8..int64, uint8..uint64, float16, float32 or float64",
                found=f"{spec}",
                fix="convert the argument with .astype(), e.g. complex to two float arrays",
            ) from None
        reg = ctx.new_tensor()
        params.append(Param(reg, ttype(dt, spec.shape)))
        for d in spec.shape:
            if isinstance(d, DimExpr):
                variables |= d.free_vars()
        kinds.append(LeafKind())
        in_avals.append(spec)
        values.append(Tracer(ctx, reg, dt, tuple(spec.shape), shared="an argument"))
    ctx.bind_dims(sorted(variables))
    call_args = list(_pytree.unflatten(in_tree, values))
    for pos in sorted(static):
        call_args.insert(pos, static[pos])
    with tracing(ctx):
        out = fun(*call_args)
        out_leaves, out_tree = _pytree.flatten(out)
        results = [_as_result(ctx, x, i) for i, x in enumerate(out_leaves)]
    ctx.end_block(Return(tuple(t.reg for t in results)), None)
    fn = Function(
        name=name,
        params=tuple(params),
        results=tuple(ttype(t.dt, t.shape) for t in results),
        blocks=ctx.finish_blocks(),
        constraints=scope.constraints,
        dim_args=tuple(dim_args),
    )
    consts = tuple(Constant(f"c{i}", a) for i, a in enumerate(ctx.constants))
    program = Program((fn,), consts)
    problems = check(program)
    if problems:
        raise VerifyError([_in_python_terms(d, variables) for d in problems])
    return Traced(program, in_tree, out_tree, tuple(kinds), tuple(in_avals), scope)


def _in_python_terms(d: Diagnostic, variables: set[str]) -> Diagnostic:
    """A verifier finding about a dimension variable, with the fix in the Python API's terms
    (the verifier's own fix names the bytecode's ``dim_args`` line)."""
    named = re.search(r"dimension variable '([^']+)'", d.what)
    if d.check != "solve" or named is None:
        return d
    var = named[1]
    as_argument = (
        f"make {var} an argument of the function and pass the symbolic dimension {var} "
        f"to export (export(jit(f))(x_spec, {var})); callers then pass its value as an int"
    )
    if var in variables:  # in an argument's shape, but not solvable from it
        fix = f"give an argument a dimension linear in {var} (such as {var} or 2*{var} + 1), or "
    else:
        fix = f"give an argument a dimension {var} (ShapeDtypeStruct(({var}, ...), dtype)), or "
    return dataclasses.replace(d, fix=fix + as_argument)


def _as_spec(leaf: Any) -> ShapeDtypeStruct:
    if isinstance(leaf, ShapeDtypeStruct):
        return leaf
    if isinstance(leaf, (bool, int, float)):
        arr = np.asarray(leaf, dtype=np.float32 if isinstance(leaf, float) else None)
        return ShapeDtypeStruct(arr.shape, arr.dtype)
    shape = getattr(leaf, "shape", None)
    dtype = getattr(leaf, "dtype", None)
    if shape is None or dtype is None:
        raise TypeError(
            f"cannot use {type(leaf).__name__} as an argument specification: expected an "
            "array, a ShapeDtypeStruct or a symbolic dimension (an integer argument)"
        )
    return ShapeDtypeStruct(tuple(shape), dtype)


def _as_result(ctx: TraceContext, x: Any, i: int) -> Tracer:
    from shapevm.frontend import numpy_api as snp

    if isinstance(x, Tracer):
        return x
    if isinstance(x, DimExpr):
        out = snp.asarray(x)
        assert isinstance(out, Tracer)
        return out
    if isinstance(x, (bool, int, float, np.ndarray, np.generic)):
        return ctx.const(np.asarray(x))
    raise TracingError(
        f"result {i} of the traced function is a {type(x).__name__}",
        expected="arrays (traced or NumPy), scalars, or tuples/lists/dicts of them",
        found=repr(x)[:80],
        fix="return only arrays from the function",
    )
