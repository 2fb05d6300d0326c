"""Models for the `oip-asgi serve` tests, which tell the test what happened through files.

``OIP_TEST_EVENTS`` names a file each process appends lines to ("import <pid>", "load <pid>",
"start <pid>"); ``OIP_TEST_GATE`` names a file whose existence lets the `gated` model finish loading
and the `slow` model answer.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import numpy as np

from oip_asgi import Model, TensorSpec, oip_app


def record(event: str) -> None:
    if "OIP_TEST_EVENTS" in os.environ:
        with open(os.environ["OIP_TEST_EVENTS"], "a") as events:
            events.write(f"{event} {os.getpid()}\n")


def recorded(path: Path, kind: str) -> list[int]:
    """The pids of the `kind` lines written to `path` so far: whole lines only (a line is seen before it is whole)."""
    lines = path.read_text().splitlines(keepends=True) if path.exists() else []
    return [int(line.split()[1]) for line in lines if line.startswith(kind + " ") and line.endswith("\n")]


record("import")


async def which_process(X: np.ndarray) -> np.ndarray:
    # Holds its worker's event loop for a moment, on purpose: connections made meanwhile land on
    # another worker, so concurrent requests reach them all.
    time.sleep(0.2)
    return np.array([os.getpid()], dtype=np.int64)


async def slow(SECONDS: np.ndarray) -> np.ndarray:
    """Answers after SECONDS, or as soon as the file ``OIP_TEST_GATE`` names appears: a test opens the gate
    once the event it waits for has happened, instead of sleeping through a guess of how long that takes."""
    record("start")
    gate = os.environ.get("OIP_TEST_GATE")
    deadline = time.monotonic() + float(SECONDS[0])
    while time.monotonic() < deadline and not (gate and Path(gate).exists()):
        await asyncio.sleep(0.01)
    return SECONDS


def load_counted() -> None:
    record("load")


async def load_at_the_gate() -> None:
    gate = Path(os.environ["OIP_TEST_GATE"])
    for _ in range(600):
        if gate.exists():
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"{gate} never appeared")


pid = Model(
    which_process,
    inputs=[TensorSpec("X", "INT64", [-1])],
    outputs=[TensorSpec("PID", "INT64", [1])],
    load=load_counted,
)

models = {
    "pid": pid,
    "slow": Model(slow, inputs=[TensorSpec("SECONDS", "FP32", [1])], outputs=[TensorSpec("SECONDS", "FP32", [1])]),
}

gated = {
    "gated": Model(
        lambda X: X,
        inputs=[TensorSpec("X", "FP32", [-1])],
        outputs=[TensorSpec("Y", "FP32", [-1])],
        load=load_at_the_gate,
    )
}

# For other process managers (gunicorn): the same models as an ASGI app, the protocol at its root.
app = oip_app(models)

# An app that logs a line per inference: where do the lines go under `oip-asgi serve`?
logged = oip_app(
    {"echo": Model(lambda X: X, inputs=[TensorSpec("X", "INT64", [-1])], outputs=[TensorSpec("Y", "INT64", [-1])])},
    access_log=True,
)
