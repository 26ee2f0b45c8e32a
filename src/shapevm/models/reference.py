"""The workloads in float64, written plainly: the yardstick that accuracy is measured against.

Deliberately a second implementation, not the fast one with a dtype switch: convolutions are
direct (a sum over the nine kernel taps, NCHW throughout), attention is the reference code of
``BENCHMARKS.md`` line for line, and nothing is computed in place.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

Weights = dict[str, np.ndarray]
Model = Callable[[np.ndarray], np.ndarray]

EPS = 1e-5


def gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def layer_norm(x: np.ndarray, gain: np.ndarray, beta: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    out: np.ndarray = (x - mean) / np.sqrt(var + EPS) * gain + beta
    return out


def softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    out: np.ndarray = e / e.sum(axis=axis, keepdims=True)
    return out


def conv3x3(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int) -> np.ndarray:
    """``[n, c, h, w]`` conv ``[out, c, 3, 3]`` with padding 1, as PyTorch's ``conv2d``."""
    n, _, h, wd = x.shape
    ho, wo = (h - 1) // stride + 1, (wd - 1) // stride + 1
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    rows, cols = stride * (ho - 1) + 1, stride * (wo - 1) + 1
    y = np.zeros((n, ho, wo, w.shape[0])) + b
    for i in range(3):
        for j in range(3):
            tap = xp[:, :, i : i + rows : stride, j : j + cols : stride]
            y += np.tensordot(tap, w[:, :, i, j], axes=([1], [1]))  # [n, ho, wo, out]
    out: np.ndarray = y.transpose(0, 3, 1, 2)
    return out


def mlp(p: Weights) -> Model:
    def run(x: np.ndarray) -> np.ndarray:
        x = x.astype(np.float64)
        h = np.maximum(x @ p["fc1.weight"].T + p["fc1.bias"], 0.0)
        h = gelu(h @ p["fc2.weight"].T + p["fc2.bias"])
        h = h @ p["fc3.weight"].T + p["fc3.bias"]
        return layer_norm(x + h, p["ln.weight"], p["ln.bias"])

    return run


def cnn(p: Weights) -> Model:
    def run(x: np.ndarray) -> np.ndarray:
        h = x.astype(np.float64)
        for name, stride in (("conv1", 1), ("conv2", 2), ("conv3", 1)):
            h = np.maximum(conv3x3(h, p[f"{name}.weight"], p[f"{name}.bias"], stride), 0.0)
        out: np.ndarray = h.mean(axis=(2, 3)) @ p["fc.weight"].T + p["fc.bias"]
        return out

    return run


def block(p: Weights) -> Model:
    def run(x: np.ndarray) -> np.ndarray:
        x = x.astype(np.float64)
        b, s, _ = x.shape
        h = layer_norm(x, p["ln1.weight"], p["ln1.bias"])
        qkv = (h @ p["attn.qkv.weight"].T + p["attn.qkv.bias"]).reshape(b, s, 3, 4, 64)
        qkv = qkv.transpose(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = softmax((q @ k.transpose(0, 1, 3, 2)) / 8.0, axis=-1)
        o = (att @ v).transpose(0, 2, 1, 3).reshape(b, s, 256)
        x = x + o @ p["attn.proj.weight"].T + p["attn.proj.bias"]
        h = layer_norm(x, p["ln2.weight"], p["ln2.bias"])
        h = gelu(h @ p["mlp.fc1.weight"].T + p["mlp.fc1.bias"])
        out: np.ndarray = x + h @ p["mlp.fc2.weight"].T + p["mlp.fc2.bias"]
        return out

    return run


MODELS: dict[str, Callable[[Weights], Model]] = {"W1": mlp, "W2": cnn, "W3": block}
