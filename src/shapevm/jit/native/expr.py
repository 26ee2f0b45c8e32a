"""A tiny expression DAG for fused elementwise chains, with its canonical text and a NumPy
reference evaluator.

Nodes are immutable and compare structurally, so a subexpression used twice is one node of
the DAG however it was built. `canonical_text` numbers the distinct nodes in a fixed
post-order; two DAGs with the same text compute the same function, which is what the kernel
caches key on.

>>> x, y = input(0), input(1)
>>> e = binary("mul", unary("exp", x), binary("add", x, const(0.5)))
>>> print(canonical_text(e))
%0 = input 0
%1 = exp %0
%2 = const 0.5
%3 = add %0 %2
%4 = mul %1 %3
>>> canonical_text(x * 2.0 + y).splitlines()[-1]
'%4 = add %2 %3'
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from shapevm.jit.native._core import NativeKernelError

Array = np.ndarray[Any, Any]

UNARY: Final = ("neg", "abs", "exp", "log", "sqrt", "tanh", "erf", "sin", "cos", "sigmoid")
ARITH: Final = ("add", "sub", "mul", "div", "maximum", "minimum", "pow")
COMPARE: Final = ("lt", "le", "gt", "ge", "eq", "ne")
"""Comparisons give 1.0 or 0.0 in the compute dtype; `where` takes any nonzero as true."""
BINARY: Final = ARITH + COMPARE
REDUCTIONS: Final = ("sum", "mean", "max", "min")


@dataclass(frozen=True, slots=True)
class Expr:
    """One node: ``op`` is ``input``, ``const``, ``where``, or a name in UNARY or BINARY."""

    op: str
    args: tuple[Expr, ...] = ()
    value: float = 0.0
    _hash: int = field(default=0, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.op, self.args, self.value)))

    def __hash__(self) -> int:
        return self._hash

    def __add__(self, other: Expr | float) -> Expr:
        return binary("add", self, _lift(other))

    def __radd__(self, other: float) -> Expr:
        return binary("add", _lift(other), self)

    def __sub__(self, other: Expr | float) -> Expr:
        return binary("sub", self, _lift(other))

    def __rsub__(self, other: float) -> Expr:
        return binary("sub", _lift(other), self)

    def __mul__(self, other: Expr | float) -> Expr:
        return binary("mul", self, _lift(other))

    def __rmul__(self, other: float) -> Expr:
        return binary("mul", _lift(other), self)

    def __truediv__(self, other: Expr | float) -> Expr:
        return binary("div", self, _lift(other))

    def __rtruediv__(self, other: float) -> Expr:
        return binary("div", _lift(other), self)

    def __neg__(self) -> Expr:
        return unary("neg", self)

    def __repr__(self) -> str:
        return f"Expr({' / '.join(canonical_text(self).splitlines())})"


def _lift(v: Expr | float) -> Expr:
    return v if isinstance(v, Expr) else const(float(v))


def input(index: int) -> Expr:
    """The ``index``-th array argument of the kernel."""
    if index < 0:
        raise NativeKernelError(
            "input: negative index", expected="index >= 0", found=str(index), fix="count from 0"
        )
    return Expr("input", value=float(index))


def const(value: float) -> Expr:
    """A scalar constant; it takes the dtype of the computation (weakly typed, as in NumPy)."""
    return Expr("const", value=float(value))


def unary(name: str, a: Expr) -> Expr:
    _check_name(name, UNARY, "unary")
    return Expr(name, (a,))


def binary(name: str, a: Expr, b: Expr) -> Expr:
    _check_name(name, BINARY, "binary")
    return Expr(name, (a, b))


def where(cond: Expr, a: Expr, b: Expr) -> Expr:
    """``a`` where ``cond`` is nonzero, else ``b``."""
    return Expr("where", (cond, a, b))


def _check_name(name: str, names: Sequence[str], kind: str) -> None:
    if name not in names:
        close = difflib.get_close_matches(name, names, n=1)
        raise NativeKernelError(
            f"{kind}: unknown op {name!r}",
            expected=" | ".join(names),
            found=repr(name),
            fix=f"did you mean {close[0]!r}?" if close else "use one of the expected names",
        )


def nodes(root: Expr) -> list[Expr]:
    """The distinct nodes of the DAG in canonical post-order (operands before users)."""
    order: list[Expr] = []
    seen: set[Expr] = set()
    stack: list[tuple[Expr, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if node in seen:
            continue
        if expanded:
            seen.add(node)
            order.append(node)
            continue
        stack.append((node, True))
        stack.extend((a, False) for a in reversed(node.args))
    return order


def canonical_text(root: Expr) -> str:
    """One line per distinct node, ``%k = op operands``; the cache key of a DAG."""
    index: dict[Expr, int] = {}
    lines = []
    for k, node in enumerate(nodes(root)):
        index[node] = k
        if node.op == "input":
            rhs = f"input {int(node.value)}"
        elif node.op == "const":
            rhs = f"const {node.value!r}"
        else:
            rhs = " ".join([node.op, *(f"%{index[a]}" for a in node.args)])
        lines.append(f"%{k} = {rhs}")
    return "\n".join(lines)


def input_count(root: Expr) -> int:
    """1 + the largest input index used (inputs may be unused, e.g. ``input(1)`` alone)."""
    used = [int(n.value) for n in nodes(root) if n.op == "input"]
    return max(used) + 1 if used else 0


def _erf(a: Array) -> Array:
    out: Array = np.vectorize(math.erf, otypes=[np.float64])(a)
    return out


def _sigmoid(a: Array) -> Array:
    with np.errstate(over="ignore"):
        out: Array = 1.0 / (1.0 + np.exp(-a))
    return out


def _pick(cond: Callable[[Array, Array], Array]) -> Callable[[Array, Array], Array]:
    def f(a: Array, b: Array) -> Array:
        return np.where(cond(a, b), 1.0, 0.0)

    return f


NUMPY_UNARY: Final[dict[str, Callable[[Array], Array]]] = {
    "neg": np.negative,
    "abs": np.abs,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "tanh": np.tanh,
    "erf": _erf,
    "sin": np.sin,
    "cos": np.cos,
    "sigmoid": _sigmoid,
}
NUMPY_BINARY: Final[dict[str, Callable[[Array, Array], Array]]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "pow": np.power,
    "lt": _pick(np.less),
    "le": _pick(np.less_equal),
    "gt": _pick(np.greater),
    "ge": _pick(np.greater_equal),
    "eq": _pick(np.equal),
    "ne": _pick(np.not_equal),
}


def evaluate(
    root: Expr, inputs: Sequence[Array], reduce: str | None = None, dtype: Any = np.float64
) -> Array:
    """The DAG computed by NumPy in ``dtype`` (float64 by default: the reference).

    The result has the broadcast shape of all ``inputs``, used by the DAG or not, as a fused
    kernel's output does.

    >>> evaluate(input(0) * 2.0 + input(1), [np.ones((2, 1)), np.arange(3.0)], reduce="sum")
    array([9., 9.])
    """
    values = dict(_values(root, inputs, dtype))
    shape = np.broadcast_shapes(*(np.shape(a) for a in inputs))
    result = np.broadcast_to(np.asarray(values[root], dtype), shape)
    if reduce is not None:
        result = np.asarray(_REDUCE[reduce](result, axis=-1), dtype)
    return result


def intermediate_scale(root: Expr, inputs: Sequence[Array]) -> float:
    """The largest magnitude any node takes (float64): the scale rounding errors start from."""
    scale = 0.0
    for _, v in _values(root, inputs, np.float64):
        finite = np.abs(v[np.isfinite(v)])
        if finite.size:
            scale = max(scale, float(finite.max()))
    return scale


_REDUCE: Final[dict[str, Callable[..., Array]]] = {
    "sum": np.sum,
    "mean": np.mean,
    "max": np.max,
    "min": np.min,
}


def _values(root: Expr, inputs: Sequence[Array], dtype: Any) -> Iterator[tuple[Expr, Array]]:
    values: dict[Expr, Array] = {}
    with np.errstate(all="ignore"):
        for node in nodes(root):
            if node.op == "input":
                v = np.asarray(inputs[int(node.value)], dtype)
            elif node.op == "const":
                v = np.asarray(node.value, dtype)
            elif node.op == "where":
                c, a, b = (values[x] for x in node.args)
                v = np.where(c != 0, a, b)
            elif node.op in NUMPY_UNARY:
                v = NUMPY_UNARY[node.op](values[node.args[0]])
            else:
                v = NUMPY_BINARY[node.op](values[node.args[0]], values[node.args[1]])
            values[node] = np.asarray(v, dtype)
            yield node, values[node]


__all__ = [
    "BINARY",
    "COMPARE",
    "REDUCTIONS",
    "UNARY",
    "Expr",
    "binary",
    "canonical_text",
    "const",
    "evaluate",
    "input",
    "input_count",
    "intermediate_scale",
    "nodes",
    "unary",
    "where",
]
