"""Cache policies: which specialization key a call's dimension values belong to.

A key is plain hashable data, ``(kind, parts)``:

- ``("exact", (3, 64))``: the values of the dimension variables themselves;
- ``("bucket", ((1, 8), (64, None)))``: for each variable the range ``[lo, hi)`` between
  two of ``bucket_boundaries`` (``hi`` is ``None`` above the last boundary);
- ``("pow2", ((2, 4), (64, 128)))``: the power-of-two range of each value, for the shapes
  an adaptive policy has not seen often enough to give them their own variant.

A variant compiled for a range key serves every shape in the range: its code and memory
plan read the actual dimension values on each call (`reference_env` gives the values the
memory plan is sized for: the top of each range). A value below the first boundary has no
bucket; such calls are interpreted and counted.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

Key = tuple[str, tuple[Any, ...]]

_ADAPTIVE_MEMORY = 4096  # distinct exact keys an adaptive policy remembers


class CachePolicy:
    """Maps the dimension values of a call to a specialization key (or ``None``)."""

    mode = "exact"

    def key(self, values: tuple[int, ...]) -> Key | None:
        return ("exact", values)

    def reference_values(self, key: Key, values: tuple[int, ...]) -> tuple[int, ...]:
        """The dimension values a variant for ``key`` plans its memory for."""
        kind, parts = key
        if kind == "exact":
            return tuple(parts)
        return tuple(
            (hi - 1) if hi is not None else max(v, lo)
            for (lo, hi), v in zip(parts, values, strict=True)
        )


class ExactPolicy(CachePolicy):
    """One variant per tuple of dimension values."""


class BucketPolicy(CachePolicy):
    """One variant per combination of ranges between ``boundaries``: one list for every
    variable, or a mapping from variable names (``variables``, in order) to lists; a
    variable the mapping leaves out is keyed by its exact value (the range ``[v, v + 1)``).
    """

    mode = "bucket"

    def __init__(
        self,
        boundaries: Sequence[int] | Mapping[str, Sequence[int]],
        variables: Sequence[str] = (),
    ) -> None:
        if isinstance(boundaries, Mapping):
            unknown = sorted(set(boundaries) - set(variables))
            if unknown:
                raise ValueError(
                    f"bucket_boundaries name {', '.join(map(repr, unknown))}, which are not "
                    f"dimension variables of the function (they are: {', '.join(variables)})"
                )
            self.per_variable: tuple[tuple[int, ...] | None, ...] | None = tuple(
                tuple(boundaries[v]) if v in boundaries else None for v in variables
            )
            self.boundaries: tuple[int, ...] = ()
        else:
            self.per_variable = None
            self.boundaries = tuple(boundaries)

    def key(self, values: tuple[int, ...]) -> Key | None:
        parts: list[tuple[int, int | None]] = []
        per = self.per_variable
        for n, v in enumerate(values):
            bounds = self.boundaries if per is None else per[n]
            if bounds is None:
                parts.append((v, v + 1))
                continue
            i = bisect.bisect_right(bounds, v) - 1
            if i < 0:
                return None
            hi = bounds[i + 1] if i + 1 < len(bounds) else None
            parts.append((bounds[i], hi))
        return ("bucket", tuple(parts))


class AdaptivePolicy(CachePolicy):
    """Learns the distribution: a key seen ``exact_after`` times gets its own variant,
    rarer ones share power-of-two buckets. Not thread-safe: the engine calls it under its
    lock."""

    mode = "adaptive"

    def __init__(self, exact_after: int = 8) -> None:
        self.exact_after = exact_after
        self.seen: OrderedDict[tuple[int, ...], int] = OrderedDict()

    def key(self, values: tuple[int, ...]) -> Key | None:
        n = self.seen.get(values, 0) + 1
        self.seen[values] = n
        self.seen.move_to_end(values)
        if len(self.seen) > _ADAPTIVE_MEMORY:
            self.seen.popitem(last=False)
        if n >= self.exact_after:
            return ("exact", values)
        return ("pow2", tuple(pow2(v) for v in values))


def pow2(v: int) -> tuple[int, int]:
    lo = 1 << (max(v, 1).bit_length() - 1)
    return (lo, 2 * lo)


def make_policy(
    mode: str,
    boundaries: Sequence[Any] = (),
    exact_after: int = 8,
    variables: Sequence[str] = (),
) -> CachePolicy:
    """The policy of ``mode``; ``boundaries`` is a list, or ``(name, list)`` pairs."""
    if mode == "bucket":
        if boundaries and isinstance(boundaries[0], tuple):
            return BucketPolicy({str(n): tuple(b) for n, b in boundaries}, variables)
        return BucketPolicy(boundaries)
    if mode == "adaptive":
        return AdaptivePolicy(exact_after)
    return ExactPolicy()
