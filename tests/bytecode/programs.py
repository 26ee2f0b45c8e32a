"""Programs the bytecode tests build, printed, parse, serialize and verify."""

from __future__ import annotations

import numpy as np

from shapevm.bytecode import (
    Block,
    Constant,
    Function,
    LoadConst,
    OpCall,
    Param,
    Program,
    Reg,
    Return,
    ShapePropagate,
    parse_program,
    parse_type,
)

MLP = """
func @mlp(t0: f32[b, 256], t1: f32[256, 64]) -> f32[b, 64]
    where b >= 1
  L0:
    s0 = SHAPE_PROPAGATE t0, 0
    t2: f32[b, 64] = OP_CALL matmul(t0, t1)  loc("model.py:41")
    t3: f32[b, 64] = OP_CALL maximum(t2, 0.0)  loc("model.py:42")
    RETURN t3
"""

CONTROL = """
func @select(t0: f32[n, 4], t1: bool[]) -> f32[dynamic, 4], i64[dynamic, 2]
    where n <= 4096
  L0:
    s0 = BIND_INPUTS n
    s1 = SHAPE_COMPUTE 2*s0 + 1
    t2: i64[dynamic, 2] = OP_CALL nonzero(t0)
    BRANCH_IF s0 > 16, L1, L2
  L1:
    t3: f32[2*n, 4] = OP_CALL concatenate(t0, t0, axis=0)
    JUMP L3
  L2:
    t4: f32[n, 4] = OP_CALL neg(t0)
    BRANCH_IF t1, L3, L4
  L4:
    t5: f32[n, 4] = OP_CALL exp(t4)
    JUMP L3
  L3:
    t6: f32[dynamic, 4] = TENSOR_PHI (L1, t3), (L2, t4), (L4, t5)
    RETURN t6, t2
"""

MEMORY = """
func @buffers(t0: f32[b, h, 64]) -> f32[h, b*64], f32[b]
    where h >= 2
  L0:
    s0 = SHAPE_PROPAGATE t0, 0
    s1 = SHAPE_PROPAGATE t0, 1
    s2 = SHAPE_COMPUTE s0*64
    t1 = TENSOR_CREATE [s0, s1, 64], f32, cpu
    TENSOR_ALLOC t1
    t1 = OP_CALL mul(t0, 2.0)
    t2 = TENSOR_RESIZE t1, [s0, s1, 2, 32]
    t3: f32[h, b, 2, 32] = OP_CALL transpose(t2, perm=[1, 0, 2, 3])
    t4: f32[h, b*64] = OP_CALL reshape(t3, shape=[h, 64*b])
    t5: f32[b] = OP_CALL sum(t1, axis=[1, 2])
    TENSOR_FREE t1
    RETURN t4, t5
"""

CONSTS = """
const k0 "fc.weight": f32[2, 3] = b64"AACAPwAAAEAAAEBAAACAQAAAoEAAAMBA"
const k1 "mask": bool[3] = b64"AQAB"
const k2 "steps": i64[2] = b64"AQAAAAAAAAD//////////w=="

func @affine(t0: f32[2*k + 1, 2], t1: f32[m]) -> f32[2*k + 1, 3], f32[m]
    dim_args m
  L0:
    t2 = LOAD_CONST k0
    t3: bool[3] = LOAD_CONST k1
    t4: f32[2*k + 1, 3] = OP_CALL matmul(t0, t2)
    t5: f32[2*k + 1, 3] = OP_CALL where(t3, t4, -1.5)
    t6: f32[m] = OP_CALL cast(t1, dtype="f32")
    RETURN t5, t6

func @scalar_ops(t0: f64[]) -> f64[], bool[]
  L0:
    t1: f64[] = OP_CALL pow(t0, 2)
    t2: bool[] = OP_CALL greater(t1, 1e-05)
    RETURN t1, t2
"""

TEXTS = {"mlp": MLP, "control": CONTROL, "memory": MEMORY, "consts": CONSTS}


def programs() -> dict[str, Program]:
    """Every test program by name, parsed from its text."""
    return {name: parse_program(text) for name, text in TEXTS.items()}


def mlp_by_hand() -> Program:
    """The MLP built through the Python API instead of the text form."""
    t0, t1, t2, t3, s0 = (Reg.tensor(0), Reg.tensor(1), Reg.tensor(2), Reg.tensor(3), Reg.shape(0))
    hidden = parse_type("f32[b, 64]")
    body = (
        ShapePropagate(s0, t0, 0),
        OpCall((t2,), "matmul", (t0, t1), types=(hidden,), loc="model.py:41"),
        OpCall((t3,), "maximum", (t2, 0.0), types=(hidden,), loc="model.py:42"),
        Return((t3,)),
    )
    params = (Param(t0, parse_type("f32[b, 256]")), Param(t1, parse_type("f32[256, 64]")))
    fn = Function("mlp", params, (hidden,), (Block("L0", body),), ("b >= 1",))
    return Program((fn,))


def big_program(n_instructions: int, const_bytes: int) -> Program:
    """A straight-line program of ``n_instructions`` with ``const_bytes`` of constants."""
    elems = max(const_bytes // 4, 1)
    weights = np.arange(elems, dtype=np.float32)
    lines = [
        "func @big(t0: f32[b, 64]) -> f32[b, 64]",
        "    where b <= 4096",
        "  L0:",
        "    s0 = SHAPE_PROPAGATE t0, 0",
        f"    t1: f32[{elems}] = LOAD_CONST k0",
    ]
    last = 0
    ops = ["add", "mul", "maximum", "sub"]
    for i in range(2, n_instructions - 1):
        lines.append(f"    t{i}: f32[b, 64] = OP_CALL {ops[i % 4]}(t{last}, t0)")
        last = i
    lines.append(f"    RETURN t{last}")
    program = parse_program("\n".join(lines) + "\n")
    return Program(program.functions, (Constant("weights", weights),))


__all__ = ["LoadConst", "big_program", "mlp_by_hand", "programs"]
