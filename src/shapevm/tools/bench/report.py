"""From per-process records to medians, markdown tables with ratios, and the stream plot.

Times are medians over the processes of a (system, workload); accuracy is the worst over
every shape and process. The stream is also shown for each system's fastest process: on a
shared machine a process may run in a slower group for its whole life (a neighbour's load,
the core it was given), and with few processes that moves medians more than the systems
differ. Ratios are to ONNX Runtime, or to NumPy where ONNX Runtime was not
measured: ``2.00×`` means twice the baseline's time (or memory).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from shapevm.models import workloads as wl
from shapevm.tools.bench import onnx_files

BASELINES = ("onnxruntime", "numpy")
Summary = dict[str, dict[str, dict[str, Any]]]  # system -> workload -> measures


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def _median_lists(lists: Sequence[Sequence[float]]) -> list[float]:
    return [_median(column) for column in zip(*lists, strict=True)] if lists else []


def summarize(records: list[dict[str, Any]]) -> Summary:
    """Per system and workload: the medians of every measure, and the median stream's trace."""
    out: Summary = {}
    keys = dict.fromkeys((r["system"], r["workload"]) for r in records)
    for system, wid in keys:
        mine = [r for r in records if r["system"] == system and r["workload"] == wid]
        shapes = [r for r in mine if r["mode"] == "shapes" and r.get("ok")]
        streams = sorted(
            (r for r in mine if r["mode"] == "stream" and r.get("ok")), key=lambda r: r["total_s"]
        )
        errors = [f"{r['mode']}: {r['error']}" for r in mine if not r.get("ok")]
        m: dict[str, Any] = {"processes": len(shapes) + len(streams), "errors": errors}
        if shapes:
            m["import_s"] = _median([r["import_s"] for r in shapes])
            m["first_call_s"] = _median([r["first_call_s"] for r in shapes])
            m["new_shape_s"] = _median_lists([r["new_shape_s"] for r in shapes])
            m["steady_s"] = _median_lists([r["steady_s"] for r in shapes])
            m["accuracy"] = max(max(r["accuracy"]) for r in shapes)
        if streams:
            middle = streams[(len(streams) - 1) // 2]
            m["stream_total_s"] = _median([r["total_s"] for r in streams])
            m["stream_best_s"] = streams[0]["total_s"]
            m["stream_worst_s"] = _median([r["worst_s"] for r in streams])
            m["stream_latencies_s"] = middle["latencies_s"]
            m["rss_mib"] = _median([r["rss_mib"] for r in streams])
            m["rss_children_mib"] = _median([r["rss_children_mib"] for r in streams])
            m["version"] = middle["versions"]["system"]
        out.setdefault(system, {})[wid] = m
    return out


def fmt_time(seconds: float) -> str:
    """``0.074 ms``, ``1.41 ms``, ``354 ms``, ``14.1 s``: three significant digits."""
    ms = seconds * 1e3
    if ms < 0.9995:
        return f"{ms:.3f} ms"
    if ms < 99.95:
        return f"{ms:#.3g} ms"
    if ms < 999.5:
        return f"{ms:.0f} ms"
    return f"{seconds:#.3g} s" if seconds < 99.95 else f"{seconds:.0f} s"


def fmt_ratio(ratio: float) -> str:
    """``0.50×``, ``12.3×``, ``250×``: the thresholds are where rounding adds a digit."""
    if ratio < 9.995:
        return f"{ratio:.2f}×"
    return f"{ratio:.1f}×" if ratio < 99.95 else f"{ratio:.0f}×"


def baseline_of(summary: Summary, wid: str) -> str | None:
    """The system that ratios for workload ``wid`` are taken against."""
    for name in BASELINES:
        if wid in summary.get(name, {}) and "stream_total_s" in summary[name][wid]:
            return name
    return None


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _cell(value: float | None, base: float | None, unit: str = "time") -> str:
    if value is None:
        return "—"
    text = fmt_time(value) if unit == "time" else f"{value:.0f} MiB"
    if base:
        text += f" ({fmt_ratio(value / base)})"
    return text


def _get(summary: Summary, system: str, wid: str, key: str, index: int | None = None) -> Any:
    value = summary.get(system, {}).get(wid, {}).get(key)
    if value is None or index is None:
        return value
    return value[index] if index < len(value) else None


def _per_workload(
    summary: Summary, systems: Sequence[str], wids: Sequence[str], key: str, unit: str = "time"
) -> str:
    rows = []
    for name in systems:
        row = [name]
        for wid in wids:
            base = baseline_of(summary, wid)
            ref = _get(summary, base, wid, key) if base else None
            row.append(_cell(_get(summary, name, wid, key), ref, unit))
        rows.append(row)
    return _table(["system", *wids], rows)


def label(wid: str, shape: wl.Shape) -> str:
    """How a shape of workload ``wid`` is written in the tables (``b=3``, or ``1×3×224×224``
    for an ONNX file)."""
    return onnx_files.label(shape) if onnx_files.is_onnx(wid) else wl.get_workload(wid).label(shape)


def description(wid: str) -> str:
    return wid if onnx_files.is_onnx(wid) else wl.get_workload(wid).description


def _per_shape(
    summary: Summary, systems: Sequence[str], wid: str, key: str, shapes: Sequence[wl.Shape]
) -> str:
    base = baseline_of(summary, wid)
    rows = []
    for name in systems:
        row = [name]
        for i in range(len(shapes)):
            ref = _get(summary, base, wid, key, i) if base else None
            row.append(_cell(_get(summary, name, wid, key, i), ref))
        rows.append(row)
    return _table([f"{wid} system", *(label(wid, s) for s in shapes)], rows)


def render(summary: Summary, config: dict[str, Any], shapes: dict[str, list[wl.Shape]]) -> str:
    """Every measure as a markdown table, systems in the order they were asked for."""
    wids = [w for w in config["workloads"] if any(w in per for per in summary.values())]
    systems = [s for s in config["systems"] if s in summary]
    note = ", ".join(f"{w}: {baseline_of(summary, w) or 'none'}" for w in wids)
    parts = [
        f"Ratios (in parentheses) are to: {note}. Medians over {config['repeats']} "
        f"process(es) per measure; {config['threads']} threads per process."
    ]
    parts += _latency_sections(summary, config, shapes, systems, wids)
    parts += _resource_sections(summary, systems, wids)
    return "\n\n".join(parts) + "\n"


def _latency_sections(
    summary: Summary,
    config: dict[str, Any],
    shapes: dict[str, list[wl.Shape]],
    systems: list[str],
    wids: list[str],
) -> list[str]:
    firsts = ", ".join(f"{w} {label(w, shapes[w][0])}" for w in wids)
    return [
        f"### (a) first call in a fresh process: build + first call on {firsts}",
        _per_workload(summary, systems, wids, "first_call_s"),
        "### (b) first call on each new shape, in the order of the shape list",
        *(_per_shape(summary, systems, w, "new_shape_s", shapes[w][1:]) for w in wids),
        f"### (c) steady state: median of {config['steady_calls']} calls per shape "
        f"after {config['warmup']} warm-up calls",
        *(_per_shape(summary, systems, w, "steady_s", shapes[w]) for w in wids),
        f"### (d) the stream: {config['stream_calls']} calls in a cold process, total wall "
        "time (build and every compile included, imports not)",
        _per_workload(summary, systems, wids, "stream_total_s"),
        f"### (d) the stream in each system's fastest process of {config['repeats']}",
        _per_workload(summary, systems, wids, "stream_best_s"),
        "### (d) worst single call along the stream",
        _per_workload(summary, systems, wids, "stream_worst_s"),
    ]


def _resource_sections(summary: Summary, systems: list[str], wids: list[str]) -> list[str]:
    parts = [
        "### (e) peak RSS of the stream process",
        _per_workload(summary, systems, wids, "rss_mib", unit="mib"),
    ]
    workers = [
        f"{s} {w} {_get(summary, s, w, 'rss_children_mib'):.0f} MiB"
        for s in systems
        for w in wids
        if (_get(summary, s, w, "rss_children_mib") or 0) > 0
    ]
    if workers:
        parts.append(f"Largest child process (compile workers), not above: {', '.join(workers)}.")
    rows = [[s, *(_accuracy_cell(summary, s, w) for w in wids)] for s in systems]
    return [
        *parts,
        "### accuracy: max |y − ref| / max |ref| against float64 (ONNX files: against ONNX "
        "Runtime), worst shape",
        _table(["system", *wids], rows),
        "### import: NumPy, then the system's library, in a fresh interpreter with its bytecode "
        "caches (in neither (a) nor (d))",
        _per_workload(summary, systems, wids, "import_s"),
    ]


def _accuracy_cell(summary: Summary, system: str, wid: str) -> str:
    value = _get(summary, system, wid, "accuracy")
    return "—" if value is None else f"{value:.1e}"


def plot_stream(summary: Summary, wids: Sequence[str], systems: Sequence[str], path: Path) -> str:
    """Per-call latency along the stream, one panel per workload; what was done, or why not."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        return "plot skipped: matplotlib is not installed (pip install matplotlib)"
    fig, axes = plt.subplots(len(wids), 1, figsize=(11, 3.6 * len(wids)), squeeze=False)
    for ax, wid in zip(axes[:, 0], wids, strict=True):
        for name in systems:
            trace = _get(summary, name, wid, "stream_latencies_s")
            if trace:
                calls = range(1, len(trace) + 1)
                ax.plot(calls, [t * 1e3 for t in trace], label=name, linewidth=0.9)
        ax.set_yscale("log")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(f"{wid}: {description(wid)}", fontsize=9)
        ax.set_xlabel("call along the stream")
        ax.set_ylabel("latency (ms, log scale)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return f"plot written to {path}"
