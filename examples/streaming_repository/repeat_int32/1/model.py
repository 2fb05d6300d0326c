"""repeat_int32: for each element of IN, after DELAY[i] milliseconds, one response holding OUT = [IN[i]]
and IDX = [i]; then WAIT[0] milliseconds before the request ends. A decoupled model: a generator."""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np

from oip_asgi import BadRequest


def model(IN: np.ndarray, DELAY: np.ndarray, WAIT: np.ndarray) -> Iterator[dict[str, np.ndarray]]:
    if len(DELAY) != len(IN):
        raise BadRequest(f"DELAY has {len(DELAY)} elements for the {len(IN)} of IN: one delay per response")
    for index, (value, delay) in enumerate(zip(IN.tolist(), DELAY.tolist(), strict=True)):
        time.sleep(delay / 1000)  # on a worker thread: the event loop serves on meanwhile
        yield {"OUT": np.array([value], np.int32), "IDX": np.array([index], np.uint32)}
    time.sleep(int(WAIT[0]) / 1000)
