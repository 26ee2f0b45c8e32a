"""``shapevm bench --kernels``: every kernel row measured (`kernels.measure_case`), then
the markdown table with the machine's load, and ``kernels.json``.

Rows come from this package (dense layers and matrix products, `kernel_cases`) and from
the measuring modules of the other kernel families in the source tree's ``benchmarks/``
(``conv_bench.py``: convolution and pooling; ``rowops_bench.py``: layer norm, softmax,
attention, GELU and an elementwise chain). Each such module provides
``kernel_cases(quick: bool) -> list[KernelCase]``; a family whose module is absent gets a
row saying its kernel is not built yet.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from shapevm.tools.bench.kernel_cases import BUILTIN
from shapevm.tools.bench.kernels import (
    SYSTEMS,
    KernelCase,
    KernelConfig,
    RowResult,
    measure_case,
    ort_available,
)

EXTERNAL = {"conv_bench": ("conv", "pool"),
            "rowops_bench": ("layer_norm", "softmax", "attention", "gelu", "chain")}  # fmt: skip
"""Measuring modules in ``benchmarks/`` and the groups of rows each provides."""
GROUPS = (*BUILTIN, *(g for groups in EXTERNAL.values() for g in groups))
NOT_BUILT = "not built yet"


def add_kernel_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the kernel benchmark, as a group of their own (``--quick`` and ``--out``
    are shared with the rest of ``shapevm bench``)."""
    group = parser.add_argument_group(
        "kernels", "each C kernel against ONNX Runtime and NumPy, in one process"
    )
    add = group.add_argument
    add("--groups", help=f"comma separated, of {', '.join(GROUPS)} (default: all)")
    add("--kernel-threads", default="1,2", help="thread counts to measure (default %(default)s)")
    add("--rounds", type=int, help="interleaved rounds per row (default 7; 2 with --quick)")
    add("--block", type=int, help="back-to-back calls per round (default 3; 2 with --quick)")
    add("--kernel-systems", default=",".join(SYSTEMS), help="default: %(default)s")
    add("--retry-busy", type=float, default=1.0,
        help="re-measure a row once when other processes used more cores than this")  # fmt: skip


def benchmarks_dir() -> Path | None:
    """The source tree's ``benchmarks/`` folder, or ``None`` for an installed package."""
    here = Path(__file__).resolve().parents[4] / "benchmarks"
    return here if here.is_dir() else None


def _import_file(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"shapevm_kernel_rows_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _placeholder(group: str, why: str) -> KernelCase:
    return KernelCase(group, group.replace("_", " "), "—", missing=why)


def external_cases(
    stem: str, groups: Sequence[str], quick: bool, folder: Path | None = None
) -> list[KernelCase]:
    """The rows of ``<folder>/<stem>.py`` (default: `benchmarks_dir`), or one placeholder
    row per wanted group that the module does not provide."""
    folder = folder or benchmarks_dir()
    path = folder / f"{stem}.py" if folder else None
    if path is None or not path.exists():
        why = NOT_BUILT if folder else "benchmarks/ not found: run from a source checkout"
        return [_placeholder(g, why) for g in groups]
    try:
        cases = list(_import_file(path).kernel_cases(quick))
    except Exception as exc:  # another family's module: report in its rows, go on
        return [_placeholder(g, f"{stem}.py failed: {type(exc).__name__}: {exc}") for g in groups]
    found = {c.group for c in cases}
    cases = [c for c in cases if c.group in groups]
    return cases + [_placeholder(g, NOT_BUILT) for g in groups if g not in found]


def collect_cases(groups: Sequence[str], quick: bool) -> list[KernelCase]:
    """Every row of ``groups``, in the order of `GROUPS`."""
    cases = [c for g in BUILTIN if g in groups for c in BUILTIN[g](quick)]
    for stem, provided in EXTERNAL.items():
        wanted = [g for g in provided if g in groups]
        if wanted:
            cases += external_cases(stem, wanted, quick)
    order = {g: i for i, g in enumerate(GROUPS)}
    return sorted(cases, key=lambda c: order.get(c.group, len(order)))


def _us(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.1f}" if value < 999.95 else f"{value:,.0f}"


def _ratio(times: dict[str, float], peer: str) -> str:
    a, b = times.get("shapevm"), times.get(peer)
    return f"{a / b:.2f}" if a and b else "—"


def _cells(row: RowResult | None, threads: int) -> list[str]:
    if row is None:
        return ["—"] * (6 if threads == 1 else 5)
    t = row.median_us
    cells = [_us(t.get("shapevm")), _us(t.get("onnxruntime")), _us(t.get("numpy")),
             _ratio(t, "onnxruntime"), _ratio(t, "numpy")]  # fmt: skip
    if threads == 1:
        cells.append(_ratio(row.cpu_median_us, "onnxruntime"))
    return cells


def render_table(
    cases: Sequence[KernelCase], results: Sequence[dict[int, RowResult]], threads: Sequence[int]
) -> str:
    """The markdown table: per thread count, medians in µs and shapevm's time as a multiple
    of ONNX Runtime's and NumPy's (below 1: shapevm is faster); with one thread also the
    multiple of CPU times."""
    head = ["kernel", "shape"]
    for t in threads:
        head += [f"shapevm {t}T µs", f"ORT {t}T µs", f"NumPy {t}T µs", f"÷ORT {t}T", f"÷NumPy {t}T"]
        head += ["÷ORT 1T CPU"] if t == 1 else []
    head.append("others' load")
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "--:|" * (len(head) - 2)]
    for case, per in zip(cases, results, strict=True):
        if case.missing:
            cells = [case.missing] + ["—"] * (len(head) - 3)
        else:
            cells = [c for t in threads for c in _cells(per.get(t), t)]
            busy = max((r.busy for r in per.values()), default=0.0)
            cells.append(f"{busy:.2f}")
        lines.append("| " + " | ".join([case.name, case.shape, *cells]) + " |")
    return "\n".join(lines)


def _ratios(
    cases: Sequence[KernelCase], results: Sequence[dict[int, RowResult]], group: str, t: int,
    cpu: bool,
) -> list[tuple[float, str]]:  # fmt: skip
    pts = []
    for case, per in zip(cases, results, strict=True):
        row = per.get(t)
        times = (row.cpu_median_us if cpu else row.median_us) if row else {}
        if case.group == group and "shapevm" in times and "onnxruntime" in times:
            pts.append((times["shapevm"] / times["onnxruntime"], f"{case.name} {case.shape}"))
    return pts


def _geo(pts: list[tuple[float, str]]) -> str:
    geo = math.exp(sum(math.log(p) for p, _ in pts) / len(pts))
    worst = max(pts)
    return f"geometric mean {geo:.2f} over {len(pts)} rows, worst {worst[0]:.2f} ({worst[1]})"


def summarize(
    cases: Sequence[KernelCase], results: Sequence[dict[int, RowResult]], threads: Sequence[int]
) -> list[str]:
    """Per group and thread count: geometric mean of shapevm ÷ ORT, and the worst row (with
    one thread, of the CPU times too)."""
    lines = []
    for group in dict.fromkeys(c.group for c in cases):
        for t in threads:
            pts = _ratios(cases, results, group, t, cpu=False)
            if not pts:
                continue
            line = f"- {group}, {t} thread{'s' * (t > 1)}: shapevm ÷ ORT {_geo(pts)}"
            cpu = _ratios(cases, results, group, t, cpu=True) if t == 1 else []
            lines.append(line + (f"; CPU time: {_geo(cpu)}" if cpu else ""))
    return lines


def _notes(cases: Sequence[KernelCase], results: Sequence[dict[int, RowResult]]) -> list[str]:
    notes = []
    for case, per in zip(cases, results, strict=True):
        for t, row in per.items():
            notes += [
                f"- {case.name} {case.shape} {t}T: {s} failed: {e}" for s, e in row.errors.items()
            ]
            notes += [
                f"- {case.name} {case.shape} {t}T: {s} differs from NumPy by {d:.1e} (relative)"
                for s, d in row.max_rel_diff.items()
                if d > 1e-4
            ]
    return sorted(set(notes))


def _versions(systems: Sequence[str]) -> str:
    import numpy as np
    from threadpoolctl import threadpool_info

    from shapevm import __version__, native

    info = native.info()
    blas: dict[str, Any] = next((p for p in threadpool_info() if p.get("user_api") == "blas"), {})
    parts = [
        f"shapevm {__version__} (C library at level {info['isa']}, compiler {info['compiler']})",
        f"NumPy {np.__version__} ({blas.get('internal_api', 'BLAS')} {blas.get('version', '?')})",
    ]
    missing = ort_available() if "onnxruntime" in systems else "not asked for"
    if missing is None:
        import onnxruntime

        parts.append(f"onnxruntime {onnxruntime.__version__}")
    else:
        parts.append(f"ONNX Runtime not measured: {missing}")
    return ", ".join(parts)


def ort_overhead_us(rounds: int = 200) -> float | None:
    """Median time of an ONNX Runtime run of one Identity node on one float, through IO
    binding: the fixed cost included in every ORT time of the table."""
    if ort_available() is not None:
        return None
    import numpy as np
    from onnx import helper

    from shapevm.tools.bench.kernel_cases import onnx_graph
    from shapevm.tools.bench.kernels import ort_call

    one = np.ones(1, np.float32)
    graph = onnx_graph([helper.make_node("Identity", ["x"], ["y"])], {"x": one}, {"y": (1,)})
    call = ort_call(graph, 1)
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        call()
        times.append(time.perf_counter_ns() - t0)
    return sorted(times)[len(times) // 2] / 1e3


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def header(
    config: KernelConfig,
    load: tuple[float, float],
    overhead: float | None,
    pool: dict[str, int] | None = None,
) -> str:
    """What was measured, where, how, and how loaded the machine was (``pool``: how shapevm's
    thread pool fared, the counters of `shapevm.native.info`)."""
    lines = [
        f"## shapevm bench --kernels, {time.strftime('%Y-%m-%d %H:%M')}: {_cpu_model()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}",
        "",
        f"- {_versions(config.systems)}",
        f"- load average of the machine: {load[0]:.2f} at the start, {load[1]:.2f} at the end; "
        "*others' load* is the cores other processes used while the row ran",
        f"- each time: median of {config.rounds * config.block} calls ({config.rounds} rounds of "
        f"{config.block} back-to-back calls, the systems interleaved round by round, each block "
        f"after this process's other threads went idle), after {config.warmup} warm-up calls",
        "- ÷ORT, ÷NumPy: shapevm's time divided by the peer's in the same run (below 1: "
        "shapevm is faster); ÷ORT 1T CPU: the same for the calling thread's CPU time with one "
        "thread (every system computes on it then), which leaves out the waits for a core",
    ]
    if overhead is not None:
        lines.append(
            f"- an ONNX Runtime run of one Identity node through IO binding takes {overhead:.1f} "
            "µs here: that fixed cost is part of every ORT time"
        )
    if pool:
        lines.append(
            f"- shapevm's pool during the run: {pool['parallel_calls']} jobs on the pool, "
            f"{pool['late_jobs']} of them late (a worker lost its core), "
            f"{pool['backed_off_calls']} jobs on the calling thread after one"
        )
    return "\n".join(lines)


def _pool_counters(since: dict[str, int] | None = None) -> dict[str, int]:
    from shapevm import native

    now = {k: int(v) for k, v in native.info()["pool"].items()}
    return {k: v - (since or {}).get(k, 0) for k, v in now.items()}


def _loadavg() -> float:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return float("nan")


def _parse_ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise ValueError(f"--kernel-threads: expected thread counts such as 1,2; found {text!r}")
    return values


def _parse_names(text: str | None, known: Sequence[str], option: str) -> list[str]:
    names = [n.strip() for n in (text or ",".join(known)).split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ValueError(
            f"{option}: unknown {', '.join(unknown) or '(none given)'}; known: {', '.join(known)}"
        )
    return names


def config_from_args(args: argparse.Namespace) -> tuple[KernelConfig, list[int], list[str]]:
    """The configuration, thread counts and groups that ``args`` ask for (ValueError if bad)."""
    quick = bool(getattr(args, "quick", False))
    threads = _parse_ints(args.kernel_threads)
    groups = _parse_names(args.groups, GROUPS, "--groups")
    systems = _parse_names(args.kernel_systems, SYSTEMS, "--kernel-systems")
    config = KernelConfig(
        rounds=args.rounds or (2 if quick else 7),
        block=args.block or (2 if quick else 3),
        warmup=1 if quick else 3,
        systems=tuple(systems),
        retry_busy=args.retry_busy,
        retries=0 if quick else 1,
    )
    return config, threads, groups


def run_kernels(args: argparse.Namespace, log: Callable[[str], None] | None = None) -> int:
    """Measure every row, print the table, write ``kernels.md`` and ``kernels.json`` under
    ``args.out``; 2 for bad options, 1 if a system failed on a row."""
    say = log or (lambda line: print(line, file=sys.stderr, flush=True))
    try:
        config, threads, groups = config_from_args(args)
    except ValueError as exc:
        print(f"shapevm bench: {exc}", file=sys.stderr)
        return 2
    load0 = _loadavg()
    pool0 = _pool_counters()
    overhead = ort_overhead_us() if "onnxruntime" in config.systems else None
    cases = collect_cases(groups, bool(getattr(args, "quick", False)))
    results: list[dict[int, RowResult]] = []
    for i, case in enumerate(cases):
        per = {} if case.missing else {t: measure_case(case, t, config) for t in threads}
        results.append(per)
        say(f"[{i + 1}/{len(cases)}] {case.group}: {case.name} {case.shape}")
    pool = _pool_counters(pool0)
    text = "\n\n".join(
        part
        for part in (
            header(config, (load0, _loadavg()), overhead, pool),
            render_table(cases, results, threads),
            "\n".join(summarize(cases, results, threads)),
            "\n".join(_notes(cases, results)),
        )
        if part
    )
    out = Path(getattr(args, "out", "bench-out"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "kernels.md").write_text(text + "\n", encoding="utf-8")
    raw = [
        {"group": c.group, "name": c.name, "shape": c.shape, "missing": c.missing,
         "threads": {str(t): vars(r) for t, r in per.items()}}
        for c, per in zip(cases, results, strict=True)
    ]  # fmt: skip
    meta = {"command": sys.argv, "load_average": [load0, _loadavg()], "ort_overhead_us": overhead,
            "pool": pool}  # fmt: skip
    (out / "kernels.json").write_text(json.dumps({"meta": meta, "rows": raw}, indent=1), "utf-8")
    print(text)
    return 1 if any(r.errors for per in results for r in per.values()) else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python benchmarks/kernel_bench.py`` with ``argv``: the same as ``shapevm bench
    --kernels``."""
    parser = argparse.ArgumentParser(prog="kernel_bench", description=__doc__.split("\n\n")[0])
    add_kernel_arguments(parser)
    parser.add_argument("--quick", action="store_true", help="smoke test: few calls, few rows")
    parser.add_argument("--out", default="bench-out", help="folder for kernels.md, kernels.json")
    return run_kernels(parser.parse_args(argv))
