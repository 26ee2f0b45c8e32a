"""The library's vector math against float64, at every instruction-set level: within 2 ulp
or 1e-6 relative (whichever is looser) for the math functions, NaN and infinities as
NumPy has them."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from shapevm import native
from tests.native.reference import act64, erf64, sigmoid64, ulp_err

Array = np.ndarray[Any, Any]


def _grid() -> Array:
    parts = [
        np.linspace(-110.0, 100.0, 100_001),
        np.linspace(-4.0, 4.0, 40_001),
        np.geomspace(1e-38, 1e4, 20_001),
        -np.geomspace(1e-38, 1e4, 20_001),
        np.float32([0.0, -0.0, 1.0, -1.0, 0.625, -0.625, 88.7, -87.3, -103.9]),
    ]
    return np.concatenate(parts).astype(np.float32)


X = _grid()
MATH: dict[str, tuple[Callable[[Array], Array], Callable[[Array], Array]]] = {
    # name: (domain filter, float64 reference)
    "exp": (lambda x: x[x < 88.72], np.exp),
    "log": (lambda x: np.abs(x[x != 0]), np.log),
    "tanh": (lambda x: x, np.tanh),
    "erf": (lambda x: x, erf64),
    "sigmoid": (lambda x: x, sigmoid64),
    "sqrt": (lambda x: np.abs(x), np.sqrt),
}


@pytest.mark.parametrize("name", sorted(MATH))
def test_math_within_two_ulp_or_1e6_relative(isa: str, name: str) -> None:
    domain, ref64 = MATH[name]
    x = np.ascontiguousarray(domain(X))
    y = native.vmath(name, x)
    with np.errstate(all="ignore"):
        ref = ref64(x.astype(np.float64))
        rel = np.abs(y.astype(np.float64) - ref) / np.abs(ref)
    ulp = ulp_err(y, ref)
    bad = (ulp > 2.0) & ~(rel <= 1e-6)
    assert not bad.any(), (
        f"{name} at {isa}: {int(bad.sum())} values off, e.g. x={x[bad][:3]} "
        f"y={y[bad][:3]} ref={ref[bad][:3]} ulp={ulp[bad][:3]}"
    )


@pytest.mark.parametrize("name", ["gelu_tanh", "gelu_erf", "silu"])
def test_activations_match_float64(isa: str, name: str) -> None:
    y = native.vmath(name, X)
    ref = act64(name, X)
    # exp of a float32 argument near -64 is only good to ~|arg| * 2^-24 relative
    np.testing.assert_allclose(y, ref, rtol=2e-5, atol=1e-30)


@pytest.mark.parametrize("name", native.VMATH_FUNCTIONS)
def test_special_values_follow_numpy(isa: str, name: str) -> None:
    x = np.float32([np.nan, np.inf, -np.inf, 0.0, -0.0, -1.0])
    with np.errstate(all="ignore"):
        expected = {
            "exp": np.exp(x),
            "log": np.log(x),
            "tanh": np.tanh(x),
            "erf": np.float32([np.nan, 1.0, -1.0, 0.0, -0.0, math.erf(-1.0)]),
            "sigmoid": np.float32([np.nan, 1.0, 0.0, 0.5, 0.5, 1 / (1 + math.e)]),
            "sqrt": np.sqrt(x),
            "gelu_tanh": np.float32([np.nan, np.inf, np.nan, 0.0, 0.0, act64("gelu_tanh", -1.0)]),
            "gelu_erf": np.float32([np.nan, np.inf, np.nan, 0.0, 0.0, act64("gelu_erf", -1.0)]),
            "silu": np.float32([np.nan, np.inf, np.nan, 0.0, 0.0, act64("silu", -1.0)]),
        }[name]
        y = native.vmath(name, x)
    np.testing.assert_allclose(y, expected, rtol=1e-6, equal_nan=True)


def test_lengths_around_the_vector_width(isa: str) -> None:
    for n in range(0, 40):
        x = np.linspace(-3, 3, n, dtype=np.float32)
        np.testing.assert_allclose(native.vmath("tanh", x), np.tanh(x), rtol=1e-6, atol=1e-7)
