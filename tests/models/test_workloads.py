"""The benchmark workloads: float32 eager against the float64 reference, deterministic weights,
the stream's shape order, and the layouts checked against PyTorch when it is installed."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from shapevm.models import (
    WORKLOADS,
    accuracy,
    get_workload,
    make_input,
    make_weights,
    numpy_eager,
    random_shapes,
    reference_f64,
    stream_shapes,
)
from tests.models import cases

F32_TOL = 1e-5  # a few hundred float32 roundings relative to the output's scale

IDS = list(WORKLOADS)


@pytest.mark.parametrize("wid", IDS)
def test_eager_float32_matches_the_float64_reference(wid: str) -> None:
    eager = numpy_eager(wid, cases.weights(wid))
    shapes = list(WORKLOADS[wid].shapes) + random_shapes(wid, 2, seed=7)
    for i, shape in enumerate(shapes):
        x, ref = cases.case(wid, shape, i)
        y = eager(x)
        assert y.dtype == np.float32
        assert accuracy(y, ref) < F32_TOL, (wid, shape)


@pytest.mark.parametrize("wid", IDS)
def test_weights_are_deterministic_float32_in_pytorch_layouts(wid: str) -> None:
    a, b = make_weights(wid), make_weights(wid)
    assert list(a) == list(b)
    for name in a:
        assert a[name].dtype == np.float32
        np.testing.assert_array_equal(a[name], b[name])
    w = get_workload(wid)
    assert [(n, a[n].shape) for n, _, _ in w.params] == [(n, s) for n, s, _ in w.params]


def test_weight_statistics_follow_the_recipe() -> None:
    p = make_weights("W1")
    assert p["fc2.weight"].shape == (1024, 1024)  # [out, in]
    assert abs(p["fc2.weight"].std() * np.sqrt(1024) - 1.0) < 0.01
    assert abs(p["fc1.bias"].std() - 0.1) < 0.02
    assert abs(p["ln.weight"].mean() - 1.0) < 0.02 and abs(p["ln.weight"].std() - 0.1) < 0.02
    conv = make_weights("W2")["conv2.weight"]
    assert conv.shape == (32, 32, 3, 3)
    assert abs(conv.std() * np.sqrt(32 * 9) - 1.0) < 0.05


def test_inputs_are_seeded_and_checked_against_the_spec() -> None:
    x = make_input("W3", (1, 5, 256), 3)
    np.testing.assert_array_equal(x, make_input("W3", (1, 5, 256), 3))
    assert not np.array_equal(x, make_input("W3", (1, 5, 256), 4))
    with pytest.raises(ValueError, match=r"\(1, 5, 128\) does not match W3's input \[b, s, 256\]"):
        make_input("W3", (1, 5, 128), 0)
    with pytest.raises(KeyError, match="unknown workload 'W9' \\(known: W1, W2, W3\\)"):
        make_weights("W9")


@pytest.mark.parametrize("wid", IDS)
def test_stream_is_made_of_whole_permutations(wid: str) -> None:
    shapes = WORKLOADS[wid].shapes
    stream = stream_shapes(wid)
    assert len(stream) == 200 and stream == stream_shapes(wid, 200, 42)
    k = len(shapes)
    for start in range(0, 200 - k + 1, k):
        assert sorted(stream[start : start + k]) == sorted(shapes)
    counts = collections.Counter(stream)
    assert max(counts.values()) - min(counts.values()) <= 1
    assert stream_shapes(wid, 7) == stream[:7]
    assert stream != stream_shapes(wid, 200, seed=1)


def test_stream_over_fewer_shapes() -> None:
    few = [(1, 256), (3, 256)]
    stream = stream_shapes("W1", 8, shapes=few)
    assert len(stream) == 8 and set(stream) == set(few)
    with pytest.raises(ValueError, match="at least one shape"):
        stream_shapes("W1", 8, shapes=[])


def test_stream_order_is_pinned() -> None:
    # The order of the benchmarks' stream is part of the method: it must not drift.
    assert stream_shapes("W1", 6) == [(b, 256) for b in (17, 8, 64, 32, 3, 1)]


def test_random_shapes_stay_in_range() -> None:
    for shape in random_shapes("W2", 50, seed=0):
        b, c, h, w = shape
        assert 1 <= b <= 4 and c == 3 and 1 <= h <= 160 and 1 <= w <= 160
    assert all(1 <= s <= 256 for _, s, _ in random_shapes("W3", 50, seed=0))
    assert random_shapes("W1", 5, 3) == random_shapes("W1", 5, 3)


def test_labels_name_the_changing_dimensions() -> None:
    assert WORKLOADS["W1"].label((17, 256)) == "b=17"
    assert WORKLOADS["W2"].label((4, 3, 64, 64)) == "4×64×64"
    assert WORKLOADS["W3"].label((2, 64, 256)) == "2×64"


def test_accuracy_is_relative_to_the_reference_scale() -> None:
    ref = np.array([2.0, -4.0])
    assert accuracy(np.array([2.0, -3.0], dtype=np.float32), ref) == 0.25
    with pytest.raises(ValueError, match="output shape"):
        accuracy(np.zeros(3), ref)


@pytest.mark.parametrize("wid", IDS)
def test_reference_agrees_with_pytorch_layouts(wid: str) -> None:
    torch = pytest.importorskip("torch")
    functional = torch.nn.functional
    p = {k: torch.from_numpy(v.astype(np.float64)) for k, v in make_weights(wid).items()}
    shape = WORKLOADS[wid].shapes[1]
    x = make_input(wid, shape, seed=0)
    t = torch.from_numpy(x.astype(np.float64))

    def ln(h: torch.Tensor, name: str) -> torch.Tensor:
        return functional.layer_norm(h, (256,), p[f"{name}.weight"], p[f"{name}.bias"], 1e-5)

    def lin(h: torch.Tensor, name: str) -> torch.Tensor:
        return functional.linear(h, p[f"{name}.weight"], p[f"{name}.bias"])

    def gelu(h: torch.Tensor) -> torch.Tensor:
        return functional.gelu(h, approximate="tanh")

    if wid == "W1":
        h = gelu(lin(torch.relu(lin(t, "fc1")), "fc2"))
        y = ln(t + lin(h, "fc3"), "ln")
    elif wid == "W2":
        h = t
        for name, stride in (("conv1", 1), ("conv2", 2), ("conv3", 1)):
            h = functional.conv2d(h, p[f"{name}.weight"], p[f"{name}.bias"], stride, padding=1)
            h = torch.relu(h)
        y = lin(h.mean(dim=(2, 3)), "fc")
    else:
        b, s, _ = shape
        qkv = lin(ln(t, "ln1"), "attn.qkv").reshape(b, s, 3, 4, 64).permute(2, 0, 3, 1, 4)
        o = functional.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
        h = t + lin(o.transpose(1, 2).reshape(b, s, 256), "attn.proj")
        y = h + lin(gelu(lin(ln(h, "ln2"), "mlp.fc1")), "mlp.fc2")
    ref = reference_f64(wid, make_weights(wid))(x)
    assert accuracy(y.numpy(), ref) < 1e-12
