"""Loading the native kernels in the background before the first compile needs them.

The first compile of a process that uses the native lowerings imports numba and loads the
kernels' machine code (about a second, most of it holding the GIL). `start` does that in a
daemon thread as soon as a jitted function is created, so that the first hot key finds the
kernels ready; calls keep running in the interpreter meanwhile. `wait` blocks until done.
"""

from __future__ import annotations

import importlib
import logging
import threading

log = logging.getLogger("shapevm.jit")

_lock = threading.Lock()
_thread: threading.Thread | None = None
_done = threading.Event()


def _load() -> None:
    from shapevm.jit.worker import background_work

    try:
        with background_work():
            importlib.import_module("shapevm.jit.native.library")
    except Exception as exc:  # the compile that needs a kernel reports the failure itself
        log.info("preloading native kernels failed: %s: %s", type(exc).__name__, exc)
    finally:
        _done.set()


def start() -> bool:
    """Start loading (once per process); ``False`` when numba is not installed."""
    global _thread
    from shapevm.jit.fusion import numba_available

    if not numba_available():
        return False
    with _lock:
        if _thread is None:
            _thread = threading.Thread(target=_load, name="shapevm-jit-preload", daemon=True)
            _thread.start()
    return True


def wait(timeout: float | None = None) -> bool:
    """Block until the kernels are loaded (``True``) or ``timeout`` passed (``False``);
    ``True`` at once when loading never started."""
    if _thread is None:
        return True
    return _done.wait(timeout)


__all__ = ["start", "wait"]
