"""`shapevm.jit`: trace once, run every shape of the family.

With ``shapes=`` (specifications as for `symbolic_args_specs`) a call traces once with
those symbolic shapes. Without it the first call traces with the concrete shapes; when a
later call differs in some dimensions, exactly those dimensions become symbolic and the
function is traced once more (dimensions that always vary together share one variable).
So a function called on a stream of batch sizes is traced twice in all, and
`Jitted.report` says what was made symbolic. If the function cannot be traced with a
symbolic dimension (it needs a concrete value), each shape gets its own trace, and the
report says why.

Each trace gets a `shapevm.jit.JitEngine` (unless ``jit=False`` or
``interpret_only=True``): calls start in the interpreter; once the function has been called
``hot_threshold`` times (any shapes) its regions are lowered in the background and run
natively for every shape from then on, and each specialization key called as often gets a
variant of its own. See
`shapevm.jit.JitOptions` for the options and ``docs/jit.md`` for how a call flows.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from shapevm import _pytree
from shapevm.frontend.trace import Traced, trace
from shapevm.frontend.tracer import Tracer, current_trace
from shapevm.jit.engine import JitEngine
from shapevm.jit.options import JitOptions
from shapevm.jit.worker import WORKER
from shapevm.runtime.interpreter import Executable
from shapevm.shapes import DimExpr, ShapeDtypeStruct, SymbolicScope, symbolic_args_specs

if TYPE_CHECKING:
    import logging

    from shapevm.jit.backend import Compiler


def _log() -> logging.Logger:
    """The ``shapevm`` logger; `logging` loads at the first message, not at import."""
    import logging

    return logging.getLogger("shapevm")


__all__ = ["Jitted", "jit"]


class _Entry:
    """One trace of the function, the executable that runs it and its JIT engine."""

    __slots__ = ("engine", "executable", "kinds", "out_tree", "single", "symbolic", "traced")

    def __init__(
        self,
        traced: Traced,
        names: Sequence[str],
        symbolic: dict[str, str],
        jitted: Jitted | None = None,
    ) -> None:
        self.traced = traced
        self.kinds = traced.leaf_kinds
        self.out_tree = traced.out_tree
        self.single = traced.out_tree.kind == "leaf"
        # trace() checked the program
        self.executable = Executable(traced.program, arg_names=names, verified=True)
        self.symbolic = symbolic
        self.engine: JitEngine | None = None
        if jitted is not None and jitted.options.enabled:
            self.engine = JitEngine(
                self.executable, jitted.options, compiler=jitted.compiler, name=jitted.name
            )

    def run(self, arrays: Sequence[Any]) -> list[Any]:
        if self.engine is not None:
            return self.engine(*arrays)
        return self.executable(*arrays)


class Jitted:
    """A function prepared for tracing; call it like the function. See `jit`."""

    def __init__(
        self,
        fun: Callable[..., Any],
        *,
        shapes: Any = None,
        constraints: Sequence[str] = (),
        static_argnums: int | Sequence[int] = (),
        cache_mode: str = "exact",
        bucket_boundaries: Sequence[int] | Mapping[str, Sequence[int]] | None = None,
        mem_optimize: bool = True,
        fallback: bool = True,
        **jit_options: Any,
    ) -> None:
        options = dict(jit_options)
        self.compiler: Compiler | None = options.pop("compiler", None)
        self.options = JitOptions.from_kwargs(
            dict(
                cache_mode=cache_mode,
                bucket_boundaries=bucket_boundaries,
                mem_optimize=mem_optimize,
                fallback=fallback,
                **options,
            )
        )
        self.fun = fun
        self.shapes = shapes
        self.constraints = tuple(constraints)
        self.static_argnums = (
            (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
        )
        self.cache_mode = cache_mode
        self.bucket_boundaries = self.options.bucket_boundaries
        self.mem_optimize = mem_optimize
        self.fallback = fallback
        self.jit_options = jit_options
        self.name = _fun_name(fun)
        try:
            self._signature: inspect.Signature | None = inspect.signature(fun)
            self._params = list(self._signature.parameters)
        except (TypeError, ValueError):
            self._signature = None
            self._params = []
        self._entries: dict[Any, Any] = {}
        self._plain: dict[tuple[Any, ...], Any] = {}  # see __call__
        self._lock = threading.Lock()
        self.trace_count = 0
        self.report: list[str] = []
        functools.update_wrapper(self, fun)

    def _positional(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """The call's arguments by position, as the function's signature places keyword
        arguments (a default between two given ones filled in): a call by keyword traces
        and caches as the same call by position."""
        sig = self._signature
        if sig is None:
            raise TypeError(f"{self.name}: keyword arguments of a function without a signature")
        bound = sig.bind(*args, **kwargs)  # raises TypeError as the function would
        order = [p for p in sig.parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]  # fmt: skip
        given = bound.arguments
        named = [p for p in sig.parameters.values() if p.kind is p.KEYWORD_ONLY and p.name in given]
        if named or any(
            p.kind is p.VAR_KEYWORD for p in sig.parameters.values() if p.name in given
        ):
            raise TypeError(
                f"{self.name}: keyword-only arguments ({', '.join(p.name for p in named) or '**'})"
                " cannot be passed to a jitted function; make them positional parameters, or "
                "bind them first with functools.partial"
            )
        last = max((i for i, p in enumerate(order) if p.name in given), default=-1)
        out = [given[p.name] if p.name in given else p.default for p in order[: last + 1]]
        var = next((p for p in sig.parameters.values() if p.kind is p.VAR_POSITIONAL), None)
        if var is not None and var.name in given:
            out += list(given[var.name])
        return tuple(out)

    def leaf_names(self, args: Sequence[Any]) -> list[str]:
        """``x``, ``params['w']``... one per leaf of the non-static arguments."""
        names: list[str] = []
        for i, a in enumerate(args):
            if i in self.static_argnums and not isinstance(a, DimExpr):
                continue
            base = self._params[i] if i < len(self._params) else f"args[{i}]"
            _leaves, td = _pytree.flatten(a)
            if td.kind == "leaf":
                names.append(base)
            else:
                names += [f"{base}{p}" for p in _leaf_paths(td)]
        return names

    # -- calls ------------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            args = self._positional(args, kwargs)
        if not self.static_argnums:
            # the common call: NumPy arrays only, seen before with these dtypes and ranks
            try:
                group = self._plain.get(tuple((type(a), a.dtype, a.ndim) for a in args))
            except AttributeError:
                group = None
            if group is not None:
                entry = group.entry_for(args, args)
                outs = entry.run(args)
                return outs[0] if entry.single else _pytree.unflatten(entry.out_tree, outs)
        if current_trace() is not None and any(
            isinstance(v, Tracer) for v in _pytree.flatten(args)[0]
        ):
            return self.fun(*args)  # called inside another traced function: traced inline
        args = tuple(a if i in self.static_argnums else _array_data(a) for i, a in enumerate(args))
        static = tuple(args[i] for i in self.static_argnums if i < len(args))
        dynamic = [a for i, a in enumerate(args) if i not in self.static_argnums]
        leaves, tree = _pytree.flatten(tuple(dynamic))
        arrays = [_as_array(x) for x in leaves]
        key = (static, tree, tuple(a.dtype for a in arrays), tuple(a.ndim for a in arrays))
        try:
            group = self._entries.get(key)
        except TypeError:
            raise TypeError(
                f"static arguments of {self.name} must be hashable, found {static!r}"
            ) from None
        if group is None:
            with self._lock:
                group = self._entries.get(key)
                if group is None:
                    group = (
                        _SpecGroup(self, args)
                        if self.shapes is not None
                        else _AutoGroup(self, args)
                    )
                    self._entries[key] = group
        entry = group.entry_for(args, arrays)
        if not static and tree.kind == "tuple" and all(type(a) is np.ndarray for a in args):
            if all(t.kind == "leaf" for t in tree.children):
                self._plain[tuple((type(a), a.dtype, a.ndim) for a in args)] = group
        outs = entry.run(arrays)
        return _pytree.unflatten(entry.out_tree, outs)

    def _trace(self, args: Sequence[Any], specs: Sequence[Any], symbolic: dict[str, str]) -> _Entry:
        static = {i: args[i] for i in self.static_argnums if i < len(args)}
        names = self.leaf_names(args)
        traced = trace(self.fun, list(specs), static, self.name, names)
        self.trace_count += 1
        return _Entry(traced, names, symbolic, self)

    # -- the JIT --------------------------------------------------------------------------------
    @property
    def engines(self) -> list[JitEngine]:
        """The JIT engine of every trace made so far (one per trace)."""
        out: list[JitEngine] = []
        for group in list(self._entries.values()):
            for entry in group.entries():
                if entry.engine is not None:
                    out.append(entry.engine)
        return out

    def jit_info(self) -> list[dict[str, Any]]:
        """One dict per variant of this function (see `shapevm.vm.jit_info`)."""
        return [row for e in self.engines for row in e.info()]

    def jit_stats(self) -> dict[str, Any]:
        """This function's counters summed over its traces: calls, compiled_calls,
        compiles, failures, timeouts, evictions, budget_refusals, out_of_range..."""
        total: dict[str, Any] = {}
        for e in self.engines:
            for k, v in e.counters.as_dict().items():
                total[k] = total.get(k, 0) + v
        return total

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until queued compiles are finished; ``False`` if ``timeout`` passed first."""
        return WORKER.wait(timeout)

    def lower(self, *args: Any) -> Traced:
        """The trace for these arguments (specifications or arrays), without running."""
        static = {i: args[i] for i in self.static_argnums if i < len(args)}
        dynamic = [a for i, a in enumerate(args) if i not in self.static_argnums]
        return trace(self.fun, dynamic, static, self.name, self.leaf_names(args))

    def __repr__(self) -> str:
        return f"<shapevm.jit of {self.name}>"


class _SpecGroup:
    """Traced once with the symbolic shapes the user gave."""

    def __init__(self, jitted: Jitted, args: Sequence[Any]) -> None:
        dynamic = [a for i, a in enumerate(args) if i not in jitted.static_argnums]
        specs = symbolic_args_specs(tuple(dynamic), jitted.shapes, jitted.constraints)
        self.entry = jitted._trace(args, specs, {})

    def entry_for(self, args: Sequence[Any], arrays: Sequence[np.ndarray[Any, Any]]) -> _Entry:
        return self.entry

    def entries(self) -> list[_Entry]:
        return [self.entry]


class _AutoGroup:
    """Traces with concrete shapes first, then makes the dimensions that vary symbolic."""

    def __init__(self, jitted: Jitted, args: Sequence[Any]) -> None:
        self.jitted = jitted
        dynamic = [a for i, a in enumerate(args) if i not in jitted.static_argnums]
        leaves, self.tree = _pytree.flatten(tuple(dynamic))
        arrays = [_as_array(x) for x in leaves]
        self.first = [a.shape for a in arrays]
        self.varying: set[tuple[int, int]] = set()
        self.symbolic: _Entry | None = None
        self.groups: dict[tuple[int, int], str] = {}
        self.per_shape: dict[Any, _Entry] = {}
        self.static_only = False
        specs = [ShapeDtypeStruct(a.shape, a.dtype) for a in arrays]
        self.per_shape[tuple(self.first)] = jitted._trace(
            args, _pytree.unflatten(self.tree, specs), {}
        )
        self.lock = threading.Lock()

    def entry_for(self, args: Sequence[Any], arrays: Sequence[np.ndarray[Any, Any]]) -> _Entry:
        shapes = tuple(a.shape for a in arrays)
        hit = self.per_shape.get(shapes)
        if hit is not None:
            return hit
        sym = self.symbolic
        if sym is not None and self._fits(shapes):
            return sym
        with self.lock:
            return self._retrace(args, arrays, shapes)

    def entries(self) -> list[_Entry]:
        found = list(self.per_shape.values())
        return [*found, self.symbolic] if self.symbolic is not None else found

    def _fits(self, shapes: Sequence[tuple[int, ...]]) -> bool:
        values: dict[str, int] = {}
        for li, (first, now) in enumerate(zip(self.first, shapes, strict=True)):
            for ax, (d0, d) in enumerate(zip(first, now, strict=True)):
                var = self.groups.get((li, ax))
                if var is None:
                    if d != d0:
                        return False
                elif values.setdefault(var, d) != d or d < 1:
                    return False
        return True

    def _retrace(
        self, args: Sequence[Any], arrays: Sequence[np.ndarray[Any, Any]], shapes: Any
    ) -> _Entry:
        j = self.jitted
        if self.static_only:
            return self._static_entry(args, arrays, shapes)
        new = {
            (li, ax)
            for li, (first, now) in enumerate(zip(self.first, shapes, strict=True))
            for ax, (d0, d) in enumerate(zip(first, now, strict=True))
            if d != d0 and d0 >= 1 and d >= 1
        }
        if any(d < 1 for s in shapes for d in s):
            return self._static_entry(args, arrays, shapes)
        self.varying |= new
        groups = self._group(shapes)
        names = j.leaf_names(args)
        scope = SymbolicScope()
        var_dims: dict[str, Any] = {}
        specs = []
        symbolic: dict[str, str] = {}
        for li, a in enumerate(arrays):
            dims: list[Any] = []
            for ax, d0 in enumerate(self.first[li]):
                var = groups.get((li, ax))
                if var is None:
                    dims.append(d0)
                else:
                    if var not in var_dims:
                        var_dims[var] = scope.var(var)
                    dims.append(var_dims[var])
                    symbolic[f"{names[li]}.shape[{ax}]"] = var
            specs.append(ShapeDtypeStruct(tuple(dims), a.dtype))
        try:
            entry = j._trace(args, _pytree.unflatten(self.tree, specs), symbolic)
        except Exception as exc:  # the function needs concrete values of these dimensions
            self.static_only = True
            why = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
            msg = (
                f"{j.name}: could not trace with symbolic dimensions "
                f"{', '.join(f'{k} as {v}' for k, v in symbolic.items())} ({why}); "
                "each new shape is traced separately. Give shapes= (and constraints=) to "
                "shapevm.jit to trace once."
            )
            j.report.append(msg)
            _log().warning(msg)
            return self._static_entry(args, arrays, shapes)
        self.groups = groups
        self.symbolic = entry
        msg = f"{j.name}: made symbolic: {', '.join(f'{k} as {v}' for k, v in symbolic.items())}"
        j.report.append(msg)
        _log().info(msg)
        return entry

    def _static_entry(
        self, args: Sequence[Any], arrays: Sequence[np.ndarray[Any, Any]], shapes: Any
    ) -> _Entry:
        specs = [ShapeDtypeStruct(a.shape, a.dtype) for a in arrays]
        entry = self.jitted._trace(args, _pytree.unflatten(self.tree, specs), {})
        self.per_shape[shapes] = entry
        return entry

    def _group(self, shapes: Sequence[tuple[int, ...]]) -> dict[tuple[int, int], str]:
        """A variable per class of varying dimensions equal in every observed call."""
        out: dict[tuple[int, int], str] = {}
        by_values: dict[tuple[int, int], str] = {}
        for pos in sorted(self.varying):
            li, ax = pos
            sig = (self.first[li][ax], shapes[li][ax])
            same_as_old = self.groups.get(pos)
            if sig in by_values and (same_as_old is None or same_as_old == by_values[sig]):
                out[pos] = by_values[sig]
                continue
            var = f"d{len(set(out.values()))}"
            by_values[sig] = var
            out[pos] = var
        return out


def _leaf_paths(td: _pytree.TreeDef) -> list[str]:
    if td.kind == "leaf":
        return [""]
    if td.kind == "none":
        return []
    out: list[str] = []
    keys = td.keys if td.kind == "dict" else range(len(td.children))
    for k, child in zip(keys, td.children, strict=True):
        out += [f"[{k!r}]{p}" for p in _leaf_paths(child)]
    return out


def _as_array(x: Any) -> np.ndarray[Any, Any]:
    return x if type(x) is np.ndarray else np.asarray(x)


_NUMBERS = (bool, int, float, complex, np.generic)


def _array_data(a: Any) -> Any:
    """An argument with its array data as arrays: a Python scalar, or a list of numbers
    (nested lists included), converts as ``np.asarray`` would; tuples, dicts and lists
    holding arrays stay containers of arguments (pytrees).

    >>> _array_data([[1.0, 2.0], [3.0, 4.0]]).shape, _array_data(3).dtype
    ((2, 2), dtype('int64'))
    >>> [type(x).__name__ for x in _array_data([np.ones(2), 1.0])]
    ['ndarray', 'ndarray']
    """
    if isinstance(a, _NUMBERS):
        return np.asarray(a)
    if isinstance(a, list) and a and all(_numeric_list(x) for x in a):
        return np.asarray(a)
    if isinstance(a, (list, tuple)):
        items = [_array_data(x) for x in a]
        return items if isinstance(a, list) else tuple(items)
    if isinstance(a, dict):
        return {k: _array_data(v) for k, v in a.items()}
    return a


def _numeric_list(x: Any) -> bool:
    if isinstance(x, _NUMBERS):
        return True
    return isinstance(x, list) and bool(x) and all(_numeric_list(y) for y in x)


def _fun_name(fun: Callable[..., Any]) -> str:
    name = getattr(fun, "__name__", "fun")
    return name if name.isidentifier() else "fun"


def jit(
    fun: Callable[..., Any] | None = None,
    *,
    shapes: Any = None,
    constraints: Sequence[str] = (),
    static_argnums: int | Sequence[int] = (),
    cache_mode: str = "exact",
    bucket_boundaries: Sequence[int] | Mapping[str, Sequence[int]] | None = None,
    mem_optimize: bool = True,
    fallback: bool = True,
    **jit_options: Any,
) -> Any:
    """Prepare ``fun`` to be traced once and run on any shape of its family.

    Usable as ``jit(f)``, ``jit(f, shapes=...)`` or as a decorator ``@jit(...)``.
    ``shapes`` follows `symbolic_args_specs` (``"b, 256"``, a pytree prefix, or ``None``
    to discover the varying dimensions from the calls). The JIT options (``cache_mode``,
    ``bucket_boundaries``, ``mem_optimize``, ``fallback``, ``hot_threshold``,
    ``scd_threshold``, ``max_variants``, ``compile_timeout_s``, ``background``,
    ``adaptive_exact_after``, ``lowerings``, ``jit``/``interpret_only``) are described
    in `shapevm.jit.JitOptions`; ``compiler=`` replaces the `shapevm.jit.Compiler`.

    >>> import numpy as np, shapevm as sv
    >>> f = sv.jit(lambda x: x * 2.0 + 1.0, shapes="b, 4", background=False)
    >>> for _ in range(4):
    ...     y = f(np.ones((3, 4), np.float32))
    >>> y.shape, [row["status"] for row in f.jit_info()]
    ((3, 4), ['ready'])
    """
    options = dict(
        shapes=shapes,
        constraints=constraints,
        static_argnums=static_argnums,
        cache_mode=cache_mode,
        bucket_boundaries=bucket_boundaries,
        mem_optimize=mem_optimize,
        fallback=fallback,
        **jit_options,
    )
    if fun is None:
        return lambda f: Jitted(f, **options)
    return Jitted(fun, **options)
