"""`load`: an ONNX model in, a verified `shapevm.Exported` out.

The graph is traced once, like a Python function given to `shapevm.export`: graph inputs
become arguments with symbolic shapes (each ``dim_param`` a dimension variable of that
name), initializers become constants, and each node becomes ops of the op table through its
converter. The result is verified, serializable, and runs any shape of its family in the
interpreter or the JIT.
"""

from __future__ import annotations

import importlib
import inspect
import keyword
import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from shapevm.bytecode.errors import format_message
from shapevm.frontend.export import Exported, export
from shapevm.onnx.errors import ModelFileError, Problem, UnsupportedModelError
from shapevm.onnx.graph import Runner
from shapevm.onnx.model_io import ONNX_DTYPES, onnx_module, read_model, tensor_array
from shapevm.onnx.node import ConvertError
from shapevm.onnx.support import check_model, onnx_opset
from shapevm.onnx.values import Value, tensor
from shapevm.shapes import DimExpr, ShapeDtypeStruct, SymbolicScope, symbolic_shape
from shapevm.shapes.parser import parse_constraint

if TYPE_CHECKING:
    import onnx

_RESERVED = {"max", "min", "mod", "floordiv"}


def load(
    model: str | Path | bytes | onnx.ModelProto,
    *,
    dims: Mapping[str, str] | None = None,
    constraints: Sequence[str] = (),
    name: str | None = None,
    constants: Mapping[str, Any] | None = None,
) -> Exported:
    """Import an ONNX model (a path, bytes or an ``onnx.ModelProto``) as an `Exported`.

    Each ``dim_param`` of a graph input becomes a symbolic dimension of that name (made a
    valid identifier where needed); a dimension with neither value nor name gets a fresh
    name (``x_d1`` for axis 1 of input ``x``). ``dims={"x": "b, 3, h, w"}`` overrides an
    input's shape with `symbolic_args_specs` syntax, ``constraints`` adds constraints
    (``"h >= 32"``), ``constants={"k": 5}`` fixes the values of graph inputs at import.
    Raises `UnsupportedModelError` listing every unsupported node before anything runs.

    >>> import numpy as np, onnx, shapevm.onnx as so
    >>> from onnx import helper, TensorProto as T
    >>> g = helper.make_graph(
    ...     [helper.make_node("Relu", ["x"], ["y"])], "g",
    ...     [helper.make_tensor_value_info("x", T.FLOAT, ["batch", 4])],
    ...     [helper.make_tensor_value_info("y", T.FLOAT, ["batch", 4])])
    >>> exp = so.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    >>> exp
    Exported(g: (f32[batch, 4]) -> (f32[batch, 4]))
    >>> exp.call(np.array([[-1.0, 2.0, -3.0, 4.0]], np.float32))
    (array([[0., 2., 0., 4.]], dtype=float32),)
    """
    proto, base, label = read_model(model)
    if len(proto.functions):
        onnx_module()
        proto = importlib.import_module("onnx.inliner").inline_local_functions(proto)
    frozen = {k: np.asarray(v) for k, v in (constants or {}).items()}
    _check_constants(proto.graph, frozen, label)
    problems = check_model(proto, frozen)
    if problems:
        raise UnsupportedModelError(label, problems)
    graph = proto.graph
    values: dict[str, Value] = {t.name: tensor_array(t, base) for t in graph.initializer}
    for key, arr in frozen.items():
        values[key] = arr.astype(_input_dtype(graph, key), copy=False)
    inputs = [v for v in graph.input if v.name not in values]
    fn = _graph_function(graph, onnx_opset(proto), values, [v.name for v in inputs])
    fn.__name__ = _identifier(name or graph.name or "model", "model")
    _check_constraint_names(
        _input_specs(inputs, dims or {}, constraints, label), constraints, label
    )
    assumed: list[str] = []
    while True:
        specs = _input_specs(inputs, dims or {}, [*constraints, *assumed], label)
        try:
            exported = export(fn)(*specs)
            break
        except ConvertError as exc:
            # A bound the model needs to run at all (a table of 512 positions cut to the
            # sequence and added to it: ONNX Runtime fails past 512 too) is assumed, and
            # said; a call past it gets the constraint's ShapeError.
            if exc.constraint is None or exc.constraint in assumed or len(assumed) >= 16:
                raise UnsupportedModelError(label, [exc.problem]) from None
            assumed.append(exc.constraint)
    if assumed:
        warnings.warn(
            f"{label}: imported assuming {', '.join(assumed)}: the model computes nothing "
            "for other shapes (pass constraints=[...] to say so and silence this)",
            stacklevel=2,
        )
    return exported


def _graph_function(
    graph: onnx.GraphProto, opset: int, values: dict[str, Value], names: list[str]
) -> Any:
    def run(*args: Any) -> tuple[Any, ...]:
        env = dict(values)
        env.update(zip(names, args, strict=True))
        outs = Runner(graph, opset, env, None).run()
        return tuple(tensor(v) for v in outs)

    params = [
        inspect.Parameter(_identifier(n, f"input{i}"), inspect.Parameter.POSITIONAL_ONLY)
        for i, n in enumerate(names)
    ]
    run.__signature__ = inspect.Signature(_unique_params(params))  # type: ignore[attr-defined]
    return run


def _unique_params(params: list[inspect.Parameter]) -> list[inspect.Parameter]:
    seen: set[str] = set()
    out = []
    for i, p in enumerate(params):
        name = p.name if p.name not in seen else f"{p.name}_{i}"
        seen.add(name)
        out.append(p.replace(name=name))
    return out


def _identifier(text: str, fallback: str) -> str:
    """``text`` made a valid identifier: other characters become ``_``."""
    out = re.sub(r"\W", "_", text)
    if not out or out[0].isdigit():
        out = f"{fallback}_{out}" if out else fallback
    if keyword.iskeyword(out) or out in _RESERVED:
        out += "_"
    return out


def _input_dtype(graph: onnx.GraphProto, name: str) -> np.dtype[Any]:
    for v in graph.input:
        if v.name == name:
            dt: np.dtype[Any] = ONNX_DTYPES[v.type.tensor_type.elem_type].numpy
            native: np.dtype[Any] = dt.newbyteorder("=")
            return native
    raise AssertionError(name)


def _check_constants(graph: onnx.GraphProto, frozen: Mapping[str, Any], label: str) -> None:
    names = {v.name for v in graph.input}
    unknown = sorted(set(frozen) - names)
    if unknown:
        raise ValueError(
            f"{label}: constants= names {unknown}, which are not graph inputs; the graph "
            f"inputs are {sorted(names)}"
        )


def _check_constraint_names(
    specs: Sequence[ShapeDtypeStruct], constraints: Sequence[str], label: str
) -> None:
    """Refuse a constraint on a dimension no input has: no call could give it a value."""
    known = {v for s in specs for d in s.shape if isinstance(d, DimExpr) for v in d.free_vars()}
    for text in constraints:
        lhs, _, rhs = parse_constraint(text, SymbolicScope())
        names = {v for e in (lhs, rhs) if isinstance(e, DimExpr) for v in e.free_vars()}
        if names - known:
            raise ValueError(
                format_message(
                    f"{label}: constraint {text!r} names {sorted(names - known)}, which no "
                    "input's shape has",
                    expected=f"constraints on the inputs' dimensions {sorted(known)}",
                    found=", ".join(sorted(names - known)),
                    fix="correct the name, or give that dimension to an input with dims=",
                )
            )


def _input_specs(
    inputs: Sequence[onnx.ValueInfoProto],
    dims: Mapping[str, str],
    constraints: Sequence[str],
    label: str,
) -> list[ShapeDtypeStruct]:
    unknown = sorted(set(dims) - {v.name for v in inputs})
    if unknown:
        raise ValueError(
            f"{label}: dims= names {unknown}, which are not graph inputs; the graph inputs "
            f"are {sorted(v.name for v in inputs)}"
        )
    scope = SymbolicScope(constraints)
    used: set[str] = set()
    names: dict[str, str] = {}
    specs = []
    for v in inputs:
        tt = v.type.tensor_type
        dtype = ONNX_DTYPES[tt.elem_type].numpy.newbyteorder("=")
        if v.name in dims:
            declared = tuple(d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim)
            like = declared if tt.HasField("shape") else None
            shape = symbolic_shape(dims[v.name], scope=scope, like=like)
        elif not tt.HasField("shape"):
            raise UnsupportedModelError(
                label,
                [
                    Problem(
                        f"graph input {v.name!r}",
                        "the model does not give its rank",
                        expected="a shape in the model's input",
                        found="no shape",
                        fix=f"give it at import: dims={{{v.name!r}: 'b, 3, h, w'}}",
                    )
                ],
            )
        else:
            shape = tuple(
                _dim(d, v.name, i, scope, used, names) for i, d in enumerate(tt.shape.dim)
            )
        specs.append(ShapeDtypeStruct(shape, dtype))
    return specs


def _dim(
    d: Any, value: str, axis: int, scope: SymbolicScope, used: set[str], names: dict[str, str]
) -> Any:
    if d.HasField("dim_value"):
        if d.dim_value < 0:
            raise ModelFileError(
                f"graph input {value!r} has the negative dimension {d.dim_value} on axis {axis}",
                expected="dimensions >= 0, or named dimensions",
                found=str(d.dim_value),
                fix="the file is corrupt; export the model again",
            )
        return int(d.dim_value)
    if d.dim_param:
        if d.dim_param not in names:
            names[d.dim_param] = _fresh(_identifier(d.dim_param, "d"), used)
        return scope.var(names[d.dim_param])
    return scope.var(_fresh(f"{_identifier(value, 'x')}_d{axis}", used))


def _fresh(base: str, used: set[str]) -> str:
    name, i = base, 1
    while name in used:
        name, i = f"{base}_{i}", i + 1
    used.add(name)
    return name
