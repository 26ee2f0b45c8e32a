"""The benchmark workloads W1 (MLP), W2 (CNN) and W3 (transformer block), in plain NumPy.

Everything here follows ``BENCHMARKS.md``: PyTorch layouts (a linear weight is ``[out, in]``, a
conv weight ``[out, in, 3, 3]``), weights drawn from ``numpy.random.default_rng`` with a fixed
seed per workload and scaled by ``1/sqrt(fan_in)``, biases ``0.1 * N(0, 1)``, layer-norm gains
``1 + 0.1 * N(0, 1)`` and layer-norm betas ``0.1 * N(0, 1)`` (non-zero, so that the shift is
exercised too), eps ``1e-5``, GELU in its tanh form. Inputs are ``N(0, 1)``.

>>> from shapevm.models import workloads as wl
>>> [w.id for w in wl.WORKLOADS.values()]
['W1', 'W2', 'W3']
>>> wl.WORKLOADS["W2"].spec, wl.WORKLOADS["W2"].shapes[1], wl.WORKLOADS["W2"].label((1, 3, 96, 128))
('b, 3, h, w', (1, 3, 96, 128), '1×96×128')
>>> weights = wl.make_weights("W1")
>>> x = wl.make_input("W1", (3, 256), seed=0)
>>> y = wl.numpy_eager("W1", weights)(x)
>>> y.shape, y.dtype
((3, 256), dtype('float32'))
>>> wl.accuracy(y, wl.reference_f64("W1", weights)(x)) < 1e-5
True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from shapevm.models import reference

Shape = tuple[int, ...]
Weights = dict[str, np.ndarray]
Model = Callable[[np.ndarray], np.ndarray]

EPS = 1e-5
GELU_C = math.sqrt(2.0 / math.pi)
WIDTH, HEADS, HEAD_DIM, MLP_DIM = 256, 4, 64, 1024


@dataclass(frozen=True)
class Workload:
    """One workload: its id, what it is, its input spec and its shapes in benchmark order.

    ``spec`` names the input's dimensions as ``BENCHMARKS.md`` writes them; the named
    (symbolic) ones are the dimensions that change along the stream.
    """

    id: str
    description: str
    spec: str
    shapes: tuple[Shape, ...]
    seed: int
    # (name, shape, kind): kind is "weight" (fan in = product of all but the first dim),
    # "bias", "gain" or "beta". Order matters: it is the order of the draws.
    params: tuple[tuple[str, Shape, str], ...]

    @property
    def dims(self) -> tuple[str, ...]:
        return tuple(d.strip() for d in self.spec.split(","))

    def label(self, shape: Shape) -> str:
        """The values of the symbolic dimensions, e.g. ``b=3`` or ``1×64×64``."""
        values = [str(v) for d, v in zip(self.dims, shape, strict=True) if not d.isdigit()]
        if len(values) == 1:
            return f"{self.dims[0]}={values[0]}"
        return "×".join(values)


def _linear(name: str, n_in: int, n_out: int) -> tuple[tuple[str, Shape, str], ...]:
    return ((f"{name}.weight", (n_out, n_in), "weight"), (f"{name}.bias", (n_out,), "bias"))


def _conv(name: str, c_in: int, c_out: int) -> tuple[tuple[str, Shape, str], ...]:
    return ((f"{name}.weight", (c_out, c_in, 3, 3), "weight"), (f"{name}.bias", (c_out,), "bias"))


def _norm(name: str, n: int) -> tuple[tuple[str, Shape, str], ...]:
    return ((f"{name}.weight", (n,), "gain"), (f"{name}.bias", (n,), "beta"))


WORKLOADS: dict[str, Workload] = {
    w.id: w
    for w in (
        Workload(
            "W1",
            "MLP 256→1024 relu →1024 gelu →256, residual, layer norm",
            "b, 256",
            tuple((b, 256) for b in (1, 3, 8, 17, 32, 64)),
            seed=1,
            params=_linear("fc1", 256, 1024)
            + _linear("fc2", 1024, 1024)
            + _linear("fc3", 1024, 256)
            + _norm("ln", 256),
        ),
        Workload(
            "W2",
            "CNN conv3×3 3→32, 32→32 stride 2, 32→64 (relu), global average pool, dense 64→10",
            "b, 3, h, w",
            ((1, 3, 64, 64), (1, 3, 96, 128), (4, 3, 64, 64), (2, 3, 128, 128), (1, 3, 224, 224)),
            seed=2,
            params=_conv("conv1", 3, 32)
            + _conv("conv2", 32, 32)
            + _conv("conv3", 32, 64)
            + _linear("fc", 64, 10),
        ),
        Workload(
            "W3",
            "pre-norm transformer block, width 256, 4 heads of 64, MLP 1024",
            "b, s, 256",
            ((1, 16, 256), (1, 37, 256), (2, 64, 256), (4, 128, 256), (1, 200, 256)),
            seed=3,
            params=_norm("ln1", WIDTH)
            + _linear("attn.qkv", WIDTH, 3 * WIDTH)
            + _linear("attn.proj", WIDTH, WIDTH)
            + _norm("ln2", WIDTH)
            + _linear("mlp.fc1", WIDTH, MLP_DIM)
            + _linear("mlp.fc2", MLP_DIM, WIDTH),
        ),
    )
}


def get_workload(workload_id: str) -> Workload:
    """The workload called ``workload_id``; ``KeyError`` naming the known ones otherwise."""
    try:
        return WORKLOADS[workload_id]
    except KeyError:
        known = ", ".join(WORKLOADS)
        raise KeyError(f"unknown workload {workload_id!r} (known: {known})") from None


def make_weights(workload_id: str) -> Weights:
    """The workload's float32 weights, the same on every call and every machine."""
    w = get_workload(workload_id)
    rng = np.random.default_rng(w.seed)
    out: Weights = {}
    for name, shape, kind in w.params:
        z = rng.standard_normal(shape)
        if kind == "weight":
            value = z / math.sqrt(math.prod(shape[1:]))
        elif kind == "gain":
            value = 1.0 + 0.1 * z
        else:
            value = 0.1 * z
        out[name] = value.astype(np.float32)
    return out


def make_input(workload_id: str, shape: Shape, seed: int) -> np.ndarray:
    """A float32 ``N(0, 1)`` input of ``shape`` (checked against the workload's spec)."""
    w = get_workload(workload_id)
    fixed = [(int(d), v) for d, v in zip(w.dims, shape, strict=False) if d.isdigit()]
    if len(shape) != len(w.dims) or any(d != v for d, v in fixed):
        raise ValueError(f"shape {shape} does not match {workload_id}'s input [{w.spec}]")
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def stream_shapes(
    workload_id: str, n: int = 200, seed: int = 42, shapes: Sequence[Shape] | None = None
) -> list[Shape]:
    """``n`` shapes made of repeated random permutations of the workload's shape list (or of
    ``shapes``, for a shorter stream over fewer shapes)."""
    pool = list(get_workload(workload_id).shapes if shapes is None else shapes)
    if not pool:
        raise ValueError("stream_shapes needs at least one shape to permute")
    rng = np.random.default_rng(seed)
    out: list[Shape] = []
    while len(out) < n:
        out.extend(pool[i] for i in rng.permutation(len(pool)))
    return out[:n]


def random_shapes(workload_id: str, n: int, seed: int) -> list[Shape]:
    """``n`` further input shapes within sensible ranges, for tests beyond the fixed list.

    W1: b in [1, 128]; W2: b in [1, 4], h and w in [1, 160]; W3: b in [1, 4], s in [1, 256].
    """
    get_workload(workload_id)
    rng = np.random.default_rng(seed)

    def one() -> Shape:
        if workload_id == "W1":
            return (int(rng.integers(1, 129)), 256)
        if workload_id == "W2":
            b, h, w = rng.integers(1, 5), rng.integers(1, 161), rng.integers(1, 161)
            return (int(b), 3, int(h), int(w))
        return (int(rng.integers(1, 5)), int(rng.integers(1, 257)), WIDTH)

    return [one() for _ in range(n)]


def accuracy(y: np.ndarray, ref: np.ndarray) -> float:
    """``max |y - ref| / max |ref|``, computed in float64."""
    if y.shape != ref.shape:
        raise ValueError(f"output shape {y.shape} differs from the reference's {ref.shape}")
    ref64 = np.asarray(ref, dtype=np.float64)
    err = np.max(np.abs(np.asarray(y, dtype=np.float64) - ref64))
    return float(err / np.max(np.abs(ref64)))


# --- float32 eager NumPy, written for speed the way a NumPy user would -------------------------


def _gelu(h: np.ndarray) -> np.ndarray:
    """GELU (tanh form) of ``h``, overwriting ``h``: the MLP's widest temporaries stay few."""
    t = h * h
    t *= 0.044715
    t += 1.0
    t *= h
    t *= GELU_C
    np.tanh(t, out=t)
    t += 1.0
    h *= t
    h *= 0.5
    return h


def _layer_norm(x: np.ndarray, gain: np.ndarray, beta: np.ndarray) -> np.ndarray:
    xc: np.ndarray = x - x.mean(axis=-1, keepdims=True)
    inv = 1.0 / np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + EPS)
    xc *= inv
    xc *= gain
    xc += beta
    return xc


def _eager_mlp(p: Weights) -> Model:
    w1, b1, w2, b2 = p["fc1.weight"].T, p["fc1.bias"], p["fc2.weight"].T, p["fc2.bias"]
    w3, b3, g, beta = p["fc3.weight"].T, p["fc3.bias"], p["ln.weight"], p["ln.bias"]

    def mlp(x: np.ndarray) -> np.ndarray:
        h = x @ w1 + b1
        np.maximum(h, 0.0, out=h)
        h = _gelu(h @ w2 + b2)
        y = h @ w3
        y += b3
        y += x
        return _layer_norm(y, g, beta)

    return mlp


def _conv3x3_relu_nhwc(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int) -> np.ndarray:
    """im2col over a zero-padded NHWC input, then one matrix product; ``w`` is ``[9*c, out]``
    with rows ordered (kh, kw, c) so that the patch copy reads channels contiguously."""
    n, h, wd, c = x.shape
    xp = np.zeros((n, h + 2, wd + 2, c), dtype=x.dtype)
    xp[:, 1:-1, 1:-1] = x
    win = sliding_window_view(xp, (3, 3), axis=(1, 2))[:, ::stride, ::stride]
    ho, wo = win.shape[1], win.shape[2]
    cols = win.transpose(0, 1, 2, 4, 5, 3).reshape(n * ho * wo, 9 * c)
    y: np.ndarray = cols @ w
    y += b
    np.maximum(y, 0.0, out=y)
    return y.reshape(n, ho, wo, w.shape[1])


def _conv_matrix(w: np.ndarray) -> np.ndarray:
    """``[out, in, 3, 3]`` as the ``[9*in, out]`` matrix that im2col patches multiply."""
    return np.ascontiguousarray(w.transpose(2, 3, 1, 0).reshape(-1, w.shape[0]))


def _eager_cnn(p: Weights) -> Model:
    convs = [
        (_conv_matrix(p[f"{name}.weight"]), p[f"{name}.bias"], stride)
        for name, stride in (("conv1", 1), ("conv2", 2), ("conv3", 1))
    ]
    wf, bf = p["fc.weight"].T, p["fc.bias"]

    def cnn(x: np.ndarray) -> np.ndarray:
        h = np.ascontiguousarray(x.transpose(0, 2, 3, 1))  # channels last for the matmuls
        for w, b, stride in convs:
            h = _conv3x3_relu_nhwc(h, w, b, stride)
        pooled = h.mean(axis=(1, 2))
        out: np.ndarray = pooled @ wf + bf
        return out

    return cnn


def _eager_block(p: Weights) -> Model:
    g1, be1, g2, be2 = p["ln1.weight"], p["ln1.bias"], p["ln2.weight"], p["ln2.bias"]
    wqkv, bqkv = p["attn.qkv.weight"].T, p["attn.qkv.bias"]
    wo, bo = p["attn.proj.weight"].T, p["attn.proj.bias"]
    w1, b1 = p["mlp.fc1.weight"].T, p["mlp.fc1.bias"]
    w2, b2 = p["mlp.fc2.weight"].T, p["mlp.fc2.bias"]

    def block(x: np.ndarray) -> np.ndarray:
        b, s, _ = x.shape
        h = _layer_norm(x, g1, be1)
        qkv = (h @ wqkv + bqkv).reshape(b, s, 3, HEADS, HEAD_DIM).transpose(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = q @ k.transpose(0, 1, 3, 2)
        att *= 1.0 / math.sqrt(HEAD_DIM)
        att -= att.max(axis=-1, keepdims=True)
        np.exp(att, out=att)
        att /= att.sum(axis=-1, keepdims=True)
        o = (att @ v).transpose(0, 2, 1, 3).reshape(b, s, WIDTH)
        x = x + (o @ wo + bo)
        h = _gelu(_layer_norm(x, g2, be2) @ w1 + b1)
        y: np.ndarray = h @ w2
        y += b2
        y += x
        return y

    return block


_EAGER: dict[str, Callable[[Weights], Model]] = {
    "W1": _eager_mlp,
    "W2": _eager_cnn,
    "W3": _eager_block,
}


def numpy_eager(workload_id: str, weights: Weights) -> Model:
    """The workload as a float32 NumPy function of its input (the NumPy peer)."""
    get_workload(workload_id)
    return _EAGER[workload_id](weights)


def reference_f64(workload_id: str, weights: Weights) -> Model:
    """The workload computed in float64 (weights and input cast up), the accuracy yardstick.

    Written independently of :func:`numpy_eager` (direct convolution, no in-place tricks) so
    that the two check each other.
    """
    get_workload(workload_id)
    p = {k: v.astype(np.float64) for k, v in weights.items()}
    return reference.MODELS[workload_id](p)
