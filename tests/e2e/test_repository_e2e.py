"""`oip-asgi serve --model-repository` with tritonclient, over HTTP and gRPC: the repository extension
(index, load with a config override, unload, readiness), the modes, a model file served by name, and a
reload under continuous load from several clients that fails no request."""

from __future__ import annotations

import gc
import http.client
import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.core.test_repository import broken_model, write_model
from tests.support.servers import free_port, serving
from tests.support.waiting import wait_until

httpclient = pytest.importorskip("tritonclient.http")
grpcclient = pytest.importorskip("tritonclient.grpc")
from tritonclient.utils import InferenceServerException  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    write_model(tmp_path, "adder", adds=1)
    write_model(tmp_path, "tripler", body=_TRIPLER)
    broken_model(tmp_path, "broken")
    return tmp_path


_TRIPLER = """
from oip_asgi import Model, TensorSpec

model = Model(lambda x: x * 3, inputs=[TensorSpec("x", "INT32", [-1])], outputs=[TensorSpec("y", "INT32", [-1])])
"""


def http_infer(client: Any, name: str) -> list[int]:
    tensor = httpclient.InferInput("x", [2], "INT32")
    tensor.set_data_from_numpy(np.array([1, 2], np.int32))
    return list(client.infer(name, [tensor]).as_numpy("y"))


def grpc_infer(client: Any, name: str) -> list[int]:
    tensor = grpcclient.InferInput("x", [2], "INT32")
    tensor.set_data_from_numpy(np.array([1, 2], np.int32))
    return list(client.infer(name, [tensor]).as_numpy("y"))


def test_tritonclient_http_manages_the_repository(repository: Path) -> None:
    port = free_port()
    argv = ["-m", "oip_asgi", "serve", "--model-repository", str(repository), "--model-control-mode", "explicit",
            "--load-model", "adder", "--port", str(port)]  # fmt: skip
    with serving(argv, port) as server:
        client = httpclient.InferenceServerClient(server.address)
        try:
            index = {row["name"]: row for row in client.get_model_repository_index()}
            assert index["adder"]["state"] == "READY" and "state" not in index["tripler"]
            assert client.is_model_ready("adder") and not client.is_model_ready("tripler")
            assert http_infer(client, "adder") == [2, 3]

            client.load_model("tripler")
            assert client.is_model_ready("tripler") and http_infer(client, "tripler") == [3, 6]
            with pytest.raises(InferenceServerException, match="failed to load 'broken'") as failed:
                client.load_model("broken")
            assert "weights missing" in str(failed.value)
            index = {row["name"]: row for row in client.get_model_repository_index()}
            assert index["broken"]["state"] == "UNAVAILABLE" and "weights missing" in index["broken"]["reason"]
            # The server's fault, not the client's: 503 with the reason, as a model from code whose load failed.
            with pytest.raises(InferenceServerException, match="model 'broken' failed to load; it is UNAVAILABLE"):
                http_infer(client, "broken")

            config = {
                "name": "adder",
                "backend": "python",
                "max_batch_size": 0,
                "parameters": {"owner": {"string_value": "me"}},
            }
            client.load_model("adder", config=json.dumps(config))
            assert client.get_model_config("adder")["parameters"] == {"owner": {"string_value": "me"}}

            client.unload_model("adder")
            assert not client.is_model_ready("adder")
            with pytest.raises(InferenceServerException, match="has no available versions"):
                http_infer(client, "adder")
            with pytest.raises(InferenceServerException, match="failed to load 'nope'"):
                client.load_model("nope")
        finally:
            client.close()


def test_tritonclient_grpc_manages_the_repository(repository: Path) -> None:
    port, grpc_port = free_port(), free_port()
    argv = ["-m", "oip_asgi", "serve", "--model-repository", str(repository), "--model-control-mode", "explicit",
            "--port", str(port), "--grpc-port", str(grpc_port)]  # fmt: skip
    with serving(argv, port):
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{grpc_port}")
        try:
            names = [model.name for model in client.get_model_repository_index().models]
            assert names == ["adder", "broken", "tripler"]
            client.load_model("adder")
            assert client.is_model_ready("adder") and grpc_infer(client, "adder") == [2, 3]
            ready = client.get_model_repository_index(as_json=True)["models"]
            assert [model for model in ready if model.get("state") == "READY"] == [
                {"name": "adder", "version": "1", "state": "READY"}
            ]
            config = {"name": "adder", "backend": "python", "parameters": {"owner": {"string_value": "grpc"}}}
            client.load_model("adder", config=json.dumps(config))
            assert client.get_model_config("adder", as_json=True)["config"]["parameters"] == {
                "owner": {"string_value": "grpc"}
            }
            with pytest.raises(InferenceServerException, match="failed to load 'broken'"):
                client.load_model("broken")
            with pytest.raises(InferenceServerException, match="failed to load; it is UNAVAILABLE") as refused:
                grpc_infer(client, "broken")
            assert refused.value.status() == "StatusCode.UNAVAILABLE"
            client.unload_model("adder")
            assert not client.is_model_ready("adder")
        finally:
            client.close()


def test_mode_none_refuses_load_on_both_wires_and_a_model_file_serves_beside_the_repository(
    repository: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    pytest.importorskip("sklearn")
    pytest.importorskip("skops")
    import skops.io
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    broken = repository / "broken"
    for path in sorted(broken.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    broken.rmdir()
    iris = load_iris()
    file = tmp_path_factory.mktemp("files") / "iris.skops"
    skops.io.dump(LogisticRegression(max_iter=500).fit(iris.data, iris.target), file)

    port, grpc_port = free_port(), free_port()
    argv = ["-m", "oip_asgi", "serve", str(file), "--model-repository", str(repository), "--port", str(port),
            "--grpc-port", str(grpc_port)]  # fmt: skip
    with serving(argv, port) as server:
        client = httpclient.InferenceServerClient(server.address)
        rpc = grpcclient.InferenceServerClient(f"127.0.0.1:{grpc_port}")
        try:
            assert http_infer(client, "adder") == [2, 3] and grpc_infer(rpc, "tripler") == [3, 6]
            for manage in (client.load_model, client.unload_model, rpc.load_model, rpc.unload_model):
                with pytest.raises(InferenceServerException, match="explicit model load / unload is not allowed"):
                    manage("adder")
            assert client.get_model_metadata("iris")["outputs"][0]["name"] == "predict"
            tensor = httpclient.InferInput("input-0", [1, 4], "FP64")
            tensor.set_data_from_numpy(iris.data[:1])
            assert client.infer("iris", [tensor]).as_numpy("predict").tolist() == [0]
        finally:
            client.close()
            rpc.close()


def test_a_reload_under_continuous_load_fails_no_request_and_never_mixes_versions(repository: Path) -> None:
    port = free_port()
    argv = ["-m", "oip_asgi", "serve", "--model-repository", str(repository), "--model-control-mode", "explicit",
            "--load-model", "adder", "--port", str(port)]  # fmt: skip
    answers: list[tuple[int, int]] = []
    failures: list[str] = []
    stop = threading.Event()

    def keep_asking(address: str) -> None:
        # Plain HTTP from each thread: tritonclient's HTTP client is gevent's, whose hub is one thread's.
        host, port = address.split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=10)
        body = json.dumps({"inputs": [{"name": "x", "shape": [2], "datatype": "INT32", "data": [1, 2]}]})
        try:
            while not stop.is_set():
                connection.request("POST", "/v2/models/adder/infer", body=body)
                response = connection.getresponse()
                answer = json.loads(response.read())
                if response.status == 200:
                    first, second = answer["outputs"][0]["data"]
                    answers.append((first, second))
                else:
                    failures.append(f"{response.status} {answer}")
        finally:
            connection.close()

    # tritonclient's HTTP clients of earlier tests may still wait in reference cycles; collected in one of
    # these threads, gevent would refuse to close them from a thread not theirs.
    gc.collect()
    with serving(argv, port) as server:
        clients = [threading.Thread(target=keep_asking, args=(server.address,)) for _ in range(4)]
        for thread in clients:
            thread.start()
        control = httpclient.InferenceServerClient(server.address)
        try:
            for adds in range(2, 12):
                write_model(repository, "adder", adds=adds)
                before = len(answers)
                control.load_model("adder")
                wait_until(lambda: len(answers) >= before + 20, "requests answered after the reload")  # noqa: B023
        finally:
            stop.set()
            for thread in clients:
                thread.join(30)
            control.close()
    assert not failures, failures[:3]
    assert len(answers) >= 200
    # Every answer is one version's, whole: x + adds for one adds.
    assert all(second - first == 1 and 2 <= first <= 12 for first, second in answers)
    assert {first for first, _ in answers} >= {2, 12}


_SIMPLE_CONFIG = """
name: "simple"
backend: "python"
max_batch_size: 8
input [
  { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] },
  { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] }
]
output [
  { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] },
  { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] }
]
"""


def test_the_steps_of_tritons_model_control_examples_on_both_wires(tmp_path: Path) -> None:
    # What Triton's simple_{http,grpc}_model_control.py examples do, step for step (they run unchanged
    # against such a repository; the closing note of issue 21 has the run): a model `simple` with a
    # config.pbtxt among others, loaded, reloaded with a bad and then a good config override, unloaded,
    # a file override it refuses in Triton's words, and an unknown name.
    (tmp_path / "simple" / "1").mkdir(parents=True)
    (tmp_path / "simple" / "config.pbtxt").write_text(_SIMPLE_CONFIG)
    (tmp_path / "simple" / "1" / "model.py").write_text(
        "def model(INPUT0, INPUT1):\n    return {'OUTPUT0': INPUT0 + INPUT1, 'OUTPUT1': INPUT0 - INPUT1}\n"
    )
    for name in ("simple_identity", "simple_int8", "simple_string"):
        write_model(tmp_path, name)
    port, grpc_port = free_port(), free_port()
    argv = ["-m", "oip_asgi", "serve", "--model-repository", str(tmp_path), "--model-control-mode", "explicit",
            "--port", str(port), "--grpc-port", str(grpc_port)]  # fmt: skip
    with serving(argv, port) as server:
        for client, config_of in (
            (httpclient.InferenceServerClient(server.address), lambda config: config["max_batch_size"]),
            (grpcclient.InferenceServerClient(f"127.0.0.1:{grpc_port}"), lambda config: config.config.max_batch_size),
        ):
            try:
                index = client.get_model_repository_index()
                assert len(index if isinstance(index, list) else index.models) == 4
                client.load_model("simple")
                assert client.is_model_ready("simple") and config_of(client.get_model_config("simple")) == 8
                with pytest.raises(InferenceServerException, match="failed to load"):
                    client.load_model("simple", config='"parameters": {"config": {{"max_batch_size": "16"}}}')
                client.load_model("simple", config='{"max_batch_size":"16"}')
                assert config_of(client.get_model_config("simple")) == 16
                client.unload_model("simple")
                assert not client.is_model_ready("simple")
                if client.__module__.startswith("tritonclient.grpc"):
                    with pytest.raises(InferenceServerException) as refused:
                        client.load_model("simple", config="{}", files={"file:" + "A" * 256: b"a"})
                    assert refused.value.status() == "StatusCode.INTERNAL"
                    assert "failed to poll from model repository" in refused.value.message()
                    assert client.is_server_live()
                with pytest.raises(InferenceServerException, match="failed to load"):
                    client.load_model("wrong_model_name")
            finally:
                client.close()
