"""A child process that compiles generated kernel modules into numba's on-disk cache.

Compiling a kernel is mostly Python (numba's type inference and lowering) plus LLVM; in a
thread of the serving process it competes for the GIL with the interpreted calls it is
meant to spare (see `shapevm.jit.engine`). `KernelServer` hands each kernel to this
script instead, started once with the same Python: it reads one JSON request per line
(``{"path": module file, "name": module name, "sig": ["float32:2:r", ...]}``), compiles the
signature with ``cache=True`` and answers ``{"error": null}`` or the error text. The
parent then loads the kernel from the cache in a few milliseconds.

This file runs as a script and imports nothing from shapevm but `numba_cache` (loaded
by path), so that its kernels' machine code goes where the parent looks for it.
"""

from __future__ import annotations

import importlib.util
import json
import select
import subprocess
import sys
import threading
from typing import IO, Any


def _types(numba: Any, sig: list[str]) -> tuple[Any, ...]:
    import numpy as np

    out = []
    for text in sig:
        dtype, ndim, mode = text.split(":")
        out.append(
            numba.types.Array(
                numba.from_dtype(np.dtype(dtype)), int(ndim), "C", readonly=mode == "r"
            )
        )
    return tuple(out)


def _compile(request: dict[str, Any]) -> None:
    import numba

    spec = importlib.util.spec_from_file_location(request["name"], request["path"])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[request["name"]] = module
    spec.loader.exec_module(module)
    module.kernel.compile(_types(numba, request["sig"]))


def _install_locator() -> None:
    import os

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "numba_cache.py")
    spec = importlib.util.spec_from_file_location("_shapevm_numba_cache", path)
    if spec is None or spec.loader is None:  # pragma: no cover - the file ships with this one
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.install()


def serve(stdin: IO[str], stdout: IO[str]) -> None:
    _install_locator()
    for line in stdin:
        try:
            _compile(json.loads(line))
            reply: dict[str, Any] = {"error": None}
        except Exception as exc:  # reported to the parent, which decides what to do
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        stdout.write(json.dumps(reply) + "\n")
        stdout.flush()


class KernelServerTimeout(RuntimeError):
    """The child did not answer in time; it was killed."""


class KernelServer:
    """The parent's handle on the child; started on first use, restarted if it dies."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()

    def compile(self, path: str, name: str, sig: list[str], timeout: float = 300.0) -> None:
        """Compile ``name`` from ``path`` for ``sig`` in the child; raises on failure. A
        child found dead is replaced once."""
        request = json.dumps({"path": path, "name": name, "sig": sig}) + "\n"
        with self._lock:
            for _attempt in range(2):
                proc = self._start()
                assert proc.stdin is not None and proc.stdout is not None
                try:
                    proc.stdin.write(request)
                    proc.stdin.flush()
                    readable, _, _ = select.select([proc.stdout], [], [], timeout)
                    ready = bool(readable)
                    line = proc.stdout.readline() if ready else ""
                except OSError:
                    line, ready = "", True
                if line:
                    error = json.loads(line)["error"]
                    if error:
                        raise RuntimeError(error)
                    return
                self._stop()
                if not ready:
                    raise KernelServerTimeout(
                        f"kernel compiler process timed out after {timeout:.1f} s"
                    )
            raise RuntimeError("kernel compiler process exited while compiling")

    def _start(self) -> subprocess.Popen[str]:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen(
                [sys.executable, "-u", __file__],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        return self._proc

    def _stop(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None

    def close(self) -> None:
        with self._lock:
            self._stop()


if __name__ == "__main__":
    serve(sys.stdin, sys.stdout)
