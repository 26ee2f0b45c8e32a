"""Running an ONNX graph's nodes through their converters, inside a trace.

`Runner` keeps the value of every name of a graph (and reads names of enclosing graphs, for
the branches of ``If``). Each node runs with the trace's source set to the node, so every
instruction it emits and every error it raises names the node. Float16 is computed in
float32: the inputs of a node that computes are widened, its float results rounded back.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

import numpy as np

from shapevm.frontend.errors import TracingError
from shapevm.frontend.tracer import Tracer, bind_op, current_trace
from shapevm.onnx import functions
from shapevm.onnx import values as V
from shapevm.onnx.errors import Problem
from shapevm.onnx.node import ConvertError, Node, Op
from shapevm.onnx.support import OPERATORS
from shapevm.onnx.values import Value
from shapevm.ops import DType
from shapevm.shapes import InconclusiveDimensionOperation

if TYPE_CHECKING:
    import onnx

_F16 = np.dtype(np.float16)
_F32 = np.dtype(np.float32)


@contextmanager
def located(where: str) -> Iterator[None]:
    """Instructions emitted and errors raised inside name ``where`` as their source."""
    ctx = current_trace()
    if ctx is None:
        yield
        return
    old, ctx.source = ctx.source, where
    try:
        yield
    finally:
        ctx.source = old


class Runner:
    """The values of one graph's names while its nodes are converted."""

    def __init__(
        self, graph: onnx.GraphProto, opset: int, env: dict[str, Value], parent: Runner | None
    ) -> None:
        self.graph = graph
        self.opset = opset
        self.env = env
        self.parent = parent
        self._wide: dict[int, tuple[Value, Value]] = {}

    def subgraph(self, graph: onnx.GraphProto) -> Runner:
        return Runner(graph, self.opset, {}, self)

    def value(self, name: str, user: Node) -> Value:
        runner: Runner | None = self
        while runner is not None:
            if name in runner.env:
                return runner.env[name]
            runner = runner.parent
        raise ConvertError(
            user.problem(
                f"input {name!r} is not a graph input, an initializer or an earlier node's output",
                expected="nodes in topological order, every input defined",
                found=f"no value named {name!r}",
            )
        )

    def run(self) -> list[Value]:
        """Convert every node; the values of the graph's outputs."""
        for proto in self.graph.node:
            self.node(proto)
        for v in self.graph.output:
            if v.name not in self.env:
                raise ConvertError(Problem(f"graph output {v.name!r}", "no node computes it"))
        return [self.env[v.name] for v in self.graph.output]

    def run_partial(self) -> list[Value | None]:
        """As `run`, with ``None`` for outputs no node computes (a function body leaves out
        the optional results the node does not ask for)."""
        for proto in self.graph.node:
            self.node(proto)
        return [self.env.get(v.name) for v in self.graph.output]

    def node(self, proto: onnx.NodeProto) -> None:
        op = OPERATORS.get(proto.op_type)
        node = Node(proto, self.opset, self)
        ins = [self.value(name, node) if name else None for name in proto.input]
        with located(node.where):
            outs: tuple[Value | None, ...] = (
                self._convert(op, node, ins) if op is not None else self._expand(node, ins)
            )
        for name, v in zip(proto.output, outs, strict=False):
            if name and v is not None:
                self.env[name] = v

    def _convert(self, op: Op, node: Node, ins: Sequence[Value | None]) -> tuple[Value, ...]:
        wide = op.arith and any(v is not None and V.dtype_of(v) == _F16 for v in ins)
        if wide:
            ins = [self._widen(v) for v in ins]
        try:
            out = op.fn(node, *ins)
        except V.NeedsValue as exc:
            raise ConvertError(
                node.problem(
                    f"{exc} is only known when the program runs",
                    expected="a value known at import (a constant, or sizes from Shape)",
                    found="a value computed from data",
                    fix="shapevm programs have static ranks and symbolic sizes; make the value "
                    "a constant or an initializer",
                )
            ) from None
        except TracingError as exc:
            raise ConvertError(
                node.problem(exc.what, expected=exc.expected, found=exc.found, fix=exc.fix),
                exc.constraint,
            ) from None
        except (
            ValueError,
            TypeError,
            IndexError,
            ArithmeticError,
            InconclusiveDimensionOperation,
        ) as exc:
            first, *rest = (str(exc) or type(exc).__name__).splitlines()
            detail = " ".join(line.strip() for line in rest)
            raise ConvertError(node.problem(first, found=detail)) from None
        outs = out if isinstance(out, tuple) else (out,)
        if wide:
            outs = tuple(_narrow(v) for v in outs)
        return outs

    def _expand(self, node: Node, ins: Sequence[Value | None]) -> tuple[Value | None, ...]:
        """An operator without a converter, through its ONNX function body."""
        proto = node.proto
        if not functions.has_body(proto.op_type, self.opset, proto.domain):
            raise ConvertError(node.problem(f"unsupported operator {proto.op_type}"))
        kinds = [
            None if v is None else (DType.from_numpy(V.dtype_of(v)), len(V.shape_of(v)))
            for v in ins
        ]
        fn = functions.body(proto, self.opset, kinds)
        graph = functions.as_graph(proto, fn, functions.attribute_defaults(proto, self.opset))
        env = {name: v for name, v in zip(fn.input, ins, strict=False) if v is not None}
        outs = Runner(graph, functions.body_opset(fn, self.opset), env, None).run_partial()
        for name, v in zip(node.proto.output, outs, strict=False):
            if name and v is None:
                raise ConvertError(node.problem(f"its function body does not compute {name!r}"))
        return tuple(outs)

    def _widen(self, v: Value | None) -> Value | None:
        """A float16 value as float32 (cast once per value, however many nodes read it)."""
        if v is None or V.dtype_of(v) != _F16:
            return v
        hit = self._wide.get(id(v))
        if hit is not None and hit[0] is v:
            return hit[1]
        wide: Value = (
            np.asarray(v, _F32)
            if isinstance(v, np.ndarray)
            else bind_op("cast", [v], {"dtype": "f32"})
        )
        self._wide[id(v)] = (v, wide)
        return wide


def _narrow(v: Value) -> Value:
    if V.dtype_of(v) != _F32:
        return v
    if isinstance(v, Tracer):
        out: Value = bind_op("cast", [v], {"dtype": "f16"})
        return out
    return np.asarray(v).astype(_F16)
