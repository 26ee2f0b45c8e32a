"""Lowering works on the op graph, not on spelling: dense layers with their bias,
activation and residual are found whichever way a user writes them, and the native result
matches the interpreter's."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import shapevm as sv
import shapevm.numpy as snp
from shapevm import lax, native
from shapevm.frontend.numpy_api import _as_tensor
from shapevm.frontend.tracer import bind_op
from shapevm.jit.backend.compiler import Compiler
from shapevm.jit.backend.function import (
    F64_HINT,
    MOVES_ONLY,
    SCALARS_ONLY,
    f64_hint,
    lower_function,
)
from shapevm.jit.backend.registry import LOWERINGS
from shapevm.jit.errors import NoNativeCode
from shapevm.jit.regions import find_regions
from shapevm.runtime.interpreter import Executable

RNG = np.random.default_rng(3)
OWN_RNG = np.random.default_rng(17)  # newer tests: draws that leave RNG's sequence as it was
W = (RNG.standard_normal((48, 32)) / 6).astype(np.float32)  # a PyTorch [out, in] weight
BIAS = RNG.standard_normal(48).astype(np.float32)
C = math.sqrt(2.0 / math.pi)
COL_MEAN = RNG.standard_normal(48).astype(np.float32)
COL_STD = (0.5 + RNG.random((1, 48))).astype(np.float32)
COL_GAMMA = RNG.standard_normal(48).astype(np.float32)


def lowered(fn: Callable[..., Any], width: int = 32) -> tuple[Any, Any, Any]:
    (b,) = sv.symbolic_shape("b")
    exp = sv.export(sv.jit(fn))(sv.ShapeDtypeStruct((b, width), np.float32))
    ex = Executable(exp.program)
    return exp, ex, lower_function(ex, find_regions(ex.fn, ex.program))


def labels(nf: Any) -> list[str]:
    return [k.label for r in nf.regions for k in r.lowered.kernels]


def run_both(
    exp: Any,
    ex: Executable,
    nf: Any,
    n: int,
    width: int = 32,
    rtol: float = 2e-5,
    atol: float = 2e-5,
) -> None:
    """The interpreter's result against the native regions' (spliced into its plan)."""
    from shapevm.jit.backend.variant import Variant

    x = RNG.standard_normal((n, width)).astype(np.float32)
    want = exp.call(x)
    variant = Variant(ex, ("exact", (n,)), nf, {"b": n})
    (got,) = variant.run([x], {"b": n})
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)  # NaN and inf must match


def native_agrees(
    fn: Callable[[Any], Any],
    dims: str,
    last: int,
    shapes: list[tuple[int, ...]],
    prepare: Callable[[np.ndarray[Any, Any]], list[np.ndarray[Any, Any]]] = lambda x: [x],
) -> tuple[Any, list[str]]:
    """``fn`` exported over ``(*dims, last)`` and jitted (native from its first call): each
    of ``shapes`` (values of ``dims``), as the arrays ``prepare`` makes of a random input,
    agrees with the interpreter. The variant, and the labels of its kernels."""
    spec = sv.ShapeDtypeStruct((*sv.symbolic_shape(dims), last), np.float32)
    exp = sv.export(sv.jit(fn))(spec)
    jitted = exp.jit(hot_threshold=1, background=False, tier3=False)
    for shape in shapes:
        for arg in prepare(OWN_RNG.standard_normal((*shape, last)).astype(np.float32)):
            np.testing.assert_allclose(jitted(arg), exp.call(arg), rtol=2e-5, atol=2e-5)
    rec = next(r for r in jitted.engines[0].records() if r.variant)
    return rec.variant, [k.label for r in rec.variant.regions for k in r.lowered.kernels]


SPELLINGS: dict[str, tuple[Callable[[Any], Any], str]] = {
    "x @ W.T + b": (lambda x: x @ W.T + BIAS, "dense+bias"),
    "b + x @ W.T": (lambda x: BIAS + x @ W.T, "dense+bias"),
    "bias as a row": (lambda x: x @ W.T + BIAS[None, :], "dense+bias"),
    "relu as maximum(h, 0)": (lambda x: snp.maximum(x @ W.T + BIAS, 0.0), "dense+bias+relu"),
    "relu as maximum(0, h)": (lambda x: snp.maximum(0.0, x @ W.T + BIAS), "dense+bias+relu"),
    "relu as where": (
        lambda x: snp.where((x @ W.T + BIAS) > 0, x @ W.T + BIAS, 0.0),
        None,  # two products: no single dense
    ),
    "gelu, tanh form": (
        lambda x: (lambda h: 0.5 * h * (1 + snp.tanh(C * (h + 0.044715 * h**3))))(x @ W.T + BIAS),
        "dense+bias+gelu_tanh",
    ),
    "gelu, tanh form reordered": (
        lambda x: (lambda h: h * (snp.tanh((h * h * h * 0.044715 + h) * C) + 1.0) * 0.5)(
            x @ W.T + BIAS
        ),
        "dense+bias+gelu_tanh",
    ),
    "gelu, erf form": (
        lambda x: (
            (lambda h: 0.5 * h * (1 + sv.lax.erf(h / math.sqrt(2.0))))(x @ W.T + BIAS)
            if hasattr(sv, "lax") and hasattr(sv.lax, "erf")
            else (lambda h: 0.5 * h * (1 + snp.erf(h / math.sqrt(2.0))))(x @ W.T + BIAS)
        ),
        "dense+bias+gelu_erf",
    ),
    "silu as h * sigmoid(h)": (
        lambda x: (lambda h: h * (1.0 / (1.0 + snp.exp(-h))))(x @ W.T + BIAS),
        "dense+bias+silu",
    ),
    "tanh": (lambda x: snp.tanh(x @ W.T + BIAS), "dense+bias+tanh"),
    "hard swish as x * clip(x + 3, 0, 6) / 6": (
        lambda x: (lambda h: h * snp.clip(h + 3.0, 0.0, 6.0) / 6.0)(x @ W.T + BIAS),
        "dense+bias+hard_swish",
    ),
    "leaky relu as maximum(h, 0.1 * h)": (
        lambda x: (lambda h: snp.maximum(h, 0.1 * h))(x @ W.T + BIAS),
        "dense+bias+leaky_relu(0.1)",
    ),
    "leaky relu as where(h > 0, h, h * 0.2)": (
        lambda x: (lambda h: snp.where(h > 0, h, h * 0.2))(x @ W.T + BIAS),
        "dense+bias+leaky_relu(0.2)",
    ),
    "leaky relu as maximum(0.2 * h, h), a constant scale first": (
        lambda x: (lambda h: snp.maximum(h * 0.2, h))(x @ W.T * 0.5),
        "dense+leaky_relu(0.2)",
    ),
    "hard swish with minimum and maximum, times 1/6": (
        lambda x: (lambda h: h * (snp.minimum(snp.maximum(h + 3.0, 0.0), 6.0) * (1 / 6)))(
            x @ W.T + BIAS
        ),
        "dense+bias+hard_swish",
    ),
    "residual": (lambda x: x @ W[:32].T + x, "dense+residual"),
    # a gated linear unit: the second product takes the first branch's result as its gate
    "SwiGLU, the gate first": (
        lambda x: (lambda g: g * (1.0 / (1.0 + snp.exp(-g))))(x @ W.T) * (x @ W[::-1].T),
        "dense*gate",
    ),
    "SwiGLU, the up projection first": (
        lambda x: (x @ W[::-1].T + BIAS) * (lambda g: g / (1.0 + snp.exp(-g)))(x @ W.T),
        "dense+silu*gate",
    ),
    "a scale after the product": (lambda x: (x @ W.T) * 0.5, "dense"),
    "a temperature": (lambda x: (x @ W.T + BIAS) / 1.7, "dense+bias"),
    "a batch norm written out, then relu": (
        lambda x: snp.maximum((x @ W.T - COL_MEAN) / COL_STD * COL_GAMMA + BIAS, 0.0),
        "dense+bias+relu",
    ),
    "a constant minus the product": (lambda x: BIAS - x @ W.T, "dense+bias"),
}


@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_dense_found_in_every_spelling(name: str) -> None:
    fn, label = SPELLINGS[name]
    width = 32
    exp, ex, nf = lowered(fn, width)
    if label is not None:  # one kernel: nothing left for a chain
        assert label in labels(nf) and not any(k.startswith("chain") for k in labels(nf))
    for n in (1, 3, 17):
        run_both(exp, ex, nf, n, width)


# what folding would change: each stays an op of its own and computes what the program
# computes in float32 (overflows, NaN and all)
NOT_FOLDED: dict[
    str, tuple[Callable[[Any], Any], str] | tuple[Callable[[Any], Any], str, float]
] = {
    "a constant that broadcasts the result to a larger shape": (
        lambda x: x @ W.T + BIAS.reshape(1, 1, 48),
        "dense",
    ),
    "a division by zero": (lambda x: (x @ W.T) / 0.0, "dense"),
    "a divisor zero in float32": (lambda x: (x @ W.T) / 1e-50, "dense"),
    "a constant infinite in float32": (lambda x: (x @ W.T + 1e39) - 1e39, "dense"),
    "a scale and its inverse, infinite in float32": (
        lambda x: (x @ W.T) * 1e39 * 1e-39,
        "dense",
    ),
    "scales that compose past float32": (lambda x: (x @ W.T) * 1e30 * 1e30, "dense"),
    "weights that overflow when scaled": (  # the product's rounding, scaled by 3e38
        lambda x: (x @ (W * 10).T) * 3e38,
        "dense",
        3e38,
    ),
    "a constant divided by the result": (lambda x: BIAS / (x @ W.T + 5.0), "dense+bias"),
}


@pytest.mark.parametrize("name", sorted(NOT_FOLDED))
def test_dense_does_not_fold_what_would_change_the_result(name: str) -> None:
    fn, label, *scale = NOT_FOLDED[name]
    exp, ex, nf = lowered(fn)
    got = labels(nf)
    assert label in got and sum(k.startswith("dense") for k in got) == 1, got
    assert any(k.startswith("chain") for k in got), got  # the rest is left as it was
    with np.errstate(all="ignore"):
        for n in (1, 3, 17):
            run_both(exp, ex, nf, n, rtol=1e-4, atol=2e-5 * max(scale, default=1.0))


def test_a_constant_transposed_in_the_program_is_packed_not_transposed() -> None:
    text = """
func @f(t0: f32[b, 32]) -> f32[b, 48]
  L0:
    t1: f32[48, 32] = LOAD_CONST k0
    t2: f32[32, 48] = OP_CALL transpose(t1, perm=[1, 0])
    t3: f32[b, 48] = OP_CALL matmul(t0, t2)
    RETURN t3
"""
    import base64

    from shapevm import bytecode as bc

    data = base64.b64encode(np.ascontiguousarray(W).tobytes()).decode()
    text = f'const k0 "w": f32[48, 32] = b64"{data}"\n' + text
    ex = Executable(bc.parse_program(text))
    nf = lower_function(ex, find_regions(ex.fn, ex.program))
    assert labels(nf) == ["dense"]


def test_two_activations_in_a_row_fuse_only_the_first() -> None:
    exp, ex, nf = lowered(lambda x: snp.tanh(snp.maximum(x @ W.T + BIAS, 0.0)))
    assert "dense+bias+relu" in labels(nf)
    for n in (2, 5):
        run_both(exp, ex, nf, n)


def test_the_memory_plan_reuses_buffers_and_reports_against_the_naive_plan() -> None:
    from shapevm.models import traced
    from shapevm.models import workloads as wl

    exp = traced.export_workload("W1", wl.make_weights("W1"), form="user")
    ex = Executable(exp.program)
    nf = lower_function(ex, find_regions(ex.fn, ex.program))
    (region,) = nf.regions
    planned, naive = region.bytes({"b": 64})
    # the 1024-wide activations of the three layers and the layer norm's input share two
    # buffers; the interpreter allocates every one of the many intermediates
    assert len(region.memory.buffers) == 2
    assert planned < naive / 4


@pytest.mark.parametrize("workload", ["W1", "W2", "W3"])
@pytest.mark.parametrize("form", ["user", "library"])
def test_tensors_that_share_a_buffer_never_live_at_the_same_time(workload: str, form: str) -> None:
    """The plan puts the largest tensors first, each into the first buffer whose tensors
    are all dead while it lives: any two tensors of a buffer are apart in time unless one
    is computed in place of the other. W3's block takes 6 KiB of arena a token (its MLP's
    hidden tensor, the layer norm's result and the residual), not the 8 it took when its
    residual went into the buffer of q, k and v."""
    from shapevm.models import traced
    from shapevm.models import workloads as wl

    exp = traced.export_workload(workload, wl.make_weights(workload), form=form)
    ex = Executable(exp.program)
    nf = lower_function(ex, find_regions(ex.fn, ex.program))
    for region in nf.regions:
        low, plan = region.lowered, region.memory
        root = {t.id: t.id for t in low.tensors}
        for t in low.tensors:
            if t.kind == "view" and t.base is not None:
                root[t.id] = root[t.base]
        span: dict[int, list[int]] = {}
        for i, k in enumerate(low.kernels):
            for tid in (*k.ins, *k.outs):
                span.setdefault(root[tid], [i, i])[1] = i
        inplace = {frozenset(p) for p in plan.inplace}
        tenants: dict[int, list[int]] = {}
        for tid in plan.temps:
            tenants.setdefault(low.tensors[tid].buffer, []).append(tid)
        for group in tenants.values():
            for a in group:
                for b in group:
                    if a < b and a in span and b in span and frozenset((a, b)) not in inplace:
                        (a0, a1), (b0, b1) = span[a], span[b]
                        assert a1 < b0 or b1 < a0, (workload, a, b, span[a], span[b])
    if workload == "W3":
        (region,) = nf.regions
        arena = sum(-(-max(s.evaluate({"b": 1, "s": 64}) for s in b.sizes) // 64) * 64
                    for b in region.memory.buffers)  # fmt: skip
        assert arena == 6144 * 64, arena


def _conv_program(fn: Callable[..., Any]) -> tuple[Any, Any, Any]:
    b, h, w = sv.symbolic_shape("b, h, w", constraints=["h >= 8", "w >= 8"])
    exp = sv.export(sv.jit(fn))(sv.ShapeDtypeStruct((b, 3, h, w), np.float32))
    ex = Executable(exp.program)
    return exp, ex, lower_function(ex, find_regions(ex.fn, ex.program))


K1 = (RNG.standard_normal((20, 3, 3, 3)) / 5).astype(np.float32)
K2 = (RNG.standard_normal((20, 20, 3, 3)) / 13).astype(np.float32)
KD = (RNG.standard_normal((20, 1, 3, 3)) / 3).astype(np.float32)
K11 = (RNG.standard_normal((20, 20, 1, 1)) / 4).astype(np.float32)
CB = RNG.standard_normal(20).astype(np.float32)
K5 = (RNG.standard_normal((20, 3, 5, 5)) / 8).astype(np.float32)
KG = (RNG.standard_normal((20, 10, 3, 3)) / 9).astype(np.float32)
BN_MEAN = RNG.standard_normal((20, 1, 1)).astype(np.float32)
BN_STD = (0.5 + RNG.random((1, 20, 1, 1))).astype(np.float32)
BN_GAMMA = RNG.standard_normal((20, 1, 1)).astype(np.float32)
BN_BETA = RNG.standard_normal((1, 20, 1, 1)).astype(np.float32)

CONV_PROGRAMS: dict[str, tuple[Callable[[Any], Any], list[str]]] = {
    "chain kept blocked, then pooled": (
        lambda x: snp.mean(
            snp.maximum(
                sv.nn.conv2d(
                    snp.maximum(sv.nn.conv2d(x, K1, CB, padding=1), 0.0), K2, stride=2, padding=1
                )
                + CB.reshape(20, 1, 1),
                0.0,
            ),
            axis=(2, 3),
        ),
        # NCHW in, blocked out: no reorder of the input; the strided convolution alone reads
        # the first one's result: one kernel by bands of its rows
        [
            "conv+bias+relu > conv+bias+relu (by bands) (to blocked)",
            "global average pool (blocked)",
        ],
    ),
    "a pair by bands inside a blocked chain, ended in NCHW": (
        lambda x: snp.sin(
            sv.nn.conv2d(
                snp.maximum(sv.nn.conv2d(sv.nn.conv2d(x, K1, CB, padding=1), K2, padding=1), 0.0),
                K2,
                CB,
                stride=(2, 3),
                padding=(2, 1),
                dilation=(2, 1),
            )
        ),
        ["conv+bias (to blocked)", "conv+relu > conv+bias (by bands) (from blocked)", "chain[1]"],
    ),
    "a pair by bands with no padding, the first a depthwise one": (
        lambda x: (
            sv.nn.conv2d(
                sv.nn.conv2d(sv.nn.conv2d(x, K1, CB, padding=1), KD, groups=20), K11, stride=2
            )
            * 2.0
        ),
        ["conv+bias (to blocked)", "conv > conv (by bands) (from blocked)"],
    ),
    "a global average of a blocked convolution, by bands": (
        lambda x: snp.mean(
            snp.maximum(sv.nn.conv2d(sv.nn.conv2d(x, K1, CB, padding=1), K2, padding=1), 0.0),
            axis=(2, 3),
        ),
        ["conv+bias (to blocked)", "conv+relu > global average pool (by bands) (blocked)"],
    ),
    "a global average of an image's convolution, kept 4-D": (
        lambda x: snp.mean(
            sv.nn.conv2d(x, K1, CB, stride=(1, 2), padding=(0, 1)) * 0.5 + 1.0,
            axis=(-1, -2),
            keepdims=True,
        ),
        ["conv+bias > global average pool (by bands)"],
    ),
    "a pair by bands after a strided stem, the second grouped": (
        lambda x: sv.nn.conv2d(
            snp.maximum(sv.nn.conv2d(x, K5, CB, stride=2, padding=2), 0.0), KG, stride=2, groups=2
        ),
        ["conv+bias+relu > conv (by bands)"],
    ),
    "padding of a whole window is not taken by bands": (
        lambda x: snp.mean(sv.nn.conv2d(sv.nn.conv2d(x, K1, padding=3), K2, stride=2), axis=(2, 3)),
        ["conv (to blocked)", "conv > global average pool (by bands) (blocked)"],
    ),
    "a mean of a convolution padded a whole window is not taken by bands": (
        lambda x: snp.mean(sv.nn.conv2d(x, K1, padding=3), axis=(2, 3)),
        ["conv (to blocked)", "global average pool (blocked)"],
    ),
    "a result read twice is not paired": (
        lambda x: (lambda h: sv.nn.conv2d(h, K2, stride=2, padding=1).sum() + h.sum())(
            sv.nn.conv2d(x, K1, padding=1)
        ),
        ["conv"],
    ),
    "a chain ended in NCHW": (
        lambda x: snp.sin(sv.nn.conv2d(snp.maximum(sv.nn.conv2d(x, K1, CB, padding=1), 0.0), K2)),
        ["conv+bias+relu (to blocked)", "conv (from blocked)", "chain[1]"],
    ),
    "a result read in NCHW": (
        lambda x: snp.sin(sv.nn.conv2d(x, K1, padding=(1, 0))),
        ["conv", "chain[1]"],
    ),
    "depthwise and residual": (
        lambda x: (lambda h: sv.nn.conv2d(h, KD, groups=20, padding=1) + h)(
            sv.nn.conv2d(x, K1, CB, padding=1)
        ),
        ["conv+bias", "conv+residual"],
    ),
    "a batch norm written out": (
        lambda x: (sv.nn.conv2d(x, K1) - BN_MEAN) / BN_STD * BN_GAMMA + BN_BETA,
        ["conv+bias"],
    ),
    "a batch norm with its bias, scalars and the constant first": (
        lambda x: snp.maximum(
            BN_BETA + 2.0 * (BN_MEAN - sv.nn.conv2d(x, K1, CB, padding=1)) / BN_STD, 0.0
        ),
        ["conv+bias+relu"],
    ),
    "a scale alone keeps no bias": (
        lambda x: sv.nn.conv2d(x, K1) * BN_GAMMA,
        ["conv"],
    ),
    "a constant divided by the result is not folded": (
        lambda x: BN_GAMMA / (sv.nn.conv2d(x, K1) + 10.0),  # far from 0: a tame quotient
        ["conv+bias", "chain[1]"],
    ),
    "a product with itself is not folded": (
        lambda x: (lambda h: h * h)(sv.nn.conv2d(x, K1)),
        ["conv", "chain[1]"],
    ),
    "hard swish": (
        lambda x: (lambda h: h * snp.clip(h + 3.0, 0.0, 6.0) / 6.0)(sv.nn.conv2d(x, K1) + BN_BETA),
        ["conv+bias+hard_swish"],
    ),
    "leaky relu": (
        lambda x: (lambda h: snp.maximum(h, 0.2 * h))(sv.nn.conv2d(x, K1) + BN_BETA),
        ["conv+bias+leaky_relu(0.2)"],
    ),
    "a ResNet block: the shortcut added before the activation, all blocked": (
        lambda x: (
            lambda h: snp.mean(
                snp.maximum(
                    sv.nn.conv2d(
                        snp.maximum(sv.nn.conv2d(h, K2, padding=1) + BN_BETA, 0.0), K2, padding=1
                    )
                    * BN_GAMMA
                    + h,
                    0.0,
                ),
                axis=(2, 3),
            )
        )(snp.maximum(sv.nn.conv2d(x, K1, CB, padding=1), 0.0)),
        [
            "conv+bias+relu (to blocked)",
            "conv+bias+relu (blocked)",
            "conv+residual+relu (blocked)",
            "global average pool (blocked)",
        ],
    ),
    "a downsampling block: the shortcut a strided 1x1 convolution": (
        lambda x: (
            lambda h: snp.maximum(
                sv.nn.conv2d(
                    snp.maximum(sv.nn.conv2d(h, K2, stride=2, padding=1), 0.0), K2, padding=1
                )
                + sv.nn.conv2d(h, K11, stride=2),
                0.0,
            )
        )(snp.maximum(sv.nn.conv2d(x, K1, CB, padding=1), 0.0)),
        # the block's result leaves the function: NCHW, its addend stays blocked
        ["conv+bias+relu (to blocked)", "conv+relu (blocked)", "conv+residual+relu (from blocked)"],
    ),
    "a shortcut whose sum leaves the function stays NCHW": (
        lambda x: (lambda h: snp.maximum(sv.nn.conv2d(h, K2, padding=1) + h, 0.0))(
            sv.nn.conv2d(x, K1, CB, padding=1)
        ),
        ["conv+bias", "conv+residual+relu"],
    ),
    "pooling": (
        lambda x: (
            sv.nn.max_pool2d(sv.nn.conv2d(x, K1), 2) + sv.nn.avg_pool2d(sv.nn.conv2d(x, K1), 2)
        ),
        ["conv", "max_pool2d", "avg_pool2d"],
    ),
}


@pytest.mark.parametrize("name", sorted(CONV_PROGRAMS))
def test_convolutions_lower_and_agree_with_the_interpreter(name: str) -> None:
    from shapevm.jit.backend.variant import Variant

    fn, expected = CONV_PROGRAMS[name]
    exp, ex, nf = _conv_program(fn)
    got_labels = labels(nf)
    for label in expected:
        assert label in got_labels, got_labels
    assert "to blocked" not in got_labels and "from blocked" not in got_labels  # no reorders
    for b, h, w in [(1, 8, 8), (2, 13, 11), (1, 30, 17), (3, 41, 9), (1, 70, 66)]:
        x = RNG.standard_normal((b, 3, h, w)).astype(np.float32)
        want = exp.call(x)
        env = {"b": b, "h": h, "w": w}
        (got,) = Variant(ex, ("exact", (b, h, w)), nf, env).run([x], env)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_a_rank_0_constant_keeps_rank_0_and_lowers() -> None:
    """ONNX files carry their scalars as rank-0 initializers (``x * np.array(0.5)``); the
    executor checks each constant against its slot, and one made rank 1 on the way was
    refused, leaving the whole function interpreted."""
    half = np.array(0.5, np.float32)
    exp, ex, nf = lowered(lambda x: snp.tanh(x * half) + np.array(1.0, np.float32))
    for n in (1, 5):
        run_both(exp, ex, nf, n)
    fast = exp.jit(hot_threshold=1, background=False, tier3=False)
    fast(np.ones((2, 32), np.float32))
    assert [r["status"] for r in fast.jit_info()] == ["ready"]


QKV = (RNG.standard_normal((32, 96)) / 6).astype(np.float32)


def take(x: Any, idx: np.ndarray[Any, Any], axis: int) -> Any:
    """The op ONNX's Gather imports as (``shapevm.numpy`` has no ``take``)."""
    return bind_op("take", [x, _as_tensor(idx)], {"axis": axis})


@pytest.mark.parametrize("index", [0, 2, -1, [1]])
def test_take_of_one_constant_index_is_a_view(index: Any) -> None:
    """ONNX's Gather splitting a fused q/k/v projection: ``take`` of one constant index
    along an axis of constant extent is a view, so the region is not cut there."""
    idx = np.array(index, np.int64)

    def fn(x: Any) -> Any:
        qkv = (x @ QKV).reshape(x.shape[0], 3, 32).transpose(1, 0, 2)
        return take(qkv, idx, 0) * 2.0

    exp, ex, nf = lowered(fn)
    assert len(nf.regions) == 1 and not nf.interpreted and nf.whole
    for n in (1, 4, 7):
        run_both(exp, ex, nf, n)


def test_take_out_of_range_is_left_to_the_interpreter() -> None:
    idx = np.array(5, np.int64)
    exp, _, nf = lowered(lambda x: take(x.reshape(x.shape[0], 4, 8), idx, 1))
    assert "take" not in " ".join(labels(nf))
    with pytest.raises(Exception, match=r"out of bounds|index"):
        exp.call(np.ones((2, 32), np.float32))


@pytest.mark.parametrize("axis", [1, -1])
def test_concatenate_with_a_negative_axis_copies_each_piece_to_its_offset(axis: int) -> None:
    """Rotating halves (rotary embeddings: ``concatenate([-x2, x1], axis=-1)``): the op keeps
    the axis as written, and each piece must land at its own offset along it. A negative
    axis once put every piece at offset 0 and left the rest of the result unwritten."""

    def fn(x: Any) -> Any:
        return snp.concatenate([-x[..., 16:], x[..., :16] * 2.0], axis=axis)

    exp, ex, nf = lowered(fn)
    assert labels(nf).count("concatenate") == 2 and not nf.interpreted
    for n in (1, 3, 8):
        run_both(exp, ex, nf, n)


@pytest.mark.parametrize(
    "reduce",
    [
        lambda x: x.mean(axis=1),  # mean pooling over a sequence
        lambda x: x.mean(axis=-2, keepdims=True),
        lambda x: snp.max(x, axis=0),
        lambda x: snp.sum(x, axis=(0, 2), keepdims=True),
    ],
    ids=["mean axis 1", "mean axis -2 keepdims", "max axis 0", "sum axes 0 and 2 keepdims"],
)
def test_a_reduction_over_leading_axes_runs_native(reduce: Callable[[Any], Any]) -> None:
    """A reduction that keeps the last axis reads a transposed view that moves the reduced
    axes last; it once left the region for the interpreter."""

    def fn(x: Any) -> Any:
        return reduce(snp.tanh(x).reshape(x.shape[0], 4, 8)) * 2.0

    exp, ex, nf = lowered(fn)
    assert not nf.interpreted and nf.whole, nf.interpreted
    for n in (1, 3, 8):
        run_both(exp, ex, nf, n, rtol=1e-6, atol=1e-6)


MIDDLE_REDUCTIONS: dict[str, Callable[[Any], Any]] = {
    "mean axis 1": lambda h: h.mean(axis=1),
    "sum axis 0": lambda h: h.sum(axis=0),
    "max axes 1 and 2 keepdims": lambda h: snp.max(h, axis=(1, 2), keepdims=True),
    "min axis -3": lambda h: snp.min(h, axis=-3),
    "prod axis 1": lambda h: snp.prod(1.0 + 0.01 * h, axis=1),
}


@pytest.mark.parametrize("name", list(MIDDLE_REDUCTIONS))
def test_a_reduction_over_middle_axes_adds_whole_rows(name: str) -> None:
    """A reduction over adjacent axes before the last (mean pooling over a sequence, a sum
    over a batch) is the executor's reduce kernel, which reads rows in memory order (split
    among tasks when there are few outputs and many rows); it agrees with the interpreter on
    strided inputs and NaN (max and min keep it, as NumPy)."""
    fn = MIDDLE_REDUCTIONS[name]

    def with_nan(x: np.ndarray[Any, Any]) -> list[np.ndarray[Any, Any]]:
        x[0, 0, 0, 1] = np.nan
        return [x, np.asfortranarray(x)]

    shapes = [(2, 3, 4), (1, 1, 1), (3, 700, 2), (4096, 1, 3)]
    variant, labels = native_agrees(lambda x: fn(snp.tanh(x) * 3.0), "a, b, c", 5, shapes, with_nan)
    assert variant.function.whole and labels[-1] in ("sum", "mean", "max", "min", "prod")


def test_a_length_mask_compares_integers_exactly_in_the_native_call() -> None:
    """``arange(s)[None, :] < lengths[:, None]`` (masked mean pooling of a batch of
    sequences of different lengths) and a comparison of two int64 inputs past 2**24 are the
    executor's compare kernel: the function is one native call (the comparison was
    interpreted between two regions) and agrees with the interpreter exactly."""

    def pool(x: Any, lengths: Any, a: Any, b: Any) -> Any:
        mask = (snp.arange(x.shape[1])[None, :] < lengths[:, None]).astype(np.float32)
        mean = (x * mask[..., None]).sum(axis=1) / snp.maximum(mask.sum(axis=1)[:, None], 1.0)
        return mean * snp.where(a > b, 1.0, -1.0)[:, None]

    b_, s_ = sv.symbolic_shape("b, s")
    specs = [
        sv.ShapeDtypeStruct((b_, s_, 8), np.float32),
        sv.ShapeDtypeStruct((b_,), np.int64),
        sv.ShapeDtypeStruct((b_,), np.int64),
        sv.ShapeDtypeStruct((b_,), np.int64),
    ]
    exp = sv.export(sv.jit(pool))(*specs)
    jitted = exp.jit(hot_threshold=1, background=False, tier3=False)
    for b, s in [(3, 5), (1, 1), (4, 37)]:
        x = OWN_RNG.standard_normal((b, s, 8)).astype(np.float32)
        lengths = OWN_RNG.integers(0, s + 2, b)
        a = 2**24 + OWN_RNG.integers(0, 2, b)
        args = (x, lengths, a, np.full(b, 2**24, np.int64))
        np.testing.assert_allclose(jitted(*args), exp.call(*args), rtol=1e-6, atol=1e-6)
    rec = next(r for r in jitted.engines[0].records() if r.variant)
    labels = [k.label for r in rec.variant.regions for k in r.lowered.kernels]
    assert rec.variant.function.whole, labels
    assert labels.count("less") == 1 and labels.count("greater") == 1, labels


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_integer_products_run_native_and_wrap_as_numpy(dtype: Any) -> None:
    """Path counts over an int adjacency (``A @ A``), a batched product with a transposed
    view, a product with a constant of the other integer type, and one past the type's
    range: the executor's integer product (each was interpreted and cut its function),
    NumPy's values and dtypes exactly."""
    weights = OWN_RNG.integers(-5, 5, (4, 3)).astype(np.int64)

    def counts(adj: Any, feats: Any) -> Any:
        paths = adj @ adj
        gram = feats @ snp.swapaxes(feats, -1, -2)
        return paths, paths @ adj, gram, feats @ weights, (feats * 2**20) @ (feats.T * 2**20)

    n_, m_ = sv.symbolic_shape("n, m")
    specs = [sv.ShapeDtypeStruct((n_, n_), dtype), sv.ShapeDtypeStruct((m_, 4), dtype)]
    exp = sv.export(sv.jit(counts))(*specs)
    jitted = exp.jit(hot_threshold=1, background=False, tier3=False)
    for n, m in [(1, 1), (5, 3), (40, 300)]:
        adj = OWN_RNG.integers(0, 2, (n, n)).astype(dtype)
        feats = OWN_RNG.integers(-50, 50, (m, 4)).astype(dtype)
        with np.errstate(over="ignore"):
            want = exp.call(adj, feats)
        for g, w in zip(jitted(adj, feats), want, strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_array_equal(g, w)
    rec = next(r for r in jitted.engines[0].records() if r.variant)
    labels = [k.label for r in rec.variant.regions for k in r.lowered.kernels]
    assert rec.variant.function.whole, labels
    assert labels.count("matmul (int)") == 5, labels


@pytest.mark.parametrize("ids_dtype", [np.int64, np.int32])
def test_integer_arithmetic_runs_native_and_exact(ids_dtype: Any) -> None:
    """Positions made from token ids (``minimum(ids + 1, n - 1)``, an offset row broadcast
    against them, a product that wraps around past the type's range, buckets by ``//`` and
    ``%`` of either sign, ids replaced by ``where``) are the executor's
    integer kernel: the function is one native call (each such op was interpreted and cut
    it in pieces) and its integers are NumPy's exactly, int32 kept int32."""
    table = OWN_RNG.standard_normal((50, 8)).astype(np.float32)

    def embed(ids: Any, offsets: Any) -> Any:
        pos = snp.minimum(ids + 1, 49)
        shifted = snp.minimum(snp.maximum(pos - offsets[None, :], 0), 49)
        wrapped = ids * 1_000_003 * 1_000_003 - ids
        buckets = ids // 7 + ids % -5 + offsets[None, :] // 2
        masked = snp.where(ids % 3 > 0, ids, offsets[None, :])  # padding ids replaced
        distance = snp.abs(ids - 30) % 7 - ids  # abs and - of the type's minimum wrap
        return snp.asarray(table)[shifted] * 2.0, wrapped, shifted, buckets, masked, distance

    b_, s_ = sv.symbolic_shape("b, s")
    specs = [sv.ShapeDtypeStruct((b_, s_), ids_dtype), sv.ShapeDtypeStruct((s_,), np.int64)]
    exp = sv.export(sv.jit(embed))(*specs)
    jitted = exp.jit(hot_threshold=1, background=False, tier3=False)
    info = np.iinfo(ids_dtype)
    for b, s in [(2, 5), (1, 1), (3, 37), (4, 130)]:
        ids = OWN_RNG.integers(0, 60, (b, s)).astype(ids_dtype)
        if ids.size:
            ids.flat[0] = info.max  # + 1 wraps around to the type's minimum, as in NumPy
            ids.flat[-1] = info.min  # its abs and its negative are itself
        offsets = OWN_RNG.integers(-3, 4, s).astype(np.int64)
        with np.errstate(over="ignore"):
            want = exp.call(ids, offsets)
        got = jitted(ids, offsets)
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_array_equal(g, w)
    rec = next(r for r in jitted.engines[0].records() if r.variant)
    labels = [k.label for r in rec.variant.regions for k in r.lowered.kernels]
    assert rec.variant.function.whole, labels
    want = {"add", "minimum", "sub", "maximum", "mul", "floordiv", "mod", "where", "abs"}
    assert want <= set(labels), labels


WEIGHTED: dict[str, tuple[Callable[[Any], Any], bool]] = {
    "masked sum over the sequence": (
        lambda x: (snp.tanh(x) * (x[..., 0] > 0).astype(np.float32)[..., None]).sum(axis=1),
        True,
    ),
    "mask first, mean": (lambda x: (x[..., :1] * x).mean(axis=1), True),
    "full-size weights over the batch": (lambda x: (x * x).sum(axis=0), True),
    "a product of chains (the chain writes it)": (
        lambda x: (snp.abs(x[..., :1]) * snp.tanh(x)).mean(axis=1),
        False,
    ),
    "the product read twice": (
        lambda x: (snp.tanh(x) * x).sum(axis=1) + (snp.tanh(x) * x)[:, 0],
        False,
    ),
}


@pytest.mark.parametrize("name", list(WEIGHTED))
def test_a_sum_of_a_product_over_middle_axes_never_writes_the_product(name: str) -> None:
    """``(x * w).sum(axis=1)`` of tensors already computed, with nothing else reading the
    product (masked mean pooling of a layer's states: ``w`` a mask broadcast along the
    features, or full-sized) is one pass of the reduce kernel over ``x`` and ``w``; a
    product something else reads, or that a chain computing an operand takes in, is
    computed as before. Each agrees with the interpreter."""
    fn, fused = WEIGHTED[name]
    variant, labels = native_agrees(fn, "a, b", 6, [(2, 3), (1, 1), (3, 500), (700, 2)])
    assert variant.function.whole, labels
    assert any(label.endswith("(x*w)") for label in labels) == fused, labels


ARGS: dict[str, Callable[[Any], Any]] = {
    "argmax of logits": lambda x: snp.argmax(x @ W.T, axis=-1),
    "argmin axis 1 keepdims": lambda x: snp.argmin(snp.tanh(x), axis=1, keepdims=True),
    "argmax axis 0": lambda x: snp.argmax(x * 2.0, axis=0),
    "one-hot of the argmax": lambda x: (
        (snp.argmax(x, axis=-1)[:, None] == np.arange(32)[None, :]).astype(np.float32) * x
    ),
}


@pytest.mark.parametrize("name", list(ARGS))
def test_argmax_and_argmin_run_native_and_pick_the_first(name: str) -> None:
    """``argmax``/``argmin`` along an axis (greedy decoding, a router's top expert; its
    one-hot compares two integer tensors) are the executor's search kernel: the whole
    function is one native call and agrees with the interpreter, ties and NaN included
    (the first index of the extreme, a NaN's if any, as NumPy)."""
    exp, ex, nf = lowered(ARGS[name])
    assert not nf.interpreted and nf.whole, nf.interpreted
    assert any(label in ("argmax", "argmin") for label in labels(nf)), labels(nf)
    from shapevm.jit.backend.variant import Variant

    for n in (1, 5, 300):
        x = np.round(OWN_RNG.standard_normal((n, 32)), 1).astype(np.float32)  # ties
        if n == 5:
            x[2, 7] = x[3, 0] = np.nan
        variant = Variant(ex, ("exact", (n,)), nf, {"b": n})
        (got,) = variant.run([x], {"b": n})
        np.testing.assert_array_equal(got, exp.call(x))


def test_a_row_picked_from_a_batch_is_not_taken_for_contiguous() -> None:
    """``h[:, 0]`` of ``h: [b, s, d]`` (a class token) is ``b`` rows ``s * d`` apart: a
    reshape of it needs a copy. Slices were judged contiguous when an extent could not be
    proven whole (here ``b`` of another scope, with constraints), and the executor
    refused the reshape at the call."""
    w2 = RNG.standard_normal((4, 16)).astype(np.float32)
    spec = sv.ShapeDtypeStruct(sv.symbolic_shape("b, s, 16", constraints=["s <= 64"]), np.float32)
    exp = sv.export(sv.jit(lambda x: (x * 2.0)[:, 0] @ w2.T))(spec)
    jitted = exp.jit(hot_threshold=1, background=False)
    for b, s in [(1, 3), (2, 5), (3, 4)]:
        x = RNG.standard_normal((b, s, 16)).astype(np.float32)
        np.testing.assert_allclose(jitted(x), exp.call(x), rtol=1e-5, atol=1e-5)


def test_a_dense_layer_written_over_its_residual_with_a_long_k() -> None:
    """``h + f(h) @ W2.T`` writes its result over ``h`` (the memory plan's in-place); with
    k past the kernel's chunk (256) the first chunk's partial sums overwrote the residual
    before the last chunk added it."""
    w1 = (RNG.standard_normal((300, 16)) * 0.3).astype(np.float32)
    w3 = (RNG.standard_normal((16, 300)) * 0.1).astype(np.float32)

    def fn(x: Any) -> Any:
        h = x * 1.5
        return (h + snp.tanh(h @ w1.T) @ w3.T) * 2.0

    exp, ex, nf = lowered(fn, 16)
    (region,) = nf.regions
    assert region.memory.inplace, "the residual's buffer is reused"
    for n in (1, 20, 64):
        run_both(exp, ex, nf, n, 16, rtol=1e-5, atol=1e-5)


def test_a_layer_whose_residual_is_its_own_input_is_not_written_over_it() -> None:
    """``relu(h @ W) + h``: the residual is also the product's input, so the result may not
    take its memory (the product would read rows of ``h`` the first tiles overwrote: a
    U-Net's ``relu(conv(e)) + e`` was off by 0.1 in its probabilities)."""
    w = (RNG.standard_normal((32, 32)) * 0.2).astype(np.float32)

    def fn(x: Any) -> Any:
        h = x * 1.5 + 0.5
        return (snp.maximum(h @ w, 0.0) + h) * 2.0

    exp, ex, nf = lowered(fn, 32)
    assert "dense+relu+residual" in labels(nf)
    (region,) = nf.regions
    assert not region.memory.inplace
    for n in (1, 7, 64):
        run_both(exp, ex, nf, n, 32, rtol=1e-5, atol=1e-5)


def test_a_convolution_whose_residual_is_its_own_input_is_not_written_over_it() -> None:
    k = (RNG.standard_normal((3, 3, 3, 3)) / 5).astype(np.float32)

    def fn(x: Any) -> Any:
        e = x * 1.5 + 0.5
        return (sv.nn.relu(sv.nn.conv2d(e, k, padding=1)) + e) * 2.0

    exp, ex, nf = _conv_program(fn)
    assert any("+residual" in label for label in labels(nf)), labels(nf)
    assert not any(r.memory.inplace for r in nf.regions)
    from shapevm.jit.backend.variant import Variant

    for shape in ((1, 3, 8, 8), (2, 3, 16, 9)):
        x = RNG.standard_normal(shape).astype(np.float32)
        env = {"b": shape[0], "h": shape[2], "w": shape[3]}
        (got,) = Variant(ex, ("exact", tuple(env.values())), nf, env).run([x], env)
        np.testing.assert_allclose(got, exp.call(x), rtol=1e-5, atol=1e-5)


FLIPPED: dict[str, Callable[[Any], Any]] = {
    "a chain": lambda x: snp.tanh(x[:, ::-1]) * x,
    "rows reduced": lambda x: snp.flip(x).sum(axis=-1) + x[::-1].max(axis=0).sum(),
    "softmax rows": lambda x: sv.nn.softmax(x[:, ::-1] * 2.0, axis=-1),
    "a dense layer": lambda x: x[::-1, ::-1] @ W.T + BIAS,
    "a product": lambda x: x[::-1] @ x[:, ::-1].T,
    "concatenated": lambda x: snp.concatenate([x, x[:, ::-1]], axis=-1) * 1.5,
    "running sums": lambda x: snp.cumsum(x[::-1], axis=0),
    "argmax": lambda x: snp.argmax(x[:, ::-1], axis=-1),
    "reshaped": lambda x: snp.flip(x).reshape(-1) * 2.0,
    # only an axis of one flipped, of a strided slice: still strided, so reshaping copies
    "a unit axis of a slice": lambda x: snp.flip(x[:, None, :16], axis=1).reshape(-1) * 2.0,
}


@pytest.mark.parametrize("isa", native.isa_levels())
@pytest.mark.parametrize("name", list(FLIPPED))
def test_flipped_views_feed_every_kind_of_kernel(name: str, isa: str) -> None:
    """``x[::-1]`` and ``flip`` are views walking back through their base (negative
    strides), read in place by chains and reductions and copied for kernels that need
    rows: each agrees with the interpreter, the function one native call."""
    before = native.info()["isa"]
    native.set_isa(isa)
    try:
        variant, labels = native_agrees(FLIPPED[name], "b", 32, [(1,), (5,), (33,)])
    finally:
        native.set_isa(before)
    assert variant.function.whole, labels


def test_a_flipped_image_is_one_native_call() -> None:
    """Test-time augmentation's mirror image (``x[..., ::-1]``) before a convolution."""

    def fn(x: Any) -> Any:
        return sv.nn.conv2d(x[..., ::-1], K1, padding=1) + sv.nn.conv2d(x, K1, padding=1)

    exp, ex, nf = _conv_program(fn)
    assert len(nf.regions) == 1 and not nf.interpreted, labels(nf)
    from shapevm.jit.backend.variant import Variant

    for shape in ((1, 3, 8, 8), (2, 3, 16, 9)):
        x = RNG.standard_normal(shape).astype(np.float32)
        env = {"b": shape[0], "h": shape[2], "w": shape[3]}
        (got,) = Variant(ex, ("exact", tuple(env.values())), nf, env).run([x], env)
        np.testing.assert_allclose(got, exp.call(x), rtol=1e-5, atol=1e-5)


def test_a_chain_with_more_results_than_an_instruction_writes_is_split() -> None:
    """An executor instruction writes at most four results; a chain whose five values are
    all read outside it failed to lower (``chain_kernel: wrong number of programs``) and
    left the function interpreted."""

    def five(x: Any) -> Any:
        a = x * 2.0
        b = a + 1.0
        c = b * b
        d = c - x
        return a, b, c, d, snp.abs(d)

    (b,) = sv.symbolic_shape("b")
    exp = sv.export(sv.jit(five))(sv.ShapeDtypeStruct((b, 32), np.float32))
    fast = exp.jit(tier3=False)
    for n in (1, 7):
        x = RNG.standard_normal((n, 32)).astype(np.float32)
        for want, got in zip(exp.call(x), fast(x), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-6)
    assert fast.jit_stats()["compiled_calls"] == 2 and fast.jit_stats()["failures"] == 0
    ex = Executable(exp.program)
    nf = lower_function(ex, find_regions(ex.fn, ex.program))
    assert labels(nf) == ["chain[5]", "chain[5]"]


def test_terms_that_read_only_inputs_join_the_chain_that_sums_them() -> None:
    """Each term of ``0.5*x*x + 0.25*y*y - x*y + 3*(x - y)`` reads only tensors computed
    before; a chain grew only through values it had made, so the sum was four chains, four
    passes over memory (3x the time of one on 2000 x 1024). Computations that never meet
    stay apart, and a chain too wide for the tile interpreter (a constant per term, 21
    inputs) falls back to growing as before."""

    def poly(x: Any) -> Any:
        y = snp.flip(x, axis=1)
        return 0.5 * x * x + 0.25 * y * y - x * y + 3.0 * (x - y)

    def apart(x: Any) -> Any:
        return snp.exp(x) * 2.0, snp.tanh(x) + 1.0

    scales = [RNG.standard_normal(32).astype(np.float32) for _ in range(20)]

    def wide(x: Any) -> Any:
        terms = [x * s for s in scales]
        return sum(terms[1:], terms[0])

    exp, ex, nf = lowered(poly)
    assert labels(nf) == ["chain[10]"]
    run_both(exp, ex, nf, 5)
    _, _, nf = lowered(apart)
    assert labels(nf) == ["chain[2]", "chain[2]"]
    exp, ex, nf = lowered(wide)
    assert len(labels(nf)) > 1 and all(k.startswith("chain") for k in labels(nf)), labels(nf)
    run_both(exp, ex, nf, 3)


def test_a_chain_reading_more_tensors_than_an_instruction_takes_is_cut_in_two() -> None:
    """``x * c0 + c1 + ... + c11`` with twelve constant rows: the chain read 12 tensors, the
    executor's instructions take 8, and the region failed to lower ('opcode or operand
    count out of range'), all of it left to the interpreter."""
    rows = [RNG.standard_normal(32).astype(np.float32) for _ in range(12)]

    def twelve(x: Any) -> Any:
        y = x * rows[0]
        for row in rows[1:]:
            y = y + row
        return y

    exp, ex, nf = lowered(twelve)
    assert labels(nf) == ["chain[7]", "chain[5]"]
    run_both(exp, ex, nf, 3)


def test_a_value_read_outside_a_chain_keeps_its_reduction_out_of_the_chain() -> None:
    """A chain with a trailing reduction writes the reduced value only; when another of its
    values is read outside it (here by a product), the lowering failed ("value t3 leaves the
    region unset") and the function ran interpreted. Found by the differential test."""

    def fn(x: Any) -> Any:
        a = snp.abs(x)
        return snp.sum(snp.abs(a), axis=1, keepdims=True), a @ W.T

    (b,) = sv.symbolic_shape("b")
    exp = sv.export(sv.jit(fn))(sv.ShapeDtypeStruct((b, 32), np.float32))
    ex = Executable(exp.program)
    nf = lower_function(ex, find_regions(ex.fn, ex.program))
    assert nf.regions and not nf.interpreted
    fast = exp.jit(tier3=False)
    for n in (1, 6):
        x = RNG.standard_normal((n, 32)).astype(np.float32)
        for want, got in zip(exp.call(x), fast(x), strict=True):
            np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    assert fast.jit_stats()["compiled_calls"] == 2 and fast.jit_stats()["failures"] == 0


def test_a_transpose_without_perm_reverses_the_axes_natively() -> None:
    """``perm`` is optional in the op table (the axes reversed); the lowering read it as
    given and failed with a TypeError on a program that left it out."""
    exp, _ex, nf = lowered(lambda x: bind_op("transpose", [x], {}) * 2.0)
    assert nf.regions and not nf.interpreted
    fast = exp.jit(tier3=False)
    x = RNG.standard_normal((5, 32)).astype(np.float32)
    np.testing.assert_array_equal(fast(x), exp.call(x))
    assert fast.jit_stats()["compiled_calls"] == 1 and fast.jit_stats()["failures"] == 0


GAMMA = (1.0 + RNG.standard_normal(32) / 4).astype(np.float32)
BETA = RNG.standard_normal(32).astype(np.float32)


def _centred(x: Any) -> Any:
    return x - snp.mean(x, axis=-1, keepdims=True)


ROW_SPELLINGS: dict[str, tuple[Callable[[Any], Any], str | None]] = {
    "layer norm, sqrt of the variance": (
        lambda x: _centred(x) / snp.sqrt(snp.mean(_centred(x) ** 2, -1, keepdims=True) + 1e-5),
        "layer_norm",
    ),
    "layer norm, var() and a reciprocal, affine": (
        lambda x: (
            _centred(x) * (1.0 / snp.sqrt(snp.var(x, axis=-1, keepdims=True) + 1e-5)) * GAMMA + BETA
        ),
        "layer_norm",
    ),
    "layer norm, beta first": (
        lambda x: BETA + GAMMA * (_centred(x) / snp.sqrt(snp.var(x, -1, keepdims=True) + 1e-6)),
        "layer_norm",
    ),
    "rms norm": (
        lambda x: x / snp.sqrt(snp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * GAMMA,
        "rms_norm",
    ),
    "softmax, max subtracted": (
        lambda x: (lambda e: e / snp.sum(e, -1, keepdims=True))(
            snp.exp(x - snp.max(x, -1, keepdims=True))
        ),
        "softmax",
    ),
    "softmax of scaled scores": (
        lambda x: (lambda e: e / snp.sum(e, -1, keepdims=True))(
            snp.exp(x * 0.125 - snp.max(x * 0.125, -1, keepdims=True))
        ),
        "softmax",
    ),
    "log-softmax": (
        lambda x: (lambda z: z - snp.log(snp.sum(snp.exp(z), -1, keepdims=True)))(
            x - snp.max(x, -1, keepdims=True)
        ),
        "log_softmax",
    ),
    "a row sum that is not a norm": (
        lambda x: x / (snp.sum(snp.abs(x), axis=-1, keepdims=True) + 1.0),
        None,
    ),
}


@pytest.mark.parametrize("name", sorted(ROW_SPELLINGS))
def test_row_ops_found_in_every_spelling(name: str) -> None:
    """Norms and softmaxes written out are one row-op kernel; a look-alike is not."""
    fn, label = ROW_SPELLINGS[name]
    exp, ex, nf = lowered(fn)
    row_kinds = {"layer_norm", "rms_norm", "softmax", "log_softmax"}
    found = row_kinds & set(labels(nf))
    assert found == ({label} if label else set()), labels(nf)
    for n in (1, 3, 17):
        run_both(exp, ex, nf, n)


def test_a_scale_the_capability_table_disables_is_not_folded() -> None:
    """What folds into a product's weights is what the kernel then computes: an op whose
    native chain the table turns off stays out of it."""
    from shapevm import vm

    vm.load_capability_patch({"cpu": {"mul": {"native_chain": None}}})
    try:
        exp, ex, nf = lowered(lambda x: (x @ W.T) * 0.5 + BIAS)
        assert "dense" in labels(nf) and "dense+bias" not in labels(nf), labels(nf)
    finally:
        vm.reset_capability_db()
    exp, ex, nf = lowered(lambda x: (x @ W.T) * 0.5 + BIAS)
    assert labels(nf) == ["dense+bias"]
    run_both(exp, ex, nf, 5)


ONE_ELEMENT_SCALES: dict[str, tuple[Callable[[Any], Any], bool]] = {
    "divided by a rank-0 constant": (lambda s: s / np.array(np.sqrt(32.0), np.float32), True),
    "times a [1] constant": (lambda s: s * np.float32([0.35]), True),
    "a rank-0 constant times it": (lambda s: np.array(0.35, np.float32) * s, True),
    "a [1, 1, 1] constant, which adds an axis": (
        lambda s: s * np.ones((1, 1, 1), np.float32),
        False,
    ),
    "a float64 constant, which widens": (lambda s: s * np.array(0.5), False),
    "a constant divided by it": (lambda s: np.array(2.0, np.float32) / s, False),
}


@pytest.mark.parametrize("name", sorted(ONE_ELEMENT_SCALES))
def test_a_product_scaled_by_a_one_element_constant_takes_it_as_alpha(name: str) -> None:
    """ONNX writes attention's ``1 / sqrt(d)`` as ``Div(scores, c)`` with ``c`` a rank-0
    initializer, not a literal: the product takes it as its alpha (no pass over the scores)
    when it changes neither shape nor dtype, and is left alone otherwise."""
    scale, folds = ONE_ELEMENT_SCALES[name]
    exp, ex, nf = lowered(lambda x: scale(x @ x.T))
    got = labels(nf)
    assert (len(got) == 1 and got[0].startswith("matmul*")) == folds, got
    for n in (1, 3, 7):
        run_both(exp, ex, nf, n, rtol=1e-5)


def test_int_ids_are_read_natively_where_float32_lanes_are_exact() -> None:
    """A padding mask from int64 ids (``ids != 0``, ``ids >= c``, a cast) fuses into the
    chain around it, exactly for any id; arithmetic on the ids (``ids + 1``) is the
    executor's integer kernel, exact too; a power of them stays with the interpreter (no
    native kernel)."""
    (b,) = sv.symbolic_shape("b")

    def f(ids: Any, x: Any) -> Any:
        keep = (ids != 0).astype(snp.float32) + (ids >= 2**20).astype(snp.float32)
        return x * keep + ids.astype(snp.float32), ids + 1, ids**3

    exp = sv.export(sv.jit(f))(
        sv.ShapeDtypeStruct((b, 8), np.int64), sv.ShapeDtypeStruct((b, 8), np.float32)
    )
    ex = Executable(exp.program)
    nf = lower_function(ex, find_regions(ex.fn, ex.program))
    reasons = [p.reason for p in nf.interpreted]
    assert reasons == ["pow has no native kernel for i64"], reasons
    jitted = exp.jit(hot_threshold=1, background=False, tier3=False)
    edges = [0, 1, -1, 2**20 - 1, 2**20, 2**24 + 1, 2**40 + 3, -(2**63), 2**63 - 1]
    for n in (1, 2, 5):
        ids = RNG.choice(np.array(edges, np.int64), (n, 8))
        x = RNG.standard_normal((n, 8)).astype(np.float32)
        with np.errstate(over="ignore"):
            for got, want in zip(jitted(ids, x), exp.call(ids, x), strict=True):
                np.testing.assert_array_equal(got, want)
    assert jitted.jit_stats()["compiled_calls"] > 0


@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64])
def test_take_with_indices_of_the_call_runs_native_and_checks_them(idx_dtype: Any) -> None:
    """``table[ids]`` (an embedding lookup) and ``x[:, ids]`` take rows the call names: the
    executor's take kernel, so the whole function is one native call; an index out of
    range fails the call as the interpreter's does (`RuntimeOpError`, naming it)."""
    b, s = sv.symbolic_shape("b, s")
    table = RNG.standard_normal((9, 4)).astype(np.float32)

    def f(ids: Any, x: Any) -> Any:
        return snp.asarray(table)[ids] * 2.0, snp.take(x, ids[0], axis=1)

    exp = sv.export(sv.jit(f))(
        sv.ShapeDtypeStruct((b, s), idx_dtype), sv.ShapeDtypeStruct((b, 9), np.float32)
    )
    jitted = exp.jit(hot_threshold=1, background=False, tier3=False)
    for n, m in [(1, 3), (2, 5), (3, 1), (2, 5)]:
        ids = RNG.integers(-9, 9, (n, m)).astype(idx_dtype)
        x = RNG.standard_normal((n, 9)).astype(np.float32)
        for got, want in zip(jitted(ids, x), exp.call(ids, x), strict=True):
            np.testing.assert_array_equal(got, want)
    rec = next(r for r in jitted.engines[0].records() if r.variant)
    assert rec.variant.function.whole, rec.variant.describe()
    bad = np.array([[0, 9]], idx_dtype)
    with pytest.raises(sv.RuntimeOpError, match="index 9 is out of bounds for axis 0 with size 9"):
        exp.call(bad, np.zeros((1, 9), np.float32))
    # the program's instruction is named, as the interpreter names it
    named = r"OP_CALL take\(.* failed .*index 9 is out of bounds for axis 0 with size 9"
    with pytest.raises(sv.RuntimeOpError, match=named):
        jitted(bad, np.zeros((1, 9), np.float32))
    # a failure that is not the data's (operands a kernel cannot run) is not said to be the
    # user's instruction failing on its operands, but a fault of the native tier
    fault = native.ExecFailure("native region: instruction 0 failed: take: a misfit")
    fault.instruction, fault.reason, fault.data = 0, "take: a misfit", False
    err = rec.variant.function.failure(fault)
    assert "fault of shapevm's native tier" in str(err) and "take: a misfit" in str(err)
    assert "OP_CALL take(" in str(err) and "failed on" not in str(err)


ATT_W = {n: (RNG.standard_normal((16, 16)) * 0.3).astype(np.float32) for n in "qkv"}
MASKS = {  # how the mask is written, its spec, its shape for (b, s)
    "padding [b, s] as [b, 1, 1, s]": (
        lambda a, m: a + m[:, None, None, :],
        "b, s",
        lambda b, s: (b, s),
    ),
    "a shared [s, s] (causal)": (lambda a, m: a + m, "s, s", lambda b, s: (s, s)),
    "per batch [b, 1, s, s], added first": (
        lambda a, m: m[:, None] + a,
        "b, s, s",
        lambda b, s: (b, s, s),
    ),
}


@pytest.mark.parametrize("name", sorted(MASKS))
def test_attention_with_an_additive_mask_is_one_kernel_and_agrees(name: str) -> None:
    """``softmax(q @ k^T / sqrt(d) + mask) @ v`` with the mask broadcast from any rank:
    one attention kernel, equal to the interpreter with -inf entries and whole rows
    masked (NaN where NumPy gives NaN)."""
    add, spec, shape_of = MASKS[name]

    def f(x: Any, m: Any) -> Any:
        b, s, _ = x.shape
        q, k, v = ((x @ ATT_W[n]).reshape(b, s, 2, 8).transpose(0, 2, 1, 3) for n in "qkv")
        a = add(q @ k.transpose(0, 1, 3, 2) / math.sqrt(8.0), m)
        a = snp.exp(a - a.max(axis=-1, keepdims=True))
        return (a / a.sum(axis=-1, keepdims=True) @ v).transpose(0, 2, 1, 3).reshape(b, s, 16)

    examples = [np.zeros((2, 5, 16), np.float32), np.zeros(shape_of(2, 5), np.float32)]
    exp = sv.export(sv.jit(f))(*sv.symbolic_args_specs(examples, ["b, s, 16", spec]))
    jitted = exp.jit(hot_threshold=1, background=False, tier3=False)
    for b, s in [(2, 5), (1, 1), (3, 9)]:
        x = RNG.standard_normal((b, s, 16)).astype(np.float32)
        m = np.where(RNG.random(shape_of(b, s)) < 0.3, -np.inf, 0).astype(np.float32)
        m[0, ...] = -np.inf if b > 1 else m[0, ...]  # a whole batch entry masked
        with np.errstate(invalid="ignore"):
            np.testing.assert_allclose(jitted(x, m), exp.call(x, m), rtol=2e-5, atol=2e-5)
    rec = next(r for r in jitted.engines[0].records() if r.variant)
    assert [k.label for r in rec.variant.regions for k in r.lowered.kernels][-1] == "attention"


def _doubled(x: Any, times: int) -> Any:
    for _ in range(times):
        x = x + x
    return x


CAUSAL = {  # how a causal mask is written over the scores a of sequence length s
    "arange(s)[None, :] <= arange(s)[:, None], fill -1e9": lambda a, s: snp.where(
        snp.arange(s)[None, :] <= snp.arange(s)[:, None], a, -1e9
    ),
    "inverted: where(rows < cols, -inf, a)": lambda a, s: snp.where(
        snp.arange(s)[:, None] < snp.arange(s)[None, :], -np.inf, a
    ),
    "tril of ones, float32's lowest": lambda a, s: snp.where(
        snp.tril(snp.ones((s, s), dtype=bool)), a, np.float32(-3.4e38)
    ),
}
NOT_CAUSAL = {  # masks that look alike and are not the kernel's causal mode
    "strictly below the diagonal": lambda a, s: snp.where(
        snp.arange(s)[None, :] < snp.arange(s)[:, None], a, -1e9
    ),
    "a fill of -1e4 (large scores would still show)": lambda a, s: snp.where(
        snp.arange(s)[None, :] <= snp.arange(s)[:, None], a, -1e4
    ),
    "triu: the upper triangle": lambda a, s: snp.where(
        snp.triu(snp.ones((s, s), dtype=bool)), a, -1e9
    ),
    "the same window, its 64 made by doubling ones": lambda a, s: snp.where(
        (snp.arange(s)[None, :] <= snp.arange(s)[:, None])
        & (snp.arange(s)[None, :] > snp.arange(s)[:, None] - _doubled(snp.ones((s, s)), 6)),
        a,
        -1e9,
    ),
    "a sliding window of 64 keys (causal below 65)": lambda a, s: snp.where(
        (snp.arange(s)[None, :] <= snp.arange(s)[:, None])
        & (snp.arange(s)[None, :] > snp.arange(s)[:, None] - 64),
        a,
        -1e9,
    ),
}


def _masked_attention(mask: Any) -> Any:
    def f(x: Any) -> Any:
        b, s, _ = x.shape
        q, k, v = ((x @ ATT_W[n]).reshape(b, s, 2, 8).transpose(0, 2, 1, 3) for n in "qkv")
        a = mask(q @ k.transpose(0, 1, 3, 2) / math.sqrt(8.0), s)
        a = snp.exp(a - a.max(axis=-1, keepdims=True))
        return (a / a.sum(axis=-1, keepdims=True) @ v).transpose(0, 2, 1, 3).reshape(b, s, 16)

    b, s = sv.symbolic_shape("b, s")
    exp = sv.export(sv.jit(f))(sv.ShapeDtypeStruct((b, s, 16), np.float32))
    return exp, exp.jit(hot_threshold=1, background=False, tier3=False)


@pytest.mark.parametrize("name", [*CAUSAL, *NOT_CAUSAL])
def test_a_causal_mask_written_any_way_is_the_attention_kernels_causal_mode(name: str) -> None:
    """A mask computed from the dimensions alone (``arange``, ``tril``, a comparison) and
    applied with ``where`` and a fill of at most -1e9 that keeps key ``j`` for query ``i``
    exactly when ``j <= i``: the whole function is one native call with the attention
    kernel's causal mode. Masks that only look alike stay what they are; every one agrees
    with the interpreter."""
    exp, jitted = _masked_attention({**CAUSAL, **NOT_CAUSAL}[name])
    for b, s in [(2, 5), (1, 1), (3, 9), (1, 70), (1, 130)]:
        x = RNG.standard_normal((b, s, 16)).astype(np.float32)
        np.testing.assert_allclose(jitted(x), exp.call(x), rtol=2e-5, atol=2e-5)
    rec = next(r for r in jitted.engines[0].records() if r.variant)
    labels = [k.label for r in rec.variant.regions for k in r.lowered.kernels]
    if name in CAUSAL:
        assert rec.variant.function.whole and labels[-1] == "attention (causal)", labels
        assert "iota" not in labels, labels  # the mask's indices are the kernel's, not computed
    else:
        assert "attention (causal)" not in labels, labels


POS_TABLE = OWN_RNG.standard_normal((600, 16)).astype(np.float32)
INV_FREQ = (1.0 / 100.0 ** (np.arange(8) / 8)).astype(np.float32)

POSITIONS: dict[str, Callable[[Any], Any]] = {
    "rotary angles of arange(s) as float32": lambda x: (
        snp.cos(snp.arange(x.shape[1]).astype(np.float32)[:, None] * INV_FREQ) * x[..., :8]
        - snp.sin(snp.arange(x.shape[1]).astype(np.float32)[:, None] * INV_FREQ) * x[..., 8:]
    ),
    "arange(s, dtype=float32)": lambda x: x * snp.arange(x.shape[1], dtype=np.float32)[:, None],
    "a table of positions indexed by arange(s)": lambda x: (
        x + snp.asarray(POS_TABLE)[snp.arange(x.shape[1])]
    ),
    "int32 positions": lambda x: (
        x + snp.arange(x.shape[1], dtype=np.int32).astype(np.float32)[:, None]
    ),
    "a mask from arange that no attention reads": lambda x: snp.where(
        snp.arange(x.shape[1])[:, None] < 5, x, 0.0
    ).sum(axis=1),
}


@pytest.mark.parametrize("name", list(POSITIONS))
def test_positions_from_arange_run_in_the_native_call(name: str) -> None:
    """``arange(s)`` (``iota``: a model's positions, a rotary embedding's angles, ONNX's
    ``Range``) is the executor's iota instruction, so the function stays one native call
    (it was an interpreted step before the region); so is a mask made from it that a
    ``where`` outside attention reads (that ``where`` was interpreted). Each agrees with
    the interpreter."""
    shapes = [(2, 5), (1, 1), (3, 40), (1, 600)]
    variant, labels = native_agrees(POSITIONS[name], "b, s", 16, shapes)
    assert variant.function.direct is not None and "iota" in labels, labels


def test_a_slice_of_the_last_axis_split_by_a_reshape_is_read_in_place() -> None:
    """q, k, v cut from one product by slices of its last axis (ONNX's ``Split``) and split
    into heads by a reshape: views of the product, not copies, and the attention reads them
    where they are; the interpreter's result at every shape."""
    w = (RNG.standard_normal((16, 48)) * 0.3).astype(np.float32)

    def f(x: Any) -> Any:
        b, s, _ = x.shape
        qkv = x @ w
        q, k, v = (qkv[:, :, 16 * i : 16 * (i + 1)].reshape(b, s, 2, 8) for i in range(3))
        q, k, v = (t.transpose(0, 2, 1, 3) for t in (q, k, v))
        a = q @ k.transpose(0, 1, 3, 2) / math.sqrt(8.0)
        a = snp.exp(a - a.max(axis=-1, keepdims=True))
        return (a / a.sum(axis=-1, keepdims=True) @ v).transpose(0, 2, 1, 3).reshape(b, s, 16)

    b, s = sv.symbolic_shape("b, s")
    exp = sv.export(sv.jit(f))(sv.ShapeDtypeStruct((b, s, 16), np.float32))
    jitted = exp.jit(hot_threshold=1, background=False, tier3=False)
    for n, m in [(2, 5), (1, 1), (3, 9)]:
        x = RNG.standard_normal((n, m, 16)).astype(np.float32)
        np.testing.assert_allclose(jitted(x), exp.call(x), rtol=2e-5, atol=2e-5)
    rec = next(r for r in jitted.engines[0].records() if r.variant)
    labels = [k.label for r in rec.variant.regions for k in r.lowered.kernels]
    assert labels == ["dense", "attention"], labels


def test_ids_compared_with_a_constant_that_adds_axes_keep_their_result_shape() -> None:
    """A one-element constant becomes the comparison's literal only where it broadcasts
    nothing: ``ids != zeros((1, 1, 1))`` has a result of rank 3, and stays interpreted."""
    (b,) = sv.symbolic_shape("b")
    zero = np.zeros((1, 1, 1), np.int64)
    exp = sv.export(sv.jit(lambda ids: (ids != zero).astype(snp.float32) * 2.0))(
        sv.ShapeDtypeStruct((b, 8), np.int64)
    )
    jitted = exp.jit(hot_threshold=1, background=False, tier3=False)
    for n in (1, 3, 3):
        ids = RNG.integers(-2, 3, (n, 8)).astype(np.int64)
        np.testing.assert_array_equal(jitted(ids), exp.call(ids))


def test_an_op_no_native_kernel_runs_is_cut_out_before_lowering(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An integer power has no native kernel: the function is cut around it before
    anything is lowered, so each native piece is lowered once (trying first and cutting at
    the failure lowered what came before a second time). ``iota`` (``arange``) has one."""
    from shapevm.jit.backend import function as F

    (b,) = sv.symbolic_shape("b")

    def f(x: Any) -> Any:
        rows = snp.arange(x.shape[0])  # iota: int64, native
        h = snp.tanh(x @ W.T + BIAS)
        return h * 2.0 + (rows**3).astype(snp.float32)[:, None]

    exp = sv.export(sv.jit(f))(sv.ShapeDtypeStruct((b, 32), np.float32))
    ex = Executable(exp.program)
    calls = []
    real = F.lower_region
    monkeypatch.setattr(F, "lower_region", lambda *a, **k: calls.append(1) or real(*a, **k))
    nf = lower_function(ex, find_regions(ex.fn, ex.program))
    reasons = [p.reason for p in nf.interpreted]
    assert reasons == ["pow has no native kernel for i64"]
    assert len(calls) == len(nf.regions) >= 2, (len(calls), nf.regions)
    for n in (1, 4):
        run_both(exp, ex, nf, n)


def test_a_capability_patch_does_not_cut_an_op_a_pattern_takes() -> None:
    """Ops are cut out before lowering only when no native kernel of theirs exists for
    their dtype, not when a patch removed one: a softmax row op still takes its ``exp``
    with ``exp``'s chain kernel patched out (as it did before ops were cut early)."""
    from shapevm import vm

    def softmax(x: Any) -> Any:
        e = snp.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    vm.load_capability_patch({"cpu": {"exp": {"native_chain": None}}})
    try:
        exp, ex, nf = lowered(softmax, 16)
        assert labels(nf) == ["softmax"] and not nf.interpreted, (labels(nf), nf.interpreted)
        for n in (1, 5):
            run_both(exp, ex, nf, n, width=16)
    finally:
        vm.reset_capability_db()


def test_a_lowering_of_ones_own_is_asked_for_ops_without_a_native_kernel() -> None:
    """Ops no built-in lowering can take (no native kernel for their dtype: `sub` of int64) are cut
    before lowering, but only with the built-in lowerings: one's own lowering
    (`lowerings_named([("mine", fn), ...])`) may take any op, so it is asked for them."""
    import shapevm as sv
    import shapevm.numpy as snp
    from shapevm.jit.backend.function import lower_function
    from shapevm.jit.backend.registry import LOWERINGS
    from shapevm.jit.regions import find_regions
    from shapevm.runtime.interpreter import Executable

    def fn(x: Any) -> Any:
        return x * 2.0 + (snp.arange(x.shape[0]) - 1).astype(snp.float32)

    exp = sv.export(sv.jit(fn))(sv.ShapeDtypeStruct(sv.symbolic_shape("n"), np.float32))
    ex = Executable(exp.program)
    asked: list[str] = []

    def mine(low: Any, op: Any) -> bool:
        asked.append(getattr(op.instr, "op", ""))
        return False

    built_in = [f for _, f in LOWERINGS]
    report = find_regions(ex.fn, ex.program)
    lower_function(ex, report, lowerings=built_in)  # the default set: sub is cut early
    lower_function(ex, report, lowerings=[mine, *built_in])
    assert "sub" in asked


def test_results_returned_in_another_order_than_computed_are_still_one_call() -> None:
    """``return logits, ..., hidden`` (a head's logits before the hidden state they come
    from) is one executor call that hands the results back in the order returned."""

    def f(x: Any) -> Any:
        hidden = snp.tanh(x @ W.T + BIAS)
        return hidden.sum(axis=-1), x * 2.0, hidden

    spec = sv.ShapeDtypeStruct((*sv.symbolic_shape("b"), 32), np.float32)
    exp = sv.export(sv.jit(f))(spec)
    jitted = exp.jit(hot_threshold=1, background=False, tier3=False)
    for b in (1, 5, 17):
        x = OWN_RNG.standard_normal((b, 32)).astype(np.float32)
        got, want = jitted(x), exp.call(x)
        assert [g.shape for g in got] == [(b,), (b, 32), (b, 48)]
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5)
    rec = next(r for r in jitted.engines[0].records() if r.variant)
    assert rec.variant.function.whole


def test_regions_that_only_move_data_stay_interpreted_beside_interpreted_steps() -> None:
    """A float32 input cast to float64 before float64 layers (weights from np.random): the
    cast alone is no native call's worth, so no region is left and the reasons say why,
    with the float64 hint once; where the function is one native call, a cast region
    stays (it is the whole call)."""
    w = np.random.default_rng(1).standard_normal((4, 5))
    (b,) = sv.symbolic_shape("b")
    exp = sv.export(sv.jit(lambda x: x @ w))(sv.ShapeDtypeStruct((b, 4), np.float32))
    ex = Executable(exp.program)
    nf = lower_function(ex, find_regions(ex.fn, ex.program))
    assert not nf.regions
    reasons = [p.reason for p in nf.interpreted]
    assert reasons == ["matmul has no native kernel for f64", MOVES_ONLY], reasons
    assert f64_hint(nf.interpreted) == f"; {F64_HINT}"
    with pytest.raises(NoNativeCode, match=r"\.astype\(np\.float32\) on them runs it native"):
        Compiler().native_function(ex, find_regions(ex.fn, ex.program))

    cast = sv.export(sv.jit(lambda x: x.astype(snp.float64)))(
        sv.ShapeDtypeStruct((b, 4), np.float32)
    )
    ex = Executable(cast.program)
    nf = lower_function(ex, find_regions(ex.fn, ex.program))
    assert nf.whole and not nf.interpreted


ORDER_W = np.random.default_rng(7).standard_normal((16, 16)).astype(np.float32)


def _product_first(x: Any, y: Any) -> Any:
    return x * 4.0 + snp.concatenate([y, y], axis=-1)


def _concatenation_first(x: Any, y: Any) -> Any:
    return snp.concatenate([y, y], axis=-1) + x * 4.0


def _dense_between(x: Any, y: Any) -> Any:
    a = snp.tanh(x[:, :16])
    b = snp.concatenate([y[:, :8] @ ORDER_W[:8, :8], y[:, 8:]], axis=1)
    return snp.maximum(a * b + y @ ORDER_W, 0.0) * a, a


@pytest.mark.parametrize("fn", [_product_first, _concatenation_first, _dense_between])
def test_a_chain_is_one_pass_whatever_the_order_of_the_trace(fn: Any) -> None:
    """An elementwise op that reads a chain and a value computed by another kind of op
    (a concatenation, a dense layer) traced between them joins the chain: that op is
    lowered ahead of its turn, as soon as what it reads is computed. The product, its
    sum and what follows are one chain in either order, and agree with the interpreter."""
    spec = ["b, 32", "b, 16"]
    jitted = sv.jit(fn, shapes=spec, hot_threshold=1, background=False, tier3=False)
    ref = sv.jit(fn, shapes=spec, enabled=False)
    for n in (1, 5, 33):
        rng = np.random.default_rng(n)
        x, y = (rng.standard_normal((n, k)).astype(np.float32) for k in (32, 16))
        for got, want in zip(
            *((r if isinstance(r, tuple) else (r,)) for r in (jitted(x, y), ref(x, y))), strict=True
        ):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    (engine,) = jitted.engines
    rec = next(r for r in engine.records() if r.variant)
    (region,) = rec.variant.regions
    chains = [k for k in region.lowered.kernels if k.label.startswith("chain")]
    # one chain: its ops' positions are one set (`_dense_between` keeps ``a = tanh(...)``,
    # which its other result is computed from: a first pass writes it, a second reads it
    # back, so tanh runs once)
    assert len({k.pcs for k in chains}) == 1, rec.variant.describe()
    assert len(chains) == (2 if fn is _dense_between else 1), rec.variant.describe()


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_stacks_copy_into_strided_views_as_numpy(axis: int) -> None:
    """`stack` copies each operand into every k-th element of the result: the copy drops
    axes of size 1 and merges the ones both sides step through evenly, so a pair stacked
    last is one run per operand; checked against NumPy with sizes of 1, a transposed and
    a reversed operand."""

    def f(a: Any, b: Any) -> Any:
        return snp.stack([snp.sin(a), b.T[::-1], a * 2.0], axis=axis)

    jitted = sv.jit(f, shapes=["n, m", "m, n"], hot_threshold=1, background=False, tier3=False)
    for n, m in [(1, 1), (1, 7), (5, 1), (200, 8), (3, 33)]:
        rng = np.random.default_rng(n * 100 + m)
        a = rng.standard_normal((n, m)).astype(np.float32)
        b = rng.standard_normal((m, n)).astype(np.float32)
        want = np.stack([np.sin(a), b.T[::-1], a * 2.0], axis=axis)
        np.testing.assert_allclose(jitted(a, b), want, rtol=1e-6, atol=1e-6)
    assert jitted.jit_stats()["compiled_calls"] > 0


def test_a_loops_condition_stays_interpreted_beside_its_native_body() -> None:
    """A recurrence over a symbolic length (``fori_loop(0, t, ...)``): the body is a native
    region, the loop's head (``i < t``, scalars only) is an interpreted step, not a native
    call per iteration, and says why."""
    w = np.random.default_rng(3).standard_normal((4, 4)).astype(np.float32) * 0.5

    def rnn(x: Any) -> Any:
        def body(i: Any, h: Any) -> Any:
            return snp.tanh(snp.take(x, i, axis=1) + h @ w)

        return lax.fori_loop(0, x.shape[1], body, snp.zeros((x.shape[0], 4), np.float32))

    (b, t) = sv.symbolic_shape("b, t")
    exp = sv.export(sv.jit(rnn))(sv.ShapeDtypeStruct((b, t, 4), np.float32))
    ex = Executable(exp.program)
    nf = lower_function(ex, find_regions(ex.fn, ex.program))
    assert SCALARS_ONLY in [p.reason for p in nf.interpreted]
    assert all(any(len(t.shape) for t in r.lowered.tensors) for r in nf.regions)
    jitted = exp.jit(hot_threshold=1, background=False, tier3=False)
    x = np.random.default_rng(4).standard_normal((3, 7, 4)).astype(np.float32)
    h = np.zeros((3, 4), np.float32)
    for i in range(7):
        h = np.tanh(x[:, i] + h @ w)
    np.testing.assert_allclose(jitted(x), h, rtol=1e-5, atol=1e-6)
    assert jitted.jit_stats()["compiled_calls"] > 0


def test_an_op_lowered_ahead_that_fails_is_the_one_left_interpreted() -> None:
    """With no native concatenation (a lowering left out), the concatenation a chain asked
    to lower ahead fails: the region is cut there, the product before it stays native and
    the reason names the concatenation, not the chain's first op."""
    names = [n for n, _ in LOWERINGS if n != "concatenate"]
    f = sv.jit(
        _product_first, shapes=["b, 32", "b, 16"], hot_threshold=1, background=False,
        tier3=False, lowerings=names,
    )  # fmt: skip
    x, y = np.ones((3, 32), np.float32), np.full((3, 16), 2.0, np.float32)
    np.testing.assert_array_equal(f(x, y), _product_first(x, y))
    (rec,) = [r for r in f.engines[0].records() if r.variant]
    pieces = rec.variant.function.interpreted
    assert [p.reason for p in pieces] == ["concatenate has no native kernel"]
    labels = [k.label for r in rec.variant.regions for k in r.lowered.kernels]
    assert labels == ["chain[1]", "chain[1]"], labels


def test_a_cast_into_a_dtype_the_executor_lacks_stays_interpreted() -> None:
    """uint16 has no executor tensors: that cast (and what reads it) is interpreted, with
    the reason, and the function's other ops stay native (a first version of the
    any-dtype cast failed the whole compile with a KeyError)."""
    f = sv.jit(
        lambda x: (x * 2.0).astype(np.uint16) + 1, shapes="b, 4", hot_threshold=1,
        background=False,
    )  # fmt: skip
    x = np.full((2, 4), 3.7, np.float32)
    np.testing.assert_array_equal(f(x), (x * 2.0).astype(np.uint16) + 1)
    (info,) = f.jit_info()
    assert info["status"] == "ready", info["reason"]
    (rec,) = [r for r in f.engines[0].records() if r.variant]
    assert "cast has no native kernel" in [p.reason for p in rec.variant.function.interpreted]


def test_a_scalar_computed_from_tensors_stays_native_beside_interpreted_steps() -> None:
    """Only regions that read and compute scalars are left interpreted: a mean of a tensor
    into a scalar (a loss) beside an interpreted float64 product stays a native region."""
    w = np.random.default_rng(0).standard_normal((8, 8))  # float64: the product is interpreted

    def f(x: Any, y: Any) -> Any:
        return ((x - y) ** 2).mean() * w  # the scalar's product with w is float64

    (b,) = sv.symbolic_shape("b")
    spec = sv.ShapeDtypeStruct((b, 8), np.float32)
    exp = sv.export(sv.jit(f))(spec, spec)
    ex = Executable(exp.program)
    nf = lower_function(ex, find_regions(ex.fn, ex.program))
    labels = [k.label for r in nf.regions for k in r.lowered.kernels]
    assert any(label.startswith("chain") for label in labels), labels
    assert SCALARS_ONLY not in [p.reason for p in nf.interpreted]
