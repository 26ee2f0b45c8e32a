"""The kernel benchmark's harness (not its timings): a tiny run end to end through the CLI,
the rows of other kernel families loaded from their modules (or marked not built), the
checks of each system's result against NumPy, and the table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from shapevm.__main__ import main as shapevm_main
from shapevm.tools.bench.kernel_cases import dense_case, dense_cases, matmul_cases
from shapevm.tools.bench.kernel_run import (
    NOT_BUILT,
    external_cases,
    render_table,
    summarize,
)
from shapevm.tools.bench.kernels import KernelCase, KernelConfig, RowResult, measure_case

TINY = KernelConfig(rounds=1, block=2, warmup=1, systems=("shapevm", "numpy"), retries=0)


def test_cli_runs_a_tiny_table_without_onnxruntime(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bench", "--kernels", "--quick", "--groups", "matmul,conv", "--kernel-threads",
            "1,2", "--kernel-systems", "shapevm,numpy", "--rounds", "1", "--block", "1",
            "--out", str(tmp_path)]  # fmt: skip
    assert shapevm_main(argv) == 0
    out = capsys.readouterr().out
    assert "| W3 q @ kᵀ / 8 | 1×4×16×64 |" in out
    assert "÷NumPy 2T" in out and "load average of the machine" in out
    assert "shapevm's pool during the run:" in out
    assert (tmp_path / "kernels.md").read_text(encoding="utf-8").strip() == out.strip()
    rows = json.loads((tmp_path / "kernels.json").read_text(encoding="utf-8"))["rows"]
    matmul = [r for r in rows if r["group"] == "matmul"]
    assert len(matmul) == 2 and set(matmul[0]["threads"]) == {"1", "2"}
    assert matmul[0]["threads"]["1"]["max_rel_diff"]["shapevm"] < 1e-5


def test_bad_options_say_what_is_expected(capsys: pytest.CaptureFixture[str]) -> None:
    assert shapevm_main(["bench", "--kernels", "--kernel-threads", "0"]) == 2
    assert "expected thread counts such as 1,2; found '0'" in capsys.readouterr().err
    assert shapevm_main(["bench", "--kernels", "--groups", "dense,fft"]) == 2
    assert "--groups: unknown fft; known: dense, matmul" in capsys.readouterr().err


def test_other_families_rows_come_from_their_modules(tmp_path: Path) -> None:
    (tmp_path / "good_bench.py").write_text(
        "import numpy as np\n"
        "from shapevm.tools.bench.kernels import KernelCase\n"
        "def kernel_cases(quick):\n"
        "    x = np.ones(8, np.float32)\n"
        "    return [KernelCase('gelu', 'gelu', '8', numpy=lambda: x * 2)]\n",
        encoding="utf-8",
    )
    (tmp_path / "broken_bench.py").write_text("raise RuntimeError('half written')\n", "utf-8")
    good = external_cases("good_bench", ["gelu", "chain"], True, tmp_path)
    assert [(c.group, c.missing) for c in good] == [("gelu", ""), ("chain", NOT_BUILT)]
    broken = external_cases("broken_bench", ["conv"], True, tmp_path)
    assert broken[0].missing == "broken_bench.py failed: RuntimeError: half written"
    absent = external_cases("absent_bench", ["pool"], True, tmp_path)
    assert absent[0].missing == NOT_BUILT


def test_a_failing_or_wrong_system_is_reported_and_the_others_measured() -> None:
    x = np.arange(6, dtype=np.float32)

    def broken() -> None:
        raise ValueError("no kernel for this")

    row = measure_case(KernelCase("t", "t", "6", broken, lambda: x + 1), 1, TINY)
    assert row.errors == {"shapevm": "ValueError: no kernel for this"}
    assert list(row.median_us) == ["numpy"] and row.calls == 2
    assert list(row.cpu_median_us) == ["numpy"]  # one thread: the CPU time too
    wrong = measure_case(KernelCase("t", "t", "6", lambda: x + 2, lambda: x + 1), 1, TINY)
    assert wrong.max_rel_diff["shapevm"] == pytest.approx(1 / 6)


def test_table_ratios_and_summary() -> None:
    cases = [
        KernelCase("dense", "W1 fc1", "b=1"),
        KernelCase("conv", "conv", "—", missing=NOT_BUILT),
    ]
    row = RowResult({"shapevm": 30.0, "onnxruntime": 40.0, "numpy": 60.0}, {"shapevm": 20.0})
    row.busy = 0.25
    table = render_table(cases, [{1: row}, {}], [1])
    assert "| W1 fc1 | b=1 | 30.0 | 40.0 | 60.0 | 0.75 | 0.50 | — | 0.25 |" in table
    row.cpu_median_us["onnxruntime"] = 25.0
    assert "| 0.50 | 0.80 | 0.25 |" in render_table(cases, [{1: row}, {}], [1])
    assert f"| conv | — | {NOT_BUILT} | — |" in table
    assert summarize(cases, [{1: row}, {}], [1]) == [
        "- dense, 1 thread: shapevm ÷ ORT geometric mean 0.75 over 1 rows, worst 0.75 "
        "(W1 fc1 b=1); CPU time: geometric mean 0.80 over 1 rows, worst 0.80 (W1 fc1 b=1)"
    ]


@pytest.mark.slow  # importing onnx takes seconds
def test_builtin_rows_compute_the_same_in_every_system() -> None:
    pytest.importorskip("onnxruntime")
    config = KernelConfig(rounds=1, block=1, warmup=1, retries=0)
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((48, 40), np.float32), rng.standard_normal(48, np.float32)
    gelu = dense_case("t", "t", rng.standard_normal((5, 40), np.float32), w, b, "gelu_tanh")
    for case in [gelu, dense_cases(quick=True)[0], *matmul_cases(quick=True)]:
        row = measure_case(case, 1, config)
        assert row.errors == {}
        assert row.max_rel_diff["shapevm"] < 1e-5 and row.max_rel_diff["onnxruntime"] < 1e-5
