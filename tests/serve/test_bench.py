"""benchmarks/serve_bench.py, run briefly: its servers start, every answer is checked, the
table comes out, and the servers stop cleanly."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tests.tools.tooling import require

require("geventhttpclient")

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "serve_bench.py"


def test_a_short_load_test(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = importlib.util.spec_from_file_location("serve_bench", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "serve_bench", bench)  # its dataclasses look it up
    spec.loader.exec_module(bench)
    argv = ["--duration", "1", "--slice", "0.5", "--clients", "4", "--pool", "6",
            "--batch-sizes", "1,5", "--max-batch-size", "8",
            "--only", "shapevm JIT, dynamic"]  # fmt: skip
    assert bench.main(argv) == 0
    out = capsys.readouterr().out
    rows = [line.split(" | ") for line in out.splitlines() if line.startswith("| shapevm")]
    ((label, requests, *_, errors, _rss),) = rows
    assert label == "| shapevm JIT, dynamic batching"
    assert int(requests) > 0 and errors == "0"  # requests answered, none wrong
    assert "shapevm JIT, dynamic batching: server exit 0" in out
