"""conv2d, pooling and einsum kernels against plain-loop oracles, and against PyTorch when present.

The oracles are written for clarity, not speed: a loop over kernel taps for conv2d, a loop
over output pixels for pooling, so they share no code with the kernels they check.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shapevm.ops import ShapeRuleError, get_op


def conv_oracle(
    x: Any, w: Any, bias: Any, stride: Any, padding: Any, dilation: Any, groups: int
) -> Any:
    n, _, h, wd = x.shape
    o, cg, kh, kw = w.shape
    (sh, sw), (dh, dw), (pt, pb, pl, pr) = stride, dilation, padding
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, o, oh, ow))
    for oc in range(o):
        g = oc // (o // groups)
        for ic in range(cg):
            for i in range(kh):
                for j in range(kw):
                    rows = slice(i * dh, i * dh + sh * (oh - 1) + 1, sh)
                    cols = slice(j * dw, j * dw + sw * (ow - 1) + 1, sw)
                    out[:, oc] += w[oc, ic, i, j] * xp[:, g * cg + ic, rows, cols]
    if bias is not None:
        out += bias[None, :, None, None]
    return out


def pool_oracle(x: Any, kernel: Any, stride: Any, padding: Any, kind: str, include: bool) -> Any:
    (kh, kw), (sh, sw), (pt, pb, pl, pr) = kernel, stride, padding
    h, w = x.shape[-2:]
    oh, ow = (h + pt + pb - kh) // sh + 1, (w + pl + pr - kw) // sw + 1
    out = np.zeros((*x.shape[:-2], oh, ow))
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * sh - pt, j * sw - pl
            win = x[..., max(r0, 0) : min(r0 + kh, h), max(c0, 0) : min(c0 + kw, w)]
            win = win.astype(np.float64)
            if kind == "max":
                out[..., i, j] = win.max(axis=(-2, -1))
            else:
                count = kh * kw if include else win.shape[-2] * win.shape[-1]
                out[..., i, j] = win.sum(axis=(-2, -1)) / count
    return out


@st.composite
def conv_cases(draw: st.DrawFn) -> dict[str, Any]:
    groups = draw(st.integers(1, 3))
    cg, og = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = tuple(draw(st.integers(0, 2)) for _ in range(4))
    span_h, span_w = dilation[0] * (kh - 1) + 1, dilation[1] * (kw - 1) + 1
    h = draw(st.integers(max(1, span_h - padding[0] - padding[1]), 9))
    w = draw(st.integers(max(1, span_w - padding[2] - padding[3]), 9))
    return {
        "x": (draw(st.integers(1, 2)), cg * groups, h, w),
        "w": (og * groups, cg, kh, kw),
        "bias": draw(st.booleans()),
        "attrs": {
            "stride": (draw(st.integers(1, 3)), draw(st.integers(1, 3))),
            "padding": padding,
            "dilation": dilation,
            "groups": groups,
        },
    }


def _conv_args(case: dict[str, Any], dtype: Any, seed: int = 0) -> list[Any]:
    rng = np.random.default_rng(seed)
    args = [rng.normal(size=case["x"]).astype(dtype), rng.normal(size=case["w"]).astype(dtype)]
    if case["bias"]:
        args.append(rng.normal(size=case["w"][0]).astype(dtype))
    return args


@settings(max_examples=60)
@given(conv_cases())
def test_conv2d_matches_the_tap_loop(case: dict[str, Any]) -> None:
    info = get_op("conv2d")
    assert info is not None
    args = _conv_args(case, np.float64)
    (out,) = info.kernel(args, case["attrs"])
    bias = args[2] if case["bias"] else None
    a = case["attrs"]
    want = conv_oracle(*args[:2], bias, a["stride"], a["padding"], a["dilation"], a["groups"])
    np.testing.assert_allclose(out, want, rtol=1e-10, atol=1e-10)
    assert out.flags.c_contiguous and out.dtype == np.float64
    assert info.shape_rule([a.shape for a in args], case["attrs"]).shapes == (out.shape,)


def test_conv2d_f16_is_computed_in_f32() -> None:
    case = {"x": (1, 8, 6, 6), "w": (4, 8, 3, 3), "bias": True}
    args = _conv_args(case, np.float16)
    attrs = {"stride": (1, 1), "padding": (1, 1, 1, 1), "dilation": (1, 1), "groups": 1}
    (out,) = get_op("conv2d").kernel(args, attrs)  # type: ignore[union-attr]
    want = conv_oracle(*args[:2], args[2], (1, 1), (1, 1, 1, 1), (1, 1), 1)
    assert out.dtype == np.float16
    np.testing.assert_allclose(out, want, rtol=2e-3, atol=2e-2)


@st.composite
def pool_cases(draw: st.DrawFn) -> dict[str, Any]:
    kernel = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    padding = tuple(draw(st.integers(0, kernel[i // 2] // 2)) for i in range(4))
    h = draw(st.integers(max(1, kernel[0] - padding[0] - padding[1]), 8))
    w = draw(st.integers(max(1, kernel[1] - padding[2] - padding[3]), 8))
    lead = draw(st.sampled_from([(2,), (1, 3)]))
    return {"shape": (*lead, h, w), "kernel": kernel, "stride": stride, "padding": padding}


@settings(max_examples=60)
@given(pool_cases(), st.booleans(), st.booleans())
def test_pooling_matches_the_window_loop(case: dict[str, Any], include: bool, dflt: bool) -> None:
    x = np.random.default_rng(1).normal(size=case["shape"])
    stride = None if dflt else case["stride"]
    attrs = {"kernel": case["kernel"], "stride": stride, "padding": case["padding"]}
    (mx,) = get_op("max_pool2d").kernel([x], attrs)  # type: ignore[union-attr]
    avg_attrs = {**attrs, "count_include_pad": include}
    (avg,) = get_op("avg_pool2d").kernel([x], avg_attrs)  # type: ignore[union-attr]
    s = stride or case["kernel"]
    np.testing.assert_allclose(mx, pool_oracle(x, case["kernel"], s, case["padding"], "max", True))
    want = pool_oracle(x, case["kernel"], s, case["padding"], "avg", include)
    np.testing.assert_allclose(avg, want, rtol=1e-12)
    rule = get_op("max_pool2d").shape_rule  # type: ignore[union-attr]
    assert rule([x.shape], attrs).shapes == (mx.shape,)


def test_max_pool_of_ints_pads_with_the_lowest_int() -> None:
    x = np.array([[[-100, -7], [-3, -4]]], np.int8)
    attrs = {"kernel": (2, 2), "stride": (1, 1), "padding": (1, 0, 1, 0)}
    (out,) = get_op("max_pool2d").kernel([x], attrs)  # type: ignore[union-attr]
    assert out.dtype == np.int8 and out.tolist() == [[[-100, -7], [-3, -3]]]


@pytest.mark.parametrize(
    ("attrs", "message"),
    [
        ({"kernel": (3, 3), "padding": (2, 0, 0, 0)}, "padding is more than half the kernel"),
        ({"kernel": (3,)}, "kernel needs 2 values >= 1"),
        ({"kernel": (2, 2), "stride": (0, 1)}, "stride needs 2 values >= 1"),
        ({"kernel": (2, 2), "padding": (1, 1)}, "padding needs 4 values >= 0"),
    ],
)
def test_pool_rule_rejects_bad_attributes(attrs: dict[str, Any], message: str) -> None:
    info = get_op("avg_pool2d")
    assert info is not None
    with pytest.raises(ShapeRuleError, match=message):
        info.shape_rule([(1, 2, 8, 8)], info.filled_attrs(attrs))


def test_einsum_kernel_matches_numpy_for_a_chain() -> None:
    rng = np.random.default_rng(2)
    a, b, c = rng.normal(size=(3, 4)), rng.normal(size=(4, 5)), rng.normal(size=(5, 2))
    (out,) = get_op("einsum").kernel([a, b, c], {"equation": "ij,jk,kl->il"})  # type: ignore[union-attr]
    np.testing.assert_allclose(out, a @ b @ c)
    (tr,) = get_op("einsum").kernel([a[:3, :3]], {"equation": "ii->"})  # type: ignore[union-attr]
    assert np.isclose(tr, np.trace(a[:3, :3]))


def test_against_pytorch() -> None:
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 6, 11, 9)).astype(np.float32)
    w = rng.normal(size=(4, 3, 3, 2)).astype(np.float32)
    bias = rng.normal(size=4).astype(np.float32)
    attrs = {"stride": (2, 1), "padding": (1, 1, 2, 2), "dilation": (2, 1), "groups": 2}
    (out,) = get_op("conv2d").kernel([x, w, bias], attrs)  # type: ignore[union-attr]
    want = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(bias),
                    stride=(2, 1), padding=(1, 2), dilation=(2, 1), groups=2)  # fmt: skip
    np.testing.assert_allclose(out, want.numpy(), rtol=1e-4, atol=1e-4)
    for include in (True, False):
        pool = {"kernel": (3, 2), "stride": (2, 2), "padding": (1, 1, 1, 1)}
        (avg,) = get_op("avg_pool2d").kernel([x], {**pool, "count_include_pad": include})  # type: ignore[union-attr]
        want = F.avg_pool2d(torch.from_numpy(x), (3, 2), (2, 2), (1, 1),
                            count_include_pad=include)  # fmt: skip
        np.testing.assert_allclose(avg, want.numpy(), rtol=1e-5, atol=1e-6)
    (mx,) = get_op("max_pool2d").kernel([x], pool)  # type: ignore[union-attr]
    want = F.max_pool2d(torch.from_numpy(x), (3, 2), (2, 2), (1, 1))
    np.testing.assert_array_equal(mx, want.numpy())
