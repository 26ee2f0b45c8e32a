"""``If`` and ``Loop``: control flow whose decisions are made at import where they can be.

``If``: a branch chosen at import when the condition is known, else ``lax.cond``.

A condition computed from sizes alone (``Equal(Gather(Shape(x), 0), 1)``) is usually decided
at import under the model's constraints, and only the taken branch is imported; otherwise
both branches are traced and the program picks one when it runs (results whose sizes differ
between the branches get a ``dynamic`` dimension).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from shapevm.frontend import numpy_api as snp
from shapevm.frontend.control import cond
from shapevm.onnx import values as V
from shapevm.onnx.convert_shape import concat_values, reshape_to
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


# Loops are unrolled at import: at most this many iterations.
MAX_UNROLL = 4096


def loop(n: Node, trip: Value | None, keep: Value | None, *carried: Value) -> tuple[Value, ...]:
    """``Loop`` with a trip count known at import, unrolled; the condition must be known at
    every iteration (a loop that runs until data says stop is not supported)."""
    assert n.runner is not None
    if trip is None:
        raise n.unsupported(
            "Loop without a trip count",
            expected="a trip count M known at import",
            found="only a condition",
        )
    count = int(V.constant(trip, "the trip count M").reshape(-1)[0])
    if count > MAX_UNROLL:
        raise n.unsupported(
            f"Loop of {count} iterations",
            expected=f"at most {MAX_UNROLL} iterations (loops are unrolled at import)",
            found=str(count),
        )
    go = True if keep is None else _known_bool(keep, "the loop condition")
    body = n.attr("body")
    state = list(carried)
    scans: list[list[Value]] = []
    for i in range(count):
        if not go:
            break
        runner = n.runner.subgraph(body)
        names = [v.name for v in body.input]
        runner.env.update(
            zip(names, [np.asarray(i, np.int64), np.asarray(go), *state], strict=True)
        )
        outs = runner.run()
        go = _known_bool(outs[0], "the loop condition")
        state = list(outs[1 : 1 + len(carried)])
        scans.append(list(outs[1 + len(carried) :]))
    n_scan = len(body.output) - 1 - len(carried)
    if n_scan and not scans:
        raise n.unsupported(
            "Loop that runs no iteration but has scan outputs",
            expected="at least one iteration",
            found="0 iterations",
        )
    stacked = [
        concat_values([reshape_to(it[j], (1, *V.shape_of(it[j]))) for it in scans], 0)
        for j in range(n_scan)
    ]
    return (*state, *stacked)


def _known_bool(v: Value, what: str) -> bool:
    arr = V.known(v)
    if arr is None:
        raise V.NeedsValue(f"{what} (a loop that runs until data says stop)")
    return bool(arr.reshape(-1)[0])


OPS: dict[str, Op] = {
    "If": Op(if_, arith=False),
    "Loop": Op(loop, arith=False, known=(0, 1)),
}
