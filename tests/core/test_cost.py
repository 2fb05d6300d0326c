"""The cost around a model's call (issue 31): the heap kept out of full collections once models have
loaded, and a model file's calls cheaper than the hop to a thread run on the event loop."""

from __future__ import annotations

import asyncio
import gc
import threading
import weakref
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from oip_asgi import Model, TensorSpec, oip_app
from oip_asgi._core import heap, inline
from oip_asgi._core.server import ServerCore
from oip_asgi._declarations.calling import COMPUTES_ONLY
from oip_asgi._declarations.files._common import Runner
from oip_asgi._hosts.cli.target import load_target
from tests.core.test_core import adding
from tests.support.client import client
from tests.support.waiting import HANG, until

pytestmark = pytest.mark.anyio


@pytest.fixture
def thawed() -> Iterator[None]:
    gc.unfreeze()  # whatever an earlier test froze: each test here starts from an unfrozen heap
    yield
    gc.unfreeze()


# -- the heap ----------------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("thawed")
async def test_loading_the_models_freezes_the_heap_only_when_asked() -> None:
    await ServerCore({"m": adding(1)}).load()  # a mounted app leaves its host's process alone
    assert gc.get_freeze_count() == 0
    await ServerCore({"m": adding(1)}, freeze_heap=True).load()
    assert gc.get_freeze_count() > 0


def test_the_serve_command_freezes_the_heap_of_what_it_serves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "oip_cost_served.py").write_text(
        "from oip_asgi import oip_app\nmodels = {'m': lambda x: x}\napp = oip_app(models)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for target in ("oip_cost_served:models", "oip_cost_served:app"):  # a mapping, and an app built without it
        assert load_target(target).core.freeze_heap, target


class _Cyclic:
    """A model that holds a reference cycle, as many do: only the garbage collector frees it."""

    def __init__(self) -> None:
        self.me = self

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return x


@pytest.mark.usefixtures("thawed")
async def test_an_unloaded_model_frozen_with_the_heap_is_collected_and_the_heap_settles_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(heap, "SETTLE_AFTER", 0.01)
    cyclic = _Cyclic()
    gone = weakref.ref(cyclic)
    core = ServerCore({}, freeze_heap=True)
    await core.put_model("m", Model(cyclic, inputs=[TensorSpec("x", "INT32", [-1])]))
    await core.load()  # frozen with everything else
    del cyclic
    await core.remove_model("m")
    assert gc.get_freeze_count() == 0  # thawed at once
    gc.collect()
    assert gone() is None  # a frozen object is never collected: the unload thawed it
    await until(lambda: gc.get_freeze_count() > 0)  # and the heap settled again once changes stopped
    core.shutdown()


# -- a model file's cheap calls on the event loop ----------------------------------------------------------------


class _Recording(Runner):
    """A model file's runner that records the thread of each call, and fails when told."""

    def __init__(self) -> None:
        self.outputs = ["y"]
        self.threads: list[int] = []
        self.fail = False

    def __call__(self, **inputs: np.ndarray) -> Mapping[str, np.ndarray]:
        self.threads.append(threading.get_ident())
        if self.fail:
            raise ValueError("told to fail")
        return {"y": inputs["x"]}


SPECS: dict[str, Any] = {"inputs": [TensorSpec("x", "FP32", [-1])], "outputs": [TensorSpec("y", "FP32", [-1])]}


def body(elements: int) -> dict[str, Any]:
    return {"inputs": [{"name": "x", "shape": [elements], "datatype": "FP32", "data": [1.0] * elements}]}


@pytest.fixture
def cheap(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """Every call counts as cheaper than the hop, whatever the machine's load (no test here times anything)."""
    monkeypatch.setattr(inline, "BUDGET_NS", 10**9)
    return monkeypatch


async def test_a_model_files_cheap_calls_run_on_the_event_loop_and_larger_or_slower_ones_on_threads(
    cheap: pytest.MonkeyPatch,
) -> None:
    runner = _Recording()
    loop_thread = threading.get_ident()
    async with client(oip_app({"m": Model(runner, **SPECS, calling=COMPUTES_ONLY)})) as http:
        for _ in range(2):  # the first call runs on a thread and is measured; the next of its size inline
            assert (await http.post("/models/m/infer", json=body(4))).status_code == 200
        assert runner.threads[0] != loop_thread and runner.threads[1] == loop_thread
        assert (await http.post("/models/m/infer", json=body(8))).status_code == 200
        assert runner.threads[-1] != loop_thread  # larger than any call measured: on a thread
        cheap.setattr(inline, "BUDGET_NS", 0)  # from now on every call is over the budget
        assert (await http.post("/models/m/infer", json=body(4))).status_code == 200  # inline, found too slow
        assert runner.threads[-1] == loop_thread
        assert (await http.post("/models/m/infer", json=body(4))).status_code == 200
        assert runner.threads[-1] != loop_thread  # back on the threads


async def test_a_plain_sync_function_always_runs_on_a_worker_thread(cheap: pytest.MonkeyPatch) -> None:
    threads: list[int] = []

    def identity(x: np.ndarray) -> np.ndarray:
        threads.append(threading.get_ident())
        return x

    async with client(oip_app({"m": Model(identity, **SPECS)})) as http:
        for _ in range(10):
            assert (await http.post("/models/m/infer", json=body(4))).status_code == 200
    assert threading.get_ident() not in threads and len(threads) == 10


@pytest.mark.usefixtures("cheap")
async def test_a_model_file_that_fails_inline_is_a_500_naming_the_model() -> None:
    runner = _Recording()
    loop_thread = threading.get_ident()
    async with client(oip_app({"m": Model(runner, **SPECS, calling=COMPUTES_ONLY)})) as http:
        await http.post("/models/m/infer", json=body(4))  # measured on a thread
        runner.fail = True
        response = await http.post("/models/m/infer", json=body(4))
    assert runner.threads[-1] == loop_thread
    assert response.status_code == 500
    assert response.json()["error"] == "model 'm' raised ValueError: told to fail"


@pytest.mark.usefixtures("cheap")
async def test_a_model_files_call_with_other_requests_in_flight_runs_on_a_thread() -> None:
    runner = _Recording()
    loop_thread = threading.get_ident()
    # Every batch here runs once it is full (8 elements), never on its delay, however slow the machine.
    model = Model(runner, **SPECS, calling=COMPUTES_ONLY, max_batch_size=8, max_batch_delay=HANG)
    async with client(oip_app({"m": model})) as http:
        for _ in range(2):  # a lone request of 8 elements: measured, then inline
            assert (await http.post("/models/m/infer", json=body(8))).status_code == 200
        assert runner.threads[-1] == loop_thread
        both = await asyncio.gather(*(http.post("/models/m/infer", json=body(4)) for _ in range(2)))
    assert [response.status_code for response in both] == [200, 200]
    assert len(runner.threads) == 3  # one batch of the two: 8 elements, as measured inline
    assert runner.threads[-1] != loop_thread  # but two requests in flight: on a thread
