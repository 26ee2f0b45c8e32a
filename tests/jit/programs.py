"""Functions the JIT tests compile, and helpers to run them both ways."""

from __future__ import annotations

from typing import Any

import numpy as np

import shapevm as sv
import shapevm.numpy as snp

RNG = np.random.default_rng(1234)


def softmax_mlp(x: Any, w: Any, b: Any) -> Any:
    y = snp.maximum(x @ w + b, 0.0)
    z = snp.exp(y - snp.max(y, axis=1, keepdims=True))
    return z / snp.sum(z, axis=1, keepdims=True)


def mlp_inputs(batch: int, n: int = 8, k: int = 4) -> tuple[np.ndarray, ...]:
    x = RNG.normal(size=(batch, n)).astype(np.float32)
    w = RNG.normal(size=(n, k)).astype(np.float32)
    b = RNG.normal(size=(k,)).astype(np.float32)
    return x, w, b


MLP_SHAPES = ["b, 8", "8, 4", "4"]


def jitted_mlp(**options: Any) -> Any:
    return sv.jit(softmax_mlp, shapes=MLP_SHAPES, **options)


def exported_mlp() -> Any:
    """`softmax_mlp` exported for a symbolic batch ``b``."""
    (b,) = sv.symbolic_shape("b")
    specs = (
        sv.ShapeDtypeStruct((b, 8), np.float32),
        sv.ShapeDtypeStruct((8, 4), np.float32),
        sv.ShapeDtypeStruct((4,), np.float32),
    )
    return sv.export(sv.jit(softmax_mlp))(*specs)


def interpreted(jitted: Any, *args: Any) -> list[Any]:
    """The interpreter's results for a call of ``jitted`` (its only engine's executable)."""
    (engine,) = jitted.engines
    return list(engine.executable(*args))


def assert_same(
    ref: Any,
    got: Any,
    rtol: float = 1e-6,
    exp_chains: bool = False,
    truth: Any = None,
    sums: bool = False,
) -> None:
    """``got`` equals the interpreter's ``ref`` within ``rtol``. ``exp_chains``: a value
    made by ``exp`` of a computed ``y`` carries ``|y|`` times the relative error of ``y``
    (a 1-ulp difference inside ``exp(exp(x))`` near 1e24 is 4e-6 outside), so the tolerance
    of a value ``r`` grows with ``|ln |r||``, the largest ``|y|`` that could have made it.
    A product of such values may cancel (``exp(exp(x)) @ w`` near 0.8 from terms near 1e3),
    so a value also passes within the largest value's own tolerance of it (normwise).

    ``truth``: a function giving the same program's outputs computed in float64; a value
    beyond the tolerance still passes when it is no further from the truth than four times
    the interpreter's own value (plus the tolerance): a quotient by a sum that cancels
    (``h / (x @ w)`` near -31) differs by 1.4e-4 between two summation orders, and there
    the interpreter's float32 was the one 1.6e-4 off, the native 1.6e-5.

    ``sums``: the program adds products (a matmul, a dense layer, a reduction), whose error
    is relative to the terms, not to a sum that cancels: with ``truth``, a value also
    passes within 4 ``rtol`` of the output's largest float64 value (two dense layers, an
    output of -0.0089 from terms near 1: -0.00893593 against the interpreter's
    -0.00893736, float64's -0.00893747, 1.5e-6 off, the float32 rounding of such terms)."""
    ref = ref if isinstance(ref, (list, tuple)) else [ref]
    got = got if isinstance(got, (list, tuple)) else [got]
    assert len(ref) == len(got)
    if truth is not None:
        try:
            _assert_same(ref, got, rtol, exp_chains)
        except AssertionError:
            outs = truth()
            outs = outs if isinstance(outs, (list, tuple)) else [outs]
            for r, g, t in zip(ref, got, outs, strict=True):
                r, g = np.asarray(r), np.asarray(g)
                assert r.dtype == g.dtype and r.shape == g.shape, (r.dtype, g.dtype, r.shape)
                if r.dtype.kind != "f":
                    np.testing.assert_array_equal(g, r)
                    continue
                r64, g64, t64 = (np.asarray(a, np.float64) for a in (r, g, t))
                with np.errstate(invalid="ignore"):
                    bound = 4 * np.abs(r64 - t64) + rtol * np.abs(t64) + 1e-6
                    finite = np.isfinite(t64)
                    if sums and finite.any():
                        bound = np.maximum(bound, 4 * rtol * np.abs(t64[finite]).max())
                    ok = (np.abs(g64 - t64) <= bound) | np.isclose(g, r, rtol=rtol, atol=1e-6)
                ok |= np.isnan(g64) & np.isnan(r64)
                assert ok.all(), (
                    f"beyond the tolerance and further from float64 than the interpreter at "
                    f"{np.argwhere(~ok)[:5]}: {g[~ok]} != {r[~ok]} (float64: {t64[~ok]})"
                )
        return
    _assert_same(ref, got, rtol, exp_chains)


def _assert_same(ref: list[Any], got: list[Any], rtol: float, exp_chains: bool) -> None:
    for r, g in zip(ref, got, strict=True):
        r, g = np.asarray(r), np.asarray(g)
        assert r.dtype == g.dtype and r.shape == g.shape, (r.dtype, g.dtype, r.shape, g.shape)
        if exp_chains and r.dtype.kind == "f":
            with np.errstate(all="ignore"):
                scale = np.abs(np.log(np.abs(r.astype(np.float64))))
            scale = np.where(np.isfinite(scale), np.maximum(scale, 1.0), 1.0)
            finite = np.isfinite(r)
            big = float(np.abs(r[finite]).max()) if finite.any() else 0.0
            big_scale = max(1.0, abs(float(np.log(big)))) if big > 0 else 1.0
            with np.errstate(invalid="ignore"):
                normwise = np.abs(g.astype(np.float64) - r) <= rtol * big_scale * big
            ok = np.isclose(g, r, rtol=rtol * scale, atol=1e-6, equal_nan=True) | normwise
            assert ok.all(), f"beyond the tolerance at {np.argwhere(~ok)[:5]}: {g[~ok]} != {r[~ok]}"
            continue
        np.testing.assert_allclose(g, r, rtol=rtol, atol=1e-6, equal_nan=True)
