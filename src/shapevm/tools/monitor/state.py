"""What the monitor page shows: one JSON-able snapshot of the JIT, built from `shapevm.vm`.

Everything comes from the public observability functions (`jit_functions`, `jit_info`,
`jit_stats`, `memory_pools`) and from the bytecode trace's call records (`LatencyLog`),
so a field that a record gains later reaches the page without changes here: the page
renders every field of every row.
"""

from __future__ import annotations

import functools
import math
import os
import statistics
import threading
import time
from collections import deque
from typing import Any

from shapevm import vm
from shapevm.runtime import bctrace

LATENCY_POINTS = 2000  # kept per function
QUEUED, COMPILING = "queued", "compiling"

Point = tuple[int, float, float, str, str]  # seq, wall time (s), ms, mode, shapes


class LatencyLog:
    """Per-call latencies of every jitted function, from the bytecode trace's call records.

    While the page is watched (`watch`), a recorder of calls is active, unless the program
    runs a trace of its own, which records calls too; when nobody watches, the recorder is
    stopped, so the monitored program runs exactly as without the monitor.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._points: dict[str, deque[Point]] = {}
        self._seq = 0
        self._source: bctrace.Recorder | None = None
        self._cursor = 0
        self._owned: bctrace.Recorder | None = None

    def watch(self, on: bool) -> None:
        """Start (or stop) recording calls."""
        with self._lock:
            if on and bctrace.ACTIVE is None:
                self._owned = bctrace.enable(True, steps=False)
            elif not on and self._owned is not None:
                if bctrace.ACTIVE is self._owned:
                    self._poll_locked()
                    bctrace.enable(False)
                self._owned = None

    @property
    def recording(self) -> bool:
        return bctrace.ACTIVE is not None

    def poll(self) -> None:
        """Take the calls recorded since the last poll."""
        with self._lock:
            self._poll_locked()

    def _poll_locked(self) -> None:
        rec = bctrace.ACTIVE
        if rec is None:
            return
        if rec is not self._source:  # a new recorder: start at its present
            self._source, self._cursor = rec, rec.n_calls
            return
        calls, self._cursor = rec.calls_since(self._cursor)
        if not calls:
            return
        offset = time.time() - time.monotonic()  # call ends are monotonic times
        for c in calls:
            self._seq += 1
            log = self._points.get(c.function)
            if log is None:
                log = self._points[c.function] = deque(maxlen=LATENCY_POINTS)
            log.append((self._seq, round(c.end + offset, 4), c.duration_ms, c.mode, c.shapes))

    def since(self, seq: int) -> tuple[dict[str, list[list[Any]]], int]:
        """Points after ``seq`` per function (``[time, ms, mode, shapes]``), and the last
        sequence number."""
        with self._lock:
            out = {
                fn: [list(p[1:]) for p in points if p[0] > seq]
                for fn, points in self._points.items()
            }
            return {k: v for k, v in out.items() if v}, self._seq


def snapshot(latency: dict[str, list[list[Any]]] | None = None) -> dict[str, Any]:
    """The whole state the page shows (``docs/monitor.md`` describes every field). A
    source that fails leaves its part empty and says why in ``errors``: the page shows
    the rest, and the reason."""
    now_mono = time.monotonic()
    errors: list[str] = []
    functions = _part("functions", vm.jit_functions, [], errors)
    variants = [_variant_row(r, now_mono) for r in _part("variants", vm.jit_info, [], errors)]
    stats = _part("stats", _stats, {}, errors)
    state = {
        "time": time.time(),
        "pid": os.getpid(),
        "stats": stats,
        "functions": functions,
        "variants": variants,
        "queue": compile_queue(functions, variants),
        "memory": _part("memory", vm.memory_pools, [], errors),
        "latency": latency or {},
        "errors": errors,
    }
    return jsonable(state)  # type: ignore[no-any-return]


def _stats() -> dict[str, Any]:
    stats = vm.jit_stats()
    stats["hit_rate"] = vm.get_jit_hit_rate()
    stats["avg_compile_ms"] = vm.get_avg_compile_time()
    return stats


def _part(name: str, source: Any, empty: Any, errors: list[str]) -> Any:
    try:
        return source()
    except Exception as exc:  # the page shows what failed instead of going blank
        errors.append(f"{name}: {type(exc).__name__}: {exc}")
        return empty


def _variant_row(row: dict[str, Any], now_mono: float) -> dict[str, Any]:
    out = dict(row)
    last = out.pop("last_use", 0.0)
    out["last_use_s_ago"] = round(now_mono - last, 3) if last else None
    started = out.pop("compile_started", 0.0)
    tier3_started = out.pop("tier3_started", 0.0)
    if out.get("status") == COMPILING and started:
        out["compiling_for_ms"] = round((now_mono - started) * 1e3, 1)
    elif _tier3_compiling(out) and tier3_started:
        out["compiling_for_ms"] = round(max(0.0, now_mono - tier3_started) * 1e3, 1)
    return out


def _tier3_compiling(row: dict[str, Any]) -> bool:
    """A ready variant whose generated C (tier 3) is being compiled in the background."""
    return row.get("status") == "ready" and row.get("tier3") == COMPILING


def compile_queue(
    functions: list[dict[str, Any]], variants: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The compiles waiting or running: variants queued or compiling (``tier`` 2: their
    regions lowered onto the executor) and ready variants whose generated C is compiling
    in the background (``tier`` 3). Each has its function's SCD and an estimated compile
    time: the median of that function's finished compiles of the same tier, else of all
    functions', else unknown (``None``)."""
    scd = {f["function"]: f.get("scd") for f in functions}
    estimated = _estimator(variants)
    out = []
    for v in variants:
        if v.get("status") in (QUEUED, COMPILING):
            tier, field = 2, "compile_ms"
        elif _tier3_compiling(v):
            tier, field = 3, "tier3_ms"
        else:
            continue
        estimate, basis = estimated(v["function"], field)
        entry = {
            "function": v["function"],
            "key_text": v.get("key_text"),
            "status": COMPILING if tier == 3 else v["status"],
            "tier": tier,
            "stage": v.get("stage", ""),
            "scd": scd.get(v["function"]),
            "estimated_ms": None if estimate is None else round(estimate, 2),
            "estimate_basis": basis,
        }
        if "compiling_for_ms" in v:
            entry["compiling_for_ms"] = v["compiling_for_ms"]
        out.append(entry)
    out.sort(key=lambda e: e["status"] != COMPILING)  # the ones compiling first, then FIFO
    return out


def _estimator(variants: list[dict[str, Any]]) -> Any:
    """``estimate(function, field)``: the median of the finished compile times ``field`` of
    ``function``'s ready variants, else of every function's, with what it is the median of
    (each median computed once per snapshot)."""
    done = [v for v in variants if v.get("status") == "ready"]

    @functools.cache
    def estimate(function: str, field: str) -> tuple[Any, str]:
        own = [v[field] for v in done if v.get(field) and v["function"] == function]
        if own:
            return statistics.median(own), f"median of this function's {len(own)}"
        return overall(field)

    @functools.cache
    def overall(field: str) -> tuple[Any, str]:
        times = [v[field] for v in done if v.get(field)]
        if times:
            return statistics.median(times), f"median of all {len(times)} compiles"
        return None, "no compile has finished yet"

    return estimate


def jsonable(obj: Any) -> Any:
    """``obj`` with tuples as lists, keys as strings, NumPy scalars as numbers and
    non-finite floats as ``None`` (JSON has no NaN), other objects as their text."""
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset, deque)):
        return [jsonable(v) for v in obj]
    item = getattr(obj, "item", None)  # NumPy scalars
    if callable(item):
        try:
            return jsonable(item())
        except (TypeError, ValueError):
            pass
    return str(obj)
