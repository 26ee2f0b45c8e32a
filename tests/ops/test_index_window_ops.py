"""The rows ONNX models brought to the op table: math, indexing, N-d windows, resizing.

Each row's shape and dtype rules agree with its kernel on several valuations (`run_op`),
and each kernel agrees with a plain-loop oracle that shares no code with it.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from shapevm.ops import DType, OpFlag, ShapeRuleError, get_op
from tests.ops.opcheck import run_op

F32, F64, F16, I32, I64, U8, BOOL = (
    DType.F32, DType.F64, DType.F16, DType.I32, DType.I64, DType.U8, DType.BOOL,
)  # fmt: skip
ENVS = [{"b": 1, "n": 1}, {"b": 3, "n": 5}, {"b": 2, "n": 4}]
POOL = {"kernel": (2, 3), "stride": (1, 2), "pads": (0, 1, 1, 0), "dilation": (1, 1)}

CASES: list[tuple[str, list[str], dict[str, Any], list[DType]]] = [
    *[(name, ["b, n"], {}, [F32]) for name in
      ("tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "softplus")],
    ("round", ["b, n"], {}, [F64]),
    ("round", ["b, n"], {}, [I32]),
    ("isnan", ["b, n"], {}, [F32]),
    ("isinf", ["b, n"], {}, [F16]),
    ("fmod", ["b, n", "n"], {}, [F32, F32]),
    ("fmod", ["b, n", "b, 1"], {}, [I64, I64]),
    ("take", ["b, n, 3", "2, 2"], {"axis": 1}, [F32, I64]),
    ("take", ["b, n", ""], {"axis": 0}, [U8, I32]),
    ("take_along_axis", ["b, n + 2", "b, 2"], {"axis": 1}, [F32, I64]),
    ("gather_nd", ["b, n, 3", "4, 2"], {"batch_dims": 0}, [F32, I64]),
    ("gather_nd", ["b, n, 3", "b, 2, 1"], {"batch_dims": 1}, [I32, I64]),
    ("scatter_nd", ["b, n, 3", "2, 1", "2, n, 3"], {"reduction": "add"}, [F32, I64, F32]),
    ("scatter_elements", ["b, n", "b, 1", "b, 1"], {"axis": 1}, [F32, I64, F32]),
    ("cumsum", ["b, n"], {"axis": 1, "exclusive": True}, [F32]),
    ("cumsum", ["b, n"], {"axis": 0, "reverse": True}, [I64]),
    ("flip", ["b, n, 2"], {"axes": (0, 2)}, [F32]),
    ("shape_of", ["b, n, 2"], {}, [BOOL]),
    ("top_k_n", ["b, n + 2", ""], {}, [F32, I64]),
    ("max_pool", ["b, 2, n + 3, 7"], POOL, [F32]),
    ("max_pool", ["b, 1, n + 4"], {"kernel": (3,), "dilation": (2,), "ceil_mode": True}, [U8]),
    ("max_pool_indices", ["b, 2, n + 3, 7"], POOL, [F32]),
    ("avg_pool", ["b, 2, n + 3, 7"], {**POOL, "count_include_pad": True}, [F32]),
    ("avg_pool", ["1, 2, n + 2, 5, 4"], {"kernel": (2, 2, 2), "stride": (2, 2, 2),
                                          "ceil_mode": True}, [F64]),
    ("conv_transpose", ["b, 4, n, 3", "4, 3, 2, 3", "6"],
     {"stride": (2, 1), "pads": (1, 0, 0, 1), "groups": 2, "output_padding": (1, 0)},
     [F32, F32, F32]),
    ("conv_transpose", ["b, 2, n + 1", "2, 3, 3"], {"dilation": (2,)}, [F32, F32]),
    ("resize_axis", ["b, 3, n"], {"axis": 2, "size": "2*n", "mode": "linear"}, [F32]),
    ("resize_axis", ["b, 3, n + 1"], {"axis": 2, "size": "n", "mode": "cubic",
                                      "antialias": True}, [F32]),
    ("resize_axis", ["b, 3"], {"axis": 0, "size": "b + 1", "scale": 1.5}, [I32]),
]  # fmt: skip


def _id(case: tuple[str, list[str], dict[str, Any], list[DType]]) -> str:
    return f"{case[0]}-{'-'.join(case[1])}-{'-'.join(d.value for d in case[3])}"


@pytest.mark.parametrize("env", ENVS, ids=lambda e: f"b{e['b']}n{e['n']}")
@pytest.mark.parametrize(("name", "specs", "attrs", "dtypes"), CASES, ids=map(_id, CASES))
def test_rules_agree_with_kernels(
    name: str, specs: list[str], attrs: dict[str, Any], dtypes: list[DType], env: dict[str, int]
) -> None:
    args = None
    if name in (
        "take",
        "take_along_axis",
        "scatter_elements",
        "gather_nd",
        "scatter_nd",
        "top_k_n",
    ):
        args = _index_args(name, specs, dtypes, env)
    with np.errstate(all="ignore"):
        run_op(name, specs, attrs, env, dtypes, args)


def _index_args(name: str, specs: list[str], dtypes: list[DType], env: dict[str, int]) -> Any:
    """Operands with in-range indices (the random ones of `run_op` may be out of range)."""
    b, n = env["b"], env["n"]
    rng = np.random.default_rng(1)
    if name == "top_k_n":
        return [rng.normal(size=(b, n + 2)).astype(np.float32), np.int64(n)]
    if name == "take":
        if specs[1] == "2, 2":
            return [rng.normal(size=(b, n, 3)).astype(np.float32), rng.integers(-n, n, (2, 2))]
        return [rng.integers(0, 9, (b, n)).astype(np.uint8), np.int32(b - 1)]
    if name == "take_along_axis":
        return [rng.normal(size=(b, n + 2)).astype(np.float32), rng.integers(0, n + 2, (b, 2))]
    if name == "scatter_elements":
        x = rng.normal(size=(b, n)).astype(np.float32)
        return [x, rng.integers(0, n, (b, 1)), np.ones((b, 1), np.float32)]
    if name == "scatter_nd":
        x = rng.normal(size=(b, n, 3)).astype(np.float32)
        return [x, rng.integers(0, b, (2, 1)), np.ones((2, n, 3), np.float32)]
    x = rng.integers(-5, 5, (b, n, 3)).astype(dtypes[0].numpy)
    if specs[1] == "4, 2":
        return [x, np.stack([rng.integers(0, b, 4), rng.integers(-n, n, 4)], axis=1)]
    return [x, rng.integers(0, n, (b, 2, 1))]


def test_flags_of_the_new_rows() -> None:
    def flags(name: str) -> OpFlag:
        info = get_op(name)
        assert info is not None
        return info.flags

    assert OpFlag.ELEMENTWISE | OpFlag.FUSIBLE in flags("softplus")
    assert OpFlag.ELEMENTWISE | OpFlag.FUSIBLE in flags("round")  # the tile's vrint
    for name in ("tan", "asinh", "isnan", "fmod"):
        assert OpFlag.ELEMENTWISE in flags(name) and OpFlag.FUSIBLE not in flags(name), name
    assert OpFlag.COMPARISON in flags("isinf")
    assert OpFlag.LAYOUT in flags("flip")
    assert OpFlag.DATA_DEPENDENT in flags("top_k_n")
    for name in ("take", "gather_nd", "scatter_nd", "cumsum", "max_pool", "resize_axis"):
        assert flags(name) == OpFlag.NONE, name


def test_every_new_row_is_covered() -> None:
    new = {
        "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "round",
        "isnan", "isinf", "softplus", "fmod", "take", "take_along_axis", "gather_nd",
        "scatter_nd", "scatter_elements", "cumsum", "flip", "shape_of", "max_pool",
        "max_pool_indices", "avg_pool", "conv_transpose", "resize_axis", "top_k_n",
    }  # fmt: skip
    assert new <= {case[0] for case in CASES}
    assert all(get_op(name) is not None for name in new)


def kernel(name: str, *args: Any, **attrs: Any) -> Any:
    info = get_op(name)
    assert info is not None
    out = info.kernel(list(args), info.filled_attrs(attrs))
    return out[0] if len(out) == 1 else out


# -- values against oracles ---------------------------------------------------------------


def test_elementwise_values() -> None:
    x = np.array([-2.5, -0.5, 0.5, 1.5, 2.5, np.nan, np.inf], np.float32)
    assert kernel("round", x)[:5].tolist() == [-2.0, -0.0, 0.0, 2.0, 2.0]
    assert kernel("isnan", x).tolist() == [False] * 5 + [True, False]
    assert kernel("isinf", x).tolist() == [False] * 6 + [True]
    big = np.array([-30.0, 0.0, 100.0], np.float32)
    want = np.log1p(np.exp(big.astype(np.float64)))
    np.testing.assert_allclose(kernel("softplus", big), want, rtol=1e-6)
    assert kernel("fmod", np.array([-7, 7]), np.array([3, -3])).tolist() == [-1, 1]
    assert np.isnan(kernel("asin", np.array([2.0], np.float32))[0])


def test_take_counts_negative_indices_from_the_end() -> None:
    x = np.arange(12).reshape(3, 4)
    assert kernel("take", x, np.array([[-1, 0]]), axis=1).tolist() == [
        [[3, 0]], [[7, 4]], [[11, 8]],
    ]  # fmt: skip
    with pytest.raises(IndexError):
        kernel("take", x, np.array([4]), axis=1)


def test_gather_nd_and_scatter_nd_match_loops() -> None:
    rng = np.random.default_rng(0)
    data = rng.normal(size=(2, 3, 4))
    idx = np.array([[[0], [2]], [[1], [1]]])
    got = kernel("gather_nd", data, idx, batch_dims=1)
    want = np.stack([[data[b, idx[b, q, 0]] for q in range(2)] for b in range(2)])
    np.testing.assert_array_equal(got, want)
    base = np.zeros((4, 2))
    where = np.array([[1], [3], [1]])
    upd = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    for reduction, fn in (("add", np.add), ("mul", np.multiply), ("max", np.maximum)):
        want = base.copy() + (1 if reduction == "mul" else 0)
        for (i,), row in zip(where, upd, strict=True):
            want[i] = fn(want[i], row)
        got = kernel("scatter_nd", base + (1 if reduction == "mul" else 0), where, upd,
                     reduction=reduction)  # fmt: skip
        np.testing.assert_array_equal(got, want)


def test_scatter_elements_and_take_along_axis_are_inverse() -> None:
    x = np.arange(6.0).reshape(2, 3)
    idx = np.array([[2, 0], [1, 2]])
    taken = kernel("take_along_axis", x, idx, axis=1)
    assert taken.tolist() == [[2.0, 0.0], [4.0, 5.0]]
    back = kernel("scatter_elements", np.zeros_like(x), idx, taken, axis=1)
    assert back.tolist() == [[0.0, 0.0, 2.0], [0.0, 4.0, 5.0]]


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum_matches_a_loop(exclusive: bool, reverse: bool) -> None:
    x = np.array([[1, 2, 3, 4], [5, 6, 7, 8]], np.int32)
    got = kernel("cumsum", x, axis=1, exclusive=exclusive, reverse=reverse)
    want = np.zeros_like(x)
    for i in range(4):
        js = range(i, 4) if reverse else range(i + 1)
        want[:, i] = sum(x[:, j] for j in js if not (exclusive and j == i))
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.int32


def pool_oracle(x: Any, kernel_: Any, stride: Any, dil: Any, pads: Any, ceil: bool, kind: str,
                include: bool) -> Any:  # fmt: skip
    """One window at a time, over the trailing len(kernel) axes."""
    k = len(kernel_)
    spatial = x.shape[-k:]
    outs = []
    for i in range(k):
        room = spatial[i] + pads[i] + pads[k + i] - dil[i] * (kernel_[i] - 1) - 1
        o = -(-room // stride[i]) + 1 if ceil else room // stride[i] + 1
        if ceil and (o - 1) * stride[i] >= spatial[i] + pads[i]:
            o -= 1
        outs.append(o)
    out = np.zeros((*x.shape[:-k], *outs))
    for pos in itertools.product(*(range(o) for o in outs)):
        taps, count = [], 0
        for tap in itertools.product(*(range(kk) for kk in kernel_)):
            coord = [pos[i] * stride[i] + tap[i] * dil[i] - pads[i] for i in range(k)]
            inside_pad = all(-pads[i] <= c < spatial[i] + pads[k + i] for i, c in enumerate(coord))
            if all(0 <= c < spatial[i] for i, c in enumerate(coord)):
                taps.append(x[(..., *coord)])
                count += 1
            elif include and inside_pad:
                count += 1
        stacked = np.stack(taps, axis=-1)
        out[(..., *pos)] = stacked.max(-1) if kind == "max" else stacked.sum(-1) / count
    return out


POOL_CASES = [
    ((3,), (2,), (1,), (1, 1), False),
    ((2, 3), (2, 2), (1, 2), (0, 1, 1, 0), True),
    ((3, 3), (2, 2), (1, 1), (1, 1, 1, 1), True),
    ((2, 2, 2), (1, 2, 1), (2, 1, 1), (0, 0, 1, 1, 1, 0), False),
]


@pytest.mark.parametrize(("kern", "stride", "dil", "pads", "ceil"), POOL_CASES)
@pytest.mark.parametrize("include", [False, True])
def test_pooling_matches_the_window_loop(
    kern: Any, stride: Any, dil: Any, pads: Any, ceil: bool, include: bool
) -> None:
    x = np.random.default_rng(3).normal(size=(2, 3, *([7] * len(kern)))).astype(np.float32)
    attrs = {"kernel": kern, "stride": stride, "dilation": dil, "pads": pads, "ceil_mode": ceil}
    np.testing.assert_allclose(
        kernel("max_pool", x, **attrs), pool_oracle(x, kern, stride, dil, pads, ceil, "max", False)
    )
    got = kernel("avg_pool", x, count_include_pad=include, **attrs)
    want = pool_oracle(x, kern, stride, dil, pads, ceil, "avg", include)
    np.testing.assert_allclose(got, want, rtol=1e-4)


def test_max_pool_indices_point_at_the_maxima() -> None:
    x = np.random.default_rng(4).normal(size=(2, 3, 5, 6)).astype(np.float32)
    attrs = {"kernel": (2, 2), "stride": (2, 2), "pads": (0, 0, 1, 0), "ceil_mode": True}
    values = kernel("max_pool", x, **attrs)
    idx = kernel("max_pool_indices", x, **attrs)
    np.testing.assert_array_equal(x.reshape(-1)[idx], values)
    col = kernel("max_pool_indices", x, storage_order=1, **attrs)
    h, w = 5, 6
    nc, rest = col // (h * w), col % (h * w)
    np.testing.assert_array_equal(nc * h * w + (rest % h) * w + rest // h, idx)


def conv_transpose_oracle(x: Any, w: Any, stride: Any, pads: Any, dil: Any, extra: Any,
                          groups: int) -> Any:  # fmt: skip
    """Scatter every input element times the kernel into the full output, then crop."""
    n, c = x.shape[:2]
    k = w.shape[2:]
    og = w.shape[1]
    full = [s * (i - 1) + d * (kk - 1) + 1 + e
            for s, i, d, kk, e in zip(stride, x.shape[2:], dil, k, extra, strict=True)]  # fmt: skip
    out = np.zeros((n, og * groups, *full))
    cg = c // groups
    for b, ci in itertools.product(range(n), range(c)):
        g = ci // cg
        for pos in itertools.product(*(range(i) for i in x.shape[2:])):
            for tap in itertools.product(*(range(kk) for kk in k)):
                at = tuple(p * s + t * d for p, s, t, d in zip(pos, stride, tap, dil, strict=True))
                out[(b, slice(g * og, (g + 1) * og), *at)] += (
                    x[(b, ci, *pos)] * w[(ci, slice(None), *tap)]
                )
    nsp = len(k)
    crop = tuple(slice(lo, f - hi) for lo, hi, f in zip(pads[:nsp], pads[nsp:], full, strict=True))
    return out[(slice(None), slice(None), *crop)]


@pytest.mark.parametrize(
    ("shape", "wshape", "stride", "pads", "dil", "extra", "groups"),
    [
        ((1, 2, 3), (2, 3, 3), (2,), (0, 1), (1,), (1,), 1),
        ((2, 4, 3, 4), (4, 2, 2, 3), (2, 1), (1, 0, 0, 2), (1, 2), (0, 0), 2),
        ((1, 1, 2, 2, 2), (1, 2, 2, 2, 2), (1, 2, 1), (0,) * 6, (1, 1, 1), (0, 1, 0), 1),
    ],
)
def test_conv_transpose_matches_the_scatter_loop(
    shape: Any, wshape: Any, stride: Any, pads: Any, dil: Any, extra: Any, groups: int
) -> None:
    rng = np.random.default_rng(5)
    x = rng.normal(size=shape).astype(np.float32)
    w = rng.normal(size=wshape).astype(np.float32)
    got = kernel("conv_transpose", x, w, stride=stride, pads=pads, dilation=dil,
                 output_padding=extra, groups=groups)  # fmt: skip
    want = conv_transpose_oracle(x, w, stride, pads, dil, extra, groups)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_resize_axis_nearest_and_linear_values() -> None:
    x = np.array([[1.0, 2.0, 3.0, 4.0]], np.float32)
    near = kernel("resize_axis", x, axis=1, size=(8,), mode="nearest", coordinate="asymmetric",
                  nearest="floor")  # fmt: skip
    assert near.tolist() == [[1, 1, 2, 2, 3, 3, 4, 4]]
    half = kernel("resize_axis", x, axis=1, size=(2,), mode="linear")
    assert half.tolist() == [[1.5, 3.5]]
    corners = kernel("resize_axis", x, axis=1, size=(7,), mode="linear", coordinate="align_corners")
    np.testing.assert_allclose(corners, [[1, 1.5, 2, 2.5, 3, 3.5, 4]])
    ints = kernel("resize_axis", np.array([[0, 10]], np.uint8), axis=1, size=(3,), mode="linear",
                  coordinate="align_corners")  # fmt: skip
    assert ints.dtype == np.uint8 and ints.tolist() == [[0, 5, 10]]


def test_empty_max_and_min_give_their_identity() -> None:
    empty = np.zeros((2, 0), np.float32)
    assert kernel("max", empty, axis=(1,)).tolist() == [-np.inf, -np.inf]
    assert kernel("min", np.zeros((0,), np.int32)).item() == np.iinfo(np.int32).max
    assert kernel("max", np.zeros((0,), bool)).item() is False


def test_rules_reject_bad_attributes() -> None:
    pool = get_op("max_pool")
    assert pool is not None
    with pytest.raises(ShapeRuleError, match="stride needs 2 values"):
        pool.shape_rule([(1, 1, 5, 5)], {"kernel": (2, 2), "stride": (1,)})
    gnd = get_op("gather_nd")
    assert gnd is not None
    with pytest.raises(ShapeRuleError, match="constant k"):
        gnd.shape_rule([(3, 4), (2, 5)], {"batch_dims": 0})
    take = get_op("take")
    assert take is not None
    with pytest.raises(ShapeRuleError, match="indices must be an integer tensor"):
        take.dtype_rule([F32, F32], {"axis": 0})
