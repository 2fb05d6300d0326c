"""Prometheus metrics under Triton's names, read from the statistics at scrape time.

One collector per app reads the same counters the statistics extension serves, so a request costs
nothing more for being measured twice. Triton's names have no ``_total`` suffix, which
prometheus_client adds to every counter family it exposes; the samples here keep Triton's exact
names (existing dashboards query those), in families of type ``unknown``, which PromQL's ``rate()``
and ``increase()`` take as they take counters.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import REGISTRY, CollectorRegistry, Metric

from .serving import ServedModel
from .statistics import ModelStatistics

# name, help, value of a model's statistics (durations in microseconds, as Triton's metrics are).
_METRICS: list[tuple[str, str, Callable[[ModelStatistics], float]]] = [
    (
        "nv_inference_request_success",
        "Number of successful inference requests, all batch sizes",
        lambda stats: stats.success.count,
    ),
    ("nv_inference_count", "Number of inferences performed (does not include cached requests)",
     lambda stats: stats.inference_count),
    ("nv_inference_exec_count", "Number of model executions performed (does not include cached requests)",
     lambda stats: stats.execution_count),
    (
        "nv_inference_request_duration_us",
        "Cumulative inference request duration in microseconds (includes cached requests)",
        # Successful requests only, as Triton counts it: dashboards divide it by nv_inference_request_success.
        lambda stats: stats.success.ns / 1000,
    ),
    ("nv_inference_queue_duration_us", "Cumulative inference queuing duration in microseconds",
     lambda stats: stats.queue.ns / 1000),
    ("nv_inference_compute_input_duration_us", "Cumulative compute input duration in microseconds",
     lambda stats: stats.compute_input.ns / 1000),
    ("nv_inference_compute_infer_duration_us", "Cumulative compute inference duration in microseconds",
     lambda stats: stats.compute_infer.ns / 1000),
    ("nv_inference_compute_output_duration_us", "Cumulative inference compute output duration in microseconds",
     lambda stats: stats.compute_output.ns / 1000),
]  # fmt: skip


class TritonCollector:
    """The Triton-named metrics of `models`, as a prometheus_client collector."""

    def __init__(self, models: Callable[[], Iterable[ServedModel]]) -> None:
        self._models = models

    def collect(self) -> Iterator[Metric]:
        models = list(self._models())
        for name, documentation, value in _METRICS:
            metric = Metric(name, documentation, "unknown")
            for model in models:
                metric.add_sample(name, {"model": model.name, "version": model.version}, value(model.statistics))
            yield metric
        failure = Metric(
            "nv_inference_request_failure", "Number of failed inference requests, all batch sizes", "unknown"
        )
        for model in models:
            for reason, count in model.statistics.failures.items():
                labels = {"model": model.name, "reason": reason, "version": model.version}
                failure.add_sample("nv_inference_request_failure", labels, count)
        yield failure


def register(models: Callable[[], Iterable[ServedModel]], registry: bool | CollectorRegistry) -> TritonCollector:
    """Register the collector in `registry` (prometheus_client's default one when it is True)."""
    if registry is True:
        registry = REGISTRY
    if not isinstance(registry, CollectorRegistry):
        raise TypeError(f"metrics must be True or a prometheus_client CollectorRegistry, got {registry!r}")
    collector = TritonCollector(models)
    registry.register(collector)
    return collector
