"""Op scheduler: variants agree with the reference, choices follow shapes, the capability db
dumps and patches, and a missing kernel is an error that says what to do."""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shapevm.ops import DType, all_ops, get_op
from shapevm.runtime import (
    KernelVariant,
    UnsupportedKernelError,
    choose_kernel,
    dump_capability_db,
    kernel_dtype,
    load_capability_patch,
    register_variant,
    reset_capability_db,
    scheduler,
)

F16, F32, F64, I32, BOOL = DType.F16, DType.F32, DType.F64, DType.I32, DType.BOOL


@pytest.fixture(autouse=True)
def fresh_scheduler(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts from the registered variants and leaves no patch or variant behind."""
    dump_capability_db(io.StringIO())  # registers the reference variants first
    for name in ("_variants", "_defaults", "_db"):
        monkeypatch.setattr(scheduler, name, copy.deepcopy(getattr(scheduler, name)))
    reset_capability_db()
    yield


def conv_attrs(stride: Any = (1, 1), padding: Any = (0, 0, 0, 0), dilation: Any = (1, 1),
               groups: int = 1) -> dict[str, Any]:  # fmt: skip
    return {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}


# The capability db ------------------------------------------------------------------------


def test_every_op_has_its_reference_kernel() -> None:
    db = dump_capability_db(io.StringIO())
    for info in all_ops():
        assert "reference" in db["cpu"][info.name], info.name
        assert scheduler._variants[info.name]["reference"].fn is info.kernel
    assert db["cpu"]["logical_not"] == {"reference": ["bool"], "native_chain": ["bool"]}
    assert db["cpu"]["conv2d"]["reference"] == ["f16", "f32", "f64"]
    assert set(db["cpu"]["conv2d"]) == {
        "reference", "im2col_gemm", "pointwise_1x1", "depthwise", "direct", "native_conv",
    }  # fmt: skip
    assert set(db["cpu"]["matmul"]) == {"reference", "native_dense", "native_matmul"}
    assert "bool" not in db["cpu"]["neg"]["reference"]
    assert db["cpu"]["where"]["reference"] == [d.value for d in DType]
    assert "bool" not in db["cpu"]["iota"]["reference"]


def test_dump_is_readable_and_json() -> None:
    out = io.StringIO()
    table = dump_capability_db(out)
    assert json.loads(json.dumps(table)) == table
    lines = out.getvalue().splitlines()
    assert lines[:2] == ["capability db: device / op / variant: dtypes", "cpu:"]
    conv = next(line for line in lines if "conv2d" in line)
    index = lines.index(conv)
    assert conv.split() == ["conv2d", "depthwise", "f16,", "f32,", "f64"]
    assert lines[index + 1].split()[0] == "direct"  # the op name is not repeated
    assert "  add " in "\n".join(lines) and "all dtypes" in out.getvalue()


def test_patch_removes_and_restricts_and_reset_restores(tmp_path: Path) -> None:
    path = tmp_path / "patch.json"
    path.write_text(json.dumps({"cpu": {"conv2d": {"pointwise_1x1": None, "direct": ["f64"]}}}))
    shapes = [(2, 8, 5, 5), (4, 8, 1, 1)]
    assert choose_kernel("conv2d", F32, shapes, conv_attrs()).name == "pointwise_1x1"
    table = load_capability_patch(path)
    assert "pointwise_1x1" not in table["cpu"]["conv2d"]
    assert table["cpu"]["conv2d"]["direct"] == ["f64"]
    assert choose_kernel("conv2d", F32, shapes, conv_attrs()).name == "im2col_gemm"
    assert choose_kernel("conv2d", F64, shapes, conv_attrs()).name == "direct"
    reset_capability_db()
    assert choose_kernel("conv2d", F32, shapes, conv_attrs()).name == "pointwise_1x1"


def test_patch_can_remove_every_variant_of_an_op() -> None:
    load_capability_patch({"cpu": {"sin": None}})
    with pytest.raises(UnsupportedKernelError) as info:
        choose_kernel("sin", F32, [(3,)], {})
    assert str(info.value) == (
        "no variant of sin on cpu: the capability db lists none\n"
        "  expected: at least the variant 'reference'\n"
        "  found:    f32; variants of sin on cpu: none\n"
        '  fix:      reset_capability_db(), or a patch that lists dtypes for a variant: {"cpu": '
        '{"sin": {"reference": ["f32"]}}}'
    )
    load_capability_patch({"cpu": {"sin": {"reference": ["f32"]}}})
    assert choose_kernel("sin", F32, [(3,)], {}).name == "reference"


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"gpu": {}}, "capability patch: unknown device 'gpu'; known devices: cpu"),
        ({"cpu": {"conv3d": None}}, "capability patch: cpu.conv3d: unknown op 'conv3d' "
         "(did you mean 'conv2d'?)"),
        ({"cpu": {"conv2d": {"winograd": None}}}, "capability patch: cpu.conv2d: unknown variant "
         "'winograd'; variants on cpu: depthwise, direct, im2col_gemm, native_conv, "
         "pointwise_1x1, reference"),
        ({"cpu": {"conv2d": {"direct": ["f8"]}}}, "capability patch: cpu.conv2d.direct: unknown "
         "dtype 'f8'; known dtypes: bool, i8, i16, i32, i64, u8, u16, u32, u64, f16, f32, f64"),
        ({"cpu": {"conv2d": {"direct": ["f32", "i32"]}}}, "capability patch: cpu.conv2d.direct: "
         "the variant does not implement i32; it has f16, f32, f64"),
        ({"cpu": {"conv2d": {"direct": "f32"}}}, "capability patch: cpu.conv2d.direct: expected "
         "a list of dtype names or null"),
        ({"cpu": {"conv2d": ["direct"]}}, "capability patch: cpu.conv2d: expected an object of "
         "variants or null, found ['direct']"),
        ({"cpu": None}, "capability patch: cpu: expected an object of ops, found None"),
    ],
)  # fmt: skip
def test_bad_patches_name_what_is_wrong(patch: dict[str, Any], message: str) -> None:
    before = dump_capability_db(io.StringIO())
    with pytest.raises(ValueError) as info:
        load_capability_patch({"cpu": {"sin": None}, **patch})
    assert str(info.value) == message
    assert dump_capability_db(io.StringIO()) == before  # all or nothing


def test_patch_files_that_are_not_patches(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{cpu: ")
    with pytest.raises(ValueError, match=r"bad\.json: not JSON: "):
        load_capability_patch(bad)
    bad.write_text("[1]")
    with pytest.raises(ValueError, match=r"bad\.json: a patch is a JSON object of devices"):
        load_capability_patch(str(bad))


# Choosing ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "w", "attrs", "expected"),
    [
        ((8, 64, 56, 56), (32, 64, 1, 1), conv_attrs(), "pointwise_1x1"),
        ((8, 64, 56, 56), (32, 64, 1, 1), conv_attrs(padding=(1, 1, 1, 1)), "im2col_gemm"),
        ((8, 64, 56, 56), (32, 64, 1, 1), conv_attrs(stride=(2, 2)), "im2col_gemm"),
        ((8, 64, 56, 56), (64, 64, 3, 3), conv_attrs(padding=(1, 1, 1, 1)), "im2col_gemm"),
        ((8, 3, 224, 224), (64, 3, 7, 7), conv_attrs(stride=(2, 2)), "im2col_gemm"),
        ((8, 128, 56, 56), (128, 1, 3, 3), conv_attrs(groups=128), "depthwise"),
        ((1, 32, 112, 112), (32, 1, 3, 3), conv_attrs(padding=(1, 1, 1, 1), groups=32),
         "depthwise"),
        ((8, 64, 32, 32), (128, 1, 5, 5), conv_attrs(stride=(2, 2), groups=64), "im2col_gemm"),
        ((8, 64, 28, 28), (64, 16, 3, 3), conv_attrs(groups=4), "im2col_gemm"),
        ((1, 64, 2048, 2048), (64, 64, 3, 3), conv_attrs(), "direct"),
    ],
)  # fmt: skip
def test_conv2d_choice_follows_the_shapes(
    x: tuple[int, ...], w: tuple[int, ...], attrs: dict[str, Any], expected: str
) -> None:
    assert choose_kernel("conv2d", F32, [x, w], attrs).name == expected
    assert choose_kernel("conv2d", "f16", [x, w, (w[0],)], attrs).name == expected


def test_an_op_without_variants_runs_its_reference() -> None:
    variant = choose_kernel("add", I32, [(3,), ()], {})
    assert variant.name == "reference" and variant.fn is get_op("add").kernel  # type: ignore[union-attr]


def test_unsupported_dtype_says_what_to_cast_to() -> None:
    with pytest.raises(UnsupportedKernelError) as info:
        choose_kernel("conv2d", I32, [(1, 3, 8, 8), (4, 3, 3, 3)], conv_attrs())
    err = info.value
    assert isinstance(err, LookupError)
    assert (err.op, err.dtype, err.device) == ("conv2d", "i32", "cpu")
    assert err.available["im2col_gemm"] == ["f16", "f32", "f64"]
    assert str(err).splitlines() == [
        "no variant of conv2d on cpu takes i32",
        "  expected: one of f16, f32, f64",
        "  found:    i32; variants of conv2d on cpu: depthwise [f16, f32, f64]; direct [f16, "
        "f32, f64]; im2col_gemm [f16, f32, f64]; native_conv [f32]; pointwise_1x1 [f16, f32, "
        "f64]; reference [f16, f32, f64]",
        "  fix:      cast the operands to f32 (op cast)",
    ]


def test_dtype_switched_off_by_a_patch_names_the_patch_that_restores_it() -> None:
    load_capability_patch({"cpu": {"add": {"reference": ["f32"]}}})
    with pytest.raises(UnsupportedKernelError) as info:
        choose_kernel("add", "i32", [(3,), (3,)], {})
    assert str(info.value).splitlines()[-1] == (
        "  fix:      cast the operands to f32 (op cast), or enable it: load_capability_patch "
        'with {"cpu": {"add": {"reference": ["i32", "f32"]}}}'
    )


def test_no_variant_for_the_shapes() -> None:
    load_capability_patch({"cpu": {"conv2d": {"reference": None, "im2col_gemm": None,
                                              "direct": None}}})  # fmt: skip
    with pytest.raises(UnsupportedKernelError) as info:
        choose_kernel("conv2d", F32, [(1, 3, 8, 8), (4, 3, 3, 3)], conv_attrs())
    assert str(info.value).splitlines()[:2] == [
        "no variant of conv2d on cpu applies to these shapes",
        "  expected: a variant for [1, 3, 8, 8], [4, 3, 3, 3]",
    ]


def test_unknown_device_and_op() -> None:
    with pytest.raises(UnsupportedKernelError) as info:
        choose_kernel("add", F32, [(3,), (3,)], {}, device="cuda:0")
    assert str(info.value).splitlines()[:3] == [
        "no kernels for device 'cuda:0'",
        "  expected: one of the devices cpu",
        "  found:    cuda:0",
    ]
    with pytest.raises(UnsupportedKernelError, match="did you mean 'conv2d'"):
        choose_kernel("conv2", F32, [], {})


def test_registered_variants_compete_on_cost() -> None:
    def twice(args: Any, attrs: Any) -> tuple[Any, ...]:
        return (np.add(*args),)

    def small(shapes: Any, attrs: Any) -> bool:
        return bool(max((len(s) for s in shapes), default=0) <= 1)

    fast = register_variant(KernelVariant("add", "vector", twice, frozenset({F32}), small, 1.0))
    assert choose_kernel("add", F32, [(3,), (3,)], {}) is fast
    assert choose_kernel("add", F32, [(3, 3), (3,)], {}).name == "reference"
    assert choose_kernel("add", F64, [(3,), (3,)], {}).name == "reference"
    assert dump_capability_db(io.StringIO())["cpu"]["add"]["vector"] == ["f32"]
    load_capability_patch({"cpu": {"add": {"vector": None}}})
    assert choose_kernel("add", F32, [(3,), (3,)], {}).name == "reference"
    reset_capability_db()
    assert choose_kernel("add", F32, [(3,), (3,)], {}) is fast
    with pytest.raises(ValueError, match="variant 'vector' of add is already registered"):
        register_variant(fast)
    with pytest.raises(ValueError, match="'reference' is the op table's kernel"):
        register_variant(KernelVariant("add", "reference", twice, frozenset({F32})))
    with pytest.raises(ValueError, match="no such op \\(did you mean 'add'\\?\\)"):
        register_variant(KernelVariant("addd", "x", twice, frozenset({F32})))


def test_kernel_dtype() -> None:
    assert kernel_dtype([BOOL, F32, None]) is F32  # where: its values, not its condition
    assert kernel_dtype([DType.I64, BOOL]) is DType.I64  # mask_select
    assert kernel_dtype([BOOL, BOOL]) is BOOL
    assert kernel_dtype([None, I32]) is I32
    assert kernel_dtype([], [F16]) is F16  # full, iota
    with pytest.raises(ValueError, match="needs a typed operand"):
        kernel_dtype([None])


# Every variant against the reference ---------------------------------------------------------


@st.composite
def conv_calls(draw: st.DrawFn) -> tuple[list[tuple[int, ...]], dict[str, Any]]:
    """Convolutions of three kinds, so that each variant's ``applies`` is exercised."""
    kind = draw(st.sampled_from(["general", "pointwise", "depthwise"]))
    groups = 1 if kind == "pointwise" else draw(st.integers(1, 3))
    cg = 1 if kind == "depthwise" else draw(st.integers(1, 4))
    og = draw(st.integers(1, 3))
    kh, kw = (1, 1) if kind == "pointwise" else (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    one = kind == "pointwise"
    stride = (1, 1) if one else (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = (0, 0, 0, 0) if one else tuple(draw(st.integers(0, 2)) for _ in range(4))
    span = (dilation[0] * (kh - 1) + 1, dilation[1] * (kw - 1) + 1)
    h = draw(st.integers(max(1, span[0] - padding[0] - padding[1]), 10))
    w = draw(st.integers(max(1, span[1] - padding[2] - padding[3]), 10))
    shapes = [(draw(st.integers(1, 3)), cg * groups, h, w), (og * groups, cg, kh, kw)]
    if draw(st.booleans()):
        shapes.append((og * groups,))
    return shapes, conv_attrs(stride, padding, dilation, groups)


def _variants(op: str) -> list[KernelVariant]:
    return [v for name, v in scheduler._variants[op].items() if name != "reference"]


@settings(max_examples=120)
@given(conv_calls(), st.sampled_from([F64, F32, F16]))
def test_every_conv2d_variant_matches_the_reference(
    call: tuple[list[tuple[int, ...]], dict[str, Any]], dtype: DType
) -> None:
    shapes, attrs = call
    rng = np.random.default_rng(len(shapes) + sum(map(sum, shapes)))
    args = [rng.normal(size=s).astype(dtype.numpy.newbyteorder("=")) for s in shapes]
    (want,) = get_op("conv2d").kernel(args, attrs)  # type: ignore[union-attr]
    tol = {F64: 1e-12, F32: 1e-5, F16: 1e-2}[dtype]
    ran = 0
    for variant in _variants("conv2d"):
        if not variant.applies(tuple(shapes), attrs):
            continue
        (got,) = variant.fn(args, attrs)
        assert got.dtype == want.dtype and got.shape == want.shape, variant.name
        scale = float(np.abs(want).max(initial=1.0))
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale, err_msg=variant.name)
        ran += 1
    assert ran >= 2  # im2col_gemm and direct apply to everything
    chosen = choose_kernel("conv2d", dtype, shapes, attrs)
    assert chosen.applies(tuple(shapes), attrs)


def test_every_variant_kind_is_reached() -> None:
    shapes = {
        "pointwise_1x1": [(2, 6, 4, 5), (3, 6, 1, 1)],
        "depthwise": [(2, 6, 7, 5), (12, 1, 3, 3)],
    }
    for name, s in shapes.items():
        variant = scheduler._variants["conv2d"][name]
        assert variant.applies(tuple(s), conv_attrs(groups=6 if name == "depthwise" else 1))
    assert not scheduler._variants["conv2d"]["depthwise"].applies(
        ((2, 6, 7, 5), (12, 2, 3, 3)), conv_attrs(groups=3)
    )


def test_im2col_gemm_bounds_its_workspace(monkeypatch: pytest.MonkeyPatch) -> None:
    from shapevm.runtime import kernels_cpu

    monkeypatch.setattr(kernels_cpu, "WORKSPACE_ELEMENTS", 64)  # one image per chunk
    rng = np.random.default_rng(7)
    args = [rng.normal(size=(5, 4, 6, 6)), rng.normal(size=(3, 4, 3, 3))]
    attrs = conv_attrs(padding=(1, 1, 1, 1))
    (got,) = kernels_cpu.conv2d_im2col_gemm(args, attrs)
    (want,) = get_op("conv2d").kernel(args, attrs)  # type: ignore[union-attr]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_depthwise_blocks_match_one_block(monkeypatch: pytest.MonkeyPatch) -> None:
    from shapevm.runtime import kernels_cpu

    rng = np.random.default_rng(8)
    args = [rng.normal(size=(2, 5, 9, 9)), rng.normal(size=(10, 1, 3, 3)), rng.normal(size=10)]
    attrs = conv_attrs(padding=(1, 1, 1, 1), groups=5)
    (whole,) = kernels_cpu.conv2d_depthwise(args, attrs)
    monkeypatch.setattr(kernels_cpu, "DEPTHWISE_BLOCK", 100)  # one channel per block
    (blocked,) = kernels_cpu.conv2d_depthwise(args, attrs)
    np.testing.assert_allclose(blocked, whole, rtol=1e-12)
