"""Where a request's time goes inside ours: a bench-only probe, and what it found.

The probe is installed by `apps/ours_app.py --stages FILE` and by nothing else, so it costs nothing
when off: it wraps, in that one process, the statistics' per-request record (each request's stages,
as the core times them), the batcher's closing of a batch (its size, and how late its timer fired),
and adds a loop-lag probe (a callback asking to run every millisecond, and how late it ran) and
`gc.callbacks` (each collection's generation and pause). At exit it writes everything to FILE as
JSON; `python bench/stages.py FILE` then prints the distribution of each stage, for all requests
and for the slowest 1%, and what the tail requests overlapped (a GC pause, a stalled loop).

    bench/.peers/ours/bin/python bench/apps/ours_app.py --port 8000 --mlp-weights mlp.npz --stages /tmp/w8.json &
    wrk -t1 -c64 -d10s -s bench/post.lua http://127.0.0.1:8000/v2/models/mlp/infer -- w8.json
    kill -INT %1; python bench/stages.py /tmp/w8.json
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import gc
import json
import statistics
import time
from pathlib import Path
from typing import Any

LAG_PERIOD = 0.001  # the loop-lag probe asks to run this often


def install(path: Path) -> None:
    """Record every request's stages, batch, GC pause and loop stall in this process; write them at exit."""
    from oip_asgi._core import batching
    from oip_asgi._core import statistics as core_statistics

    requests: list[tuple[int, ...]] = []
    batches: list[tuple[int, int, int, int]] = []  # closed at, members, rows, timer lateness (ns; -1: closed full)
    collections: list[tuple[int, int, int]] = []  # started, pause (ns), generation
    lags: list[tuple[int, int]] = []  # when, how late (ns)
    now = time.perf_counter_ns

    succeeded = core_statistics.ModelStatistics.succeeded

    def record_request(self: Any, times: Any, end: int) -> None:
        stages = (times.start, times.decoded, times.submitted, times.started, times.ended, times.output, end)
        requests.append((*stages, times.batch_size))
        succeeded(self, times, end)

    run = batching.Batcher._run

    def record_batch(self: Any, batch: Any) -> None:
        loop = asyncio.get_running_loop()
        timer = batch.timer
        late = -1
        if timer is not None and not timer.cancelled() and batch.rows < self.max_batch_size:
            late = int((loop.time() - timer.when()) * 1e9)
        batches.append((now(), len(batch.members), batch.rows, late))
        run(self, batch)

    batching.Batcher._run = record_batch  # type: ignore[method-assign]

    gc_started = [0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            gc_started[0] = now()
        else:
            collections.append((gc_started[0], now() - gc_started[0], info["generation"]))

    gc.callbacks.append(on_gc)

    def lag_probe(expected: float) -> None:
        loop = asyncio.get_running_loop()
        actual = loop.time()
        lags.append((now(), int((actual - expected) * 1e9)))
        loop.call_at(actual + LAG_PERIOD, lag_probe, actual + LAG_PERIOD)

    started = [False]

    def start_lag_probe() -> None:
        if not started[0]:
            started[0] = True
            loop = asyncio.get_running_loop()
            loop.call_at(loop.time() + LAG_PERIOD, lag_probe, loop.time() + LAG_PERIOD)

    # The loop exists only once uvicorn runs: start the probe on the first recorded request.
    def record_request_and_start(self: Any, times: Any, end: int) -> None:
        start_lag_probe()
        record_request(self, times, end)

    core_statistics.ModelStatistics.succeeded = record_request_and_start  # type: ignore[method-assign]

    def write() -> None:
        document = {"requests": requests, "batches": batches, "collections": collections, "lags": lags}
        path.write_text(json.dumps(document))

    atexit.register(write)


def _quantiles(values: list[float]) -> str:
    if not values:
        return "none"
    ordered = sorted(values)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    mean = statistics.fmean(ordered)
    return f"p50 {at(0.5):8.3f}  p90 {at(0.9):8.3f}  p99 {at(0.99):8.3f}  max {ordered[-1]:8.3f}  mean {mean:8.3f}"


def summarize(path: Path, skip: float) -> str:
    """Each stage's distribution (ms) for every request and for the slowest 1%, after `skip` s of warm-up."""
    document = json.loads(path.read_text())
    requests = document["requests"]
    first = requests[0][0] if requests else 0
    requests = [r for r in requests if r[0] >= first + skip * 1e9]
    lines = [f"{path}: {len(requests)} requests after {skip} s"]
    ms = 1e-6

    def stages(rows: list[list[int]]) -> dict[str, list[float]]:
        return {
            "decode (start->decoded)": [(r[1] - r[0]) * ms for r in rows],
            "to batcher (decoded->submitted)": [(r[2] - r[1]) * ms for r in rows],
            "queue (submitted->call started)": [(r[3] - r[2]) * ms for r in rows],
            "model call": [(r[4] - r[3]) * ms for r in rows],
            "back on the loop, outputs built": [(r[6] - r[4]) * ms for r in rows],
            "  of which encoding": [r[5] * ms for r in rows],
            "whole (start->built)": [(r[6] - r[0]) * ms for r in rows],
            "batch rows": [float(r[7]) for r in rows],
        }

    ordered = sorted(requests, key=lambda r: r[6] - r[0])
    tail = ordered[int(0.99 * len(ordered)) :]
    for title, rows in (("all requests", requests), ("slowest 1% (start->built)", tail)):
        lines.append(f"  {title}, ms:")
        for name, values in stages(rows).items():
            lines.append(f"    {name:34s} {_quantiles(values)}")
    batches = [b for b in document["batches"] if b[0] >= first + skip * 1e9]
    if batches:
        timed = [b[3] * ms for b in batches if b[3] >= 0]
        lines.append(
            f"  batches: {len(batches)}, rows {_quantiles([float(b[2]) for b in batches])}; "
            f"closed full {sum(b[3] < 0 for b in batches) / len(batches):.0%}"
        )
        lines.append(f"    timer lateness ms {_quantiles(timed)}")
    collections = [c for c in document["collections"] if c[0] >= first + skip * 1e9]
    for generation in (0, 1, 2):
        pauses = [c[1] * ms for c in collections if c[2] == generation]
        lines.append(f"  gc gen{generation}: {len(pauses)} pauses, ms {_quantiles(pauses)}")
    lags = [lag for lag in document["lags"] if lag[0] >= first + skip * 1e9]
    lines.append(f"  loop lag ms (every {LAG_PERIOD * 1e3:g} ms asked): {_quantiles([lag[1] * ms for lag in lags])}")
    # What a tail request overlapped: a GC pause, or a loop stall longer than 5 ms, between its start and end.
    pauses = [(c[0], c[0] + c[1]) for c in collections if c[1] > 1e6]
    stalls = [(lag[0] - lag[1], lag[0]) for lag in lags if lag[1] > 5e6]
    with_gc = sum(any(s < r[6] and e > r[0] for s, e in pauses) for r in tail)
    with_stall = sum(any(s < r[6] and e > r[0] for s, e in stalls) for r in tail)
    lines.append(
        f"  of the slowest 1% ({len(tail)}): {with_gc} overlap a GC pause > 1 ms, {with_stall} a loop stall > 5 ms"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("files", type=Path, nargs="+")
    parser.add_argument("--skip", type=float, default=1.0, help="seconds of warm-up left out")
    args = parser.parse_args()
    for file in args.files:
        print(summarize(file, args.skip))


if __name__ == "__main__":
    main()
