"""W11: OpenAI's API, ours (`openai_app`) against LitServe's `OpenAISpec`, over a model doing the same work.

    flock /work/bench.lock python3 bench/w11.py --rounds 3
    python3 bench/w11.py --quick                 # 1 round, 1 s windows

The model, `tokens`, answers every request with `max_tokens` (1,000) one-token pieces, each the text "token"
(apps/_w11.py): ours an async generator of the LLM convention served by `openai_app` at /v1
(apps/ours_w11_app.py), LitServe a LitAPI whose `predict` yields them under its `OpenAISpec`
(apps/litserve_w11_app.py; LitServe serves only /v1/chat/completions). Workloads:

| workload | request | a chunk is |
|---|---|---|
| chat_stream | `POST /v1/chat/completions`, `stream: true` | one `delta.content` event |
| chat_whole | `POST /v1/chat/completions`, not streamed | one of the 1,000 pieces joined into the answer |
| completion_whole | `POST /v1/completions`, not streamed (ours only; compared with LitServe's chat_whole) | as above |

Measured as W10 is (bench/w10.py): the server pinned to core 0, the load generator (w11_loadgen.py, uvloop,
W10's raw HTTP/1.1 client) pinned to core 1; each workload's answer is checked first (every chunk parsed);
rounds interleaved, a fresh server per round, ratios paired by round. Per server and workload: chunks/s and
server CPU per chunk (utime + stime of its process tree over the timed window) at c=1 and c=16, and the time
to first chunk: `--ttft-repeat` answers one after another (p50, p99; for a whole answer, its arrival).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import envs
import procs
from w10 import Run, idle_rate, log_tail, paired_ratio, settle

SERVER_CORE, LOAD_CORE = 0, 1
TOKENS = 1000
LITSERVE_ENV, LITSERVE_REQUIREMENTS = "litserve-openai", ("litserve==0.2.19", "uvloop", "httptools")
WORKLOADS = {
    "chat_stream": {"kind": "chat", "stream": True},
    "chat_whole": {"kind": "chat", "stream": False},
    "completion_whole": {"kind": "completion", "stream": False},
}
SERVERS = {
    "ours": ("ours_w11_app.py", ("/v2/health/ready",), tuple(WORKLOADS)),
    "litserve": ("litserve_w11_app.py", ("/health",), ("chat_stream", "chat_whole")),
}
# What each of ours is compared with: LitServe has no /v1/completions.
COUNTERPART = {"chat_stream": "chat_stream", "chat_whole": "chat_whole", "completion_whole": "chat_whole"}
METRICS = {
    "rate_c1": ("chunks/s (c=1)", "higher"),
    "rate_c16": ("chunks/s (c=16)", "higher"),
    "cpu_us_c1": ("server CPU µs/chunk (c=1)", "lower"),
    "cpu_us_c16": ("server CPU µs/chunk (c=16)", "lower"),
    "ttft_p50_ms": ("time to first chunk, p50 ms (c=1)", "lower"),
    "ttft_p99_ms": ("time to first chunk, p99 ms (c=1)", "lower"),
    "ttft_c16_ms": ("time to first chunk, median ms (c=16)", "lower"),
}


def loadgen(python: Path, *args: str, timeout: float = 300) -> dict[str, Any]:
    command = ["taskset", "-c", str(LOAD_CORE), str(python), str(envs.BENCH / "w11_loadgen.py"), *args]
    env = {**os.environ, "PYTHONPATH": str(envs.ROOT)}  # w10_loadgen imports oip_asgi's generated messages
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"w11_loadgen {args[0]} failed: {done.stderr.strip()[-500:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def measure(name: str, workload: str, server: procs.Server, args: Any, run: Run, round_index: int) -> None:
    series = f"{name}.{workload}"
    target = json.dumps({"address": f"127.0.0.1:{server.port}", **WORKLOADS[workload]})
    idle = idle_rate(server.tree())
    answer = loadgen(args.loadgen_python, "check", target, "-n", str(TOKENS))
    if answer["error"]:
        run.fail(series, "check", f"{answer['error']} (log: {log_tail(server.log_path)})")
        return
    run.details.append({"round": round_index, "series": series, "check": answer, "idle_cores": idle})
    settle(server.tree(), idle)
    probe = loadgen(args.loadgen_python, "ttft", target, "-n", str(TOKENS), "--repeat", str(args.ttft_repeat))
    run.add(series, "ttft_p50_ms", probe["p50_ms"], round_index)
    run.add(series, "ttft_p99_ms", probe["p99_ms"], round_index)
    line = [f"  {series:24} first chunk p50 {probe['p50_ms']:6.2f} ms p99 {probe['p99_ms']:6.2f} ms"]
    for concurrency in (1, 16):
        pids = server.tree()
        if not settle(pids, idle):
            run.fail(series, f"c={concurrency}", "the server was still busy after the last run")
            continue
        result = loadgen(
            args.loadgen_python, "load", target, "-n", str(TOKENS), "-c", str(concurrency), "-s", str(args.seconds),
            "--warmup", str(args.warmup), "--pids", ",".join(map(str, pids)),
        )  # fmt: skip
        if result["frames"] == 0 or result["errors"]:
            run.fail(series, f"c={concurrency}", f"{result['frames']} chunks, {result['errors']} errors: "
                                                 f"{result['first_error']}")  # fmt: skip
            continue
        run.add(series, f"rate_c{concurrency}", result["rate"], round_index)
        run.add(series, f"cpu_us_c{concurrency}", result["cpu_us_per_frame"], round_index)
        if concurrency == 16 and result["first_frame_ms"]:
            run.add(series, "ttft_c16_ms", statistics.median(result["first_frame_ms"]), round_index)
        run.details.append({"round": round_index, "series": series, "concurrency": concurrency,
                            **{key: value for key, value in result.items() if key != "first_frame_ms"}})  # fmt: skip
        line.append(f"c={concurrency}: {result['rate']:8.0f} chunks/s {result['cpu_us_per_frame']:6.1f} µs CPU/chunk")
    print("  ".join(line), flush=True)


def measure_server(name: str, python: Path, args: Any, run: Run, round_index: int) -> None:
    app, ready, workloads = SERVERS[name]
    port = procs.free_port()
    env = {"PYTHONPATH": str(envs.ROOT)} if name == "ours" else {}  # ours from this checkout
    command = [str(python), str(envs.APPS / app), "--port", str(port)]
    server = procs.Server(name, command, port, args.results / "raw" / "logs" / f"{name}.log", env)
    server.start(SERVER_CORE)
    try:
        deadline = time.perf_counter() + 180
        try:
            for path in ready:
                server.wait_until(path, deadline)
        except (RuntimeError, TimeoutError) as exc:
            for workload in workloads:
                run.fail(f"{name}.{workload}", "server", f"did not become ready: {exc} ({log_tail(server.log_path)})")
            return
        for workload in workloads:
            try:
                measure(name, workload, server, args, run, round_index)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                run.fail(f"{name}.{workload}", "load", str(exc))
    finally:
        server.stop()


def summarize(run: Run) -> dict[str, Any]:
    medians = {
        name: {metric: statistics.median([v for v in values if v == v]) for metric, values in metrics.items()
               if any(v == v for v in values)}
        for name, metrics in run.samples.items()
    }  # fmt: skip
    ratios = {}
    for workload, theirs in COUNTERPART.items():
        ours, peer = run.samples.get(f"ours.{workload}"), run.samples.get(f"litserve.{theirs}")
        if ours and peer:
            ratios[f"ours.{workload}/litserve.{theirs}"] = {
                metric: paired_ratio(ours.get(metric, []), peer.get(metric, [])) for metric in METRICS
            }
    return {"medians": medians, "ratios": ratios}


def table(summary: dict[str, Any]) -> str:
    def number(value: float | None) -> str:
        return "-" if value is None else f"{value:.3g}"

    series = list(summary["medians"])
    head = ["metric", "better", *series, *summary["ratios"]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for metric, (title, better) in METRICS.items():
        cells = [title, better, *(number(summary["medians"][name].get(metric)) for name in series)]
        cells += [
            number(ratio.get(metric)) + ("x" if ratio.get(metric) else "") for ratio in summary["ratios"].values()
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench/w11.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="1 round, 1 s windows, 0.5 s warm-up")
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--seconds", type=float, help="the timed window of each load run (default 3)")
    parser.add_argument("--warmup", type=float, help="load before the window opens (default 1)")
    parser.add_argument("--servers", default=",".join(SERVERS))
    parser.add_argument("--ttft-repeat", type=int, help="answers in the time-to-first-chunk probe (default 30)")
    parser.add_argument("--results", type=Path, default=envs.BENCH / "results" / "w11")
    args = parser.parse_args(argv)
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.seconds = args.seconds or (1.0 if args.quick else 3.0)
    args.warmup = args.warmup if args.warmup is not None else (0.5 if args.quick else 1.0)
    args.ttft_repeat = args.ttft_repeat or (10 if args.quick else 30)
    # Ours and the load generator run on this interpreter (the project's environment, this checkout first).
    args.loadgen_python = Path(sys.executable)
    pythons = {"ours": Path(sys.executable)}
    run = Run()
    names = [name for name in SERVERS if name in args.servers.split(",")]
    if "litserve" in names:
        reason = envs.ensure_env(LITSERVE_ENV, LITSERVE_REQUIREMENTS)
        if reason:
            run.fail("litserve", "server", f"cannot install: {reason}")
        else:
            pythons["litserve"] = envs.venv_python(LITSERVE_ENV)
    names = [name for name in names if name in pythons]
    versions = {name: envs.versions(pythons[name], ("oip-asgi", "litserve", "uvicorn", "uvloop", "fastapi"))
                for name in names}  # fmt: skip
    loadavg = [Path("/proc/loadavg").read_text().strip()]
    started = time.time()
    for round_index in range(args.rounds):
        order = names[round_index % len(names) :] + names[: round_index % len(names)]
        print(f"round {round_index + 1}/{args.rounds}: {', '.join(order)}", flush=True)
        for name in order:
            measure_server(name, pythons[name], args, run, round_index)
    loadavg.append(Path("/proc/loadavg").read_text().strip())
    summary = summarize(run)
    label = "quick" if args.quick else "full"
    document = {
        "command": "python3 bench/w11.py" + ("" if not argv else " " + " ".join(argv)),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "elapsed_s": round(time.time() - started, 1),
        "loadavg_before_after": loadavg,
        "settings": {"rounds": args.rounds, "seconds": args.seconds, "warmup": args.warmup, "tokens": TOKENS,
                     "ttft_repeat": args.ttft_repeat},
        "versions": versions,
        "samples": run.samples,
        "errors": run.errors,
        "details": run.details,
        **summary,
    }  # fmt: skip
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / f"{label}.json").write_text(json.dumps(document, indent=1, default=str))
    markdown = table(summary)
    notes = [f"- {name} {what}: {why}" for name, failures in run.errors.items() for what, why in failures.items()]
    missing = "\nNot measured:\n\n" + "\n".join(notes) + "\n" if notes else ""
    (args.results / f"{label}.md").write_text(
        f"# W11: OpenAI's API, {TOKENS} one-token chunks an answer ({document['date']}, {args.rounds} rounds, "
        f"{args.seconds:g} s windows; load average before/after: {' / '.join(loadavg)})\n\n{markdown}\n{missing}"
    )
    print(markdown)
    print(f"load average before/after: {' / '.join(loadavg)}")
    if notes:
        print("\nNot measured:\n" + "\n".join(notes))


if __name__ == "__main__":
    main(sys.argv[1:])
