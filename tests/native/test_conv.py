"""Convolutions against the op table's reference, in float64 and float32, at every
instruction-set level: hypothesis draws the batch, channels, odd image sizes, kernels of 1
to 7, strides, asymmetric padding, dilation, groups (depthwise included), the epilogue (the
residual after the activation or before it), the layout (NCHW or blocked) and the thread
count; results are within 1e-5 relative of float64 (max |y - ref| / max |ref|). 3x3
convolutions of stride 1 are also drawn for the Winograd path, against the direct one."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shapevm import _native, native
from shapevm.ops import get_op
from tests.native.reference import act64, rel_err

Array = np.ndarray[Any, Any]
CONV = get_op("conv2d")


def _data(seed: int, *shape: int) -> Array:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def reference(x: Array, w: Array, b: Array | None, dtype: type, **attrs: Any) -> Array:
    """The op table's conv2d kernel, run in ``dtype``."""
    assert CONV is not None
    args = [a.astype(dtype) for a in (x, w, b) if a is not None]
    out: Array = CONV.kernel(args, CONV.filled_attrs(attrs))[0]
    return out


def run(x: Array, packed: native.PackedConv, layouts: str, cout: int, **kw: Any) -> Array:
    """The convolution with its input and output in the layouts named ("nchw>blocked"...),
    the residual given in the output's, the result returned as NCHW."""
    source, target = layouts.split(">")
    if source == "blocked":
        x = native.to_blocked(x)
    if target == "nchw":
        return native.conv2d(x, packed, **kw)
    if kw.get("residual") is not None:
        kw["residual"] = native.to_blocked(kw["residual"])
    return native.from_blocked(native.conv2d_blocked(x, packed, **kw), cout)


@st.composite
def geometries(draw: st.DrawFn) -> dict[str, Any]:
    """A convolution whose dilated window fits the padded input."""
    groups_kind = draw(st.sampled_from(["one", "one", "depthwise", "grouped"]))
    if groups_kind == "depthwise":
        groups = draw(st.integers(1, 40))
        cin = cout = groups
    else:
        groups = 1 if groups_kind == "one" else draw(st.integers(2, 4))
        cin = groups * draw(st.integers(1, 24 if groups == 1 else 12))
        cout = groups * draw(st.integers(1, 40 if groups == 1 else 12))
    kh, kw = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    dh, dw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    pad = tuple(draw(st.integers(0, 3)) for _ in range(4))
    h = max(draw(st.integers(1, 21)), dh * (kh - 1) + 1 - pad[0] - pad[1], 1)
    w = max(draw(st.integers(1, 21)), dw * (kw - 1) + 1 - pad[2] - pad[3], 1)
    return {
        "n": draw(st.integers(1, 3)),
        "cin": cin,
        "cout": cout,
        "h": h,
        "w": w,
        "kernel": (kh, kw),
        "stride": (draw(st.integers(1, 3)), draw(st.integers(1, 3))),
        "padding": pad,
        "dilation": (dh, dw),
        "groups": groups,
    }


# The epilogue and the call: what both hypothesis tests below draw besides the geometry.
EPILOGUES: dict[str, Any] = {
    "act": st.sampled_from(native.ACTIVATIONS),
    "bias": st.booleans(),
    "residual": st.booleans(),
    "layouts": st.sampled_from(["nchw>nchw", "nchw>blocked", "blocked>blocked", "blocked>nchw"]),
    "threads": st.sampled_from([0, 1]),
    "residual_first": st.booleans(),
}


class Case:
    """A drawn convolution: its weights and input, the float64 result of its epilogue, and
    `call` to run it in the drawn layouts."""

    def __init__(self, g: dict[str, Any], act: str, bias: bool, residual: bool, layouts: str,
                 threads: int, residual_first: bool) -> None:  # fmt: skip
        kh, kw = g["kernel"]
        fan_in = g["cin"] // g["groups"] * kh * kw
        self.w = _data(1, g["cout"], g["cin"] // g["groups"], kh, kw) / np.float32(np.sqrt(fan_in))
        self.b = _data(2, g["cout"]) if bias else None
        self.x = _data(3, g["n"], g["cin"], g["h"], g["w"])
        self.attrs = {k: g[k] for k in ("stride", "padding", "dilation", "groups")}
        self.packed = native.pack_conv2d(self.w, self.b, **self.attrs)
        h64 = reference(self.x, self.w, self.b, np.float64, **self.attrs)
        self.r = _data(4, *h64.shape) if residual else None
        added = h64 + (self.r if self.r is not None else 0.0)
        # residual_first: act(conv + bias + residual), as a ResNet block ends
        self.ref = act64(act, added) if residual_first else act64(act, h64) + (added - h64)
        # A sum's float32 rounding scales with its terms, not with the sum: an output whose
        # terms cancel (one pixel of 16 channels, bias and residual: 0.00095 from terms
        # near 1) is held to 1e-5 of its terms' magnitude, not of itself.
        b64 = None if self.b is None else np.abs(self.b)
        terms = reference(np.abs(self.x), np.abs(self.w), b64, np.float64, **self.attrs)
        terms = terms + (np.abs(self.r) if self.r is not None else 0.0)
        self.scale = max(float(np.abs(self.ref).max()), float(terms.max())) or 1.0
        self.cout, self.layouts = g["cout"], layouts
        self.kw = {"activation": act, "residual": self.r, "threads": threads}
        self.kw["residual_first"] = residual_first

    def call(self) -> Array:
        return run(self.x, self.packed, self.layouts, self.cout, **self.kw)

    def err(self, y: Array) -> float:
        """max |y - ref| over the magnitude of the terms summed (see `scale`)."""
        return float(np.abs(np.asarray(y, np.float64) - self.ref).max()) / self.scale


@settings(
    max_examples=70, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(g=geometries(), **EPILOGUES)
def test_conv2d_matches_the_op_table(isa: str, g: dict[str, Any], **epilogue: Any) -> None:
    case = Case(g, **epilogue)
    y = case.call()
    assert y.shape == case.ref.shape and y.dtype == np.float32
    assert case.err(y) < 1e-5
    if epilogue["act"] == "none" and case.r is None:  # the op table's float32 kernel too
        assert rel_err(y, reference(case.x, case.w, case.b, np.float32, **case.attrs)) < 1e-5


@pytest.mark.parametrize(
    ("cin", "kernel", "stride", "padding", "dilation"),
    [(3, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)), (1, (5, 5), (2, 1), (2, 0, 1, 3), (1, 2)),
     (2, (3, 1), (1, 1), (0, 2, 0, 0), (2, 1)), (4, (2, 4), (3, 1), (1, 0, 3, 1), (1, 1))],
)  # fmt: skip
def test_few_inputs_per_output_nchw(
    isa: str,
    cin: int,
    kernel: tuple[int, int],
    stride: tuple[int, int],
    padding: tuple[int, ...],
    dilation: tuple[int, int],
) -> None:
    """An image's first layer (at most 32 multiply-adds per output, stride 1 along the
    width) runs on the GEMM micro-kernel between NCHW arrays: every epilogue, ragged rows
    of output channels, rows of pixels not a multiple of 16, the pool and one thread."""
    attrs = {"stride": stride, "padding": padding, "dilation": dilation}
    w, b = _data(30, 37, cin, *kernel) / 3, _data(31, 37)
    x = _data(32, 2, cin, 23, 45)
    packed = native.pack_conv2d(w, b, **attrs)
    h64 = reference(x, w, b, np.float64, **attrs)
    for act in ("relu", "gelu_erf"):
        r = _data(33, *h64.shape)
        one = native.conv2d(x, packed, activation=act, residual=r, threads=1)
        assert rel_err(one, act64(act, h64) + r) < 1e-5
        np.testing.assert_array_equal(native.conv2d(x, packed, activation=act, residual=r), one)


def test_w2_chain_stays_blocked(isa: str) -> None:
    """W2's three convolutions: the image in, the blocked layout between them, the pool at
    the end."""
    x = _data(5, 2, 3, 19, 23)
    layers = [(3, 32, 1), (32, 32, 2), (32, 64, 1)]
    packs = [
        native.pack_conv2d(_data(6 + i, co, ci, 3, 3) / 3, _data(9 + i, co), stride=s, padding=1)
        for i, (ci, co, s) in enumerate(layers)
    ]
    yb, y = x, x
    for p in packs:
        yb = native.conv2d_blocked(yb, p, activation="relu")
        y = native.conv2d(y, p, activation="relu")
    assert yb.shape == (2, 4, 10, 12, 16)
    assert rel_err(native.from_blocked(yb, 64), y) < 1e-5
    pooled = native.global_avg_pool_blocked(yb, 64)
    assert rel_err(pooled, y.astype(np.float64).mean((2, 3))) < 1e-5


@pytest.mark.parametrize(("cin", "stride"), [(3, 2), (3, 1), (1, 2), (5, 2)])
def test_image_layer_to_blocked(isa: str, cin: int, stride: int) -> None:
    """A first layer from an NCHW image to the blocked layout (its tight slab gathers the
    few channels of each pixel: three, an RGB image, on a path of their own), rows not a
    multiple of 16 pixels, one thread and the pool."""
    x, w, b = _data(40, 2, cin, 37, 45), _data(41, 24, cin, 3, 3) / 3, _data(42, 24)
    packed = native.pack_conv2d(w, b, stride=stride, padding=1)
    h64 = reference(x, w, b, np.float64, stride=(stride, stride), padding=(1, 1, 1, 1))
    one = native.conv2d_blocked(x, packed, activation="relu6", threads=1)
    assert rel_err(native.from_blocked(one, 24), act64("relu6", h64)) < 1e-5
    np.testing.assert_array_equal(native.conv2d_blocked(x, packed, activation="relu6"), one)


def test_threads_do_not_change_the_result(isa: str) -> None:
    x, w = _data(10, 2, 32, 40, 36), _data(11, 48, 32, 3, 3)
    packed = native.pack_conv2d(w, _data(12, 48), stride=(1, 2), padding=1)
    one = native.conv2d(x, packed, activation="silu", threads=1)
    pool = native.conv2d(x, packed, activation="silu", threads=0)
    np.testing.assert_array_equal(one, pool)
    xb = native.to_blocked(x)
    blocked = native.conv2d_blocked(xb, packed, activation="silu", threads=0)
    one_blocked = native.conv2d_blocked(xb, packed, activation="silu", threads=1)
    np.testing.assert_array_equal(blocked, one_blocked)
    assert rel_err(native.from_blocked(blocked, 48), one) < 1e-5


@pytest.mark.parametrize("layouts", ["nchw>nchw", "blocked>blocked", "nchw>blocked"])
@pytest.mark.parametrize(("n", "h", "w"), [(1, 1, 1500), (2, 1, 97), (1, 2, 300)])
@pytest.mark.parametrize(("cin", "stride"), [(40, 2), (3, 1)])  # (3, 1): conv_gemm.c's rows
def test_rows_cut_into_columns_for_the_threads(
    isa: str, layouts: str, n: int, h: int, w: int, cin: int, stride: int
) -> None:
    """An image of a row or two (a 1-D convolution) is cut into slices of columns for the
    threads: the same bits as on one thread, the residual and the padding at the slices'
    edges included, and the op table's result."""
    w = w * 4 if cin < 16 else w  # enough multiply-adds for two threads
    x, wt = _data(20, n, cin, h, w), _data(21, 48, cin, 1, 3)
    packed = native.pack_conv2d(wt, _data(22, 48), stride=(1, stride), padding=(0, 1))
    res = _data(23, n, 48, h, (w - 1) // stride + 1)
    one = run(x, packed, layouts, 48, activation="gelu_erf", residual=res, threads=1)
    pool = run(x, packed, layouts, 48, activation="gelu_erf", residual=res, threads=0)
    np.testing.assert_array_equal(pool, one)
    h64 = reference(x, wt, _data(22, 48), np.float64, stride=(1, stride), padding=(0, 0, 1, 1))
    assert rel_err(one, act64("gelu_erf", h64) + res) < 1e-5


@pytest.mark.parametrize("stride", [1, 2])
def test_depthwise_threads_do_not_change_the_result(isa: str, stride: int) -> None:
    """A depthwise layer of MobileNet's middle (small enough to have run on one thread
    before its multiply-adds were weighted) gives the same bits on the pool."""
    x = native.to_blocked(_data(16, 1, 96, 30, 34))
    packed = native.pack_conv2d(_data(17, 96, 1, 3, 3), _data(18, 96), stride=stride,
                                padding=1, groups=96)  # fmt: skip
    one = native.conv2d_blocked(x, packed, activation="relu6", threads=1)
    np.testing.assert_array_equal(native.conv2d_blocked(x, packed, activation="relu6"), one)
    w64, x64 = _data(17, 96, 1, 3, 3), native.from_blocked(x, 96)
    h64 = reference(x64, w64, _data(18, 96), np.float64, stride=(stride, stride),
                    padding=(1, 1, 1, 1), groups=96)  # fmt: skip
    assert rel_err(native.from_blocked(one, 96), act64("relu6", h64)) < 1e-5


def test_blocked_padding_channels_stay_zero(isa: str) -> None:
    packed = native.pack_conv2d(_data(13, 20, 5, 3, 3), _data(14, 20), padding=1)
    x = native.to_blocked(_data(15, 1, 5, 6, 7))
    out = np.full((1, 2, 6, 7, 16), np.nan, np.float32)
    y = native.conv2d_blocked(x, packed, activation="sigmoid", out=out)
    assert y is out
    assert (y[:, 1, :, :, 4:] == 0.0).all() and not np.isnan(y).any()


def test_residual_may_be_the_output(isa: str) -> None:
    x, w = _data(16, 1, 8, 9, 9), _data(17, 8, 8, 3, 3)
    packed = native.pack_conv2d(w, padding=1)
    acc = _data(18, 1, 8, 9, 9)
    expected = acc + np.maximum(reference(x, w, None, np.float64, padding=(1, 1, 1, 1)), 0)
    native.conv2d(x, packed, activation="relu", residual=acc, out=acc)
    assert rel_err(acc, expected) < 1e-5


def test_strided_weights_pack_like_contiguous(isa: str) -> None:
    w = _data(19, 16, 8, 6, 6)[::2, :, ::2, ::2]
    x = _data(20, 1, 8, 11, 11)
    a = native.conv2d(x, native.pack_conv2d(w, stride=2))
    b = native.conv2d(x, native.pack_conv2d(np.ascontiguousarray(w), stride=2))
    np.testing.assert_array_equal(a, b)


def test_empty_batch_and_packed_properties() -> None:
    p = native.pack_conv2d(_data(21, 6, 2, 3, 1), _data(22, 6), stride=(2, 1), padding=(1, 2),
                           dilation=2, groups=2)  # fmt: skip
    geometry = (p.cin, p.cout, p.kernel, p.groups, p.has_bias, p.depthwise)
    assert geometry == (4, 6, (3, 1), 2, True, False)
    assert p.padding == (1, 1, 2, 2) and p.dilation == (2, 2) and p.nbytes > 0
    assert "groups=2" in repr(p)
    assert native.conv2d(np.zeros((0, 4, 5, 5), np.float32), p).shape == (0, 6, 2, 9)
    assert native.pack_conv2d(np.ones((3, 1, 2, 2), np.float32), groups=3).depthwise


@pytest.mark.parametrize("c", [1, 16, 21])
def test_reorders_round_trip(c: int) -> None:
    x = _data(23, 2, c, 5, 3)
    xb = native.to_blocked(x)
    assert xb.shape == (2, -(-c // 16), 5, 3, 16)
    assert (xb[:, -1, :, :, (c - 1) % 16 + 1 :] == 0).all()
    np.testing.assert_array_equal(native.from_blocked(xb, c), x)
    np.testing.assert_array_equal(xb[0, 0, 1, 2, : min(c, 16)], x[0, : min(c, 16), 1, 2])


# ---- Winograd F(2x2, 3x3): 3x3 convolutions of stride 1 with at least 16 input channels ----


@contextmanager
def winograd(on: bool) -> Iterator[None]:
    """The library's 3x3 convolutions by Winograd's transform (on) or directly."""
    before = _native._set_conv_winograd(on)
    try:
        yield
    finally:
        _native._set_conv_winograd(before)


@st.composite
def winograd_geometries(draw: st.DrawFn) -> dict[str, Any]:
    """3x3, stride 1, no dilation, no groups, 16 to 40 input channels: what the Winograd
    path takes; images from 1 x 1 (all padding) to odd sizes with ragged tiles."""
    pad = tuple(draw(st.integers(0, 2)) for _ in range(4))
    return {
        "n": draw(st.integers(1, 3)),
        "cin": draw(st.integers(16, 40)),
        "cout": draw(st.integers(1, 40)),
        "h": max(draw(st.integers(1, 19)), 3 - pad[0] - pad[1]),
        "w": max(draw(st.integers(1, 19)), 3 - pad[2] - pad[3]),
        "kernel": (3, 3),
        "stride": (1, 1),
        "padding": pad,
        "dilation": (1, 1),
        "groups": 1,
    }


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(g=winograd_geometries(), **EPILOGUES)
def test_winograd_matches_the_op_table_and_the_direct_convolution(
    isa: str, g: dict[str, Any], **epilogue: Any
) -> None:
    case = Case(g, **epilogue)
    with winograd(True):
        y = case.call()
    with winograd(False):
        direct = case.call()
    assert y.shape == case.ref.shape and y.dtype == np.float32
    assert case.err(y) < 1e-5 and case.err(direct) < 1e-5
    # the two ways round differently: they agree to float32 accuracy of the terms summed,
    # not bit for bit (one pixel of 16 channels: 0.00094908 and 0.00094885 from terms
    # near 1; as a ratio of the two, 2.5e-4)
    diff = np.abs(y.astype(np.float64) - direct.astype(np.float64)).max()
    assert diff / case.scale < 2e-5


def test_winograd_threads_padding_channels_and_residual_in_place(isa: str) -> None:
    """W2's last layer (32 -> 64) on a ragged image: the pool gives the same bits as one
    thread, the blocked layout's padding channels stay zero, and a residual may be the
    output itself."""
    w, b = _data(44, 40, 32, 3, 3) / 17, _data(45, 40)
    packed = native.pack_conv2d(w, b, padding=1)
    x = native.to_blocked(_data(46, 2, 32, 37, 29))
    one = native.conv2d_blocked(x, packed, activation="relu", threads=1)
    np.testing.assert_array_equal(native.conv2d_blocked(x, packed, activation="relu"), one)
    assert (one[:, 2, :, :, 8:] == 0.0).all()
    acc = native.to_blocked(_data(47, 2, 40, 37, 29))
    expected = native.from_blocked(acc, 40) + native.from_blocked(one, 40)
    native.conv2d_blocked(x, packed, activation="relu", residual=acc, out=acc)
    assert rel_err(native.from_blocked(acc, 40), expected.astype(np.float64)) < 1e-6


def test_winograd_can_be_turned_off_by_the_environment() -> None:
    """SHAPEVM_WINOGRAD=0 makes every 3x3 convolution direct, bit for bit; unset, a new
    process takes the Winograd path."""
    code = (
        "import sys, numpy as np; from shapevm import native;"
        "rng = np.random.default_rng(0);"
        "p = native.pack_conv2d(rng.standard_normal((24, 20, 3, 3), dtype=np.float32), padding=1);"
        "x = rng.standard_normal((1, 20, 13, 11), dtype=np.float32);"
        "sys.stdout.buffer.write(native.conv2d(x, p).tobytes())"
    )
    env = {k: v for k, v in os.environ.items() if k != "SHAPEVM_WINOGRAD"}
    runs = {}
    for value in (None, "0"):
        if value is not None:
            env["SHAPEVM_WINOGRAD"] = value
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, check=True)
        runs[value] = np.frombuffer(out.stdout, np.float32).reshape(1, 24, 13, 11)
    rng = np.random.default_rng(0)
    p = native.pack_conv2d(rng.standard_normal((24, 20, 3, 3), dtype=np.float32), padding=1)
    x = rng.standard_normal((1, 20, 13, 11), dtype=np.float32)
    with winograd(True):
        np.testing.assert_array_equal(runs[None], native.conv2d(x, p))
    with winograd(False):
        np.testing.assert_array_equal(runs["0"], native.conv2d(x, p))
    assert not np.array_equal(runs[None], runs["0"])


@pytest.mark.parametrize(
    ("kh", "stride", "padding"),
    [(3, (1, 1), (1, 1, 1, 1)), (3, (2, 2), (1, 1, 1, 1)), (1, (1, 2), (0, 0, 1, 1)),
     (5, (2, 1), (2, 2, 1, 1)), (7, (1, 1), (3, 3, 1, 1)), (3, (1, 2), (0, 2, 0, 1))],
)  # fmt: skip
def test_depthwise_rows_of_three_wide_windows(
    isa: str, kh: int, stride: tuple[int, int], padding: tuple[int, ...]
) -> None:
    """Depthwise windows 3 wide at stride 1 or 2 along the width run a row at a time
    (`conv_dw3`): ragged rows (29 and 6 pixels), a partial last channel block, every
    layout, the residual before or after the activation, against float64."""
    c = 40
    w, b = _data(50, c, 1, kh, 3) / 3, _data(51, c)
    attrs = {"stride": stride, "padding": padding, "groups": c}
    packed = native.pack_conv2d(w, b, **attrs)
    for shape in [(2, c, 23, 29), (1, c, 9, 6)]:
        x = _data(52, *shape)
        h64 = reference(x, w, b, np.float64, **attrs)
        r = _data(53, *h64.shape)
        for layouts in ("nchw>nchw", "blocked>blocked", "nchw>blocked", "blocked>nchw"):
            for first in (False, True):
                y = run(x, packed, layouts, c, activation="relu6", residual=r, residual_first=first)
                ref = act64("relu6", h64 + r) if first else act64("relu6", h64) + r
                assert rel_err(y, ref) < 1e-5, (layouts, first)
