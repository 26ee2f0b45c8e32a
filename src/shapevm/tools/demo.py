"""``shapevm demo``: a tour of what works today, on a built-in MLP layer.

It parses symbolic shapes with constraints, decides comparisons (and shows the message of
one that cannot be decided), solves dimension variables from concrete shapes, then parses
the bytecode of a small MLP layer, verifies it, serializes it and loads it back.
"""

from __future__ import annotations

import time

import shapevm as sv
from shapevm import bytecode as bc

_MLP_TEXT = """\
func @mlp(t0: f32[b, 256], t1: f32[256, 64]) -> f32[b, 64]
    where b <= 4096
  L0:
    t2: f32[b, 64] = OP_CALL matmul(t0, t1)
    t3: f32[b, 64] = OP_CALL maximum(t2, 0.0)
    RETURN t3
"""


def _section(title: str) -> None:
    print(f"\n== {title} ==")


def run_demo() -> int:
    _section("symbolic shapes")
    b, h, w = sv.symbolic_shape("b, h, w", constraints=["b <= 64", "h >= 16", "w == 2*h"])
    print(f"spec 'b, h, w' with b <= 64, h >= 16, w == 2*h  ->  ({b}, {h}, {w})")
    print(f"bounds(b) = {sv.bounds(b)}   bounds(h // 4) = {sv.bounds(h // 4)}")
    print(f"bounds(w * b - 32) = {sv.bounds(w * b - 32)}")
    print(f"h * w >= 2 * h * h ?  {h * w >= 2 * h * h}")
    print(f"b * h >= h ?         {b * h >= h}   (JAX cannot prove this)")
    try:
        _ = b >= h
    except sv.InconclusiveDimensionOperation as err:
        print(f"b >= h ?  inconclusive:\n    {str(err).replace(chr(10), chr(10) + '    ')}")

    _section("solving dimension variables from concrete shapes")
    spec = sv.symbolic_shape("b, 2*d", scope=sv.SymbolicScope())
    print(f"spec {spec} with shape (3, 8)  ->  {sv.solve_dim_vars([spec], [(3, 8)])}")
    try:
        sv.solve_dim_vars([spec], [(3, 5)])
    except sv.ShapeError as err:
        print(f"with shape (3, 5):\n    {str(err).replace(chr(10), chr(10) + '    ')}")

    _section("bytecode of a built-in MLP layer")
    program = bc.parse_program(_MLP_TEXT)
    bc.verify(program)
    bc.print_program(program)
    t0 = time.perf_counter()
    blob = bc.serialize(program)
    back = bc.deserialize(blob)
    dt = (time.perf_counter() - t0) * 1e3
    print(
        f"serialized to {len(blob)} bytes and loaded back in {dt:.2f} ms; equal: {back == program}"
    )
    print("(save it with shapevm.bytecode.save(program, 'mlp.svbc'); then `shapevm dis mlp.svbc`)")
    return 0
