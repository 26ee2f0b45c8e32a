"""Bad and hostile models: each a clear error before anything runs, no crash, no file read
outside the model's directory."""

from __future__ import annotations

import builtins
import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.tools.tooling import require

onnx = require("onnx")

from onnx import TensorProto as T  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

import shapevm as sv  # noqa: E402
import shapevm.onnx as so  # noqa: E402
from tests.onnx_import.test_import import _model, _relu, _vi  # noqa: E402


def test_every_unsupported_part_is_listed_at_once() -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="fine"),
        helper.make_node("Frobnicate", ["a"], ["b"], name="unknown_op"),
        helper.make_node("Resize", ["b", "", "s"], ["c"], name="bad_mode", mode="bicubic"),
        helper.make_node("Custom", ["c"], ["d"], name="custom", domain="com.example"),
        helper.make_node("Cast", ["d"], ["y"], name="to_bf16", to=T.BFLOAT16),
    ]
    scales = numpy_helper.from_array(np.ones(2, np.float32), "s")
    m = _model(nodes, [_vi("x", ["n", 3])], [_vi("y", ["n", 3], T.BFLOAT16)], [scales])
    m.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(so.UnsupportedModelError) as info:
        so.load(m)
    err = info.value
    text = str(err)
    assert text.startswith("m: 4 nodes and 1 other part cannot be imported")  # 'y' is bf16
    assert [p.where.split(" (")[0] for p in err.problems[1:]] == [
        "node 'unknown_op'", "node 'bad_mode'", "node 'custom'", "node 'to_bf16'",
    ]  # fmt: skip
    assert "unsupported operator Frobnicate" in text and "opset 17" in text
    assert "attribute mode='bicubic' is not supported" in text
    assert "expected: 'nearest' or 'linear' or 'cubic'" in text
    assert "operator Custom of domain 'com.example'" in text
    assert "node 'custom' (Custom, domain com.example, opset 1)" in text  # its domain's opset
    assert "found:    BFLOAT16" in text
    assert err.needs == ()  # nothing that fixing input values would cure


def test_a_newer_opset_than_known_is_refused() -> None:
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [2])], [_vi("y", [2])], opset=99)
    with pytest.raises(so.UnsupportedModelError, match=r"it uses opset 99 of ai\.onnx") as info:
        so.load(m)
    assert str(info.value).startswith("m: 1 part cannot be imported")  # not a node


def test_a_node_with_several_problems_is_counted_once() -> None:
    conv = helper.make_node("Conv", ["x", "w"], ["y"], name="c", auto_pad="ODD")
    resize = helper.make_node("Resize", ["y", "", "s"], ["z"], name="r", mode="bicubic",
                              coordinate_transformation_mode="sideways")  # fmt: skip
    scales = numpy_helper.from_array(np.ones(4, np.float32), "s")
    m = _model([conv, resize], [_vi("x", [1, 1, 4, 4]), _vi("w", [1, 1, 1, 1])],
               [_vi("z", None)], [scales])  # fmt: skip
    with pytest.raises(so.UnsupportedModelError) as info:
        so.load(m)
    wheres = [p.where for p in info.value.problems]
    assert len(wheres) > len(set(wheres)) == 2, wheres
    assert str(info.value).startswith("m: 2 nodes cannot be imported")


def test_a_shape_mismatch_in_the_model_names_the_node() -> None:
    nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="badd")]
    w = numpy_helper.from_array(np.ones(4, np.float32), "w")
    m = _model(nodes, [_vi("x", ["n", 3])], [_vi("y", None)], [w])
    with pytest.raises(so.UnsupportedModelError) as info:
        so.load(m)
    assert "node 'badd' (Add, opset 17): add got incompatible shapes" in str(info.value)


@pytest.mark.parametrize(
    "data",
    [b"", b"not a model at all", b"\x08\x07\x12\x04junk", b"\xff" * 64],
    ids=["empty", "text", "no-graph", "garbage"],
)
def test_corrupt_bytes_are_a_file_error(data: bytes) -> None:
    with pytest.raises(so.ModelFileError, match="is not a valid ONNX model"):
        so.load(data)


def test_a_truncated_file_is_a_file_error(tmp_path: Path) -> None:
    full = _relu(["n", 4]).SerializeToString()
    for cut in (len(full) // 3, len(full) - 5):
        path = tmp_path / f"cut{cut}.onnx"
        path.write_bytes(full[:cut])
        with pytest.raises(so.ModelFileError, match=f"'{path}' is not a valid ONNX model"):
            so.load(path)
    with pytest.raises(so.ModelFileError, match="cannot read the model file"):
        so.load(tmp_path / "missing.onnx")


def _with_external(tmp_path: Path, location: str, offset: int = 0, length: int = 48) -> Path:
    w = numpy_helper.from_array(np.zeros((3, 4), np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = T.EXTERNAL
    for key, value in (("location", location), ("offset", str(offset)), ("length", str(length))):
        w.external_data.add(key=key, value=value)
    m = _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [_vi("x", ["n", 3])],
               [_vi("y", ["n", 4])], [w])  # fmt: skip
    model_dir = tmp_path / "model"
    model_dir.mkdir(exist_ok=True)
    path = model_dir / "m.onnx"
    path.write_bytes(m.SerializeToString())
    return path


@pytest.mark.parametrize("location", ["../secret.bin", "/etc/passwd", "a/../../secret.bin"])
def test_external_data_outside_the_model_directory_is_refused(
    tmp_path: Path, location: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "secret.bin").write_bytes(b"\x00" * 48)
    path = _with_external(tmp_path, location)
    opened: list[str] = []
    real_open = io.open

    def spy(file: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(io, "open", spy)
    monkeypatch.setattr(builtins, "open", spy)
    monkeypatch.setattr(np, "memmap", lambda *a, **k: opened.append(str(a[0])))
    with pytest.raises(so.ModelFileError, match="outside the model's directory"):
        so.load(path)
    assert opened == [str(path)]  # the model file, and nothing else


def test_a_symbolic_link_out_of_the_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "secret.bin").write_bytes(b"\x00" * 48)
    path = _with_external(tmp_path, "link.bin")
    (path.parent / "link.bin").symlink_to(tmp_path / "secret.bin")
    with pytest.raises(so.ModelFileError, match="through a symbolic link"):
        so.load(path)


def test_external_data_past_the_end_of_its_file_is_refused(tmp_path: Path) -> None:
    path = _with_external(tmp_path, "w.bin", offset=40)
    (path.parent / "w.bin").write_bytes(b"\x00" * 64)
    with pytest.raises(so.ModelFileError, match="external data lies outside its file"):
        so.load(path)
    path = _with_external(tmp_path, "w.bin", length=40)
    with pytest.raises(so.ModelFileError, match="has 40 bytes for dims \\[3, 4\\]"):
        so.load(path)
    with pytest.raises(so.ModelFileError, match="was not loaded from a file"):
        so.load(path.read_bytes())


def _init(dims: list[int], raw: bytes) -> Any:
    t = onnx.TensorProto(name="w", data_type=T.FLOAT, dims=dims, raw_data=raw)
    return _model([helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", [1])], [_vi("y", None)],
                  [t])  # fmt: skip


def test_absurd_dimensions_are_refused() -> None:
    with pytest.raises(so.ModelFileError, match="would take more than 16 GiB"):
        so.load(_init([2**40, 2**40], b"\x00" * 16))
    with pytest.raises(so.ModelFileError, match="negative dimension"):
        so.load(_init([-3], b"\x00" * 12))
    with pytest.raises(so.ModelFileError, match="raw_data has 16 bytes for dims \\[5\\]"):
        so.load(_init([5], b"\x00" * 16))
    neg = _relu([-2, 3])
    with pytest.raises(so.ModelFileError, match="negative dimension -2 on axis 0"):
        so.load(neg)


def test_a_huge_constant_of_shape_is_made_when_the_program_runs() -> None:
    """An absurd size is not allocated at import; running it fails with a message."""
    shape = numpy_helper.from_array(np.array([2**40], np.int64), "shape")
    m = _model([helper.make_node("ConstantOfShape", ["shape"], ["z"]),
                helper.make_node("Add", ["z", "x"], ["y"])],
               [_vi("x", [1])], [_vi("y", None)], [shape])  # fmt: skip
    exp = so.load(m)
    assert "OP_CALL full(" in exp.text()
    with pytest.raises(sv.RuntimeOpError, match="full"):
        exp.call(np.ones(1, np.float32))


def test_an_input_without_a_shape_needs_dims() -> None:
    m = _model([helper.make_node("Relu", ["x"], ["y"])],
               [helper.make_tensor_value_info("x", T.FLOAT, None)], [_vi("y", None)])  # fmt: skip
    with pytest.raises(so.UnsupportedModelError, match="the model does not give its rank"):
        so.load(m)
    assert so.load(m, dims={"x": "b, 4"}).in_avals[0].ndim == 2


def test_a_name_no_node_defines_is_an_error() -> None:
    m = _model([helper.make_node("Relu", ["nowhere"], ["y"], name="r")], [_vi("x", [1])],
               [_vi("y", [1])])  # fmt: skip
    with pytest.raises(so.UnsupportedModelError, match="input 'nowhere' is not a graph input"):
        so.load(m)
