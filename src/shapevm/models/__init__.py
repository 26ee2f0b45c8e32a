"""The benchmark workloads (``BENCHMARKS.md``) in plain NumPy: weights, inputs, shapes, and
the float32 eager and float64 reference implementations. Needs nothing beyond NumPy."""

from shapevm.models.workloads import (
    WORKLOADS,
    Workload,
    accuracy,
    get_workload,
    make_input,
    make_weights,
    numpy_eager,
    random_shapes,
    reference_f64,
    stream_shapes,
)

__all__ = [
    "WORKLOADS",
    "Workload",
    "accuracy",
    "get_workload",
    "make_input",
    "make_weights",
    "numpy_eager",
    "random_shapes",
    "reference_f64",
    "stream_shapes",
]
