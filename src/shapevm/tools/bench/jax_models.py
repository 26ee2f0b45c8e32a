"""The workloads in ``jax.numpy`` for the ``jax`` peer: one ``jax.jit`` per model, weights passed
as arguments (as a parameter pytree is), so each new input shape is a new compile, which is
what the benchmark measures. Imported only by the measuring process."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from shapevm.models.workloads import EPS, HEAD_DIM, HEADS, WIDTH

Params = dict[str, Any]


def _gelu(x: Any) -> Any:
    return 0.5 * x * (1.0 + jnp.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


def _layer_norm(x: Any, p: Params, name: str) -> Any:
    mean = x.mean(axis=-1, keepdims=True)
    var = jnp.square(x - mean).mean(axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + EPS) * p[f"{name}.weight"] + p[f"{name}.bias"]


def _linear(x: Any, p: Params, name: str) -> Any:
    return x @ p[f"{name}.weight"].T + p[f"{name}.bias"]


def mlp(p: Params, x: Any) -> Any:
    h = jax.nn.relu(_linear(x, p, "fc1"))
    h = _linear(_gelu(_linear(h, p, "fc2")), p, "fc3")
    return _layer_norm(x + h, p, "ln")


def cnn(p: Params, x: Any) -> Any:
    h = x
    for name, stride in (("conv1", 1), ("conv2", 2), ("conv3", 1)):
        h = jax.lax.conv_general_dilated(
            h,
            p[f"{name}.weight"],
            (stride, stride),
            ((1, 1), (1, 1)),
            dimension_numbers=("NCHW", "OIHW", "NCHW"),
        )
        h = jax.nn.relu(h + p[f"{name}.bias"][:, None, None])
    return _linear(h.mean(axis=(2, 3)), p, "fc")


def block(p: Params, x: Any) -> Any:
    b, s, _ = x.shape
    qkv = _linear(_layer_norm(x, p, "ln1"), p, "attn.qkv")
    qkv = qkv.reshape(b, s, 3, HEADS, HEAD_DIM).transpose(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    att = jax.nn.softmax((q @ k.transpose(0, 1, 3, 2)) / math.sqrt(HEAD_DIM), axis=-1)
    o = (att @ v).transpose(0, 2, 1, 3).reshape(b, s, WIDTH)
    x = x + _linear(o, p, "attn.proj")
    h = _gelu(_linear(_layer_norm(x, p, "ln2"), p, "mlp.fc1"))
    return x + _linear(h, p, "mlp.fc2")


MODELS: dict[str, Callable[[Params, Any], Any]] = {"W1": mlp, "W2": cnn, "W3": block}


def build_jax(
    workload_id: str, weights: dict[str, np.ndarray]
) -> Callable[[np.ndarray], np.ndarray]:
    params = {k: jnp.asarray(v) for k, v in weights.items()}
    jitted = jax.jit(MODELS[workload_id])

    def run(x: np.ndarray) -> np.ndarray:
        return np.asarray(jitted(params, x))  # np.asarray waits for the result

    return run
