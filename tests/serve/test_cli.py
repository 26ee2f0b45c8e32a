"""``shapevm serve`` on the command line: what it refuses before serving, and that the rest of
the CLI does not need the HTTP libraries; ONNX files behind the same server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import shapevm as sv
from shapevm.__main__ import main
from shapevm.serve import ServeOptions, load_model
from shapevm.serve.server import describe
from tests.serve import helpers
from tests.tools.tooling import require


@pytest.fixture
def mlp_file(tmp_path: Path) -> Path:
    path = tmp_path / "mlp.svbc"
    helpers.mlp().save(path)
    return path


def test_bad_command_lines_exit_2_with_a_reason(
    mlp_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = [
        (["serve", "missing.svbc"], "shapevm serve: [Errno 2] No such file or directory"),
        (["serve", str(mlp_file), "--name", "a", "--name", "b"], "2 --name for 1 models"),
        (["serve", str(mlp_file), "--max-batch-size", "0"], "max_batch_size must be an integer"),
        (
            ["serve", str(mlp_file), "--runtime", "onnxruntime"],
            "the onnxruntime runtime serves .onnx files only",
        ),
        (["serve", str(mlp_file), str(mlp_file)], "two models are named 'mlp'"),
    ]
    for argv, message in cases:
        assert main(argv) == 2
        assert message in capsys.readouterr().err


def _onnx_file(tmp_path: Path, w: np.ndarray) -> Path:
    """``logits = input.1 @ w`` with a symbolic batch: names as exporters write them."""
    onnx = require("onnx")
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["input.1", "w"], ["logits"])],
        "g",
        [helper.make_tensor_value_info("input.1", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 3])],
        initializer=[numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "mm.onnx"
    onnx.save(model, path)
    return path


def test_an_onnx_file_through_the_importer_keeps_its_names(tmp_path: Path) -> None:
    from shapevm.serve import ModelServer, create_app

    w = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    served = load_model(_onnx_file(tmp_path, w), options=ServeOptions(max_batch_size=4))
    meta = served.metadata()
    assert meta["platform"] == "shapevm_onnx"
    assert meta["inputs"] == [{"name": "input.1", "datatype": "FP32", "shape": [-1, 4]}]
    assert meta["outputs"] == [{"name": "logits", "datatype": "FP32", "shape": [-1, 3]}]
    assert meta["shapevm"]["batching"]["dimension"] == "batch"
    httpclient = require("tritonclient.http")
    with helpers.live_server(create_app(ModelServer([served], served.options))) as url:
        client = httpclient.InferenceServerClient(url)
        x = np.ones((2, 4), np.float32)
        inp = httpclient.InferInput("input.1", [2, 4], "FP32")
        inp.set_data_from_numpy(x)
        y = client.infer("mm", [inp]).as_numpy("logits")
        client.close()
    assert np.allclose(y, x @ w, rtol=1e-6)


def test_without_the_onnx_package_the_message_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    real = importlib.import_module

    def no_onnx(name: str, *args: object) -> object:
        if name == "onnx":
            raise ModuleNotFoundError("No module named 'onnx'", name="onnx")
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", no_onnx)
    (tmp_path / "m.onnx").write_bytes(b"")
    with pytest.raises(ValueError, match=r"(?s)needs onnx\n.*shapevm\[onnx\].*onnxruntime"):
        load_model(tmp_path / "m.onnx")


def test_the_cli_builds_without_the_http_libraries() -> None:
    code = (
        "import sys; from shapevm.__main__ import build_parser; build_parser(); "
        "print(sorted(m for m in ('starlette', 'uvicorn', 'prometheus_client') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_models_of_one_shape_family_are_warm_when_loaded() -> None:
    unbatched = load_model(helpers.mlp(), "mlp", ServeOptions(max_batch_size=1))
    assert unbatched.warm_path == "compiled"
    (b,) = sv.symbolic_shape("b", constraints=["b >= 2"])
    exp = sv.export(sv.jit(lambda x: x * 2.0))(sv.ShapeDtypeStruct((b, 4), np.float32))
    assert load_model(exp, "pairs").warm_path == ""  # one row is not allowed: not warmed


def test_describe_says_how_requests_are_batched() -> None:
    model = load_model(helpers.mlp(), "mlp", ServeOptions(max_batch_size=8))
    assert describe(model) == (
        "model 'mlp': (x: float32[b, 16]) -> (float32[b, 8]) where b <= 512; jit; "
        "requests joined along b up to 8 rows"
    )
    fixed = load_model(helpers.matmul(), "mm", ServeOptions(max_batch_size=1, jit=False))
    assert describe(fixed).endswith(
        "interpreter; requests not joined: dynamic batching is off (max batch size 1)"
    )


def test_a_model_the_jit_cannot_compile_says_so_when_loaded() -> None:
    # Its calls still succeed, in the interpreter; the start-up line and the metadata say
    # why, rather than "jit" alone.
    options = ServeOptions(max_batch_size=1, jit_options={"lowerings": ["no_such_pattern"]})
    model = load_model(helpers.mlp(), "mlp", options)
    assert model.warm_path == "interpreted"
    executor = model.metadata()["shapevm"]["executor"]
    assert executor["jit_variants_ready"] == 0 and executor["jit_variants_failed"] == 1
    assert "unknown lowering(s) ['no_such_pattern']" in executor["jit_failure"]
    assert describe(model).startswith("model 'mlp': (x: float32[b, 16]) -> (float32[b, 8])")
    assert "; jit (not compiled, calls interpreted: exact (" in describe(model)
    assert "unknown lowering(s) ['no_such_pattern']" in describe(model)
    healthy = load_model(helpers.mlp(), "mlp", ServeOptions(max_batch_size=1))
    assert "jit_failure" not in healthy.metadata()["shapevm"]["executor"]
    assert "; jit; requests not joined" in describe(healthy)


def test_onnx_runtime_behind_the_same_server(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    w = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    path = _onnx_file(tmp_path, w)
    served = load_model(path, options=ServeOptions(runtime="onnxruntime", max_batch_size=4))
    meta = served.metadata()
    assert meta["platform"] == "onnxruntime_onnx"
    assert meta["inputs"] == [{"name": "input.1", "datatype": "FP32", "shape": [-1, 4]}]
    assert meta["shapevm"]["batching"]["dimension"] == "batch"
    (checked,) = meta["shapevm"]["batching"]["checked"]
    assert checked["path"] == "onnxruntime"
    x = np.ones((2, 4), np.float32)
    (y,) = served.runner.run([x])
    assert np.allclose(y, x @ w, rtol=1e-6)
