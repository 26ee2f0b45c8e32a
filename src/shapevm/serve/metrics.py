"""The server's Prometheus metrics, served at ``/metrics`` in the text exposition format.

Each server has its own registry (nothing process-global), so two servers in one process,
or a test, see only their own counts. Metric names:

- ``shapevm_inference_requests_total{model}``: inference requests addressed to a model;
- ``shapevm_inference_failures_total{model,reason}``: those not answered 200, by reason
  (``bad_request``, ``overloaded``, ``error``, ``disconnected``); ``model`` is empty for
  requests that named no served model, and for bodies that could not be read;
- ``shapevm_inference_request_duration_seconds{model}``: latency histogram, from the
  request's arrival to its response (200 only);
- ``shapevm_inference_queue_duration_seconds{model}``: time spent waiting for the worker;
- ``shapevm_batch_requests{model}`` and ``shapevm_batch_rows{model}``: histograms of the
  requests and rows of each model call (1 request per call without batching);
- ``shapevm_batch_fallbacks_total{model,reason}``: joined calls whose result was not used
  (they ran off the checked path, or failed) and whose requests ran alone;
- ``shapevm_queue_depth{model}``: requests waiting now;
- ``shapevm_jit_calls_total``, ``shapevm_jit_compiled_calls_total``, ``shapevm_jit_hit_rate``,
  ``shapevm_jit_compiles_total``, ``shapevm_jit_compile_seconds_total``: the JIT's counters
  in this process (`shapevm.vm.jit_stats`).

>>> m = ServerMetrics()
>>> m.requests.labels("mlp").inc()
>>> print([line for line in m.render().decode().splitlines() if line.startswith("shapevm_inf")][0])
shapevm_inference_requests_total{model="mlp"} 1.0
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_LATENCY_BUCKETS = (
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0,
)  # fmt: skip
_SIZE_BUCKETS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024)


@dataclass(frozen=True)
class ModelMetrics:
    """One model's children of the metrics that every request touches."""

    requests: Counter
    latency: Histogram
    queue_time: Histogram
    batch_requests: Histogram
    batch_rows: Histogram


class ServerMetrics:
    """The metrics of one server (see the module docstring)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "shapevm_inference_requests", "Inference requests per model", ["model"], registry=r
        )
        self.failures = Counter(
            "shapevm_inference_failures",
            "Inference requests not answered 200, by reason",
            ["model", "reason"],
            registry=r,
        )
        self.latency = Histogram(
            "shapevm_inference_request_duration_seconds",
            "Latency of successful inference requests, arrival to response",
            ["model"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.queue_time = Histogram(
            "shapevm_inference_queue_duration_seconds",
            "Time requests wait for the model's worker",
            ["model"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.batch_requests = Histogram(
            "shapevm_batch_requests",
            "Requests per model call",
            ["model"],
            buckets=_SIZE_BUCKETS,
            registry=r,
        )
        self.batch_rows = Histogram(
            "shapevm_batch_rows",
            "Rows (batch dimension) per model call",
            ["model"],
            buckets=_SIZE_BUCKETS,
            registry=r,
        )
        self.fallbacks = Counter(
            "shapevm_batch_fallbacks",
            "Joined calls whose result was not used; their requests ran alone",
            ["model", "reason"],
            registry=r,
        )
        self._models: dict[str, ModelMetrics] = {}

    def model(self, name: str) -> ModelMetrics:
        """The per-model series of the hot path, looked up once per model."""
        found = self._models.get(name)
        if found is None:
            found = self._models[name] = ModelMetrics(
                self.requests.labels(name),
                self.latency.labels(name),
                self.queue_time.labels(name),
                self.batch_requests.labels(name),
                self.batch_rows.labels(name),
            )
        return found

    def watch(self, depths: Callable[[], Mapping[str, int]]) -> None:
        """Report queue depths (``{model: depth}``) and the JIT's counters at each scrape."""
        self.registry.register(_Live(depths))

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _Live(Collector):
    """Values read when scraped rather than counted as they happen."""

    def __init__(self, depths: Callable[[], Mapping[str, int]]) -> None:
        self.depths = depths

    def collect(self) -> Iterator[Metric]:
        import shapevm.vm as vm

        depth = GaugeMetricFamily(
            "shapevm_queue_depth", "Requests waiting for the model's worker", labels=["model"]
        )
        for name, n in self.depths().items():
            depth.add_metric([name], n)
        yield depth
        stats = vm.jit_stats()
        yield CounterMetricFamily(
            "shapevm_jit_calls", "Calls of jitted functions in this process", stats["calls"]
        )
        yield CounterMetricFamily(
            "shapevm_jit_compiled_calls",
            "Calls served by compiled variants",
            stats["compiled_calls"],
        )
        yield GaugeMetricFamily(
            "shapevm_jit_hit_rate", "Compiled calls / all calls of jitted functions",
            vm.get_jit_hit_rate(),
        )  # fmt: skip
        yield CounterMetricFamily("shapevm_jit_compiles", "Successful compiles", stats["compiles"])
        yield CounterMetricFamily(
            "shapevm_jit_compile_seconds", "Time spent compiling", stats["compile_ms"] / 1e3
        )
