"""W9 without HTTP: where ours' CPU per request goes for a model file, one request at a time.

For each of W9's files and its [1,100] request, the best of a few alternating batches of:

- `library`: the library called directly (bench/w9_files.py's call, as the answer checks make it);
- `model`: the same through the `Model` that `Model.from_file` built (its runner: the input checked and
  converted, the outputs named), called in this thread;
- `hop`: the library call handed to a plain one-thread executor from the loop and awaited
  (`loop.run_in_executor`), and `hop alone` with nothing to call: what a hand-off costs, and how much
  dearer the call is on a thread that just woke up than in a tight loop;
- `app`: the whole ASGI app (apps/ours_app.py's models, mounted at /v2) on a uvloop event loop, the model
  on oip-asgi's worker thread, receive and send returning at once: everything of ours but uvicorn;

and, as in bench/inprocess.py, identities through the app, async (on the loop) and sync (worker thread),
with W1's body and with the ONNX file's [1,100] one.
CPU is the process's (every thread). Run pinned to one core, in the `ours` environment, after `run.py`
has trained the files:

    taskset -c 0 bench/.peers/ours/bin/python bench/w9_inprocess.py bench/results/w9/raw/bodies
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import uvloop
from starlette.applications import Starlette

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE / "apps")]

import ours_app  # noqa: E402  (siblings, found through the path above)
import w9_files  # noqa: E402
from harness.inprocess import app_requester  # noqa: E402
from workloads.http_bodies import W9_KINDS  # noqa: E402

import oip_asgi  # noqa: E402


def executor_requester(loop: asyncio.AbstractEventLoop, call: Callable[[], Any]) -> Callable[[int], None]:
    pool = concurrent.futures.ThreadPoolExecutor(1)

    async def calls(count: int) -> None:
        for _ in range(count):
            await loop.run_in_executor(pool, call)

    return lambda count: loop.run_until_complete(calls(count))


def repeated(call: Callable[[], Any]) -> Callable[[int], None]:
    def run(count: int) -> None:
        for _ in range(count):
            call()

    return run


def best_us(cases: dict[str, Callable[[int], None]], count: int, batches: int) -> dict[str, float]:
    best = dict.fromkeys(cases, float("inf"))
    for case in cases.values():
        case(count // 10)  # warm: the worker thread started, caches filled
    for _ in range(batches):
        for name, case in cases.items():
            started = time.process_time()
            case(count)
            best[name] = min(best[name], (time.process_time() - started) / count * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bodies", type=Path, help="the harness's bodies folder (with w9/ trained in it)")
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--batches", type=int, default=5)
    args = parser.parse_args()
    files = args.bodies / "w9"
    loop = uvloop.new_event_loop()
    models = ours_app.file_models(files)
    app = Starlette()
    oip_asgi.mount(app, {"identity": ours_app.identity, "identity_sync": ours_app.identity_sync, **models}, path="/v2")
    results: dict[str, dict[str, float]] = {}
    for key in ("w1", "w9o1"):
        body = (args.bodies / f"{key}.json").read_bytes()
        identity = {
            "async": app_requester(loop, app, "/v2/models/identity/infer", body),
            "sync": app_requester(loop, app, "/v2/models/identity_sync/infer", body),
            "hop alone": executor_requester(loop, lambda: None),
        }
        results[f"identity {key}"] = best_us(identity, args.count * 5, args.batches)
    x = np.load(files / "requests.npz")["x1"]
    calls = w9_files.library_calls(files)
    for letter, (kind, _, input_name, _, _) in W9_KINDS.items():
        served = models[f"w9_{kind}"].predict
        key = f"W9{letter}1"
        cases = {
            "library": repeated(lambda call=calls[kind]: call(x)),
            "model": repeated(lambda served=served, name=input_name: served(**{name: x})),
            "hop": executor_requester(loop, lambda call=calls[kind]: call(x)),
            "app": app_requester(
                loop, app, f"/v2/models/w9_{kind}/infer", (args.bodies / f"{key.lower()}.json").read_bytes()
            ),
        }
        results[f"{key} {kind}"] = best_us(cases, args.count, args.batches)
    for name, figures in results.items():
        print(f"{name:15} " + "  ".join(f"{case} {us:7.1f} us" for case, us in figures.items()))
    print(json.dumps(results))


if __name__ == "__main__":
    main()
