"""The cost around a model's call (issues 31 and 40): the heap kept out of full collections once models
have loaded, and a sync model's calls cheaper than the hop to a thread run on the event loop (a model
file's, and a plain `def`'s after a streak of cheap calls)."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import weakref
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from oip_asgi import Model, TensorSpec, oip_app
from oip_asgi._core import heap, inline
from oip_asgi._core.inline import FUNCTION_STREAK
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


# -- a plain `def`'s cheap calls on the event loop ----------------------------------------------------------------


class _Function:
    """A plain `def` model (its `__call__`) that records the thread of each call, and blocks or fails when told."""

    def __init__(self) -> None:
        self.threads: list[int] = []
        self.entered = threading.Event()  # a call of 8 elements has started
        self.release = threading.Event()  # and ends once this is set
        self.raises: BaseException | None = None

    def __call__(self, x: np.ndarray) -> np.ndarray:
        self.threads.append(threading.get_ident())
        if x.size == 8:
            self.entered.set()
            assert self.release.wait(HANG)
        if self.raises is not None:
            raise self.raises
        return x

    def on_loop(self) -> list[bool]:
        loop_thread = threading.get_ident()  # the test's: httpx's ASGI transport runs the app on its loop
        return [thread == loop_thread for thread in self.threads]


async def test_a_plain_defs_calls_run_on_the_event_loop_after_a_streak_of_cheap_ones(cheap: pytest.MonkeyPatch) -> None:
    function = _Function()
    async with client(oip_app({"m": Model(function, **SPECS)})) as http:
        for _ in range(FUNCTION_STREAK + 3):  # measured on threads until the streak is long enough, then inline
            assert (await http.post("/models/m/infer", json=body(4))).json()["outputs"][0]["data"] == [1.0] * 4
        assert function.on_loop() == [False] * FUNCTION_STREAK + [True] * 3
        assert (await http.post("/models/m/infer", json=body(5))).status_code == 200
        assert function.on_loop()[-1] is False  # larger than any call measured: on a thread


async def test_a_def_slow_now_and_then_goes_back_to_threads_for_twice_the_streak_unless_it_was_rare(
    cheap: pytest.MonkeyPatch,
) -> None:
    cheap.setattr(inline, "FORGIVEN_AFTER", 3)  # a slow inline call after 3 cheap inline ones counts as noise
    function = _Function()
    async with client(oip_app({"m": Model(function, **SPECS)})) as http:

        async def calls(count: int, *, slow: bool = False) -> list[bool]:
            cheap.setattr(inline, "BUDGET_NS", 0 if slow else 10**9)  # every call over the budget, or none
            before = len(function.threads)
            for _ in range(count):
                assert (await http.post("/models/m/infer", json=body(4))).status_code == 200
            return function.on_loop()[before:]

        assert await calls(FUNCTION_STREAK + 1) == [False] * FUNCTION_STREAK + [True]
        # Slow once, one cheap inline call after the streak: it held up the loop for that call, then threads.
        assert await calls(2, slow=True) == [True, False]
        # The slow call on the loop doubled the streak needed (the one on a thread only started it again).
        assert await calls(2 * FUNCTION_STREAK + 3) == [False] * 2 * FUNCTION_STREAK + [True] * 3
        # Slow after 3 cheap inline calls: noise, forgiven; the streak needed is back to its start.
        assert await calls(1, slow=True) == [True]
        assert await calls(FUNCTION_STREAK + 1) == [False] * FUNCTION_STREAK + [True]


async def test_a_def_measured_over_the_budget_stays_on_the_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inline, "BUDGET_NS", 0)  # every call is over it, however fast the machine
    function = _Function()
    async with client(oip_app({"m": Model(function, **SPECS)})) as http:
        for _ in range(3 * FUNCTION_STREAK):
            assert (await http.post("/models/m/infer", json=body(4))).status_code == 200
    assert function.on_loop() == [False] * 3 * FUNCTION_STREAK


async def test_a_def_that_sleeps_is_never_judged_cheap() -> None:
    threads: list[int] = []

    def sleepy(x: np.ndarray) -> np.ndarray:  # no CPU to speak of, but a millisecond of wall time: over the budget
        threads.append(threading.get_ident())
        time.sleep(0.001)
        return x

    assert inline.BUDGET_NS < 1_000_000
    async with client(oip_app({"m": Model(sleepy, **SPECS)})) as http:
        for _ in range(3 * FUNCTION_STREAK):
            assert (await http.post("/models/m/infer", json=body(4))).status_code == 200
    assert threading.get_ident() not in threads and len(threads) == 3 * FUNCTION_STREAK


async def test_a_def_with_another_request_of_its_model_in_flight_runs_on_a_thread(cheap: pytest.MonkeyPatch) -> None:
    function = _Function()
    async with client(oip_app({"m": Model(function, **SPECS)})) as http:
        for _ in range(FUNCTION_STREAK + 1):
            assert (await http.post("/models/m/infer", json=body(4))).status_code == 200
        assert function.on_loop()[-1] is True
        # 8 elements: larger than any measured, so on a thread, where it waits until released.
        held = asyncio.ensure_future(http.post("/models/m/infer", json=body(8)))
        await until(function.entered.is_set, "the call of 8 elements started")
        assert (await http.post("/models/m/infer", json=body(4))).status_code == 200
        assert function.on_loop()[-1] is False  # cheap, but the model had another request in flight
        function.release.set()
        assert (await held).status_code == 200
    assert function.on_loop()[-2:] == [False, False]


@pytest.mark.parametrize(
    "model",
    [
        pytest.param(lambda function: Model(function, **SPECS, inline=False), id="inline=False"),
        # Each batch is one request of 4 rows: it runs once full, never on its delay.
        pytest.param(lambda function: Model(function, **SPECS, max_batch_size=4, max_batch_delay=HANG), id="batched"),
    ],
)
async def test_a_def_that_keeps_its_thread_always_runs_on_one(cheap: pytest.MonkeyPatch, model: Any) -> None:
    function = _Function()
    async with client(oip_app({"m": model(function)})) as http:
        for _ in range(3 * FUNCTION_STREAK):
            assert (await http.post("/models/m/infer", json=body(4))).status_code == 200
    assert function.on_loop() == [False] * 3 * FUNCTION_STREAK


def test_inline_is_true_or_false() -> None:
    with pytest.raises(TypeError, match="inline must be True or False, got str"):
        Model(lambda x: x, inline="no")  # type: ignore[arg-type]
    assert Model(lambda x: x, inline=False).replace(version="2").inline is False


@pytest.mark.parametrize("raised", [ValueError("told to fail"), SystemExit(3), KeyboardInterrupt()], ids=repr)
async def test_a_def_that_fails_inline_is_a_500_and_the_server_serves_on(
    cheap: pytest.MonkeyPatch, raised: BaseException
) -> None:
    function = _Function()
    async with client(oip_app({"m": Model(function, **SPECS)})) as http:
        for _ in range(FUNCTION_STREAK):
            await http.post("/models/m/infer", json=body(4))
        function.raises = raised  # as on a thread: a BaseException fails the call, not the event loop
        response = await http.post("/models/m/infer", json=body(4))
        assert function.on_loop()[-1] is True
        assert response.status_code == 500
        assert response.json()["error"] == f"model 'm' raised {type(raised).__name__}: {raised}"
        function.raises = None
        assert (await http.post("/models/m/infer", json=body(4))).status_code == 200


async def test_a_def_inline_sets_context_variables_in_a_copy_and_a_coroutine_it_returns_is_awaited(
    cheap: pytest.MonkeyPatch,
) -> None:
    import contextvars

    seen: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="unset")
    threads: list[int] = []

    def later(x: np.ndarray) -> Any:
        threads.append(threading.get_ident())
        seen.set("by the model")  # in the call's own copy, as on a thread

        async def outputs() -> np.ndarray:
            return x * 2

        return outputs()

    async with client(oip_app({"m": Model(later, **SPECS)})) as http:
        for _ in range(FUNCTION_STREAK + 1):
            response = await http.post("/models/m/infer", json=body(2))
            assert response.json()["outputs"][0]["data"] == [2.0, 2.0]
    assert threads[-1] == threading.get_ident() and seen.get() == "unset"


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
