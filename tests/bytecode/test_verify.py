"""Verifier: valid programs pass; for each check, break one thing and read the message."""

from __future__ import annotations

import dataclasses

import pytest

from shapevm.bytecode import (
    Diagnostic,
    Program,
    VerifyError,
    check,
    format_program,
    parse_program,
    verify,
)
from tests.bytecode.programs import programs


def diagnostics(text: str) -> list[Diagnostic]:
    return check(parse_program(text))


def only(text: str, kind: str) -> str:
    """The rendered message of the single problem in ``text``, which must be of ``kind``."""
    found = diagnostics(text)
    assert len(found) == 1, "\n\n".join(d.render() for d in found)
    assert found[0].check == kind, found[0].render()
    return found[0].render()


@pytest.mark.parametrize("name", sorted(programs()))
def test_valid_programs_verify(name: str) -> None:
    verify(programs()[name])


def test_verify_error_lists_every_problem() -> None:
    text = """
func @f(t0: f32[b]) -> f32[b]
  L0:
    t1: f32[b] = OP_CALL frobnicate(t0)
    t2: f32[b] = OP_CALL neg(t0, t0)
    RETURN t2
"""
    with pytest.raises(VerifyError) as info:
        verify(parse_program(text))
    assert [d.check for d in info.value.diagnostics] == ["op", "arity"]
    assert str(info.value).endswith("\n\n2 problems found")


def test_matmul_inner_dimensions_differ() -> None:
    text = """
func @mlp(t0: f32[b, 256], t1: f32[256, 64], t4: f32[32, m]) -> f32[b, m]
    where b >= 1
  L0:
    t2: f32[b, 64] = OP_CALL matmul(t0, t1)
    t5 = OP_CALL matmul(t2, t4)  loc("model.py:41")
    RETURN t5
"""
    assert only(text, "shape") == (
        "instruction 1 (OP_CALL matmul) in @mlp: inner dimensions differ\n"
        "  expected: t4.shape[0] == t2.shape[1]  (64)\n"
        "  found:    t2: f32[b, 64], t4: f32[32, m]\n"
        "  fix:      transpose or reshape one operand; traced at model.py:41\n"
        "       | L0:\n"
        "     0 | t2: f32[b, 64] = OP_CALL matmul(t0, t1)\n"
        '  -->1 | t5 = OP_CALL matmul(t2, t4)  loc("model.py:41")\n'
        "     2 | RETURN t5"
    )


def test_undecidable_shape_condition_names_the_constraint() -> None:
    text = """
func @f(t0: f32[b, k], t1: f32[m, 8]) -> f32[b, 8]
  L0:
    t2 = OP_CALL matmul(t0, t1)
    RETURN t2
"""
    message = only(text, "shape")
    assert message.splitlines()[:4] == [
        "instruction 0 (OP_CALL matmul) in @f: cannot prove t1.shape[0] == t0.shape[1]: "
        "inner dimensions differ",
        "  expected: t1.shape[0] == t0.shape[1]  (k)",
        "  found:    t0: f32[b, k], t1: f32[m, 8]; m == k is not provable under no constraints",
        "  fix:      add the constraint 'm == k' to @f (where m == k), or transpose or reshape "
        "one operand",
    ]


def test_broadcast_dimensions_differ() -> None:
    text = """
func @f(t0: f32[b, 3], t1: f32[4]) -> f32[b, 3]
  L0:
    t2 = OP_CALL add(t0, t1)
    RETURN t2
"""
    assert only(text, "shape").splitlines()[:4] == [
        "instruction 0 (OP_CALL add) in @f: cannot broadcast operands: dimensions differ",
        "  expected: t1.shape[0] == t0.shape[1]  (3)",
        "  found:    t0: f32[b, 3], t1: f32[4]",
        "  fix:      make the dimensions equal, or 1 to broadcast",
    ]


def test_def_before_use_on_every_path() -> None:
    text = """
func @f(t0: f32[b]) -> f32[b]
  L0:
    BRANCH_IF t0, L1, L2
  L1:
    t1: f32[b] = OP_CALL neg(t0)
    JUMP L2
  L2:
    RETURN t1
"""
    found = diagnostics(text)
    use = [d for d in found if d.check == "def-use"]
    assert len(use) == 1
    assert use[0].render().splitlines()[:4] == [
        "instruction 3 (RETURN) in @f: t1 is used before it is defined",
        "  expected: t1 defined on every path to instruction 3",
        "  found:    t1 is defined at instruction 1 but not on the path from L0 to L2",
        "  fix:      define it earlier, or merge per-path values with TENSOR_PHI",
    ]


def test_never_defined_register() -> None:
    text = """
func @f(t0: f32[b]) -> f32[b]
  L0:
    RETURN t7
"""
    assert "found:    t7 is never defined" in only(text, "def-use")


def test_register_kinds() -> None:
    text = """
func @f(t0: f32[b]) -> f32[b]
  L0:
    s0 = SHAPE_PROPAGATE t0, 0
    s1 = SHAPE_PROPAGATE s0, 0
    RETURN t0
"""
    assert only(text, "kinds").splitlines()[:4] == [
        "instruction 1 (SHAPE_PROPAGATE) in @f: operand 1 of SHAPE_PROPAGATE must be a "
        "tensor register",
        "  expected: a tensor register (t0, t1, ...)",
        "  found:    s0 (shape register)",
        "       | L0:",
    ]


def test_unknown_op_suggests_a_name() -> None:
    text = """
func @f(t0: f32[b]) -> f32[b]
  L0:
    t1 = OP_CALL matmull(t0, t0)
    RETURN t0
"""
    assert only(text, "op").splitlines()[:4] == [
        "instruction 0 (OP_CALL matmull) in @f: unknown op 'matmull'",
        "  expected: an op of the op table",
        "  found:    matmull",
        "  fix:      did you mean 'matmul'?",
    ]


def test_op_arity() -> None:
    text = """
func @f(t0: f32[b]) -> f32[b]
  L0:
    t1 = OP_CALL add(t0)
    RETURN t1
"""
    assert only(text, "arity").splitlines()[:3] == [
        "instruction 0 (OP_CALL add) in @f: add takes 2 inputs and gives 1 outputs",
        "  expected: 2 inputs, 1 outputs",
        "  found:    1 inputs, 1 outputs",
    ]


def test_op_attributes() -> None:
    text = """
func @f(t0: f32[b, 4]) -> f32[b]
  L0:
    t1 = OP_CALL sum(t0, axes=[1])
    RETURN t1
"""
    assert only(text, "attribute").splitlines()[:3] == [
        "instruction 0 (OP_CALL sum) in @f: unknown attribute 'axes' (did you mean 'axis'?)",
        "  expected: axis: ints, keepdims: bool",
        "  found:    axes",
    ]


def test_op_attribute_type_and_missing() -> None:
    text = """
func @f(t0: f32[b, 4]) -> f32[b, 4]
  L0:
    t1 = OP_CALL transpose(t0, perm=true)
    t2 = OP_CALL reshape(t0)
    RETURN t0
"""
    found = [d.render().splitlines()[:3] for d in diagnostics(text)]
    assert found == [
        [
            "instruction 0 (OP_CALL transpose) in @f: attribute 'perm' has the wrong type",
            "  expected: perm: ints",
            "  found:    perm=true",
        ],
        [
            "instruction 1 (OP_CALL reshape) in @f: missing attribute 'shape'",
            "  expected: shape: dims",
            "  found:    not given",
        ],
    ]


def test_op_rule_rejects_axis() -> None:
    text = """
func @f(t0: f32[b, 4]) -> f32[b]
  L0:
    t1 = OP_CALL sum(t0, axis=[2])
    RETURN t1
"""
    assert only(text, "shape").splitlines()[:4] == [
        "instruction 0 (OP_CALL sum) in @f: axis 2 is out of range for rank 2",
        "  expected: -2 <= axis < 2",
        "  found:    axis=2, t0 has rank 2",
        "  fix:      count axes from 0, or from -1 for the last one",
    ]


def test_dtype_rule() -> None:
    text = """
func @f(t0: f32[b], t1: i32[b]) -> f32[b]
  L0:
    t2 = OP_CALL add(t0, t1)
    RETURN t2
"""
    assert only(text, "shape").splitlines()[:4] == [
        "instruction 0 (OP_CALL add) in @f: operand dtypes differ",
        "  expected: all operands f32",
        "  found:    t0: f32, t1: i32",
        "  fix:      cast one operand first (op cast)",
    ]


def test_declared_type_differs() -> None:
    text = """
func @f(t0: f32[b, 4]) -> f32[b, 4]
  L0:
    t1: f32[b, 5] = OP_CALL neg(t0)
    RETURN t0
"""
    assert only(text, "type").splitlines()[:4] == [
        "instruction 0 (OP_CALL neg) in @f: declared type of t1 differs from what "
        "OP_CALL neg computes",
        "  expected: t1: f32[b, 4]",
        "  found:    t1: f32[b, 5]",
        "  fix:      fix the declared type or the operands",
    ]


def test_declared_type_needs_dynamic() -> None:
    text = """
func @f(t0: f32[b]) -> f32[b]
  L0:
    t1: i64[b, 1] = OP_CALL nonzero(t0)
    RETURN t0
"""
    assert "fix:      dimension 0 is data-dependent; declare it dynamic" in only(text, "type")


def test_resize_changes_element_count() -> None:
    text = """
func @f(t0: f32[b, 6]) -> f32[b, 6]
  L0:
    s0 = SHAPE_PROPAGATE t0, 0
    t1 = TENSOR_RESIZE t0, [s0, 4]
    RETURN t0
"""
    assert only(text, "shape").splitlines()[:3] == [
        "instruction 1 (TENSOR_RESIZE) in @f: TENSOR_RESIZE changes the number of elements",
        "  expected: product of [b, 4] == product of t0.shape  (6*b)",
        "  found:    t0: f32[b, 6]",
    ]


def test_phi_incompatible_shapes() -> None:
    text = """
func @f(t0: f32[b, 4], t1: bool[]) -> f32[b, 4]
  L0:
    BRANCH_IF t1, L1, L2
  L1:
    t2: f32[b, 4] = OP_CALL neg(t0)
    JUMP L3
  L2:
    t3: f32[b, 8] = OP_CALL concatenate(t0, t0, axis=1)
    JUMP L3
  L3:
    t4: f32[b, 4] = TENSOR_PHI (L1, t2), (L2, t3)
    RETURN t4
"""
    assert only(text, "phi").splitlines()[:4] == [
        "instruction 5 (TENSOR_PHI) in @f: incoming value t3 from L2 does not fit "
        "dimension 1 of t4",
        "  expected: t4: f32[b, 4]",
        "  found:    t2: f32[b, 4] from L1, t3: f32[b, 8] from L2",
        "  fix:      declare dimension 1 of t4 dynamic, or make the incoming shapes agree",
    ]


def test_phi_names_the_predecessors() -> None:
    text = """
func @f(t0: f32[b]) -> f32[b]
  L0:
    JUMP L1
  L1:
    t1: f32[b] = TENSOR_PHI (L0, t0), (L7, t0)
    RETURN t1
"""
    found = [d for d in diagnostics(text) if d.check == "phi"]
    assert [d.render().splitlines()[:3] for d in found] == [
        [
            "instruction 1 (TENSOR_PHI) in @f: TENSOR_PHI names other blocks than the "
            "predecessors of L1",
            "  expected: one value from each of L0",
            "  found:    L0, L7",
        ]
    ]


def test_shape_propagation_cycle() -> None:
    text = """
func @f(t0: f32[b]) -> f32[b]
  L0:
    JUMP L2
  L1:
    t1 = TENSOR_CREATE [s1], f32, cpu
    JUMP L2
  L2:
    s1 = SHAPE_PROPAGATE t1, 0
    RETURN t0
"""
    assert only(text, "cycle").splitlines()[:4] == [
        "instruction 1 (TENSOR_CREATE) in @f: shape dependency cycle: t1 <- s1 <- t1",
        "  expected: every register computed from values defined before it",
        "  found:    each depends on the next: t1 at instruction 1, s1 at instruction 3",
        "  fix:      compute the shape from an input or an earlier register",
    ]


ALLOC = """
func @f(t0: f32[b]) -> f32[b]
  L0:
    s0 = SHAPE_PROPAGATE t0, 0
    t1 = TENSOR_CREATE [s0], f32, cpu
    TENSOR_ALLOC t1
    t1 = OP_CALL neg(t0)
{body}
    RETURN t0
"""


def test_double_free() -> None:
    text = ALLOC.format(body="    TENSOR_FREE t1\n    TENSOR_FREE t1")
    assert only(text, "alloc").splitlines()[:4] == [
        "instruction 5 (TENSOR_FREE) in @f: t1 is freed twice",
        "  expected: t1 allocated",
        "  found:    t1 is already freed at instruction 4",
        "  fix:      remove this TENSOR_FREE",
    ]


def test_use_after_free() -> None:
    text = ALLOC.format(body="    TENSOR_FREE t1\n    t2 = OP_CALL exp(t1)")
    assert only(text, "alloc").splitlines()[:4] == [
        "instruction 5 (OP_CALL exp) in @f: t1 is used after it is freed",
        "  expected: t1 allocated here",
        "  found:    t1 is freed at instruction 4",
        "  fix:      move the TENSOR_FREE of t1 after its last use",
    ]


def test_leak_at_return() -> None:
    text = ALLOC.format(body="")
    assert only(text, "alloc").splitlines()[:4] == [
        "instruction 4 (RETURN) in @f: t1 leaks: it is still allocated at RETURN",
        "  expected: TENSOR_FREE t1 before RETURN, or return it",
        "  found:    t1 is allocated at instruction 2 and never freed",
        "  fix:      add TENSOR_FREE t1 after its last use",
    ]


def test_write_before_alloc() -> None:
    text = ALLOC.replace("    TENSOR_ALLOC t1\n", "").format(body="    TENSOR_FREE t1")
    found = [d.render().splitlines()[0] for d in diagnostics(text)]
    assert found == [
        "instruction 2 (OP_CALL neg) in @f: t1 is written before TENSOR_ALLOC",
        "instruction 3 (TENSOR_FREE) in @f: t1 is freed but never allocated",
    ]


def test_alloc_state_differs_between_paths() -> None:
    text = """
func @f(t0: f32[b], t9: bool[]) -> f32[b]
  L0:
    s0 = SHAPE_PROPAGATE t0, 0
    t1 = TENSOR_CREATE [s0], f32, cpu
    TENSOR_ALLOC t1
    BRANCH_IF t9, L1, L2
  L1:
    TENSOR_FREE t1
    JUMP L2
  L2:
    RETURN t0
"""
    found = [d.render().splitlines()[:3] for d in diagnostics(text)]
    assert found[0] == [
        "instruction 6 (RETURN) in @f: t1 is allocated on the path from L0 but freed on "
        "the path from L1",
        "  expected: one allocation state of t1 at L2",
        "  found:    allocated from L0, freed from L1",
    ]


def test_alloc_needs_tensor_create() -> None:
    text = """
func @f(t0: f32[b]) -> f32[b]
  L0:
    TENSOR_ALLOC t0
    RETURN t0
"""
    assert only(text, "alloc").splitlines()[0] == (
        "instruction 0 (TENSOR_ALLOC) in @f: TENSOR_ALLOC needs a tensor declared by "
        "TENSOR_CREATE; t0 is not one"
    )


def test_results_match_signature() -> None:
    text = """
func @f(t0: f32[b, 4]) -> f32[4, b]
  L0:
    RETURN t0
"""
    assert only(text, "result").splitlines()[:4] == [
        "instruction 0 (RETURN) in @f: result 0 does not match the signature",
        "  expected: result 0: f32[4, b]",
        "  found:    t0: f32[b, 4]",
        "  fix:      add the constraint 'b == 4' to @f, or return a tensor of the result "
        "type, or change the signature",
    ]


def test_result_count() -> None:
    text = """
func @f(t0: f32[b]) -> f32[b], f32[b]
  L0:
    RETURN t0
"""
    assert only(text, "result").splitlines()[:3] == [
        "instruction 0 (RETURN) in @f: @f returns 2 values, RETURN gives 1",
        "  expected: f32[b], f32[b]",
        "  found:    t0",
    ]


def test_dimension_variable_not_solvable() -> None:
    text = """
func @f(t0: f32[floordiv(k, 2)]) -> f32[floordiv(k, 2)]
  L0:
    RETURN t0
"""
    assert only(text, "solve") == (
        "signature in @f: dimension variable 'k' cannot be solved from the inputs\n"
        "  expected: an input dimension linear in k (such as 2*k + 1) or a polynomial "
        "increasing in k, its other variables solvable\n"
        "  found:    k appears only in t0: f32[floordiv(k, 2)]\n"
        "  fix:      pass it explicitly (dim_args k) or add an input with dimension k\n"
        "  -->  | func @f(t0: f32[floordiv(k, 2)]) -> f32[floordiv(k, 2)]"
    )


@pytest.mark.parametrize(
    ("dims", "unsolved"),
    [
        ("k^2", []),
        ("k^2 + k; m*k", []),
        ("k^2 - k", ["k"]),
        ("k + m", ["k", "m"]),
        ("k + m; m", []),
        ("3*k + floordiv(m, 2); m", []),
        ("mod(k, 4)", ["k"]),
        ("max(k, 2)", ["k"]),
    ],
)
def test_solvability_follows_the_entry_binding(dims: str, unsolved: list[str]) -> None:
    from shapevm.shapes import SymbolicScope, solve_dim_vars, symbolic_shape

    params = ", ".join(f"t{i}: f32[{d}]" for i, d in enumerate(dims.split("; ")))
    text = f"func @f({params}) -> ()\n  L0:\n    RETURN\n"
    found = sorted(d.what.split("'")[1] for d in diagnostics(text) if d.check == "solve")
    assert found == unsolved
    if not unsolved:  # the entry binding agrees: it solves them from concrete shapes
        scope = SymbolicScope(())
        specs = [symbolic_shape(d, scope=scope) for d in dims.split("; ")]
        env = {"k": 5, "m": 3}
        shapes = [tuple(d if isinstance(d, int) else d.evaluate(env) for d in s) for s in specs]
        solved = solve_dim_vars(specs, shapes, scope)
        assert solved == {v: env[v] for v in solved} and set(solved) == set("km") & set(dims)


def test_explicit_dimension_argument_is_solvable() -> None:
    text = """
func @f(t0: f32[k*k]) -> f32[k*k]
    dim_args k
  L0:
    RETURN t0
"""
    assert diagnostics(text) == []


def test_unknown_dimension_variable() -> None:
    text = """
func @f(t0: f32[b]) -> f32[b]
  L0:
    t1: f32[z] = OP_CALL neg(t0)
    RETURN t0
"""
    found = {d.check: d.render().splitlines()[:3] for d in diagnostics(text)}
    assert found["solve"] == [
        "instruction 0 (OP_CALL neg) in @f: unknown dimension variable 'z'",
        "  expected: variables of the inputs or dim_args: b",
        "  found:    z",
    ]


def test_structure_terminators_and_labels() -> None:
    text = """
func @f(t0: f32[b]) -> f32[b]
  L0:
    RETURN t0
    t1 = OP_CALL neg(t0)
  L1:
    JUMP L9
"""
    found = [d.render().splitlines()[0] for d in diagnostics(text) if d.check == "structure"]
    assert found == [
        "instruction 0 (RETURN) in @f: RETURN must end its block",
        "instruction 1 (OP_CALL neg) in @f: block L0 does not end with a terminator",
        "instruction 2 (JUMP) in @f: unknown label L9",
    ]


def test_register_defined_twice() -> None:
    text = """
func @f(t0: f32[b]) -> f32[b]
  L0:
    t0 = OP_CALL neg(t0)
    RETURN t0
"""
    assert only(text, "structure").splitlines()[:3] == [
        "instruction 0 (OP_CALL neg) in @f: t0 is defined twice",
        "  expected: one definition per register",
        "  found:    t0 is already defined as a parameter",
    ]


def test_missing_constant() -> None:
    text = """
func @f(t0: f32[b]) -> f32[b]
  L0:
    t1 = LOAD_CONST k3
    RETURN t0
"""
    assert only(text, "const").splitlines()[:3] == [
        "instruction 0 (LOAD_CONST) in @f: constant k3 does not exist",
        "  expected: no LOAD_CONST: the pool is empty",
        "  found:    k3",
    ]


def test_branch_needs_scalar_bool() -> None:
    text = """
func @f(t0: f32[b]) -> f32[b]
  L0:
    BRANCH_IF t0, L1, L1
  L1:
    RETURN t0
"""
    assert only(text, "type").splitlines()[:3] == [
        "instruction 0 (BRANCH_IF) in @f: BRANCH_IF needs a scalar bool tensor, t0 is not one",
        "  expected: t0: bool[]",
        "  found:    t0: f32[b]",
    ]


def test_shape_propagate_axis_out_of_range() -> None:
    text = """
func @f(t0: f32[b]) -> f32[b]
  L0:
    s0 = SHAPE_PROPAGATE t0, 3
    RETURN t0
"""
    assert only(text, "shape").splitlines()[:3] == [
        "instruction 0 (SHAPE_PROPAGATE) in @f: axis 3 is out of range for t0",
        "  expected: 0 <= axis < 1",
        "  found:    t0: f32[b]",
    ]


def test_bad_constraint() -> None:
    program = parse_program("func @f(t0: f32[b]) -> f32[b]\n  L0:\n    RETURN t0\n")
    fn = dataclasses.replace(program.functions[0], constraints=("b >=",))
    found = check(Program((fn,)))
    assert [d.check for d in found] == ["signature"]
    assert found[0].render().startswith("signature in @f: bad constraint: ")


def test_verify_is_fast_for_1000_instructions() -> None:
    import time

    from tests.bytecode.programs import big_program

    program = big_program(1000, 64)
    start = time.perf_counter()
    verify(program)
    assert time.perf_counter() - start < 1.0  # the benchmark measures; this catches blowups


def test_attribute_given_twice_through_the_api() -> None:
    from shapevm.bytecode import Block, Function, OpCall, Param, Reg, Return, parse_type

    t0, t1 = Reg.tensor(0), Reg.tensor(1)
    call = OpCall((t1,), "sum", (t0,), (("axis", (0,)), ("axis", (1,))))
    fn = Function(
        "f",
        (Param(t0, parse_type("f32[b, 2]")),),
        (parse_type("f32[b, 2]"),),
        (Block("L0", (call, Return((t0,)))),),
    )
    (d,) = check(Program((fn,)))
    assert d.render().splitlines()[:3] == [
        "instruction 0 (OP_CALL sum) in @f: attribute 'axis' is given twice",
        "  expected: each attribute once",
        "  found:    axis, axis",
    ]


def test_decide_is_sound_about_what_it_cannot_know() -> None:
    from shapevm.bytecode.shape_expr import Verdict, decide
    from shapevm.ops import DYNAMIC
    from shapevm.shapes import SymbolicScope, symbolic_shape

    b, m = symbolic_shape("b, m", scope=SymbolicScope(("b <= 8",)))
    assert decide(b, "==", b) is Verdict.HOLDS
    assert decide(b, "==", b + 1) is Verdict.FAILS
    assert decide(b, "==", m) is Verdict.UNKNOWN
    assert decide(b, "<=", 8) is Verdict.HOLDS
    assert decide(b, ">=", 9) is Verdict.FAILS
    assert decide(m, "<=", 8) is Verdict.UNKNOWN
    assert decide(DYNAMIC, "==", 3) is Verdict.DEFERRED
    assert decide(3, "==", 4) is Verdict.FAILS


def test_decide_holds_when_the_difference_is_zero_under_the_rules() -> None:
    """``16*floordiv(w, 16)`` as it was built (a form ``make`` would not leave) and ``w``
    differ in their terms, but not under ``mod(w, 16) == 0``: their difference is 0, which
    is not a failure."""
    from shapevm.bytecode.shape_expr import Verdict, decide
    from shapevm.shapes import SymbolicScope, symbolic_shape
    from shapevm.shapes import expr as E

    scope = SymbolicScope(("mod(w, 16) == 0",))
    (w,) = symbolic_shape("w", scope=scope)
    raw = E.DimExpr(tuple((m, 16 * c) for m, c in (w // 16)._terms), scope)
    assert raw != w and raw - w == 0
    assert decide(raw, "==", w) is Verdict.HOLDS
    assert decide(raw, "==", w + 16) is Verdict.FAILS


def test_equality_constraint_makes_the_condition_provable() -> None:
    text = """
func @f(t0: f32[b, k], t1: f32[m, 8]) -> f32[b, 8]
    where m == k
  L0:
    t2 = OP_CALL matmul(t0, t1)
    RETURN t2
"""
    assert diagnostics(text) == []


def test_phi_declared_rank_differs_from_incoming() -> None:
    text = """
func @f(t0: f32[b]) -> f32[b]
  L0:
    JUMP L1
  L1:
    t1: f32[b, 2] = TENSOR_PHI (L0, t0)
    RETURN t0
"""
    assert only(text, "phi").splitlines()[:3] == [
        "instruction 1 (TENSOR_PHI) in @f: incoming values of TENSOR_PHI do not have the dtype "
        "and rank of t1",
        "  expected: t1: f32[b, 2]",
        "  found:    t0: f32[b] from L0",
    ]


def test_infer_types_reuses_what_a_clean_check_inferred() -> None:
    """The region finder asks for the types right after `export` verified the program: the
    verifier's inference is reused for those very objects, and only for them."""
    from shapevm.bytecode.verify import infer_types

    program = programs()[sorted(programs())[0]]
    fn = program.functions[0]
    assert check(program) == []
    first = infer_types(fn, program)
    assert infer_types(fn, program) is first
    # another program of the very same functions (as `export` makes): the same types
    assert infer_types(fn, dataclasses.replace(program)) is first
    again = parse_program(format_program(program))  # equal functions, other objects
    other = infer_types(again.functions[0], again)
    assert other is not first
    assert {r: str(t) for r, t in other.types.items()} == {
        r: str(t) for r, t in first.types.items()
    }
