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


def _known_shape(xp: Any, x: Any) -> Any:
    # arrays of a shape known when tracing: NumPy's own until a traced value goes in
    out = xp.zeros((5, 4), dtype=xp.float32)
    out[:, 0] = x[0]
    out[1:3, 1] = 2.0
    ident = xp.eye(5, dtype=xp.float32)[xp.argmax(x, axis=1)]  # rows of a made table
    ones = xp.ones_like(x[:2])
    ones[x[:2] < 0] = -1
    return out + ident.sum() + ones.sum(0)[:, None]


def _known_values(xp: Any, x: Any) -> Any:
    w = xp.zeros(5, dtype=xp.float32)
    w[0] = 1.0  # a known value into a known array: still known
    scale = float(w.sum() * 2)  # so Python may read it
    if (w > 0).any():
        scale += 1
    scale += int(xp.ones(())) + xp.ones(()).item() + sum(w.tolist()) + [0, 1, 2][xp.ones((), int)]
    return x * scale + w


CASES: dict[str, Callable[[Any, Any], Any]] = {
    "mask": _mask, "column": _column, "slices": _slices, "shift": _shift, "built": _built,
    "int target": _int_target, "scattered": _scattered, "known shape": _known_shape,
    "known values": _known_values,
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


def _into_made_view(x: Any) -> Any:
    z = snp.zeros((4, 4), dtype=np.float32)
    row = z[0]
    row[:] = x[0]  # NumPy would change z too
    return z


def _into_made_viewed(x: Any) -> Any:
    z = snp.zeros((4, 4), dtype=np.float32)
    t = z.T
    z[0] = x[0]  # NumPy would change t too
    return t


REFUSED = {
    "a view of a made array": (_into_made_view, r"assignment into a view"),
    "a made array viewed": (_into_made_viewed, r"a view of which is in use"),
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


def test_arrays_of_known_value_are_computed_when_tracing() -> None:
    """Ops on arrays the function made from known values (zeros, eye) run when tracing, as
    NumPy runs them: the program holds their results, not the ops (a mask of a known size
    is one constant); an assignment of a traced value makes the array the program's."""

    def f(x: Any) -> Any:
        mask = snp.triu(snp.ones((4, 4), dtype=np.float32), 1) * -1e9
        y = snp.zeros((4, 4), dtype=np.float32)
        y[0] = x[0]
        return x + mask, y

    exp = sv.export(sv.jit(f))(sv.ShapeDtypeStruct((4, 4), np.float32))
    text = str(exp.program) if hasattr(exp, "program") else exp.text()
    assert "triu" not in text and "greater" not in text and "less" not in text, text
    x = RNG.standard_normal((4, 4)).astype(np.float32)
    mask = np.triu(np.ones((4, 4), np.float32), 1) * -1e9
    want_y = np.zeros((4, 4), np.float32)
    want_y[0] = x[0]
    got = exp.call(x)
    np.testing.assert_array_equal(got[0], x + mask)
    np.testing.assert_array_equal(got[1], want_y)


def test_a_value_that_does_not_fit_the_selection_says_both_shapes() -> None:
    def body(x: Any) -> Any:
        y = x.copy()
        y[:, 1:3] = snp.ones((4,), np.float32)
        return y

    with pytest.raises(ValueError, match=r"(?s)does not broadcast.*\(n, 2\).*\(4,\).*fix"):
        sv.jit(body, shapes="n, 5")(np.ones((2, 5), np.float32))
