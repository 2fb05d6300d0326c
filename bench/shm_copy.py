"""What copying a 16 MiB tensor out of and into a POSIX shared-memory object costs (W13's floor), two ways.

- `preadv`, `pwritev`: the kernel copies between the object and the process's memory, page by page, as
  oip-asgi does (`_core/shared_memory.py`); a client that shrinks its object gets an error.
- mapped: the object mapped (`mmap`) and copied with numpy, as Triton does; a client that shrinks its object
  under the copy kills the process with SIGBUS, which is why oip-asgi does not map.

Each a median of `--rounds` samples of the process's CPU time over `--calls` copies, per copy, ways alternating.

    python bench/shm_copy.py [--rounds 5] [--calls 50] [--mib 16]
"""

from __future__ import annotations

import argparse
import mmap
import os
import statistics
import time
import uuid
from collections.abc import Callable

import numpy as np


def measure(fd: int, mapping: mmap.mmap, size: int, rounds: int, calls: int) -> dict[str, float]:
    """Each way's median CPU time per copy, in ms."""
    source = np.ones(size, np.uint8)
    mapped = np.frombuffer(mapping, np.uint8)
    ways: dict[str, Callable[[], object]] = {
        "preadv into a new array": lambda: os.preadv(fd, [memoryview(np.empty(size, np.uint8))], 0),
        "pwritev from an array": lambda: os.pwritev(fd, [memoryview(source)], 0),
        "mapped: copied into a new array": mapped.copy,
        "mapped: an array copied in": lambda: np.copyto(mapped, source),
    }
    samples: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(rounds):
        for name, way in ways.items():
            way()
            started = time.process_time()
            for _ in range(calls):
                way()
            samples[name].append((time.process_time() - started) / calls * 1e3)
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--mib", type=int, default=16)
    args = parser.parse_args()
    size = args.mib * 2**20
    path = f"/dev/shm/oip_bench_{uuid.uuid4().hex}"
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        os.ftruncate(fd, size)
        os.pwrite(fd, b"\1" * size, 0)
        with mmap.mmap(fd, size) as mapping:
            figures = measure(fd, mapping, size, args.rounds, args.calls)
        for name, value in figures.items():
            print(f"{name}: {value:.2f} ms CPU per {args.mib} MiB copy")
    finally:
        os.close(fd)
        os.unlink(path)


if __name__ == "__main__":
    main()
