"""Loading and reloading a model repository's models under load (issue 21's targets).

1. A steady model's latency while another model loads for 2 seconds: wrk at c=4 on `steady` for a
   window with no load and a window during which `slow` (a model.py whose import takes 2 s: waiting,
   as reading a large file does, or with `--load cpu` computing in Python) is loaded, alternating;
   p99 of each, the median of the rounds' ratios.
2. A reload under load: wrk at c=8 on `steady` while `steady` itself is reloaded 10 times; every
   answer must be a 200 (wrk counts the others).

    python bench/reload.py [--rounds 5] [--python PATH]

The server (`oip-asgi serve --model-repository`, explicit mode) is pinned to core 0 and wrk to core
1 with taskset, as every workload is (bench/harness/); wrk comes from Debian's package. Run it with
an interpreter that has oip-asgi[serve] installed (the default is this one).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import textwrap
import threading
import urllib.request
from pathlib import Path

from harness import envs, loads, procs, servers

MODEL = """
from oip_asgi import Model, TensorSpec

{load}

def predict(x):
    return x + 1

model = Model(predict, inputs=[TensorSpec("x", "INT32", [-1])], outputs=[TensorSpec("y", "INT32", [-1])])
"""
BODY = json.dumps({"inputs": [{"name": "x", "shape": [2], "datatype": "INT32", "data": [1, 2]}]})


LOADS = {
    # Waiting, as reading a large file or a C library building a session does: the GIL is free.
    "io": "import time\ntime.sleep(2)  # a 2-second load",
    # Python computing for 2 s: the load thread takes the GIL from the event loop every 5 ms.
    "cpu": "import time\nend = time.monotonic() + 2\nwhile time.monotonic() < end:\n    sum(range(1000))",
}


def write_repository(root: Path, load: str) -> None:
    for name, code in (("steady", ""), ("slow", LOADS[load])):
        folder = root / name / "1"
        folder.mkdir(parents=True)
        (folder / "model.py").write_text(textwrap.dedent(MODEL.format(load=code)))


def post(url: str, data: bytes = b"") -> int:
    request = urllib.request.Request(url, data=data, method="POST")
    with urllib.request.urlopen(request, timeout=60) as response:
        return int(response.status)


def wrk(port: int, seconds: int, connections: int, body: Path) -> loads.LoadResult:
    url = f"http://127.0.0.1:{port}/v2/models/steady/infer"
    return loads.wrk(url, body, "application/json", connections, seconds, timeout="10s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--python", default=sys.executable, help="the interpreter that runs oip-asgi serve")
    parser.add_argument("--load", choices=sorted(LOADS), default="io", help="what the 2-second load does")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="oip-reload-") as directory:
        root = Path(directory, "models")
        write_repository(root, args.load)
        body = Path(directory, "body.json")
        body.write_text(BODY)
        port = procs.free_port()
        command = [
            args.python, "-m", "oip_asgi", "serve", "--model-repository", str(root), "--model-control-mode",
            "explicit", "--load-model", "steady", "--port", str(port), "--log-level", "warning", "--no-access-log",
        ]  # fmt: skip
        base = f"http://127.0.0.1:{port}/v2"
        log = envs.BENCH / "results" / "raw" / "logs" / "reload.log"
        with servers.running(procs.Server("reload", command, port, log), 30):
            wrk(port, 1, 4, body)  # warm-up
            ratios, quiet_p99, loading_p99 = [], [], []
            for round_ in range(args.rounds):
                quiet = wrk(port, 3, 4, body)
                post(f"{base}/repository/models/slow/unload")
                loader = threading.Thread(target=post, args=(f"{base}/repository/models/slow/load",))
                loader.start()  # a 2-second load, inside the window
                loading = wrk(port, 3, 4, body)
                loader.join(60)
                quiet_p99.append(quiet.p99_ms * 1000)
                loading_p99.append(loading.p99_ms * 1000)
                ratios.append(loading.p99_ms / quiet.p99_ms)
                print(f"round {round_ + 1}: p99 {quiet_p99[-1]:.0f} us quiet, {loading_p99[-1]:.0f} us during a load "
                      f"({ratios[-1]:.2f}x)", flush=True)  # fmt: skip

            failures = 0
            requests = 0
            reloads = threading.Thread(
                target=lambda: [post(f"{base}/repository/models/steady/load") for _ in range(10)]
            )
            reloads.start()
            while reloads.is_alive():
                result = wrk(port, 1, 8, body)
                requests += result.requests
                failures += result.errors
            reloads.join()
    print(json.dumps({
        "load": args.load, "p99_quiet_us": quiet_p99, "p99_loading_us": loading_p99,
        "ratios": [round(r, 3) for r in ratios],
        "median_ratio": round(statistics.median(ratios), 3), "range": [round(min(ratios), 3), round(max(ratios), 3)],
        "reload_requests": requests, "reload_failures": failures,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
