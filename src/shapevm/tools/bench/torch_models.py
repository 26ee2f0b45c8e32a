"""The workloads as ``torch.nn.Module`` objects for the ``torch-eager`` and ``torch-compile``
peers (the latter wraps the module in ``torch.compile(dynamic=True)``). Imported only by the
measuring process."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
from torch.nn import functional

from shapevm.models.workloads import EPS, HEAD_DIM, HEADS, WIDTH


class _Model(torch.nn.Module):  # type: ignore[misc, unused-ignore]  # Any without torch
    """The weights as buffers (``fc1.weight`` is stored as ``fc1_weight``)."""

    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        super().__init__()
        for name, value in weights.items():
            self.register_buffer(name.replace(".", "_"), torch.from_numpy(value.copy()))

    def w(self, name: str) -> torch.Tensor:
        value: torch.Tensor = getattr(self, name.replace(".", "_"))
        return value

    def linear(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return functional.linear(x, self.w(f"{name}.weight"), self.w(f"{name}.bias"))

    def layer_norm(self, x: torch.Tensor, name: str) -> torch.Tensor:
        weight, bias = self.w(f"{name}.weight"), self.w(f"{name}.bias")
        return functional.layer_norm(x, (x.shape[-1],), weight, bias, EPS)


def _gelu(x: torch.Tensor) -> torch.Tensor:
    return functional.gelu(x, approximate="tanh")


class MLP(_Model):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.linear(x, "fc1"))
        h = self.linear(_gelu(self.linear(h, "fc2")), "fc3")
        return self.layer_norm(x + h, "ln")


class CNN(_Model):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x
        for name, stride in (("conv1", 1), ("conv2", 2), ("conv3", 1)):
            weight, bias = self.w(f"{name}.weight"), self.w(f"{name}.bias")
            h = torch.relu(functional.conv2d(h, weight, bias, stride=stride, padding=1))
        return self.linear(h.mean(dim=(2, 3)), "fc")


class Block(_Model):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        qkv = self.linear(self.layer_norm(x, "ln1"), "attn.qkv")
        qkv = qkv.reshape(b, s, 3, HEADS, HEAD_DIM).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = torch.softmax((q @ k.transpose(-2, -1)) / math.sqrt(HEAD_DIM), dim=-1)
        o = (att @ v).transpose(1, 2).reshape(b, s, WIDTH)
        x = x + self.linear(o, "attn.proj")
        h = _gelu(self.linear(self.layer_norm(x, "ln2"), "mlp.fc1"))
        return x + self.linear(h, "mlp.fc2")


MODELS: dict[str, type[_Model]] = {"W1": MLP, "W2": CNN, "W3": Block}


def build_torch(
    workload_id: str, weights: dict[str, np.ndarray], threads: int, compile: bool
) -> Callable[[np.ndarray], np.ndarray]:
    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # only settable before the first parallel region; keep what is set
        pass
    module = MODELS[workload_id](weights).eval()
    fn = torch.compile(module, dynamic=True) if compile else module

    def run(x: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            y: np.ndarray = fn(torch.from_numpy(x)).numpy()
        return y

    return run
