"""The options of the JIT, checked once when a function is wrapped.

`shapevm.jit` passes its keyword arguments here; an unknown name or a bad value is a
``TypeError``/``ValueError`` that lists what is accepted, before any call runs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

CACHE_MODES = ("exact", "bucket", "adaptive")

Boundaries = tuple[int, ...]
PerVariable = tuple[tuple[str, Boundaries], ...]


@dataclass(frozen=True)
class JitOptions:
    """How one jitted function is specialized and compiled.

    - ``ahead``: lower the function to the native executor (tier 2: no compiler,
      milliseconds, right for every shape) when it is wrapped or traced, so that its first
      call already runs native; its first key's variant is made at that call and every
      other key borrows it until it is hot (``False``: the first lowering waits for
      ``hot_threshold`` calls, interpreted meanwhile);
    - ``hot_threshold``: calls of a key before it gets a variant of its own and generated C
      (tier 3); without ``ahead``, also calls of the function, whatever their shapes,
      before its first variant is queued (its native code serves every shape);
    - ``eager_first``: the first key of a function is compiled at its first call, whatever
      ``hot_threshold`` says (until a variant exists, every call is interpreted; after,
      keys that are not hot yet borrow a shape-generic variant);
    - ``scd_threshold``: the function's Shape Convergence Degree must reach this;
    - ``cache_mode``: ``exact`` (a variant per tuple of dimension values), ``bucket`` (a
      variant per range of values from ``bucket_boundaries``: one list for every dimension
      variable, or a mapping from variable names to lists, where a variable left out is
      keyed by its exact value), ``adaptive`` (keys seen
      ``adaptive_exact_after`` times get their own variant, the rest share power-of-two
      buckets);
    - ``max_variants``: compiled variants kept per traced function; the least recently
      used one is evicted to make room;
    - ``compile_timeout_s``: a compile running longer is abandoned (``None``: no limit);
    - ``fallback``: a failed compile leaves the key interpreted (``True``) or makes its
      calls raise `JitCompileError` (``False``);
    - ``background``: compile in the worker thread (``False``: in the calling thread, for
      tests and scripts that want the variant ready on the next call);
    - ``mem_optimize``: plan buffers statically and reuse them (``False``: allocate per op);
    - ``lowerings``: names of the lowerings to try (``None``: all of
      `shapevm.jit.LOWERINGS`);
    - ``tier3``: generate and compile C for the fused chains of hot keys in the background
      (``False``: they stay in the tile interpreter);
    - ``tier3_min_elements``: a hot key gets generated C only when its largest chain has at
      least this many elements at the key's shape (smaller chains save less per call than
      their compile costs; 0: every hot key);
    - ``enabled``: ``False`` runs every call in the interpreter.
    """

    ahead: bool = True
    hot_threshold: int = 3
    eager_first: bool = False
    scd_threshold: float = 0.8
    cache_mode: str = "exact"
    bucket_boundaries: Boundaries | PerVariable = ()
    adaptive_exact_after: int = 8
    max_variants: int = 32
    compile_timeout_s: float | None = 60.0
    fallback: bool = True
    background: bool = True
    mem_optimize: bool = True
    lowerings: tuple[Any, ...] | None = None
    tier3: bool = True
    tier3_min_elements: int = 1 << 15
    enabled: bool = True

    def __post_init__(self) -> None:
        if self.cache_mode not in CACHE_MODES:
            raise ValueError(f"cache_mode must be one of {CACHE_MODES}, found {self.cache_mode!r}")
        if self.cache_mode == "bucket" and not self.bucket_boundaries:
            raise ValueError(
                "cache_mode='bucket' needs bucket_boundaries, e.g. [1, 8, 32, 64]: each "
                "variant serves the shapes between two boundaries"
            )
        for name, b in boundary_lists(self.bucket_boundaries):
            if any(isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in b) or list(
                b
            ) != sorted(set(b)):
                where = f" of {name!r}" if name else ""
                raise ValueError(
                    f"bucket_boundaries{where} must be increasing integers >= 1, found {list(b)}"
                )
        _positive_int("hot_threshold", self.hot_threshold)
        _positive_int("adaptive_exact_after", self.adaptive_exact_after)
        _positive_int("max_variants", self.max_variants)
        m = self.tier3_min_elements
        if isinstance(m, bool) or not isinstance(m, int) or m < 0:
            raise ValueError(f"tier3_min_elements must be an integer >= 0, found {m!r}")
        if not 0.0 <= self.scd_threshold <= 1.0:
            raise ValueError(f"scd_threshold must be in [0, 1], found {self.scd_threshold!r}")
        t = self.compile_timeout_s
        if t is not None and not (t > 0 and math.isfinite(t)):
            raise ValueError(f"compile_timeout_s must be > 0 seconds or None, found {t!r}")

    @classmethod
    def from_kwargs(cls, options: Mapping[str, Any]) -> JitOptions:
        """Options from ``shapevm.jit`` keywords; ``jit=False``/``interpret_only=True`` turn
        the JIT off."""
        known = {f.name for f in fields(cls)}
        kwargs: dict[str, Any] = {}
        for name, value in options.items():
            if name == "jit":
                kwargs["enabled"] = bool(value)
            elif name == "interpret_only":
                kwargs["enabled"] = not value
            elif name in known:
                kwargs[name] = value
            else:
                accepted = ", ".join(sorted(known - {"enabled"} | {"jit", "interpret_only"}))
                raise TypeError(f"unknown JIT option {name!r}; accepted: {accepted}")
        if "bucket_boundaries" in kwargs:
            kwargs["bucket_boundaries"] = _boundaries(kwargs["bucket_boundaries"])
        if kwargs.get("lowerings") is not None:
            kwargs["lowerings"] = _names(kwargs["lowerings"])
        return cls(**kwargs)


def _boundaries(value: Any) -> Boundaries | PerVariable:
    """A list of boundaries as a tuple; a mapping as sorted ``(name, boundaries)`` pairs."""
    if not value:
        return ()
    if isinstance(value, Mapping):
        return tuple((str(k), tuple(v)) for k, v in sorted(value.items()))
    return tuple(value)


def boundary_lists(value: Boundaries | PerVariable) -> list[tuple[str, Boundaries]]:
    """``[("", list)]`` for one list, ``[(name, list), ...]`` for a mapping."""
    if value and isinstance(value[0], tuple):
        return [(str(n), tuple(b)) for n, b in value]
    return [("", value)]  # type: ignore[list-item]


def _names(value: Sequence[str] | str) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


def _positive_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, found {value!r}")
