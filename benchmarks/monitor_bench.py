"""What the monitor costs a monitored program, measured on W1 in fresh processes.

Run with ``python benchmarks/monitor_bench.py [--processes 6]``; prints medians over the
processes and ratios to the runs without the monitor, measured in the same run
(``docs/monitor.md`` has a run). Two measures:

- **the stream**: BENCHMARKS.md's 200-call stream of W1 in a cold process (``shapevm.jit``
  with default options, an empty kernel cache), with the monitor off or started with no
  page open; processes of the two kinds alternate;
- **steady state**: in each of those processes, once every variant is compiled, blocks of
  200 calls at b=8 with the monitor off, started with no page open (``idle``), and with a
  page watching (``watched``: an event-stream client in another process), in rotation for
  five rounds; the median call of each state.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

STATES = ("off", "idle", "watched")
WATCHER = (
    "import sys, urllib.request\n"
    "with urllib.request.urlopen(sys.argv[1] + 'api/events') as r:\n"
    "    for line in r:\n"
    "        if line.startswith(b'data: '): print('event', flush=True)\n"
)


def _watch(url: str) -> subprocess.Popen[str]:
    watcher = subprocess.Popen(
        [sys.executable, "-c", WATCHER, url], stdout=subprocess.PIPE, text=True
    )
    assert watcher.stdout is not None
    watcher.stdout.readline()  # the page is connected
    return watcher


def _block(f: Any, x: Any, n: int = 200) -> list[float]:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        f(x)
        times.append(time.perf_counter() - t)
    return times


def child(monitor_on: bool) -> dict[str, float]:
    import shapevm as sv
    import shapevm.vm as vm
    from shapevm.models import traced
    from shapevm.models import workloads as wl

    weights = wl.make_weights("W1")
    inputs = {s: wl.make_input("W1", s, seed=0) for s in wl.get_workload("W1").shapes}
    if monitor_on:
        vm.start_monitor()
    t0 = time.perf_counter()
    f = sv.jit(traced.workload_fn("W1", weights), shapes=wl.get_workload("W1").spec)
    for shape in wl.stream_shapes("W1"):
        f(inputs[shape])
    out = {"stream_ms": (time.perf_counter() - t0) * 1e3}
    vm.stop_monitor()
    f.wait(120)
    x = inputs[(8, 256)]
    _block(f, x, 100)
    times: dict[str, list[float]] = {s: [] for s in STATES}
    for _ in range(5):
        times["off"] += _block(f, x)
        url = vm.start_monitor()
        times["idle"] += _block(f, x)
        watcher = _watch(url)
        times["watched"] += _block(f, x)
        watcher.kill()
        watcher.wait()
        vm.stop_monitor()
    for s in STATES:
        out[f"{s}_us"] = statistics.median(times[s]) * 1e6
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=6, help="processes (half of each kind)")
    parser.add_argument("--child", choices=("off", "on"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child == "on")))
        return 0
    env = {**os.environ, "OMP_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2"}
    env.pop("SHAPEVM_MONITOR", None)
    runs: list[tuple[str, dict[str, float]]] = []
    for i in range(args.processes):
        kind = ("off", "on")[i % 2]
        with tempfile.TemporaryDirectory() as cache:
            done = subprocess.run(
                [sys.executable, __file__, "--child", kind],
                env={**env, "SHAPEVM_CACHE_DIR": cache},
                capture_output=True,
                text=True,
                check=True,
            )
        runs.append((kind, json.loads(done.stdout)))
    streams = {
        k: statistics.median(r["stream_ms"] for kk, r in runs if kk == k) for k in ("off", "on")
    }
    print(f"W1, {args.processes} fresh processes (medians over processes)")
    print(
        f"200-call stream, cold: monitor off {streams['off']:.1f} ms, started with no page "
        f"{streams['on']:.1f} ms ({streams['on'] / streams['off']:.3f}x)"
    )
    steady = {s: statistics.median(r[f"{s}_us"] for _, r in runs) for s in STATES}
    for s in STATES:
        ratio = steady[s] / steady["off"]
        print(f"steady b=8, monitor {s:<8} {steady[s]:8.1f} us per call ({ratio:.3f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
