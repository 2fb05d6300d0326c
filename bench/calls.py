"""Python calls per request, by module: where a request's steps are, counted (deterministic, like instructions).

Each case of `instructions.py`'s W1 family (the floor, ours as the serve command serves it, mounted, ...) is
driven `--count` times after a warm-up request under `sys.setprofile`; every Python function called (and,
apart, every C function called from Python) is counted against the module its code lives in, and the counts
are divided by the requests. A layer's calls are what a request pays for it whatever the machine's load:

    python bench/calls.py [--cases floor,W1cli,W1] [--count 200] [--top 12]

`G1handler` counts G1's request through ours' gRPC ModelInfer handler alone (as `instructions.py`'s case).

With `-server` cases the request goes through uvicorn's own protocol on uvloop, as in `instructions.py`.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def module_of(filename: str) -> str:
    """`oip_asgi/_core/statistics.py`, `starlette/routing.py`: the part of a code's path from its package."""
    parts = Path(filename).parts
    for package in ("oip_asgi", "starlette", "uvicorn", "asyncio", "msgspec", "numpy", "httptools"):
        if package in parts:
            return "/".join(parts[parts.index(package) :])
    return Path(filename).name if filename.startswith("/") else filename


def count(case: str, requests: int) -> tuple[Counter[str], Counter[str]]:
    """Python calls and C calls per module over `requests` requests of `case`."""
    sys.path[:0] = [str(HERE), str(HERE / "apps")]
    import numpy as np
    import uvloop
    from harness.inprocess import app_requester, requester, server_requester
    from instructions import w1_app
    from workloads.http_bodies import SEED, json_request

    body = json_request("INPUT0", np.random.default_rng(SEED).standard_normal((1, 16)).astype(np.float32))
    app_case, server, _ = case.partition("-server")
    loop = uvloop.new_event_loop()
    if case == "G1handler":  # instructions.py's: G1's request through ours' ModelInfer handler, without grpcio
        from instructions import g1_handler_call

        call = g1_handler_call()
        loop.run_until_complete(call())

        async def many() -> None:
            for _ in range(requests):
                await call()

        def go() -> None:
            loop.run_until_complete(many())
    elif server or app_case.startswith("W1s"):
        app, path = w1_app(app_case, body)
        run = (server_requester if server else app_requester)(loop, app, path, body)
        run(1)

        def go() -> None:
            run(requests)
    else:
        app, path = w1_app(app_case, body)
        request = requester(app, path, body)

        def go() -> None:
            for _ in range(requests):
                request()

    python: Counter[str] = Counter()
    native: Counter[str] = Counter()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            python[module_of(frame.f_code.co_filename)] += 1
        elif event == "c_call":
            native[module_of(frame.f_code.co_filename)] += 1

    sys.setprofile(profile)
    try:
        go()
    finally:
        sys.setprofile(None)
    python.pop("calls.py", None)
    native.pop("calls.py", None)
    return python, native


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="floor,W1cli")
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--top", type=int, default=12, help="the modules with the most calls, per case")
    args = parser.parse_args()
    for case in args.cases.split(","):
        python, native = count(case, args.count)
        total, c_total = sum(python.values()) / args.count, sum(native.values()) / args.count
        print(f"{case}: {total:.1f} Python calls per request, {c_total:.1f} C calls from Python")
        for module, calls in python.most_common(args.top):
            print(f"  {calls / args.count:6.1f}  {module} (+{native[module] / args.count:.1f} C)")


if __name__ == "__main__":
    main()
