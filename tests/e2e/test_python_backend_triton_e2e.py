"""Triton's Python models as Triton runs them, by real clients (tritonclient, HTTP over a socket) against a real
`oip-asgi serve` over both wires: the models of tests/support/triton_models.py (what Triton's own qa models do),
whose in-process tests are tests/python_backend/test_as_triton_runs_them.py."""

from __future__ import annotations

import json
import queue
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from tests.support.servers import Server, free_port, int32_inputs, serving
from tests.support.triton_models import write_repository
from tests.support.waiting import HANG, wait_until, written

httpclient = pytest.importorskip("tritonclient.http")
grpcclient = pytest.importorskip("tritonclient.grpc")
from tritonclient.utils import InferenceServerException  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_repository(tmp_path_factory.mktemp("repository"))


@pytest.fixture(scope="module")
def server(root: Path) -> Iterator[tuple[Server, int]]:
    port, grpc_port = free_port(), free_port()
    argv = ["-m", "oip_asgi", "serve", "--model-repository", str(root), "--model-control-mode", "explicit",
            "--load-model", "*", "--port", str(port), "--grpc-port", str(grpc_port),
            "--strict-readiness", "false"]  # fmt: skip
    with serving(argv, port, timeout=HANG) as running:
        yield running, grpc_port


def _clients(server: tuple[Server, int]) -> list[tuple[Any, Any]]:
    running, grpc_port = server
    return [
        (httpclient, httpclient.InferenceServerClient(running.address)),
        (grpcclient, grpcclient.InferenceServerClient(f"127.0.0.1:{grpc_port}")),
    ]


def _streamed(server: tuple[Server, int], model: str, requests: list[dict[str, np.ndarray]], **options: Any) -> Any:
    """`requests` on one gRPC stream (tritonclient's); what its callback got, as it got it."""
    got: queue.SimpleQueue[tuple[Any, Any]] = queue.SimpleQueue()
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{server[1]}")
    client.start_stream(lambda result, error: got.put((result, error)), **options)
    try:
        for index, arrays in enumerate(requests):
            client.async_stream_infer(model, int32_inputs(grpcclient, **arrays), request_id=str(index))
        return [got.get(timeout=HANG) for _ in requests]
    finally:
        client.stop_stream()


def test_models_import_their_own_helpers(server: tuple[Server, int]) -> None:
    for module, client in _clients(server):
        for name in ("imports_a", "imports_b"):
            result = client.infer(name, int32_inputs(module, IN=np.array([1], np.int32)))
            assert result.as_numpy("OUT")[0].decode() == f"{name[-1]}:{name[-1]}:file1:file2:the folder of {name}"


def test_four_async_decoupled_executes_overlap_and_answer_out_of_order(server: tuple[Server, int]) -> None:
    answers = _streamed(server, "overlap", [{"ROUND": np.array([1], np.int32), "KEY": np.array([k], np.int32)}
                                            for k in range(4)])  # fmt: skip
    assert [error for _, error in answers] == [None] * 4
    assert [result.get_response().id for result, _ in answers] == ["3", "2", "1", "0"]
    # Over HTTP, four /generate requests at once: each answered as its execute finishes.
    with httpx.Client(base_url=f"http://{server[0].address}/v2", timeout=HANG) as http:

        def one(key: int) -> int:
            answer = http.post("/models/overlap/generate", json={"ROUND": 2, "KEY": key})
            assert answer.status_code == 200, answer.text
            return int(answer.json()["KEY"])

        with ThreadPoolExecutor(4) as pool:
            assert sorted(pool.map(one, range(4))) == [0, 1, 2, 3]


def test_sync_bls_and_iterated_async_decoupled_bls_from_an_async_execute(server: tuple[Server, int]) -> None:
    for module, client in _clients(server):
        result = client.infer("bls_from_async", int32_inputs(module, X=np.array([2], np.int32)))
        assert (result.as_numpy("DOUBLED").tolist(), result.as_numpy("COUNTED").tolist()) == ([4], [1, 2])
        assert result.as_numpy("NEXT").tolist() == [1, 2]


def test_bls_in_initialize_fails_its_load_with_tritons_words(server: tuple[Server, int]) -> None:
    for module, client in _clients(server):
        assert not client.is_model_ready("bls_in_initialize")
        with pytest.raises(InferenceServerException, match="BLS is only supported during the 'execute' function"):
            client.infer("bls_in_initialize", int32_inputs(module, IN=np.array([1], np.int32)))


def test_a_batched_decoupled_model_fails_one_request_of_two(server: tuple[Server, int]) -> None:
    answers = _streamed(server, "batched_decoupled", [{"IN": np.array([[3]], np.int32)},
                                                      {"IN": np.array([[-1]], np.int32)}])  # fmt: skip
    by_id = {(result.get_response().id if result is not None else "1"): (result, error) for result, error in answers}
    assert by_id["0"][0].as_numpy("OUT").tolist() == [[3, 2]]  # one execute took both
    assert "key -1 refused" in str(by_id["1"][1])


def test_a_model_that_is_not_decoupled_answers_through_its_sender(server: tuple[Server, int], root: Path) -> None:
    for index, (module, client) in enumerate(_clients(server)):
        for model in ("sender", "sender_async"):
            tag = 1000 + index * 100 + (model == "sender_async") * 10
            for case in (1, 2, 3):
                result = client.infer(model, int32_inputs(module, HOW=np.array([tag + case], np.int32)))
                assert result.as_numpy("OUT").tolist() == [tag + case]
            assert client.infer(model, int32_inputs(module, HOW=np.array([tag + 4], np.int32))).as_numpy(
                "OUT"
            ).tolist() == [tag + 4]
            (root / model / f"go.{(tag + 4) // 10}").write_text("")
            refused = written(root / model / f"refused.{(tag + 4) // 10}")
            assert refused == "Unable to send response. Response sender has been closed."


def test_is_cancelled_is_true_once_a_grpc_client_cancels_a_unary_call(server: tuple[Server, int], root: Path) -> None:
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{server[1]}")
    for key, model in ((11, "waits"), (12, "waits_async")):
        call = client.async_infer(model, int32_inputs(grpcclient, IN=np.array([key], np.int32)), lambda *answer: None)
        wait_until((root / model / f"running.{key}").exists, "the request reached execute")
        call.cancel()
        assert written(root / model / f"cancelled.{key}") == "cancelled"


def test_is_cancelled_is_true_once_a_rest_client_disconnects(server: tuple[Server, int], root: Path) -> None:
    for key, model in ((21, "waits"), (22, "waits_async")):
        body = json.dumps({"inputs": [{"name": "IN", "datatype": "INT32", "shape": [1], "data": [key]}]}).encode()
        with socket.create_connection(("127.0.0.1", server[0].port), timeout=HANG) as connection:
            connection.sendall(
                f"POST /v2/models/{model}/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            wait_until((root / model / f"running.{key}").exists, "the request reached execute")
        assert written(root / model / f"cancelled.{key}") == "cancelled"  # the client has gone: the model saw it


def test_triton_grpc_error_ends_the_stream_with_the_status(server: tuple[Server, int]) -> None:
    requests = [{"IN": np.array([value], np.int32)} for value in (2, 3)]
    answers = _streamed(server, "every_second_fails", requests, headers={"triton_grpc_error": "true"})
    assert answers[0][1] is None and answers[0][0].as_numpy("OUT").tolist() == [2]
    assert answers[1][1].status() == "StatusCode.INTERNAL" and "3 is odd" in str(answers[1][1])
    answers = _streamed(server, "every_second_fails", [{"IN": np.array([v], np.int32)} for v in (1, 2, 3, 4)])
    assert [error is None for _, error in answers] == [False, True, False, True]  # without it: in the stream


def test_tritons_request_controls_reach_the_model_as_controls_not_parameters(server: tuple[Server, int]) -> None:
    for module, client in _clients(server):
        result = client.infer(
            "parameters", int32_inputs(module, IN=np.array([1], np.int32)), timeout=1500, priority=3, sequence_id=42,
            sequence_start=True, parameters={"mine": "yes"},
        )  # fmt: skip
        seen = json.loads(result.as_numpy("SEEN")[0])
        assert seen == {"parameters": {"mine": "yes"}, "correlation_id": 42, "flags": 1, "timeout": 1500}
        with pytest.raises(InferenceServerException, match="reserved for Triton usage"):
            client.infer("parameters", int32_inputs(module, IN=np.array([1], np.int32)), parameters={"triton_x": 1})


def test_generate_maps_a_parameter_that_names_an_input(server: tuple[Server, int]) -> None:
    body = {"text_input": "t", "parameters": {"max_tokens": 1, "top_p": 0.9}}
    answer = httpx.post(f"http://{server[0].address}/v2/models/generates/generate", json=body, timeout=HANG)
    assert answer.status_code == 200, answer.text
    assert answer.json()["text_output"] == "t0:['top_p']"
