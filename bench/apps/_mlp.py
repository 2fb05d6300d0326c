"""W8's MLP for every server: FP32 [n,64] -> 256 -> 256 -> 10, ReLU between, weights from the harness's file.

The harness writes the weights once (workloads/http_bodies.py's mlp_weights, fixed seed) and passes the file to each
server, so all of them compute with the same numbers. Run as a script, it times one call on a batch
in-process (the figure W8's latency target is built from):

    python bench/apps/_mlp.py WEIGHTS.npz --rows 32
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[Any]


class MLP:
    def __init__(self, path: Path | str) -> None:
        with np.load(path) as weights:
            count = len(weights.files) // 2
            self.layers = [(weights[f"w{i}"], weights[f"b{i}"]) for i in range(count)]

    def __call__(self, x: Array) -> Array:
        last = len(self.layers) - 1
        for index, (weight, bias) in enumerate(self.layers):
            x = x @ weight + bias
            if index < last:
                x = np.maximum(x, 0)
        return x


def per_call(
    call: Callable[[], Any], calls: int, repeats: int, warmup: int, clock: Callable[[], float] = time.perf_counter
) -> float:
    """Seconds of `clock` per call: the median of `repeats` loops of `calls` calls, after `warmup` calls."""
    for _ in range(warmup):
        call()
    loops = []
    for _ in range(repeats):
        started = clock()
        for _ in range(calls):
            call()
        loops.append((clock() - started) / calls)
    import statistics  # the script's timing only: not imported by the servers that serve the MLP (W5)

    return statistics.median(loops)


def time_call(mlp: MLP, rows: int, calls: int, repeats: int) -> float:
    """Seconds per call of `mlp` on a [rows, 64] batch."""
    x = np.random.default_rng(0).standard_normal((rows, mlp.layers[0][0].shape[0])).astype(np.float32)
    return per_call(lambda: mlp(x), calls, repeats, warmup=calls)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("weights", type=Path)
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    seconds = time_call(MLP(args.weights), args.rows, args.calls, args.repeats)
    print(json.dumps({"rows": args.rows, "call_ms": seconds * 1000}))


if __name__ == "__main__":
    main()
