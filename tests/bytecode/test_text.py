"""Text form: golden files for the printer, parse(print(p)) == p, syntax errors."""

from __future__ import annotations

import io

import pytest

from shapevm.bytecode import (
    BytecodeSyntaxError,
    format_program,
    parse_program,
    print_program,
)
from tests.bytecode.golden import check_golden
from tests.bytecode.programs import TEXTS, big_program, mlp_by_hand, programs


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_printer_matches_golden_file(name: str) -> None:
    check_golden(f"{name}.txt", format_program(programs()[name]))


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_parse_of_print_is_identity(name: str) -> None:
    program = programs()[name]
    again = parse_program(format_program(program))
    assert again == program
    assert hash(again) == hash(program)


def test_print_program_writes_to_file() -> None:
    out = io.StringIO()
    print_program(programs()["mlp"], file=out)
    assert out.getvalue() == format_program(programs()["mlp"])


def test_python_api_builds_the_same_program_as_the_text() -> None:
    assert mlp_by_hand() == programs()["mlp"]


@pytest.mark.parametrize("name", ['"', '")', "a\\", 'x (y) "z"'])
def test_constant_names_with_quotes_and_parentheses_round_trip(name: str) -> None:
    # The printer annotates LOAD_CONST with the constant's name as a JSON string in the
    # "(meaning)" column; the parser must find where that column starts even when the
    # name holds escaped quotes or parentheses.
    import numpy as np

    from shapevm.bytecode import Block, Constant, Function, LoadConst, Program, Reg, TensorType
    from shapevm.ops import DType

    load = LoadConst(Reg.tensor(0), 0, TensorType(DType.BOOL, ()))
    fn = Function("f", (), (), (Block("L0", (load,)),), (), ())
    program = Program((fn,), (Constant(name, np.zeros((), bool)),), ())
    assert parse_program(format_program(program)) == program


def test_big_program_round_trips() -> None:
    program = big_program(200, 64)
    assert parse_program(format_program(program)) == program


def test_spelling_is_canonical() -> None:
    a = parse_program(TEXTS["consts"].replace("2*k + 1, 2]", "1 + k*2, 2]"))
    assert a == programs()["consts"]


def test_meaning_column_shows_shape_values() -> None:
    text = format_program(programs()["mlp"])
    assert "s0 = SHAPE_PROPAGATE t0, 0            (b)" in text


def test_style_example_prints_as_documented() -> None:
    text = format_program(programs()["mlp"])
    assert text.splitlines()[:4] == [
        "func @mlp(t0: f32[b, 256], t1: f32[256, 64]) -> f32[b, 64]",
        "    where b >= 1",
        "  L0:",
        "    s0 = SHAPE_PROPAGATE t0, 0            (b)",
    ]


@pytest.mark.parametrize(
    ("text", "line", "column", "message"),
    [
        ("func @f() -> ()\n  L0:\n    t1 = OP_CALL add(x0, t1)\n", 3, 22, "found 'x0'"),
        ("func @f() -> ()\n  L0:\n    FROB t1\n", 3, 5, "expected an instruction"),
        ("    RETURN\n", 1, 5, "instruction outside a function"),
        ("func @f(t0: q32[b]) -> ()\n  L0:\n    RETURN\n", 1, 13, "unknown dtype 'q32'"),
        ("func @f() -> ()\n  L0:\n    s0 = SHAPE_COMPUTE s1 +* 2\n", 3, 24, "shape expr"),
        ("func @f() -> ()\n  L0:\n    t0 = TENSOR_CREATE [s0], f32, gpu!\n", 3, 35, "device"),
    ],
)
def test_syntax_errors_name_line_and_column(
    text: str, line: int, column: int, message: str
) -> None:
    with pytest.raises(BytecodeSyntaxError) as info:
        parse_program(text)
    err = info.value
    assert (err.line, err.column) == (line, column), str(err)
    assert message in str(err)
    assert str(err).splitlines()[0].startswith(f"line {line}, column {column}: ")
    assert "^" in str(err)


def test_syntax_error_rendering() -> None:
    with pytest.raises(BytecodeSyntaxError) as info:
        parse_program("func @f() -> ()\n  L0:\n    t1 = OP_CALL add(x0, t1)\n")
    assert str(info.value) == (
        "line 3, column 22: expected a register or a literal, found 'x0'\n"
        "  expected: a tensor register such as t0, or a literal such as 1, 0.5, true\n"
        "      3 |     t1 = OP_CALL add(x0, t1)\n"
        "        |                      ^"
    )


def test_tensor_type_keeps_canonical_text_of_engine_dimensions() -> None:
    from shapevm.bytecode import TensorType
    from shapevm.ops import DType
    from shapevm.shapes import symbolic_shape

    (b,) = symbolic_shape("b")
    assert TensorType(DType.F32, (b * 2, 3)).shape == ("2*b", 3)
    with pytest.raises(ValueError, match="bad dimension"):
        TensorType(DType.F32, (-1,))
