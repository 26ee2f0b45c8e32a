"""Elementwise ops write into operands that die there, and never into live values."""

from __future__ import annotations

import numpy as np

import shapevm as sv
import shapevm.numpy as snp
from shapevm import lax
from shapevm.runtime.interpreter import inplace_candidates


def _exp(fn, spec="b, 4"):
    return sv.export(sv.jit(fn))(sv.ShapeDtypeStruct(sv.symbolic_shape(spec), np.float32))


def test_a_chain_reuses_its_temporaries_but_not_the_argument() -> None:
    exp = _exp(lambda x: snp.tanh(x * 2.0 + 1.0) * 3.0)
    fn = exp.program.functions[0]
    assert len(inplace_candidates(fn)) == 3  # add, tanh and the last mul reuse a temporary
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    before = x.copy()
    np.testing.assert_allclose(exp.call(x), np.tanh(before * 2 + 1) * 3, rtol=1e-6)
    np.testing.assert_array_equal(x, before)


def test_values_still_needed_views_and_loops_are_not_overwritten() -> None:
    def f(x):
        y = x * 2.0
        v = y.reshape(-1)  # a view of y: y must not be overwritten while v lives
        z = snp.exp(y)
        w = lax.fori_loop(0, 3, lambda i, c: c + z, snp.zeros_like(x))  # z used in a loop
        return z + 1.0, v.sum() + w.sum(), y

    exp = _exp(f)
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    z, s, y = exp.call(x)
    np.testing.assert_allclose(z, np.exp(2 * x) + 1, rtol=1e-6)
    np.testing.assert_allclose(s, (2 * x).sum() + 3 * np.exp(2 * x).sum(), rtol=1e-5)
    np.testing.assert_allclose(y, 2 * x, rtol=1e-6)
