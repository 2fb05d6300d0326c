"""A Triton Python model's own metrics (``pb_utils.MetricFamily``), on the server's Prometheus registry.

Names and labels are exposed exactly as the model wrote them, with their types, as Triton exposes
them: a counter family keeps its name (prometheus_client would write it as ``<name>_total``).
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterator

from prometheus_client.core import CollectorRegistry, Metric

_TYPES = {"COUNTER": "counter", "GAUGE": "gauge", "HISTOGRAM": "histogram"}


class _Written(str):
    """A family type prometheus_client's text exposition writes as it is.

    It writes a ``counter`` family's HELP and TYPE lines as ``<name>_total``; Triton writes the name the
    model gave (its clients and dashboards, and Triton's custom_metrics example, look for exactly that).
    So the type compares unequal to ``"counter"`` there, and still reads ``counter``.
    """

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return other != "counter" and str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = str.__hash__


class Series:
    """One labelled series: a value, or a histogram's buckets, sum and count."""

    def __init__(self, buckets: list[float]) -> None:
        self._lock = threading.Lock()
        self._value = 0.0
        self.buckets = sorted(buckets)
        self.counts = [0] * (len(self.buckets) + 1)  # the last: above every bound (+Inf)
        self.count = 0

    def increment(self, value: float) -> None:
        with self._lock:
            self._value += value

    def set(self, value: float) -> None:
        with self._lock:
            self._value = value

    def observe(self, value: float) -> None:
        with self._lock:
            self.counts[bisect.bisect_left(self.buckets, value)] += 1
            self.count += 1
            self._value += value

    def value(self) -> float:
        return self._value


class Family:
    def __init__(self, name: str, description: str, kind: str) -> None:
        self.name, self.description, self.kind = name, description, kind
        self.series: dict[tuple[tuple[str, str], ...], Series] = {}
        self._lock = threading.Lock()

    def series_of(self, labels: dict[str, str], buckets: list[float]) -> Series:
        key = tuple(sorted((str(key), str(value)) for key, value in labels.items()))
        with self._lock:
            found = self.series.get(key)
            if found is None:
                found = self.series[key] = Series(buckets)
            return found

    def metric(self) -> Metric:
        metric = Metric(self.name, self.description, _TYPES[self.kind])
        if self.kind == "COUNTER":
            metric.type = _Written("counter")
        for key, series in list(self.series.items()):
            labels = dict(key)
            if self.kind != "HISTOGRAM":
                metric.add_sample(self.name, labels, series.value())
                continue
            total = 0
            for bound, count in zip([*series.buckets, float("inf")], series.counts, strict=True):
                total += count
                le = "+Inf" if bound == float("inf") else repr(float(bound))
                metric.add_sample(f"{self.name}_bucket", {**labels, "le": le}, total)
            metric.add_sample(f"{self.name}_count", labels, series.count)
            metric.add_sample(f"{self.name}_sum", labels, series.value())
        return metric


class _FamilyHandle:
    """What `pb_utils.MetricFamily` holds: `series(labels, buckets)`."""

    def __init__(self, family: Family) -> None:
        self._family = family

    def series(self, labels: dict[str, str], buckets: list[float]) -> Series:
        return self._family.series_of(labels, buckets)


class CustomFamilies:
    """The models' metric families of one server, collected from its registry (if it has one)."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        self._families: dict[str, Family] = {}
        self._lock = threading.Lock()
        if registry is not None:
            registry.register(self)

    def family(self, name: str, description: str, kind: str) -> _FamilyHandle:
        with self._lock:
            found = self._families.get(name)
            if found is None:
                found = self._families[name] = Family(name, description, kind)
            elif found.kind != kind:
                raise ValueError(f"metric family {name!r} exists already as a {found.kind.lower()}")
        return _FamilyHandle(found)

    def collect(self) -> Iterator[Metric]:
        for family in list(self._families.values()):
            yield family.metric()
