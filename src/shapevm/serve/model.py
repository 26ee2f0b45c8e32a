"""A served model: its runner, its V2 metadata, request checking and its batcher.

`load_model` reads a ``.svbc`` file (or takes an `Exported`, or an ``.onnx`` file), makes
the runner and decides how requests may be batched; `ServedModel.prepare` turns a decoded
request into the runner's arguments, refusing wrong names, datatypes, ranks and shapes
with the binder's message before anything is queued.

>>> import numpy as np, shapevm as sv
>>> b, = sv.symbolic_shape("b", constraints=["b <= 64"])
>>> exp = sv.export(sv.jit(lambda x: x + 1.0))(sv.ShapeDtypeStruct((b, 4), np.float32))
>>> model = load_model(exp, "inc", ServeOptions(jit=False, max_batch_size=4))
>>> meta = model.metadata()
>>> meta["inputs"], meta["shapevm"]["constraints"]
([{'name': 'x', 'datatype': 'FP32', 'shape': [-1, 4]}], ['b <= 64'])
>>> meta["shapevm"]["batching"]["enabled"], meta["shapevm"]["batching"]["dimension"]
(True, 'b')
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from shapevm.frontend.export import Exported, load
from shapevm.serve.batcher import Batcher, BatcherStats
from shapevm.serve.batching import BatchPlan, InvarianceCheck, Key, plan_batching
from shapevm.serve.protocol import InferRequest, bad_request, datatype_of
from shapevm.serve.runners import OnnxRuntimeRunner, Runner, ShapevmRunner, TensorInfo
from shapevm.shapes import ShapeError

RUNTIMES = ("shapevm", "onnxruntime")
_NOT_VARIABLES = {"max", "min", "floordiv", "mod", "dynamic"}


@dataclass(frozen=True)
class ServeOptions:
    """How models are served (the flags of ``shapevm serve``).

    - ``max_batch_size``: rows a joined call may have (1: no dynamic batching);
    - ``max_batch_delay_ms``: how long the oldest queued request waits for others to join;
    - ``max_queue``: requests waiting per model before the server answers 503;
    - ``max_body_mb``: largest request body (after decompression) accepted;
    - ``jit``: run models through the JIT (``False``: the interpreter only);
    - ``jit_options``: keywords for `shapevm.Exported.jit` (``cache_mode``...);
    - ``runtime``: ``shapevm``, or ``onnxruntime`` to run ``.onnx`` files with ONNX Runtime;
    - ``threads``: ONNX Runtime's intra-op threads (``None``: its default);
    - ``graceful_timeout_s``: how long SIGTERM waits for requests in flight.
    """

    max_batch_size: int = 32
    max_batch_delay_ms: float = 2.0
    max_queue: int = 256
    max_body_mb: float = 64.0
    jit: bool = True
    jit_options: dict[str, Any] = field(default_factory=dict)
    runtime: str = "shapevm"
    threads: int | None = None
    graceful_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        for name in ("max_batch_size", "max_queue"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, found {value!r}")
        for name in ("max_batch_delay_ms", "max_body_mb", "graceful_timeout_s"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"{name} must be a number >= 0, found {value!r}")
        if self.runtime not in RUNTIMES:
            raise ValueError(f"runtime must be one of {RUNTIMES}, found {self.runtime!r}")


@dataclass
class Prepared:
    """A checked request: the runner's arguments, its rows and join key, the outputs."""

    arrays: list[np.ndarray[Any, Any]]
    rows: int
    key: Key | None
    outputs: list[tuple[int, str, bool]]  # (output index, name, binary)


class ServedModel:
    """One model of a server (see the module docstring)."""

    version = "1"

    def __init__(self, name: str, runner: Runner, options: ServeOptions) -> None:
        self.name = name
        self.runner = runner
        self.options = options
        self.plan: BatchPlan = plan_batching(runner, options.max_batch_size)
        self.check = InvarianceCheck(runner, self.plan) if self.plan.enabled else None
        self.batcher: Batcher | None = None
        self.warm_path = ""
        self._input_names = [t.name for t in runner.inputs]
        self._output_index = {t.name: i for i, t in enumerate(runner.outputs)}
        example = _example(runner)
        if example is not None:  # models of one shape family: checked and warm when ready
            if self.check is not None:
                self.check.result(self.check.key_of(example))
                self.check.release()  # no other shape will come
            self.warm_path = runner.warm_up(example)

    # -- lifecycle --------------------------------------------------------------------------
    def start(self, on_call: Any = None) -> None:
        def report(stats: BatcherStats) -> None:
            if on_call is not None:
                on_call(self.name, stats)

        self.batcher = Batcher(
            self.runner,
            self.plan,
            self.check,
            max_delay_s=self.options.max_batch_delay_ms / 1e3,
            max_queue=self.options.max_queue,
            on_call=report,
            name=self.name,
        )

    def stop(self, timeout: float | None = None) -> None:
        if self.batcher is not None:
            self.batcher.close(timeout)

    @property
    def ready(self) -> bool:
        return self.batcher is not None

    # -- requests ---------------------------------------------------------------------------
    def prepare(self, request: InferRequest) -> Prepared:
        """The runner's arguments for ``request``, or a 400 `V2Error` saying what is wrong."""
        given = {}
        for t in request.inputs:
            if t.name in given:
                raise bad_request(f"input {t.name!r} is given twice")
            given[t.name] = t
        unknown = [n for n in given if n not in self._input_names]
        missing = [n for n in self._input_names if n not in given]
        if unknown or missing:
            raise bad_request(
                f"the inputs do not match model {self.name!r}",
                expected=", ".join(_describe(t) for t in self.runner.inputs),
                found=", ".join(given) or "no inputs",
                fix=f"send exactly the inputs {self._input_names}",
            )
        arrays = [self._checked(info, given[info.name]) for info in self.runner.inputs]
        try:
            env = self.runner.bind(arrays)
        except (ShapeError, ValueError) as exc:
            raise bad_request(str(exc)) from None
        rows, key = 1, None
        if self.check is not None and self.plan.variable is not None:
            rows = env[self.plan.variable]
            if rows <= self.plan.max_rows:
                key = self.check.key_of(arrays)
        return Prepared(arrays, rows, key, self._outputs(request))

    def _checked(self, info: TensorInfo, tensor: Any) -> np.ndarray[Any, Any]:
        want = datatype_of(info.dtype)
        if tensor.datatype != want:
            raise bad_request(
                f"input {info.name!r} of model {self.name!r} has the wrong datatype",
                expected=want,
                found=tensor.datatype,
                fix=f"send {want} data (in NumPy: .astype(np.{info.dtype.name}))",
            )
        array: np.ndarray[Any, Any] = tensor.array
        if info.dim_argument:
            if array.size != 1 or array.ndim > 1:
                raise bad_request(
                    f"input {info.name!r} is a dimension argument: one integer",
                    expected="shape [1] (or [])",
                    found=str(list(array.shape)),
                )
            return array.reshape(1)
        if array.ndim != len(info.dims):
            raise bad_request(
                f"input {info.name!r} of model {self.name!r} has the wrong rank",
                expected=f"{len(info.dims)} dimensions {_dims_text(info.dims)}",
                found=f"shape {list(array.shape)}",
            )
        return array

    def _outputs(self, request: InferRequest) -> list[tuple[int, str, bool]]:
        if request.outputs is None:
            return [
                (i, t.name, request.wants_binary(None)) for i, t in enumerate(self.runner.outputs)
            ]
        out: list[tuple[int, str, bool]] = []
        for r in request.outputs:
            if r.name not in self._output_index:
                raise bad_request(
                    f"model {self.name!r} has no output {r.name!r}",
                    expected=", ".join(self._output_index),
                    found=r.name,
                )
            out.append((self._output_index[r.name], r.name, request.wants_binary(r)))
        return out

    # -- metadata ---------------------------------------------------------------------------
    def metadata(self) -> dict[str, Any]:
        """The V2 model metadata, with shapevm's view of the signature in ``"shapevm"``."""
        r = self.runner
        return {
            "name": self.name,
            "versions": [self.version],
            "platform": r.platform,
            "inputs": [_v2_tensor(t) for t in r.inputs],
            "outputs": [_v2_tensor(t) for t in r.outputs],
            "shapevm": {
                "inputs": [{"name": t.name, "shape": list(t.dims)} for t in r.inputs],
                "outputs": [{"name": t.name, "shape": list(t.dims)} for t in r.outputs],
                "dimension_variables": _variables(r.inputs),
                "dimension_arguments": [t.name for t in r.inputs if t.dim_argument],
                "constraints": list(r.constraints),
                "batching": self.batching_info(),
                "executor": r.info(),
            },
        }

    def batching_info(self) -> dict[str, Any]:
        checked = [] if self.check is None else self.check.results().items()
        return {
            "enabled": self.plan.enabled,
            "dimension": self.plan.variable,
            "max_batch_size": self.plan.max_rows,
            "max_batch_delay_ms": self.options.max_batch_delay_ms,
            "reason": self.plan.reason,
            "checked": [
                {
                    "shape": _key_text(key),
                    "bit_identical": not reason,
                    "path": path,
                    "reason": reason,
                }
                for key, (reason, path) in checked
            ],
        }


def _example(runner: Runner) -> list[np.ndarray[Any, Any]] | None:
    """Zeros of one row for a model whose only symbolic dimension is a leading one."""
    out: list[np.ndarray[Any, Any]] = []
    for t in runner.inputs:
        dims = [1 if i == 0 and str(d).isidentifier() else d for i, d in enumerate(t.dims)]
        if t.dim_argument or not all(isinstance(d, int) for d in dims):
            return None
        out.append(np.zeros([int(d) for d in dims], t.dtype))
    try:
        runner.bind(out)
    except (ShapeError, ValueError):  # one row is not allowed: no example
        return None
    return out


def _v2_tensor(t: TensorInfo) -> dict[str, Any]:
    return {"name": t.name, "datatype": datatype_of(t.dtype), "shape": t.v2_shape}


def _dims_text(dims: Sequence[int | str]) -> str:
    return "[" + ", ".join(map(str, dims)) + "]"


def _describe(t: TensorInfo) -> str:
    return f"{t.name} ({datatype_of(t.dtype)} {_dims_text(t.dims)})"


def _variables(inputs: Sequence[TensorInfo]) -> list[str]:
    names: list[str] = []
    for t in inputs:
        for d in t.dims:
            for v in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", d) if isinstance(d, str) else ():
                if v not in _NOT_VARIABLES and v not in names:
                    names.append(v)
    return names


def _key_text(key: Key) -> list[Any]:
    return [list(part) for part in key]


def load_model(
    source: str | os.PathLike[str] | Exported,
    name: str | None = None,
    options: ServeOptions | None = None,
) -> ServedModel:
    """A `ServedModel` from a ``.svbc`` file, an `Exported`, or an ``.onnx`` file; its name
    defaults to the file's stem (or the function's name)."""
    options = options or ServeOptions()
    if isinstance(source, Exported):
        return ServedModel(name or source.fun_name, _shapevm_runner(source, options), options)
    path = Path(source)
    model_name = name or path.stem
    if path.suffix == ".onnx":
        return ServedModel(model_name, _onnx_runner(path, options), options)
    if options.runtime != "shapevm":
        raise ValueError(f"{path}: the {options.runtime} runtime serves .onnx files only")
    return ServedModel(model_name, _shapevm_runner(load(path), options), options)


def _shapevm_runner(exp: Exported, options: ServeOptions) -> ShapevmRunner:
    return ShapevmRunner(exp, jit=options.jit, jit_options=options.jit_options)


def _onnx_runner(path: Path, options: ServeOptions) -> Runner:
    if options.runtime == "onnxruntime":
        return OnnxRuntimeRunner(path, threads=options.threads)
    try:
        sv_onnx = importlib.import_module("shapevm.onnx")
        onnx = importlib.import_module("onnx")
    except ImportError as exc:
        raise ValueError(
            f"{path}: importing ONNX models needs {exc.name}\n"
            "  fix: pip install 'shapevm[onnx]', or serve it with ONNX Runtime: "
            "--runtime onnxruntime"
        ) from None
    proto = onnx.load(os.fspath(path))  # with its external data, if any
    graph = proto.graph
    weights = {t.name for t in graph.initializer}
    inputs = [v.name for v in graph.input if v.name not in weights]
    outputs = [v.name for v in graph.output]
    return ShapevmRunner(
        sv_onnx.load(proto),
        jit=options.jit,
        jit_options=options.jit_options,
        names=(inputs, outputs),  # the graph's own names, as Triton and ONNX Runtime show them
        platform="shapevm_onnx",
    )
