"""Generated kernels on disk: one Python module per kernel, compiled by numba with
``cache=True`` so that another process loads the machine code instead of compiling.

A module's file name is a hash of its source, the numba version and the CPU (name and
features), so a different machine or numba never picks up code that was not built for it.
numba keeps its compiled code next to the module (``__pycache__/*.nbi`` index and ``*.nbc``
data) and checks its own version, the CPU and the module's timestamp when loading.

Files are written atomically (temporary file + rename), so a crash or a concurrent writer
never leaves a half-written module. A file that is there but wrong anyway (truncated,
garbled, edited by hand) is detected: the module text must equal the expected source, and
anything that goes wrong while importing or loading machine code removes the module and
its numba files and builds them again. A broken cache costs a compile, never a crash.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import os
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

import llvmlite.binding as llvm
import numba
import numba.core.config

from shapevm.jit.native import _core

ENV_VAR = "SHAPEVM_CACHE_DIR"


def default_cache_dir() -> Path:
    """``$SHAPEVM_CACHE_DIR``, else ``$XDG_CACHE_HOME/shapevm``, else ``~/.cache/shapevm``."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "shapevm"


@functools.lru_cache(maxsize=1)
def machine_tag() -> str:
    """What generated code depends on besides its own text: the numba version, the CPU it is
    built for (name and features), and the helpers it inlines from `_core` (numba's cache
    checks only the module's own file, so a changed helper must change the name)."""
    config: Any = numba.core.config  # its settings are set at import time, untyped
    name = config.CPU_NAME or llvm.get_host_cpu_name()
    features = config.CPU_FEATURES or llvm.get_host_cpu_features().flatten()
    helpers = hashlib.sha256(Path(_core.__file__).read_bytes()).hexdigest()[:16]
    return f"numba {numba.__version__}; cpu {name}; {features}; helpers {helpers}"


def module_name(source: str) -> str:
    """The module name (and file stem) of a kernel source on this machine."""
    digest = hashlib.sha256(f"{machine_tag()}\n{source}".encode()).hexdigest()
    return f"svk_{digest[:32]}"


def kernel_path(cache_dir: Path, source: str) -> Path:
    return cache_dir / "kernels" / f"{module_name(source)}.py"


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` so that readers see the old file or the whole new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; the cache may be shared
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def remove_kernel(path: Path) -> None:
    """Delete a kernel module and numba's compiled code for it."""
    with contextlib.suppress(OSError):
        path.unlink()
    pycache = path.parent / "__pycache__"
    if pycache.is_dir():
        for f in pycache.glob(f"{path.stem}.*"):
            with contextlib.suppress(OSError):
                f.unlink()


def ensure_source(path: Path, source: str) -> None:
    """Make the file at ``path`` hold exactly ``source`` (rewriting it if it differs)."""
    try:
        current = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        current = None
    if current != source:
        remove_kernel(path)
        write_atomic(path, source)


def import_module(path: Path) -> ModuleType:
    """Import the kernel module at ``path`` under its own name (re-executing it)."""
    name = path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import a module from {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


__all__ = [
    "ENV_VAR",
    "default_cache_dir",
    "ensure_source",
    "import_module",
    "kernel_path",
    "machine_tag",
    "module_name",
    "remove_kernel",
    "write_atomic",
]
