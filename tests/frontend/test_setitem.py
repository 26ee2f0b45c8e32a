"""``x[idx] = v`` inside a traced function, as NumPy does it, for arrays the function made
itself; refused, saying what to write instead, where NumPy would change another array
too (an argument, a view, an array a view of which is held) or where the trace could not
carry the change (into an array from outside a loop body)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import shapevm as sv
import shapevm.numpy as snp
from shapevm import lax

RNG = np.random.default_rng(3)


def _mask(xp: Any, x: Any) -> Any:
    y = x * 1
    y[y < 0] = 0
    return y


def _column(xp: Any, x: Any) -> Any:
    y = x.copy()
    y[:, 0] = 0
    y[..., -1] = x[:, 1] * 2
    return y


def _slices(xp: Any, x: Any) -> Any:
    y = xp.array(x)
    y[:, 1:3] = x[:, :2] * 10
    y[-1, ::2] = -5
    y[0] = xp.arange(x.shape[1], dtype=xp.float32)
    return y


def _shift(xp: Any, x: Any) -> Any:
    y = x.copy()
    y[1:, :] = x[:-1, :]
    y[0, 0] += 1  # reads the element, then assigns
    return y


def _built(xp: Any, x: Any) -> Any:
    out = xp.zeros((x.shape[0], 3), dtype=xp.float32)
    out[:, 0] = x[:, 0]
    out[:, 2] = x.sum(1)
    alias = out
    out[0, 1] = 7
    return alias


def _int_target(xp: Any, x: Any) -> Any:
    y = (x * 0).astype(xp.int32)
    y[x > 0] = 3.7  # cast into the array's dtype, as NumPy does
    return y


def _scattered(xp: Any, x: Any) -> Any:
    y = x.copy()
    y[xp.arange(x.shape[0]), xp.argmax(x, axis=1)] = 0  # each row's largest, as a hinge loss
    y[[0, -1]] = -1.0  # whole rows, a negative index counting from the end
    y[np.array([1, 1])] = x[0] * 3  # a repeated index: the last write wins
    return y


CASES: dict[str, Callable[[Any, Any], Any]] = {
    "mask": _mask, "column": _column, "slices": _slices, "shift": _shift, "built": _built,
    "int target": _int_target, "scattered": _scattered,
}  # fmt: skip


@pytest.mark.parametrize("name", CASES)
def test_assignments_give_numpys_arrays(name: str) -> None:
    body = CASES[name]
    f = sv.jit(lambda x: body(snp, x), shapes=("n, 5",), constraints=["n >= 2"])
    g = sv.jit(lambda x: body(snp, x), shapes=("n, 5",), constraints=["n >= 2"], enabled=False)
    for n in (2, 3, 40):
        x = RNG.standard_normal((n, 5)).astype(np.float32)
        want = body(np, x.copy())
        for run in (g, f, f, f):  # the interpreter, then the JIT until it compiles
            got = run(x)
            f.wait(30)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
    assert all(r["tier"] >= 2 for r in f.jit_info()), f.jit_info()


def test_a_loop_body_assigns_into_its_carried_copy() -> None:
    def body(i: Any, c: Any) -> Any:
        c = c.copy()
        c[0] = c[0] + 1
        c[1:] = c[1:] * 2
        return c

    f = sv.jit(lambda x: lax.fori_loop(0, 3, body, x), shapes=("n",), constraints=["n >= 2"])
    np.testing.assert_array_equal(f(np.ones(3, np.float32)), [4, 8, 8])


def _into_argument(x: Any) -> Any:
    x[0] = 1
    return x


def _into_viewed(x: Any) -> Any:
    y = x * 1
    v = y[:2]
    y[0] = 5
    return v


def _into_view(x: Any) -> Any:
    y = x * 1
    y.reshape(-1)[0] = 5
    return y


def _into_outer(x: Any) -> Any:
    y = x.copy()

    def body(i: Any, c: Any) -> Any:
        y[0] = 1
        return c

    return lax.fori_loop(0, 2, body, x) + y


def _through_indices(x: Any) -> Any:
    y = x + 0
    y[:, [0, 1]] = 0  # integer arrays past the leading axes
    return y


def _array_through_mask(x: Any) -> Any:
    y = x + 0
    y[y > 0] = x[:1]
    return y


REFUSED = {
    "an argument": (_into_argument, r"argument(.|\n)*y = x.copy\(\)"),
    "viewed": (_into_viewed, r"a view of which is in use"),
    "a view": (_into_view, r"assignment into a view"),
    "outer": (_into_outer, r"fori_loop body(.|\n)*carry the array"),
    "indices": (_through_indices, r"integer-array index"),
    "array through a mask": (_array_through_mask, r"boolean mask(.|\n)*snp.where"),
}


@pytest.mark.parametrize("name", REFUSED)
def test_assignments_numpy_would_see_elsewhere_are_refused(name: str) -> None:
    fn, message = REFUSED[name]
    with pytest.raises(sv.TracingError, match=message):
        sv.jit(fn, shapes=("n, 4",), constraints=["n >= 2"])(np.ones((3, 4), np.float32))


def test_a_value_that_does_not_fit_the_selection_says_both_shapes() -> None:
    def body(x: Any) -> Any:
        y = x.copy()
        y[:, 1:3] = snp.ones((4,), np.float32)
        return y

    with pytest.raises(ValueError, match=r"(?s)does not broadcast.*\(n, 2\).*\(4,\).*fix"):
        sv.jit(body, shapes="n, 5")(np.ones((2, 5), np.float32))
