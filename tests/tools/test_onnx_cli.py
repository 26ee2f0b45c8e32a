"""``shapevm import``, ``shapevm run model.onnx`` and ``shapevm bench --onnx``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.tools.tooling import require

onnx = require("onnx")

from shapevm.__main__ import main  # noqa: E402
from shapevm.models import make_weights  # noqa: E402
from shapevm.tools.bench import main as bench_main  # noqa: E402
from shapevm.tools.bench.onnx_models import build_onnx  # noqa: E402


@pytest.fixture(scope="module")
def w1(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("models") / "w1.onnx"
    onnx.save(build_onnx("W1", make_weights("W1")), path)
    return path


def test_import_writes_bytecode_that_dis_validate_and_run_read(
    w1: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "w1.svbc"
    assert main(["import", str(w1), "-o", str(out), "--dims", "x=n,256",
                 "--constraint", "n <= 64"]) == 0  # fmt: skip
    text = capsys.readouterr().out
    assert "Exported(shapevm_W1: (f32[n, 256]) -> (f32[n, 256]) where n <= 64)" in text
    assert f"wrote {out}" in text
    assert main(["validate", str(out)]) == 0
    assert main(["dis", str(out)]) == 0
    assert "(Gemm, opset 17)" in capsys.readouterr().out
    assert main(["run", str(out), "--shape", "x=3,256", "--repeat", "2"]) == 0
    assert "result 0: float32[3, 256]" in capsys.readouterr().out


def test_run_takes_an_onnx_file_directly(w1: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(w1), "--shape", "x=5,256", "--repeat", "2"]) == 0
    out = capsys.readouterr().out
    assert "Exported(shapevm_W1: (f32[b, 256]) -> (f32[b, 256]))" in out
    assert "result 0: float32[5, 256]" in out


def test_import_reports_unsupported_and_corrupt_models(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00\x01garbage")
    assert main(["import", str(bad)]) == 2
    assert "is not a valid ONNX model" in capsys.readouterr().err
    node = onnx.helper.make_node("Frobnicate", ["x"], ["y"])
    graph = onnx.helper.make_graph(
        [node], "g", [onnx.helper.make_tensor_value_info("x", 1, [2])],
        [onnx.helper.make_tensor_value_info("y", 1, [2])],
    )  # fmt: skip
    odd = tmp_path / "odd.onnx"
    onnx.save(onnx.helper.make_model(graph), odd)
    assert main(["import", str(odd)]) == 1
    assert "unsupported operator Frobnicate" in capsys.readouterr().err
    assert main(["import", str(odd), "--dims", "x"]) == 2


def test_bench_runs_an_onnx_file_in_every_system_that_can(
    w1: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--onnx", str(w1), "--shapes", "1x256,4x256", "--quick", "--stream-calls", "4",
            "--steady-calls", "2", "--warmup", "1", "--out", str(tmp_path)]  # fmt: skip
    systems = "numpy,shapevm-interp"
    assert bench_main([*args, "--systems", systems]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    ran = {(r["system"], r["workload"]) for r in results["runs"]}
    assert ran == {("shapevm-interp", "onnx:w1.onnx")}  # numpy cannot run an ONNX file
    m = results["summary"]["shapevm-interp"]["onnx:w1.onnx"]
    assert len(m["steady_s"]) == 2 and len(m["stream_latencies_s"]) == 4
    assert "| shapevm-interp |" in (tmp_path / "tables.md").read_text()
    capsys.readouterr()
    assert bench_main(["--onnx", str(w1), "--quick"]) == 2
    assert "--onnx needs --shapes" in capsys.readouterr().err


def _masked(path: Path, mask_dims: list[int | str]) -> Path:
    """y = x * mask[:, :, None] (x: f32[batch, seq, 8], mask: i64 with ``mask_dims``)."""
    h, T = onnx.helper, onnx.TensorProto
    nodes = [
        h.make_node("Cast", ["mask"], ["m"], to=T.FLOAT),
        h.make_node("Unsqueeze", ["m", "axis"], ["m3"]),
        h.make_node("Mul", ["x", "m3"], ["y"]),
    ]
    graph = h.make_graph(
        nodes, "masked",
        [h.make_tensor_value_info("x", T.FLOAT, ["batch", "seq", 8]),
         h.make_tensor_value_info("mask", T.INT64, mask_dims)],
        [h.make_tensor_value_info("y", T.FLOAT, ["batch", "seq", 8])],
        [onnx.numpy_helper.from_array(np.array([2], np.int64), "axis")],
    )  # fmt: skip
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), path)
    return path


def test_bench_feeds_every_input_of_a_model_sized_from_the_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model of two inputs: the mask's shape comes from the dimension names it shares with
    the first input, its values are 0 or 1; an input nothing sizes is an error that says
    which dimension."""
    from shapevm.tools.bench.onnx_files import Feeds, build_shapevm, make_inputs

    path = _masked(tmp_path / "masked.onnx", ["batch", "seq"])
    inputs = make_inputs(str(path), [(2, 5, 8), (1, 3, 8)])
    feeds = inputs[(2, 5, 8)]
    assert isinstance(feeds, Feeds) and [a.shape for a in feeds] == [(2, 5, 8), (2, 5)]
    assert feeds[1].dtype == np.int64 and set(np.unique(feeds[1])) <= {0, 1}
    run = build_shapevm(str(path), None)
    np.testing.assert_allclose(run(feeds), feeds[0] * feeds[1][:, :, None])

    args = ["--onnx", str(path), "--shapes", "2x5x8,1x3x8", "--quick", "--stream-calls", "4",
            "--steady-calls", "2", "--warmup", "1", "--out", str(tmp_path / "out")]  # fmt: skip
    assert bench_main([*args, "--systems", "shapevm-interp,shapevm-onnx"]) == 0
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert {r["system"] for r in results["runs"] if r["ok"]} == {"shapevm-interp", "shapevm-onnx"}

    odd = _masked(tmp_path / "odd.onnx", ["batch", "tokens"])
    capsys.readouterr()
    assert bench_main([*args[:1], str(odd), *args[2:], "--systems", "shapevm-interp"]) == 2
    err = capsys.readouterr().err  # said before any process starts
    assert f"--onnx {odd}: input 'mask': dimension 'tokens' (axis 1)" in err
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not a model")
    assert bench_main([*args[:1], str(junk), *args[2:], "--systems", "shapevm-interp"]) == 2
    err = capsys.readouterr().err
    assert "is not a valid ONNX model" in err and "fix:" in err
