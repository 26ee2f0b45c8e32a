"""What runs a served model: an exported shapevm function, or ONNX Runtime on an ``.onnx``.

A `Runner` states its inputs and outputs (`TensorInfo`: name, dtype, dimensions with the
symbolic ones by name), checks the shapes of a call before any work (`bind`, with the
messages of `shapevm.solve_dim_vars`), and runs calls. The batcher joins requests on one
*path* of a runner only: `run_on_path` also says which path a call took (``compiled``,
``interpreted`` or ``onnxruntime``), and `prober` gives a separate callable that the
batch-invariance check (`shapevm.serve.batching`) uses to test that path.

>>> import numpy as np, shapevm as sv
>>> b, = sv.symbolic_shape("b", constraints=["b <= 64"])
>>> exp = sv.export(sv.jit(lambda x: x * 2.0))(sv.ShapeDtypeStruct((b, 4), np.float32))
>>> runner = ShapevmRunner(exp, jit=False)
>>> runner.inputs, runner.outputs
((TensorInfo('x', float32, ('b', 4)),), (TensorInfo('output_0', float32, ('b', 4)),))
>>> runner.bind([np.ones((3, 4), np.float32)])
{'b': 3}
>>> runner.run([np.ones((1, 4), np.float32)])
[array([[2., 2., 2., 2.]], dtype=float32)]
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from shapevm import _pytree
from shapevm.frontend.export import Exported
from shapevm.shapes import DimExpr, ShapeError, bounds, solve_dim_vars

Arrays = Sequence[np.ndarray[Any, Any]]
Outputs = list[np.ndarray[Any, Any]]
Prober = Callable[[Arrays], tuple[Outputs, str]]
_BIND_CACHE = 1024


@dataclass(frozen=True)
class TensorInfo:
    """A model input or output: ``dims`` holds ints, and the symbolic dimensions as their
    text (``"b"``, ``"2*h"``, or ``"dynamic"`` for a data-dependent size)."""

    name: str
    dtype: np.dtype[Any]
    dims: tuple[int | str, ...]
    dim_argument: bool = False  # a dimension variable the caller passes as an integer

    @property
    def v2_shape(self) -> list[int]:
        """The shape as KServe V2 metadata writes it: ``-1`` for every symbolic dimension."""
        return [d if isinstance(d, int) else -1 for d in self.dims]

    def __repr__(self) -> str:
        return f"TensorInfo({self.name!r}, {self.dtype.name}, {self.dims})"


class Runner(ABC):
    """The executor of one model (see the module docstring)."""

    platform = ""
    inputs: tuple[TensorInfo, ...] = ()
    outputs: tuple[TensorInfo, ...] = ()
    constraints: tuple[str, ...] = ()

    @abstractmethod
    def bind(self, arrays: Arrays) -> dict[str, int]:
        """The value of each dimension variable for these inputs, or `ShapeError`."""

    @abstractmethod
    def run(self, arrays: Arrays) -> Outputs:
        """The model's outputs for these inputs."""

    @abstractmethod
    def run_on_path(self, arrays: Arrays) -> tuple[Outputs, str]:
        """Run, and say which path the call took."""

    @abstractmethod
    def prober(self) -> Prober:
        """A callable like `run_on_path` whose state the server's calls do not share."""

    def upper_bound(self, variable: str) -> float:
        """The largest value the constraints allow for a dimension variable."""
        return float("inf")

    def warm_up(self, arrays: Arrays) -> str:
        """Call until calls take the runner's fast path (the JIT's compiled code); the path."""
        return self.run_on_path(arrays)[1]

    def info(self) -> dict[str, Any]:
        """What the model metadata's extension field shows about the executor."""
        return {}


class ShapevmRunner(Runner):
    """An `Exported` function, through the JIT (``jit=True``) or the interpreter."""

    platform = "shapevm_svbc"

    def __init__(
        self,
        exp: Exported,
        *,
        jit: bool = True,
        jit_options: dict[str, Any] | None = None,
        names: tuple[Sequence[str], Sequence[str]] | None = None,
        platform: str = "shapevm_svbc",
    ) -> None:
        """``names``: the inputs' and outputs' names, in order, when they should not be the
        exported function's (an imported ONNX graph keeps its own); ``platform``: what the
        V2 metadata reports."""
        self.exp = exp
        self.platform = platform
        self.jit = jit
        self.jit_options = dict(jit_options or {})
        # Joined calls make many row counts: room for their variants, so that they are not
        # evicted and recompiled over and over (the JIT's default keeps 32).
        self.jit_options.setdefault("max_variants", 256)
        self._fast = exp.jit(**self.jit_options) if jit else None
        self.inputs = _shapevm_inputs(exp)
        self.outputs = tuple(
            TensorInfo(name, np.dtype(a.dtype), _dims(a.shape))
            for name, a in zip(_output_names(exp.out_tree), exp.out_avals, strict=True)
        )
        if names is not None:
            self.inputs, self.outputs = (
                _renamed(self.inputs, names[0]),
                _renamed(self.outputs, names[1]),
            )
        self.constraints = tuple(exp.constraints)
        self._specs: list[tuple[int | DimExpr, ...]] = [
            tuple(d for d in a.shape if isinstance(d, (int, DimExpr))) for a in exp.in_avals
        ]  # arguments have no data-dependent dimensions
        self._array_names = [t.name for t in self.inputs if not t.dim_argument]
        self._dim_vars = {
            t.name: k.dim for t, k in zip(self.inputs, exp.leaf_kinds, strict=True) if k.dim
        }
        self._scope = next(
            (d.scope for s in self._specs for d in s if isinstance(d, DimExpr)), None
        )
        self._bound: OrderedDict[tuple[Any, ...], dict[str, int]] = OrderedDict()

    def bind(self, arrays: Arrays) -> dict[str, int]:
        shapes, known = self._split(arrays)
        key = (tuple(shapes), tuple(sorted(known.items())))
        env = self._bound.get(key)
        if env is None:
            env = solve_dim_vars(
                self._specs, shapes, self._scope, arg_names=self._array_names, known=known
            )
            if len(self._bound) >= _BIND_CACHE:
                self._bound.popitem(last=False)
            self._bound[key] = env
        return env

    def _split(self, arrays: Arrays) -> tuple[list[tuple[int, ...]], dict[str, int]]:
        shapes: list[tuple[int, ...]] = []
        known: dict[str, int] = {}
        for info, a in zip(self.inputs, arrays, strict=True):
            if info.dim_argument:
                known[self._dim_vars[info.name]] = _dim_value(info.name, a)
            else:
                shapes.append(a.shape)
        return shapes, known

    def _args(self, arrays: Arrays) -> list[Any]:
        return [
            _dim_value(info.name, a) if info.dim_argument else a
            for info, a in zip(self.inputs, arrays, strict=True)
        ]

    def run(self, arrays: Arrays) -> Outputs:
        fun = self._fast if self._fast is not None else self.exp.call
        return _flat(fun(*self._args(arrays)))

    def run_on_path(self, arrays: Arrays) -> tuple[Outputs, str]:
        if self._fast is None:
            return self.run(arrays), "interpreted"
        return _run_counting_hits(self._fast, self._args(arrays))

    def prober(self) -> Prober:
        if self._fast is None:
            return lambda arrays: (self.run(arrays), "interpreted")
        # Compiled synchronously, on the first call of every key: the check sees the
        # borrowed variant on a key's first call and its own variant on the next.
        options = {
            **self.jit_options,
            "background": False,
            "hot_threshold": 1,
            "max_variants": 1024,
        }
        probe = self.exp.jit(**options)
        return lambda arrays: _run_counting_hits(probe, self._args(arrays))

    def warm_up(self, arrays: Arrays, timeout_s: float = 60.0) -> str:
        path = "interpreted"
        if self._fast is None:
            return path
        for _ in range(8):  # past the default hot_threshold (3), with the compile awaited
            path = self.run_on_path(arrays)[1]
            if path == "compiled":
                break
            self._fast.wait(timeout_s)
        return path

    def upper_bound(self, variable: str) -> float:
        if self._scope is None:
            return float("inf")
        for spec in self._specs:
            for d in spec:
                if isinstance(d, DimExpr) and str(d) == variable:
                    return float(bounds(d)[1])
        return float("inf")

    def info(self) -> dict[str, Any]:
        if self._fast is None:
            return {"executor": "interpreter"}
        rows = self._fast.jit_info()
        ready = sum(1 for r in rows if r["status"] == "ready")
        failed = [r for r in rows if r["status"] == "failed"]
        out: dict[str, Any] = {"executor": "jit", "jit_variants_ready": ready}
        if failed:  # those calls run in the interpreter: say why, as jit_info does
            out["jit_variants_failed"] = len(failed)
            out["jit_failure"] = f"{failed[-1]['key_text']}: {failed[-1]['reason']}"
        return {**out, "jit_options": self.jit_options}


def _run_counting_hits(fast: Any, args: list[Any]) -> tuple[Outputs, str]:
    """Run a jitted call; it took the compiled path when the function's count of compiled
    calls rose (the caller is the only thread calling ``fast``)."""
    before = fast.jit_stats()["compiled_calls"]
    outs = _flat(fast(*args))
    return outs, "compiled" if fast.jit_stats()["compiled_calls"] > before else "interpreted"


def _flat(result: Any) -> Outputs:
    leaves, _ = _pytree.flatten(result)
    return [np.asarray(x) for x in leaves]


def _dims(shape: Sequence[Any]) -> tuple[int | str, ...]:
    return tuple(d if isinstance(d, int) else str(d) for d in shape)


def _dim_value(name: str, a: np.ndarray[Any, Any]) -> int:
    if a.size != 1 or a.dtype.kind not in "iu":
        raise ShapeError(
            f"the dimension argument {name!r} must be one integer (INT64, shape [1]), "
            f"found {a.dtype} of shape {list(a.shape)}"
        )
    return int(a.reshape(-1)[0])


def _shapevm_inputs(exp: Exported) -> tuple[TensorInfo, ...]:
    avals = iter(exp.in_avals)
    out: list[TensorInfo] = []
    for name, kind in zip(exp.arg_names, exp.leaf_kinds, strict=True):
        if kind.dim is not None:
            out.append(TensorInfo(name, np.dtype(np.int64), (1,), dim_argument=True))
        else:
            aval = next(avals)
            out.append(TensorInfo(name, np.dtype(aval.dtype), _dims(aval.shape)))
    return tuple(out)


def _renamed(tensors: tuple[TensorInfo, ...], names: Sequence[str]) -> tuple[TensorInfo, ...]:
    if len(names) != len(tensors):
        raise ValueError(f"{len(names)} names for {len(tensors)} tensors")
    return tuple(
        TensorInfo(n, t.dtype, t.dims, t.dim_argument) for t, n in zip(tensors, names, strict=True)
    )


def _output_names(tree: _pytree.TreeDef) -> list[str]:
    """``output_0``, ``output_1``... by flat position; a flat dict of results keeps its keys."""
    if tree.kind == "dict" and all(
        c.kind == "leaf" and isinstance(k, str)
        for k, c in zip(tree.keys, tree.children, strict=True)
    ):
        return [str(k) for k in tree.keys]
    return [f"output_{i}" for i in range(tree.num_leaves)]


class OnnxRuntimeRunner(Runner):
    """An ``.onnx`` file run by ONNX Runtime (``pip install onnxruntime``): the peer that
    the load test puts behind the same server code. ``threads`` sets its intra-op pool."""

    platform = "onnxruntime_onnx"

    def __init__(self, path: str | os.PathLike[str], *, threads: int | None = None) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        self.session = ort.InferenceSession(
            os.fspath(path), options, providers=["CPUExecutionProvider"]
        )
        self.inputs = tuple(_ort_info(a) for a in self.session.get_inputs())
        self.outputs = tuple(_ort_info(a) for a in self.session.get_outputs())
        self._names = [t.name for t in self.inputs]

    def bind(self, arrays: Arrays) -> dict[str, int]:
        env: dict[str, int] = {}
        for info, a in zip(self.inputs, arrays, strict=True):
            for axis, (d, n) in enumerate(zip(info.dims, a.shape, strict=True)):
                where = f"{info.name}.shape[{axis}]"
                if isinstance(d, int) and d != n:
                    raise ShapeError(f"{where} must be {d}, found {n}")
                if isinstance(d, str) and env.setdefault(d, n) != n:
                    raise ShapeError(
                        f"{where} = {n}, but dimension {d!r} is {env[d]} in another input"
                    )
        return env

    def run(self, arrays: Arrays) -> Outputs:
        feeds = dict(zip(self._names, arrays, strict=True))
        return [np.asarray(x) for x in self.session.run(None, feeds)]

    def run_on_path(self, arrays: Arrays) -> tuple[Outputs, str]:
        return self.run(arrays), "onnxruntime"

    def prober(self) -> Prober:
        return self.run_on_path

    def info(self) -> dict[str, Any]:
        return {"executor": "onnxruntime"}


_ORT_TYPES = {
    "tensor(bool)": "bool",
    "tensor(uint8)": "uint8",
    "tensor(uint16)": "uint16",
    "tensor(uint32)": "uint32",
    "tensor(uint64)": "uint64",
    "tensor(int8)": "int8",
    "tensor(int16)": "int16",
    "tensor(int32)": "int32",
    "tensor(int64)": "int64",
    "tensor(float16)": "float16",
    "tensor(float)": "float32",
    "tensor(double)": "float64",
}


def _ort_info(arg: Any) -> TensorInfo:
    if arg.type not in _ORT_TYPES:
        raise ValueError(f"ONNX tensor {arg.name!r} has type {arg.type}, which is not served")
    dims = tuple(
        d if isinstance(d, int) else (d or f"{arg.name}_dim{i}") for i, d in enumerate(arg.shape)
    )
    return TensorInfo(arg.name, np.dtype(_ORT_TYPES[arg.type]), dims)
