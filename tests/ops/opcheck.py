"""Run an op's shape rule, dtype rule and kernel on one valuation and check they agree."""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from shapevm.ops import DYNAMIC, AttrKind, DType, ShapeResult, get_op
from shapevm.shapes import DimExpr, SymbolicScope, symbolic_shape

SCOPE = SymbolicScope(())
RELS = {"==": operator.eq, "<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt}


def dims(text: str) -> tuple[Any, ...]:
    return symbolic_shape(text, scope=SCOPE) if text.strip() else ()


def value(d: Any, env: Mapping[str, int]) -> int:
    return d.evaluate(env) if isinstance(d, DimExpr) else int(d)


def concrete(shape: Sequence[Any], env: Mapping[str, int]) -> tuple[int, ...]:
    return tuple(value(d, env) for d in shape)


def rule_attrs(name: str, attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Defaults filled in, ``DIMS`` given as text parsed to symbolic dimensions."""
    info = get_op(name)
    assert info is not None
    out: dict[str, Any] = dict(info.filled_attrs(attrs))
    for spec in info.attrs:
        if spec.kind is AttrKind.DIMS and isinstance(out.get(spec.name), str):
            out[spec.name] = dims(out[spec.name])
    return out


def kernel_attrs(name: str, attrs: Mapping[str, Any], env: Mapping[str, int]) -> dict[str, Any]:
    """What the interpreter hands a kernel: ``DIMS`` evaluated to ints."""
    info = get_op(name)
    assert info is not None
    out = rule_attrs(name, attrs)
    for spec in info.attrs:
        if spec.kind is AttrKind.DIMS and out.get(spec.name) is not None:
            out[spec.name] = concrete(out[spec.name], env)
    return out


def random_array(shape: tuple[int, ...], dtype: DType, rng: np.random.Generator) -> Any:
    if dtype is DType.BOOL:
        return rng.random(shape) < 0.5
    if dtype.is_float:
        return rng.normal(size=shape).astype(dtype.numpy.newbyteorder("="))
    lo = 0 if dtype.value.startswith("u") else -5
    return rng.integers(lo, 6, size=shape).astype(dtype.numpy.newbyteorder("="))


def run_op(
    name: str,
    specs: Sequence[str],
    attrs: Mapping[str, Any],
    env: Mapping[str, int],
    dtypes: Sequence[DType],
    args: Sequence[Any] | None = None,
) -> tuple[ShapeResult, tuple[Any, ...]]:
    """Check rule against kernel at ``env``; return the rule result and the outputs."""
    info = get_op(name)
    assert info is not None
    shapes = [dims(s) for s in specs]
    rattrs = rule_attrs(name, attrs)
    result = info.shape_rule(shapes, rattrs)
    for cond in result.conditions:
        lhs, rhs = value(cond.lhs, env), value(cond.rhs, env)
        assert RELS[cond.rel](lhs, rhs), f"{cond} fails at {env}"
    rng = np.random.default_rng(0)
    if args is None:
        args = [random_array(concrete(s, env), d, rng) for s, d in zip(shapes, dtypes, strict=True)]
    out_dtypes = info.dtype_rule(list(dtypes), rattrs)
    outs = info.kernel(args, kernel_attrs(name, attrs, env))
    assert len(outs) == info.num_outputs == len(result.shapes) == len(out_dtypes)
    for out, want, dtype in zip(outs, result.shapes, out_dtypes, strict=True):
        assert len(out.shape) == len(want), (out.shape, want)
        for got, d in zip(out.shape, want, strict=True):
            if d is not DYNAMIC:
                assert got == value(d, env), (out.shape, want, env)
        assert DType.from_numpy(out.dtype) == dtype, (out.dtype, dtype)
    return result, outs
