"""Triton's Python models as Triton runs them, in process, on both wires (REST through httpx's ASGI transport,
gRPC through a grpc.aio server and channel on the same loop, over one app): helpers beside model.py, decoupled
async executes that overlap, BLS from an async execute and from initialize, a batched decoupled model, response
senders in a model that is not decoupled, is_cancelled() on unary requests, Triton's gRPC error mode, its reserved
request parameters, and the generate extension's parameters that name inputs. The models are
tests/support/triton_models.py's; tests/e2e/test_python_backend_triton_e2e.py runs them with tritonclient."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

grpc = pytest.importorskip("grpc")

from oip_asgi import ModelRepository, OIPApp, oip_app  # noqa: E402
from oip_asgi._core.reserved import GRPC_REFUSAL, REST_REFUSAL  # noqa: E402
from oip_asgi._declarations.python_backend import utils as pb_utils  # noqa: E402
from oip_asgi._declarations.python_backend.outlets import Sent, Streamed  # noqa: E402
from oip_asgi._declarations.request import DecodedRequest  # noqa: E402
from oip_asgi.grpc import inference_pb2 as pb  # noqa: E402
from oip_asgi.grpc import serving  # noqa: E402
from tests.support.client import client  # noqa: E402
from tests.support.grpc import output_array, request  # noqa: E402
from tests.support.triton_models import write_repository  # noqa: E402
from tests.support.waiting import HANG, has_text, until  # noqa: E402

pytestmark = pytest.mark.anyio
INFER = "/inference.GRPCInferenceService/ModelInfer"
STREAM = "/inference.GRPCInferenceService/ModelStreamInfer"
DATATYPES = {np.dtype(np.int32): "INT32", np.dtype(np.object_): "BYTES"}


@dataclass
class Answer:
    """What a client got: the outputs, or the error (REST's status and gRPC's code name, and the message)."""

    outputs: dict[str, Any] | None = None
    status: int | str = 200
    message: str = ""
    id: str = ""


class Wires:
    """One app over both wires on the test's loop: REST in process, gRPC on a local port."""

    def __init__(self, app: OIPApp, http: httpx.AsyncClient, channel: Any, root: Path) -> None:
        self.app, self.http, self.channel, self.root = app, http, channel, root

    async def infer(self, wire: str, model: str, parameters: dict[str, Any] | None = None, **inputs: Any) -> Answer:
        arrays = {name: np.asarray(value) for name, value in inputs.items()}
        if wire == "rest":
            body: dict[str, Any] = {"inputs": [_json_input(name, array) for name, array in arrays.items()]}
            if parameters:
                body["parameters"] = parameters
            response = await self.http.post(f"/models/{model}/infer", json=body)
            if response.status_code != 200:
                return Answer(status=response.status_code, message=response.json()["error"])
            outputs = {out["name"]: np.array(out["data"]).reshape(out["shape"]) for out in response.json()["outputs"]}
            return Answer(outputs)
        message = _grpc_request(model, arrays, parameters)
        call = self.channel.unary_unary(INFER)
        try:
            answered = pb.ModelInferResponse.FromString(await call(message.SerializeToString(), timeout=HANG))
        except grpc.aio.AioRpcError as error:
            return Answer(status=error.code().name, message=error.details())
        return Answer({out.name: output_array(answered, out.name, np.int32) for out in answered.outputs})

    async def each(self, wire: str, model: str, requests: Sequence[dict[str, Any]]) -> list[Answer]:
        """`requests` sent at once (REST: each a /generate call; gRPC: on one stream); the answers in the order
        they came."""
        if wire == "rest":
            came: list[Answer] = []

            async def one(index: int, inputs: dict[str, Any]) -> None:
                body = {"id": str(index), **{name: np.asarray(v).ravel().tolist() for name, v in inputs.items()}}
                response = await self.http.post(f"/models/{model}/generate", json=body)
                answer = response.json()
                if response.status_code != 200:
                    came.append(Answer(status=response.status_code, message=answer["error"], id=str(index)))
                else:
                    came.append(Answer({key: value for key, value in answer.items()}, id=answer["id"]))

            await asyncio.gather(*(one(index, inputs) for index, inputs in enumerate(requests)))
            return came
        messages = [
            _grpc_request(model, {name: np.asarray(v, np.int32) for name, v in inputs.items()}, None, id=str(index))
            for index, inputs in enumerate(requests)
        ]
        answers = []
        async for body in self.channel.stream_stream(STREAM)(
            iter([message.SerializeToString() for message in messages]), timeout=HANG
        ):
            answer = pb.ModelStreamInferResponse.FromString(body)
            if answer.error_message:
                answers.append(Answer(status="error", message=answer.error_message, id=answer.infer_response.id))
            else:
                response = answer.infer_response
                outputs = {out.name: output_array(response, out.name, np.int32).tolist() for out in response.outputs}
                answers.append(Answer(outputs, id=response.id))
        return answers


def _json_input(name: str, array: np.ndarray) -> dict[str, Any]:
    data = [item.decode() for item in array.ravel()] if array.dtype == object else array.ravel().tolist()
    return {"name": name, "datatype": DATATYPES[array.dtype], "shape": list(array.shape), "data": data}


def _grpc_request(
    model: str, arrays: dict[str, np.ndarray], parameters: dict[str, Any] | None, **fields: Any
) -> pb.ModelInferRequest:
    message = request(model, *[(name, DATATYPES[array.dtype], array) for name, array in arrays.items()], **fields)
    for key, value in (parameters or {}).items():
        kind = {bool: "bool_param", int: "int64_param", str: "string_param", float: "double_param"}[type(value)]
        setattr(message.parameters[key], kind, value)
    return message


@pytest.fixture
async def wires(tmp_path: Path) -> AsyncIterator[Wires]:
    root = write_repository(tmp_path)
    app = oip_app(model_repository=ModelRepository(root, model_control_mode="explicit", load_models=["*"]))
    async with serving(app, "127.0.0.1:0") as port, client(app) as http:
        await app.load()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield Wires(app, http, channel, root)


WIRES = ["rest", "grpc"]
I32 = np.int32


# -- 1. helpers beside model.py ----------------------------------------------------------------------------------


async def test_models_import_their_own_helpers_absolute_and_relative_and_unload_them(wires: Wires) -> None:
    for wire in WIRES:
        for name in ("imports_a", "imports_b"):
            answer = await wires.infer(wire, name, IN=np.array([1], I32))
            assert answer.outputs is not None, answer
            # Each its own model_common (Triton gives each model its own interpreter), its folder's shared.py.
            text = answer.outputs["OUT"].ravel()[0]
            assert (text.decode() if isinstance(text, bytes) else text) == (
                f"{name[-1]}:{name[-1]}:file1:file2:the folder of {name}"
            )
    assert "model_common" not in sys.modules  # no top-level helper that a third model would get
    helpers = {f"oip_asgi_repository.imports_a.1.{helper}" for helper in ("model_common", "file1", "file2", "shared")}
    assert helpers <= set(sys.modules)
    assert (await wires.http.post("/repository/models/imports_a/unload")).status_code == 200
    assert not helpers & set(sys.modules)  # unloading frees the model's helpers with it
    assert (await wires.infer("grpc", "imports_b", IN=np.array([1], I32))).outputs is not None


# -- 2. decoupled async executes overlap -------------------------------------------------------------------------


@pytest.mark.parametrize("wire", WIRES)
async def test_four_async_decoupled_executes_run_at_once_and_answer_out_of_order(wires: Wires, wire: str) -> None:
    # One instance: each execute waits for all four to be in flight, and answers once those after it have.
    answers = await wires.each(wire, "overlap", [{"ROUND": [0], "KEY": [key]} for key in range(4)])
    assert [answer.message for answer in answers] == [""] * 4
    assert [answer.id for answer in answers] == ["3", "2", "1", "0"]  # as they finished, the last first


# -- 3. BLS where Triton allows it, refused where it refuses it ---------------------------------------------------


@pytest.mark.parametrize("wire", WIRES)
async def test_sync_bls_and_an_iterated_async_decoupled_bls_from_an_async_execute(wires: Wires, wire: str) -> None:
    answer = await wires.infer(wire, "bls_from_async", X=np.array([3], I32))
    assert answer.outputs is not None, answer
    assert answer.outputs["DOUBLED"].tolist() == [6]
    assert answer.outputs["COUNTED"].tolist() == [1, 2, 3]  # exec(decoupled=True)'s responses
    assert answer.outputs["NEXT"].tolist() == [1, 2, 3]  # await async_exec(decoupled=True): next(), then for
    assert answer.outputs["SIZES"].tolist() == [4, 3]  # an empty last response where the FINAL flag came alone


async def test_a_response_sent_with_the_final_flag_is_marked_final_and_no_empty_one_follows(wires: Wires) -> None:
    for model, finals in (("count", [False, False, True]), ("count_final", [False, True])):
        message = _grpc_request(model, {"IN": np.array([2], I32)}, {"triton_enable_empty_final_response": True})
        stream = wires.channel.stream_stream(STREAM)(iter([message.SerializeToString()]), timeout=HANG)
        answers = [pb.ModelStreamInferResponse.FromString(body) async for body in stream]
        assert [a.infer_response.parameters["triton_final_response"].bool_param for a in answers] == finals, model
        assert [len(a.infer_response.outputs) for a in answers] == [1] * (len(finals) - 1) + [int(model != "count")]


async def test_bls_in_initialize_fails_the_load_with_tritons_words(wires: Wires) -> None:
    assert not wires.app.core.model_ready("bls_in_initialize")
    for wire in WIRES:
        answer = await wires.infer(wire, "bls_in_initialize", IN=np.array([1], I32))
        assert answer.status in (503, "UNAVAILABLE")
        assert "BLS is only supported during the 'execute' function." in answer.message


def test_bls_in_finalize_fails_as_tritons_and_the_unload_goes_on(tmp_path: Path) -> None:
    from oip_asgi._declarations.repository import read_model

    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "1" / "model.py").write_text(
        "import triton_python_backend_utils as pb_utils\n\nclass TritonPythonModel:\n"
        "    def execute(self, requests):\n        return None\n\n"
        "    def finalize(self):\n"
        "        pb_utils.InferenceRequest(model_name='m', inputs=[], requested_output_names=[]).exec()\n"
    )
    model = read_model(tmp_path, "m").versions[0]
    assert model.load is not None and model.unload is not None
    model.load()
    with pytest.raises(pb_utils.TritonModelException, match=r"BLS is only supported during the 'execute' function\."):
        model.unload()


# -- 4. a decoupled model batches -----------------------------------------------------------------------------------


@pytest.mark.parametrize("wire", WIRES)
async def test_a_batched_decoupled_model_fails_one_request_of_two_through_its_sender(wires: Wires, wire: str) -> None:
    answers = await wires.each(wire, "batched_decoupled", [{"IN": [[7]]}, {"IN": [[-1]]}])
    by_id = {answer.id: answer for answer in answers}
    assert by_id["0"].outputs is not None and np.asarray(by_id["0"].outputs["OUT"]).ravel().tolist() == [7, 2]
    assert by_id["1"].outputs is None and "key -1 refused" in by_id["1"].message  # that request only
    if wire == "rest":
        assert by_id["1"].status == 400  # INVALID_ARG, as Triton's HTTP frontend answers it


# -- 5. a response sender in a model that is not decoupled --------------------------------------------------------


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("model", ["sender", "sender_async"])
async def test_a_model_that_is_not_decoupled_answers_through_its_sender(wires: Wires, wire: str, model: str) -> None:
    tag = WIRES.index(wire) * 10 + (model == "sender_async") * 100
    for case in (1, 2, 3):  # sent before returning; sent after returning; sent, and returned as well
        answer = await wires.infer(wire, model, HOW=np.array([tag + case], I32))
        assert answer.outputs is not None, answer
        assert answer.outputs["OUT"].tolist() == [tag + case]  # the one sent (a returned one is dropped)
    answer = await wires.infer(wire, model, HOW=np.array([tag + 4], I32))  # returned, then sent: the returned one
    assert answer.outputs is not None and answer.outputs["OUT"].tolist() == [tag + 4]
    (wires.root / model / f"go.{(tag + 4) // 10}").write_text("")
    refused = wires.root / model / f"refused.{(tag + 4) // 10}"
    await until(lambda: has_text(refused), "the model tried its second response")
    assert refused.read_text() == "Unable to send response. Response sender has been closed."
    answer = await wires.infer(wire, model, HOW=np.array([tag + 5], I32))  # FINAL before any response
    assert answer.status in (500, "INTERNAL")
    assert "Non-decoupled model cannot send complete final before sending a response" in answer.message


def test_the_senders_refuse_what_tritons_refuse() -> None:
    FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
    response = pb_utils.InferenceResponse()
    loop = asyncio.new_event_loop()
    try:
        decoupled = pb_utils.InferenceResponseSender(Streamed(loop, DecodedRequest({})))
        with pytest.raises(pb_utils.TritonModelException, match="must be provided when the response flags is set"):
            decoupled.send()
        with pytest.raises(pb_utils.TritonModelException, match="Unsupported flag provided"):
            decoupled.send(response, flags=2)
        decoupled.send(response)
        decoupled.send(response)  # a decoupled model sends any number
        decoupled.send(flags=FINAL)
        with pytest.raises(pb_utils.TritonModelException, match="Response sender has been closed"):
            decoupled.send(response)
    finally:
        loop.close()
    once = pb_utils.InferenceResponseSender(Sent(DecodedRequest({})))
    once.send(response)
    with pytest.raises(pb_utils.TritonModelException, match="cannot send more than one response"):
        once.send(response)
    once.send(flags=FINAL)
    with pytest.raises(pb_utils.TritonModelException, match="Response sender has been closed"):
        once.send(flags=FINAL)


# -- 6. is_cancelled() for a request that is not decoupled -----------------------------------------------------------


@pytest.mark.parametrize("model", ["waits", "waits_async"])
async def test_is_cancelled_turns_true_once_a_grpc_client_cancels_a_unary_request(wires: Wires, model: str) -> None:
    call = wires.channel.unary_unary(INFER)(_grpc_request(model, {"IN": np.array([1], I32)}, None).SerializeToString())
    running, cancelled = wires.root / model / "running.1", wires.root / model / "cancelled.1"
    await until(running.exists, "the request reached execute")
    call.cancel()
    await until(lambda: has_text(cancelled), "the model saw its request cancelled")


@pytest.mark.parametrize("model", ["waits", "waits_async"])
async def test_is_cancelled_turns_true_once_a_rest_client_disconnects(wires: Wires, model: str) -> None:
    # The ASGI messages a server sends: the body, then (once the test says) the client's leaving.
    body = json.dumps({"inputs": [{"name": "IN", "datatype": "INT32", "shape": [1], "data": [2]}]}).encode()
    left = asyncio.Event()
    messages = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop(0)
        await left.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    headers = [(b"content-length", str(len(body)).encode())]
    scope = {"type": "http", "method": "POST", "path": f"/models/{model}/infer", "raw_path": b"", "root_path": "",
             "query_string": b"", "headers": headers, "http_version": "1.1"}  # fmt: skip
    answering = asyncio.get_running_loop().create_task(wires.app(scope, receive, send))
    running, cancelled = wires.root / model / "running.2", wires.root / model / "cancelled.2"
    await until(running.exists, "the request reached execute")
    assert not cancelled.exists()
    left.set()
    await until(lambda: has_text(cancelled), "the model saw its client leave")
    await asyncio.wait_for(answering, HANG)  # and the request ends


# -- 7. Triton's gRPC error mode -------------------------------------------------------------------------------


def _numbered(model: str, value: int) -> bytes:
    return _grpc_request(model, {"IN": np.array([value], I32)}, None, id=str(value)).SerializeToString()


async def test_triton_grpc_error_ends_the_stream_with_the_errors_status(wires: Wires) -> None:
    stream = wires.channel.stream_stream(STREAM)
    # As Triton: a request refused before its model runs (an unknown model) is still answered in the stream.
    sent = [_numbered("nope", 0), *(_numbered("every_second_fails", value) for value in (2, 3, 4))]
    call = stream(iter(sent), metadata=(("triton_grpc_error", "true"),), timeout=HANG)
    answers = []
    with pytest.raises(grpc.aio.AioRpcError) as ended:
        async for body in call:
            answers.append(pb.ModelStreamInferResponse.FromString(body))
    assert ended.value.code() == grpc.StatusCode.INTERNAL and ended.value.details() == "3 is odd"
    assert [(answer.infer_response.id, bool(answer.error_message)) for answer in answers] == [("0", True), ("2", False)]
    # Without the header, every request is answered and the stream goes on.
    plain = stream(iter([_numbered("every_second_fails", value) for value in (1, 2, 3, 4)]), timeout=HANG)
    answers = [pb.ModelStreamInferResponse.FromString(body) async for body in plain]
    assert [answer.error_message for answer in answers] == ["1 is odd", "", "3 is odd", ""]


# -- 8. what Triton's frontends consume is not the model's ----------------------------------------------------------

TAKEN = {"timeout": 5, "priority": 2, "sequence_id": 7, "sequence_start": True, "sequence_end": False, "mine": "x"}
# parameters: (what the model sees, or the REST and gRPC refusals)
RESERVED: list[tuple[dict[str, Any], Any]] = [
    (TAKEN, {"parameters": {"mine": "x"}, "correlation_id": 7, "flags": 1, "timeout": 5}),
    ({"sequence_id": "s", "sequence_end": True}, {"parameters": {}, "correlation_id": "s", "flags": 2, "timeout": 0}),
    ({"triton_mine": 1}, (REST_REFUSAL, GRPC_REFUSAL)),
    ({"timeout": "soon"}, ("Unable to parse 'timeout': attempt to access JSON non-unsigned-integer as unsigned integer",
                           "invalid value type for 'timeout' parameter, expected int64_param.")),
    ({"priority": -1}, ("Unable to parse 'priority': attempt to access JSON non-unsigned-integer as unsigned integer",
                        "invalid value for 'priority', expected value >= 0.")),
    ({"sequence_start": 1}, ("Unable to parse 'sequence_start': attempt to access JSON non-boolean as boolean",
                             "invalid value type for 'sequence_start' parameter, expected bool_param.")),
]  # fmt: skip


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize(("parameters", "expected"), RESERVED, ids=[str(sorted(case[0])) for case in RESERVED])
async def test_tritons_reserved_parameters_are_consumed_or_refused(
    wires: Wires, wire: str, parameters: dict[str, Any], expected: Any
) -> None:
    answer = await wires.infer(wire, "parameters", parameters, IN=np.array([1], I32))
    if isinstance(expected, tuple):
        assert (answer.status, answer.message) == (
            (400, expected[0]) if wire == "rest" else ("INVALID_ARGUMENT", expected[1])
        )
        return
    assert answer.outputs is not None, answer
    seen = answer.outputs["SEEN"].ravel()[0]
    assert json.loads(seen) == expected


async def test_rest_binary_data_output_and_grpc_empty_final_response_are_their_wires_own(wires: Wires) -> None:
    rest = await wires.infer("rest", "parameters", {"binary_data_output": False}, IN=np.array([1], I32))
    over_grpc = await wires.infer(
        "grpc", "parameters", {"triton_enable_empty_final_response": True}, IN=np.array([1], I32)
    )
    for answer in (rest, over_grpc):
        assert answer.outputs is not None and json.loads(answer.outputs["SEEN"].ravel()[0])["parameters"] == {}


# -- 9. the generate extension: a key of "parameters" that names an input is that input -------------------------------


async def test_generate_maps_a_parameter_that_names_an_input_to_the_input(wires: Wires) -> None:
    body = {"text_input": "w", "parameters": {"max_tokens": 2, "temperature": 0.5}}
    response = await wires.http.post("/models/generates/generate_stream", json=body)
    assert response.status_code == 200, response.text
    events = [json.loads(line[len("data: ") :]) for line in response.text.splitlines() if line.startswith("data: ")]
    # max_tokens became the input; temperature stayed a parameter.
    assert [event["text_output"] for event in events] == ["w0:['temperature']", "w1:['temperature']"]


# -- an async execute's own loop is of the server's loop's kind -------------------------------------------------------

_LOOP_MODEL = (
    "import asyncio, threading\nimport numpy as np\nimport triton_python_backend_utils as pb_utils\n\n"
    "class TritonPythonModel:\n"
    "    async def execute(self, requests):\n"
    "        where = f'{type(asyncio.get_running_loop()).__module__}:{threading.current_thread().name}'\n"
    "        out = pb_utils.Tensor('OUT', np.array([where.encode()], dtype=np.object_))\n"
    "        return [pb_utils.InferenceResponse([out]) for _ in requests]\n"
)


@pytest.mark.parametrize("kind", ["asyncio", "uvloop"])
def test_an_async_execute_runs_on_its_own_loop_of_the_servers_loops_kind(tmp_path: Path, kind: str) -> None:
    (tmp_path / "where" / "1").mkdir(parents=True)
    (tmp_path / "where" / "config.pbtxt").write_text(
        'backend: "python"\ninput [{ name: "IN", data_type: TYPE_INT32, dims: [1] }]\n'
        'output [{ name: "OUT", data_type: TYPE_STRING, dims: [1] }]\n'
    )
    (tmp_path / "where" / "1" / "model.py").write_text(_LOOP_MODEL)
    body = {"inputs": [{"name": "IN", "datatype": "INT32", "shape": [1], "data": [1]}]}

    async def served() -> str:
        app = oip_app(model_repository=ModelRepository(tmp_path))
        async with app.lifespan(), client(app) as http:  # (its models load, and unload after)
            response = await http.post("/models/where/infer", json=body)
        assert response.status_code == 200, response.text
        return str(response.json()["outputs"][0]["data"][0])

    if kind == "uvloop":
        uvloop = pytest.importorskip("uvloop")  # `oip-asgi serve`'s loop where uvicorn[standard] is installed
        module, thread = uvloop.run(served()).split(":")
        assert module.startswith("uvloop")
    else:
        module, thread = asyncio.run(served()).split(":")
        assert module.startswith("asyncio")
    assert thread == "oip-asgi where_0_0"  # the instance's own thread, not the server's
