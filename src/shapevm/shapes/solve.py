"""Solving dimension variables from concrete argument shapes.

Given the symbolic shapes of the arguments and the shapes actually passed, find the value
of every dimension variable, then check every dimension and every constraint. Equations are
solved in dependency order (``(a, a*b)`` solves ``a`` first, then ``b``); an equation is
solved when it has one unknown variable and is either linear in it or a polynomial that
increases with it (``a^2``). Messages name the argument and axis, the specification and the
values obtained so far.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from shapevm.shapes import expr as E
from shapevm.shapes.errors import ShapeError
from shapevm.shapes.scope import SymbolicScope


class _Equation:
    __slots__ = ("axis", "dim", "name", "value")

    def __init__(self, name: str, axis: int, dim: E.DimExpr, value: int) -> None:
        self.name, self.axis, self.dim, self.value = name, axis, dim, value

    @property
    def where(self) -> str:
        return f"{self.name}.shape[{self.axis}] (= {self.value})"


def _shape_str(shape: Sequence[E.DimSize]) -> str:
    inner = ", ".join(str(d) for d in shape)
    return f"({inner},)" if len(shape) == 1 else f"({inner})"


class _Context:
    def __init__(self, specs: Sequence[Sequence[E.DimSize]], names: Sequence[str]) -> None:
        self.specs = specs
        self.names = names
        self.obtained: list[str] = []

    def error(self, headline: str, fix: str) -> ShapeError:
        pairs = zip(self.names, self.specs, strict=False)
        specs = ", ".join(f"{n}.shape = {_shape_str(s)}" for n, s in pairs)
        got = "; ".join(self.obtained) or "none"
        return ShapeError(
            "Input shapes do not match the symbolic shape specification.\n"
            f"{headline}\n"
            f"  specifications: {specs}\n"
            f"  obtained dimension variables: {got}\n"
            f"  fix: {fix}"
        )


def solve_dim_vars(
    specs: Sequence[Sequence[E.DimSize]],
    shapes: Sequence[Sequence[int]],
    scope: SymbolicScope | None = None,
    *,
    arg_names: Sequence[str] | None = None,
    known: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """Values of the dimension variables that make ``shapes`` match ``specs``.

    Raises :class:`ShapeError` on a rank mismatch, an inconsistent dimension, a variable that
    would be < 1 or not an integer, a violated constraint, or variables that cannot be solved.

    >>> import shapevm as sv
    >>> spec = sv.symbolic_shape("b, 2*d")
    >>> sv.solve_dim_vars([spec], [(3, 8)])
    {'b': 3, 'd': 4}
    """
    names = list(arg_names) if arg_names is not None else [f"args[{i}]" for i in range(len(specs))]
    if len(specs) != len(shapes):
        raise ShapeError(f"expected {len(specs)} argument shapes, found {len(shapes)}")
    ctx = _Context(specs, names)
    env: dict[str, int] = dict(known or {})
    pending: list[_Equation] = []
    for name, spec, shape in zip(names, specs, shapes, strict=False):
        if len(spec) != len(shape):
            raise ctx.error(
                f"Rank mismatch for {name}: expected {len(spec)} dimensions "
                f"{_shape_str(spec)}, found shape {tuple(shape)} with {len(shape)}.",
                f"pass an array of rank {len(spec)}",
            )
        for axis, (dim, value) in enumerate(zip(spec, shape, strict=False)):
            if isinstance(dim, int):
                if dim != value:
                    raise ctx.error(
                        f"Dimension {name}.shape[{axis}] must be {dim}, found {value}.",
                        f"pass an array with {dim} elements along axis {axis}",
                    )
            else:
                pending.append(_Equation(name, axis, dim, int(value)))
                if scope is None:
                    scope = dim.scope
    _solve(pending, env, ctx)
    for eq in pending:
        expected = eq.dim.evaluate(env)
        if expected != eq.value:
            raise ctx.error(
                f"Found inconsistency between dimension size {eq.where} and the specification "
                f"'{eq.dim}' (= {expected}).",
                "pass shapes that agree with each other as the specification requires",
            )
    if scope is not None:
        scope.check(env)
    return env


def _solve(pending: list[_Equation], env: dict[str, int], ctx: _Context) -> None:
    todo = list(pending)
    while todo:
        progress = False
        for eq in list(todo):
            unknown = eq.dim.free_vars() - env.keys()
            if not unknown:
                todo.remove(eq)
                continue
            if len(unknown) != 1:
                continue
            (var,) = unknown
            value = _solve_one(eq, var, env, ctx)
            if value is None:
                continue
            if value < 1:
                raise ctx.error(
                    f"Expected value >= 1 for dimension variable '{var}', found {value} when "
                    f"solving '{eq.dim}' for dimension {eq.where}.",
                    "dimension variables stand for sizes >= 1; pass a larger array or "
                    "change the specification",
                )
            env[var] = value
            ctx.obtained.append(f"'{var}' = {value} from '{eq.dim}' for dimension {eq.where}")
            todo.remove(eq)
            progress = True
        if not progress and todo:
            unsolved = sorted(set().union(*(eq.dim.free_vars() for eq in todo)) - env.keys())
            rest = ", ".join(f"'{eq.dim}' for dimension size {eq.where}" for eq in todo)
            raise ctx.error(
                f"Cannot solve for values of dimension variables {set(unsolved)}.\n"
                "We can only solve equations with one unknown that are linear in it or "
                "polynomials increasing in it.\n"
                f"Unprocessed specifications: {rest}.",
                "make each variable appear alone (or linearly) in some dimension, or pass "
                "its value explicitly",
            )


def _solve_one(eq: _Equation, var: str, env: dict[str, int], ctx: _Context) -> int | None:
    coef = 0
    const = 0
    linear = True
    increasing = True
    for mono, c in eq.dim._terms:
        exp = 0
        rest = c
        for atom, e in mono:
            if atom.op == "var" and atom.args[0] == var:
                exp = e
            elif var in E.DimExpr(((((atom, 1),), 1),), eq.dim.scope).free_vars():
                linear = increasing = False
                rest = 0
                break
            else:
                rest *= atom.evaluate(env) ** e
        if exp == 0:
            const += rest
        elif exp == 1:
            coef += rest
        else:
            linear = False
        if exp and rest <= 0:
            increasing = False
    if linear and coef:
        q, r = divmod(eq.value - const, coef)
        if r:
            raise ctx.error(
                f"Division had remainder {r} when computing the value of '{var}' from "
                f"'{eq.dim}' for dimension {eq.where}.",
                f"pass a size for which '{eq.dim}' has an integer solution",
            )
        return q
    if increasing and not linear:
        return _search(eq, var, env, ctx)
    return None


def _search(eq: _Equation, var: str, env: dict[str, int], ctx: _Context) -> int:
    def f(v: int) -> int:
        return eq.dim.evaluate({**env, var: v})

    lo, hi = 1, 1
    while f(hi) < eq.value:
        lo, hi = hi, hi * 2
    while lo < hi:
        mid = (lo + hi) // 2
        if f(mid) < eq.value:
            lo = mid + 1
        else:
            hi = mid
    if f(lo) != eq.value:
        raise ctx.error(
            f"No integer value of '{var}' gives '{eq.dim}' = {eq.value} for dimension "
            f"{eq.where} (the closest are {var} = {max(lo - 1, 1)} and {var} = {lo}).",
            f"pass a size that '{eq.dim}' can take",
        )
    return lo
