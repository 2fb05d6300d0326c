"""Rounds: every server once per round, in an order rotated each round; samples kept by round, so that ratios
pair the values of one round (the shared machine's speed drifts between rounds, not within a pair)."""

from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")
Samples = Mapping[str, Mapping[str, Sequence[float]]]  # series -> metric -> one value per round (NaN: missed)


@dataclass
class Run:
    samples: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    errors: dict[str, dict[str, str]] = field(default_factory=dict)
    details: list[dict[str, Any]] = field(default_factory=list)

    def add(self, series: str, metric: str, value: float, round_index: int | None = None) -> None:
        values = self.samples.setdefault(series, {}).setdefault(metric, [])
        if round_index is not None:
            values.extend([math.nan] * (round_index - len(values)))  # a round it missed stays a gap
        values.append(value)

    def fail(self, series: str, what: str, reason: str) -> None:
        self.errors.setdefault(series, {}).setdefault(what, reason)
        print(f"  {series} {what}: NOT MEASURED: {reason[:300]}", flush=True)


def parser(key: str, description: str | None, servers: Sequence[str]) -> argparse.ArgumentParser:
    """The options every workload of `bench/run.py --workloads KEY` takes; add its own, then `defaults`."""
    found = argparse.ArgumentParser(prog=f"bench/run.py --workloads {key}", description=description,
                                    formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    found.add_argument("--workloads", default=key)
    found.add_argument("--quick", action="store_true", help="a smoke run: 1 round, 1 s windows")
    found.add_argument("--rounds", type=int, help="interleaved rounds")
    found.add_argument("--seconds", type=float, help="the timed window of each load run")
    found.add_argument("--warmup", type=float, help="load before each timed window")
    found.add_argument("--servers", default=",".join(servers), help="comma-separated subset of " + ",".join(servers))
    return found


def defaults(args: argparse.Namespace, rounds: int, seconds: float, warmup: float, quick_warmup: float) -> None:
    """What --rounds, --seconds and --warmup are when not given; --quick: 1 round of 1 s windows."""
    args.rounds = args.rounds or (1 if args.quick else rounds)
    args.seconds = args.seconds or (1.0 if args.quick else seconds)
    args.warmup = args.warmup if args.warmup is not None else (quick_warmup if args.quick else warmup)


def rotated(names: Sequence[T], round_index: int) -> list[T]:
    """The order of one round: rotated, so no server always runs right after the same neighbour."""
    shift = round_index % len(names) if names else 0
    return [*names[shift:], *names[:shift]]


def each_round(rounds: int, names: Sequence[T]) -> Iterator[tuple[int, list[T]]]:
    for round_index in range(rounds):
        order = rotated(names, round_index)
        print(f"round {round_index + 1}/{rounds}: {', '.join(map(str, order))}", flush=True)
        yield round_index, order


def median(values: Sequence[float]) -> float | None:
    present = [value for value in values if not math.isnan(value)]
    return statistics.median(present) if present else None


def medians(samples: Samples) -> dict[str, dict[str, float]]:
    found: dict[str, dict[str, float]] = {}
    for series, metrics in samples.items():
        for metric, values in metrics.items():
            value = median(values)
            if value is not None:
                found.setdefault(series, {})[metric] = value
    return found


def paired_ratio(ours: Sequence[float], theirs: Sequence[float]) -> float | None:
    """The median over rounds of ours / theirs, each ratio from one round."""
    ratios = [a / b for a, b in zip(ours, theirs, strict=False) if not math.isnan(a) and not math.isnan(b) and b > 0]
    return statistics.median(ratios) if ratios else None


def ratios(
    samples: Samples, pairs: Mapping[str, tuple[str, str]], metrics: Sequence[str]
) -> dict[str, dict[str, float | None]]:
    """For each label, (ours, theirs): every metric's paired ratio; a label one side lacks is left out."""
    found = {}
    for label, (ours, theirs) in pairs.items():
        if ours in samples and theirs in samples:
            found[label] = {
                metric: paired_ratio(samples[ours].get(metric, []), samples[theirs].get(metric, []))
                for metric in metrics
            }
    return found
