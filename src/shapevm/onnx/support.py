"""What the importer supports, and the check that lists every unsupported part of a model.

`OPERATORS` is the one table from ONNX operator to converter, in one place (no
registration on import). `check_model` walks the whole model, subgraphs included, before
anything is traced, and returns every problem at once: unknown operators, domains and
opsets, unsupported attribute values and dtypes, and sizes that only input values would
give (``Reshape(x, shape)`` where ``shape`` is a graph input).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from shapevm.onnx import (
    control,
    convert_index,
    convert_math,
    convert_nn,
    convert_reduce,
    convert_resize,
    convert_shape,
    functions,
)
from shapevm.onnx.errors import Problem
from shapevm.onnx.model_io import ONNX_DTYPES, dtype_name, onnx_module
from shapevm.onnx.node import Node, Op

if TYPE_CHECKING:
    import onnx

OPERATORS: dict[str, Op] = {
    **convert_math.OPS,
    **convert_shape.OPS,
    **convert_index.OPS,
    **convert_reduce.OPS,
    **convert_nn.OPS,
    **convert_resize.OPS,
    **control.OPS,
}
# The newest ai.onnx opset whose operator versions the converters were checked against.
KNOWN_OPSET = 28
DOMAINS = ("", "ai.onnx")
# Operators whose result is a tensor's shape, not a function of its values.
_SHAPE_ONLY = {"Shape", "Size"}


def onnx_opset(model: onnx.ModelProto) -> int:
    for entry in model.opset_import:
        if entry.domain in DOMAINS:
            return int(entry.version)
    return 1


def check_model(model: onnx.ModelProto, frozen: Iterable[str] = ()) -> list[Problem]:
    """Every reason ``model`` cannot be imported (empty when it can)."""
    onnx = onnx_module()
    problems: list[Problem] = []
    opset = onnx_opset(model)
    newest = min(KNOWN_OPSET, onnx.defs.onnx_opset_version())
    if opset > newest:
        problems.append(
            Problem(
                "the model",
                f"it uses opset {opset} of ai.onnx",
                expected=f"an opset up to {newest}",
                found=f"opset {opset}",
                fix="export the model with an older opset (torch.onnx.export(opset_version=17))",
            )
        )
    graph = model.graph
    initialized = {t.name for t in graph.initializer}
    for kind, values in (("input", graph.input), ("output", graph.output)):
        for v in values:
            if kind == "input" and v.name in initialized:
                continue
            problems += _value_type(v, f"graph {kind} {v.name!r}", kind == "output")
    for t in graph.initializer:
        if t.data_type not in ONNX_DTYPES:
            problems.append(
                Problem(
                    f"initializer {t.name!r}",
                    "unsupported element type",
                    expected=_dtypes(),
                    found=dtype_name(t.data_type),
                )
            )
    if len(graph.sparse_initializer):
        problems.append(
            Problem(
                "the model",
                "sparse initializers are not supported",
                expected="dense initializers",
                found=f"{len(graph.sparse_initializer)} sparse",
            )
        )
    versions = {e.domain: int(e.version) for e in model.opset_import}
    problems += check_nodes(graph, opset, versions)
    problems += check_data_dependence(graph, set(frozen) | initialized, opset)
    return problems


def _dtypes() -> str:
    return ", ".join(dtype_name(c) for c in ONNX_DTYPES)


def _value_type(v: Any, where: str, untyped_ok: bool = False) -> list[Problem]:
    kind = v.type.WhichOneof("value")
    if kind is None and untyped_ok:  # an output whose type the model leaves out
        return []
    if kind != "tensor_type":
        return [
            Problem(
                where,
                f"a value of {kind or 'unknown'} type",
                expected="a tensor",
                found=str(kind),
                fix="sequences, maps and optionals are not supported",
            )
        ]
    code = v.type.tensor_type.elem_type
    if code not in ONNX_DTYPES and not (untyped_ok and code == 0):
        return [
            Problem(where, "unsupported element type", expected=_dtypes(), found=dtype_name(code))
        ]
    return []


def check_nodes(
    graph: onnx.GraphProto, opset: int, versions: Mapping[str, int] | None = None
) -> list[Problem]:
    """The problems of ``graph``'s nodes, subgraphs included; ``versions`` gives the opset of
    each domain the model imports (to name a node of another domain with its own opset)."""
    problems: list[Problem] = []
    for proto in graph.node:
        node = Node(proto, opset)
        if proto.domain not in DOMAINS:
            problems.append(
                Problem(
                    _foreign_where(proto, versions or {}),
                    f"operator {proto.op_type} of domain {proto.domain!r}",
                    expected="operators of the default domain ai.onnx",
                    found=f"domain {proto.domain!r}",
                    fix="export without custom or contrib operators",
                )
            )
            continue
        op = OPERATORS.get(proto.op_type)
        if op is None and functions.has_body(proto.op_type, opset, proto.domain):
            problems += _check_body(node, opset)
            continue
        if op is None:
            close = difflib.get_close_matches(proto.op_type, list(OPERATORS), 1)
            problems.append(
                node.problem(
                    f"unsupported operator {proto.op_type}",
                    expected=f"one of the {len(OPERATORS)} operators listed in docs/onnx.md",
                    found=proto.op_type,
                    fix=f"did you mean {close[0]}?" if close else "",
                )
            )
            continue
        if op.check is not None:
            problems += op.check(node)
        for attr in proto.attribute:
            if attr.HasField("g"):
                problems += check_nodes(attr.g, opset, versions)
                problems += [
                    p
                    for v in attr.g.output
                    for p in _value_type(v, f"{node.where}: branch output {v.name!r}", True)
                    if v.type.WhichOneof("value")
                ]
    return problems


def _foreign_where(proto: Any, versions: Mapping[str, int]) -> str:
    """Where a node of a domain other than ai.onnx is: its domain and that domain's opset."""
    name = proto.name or (proto.output[0] if proto.output else "")
    version = versions.get(proto.domain)
    opset = f", opset {version}" if version is not None else ""
    return f"node {name!r} ({proto.op_type}, domain {proto.domain}{opset})"


def _check_body(node: Node, opset: int) -> list[Problem]:
    """The problems of an operator imported through its function body (when the body does
    not depend on input types; a type-dependent body is checked when it is expanded)."""
    s = functions.schema(node.proto.op_type, opset, node.proto.domain)
    if not s.has_function:
        return []
    fn = functions.body(node.proto, opset, [])
    graph = functions.as_graph(node.proto, fn, functions.attribute_defaults(node.proto, opset))
    found = check_nodes(graph, functions.body_opset(fn, opset))
    return [
        Problem(f"{node.where}, in its function body", p.what, p.expected, p.found, p.fix)
        for p in found
    ]


def check_data_dependence(graph: onnx.GraphProto, constant: set[str], opset: int) -> list[Problem]:
    """Inputs that must be known at import (shapes, axes) but come from graph input values."""
    deps: dict[str, frozenset[str]] = {
        v.name: frozenset() if v.name in constant else frozenset({v.name}) for v in graph.input
    }
    problems, _ = _walk(graph, deps, opset)
    return problems


def _walk(
    graph: onnx.GraphProto, outer: Mapping[str, frozenset[str]], opset: int
) -> tuple[list[Problem], list[frozenset[str]]]:
    """The problems of ``graph`` and, per graph output, the graph inputs its values use."""
    env = dict(outer)
    problems: list[Problem] = []
    for proto in graph.node:
        op = OPERATORS.get(proto.op_type)
        ins = [env.get(name, frozenset()) if name else frozenset() for name in proto.input]
        if op is not None:
            for i in op.known:
                if i < len(ins) and ins[i]:
                    problems.append(_needs(proto, i, ins[i]))
        out: frozenset[str] = frozenset()
        if proto.op_type not in _SHAPE_ONLY:
            out = out.union(*ins)
        for attr in proto.attribute:
            if attr.HasField("g"):  # a branch reads names of this graph
                found, results = _walk(attr.g, env, opset)
                problems += found
                out = out.union(*results)
        body = _static_body(proto, opset) if op is None else None
        if body is not None:  # the body's sizes and axes may come from the node's inputs
            fn, sub = body
            found, _ = _walk(sub, dict(zip(fn.input, ins, strict=False)), opset)
            problems += found
        for name in proto.output:
            env[name] = out
    return problems, [env.get(v.name, frozenset()) for v in graph.output]


def _static_body(proto: Any, opset: int) -> tuple[Any, Any] | None:
    s = functions.schema(proto.op_type, opset, proto.domain)
    if s is None or not s.has_function:
        return None
    fn = functions.body(proto, opset, [])
    return fn, functions.as_graph(proto, fn, functions.attribute_defaults(proto, opset))


def _needs(proto: Any, i: int, inputs: frozenset[str]) -> Problem:
    name = proto.name or (proto.output[0] if proto.output else "")
    names = ", ".join(sorted(inputs))
    return Problem(
        f"node {name!r} ({proto.op_type})",
        f"input {i} ({proto.input[i]!r}) sets a size, an axis or a parameter, but it is "
        f"computed from the values of graph input(s) {names}",
        expected="a value known at import: an initializer, a Constant, or sizes from Shape",
        found=f"a value known only when the program runs (from {names})",
        fix="fix the values at import: shapevm.onnx.load(..., constants={"
        + ", ".join(f"{n!r}: ..." for n in sorted(inputs))
        + "}), or export the model with them as initializers",
        needs=tuple(sorted(inputs)),
    )
