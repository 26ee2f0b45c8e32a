"""``einsum`` traced as the products and transposes it stands for (`shapevm.frontend.einsum`)
agrees with NumPy's ``einsum`` on any equation of one to four operands; the equations it
does not write keep the ``einsum`` op; an attention written with ``einsum`` runs as one native
attention kernel."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import shapevm as sv
import shapevm.numpy as snp
from shapevm.frontend.einsum import contract

RNG = np.random.default_rng(5)


@st.composite
def equations(draw: Any, terms: int = 2) -> tuple[str, list[tuple[int, ...]]]:
    """``terms`` terms (two unless asked; from one to four) over a few letters (each of one
    size), an output of some of them, and an ellipsis in all of them or in none."""
    letters = draw(st.lists(st.sampled_from("abcdefg"), min_size=1, max_size=6, unique=True))
    size = {c: draw(st.integers(1, 4)) for c in letters}
    count = draw(st.integers(1, 4)) if terms == 0 else terms
    ins = [draw(st.lists(st.sampled_from(letters), max_size=4, unique=True)) for _ in range(count)]
    used = sorted(set().union(*ins))
    out = draw(st.permutations(draw(st.lists(st.sampled_from(used or ["a"]), unique=True))))
    out = [c for c in out if c in used]
    ell = draw(st.sampled_from([(), (2,), (3, 2)]))
    dots = "..." if ell else ""
    eq = ",".join(f"{dots}{''.join(t)}" for t in ins) + f"->{dots}{''.join(out)}"
    return eq, [(*ell, *(size[c] for c in t)) for t in ins]


@settings(max_examples=300, deadline=None)
@given(equations())
def test_the_products_agree_with_numpy_einsum(case: tuple[str, list[tuple[int, ...]]]) -> None:
    eq, shapes = case
    xs = [RNG.standard_normal(s) for s in shapes]
    got = contract(eq, xs, np)
    assert got is not None  # sizes equal, no diagonal: always written as products
    want = np.einsum(eq, *xs)
    assert np.shape(got) == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


@settings(max_examples=300, deadline=None)
@given(equations(terms=0))
def test_one_to_four_operands_contract_as_numpy_einsum(
    case: tuple[str, list[tuple[int, ...]]],
) -> None:
    """Three and four operands are contracted two at a time; a letter of one operand only
    that the output drops is summed first, a letter two intermediate results share kept
    only while a later operand or the output has it."""
    eq, shapes = case
    xs = [RNG.standard_normal(s) for s in shapes]
    got = contract(eq, xs, np)
    assert got is not None
    want = np.einsum(eq, *xs)
    assert np.shape(got) == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


CASES = {
    # equation, shapes as traced (symbolic), how many of each, the ops the program holds
    "attention scores": ("bhqd,bhkd->bhqk", ["b, 2, s, 8", "b, 2, t, 8"], "matmul"),
    "attention values": ("bhqk,bhkd->bqhd", ["b, 2, s, t", "b, 2, t, 8"], "matmul"),
    "bilinear": ("bi,ij,bj->b", ["b, 4", "4, 4", "b, 4"], "matmul"),  # three operands
    "bilinear map": ("ni,ioj,nj->no", ["n, 4", "4, 3, 4", "n, 4"], "matmul"),
    "chain": ("ab,bc,cd,de->ae", ["a, 3", "3, 4", "4, 5", "5, a"], "matmul"),
    "matrix times vector": ("bqd,bd->bq", ["b, s, 8", "b, 8"], "mul"),  # and a sum, fused
    "transpose and sum": ("ijk->ki", ["b, 3, 4"], "transpose"),
    "outer": ("bi,bj->bij", ["b, 3", "b, 5"], "mul"),
    "trace": ("ii->", ["4, 4"], "einsum"),  # a diagonal
    "broadcast": ("ij,jk->ik", ["b, 1", "3, 4"], "einsum"),  # a size 1 against 3
}


@pytest.mark.parametrize("name", CASES)
def test_traced_einsum_agrees_and_holds_the_ops_it_stands_for(name: str) -> None:
    eq, specs, op = CASES[name]
    scope = sv.SymbolicScope()
    shapes = [sv.symbolic_shape(s, scope=scope) for s in specs]
    structs = [sv.ShapeDtypeStruct(s, np.float32) for s in shapes]
    exp = sv.export(sv.jit(lambda *xs: snp.einsum(eq, *xs)))(*structs)
    text = exp.text()
    assert f"OP_CALL {op}(" in text
    if op != "einsum":
        assert "OP_CALL einsum(" not in text
    exp = sv.deserialize(exp.serialize())
    for n in (1, 3, 6):
        env = {"b": n, "s": n + 1, "t": 2 * n, "n": n + 2, "a": n}
        xs = [
            RNG.standard_normal([d if isinstance(d, int) else d.evaluate(env) for d in s])
            for s in shapes
        ]
        xs = [x.astype(np.float32) for x in xs]
        np.testing.assert_allclose(exp.call(*xs), np.einsum(eq, *xs), rtol=1e-5, atol=1e-5)


def test_an_integer_einsum_keeps_the_op_and_its_dtype() -> None:
    spec = sv.ShapeDtypeStruct(sv.symbolic_shape("b, 3"), np.int32)
    exp = sv.export(sv.jit(lambda x: snp.einsum("ij,ij->i", x, x)))(spec)
    assert "OP_CALL einsum(" in exp.text()
    x = np.arange(12, dtype=np.int32).reshape(4, 3)
    got = exp.call(x)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, np.einsum("ij,ij->i", x, x))


def test_attention_written_with_einsum_is_one_native_attention_kernel() -> None:
    wq = (RNG.standard_normal((16, 16)) * 0.2).astype(np.float32)

    def attend(x: Any) -> Any:
        b, s, _ = x.shape
        q = (x @ wq.T).reshape(b, s, 2, 8).transpose(0, 2, 1, 3)
        a = snp.einsum("bhqd,bhkd->bhqk", q, q) / np.sqrt(8)
        a = snp.where(snp.tril(snp.ones((s, s), dtype=bool)), a, -1e9)
        p = snp.exp(a - a.max(axis=-1, keepdims=True))
        p = p / p.sum(axis=-1, keepdims=True)
        return snp.einsum("bhqk,bhkd->bqhd", p, q).reshape(b, s, 16)

    fast = sv.jit(attend, shapes="b, s, 16", hot_threshold=1, background=False, tier3=False)
    slow = sv.jit(attend, shapes="b, s, 16", enabled=False)
    for b, s in [(1, 5), (2, 9), (3, 1), (2, 17)]:
        x = RNG.standard_normal((b, s, 16)).astype(np.float32)
        np.testing.assert_allclose(fast(x), slow(x), rtol=1e-4, atol=1e-5)
    (engine,) = fast.engines
    code = "\n".join(r.variant.describe() for r in engine.records() if r.variant is not None)
    assert "attention (causal)" in code and "interpreted" not in code, code


def test_einsum_of_plain_arrays_computes_at_once() -> None:
    a, b = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2))
    np.testing.assert_allclose(snp.einsum("ij,jk", a, b), a @ b)
    np.testing.assert_allclose(snp.einsum("Xy,yZ->ZX", a, b), (a @ b).T)


def test_a_malformed_equation_says_what_is_wrong_and_where_it_was_traced() -> None:
    f = sv.jit(lambda a, b: snp.einsum("ij,jk->il", a, b))
    with pytest.raises(sv.TracingError) as info:
        f(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32))
    text = str(info.value)
    assert "output letter 'l' is in no input" in text and "found:    equation='ij,jk->il'" in text
    assert "traced at test_einsum.py" in text
