"""W11: OpenAI's API, ours (`openai_app`) against LitServe's `OpenAISpec`, over a model doing the same work.

    flock /work/bench.lock .venv/bin/python bench/run.py --workloads W11 --rounds 3    # or bench/w11.py
    .venv/bin/python bench/run.py --workloads W11 --quick                          # 1 round, 1 s windows

The model, `tokens`, answers every request with `max_tokens` (1,000) one-token pieces, each the text "token"
(apps/_w11.py): ours an async generator of the LLM convention served by `openai_app` at /v1
(apps/ours_w11_app.py), LitServe a LitAPI whose `predict` yields them under its `OpenAISpec`
(apps/litserve_w11_app.py; LitServe serves only /v1/chat/completions). Workloads:

| workload | request | a chunk is |
|---|---|---|
| chat_stream | `POST /v1/chat/completions`, `stream: true` | one `delta.content` event |
| chat_whole | `POST /v1/chat/completions`, not streamed | one of the 1,000 pieces joined into the answer |
| completion_whole | `POST /v1/completions`, not streamed (ours only; compared with LitServe's chat_whole) | as above |
| chat_stream_vllm | chat_stream from `vllm_tokens` (ours: the vLLM backend's tensors), its finish_reason | as above |
| chat_stream_usage | chat_stream_vllm with `stream_options.include_usage`: its token counts too | as above |
| chat_stream_logprobs | chat_stream_vllm with `logprobs` and `top_logprobs` 1: its logprobs too | as above |

`--servers base --base DIR` serves ours from another checkout (`git worktree add --detach DIR REF`), in the same
rounds, for chat_stream, chat_whole and completion_whole: a change measured against the code before it. The
ratios then pair ours with base, and usage and logprobs with chat_stream_vllm: what they cost a chunk.

Measured as W10 is (harness/streaming.py): the server pinned to core 0, the load generator (loadgen/streams.py,
uvloop, a raw HTTP/1.1 client) pinned to core 1; each workload's answer is checked first (every chunk parsed);
rounds interleaved, a fresh server per round, ratios paired by round. Per server and workload: chunks/s and
server CPU per chunk (utime + stime of its process tree over the timed window) at c=1 and c=16, and the time
to first chunk: `--ttft-repeat` answers one after another (p50, p99; for a whole answer, its arrival).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harness import envs, report, rounds, servers, streaming
from harness.rounds import Run

TOKENS = 1000
WORKLOADS = {
    "chat_stream": {"kind": "chat", "stream": True},
    "chat_whole": {"kind": "chat", "stream": False},
    "completion_whole": {"kind": "completion", "stream": False},
    "chat_stream_vllm": {"kind": "chat", "stream": True, "model": "vllm_tokens"},
    "chat_stream_usage": {
        "kind": "chat", "stream": True, "model": "vllm_tokens", "extra": {"stream_options": {"include_usage": True}},
    },
    "chat_stream_logprobs": {
        "kind": "chat", "stream": True, "model": "vllm_tokens", "extra": {"logprobs": True, "top_logprobs": 1},
    },
}  # fmt: skip
# Ours runs in this interpreter (this checkout first on its PYTHONPATH); its requirements are those of its caller.
PEERS = {
    "ours": servers.Peer("", (), "ours_w11_app.py"),
    "base": servers.Peer("", (), "ours_w11_app.py"),  # ours at another checkout (--base DIR), in this interpreter
    "litserve": servers.Peer("litserve-openai", envs.LITSERVE_REQUIREMENTS, "litserve_w11_app.py", ready=("/health",)),
}
SERVED = {
    "ours": tuple(WORKLOADS),
    "base": ("chat_stream", "chat_whole", "completion_whole"),
    "litserve": ("chat_stream", "chat_whole"),
}
# What each of ours is compared with: LitServe has no /v1/completions.
COUNTERPART = {"chat_stream": "chat_stream", "chat_whole": "chat_whole", "completion_whole": "chat_whole"}
METRICS = streaming.metrics("rate", "chunk", "chunk", "c=1")
LOADGEN_ENV = {"PYTHONPATH": str(envs.ROOT)}  # the load generator imports oip_asgi's generated messages


def measure_server(name: str, python: Path, args: Any, run: Run, round_index: int) -> None:
    checkout = {"ours": envs.ROOT, "base": args.base}.get(name)
    env = servers.environment(PEERS[name], python, checkout)
    log = args.results / "raw" / "logs" / f"{name}.log"
    try:
        with servers.running(servers.app_server(name, PEERS[name], python, log, env=env)) as server:
            for workload in SERVED[name]:
                series = f"{name}.{workload}"
                target = {"address": f"127.0.0.1:{server.port}", **WORKLOADS[workload]}
                stream = streaming.Stream(target, TOKENS, TOKENS, args.ttft_repeat, "rate", "chunk", True)
                try:
                    streaming.measure(series, stream, server, args.loadgen_python, args.seconds, args.warmup, run,
                                      round_index, LOADGEN_ENV)  # fmt: skip
                except (RuntimeError, subprocess.TimeoutExpired) as exc:
                    run.fail(series, "load", str(exc))
    except servers.NotReady as exc:
        for workload in SERVED[name]:
            run.fail(f"{name}.{workload}", "server", str(exc))


def main(argv: list[str]) -> None:
    parser = rounds.parser("W11", __doc__, list(PEERS))
    parser.add_argument("--ttft-repeat", type=int, help="answers in the time-to-first-chunk probe (default 30)")
    parser.add_argument("--results", type=Path, default=envs.BENCH / "results" / "w11")
    parser.add_argument("--base", type=Path, help="serve 'base' from this checkout of oip-asgi")
    args = parser.parse_args(argv)
    if "base" in args.servers.split(",") and args.base is None:
        parser.error("--servers base needs --base DIR, a checkout of the commit to compare with")
    rounds.defaults(args, 3, 3.0, 1.0, 0.5)
    args.ttft_repeat = args.ttft_repeat or (10 if args.quick else 30)
    # Ours and the load generator run on this interpreter (the project's environment, this checkout first).
    args.loadgen_python = Path(sys.executable)
    run = Run()
    names = [name for name in PEERS if name in args.servers.split(",")]
    pythons, failures = servers.install({name: PEERS[name] for name in names if name not in ("ours", "base")})
    pythons = {**{name: Path(sys.executable) for name in ("ours", "base") if name in names}, **pythons}
    for name, reason in failures.items():
        run.fail(name, "server", reason)
    versions = {name: envs.versions(python, ("oip-asgi", "litserve", "uvicorn", "uvloop", "fastapi"))
                for name, python in pythons.items()}  # fmt: skip
    loadavg = [report.loadavg()]
    started = time.time()
    for round_index, order in rounds.each_round(args.rounds, list(pythons)):
        for name in order:
            measure_server(name, pythons[name], args, run, round_index)
    loadavg.append(report.loadavg())
    medians = rounds.medians(run.samples)
    pairs = {f"ours.{mine}/litserve.{theirs}": (f"ours.{mine}", f"litserve.{theirs}")
             for mine, theirs in COUNTERPART.items()}  # fmt: skip
    pairs.update({f"ours.{workload}/base.{workload}": (f"ours.{workload}", f"base.{workload}")
                  for workload in SERVED["base"]})  # fmt: skip
    pairs.update({f"ours.chat_stream_{asked}/ours.chat_stream_vllm": (f"ours.chat_stream_{asked}",
                  "ours.chat_stream_vllm") for asked in ("usage", "logprobs")})  # fmt: skip
    ratios = rounds.ratios(run.samples, pairs, list(METRICS))
    settings = {"rounds": args.rounds, "seconds": args.seconds, "warmup": args.warmup, "tokens": TOKENS,
                "ttft_repeat": args.ttft_repeat}  # fmt: skip
    document = report.document(report.command("bench/run.py", argv), started, settings, run, versions=versions,
                               loadavg_before_after=loadavg, medians=medians, ratios=ratios)  # fmt: skip
    markdown = report.table(METRICS, medians, list(medians), ratios)
    title = (f"W11: OpenAI's API, {TOKENS} one-token chunks an answer ({document['date']}, {args.rounds} rounds, "
             f"{args.seconds:g} s windows; load average before/after: {' / '.join(loadavg)})")  # fmt: skip
    report.write(args.results, "quick" if args.quick else "full", title, document, markdown)
