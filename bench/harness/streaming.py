"""Streamed answers (W10, W11): one series measured on a running server with bench/loadgen/streams.py.

The answer is checked whole first (every frame parsed); then the time to the first frame, `ttft_repeat` streams
one after another; then C streams kept open (a stream that ends is followed by the next) at c=1 and c=16: after
`warmup` s, a `seconds` window in which frames are counted and the server's CPU is read at both edges. Before
each run the server must be back to the CPU use it had idle (PyTriton's processes poll).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import loads, procs
from harness.rounds import Run


@dataclass(frozen=True)
class Stream:
    target: Mapping[str, Any]  # what the load generator asks, and of whom (streams.py's TARGET)
    tokens: int  # frames an answer
    ttft_tokens: int  # frames an answer in the time-to-first-frame probe
    ttft_repeat: int
    rate: str  # the frames/s metric's name: W10's "fps", W11's "rate"
    unit: str  # what a frame is called in the log
    window_only: bool  # the c=16 first-frame median of the streams the window started (else the warm-up's too)


def metrics(rate: str, unit: str, first: str, alone: str) -> dict[str, tuple[str, str]]:
    """What `measure` records, titled: `rate` the frames/s metric's name, `unit` a frame's, `first` the first
    frame's, `alone` how the probe's streams run."""
    return {
        f"{rate}_c1": (f"{unit}s/s (c=1)", "higher"),
        f"{rate}_c16": (f"{unit}s/s (c=16)", "higher"),
        "cpu_us_c1": (f"server CPU µs/{unit} (c=1)", "lower"),
        "cpu_us_c16": (f"server CPU µs/{unit} (c=16)", "lower"),
        "ttft_p50_ms": (f"time to first {first}, p50 ms ({alone})", "lower"),
        "ttft_p99_ms": (f"time to first {first}, p99 ms ({alone})", "lower"),
        "ttft_c16_ms": (f"time to first {first}, median ms (c=16)", "lower"),
    }


def measure(
    series: str,
    stream: Stream,
    server: procs.Server,
    python: Path,
    seconds: float,
    warmup: float,
    run: Run,
    round_index: int,
    env: Mapping[str, str] | None = None,
) -> None:
    def loadgen(*args: str) -> dict[str, Any]:
        return loads.loadgen(python, "streams.py", args[0], json.dumps(stream.target), *args[1:], env=env)

    idle = procs.idle_rate(server.tree())
    print(f"  {series:24} checking one {stream.tokens}-{stream.unit} answer (idle: {idle:.0%} of a core)", flush=True)
    answer = loadgen("check", "-n", str(stream.tokens))
    if answer["error"]:
        run.fail(series, "check", f"{answer['error']} (log: {server.log_path}: {server.log_tail()})")
        return
    run.details.append({"round": round_index, "series": series, "check": answer, "idle_cores": idle})
    if not procs.settle(server.tree(), idle):
        run.fail(series, "ttft", f"the server was still busy {procs.SETTLE_SECONDS:g} s after the check")
        return
    probe = loadgen("ttft", "-n", str(stream.ttft_tokens), "--repeat", str(stream.ttft_repeat))
    run.add(series, "ttft_p50_ms", probe["p50_ms"], round_index)
    run.add(series, "ttft_p99_ms", probe["p99_ms"], round_index)
    line = [f"  {series:24} first {stream.unit} p50 {probe['p50_ms']:6.2f} ms p99 {probe['p99_ms']:6.2f} ms"]
    for concurrency in (1, 16):
        pids = server.tree()
        if not procs.settle(pids, idle):
            run.fail(series, f"c={concurrency}", f"still busy {procs.SETTLE_SECONDS:g} s after the last run")
            continue
        result = loadgen(
            "load", "-n", str(stream.tokens), "-c", str(concurrency), "-s", str(seconds), "--warmup", str(warmup),
            "--pids", ",".join(map(str, pids)),
        )  # fmt: skip
        if result["frames"] == 0 or result["errors"]:
            reason = f"{result['frames']} {stream.unit}s, {result['errors']} errors: {result['first_error']}"
            run.fail(series, f"c={concurrency}", reason)
            continue
        first = result.pop("first_frame_ms")[result.pop("window_first") if stream.window_only else 0 :]
        run.add(series, f"{stream.rate}_c{concurrency}", result["rate"], round_index)
        run.add(series, f"cpu_us_c{concurrency}", result["cpu_us_per_frame"], round_index)
        if concurrency == 16 and first:
            run.add(series, "ttft_c16_ms", statistics.median(first), round_index)
        run.details.append({"round": round_index, "series": series, "concurrency": concurrency, **result,
                            "first_frame_ms": first[:64]})  # fmt: skip
        line.append(
            f"c={concurrency}: {result['rate']:8.0f} {stream.unit}s/s {result['cpu_us_per_frame']:6.1f} µs CPU/"
            f"{stream.unit} (client {result['client_cpu_s'] / result['seconds']:.0%} busy)"
        )
    print("  ".join(line), flush=True)
