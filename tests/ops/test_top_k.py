"""``top_k``'s reference kernel (a partition, then the k picked sorted) gives what its
definition says: the k largest along the last axis, largest first, equal values by lower
index first, NaN above every number as NumPy's sort places it; for every dtype, with ties,
signed zeros, infinities and NaN, at every k."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from shapevm.ops.table_layout import top_k_kernel

RNG = np.random.default_rng(17)
DTYPES = [np.float32, np.float64, np.float16, np.int8, np.int32, np.int64, np.uint8, np.bool_]


def _by_definition(x: np.ndarray[Any, Any], k: int) -> tuple[Any, Any]:
    """A stable ascending sort of the reversed axis, read backwards."""
    n = x.shape[-1]
    order = np.argsort(x[..., ::-1], axis=-1, kind="stable")[..., ::-1][..., :k]
    index = (n - 1 - order).astype(np.int64)
    return np.take_along_axis(x, index, axis=-1), index


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_top_k_is_its_definition(dtype: Any) -> None:
    for _ in range(250):
        lead = tuple(int(v) for v in RNG.integers(1, 5, RNG.integers(0, 3)))
        shape = (*lead, int(RNG.integers(1, 40)))
        if RNG.random() < 0.5:  # many ties
            x = RNG.integers(-3, 4, shape).astype(dtype)
        else:
            x = (RNG.standard_normal(shape) * 3).astype(dtype)
        if np.dtype(dtype).kind == "f" and RNG.random() < 0.6:
            special = RNG.random(shape) < 0.25
            x[special] = RNG.choice([np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0], special.sum())
        k = int(RNG.integers(0, shape[-1] + 1))
        values, index = top_k_kernel([x], {"k": (k,)})
        want_values, want_index = _by_definition(x, k)
        np.testing.assert_array_equal(index, want_index)
        np.testing.assert_array_equal(values, want_values)
        assert values.dtype == x.dtype and index.dtype == np.int64
