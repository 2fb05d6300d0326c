"""Sync models on the app's worker threads: bounded, context-carrying, fork-safe, failures kept as the model's."""

from __future__ import annotations

import asyncio
import contextvars
import os
import sys
import textwrap
import threading
from typing import Any

import numpy as np
import pytest

from oip_asgi import Model, TensorSpec, oip_app
from oip_asgi._core.request import DecodedRequest
from oip_asgi._core.statistics import RequestTimes
from oip_asgi._core.workers import WorkerPool
from tests.support.client import client
from tests.support.waiting import HANG, until

pytestmark = pytest.mark.anyio

REQUEST = {"inputs": [{"name": "x", "shape": [1], "datatype": "INT32", "data": [1]}]}
SPECS = {"inputs": [TensorSpec("x", "INT32", [-1])], "outputs": [TensorSpec("y", "INT32", [-1])]}
request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")


async def test_threads_are_bounded_and_started_on_demand() -> None:
    started = threading.Barrier(3)  # two model calls and the test meet here
    release = threading.Event()
    seen: set[int] = set()

    def held(x: np.ndarray) -> np.ndarray:
        seen.add(threading.get_ident())
        if len(seen) <= 2 and not release.is_set():
            started.wait(timeout=HANG)
            release.wait(timeout=HANG)
        return x

    app = oip_app({"m": Model(held, **SPECS)}, max_threads=2)
    assert app.core.pool.threads == 0
    async with client(app) as http:
        calls = [asyncio.ensure_future(http.post("/models/m/infer", json=REQUEST)) for _ in range(6)]
        await asyncio.to_thread(started.wait, HANG)  # both threads are busy; four calls wait for one
        assert app.core.pool.threads == 2
        release.set()
        assert [(await call).status_code for call in calls] == [200] * 6
    assert len(seen) == 2 and app.core.pool.threads == 2


async def test_context_variables_reach_a_sync_model() -> None:
    def reads(x: np.ndarray) -> np.ndarray:
        return np.array([len(request_id.get())], dtype=np.int32)

    app = oip_app({"m": Model(reads, **SPECS)})
    request_id.set("abcdefg")
    async with client(app) as http:
        response = await http.post("/models/m/infer", json=REQUEST)
    assert response.json()["outputs"][0]["data"] == [7]


@pytest.mark.parametrize("raised", [SystemExit(2), KeyboardInterrupt()], ids=["SystemExit", "KeyboardInterrupt"])
async def test_base_exceptions_from_a_sync_model_are_its_failure(raised: BaseException) -> None:
    def escapes(x: np.ndarray) -> np.ndarray:
        raise raised

    app = oip_app({"m": Model(escapes, **SPECS), "ok": Model(lambda x: x, **SPECS)})
    async with client(app) as http:
        response = await http.post("/models/m/infer", json=REQUEST)
        assert response.status_code == 500
        assert response.json()["error"] == f"model 'm' raised {type(raised).__name__}: {raised}"
        assert (await http.post("/models/ok/infer", json=REQUEST)).status_code == 200  # the thread serves on
    assert app.core.pool.threads == 1


async def test_a_caller_that_leaves_frees_its_slot_and_the_thread_finishes_its_call() -> None:
    started, gate, finished = threading.Event(), threading.Event(), threading.Event()

    def slow(x: np.ndarray) -> np.ndarray:
        started.set()
        gate.wait(timeout=HANG)
        finished.set()
        return x

    model = Model(slow, **SPECS, max_concurrency=1)
    app = oip_app({"m": model}, max_threads=1)
    served = app.core.served.get("m")
    call = asyncio.ensure_future(served(DecodedRequest({"x": np.array([1], np.int32)}), RequestTimes()))
    assert await asyncio.to_thread(started.wait, HANG)
    assert served.in_flight == 1
    call.cancel()  # the client left: the request's task is cancelled
    with pytest.raises(asyncio.CancelledError):
        await call
    assert served.in_flight == 0
    gate.set()
    assert await asyncio.to_thread(finished.wait, HANG)
    # The one thread is free again.
    result = await served(DecodedRequest({"x": np.array([5], np.int32)}), RequestTimes())
    assert result.tolist() == [5] and app.core.pool.threads == 1


async def test_lifespan_shutdown_stops_the_threads() -> None:
    def workers() -> set[int | None]:
        return {thread.ident for thread in threading.enumerate() if thread.name == "oip-asgi-model"}

    others = workers()  # other apps' threads
    app = oip_app({"m": Model(lambda x: x, **SPECS)})
    async with client(app) as http:
        assert (await http.post("/models/m/infer", json=REQUEST)).status_code == 200
    before = workers() - others
    assert len(before) == 1
    messages = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])

    async def receive() -> Any:
        return next(messages)

    async def send(message: Any) -> None:
        pass

    await app({"type": "lifespan"}, receive, send)
    await until(lambda: not workers() & before, "the worker threads stopped")
    assert app.core.pool.threads == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
@pytest.mark.slow
def test_the_pool_starts_afresh_in_a_forked_child() -> None:
    # In a fresh interpreter: forking a process with pytest's threads around is its own hazard.
    code = textwrap.dedent(
        """
        import asyncio, os, sys, warnings
        from oip_asgi._core.workers import WorkerPool
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads: the point of the test
        pool = WorkerPool(2)
        async def square(n):
            return await pool.run(lambda value: value * value, n)
        assert asyncio.run(square(3)) == 9 and pool.threads == 1
        pid = os.fork()
        if pid == 0:
            ok = pool.threads == 0 and asyncio.run(square(4)) == 16 and pool.threads == 1
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        sys.exit(os.waitstatus_to_exitcode(status) or (asyncio.run(square(5)) != 25))
        """
    )
    import subprocess

    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_max_threads_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_threads must be at least 1"):
        WorkerPool(0)
