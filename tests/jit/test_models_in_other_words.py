"""Models written the way users write them, in other words than the workloads': the JIT must
agree with the interpreter on every one, at several shapes.

Each of these found a wrong result or a refused call when it was first run: a concatenate
along axis -1 (rotary embeddings), a reshape of a row picked from a batch (a class token),
a dense layer written over its own residual with a long k, a table sliced by a symbolic
length, an embedding lookup, a mean over the sequence axis, patches of an image whose sides
are declared multiples of the patch size, a convolution whose residual is its own input
(written over it), boxes taken at a top k's order (``take_along_axis`` broadcasting its
indices, as NumPy's does: checked against NumPy in tests/frontend/test_numpy_more.py), a
mirrored image (``x[..., ::-1]``, interpreted then, now a view), casts of float16 and into
int8 (interpreted then).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import shapevm as sv
import shapevm.numpy as snp
from shapevm import native, nn

RNG = np.random.default_rng(11)


def _w(*shape: int, scale: float = 0.1) -> np.ndarray[Any, Any]:
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


# -- a Llama-style block: RMS norm, rotary embeddings, softmax written out, SwiGLU ----------
D, HEADS, HD, FF = 32, 2, 16, 300  # FF > 256: the down projection's k spans two chunks
LL = {k: _w(*s) for k, s in dict(wq=(D, D), wk=(D, D), wv=(D, D), wo=(D, D), w1=(FF, D),
                                 w3=(FF, D), w2=(D, FF)).items()}  # fmt: skip
ANGLES = np.arange(64, dtype=np.float32)[:, None] / 10000 ** (np.arange(0, HD, 2) / HD)
COS, SIN = np.cos(ANGLES).astype(np.float32), np.sin(ANGLES).astype(np.float32)


def _rms(x: Any) -> Any:
    return x / snp.sqrt(snp.mean(x * x, axis=-1, keepdims=True) + 1e-6)


def _rope(t: Any, s: Any) -> Any:
    c, si = snp.asarray(COS)[:s], snp.asarray(SIN)[:s]
    t1, t2 = t[..., : HD // 2], t[..., HD // 2 :]
    return snp.concatenate([t1 * c - t2 * si, t1 * si + t2 * c], axis=-1)


def llama(x: Any) -> Any:
    b, s, _ = x.shape
    h = _rms(x)
    q, k, v = (
        (h @ LL[n].T).reshape(b, s, HEADS, HD).transpose(0, 2, 1, 3) for n in ("wq", "wk", "wv")
    )
    q, k = _rope(q, s), _rope(k, s)
    a = q @ k.transpose(0, 1, 3, 2) / math.sqrt(HD)
    a = snp.exp(a - a.max(axis=-1, keepdims=True))
    a = a / a.sum(axis=-1, keepdims=True)
    x = x + (a @ v).transpose(0, 2, 1, 3).reshape(b, s, D) @ LL["wo"].T
    h = _rms(x)
    g = h @ LL["w1"].T
    return (x + (g / (1 + snp.exp(-g)) * (h @ LL["w3"].T)) @ LL["w2"].T) * 1.0


# -- a MobileNetV3-ish CNN: hard-swish, depthwise, squeeze-excite, leaky relu -------------------
MB = dict(stem=_w(8, 3, 3, 3), s=1 + _w(8), dw=_w(8, 1, 3, 3), pw=_w(16, 8, 1, 1), se1=_w(4, 16),
          se2=_w(16, 4), head=_w(5, 16))  # fmt: skip


def mobile(x: Any) -> Any:
    h = nn.conv2d(x, MB["stem"], stride=2, padding=1) * MB["s"][None, :, None, None]
    h = h * snp.clip(h + 3.0, 0.0, 6.0) / 6.0
    h = nn.conv2d(h, MB["dw"], padding=1, groups=8)
    h = nn.conv2d(h, MB["pw"])
    h = snp.maximum(h, 0.01 * h)
    se = snp.clip(snp.maximum(h.mean(axis=(2, 3)) @ MB["se1"].T, 0) @ MB["se2"].T + 3, 0, 6) / 6
    logits = (h * se[:, :, None, None]).mean(axis=(2, 3)) @ MB["head"].T
    z = logits - logits.max(axis=-1, keepdims=True)
    return z - snp.log(snp.exp(z).sum(axis=-1, keepdims=True))


# -- a VGG-style classifier: strided convolutions after stride-1 ones (pairs by bands), a
# batch norm written out and a leaky ReLU between, a 5x5 stem with SiLU, the global mean by
# bands -----------------------------------------------------------------------------------------
VG = dict(c1=_w(16, 3, 3, 3, scale=0.3), b1=_w(16), c2=_w(24, 16, 3, 3), c3=_w(24, 24, 3, 3),
          mu=_w(24), sd=1 + np.abs(_w(24)), c4=_w(32, 24, 3, 3), fc=_w(10, 32),
          stem=_w(12, 3, 5, 5, scale=0.2))  # fmt: skip


def vgg(x: Any) -> Any:
    h = snp.maximum(nn.conv2d(x, VG["c1"], VG["b1"], padding=1), 0.0)
    h = snp.maximum(nn.conv2d(h, VG["c2"], stride=2, padding=1), 0.0)
    h = nn.conv2d(h, VG["c3"], padding=1)
    h = (h - VG["mu"].reshape(1, -1, 1, 1)) / VG["sd"].reshape(1, -1, 1, 1)
    h = snp.where(h > 0, h, 0.1 * h)
    h = snp.maximum(nn.conv2d(h, VG["c4"], stride=(2, 1), padding=1), 0.0)
    s = nn.conv2d(x, VG["stem"], stride=2, padding=2)
    s = (s * (1.0 / (1.0 + snp.exp(-s)))).mean(axis=(2, 3))
    return h.mean(axis=(2, 3)) @ VG["fc"].T, s


# -- a tiny U-Net: pooling, nearest upsampling by broadcasting, skips on channels --------------
UN = dict(e1=_w(4, 3, 3, 3), e2=_w(8, 4, 3, 3), d1=_w(4, 12, 3, 3), out=_w(1, 4, 1, 1))


def _up2(x: Any) -> Any:
    n, c, h, w = x.shape
    return snp.broadcast_to(x[:, :, :, None, :, None], (n, c, h, 2, w, 2)).reshape(
        n, c, 2 * h, 2 * w
    )


def unet(x: Any) -> Any:
    e1 = snp.maximum(nn.conv2d(x, UN["e1"], padding=1), 0)
    e2 = snp.maximum(nn.conv2d(nn.max_pool2d(e1, 2), UN["e2"], padding=1), 0)
    d1 = snp.maximum(nn.conv2d(snp.concatenate([_up2(e2), e1], axis=-3), UN["d1"], padding=1), 0)
    return 1.0 / (1.0 + snp.exp(-nn.conv2d(d1, UN["out"])))


# -- a segmentation net: a block whose residual is its own input, nearest upsampling by
# repeat, instance norm, a softmax over channels and its argmax -----------------------------
SG = dict(e=_w(8, 3, 3, 3, scale=0.3), m=_w(8, 8, 3, 3, scale=0.1), out=_w(2, 16, 1, 1))


def segment(x: Any) -> Any:
    e = snp.maximum(nn.conv2d(x, SG["e"], padding=1), 0)
    p = nn.max_pool2d(e, 2)
    mu = p.mean(axis=(2, 3), keepdims=True)
    p = (p - mu) / snp.sqrt(((p - mu) ** 2).mean(axis=(2, 3), keepdims=True) + 1e-5)
    m = snp.maximum(nn.conv2d(p, SG["m"], padding=1), 0) + p  # the residual is the input
    u = snp.repeat(snp.repeat(m, 2, axis=2), 2, axis=3)
    probs = nn.softmax(nn.conv2d(snp.concatenate([u, e], axis=1), SG["out"]), axis=1)
    return probs, probs.argmax(axis=1)


# -- a detector's post-processing: boxes decoded, the top 4 by argsort, boxes taken at them
# with take_along_axis (indices [b, 4, 1] against boxes [b, n, 4]), pairwise IoU ----------------
ANCHORS = np.abs(RNG.standard_normal((16, 4))).astype(np.float32) * 0.3 + 0.05


def detect(raw: Any) -> Any:
    a = snp.asarray(ANCHORS)[: raw.shape[1]]
    cx, cy = a[:, 0] + raw[..., 0] * 0.1 * a[:, 2], a[:, 1] + raw[..., 1] * 0.1 * a[:, 3]
    w, h = a[:, 2] * snp.exp(raw[..., 2] * 0.2), a[:, 3] * snp.exp(raw[..., 3] * 0.2)
    boxes = snp.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=-1)
    score = 1 / (1 + snp.exp(-raw[..., 4]))
    order = snp.argsort(-score, axis=-1)[:, :4]
    top = snp.take_along_axis(boxes, order[..., None], axis=1)
    lo = snp.maximum(top[:, :, None, :2], top[:, None, :, :2])
    hi = snp.minimum(top[:, :, None, 2:], top[:, None, :, 2:])
    inter = snp.prod(snp.maximum(hi - lo, 0), axis=-1)
    area = snp.prod(top[..., 2:] - top[..., :2], axis=-1)
    return top, inter / (area[:, :, None] + area[:, None, :] - inter), order


# -- test-time augmentation: the image and its mirror (x[..., ::-1]) through one conv ----------
TT = dict(k=_w(4, 3, 3, 3, scale=0.3), head=_w(3, 4))


def tta(x: Any) -> Any:
    feats = [snp.maximum(nn.conv2d(v, TT["k"], padding=1), 0).mean(axis=(2, 3))
             for v in (x, x[..., ::-1], snp.flip(x, axis=2))]  # fmt: skip
    return nn.softmax(sum(feats) / 3.0 @ TT["head"].T, axis=-1)


# -- a small ViT: patches by reshape, a class token, positions sliced, einsum attention -------
PS, VD = 4, 24
VT = dict(patch=_w(VD, 3 * PS * PS), cls=_w(1, 1, VD), pos=_w(1, 1 + 16 * 16, VD),
          qkv=_w(3 * VD, VD), fc1=_w(4 * VD, VD), fc2=_w(VD, 4 * VD), head=_w(3, VD))  # fmt: skip


def _ln(x: Any) -> Any:
    return (x - x.mean(-1, keepdims=True)) / snp.sqrt(x.var(-1, keepdims=True) + 1e-5)


def vit(img: Any) -> Any:
    b, c, hh, ww = img.shape
    gh, gw = hh // PS, ww // PS
    p = img.reshape(b, c, gh, PS, gw, PS).transpose(0, 2, 4, 1, 3, 5).reshape(b, gh * gw, -1)
    x = snp.concatenate(
        [snp.broadcast_to(snp.asarray(VT["cls"]), (b, 1, VD)), p @ VT["patch"].T], 1
    )
    x = x + snp.asarray(VT["pos"])[:, : gh * gw + 1]
    q, k, v = snp.split((_ln(x) @ VT["qkv"].T).reshape(b, -1, 3, VD), 3, axis=2)
    att = snp.einsum("bqd,bkd->bqk", q[:, :, 0], k[:, :, 0]) / math.sqrt(VD)
    att = snp.exp(att - att.max(-1, keepdims=True))
    x = x + snp.einsum("bqk,bkd->bqd", att / att.sum(-1, keepdims=True), v[:, :, 0])
    h = _ln(x) @ VT["fc1"].T
    x = x + (0.5 * h * (1 + snp.erf(h / math.sqrt(2)))) @ VT["fc2"].T
    return x[:, 0] @ VT["head"].T


# -- a bag-of-embeddings text classifier: a lookup, a padding mask, argmax ---------------------
EMB, TW = _w(50, 16), _w(4, 16)


def text(ids: Any) -> Any:
    mask = (ids != 0).astype(snp.float32)[..., None]
    pooled = (snp.asarray(EMB)[ids] * mask).sum(axis=1) / snp.maximum(mask.sum(axis=1), 1.0)
    logits = snp.tanh(pooled) @ TW.T
    return snp.argmax(logits, axis=-1), logits, snp.asarray(EMB)[ids].mean(axis=1)


# -- a BERT-ish layer: a padding mask from int64 ids, added to the scores before softmax ------
BD, BH = 32, 4
BT = dict(emb=_w(50, BD), q=_w(BD, BD), k=_w(BD, BD), v=_w(BD, BD), o=_w(BD, BD))


def bert(ids: Any) -> Any:
    b, s = ids.shape
    x = snp.asarray(BT["emb"])[ids]
    pad = ((1.0 - (ids > 0).astype(snp.float32)) * -1e4)[:, None, None, :]
    q, k, v = (
        (x @ BT[n].T).reshape(b, s, BH, BD // BH).transpose(0, 2, 1, 3) for n in ("q", "k", "v")
    )
    a = q @ k.transpose(0, 1, 3, 2) * (1 / math.sqrt(BD // BH)) + pad
    a = snp.exp(a - a.max(axis=-1, keepdims=True))
    a = a / a.sum(axis=-1, keepdims=True)
    return _ln(x + (a @ v).transpose(0, 2, 1, 3).reshape(b, s, BD) @ BT["o"].T)


# -- quantization-aware inference: half-precision input, int8 rounding of activations ---------
QW = _w(24, 10, scale=0.3)


def fake_quant(x: Any) -> Any:
    h = x.astype(snp.float32)
    scale = snp.abs(h).max(axis=-1, keepdims=True) / 127.0 + 1e-8
    q = snp.clip(snp.round(h / scale), -127, 127).astype(snp.int8)
    y = snp.maximum((q.astype(snp.float32) * scale) @ QW, 0.0)
    return y.astype(snp.float16), q


MODELS: dict[str, tuple[Callable[..., Any], str, list[str], Any, list[tuple[int, ...]]]] = {
    "bert": (bert, "b, s", [], np.int64, [(1, 6), (3, 11), (2, 1)]),
    "llama": (llama, "b, s, 32", ["s <= 64"], np.float32, [(1, 5, 32), (2, 17, 32), (1, 64, 32)]),
    "mobile": (mobile, "b, 3, h, w", [], np.float32, [(1, 3, 16, 16), (2, 3, 21, 13)]),
    "unet": (unet, "n, 3, 2*h, 2*w", [], np.float32, [(1, 3, 8, 8), (2, 3, 12, 20)]),
    "vit": (
        vit,
        "b, 3, 4*h, 4*w",
        ["h <= 16", "w <= 16"],
        np.float32,
        [(1, 3, 8, 8), (2, 3, 16, 24), (3, 3, 12, 8)],
    ),
    # the same ViT with its sides as JAX users declare them: divisibility constraints
    "vit_mod": (
        vit,
        "b, 3, h, w",
        ["mod(h, 4) == 0", "mod(w, 4) == 0", "h <= 64", "w <= 64"],
        np.float32,
        [(1, 3, 8, 8), (2, 3, 16, 24), (1, 3, 64, 4)],
    ),
    "text": (text, "b, s", [], np.int32, [(1, 4), (3, 9), (2, 1)]),
    "segment": (segment, "b, 3, 2*h, 2*w", [], np.float32, [(1, 3, 8, 8), (2, 3, 12, 20)]),
    "detect": (detect, "b, n, 5", ["n >= 4", "n <= 16"], np.float32, [(1, 4, 5), (3, 16, 5)]),
    "tta": (tta, "b, 3, h, w", [], np.float32, [(1, 3, 8, 8), (2, 3, 5, 11)]),
    "fake_quant": (fake_quant, "b, 24", [], np.float16, [(1, 24), (7, 24), (130, 24)]),
    "vgg": (vgg, "b, 3, h, w", [], np.float32, [(1, 3, 16, 16), (2, 3, 37, 29), (1, 3, 64, 48)]),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_jit_agrees_with_the_interpreter_on_models_written_otherwise(name: str) -> None:
    fn, spec, constraints, dtype, shapes = MODELS[name]
    (example,) = [np.zeros(shapes[0], dtype)]
    exp = sv.export(sv.jit(fn))(sv.symbolic_args_specs(example, spec, constraints=constraints))
    jitted = exp.jit(hot_threshold=1, background=False, tier3=False)
    for shape in [*shapes, shapes[0]]:
        x = (
            RNG.integers(0, 50, shape).astype(dtype)
            if np.issubdtype(dtype, np.integer)
            else RNG.standard_normal(shape).astype(dtype)
        )
        got, want = jitted(x), exp.call(x)
        for g, w in zip(*(r if isinstance(r, tuple) else (r,) for r in (got, want)), strict=True):
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5)
    stats = jitted.jit_stats()
    assert stats["failures"] == 0 and stats["compiled_calls"] > 0, jitted.jit_info()


def test_a_padding_mask_from_int_ids_fuses_into_attention() -> None:
    """The mask's comparison of int64 ids with 0 runs native (the tile interpreter reads
    the ids exactly), so nothing interpreted splits the layer before its attention, and
    the additive mask goes into the attention kernel; with the embedding lookup a take
    kernel, the whole layer is one native call."""
    fn, spec, _, dtype, _ = MODELS["bert"]
    exp = sv.export(sv.jit(fn))(sv.symbolic_args_specs(np.zeros((1, 6), dtype), spec))
    jitted = exp.jit(hot_threshold=1, background=False, tier3=False)
    ids = np.array([[5, 9, 0, 0], [7, 0, 3, 0]], np.int64)
    np.testing.assert_allclose(jitted(ids), exp.call(ids), rtol=2e-5, atol=2e-5)
    (engine,) = jitted.engines
    (rec,) = [r for r in engine.records() if r.variant]
    kernels = [k.label for r in rec.variant.regions for k in r.lowered.kernels]
    assert "attention" in kernels and len(rec.variant.regions) == 1, kernels
    assert rec.variant.function.whole and not rec.variant.function.interpreted


def test_casts_between_half_float_and_int8_run_native() -> None:
    """float16 in, int8 rounding, float16 out: the cast kernel converts between any two
    dtypes (float into int8 truncated as NumPy's), so the function is one native call."""
    spec = sv.symbolic_args_specs(np.zeros((1, 24), np.float16), "b, 24")
    exp = sv.export(sv.jit(fake_quant))(spec)
    jitted = exp.jit(hot_threshold=1, background=False, tier3=False)
    x = (RNG.standard_normal((9, 24)) * 40).astype(np.float16)
    y, q = jitted(x)
    want_y, want_q = exp.call(x)
    assert y.dtype == np.float16 and q.dtype == np.int8
    np.testing.assert_array_equal(q, want_q)
    np.testing.assert_allclose(y.astype(np.float32), want_y.astype(np.float32), rtol=1e-3)
    (engine,) = jitted.engines
    (rec,) = [r for r in engine.records() if r.variant]
    assert rec.variant.function.whole, rec.variant.describe()


def _agree(f: Any, args: tuple[Any, ...], want: Any, what: str = "") -> None:
    """`f` called until it compiles gives NumPy's arrays `want`, dtypes and bits."""
    for _ in range(3):
        got = f(*args)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype, what
        np.testing.assert_array_equal(g, w, err_msg=what)


@pytest.mark.parametrize(
    "dtype", [np.float32, np.float64, np.int64, np.int32, np.float16, np.uint8]
)
def test_permuted_copies_with_short_rows_are_numpys(dtype: Any) -> None:
    """A patch embedding's transpose (rows of 4 elements moved into a new order), copied by
    the executor row after row along the axis before the rows: NumPy's arrays for every
    dtype and several permutations of a 6-D view, and a transpose returned as the result
    (compiled where the dtype's `+` is native, interpreted otherwise)."""
    x = (np.random.default_rng(4).standard_normal((3, 3, 4, 4, 2, 4)) * 10).astype(dtype)
    for perm in ((0, 2, 4, 1, 3, 5), (0, 1, 3, 2, 5, 4), (5, 4, 3, 2, 1, 0), (0, 2, 1, 3, 4, 5)):

        def patches(a: Any, perm: tuple[int, ...] = perm) -> Any:
            return a.transpose(perm).reshape(a.shape[0], -1) + a.dtype.type(1), a.transpose(perm)

        f = sv.jit(patches, shapes="b, 3, 4, 4, 2, 4", hot_threshold=1)
        _agree(f, (x,), patches(x))
        if np.dtype(dtype) in (np.float32, np.int32, np.int64):  # whose `+` is native
            assert all(r["tier"] >= 2 for r in f.jit_info()), f.jit_info()


def test_a_weighted_sum_of_sliced_channels_is_one_pass() -> None:
    """A grayscale conversion, ``0.299 * x[..., 0] + 0.587 * x[..., 1] + 0.114 * x[..., 2]``:
    each term reads a slice the program takes just before it, and the slices are taken
    ahead so that the terms join the sum's chain (it was three chains, three passes)."""

    def gray(img: Any) -> Any:
        x = img.astype(np.float32)
        g = 0.299 * x[..., 0] + 0.587 * x[..., 1] + 0.114 * x[..., 2]
        return snp.clip(g, 0, 255).astype(np.uint8)

    f = sv.jit(gray, shapes="h, w, 3", hot_threshold=1, background=False)
    img = RNG.integers(0, 256, (30, 40, 3)).astype(np.uint8)
    for _ in range(2):
        got = f(img)
    x = img.astype(np.float32)
    want = np.clip(0.299 * x[..., 0] + 0.587 * x[..., 1] + 0.114 * x[..., 2], 0, 255)
    np.testing.assert_array_equal(got, want.astype(np.uint8))
    (engine,) = f.engines
    (rec,) = [r for r in engine.records() if r.variant]
    assert rec.variant.describe().count("chain[") == 1, rec.variant.describe()


@pytest.mark.parametrize(
    "dtype", [np.float32, np.float64, np.int32, np.int64, np.float16, np.uint8]
)
def test_repeats_along_the_last_axis_are_numpys(dtype: Any) -> None:
    """Nearest-neighbour upsampling and `np.repeat` along the last axis (each element copied
    n times in a row: a source of stride 0 along the rows), also from a strided source (a
    transpose, every other column) and a column broadcast over short rows: NumPy's arrays for
    every dtype and count (compiled where the dtype's `+` is native, interpreted otherwise)."""
    x = (np.random.default_rng(5).standard_normal((2, 3, 5, 6)) * 10).astype(dtype)
    for n in (2, 3, 4, 5):

        def up(a: Any, n: int = n) -> Any:
            one = a.dtype.type(1)
            near = a.repeat(n, axis=2).repeat(n, axis=3)
            strided = a.transpose(0, 1, 3, 2).repeat(n, axis=-1)
            every_other = a[..., ::2].repeat(n, axis=-1)
            column = snp.broadcast_to(a[..., :1], (*a.shape[:-1], n))
            return near + one, strided + one, every_other + one, column + one

        f = sv.jit(up, shapes="b, 3, h, w", hot_threshold=1)
        for _ in range(3):
            got = f(x)
        want = _numpy_up(x, n)
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)
        if np.dtype(dtype) in (np.float32, np.int32, np.int64):  # whose `+` is native
            assert all(r["tier"] >= 2 for r in f.jit_info()), f.jit_info()


def _numpy_up(a: Any, n: int) -> tuple[Any, ...]:
    one = a.dtype.type(1)
    return (
        a.repeat(n, axis=2).repeat(n, axis=3) + one,
        a.transpose(0, 1, 3, 2).repeat(n, axis=-1) + one,
        a[..., ::2].repeat(n, axis=-1) + one,
        np.broadcast_to(a[..., :1], (*a.shape[:-1], n)) + one,
    )


@pytest.mark.parametrize("tier3", [False, True])
def test_rows_read_backwards_in_a_chain_are_numpys(tier3: bool) -> None:
    """`np.flip` along the last axis (and `[..., ::-1]`) read in a fused chain at tier 2
    (the tile interpreter) and tier 3 (generated code), beside a forward operand, rows of
    every length around the vector and tile sizes: NumPy's arrays."""

    def flipped(a: Any) -> Any:
        return snp.flip(a, axis=-1) * 2.0 + a[..., ::-1] - a, snp.flip(a, axis=-1) + 1.0

    opts: dict[str, Any] = {"background": False, "tier3_min_elements": 0} if tier3 else {}
    f = sv.jit(flipped, shapes="b, n", hot_threshold=1, tier3=tier3, **opts)
    rng = np.random.default_rng(6)
    for n in (1, 3, 15, 16, 17, 64, 255, 256, 257, 1000):
        x = rng.standard_normal((5, n)).astype(np.float32)
        for _ in range(3):
            got = f(x)
        f.wait(60)
        got = f(x)
        want = (np.flip(x, -1) * 2.0 + x[..., ::-1] - x, np.flip(x, -1) + 1.0)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)
    assert max(r["tier"] for r in f.jit_info()) == (3 if tier3 else 2), f.jit_info()


@pytest.mark.parametrize("shift", [3, -2, 0, 70])
def test_roll_along_an_axis_of_symbolic_length_is_numpys(shift: int) -> None:
    """`np.roll` along an axis whose length is a dimension variable is a take of
    `(arange(n) - shift) % n` along it: the executor's take over every outer row (indices
    checked once per call), for lengths shorter and longer than the shift, float32, int32
    and int64."""

    def rolled(a: Any, i: Any, j: Any) -> Any:
        return snp.roll(a, shift, axis=-1) * 2.0, snp.roll(i, shift, axis=1), snp.roll(j, shift, 1)

    f = sv.jit(rolled, shapes=("b, c, n", "b, n", "b, n"), hot_threshold=1)
    rng = np.random.default_rng(7)
    for b, n in [(1, 1), (2, 5), (3, 64), (4, 100)]:
        x = rng.standard_normal((b, 3, n)).astype(np.float32)
        i = rng.integers(-50, 50, (b, n)).astype(np.int32)
        j = rng.integers(-50, 50, (b, n)).astype(np.int64)
        for _ in range(3):
            got = f(x, i, j)
        want = (np.roll(x, shift, axis=-1) * 2.0, np.roll(i, shift, 1), np.roll(j, shift, 1))
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)
    assert all(r["tier"] >= 2 for r in f.jit_info()), f.jit_info()


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_floor_division_by_a_positive_constant_is_numpys(dtype: Any) -> None:
    """`t // 3600 % 24` (hours from seconds) divides by a multiply with the divisor's
    reciprocal, exact for every value from 0 to the type's largest, the negative ones as
    integers: NumPy's quotients and remainders for divisors from 1 to int64's largest."""
    info = np.iinfo(dtype)
    rng = np.random.default_rng(8)
    x = np.concatenate(
        [
            rng.integers(0, info.max, 3000, dtype=dtype, endpoint=True),
            rng.integers(0, 100_000, 1000, dtype=dtype),
            rng.integers(info.min, 0, 500, dtype=dtype),
            rng.integers(-100_000, 0, 1000, dtype=dtype),
            np.array([0, 1, info.max, info.max - 1, info.min, info.min + 1, -1], dtype),
        ]
    )
    divisors = [1, 2, 3, 7, 24, 1000, 3600, 86400, 2**31 - 1]
    if dtype == np.int64:
        divisors += [2**40 + 3, 2**52 + 1, 2**62 + 1, 2**63 - 1]
    for d in divisors:

        def split(t: Any, d: int = d) -> Any:
            return t // d, t % d

        f = sv.jit(split, shapes="n", hot_threshold=1)
        _agree(f, (x,), split(x), f"divisor {d}")
        assert all(r["tier"] >= 2 for r in f.jit_info()), f.jit_info()


def test_outer_products_of_short_rows_are_numpys() -> None:
    """`einsum("ni,nj->nij")` and `a[:, :, None] * b[:, None, :]`: in the fused chain one
    operand repeats each value along short rows, the other repeats a short row; every row
    length around the tile's and vector's, and row counts that end tiles mid-row."""

    def outer(a: Any, b: Any) -> Any:
        return snp.einsum("ni,nj->nij", a, b), a[:, :, None] * b[:, None, :] + 1.0

    f = sv.jit(outer, shapes=("n, k", "n, k"), hot_threshold=1)
    rng = np.random.default_rng(9)
    for n, k in [(1, 1), (3, 2), (50, 3), (77, 6), (300, 7), (40, 15), (20, 16), (9, 17)]:
        a = rng.standard_normal((n, k)).astype(np.float32)
        b = rng.standard_normal((n, k)).astype(np.float32)
        for _ in range(3):
            got = f(a, b)
        want = (np.einsum("ni,nj->nij", a, b), a[:, :, None] * b[:, None, :] + 1.0)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)
    assert all(r["tier"] >= 2 for r in f.jit_info()), f.jit_info()


def test_a_power_by_a_constant_of_one_element_is_a_literal_of_the_chain() -> None:
    """ONNX's `Pow(x, two)` with an initializer (and `x ** np.array(2.0)`): the exponent
    is a constant tensor, not a literal, and ran as a power per element (201 us of a GLU
    with RMS norm on [8, 200, 64]). The chain takes it as its literal: 2 is a square,
    NumPy's `x * x` bit for bit; other exponents keep the power's values."""

    def f(x: Any) -> Any:
        return (x * 3.0) ** np.array(2.0, np.float32), snp.abs(x) ** np.array([1.5], np.float32)

    jitted = sv.jit(f, shapes="b, n", hot_threshold=1, tier3=False)
    x = np.random.default_rng(10).standard_normal((40, 33)).astype(np.float32)
    for _ in range(3):
        got = jitted(x)
    np.testing.assert_array_equal(got[0], (x * 3.0) * (x * 3.0))
    np.testing.assert_allclose(got[1], np.abs(x) ** np.float32(1.5), rtol=2e-7)
    (engine,) = jitted.engines
    (rec,) = [r for r in engine.records() if r.variant]
    texts = [k.chain.text() for r in rec.variant.regions for k in r.lowered.kernels if k.chain]
    assert any("pow(n1, 2.0)" in t or "pow(n0, 2.0)" in t for t in texts), texts
    assert any(", 1.5)" in t for t in texts), texts


@pytest.mark.parametrize("kind", ["max", "min", "sum", "mean"])
def test_reductions_over_short_rows_are_numpys(kind: str) -> None:
    """A max, min, sum or mean over each short row (a classifier's few logits, a box's
    corners) runs across rows side by side: NumPy's values for rows of 1 to 17 over row
    counts that cross the blocks and tiles, with NaN, infinities and signed zeros (for
    rows under 16, which of 0.0 and -0.0 comes out too: the later one, as NumPy's); sums
    of fewer than 8 in NumPy's order."""

    def reduce(x: Any) -> Any:
        return getattr(x, kind)(axis=-1), getattr(x * 2.0, kind)(axis=-1, keepdims=True)

    f = sv.jit(reduce, shapes="n, r", hot_threshold=1, tier3=False)
    rng = np.random.default_rng(12)
    values = np.float32([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, 2.5])
    for n, r in [(1, 1), (7, 2), (300, 3), (1000, 4), (129, 5), (64, 7), (500, 8), (65, 12),
                 (40, 15), (33, 16), (20, 17)]:  # fmt: skip
        x = rng.choice(values, (n, r)).astype(np.float32)
        x[::5] = rng.standard_normal((len(x[::5]), r)).astype(np.float32)
        x[3::11, rng.integers(0, r)] = np.nan
        for _ in range(3):
            got = f(x)
        with np.errstate(invalid="ignore"):
            want = reduce(x)
        for g, w in zip(got, want, strict=True):
            # sums of fewer than 8 in NumPy's order, bit for bit; of 8 and more (NumPy
            # sums in pairs) within rounding
            exact = kind in ("max", "min") or (kind == "sum" and r < 8)
            np.testing.assert_allclose(g, w, rtol=0 if exact else 2e-6, atol=0 if exact else 1e-5)
            if kind in ("max", "min") and r < 16:
                np.testing.assert_array_equal(np.signbit(g), np.signbit(w))
    assert all(row["tier"] >= 2 for row in f.jit_info()), f.jit_info()


_INT_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "floordiv": lambda a, b: a // b,
    "mod": lambda a, b: a % b,
    "less": lambda a, b: a < b,
    "less_equal": lambda a, b: a <= b,
    "greater": lambda a, b: a > b,
    "greater_equal": lambda a, b: a >= b,
    "equal": lambda a, b: a == b,
    "not_equal": lambda a, b: a != b,
    "where": lambda a, b: (np.where if isinstance(a, np.ndarray) else snp.where)(a > b, a, b),
    "abs": lambda a, b: abs(a) + b,
    "neg": lambda a, b: -a * b,
}


def _int_values(dtype: Any, shape: tuple[int, ...], rng: np.random.Generator) -> Any:
    """Random integers of ``dtype`` with the type's edges and small values mixed in."""
    info = np.iinfo(dtype)
    edges = np.array([0, 1, -1, 2, -7, info.max, info.min, info.min + 1, info.max - 1], dtype)
    x = rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    small = rng.integers(-50, 50, shape, dtype=dtype)
    x = np.where(rng.random(shape) < 0.5, small, x)
    return np.where(rng.random(shape) < 0.2, rng.choice(edges, shape), x).astype(dtype)


@pytest.mark.parametrize("isa", native.isa_levels())
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("kind", sorted(_INT_BINARY))
@pytest.mark.parametrize(
    ("sa", "sb", "step"),
    [("n, m", "n, m", 1), ("n, m", "n, 1", 1), ("n, 1", "n, m", 1), ("n, m", "m", 1),
     ("n, 1", "1, m", 1), ("n, m", "n, m", 2), ("n, m", "m", 3)],
)  # fmt: skip
def test_integer_elementwise_ops_are_numpys(
    isa: str, dtype: Any, kind: str, sa: str, sb: str, step: int
) -> None:
    """Integer arithmetic, comparisons and `where` in the executor's typed loops at every
    instruction-set level (an operand along a row, broadcast along it, both broadcast, or
    read at a stride, short rows of a one-hot compare): NumPy's results, wrapping at the
    type's ends, `x // 0` and `x % 0` 0, the smallest value `// -1` itself."""
    op = _INT_BINARY[kind]

    def strided(a: Any, b: Any) -> Any:
        return op(a[..., ::step], b[..., ::step])

    rng = np.random.default_rng(len(kind) * 7 + len(sa + sb) + step)
    before = native.info()["isa"]
    native.set_isa(isa)
    try:
        f = sv.jit(strided, shapes=(sa, sb), hot_threshold=1)
        for n, m in [(3, 17), (1, 40), (5, 1), (300, 7)]:
            dims = {"n": n, "m": m, "1": 1}
            a = _int_values(dtype, tuple(dims[d] for d in sa.split(", ")), rng)
            b = _int_values(dtype, tuple(dims[d] for d in sb.split(", ")), rng)
            with np.errstate(all="ignore"):
                want = strided(a, b)
                for _ in range(2):
                    got = f(a, b)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want, err_msg=f"{kind} at {n}x{m}")
    finally:
        native.set_isa(before)
    assert all(r["tier"] >= 2 for r in f.jit_info()), f.jit_info()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int8, np.int64])
def test_transposed_results_are_numpys(dtype: Any) -> None:
    """A result that is a transpose (``x.T``, ``swapaxes``) is copied block by block; every
    element lands where NumPy puts it, with partial blocks at the edges, a batch axis in
    front, every other row, and one-byte elements (copied element by element)."""
    rng = np.random.default_rng(3)

    def f(x: Any, y: Any) -> Any:
        return x.T, snp.swapaxes(y, 1, 2), x.T[::2]

    j = sv.jit(f, shapes=("n, m", "b, n, m"), hot_threshold=1)
    for n, m, b in [(3, 5, 1), (40, 70, 2), (33, 65, 3), (8, 8, 1), (1, 100, 2)]:
        x = (rng.standard_normal((n, m)) * 50).astype(dtype)
        y = (rng.standard_normal((b, n, m)) * 50).astype(dtype)
        for _ in range(2):
            got = j(x, y)
        for g, w in zip(got, f(x, y), strict=True):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)
    assert all(r["tier"] >= 2 for r in j.jit_info()), j.jit_info()


def test_a_pass_over_a_transposed_operand_reads_a_copy() -> None:
    """A chain reading ``x.T`` or ``swapaxes(y, 1, 2)`` (rows down the base's columns)
    beside a full-size operand in memory order (``x``, ``y``) reads a temp the executor's
    blocked transpose filled just before: NumPy's values, the same temp for both reads of
    one view, and no copy for a transpose that keeps the last axis (``y.transpose(1, 0,
    2)`` reads whole rows)."""
    rng = np.random.default_rng(4)

    def f(x: Any, y: Any) -> Any:
        t = x.T
        swapped = snp.tanh(snp.swapaxes(y, 1, 2)) * t[None] + y
        return t + x, swapped, t * x + t, y.transpose(1, 0, 2) * 2

    j = sv.jit(f, shapes=("n, n", "b, n, n"), hot_threshold=1, background=False, tier3=False)
    for n, b in [(1, 1), (5, 2), (37, 3), (64, 1)]:
        x = rng.standard_normal((n, n)).astype(np.float32)
        y = rng.standard_normal((b, n, n)).astype(np.float32)
        for g, w in zip(j(x, y), f(x, y), strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
    rec = next(r for r in j.engines[0].records() if r.variant)
    text = rec.variant.describe()
    assert text.count("copy (transposed)") == 2, text  # x.T once, swapaxes(y) once


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_a_mask_only_integer_ops_read_is_the_compare_kernels(dtype: Any) -> None:
    """``where(m > 0, cumsum(m, 1) - 1, -1)`` (positions from a mask): the comparison with a
    literal that only an integer `where` reads is the executor's exact compare kernel, not a
    pass of float32 lanes; values past 2**24 and the type's ends compare exactly."""
    info = np.iinfo(dtype)

    def positions(m: Any) -> Any:
        where = np.where if isinstance(m, np.ndarray) else snp.where
        return where(m > 0, m.cumsum(axis=1) - 1, -1), where(m <= 2**24 + 1, m, 7)

    f = sv.jit(positions, shapes="b, s", hot_threshold=1, background=False)
    rng = np.random.default_rng(6)
    edges = np.array([0, 1, -1, 2**24, 2**24 + 1, 2**24 + 2, info.max, info.min], dtype)
    for b, s in [(1, 1), (3, 8), (16, 500)]:
        m = rng.choice(edges, (b, s)).astype(dtype)
        with np.errstate(all="ignore"):
            for g, w in zip(f(m), positions(m), strict=True):
                assert g.dtype == w.dtype
                np.testing.assert_array_equal(g, w)
    rec = next(r for r in f.engines[0].records() if r.variant)
    text = rec.variant.describe()
    assert "greater" in text and "less_equal" in text and "chain" not in text, text


@pytest.mark.parametrize("tier3", [False, True])
def test_a_result_the_others_are_computed_from_is_computed_once(tier3: bool) -> None:
    """A GLU kept and squared (an RMS norm's input), three levels of results each read by
    the next: the results others are computed from are written by a first pass and read
    back by the next (the tile interpreter's program of each result computed them again:
    a sigmoid twice), the later passes reading only what they need; NumPy's values in both
    tiers."""

    def glu_sq(v: Any) -> Any:
        g = v[..., :128] * nn.sigmoid(v[..., 128:])
        return g, g * g

    def levels(v: Any) -> Any:
        a = snp.sin(v) * v
        b = snp.exp(a) * 0.5
        return a, b, snp.tanh(b) * a + 1.0

    rng = np.random.default_rng(9)
    for fn, width in ((glu_sq, 256), (levels, 128)):
        f = sv.jit(fn, shapes=f"b, t, {width}", hot_threshold=1, tier3=tier3)
        for b, t in [(1, 1), (2, 9), (4, 70)]:
            x = rng.standard_normal((b, t, width)).astype(np.float32)
            for _ in range(3):
                got = f(x)
            f.wait(60)
            got = f(x)
            for g, w in zip(got, fn(x), strict=True):
                np.testing.assert_allclose(g, w, rtol=2e-6, atol=2e-6)
        rec = next(r for r in f.engines[0].records() if r.variant)
        kernels = [k for r in rec.variant.regions for k in r.lowered.kernels]
        passes = [k for k in kernels if k.label.startswith("chain")]
        assert len(passes) == (2 if fn is glu_sq else 3), rec.variant.describe()
        assert all(len(k.outs) == 1 for k in passes), rec.variant.describe()
        if fn is glu_sq:  # the square reads the GLU alone, not the halves again
            assert len(passes[1].ins) == 1, rec.variant.describe()


def test_a_transposed_result_is_a_view_of_what_the_function_computed() -> None:
    """A model's last ``transpose(0, 3, 1, 2)`` (channels last to first) or ``(x + 1).T``:
    the computed tensor is the region's output and the result NumPy's transposed view of
    it, as the interpreter returns it (copied, the function was slower than interpreted:
    24.5 us against 19); a result that is also returned plain is still its own array; a
    transposed result read by an op the function runs after it gets the same values."""

    def to_chw(img: Any) -> Any:
        x = (img.astype(snp.float32) / 255.0 - 0.5) / 0.25
        return snp.transpose(x, (0, 3, 1, 2))

    def both(v: Any) -> Any:
        t = (v * 2).T
        return t, v * 2, snp.cumsum(t, axis=0).sum()

    rng = np.random.default_rng(10)
    f = sv.jit(to_chw, shapes="b, h, w, 3", hot_threshold=1, background=False)
    g = sv.jit(both, shapes="n, m", hot_threshold=1, background=False)
    for n in (1, 5, 16):
        img = rng.integers(0, 256, (2, n, n + 1, 3)).astype(np.uint8)
        got = f(img)
        np.testing.assert_allclose(got, to_chw(img), rtol=1e-6)
        assert got.shape == (2, 3, n, n + 1) and not got.flags["C_CONTIGUOUS"]
        v = rng.standard_normal((n, n + 2)).astype(np.float32)
        outs = g(v)
        for o, w in zip(outs, both(v), strict=True):
            np.testing.assert_allclose(o, w, rtol=1e-5, atol=1e-5)
        assert not np.shares_memory(outs[0], outs[1])
    rec = next(r for r in f.engines[0].records() if r.variant)
    assert "copy (result)" not in rec.variant.describe(), rec.variant.describe()


def test_a_result_that_is_a_view_of_an_argument_is_that_view() -> None:
    """A function returning its argument transposed, sliced, reshaped, flipped or with a new
    axis (a layout adapter: ``img.transpose(2, 0, 1)``), beside what it computes: each
    result shares the caller's array as the interpreter's does, is writeable as NumPy's
    view is (a broadcast is not), and an argument returned as it is is the argument itself
    (copied, ``x.T`` of 512 x 512 took 84 us against NumPy's view in 1 us)."""

    def adapt(img: Any) -> Any:
        chw = img.transpose(2, 0, 1)
        return chw, chw[:, ::-1], img.reshape(-1, 3), img[1:, :, None], img, (img * 2.0).sum()

    def spread(v: Any) -> Any:
        return snp.broadcast_to(v[None], (2, *v.shape)), v + 1

    rng = np.random.default_rng(11)
    f = sv.jit(adapt, shapes="h, w, 3", hot_threshold=1, background=False)
    ref = sv.jit(adapt, shapes="h, w, 3", enabled=False)
    g = sv.jit(spread, shapes="n", hot_threshold=1, background=False)
    for n in (2, 5, 9):
        img = rng.standard_normal((n, n + 3, 3)).astype(np.float32)
        got, want = f(img), ref(img)
        for a, b in zip(got, want, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5)
            assert a.strides == b.strides
            assert np.shares_memory(a, img) == np.shares_memory(b, img)
            assert a.flags.writeable == b.flags.writeable
        assert got[4] is img
        v = rng.standard_normal(n).astype(np.float32)
        b2, v1 = g(v)
        assert np.shares_memory(b2, v) and not b2.flags.writeable
        np.testing.assert_allclose(v1, v + 1)
    rec = next(r for r in f.engines[0].records() if r.variant)
    assert rec.variant.function.whole
    assert "copy (result)" not in rec.variant.describe(), rec.variant.describe()


def test_a_pass_over_transposed_operands_runs_in_their_memory_order() -> None:
    """A chain whose full-size operands are all one transpose moving the last axis
    (``img.transpose(0, 3, 1, 2)`` normalized, ``x.T + 1``): one pass in the operands'
    memory order, no copy, and each result the transposed view NumPy's ufuncs return, with
    NumPy's strides; a smaller operand (a per-channel mean) is read permuted. A result a
    later op of the function reads, or a chain with an operand in the other order, is
    computed as before."""
    rng = np.random.default_rng(12)
    mean = np.array([0.4, 0.5, 0.6], np.float32).reshape(1, 3, 1, 1)

    def norm(img: Any) -> Any:
        x = img.transpose(0, 3, 1, 2)
        return (x - mean) / 0.25, snp.tanh(x.T) * 2

    def used(x: Any) -> Any:
        u = snp.exp(x.T) + 1
        return u, (u * 2).sum(axis=1)

    f = sv.jit(norm, shapes="b, h, w, 3", hot_threshold=1, background=False)
    g = sv.jit(used, shapes="n, m", hot_threshold=1, background=False)
    for b, h, w in [(1, 1, 1), (2, 5, 7), (3, 40, 33)]:
        img = rng.random((b, h, w, 3)).astype(np.float32)
        for got, want in zip(f(img), norm(img), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
            wide = [d for d, n in enumerate(want.shape) if n > 1]  # a unit axis's: any
            assert [got.strides[d] for d in wide] == [want.strides[d] for d in wide]
        x = rng.standard_normal((h, w)).astype(np.float32)
        for got, want in zip(g(x), used(x), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    for jitted in (f, g):
        rec = next(r for r in jitted.engines[0].records() if r.variant)
        assert rec.variant.function.whole, rec.variant.describe()
    text = next(r for r in f.engines[0].records() if r.variant).variant.describe()
    assert "copy" not in text, text


def _paired(got: Any, want: Any) -> list[tuple[Any, Any]]:
    """The results of two calls side by side, one result or a tuple of them."""
    one = not isinstance(got, tuple)
    return list(zip((got,) if one else got, (want,) if one else want, strict=True))


def test_a_reshaped_copy_is_written_once_and_planes_interleave() -> None:
    """A pixel shuffle (depth to space), channels-last patches and planes to pixels
    (``transpose(1, 2, 0).reshape(-1)``): the transposing copy interleaves 2, 3 or 4 planes
    row by row, and the last reshape of the copy is NumPy's reshaped view of it, not a
    second copy (pixel shuffle of [4, 16, 64, 65]: 226 us before both, 32 after; NumPy's
    reshape copies: 380); 5 planes, and every other pixel, take the general copy."""
    rng = np.random.default_rng(13)

    def shuffle(x: Any) -> Any:
        b, c, h, w = x.shape
        y = x.reshape(b, c // 4, 2, 2, h, w).transpose(0, 1, 4, 2, 5, 3)
        return y.reshape(b, c // 4, h * 2, w * 2)

    def planes(x: Any) -> Any:  # 2, 3, 4 and 5 planes to pixels; every other pixel
        every_other = (x[:3] + 1).transpose(1, 2, 0)[:, ::2].reshape(-1)
        return (*((x[:k] * 2).transpose(1, 2, 0).reshape(-1) for k in (2, 3, 4, 5)), every_other)

    def patches(x: Any) -> Any:
        b, c, h, w = x.shape
        y = x.reshape(b, c, h // 4, 4, w // 4, 4).transpose(0, 2, 4, 3, 5, 1)
        return y.reshape(b, (h // 4) * (w // 4), 16 * c)

    for fn, shapes, sizes in [
        (shuffle, "b, 8, h, w", [(1, 8, 1, 1), (2, 8, 5, 9), (3, 8, 33, 40)]),
        (planes, "5, h, w", [(5, 1, 2), (5, 7, 9), (5, 40, 64)]),
        (patches, "b, 3, 4 * p, 4 * q", [(1, 3, 4, 4), (2, 3, 8, 12), (2, 3, 64, 32)]),
    ]:
        j = sv.jit(fn, shapes=shapes, hot_threshold=1, background=False)
        for size in sizes:
            x = rng.standard_normal(size).astype(np.float32)
            for g, w in _paired(j(x), fn(x)):
                np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
                assert g.shape == w.shape and g.flags.c_contiguous
        rec = next(r for r in j.engines[0].records() if r.variant)
        assert rec.variant.function.whole
        assert "copy (result)" not in rec.variant.describe(), rec.variant.describe()


def test_a_product_with_one_column_is_a_pass_that_sums_rows() -> None:
    """``img @ [0.299, 0.587, 0.114]`` (grayscale), ``einsum('bhwc,c->bhw')`` and a score
    head ``relu(h @ v + b)`` with ``v`` of one column: a pass of the tile interpreter
    multiplying by the column and summing each row (the dense kernel computed panels of 16
    or 32 columns: 179 us for the grayscale of [8, 96, 96, 3] against NumPy's 52, this 50);
    the interpreter's values, and per-image min-max scaling after it."""
    rng = np.random.default_rng(14)
    rgb = np.float32([0.299, 0.587, 0.114])
    v = rng.standard_normal((40, 1)).astype(np.float32)

    def gray(img: Any) -> Any:
        y = snp.einsum("bhwc,c->bhw", img, rgb)
        lo, hi = y.min(axis=(1, 2), keepdims=True), y.max(axis=(1, 2), keepdims=True)
        return img @ rgb, (y - lo) / (hi - lo + 1e-6)

    def head(h: Any) -> Any:
        return snp.maximum(h @ v + 0.25, 0.0)

    for fn, spec, shapes in [(gray, "b, h, w, 3", [(1, 1, 1, 3), (2, 5, 7, 3), (3, 40, 33, 3)]),
                             (head, "n, 40", [(1, 40), (9, 40), (300, 40)])]:  # fmt: skip
        f = sv.jit(fn, shapes=spec, hot_threshold=1, background=False)
        ref = sv.jit(fn, shapes=spec, enabled=False)
        for shape in shapes:
            x = rng.random(shape).astype(np.float32)
            for g, w in _paired(f(x), ref(x)):
                np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5)
        rec = next(r for r in f.engines[0].records() if r.variant)
        assert rec.variant.function.whole, rec.variant.describe()
        labels = [k.label for r in rec.variant.regions for k in r.lowered.kernels]
        assert "matvec[1]" in labels and not any(x.startswith("dense") for x in labels), labels
