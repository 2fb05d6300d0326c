"""Ensembles served by `oip-asgi serve --model-repository`, with tritonclient over HTTP and gRPC, sync and
streaming: Triton's python_backend ensemble (two add_sub steps, Triton's qa/L0_backend_python/ensemble), a
decoupled ensemble streaming through repeat_int32 and a model of code, what the protocol tells of them, a
step's error, an ensemble that cannot serve, and explicit loading and unloading by name."""

from __future__ import annotations

import queue
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.declarations.test_ensemble_config import ensemble_config, write_ensemble
from tests.support.servers import ROOT, Server, free_port, serving

httpclient = pytest.importorskip("tritonclient.http")
grpcclient = pytest.importorskip("tritonclient.grpc")
from tritonclient.utils import InferenceServerException  # noqa: E402

pytestmark = pytest.mark.slow

EXAMPLES = ROOT / "examples" / "python_backend" / "models"
F4 = [4]
SUM_AND_DIFFERENCE = [  # Triton's qa/python_models/ensemble: OUTPUT0 = 2 * INPUT0, OUTPUT1 = 2 * INPUT1
    ("add_sub_1", {"INPUT0": "INPUT0", "INPUT1": "INPUT1"}, {"OUTPUT0": "output_0", "OUTPUT1": "output_1"}),
    ("add_sub_2", {"INPUT0": "output_0", "INPUT1": "output_1"}, {"OUTPUT0": "OUTPUT0", "OUTPUT1": "OUTPUT1"}),
]
DOUBLE = """
from oip_asgi import Model, TensorSpec


def double(x):
    if (x < 0).any():
        raise ValueError("negative values have no double here")
    return x * 2


model = Model(double, inputs=[TensorSpec("x", "INT32", [1])], outputs=[TensorSpec("y", "INT32", [1])])
"""


def python_model(root: Path, example: str, name: str) -> None:
    shutil.copytree(EXAMPLES / example, root / name)
    config = root / name / "config.pbtxt"
    config.write_text(config.read_text().replace(f'name: "{example}"', f'name: "{name}"'))


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ensembles")
    python_model(root, "add_sub", "add_sub_1")
    python_model(root, "add_sub", "add_sub_2")
    python_model(root, "repeat_int32", "repeat_int32")
    (root / "double" / "1").mkdir(parents=True)
    (root / "double" / "1" / "model.py").write_text(DOUBLE)
    fp32 = (("INPUT0", "TYPE_FP32", F4), ("INPUT1", "TYPE_FP32", F4))
    out = (("OUTPUT0", "TYPE_FP32", F4), ("OUTPUT1", "TYPE_FP32", F4))
    write_ensemble(root, "ensemble", ensemble_config("ensemble", SUM_AND_DIFFERENCE, inputs=fp32, outputs=out))
    repeat = [
        ("repeat_int32", {"IN": "IN", "DELAY": "DELAY", "WAIT": "WAIT"}, {"OUT": "one", "IDX": "IDX"}),
        ("double", {"x": "one"}, {"y": "OUT"}),
    ]
    inputs = (("IN", "TYPE_INT32", [-1]), ("DELAY", "TYPE_UINT32", [-1]), ("WAIT", "TYPE_UINT32", [1]))
    outputs = (("OUT", "TYPE_INT32", [1]), ("IDX", "TYPE_UINT32", [1]))
    write_ensemble(root, "repeat_doubled", ensemble_config("repeat_doubled", repeat, inputs=inputs, outputs=outputs))
    missing = [
        ("add_sub_1", {"INPUT0": "INPUT0", "INPUT1": "INPUT1"}, {"OUTPUT0": "s"}),
        ("nope", {"a": "s"}, {"b": "OUT"}),
    ]
    write_ensemble(root, "broken_ensemble", ensemble_config("broken_ensemble", missing, inputs=fp32))
    return root


@pytest.fixture(scope="module")
def server(repository: Path) -> Iterator[tuple[Server, str]]:
    """Every model of the repository loaded at start (mode none): the server, and its gRPC address."""
    port, grpc_port = free_port(), free_port()
    argv = ["-m", "oip_asgi", "serve", "--model-repository", str(repository), "--port", str(port),
            "--grpc-port", str(grpc_port), "--strict-readiness", "false"]  # fmt: skip
    with serving(argv, port, timeout=120) as running:
        yield running, f"127.0.0.1:{grpc_port}"


def fp32_inputs(module: Any, a: np.ndarray, b: np.ndarray) -> list[Any]:
    tensors = [module.InferInput("INPUT0", [4], "FP32"), module.InferInput("INPUT1", [4], "FP32")]
    tensors[0].set_data_from_numpy(a)
    tensors[1].set_data_from_numpy(b)
    return tensors


def repeat_inputs(values: list[int]) -> list[Any]:
    arrays = {
        "IN": np.array(values, np.int32),
        "DELAY": np.zeros(len(values), np.uint32),
        "WAIT": np.zeros(1, np.uint32),
    }
    tensors = []
    for name, array in arrays.items():
        tensor = grpcclient.InferInput(name, list(array.shape), "INT32" if name == "IN" else "UINT32")
        tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    return tensors


def test_tritonclient_http_runs_tritons_python_backend_ensemble(server: tuple[Server, str]) -> None:
    running, _ = server
    client = httpclient.InferenceServerClient(running.address)
    a, b = np.random.random(4).astype(np.float32), np.random.random(4).astype(np.float32)
    try:
        result = client.infer("ensemble", fp32_inputs(httpclient, a, b), request_id="e-1")
        assert np.allclose(result.as_numpy("OUTPUT0"), 2 * a) and np.allclose(result.as_numpy("OUTPUT1"), 2 * b)
        assert result.get_response()["id"] == "e-1"
        assert result.as_numpy("output_0") is None  # an intermediate tensor is never returned
        one = client.infer(
            "ensemble", fp32_inputs(httpclient, a, b), outputs=[httpclient.InferRequestedOutput("OUTPUT1")]
        )
        assert one.as_numpy("OUTPUT0") is None and np.allclose(one.as_numpy("OUTPUT1"), 2 * b)

        metadata = client.get_model_metadata("ensemble")
        assert metadata["platform"] == "ensemble" and [t["name"] for t in metadata["inputs"]] == ["INPUT0", "INPUT1"]
        config = client.get_model_config("ensemble")
        assert config["platform"] == "ensemble"
        assert [step["model_name"] for step in config["ensemble_scheduling"]["step"]] == ["add_sub_1", "add_sub_2"]
        assert client.is_model_ready("ensemble")
        stats = {entry["name"]: entry for entry in client.get_inference_statistics()["model_stats"]}
        assert stats["ensemble"]["execution_count"] == 2
        assert stats["add_sub_1"]["execution_count"] == 2 and stats["add_sub_2"]["execution_count"] == 2
    finally:
        client.close()


def test_tritonclient_grpc_runs_the_ensemble_and_streams_through_a_decoupled_one(server: tuple[Server, str]) -> None:
    _, address = server
    client = grpcclient.InferenceServerClient(address)
    a, b = np.ones(4, np.float32), np.arange(4, dtype=np.float32)
    try:
        result = client.infer("ensemble", fp32_inputs(grpcclient, a, b))
        assert np.allclose(result.as_numpy("OUTPUT0"), 2 * a) and np.allclose(result.as_numpy("OUTPUT1"), 2 * b)
        config = client.get_model_config("repeat_doubled", as_json=True)["config"]
        assert config["model_transaction_policy"] == {"decoupled": True}

        answers: queue.Queue[Any] = queue.Queue()
        client.start_stream(callback=lambda result, error: answers.put(error or result))
        client.async_stream_infer("repeat_doubled", repeat_inputs([5, 6, 7]), request_id="s-1")
        got = [answers.get(timeout=60) for _ in range(3)]
        assert all(not isinstance(item, Exception) for item in got), got
        assert sorted((int(r.as_numpy("IDX")[0]), int(r.as_numpy("OUT")[0])) for r in got) == [
            (0, 10),
            (1, 12),
            (2, 14),
        ]
        assert {r.get_response().id for r in got} == {"s-1"}

        client.async_stream_infer("repeat_doubled", repeat_inputs([-1]))
        failed = answers.get(timeout=60)  # a step's error ends the stream's request, in its error_message
        assert isinstance(failed, InferenceServerException)
        assert "in ensemble 'repeat_doubled', model 'double' raised ValueError" in failed.message()
        client.stop_stream()

        with pytest.raises(InferenceServerException, match="decoupled") as refused:  # unary: as Triton refuses it
            client.infer("repeat_doubled", repeat_inputs([1]))
        assert refused.value.status() == "StatusCode.UNIMPLEMENTED"
    finally:
        client.close()


def test_an_ensemble_that_cannot_serve_says_why_on_both_wires_and_the_rest_serves(server: tuple[Server, str]) -> None:
    running, address = server
    http = httpclient.InferenceServerClient(running.address)
    rpc = grpcclient.InferenceServerClient(address)
    reason = "ensemble broken_ensemble contains models that are not available or ambiguous: nope"
    try:
        index = {row["name"]: row for row in http.get_model_repository_index()}
        assert index["broken_ensemble"]["state"] == "UNAVAILABLE" and index["broken_ensemble"]["reason"] == reason
        assert not http.is_model_ready("broken_ensemble") and not rpc.is_model_ready("broken_ensemble")
        a = np.zeros(4, np.float32)
        with pytest.raises(InferenceServerException, match=reason):
            http.infer("broken_ensemble", fp32_inputs(httpclient, a, a))
        with pytest.raises(InferenceServerException, match=reason) as refused:
            rpc.infer("broken_ensemble", fp32_inputs(grpcclient, a, a))
        assert refused.value.status() == "StatusCode.UNAVAILABLE"
        assert np.allclose(rpc.infer("ensemble", fp32_inputs(grpcclient, a, a)).as_numpy("OUTPUT0"), 0)
    finally:
        http.close()
        rpc.close()


@pytest.mark.parametrize("wire", ["http", "grpc"])
def test_explicit_mode_loads_an_ensembles_models_by_name_and_unloads_them_with_it(repository: Path, wire: str) -> None:
    port, grpc_port = free_port(), free_port()
    argv = ["-m", "oip_asgi", "serve", "--model-repository", str(repository), "--model-control-mode", "explicit",
            "--port", str(port), "--grpc-port", str(grpc_port)]  # fmt: skip
    with serving(argv, port, timeout=120) as running:
        client: Any = (
            httpclient.InferenceServerClient(running.address)
            if wire == "http"
            else grpcclient.InferenceServerClient(f"127.0.0.1:{grpc_port}")
        )
        module = httpclient if wire == "http" else grpcclient
        a = np.ones(4, np.float32)
        try:
            assert not client.is_model_ready("add_sub_1")
            client.load_model("ensemble")  # its models load with it, by the names its steps give
            assert client.is_model_ready("add_sub_1") and client.is_model_ready("add_sub_2")
            assert np.allclose(client.infer("ensemble", fp32_inputs(module, a, a)).as_numpy("OUTPUT1"), 2)

            client.unload_model("add_sub_2")  # a composing model gone: the ensemble is unloaded with it
            assert not client.is_model_ready("ensemble")
            with pytest.raises(InferenceServerException, match="not available or ambiguous: add_sub_2"):
                client.infer("ensemble", fp32_inputs(module, a, a))
            client.load_model("add_sub_2")  # and back once it is
            assert client.is_model_ready("ensemble")

            client.unload_model("ensemble", unload_dependents=True)
            assert not client.is_model_ready("ensemble") and not client.is_model_ready("add_sub_1")
            assert client.is_model_ready("add_sub_2")  # loaded on its own: it stays
            with pytest.raises(
                InferenceServerException, match="circular|not available|failed to load 'broken_ensemble'"
            ):
                client.load_model("broken_ensemble")
        finally:
            client.close()
