"""``shapevm dis`` and ``shapevm validate`` through the real entry point."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import shapevm
from shapevm.__main__ import main
from shapevm.bytecode import parse_program, save, serialize
from tests.bytecode.golden import check_golden
from tests.bytecode.programs import TEXTS, programs

SAMPLE_V1 = Path(__file__).parent.parent / "data" / "sample_v1.svbc"


@pytest.fixture
def mlp_file(tmp_path: Path) -> Path:
    path = tmp_path / "mlp.svbc"
    save(programs()["mlp"], path)
    return path


def test_errors_are_exported_from_the_package() -> None:
    assert issubclass(shapevm.BytecodeFormatError, ValueError)
    assert issubclass(shapevm.VerifyError, ValueError)


def test_dis_matches_golden(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dis", str(SAMPLE_V1)]) == 0
    check_golden("dis_sample_v1.txt", capsys.readouterr().out)


def test_dis_with_offsets(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dis", "--offsets", str(SAMPLE_V1)]) == 0
    out = capsys.readouterr().out
    check_golden("dis_sample_v1_offsets.txt", out)
    first = next(line for line in out.splitlines() if "BIND_INPUTS" in line)
    offset = int(first.split()[0], 16)
    opcode = SAMPLE_V1.read_bytes()[offset]
    assert opcode == 1  # BIND_INPUTS, read at the printed offset


def test_dis_of_a_text_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "mlp.txt"
    path.write_text(TEXTS["mlp"], encoding="utf-8")
    assert main(["dis", str(path)]) == 0
    out = capsys.readouterr().out
    assert "1 function, 0 constants" in out
    assert "OP_CALL          t2 <- matmul(t0, t1)" in out


def test_validate_valid_file(mlp_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(mlp_file)]) == 0
    assert capsys.readouterr().out == (
        f"{mlp_file}: valid (1 function, 4 instructions, 0 constants)\n"
    )


def test_validate_invalid_program(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.svbc"
    path.write_bytes(serialize(parse_program(TEXTS["mlp"].replace("RETURN t3", "RETURN t9"))))
    assert main(["validate", str(path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"{path}: VerifyError: 1 problem\n\n")
    assert "instruction 3 (RETURN) in @mlp: t9 is used before it is defined" in out
    assert "  -->3 | RETURN t9" in out


def test_validate_corrupt_file(mlp_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = bytearray(mlp_file.read_bytes())
    data[100] ^= 0xFF
    mlp_file.write_bytes(bytes(data))
    assert main(["validate", str(mlp_file)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{mlp_file}: BytecodeFormatError: byte ")
    assert "the file is corrupt" in err


def test_validate_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(tmp_path / "nope.svbc")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_validate_text_with_syntax_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.txt"
    path.write_text("func @f() -> ()\n  L0:\n    FROB\n", encoding="utf-8")
    assert main(["validate", str(path)]) == 2
    assert "BytecodeSyntaxError: line 3, column 5" in capsys.readouterr().err


def test_python_dash_m_entry_point(mlp_file: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "shapevm", "validate", str(mlp_file)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "valid" in result.stdout


def test_run_prints_result_shapes_and_timings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import numpy as np

    import shapevm as sv
    import shapevm.numpy as snp

    w = np.ones((8, 4), np.float32)
    (b,) = sv.symbolic_shape("b")
    exp = sv.export(sv.jit(lambda x: snp.tanh(x @ w)))(sv.ShapeDtypeStruct((b, 8), np.float32))
    path = tmp_path / "f.svbc"
    exp.save(path)
    assert main(["run", str(path), "--shape", "x=3,8", "--repeat", "3"]) == 0
    out = capsys.readouterr().out
    assert "result 0: float32[3, 4]" in out and "first call" in out
    assert main(["run", str(path)]) == 2
    assert "give its shape with --shape x=" in capsys.readouterr().err
    assert main(["run", str(path), "--shape", "x=3,9"]) == 1
    assert "must be 8, found 9" in capsys.readouterr().err


def test_demo_runs_a_workload_stream(capsys: pytest.CaptureFixture[str]) -> None:
    from shapevm.tools.demo import run_demo

    assert run_demo(("W1",)) == 0
    out = capsys.readouterr().out
    assert "Exported(mlp: (f32[b, 256]) -> (f32[b, 256]))" in out
    assert out.count("(new)") == 6 and "worst relative error" in out
