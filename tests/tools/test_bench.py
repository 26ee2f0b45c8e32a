"""The benchmark harness: a tiny run end to end in fresh processes, the plugin hook, the
tables, and the peers' models against the float64 reference."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from shapevm.__main__ import main as shapevm_main
from shapevm.models import WORKLOADS, accuracy, make_input, make_weights, reference_f64
from shapevm.tools.bench import get_system, main, register_system, unregister_system
from shapevm.tools.bench.registry import PLUGINS_ENV, _import_plugin, plugin_errors
from shapevm.tools.bench.report import baseline_of, fmt_ratio, fmt_time, render, summarize
from shapevm.tools.bench.runner import time_imports
from tests.models import cases
from tests.tools.tooling import require

ROOT = Path(__file__).resolve().parents[2]
TINY = [
    "--quick",
    "--workloads",
    "W1",
    "--max-shapes",
    "2",
    "--stream-calls",
    "6",
    "--steady-calls",
    "3",
    "--warmup",
    "1",
]


@pytest.fixture
def plugin_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The test plugin importable in the measuring processes, as a user's plugin would be."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv(PLUGINS_ENV, "tests.tools.bench_plugin")
    _import_plugin("tests.tools.bench_plugin")  # the parent sees what the children will see
    yield
    unregister_system("plugin-broken")


def test_tiny_run_end_to_end(
    tmp_path: Path, plugin_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    register_system(
        "never", lambda: "needs a machine we do not have", lambda w, p: None, replace=True
    )
    try:
        systems = "numpy,plugin-broken,never"
        code = main([*TINY, "--systems", systems, "--out", str(tmp_path)])
    finally:
        unregister_system("never")
    out, err = capsys.readouterr()
    assert code == 1  # plugin-broken failed; everything else still ran and was reported
    assert "not measuring never: needs a machine we do not have" in err
    assert "[1/4] W1 numpy shapes ... " in err
    broken = "RuntimeError: cannot build W1 (setup_env ran: yes, private caches: True)"
    assert f"W1 plugin-broken shapes ... FAILED: {broken}" in err

    results = json.loads((tmp_path / "results.json").read_text())
    assert results["not_measured"] == {"never": "needs a machine we do not have"}
    assert [(r["system"], r["mode"], r["ok"]) for r in results["runs"]] == [
        ("numpy", "shapes", True),
        ("numpy", "stream", True),
        ("plugin-broken", "shapes", False),
        ("plugin-broken", "stream", False),
    ]
    m = results["summary"]["numpy"]["W1"]
    assert m["first_call_s"] > 0 and len(m["new_shape_s"]) == 1 and len(m["steady_s"]) == 2
    assert len(m["stream_latencies_s"]) == 6 and m["stream_worst_s"] <= m["stream_total_s"]
    assert m["accuracy"] < 1e-5 and m["rss_mib"] > 10
    # NumPy's own import, timed in a bare interpreter (the measuring child has it loaded)
    assert m["import_s"] > 1e-3
    assert results["runs"][0]["threads"] == 2

    tables = (tmp_path / "tables.md").read_text()
    assert tables in out
    assert "Ratios (in parentheses) are to: W1: numpy" in tables
    assert "### (d) the stream: 6 calls in a cold process" in tables
    assert "| W1 system | b=1 | b=3 |" in tables
    assert "- not measured: never (needs a machine we do not have)" in tables
    assert f"- FAILED plugin-broken W1: shapes: {broken}" in tables
    stream_row = next(line for line in tables.splitlines() if line.startswith("| numpy |"))
    assert "(1.00×)" in stream_row
    if "plot written" in err:
        assert (tmp_path / "stream.png").stat().st_size > 1000
    else:
        assert "plot skipped: matplotlib is not installed" in err


def test_imports_are_timed_in_a_bare_interpreter() -> None:
    """The measuring child runs as ``-m shapevm.tools.bench.child``, so it has shapevm loaded
    before any clock; the probe starts from nothing, NumPy first, then the library."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    t = time_imports(["shapevm"], env, None, 120.0)
    assert 0 < t["import_numpy_s"] < t["import_s"]
    with pytest.raises(RuntimeError, match="importing no_such_module_xyz failed"):
        time_imports(["no_such_module_xyz"], env, None, 120.0)


def test_unknown_names_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--systems", "numpy,tvm"]) == 2
    assert "unknown system tvm (known: numpy, onnxruntime, jax" in capsys.readouterr().err
    assert main(["--workloads", "W4"]) == 2
    assert "unknown workload W4 (known: W1, W2, W3)" in capsys.readouterr().err


def test_bench_subcommand_lists_systems(capsys: pytest.CaptureFixture[str]) -> None:
    assert shapevm_main(["bench", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["numpy", "available"]
    assert [line.split()[0] for line in lines[:5]] == [
        "numpy",
        "onnxruntime",
        "jax",
        "torch-eager",
        "torch-compile",
    ]


def test_registry_rejects_duplicates_and_reports_broken_plugins() -> None:
    with pytest.raises(ValueError, match="a benchmark system named 'numpy' is already registered"):
        register_system("numpy", lambda: True, lambda w, p: None)
    with pytest.raises(ValueError, match="use a non-empty name without spaces or commas"):
        register_system("a,b", lambda: True, lambda w, p: None)

    def boom() -> bool:
        raise OSError("driver missing")

    system = register_system("boom", boom, lambda w, p: None, replace=True)
    try:
        assert system.is_available() == (False, "available() raised OSError: driver missing")
    finally:
        unregister_system("boom")
    _import_plugin("tests.tools.no_such_plugin")
    assert (
        "No module named 'tests.tools.no_such_plugin'"
        in plugin_errors()["tests.tools.no_such_plugin"]
    )


def _record(system: str, repeat: int, scale: float) -> list[dict[str, object]]:
    common = {
        "system": system,
        "workload": "W1",
        "repeat": repeat,
        "ok": True,
        "import_s": 0.1,
        "versions": {"system": f"{system} 1.0"},
    }
    shapes = {
        **common,
        "mode": "shapes",
        "first_call_s": 2 * scale,
        "new_shape_s": [scale],
        "steady_s": [scale / 10, scale / 5],
        "accuracy": [1e-7, 2e-7 * repeat],
    }
    stream = {
        **common,
        "mode": "stream",
        "total_s": 10 * scale,
        "worst_s": scale,
        "latencies_s": [scale] * 4,
        "rss_mib": 100.0,
        "rss_children_mib": 0.0,
    }
    return [shapes, stream]


def test_summary_takes_medians_and_ratios_to_onnxruntime() -> None:
    records = [r for i, s in enumerate((1.0, 3.0, 2.0)) for r in _record("numpy", i, s)]
    records += [r for i in range(3) for r in _record("onnxruntime", i, 0.5)]
    summary = summarize(records)
    m = summary["numpy"]["W1"]
    assert m["first_call_s"] == 4.0 and m["steady_s"] == [0.2, 0.4] and m["stream_total_s"] == 20
    assert m["stream_best_s"] == 10.0  # the fastest process, whatever the order they ran in
    assert m["accuracy"] == 4e-7 and m["processes"] == 6
    assert baseline_of(summary, "W1") == "onnxruntime"
    config = {
        "workloads": ["W1"],
        "systems": ["onnxruntime", "numpy"],
        "repeats": 3,
        "threads": 2,
        "steady_calls": 20,
        "warmup": 3,
        "stream_calls": 4,
    }
    tables = render(summary, config, {"W1": [(1, 256), (3, 256)]})
    assert "| numpy | 20.0 s (4.00×) |" in tables
    fastest = (
        "fastest process of 3\n\n| system | W1 |\n|---|---|\n"
        "| onnxruntime | 5.00 s (1.00×) |\n| numpy | 10.0 s (2.00×) |"
    )
    assert fastest in tables
    assert "| onnxruntime | 5.00 s (1.00×) |" in tables
    assert "| numpy | 0.200 s (4.00×)" not in tables  # (c) is shown per shape, in ms
    assert "| numpy | 200 ms (4.00×) | 400 ms (4.00×) |" in tables


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (7.4e-5, "0.074 ms"),
        (1.41e-3, "1.41 ms"),
        (0.0999, "99.9 ms"),
        (0.354, "354 ms"),
        (0.9996, "1.00 s"),
        (14.1, "14.1 s"),
        (123.4, "123 s"),
    ],
)
def test_time_format_keeps_three_significant_digits(seconds: float, text: str) -> None:
    assert fmt_time(seconds) == text


def test_ratio_format() -> None:
    ratios = (0.5, 9.996, 12.34, 99.96, 250.0)
    assert [fmt_ratio(r) for r in ratios] == ["0.50×", "10.0×", "12.3×", "100×", "250×"]


@pytest.mark.parametrize("wid", list(WORKLOADS))
def test_onnxruntime_models_match_the_float64_reference(wid: str) -> None:
    require("onnx")
    pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
    run = get_system("onnxruntime").build(wid, cases.weights(wid))
    for i, shape in enumerate(WORKLOADS[wid].shapes):
        x, ref = cases.case(wid, shape, i)
        y = run(x)
        assert y.dtype == np.float32 and accuracy(y, ref) < 1e-5, shape


@pytest.mark.parametrize("wid", list(WORKLOADS))
def test_shapevm_onnx_runs_the_graph_onnxruntime_runs(wid: str) -> None:
    """The ``shapevm-onnx`` system imports the workload's ONNX graph (dynamic axes) and
    runs it in the JIT: it computes what the float64 reference does, at two shapes."""
    require("onnx")
    run = get_system("shapevm-onnx").build(wid, cases.weights(wid))
    for i, shape in enumerate(WORKLOADS[wid].shapes[:2]):
        x, ref = cases.case(wid, shape, i)
        y = run(x)
        assert y.dtype == np.float32 and accuracy(y, ref) < 1e-5, shape


@pytest.mark.parametrize("system", ["jax", "torch-eager"])
def test_other_peers_match_the_float64_reference(system: str) -> None:
    pytest.importorskip("jax" if system == "jax" else "torch", reason=f"{system} not installed")
    for wid, workload in WORKLOADS.items():
        x, ref = cases.case(wid, workload.shapes[0], 0)
        y = get_system(system).build(wid, cases.weights(wid))(x)
        assert accuracy(np.asarray(y), ref) < 1e-5, wid


@pytest.mark.slow
def test_torch_compile_matches_the_float64_reference() -> None:
    pytest.importorskip("torch", reason="torch not installed")
    for wid, workload in WORKLOADS.items():
        weights = make_weights(wid)
        run = get_system("torch-compile").build(wid, weights)
        for i, shape in enumerate(workload.shapes[:2]):
            x = make_input(wid, shape, seed=i)
            assert accuracy(run(x), reference_f64(wid, weights)(x)) < 1e-5, (wid, shape)


def test_jit_systems_settle_before_steady_state() -> None:
    """Steady state (c) is after every compile: the JIT systems compile in the background,
    so what their build returns has ``settle``, which waits for the compile queue."""
    weights = make_weights("W1")
    fn = get_system("shapevm-jit").build("W1", weights)
    x = make_input("W1", (3, 256), 0)
    for _ in range(4):
        fn(x)
    fn.settle()  # type: ignore[attr-defined]
    assert [r["status"] for r in fn.fn.jit_info()] == ["ready"]  # type: ignore[attr-defined]
    np.testing.assert_allclose(fn(x), reference_f64("W1", weights)(x), rtol=1e-4, atol=1e-5)


def test_prepare_runs_before_the_clock_and_imports_are_per_workload_kind() -> None:
    """What a user has before loading a model (``System.prepare``: ONNX Runtime's and
    shapevm-onnx's model file) is made before the build's clock starts: building the
    model with `onnx.helper` was counted in ONNX Runtime's build (33 ms of W1's)."""
    from shapevm.tools.bench import child

    prepared: list[str] = []

    def prepare(wid: str, weights: object) -> None:
        import time

        time.sleep(0.3)
        prepared.append(wid)

    register_system(
        "slow-prepare",
        lambda: True,
        lambda wid, weights: lambda x: x,
        prepare=prepare,
        replace=True,
    )
    try:
        spec = {"system": "slow-prepare", "workload": "W1", "mode": "stream",
                "shapes": [[1, 256], [3, 256]], "warmup": 0, "steady_calls": 1}  # fmt: skip
        result = child.measure(spec)
    finally:
        unregister_system("slow-prepare")
    assert prepared == ["W1"]
    assert result["build_s"] < 0.1 and result["total_s"] < 0.2
    assert get_system("onnxruntime").prepare is not None
    assert get_system("shapevm-onnx").imports_for(False) == ("shapevm", "shapevm.onnx")
    assert get_system("shapevm-jit").imports_for(True) == ("shapevm", "onnx", "shapevm.onnx")
    assert get_system("onnxruntime").imports_for(True) == ("onnx", "onnxruntime")
