"""Attention against float64 at every instruction-set level: hypothesis draws batch shapes
(broadcast between q, k and v), query and key counts on both sides of a key block, head
sizes that are and are not multiples of 16, masks, causal attention, scales and threads;
results are within 1e-5 relative of softmax(q @ k^T * scale + mask) @ v in float64."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shapevm import native
from tests.native.reference import NO_FAULT_COUNTS, rel_err, warm_faults

Array = np.ndarray[Any, Any]


def _data(seed: int, *shape: int) -> Array:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def attention64(
    q: Array, k: Array, v: Array, scale: float, mask: Array | None, causal: bool
) -> Array:
    s = (q.astype(np.float64) @ np.swapaxes(k, -1, -2).astype(np.float64)) * scale
    if mask is not None:
        s = s + mask
    if causal:
        sq, sk = s.shape[-2:]
        s = np.where(np.tril(np.ones((sq, sk), bool)), s, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v.astype(np.float64)  # type: ignore[no-any-return]


@settings(
    max_examples=45, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    batch=st.sampled_from([((), ()), ((2,), (2,)), ((2, 3), (1, 3)), ((1, 4), (1, 4))]),
    sq=st.one_of(st.integers(1, 20), st.sampled_from([47, 48, 49, 100])),
    sk=st.one_of(st.integers(1, 20), st.sampled_from([64, 255, 256, 257, 600])),
    d=st.sampled_from([1, 7, 16, 33, 64]),
    dv=st.sampled_from([1, 16, 24, 64]),
    mask=st.sampled_from(["none", "full", "keys"]),
    causal=st.booleans(),
    scale=st.sampled_from([None, 0.3]),
    threads=st.sampled_from([0, 1]),
)
def test_attention_matches_float64(
    isa: str,
    batch: tuple[tuple[int, ...], tuple[int, ...]],
    sq: int,
    sk: int,
    d: int,
    dv: int,
    mask: str,
    causal: bool,
    scale: float | None,
    threads: int,
) -> None:
    bq, bkv = batch
    q, k, v = _data(1, *bq, sq, d), _data(2, *bkv, sk, d), _data(3, *bkv, sk, dv)
    m = {"none": None, "full": _data(4, *bq, sq, sk), "keys": _data(5, 1, sk)}[mask]
    y = native.attention(q, k, v, scale=scale, mask=m, causal=causal, threads=threads)
    ref = attention64(q, k, v, 1.0 / np.sqrt(d) if scale is None else scale, m, causal)
    assert y.shape == ref.shape and y.dtype == np.float32
    assert rel_err(y, ref) < 1e-5


def test_attention_reads_w3s_transposed_views(isa: str) -> None:
    b, s = 2, 37
    qkv = _data(6, b, s, 3 * 256).reshape(b, s, 3, 4, 64).transpose(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    out = np.empty((b, s, 4, 64), np.float32)
    native.attention(q, k, v, scale=0.125, out=out.transpose(0, 2, 1, 3))
    ref = attention64(q, k, v, 0.125, None, False).transpose(0, 2, 1, 3)
    assert rel_err(out, ref) < 1e-5


def test_attention_edge_sizes(isa: str) -> None:
    q, v = _data(7, 3, 4), _data(8, 0, 5)
    assert native.attention(q, np.zeros((0, 4), np.float32), v).tolist() == [[0.0] * 5] * 3
    assert native.attention(
        np.zeros((0, 4), np.float32), _data(9, 2, 4), _data(10, 2, 5)
    ).shape == (
        0,
        5,
    )
    assert (
        native.attention(
            np.zeros((2, 0), np.float32), np.zeros((3, 0), np.float32), np.eye(3, dtype=np.float32)
        ).tolist()
        == [[np.float32(1 / 3)] * 3] * 2
    )  # d = 0: every score 0, a uniform average


@pytest.mark.parametrize("masked", [256, 260, 299, 300])
def test_keys_masked_to_minus_inf_across_a_whole_key_block(isa: str, masked: int) -> None:
    """Left padding: the first ``masked`` of 300 keys at -inf, past the first block of 256.
    A row's first block then has no key left; its weights are 0, not exp(-inf + inf), and
    the keys after it decide the row. With every key masked the row is NaN, as NumPy's."""
    q, k, v = _data(11, 2, 3, 8), _data(12, 2, 300, 8), _data(13, 2, 300, 5)
    mask = np.zeros((2, 1, 300), np.float32)
    mask[0, :, :masked] = -np.inf
    got = native.attention(q, k, v, mask=mask)
    with np.errstate(invalid="ignore"):
        want = attention64(q, k, v, 1 / np.sqrt(8), mask.astype(np.float64), False)
    assert np.array_equal(np.isnan(got), np.isnan(want)), (np.isnan(got).sum(), masked)
    ok = ~np.isnan(want)
    assert rel_err(got[ok], want[ok]) < 1e-5


_Q, _K, _V = (
    np.ones((2, 3, 4), np.float32),
    np.ones((2, 5, 4), np.float32),
    np.ones((2, 5, 6), np.float32),
)


@pytest.mark.parametrize(
    ("call", "headline", "found"),
    [
        (
            lambda: native.attention(_Q, np.ones((2, 5, 3), np.float32), _V),
            "attention: q and k have different head sizes",
            "k: f32[2, 5, 3]",
        ),
        (
            lambda: native.attention(_Q, _K, np.ones((2, 4, 6), np.float32)),
            "attention: k and v have different key counts",
            "v: f32[2, 4, 6]",
        ),
        (
            lambda: native.attention(_Q, np.ones((3, 5, 4), np.float32), _V),
            "attention: batch dimensions do not broadcast",
            "k: f32[3, 5, 4]",
        ),
        (
            lambda: native.attention(_Q.astype(np.float16), _K, _V),
            "attention: q must be float32",
            "f16[2, 3, 4]",
        ),
        (
            lambda: native.attention(np.ones(4, np.float32), _K, _V),
            "attention: q has the wrong rank 1",
            "f32[4]",
        ),
        (
            lambda: native.attention(_Q, _K, np.ones((2, 6, 5), np.float32).swapaxes(1, 2)),
            "attention: v must have unit stride along its last axis",
            "not C-contiguous",
        ),
        (
            lambda: native.attention(_Q, _K, _V, mask=np.ones((2, 3, 4), np.float32)),
            "attention: mask does not broadcast to the scores",
            "f32[2, 3, 4]",
        ),
        (
            lambda: native.attention(_Q, _K, _V, out=np.ones((2, 3, 5), np.float32)),
            "attention: out has the wrong shape",
            "f32[2, 3, 5]",
        ),
        (
            lambda: native.attention(_Q, _K, _V, out=_V[:, :3]),
            "attention: out overlaps v",
            "shared",
        ),
    ],
)
def test_attention_refuses_bad_arguments(call: Any, headline: str, found: str) -> None:
    with pytest.raises(native.NativeKernelError) as info:
        call()
    assert str(info.value).splitlines()[0] == headline
    assert found in info.value.found


@pytest.mark.skipif(native.info()["debug"], reason=NO_FAULT_COUNTS)
def test_a_warm_call_faults_in_no_memory() -> None:
    """Each head's scores and packed keys and values are the thread's scratch, kept from
    call to call: allocated and freed per head, they made the pool's worker fault pages in
    again on every call (glibc returns the top of a thread's heap to the system)."""
    faults = warm_faults(
        "qkv = rng.standard_normal((1, 37, 3, 4, 64), np.float32).transpose(2, 0, 3, 1, 4)\n"
        "out = np.empty((1, 4, 37, 64), np.float32)",
        "native.attention(qkv[0], qkv[1], qkv[2], scale=0.125, out=out)",
    )
    assert faults <= 5, f"20 warm calls faulted in {faults} pages"
