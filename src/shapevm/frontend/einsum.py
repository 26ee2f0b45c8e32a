"""``einsum`` as the products, sums and transposes it stands for.

An equation of one or two operands without repeated letters in a term is a (batched)
matrix product between transposes: ``bhqd,bhkd->bhqk`` is ``q @ k.transpose(0, 1, 3, 2)``,
``bsd,ed->bse`` against a constant ``[e, d]`` weight is ``x @ W.T``. Traced so, it is the
program a user writing ``@`` gets, and the JIT's patterns (a dense layer over packed
weights, attention) and native products take it; traced as an ``einsum`` op it was
interpreted (NumPy's ``einsum``). Three or more operands are contracted two at a time,
left to right among those that share a letter (``ni,ioj,nj->no`` is ``(ni,ioj->noj)`` then
``(noj,nj->no)``), each pair keeping the letters the output or a later operand needs: the
order NumPy's ``optimize=True`` finds for chains like it, where its default ``einsum`` loops
over every letter at once (a bilinear form of 300 rows: 660 us, against 33 through the
products). Sizes are matched as in the ``einsum`` op, without its broadcasting of a size 1
against another size: a letter whose sizes in two operands are not known equal keeps the
op, as do diagonals (``ii->i``).

`contract` works on any namespace with NumPy's names (``shape``, ``sum``, ``transpose``,
``reshape``, ``matmul``, ``multiply``): `shapevm.numpy` when tracing, NumPy in the tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shapevm.frontend.methods import _same  # sizes known equal, structurally
from shapevm.ops.core import ShapeRuleError
from shapevm.ops.shape_rules_nn import parse_einsum

Label = str | tuple[str, int]  # a letter, or ("...", k): the k-th ellipsis axis from the right


def _labels(term: str, rank: int) -> list[Label] | None:
    head, dots, tail = term.partition("...")
    n_ell = rank - len(head) - len(tail)
    if n_ell < 0 or (n_ell and not dots):
        return None  # the op's shape rule says what is wrong
    return [*head, *(("...", n_ell - 1 - i) for i in range(n_ell)), *tail]


def _out_labels(term: str, n_ell: int) -> list[Label]:
    head, _, tail = term.partition("...")
    return [*head, *(("...", n_ell - 1 - i) for i in range(n_ell)), *tail]


def _prod(dims: Sequence[Any]) -> Any:
    out: Any = 1
    for d in dims:
        out = out * d
    return out


def contract(equation: str, operands: Sequence[Any], xp: Any) -> Any | None:
    """``einsum(equation, *operands)`` with ``xp``'s products and transposes; None where
    the equation is not one this writes, or is malformed (the caller keeps the ``einsum``
    op, whose shape rule says what is wrong and where it was traced)."""
    if not operands:
        return None
    try:
        eq = parse_einsum(equation, len(operands))
    except ShapeRuleError:
        return None
    shapes = [tuple(xp.shape(x)) for x in operands]
    terms = [_labels(t, len(s)) for t, s in zip(eq.inputs, shapes, strict=True)]
    if any(t is None or len(set(t)) != len(t) for t in terms):
        return None
    n_ell = max((sum(isinstance(lab, tuple) for lab in t) for t in terms if t), default=0)
    if "..." not in eq.output and n_ell:
        return None
    out = _out_labels(eq.output, n_ell if "..." in eq.output else 0)
    dims: dict[Label, Any] = {}
    for t, s in zip(terms, shapes, strict=True):
        assert t is not None
        for lab, d in zip(t, s, strict=True):
            if lab in dims and not _same(dims[lab], d):
                return None  # sizes not known equal: the op checks or broadcasts them
            dims[lab] = d
    # letters of one operand that the output drops are summed first
    xs: list[Any] = []
    kept: list[list[Label]] = []
    for i, (x, t) in enumerate(zip(operands, terms, strict=True)):
        assert t is not None
        others = {lab for j, u in enumerate(terms) if j != i and u for lab in u}
        drop = [a for a, lab in enumerate(t) if lab not in out and lab not in others]
        if drop:
            x = xp.sum(x, axis=tuple(drop))
        xs.append(x)
        kept.append([lab for a, lab in enumerate(t) if a not in drop])
    if len(xs) == 1:
        return _permute(xp, xs[0], kept[0], out)
    while len(xs) > 2:
        i, j = _next_pair(kept)
        needed = set(out).union(*(kept[n] for n in range(len(xs)) if n not in (i, j)))
        labels = [lab for lab in kept[i] + kept[j] if lab in needed]
        labels = list(dict.fromkeys(labels))  # once each, in the order they come
        c = _pair(xp, xs[i], kept[i], xs[j], kept[j], labels, dims)
        xs[i : i + 1], kept[i : i + 1] = [c], [labels]
        del xs[j], kept[j]
    return _pair(xp, xs[0], kept[0], xs[1], kept[1], out, dims)


def _next_pair(terms: list[list[Label]]) -> tuple[int, int]:
    """The first two operands, left to right, that share a letter (an outer product only
    when no two do)."""
    for i, t in enumerate(terms):
        for j in range(i + 1, len(terms)):
            if set(t) & set(terms[j]):
                return i, j
    return 0, 1


def _pair(
    xp: Any, a: Any, ta: list[Label], b: Any, tb: list[Label], out: list[Label],
    dims: dict[Label, Any],
) -> Any:  # fmt: skip
    """``a`` (letters ``ta``) times ``b`` (``tb``), summed over the letters ``out`` lacks,
    as a product of matrices, a broadcast multiply or a multiply and a sum."""
    batch = [lab for lab in out if lab in ta and lab in tb]
    m = [lab for lab in ta if lab not in tb]
    n = [lab for lab in tb if lab not in ta]
    k = [lab for lab in ta if lab in tb and lab not in out]
    a = _permute(xp, a, ta, batch + m + k)
    b = _permute(xp, b, tb, batch + k + n)
    bd, md, nd = ([dims[lab] for lab in g] for g in (batch, m, n))
    if not k:  # an outer product over the batch letters: a broadcast multiply
        a = xp.reshape(a, (*bd, *md, *(1 for _ in n)))
        b = xp.reshape(b, (*bd, *(1 for _ in m), *nd))
        return _permute(xp, xp.multiply(a, b), batch + m + n, out)
    kd = [dims[lab] for lab in k]
    if not m and not n:  # dot products over the batch letters: a product and a sum, fused
        axes = tuple(range(len(batch), len(batch) + len(k)))
        return _permute(xp, xp.sum(xp.multiply(a, b), axis=axes), batch, out)
    if batch and (not m or not n):  # a matrix times a vector per batch element: a
        # broadcast multiply and a sum, fused (a batched product of [8, 16] @ [16, 1] over
        # 300 rows took 37 us, its overhead per matrix)
        b = _permute(xp, b, batch + k + n, batch + n + k)
        a = xp.reshape(a, (*bd, *md, *(1 for _ in n), *kd))
        b = xp.reshape(b, (*bd, *(1 for _ in m), *nd, *kd))
        axes = tuple(range(len(batch) + len(m) + len(n), len(batch) + len(m) + len(n) + len(k)))
        return _permute(xp, xp.sum(xp.multiply(a, b), axis=axes), batch + m + n, out)
    if not batch and len(k) == 1 and len(n) == 1:  # m's letters lead as matmul's batch axes
        return _permute(xp, xp.matmul(a, b), m + n, out)
    # batch + [m, k] @ batch + [k, n], the letters of each group as one axis
    if len(m) != 1 or len(k) != 1:
        a = xp.reshape(a, (*bd, _prod(md), _prod(kd)))
    if len(k) != 1 or len(n) != 1:
        b = xp.reshape(b, (*bd, _prod(kd), _prod(nd)))
    c = xp.matmul(a, b)
    if len(m) != 1 or len(n) != 1:
        c = xp.reshape(c, (*bd, *md, *nd))
    return _permute(xp, c, batch + m + n, out)


def _permute(xp: Any, x: Any, have: list[Label], want: list[Label]) -> Any:
    perm = tuple(have.index(lab) for lab in want)
    return x if perm == tuple(range(len(have))) else xp.transpose(x, perm)
