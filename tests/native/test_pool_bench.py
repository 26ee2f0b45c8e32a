"""``benchmarks/pool_bench.py`` runs and prints its tables (a smoke run of its quick sections;
its timings are not checked)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "pool_bench.py"


def test_quick_sections_print_their_tables(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("pool_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--quick", "--only", "launch"]) == 0
    rows = module.sizes(2, ((1, 64, 64), (8, 128, 256)))
    out = capsys.readouterr().out
    assert "| workers spinning |" in out and "pool counters" in out
    assert rows[2].startswith("| 1x64x64 | 4,096 |") and rows[3].startswith("| 8x128x256 |")
