"""`shapevm.onnx.load`: symbolic inputs, folded shape subgraphs, the Exported it returns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.tools.tooling import require

onnx = require("onnx")

from onnx import TensorProto as T  # noqa: E402
from onnx import helper  # noqa: E402

import shapevm as sv  # noqa: E402
import shapevm.onnx as so  # noqa: E402
from shapevm.runtime.scd import analyze  # noqa: E402
from tests.onnx_import import builder as B  # noqa: E402


def _model(nodes: list[Any], inputs: list[Any], outputs: list[Any], inits: Any = (),
           opset: int = 17) -> Any:  # fmt: skip
    graph = helper.make_graph(nodes, "m", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name: str, dims: Any, dtype: int = T.FLOAT) -> Any:
    return helper.make_tensor_value_info(name, dtype, dims)


def _relu(dims: Any) -> Any:
    return _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", dims)], [_vi("y", dims)])


def test_dim_params_become_dimensions_with_valid_names() -> None:
    exp = so.load(_relu(["batch size", "2d", None, 4]))
    names = [str(d) for d in exp.in_avals[0].shape]
    assert names == ["batch_size", "d_2d", "x_d2", "4"]
    assert [str(d) for d in exp.out_avals[0].shape] == names
    out = exp.call(np.full((2, 3, 5, 4), -1.0, np.float32))[0]
    assert out.shape == (2, 3, 5, 4) and not out.any()


def test_dims_override_and_constraints_are_enforced() -> None:
    exp = so.load(_relu(["N", 3, "H", "W"]), dims={"x": "b, 3, 2*h, w"}, constraints=["h >= 4"])
    assert [str(d) for d in exp.in_avals[0].shape] == ["b", "3", "2*h", "w"]
    assert exp.constraints == ("h >= 4",)
    exp.call(np.ones((1, 3, 8, 5), np.float32))
    with pytest.raises(sv.ShapeError, match="h >= 4"):
        exp.call(np.ones((1, 3, 6, 5), np.float32))
    with pytest.raises(ValueError, match=r"dims= names \['y'\], which are not graph inputs"):
        so.load(_relu(["N"]), dims={"y": "b"})


def test_a_reshape_into_halves_of_a_dimension_is_imported_assuming_it_even() -> None:
    """Reshape [b, s, 8] to [b, s / 2, 16] with the target from Shape and Div: it runs only
    for even s (ONNX Runtime fails on odd ones), so the import assumes mod(s, 2) == 0 and
    says so; an odd length gets the constraint's ShapeError."""
    from onnx import numpy_helper

    def ints(name: str, v: int) -> Any:
        return numpy_helper.from_array(np.array([v], np.int64), name)

    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["b"], axis=0),
        helper.make_node("Gather", ["shape", "one"], ["s"], axis=0),
        helper.make_node("Div", ["s", "two"], ["half"]),
        helper.make_node("Concat", ["b", "half", "sixteen"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
    ]
    inits = [ints("zero", 0), ints("one", 1), ints("two", 2), ints("sixteen", 16)]
    model = _model(nodes, [_vi("x", ["b", "s", 8])], [_vi("y", None)], inits)
    with pytest.warns(UserWarning, match=r"assuming mod\(s, 2\) == 0"):
        exp = so.load(model)
    x = np.arange(2 * 6 * 8, dtype=np.float32).reshape(2, 6, 8)
    np.testing.assert_array_equal(exp.call(x)[0], x.reshape(2, 3, 16))
    with pytest.raises(sv.ShapeError, match=r"mod\(s, 2\) == 0"):
        exp.call(np.ones((2, 7, 8), np.float32))
    assert so.load(model, constraints=["mod(s, 2) == 0"]).constraints == ("mod(s, 2) == 0",)


def test_a_transformer_block_keeps_symbolic_shapes_and_scd_1() -> None:
    w = B.weights()
    exp = so.load(B.transformer_block(w))
    assert [str(d) for d in exp.out_avals[0].shape] == ["batch", "sequence", "32"]
    assert analyze(exp.program.functions[0]).scd == 1.0
    text = exp.text()
    assert "shape=[batch, sequence, 4, 8]" in text
    assert "dim_value" not in text and "shape_of" not in text  # folded, not computed
    for shape in ((1, 1, 32), (2, 5, 32), (3, 17, 32)):
        x = np.random.default_rng(sum(shape)).normal(size=shape).astype(np.float32)
        np.testing.assert_allclose(exp.call(x)[0], B.numpy_block(x, w), rtol=1e-4, atol=1e-5)


def test_the_jit_runs_an_imported_model_as_the_interpreter_does() -> None:
    w = B.weights(1)
    exp = so.load(B.transformer_block(w))
    fast = exp.jit(background=False, hot_threshold=1)
    for shape in ((2, 7, 32), (2, 7, 32), (1, 9, 32)):
        x = np.random.default_rng(shape[1]).normal(size=shape).astype(np.float32)
        np.testing.assert_allclose(fast(x)[0], exp.call(x)[0], rtol=1e-5, atol=1e-6)
    assert fast.jit_info()


def test_a_decoder_block_with_its_causal_mask_is_one_native_call() -> None:
    """The exported block's causal mask (``Range`` over the sequence, two ``Unsqueeze``,
    ``LessOrEqual``, ``Where`` with -1e9) is the attention kernel's causal mode: nothing is
    left to the interpreter, at every sequence length."""
    w = B.weights(3)
    exp = so.load(B.transformer_block(w))
    fast = exp.jit(background=False, tier3=False)
    for shape in ((2, 7, 32), (1, 1, 32), (3, 40, 32), (2, 7, 32)):
        x = np.random.default_rng(shape[1]).normal(size=shape).astype(np.float32)
        np.testing.assert_allclose(fast(x)[0], exp.call(x)[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(fast(x)[0], B.numpy_block(x, w), rtol=1e-4, atol=1e-5)
    (engine,) = fast.engines
    function = next(r for r in engine.records() if r.variant).variant.function
    assert function.whole and not function.interpreted
    labels = [k.label for r in function.regions for k in r.lowered.kernels]
    assert "attention (causal)" in labels, labels


def test_attention_written_with_einsum_nodes_is_one_native_attention_kernel() -> None:
    """``Einsum`` nodes (as exporters write ``torch.einsum``), one with an ellipsis: the
    products they stand for, so the attention pattern takes them."""
    rng = np.random.default_rng(4)
    nodes = [
        helper.make_node("Einsum", ["q", "k"], ["s"], equation="...qd,...kd->...qk"),
        helper.make_node("Mul", ["s", "scale"], ["z"]),
        helper.make_node("Softmax", ["z"], ["p"], axis=-1),
        helper.make_node("Einsum", ["p", "v"], ["o"], equation="bhqk,bhkd->bhqd"),
    ]
    scale = helper.make_tensor("scale", T.FLOAT, [], [0.25])
    dims = ["b", 2, "s", 16]
    ins = [_vi(n, dims) for n in "qkv"]
    exp = so.load(_model(nodes, ins, [_vi("o", ["b", 2, "s", 16])], [scale]))
    assert "OP_CALL einsum(" not in exp.text()
    fast = exp.jit(background=False, hot_threshold=1, tier3=False)
    for b, n in ((1, 5), (2, 17), (3, 1)):
        q, k, v = (rng.standard_normal((b, 2, n, 16)).astype(np.float32) for _ in range(3))
        z = np.einsum("bhqd,bhkd->bhqk", q, k) * 0.25
        p = np.exp(z - z.max(-1, keepdims=True))
        want = np.einsum("bhqk,bhkd->bhqd", p / p.sum(-1, keepdims=True), v)
        np.testing.assert_allclose(fast(q, k, v)[0], want, rtol=1e-4, atol=1e-5)
    (engine,) = fast.engines
    function = next(r for r in engine.records() if r.variant).variant.function
    labels = [k.label for r in function.regions for k in r.lowered.kernels]
    assert function.whole and not function.interpreted and labels == ["attention"], labels


@pytest.mark.parametrize(("exclusive", "reverse"), [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumsum_exclusive_or_reversed_runs_native_as_imported(exclusive: int, reverse: int) -> None:
    """ONNX's ``CumSum`` with its ``exclusive`` and ``reverse`` attributes, on int64 ids and
    on float32 values: the executor's scan kernel, equal to the interpreter's result."""
    axis = helper.make_tensor("axis", T.INT64, [], [1])
    nodes = [
        helper.make_node("CumSum", [x, "axis"], [f"{x}_sum"], exclusive=exclusive, reverse=reverse)
        for x in ("ids", "v")
    ]
    ins = [_vi("ids", ["b", "s"], T.INT64), _vi("v", ["b", "s"])]
    outs = [_vi("ids_sum", ["b", "s"], T.INT64), _vi("v_sum", ["b", "s"])]
    exp = so.load(_model(nodes, ins, outs, [axis]))
    fast = exp.jit(background=False, hot_threshold=1, tier3=False)
    rng = np.random.default_rng(exclusive * 2 + reverse)
    for b, s in ((2, 5), (1, 1), (3, 70)):
        ids = rng.integers(0, 9, (b, s)).astype(np.int64)
        v = rng.standard_normal((b, s)).astype(np.float32)
        for got, want in zip(fast(ids, v), exp.call(ids, v), strict=True):
            np.testing.assert_array_equal(got, want)
    (engine,) = fast.engines
    function = next(r for r in engine.records() if r.variant).variant.function
    labels = [k.label for r in function.regions for k in r.lowered.kernels]
    assert function.whole and labels == ["cumsum", "cumsum"], labels


def test_a_batch_norm_after_a_convolution_folds_into_it() -> None:
    """An exported CNN's BatchNormalization (eval mode) becomes a per-channel scale and
    shift, which the convolution takes into its weights and bias: one kernel with the
    relu, and the interpreter's result."""
    rng = np.random.default_rng(5)
    arrays = {"W": rng.normal(size=(8, 3, 3, 3)), "v": 0.5 + rng.random(8)}
    arrays |= {name: rng.normal(size=8) for name in ("s", "b", "m")}
    inits = [
        helper.make_tensor(k, T.FLOAT, a.shape, a.astype(np.float32).ravel())
        for k, a in arrays.items()
    ]
    nodes = [
        helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"]),
        helper.make_node("Relu", ["n"], ["y"]),
    ]
    exp = so.load(_model(nodes, [_vi("x", ["n", 3, "h", "w"])], [_vi("y", None)], inits))
    fast = exp.jit(background=False)
    for shape in ((1, 3, 8, 8), (2, 3, 13, 21)):
        x = rng.normal(size=shape).astype(np.float32)
        np.testing.assert_allclose(fast(x), exp.call(x), rtol=1e-5, atol=1e-5)
    (engine,) = fast.engines
    function = next(iter(engine._records.values())).variant.function
    assert [k.label for r in function.regions for k in r.lowered.kernels] == ["conv+bias+relu"]


def test_serialized_import_runs_the_same_and_names_the_nodes(tmp_path: Path) -> None:
    exp = so.load(B.transformer_block(B.weights(2)))
    exp.save(tmp_path / "block.svbc")
    back = sv.load(tmp_path / "block.svbc")
    x = np.ones((2, 3, 32), np.float32)
    np.testing.assert_array_equal(back.call(x)[0], exp.call(x)[0])
    assert "loc(\"node 'reshape_" in back.text()


def test_path_bytes_and_modelproto_give_the_same_program(tmp_path: Path) -> None:
    model = _relu(["n", 2])
    onnx.save(model, tmp_path / "relu.onnx")
    texts = {so.load(m).text() for m in (model, model.SerializeToString(), tmp_path / "relu.onnx")}
    assert len(texts) == 1
    assert so.load(model, name="my model").fun_name == "my_model"


def test_a_constraint_on_a_dimension_no_input_has_is_refused_at_import() -> None:
    """A misspelt name would make every call fail (no value for it): refused at load."""
    with pytest.raises(ValueError, match=r"constraint 'nn >= 2' names \['nn'\]") as info:
        so.load(_relu(["n", 2]), constraints=["n <= 64", "nn >= 2"])
    assert "expected: constraints on the inputs' dimensions ['n']" in str(info.value)
    exp = so.load(_relu(["n", 2]), dims={"x": "b, _"}, constraints=["b >= 2"])
    assert exp.call(np.ones((3, 2), np.float32))[0].shape == (3, 2)


def test_importing_shapevm_and_shapevm_onnx_does_not_import_onnx() -> None:
    """onnx is an optional extra: only `load` (and the backend) import it."""
    import subprocess
    import sys

    code = (
        "import sys, shapevm, shapevm.onnx\n"
        "assert 'onnx' not in sys.modules, sorted(m for m in sys.modules if 'onnx' in m)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_float16_is_computed_in_float32_and_stored_as_float16() -> None:
    nodes = [helper.make_node("Exp", ["x"], ["e"]), helper.make_node("Add", ["e", "x"], ["y"])]
    m = _model(nodes, [_vi("x", ["n"], T.FLOAT16)], [_vi("y", ["n"], T.FLOAT16)])
    exp = so.load(m)
    x = np.array([0.1, 1.5, -2.0], np.float16)
    y = exp.call(x)[0]
    want = (np.exp(x.astype(np.float32)).astype(np.float16).astype(np.float32)
            + x.astype(np.float32)).astype(np.float16)  # fmt: skip
    assert y.dtype == np.float16 and np.array_equal(y, want)
    assert "exp(" in exp.text() and "cast(" in exp.text()


def _if_model(cond_op: str, value: int) -> Any:
    """``y = If(cond_op(x.shape[0], value)) then x * 2 else x + 1``."""
    g = B.Graph()
    n0 = g.op("Gather", g.op("Shape", "x"), g.const(np.array(0, np.int64)), axis=0)
    cond = g.op(cond_op, n0, g.const(np.array(value, np.int64)))
    two, one = g.const(np.float32(2.0)), g.const(np.float32(1.0))
    then = helper.make_graph(
        [helper.make_node("Mul", ["x", two], ["t"])], "then", [], [_vi("t", None)]
    )
    other = helper.make_graph(
        [helper.make_node("Add", ["x", one], ["e"])], "else", [], [_vi("e", None)]
    )
    g.nodes.append(helper.make_node("If", [cond], ["y"], then_branch=then, else_branch=other))
    return g.model([_vi("x", ["n", 3])], [_vi("y", ["n", 3])])


def test_if_on_sizes_is_decided_at_import_or_branches_when_it_runs() -> None:
    decided = so.load(_if_model("Greater", 0))  # n >= 1 > 0 always
    assert "BRANCH_IF" not in decided.text()
    x = np.ones((4, 3), np.float32)
    assert decided.call(x)[0].tolist() == (x * 2).tolist()
    undecided = so.load(_if_model("Equal", 1))  # n == 1 only for some n
    assert "BRANCH_IF" in undecided.text()
    assert undecided.call(np.ones((1, 3), np.float32))[0].tolist() == [[2.0] * 3]
    assert undecided.call(np.ones((2, 3), np.float32))[0].tolist() == [[2.0] * 3] * 2


def test_sizes_from_input_values_need_constants() -> None:
    m = _model(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])],
        [_vi("x", ["n", 6]), _vi("shape", [2], T.INT64)],
        [_vi("y", None)],
    )
    with pytest.raises(so.UnsupportedModelError) as info:
        so.load(m)
    assert info.value.needs == ("shape",)
    assert "constants={'shape': ...}" in str(info.value)
    exp = so.load(m, constants={"shape": np.array([-1, 3])})
    assert [str(d) for d in exp.out_avals[0].shape] == ["2*n", "3"]
    assert exp.call(np.ones((2, 6), np.float32))[0].shape == (4, 3)


def test_data_dependent_sizes_stay_dynamic() -> None:
    m = _model([helper.make_node("NonZero", ["x"], ["y"])], [_vi("x", ["n"])], [_vi("y", None)])
    exp = so.load(m)
    assert [str(d) for d in exp.out_avals[0].shape] == ["1", "dynamic"]
    assert exp.call(np.array([0.0, 2.0, 0.0, 3.0], np.float32))[0].tolist() == [[1, 3]]


def test_a_computed_k_and_a_mask_from_data_give_dynamic_sizes() -> None:
    zero = helper.make_tensor("zero", T.FLOAT, [], [0.0])
    nodes = [
        helper.make_node("Greater", ["x", "zero"], ["m"]),
        helper.make_node("Cast", ["m"], ["mi"], to=T.INT64),
        helper.make_node("ReduceSum", ["mi"], ["k"], keepdims=1),
        helper.make_node("TopK", ["x", "k"], ["v", "i"]),
        helper.make_node("Compress", ["x", "m"], ["kept"], axis=0),
    ]
    outs = [_vi("v", None), _vi("i", None, T.INT64), _vi("kept", None)]
    exp = so.load(_model(nodes, [_vi("x", ["n"])], outs, [zero]))
    assert [str(a.shape) for a in exp.out_avals] == ["(dynamic,)"] * 3
    v, i, kept = exp.call(np.array([3.0, -1.0, 5.0, 2.0], np.float32))
    assert v.tolist() == [5.0, 3.0, 2.0] and i.tolist() == [2, 0, 3]
    assert kept.tolist() == [3.0, 5.0, 2.0]
    fixed = _model([helper.make_node("Compress", ["x", "c"], ["y"], axis=1)], [_vi("x", ["n", 3])],
                   [_vi("y", None)], [helper.make_tensor("c", T.BOOL, [3], [1, 0, 1])])  # fmt: skip
    assert [str(d) for d in so.load(fixed).out_avals[0].shape] == ["n", "2"]


def test_external_data_is_memory_mapped_not_copied(tmp_path: Path) -> None:
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    init = onnx.numpy_helper.from_array(w, "w")
    m = _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [_vi("x", ["n", 3])],
               [_vi("y", ["n", 4])], [init])  # fmt: skip
    onnx.save(m, tmp_path / "m.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
              location="m.data", size_threshold=0)  # fmt: skip
    exp = so.load(tmp_path / "m.onnx")
    (const,) = exp.program.constants
    assert isinstance(const.array, np.memmap) or isinstance(const.array.base, np.memmap)
    np.testing.assert_array_equal(exp.call(np.eye(3, dtype=np.float32))[0], w)


def test_functions_of_the_model_are_inlined() -> None:
    fn = helper.make_function("custom", "double", ["a"], ["b"],
                              [helper.make_node("Add", ["a", "a"], ["b"])],
                              [helper.make_opsetid("", 17)])  # fmt: skip
    graph = helper.make_graph([helper.make_node("double", ["x"], ["y"], domain="custom")], "g",
                              [_vi("x", ["n"])], [_vi("y", ["n"])])  # fmt: skip
    m = helper.make_model(graph, functions=[fn], opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("custom", 1)])  # fmt: skip
    assert so.load(m).call(np.array([1.0, 2.0], np.float32))[0].tolist() == [2.0, 4.0]


def test_operators_defined_as_onnx_functions_come_in_through_their_body() -> None:
    node = helper.make_node("MeanVarianceNormalization", ["x"], ["y"], axes=[0, 1])
    m = _model([node], [_vi("x", ["n", 4])], [_vi("y", ["n", 4])], opset=18)
    x = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    want = (x - x.mean()) / x.std()
    np.testing.assert_allclose(so.load(m).call(x)[0], want, rtol=1e-4, atol=1e-5)


def _kitchen_sink() -> Any:
    """One model through most rows the op table gained for ONNX."""
    g = B.Graph()
    up = g.op("Resize", "x", "", g.const(np.array([1, 1, 1.5, 2], np.float32)), mode="cubic",
              antialias=1)  # fmt: skip
    pooled, where = g.op("MaxPool", up, kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1,
                         dilations=[1, 2], outputs=2)  # fmt: skip
    w = g.const(np.random.default_rng(0).normal(size=(2, 3, 2, 2)).astype(np.float32))
    deconv = g.op("ConvTranspose", pooled, w, strides=[2, 1], pads=[0, 1, 1, 0])
    flat = g.op("Flatten", deconv, axis=1)
    scan = g.op("CumSum", flat, g.const(np.array(1, np.int64)), reverse=1)
    back = g.op("Slice", scan, g.ints(-1), g.ints(-(2**63)), g.ints(1), g.ints(-2))
    idx = g.const(np.array([[0], [0]], np.int64))
    upd = g.op("Softplus", g.op("GatherND", back, idx))
    scattered = g.op("ScatterND", back, idx, upd, reduction="add")
    values, _ = g.op("TopK", scattered, g.ints(3), axis=-1, largest=0, outputs=2)
    y = g.op("Add", g.op("Round", values), g.op("Cast", g.op("IsNaN", values), to=1))
    g.nodes.append(helper.make_node("Identity", [y], ["y"]))
    g.nodes.append(helper.make_node("Identity", [where], ["where"]))
    return g.model([_vi("x", ["n", 2, "h", 4])], [_vi("y", None), _vi("where", None, T.INT64)])


def test_new_ops_round_trip_through_text_and_binary_and_run_in_the_jit() -> None:
    from shapevm import bytecode as bc

    exp = so.load(_kitchen_sink(), constraints=["h >= 2"])  # h = 1 leaves no 2x2 window
    program = exp.program
    assert bc.parse_program(bc.format_program(program)) == program
    assert bc.deserialize(bc.serialize(program)) == program
    fast = exp.jit(background=False, hot_threshold=1)
    for n, h in ((1, 3), (2, 5), (2, 5)):
        x = np.random.default_rng(n * h).normal(size=(n, 2, h, 4)).astype(np.float32)
        for got, want in zip(fast(x), exp.call(x), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5)
