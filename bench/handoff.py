"""The hand-off alone: CPU per call of running a no-op function on a worker thread from uvloop.

Three ways for an event loop to run a sync function off the loop and await its result:
`anyio.to_thread.run_sync` (what sync models used before), `loop.run_in_executor` with a
`ThreadPoolExecutor`, and oip-asgi's own `WorkerPool.run`. Each is driven by `concurrency` tasks
that call it in a loop; a sample is the process's CPU time (every thread: utime + stime) over the
calls made. `inline` awaits nothing but a plain call: the loop's own cost, the floor under the others.

The methods alternate within a round (order rotated between rounds), so the machine's drift falls on
all of them alike; the table shows medians over rounds and each method's ratio to anyio's, the
median of the rounds' ratios. The process is pinned to one core (`--core`, like the server in
run.py: its worker threads share the loop's core); `--core -1` leaves it unpinned.

    bench/.peers/ours/bin/python bench/handoff.py [--rounds 7] [--calls 20000]

Needs an interpreter with oip-asgi and uvloop (the `ours` venv).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio.to_thread
import uvloop
from harness import report, rounds

from oip_asgi._core.workers import DEFAULT_MAX_THREADS, WorkerPool

RESULTS = Path(__file__).resolve().parent / "results" / "handoff"
METHODS = ("anyio", "executor", "workerpool", "inline")
BASELINE = "anyio"


def noop() -> None:
    return None


def hand_offs(threads: int) -> dict[str, Callable[[], Awaitable[Any]]]:
    """One awaitable per method, each running `noop` once; every pool allows `threads` threads."""
    executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="bench-executor")
    pool = WorkerPool(threads)

    async def anyio_call() -> Any:
        return await anyio.to_thread.run_sync(noop)  # its default limiter: 40 threads, as DEFAULT_MAX_THREADS

    async def executor_call() -> Any:
        return await asyncio.get_running_loop().run_in_executor(executor, noop)

    async def workerpool_call() -> Any:
        return await pool.run(noop)

    async def inline_call() -> Any:
        return noop()

    calls = {"anyio": anyio_call, "executor": executor_call, "workerpool": workerpool_call, "inline": inline_call}
    return {name: calls[name] for name in METHODS}


async def sample(call: Callable[[], Awaitable[Any]], concurrency: int, calls: int) -> float:
    """CPU seconds per call, `calls` calls made by `concurrency` tasks in a loop."""
    each = max(calls // concurrency, 1)

    async def caller() -> None:
        for _ in range(each):
            await call()

    started = time.process_time()
    await asyncio.gather(*(caller() for _ in range(concurrency)))
    return (time.process_time() - started) / (each * concurrency)


async def measure(args: argparse.Namespace) -> dict[str, dict[str, list[float]]]:
    calls = hand_offs(args.threads)
    samples: dict[str, dict[str, list[float]]] = {f"c{c}": {m: [] for m in METHODS} for c in args.concurrency}
    for concurrency in args.concurrency:  # warm-up: threads started, code paths warm
        for call in calls.values():
            await sample(call, concurrency, min(args.calls, 2000))
    for round_index in range(args.rounds):
        order = rounds.rotated(METHODS, round_index)
        for concurrency in args.concurrency:
            for method in order:
                samples[f"c{concurrency}"][method].append(await sample(calls[method], concurrency, args.calls))
        line = "  ".join(
            f"c={c} " + " ".join(f"{m} {samples[f'c{c}'][m][-1] * 1e6:.1f}" for m in METHODS) for c in args.concurrency
        )
        print(f"round {round_index + 1}/{args.rounds} (us CPU/call): {line}", flush=True)
    return samples


def summarize(samples: dict[str, dict[str, list[float]]]) -> tuple[dict[str, Any], str]:
    medians: dict[str, dict[str, float]] = {}
    ratios: dict[str, dict[str, float]] = {}
    for level, by_method in samples.items():
        medians[level] = {m: statistics.median(values) * 1e6 for m, values in by_method.items()}
        baseline = by_method[BASELINE]
        ratios[level] = {
            m: statistics.median(v / b for v, b in zip(values, baseline, strict=True))
            for m, values in by_method.items()
        }
    levels = list(samples)
    head = ["method", *[f"us CPU/call, {level.replace('c', 'c=')}" for level in levels]]
    head += [f"/ anyio, {level.replace('c', 'c=')}" for level in levels]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for method in METHODS:
        row = [method, *[f"{medians[level][method]:.1f}" for level in levels]]
        row += [f"{ratios[level][method]:.3f}x" for level in levels]
        lines.append("| " + " | ".join(row) + " |")
    return {"medians_us": medians, "ratios_to_anyio": ratios}, "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds")
    parser.add_argument("--calls", type=int, default=20000, help="calls per sample")
    parser.add_argument("--concurrency", type=lambda s: [int(c) for c in s.split(",")], default=[1, 16])
    parser.add_argument("--threads", type=int, default=DEFAULT_MAX_THREADS, help="threads each pool may start")
    parser.add_argument("--core", type=int, default=0, help="pin the process to this core (-1: do not pin)")
    parser.add_argument("--results", type=Path, default=RESULTS, help="write <results>.json and .md")
    args = parser.parse_args()
    if args.core >= 0:
        os.sched_setaffinity(0, {args.core})
    loop = uvloop.new_event_loop()
    try:
        samples = loop.run_until_complete(measure(args))
    finally:
        loop.close()
    summary, table = summarize(samples)
    command = "python bench/handoff.py" + "".join(f" {a}" for a in sys.argv[1:])
    document = {
        "command": command,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "settings": {"rounds": args.rounds, "calls": args.calls, "threads": args.threads, "core": args.core},
        "versions": {"python": platform.python_version(), "uvloop": uvloop.__version__, "anyio": _version("anyio")},
        "cpu": report.cpu_model(),
        "samples_s": samples,
        **summary,
    }
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.with_suffix(".json").write_text(json.dumps(document, indent=1) + "\n")
    title = f"# Hand-off CPU per call (medians of {args.rounds} rounds)\n\nCommand: `{command}`\n\n"
    args.results.with_suffix(".md").write_text(title + table)
    print("\n" + table)
    print(f"written: {args.results}.json, {args.results}.md")


def _version(distribution: str) -> str:
    from importlib.metadata import version

    return version(distribution)


if __name__ == "__main__":
    main()
