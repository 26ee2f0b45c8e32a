"""``shapevm bench``: measure systems on the workloads of ``BENCHMARKS.md``, as ratios.

Progress goes to stderr; the tables go to stdout and, with the raw results (``results.json``)
and the stream plot (``stream.png``), to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import shapevm
from shapevm.models import WORKLOADS
from shapevm.tools.bench.kernel_run import add_kernel_arguments, run_kernels
from shapevm.tools.bench.onnx_files import graph_inputs, input_shapes, parse_shapes, workload_id
from shapevm.tools.bench.registry import System, load_systems, plugin_errors
from shapevm.tools.bench.report import plot_stream, render, summarize
from shapevm.tools.bench.runner import RunConfig, run_all

DESCRIPTION = "Measure systems on the workloads W1-W3 of BENCHMARKS.md, in fresh processes."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``shapevm bench`` (shared by ``python -m shapevm bench`` and :func:`main`)."""
    add = parser.add_argument
    add(
        "--workloads", help=f"comma separated (default: {','.join(WORKLOADS)}, or none with --onnx)"
    )
    add(
        "--onnx",
        action="append",
        default=[],
        metavar="FILE",
        help="an ONNX file as a workload, run by every system that runs ONNX files (repeatable)",
    )
    add("--shapes", help="input shapes of the --onnx files, e.g. 1x3x224x224,2x3x224x224")
    add("--systems", help="comma separated (default: every registered system; see --list)")
    add("--repeats", type=int, help="processes per measure, medians reported (default 3; 1 quick)")
    add("--quick", action="store_true", help="smoke test: 1 process, few calls")
    add("--out", default="bench-out", help="folder for results.json, tables.md, stream.png")
    add("--stream-calls", type=int, help="calls in the stream (default 200; 50 with --quick)")
    add("--steady-calls", type=int, help="timed calls per shape for (c) (default 20; 5 quick)")
    add("--warmup", type=int, help="untimed calls per shape before (c) (default 3; 1 quick)")
    add("--max-shapes", type=int, help="use only the first N shapes of each workload")
    add("--threads", type=int, default=2, help="threads per process (default %(default)s)")
    add("--no-pin", action="store_true", help="do not pin each process to --threads CPUs")
    add("--timeout", type=float, default=1800.0, help="seconds per process (default %(default)g)")
    add("--list", action="store_true", help="list the systems and whether they can run, then exit")
    add("--kernels", action="store_true", help="measure the C kernels instead (options below)")
    add_kernel_arguments(parser)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="shapevm bench", description=DESCRIPTION)
    add_arguments(parser)
    return parser


def _names(text: str, known: Sequence[str], what: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ValueError(
            f"unknown {what} {', '.join(unknown) or '(none given)'} (known: {', '.join(known)})"
        )
    return names


def _onnx_workloads(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """``--onnx`` files as workloads, each with the ``--shapes``."""
    if not args.onnx:
        if args.shapes:
            raise ValueError("--shapes gives the input shapes of --onnx files; no --onnx given")
        return {}
    if not args.shapes:
        raise ValueError("--onnx needs --shapes, e.g. --shapes 1x3x224x224,2x3x224x224")
    shapes = parse_shapes(args.shapes)
    out = {}
    for path in args.onnx:
        if not Path(path).is_file():
            raise ValueError(f"--onnx {path}: no such file")
        try:  # every input sized for every shape, before any process starts
            inputs = graph_inputs(path)
            for shape in shapes:
                input_shapes(inputs, shape)
        except ImportError:
            pass  # no onnx here: the measuring processes say what they cannot run
        except ValueError as exc:  # a file that is not a model, an input nothing sizes
            raise ValueError(f"--onnx {path}: {exc}") from None
        out[workload_id(path)] = {"path": str(Path(path).resolve()), "shapes": shapes}
    return out


def _config(args: argparse.Namespace, systems: list[str], workloads: list[str]) -> RunConfig:
    quick = args.quick

    def pick(value: int | None, normal: int, fast: int) -> int:
        return value if value is not None else fast if quick else normal

    return RunConfig(
        workloads=workloads,
        systems=systems,
        repeats=pick(args.repeats, 3, 1),
        stream_calls=pick(args.stream_calls, 200, 50),
        steady_calls=pick(args.steady_calls, 20, 5),
        warmup=pick(args.warmup, 3, 1),
        max_shapes=args.max_shapes,
        threads=args.threads,
        pin=not args.no_pin,
        timeout_s=args.timeout,
    )


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _load() -> float | None:
    """The 1-minute load average: other work on the machine is the first suspect of noise."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def _meta(config: RunConfig, load_start: float | None) -> dict[str, Any]:
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "pinned_cpus": config.cpus,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "shapevm": shapevm.__version__,
        "load_average": [load_start, _load()],
    }


def _header(meta: dict[str, Any], summary: dict[str, Any], skipped: dict[str, str]) -> str:
    cpus = meta["pinned_cpus"]
    where = f"pinned to CPUs {cpus}" if cpus is not None else "not pinned"
    lines = [
        f"## shapevm bench, {meta['date']}: {meta['cpu']}, {meta['cpu_count']} CPUs "
        f"({where}), Python {meta['python']}",
        "",
    ]
    start, end = meta["load_average"]
    if start is not None:
        lines.insert(
            1, f"Load average of the machine: {start:.2f} at the start, {end:.2f} at the end."
        )
    for name, per in summary.items():
        version = next((m["version"] for m in per.values() if m.get("version")), "")
        lines.append(f"- {name}: {version}")
    lines += [f"- not measured: {name} ({why})" for name, why in skipped.items()]
    for name, per in summary.items():
        lines += [f"- FAILED {name} {w}: {e}" for w, m in per.items() for e in m["errors"]]
    return "\n".join(lines) + "\n\n"


def _list(systems: dict[str, System]) -> int:
    for name, system in systems.items():
        ok, why = system.is_available()
        state = "available" if ok else f"unavailable: {why}"
        print(f"{name:<24} {state}" + (f"  ({system.description})" if system.description else ""))
    for module, error in plugin_errors().items():
        print(f"plugin {module} failed to import:\n{error}")
    return 0


def run(args: argparse.Namespace) -> int:
    """Run the benchmark as ``args`` (from :func:`add_arguments`) say; 1 if a process failed."""
    if args.kernels:
        return run_kernels(args)
    systems = load_systems()
    if args.list:
        return _list(systems)
    for module, error in plugin_errors().items():
        print(
            f"shapevm bench: plugin {module} failed to import; its systems are missing:\n{error}",
            file=sys.stderr,
        )
    try:
        onnx = _onnx_workloads(args)
        named = args.workloads or ("" if onnx else ",".join(WORKLOADS))
        workloads = _names(named, list(WORKLOADS), "workload") if named else []
        workloads += list(onnx)
        wanted = _names(args.systems, list(systems), "system") if args.systems else list(systems)
    except ValueError as exc:
        print(f"shapevm bench: {exc}", file=sys.stderr)
        return 2
    if onnx and not args.systems:  # by default, the systems that run ONNX files
        wanted = [n for n in wanted if systems[n].build_onnx is not None]
    skipped = {}
    for name in wanted:
        ok, why = systems[name].is_available()
        if not ok:
            skipped[name] = why
            print(f"shapevm bench: not measuring {name}: {why}", file=sys.stderr)
    config = _config(args, [n for n in wanted if n not in skipped], workloads)
    config.onnx = onnx
    if not config.systems:
        print("shapevm bench: none of the requested systems can run here", file=sys.stderr)
        return 2
    load_start = _load()
    records = run_all(config, systems, lambda line: print(line, file=sys.stderr, flush=True))
    summary = summarize(records)
    shapes = {w: config.shapes(w) for w in workloads}
    meta = _meta(config, load_start)
    text = _header(meta, summary, skipped) + render(summary, config.as_dict(), shapes)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "tables.md").write_text(text, encoding="utf-8")
    results = {
        "meta": meta,
        "config": config.as_dict(),
        "not_measured": skipped,
        "summary": summary,
        "runs": records,
    }
    (out / "results.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    print(text)
    message = plot_stream(summary, workloads, config.systems, out / "stream.png")
    print(f"shapevm bench: {message}; tables and results.json in {out}", file=sys.stderr)
    return 1 if any(not r.get("ok") for r in records) else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``shapevm bench`` with ``argv`` (default ``sys.argv[1:]``); the exit status."""
    return run(build_parser().parse_args(argv))
