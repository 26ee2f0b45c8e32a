"""Converters of elementwise ONNX operators: arithmetic, comparisons, logic, activations.

Each becomes ops of the op table; the activations are short compositions of them (``Elu``
is ``where(x > 0, x, alpha * (exp(x) - 1))``). Integer arithmetic on shape values (`SymInts`)
is folded into dimension arithmetic; a comparison of sizes that the constraints do not
decide becomes a tensor computed when the program runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from shapevm import nn
from shapevm.frontend import numpy_api as snp
from shapevm.frontend.tracer import bind_op
from shapevm.onnx import values as V
from shapevm.onnx.model_io import ONNX_DTYPES, dtype_name
from shapevm.onnx.node import Node, Op, attr_is
from shapevm.onnx.values import SymInts, Value
from shapevm.ops import DType

Conv = Callable[..., Any]


def call(name: str, *args: Any, **attrs: Any) -> Value:
    """Op ``name`` of the op table on values (shape values become tensors first)."""
    out: Value = bind_op(name, _operands(args), attrs or None)
    return out


def call_n(name: str, *args: Any, **attrs: Any) -> tuple[Value, ...]:
    """An op of several results (``top_k``)."""
    out: tuple[Value, ...] = bind_op(name, _operands(args), attrs or None)
    return out


def _operands(args: tuple[Any, ...]) -> list[Any]:
    return [V.tensor(a) if not isinstance(a, (int, float)) else a for a in args]


def legacy_broadcast(n: Node, a: Value, b: Value) -> tuple[Value, Value]:
    """Opsets before 7: with ``broadcast=1`` B lines up with A's axes from ``axis`` on."""
    if n.opset >= 7 or not n.attr("broadcast", 0):
        return a, b
    ra, rb = len(V.shape_of(a)), len(V.shape_of(b))
    axis = n.attr("axis", ra - rb)
    axis = axis % ra if ra else 0
    shape = (*V.shape_of(b), *([1] * (ra - axis - rb)))
    return a, reshape_value(b, shape)


def reshape_value(v: Value, shape: tuple[Any, ...]) -> Value:
    if isinstance(v, SymInts):
        return SymInts.make(v.values.reshape(shape), v.dtype)
    return (
        call("reshape", v, shape=tuple(shape))
        if not isinstance(v, np.ndarray)
        else (v.reshape(shape))
    )


def _both_known_symbolic(a: Value, b: Value) -> bool:
    return V.is_known(a) and V.is_known(b) and (isinstance(a, SymInts) or isinstance(b, SymInts))


def _fold(sym: str, a: Value, b: Value) -> Value | None:
    """``a sym b`` on shape values, or ``None`` to compute it as tensors."""
    if not _both_known_symbolic(a, b) or V.dtype_of(a).kind not in "iu":
        return None
    try:
        out = V.sym_binary(sym, V.object_array(a), V.object_array(b))
    except V.Undecided:
        return None
    return SymInts.make(out, V.dtype_of(a))


def binary(op: str, sym: str | None = None) -> Conv:
    def convert(n: Node, a: Value, b: Value) -> Value:
        a, b = legacy_broadcast(n, a, b)
        folded = _fold(sym, a, b) if sym else None
        return folded if folded is not None else call(op, a, b)

    convert.__name__ = op
    return convert


def div(n: Node, a: Value, b: Value) -> Value:
    a, b = legacy_broadcast(n, a, b)
    if V.dtype_of(a).kind == "f":
        return call("div", a, b)
    folded = _fold("div", a, b)
    if folded is not None:
        return folded
    q = call("floordiv", a, b)
    if V.dtype_of(a).kind == "u":
        return q
    # toward zero: floor division rounds negative inexact quotients one too low
    inexact = call("not_equal", call("mod", a, b), 0)
    signs = call("not_equal", call("less", a, 0), call("less", b, 0))
    return call("where", call("logical_and", inexact, signs), call("add", q, 1), q)


def mod(n: Node, a: Value, b: Value) -> Value:
    if n.attr("fmod", 0):
        return call("fmod", a, b)
    folded = _fold("mod", a, b)
    return folded if folded is not None else call("mod", a, b)


def pow_(n: Node, a: Value, b: Value) -> Value:
    a, b = legacy_broadcast(n, a, b)
    da, db = V.dtype_of(a), V.dtype_of(b)
    if da == db:
        return call("pow", a, b)
    if da.kind == "f":
        return call("pow", a, call("cast", b, dtype=_name(da)))
    wide = call("pow", call("cast", a, dtype="f64"), call("cast", b, dtype="f64"))
    return call("cast", wide, dtype=_name(da))


def _name(dt: np.dtype[Any]) -> str:
    return DType.from_numpy(dt).value


def compare(op: str, sym: str) -> Conv:
    def convert(n: Node, a: Value, b: Value) -> Value:
        a, b = legacy_broadcast(n, a, b)
        if _both_known_symbolic(a, b):
            try:
                return V.sym_compare(sym, V.object_array(a), V.object_array(b))
            except V.Undecided:
                pass
        return call(op, a, b)

    convert.__name__ = op
    return convert


def unary(op: str) -> Conv:
    def convert(n: Node, x: Value) -> Value:
        if isinstance(x, SymInts) and op in ("neg", "abs"):
            try:
                return SymInts.make(V.sym_unary(op, x.values), x.dtype)
            except V.Undecided:
                pass
        return call(op, x)

    convert.__name__ = op
    return convert


def variadic(op: str, sym: str | None) -> Conv:
    def convert(n: Node, *xs: Value) -> Value:
        out = xs[0]
        for x in xs[1:]:
            folded = _fold(sym, out, x) if sym else None
            out = folded if folded is not None else call(op, out, x)
        return out

    convert.__name__ = op
    return convert


def mean(n: Node, *xs: Value) -> Value:
    total = variadic("add", None)(n, *xs)
    return call("div", total, float(len(xs))) if len(xs) > 1 else total


def logical(op: str) -> Conv:
    def convert(n: Node, *xs: Value) -> Value:
        if len(xs) == 2:
            xs = legacy_broadcast(n, xs[0], xs[1])
        return call(op, *xs)

    convert.__name__ = op
    return convert


# -- casts --------------------------------------------------------------------------------


def _target(n: Node) -> DType:
    to = n.attr("to")
    if isinstance(to, str):  # opset 1 spells the type
        names = {dtype_name(c): d for c, d in ONNX_DTYPES.items()}
        return names[to.upper()]
    return ONNX_DTYPES[int(to)]


def cast_to(x: Value, dt: DType) -> Value:
    if isinstance(x, SymInts) and dt.is_int:
        return SymInts.make(x.values, dt.numpy.newbyteorder("="))
    if not isinstance(x, SymInts) and DType.from_numpy(V.dtype_of(x)) is dt:
        return x
    return call("cast", x, dtype=dt.value)


def cast(n: Node, x: Value) -> Value:
    return cast_to(x, _target(n))


def cast_like(n: Node, x: Value, like: Value) -> Value:
    return cast_to(x, DType.from_numpy(V.dtype_of(like)))


def check_cast(n: Node) -> list[Any]:
    to = n.attr("to")
    ok = (
        to.upper() in {dtype_name(c) for c in ONNX_DTYPES}
        if isinstance(to, str)
        else int(to) in ONNX_DTYPES
    )
    if ok:
        return []
    return [
        n.problem(
            f"cast to {to if isinstance(to, str) else dtype_name(int(to))} is not supported",
            expected=", ".join(dtype_name(c) for c in ONNX_DTYPES),
            found=str(to if isinstance(to, str) else dtype_name(int(to))),
        )
    ]


# -- activations --------------------------------------------------------------------------


def relu(n: Node, x: Value) -> Value:
    return call("maximum", x, 0)


def leaky_relu(n: Node, x: Value) -> Value:
    alpha = float(n.attr("alpha", 0.01))
    return call("where", call("less", x, 0), call("mul", x, alpha), x)


def prelu(n: Node, x: Value, slope: Value) -> Value:
    rank, sshape = len(V.shape_of(x)), V.shape_of(slope)
    if n.opset < 7 and len(sshape) == 1 and rank > 2 and sshape[0] != 1:
        slope = reshape_value(slope, (sshape[0],) + (1,) * (rank - 2))  # one slope per channel
    return call("where", call("less", x, 0), call("mul", x, slope), x)


def _expm1(x: Value, alpha: float) -> Any:
    return call("mul", call("sub", call("exp", x), 1.0), alpha)


def elu(n: Node, x: Value) -> Value:
    alpha = float(n.attr("alpha", 1.0))
    return call("where", call("less", x, 0), _expm1(x, alpha), x)


def selu(n: Node, x: Value) -> Value:
    alpha = float(n.attr("alpha", 1.67326319217681884765625))
    gamma = float(n.attr("gamma", 1.05070102214813232421875))
    inner = call("where", call("greater", x, 0), x, _expm1(x, alpha))
    return call("mul", inner, gamma)


def celu(n: Node, x: Value) -> Value:
    alpha = float(n.attr("alpha", 1.0))
    neg = call("minimum", _expm1(call("div", x, alpha), alpha), 0)
    return call("add", call("maximum", x, 0), neg)


def hard_sigmoid(n: Node, x: Value, alpha: float = 0.2, beta: float = 0.5) -> Value:
    a, b = float(n.attr("alpha", alpha)), float(n.attr("beta", beta))
    return call("maximum", call("minimum", call("add", call("mul", x, a), b), 1), 0)


def hard_swish(n: Node, x: Value) -> Value:
    gate = call("maximum", call("minimum", call("add", call("mul", x, 1 / 6), 0.5), 1), 0)
    return call("mul", x, gate)


def mish(n: Node, x: Value) -> Value:
    return call("mul", x, call("tanh", call("softplus", x)))


def gelu(n: Node, x: Value) -> Any:
    return nn.gelu(V.tensor(x), approximate=n.attr("approximate", "none") == "tanh")


def thresholded_relu(n: Node, x: Value) -> Value:
    alpha = float(n.attr("alpha", 1.0))
    return call("where", call("greater", x, alpha), x, 0)


def shrink(n: Node, x: Value) -> Value:
    lambd, bias = float(n.attr("lambd", 0.5)), float(n.attr("bias", 0.0))
    high = call("where", call("greater", x, lambd), call("sub", x, bias), 0)
    return call("where", call("less", x, -lambd), call("add", x, bias), high)


def swish(n: Node, x: Value) -> Value:
    return call("mul", x, call("sigmoid", call("mul", x, float(n.attr("alpha", 1.0)))))


def softsign(n: Node, x: Value) -> Value:
    return call("div", x, call("add", call("abs", x), 1))


def reciprocal(n: Node, x: Value) -> Value:
    return call("div", 1.0, x)


def is_nan(n: Node, x: Value) -> Value:
    out: Value = snp.isnan(V.tensor(x))  # x != x: a chain fuses it
    return out


def is_inf(n: Node, x: Value) -> Value:
    pos, neg = n.attr("detect_positive", 1), n.attr("detect_negative", 1)
    out: Value = snp.isinf(V.tensor(x))  # abs(x) == inf: a chain fuses it
    if pos and neg:
        return out
    sign = call("greater", x, 0) if pos else call("less", x, 0)
    return call("logical_and", out, sign) if (pos or neg) else call("logical_and", out, False)


def clip(n: Node, x: Value, lo: Value | None = None, hi: Value | None = None) -> Value:
    if n.opset < 11:
        lo = np.asarray(n.attr("min", -math.inf), V.dtype_of(x)) if n.has("min") else None
        hi = np.asarray(n.attr("max", math.inf), V.dtype_of(x)) if n.has("max") else None
    out = x
    if lo is not None:
        out = call("maximum", out, lo)
    if hi is not None:
        out = call("minimum", out, hi)
    return out


def where(n: Node, cond: Value, x: Value, y: Value) -> Value:
    c = V.known(cond)
    if (
        c is not None
        and V.is_known(x)
        and V.is_known(y)
        and (isinstance(x, SymInts) or isinstance(y, SymInts))
    ):
        picked = np.where(c.astype(bool), V.object_array(x), V.object_array(y))
        return SymInts.make(np.asarray(picked, dtype=object), V.dtype_of(x))
    return call("where", cond, x, y)


def _unaries() -> dict[str, Op]:
    names = {
        "Abs": "abs",
        "Neg": "neg",
        "Exp": "exp",
        "Log": "log",
        "Sqrt": "sqrt",
        "Sin": "sin",
        "Cos": "cos",
        "Tan": "tan",
        "Asin": "asin",
        "Acos": "acos",
        "Atan": "atan",
        "Sinh": "sinh",
        "Cosh": "cosh",
        "Asinh": "asinh",
        "Acosh": "acosh",
        "Atanh": "atanh",
        "Tanh": "tanh",
        "Erf": "erf",
        "Sigmoid": "sigmoid",
        "Floor": "floor",
        "Ceil": "ceil",
        "Round": "round",
        "Sign": "sign",
        "Softplus": "softplus",
        "Not": "logical_not",
    }
    return {k: Op(unary(v), arith=k not in ("Not", "Sign", "Abs", "Neg")) for k, v in names.items()}


OPS: dict[str, Op] = {
    **_unaries(),
    "Add": Op(binary("add", "add")),
    "Sub": Op(binary("sub", "sub")),
    "Mul": Op(binary("mul", "mul")),
    "Div": Op(div),
    "Mod": Op(mod),
    "Pow": Op(pow_),
    "Max": Op(variadic("maximum", "max"), arith=False),
    "Min": Op(variadic("minimum", "min"), arith=False),
    "Sum": Op(variadic("add", "add")),
    "Mean": Op(mean),
    "Equal": Op(compare("equal", "=="), arith=False),
    "Less": Op(compare("less", "<"), arith=False),
    "Greater": Op(compare("greater", ">"), arith=False),
    "LessOrEqual": Op(compare("less_equal", "<="), arith=False),
    "GreaterOrEqual": Op(compare("greater_equal", ">="), arith=False),
    "And": Op(logical("logical_and"), arith=False),
    "Or": Op(logical("logical_or"), arith=False),
    "Xor": Op(logical("logical_xor"), arith=False),
    "Where": Op(where, arith=False),
    "Cast": Op(cast, arith=False, check=check_cast),
    "CastLike": Op(cast_like, arith=False),
    "Clip": Op(clip, arith=False),
    "Reciprocal": Op(reciprocal),
    "IsInf": Op(is_inf),
    "IsNaN": Op(is_nan),
    "Relu": Op(relu),
    "LeakyRelu": Op(leaky_relu),
    "PRelu": Op(prelu),
    "Elu": Op(elu),
    "Selu": Op(selu),
    "Celu": Op(celu),
    "HardSigmoid": Op(hard_sigmoid),
    "HardSwish": Op(hard_swish),
    "Mish": Op(mish),
    "Gelu": Op(gelu, check=attr_is("approximate", ("none", "tanh"), "none")),
    "ThresholdedRelu": Op(thresholded_relu),
    "Shrink": Op(shrink),
    "Swish": Op(swish),
    "Softsign": Op(softsign),
}
