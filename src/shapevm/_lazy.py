"""Names of a package that load from their submodule on first use (PEP 562).

``import shapevm`` loads what tracing, exporting and the JIT's core need; the text parser,
the binary reader and writer and `shapevm.vm` load when a program first
uses them. A package
lists those names in one table and gets its module ``__getattr__`` and ``__dir__`` here;
it keeps ``if TYPE_CHECKING:`` imports of the same names so type checkers see them.

>>> import sys, types
>>> pkg = types.ModuleType("demo_pkg")
>>> pkg.__getattr__, pkg.__dir__ = lazy_names("demo_pkg", {"dedent": "textwrap"})
>>> pkg.dedent("  x")
'x'
>>> "dedent" in dir(pkg)
True
>>> pkg.missing
Traceback (most recent call last):
...
AttributeError: module 'demo_pkg' has no attribute 'missing'

Python's import lock makes the first use thread-safe: two threads that ask at once both get
the one module object; the value is then kept in the package's namespace.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(
    package: str, table: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``table`` maps a name to the module that
    defines it; a name equal to its module's last part (``"vm": "shapevm.vm"``) is the
    submodule itself."""

    def __getattr__(name: str) -> Any:
        source = table.get(name)
        if source is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(source)
        value = module if source == f"{package}.{name}" else getattr(module, name)
        namespace = sys.modules.get(package)
        if namespace is not None:
            setattr(namespace, name, value)  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        namespace = sys.modules.get(package)
        present = vars(namespace) if namespace is not None else {}
        return sorted({*present, *table})

    return __getattr__, __dir__
