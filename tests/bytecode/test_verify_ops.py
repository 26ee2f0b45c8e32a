"""Programs with the frontend's ops: they print, parse, serialize and verify; broken ones are
rejected with messages that name the condition, the operands and the fix."""

from __future__ import annotations

import pytest

from shapevm.bytecode import (
    Diagnostic,
    OpCall,
    check,
    deserialize,
    format_program,
    parse_program,
    serialize,
    verify,
)

NET = """
func @net(t0: f32[b, 3, h, w], t1: f32[8, 3, 3, 3], t2: f32[8], t3: bool[b]) -> f32[dynamic, 8]
    where h >= 2
    where w >= 2
  L0:
    t4: f32[b, 8, h, w] = OP_CALL conv2d(t0, t1, t2, padding=[1, 1, 1, 1])
    t5: f32[b, 8, floordiv(h, 2), floordiv(w, 2)] = OP_CALL max_pool2d(t4, kernel=[2, 2])
    t6: f32[b, 8, h, w] = OP_CALL avg_pool2d(t4, kernel=[3, 1], stride=[1, 1], padding=[1, 1, 0, 0])
    t7: f32[b, 8] = OP_CALL mean(t5, axis=[2, 3])
    t8: f32[b, 2], t9: i64[b, 2] = OP_CALL top_k(t7, k=[2])
    t10: f32[dynamic, 8] = OP_CALL mask_select(t7, t3)
    t11: f32[b] = OP_CALL full(shape=[b], value=0.0, dtype="f32")
    t12: i32[2] = OP_CALL dim_value(dims=[h, 2*w])
    t13: i64[b] = OP_CALL iota(size=[b], dtype="i64")
    t14: f32[b, 4] = OP_CALL slice(t7, start=[0, 1], stop=[b, 8], step=[1, 2])
    t15: f32[b + 1, 6] = OP_CALL pad(t14, low=[1, 0], high=[0, 2], value=-inf)
    t16: f32[b + 1] = OP_CALL einsum(t15, equation="...j->...")
    t17: f32[4, b, 8] = OP_CALL broadcast_to(t7, shape=[4, b, 8])
    t18: f32[b, 8] = OP_CALL sort(t7, axis=-1, descending=true)
    t19: i64[b] = OP_CALL argmax(t18, axis=1)
    t20: bool[b] = OP_CALL greater_equal(t11, 0.5)
    t21: bool[b] = OP_CALL logical_and(t20, t3)
    t22: f32[b] = OP_CALL erf(t11)
    t23: f32[b, h, w] = OP_CALL einsum(t6, t6, equation="bchw,bchw->bhw")
    RETURN t10
"""


def diagnostics(text: str) -> list[Diagnostic]:
    return check(parse_program(text))


def only(text: str, kind: str = "shape") -> str:
    found = diagnostics(text)
    assert len(found) == 1, "\n\n".join(d.render() for d in found)
    assert found[0].check == kind, found[0].render()
    return found[0].render()


def test_a_program_of_new_ops_verifies_and_round_trips() -> None:
    program = parse_program(NET)
    verify(program)
    assert parse_program(format_program(program)) == program
    assert deserialize(serialize(program)) == program
    calls = [i for b in program.functions[0].blocks for i in b.instrs if isinstance(i, OpCall)]
    full = next(c for c in calls if c.op == "full")
    assert full.ins == () and full.call_text() == 'full(dtype="f32", shape=[b], value=0.0)'
    top_k = next(c for c in calls if c.op == "top_k")
    assert len(top_k.outs) == 2


def one_op(sig: str, line: str, results: str = "f32[b]", extra: str = "") -> str:
    head = f"func @f({sig}) -> {results}" + (f"\n    {extra}" if extra else "")
    return f"{head}\n  L0:\n    {line}\n    RETURN t9\n"


def test_conv2d_channel_mismatch() -> None:
    text = one_op(
        "t0: f32[b, 3, 8, 8], t1: f32[4, 2, 3, 3]",
        "t9 = OP_CALL conv2d(t0, t1)",
        "f32[b, 4, 6, 6]",
    )
    assert only(text).splitlines()[:4] == [
        "instruction 0 (OP_CALL conv2d) in @f: input channels differ from what the weight expects",
        "  expected: t0.shape[1] == t1.shape[1]  (2)",
        "  found:    t0: f32[b, 3, 8, 8], t1: f32[4, 2, 3, 3]",
        "  fix:      the weight is [out, in/groups, kh, kw]; check groups and the layout (NCHW)",
    ]


def test_conv2d_window_larger_than_input_needs_a_constraint() -> None:
    text = one_op(
        "t0: f32[b, 3, h, 8], t1: f32[4, 3, 5, 3]",
        "t9 = OP_CALL conv2d(t0, t1)",
        "f32[b, 4, h - 4, 6]",
    )
    message = only(text)
    assert "cannot prove t0.shape[2] >= t1.shape[2]" in message
    assert "add the constraint 'h >= 5' to @f (where h >= 5)" in message
    text = text.replace("-> f32[b, 4, h - 4, 6]", "-> f32[b, 4, h - 4, 6]\n    where h >= 5")
    assert diagnostics(text) == []


def test_slice_past_the_end() -> None:
    line = "t9 = OP_CALL slice(t0, start=[1, 0], stop=[b + 1, 4], step=[1, 1])"
    text = one_op("t0: f32[b, 4]", line, "f32[b, 4]")
    assert only(text).splitlines()[:3] == [
        "instruction 0 (OP_CALL slice) in @f: stop[0] is past the end of axis 0",
        "  expected: stop[0] <= t0.shape[0]  (b)",
        "  found:    t0: f32[b, 4]",
    ]


def test_slice_step_must_be_positive() -> None:
    text = one_op("t0: f32[b]", "t9 = OP_CALL slice(t0, start=[0], stop=[b], step=[-1])")
    assert only(text).splitlines()[:4] == [
        "instruction 0 (OP_CALL slice) in @f: step[0] is not positive",
        "  expected: step > 0 on every axis",
        "  found:    step=[-1]",
        "  fix:      reverse an axis with a separate op, then slice with a positive step",
    ]


def test_logical_op_on_floats() -> None:
    text = one_op("t0: f32[b], t1: bool[b]", "t9 = OP_CALL logical_or(t0, t1)", "bool[b]")
    assert only(text).splitlines()[:3] == [
        "instruction 0 (OP_CALL logical_or) in @f: logical ops take bool operands",
        "  expected: every operand bool",
        "  found:    t0: f32, t1: bool",
    ]


def test_top_k_larger_than_the_axis() -> None:
    text = one_op(
        "t0: f32[b, n]", "t8, t9 = OP_CALL top_k(t0, k=[k])", "i64[b, k]", extra="dim_args k"
    )
    message = only(text)
    assert message.splitlines()[0] == (
        "instruction 0 (OP_CALL top_k) in @f: cannot prove k <= t0.shape[1]: "
        "k is larger than the last dimension"
    )
    assert "add the constraint 'k <= n' to @f" in message


def test_full_value_out_of_range() -> None:
    text = one_op("", 't9 = OP_CALL full(shape=[4], value=0.5, dtype="i32")', "i32[4]")
    assert only(text).splitlines()[:3] == [
        "instruction 0 (OP_CALL full) in @f: value 0.5 does not fit dtype i32",
        "  expected: a whole number from -2147483648 to 2147483647",
        "  found:    value=0.5",
    ]


def test_mask_select_mask_shape() -> None:
    text = one_op(
        "t0: f32[b, 4], t1: bool[b, 3]",
        "t9 = OP_CALL mask_select(t0, t1)",
        "f32[dynamic]",
    )
    assert only(text).splitlines()[:2] == [
        "instruction 0 (OP_CALL mask_select) in @f: mask dimension 1 differs from the operand's",
        "  expected: t1.shape[1] == t0.shape[1]  (4)",
    ]


def test_broadcast_to_symbolic_mismatch() -> None:
    text = one_op("t0: f32[n]", "t9 = OP_CALL broadcast_to(t0, shape=[2, b])", "f32[2, b]",
                  "dim_args b")  # fmt: skip
    message = only(text)
    assert "cannot prove t0.shape[0] == shape[1]" in message
    assert "add the constraint 'n == b'" in message


@pytest.mark.parametrize(
    ("line", "headline"),
    [
        (
            't9 = OP_CALL einsum(t0, equation="i,i->i")',
            "bad einsum equation: the equation has 2 input terms for 1 operands",
        ),
        (
            't9 = OP_CALL einsum(t0, t0, equation="i,i")',
            "bad einsum equation: the equation needs exactly one '->' and the output after it",
        ),
        (
            't9 = OP_CALL einsum(t0, equation="ij->j")',
            "einsum term 'ij' does not match the rank of operand 0",
        ),
        (
            't9 = OP_CALL einsum(t0, equation="i->k")',
            "bad einsum equation: output letter 'k' is in no input",
        ),
        ('t9 = OP_CALL einsum(t0, equation="...->")', "einsum output drops the '...' axes"),
        (
            "t9 = OP_CALL dim_value(dims=[b, 2], scalar=true)",
            "a scalar dim_value takes exactly one dimension",
        ),
        ('t9 = OP_CALL iota(size=[b, 2], dtype="i32")', "iota takes one size"),
        ("t9 = OP_CALL pad(t0, low=[-1], high=[0])", "low[0] is negative"),
        ("t9 = OP_CALL broadcast_to(t0, shape=[])", "broadcast_to cannot lower the rank"),
        ("t9 = OP_CALL sort(t0, axis=1)", "axis 1 is out of range for rank 1"),
        ("t9 = OP_CALL argmax(t0, axis=-2)", "axis -2 is out of range for rank 1"),
    ],
)
def test_rule_errors_name_the_problem(line: str, headline: str) -> None:
    found = diagnostics(one_op("t0: f32[b]", line))
    assert found, line
    first = found[0].render().splitlines()[0]
    assert first.split(": ", 1)[1] == headline
