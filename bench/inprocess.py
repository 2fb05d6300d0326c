"""The app alone: CPU per request of the floor's handler and ours, with no server and no event loop.

The HTTP benchmark (run.py) adds uvicorn's cost, the same for both, and its noise. This drives each
ASGI app directly (receive and send return at once, so a request never suspends) with W1's and W3's
bodies, in alternating batches, and prints the best batch of each: the figure to compare changes by.

    python bench/inprocess.py [--batches 7]

Run it with an interpreter that has oip-asgi installed (the `ours` venv, or a development one).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from starlette.applications import Starlette

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE / "apps")]

import floor_app  # noqa: E402  (siblings, found through the path above)
from harness.inprocess import requester  # noqa: E402
from workloads.http_bodies import SEED, json_request  # noqa: E402

import oip_asgi  # noqa: E402


async def identity(**inputs: Any) -> dict[str, Any]:
    return inputs  # as apps/ours_app.py serves it


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=7, help="alternating batches per case; the best counts")
    args = parser.parse_args()

    ours = Starlette()
    oip_asgi.mount(ours, {"identity": identity}, path="/v2")
    rng = np.random.default_rng(SEED)
    for key, size, count in (("W1", 16, 20000), ("W3", 65536, 20)):
        body = json_request("INPUT0", rng.standard_normal((1, size)).astype(np.float32))
        floor = floor_app.build(body)  # answers with the request body: about the size of our answer
        cases = {
            "floor": requester(floor, "/v2/models/fixed/infer", body),
            "ours": requester(ours, "/v2/models/identity/infer", body),
        }
        best = dict.fromkeys(cases, float("inf"))
        for _ in range(args.batches):
            for name, request in cases.items():
                started = time.process_time()
                for _ in range(count):
                    request()
                best[name] = min(best[name], (time.process_time() - started) / count)
        print(
            f"{key} [1,{size}]: floor {best['floor'] * 1e6:8.1f} us  ours {best['ours'] * 1e6:8.1f} us"
            f"  ours - floor {(best['ours'] - best['floor']) * 1e6:8.1f} us"
        )


if __name__ == "__main__":
    main()
