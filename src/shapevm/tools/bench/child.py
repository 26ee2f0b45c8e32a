"""One measuring process: one system on one workload, fresh, then exit.

Run by the parent as ``python -m shapevm.tools.bench.child SPEC_JSON OUT_PATH`` with the
thread limits already in its environment and its CPUs already pinned (see ``env.py``). Two
modes:

* ``shapes``: (a) build plus the first call on the first shape, (b) the first call on each
  further shape, (c) for every shape, ``warmup`` calls then the median of ``steady_calls``;
  then peak RSS, and only after that the float64 reference (which would inflate the RSS);
* ``stream``: build, then the calls of the stream one after another, each timed; the total
  runs from the start of the build to the end of the last call.

Inputs are made before any clock starts, one per distinct shape, and so is what a user has
before loading a model (``System.prepare``: the workload's ONNX file on disk, for the
systems that load one; building it with ``onnx.helper`` is not their build). A workload
may also be an ONNX file (``spec["onnx"]``), which the system runs with its
``build_onnx``. Imports of the system's library (``System.imports_for``) are made before
any clock starts; the parent times them in a bare interpreter, and they are in neither (a)
nor (d).
"""

from __future__ import annotations

import gc
import json
import platform
import resource
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

from shapevm.models import workloads as wl
from shapevm.tools.bench import onnx_files
from shapevm.tools.bench.env import bench_threads
from shapevm.tools.bench.registry import Compiled, System, get_system

Shape = tuple[int, ...]


def _now() -> float:
    return time.perf_counter()


def _peak_rss_mib() -> tuple[float, float]:
    """Peak resident memory of this process and of its largest waited-for child, in MiB."""
    scale = 1.0 if sys.platform == "darwin" else 1024.0  # bytes on macOS, KiB elsewhere
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * scale / 2**20
    return own, kids


def _import_all(system: System, spec: dict[str, Any]) -> None:
    """Import the system's libraries (and onnx, to read an ONNX file) before any clock
    starts; the parent times these imports in a bare interpreter (``runner.time_imports``)."""
    for module in system.imports_for("onnx" in spec):
        __import__(module)


def _timed(fn: Compiled, x: np.ndarray) -> tuple[float, np.ndarray]:
    start = _now()
    y = fn(x)
    return _now() - start, y


def _inputs(workload_id: str, shapes: list[Shape]) -> dict[Shape, np.ndarray]:
    """One input per distinct shape; a listed shape gets the same input in every process."""
    listed = wl.get_workload(workload_id).shapes

    def seed(i: int, shape: Shape) -> int:
        return 1000 + listed.index(shape) if shape in listed else 2000 + i

    distinct = list(dict.fromkeys(shapes))
    return {s: wl.make_input(workload_id, s, seed(i, s)) for i, s in enumerate(distinct)}


class Task:
    """What a process measures: how to build the system's callable, the inputs, and the
    yardstick of accuracy (made only after the timing)."""

    def __init__(self, system: System, spec: dict[str, Any], shapes: list[Shape]) -> None:
        wid = spec["workload"]
        path = spec.get("onnx")
        if path is None:
            weights = wl.make_weights(wid)
            # an array per shape (for an ONNX file of several inputs, a Feeds of them)
            self.inputs: dict[Shape, Any] = _inputs(wid, shapes)
            if system.prepare is not None:  # before any clock: the model file a user has
                system.prepare(wid, weights)
            self.build: Callable[[], Compiled] = lambda: system.build(wid, weights)
            self.reference: Callable[[], Any] = lambda: wl.reference_f64(wid, weights)
            return
        if system.build_onnx is None:
            raise ValueError(f"{system.name} cannot run an ONNX file")
        build_file = system.build_onnx
        self.inputs = onnx_files.make_inputs(path, shapes)
        self.build = lambda: build_file(path)
        self.reference = lambda: onnx_files.reference(path)


def run_shapes(system: System, spec: dict[str, Any]) -> dict[str, Any]:
    shapes: list[Shape] = [tuple(s) for s in spec["shapes"]]
    task = Task(system, spec, shapes)
    inputs = task.inputs
    _import_all(system, spec)
    gc.collect()
    start = _now()
    fn = task.build()
    build_s = _now() - start
    first_s, y0 = _timed(fn, inputs[shapes[0]])
    outputs = {shapes[0]: y0}
    new_shape_s = []
    for shape in shapes[1:]:
        dt, outputs[shape] = _timed(fn, inputs[shape])
        new_shape_s.append(dt)
    steady = []
    settle = getattr(fn, "settle", None)
    for shape in shapes:
        x = inputs[shape]
        for _ in range(spec["warmup"]):
            fn(x)
        if settle is not None:  # background compiles done: steady means after compiles
            settle()
        gc.collect()
        steady.append(statistics.median(_timed(fn, x)[0] for _ in range(spec["steady_calls"])))
    rss, rss_children = _peak_rss_mib()
    ref = task.reference()
    acc = [
        wl.accuracy(np.asarray(outputs[s]), ref(inputs[s])) if ref else float("nan") for s in shapes
    ]
    return {
        "build_s": build_s,
        "first_call_s": build_s + first_s,
        "new_shape_s": new_shape_s,
        "steady_s": steady,
        "accuracy": acc,
        "rss_mib": rss,
        "rss_children_mib": rss_children,
    }


def run_stream(system: System, spec: dict[str, Any]) -> dict[str, Any]:
    stream: list[Shape] = [tuple(s) for s in spec["shapes"]]
    task = Task(system, spec, stream)
    xs = [task.inputs[s] for s in stream]
    _import_all(system, spec)
    gc.collect()
    start = _now()
    fn = task.build()
    build_s = _now() - start
    latencies = []
    for x in xs:
        t = _now()
        fn(x)
        latencies.append(_now() - t)
    total_s = _now() - start
    rss, rss_children = _peak_rss_mib()
    return {
        "build_s": build_s,
        "total_s": total_s,
        "worst_s": max(latencies),
        "latencies_s": latencies,
        "rss_mib": rss,
        "rss_children_mib": rss_children,
    }


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    """Run ``spec`` (system, workload, mode, shapes, warmup, steady_calls) in this process."""
    system = get_system(spec["system"])
    result = (run_shapes if spec["mode"] == "shapes" else run_stream)(system, spec)
    result["versions"] = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "system": system.version() if system.version else "",
    }
    result["threads"] = bench_threads()
    return result


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    try:
        result: dict[str, Any] = {"ok": True, **measure(spec)}
        code = 0
    except Exception as exc:
        tb = traceback.format_exc(limit=8)
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": tb}
        code = 1
    with open(argv[1], "w", encoding="utf-8") as f:
        json.dump(result, f)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
