"""The vectorizable scalar functions every epilogue is built on, against float64."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("numba", exc_type=ImportError)

from shapevm.jit.native import ACTIVATIONS
from shapevm.jit.native._core import apply_act, erfc32, exp32, kernel
from tests.jit.native.reference import act


@kernel
def _map_exp(x, out):
    for i in range(x.size):
        out[i] = exp32(x[i])


@kernel
def _map_erfc(x, out):
    for i in range(x.size):
        out[i] = erfc32(x[i])


@kernel
def _map_act(x, out, code):
    for i in range(x.size):
        out[i] = apply_act(x[i], code)


def test_exp32_relative_error_and_special_values() -> None:
    x = np.linspace(-87.0, 88.5, 200_001).astype(np.float32)
    out = np.empty_like(x)
    _map_exp(x, out)
    ref = np.exp(x.astype(np.float64))
    assert np.max(np.abs(out - ref) / ref) < 3e-7
    special = np.float32([np.nan, np.inf, -np.inf, 89.0, -88.0, -200.0, 0.0])
    out = np.empty_like(special)
    _map_exp(special, out)
    assert np.isnan(out[0]) and out[1] == np.inf and out[2] == 0.0 and out[3] == np.inf
    assert out[4] == 0.0 and out[5] == 0.0 and out[6] == 1.0


def test_erfc32_relative_error_on_the_whole_line() -> None:
    x = np.linspace(-6.0, 9.0, 30_001).astype(np.float32)
    out = np.empty_like(x)
    _map_erfc(x, out)
    ref = np.array([math.erfc(v) for v in x.astype(np.float64)])
    # The rounding of x * x inside exp grows with x: 3e-7 near 0, 8e-6 at the underflow.
    assert np.max(np.abs(out - ref) / ref) < 1e-5


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation_elementwise_accuracy(name: str) -> None:
    x = np.concatenate([np.linspace(-30, 30, 6001), np.linspace(-1e-3, 1e-3, 101)])
    x = x.astype(np.float32)
    out = np.empty_like(x)
    _map_act(x, out, ACTIVATIONS[name])
    ref = act(name, x)
    tol = 1e-5 * np.maximum(np.abs(ref), 1e-30) + 1e-37
    assert np.all(np.abs(out - ref) <= np.maximum(tol, 2e-6 * np.abs(ref) + 1e-12)), name


@pytest.mark.parametrize("name", ["relu", "gelu_tanh", "gelu_erf", "silu"])
def test_activations_keep_nan(name: str) -> None:
    out = np.empty(1, np.float32)
    _map_act(np.float32([np.nan]), out, ACTIVATIONS[name])
    assert np.isnan(out[0])
