"""Property: every well-formed program survives text and binary round trips unchanged,
and the verifier reports on it without raising. Programs here need not be valid."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shapevm.bytecode import (
    BindInputs,
    Block,
    BranchIf,
    Constant,
    Function,
    Instr,
    Jump,
    LoadConst,
    OpCall,
    Param,
    Program,
    Reg,
    Return,
    ShapeBin,
    ShapeCmp,
    ShapeCompute,
    ShapePropagate,
    TensorAlloc,
    TensorCreate,
    TensorFree,
    TensorPhi,
    TensorResize,
    TensorType,
    check,
    deserialize,
    format_program,
    parse_program,
    serialize,
)
from shapevm.bytecode.shape_expr import BINARY_OPS, COMPARISONS
from shapevm.ops import DYNAMIC, DType
from shapevm.shapes import SymbolicScope, symbolic_shape

CONSTRAINTS = ["a >= 2", "b <= 64", "a + b <= 100", "n == 2*b"]
DIM_TEXTS = ["a", "b", "n", "2*a + 1", "a*b", "floordiv(a, 2)", "mod(b, 3)", "max(a, b)", "a^2"]
names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.]{0,8}", fullmatch=True)
labels = st.sampled_from(["L0", "L1", "L2", "exit"])
tregs = st.integers(0, 6).map(Reg.tensor)
sregs = st.integers(0, 4).map(Reg.shape)
regs = st.one_of(tregs, sregs)
floats = st.floats(allow_nan=True, allow_infinity=True)
scalars = st.one_of(st.booleans(), st.integers(-(2**63), 2**63 - 1), floats)
locs = st.one_of(st.none(), st.text(max_size=12))


def shape_exprs() -> st.SearchStrategy[Any]:
    leaves = st.one_of(st.integers(-5, 2**40), sregs)
    return st.recursive(
        leaves,
        lambda inner: st.builds(ShapeBin, st.sampled_from(sorted(BINARY_OPS)), inner, inner),
        max_leaves=6,
    )


def types(scope: SymbolicScope) -> st.SearchStrategy[TensorType]:
    dims = st.one_of(
        st.integers(0, 2**40),
        st.just(DYNAMIC),
        st.sampled_from(DIM_TEXTS).map(lambda t: symbolic_shape(t, scope=scope)[0]),
    )
    dtypes = st.sampled_from(list(DType))
    return st.builds(TensorType, dtypes, st.lists(dims, max_size=3).map(tuple))


def attr_values(scope: SymbolicScope) -> st.SearchStrategy[Any]:
    sym = st.sampled_from(DIM_TEXTS).map(lambda t: symbolic_shape(t, scope=scope)[0])
    # Lists hold axes as well as sizes, so their ints may be negative (``axis=[-1]``).
    items = sym.map(lambda d: d if isinstance(d, int) else str(d))
    dims = st.one_of(st.integers(-(2**40), 2**40), items)
    return st.one_of(
        st.booleans(),
        st.integers(-(2**63), 2**63 - 1),
        floats,
        st.text(max_size=10),
        st.lists(dims, max_size=3).map(tuple),
    )


def spec_dims() -> st.SearchStrategy[Any]:
    return st.lists(st.one_of(st.integers(0, 99), sregs, st.just(DYNAMIC)), max_size=3).map(tuple)


@st.composite
def instructions(draw: st.DrawFn, scope: SymbolicScope) -> Instr:
    opt_type = st.one_of(st.none(), types(scope))
    choice = draw(st.integers(0, 12))
    instr: Instr
    if choice == 0:
        outs = draw(st.lists(regs, max_size=3).map(tuple))
        instr = BindInputs(outs, tuple(draw(names) for _ in outs))
    elif choice == 1:
        instr = ShapePropagate(draw(regs), draw(regs), draw(st.integers(0, 2**40)))
    elif choice == 2:
        instr = ShapeCompute(draw(regs), draw(shape_exprs()))
    elif choice == 3:
        dev = draw(st.sampled_from(["cpu", "cuda:0", "gpu_1"]))
        instr = TensorCreate(draw(regs), draw(spec_dims()), draw(st.sampled_from(list(DType))), dev)
    elif choice == 4:
        instr = TensorAlloc(draw(regs))
    elif choice == 5:
        instr = TensorFree(draw(regs))
    elif choice == 6:
        instr = LoadConst(draw(regs), draw(st.integers(0, 3)), draw(opt_type))
    elif choice == 7:
        outs = draw(st.lists(regs, min_size=1, max_size=2).map(tuple))
        ins = draw(st.lists(st.one_of(regs, scalars), max_size=3).map(tuple))
        attrs = draw(st.dictionaries(names, attr_values(scope), max_size=3))
        kinds = tuple(draw(opt_type) for _ in outs)
        op = draw(st.sampled_from(["add", "matmul", "sum", "nope"]))
        instr = OpCall(outs, op, ins, tuple(attrs.items()), kinds)
    elif choice == 8:
        instr = TensorResize(draw(regs), draw(regs), draw(spec_dims()), draw(opt_type))
    elif choice == 9:
        instr = Jump(draw(labels))
    elif choice == 10:
        ops = st.sampled_from(sorted(COMPARISONS))
        cmp = st.builds(ShapeCmp, ops, shape_exprs(), shape_exprs())
        instr = BranchIf(draw(st.one_of(regs, cmp)), draw(labels), draw(labels))
    elif choice == 11:
        incoming = draw(st.lists(st.tuples(labels, regs), max_size=3).map(tuple))
        instr = TensorPhi(draw(regs), incoming, draw(opt_type))
    else:
        instr = Return(draw(st.lists(regs, max_size=3).map(tuple)))
    loc = draw(locs)
    return instr if loc is None else dataclasses.replace(instr, loc=loc)


@st.composite
def functions(draw: st.DrawFn) -> Function:
    constraints = tuple(draw(st.lists(st.sampled_from(CONSTRAINTS), unique=True, max_size=3)))
    scope = SymbolicScope(constraints)
    params = tuple(Param(Reg.tensor(i), draw(types(scope))) for i in range(draw(st.integers(0, 3))))
    results = tuple(draw(st.lists(types(scope), max_size=2)))
    blocks = []
    for label in draw(st.lists(labels, min_size=1, max_size=3, unique=True)):
        blocks.append(Block(label, tuple(draw(st.lists(instructions(scope), max_size=5)))))
    dim_args = tuple(draw(st.lists(st.sampled_from(["a", "b", "n"]), unique=True, max_size=2)))
    return Function(draw(names), params, results, tuple(blocks), constraints, dim_args)


@st.composite
def programs(draw: st.DrawFn) -> Program:
    consts = []
    for _ in range(draw(st.integers(0, 2))):
        dtype = draw(st.sampled_from(list(DType))).numpy
        raw = draw(st.binary(min_size=0, max_size=4 * dtype.itemsize))
        data = np.frombuffer(raw[: len(raw) // dtype.itemsize * dtype.itemsize], dtype=dtype)
        consts.append(Constant(draw(st.text(max_size=8)), data))
    fns = tuple(draw(st.lists(functions(), max_size=2)))
    return Program(fns, tuple(consts))


def round_trips(program: Program) -> None:
    assert parse_program(format_program(program)) == program
    assert deserialize(serialize(program), verify=False) == program
    for diagnostic in check(program):  # reports, never raises
        assert diagnostic.render()


@settings(max_examples=40)  # each example is a whole program; keeps the default suite fast
@given(programs())
def test_round_trips_and_verifier(program: Program) -> None:
    round_trips(program)


@pytest.mark.slow
@settings(max_examples=500)
@given(programs())
def test_round_trips_and_verifier_thoroughly(program: Program) -> None:
    round_trips(program)
