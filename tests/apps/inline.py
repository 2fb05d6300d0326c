"""Plain `def` models that answer where they ran: `ON_LOOP` is 1 on the serve command's event loop (its main
thread), 0 on a worker thread. `placed` may run inline once cheap; `kept` says ``inline=False``. Every call
counts as cheap here (the budget raised as the tests in tests/core do), so where a call runs follows from the
calls before it, never from the machine's speed."""

from __future__ import annotations

import threading

import numpy as np

from oip_asgi import Model, TensorSpec
from oip_asgi._core import inline

inline.BUDGET_NS = 10**9


def _where(X: np.ndarray) -> dict[str, np.ndarray]:
    on_loop = threading.current_thread() is threading.main_thread()
    return {"ON_LOOP": np.array([int(on_loop)], np.int32)}


_SPECS = {"inputs": [TensorSpec("X", "INT32", [1])], "outputs": [TensorSpec("ON_LOOP", "INT32", [1])]}
models = {"placed": Model(_where, **_SPECS), "kept": Model(_where, **_SPECS, inline=False)}
