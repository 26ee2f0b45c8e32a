"""``If``: a branch chosen at import when the condition is known, else ``lax.cond``.

A condition computed from sizes alone (``Equal(Gather(Shape(x), 0), 1)``) is usually decided
at import under the model's constraints, and only the taken branch is imported; otherwise
both branches are traced and the program picks one when it runs (results whose sizes differ
between the branches get a ``dynamic`` dimension).
"""

from __future__ import annotations

from typing import Any

from shapevm.frontend import numpy_api as snp
from shapevm.frontend.control import cond
from shapevm.onnx import values as V
from shapevm.onnx.node import Node, Op
from shapevm.onnx.values import Value


def if_(n: Node, predicate: Value) -> tuple[Value, ...]:
    assert n.runner is not None
    runner = n.runner
    then_g, else_g = n.attr("then_branch"), n.attr("else_branch")
    known = V.known(predicate)
    if known is not None:
        branch = then_g if bool(known.reshape(-1)[0]) else else_g
        return tuple(runner.subgraph(branch).run())

    def run(graph: Any) -> Any:
        return lambda: tuple(V.tensor(v) for v in runner.subgraph(graph).run())

    pred = snp.reshape(V.tensor(predicate), ())
    out = cond(pred, run(then_g), run(else_g))
    return tuple(out)


OPS: dict[str, Op] = {"If": Op(if_, arith=False)}
