"""W1-W3 exported once with symbolic shapes match NumPy in float64 on every shape."""

from __future__ import annotations

import numpy as np
import pytest

import shapevm as sv
from shapevm.models import traced
from shapevm.models import workloads as wl

TOL = 1e-5  # max |y - ref| / max |ref|, float32 arithmetic


@pytest.fixture(scope="module", params=["W1", "W2", "W3"])
def workload(request: pytest.FixtureRequest) -> tuple[str, sv.Exported, object]:
    wid = request.param
    weights = wl.make_weights(wid)
    exp = sv.deserialize(traced.export_workload(wid, weights).serialize())
    return wid, exp, wl.reference_f64(wid, weights)


def test_benchmark_shapes_match_the_float64_reference(workload: tuple) -> None:
    wid, exp, ref = workload
    for i, shape in enumerate(wl.get_workload(wid).shapes):
        x = wl.make_input(wid, shape, seed=i)
        y = exp.call(x)
        assert y.dtype == np.float32
        assert wl.accuracy(y, ref(x)) < TOL, (wid, shape)


def test_random_shapes_match_the_float64_reference(workload: tuple) -> None:
    wid, exp, ref = workload
    for i, shape in enumerate(wl.random_shapes(wid, 4, seed=7)):
        x = wl.make_input(wid, shape, seed=100 + i)
        assert wl.accuracy(exp.call(x), ref(x)) < TOL, (wid, shape)


def test_exports_are_symbolic_in_the_workload_dimensions() -> None:
    got = [repr(traced.input_spec(w)) for w in ("W1", "W2", "W3")]
    assert got == [
        "ShapeDtypeStruct(shape=(b, 256), dtype=float32)",
        "ShapeDtypeStruct(shape=(b, 3, h, w), dtype=float32)",
        "ShapeDtypeStruct(shape=(b, s, 256), dtype=float32)",
    ]
