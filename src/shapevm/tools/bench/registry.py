"""The systems the benchmark can measure, by name.

A system is three functions: ``available()`` says whether it can run here (``True``, or the
reason it cannot), ``build(workload_id, weights)`` returns a callable from a float32 NumPy
input to a NumPy output, and the optional ``setup_env(env)`` adjusts the environment of the
fresh process the system is measured in (it runs in the parent, before that process starts).

The peers are registered by :mod:`shapevm.tools.bench.systems_peers`. Other systems register
themselves from a module that this one imports when it exists:
``shapevm.tools.bench.systems_shapevm``, plus any module named in the environment variable
``SHAPEVM_BENCH_PLUGINS`` (comma separated). Both the parent and every measuring process
import them, so a plugin only has to call :func:`register_system` at import time:

>>> from shapevm.tools.bench import register_system, get_system
>>> from shapevm.models import numpy_eager
>>> _ = register_system("numpy-copy", lambda: True, numpy_eager, replace=True)
>>> get_system("numpy-copy").is_available()
(True, '')
>>> _ = register_system("never", lambda: "needs a quantum computer", numpy_eager, replace=True)
>>> get_system("never").is_available()
(False, 'needs a quantum computer')
>>> unregister_system("numpy-copy"), unregister_system("never")
(True, True)
"""

from __future__ import annotations

import importlib
import os
import traceback
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

Weights = dict[str, np.ndarray]
Compiled = Callable[[np.ndarray], np.ndarray]
"""What a system's ``build`` returns. It may also have ``settle()``: the harness calls it
before timing steady state (c), so that a system that compiles in the background is timed
once its compiles are done, as one that compiles in its first call is."""


class Feeds(tuple):  # type: ignore[type-arg]
    """The inputs of a model that takes several (an ONNX file's graph inputs, in order), as
    the harness passes them to a system's callable in place of one array."""


class Settling:
    """A model that compiles in the background, as the harness calls it: ``fn(x)[index]``
    (or ``fn(x)``; ``fn(*x)`` for `Feeds`), with ``settle`` waiting for ``fn.wait`` (its
    compile queue)."""

    def __init__(self, fn: Any, index: int | None = None) -> None:
        self.fn = fn
        self.index = index

    def __call__(self, x: np.ndarray | Feeds) -> np.ndarray:
        y = self.fn(*x) if isinstance(x, Feeds) else self.fn(x)
        out: np.ndarray = y if self.index is None else y[self.index]
        return out

    def settle(self) -> None:
        self.fn.wait(120)


Builder = Callable[[str, Weights], Compiled]
Availability = Callable[[], "bool | str"]
EnvSetup = Callable[[MutableMapping[str, str]], None]

PLUGIN_MODULES = ("shapevm.tools.bench.systems_shapevm",)
PLUGINS_ENV = "SHAPEVM_BENCH_PLUGINS"


@dataclass(frozen=True)
class System:
    """One measurable system. ``imports`` are modules the measuring process imports before
    the clock starts, so that (a) and (d) count building and compiling, not importing."""

    name: str
    available: Availability
    build: Builder
    setup_env: EnvSetup | None = None
    version: Callable[[], str] | None = None
    imports: tuple[str, ...] = ()
    description: str = ""
    build_onnx: Callable[[str], Compiled] | None = None
    """How the system runs an ONNX file (``--onnx``); ``None`` if it cannot."""
    prepare: Callable[[str, Weights], Any] | None = None
    """What the measuring process does before the clock starts, for what a user has before
    loading a model (the workload's ONNX file on disk, weights in the layout the model
    reads); ``None``: nothing."""

    def imports_for(self, onnx_file: bool) -> tuple[str, ...]:
        """What the measuring process imports before the clock: ``imports``, and for a
        workload read from an ONNX file, `onnx` (and `shapevm.onnx` for shapevm's systems,
        as a program that reads ONNX files imports it)."""
        if not onnx_file:
            return self.imports
        extra = ("onnx", "shapevm.onnx") if "shapevm" in self.imports else ("onnx",)
        return tuple(dict.fromkeys((*self.imports, *extra)))

    def is_available(self) -> tuple[bool, str]:
        """``(True, "")`` or ``(False, reason)``; an exception counts as unavailable."""
        try:
            answer = self.available()
        except Exception as exc:  # a broken install is a reason, not a crash of the harness
            return False, f"available() raised {type(exc).__name__}: {exc}"
        if answer is True:
            return True, ""
        return False, answer if isinstance(answer, str) and answer else "not available"


_SYSTEMS: dict[str, System] = {}
_PLUGIN_ERRORS: dict[str, str] = {}
_loaded = False


def register_system(
    name: str,
    available: Availability,
    build: Builder,
    setup_env: EnvSetup | None = None,
    *,
    version: Callable[[], str] | None = None,
    imports: Sequence[str] = (),
    description: str = "",
    replace: bool = False,
    build_onnx: Callable[[str], Compiled] | None = None,
    prepare: Callable[[str, Weights], Any] | None = None,
) -> System:
    """Make ``name`` measurable; ``ValueError`` if the name is taken (unless ``replace``)."""
    load_systems()  # the peers come first in every listing, whoever registers first
    if name in _SYSTEMS and not replace:
        raise ValueError(f"a benchmark system named {name!r} is already registered")
    if not name or any(c.isspace() or c == "," for c in name):
        raise ValueError(f"system name {name!r}: use a non-empty name without spaces or commas")
    system = System(
        name,
        available,
        build,
        setup_env,
        version,
        tuple(imports),
        description,
        build_onnx,
        prepare,
    )
    _SYSTEMS[name] = system
    return system


def unregister_system(name: str) -> bool:
    """Forget ``name``; ``True`` if it was registered."""
    return _SYSTEMS.pop(name, None) is not None


def _import_plugin(module: str) -> None:
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name == module and module in PLUGIN_MODULES:
            return  # an optional built-in hook that is not there yet
        _PLUGIN_ERRORS[module] = traceback.format_exc(limit=3)
    except Exception:  # a plugin that fails to import must not take the peers down with it
        _PLUGIN_ERRORS[module] = traceback.format_exc(limit=3)


def load_systems() -> dict[str, System]:
    """The registered systems in registration order, peers first, then plugins."""
    global _loaded
    if not _loaded:
        _loaded = True
        importlib.import_module("shapevm.tools.bench.systems_peers")
        extra = [m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(",") if m.strip()]
        for module in (*PLUGIN_MODULES, *extra):
            _import_plugin(module)
    return dict(_SYSTEMS)


def plugin_errors() -> dict[str, str]:
    """Plugin modules that failed to import, with the error."""
    load_systems()
    return dict(_PLUGIN_ERRORS)


def get_system(name: str) -> System:
    """The system called ``name``; ``KeyError`` listing the known names otherwise."""
    systems = load_systems()
    if name not in systems:
        raise KeyError(f"unknown benchmark system {name!r} (known: {', '.join(systems)})")
    return systems[name]
