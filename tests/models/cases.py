"""Inputs and float64 reference outputs shared by the tests that check systems against them:
the reference is the slow part, so each (workload, shape, seed) is computed once per run."""

from __future__ import annotations

import functools

import numpy as np

from shapevm.models import make_input, make_weights, reference_f64

Shape = tuple[int, ...]


@functools.cache
def weights(wid: str) -> dict[str, np.ndarray]:
    return make_weights(wid)


@functools.cache
def case(wid: str, shape: Shape, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The input and its float64 reference output."""
    x = make_input(wid, shape, seed)
    return x, reference_f64(wid, weights(wid))(x)
