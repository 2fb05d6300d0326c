"""Models that answer over time, in process: what makes a model decoupled, where its generator runs,
back-pressure, its limits and counts, a repository's config, and the Lambda adapter (which buffers)."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import numpy as np
import pytest

from oip_asgi import Model, ModelRepository, TensorSpec, oip_app
from oip_asgi._declarations.repository import RepositoryError, read_model
from tests.support.waiting import HANG

pytestmark = pytest.mark.anyio

X = [TensorSpec("x", "FP32", [-1])]
Y = [TensorSpec("y", "FP32", [-1])]


def three(x: np.ndarray) -> Iterator[np.ndarray]:
    for index in range(3):
        yield x * index


async def three_async(x: np.ndarray) -> AsyncIterator[np.ndarray]:
    for index in range(3):
        yield x * index


class Callable:
    def __call__(self, x: np.ndarray) -> Iterator[np.ndarray]:
        yield x


def client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://test")


def events(body: bytes) -> list[Any]:
    return [json.loads(chunk[len(b"data: ") :]) for chunk in body.split(b"\n\n") if chunk]


# -- Declarations ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("predict", [three, three_async, Callable()], ids=["generator", "async", "instance"])
def test_a_generator_is_a_decoupled_model(predict: Any) -> None:
    assert Model(predict, inputs=X, outputs=Y).decoupled
    assert not Model(lambda x: x).decoupled


def test_a_decoupled_model_cannot_batch() -> None:
    with pytest.raises(ValueError, match="a decoupled model .* cannot batch: leave max_batch_size unset"):
        Model(three, inputs=X, outputs=Y, max_batch_size=8)


def _folder(root: Path, source: str, config: str) -> None:
    (root / "m" / "1").mkdir(parents=True)
    (root / "m" / "1" / "model.py").write_text(source)
    (root / "m" / "config.pbtxt").write_text(config)


TENSORS = """
input [ { name: "x", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "y", data_type: TYPE_FP32, dims: [ -1 ] } ]
"""


def test_a_config_that_says_decoupled_for_a_model_that_answers_once_is_refused(tmp_path: Path) -> None:
    _folder(tmp_path, "model = lambda x: x\n", "model_transaction_policy { decoupled: true }\n" + TENSORS)
    with pytest.raises(
        RepositoryError, match=r"declares model_transaction_policy \{ decoupled: true \}, but version 1"
    ):
        read_model(tmp_path, "m")


def test_a_repository_generator_is_decoupled_and_its_config_says_so(tmp_path: Path) -> None:
    source = "def model(x):\n    yield x\n    yield x + 1\n"
    _folder(tmp_path, source, 'backend: "python"\n' + TENSORS)  # the config need not say it
    read = read_model(tmp_path, "m")
    assert read.versions[0].decoupled
    assert read.config is not None and read.config["model_transaction_policy"] == {"decoupled": True}
    assert not read.warnings  # model_transaction_policy is acted on


def test_a_reshaped_generator_stays_a_generator(tmp_path: Path) -> None:
    source = "def model(x):\n    yield {'y': x}\n"
    config = (
        "model_transaction_policy { decoupled: true }\n"
        'input [ { name: "x", data_type: TYPE_FP32, dims: [ 2 ], reshape: { shape: [ 1, 2 ] } } ]\n'
        'output [ { name: "y", data_type: TYPE_FP32, dims: [ 2 ], reshape: { shape: [ 1, 2 ] } } ]\n'
    )
    _folder(tmp_path, source, config)
    assert read_model(tmp_path, "m").versions[0].decoupled


async def test_a_decoupled_model_with_dynamic_batching_fails_to_load(tmp_path: Path) -> None:
    config = "max_batch_size: 4\ndynamic_batching { }\n" + TENSORS.replace("[ -1 ]", "[ 1 ]")
    _folder(tmp_path, "def model(x):\n    yield x\n", config)
    app = oip_app(model_repository=ModelRepository(tmp_path, model_control_mode="explicit"))
    async with client(app) as http:
        response = await http.post("/repository/models/m/load")
    assert response.status_code == 400
    assert "cannot batch" in response.json()["error"]


# -- Where a generator runs, and when it is asked for more ----------------------------------------------


async def test_a_sync_generator_runs_on_the_worker_threads() -> None:
    threads: list[int] = []

    def where(x: np.ndarray) -> Iterator[np.ndarray]:
        threads.append(threading.get_ident())
        yield x
        threads.append(threading.get_ident())
        yield x
        threads.append(threading.get_ident())

    app = oip_app({"m": Model(where, inputs=X, outputs=Y)})
    async with client(app) as http:
        response = await http.post("/models/m/generate_stream", json={"x": [1.0]})
    assert len(events(response.content)) == 2
    assert threading.get_ident() not in threads and len(threads) == 3


async def test_the_next_value_is_asked_for_once_the_wire_took_the_previous_one() -> None:
    steps: list[str] = []

    def counted(x: np.ndarray) -> Iterator[np.ndarray]:
        for index in range(3):
            steps.append(f"yield {index}")
            yield x

    app = oip_app({"m": Model(counted, inputs=X, outputs=Y)})
    sent = asyncio.Event()
    taken = asyncio.Event()

    async def receive() -> dict[str, Any]:
        if not hasattr(receive, "done"):
            receive.done = True  # type: ignore[attr-defined]
            return {"type": "http.request", "body": b'{"x": [1.0]}', "more_body": False}
        await asyncio.Event().wait()  # the client stays
        raise AssertionError

    async def send(message: dict[str, Any]) -> None:
        if message.get("more_body"):
            steps.append("sent")
            sent.set()
            await taken.wait()  # a slow client: the wire has not taken it yet
            taken.clear()

    scope = {"type": "http", "method": "POST", "path": "/models/m/generate_stream", "root_path": "",
             "query_string": b"", "headers": []}  # fmt: skip
    answering = asyncio.create_task(app(scope, receive, send))
    await sent.wait()
    assert steps == ["yield 0", "sent"]  # the model waits for the client
    sent.clear()
    taken.set()
    await sent.wait()
    assert steps == ["yield 0", "sent", "yield 1", "sent"]
    taken.set()
    sent.clear()
    await sent.wait()
    taken.set()
    await answering
    assert steps.count("yield 2") == 1


async def test_max_concurrency_bounds_the_streams_in_flight() -> None:
    release = threading.Event()

    def held(x: np.ndarray) -> Iterator[np.ndarray]:
        yield x
        release.wait(10)

    app = oip_app({"m": Model(held, inputs=X, outputs=Y, max_concurrency=1)})
    async with client(app) as http:
        first = asyncio.create_task(http.post("/models/m/generate_stream", json={"x": [1.0]}))
        while not app.core.served.get("m").in_flight:
            await asyncio.sleep(0)
        busy = await http.post("/models/m/generate_stream", json={"x": [1.0]})
        release.set()
        assert (await first).status_code == 200
    assert busy.status_code == 503
    assert events(busy.content) == [{"error": "model 'm' is busy: 1 requests already in flight, retry later"}]


async def test_statistics_and_the_access_log_count_a_stream_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="oip_asgi.access")

    def fails(x: np.ndarray) -> Iterator[np.ndarray]:
        yield x
        raise RuntimeError("ran dry")

    app = oip_app({"m": Model(three, inputs=X, outputs=Y), "f": Model(fails, inputs=X, outputs=Y)}, access_log=True)
    async with client(app) as http:
        await http.post("/models/m/generate_stream", json={"x": [1.0]})
        response = await http.post("/models/f/generate_stream", json={"x": [1.0]})
    assert events(response.content)[-1] == {"error": "model 'f' raised RuntimeError: ran dry"}
    stats = msgspec.to_builtins(app.core.statistics("m"))["model_stats"][0]
    assert (stats["inference_count"], stats["execution_count"]) == (1, 1)
    assert stats["inference_stats"]["success"]["count"] == 1
    failed = msgspec.to_builtins(app.core.statistics("f"))["model_stats"][0]["inference_stats"]
    assert (failed["success"]["count"], failed["fail"]["count"]) == (0, 1)
    lines = [record.getMessage() for record in caplog.records if record.name == "oip_asgi.access"]
    assert len(lines) == 2 and " responses=3 " in lines[0] and " status=200 " in lines[0]
    assert " responses=1 " in lines[1] and " status=500 " in lines[1]  # the request failed, after one response


async def test_the_openapi_document_lists_generate_and_generate_stream() -> None:
    async with client(oip_app({})) as http:
        paths = (await http.get("/openapi.json")).json()["paths"]
    assert "post" in paths["/models/{model_name}/generate"]
    assert "text/event-stream" in json.dumps(paths["/models/{model_name}/generate_stream"])


# -- AWS Lambda: Mangum buffers the response --------------------------------------------------------------


def test_generate_and_a_buffered_generate_stream_through_the_lambda_adapter() -> None:
    oip_asgi_lambda = pytest.importorskip("oip_asgi_lambda")
    from tests.hosts.test_lambda import CONTEXT, TEXT, http_api_event, response_json

    handler = oip_asgi_lambda.handler({"m": Model(three, inputs=X, outputs=Y)}, prefix="/v2")
    once = oip_asgi_lambda.handler({"m": Model(lambda x: x * 2, inputs=X, outputs=Y)}, prefix="/v2")
    response = once(http_api_event("POST", "/v2/models/m/generate", b'{"x": [1.5]}', TEXT), CONTEXT)
    assert response["statusCode"] == 200 and response_json(response)["y"] == 3.0
    response = handler(http_api_event("POST", "/v2/models/m/generate_stream", b'{"x": [1.5]}', TEXT), CONTEXT)
    assert response["statusCode"] == 200
    assert response["headers"]["content-type"] == "text/event-stream; charset=utf-8"
    assert [answer["y"] for answer in events(response["body"].encode())] == [0.0, 1.5, 3.0]


async def test_a_client_that_leaves_closes_a_sync_generator_on_a_worker_thread() -> None:
    closed: asyncio.Future[tuple[int, int]] = asyncio.get_running_loop().create_future()
    loop = asyncio.get_running_loop()

    def endless(x: np.ndarray) -> Iterator[np.ndarray]:
        index = 0
        try:
            while True:
                yield x + index
                index += 1
        finally:
            loop.call_soon_threadsafe(closed.set_result, (threading.get_ident(), index))

    app = oip_app({"m": Model(endless, inputs=X, outputs=Y)})
    first_event = asyncio.Event()
    body_sent = False

    async def receive() -> dict[str, Any]:
        nonlocal body_sent
        if not body_sent:
            body_sent = True
            return {"type": "http.request", "body": b'{"x": [1.0]}', "more_body": False}
        await first_event.wait()
        return {"type": "http.disconnect"}  # the client leaves once it has its first event

    async def send(message: dict[str, Any]) -> None:
        if message.get("more_body"):
            first_event.set()
            await asyncio.Event().wait()  # a client that reads no more: the model waits meanwhile

    scope = {"type": "http", "method": "POST", "path": "/models/m/generate_stream", "root_path": "",
             "query_string": b"", "headers": []}  # fmt: skip
    await app(scope, receive, send)  # returns: the request ended when its client left
    thread, yielded = await asyncio.wait_for(closed, timeout=HANG)
    assert thread != threading.get_ident() and yielded == 0  # closed at its first yield, off the loop
    served = app.core.served.get("m")
    assert served.in_flight == 0
    # Counted as Triton counts a request cancelled while it runs: a failure, for the reason CANCELED.
    assert (served.statistics.fail.count, served.statistics.failures["CANCELED"]) == (1, 1)


async def test_the_empty_final_response_is_the_streams_to_act_on_not_the_models() -> None:
    pytest.importorskip("grpc")
    from oip_asgi.grpc import inference_pb2 as pb
    from oip_asgi.grpc._service import InferenceService

    seen: list[dict[str, Any]] = []

    def echo(x: np.ndarray, parameters: dict[str, Any]) -> Iterator[np.ndarray]:
        seen.append(parameters)
        yield x

    def request(value: Any) -> bytes:
        message = pb.ModelInferRequest(model_name="m", id=str(value))
        message.inputs.add(name="x", datatype="FP32", shape=[1]).contents.fp32_contents.append(1.0)
        parameter = message.parameters["triton_enable_empty_final_response"]
        if isinstance(value, bool):
            parameter.bool_param = value
        else:
            parameter.string_param = value
        message.parameters["temperature"].double_param = 0.5
        return message.SerializeToString()

    async def requests() -> AsyncIterator[bytes]:
        yield request(True)
        yield request("yes")

    service = InferenceService(oip_app({"m": Model(echo, inputs=X, outputs=Y)}))
    answers = [
        pb.ModelStreamInferResponse.FromString(message)
        async for message in service.model_stream_infer(requests(), None)
    ]
    assert seen == [{"temperature": 0.5}]  # the model never sees the stream's own parameter
    # A decoupled model's responses go as they come (as Triton writes them): each request's in its own order.
    final = sorted(
        [(a.infer_response.id, a.error_message, a.infer_response.parameters["triton_final_response"].bool_param)
         for a in answers], key=lambda answer: answer[0],
    )  # fmt: skip
    assert final == [
        ("True", "", False),
        ("True", "", True),  # the empty final response it asked for
        ("yes", "invalid value type for 'triton_enable_empty_final_response' parameter, expected bool_param.", True),
    ]
    (empty,) = [a for a in answers if a.infer_response.id == "True" and not a.infer_response.outputs]
    assert empty.infer_response.model_version == "1"


async def test_a_traced_stream_is_one_span_with_its_responses() -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = oip_app({"m": Model(three, inputs=X, outputs=Y)}, tracing=True)
    app.core.respond.tracer = provider.get_tracer("oip_asgi")
    async with client(app) as http:
        await http.post("/models/m/generate_stream", json={"x": [1.0]})
    (span,) = exporter.get_finished_spans()
    assert span.name == "oip.model m"
    assert dict(span.attributes or {}) == {"oip.model.name": "m", "oip.model.version": "1", "oip.responses": 3}


# -- Cancellation, as docs/streaming.md says it arrives (issue 35) -----------------------------------------

DOC = Path(__file__).resolve().parents[2] / "docs" / "streaming.md"
N = [TensorSpec("n", "INT64", [1])]
INDEX = [TensorSpec("index", "INT64", [1])]


async def leave_stream(app: Any, model: str, body: bytes, moment: str, leave: asyncio.Event | None = None) -> None:
    """A /generate_stream client that leaves once `leave` is set (by default: once the first event was sent).

    "at its yield": it never finishes taking the first event, so the value the model yielded waits to be
    sent when it leaves; "computing": it takes every event at once, so the model is computing its next one.
    """
    first_event = asyncio.Event()
    body_sent = False

    async def receive() -> dict[str, Any]:
        nonlocal body_sent
        if not body_sent:
            body_sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await (leave or first_event).wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message.get("more_body") and message.get("body"):
            first_event.set()
            if moment == "at its yield":
                await asyncio.Event().wait()  # a client that reads no more

    scope = {"type": "http", "method": "POST", "path": f"/models/{model}/generate_stream", "root_path": "",
             "query_string": b"", "headers": []}  # fmt: skip
    await app(scope, receive, send)


async def closed(app: Any) -> None:
    """Once a sync generator's close (queued on the one worker thread) has run."""
    await app.core.pool.run(lambda: None)


@pytest.mark.parametrize("moment", ["computing", "at its yield"])
async def test_a_client_that_leaves_an_async_generator_sends_cancelled_error_at_its_await_or_generator_exit_at_yield(
    moment: str,
) -> None:
    arrived: list[str] = []
    freed: list[str] = []
    waiting = asyncio.Event()

    async def counts(n: np.ndarray) -> AsyncIterator[np.ndarray]:
        try:
            for index in range(int(n[0])):
                if index:
                    waiting.set()
                    await asyncio.Event().wait()  # the work between values, which never ends here
                yield np.array([index], dtype=np.int64)
        except BaseException as exc:
            arrived.append(type(exc).__name__)
            raise
        finally:
            freed.append("freed")

    app = oip_app({"m": Model(counts, inputs=N, outputs=INDEX)})
    await leave_stream(app, "m", b'{"n": [5]}', moment, leave=waiting if moment == "computing" else None)
    assert arrived == (["CancelledError"] if moment == "computing" else ["GeneratorExit"])
    assert freed == ["freed"]
    assert app.core.served.get("m").in_flight == 0


async def test_a_client_that_leaves_a_sync_generator_sends_generator_exit_at_its_yield() -> None:
    arrived: list[str] = []

    def counts(n: np.ndarray) -> Iterator[np.ndarray]:
        try:
            for index in range(int(n[0])):
                yield np.array([index], dtype=np.int64)
        except BaseException as exc:
            arrived.append(type(exc).__name__)
            raise

    app = oip_app({"m": Model(counts, inputs=N, outputs=INDEX)}, max_threads=1)
    await leave_stream(app, "m", b'{"n": [5]}', "at its yield")
    await closed(app)
    assert arrived == ["GeneratorExit"]


@pytest.mark.parametrize(
    ("model", "moment"),
    [("ticks", "at its yield"), ("ticks_async", "computing"), ("ticks_async", "at its yield")],
)
async def test_the_documented_cancellation_form_frees_for_both_kinds(model: str, moment: str) -> None:
    (recipe,) = re.findall(r"<!-- recipe: cancellation -->\n```python\n(.*?)```", DOC.read_text(), re.DOTALL)
    namespace: dict[str, Any] = {"__name__": "recipe"}
    exec(compile(recipe, "docs/streaming.md (cancellation)", "exec"), namespace)
    app = oip_app({model: Model(namespace[model], inputs=N, outputs=INDEX)}, max_threads=1)
    # "computing": the first event taken, the async generator is in its sleep before the next when the client
    # leaves (the disconnect is read once the loop runs the watch, before any timer can end).
    await leave_stream(app, model, b'{"n": [1000]}', moment)
    await closed(app)
    assert namespace["held"] == []
