"""``pb_utils.MetricFamily`` and its ``Metric``s: a model's own metrics, on its server's Prometheus /metrics."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from .errors import TritonModelException
from .host import MetricSeries, current


class Metric:
    """One labelled series of a `MetricFamily`, on the server's /metrics as the model named it."""

    def __init__(self, series: MetricSeries, kind: str) -> None:
        self._series = series
        self._kind = kind

    def increment(self, value: float) -> None:
        if self._kind == MetricFamily.HISTOGRAM:
            raise TritonModelException("a histogram metric takes observe(), not increment()")
        if self._kind == MetricFamily.COUNTER and value < 0:
            raise TritonModelException(f"a counter cannot be incremented by a negative value ({value})")
        self._series.increment(value)

    def set(self, value: float) -> None:
        if self._kind != MetricFamily.GAUGE:
            raise TritonModelException(f"only a gauge can be set, this metric is a {self._kind.lower()}")
        self._series.set(value)

    def observe(self, value: float) -> None:
        if self._kind != MetricFamily.HISTOGRAM:
            raise TritonModelException(f"only a histogram observes values, this metric is a {self._kind.lower()}")
        self._series.observe(value)

    def value(self) -> float:
        if self._kind == MetricFamily.HISTOGRAM:
            raise TritonModelException("a histogram metric has no single value")
        return self._series.value()


class MetricFamily:
    """A custom metric family (``MetricFamily(name, description, kind)``) on the serving server's /metrics."""

    COUNTER: ClassVar[str] = "COUNTER"
    GAUGE: ClassVar[str] = "GAUGE"
    HISTOGRAM: ClassVar[str] = "HISTOGRAM"

    def __init__(self, name: str, description: str, kind: str) -> None:
        if kind not in (self.COUNTER, self.GAUGE, self.HISTOGRAM):
            raise TritonModelException(f"unknown metric kind {kind!r}: use MetricFamily.COUNTER, GAUGE or HISTOGRAM")
        self._kind = kind
        self._family = current("pb_utils.MetricFamily").metric_family(name, description, kind)

    def Metric(self, labels: Mapping[str, str] | None = None, buckets: Sequence[float] | None = None) -> Metric:
        if self._kind == self.HISTOGRAM and not buckets:
            raise TritonModelException("a histogram metric needs its buckets")
        if self._kind != self.HISTOGRAM and buckets:
            raise TritonModelException("only a histogram metric takes buckets")
        return Metric(self._family.series(dict(labels or {}), list(buckets or [])), self._kind)
