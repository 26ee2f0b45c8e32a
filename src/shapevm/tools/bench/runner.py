"""The parent: one fresh process per (system, workload, mode, repeat), results gathered as JSON.

Each repeat runs every workload and system once before the next repeat starts, so slow drift
of a shared machine spreads over all systems instead of landing on one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import shapevm
from shapevm.models import workloads as wl
from shapevm.tools.bench.env import pinned_cpus, pinning, set_thread_env
from shapevm.tools.bench.registry import System

Progress = Callable[[str], None]


@dataclass
class RunConfig:
    """What to measure and how hard; ``max_shapes`` keeps the first N shapes of each workload."""

    workloads: list[str]
    systems: list[str]
    repeats: int = 3
    stream_calls: int = 200
    steady_calls: int = 20
    warmup: int = 3
    max_shapes: int | None = None
    threads: int = 2
    pin: bool = True
    timeout_s: float = 1800.0
    cpus: list[int] | None = field(default=None)
    onnx: dict[str, dict[str, Any]] = field(default_factory=dict)
    """ONNX files as workloads: workload id -> ``{"path": ..., "shapes": [...]}``."""

    def shapes(self, workload_id: str) -> list[wl.Shape]:
        if workload_id in self.onnx:
            listed = [tuple(s) for s in self.onnx[workload_id]["shapes"]]
        else:
            listed = list(wl.get_workload(workload_id).shapes)
        return listed[: self.max_shapes] if self.max_shapes else listed

    def stream(self, workload_id: str) -> list[wl.Shape]:
        return wl.stream_shapes(workload_id, self.stream_calls, 42, self.shapes(workload_id))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def child_env(system: System, threads: int) -> dict[str, str]:
    """The parent's environment with the thread limits, ``shapevm`` importable, and whatever
    the system's ``setup_env`` adds."""
    env = dict(os.environ)
    # What a user gets by default: Python reuses (and writes) its bytecode caches.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    set_thread_env(env, threads)
    src = str(Path(shapevm.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    if system.setup_env is not None:
        system.setup_env(env)
    return env


def cold_caches(tmp: Path) -> dict[str, str]:
    """Empty cache folders for one process: a compile cache on disk (inductor's, for one)
    left by an earlier process would make a cold start look warm."""
    (tmp / "cache").mkdir()
    return {
        "TMPDIR": str(tmp),
        "XDG_CACHE_HOME": str(tmp / "cache"),
        "TORCHINDUCTOR_CACHE_DIR": str(tmp / "cache" / "inductor"),
        "SHAPEVM_CACHE_DIR": str(tmp / "cache" / "shapevm"),
    }


# Run as ``python -c IMPORT_PROBE MODULES_JSON`` by a bare interpreter: how long NumPy and
# then the system's own modules take to import. The measuring child cannot time this itself:
# it runs as ``-m shapevm.tools.bench.child``, so shapevm (and NumPy) are loaded before it
# starts.
IMPORT_PROBE = """
import json, sys, time
t0 = time.perf_counter()
import numpy
t1 = time.perf_counter()
for name in json.loads(sys.argv[1]):
    __import__(name)
t2 = time.perf_counter()
print(json.dumps({"numpy_s": t1 - t0, "library_s": t2 - t1}))
"""


def time_imports(
    modules: Sequence[str], env: dict[str, str], cpus: list[int] | None, timeout_s: float
) -> dict[str, float]:
    """Import time of NumPy and then of ``modules`` in a fresh interpreter, as a user's
    program would start: the second of two runs, so that Python's bytecode caches exist (an
    installed package has them; the first run of an editable checkout writes them)."""
    cmd = [sys.executable, "-c", IMPORT_PROBE, json.dumps(list(modules))]
    out: dict[str, float] = {}
    for _ in range(2):
        proc = subprocess.run(
            cmd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            preexec_fn=pinning(cpus),
        )
        if proc.returncode != 0:
            raise RuntimeError(f"importing {', '.join(modules)} failed: {proc.stderr[-2000:]}")
        out = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"import_numpy_s": out["numpy_s"], "import_s": out["numpy_s"] + out["library_s"]}


def run_child(
    spec: dict[str, Any], env: dict[str, str], cpus: list[int] | None, timeout_s: float
) -> dict[str, Any]:
    """Run one measuring process; its result, or ``ok: False`` with the error and stderr."""
    with tempfile.TemporaryDirectory(prefix="shapevm-bench-") as tmp:
        out = Path(tmp) / "result.json"
        env = {**env, **cold_caches(Path(tmp))}
        cmd = [sys.executable, "-m", "shapevm.tools.bench.child", json.dumps(spec), str(out)]
        start = time.perf_counter()
        try:
            proc = subprocess.run(
                cmd,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                timeout=timeout_s,
                preexec_fn=pinning(cpus),
            )
        except subprocess.TimeoutExpired:
            return {"ok": False, "error": f"timed out after {timeout_s:g} s", "wall_s": timeout_s}
        wall = time.perf_counter() - start
        if out.exists():
            result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
        else:
            result = {"ok": False, "error": f"the process exited with {proc.returncode}"}
        if not result.get("ok"):
            result["stderr_tail"] = proc.stderr[-3000:]
        result["wall_s"] = wall
        return result


def run_all(
    config: RunConfig, systems: dict[str, System], progress: Progress
) -> list[dict[str, Any]]:
    """Every (repeat, workload, system, mode) in turn; one record per measuring process."""
    cpus = pinned_cpus(config.threads) if config.pin else None
    config.cpus = cpus
    jobs = [
        (r, wid, name, mode)
        for r in range(config.repeats)
        for wid in config.workloads
        for name in config.systems
        for mode in ("shapes", "stream")
        if wid not in config.onnx or systems[name].build_onnx is not None
    ]
    records = []
    for i, (r, wid, name, mode) in enumerate(jobs, 1):
        shapes = config.shapes(wid) if mode == "shapes" else config.stream(wid)
        spec = {
            "system": name,
            "workload": wid,
            "mode": mode,
            "shapes": shapes,
            "warmup": config.warmup,
            "steady_calls": config.steady_calls,
        }
        if wid in config.onnx:
            spec["onnx"] = config.onnx[wid]["path"]
        tag = f"[{i:>{len(str(len(jobs)))}}/{len(jobs)}] {wid} {name} {mode}"
        if config.repeats > 1:
            tag += f" (repeat {r + 1}/{config.repeats})"
        env = child_env(systems[name], config.threads)
        result = run_child(spec, env, cpus, config.timeout_s)
        if result.get("ok") and mode == "shapes":
            imports = systems[name].imports_for("onnx" in spec)
            result.update(time_imports(imports, env, cpus, config.timeout_s))
        status = f"{result['wall_s']:.1f} s" if result.get("ok") else f"FAILED: {result['error']}"
        progress(f"{tag} ... {status}")
        records.append({"system": name, "workload": wid, "mode": mode, "repeat": r, **result})
    return records
