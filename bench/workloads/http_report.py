"""W1-W9's report: ratios (ours / each server), the issues' targets, a markdown table and a bar chart."""

from __future__ import annotations

import math
import operator
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.rounds import medians

from workloads.http_bodies import W9_KINDS, W9_ROWS

Samples = Mapping[str, Mapping[str, Sequence[float]]]  # server -> metric -> one value per round
Medians = dict[str, dict[str, float]]


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    lower_is_better: bool
    headline: bool = True


METRICS = (
    Metric("W1.cpu_ms_c1", "W1 small JSON: server CPU ms/request (c=1)", True),
    Metric("W1.rps_c16", "W1 small JSON: req/s (c=16)", False),
    Metric("W1.cpu_ms_c16", "W1 small JSON: server CPU ms/request (c=16)", True, headline=False),
    Metric("W1s.cpu_ms_c1", "W1s the same, sync model (worker thread): CPU ms/request (c=1)", True, headline=False),
    Metric("W1s.rps_c16", "W1s the same, sync model: req/s (c=16)", False, headline=False),
    Metric("W1s.cpu_ms_c16", "W1s the same, sync model: CPU ms/request (c=16)", True, headline=False),
    Metric("W2.mbps_c1", "W2 binary 4 MiB in/out: MB/s (c=1)", False),
    Metric("W2.mbps_c4", "W2 binary 4 MiB in/out: MB/s (c=4)", False),
    Metric("W2.cpu_ms_c1", "W2 binary 4 MiB: server CPU ms/request (c=1)", True, headline=False),
    Metric("W3.cpu_ms_c1", "W3 JSON [1,65536] in/out: server CPU ms/request", True),
    Metric("W3.rps_c1", "W3 JSON [1,65536]: req/s (c=1)", False, headline=False),
    Metric("W4.rss_over_payload", "W4 64 MiB binary: (peak RSS - idle) / payload", True),
    Metric("W5.ready_s", "W5 start to /v2/health/ready 200 (s)", True),
    Metric("W5.model_ready_s", "W5 start to model ready 200 (s)", True, headline=False),
    Metric("W5.import_s", "W5 import time (s)", True),
    Metric("W6.cpu_ms_c1", "W6 classification top-5 of [64,1000]: server CPU ms/request", True),
    Metric("W6.rps_c1", "W6 classification: req/s (c=1)", False, headline=False),
    Metric("W7.cpu_ms_c1", "W7 BYTES 1000 x ~100 B binary: server CPU ms/request", True),
    Metric("W7.rps_c1", "W7 BYTES: req/s (c=1)", False, headline=False),
    Metric("W8.rps_c64", "W8 MLP [1,64] JSON, batched: req/s (c=64)", False),
    Metric("W8.p50_ms_c64", "W8 batched: p50 latency ms (c=64)", True, headline=False),
    Metric("W8.p99_ms_c64", "W8 batched: p99 latency ms (c=64)", True),
    Metric("W8.cpu_ms_c64", "W8 batched: server CPU ms/request (c=64)", True, headline=False),
    Metric("W8u.rps_c64", "W8u ours unbatched: req/s (c=64)", False, headline=False),
    Metric("W8u.p50_ms_c64", "W8u ours unbatched: p50 latency ms (c=64)", True, headline=False),
    Metric("W8u.p99_ms_c64", "W8u ours unbatched: p99 latency ms (c=64)", True, headline=False),
    Metric("W8u.cpu_ms_c64", "W8u ours unbatched: server CPU ms/request (c=64)", True, headline=False),
    Metric("W8.batch_call_ms", "W8 one MLP call on 32 rows, in-process (ms)", True, headline=False),
)


def _w9_metrics() -> tuple[Metric, ...]:
    found = []
    for letter, (kind, *_) in W9_KINDS.items():
        for rows in W9_ROWS:
            key, what = f"W9{letter}{rows}", f"W9 {kind} [{rows},100]"
            found += [
                Metric(f"{key}.rps_c1", f"{what}: req/s (c=1)", False, headline=False),
                Metric(f"{key}.rps_c16", f"{what}: req/s (c=16)", False),
                Metric(f"{key}.cpu_ms_c1", f"{what}: server CPU ms/request (c=1)", True, headline=False),
                Metric(f"{key}.cpu_ms_c16", f"{what}: server CPU ms/request (c=16)", True, headline=False),
            ]
        found.append(
            Metric(
                f"W9{letter}1.call_ms", f"W9 {kind}: one library call on [1,100], in-process (ms)", True, headline=False
            )
        )
    return tuple(found)


METRICS += _w9_metrics()
PEERS = ("mlserver", "kserve", "pytriton")
W9_OVERHEAD_US = 60
MAX_BATCH_DELAY_MS = 2.0  # ours' in W8 (apps/ours_app.py)


def paired(
    samples: Samples,
    metric: str,
    others: Sequence[str],
    combine: Callable[[float, float], float],
    best: Callable[[Sequence[float]], float] = min,
) -> float | None:
    """The median over rounds of `combine(ours, best other)`, pairing values from the same round.

    Servers take turns within a round, minutes apart, while the shared machine's speed drifts by up
    to 1.5x over a run: pairing by round cancels that drift, where a ratio of medians would take
    each side's median from different rounds. When some round lacks a value (a failed run), the
    medians are combined instead. Among several others the `best` value counts: the lowest (W3's
    CPU) by default, the highest for a rate (W8's req/s).
    """
    ours = samples.get("ours", {}).get(metric)
    theirs = [samples[other][metric] for other in others if samples.get(other, {}).get(metric)]
    if not ours or not theirs:
        return None
    if all(len(values) == len(ours) for values in theirs):
        return statistics.median(combine(mine, best(other)) for mine, *other in zip(ours, *theirs, strict=True))
    return combine(statistics.median(ours), best([statistics.median(values) for values in theirs]))


def within_ours(
    samples: Samples, metric: str, other_metric: str, combine: Callable[[float, float], float]
) -> float | None:
    """The median over rounds of `combine(metric, other_metric)`, both ours and from the same round."""
    ours = samples.get("ours", {})
    return paired(
        {"ours": {metric: ours.get(metric) or []}, "x": {metric: ours.get(other_metric) or []}}, metric, ["x"], combine
    )


def _minus(samples: Samples, metric: str, other_metric: str) -> list[float]:
    """Ours' `metric` minus its `other_metric`, round by round (the rounds that have both)."""
    ours = samples.get("ours", {})
    return [a - b for a, b in zip(ours.get(metric) or [], ours.get(other_metric) or [], strict=False)]


def ratio(samples: Samples, metric: str, other: str) -> float | None:
    """ours / other for `metric`, paired by round."""
    return paired(samples, metric, [other], operator.truediv)


@dataclass(frozen=True)
class Target:
    text: str
    measured: str
    met: bool | None


def _fmt(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "-"
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    return f"{value:.{digits}g}"


def targets(samples: Samples, classification_source: str | None) -> list[Target]:
    found: list[Target] = []

    def check(
        text: str, value: float | None, limit: float, at_most: bool, unit: str = "x", strict: bool = False
    ) -> None:
        if value is None:
            met = None
        elif at_most:
            met = value < limit if strict else value <= limit
        else:
            met = value > limit if strict else value >= limit
        found.append(Target(text, "-" if value is None else f"{_fmt(value)}{unit}", met))

    check("W1 CPU/request <= 1.5x floor", ratio(samples, "W1.cpu_ms_c1", "floor"), 1.5, True)
    check("W1 CPU/request <= 1/3 of MLServer", ratio(samples, "W1.cpu_ms_c1", "mlserver"), 1 / 3, True)
    check("W1 req/s at c=16 >= 0.7x floor", ratio(samples, "W1.rps_c16", "floor"), 0.7, False)
    for c in (1, 4):
        check(f"W2 MB/s at c={c} >= 0.9x echo floor", ratio(samples, f"W2.mbps_c{c}", "floor"), 0.9, False)
        check(f"W2 MB/s at c={c} > PyTriton", ratio(samples, f"W2.mbps_c{c}", "pytriton"), 1.0, False, strict=True)
    best_peer = paired(samples, "W3.cpu_ms_c1", PEERS, operator.truediv)
    check("W3 CPU/request <= 1/2 of the best peer's", best_peer, 0.5, True)
    rss = statistics.median(samples.get("ours", {}).get("W4.rss_over_payload") or [math.nan])
    check("W4 (peak RSS - idle) / payload <= 1.5", None if math.isnan(rss) else rss, 1.5, True, "")
    check("W5 start to ready <= 1.3x floor", ratio(samples, "W5.ready_s", "floor"), 1.3, True)
    extra_s = paired(samples, "W5.import_s", ["floor"], operator.sub)
    extra_ms = None if extra_s is None else extra_s * 1000
    check("W5 `import oip_asgi` <= 50 ms over starlette+numpy+msgspec", extra_ms, 50, True, " ms")
    # Issue 40: ours as the serve command serves it; `mounted` under a host's own middleware.
    for c in (1, 16):
        check(f"W1 CPU/request at c={c} <= 1.25x floor", ratio(samples, f"W1.cpu_ms_c{c}", "floor"), 1.25, True)
    check("W1 req/s at c=16 >= 0.75x floor", ratio(samples, "W1.rps_c16", "floor"), 0.75, False)
    mounted = {"ours": samples.get("mounted", {}), "floor": samples.get("floor", {})}
    check("W1 mounted with middleware: CPU/request <= 1.4x floor", ratio(mounted, "W1.cpu_ms_c1", "floor"), 1.4, True)
    check("W1s CPU/request <= 1.5x floor", ratio(samples, "W1s.cpu_ms_c1", "floor"), 1.5, True)
    for c, limit in ((1, 2.0), (4, 1.0)):
        check(f"W2 MB/s at c={c} >= {limit:g}x floor", ratio(samples, f"W2.mbps_c{c}", "floor"), limit, False)
    # Issue 13: sync models through the worker threads (W1s), adaptive batching (W8).
    check("W1 CPU/request at c=16 <= 1.5x floor", ratio(samples, "W1.cpu_ms_c16", "floor"), 1.5, True)
    for c in (1, 16):
        check(f"W1s CPU/request at c={c} <= 1.8x floor", ratio(samples, f"W1s.cpu_ms_c{c}", "floor"), 1.8, True)
    check("W1s req/s at c=16 >= 0.6x floor", ratio(samples, "W1s.rps_c16", "floor"), 0.6, False)
    batched = within_ours(samples, "W8.rps_c64", "W8u.rps_c64", operator.truediv)
    check("W8 batched req/s >= 3x ours unbatched (W8u)", batched, 3, False)
    best_rate = paired(samples, "W8.rps_c64", PEERS, operator.truediv, best=max)
    check("W8 batched req/s >= 1.2x the best peer's", best_rate, 1.2, False)
    bound = within_ours(
        samples, "W8.p99_ms_c64", "W8.batch_call_ms", lambda p99, call: p99 / (MAX_BATCH_DELAY_MS + 2 * call)
    )
    check("W8 p99 / (max_batch_delay + 2 x one 32-row call) <= 1", bound, 1, True)
    # Issue 20's W9: model files against the peer that serves each kind (MLServer's runtimes; PyTriton for ONNX).
    for letter, (kind, _, _, _, servers) in W9_KINDS.items():
        peer = servers[-1]
        for rows in W9_ROWS:
            key, what = f"W9{letter}{rows}", f"W9 {kind} [{rows},100]"
            check(f"{what} req/s at c=16 >= 2x {peer}", ratio(samples, f"{key}.rps_c16", peer), 2, False)
            for c in (1, 16):
                check(
                    f"{what} CPU/request at c={c} <= 0.5x {peer}", ratio(samples, f"{key}.cpu_ms_c{c}", peer), 0.5, True
                )
        overhead_ms = within_ours(samples, f"W9{letter}1.cpu_ms_c1", f"W9{letter}1.call_ms", operator.sub)
        overhead_us = None if overhead_ms is None else overhead_ms * 1000
        check(
            f"W9 {kind} [1,100] CPU/request at c=1 - library call <= {W9_OVERHEAD_US} us",
            overhead_us,
            W9_OVERHEAD_US,
            True,
            " us",
        )
    # Issue 31: the batching tail, and a model file's request against a whole W1s request.
    check("W8 p99 <= PyTriton's", ratio(samples, "W8.p99_ms_c64", "pytriton"), 1, True)
    check("W8 req/s >= 2.5x PyTriton's", ratio(samples, "W8.rps_c64", "pytriton"), 2.5, False)
    check("W8 p50 <= base's (ours before)", ratio(samples, "W8.p50_ms_c64", "base"), 1, True)
    for letter, (kind, *_) in W9_KINDS.items():
        for c in (1, 16):
            # The path around the call (its request's CPU minus the call's), over a whole W1s request, by round.
            around = _minus(samples, f"W9{letter}1.cpu_ms_c{c}", f"W9{letter}1.call_ms")
            w1s = samples.get("ours", {}).get(f"W1s.cpu_ms_c{c}") or []
            per_w1s = paired({"ours": {"x": around}, "w1s": {"x": w1s}}, "x", ["w1s"], operator.truediv)
            check(f"W9 {kind} [1,100] (CPU/request - library call) at c={c} <= W1s CPU/request", per_w1s, 1, True)
    if classification_source is not None:
        # A static look at the core: partial selection (np.partition / np.argpartition) must be there.
        partial = "partition(" in classification_source
        detail = "partial selection (partition) in oip_asgi/_classification.py" if partial else "no partition call"
        found.append(Target("W6 top-k by partial selection, no full sort of the class axis", detail, partial))
    return found


def markdown(
    samples: Samples,
    servers: Sequence[str],
    rounds: int,
    goals: Sequence[Target],
    errors: Mapping[str, Mapping[str, str]],
) -> str:
    values = medians(samples)
    others = [s for s in servers if s != "ours"]
    head = ["metric", "better", *servers, *[f"ours/{s}" for s in others]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for metric in METRICS:
        row = [metric.label, "lower" if metric.lower_is_better else "higher"]
        for server in servers:
            value = values.get(server, {}).get(metric.key)
            row.append(
                _fmt(value) if value is not None else ("error" if _error_for(errors, server, metric.key) else "-")
            )
        ratios = [ratio(samples, metric.key, other) for other in others]
        row.extend(_fmt(value) + ("x" if value else "") for value in ratios)
        lines.append("| " + " | ".join(row) + " |")
    out = [
        f"Medians of {rounds} interleaved round(s); ratios are ours / that server: the median of the"
        " rounds' ratios, each from values measured in the same round.",
        "",
        *lines,
        "",
    ]
    out += ["| target (issues 4 and 13) | measured | met |", "|---|---|---|"]
    out += [f"| {t.text} | {t.measured} | {'n/a' if t.met is None else ('yes' if t.met else 'NO')} |" for t in goals]
    if any(errors.values()):
        out += ["", "| server | workload | not measured because |", "|---|---|---|"]
        for server in servers:
            for workload, reason in sorted(errors.get(server, {}).items()):
                out.append(f"| {server} | {workload} | {reason.replace('|', '/')[:300]} |")
    return "\n".join(out) + "\n"


def _error_for(errors: Mapping[str, Mapping[str, str]], server: str, metric: str) -> bool:
    workload = metric.split(".")[0]
    return any(key == workload or key == "server" for key in errors.get(server, {}))


def chart(values: Medians, servers: Sequence[str], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [m for m in METRICS if m.headline]
    columns = 4
    rows = -(-len(shown) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.3 * rows))
    colors = {"floor": "#9e9e9e", "ours": "#1f77b4", "mlserver": "#ff7f0e", "kserve": "#2ca02c", "pytriton": "#d62728"}
    for axis, metric in zip(axes.ravel(), shown, strict=False):
        heights = [values.get(s, {}).get(metric.key, 0.0) for s in servers]
        bars = axis.bar(servers, heights, color=[colors.get(s, "#555555") for s in servers])
        for bar, server, height in zip(bars, servers, heights, strict=False):
            middle = bar.get_x() + bar.get_width() / 2
            if metric.key in values.get(server, {}):
                axis.annotate(_fmt(height), (middle, height), ha="center", va="bottom", fontsize=8)
            else:
                axis.text(middle, 0.02, "n/a", transform=axis.get_xaxis_transform(), ha="center", fontsize=8)
        axis.set_title(metric.label + (" ↓" if metric.lower_is_better else " ↑"), fontsize=8.5, wrap=True)
        present = [h for h in heights if h > 0]
        if present and max(present) / min(present) > 30:
            axis.set_yscale("log")  # peers differ by orders of magnitude here; the labels carry the values
        axis.tick_params(axis="x", labelsize=8, rotation=20)
        axis.tick_params(axis="y", labelsize=7)
        axis.margins(y=0.25)
    for axis in axes.ravel()[len(shown) :]:
        axis.axis("off")
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
