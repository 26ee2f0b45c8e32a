"""Which requests the dynamic batcher may join, and the check that joining changes no bit.

Joining requests along their batch dimension changes the row count of every kernel the
model runs, and kernels choose their code by row count: a matrix product of 7 rows and one
of 1 row are different instruction sequences (OpenBLAS takes a matrix-vector kernel for one
row and blocks rows in tiles), so a row of a joined call can differ in its last bits from
the same row called alone. On this machine kind, NumPy/OpenBLAS does exactly that for
every row count; the JIT's compiled kernels and ONNX Runtime keep each row's arithmetic
independent of the row count.

So the server joins requests for a model only where it has checked that a joined call is
bit-identical, row for row, to single calls:

1. **structure** (`plan_batching`): one dimension variable is the leading dimension of
   every array input and every output and appears nowhere else (no data-dependent output
   size); its constraints cap the joined rows;
2. **bits** (`InvarianceCheck`): for each shape of the other dimensions, random inputs of
   ``max_rows`` rows are run as every prefix of 1..``max_rows`` rows and as every single
   row, on one execution *path* of the runner (compiled code, the interpreter or ONNX
   Runtime), twice per row count (a key's first compiled call borrows another key's
   variant, the second has its own); every row must be equal byte for byte;
3. **at run time** (`shapevm.serve.batcher`), a joined call's result is used only when the
   call took the checked path; otherwise each request runs alone.

This is a test of the kernels on random data, not a proof: it rests on the kernels' choice
of code depending on shapes and not on values, which holds for the kernels above.

>>> import numpy as np, shapevm as sv
>>> from shapevm.serve.runners import ShapevmRunner
>>> b, = sv.symbolic_shape("b")
>>> exp = sv.export(sv.jit(lambda x: x * 2.0 + 1.0))(sv.ShapeDtypeStruct((b, 4), np.float32))
>>> plan = plan_batching(ShapevmRunner(exp, jit=False), max_batch_size=8)
>>> plan.variable, plan.max_rows, plan.reason
('b', 8, '')
>>> check = InvarianceCheck(ShapevmRunner(exp, jit=False), plan)
>>> check.key_of([np.zeros((3, 4), np.float32)])
((4,),)
>>> check.result(((4,),))
('', 'interpreted')
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from shapevm.serve.runners import Arrays, Outputs, Prober, Runner, TensorInfo
from shapevm.tools.run import random_array

Key = tuple[Any, ...]
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEYS_KEPT = 64


@dataclass(frozen=True)
class BatchPlan:
    """How a model's requests may be joined: along ``variable``, up to ``max_rows`` rows;
    ``reason`` says why they never are (empty when they may be)."""

    variable: str | None
    max_rows: int
    reason: str = ""

    @property
    def enabled(self) -> bool:
        return not self.reason


def plan_batching(runner: Runner, max_batch_size: int) -> BatchPlan:
    """The structural half of the decision (see the module docstring)."""
    if max_batch_size < 2:
        return BatchPlan(None, 1, "dynamic batching is off (max batch size 1)")
    arrays = [t for t in runner.inputs if not t.dim_argument]
    if not arrays:
        return BatchPlan(None, 1, "the model has no array inputs")
    variable, reason = _leading_variable(arrays, "input")
    if variable is None:
        return BatchPlan(None, 1, reason)
    for t in runner.inputs:
        if t.dim_argument and t.name == variable:
            return BatchPlan(None, 1, f"'{variable}' is passed as an integer argument")
    out_var, reason = _leading_variable(runner.outputs, "output")
    if out_var != variable:
        return BatchPlan(None, 1, reason or f"outputs do not start with '{variable}'")
    for t in (*runner.inputs, *runner.outputs):
        for axis, d in enumerate(t.dims[1:], 1):
            if d == "dynamic":
                return BatchPlan(None, 1, f"{t.name}.shape[{axis}] is data-dependent")
            if isinstance(d, str) and variable in _IDENT.findall(d):
                return BatchPlan(
                    None, 1, f"'{variable}' also appears in {t.name}.shape[{axis}] ({d})"
                )
    bound = runner.upper_bound(variable)
    max_rows = int(min(max_batch_size, bound))
    if max_rows < 2:
        return BatchPlan(variable, 1, f"the constraints allow at most {bound:g} rows")
    return BatchPlan(variable, max_rows)


def _leading_variable(tensors: Sequence[TensorInfo], what: str) -> tuple[str | None, str]:
    variable: str | None = None
    for t in tensors:
        first = t.dims[0] if t.dims else None
        if not isinstance(first, str) or not _IDENT.fullmatch(first) or first == "dynamic":
            dims = ", ".join(map(str, t.dims))
            return None, f"{what} {t.name!r} does not start with a dimension variable ({dims})"
        if variable is not None and first != variable:
            return None, f"{what}s start with different dimensions ('{variable}', '{first}')"
        variable = first
    return variable, ""


class InvarianceCheck:
    """The bit-level half: checks each shape of the non-batch dimensions once (on first
    use) and remembers the verdict, ``("", path)`` or ``(reason, path)``."""

    def __init__(self, runner: Runner, plan: BatchPlan, seed: int = 0) -> None:
        self.runner = runner
        self.plan = plan
        self.seed = seed
        self._prober: Prober | None = None
        self._results: OrderedDict[Key, tuple[str, str]] = OrderedDict()
        self._lock = threading.Lock()  # results are read by the metadata route's thread

    def key_of(self, arrays: Arrays) -> Key:
        """What must be equal for two requests to be joined: the shapes without their
        first dimension, and the values of dimension arguments."""
        return tuple(
            tuple(int(x) for x in a.reshape(-1)) if t.dim_argument else a.shape[1:]
            for t, a in zip(self.runner.inputs, arrays, strict=True)
        )

    def known(self, key: Key) -> tuple[str, str] | None:
        with self._lock:
            return self._results.get(key)

    def results(self) -> dict[Key, tuple[str, str]]:
        with self._lock:
            return dict(self._results)

    def result(self, key: Key) -> tuple[str, str]:
        """The verdict for ``key``, running the check the first time."""
        found = self.known(key)
        if found is None:
            found = self._check(key)
            with self._lock:
                if len(self._results) >= _KEYS_KEPT:
                    self._results.popitem(last=False)
                self._results[key] = found
        return found

    def release(self) -> None:
        """Drop the prober (its compiled variants) until another shape needs checking."""
        self._prober = None

    def _check(self, key: Key) -> tuple[str, str]:
        if self._prober is None:
            self._prober = self.runner.prober()
        try:
            sliced = [not t.dim_argument for t in self.runner.inputs]
            return _check_rows(self._prober, self._inputs(key), sliced, self.plan.max_rows)
        except Exception as exc:  # any failure of the model on random data: never join
            first = str(exc).splitlines()[0] if str(exc) else ""
            return f"the check could not run the model: {type(exc).__name__}: {first}", ""

    def _inputs(self, key: Key) -> list[np.ndarray[Any, Any]]:
        rng = np.random.default_rng(self.seed)
        out: list[np.ndarray[Any, Any]] = []
        for t, part in zip(self.runner.inputs, key, strict=True):
            if t.dim_argument:
                out.append(np.asarray(part, dtype=t.dtype))
            else:
                out.append(random_array(rng, (self.plan.max_rows, *part), t.dtype))
        return out


def _check_rows(
    probe: Prober, inputs: list[np.ndarray[Any, Any]], sliced: list[bool], max_rows: int
) -> tuple[str, str]:
    def call(start: int, stop: int) -> tuple[Outputs, str]:
        return probe([a[start:stop] if s else a for a, s in zip(inputs, sliced, strict=True)])

    path = ""
    for _ in range(3):  # warm up: the JIT's first call compiles and runs interpreted
        _, path = call(0, 1)
    singles: list[Outputs] = []
    for i in range(max_rows):
        runs = [call(i, i + 1) for _ in range(2)]
        alone = [outs for outs, p in runs if p == path]
        if not alone:
            return f"single-row calls do not stay on the {path} path", path
        singles.append(alone[0])
    for n in range(2, max_rows + 1):
        runs = [call(0, n) for _ in range(2)]
        checked = [outs for outs, p in runs if p == path]
        if not checked:
            return f"calls of {n} rows do not run on the {path} path", path
        for outs in checked:
            diff = _first_difference(outs, singles)
            if diff:
                return f"a joined call is not bit-identical to single calls: {diff}", path
    return "", path


def _first_difference(joined: Outputs, singles: list[Outputs]) -> str:
    n = joined[0].shape[0] if joined and joined[0].ndim else 0
    for k, out in enumerate(joined):
        for i in range(n):
            alone = singles[i][k][0]
            if out[i].shape != alone.shape:
                shapes = f"shape {out[i].shape}, alone {alone.shape}"
                return f"row {i} of a {n}-row call, output {k}: {shapes}"
            if out[i].tobytes() != alone.tobytes():
                delta = np.max(np.abs(out[i].astype(np.float64) - alone.astype(np.float64)))
                return f"row {i} of a {n}-row call, output {k} (max |difference| {delta:.3g})"
    return ""
