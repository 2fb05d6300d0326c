"""Adaptive batching: every request gets exactly its own rows back, batches stay within their bounds."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oip_asgi import Model, Result, TensorSpec, oip_app
from oip_asgi._core.request import DecodedRequest
from oip_asgi._core.serving import ServedModel
from oip_asgi._core.statistics import RequestTimes
from tests.support.client import client

pytestmark = pytest.mark.anyio

MAX_ROWS = 6


@dataclass(frozen=True)
class Call:
    rows: int
    width: int
    parameters: Any


def ask(served: ServedModel, inputs: dict[str, np.ndarray], parameters: dict[str, Any]) -> Any:
    """`served` called as the core calls it, with one request's value."""
    return served(DecodedRequest(inputs, parameters=parameters), RequestTimes())


def batched(calls: list[Call], *, is_async: bool, takes_parameters: bool, **options: Any) -> Model:
    """A model that records each call and answers X * 2 + offset, its rows' count in ROWS."""

    def answer(X: np.ndarray, parameters: dict[str, Any] | None = None) -> dict[str, np.ndarray]:
        offset = (parameters or {}).get("offset", 0)
        calls.append(Call(len(X), X.shape[1], offset if takes_parameters else None))
        return {"Y": X * 2 + offset, "ROWS": np.full(len(X), len(X), dtype=np.int64)}

    async def answer_async(X: np.ndarray, parameters: dict[str, Any] | None = None) -> dict[str, np.ndarray]:
        await asyncio.sleep(0)
        return answer(X, parameters)

    function = answer_async if is_async else answer
    predict: Any = function if takes_parameters else (lambda X: function(X))
    return Model(
        predict,
        inputs=[TensorSpec("X", "FP32", [-1, -1])],
        outputs=[TensorSpec("Y", "FP32", [-1, -1]), TensorSpec("ROWS", "INT64", [-1])],
        max_batch_size=options.pop("max_batch_size", MAX_ROWS),
        max_batch_delay=options.pop("max_batch_delay", 0.001),
        **options,
    )


requests = st.lists(
    st.tuples(st.integers(1, MAX_ROWS + 2), st.sampled_from([3, 4]), st.sampled_from([0, 10])),
    min_size=1,
    max_size=24,
)


@settings(max_examples=40, deadline=None)
@given(requests=requests, is_async=st.booleans(), takes_parameters=st.booleans())
def test_any_interleaving_gets_its_own_rows_within_the_bounds(
    requests: list[tuple[int, int, int]], is_async: bool, takes_parameters: bool
) -> None:
    calls: list[Call] = []
    app = oip_app({"m": batched(calls, is_async=is_async or takes_parameters, takes_parameters=takes_parameters)})
    served = app.core.served.get("m")
    arrays = [
        np.arange(rows * width, dtype=np.float32).reshape(rows, width) + index
        for index, (rows, width, _) in enumerate(requests)
    ]

    async def main() -> list[Any]:
        pairs = zip(arrays, requests, strict=True)
        return await asyncio.gather(*(ask(served, {"X": array}, {"offset": offset}) for array, (_, _, offset) in pairs))

    results = asyncio.run(main())
    for array, (_, _, offset), result in zip(arrays, requests, results, strict=True):
        expected = array * 2 + (offset if takes_parameters else 0)
        np.testing.assert_array_equal(result["Y"], expected)  # its own rows, in order
    # Every row was computed exactly once; each call held one kind of request and stayed within the bound,
    # except a request larger than the bound, which ran alone.
    assert sum(call.rows for call in calls) == sum(rows for rows, _, _ in requests)
    oversized = sorted(rows for rows, _, _ in requests if rows > MAX_ROWS)
    assert sorted(call.rows for call in calls if call.rows > MAX_ROWS) == oversized
    assert served.batcher is not None and served.batcher.batches == len(calls)
    kinds = [(width, offset if takes_parameters else None) for _, width, offset in requests]
    assert {(call.width, call.parameters) for call in calls} <= set(kinds)
    # Requests of at most half the bound, sent together: two of one kind always share a call
    # (a batch that another of its kind does not fit is full with at least two).
    if all(rows <= MAX_ROWS // 2 for rows, _, _ in requests) and len(kinds) > len(set(kinds)):
        assert len(calls) < len(requests)


async def test_a_full_batch_runs_at_once_without_waiting_for_its_delay() -> None:
    calls: list[Call] = []
    app = oip_app({"m": batched(calls, is_async=True, takes_parameters=False, max_batch_size=4, max_batch_delay=60)})
    served = app.core.served.get("m")
    one_row = {"X": np.ones((1, 3), dtype=np.float32)}
    results = await asyncio.wait_for(asyncio.gather(*(ask(served, one_row, {}) for _ in range(4))), timeout=30)
    assert [result["ROWS"].tolist() for result in results] == [[4]] * 4
    assert calls == [Call(4, 3, None)]


async def test_each_member_of_a_failed_batch_gets_the_failure_and_the_batcher_serves_on() -> None:
    state = {"broken": True}

    def wrong_rows(X: np.ndarray) -> np.ndarray:
        return X[:1] if state["broken"] else X

    spec = [TensorSpec("X", "INT32", [-1])]
    model = Model(
        wrong_rows, inputs=spec, outputs=[TensorSpec("Y", "INT32", [-1])], max_batch_size=3, max_batch_delay=60
    )
    app = oip_app({"m": model})
    body = {"inputs": [{"name": "X", "shape": [1], "datatype": "INT32", "data": [1]}]}
    async with client(app) as http:
        responses = await asyncio.gather(*(http.post("/models/m/infer", json=body) for _ in range(3)))
        assert [response.status_code for response in responses] == [500] * 3
        assert {response.json()["error"] for response in responses} == {
            "batched model 'm' returned 1 rows for output 'Y' from a batch of 3 rows (requests of 1, 1, 1); "
            "each output needs one row per input row"
        }
        bad = {"inputs": [{"name": "X", "shape": [1], "datatype": "FP32", "data": [1]}]}
        state["broken"] = False
        responses = await asyncio.gather(
            http.post("/models/m/infer", json=bad), *(http.post("/models/m/infer", json=body) for _ in range(3))
        )
        assert responses[0].status_code == 400  # refused before it could join, it fails nobody else
        assert [response.status_code for response in responses[1:]] == [200] * 3


async def test_a_request_whose_client_left_is_dropped_from_its_batch() -> None:
    calls: list[Call] = []
    app = oip_app({"m": batched(calls, is_async=True, takes_parameters=False, max_batch_size=3, max_batch_delay=60)})
    served = app.core.served.get("m")
    row = {"X": np.ones((1, 2), dtype=np.float32)}
    leaving = asyncio.ensure_future(ask(served, row, {}))
    await asyncio.sleep(0)
    staying = asyncio.ensure_future(ask(served, row, {}))
    await asyncio.sleep(0)
    leaving.cancel()
    await asyncio.sleep(0)
    third = asyncio.ensure_future(ask(served, {"X": np.ones((1, 2), dtype=np.float32)}, {}))
    await asyncio.sleep(0)
    assert calls == []  # 3 rows joined (one has left): the batch is full and runs without the one that left
    assert (await staying)["ROWS"].tolist() == [2] and (await third)["ROWS"].tolist() == [2]
    assert calls == [Call(2, 2, None)] and served.in_flight == 0


async def test_results_with_parameters_and_single_arrays_are_split_too() -> None:
    def predict(X: np.ndarray) -> Result:
        return Result(X + 1, parameters={"rows": len(X)})

    model = Model(
        predict,
        inputs=[TensorSpec("X", "INT64", [-1])],
        outputs=[TensorSpec("Y", "INT64", [-1])],
        max_batch_size=2,
        max_batch_delay=60,
    )
    served = oip_app({"m": model}).core.served.get("m")
    first, second = await asyncio.gather(ask(served, {"X": np.array([1])}, {}), ask(served, {"X": np.array([5])}, {}))
    assert first.outputs.tolist() == [2] and second.outputs.tolist() == [6]
    assert first.parameters == second.parameters == {"rows": 2}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_batch_size": 0}, "max_batch_size must be a whole number of rows, at least 1"),
        ({"max_batch_size": 4, "max_batch_delay": -1}, "max_batch_delay is in seconds and at least 0"),
        ({"max_batch_size": 4, "inputs": None}, "declares its inputs and outputs"),
        (
            {"max_batch_size": 4, "outputs": [TensorSpec("Y", "FP32", [4])]},
            "a variable first dimension (-1) on every input and output; 'Y' do not",
        ),
    ],
    ids=["size", "delay", "undeclared", "fixed-first-dimension"],
)
def test_batching_options_are_checked_when_the_model_is_built(options: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {
        "inputs": [TensorSpec("X", "FP32", [-1])],
        "outputs": [TensorSpec("Y", "FP32", [-1])],
        **options,
    }
    with pytest.raises(ValueError) as raised:
        Model(lambda X: X, **arguments)
    assert message in str(raised.value)
