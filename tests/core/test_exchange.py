"""A core that can answer many times: the per-request shell around a body, and each wire's exchange
sending several responses to one request (start, each response, finish).

No model streams yet: a test body stands in for the streaming one, calling the model once and sending
its outputs `RESPONSES` times, each scaled by its index so that every response is told apart.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import numpy as np
import pytest

from oip_asgi import Model, TensorSpec, oip_app
from oip_asgi._core.inference import model_outputs
from oip_asgi._core.responding import Exchange, Reply
from oip_asgi._core.serving import ServedModel
from oip_asgi._core.statistics import RequestTimes
from oip_asgi._declarations.errors import BadRequest, ClientDisconnected
from oip_asgi._rest.app import OIPApp, _RESTExchange
from oip_asgi._rest.responses import ResponseStream, SendFailed
from tests.support.waiting import HANG

pytestmark = pytest.mark.anyio

RESPONSES = 2
SPECS: dict[str, Any] = {"inputs": [TensorSpec("x", "FP32", [-1])], "outputs": [TensorSpec("y", "FP32", [-1])]}
REQUEST = {"id": "r1", "inputs": [{"name": "x", "datatype": "FP32", "shape": [2], "data": [1.0, 2.0]}]}


async def double(x: np.ndarray) -> np.ndarray:
    return x * 2


async def several(model: ServedModel, exchange: Exchange[Any], times: RequestTimes) -> None:
    """A body that answers `RESPONSES` times: response k holds the model's output times k + 1."""
    request = await exchange.decode(model)
    result = await model(request, times)
    outputs, parameters = model_outputs(model, request, result)
    model.statistics.succeeded(times, times.ended)
    await exchange.start()
    for index in range(RESPONSES):
        scaled = [msgspec.structs.replace(output, array=output.array * (index + 1)) for output in outputs]
        await exchange.send_next(exchange.encode(Reply(model, request, scaled, parameters)))
    await exchange.finish()


def http_scope(path: str = "/models/m/infer") -> dict[str, Any]:
    body = json.dumps(REQUEST).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    return {"type": "http", "method": "POST", "path": path, "root_path": "", "query_string": b"", "headers": headers}


def http_receive() -> Any:
    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": json.dumps(REQUEST).encode(), "more_body": False}

    return receive


# -- REST: server-sent events through a streaming sender ---------------------------------------------------


async def test_a_rest_request_answered_twice_is_one_event_stream_of_two_events(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="oip_asgi.access")
    app = oip_app({"m": Model(double, **SPECS)}, access_log=True)
    messages: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    await app.core.infer("m", None, _RESTExchange(app, http_scope(), http_receive(), send), several)

    start, *events, end = messages
    assert start["type"] == "http.response.start" and start["status"] == 200
    headers = dict(start["headers"])
    assert headers[b"content-type"] == b"text/event-stream" and b"content-length" not in headers
    assert [event["more_body"] for event in events] == [True] * RESPONSES
    data = [event["body"] for event in events]
    assert all(body.startswith(b"data: ") and body.endswith(b"\n\n") for body in data)
    answers = [json.loads(body[len(b"data: ") :]) for body in data]
    assert [answer["outputs"][0]["data"] for answer in answers] == [[2.0, 4.0], [4.0, 8.0]]
    assert {answer["id"] for answer in answers} == {"r1"}
    assert end == {"type": "http.response.body", "body": b""}  # the end of the body
    # One line for the request, whatever the number of responses; and one success in the statistics.
    (line,) = [record.getMessage() for record in caplog.records]
    assert f" bytes_out={sum(map(len, data))} responses={RESPONSES} " in line and " status=200 " in line
    assert msgspec.to_builtins(app.core.statistics("m"))["model_stats"][0]["inference_stats"]["success"]["count"] == 1


async def test_the_one_response_of_a_rest_request_keeps_its_length_and_logs_one_response(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="oip_asgi.access")
    app = oip_app({"m": Model(double, **SPECS)}, access_log=True)
    messages: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    await app(http_scope(), http_receive(), send)
    start, body = messages
    assert dict(start["headers"])[b"content-length"] == str(len(body["body"])).encode()
    assert json.loads(body["body"])["outputs"][0]["data"] == [2.0, 4.0]
    (line,) = [record.getMessage() for record in caplog.records]
    assert f" bytes_out={len(body['body'])} responses=1 " in line


async def test_binary_outputs_cannot_go_out_as_events() -> None:
    app: OIPApp = oip_app({"m": Model(double, **SPECS)})
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    exchange = _RESTExchange(app, http_scope(), http_receive(), send)
    await exchange.start()
    with pytest.raises(BadRequest, match="binary outputs cannot be sent as server-sent events"):
        await exchange.send_next((b"{}", [b"\x00\x00\x80\x3f"]))
    assert exchange.responses == 0 and len(sent) == 1  # the start only


@pytest.mark.parametrize("step", ["start", "send", "finish"])
@pytest.mark.parametrize(
    ("failure", "seen"), [(ConnectionResetError(), ClientDisconnected), (RuntimeError("closed"), SendFailed)]
)
async def test_each_part_of_a_stream_fails_as_a_whole_response_does(
    step: str, failure: Exception, seen: type[Exception]
) -> None:
    async def send(message: dict[str, Any]) -> None:
        if {"start": "http.response.start", "send": "body", "finish": "body"}[step] in message["type"]:
            if step != "finish" or not message.get("more_body"):
                raise failure

    stream = ResponseStream(send)
    with pytest.raises(seen):
        await stream.start(200, [])
        await stream.send(b"data: {}\n\n")
        await stream.finish()


# -- gRPC: each request's responses on the call's output queue ---------------------------------------------


def stream_request(model: str, request_id: str) -> bytes:
    from tests.support.grpc import request

    return request(model, ("x", "FP32", np.array([1.0, 2.0], np.float32)), id=request_id).SerializeToString()


async def requests_of(*bodies: bytes) -> AsyncIterator[bytes]:
    for body in bodies:
        yield body


def answering(app: OIPApp, body: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """`app`'s gRPC service whose core answers every request with `body`."""
    pytest.importorskip("grpc")
    from oip_asgi.grpc._service import InferenceService

    core = app.core
    infer = core.infer
    monkeypatch.setattr(core, "infer", lambda name, version, exchange, *_: infer(name, version, exchange, body))
    return InferenceService(app)


async def test_a_grpc_stream_sends_every_response_of_each_request_in_request_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from oip_asgi.grpc import inference_pb2 as pb
    from tests.support.grpc import output_array

    service = answering(oip_app({"m": Model(double, **SPECS)}), several, monkeypatch)
    stream = service.model_stream_infer(requests_of(stream_request("m", "a"), stream_request("m", "b")), None)
    answers = [pb.ModelStreamInferResponse.FromString(message) async for message in stream]
    assert [answer.infer_response.id for answer in answers] == ["a", "a", "b", "b"]
    assert not any(answer.error_message for answer in answers)
    values = [output_array(answer.infer_response, "y", np.float32).tolist() for answer in answers]
    assert values == [[2.0, 4.0], [4.0, 8.0]] * 2


async def test_a_grpc_response_is_asked_for_only_once_the_previous_one_was_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    steps: list[str] = []

    async def counted(model: ServedModel, exchange: Exchange[Any], times: RequestTimes) -> None:
        request = await exchange.decode(model)
        outputs, parameters = model_outputs(model, request, await model(request, times))
        await exchange.start()
        for index in range(3):
            steps.append(f"send {index}")
            await exchange.send_next(exchange.encode(Reply(model, request, outputs, parameters)))
            steps.append(f"taken {index}")
        await exchange.finish()

    service = answering(oip_app({"m": Model(double, **SPECS)}), counted, monkeypatch)
    stream = service.model_stream_infer(requests_of(stream_request("m", "a")), None)
    await stream.__anext__()
    assert steps == ["send 0"]  # handed to grpcio, which has not asked for the next: the body waits
    await stream.__anext__()
    assert steps == ["send 0", "taken 0", "send 1"]
    await stream.__anext__()
    assert steps[-1] == "send 2"
    with pytest.raises(StopAsyncIteration):
        await stream.__anext__()
    assert steps[-1] == "taken 2"


async def test_a_failure_after_the_responses_ended_sends_nothing_more(monkeypatch: pytest.MonkeyPatch) -> None:
    async def fails_after(model: ServedModel, exchange: Exchange[Any], times: RequestTimes) -> None:
        await several(model, exchange, times)
        raise BadRequest("too late to tell the client")

    service = answering(oip_app({"m": Model(double, **SPECS)}), fails_after, monkeypatch)
    stream = service.model_stream_infer(requests_of(stream_request("m", "a"), stream_request("m", "b")), None)
    answers = [message async for message in stream]
    assert len(answers) == 2 * RESPONSES  # each request's two responses, and no error after them


async def test_model_infer_refuses_an_answer_of_several_responses(monkeypatch: pytest.MonkeyPatch) -> None:
    service = answering(oip_app({"m": Model(double, **SPECS)}), several, monkeypatch)
    with pytest.raises(BadRequest, match="model 'm' answers with several responses, .* use ModelStreamInfer"):
        await service.model_infer(stream_request("m", "a"))


async def test_a_grpc_stream_whose_client_left_stops_its_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    stopped = asyncio.Event()

    async def endless(model: ServedModel, exchange: Exchange[Any], times: RequestTimes) -> None:
        request = await exchange.decode(model)
        outputs, parameters = model_outputs(model, request, await model(request, times))
        await exchange.start()
        try:
            while True:
                await exchange.send_next(exchange.encode(Reply(model, request, outputs, parameters)))
        finally:
            stopped.set()

    service = answering(oip_app({"m": Model(double, **SPECS)}), endless, monkeypatch)
    stream = service.model_stream_infer(requests_of(stream_request("m", "a")), None)
    await stream.__anext__()
    await stream.aclose()  # grpcio closes the handler's generator when the call is cancelled
    await asyncio.wait_for(stopped.wait(), timeout=HANG)
