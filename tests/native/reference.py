"""float64 references of the kernels' math, the accuracy measures the tests use, and a
count of the pages a warm kernel faults in."""

from __future__ import annotations

import math
import subprocess
import sys
from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]

_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def erf64(x: Array) -> Array:
    return _erf(np.asarray(x, np.float64))  # type: ignore[no-any-return]


def sigmoid64(h: Array) -> Array:
    """1 / (1 + exp(-h)) without overflow or cancellation."""
    h = np.asarray(h, np.float64)
    e = np.exp(-np.abs(h))
    return np.where(h >= 0, 1.0 / (1.0 + e), e / (1.0 + e))  # type: ignore[no-any-return]


def act64(name: str, h: Array) -> Array:
    """The activations of the fused epilogues in float64."""
    h = np.asarray(h, np.float64)
    if name == "none":
        return h
    if name == "relu":
        return np.maximum(h, 0.0)
    if name == "gelu_tanh":
        # 0.5 h (1 + tanh(u)) == h sigmoid(2u): no cancellation for negative h
        return h * sigmoid64(2.0 * math.sqrt(2.0 / math.pi) * (h + 0.044715 * h**3))
    if name == "gelu_erf":
        return 0.5 * h * _erfc(-h / math.sqrt(2.0))  # type: ignore[no-any-return]
    if name == "silu":
        return h * sigmoid64(h)
    if name == "sigmoid":
        return sigmoid64(h)
    if name == "tanh":
        return np.tanh(h)
    if name == "hard_swish":
        return h * np.clip(h + 3.0, 0.0, 6.0) / 6.0
    if name == "relu6":
        return np.clip(h, 0.0, 6.0)  # type: ignore[no-any-return]
    if name == "leaky_relu":  # the slope by the name alone
        return np.where(h < 0, np.float64(np.float32(0.01)) * h, h)
    raise ValueError(name)


def rel_err(y: Array, ref: Array) -> float:
    """max |y - ref| / max |ref| (0 for an empty or all-zero reference)."""
    ref = np.asarray(ref, np.float64)
    scale = float(np.abs(ref).max()) if ref.size else 0.0
    if scale == 0.0:
        return float(np.abs(np.asarray(y, np.float64) - ref).max()) if ref.size else 0.0
    return float(np.abs(np.asarray(y, np.float64) - ref).max()) / scale


def ulp_err(y: Array, ref: Array) -> Array:
    """|y - ref| in units of the float32 spacing at ref, element by element."""
    ref = np.asarray(ref, np.float64)
    spacing = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    spacing = np.maximum(spacing, np.float64(np.finfo(np.float32).smallest_subnormal))
    return np.abs(np.asarray(y, np.float64) - ref) / spacing  # type: ignore[no-any-return]


_WARM_FAULTS = """
import resource, sys
import numpy as np
from shapevm import native
rng = np.random.default_rng(3)
{setup}
call = lambda: {call}
for _ in range(5):
    call()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    call()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def warm_faults(setup: str, call: str) -> int:
    """Pages a fresh process faults in over 20 calls of ``call`` after 5 (every thread of
    the pool counts): a kernel that keeps its scratch faults in none. Fresh, so that glibc's
    thresholds are its defaults, not what the tests before left them at."""
    code = _WARM_FAULTS.format(setup=setup, call=call)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1])


NO_FAULT_COUNTS = "the debug build's allocator keeps freed memory in quarantine"
"""Why the fault counts are not checked on the debug build."""
