"""Importing this module loads every kernel the JIT's compiled regions call.

Their machine code is loaded from numba's cache beside the source (compiled there once per
installation, see `shapevm.jit.numba_cache`), about half a second of work that otherwise
happens in the background with the first compile of a process (`shapevm.jit.preload`).
A program that would rather pay it up front, like the benchmark harness when it imports a
system's libraries before its clock starts, imports this module.
"""

from __future__ import annotations

from shapevm.jit.native.entries import build_library

ENTRY_POINTS = build_library()
