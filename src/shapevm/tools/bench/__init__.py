"""The benchmark harness behind ``shapevm bench``: peers and shapevm measured side by side on
the workloads of ``BENCHMARKS.md``, each in fresh processes with the same thread budget.

Register a further system with :func:`register_system` (see :mod:`.registry`)."""

from shapevm.tools.bench.cli import add_arguments, main, run
from shapevm.tools.bench.registry import (
    System,
    get_system,
    load_systems,
    register_system,
    unregister_system,
)

__all__ = [
    "System",
    "add_arguments",
    "get_system",
    "load_systems",
    "main",
    "register_system",
    "run",
    "unregister_system",
]
