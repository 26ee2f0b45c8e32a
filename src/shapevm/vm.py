"""``shapevm.vm``: looking inside the virtual machine.

- `scd_analysis` / `print_scd_analysis`: the Shape Convergence Degree of every tensor of a
  function, where each unknown (data-dependent) dimension comes from, and the function's
  regions: which are compilable and why the others are not;
- `jit_info`, `jit_stats`, `get_jit_hit_rate`, `get_avg_compile_time`, `reset_jit_stats`:
  the JIT's variants and counters, over every jitted function of the process;
- `enable_bc_trace` / `bc_trace_to_csv`: a record per interpreted instruction or compiled
  region that runs;
- `dump_capability_db` / `load_capability_patch`: the kernel variants each device has;
- `jit_functions`, `memory_pools`, `variant_code`: what the monitor page shows beside
  `jit_info`; `start_monitor` / `stop_monitor`: that page, served from this process
  (``docs/monitor.md``).
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any, TextIO

from shapevm.bytecode.errors import format_message
from shapevm.bytecode.printer import function_lines
from shapevm.frontend.export import Exported, export
from shapevm.frontend.jit import Jitted
from shapevm.jit import stats as _stats
from shapevm.jit.errors import format_key
from shapevm.jit.options import JitOptions
from shapevm.jit.regions import RegionReport, find_regions
from shapevm.runtime import bctrace as _bctrace
from shapevm.runtime import scheduler as _scheduler
from shapevm.runtime.interpreter import invalidate_plans
from shapevm.runtime.scd import SCDReport, analyze, print_report


def _exported(fun_or_exported: Any, specs: tuple[Any, ...]) -> Exported:
    if isinstance(fun_or_exported, Exported):
        if specs:
            raise TypeError("print_scd_analysis of an Exported takes no specifications")
        return fun_or_exported
    if not specs:
        raise TypeError(
            "print_scd_analysis(fun, *specs) needs the argument specifications of fun "
            "(ShapeDtypeStruct or arrays), as export does"
        )
    jitted = fun_or_exported if isinstance(fun_or_exported, Jitted) else Jitted(fun_or_exported)
    return export(jitted)(*specs)


def scd_analysis(fun_or_exported: Any, *specs: Any) -> SCDReport:
    """The SCD report of an `Exported`, or of a function traced for ``specs``."""
    exp = _exported(fun_or_exported, specs)
    return analyze(exp.program.functions[0])


def region_analysis(fun_or_exported: Any, *specs: Any) -> RegionReport:
    """The regions of an `Exported`, or of a function traced for ``specs``."""
    exp = _exported(fun_or_exported, specs)
    return find_regions(exp.program.functions[0], exp.program)


def print_scd_analysis(
    fun_or_exported: Any,
    *specs: Any,
    file: TextIO | None = None,
    hot_threshold: int | None = None,
    scd_threshold: float | None = None,
) -> None:
    """Print the SCD of every tensor, where its unknown dimensions come from, and the
    function's regions: compilable or not, and why. The thresholds default to those of a
    `Jitted` argument, else to the JIT's defaults (3 calls, SCD 0.8).

    >>> import numpy as np, shapevm as sv, shapevm.numpy as snp, shapevm.vm as vm
    >>> b, = sv.symbolic_shape("b")
    >>> vm.print_scd_analysis(lambda x: x * 2.0, sv.ShapeDtypeStruct((b, 4), np.float32))
    SCD analysis of @fun (entry dimension variables: b)
      reg   type                           SCD  unknown dimensions come from
      t0    f32[b, 4]                     1.00
      t1    f32[b, 4]                     1.00
    function SCD: 1.00 (4 of 4 dimensions known at entry)
    regions of @fun (function SCD 1.00 >= 0.80: compiled after 3 calls of a specialization key)
      R0  #0-#1     L0      1 ops  SCD 1.00  compilable
    """
    exp = _exported(fun_or_exported, specs)
    fn = exp.program.functions[0]
    options = fun_or_exported.options if isinstance(fun_or_exported, Jitted) else JitOptions()
    hot = hot_threshold or options.hot_threshold
    scd = options.scd_threshold if scd_threshold is None else scd_threshold
    out = file or sys.stdout
    print_report(analyze(fn), out)
    print(find_regions(fn, exp.program).format(hot, scd), file=out)


def dump_capability_db(file: TextIO | None = None) -> dict[str, Any]:
    """Print which kernel variants each device has for each op and dtype; returns it as a
    JSON-able dict (``{device: {op: {variant: [dtypes]}}}``)."""
    return _scheduler.dump_capability_db(file)


def load_capability_patch(path: str | os.PathLike[str] | dict[str, Any]) -> dict[str, Any]:
    """Amend the capability table from a JSON file (``{"cpu": {"conv2d": {"direct":
    null}}}`` removes a variant, a list of dtype names sets its dtypes); every function
    chooses its kernels again on its next call."""
    db = _scheduler.load_capability_patch(path)
    invalidate_plans()
    return db


def reset_capability_db() -> None:
    """Back to the variants as registered (undo every patch)."""
    _scheduler.reset_capability_db()
    invalidate_plans()


# -- the JIT ----------------------------------------------------------------------------------


def jit_info() -> list[dict[str, Any]]:
    """One dict per variant of every jitted function: ``function``, ``key`` (and
    ``key_text``, ``variables``, ``mode``), ``status`` (queued, compiling, ready, failed,
    evicted), ``compile_ms``, ``hits``, ``last_use`` (``time.monotonic()``),
    ``planned_bytes``, ``naive_bytes``, ``patterns`` (fused lowerings used) and ``reason``
    (why it failed or was evicted)."""
    return [row for engine in _stats.engines() for row in engine.info()]


def jit_stats() -> dict[str, Any]:
    """Process-wide counters: calls, compiled_calls, out_of_range, compiles, compile_ms,
    failures, timeouts, evictions, budget_refusals, scd_refusals."""
    with _stats.LOCK:
        return _stats.COUNTERS.as_dict()


def get_jit_hit_rate() -> float:
    """Calls served by compiled variants / all calls of jitted functions (0.0 before any)."""
    c = _stats.COUNTERS
    return c.compiled_calls / c.calls if c.calls else 0.0


def get_avg_compile_time() -> float:
    """Mean time of the successful compiles, in milliseconds (0.0 before any)."""
    c = _stats.COUNTERS
    return c.compile_ms / c.compiles if c.compiles else 0.0


def reset_jit_stats() -> None:
    """Zero the counters (process-wide and per function) and the variants' hits; compiled
    variants stay."""
    with _stats.LOCK:
        _stats.COUNTERS.reset()
    for engine in _stats.engines():
        engine.reset_counters()


def jit_functions() -> list[dict[str, Any]]:
    """One dict per jitted function, its traces' counters summed: ``function``, ``traces``,
    ``variables``, ``cache_mode``, ``hot_threshold``, ``scd_threshold``, ``scd`` (the
    function's Shape Convergence Degree), ``skip_reason`` (why none of its keys is
    compiled, else ``None``), ``variants``, the counters of `jit_stats`, ``hit_rate`` and
    ``avg_compile_ms``.

    >>> import numpy as np, shapevm as sv, shapevm.vm as vm
    >>> @sv.jit(shapes="b, 4", hot_threshold=2, background=False, tier3=False)
    ... def double(x):
    ...     return x * 2.0
    >>> for b in (3, 3, 3):
    ...     _ = double(np.ones((b, 4), np.float32))
    >>> row = next(r for r in vm.jit_functions() if r["function"] == "double")
    >>> row["calls"], row["compiled_calls"], row["scd"], row["variants"]
    (3, 3, 1.0, 1)
    """
    rows: dict[str, dict[str, Any]] = {}
    for engine in _stats.engines():
        report = engine.report
        opts = engine.options
        row = rows.setdefault(
            engine.name,
            {
                "function": engine.name,
                "traces": 0,
                "variables": list(engine.variables),
                "cache_mode": opts.cache_mode,
                "hot_threshold": opts.hot_threshold,
                "scd_threshold": opts.scd_threshold,
                "scd": round(report.scd, 4),
                "skip_reason": engine.skip_reason,
                "variants": 0,
            },
        )
        row["traces"] += 1
        row["variants"] += len(engine.records())
        for k, v in engine.counters.as_dict().items():
            row[k] = row.get(k, 0) + v
    for row in rows.values():
        row["hit_rate"] = row["compiled_calls"] / row["calls"] if row["calls"] else 0.0
        row["avg_compile_ms"] = row["compile_ms"] / row["compiles"] if row["compiles"] else 0.0
    return list(rows.values())


def profile_kernels(on: bool = True) -> bool:
    """Time every instruction the native tier runs from now on (``False``: stop), for
    `kernel_profile`; returns whether it was on. Each instruction then reads the clock
    twice (tens of nanoseconds): leave it off when not looking."""
    from shapevm import native

    return native.set_profiling(on)


def kernel_profile(fun: Any, *, reset: bool = False) -> list[dict[str, Any]]:
    """Where a jitted function's native code spends its time, measured while
    `profile_kernels` was on: one dict per instruction of its native regions, the most
    costly first: ``region`` (its span of the program), ``kernel`` (what runs: ``dense+
    bias+gelu_erf``, ``attention``, ``chain[3]``...), ``ops`` (the program's instructions
    it covers, as in `variant_code`), ``runs``, ``total_ms``, ``mean_us`` and ``share``
    of the total. ``reset=True`` zeroes the counts after reading them.

    >>> import numpy as np, shapevm as sv, shapevm.vm as vm
    >>> @sv.jit(shapes="b, 8", hot_threshold=1, background=False, tier3=False)
    ... def layer(x):
    ...     return sv.numpy.tanh(x @ np.eye(8, dtype=np.float32) + 1.0)
    >>> was = vm.profile_kernels()
    >>> for _ in range(3):
    ...     _ = layer(np.ones((4, 8), np.float32))
    >>> _ = vm.profile_kernels(was)
    >>> [(r["kernel"], r["runs"]) for r in vm.kernel_profile(layer)]
    [('dense+bias+tanh', 3)]
    """
    engines = getattr(fun, "engines", None)
    if engines is None:
        raise TypeError(
            format_message(
                "kernel_profile takes a jitted function",
                expected="a function made by shapevm.jit or Exported.jit",
                found=type(fun).__name__,
                fix="pass the jitted function itself",
            )
        )
    seen: set[int] = set()
    rows: list[dict[str, Any]] = []
    for engine in engines:
        for rec in engine.records():
            nf = None if rec.variant is None else rec.variant.function
            if nf is None or id(nf) in seen:
                continue
            seen.add(id(nf))
            for region in nf.regions:
                executors = [region.executor]
                if nf.direct is not None:  # the whole function's own executor: same code
                    executors.append(nf.direct)
                counts = [ex.profile(reset) for ex in executors]
                for i, kernel in enumerate(region.lowered.kernels):
                    runs = sum(c[i][0] for c in counts)
                    if runs:
                        total = sum(c[i][1] for c in counts)
                        rows.append(
                            {
                                "region": f"{region.region.name} {region.region.span}",
                                "kernel": kernel.label,
                                "ops": ", ".join(f"#{pc}" for pc in kernel.pcs),
                                "runs": runs,
                                "total_ms": total * 1e3,
                                "mean_us": total * 1e6 / runs,
                            }
                        )
    whole = sum(r["total_ms"] for r in rows) or 1.0
    for r in rows:
        r["share"] = r["total_ms"] / whole
    return sorted(rows, key=lambda r: -r["total_ms"])


def print_kernel_profile(fun: Any, file: TextIO | None = None) -> None:
    """`kernel_profile` as a table."""
    out = file or sys.stdout
    rows = kernel_profile(fun)
    if not rows:
        print("no native instruction ran while profile_kernels() was on", file=out)
        return
    print(f"{'share':>6} {'total ms':>9} {'mean us':>9} {'runs':>6}  kernel  [ops]", file=out)
    for r in rows:
        print(
            f"{r['share']:6.1%} {r['total_ms']:9.3f} {r['mean_us']:9.1f} {r['runs']:6d}  "
            f"{r['kernel']}  [{r['ops']}]",
            file=out,
        )


def memory_pools() -> list[dict[str, Any]]:
    """The memory the JIT's compiled code runs in: one dict per pool (one arena per thread
    that ran native regions) with ``pool``, ``capacity_bytes``, ``used_bytes`` (the most
    one call used) and ``grows``, plus a ``process`` row with the resident set size
    (``rss_bytes``) and its peak (``peak_rss_bytes``) where the system tells them."""
    from shapevm import native

    names = {t.ident: t.name for t in threading.enumerate()}
    rows: list[dict[str, Any]] = []
    for pool in native.arena_pools():
        ident = pool.pop("thread")
        rows.append({"pool": f"arena of thread {names.get(ident, ident)}", **pool})
    rows.append({"pool": "process", **_process_memory()})
    return rows


def _process_memory() -> dict[str, Any]:
    out: dict[str, Any] = {"rss_bytes": None, "peak_rss_bytes": None}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name in ("VmRSS", "VmHWM"):
                    key = "rss_bytes" if name == "VmRSS" else "peak_rss_bytes"
                    out[key] = int(value.split()[0]) * 1024
    except OSError:  # not Linux: the peak from getrusage, where it exists
        try:
            import resource

            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            out["peak_rss_bytes"] = peak if sys.platform == "darwin" else peak * 1024
        except (ImportError, OSError):
            pass
    return out


def variant_code(function: str, key: Any) -> dict[str, str]:
    """What a variant runs: ``bytecode`` (the function's text form, each instruction marked
    with the compiled region that covers it) and ``listing`` (the compiled code: its steps,
    kernels and memory plan). ``key`` is a key of `jit_info` or its ``key_text``.

    >>> import numpy as np, shapevm as sv, shapevm.vm as vm
    >>> @sv.jit(shapes="b", hot_threshold=1, background=False, tier3=False)
    ... def inc(x):
    ...     return x + 1.0
    >>> _ = inc(np.ones(3, np.float32))
    >>> code = vm.variant_code("inc", "exact (3,)")
    >>> print(code["bytecode"].splitlines()[0])
    func @inc(t0: f32[b]) -> f32[b]
    >>> vm.variant_code("inc", "exact (4,)")
    Traceback (most recent call last):
    ...
    KeyError: "no variant 'exact (4,)' of function 'inc'...
    """
    keys: list[str] = []
    for engine in _stats.engines():
        if engine.name != function:
            continue
        for rec in engine.records():
            text = format_key(rec.key)
            keys.append(text)
            if rec.key == key or text == key:
                return _code_of(engine.executable, rec)
    raise KeyError(
        format_message(
            f"no variant {key!r} of function {function!r}",
            expected=f"one of: {', '.join(keys)}" if keys else "a jitted function's name",
            fix="take the function and key_text of a row of shapevm.vm.jit_info()",
        )
    )


def _code_of(executable: Any, rec: Any) -> dict[str, str]:
    variant = rec.variant
    regions = [] if variant is None else [r.region for r in variant.regions]
    lines = []
    for pc, text in function_lines(executable.fn, executable.program):
        mark = next((r.name for r in regions if pc is not None and r.start <= pc < r.stop), "")
        lines.append(f"{mark:<4}{text}")
    if variant is None:
        listing = f"(no compiled code: {rec.status}{': ' + rec.reason if rec.reason else ''})"
    else:
        listing = variant.describe()
        patches = getattr(rec, "patches", None)
        for label, source in [] if patches is None else patches.sources:
            listing += f"\n\ngenerated C for {label}:\n{source}"
    return {"bytecode": "\n".join(lines), "listing": listing}


def start_monitor(host: str = "127.0.0.1", port: int = 0, token: str | None = None) -> str:
    """Serve the monitor page (the JIT's functions, variants, compile queue, memory pools,
    a latency chart and each variant's code, live) from a thread of this process; returns
    its URL. Another address than the loopback one needs a token, which the URL carries
    (one is made when none is given). See ``docs/monitor.md``."""
    from shapevm.tools.monitor import start

    return start(host, port, token)


def stop_monitor() -> None:
    """Stop the monitor page's server, if one runs."""
    from shapevm.tools.monitor import stop

    stop()


def enable_bc_trace(on: bool = True, dir: str | os.PathLike[str] | None = None) -> None:
    """Record every interpreted instruction and compiled region that runs (function, pc,
    opcode or region, shapes, duration in µs, interpreted/compiled). Costs nothing while
    off. With ``dir``, turning it off writes ``bc_trace_<pid>.csv`` there."""
    _bctrace.enable(on, dir)


def bc_trace_to_csv(path: str | os.PathLike[str]) -> int:
    """Write the records of the current (or last) trace to ``path``; returns how many."""
    recorder = _bctrace.last()
    if recorder is None:
        raise RuntimeError("no bytecode trace: call shapevm.vm.enable_bc_trace(True) first")
    return recorder.to_csv(path)


__all__ = [
    "SCDReport",
    "bc_trace_to_csv",
    "dump_capability_db",
    "enable_bc_trace",
    "get_avg_compile_time",
    "get_jit_hit_rate",
    "jit_functions",
    "jit_info",
    "jit_stats",
    "kernel_profile",
    "load_capability_patch",
    "memory_pools",
    "print_kernel_profile",
    "print_scd_analysis",
    "profile_kernels",
    "region_analysis",
    "reset_capability_db",
    "reset_jit_stats",
    "scd_analysis",
    "start_monitor",
    "stop_monitor",
    "variant_code",
]
