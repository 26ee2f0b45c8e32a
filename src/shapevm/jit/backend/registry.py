"""The lowering priority: one ordered tuple, each lowering with its name.

The first lowering that takes an op wins, so the order is the priority: fused patterns
(a dense layer with its epilogue, a convolution with its epilogue, a row op written out
elementwise) come before the plain ops they are made of.
"""

from __future__ import annotations

from collections.abc import Sequence

from shapevm.jit.backend import chains, convs, lower, rowpatterns
from shapevm.jit.backend.lower import Lowering

LOWERINGS: tuple[tuple[str, Lowering], ...] = (
    ("dense", lower.lower_dense),
    ("attention", rowpatterns.lower_attention),
    ("matmul", lower.lower_matmul),
    ("int_matmul", lower.lower_int_matmul),
    ("conv", convs.lower_conv),
    ("pool", convs.lower_pool),
    ("global_pool", convs.lower_global_pool),
    ("rowop", rowpatterns.lower_rowop),
    ("layout", lower.lower_layout),
    ("take", lower.lower_take),
    ("take_along", lower.lower_take_along),
    ("concatenate", lower.lower_concatenate),
    ("pad", lower.lower_pad),
    ("full", lower.lower_full),
    ("iota", lower.lower_iota),
    ("sizes", lower.lower_dim_value),
    ("int_compare", lower.lower_int_compare),
    ("int_arith", lower.lower_int_arith),
    ("arg", lower.lower_arg),
    ("scan", lower.lower_cumsum),
    ("argsort", lower.lower_argsort),
    ("int_reduce", lower.lower_int_reduce),
    ("cast", lower.lower_cast),
    ("elementwise", chains.lower_elementwise),
)


def lowering_names() -> tuple[str, ...]:
    return tuple(name for name, _ in LOWERINGS)


def lowerings_named(
    names: Sequence[str | tuple[str, Lowering]] | None,
) -> tuple[Lowering, ...]:
    """The lowerings called ``names``, in `LOWERINGS`' priority order (``None``: all of
    them). A ``(name, function)`` pair instead of a name adds a lowering of one's own, at
    its place in ``names``: it is tried before every `LOWERINGS` entry named after it."""
    if names is None:
        return tuple(fn for _, fn in LOWERINGS)
    wanted = [n for n in names if isinstance(n, str)]
    unknown = sorted(set(wanted) - set(lowering_names()))
    if unknown:
        raise ValueError(
            f"unknown lowering(s) {unknown}; the lowerings are {', '.join(lowering_names())}"
        )
    out: list[Lowering] = []
    for entry in names:
        if isinstance(entry, tuple):
            out.append(entry[1])
    return (*out, *(fn for name, fn in LOWERINGS if name in wanted))
