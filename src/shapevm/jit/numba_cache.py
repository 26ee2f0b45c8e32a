"""Where numba keeps the machine code of shapevm's kernels: next to their source.

shapevm's own kernels (`shapevm.jit.native`) are library code, compiled once per
installation like ``.pyc`` files (``python -m shapevm.jit.native`` builds them all), and the
kernels generated for a model are modules under shapevm's cache directory. numba's
default would put both under ``NUMBA_CACHE_DIR`` when that is set; `install` adds a cache
locator that keeps them in the ``__pycache__`` folder beside their source instead, so:

- a process never compiles the library again because some tool pointed ``NUMBA_CACHE_DIR``
  at an empty folder (what is model-specific still lives under ``$SHAPEVM_CACHE_DIR``, and
  a fresh cache directory there is a cold start);
- the helper process that compiles generated kernels and the process that loads them look
  in the same place.

Where that folder is not writable (a read-only installation) numba's own locators apply.
This file imports nothing from shapevm, so the kernel helper process can load it by path.
"""

from __future__ import annotations

import os
from typing import Any

_NATIVE_DIR = os.path.join(os.path.dirname(os.path.realpath(__file__)), "native")
GENERATED_PREFIX = "svk_"  # module names of generated kernels (fusion, native.codegen)
_installed = False


def _claims(py_file: str) -> bool:
    path = os.path.realpath(py_file)
    if os.path.dirname(path) == _NATIVE_DIR:
        return True
    return os.path.basename(path).startswith(GENERATED_PREFIX)


def install() -> None:
    """Put the locator first in numba's list (once; a no-op where numba's caching module
    does not look as expected)."""
    global _installed
    if _installed:
        return
    _installed = True
    try:
        from numba.core import caching
    except ImportError:  # pragma: no cover - numba missing: nothing is cached anyway
        return
    impl: Any = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)
    base: Any = getattr(caching, "InTreeCacheLocator", None) or getattr(
        caching, "_InTreeCacheLocator", None
    )
    classes = getattr(impl, "_locator_classes", None)
    if base is None or not isinstance(classes, list):  # pragma: no cover - other numba
        return

    class ShapevmCacheLocator(base):  # type: ignore[misc]
        """numba's in-tree locator, for shapevm's kernels only."""

        @classmethod
        def from_function(cls, py_func: Any, py_file: str) -> Any:
            if not _claims(py_file):
                return None
            return super().from_function(py_func, py_file)

    if not any(getattr(c, "__name__", "") == "ShapevmCacheLocator" for c in classes):
        classes.insert(0, ShapevmCacheLocator)


__all__ = ["GENERATED_PREFIX", "install"]
