"""Operators that ONNX defines as functions, imported through their function body.

Many ONNX operators have a definition in terms of other operators (``AffineGrid``,
``Attention``, ``NegativeLogLikelihoodLoss``, ``MeanVarianceNormalization``...). An operator
without a converter of its own is expanded into that body (``onnx.defs`` gives it, for the
node's attributes and input types) and the body's nodes are converted like any others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shapevm.onnx.model_io import ONNX_DTYPES, onnx_module
from shapevm.ops import DType

if TYPE_CHECKING:
    import onnx

_CODES = {d: c for c, d in ONNX_DTYPES.items()}


def schema(op_type: str, opset: int, domain: str = "") -> Any:
    """The operator's schema at ``opset``, or ``None`` for an unknown operator."""
    defs = onnx_module().defs
    try:
        return defs.get_schema(op_type, opset, domain)
    except Exception:  # onnx raises SchemaError, whose class is not exported everywhere
        return None


def has_body(op_type: str, opset: int, domain: str = "") -> bool:
    s = schema(op_type, opset, domain)
    return s is not None and bool(s.has_function or s.has_context_dependent_function)


def _version(versions: Any, opset: int) -> int | None:
    usable = [v for v in versions if v <= opset]
    return max(usable) if usable else None


def body(
    node: onnx.NodeProto, opset: int, inputs: list[tuple[DType, int] | None]
) -> onnx.FunctionProto:
    """The function body of ``node`` for its inputs' element types and ranks (``None``:
    an absent input)."""
    mod = onnx_module()
    s = schema(node.op_type, opset, node.domain)
    fn: onnx.FunctionProto = mod.FunctionProto()
    version = _version(s.function_opset_versions, opset) if s.has_function else None
    if version is not None:
        fn.ParseFromString(s.get_function_with_opset_version(version))
        return fn
    version = _version(s.context_dependent_function_opset_versions, opset)
    if version is None:
        raise ValueError(f"{node.op_type} has no function body at opset {opset}")
    helper = mod.helper
    types = [
        helper.make_tensor_type_proto(0, None)
        if t is None
        else helper.make_tensor_type_proto(_CODES[t[0]], [None] * t[1])
        for t in inputs
    ]
    fn.ParseFromString(
        s.get_context_dependent_function_with_opset_version(
            version, node.SerializeToString(), [t.SerializeToString() for t in types]
        )
    )
    return fn


def as_graph(node: onnx.NodeProto, fn: onnx.FunctionProto, defaults: dict[str, Any]) -> Any:
    """The body as a graph over ``fn``'s own input and output names, with the node's
    attributes substituted for the body's attribute references."""
    onnx = onnx_module()
    given = {a.name: a for a in node.attribute}
    for name, proto in defaults.items():
        given.setdefault(name, proto)
    supplied = {fn.input[i] for i, n in enumerate(node.input) if n and i < len(fn.input)}
    absent = set(fn.input) - supplied
    nodes = []
    for proto in fn.node:
        out = onnx.NodeProto()
        out.CopyFrom(proto)
        out.input[:] = ["" if n in absent else n for n in proto.input]
        del out.attribute[:]
        for attr in proto.attribute:
            if attr.ref_attr_name:
                ref = given.get(attr.ref_attr_name)
                if ref is None:
                    continue
                sub = onnx.AttributeProto()
                sub.CopyFrom(ref)
                sub.name = attr.name
                out.attribute.append(sub)
            else:
                out.attribute.append(attr)
        nodes.append(out)
    outputs = [onnx.helper.make_empty_tensor_value_info(n) for n in fn.output]
    return onnx.helper.make_graph(nodes, fn.name or node.op_type, [], outputs)


def attribute_defaults(node: onnx.NodeProto, opset: int) -> dict[str, Any]:
    s = schema(node.op_type, opset, node.domain)
    out = {}
    for name, attr in s.attributes.items():
        if attr.default_value is not None and attr.default_value.type:
            out[name] = attr.default_value
    return out


def body_opset(fn: onnx.FunctionProto, opset: int) -> int:
    for entry in fn.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return int(entry.version)
    return opset
