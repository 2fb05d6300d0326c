"""W10 through aiperf: its template endpoint posting Triton's generate body to a server's generate_stream, offline.

    python3 bench/w10_aiperf.py --server floor            # or ours, pytriton
    python3 bench/w10_aiperf.py --server ours --tokens 10000 --concurrency 16 --requests 64

Sets up aiperf as bench/harness/aiperf.py does (`seed_tiktoken_cache`: no network), starts the server as W10 does
(pinned to core 0, its own environment), runs `aiperf profile` pinned to core 1 and prints its time to first
token, inter-chunk latency (one chunk is one frame here) and request latency, from `profile_export_aiperf.json`
under `bench/results/w10/aiperf/<server>/`.

aiperf counts tokens with its tokenizer, not frames: "token" repeated comes out as about two o200k tokens a
frame, so its token throughput and inter-token latency are not frames; its inter-chunk latency is.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness import aiperf, envs, servers
from harness.aiperf import seed_tiktoken_cache  # noqa: F401  (where docs/openai.md says it is)
from workloads import w10

# Triton's generate body; aiperf's --extra-inputs splits on commas, so the template goes in a file.
TEMPLATE = '{"text_input": {{ text|tojson }}, "max_tokens": {{ max_tokens }}}\n'
GENERATE_SERVERS = [name for name, wires in w10.WIRES.items() if wires.get("rest", {}).get("body") == "generate"]


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench/w10_aiperf.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--server", choices=GENERATE_SERVERS, default="floor")
    parser.add_argument("--tokens", type=int, default=w10.TOKENS, help="max_tokens of each request")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--results", type=Path, default=envs.BENCH / "results" / "w10" / "aiperf")
    args = parser.parse_args(argv)
    peer = w10.PEERS[args.server]
    binary = aiperf.ensure()
    pythons, failures = servers.install({args.server: peer})
    if failures:
        raise SystemExit(f"{args.server}: {failures[args.server]}")
    python = pythons[args.server]
    output = args.results / args.server
    output.mkdir(parents=True, exist_ok=True)
    template = output / "generate.jinja"
    template.write_text(TEMPLATE)
    options = [
        "--model", "tokens", "--endpoint", w10.WIRES[args.server]["rest"]["path"], "--endpoint-type", "template",
        "--extra-inputs", f"payload_template:{template}", "--extra-inputs", "response_field:text_output",
        "--synthetic-input-tokens-mean", "16", "--output-tokens-mean", str(args.tokens), "--output-tokens-stddev",
        "0", "--concurrency", str(args.concurrency), "--request-count", str(args.requests),
    ]  # fmt: skip
    with servers.running(servers.app_server(args.server, peer, python, output / "server.log")) as server:
        document = aiperf.profile(binary, f"http://127.0.0.1:{server.port}", options, output)
    print(f"{args.server}: {args.requests} requests of {args.tokens} frames at c={args.concurrency} ({output})")
    for key in ("time_to_first_token", "inter_chunk_latency", "request_latency"):
        stats = document[key]
        print(f"  {key:20} p50 {stats['p50']:9.3f} ms  p99 {stats['p99']:9.3f} ms  avg {stats['avg']:9.3f} ms")
    errors = document.get("error_summary") or []
    if errors:
        print(f"  errors: {errors}")


if __name__ == "__main__":
    main(sys.argv[1:])
