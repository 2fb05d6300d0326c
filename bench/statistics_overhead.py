"""What the statistics cost a small request: W1 in-process, counters on against counters compiled out.

"Compiled out" is the same app with every clock read and counter update of the statistics replaced
by a no-op (the `now` clock and ModelStatistics' recording methods), swapped in and out between
alternating batches of one process. No server: uvicorn's share, the same for both, would only
dilute the difference (a ratio here is an upper bound on the ratio of whole-server CPU).

    python bench/statistics_overhead.py [--batches 15]

With `--only on|off`, it runs one case `--count` times and nothing else: for counting instructions,
which, unlike seconds, other load on the machine does not change (instructions per request are the
difference between two counts, which cancels the start-up):

    valgrind --tool=callgrind --callgrind-out-file=/dev/null python bench/statistics_overhead.py --only on --count 2000
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
sys.path[:0] = [str(HERE)]

from harness.inprocess import requester  # noqa: E402  (bench/, found through the path above)
from inprocess import identity  # noqa: E402
from workloads.http_bodies import SEED, json_request  # noqa: E402

import oip_asgi  # noqa: E402
from oip_asgi._core import server, serving  # noqa: E402
from oip_asgi._core import statistics as _statistics  # noqa: E402

PATCHED = [(server, "now"), (serving, "now")]
RECORDING = ["executed", "succeeded", "failed"]


def compiled_out() -> dict[tuple[Any, str], Any]:
    """Swap the statistics for no-ops; returns what to put back."""
    saved: dict[tuple[Any, str], Any] = {}
    for module, name in PATCHED:
        saved[module, name] = getattr(module, name)
        setattr(module, name, int)  # int() is 0: a C call, as cheap as a call can be
    for name in RECORDING:
        saved[_statistics.ModelStatistics, name] = getattr(_statistics.ModelStatistics, name)
        setattr(_statistics.ModelStatistics, name, lambda *args: None)
    return saved


def restore(saved: dict[tuple[Any, str], Any]) -> None:
    for (owner, name), value in saved.items():
        setattr(owner, name, value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=15, help="alternating batches per case")
    parser.add_argument("--count", type=int, default=20000, help="requests per batch")
    parser.add_argument("--only", choices=["on", "off"], help="run this case --count times, once")
    args = parser.parse_args()

    app = Starlette()
    oip_asgi.mount(app, {"identity": identity}, path="/v2")
    body = json_request("INPUT0", np.random.default_rng(SEED).standard_normal((1, 16)).astype(np.float32))
    request = requester(app, "/v2/models/identity/infer", body)
    if args.only is not None:
        if args.only == "off":
            compiled_out()
        for _ in range(args.count):
            request()
        return
    samples: dict[str, list[float]] = {"on": [], "off": []}
    for _ in range(args.batches):
        for case in ("on", "off"):
            saved = compiled_out() if case == "off" else {}
            started = time.process_time()
            for _ in range(args.count):
                request()
            samples[case].append((time.process_time() - started) / args.count)
            restore(saved)
    ratios = sorted(on / off for on, off in zip(samples["on"], samples["off"], strict=True))
    best = {case: min(values) * 1e6 for case, values in samples.items()}
    print(
        f"W1 in-process, {args.batches} alternating batches of {args.count}: best on {best['on']:.1f} us, "
        f"off {best['off']:.1f} us ({best['on'] / best['off']:.3f}x); batch-pair ratios median "
        f"{ratios[len(ratios) // 2]:.3f}x (range {ratios[0]:.3f}-{ratios[-1]:.3f})"
    )


if __name__ == "__main__":
    main()
