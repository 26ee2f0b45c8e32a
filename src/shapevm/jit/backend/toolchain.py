"""Tier 3's toolchain: the system's C compiler, and the cache of what it built.

- **Compiler**: ``$CC``, else the first of ``cc``, ``gcc``, ``clang`` on ``PATH``; its
  ``--version`` line is part of every cache key. With none, `compiler()` is None and
  `why_no_compiler()` says what was looked for: tier 3 is skipped, nothing else changes.
  GCC's optimisation-tuning options are tried once on an empty translation unit when the
  compiler is looked up; only those it accepts are used (`tuning_flags`).
- **Cache**: ``$SHAPEVM_CACHE_DIR``, else ``$XDG_CACHE_HOME/shapevm``, else
  ``~/.cache/shapevm``, in a ``kernels-<abi>`` folder. The key (a SHA-256) covers the
  source, the compiler and its version, the flags, the instruction set, shapevm's version
  and the headers the source includes. Each entry is ``<key>.so`` with ``<key>.json``
  holding the library's own SHA-256; both are written to temporary names and renamed, so
  a reader never sees half a file. The folder must belong to the user and be writable by
  no one else; a folder that is not (or an entry whose hash does not match) is never
  loaded from: the library is built again in a private temporary folder, or over the bad
  entry.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import json
import os
import shlex
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shapevm import native

HEADERS = Path(native.__file__).parent / "c"
# -O2: the generated loop has one form per segment (svgen_body.h), so -O3's loop versioning
# and unswitching only cost compile time (jit_bench.py --only tier3 measures both)
FLAGS = (
    "-O2", "-std=gnu11", "-fPIC", "-shared", "-fno-math-errno", "-ffp-contract=fast",
    "-fvisibility=hidden", "-fno-semantic-interposition",
)  # fmt: skip
# GCC's interprocedural passes have nothing to do on one kernel (its helpers are inlined),
# and generated code never unwinds: about 10% of a library's compile. Older GCCs lack some
# (-fno-ipa-modref came with GCC 11): each compiler gets the ones it accepts (`tuning_flags`)
GCC_FLAGS = (
    "-fno-ipa-cp", "-fno-ipa-sra", "-fno-ipa-icf", "-fno-ipa-modref", "-fno-ipa-pure-const",
    "-fno-ipa-reference", "-fno-ipa-vrp", "-fno-ipa-bit-cp", "-fno-asynchronous-unwind-tables",
)  # fmt: skip
# each level's instruction set on the command line, as isa_<level>.c has it in a pragma: one
# target for the whole translation unit (a per-function target costs the compiler ~15%)
TARGET_FLAGS = {
    "generic": (),
    "avx2": ("-mavx2", "-mfma", "-mbmi2"),
    "avx512": ("-mavx512f", "-mavx512dq", "-mavx512bw", "-mavx512vl", "-mavx2", "-mfma", "-mbmi2"),
}
_lock = threading.Lock()
_compiler: tuple[tuple[str, ...], str] | bool | None = False  # False: not looked up yet
_tuning: tuple[str, ...] = ()  # the GCC_FLAGS the compiler found accepts
_private_dir: Path | None = None


@dataclass
class Built:
    path: Path
    symbol: str
    key: str
    compile_ms: float  # 0 for a cache hit
    cached: bool


class BuildError(Exception):
    """The compiler failed (its output is in the message)."""


def compiler() -> tuple[tuple[str, ...], str] | None:
    """(command, version line) of the C compiler, or None when there is none."""
    global _compiler, _tuning
    with _lock:
        if _compiler is False:
            found = _find()
            _tuning = _accepted(found[0], GCC_FLAGS) if found and _gcc(found) else ()
            _compiler = found
        return _compiler  # type: ignore[return-value]


def tuning_flags() -> tuple[str, ...]:
    """The optimisation-tuning options (of `GCC_FLAGS`) the compiler accepts."""
    compiler()
    return _tuning


def _gcc(found: tuple[tuple[str, ...], str]) -> bool:
    return "clang" not in found[1].lower()


def _accepted(cmd: tuple[str, ...], options: tuple[str, ...]) -> tuple[str, ...]:
    """Those of ``options`` with which ``cmd`` compiles an empty translation unit: all of
    them in one run when it takes them all, else each one tried alone."""
    if _compiles(cmd, options):
        return options
    return tuple(o for o in options if _compiles(cmd, (o,)))


@functools.cache
def _nice() -> tuple[str, ...]:
    """The prefix that runs a compiler at the lowest priority (``nice -n 19``), or nothing
    where ``nice`` is absent. Tier 3 compiles in the background while calls run on every
    core: the compiler must take only what the calls leave idle (at the same priority, a
    compile of 150 ms of CPU during a stream made the calls next to it up to 2x slower)."""
    exe = shutil.which("nice")
    return (exe, "-n", "19") if exe else ()


def _compiles(cmd: tuple[str, ...], options: tuple[str, ...]) -> bool:
    probe = [*_nice(), *cmd, *options, "-x", "c", "-c", "-", "-o", os.devnull]
    try:
        out = subprocess.run(probe, input="", capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0


def reset() -> None:
    """Look the compiler up again at the next use (after ``$CC`` or ``PATH`` change)."""
    global _compiler
    with _lock:
        _compiler = False
        _nice.cache_clear()


def why_no_compiler() -> str:
    cc = os.environ.get("CC")
    tried = f"$CC ({cc!r}), " if cc else ""
    return f"no C compiler found ({tried}cc, gcc, clang on PATH): tier 3 is skipped"


def _find() -> tuple[tuple[str, ...], str] | None:
    candidates: list[list[str]] = []
    if os.environ.get("CC"):
        candidates.append(shlex.split(os.environ["CC"]))
    candidates += [["cc"], ["gcc"], ["clang"]]
    for cmd in candidates:
        exe = shutil.which(cmd[0]) if cmd else None
        if not exe:
            continue
        try:
            out = subprocess.run(
                [exe, *cmd[1:], "--version"], capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if out.returncode == 0:
            return (exe, *cmd[1:]), (out.stdout.splitlines() or ["?"])[0]
    return None


def cache_root() -> Path:
    base = os.environ.get("SHAPEVM_CACHE_DIR")
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = (
            os.path.join(xdg, "shapevm") if xdg else os.path.join(Path.home(), ".cache", "shapevm")
        )
    return Path(base) / f"kernels-{native.info()['abi_version']}"


def safe_dir(path: Path) -> str | None:
    """Why ``path`` must not be used for loadable code (None: it is fine)."""
    try:
        st = path.stat()
    except OSError as exc:
        return f"cannot read {path}: {exc}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"{path} belongs to user {st.st_uid}, not to this user ({os.getuid()})"
    if st.st_mode & 0o022:
        return f"{path} is writable by others (mode {oct(st.st_mode & 0o777)})"
    return None


def cache_dir() -> tuple[Path, str]:
    """The folder to build into, and a note when the configured one was refused."""
    global _private_dir
    root = cache_root()
    try:
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        problem: str | None = f"cannot create {root}: {exc}"
    else:
        problem = safe_dir(root)
    if problem is None:
        return root, ""
    with _lock:
        if _private_dir is None:
            _private_dir = Path(tempfile.mkdtemp(prefix="shapevm-kernels-"))
    return _private_dir, f"cache not used: {problem}"


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _headers_digest() -> str:
    h = hashlib.sha256()
    for p in sorted(HEADERS.glob("*.h")):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()


_HEADERS_DIGEST: str | None = None


def flags(isa: str) -> tuple[str, ...]:
    """The compiler's options for code of instruction-set level ``isa``."""
    return (*FLAGS, *tuning_flags(), *TARGET_FLAGS[isa])


def cache_key(source: str, isa: str) -> str:
    global _HEADERS_DIGEST
    found = compiler()
    assert found is not None
    if _HEADERS_DIGEST is None:
        _HEADERS_DIGEST = _headers_digest()
    import shapevm

    parts = [
        source,
        " ".join(found[0]),
        found[1],
        " ".join(flags(isa)),
        isa,
        shapevm.__version__,
        _HEADERS_DIGEST,
    ]
    return _digest("\0".join(parts).encode())


def build(symbol: str, source: str, isa: str, timeout_s: float = 60.0) -> Built:
    """The shared library of ``source`` (from the cache when a valid entry exists)."""
    found = compiler()
    if found is None:
        raise BuildError(why_no_compiler())
    folder, _note = cache_dir()
    key = cache_key(source, isa)
    so, meta = folder / f"{key}.so", folder / f"{key}.json"
    hit = _valid(so, meta, symbol)
    if hit:
        return Built(so, symbol, key, 0.0, True)
    t0 = time.perf_counter()
    fd, tmp_c = tempfile.mkstemp(suffix=".c", dir=folder)
    tmp_so = tmp_c[:-2] + ".so"
    try:
        with os.fdopen(fd, "w") as f:
            f.write(source)
        cmd = [*found[0], *flags(isa), f"-I{HEADERS}", tmp_c, "-o", tmp_so, "-lm"]
        tmp_meta = tmp_c[:-2] + ".json"
        returncode, stderr = _compile(cmd, timeout_s, (tmp_c, tmp_so, tmp_meta))
        if returncode != 0:
            raise BuildError(f"{' '.join(cmd[:2])} failed:\n{stderr[-2000:]}")
        try:  # the files go when the process exits during the compile (`_stop_compiles`)
            data = Path(tmp_so).read_bytes()
            Path(tmp_meta).write_text(json.dumps({"sha256": _digest(data), "symbol": symbol}))
            os.replace(tmp_so, so)
            os.replace(tmp_meta, meta)
        except OSError as exc:
            raise BuildError(f"the built library could not go into the cache: {exc}") from exc
    finally:
        _remove(tmp_c, tmp_so)
    return Built(so, symbol, key, (time.perf_counter() - t0) * 1e3, False)


_running: dict[int, tuple[subprocess.Popen[str], tuple[str, ...]]] = {}
_running_lock = threading.Lock()
_exiting = False


def _compile(cmd: list[str], timeout_s: float, leftovers: tuple[str, ...]) -> tuple[int, str]:
    """Run the compiler (lowest priority, in a process group of its own): its return code
    and its diagnostics. A compile still running when this process exits is killed with
    the processes it started (cc1, as) and its files are removed (`_stop_compiles`): a
    background compile must not outlive the process nor write into its cache after it."""
    with _running_lock:
        if _exiting:
            raise BuildError("the process is exiting")
        proc = subprocess.Popen(
            [*_nice(), *cmd],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        _running[proc.pid] = (proc, leftovers)
    try:
        _, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        _kill(proc)
        proc.communicate()
        raise BuildError(f"the compiler took over {timeout_s} s") from exc
    finally:
        if proc.returncode is None:  # interrupted (KeyboardInterrupt in a foreground compile)
            _kill(proc)
            proc.wait()
        with _running_lock:
            _running.pop(proc.pid, None)
    return proc.returncode, stderr


def _kill(proc: subprocess.Popen[str]) -> None:
    if proc.returncode is not None:  # reaped: its pid (and group) may be another's by now
        return
    try:
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, signal.SIGKILL)
        else:  # pragma: no cover - no process groups
            proc.kill()
    except OSError:
        pass  # already gone


def _remove(*paths: str) -> None:
    for p in paths:
        try:
            os.unlink(p)
        except OSError:
            pass


def _forget_compiles() -> None:
    """In a child made by fork: the compiles are the parent's, not this process's to kill."""
    global _running_lock
    _running_lock = threading.Lock()
    _running.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_compiles)


@atexit.register
def _stop_compiles() -> None:
    global _exiting
    with _running_lock:
        _exiting = True
        running = list(_running.values())
    for proc, leftovers in running:
        _kill(proc)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        _remove(*leftovers)


def _valid(so: Path, meta: Path, symbol: str) -> bool:
    try:
        info: dict[str, Any] = json.loads(meta.read_text())
        data = so.read_bytes()
    except (OSError, ValueError):
        return False
    return info.get("symbol") == symbol and info.get("sha256") == _digest(data)


def load(built: Built) -> Any:
    """The kernel capsule of a built library (`shapevm.native.Executor.patch` takes it)."""
    return native._load_kernel(str(built.path), built.symbol)
