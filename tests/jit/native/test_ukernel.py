"""The register-blocked micro-kernel GEMM and the dense entry point that uses it."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from shapevm.jit.native import entries, ukernel
from tests.jit.native.reference import act, rel_err

EPILOGUES = ["none", "relu", "gelu_tanh"]


@pytest.mark.parametrize("epilogue", EPILOGUES)
@pytest.mark.parametrize("parallel", [False, True])
def test_tiles_on_partial_panels_and_blocked_k(epilogue: str, parallel: bool) -> None:
    rng = np.random.default_rng(3)
    fn = ukernel.gemm_parallel if parallel else ukernel.gemm_serial
    act_code = {"none": 0, "relu": 1, "gelu_tanh": 2}[epilogue]
    for k, n in [(1, 1), (5, 16), (27, 33), (256, 40), (700, 48), (1024, 17)]:
        w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
        b = (0.1 * rng.standard_normal(n)).astype(np.float32)
        panels = ukernel.pack_b16(w)
        bias = np.zeros(-(-n // 16) * 16, np.float32)
        bias[:n] = b
        for m in [1, 5, 6, 7, 13, 64]:
            x = rng.standard_normal((m, k)).astype(np.float32)
            out = np.full((m, n), np.nan, np.float32)
            ap = np.empty(-(-m // 6) * 6 * k, np.float32)
            fn(x, ap, panels, bias, out, act_code)
            ref = act(epilogue, x.astype(np.float64) @ w.astype(np.float64) + b)
            assert rel_err(out, ref) < 1e-5, (k, n, m)


def test_dense_entry_rejects_weights_that_are_not_a_float32_matrix() -> None:
    from shapevm.jit.native import NativeKernelError

    with pytest.raises(NativeKernelError, match=r"expected: w: f32\[K, N\]"):
        entries.Dense(np.ones((3, 4, 5), np.float32))
    with pytest.raises(NativeKernelError, match="found:    w: float64"):
        entries.Dense(np.ones((3, 4)))


def test_dense_entry_agrees_at_every_row_count() -> None:
    rng = np.random.default_rng(4)
    w = (rng.standard_normal((96, 50)) / 10).astype(np.float32)
    b = rng.standard_normal(50).astype(np.float32)
    dense = entries.Dense(w, b, "relu")
    for m in range(1, 3 * ukernel.MR + 2):  # every remainder of a six-row panel
        x = rng.standard_normal((m, 96)).astype(np.float32)
        out = np.empty((m, 50), np.float32)
        dense(x, out)
        assert rel_err(out, np.maximum(x.astype(np.float64) @ w + b, 0)) < 1e-5, m
    x3 = rng.standard_normal((2, 7, 96)).astype(np.float32)  # [B, S, K]: rows flattened
    out3 = np.empty((2, 7, 50), np.float32)
    dense(x3, out3)
    assert rel_err(out3, np.maximum(x3.astype(np.float64) @ w + b, 0)) < 1e-5


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("parallel", [False, True])
def test_conv_tiles_on_odd_sizes(stride: int, parallel: bool) -> None:
    from tests.jit.native.reference import conv3x3

    rng = np.random.default_rng(5)
    fn = ukernel.conv3x3_parallel if parallel else ukernel.conv3x3_serial
    for batch, c_in, c_out, h, w in [(1, 8, 6, 1, 1), (2, 9, 7, 5, 17), (1, 16, 13, 33, 40)]:
        x = rng.standard_normal((batch, c_in, h, w)).astype(np.float32)
        wt = (rng.standard_normal((c_out, c_in, 3, 3)) / np.sqrt(9 * c_in)).astype(np.float32)
        b = rng.standard_normal(c_out).astype(np.float32)
        n, _ = ukernel.phase_shape(batch, c_in, h, w, stride)
        ho, wo = (h - 1) // stride + 1, (w - 1) // stride + 1
        out = np.full((batch, c_out, ho, wo), np.nan, np.float32)
        fn(x, np.empty(n, np.float32), ukernel.pack_conv_a6(wt), b, out, stride, 1)
        ref = np.maximum(conv3x3(x, wt, b, stride), 0.0)
        assert rel_err(out, ref) < 1e-5, (batch, c_in, c_out, h, w)


def test_conv_entry_agrees_for_any_input_channels_and_stride() -> None:
    from shapevm.jit.native import pack_conv3x3
    from tests.jit.native.reference import conv3x3

    rng = np.random.default_rng(6)
    for c_in, stride in [(1, 1), (3, 1), (8, 1), (3, 2), (8, 2)]:
        wt = rng.standard_normal((10, c_in, 3, 3)).astype(np.float32)
        b = rng.standard_normal(10).astype(np.float32)
        conv = entries.Conv3x3(pack_conv3x3(wt, b), stride, "relu")
        assert conv.tiles == (stride == 1)
        x = rng.standard_normal((2, c_in, 19, 23)).astype(np.float32)
        ho, wo = (19 - 1) // stride + 1, (23 - 1) // stride + 1
        out = np.empty((2, 10, ho, wo), np.float32)
        conv(x, out)
        assert rel_err(out, np.maximum(conv3x3(x, wt, b, stride), 0.0)) < 1e-5, (c_in, stride)


def test_thread_choice_follows_the_faster_way_and_backs_off_probing(monkeypatch) -> None:
    monkeypatch.setattr(entries, "_PROBES", [0, 1, 4, 0, 0])
    monkeypatch.setattr(entries, "pool_available", lambda: True)  # whatever the machine does
    choice = entries.ThreadChoice(min_work=100)
    assert choice.pick(50) == 0  # too small for the pool
    seconds = {0: 1.0, 1: 3.0}  # the pool is slower (a busy neighbour)
    used = []
    for _ in range(400):
        how = choice.pick(1000)
        used.append(how & 1)
        choice.record(1000, how, seconds[how & 1] * 1e-6)
    bursts = sum(1 for a, b in zip([0, *used], used, strict=False) if b and not a)
    assert 3 <= bursts <= 10  # tried a few times, less and less often
    assert sum(used) <= bursts * entries.PROBE_BURST
    seconds = {0: 1.0, 1: 0.4}  # the neighbour left
    for _ in range(2000):
        how = choice.pick(1000)
        choice.record(1000, how, seconds[how & 1] * 1e-6)
    tail = [choice.pick(1000) & 1 for _ in range(20)]
    assert sum(tail) >= 18  # the pool again, once a probe found it faster


def test_thread_choice_on_a_new_size_follows_the_nearest_measured_size(monkeypatch) -> None:
    monkeypatch.setattr(entries, "_PROBES", [0, 1, 4, 0, 0])
    monkeypatch.setattr(entries, "pool_available", lambda: True)
    choice = entries.ThreadChoice(min_work=100)
    assert choice.pick(200) == 0  # nothing measured, small work: the calling thread
    assert choice.pick(100 * entries.POOL_FIRST) == 1  # nothing measured, big work: the pool
    for _ in range(100):
        how = choice.pick(1 << 12)
        choice.record(1 << 12, how, (1.0 if how & 1 else 2.0) * 1e-6)
    assert choice.pick(1 << 12) & 1
    assert choice.pick(1 << 20) == 1  # never seen, the pool won at the nearest size
    choice.stats[(1 << 12).bit_length()] = [1e-9, 2e-9]  # the calling thread wins there now
    assert choice.pick(1 << 20) == 0


def test_thread_choice_does_not_learn_from_calls_it_was_forced_to_make(monkeypatch) -> None:
    monkeypatch.setattr(entries, "_PROBES", [0, 1, 4, 0, 0])
    free = [False]
    monkeypatch.setattr(entries, "pool_available", lambda: free[0])
    choice = entries.ThreadChoice(min_work=100)
    how = choice.pick(1000)
    assert how == entries.FORCED  # the calling thread, because it had to
    choice.record(1000, how, 1.0)  # slowed by whatever took the other core
    assert not choice.stats
    free[0] = True
    assert choice.pick(1000) == 1  # nothing was learnt: big work goes to the pool first


def test_thread_choice_does_not_time_the_wake_up_of_a_sleeping_pool(monkeypatch) -> None:
    monkeypatch.setattr(entries, "_PROBES", [0, 1, 4, 0, 0])
    monkeypatch.setattr(entries, "pool_available", lambda: True)
    choice = entries.ThreadChoice(min_work=100)
    # Each switch to the pool pays a wake-up of 100 us; warm, the pool is twice as fast.
    last = [0]
    for _ in range(200):
        how = choice.pick(1000)
        wake = 100.0 if (how & 1) and not last[0] else 0.0
        last[0] = how & 1
        choice.record(1000, how, ((1.0 if how & 1 else 2.0) + wake) * 1e-6)
    tail = [choice.pick(1000) & 1 for _ in range(20)]
    assert sum(tail) >= 18


@pytest.mark.parametrize("stride", [1, 2])
def test_conv_pixel_tiles_on_odd_sizes(stride: int) -> None:
    from tests.jit.native.reference import conv3x3

    rng = np.random.default_rng(7)
    for batch, c_in, c_out, h, w in [(1, 1, 1, 1, 1), (2, 3, 17, 7, 9), (1, 8, 40, 13, 30)]:
        x = rng.standard_normal((batch, c_in, h, w)).astype(np.float32)
        wt = (rng.standard_normal((c_out, c_in, 3, 3)) / np.sqrt(9 * c_in)).astype(np.float32)
        b = rng.standard_normal(c_out).astype(np.float32)
        panels = ukernel.pack_conv_b16(wt)
        bias = np.zeros(panels.shape[0] * 16, np.float32)
        bias[:c_out] = b
        ho, wo = (h - 1) // stride + 1, (w - 1) // stride + 1
        for fn in (ukernel.conv3x3_px_serial, ukernel.conv3x3_px_parallel):
            out = np.full((batch, c_out, ho, wo), np.nan, np.float32)
            xp = np.empty(ukernel.padded_size(batch, c_in, h, w), np.float32)
            fn(x, xp, panels, bias, out, stride, 1)
            ref = np.maximum(conv3x3(x, wt, b, stride), 0.0)
            assert rel_err(out, ref) < 1e-5, (batch, c_in, c_out, h, w)


@pytest.mark.parametrize(
    "b, h, s, t, d",
    [(1, 4, 37, 37, 64), (2, 3, 7, 33, 32), (1, 2, 13, 15, 48), (1, 1, 9, 20, 8), (1, 1, 1, 1, 64)],
)
def test_attention_entry_on_tiles_and_rows_agrees(b: int, h: int, s: int, t: int, d: int) -> None:
    """Heads of D a multiple of 16 with 16 keys or more run on the micro-kernel tiles, the
    others row by row; both against float64, into the heads-merged (strided) output."""
    rng = np.random.default_rng(8)
    q = rng.standard_normal((b, s, h, d)).astype(np.float32).transpose(0, 2, 1, 3)
    k = rng.standard_normal((b, h, t, d)).astype(np.float32)
    v = rng.standard_normal((b, h, t, d)).astype(np.float32)
    scores = (q.astype(np.float64) @ np.swapaxes(k, -1, -2)) * 0.125
    p = np.exp(scores - scores.max(-1, keepdims=True))
    ref = (p / p.sum(-1, keepdims=True)) @ v
    attention = entries.Attention(0.125)
    for fn in (attention._serial, attention._parallel):
        merged = np.full((b, s, h, d), np.nan, np.float32)
        out = merged.transpose(0, 2, 1, 3)
        fn(q, k, v, out, np.float32(0.125))
        assert rel_err(out, ref) < 1e-5
