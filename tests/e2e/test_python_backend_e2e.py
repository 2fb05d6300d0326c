"""Triton Python models (`TritonPythonModel`, ``pb_utils``) served unchanged by `oip-asgi serve`, over both wires
with tritonclient: the lifecycle and its init args, dynamic batching, decoupled senders, TritonError codes,
exceptions, unrequested outputs, is_ready, BLS (sync, async, decoupled), model control, custom metrics, and
instance groups (one execute at a time per instance)."""

from __future__ import annotations

import concurrent.futures
import functools
import json
import queue
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.support.servers import Server, free_port, int32_inputs, serving
from tests.support.waiting import HANG, wait_until, written

httpclient = pytest.importorskip("tritonclient.http")
grpcclient = pytest.importorskip("tritonclient.grpc")
from tritonclient.utils import InferenceServerException  # noqa: E402

pytestmark = pytest.mark.slow

HEADER = "import json, threading, time\nimport numpy as np\nimport triton_python_backend_utils as pb_utils\n\n"

# A model whose execute waits for the test's file go.<IN> (after writing entered.<IN>) and answers with the
# number of executes running at once when it entered.
GATE_IO = (
    'input [{ name: "IN", data_type: TYPE_INT32, dims: [1] }]\n'
    'output [{ name: "SEEN", data_type: TYPE_INT32, dims: [1] }]\n'
)
GATE = """
from pathlib import Path

class TritonPythonModel:
    active = 0  # executes running now, over all of this model's instances
    lock = threading.Lock()

    def initialize(self, args):
        self.name, self.folder = args["model_instance_name"], Path(args["model_repository"])
        (self.folder / f"init.{self.name}").write_text(args["model_instance_kind"])

    def execute(self, requests):
        with self.lock:
            TritonPythonModel.active += 1
            seen = TritonPythonModel.active
        key = int(pb_utils.get_input_tensor_by_name(requests[0], "IN").as_numpy()[0])
        (self.folder / f"entered.{key}").write_text(self.name)
        deadline = time.monotonic() + 30
        while not (self.folder / f"go.{key}").exists() and time.monotonic() < deadline:  # the test's gate
            time.sleep(0.005)
        with self.lock:
            TritonPythonModel.active -= 1
        return [pb_utils.InferenceResponse([pb_utils.Tensor("SEEN", np.array([seen], np.int32))])]

    def finalize(self):
        (self.folder / f"final.{self.name}").write_text("")
"""
# The same, with an async execute that is not decoupled: it runs on its instance's loop, one at a time all the same.
GATE_ASYNC = GATE.replace("    def execute(self, requests):", "    async def execute(self, requests):").replace(
    "            time.sleep(0.005)", "            await __import__('asyncio').sleep(0.005)"
)

ADDER_IO = (
    'input [{ name: "A", data_type: TYPE_INT32, dims: [2] }, { name: "B", data_type: TYPE_INT32, dims: [2] }]\n'
    'output [{ name: "SUM", data_type: TYPE_INT32, dims: [2] }, { name: "DIFF", data_type: TYPE_INT32, dims: [2] },'
    ' { name: "BATCH", data_type: TYPE_INT32, dims: [1] }]\n'
)
ADDER = """
class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "A").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "B").as_numpy()
            batch = np.full((a.shape[0], 1), len(requests), np.int32)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("SUM", a + b), pb_utils.Tensor("DIFF", a - b),
                                                   pb_utils.Tensor("BATCH", batch)]))
        return out
"""

MODELS: dict[str, tuple[str, str]] = {
    # name: (config.pbtxt, model.py body)
    "adder": (
        'backend: "python"\nmax_batch_size: 8\ndynamic_batching { max_queue_delay_microseconds: 200000 }\n' + ADDER_IO,
        ADDER,
    ),
    # A batch runs once it is full (3 rows) and its delay is far beyond any test: three requests, one batch.
    "trio": (
        'backend: "python"\nmax_batch_size: 3\ndynamic_batching { max_queue_delay_microseconds: 600000000 }\n'
        + ADDER_IO,
        ADDER,
    ),
    "initargs": (
        "",  # no config.pbtxt: auto_complete_config declares it all
        """
class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        config.add_input({"name": "IN", "data_type": "TYPE_INT32", "dims": [1]})
        config.add_output({"name": "ARGS", "data_type": "TYPE_STRING", "dims": [1]})
        return config

    def initialize(self, args):
        self.args = args

    def execute(self, requests):
        text = np.array([json.dumps(self.args).encode()], dtype=np.object_)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("ARGS", text)]) for _ in requests]
""",
    ),
    "fails": (
        'backend: "python"\ninput [{ name: "IN", data_type: TYPE_INT32, dims: [1] }]\n'
        'output [{ name: "OUT", data_type: TYPE_INT32, dims: [1] }]\n',
        """
class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            how = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0]
            if how == -1:
                raise ValueError("the model refuses -1")
            if how == -2:
                return None
            if how == -3:
                out.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("no code")))
            else:
                out.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(f"code {how}", int(how))))
        return out
""",
    ),
    "repeat": (
        'backend: "python"\nmodel_transaction_policy { decoupled: true }\n'
        'input [{ name: "IN", data_type: TYPE_INT32, dims: [-1] }]\n'
        'output [{ name: "OUT", data_type: TYPE_INT32, dims: [1] }]\n',
        """
class TritonPythonModel:
    def execute(self, requests):
        sender = requests[0].get_response_sender()
        values = pb_utils.get_input_tensor_by_name(requests[0], "IN").as_numpy()

        def answer():  # after execute returned, from a thread of the model's own
            time.sleep(0.05)
            for value in values:
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([value], np.int32))]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

        threading.Thread(target=answer, daemon=True).start()
        return None
""",
    ),
    "ticker": (
        'backend: "python"\nmodel_transaction_policy { decoupled: true }\n'
        'input [{ name: "IN", data_type: TYPE_INT32, dims: [1] }]\n'
        'output [{ name: "OUT", data_type: TYPE_INT32, dims: [1] }]\n',
        """
class TritonPythonModel:
    def execute(self, requests):
        request = requests[0]
        sender = request.get_response_sender()

        def tick():  # until the client leaves: then it says so in a file beside it
            count = 0
            while not request.is_cancelled():
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([count], np.int32))]))
                count += 1
                time.sleep(0.01)
            open(__file__ + ".cancelled", "w").close()

        threading.Thread(target=tick, daemon=True).start()
        return None
""",
    ),
    "bls": (
        'backend: "python"\ninput [{ name: "A", data_type: TYPE_INT32, dims: [2] }]\n'
        'output [{ name: "OUT", data_type: TYPE_INT32, dims: [-1] }]\n',
        """
class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "A").as_numpy().reshape(1, 2)
            summed = pb_utils.InferenceRequest(model_name="adder", requested_output_names=["SUM"],
                inputs=[pb_utils.Tensor("A", a), pb_utils.Tensor("B", a)]).exec()
            if summed.has_error():
                raise pb_utils.TritonModelException(summed.error().message())
            total = pb_utils.get_output_tensor_by_name(summed, "SUM").as_numpy().reshape(-1)
            streamed = pb_utils.InferenceRequest(model_name="repeat", requested_output_names=["OUT"],
                inputs=[pb_utils.Tensor("IN", total.astype(np.int32))]).exec(decoupled=True)
            values = [int(pb_utils.get_output_tensor_by_name(r, "OUT").as_numpy()[0])
                      for r in streamed if pb_utils.get_output_tensor_by_name(r, "OUT") is not None]
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array(values, np.int32))]))
        return out
""",
    ),
    "bls_async": (
        'backend: "python"\ninput [{ name: "A", data_type: TYPE_INT32, dims: [2] }]\n'
        'output [{ name: "OUT", data_type: TYPE_INT32, dims: [2] }]\n',
        """
class TritonPythonModel:
    async def execute(self, requests):
        out = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "A").as_numpy().reshape(1, 2)
            response = await pb_utils.InferenceRequest(model_name="adder", requested_output_names=["DIFF"],
                inputs=[pb_utils.Tensor("A", a), pb_utils.Tensor("B", a * 3)]).async_exec()
            diff = pb_utils.get_output_tensor_by_name(response, "DIFF").as_numpy().reshape(2)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", diff)]))
        return out
""",
    ),
    "broken_init": (
        'backend: "python"\n',
        """
class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("no weights at " + args["model_repository"])

    def execute(self, requests):
        return []
""",
    ),
    "manager": (
        'backend: "python"\ninput [{ name: "IN", data_type: TYPE_INT32, dims: [1] }]\n'
        'output [{ name: "READY", data_type: TYPE_BOOL, dims: [1] }]\n',
        """
class TritonPythonModel:
    def initialize(self, args):
        family = pb_utils.MetricFamily(name="manager_calls", description="calls", kind=pb_utils.MetricFamily.COUNTER)
        self.calls = family.Metric(labels={"model": "manager", "Custom": "yes"})

    def execute(self, requests):
        self.calls.increment(len(requests))
        out = []
        for request in requests:
            if pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0] == 1:
                pb_utils.load_model("spare")
            else:
                pb_utils.unload_model("spare")
            ready = pb_utils.is_model_ready("spare")
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("READY", np.array([ready]))]))
        return out
""",
    ),
    "spare": (
        'backend: "python"\n',
        """
class TritonPythonModel:
    def is_ready(self):
        return (pb_utils.Logger.log_info("asked") or True) and __import__("os").path.exists(__file__ + ".ready")

    def execute(self, requests):
        return []
""",
    ),
    "single": ('backend: "python"\n' + GATE_IO, GATE),  # no instance_group: one instance, as in Triton
    "single_async": ('backend: "python"\n' + GATE_IO, GATE_ASYNC),
    "pair": (  # two groups, one of them KIND_GPU: two instances here, both on the CPU
        'backend: "python"\n' + GATE_IO + "instance_group [{ kind: KIND_CPU }, "
        '{ name: "gpus", kind: KIND_GPU, count: 1, gpus: [0] }]\n',
        GATE,
    ),
}


SEVEN_KEYS = ["model_config", "model_instance_kind", "model_instance_name", "model_instance_device_id",
              "model_repository", "model_version", "model_name"]  # fmt: skip


def write_repository(root: Path) -> Path:
    for name, (config, body) in MODELS.items():
        (root / name / "1").mkdir(parents=True)
        if config:
            (root / name / "config.pbtxt").write_text(config)
        (root / name / "1" / "model.py").write_text(HEADER + body)
    (root / "spare" / "1" / "model.py.ready").write_text("")
    return root


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_repository(tmp_path_factory.mktemp("repository"))


@pytest.fixture(scope="module")
def server(root: Path) -> Iterator[tuple[Server, int, int]]:
    port, grpc_port, metrics_port = free_port(), free_port(), free_port()
    argv = ["-m", "oip_asgi", "serve", "--model-repository", str(root), "--model-control-mode", "explicit",
            "--load-model", "*", "--port", str(port), "--grpc-port", str(grpc_port), "--metrics-port",
            str(metrics_port), "--strict-readiness", "false"]  # fmt: skip
    with serving(argv, port, timeout=60) as running:
        yield running, grpc_port, metrics_port


def _answered(answers: queue.SimpleQueue[Any], result: Any, error: Any) -> None:
    answers.put(result if error is None else error)


def _clients(server: tuple[Server, int, int]) -> list[tuple[Any, Any]]:
    running, grpc_port, _ = server
    return [
        (httpclient, httpclient.InferenceServerClient(running.address, concurrency=4)),
        (grpcclient, grpcclient.InferenceServerClient(f"127.0.0.1:{grpc_port}")),
    ]


def test_the_seven_init_args_and_the_auto_completed_config(server: tuple[Server, int, int]) -> None:
    for module, client in _clients(server):
        result = client.infer("initargs", int32_inputs(module, IN=np.array([1], np.int32)))
        args = json.loads(result.as_numpy("ARGS")[0])
        assert sorted(args) == sorted(SEVEN_KEYS)
        assert all(isinstance(value, str) for value in args.values())
        assert args["model_name"] == "initargs" and args["model_version"] == "1"
        assert args["model_instance_kind"] == "CPU" and args["model_instance_name"] == "initargs_0_0"
        assert Path(args["model_repository"]).name == "initargs"
        assert [tensor["name"] for tensor in json.loads(args["model_config"])["input"]] == ["IN"]
        config = client.get_model_config("initargs", **({"as_json": True} if module is grpcclient else {}))
        config = config.get("config", config)
        assert [tensor["name"] for tensor in config["output"]] == ["ARGS"]


def test_a_dynamic_batch_reaches_execute_together_and_unrequested_outputs_are_dropped(
    server: tuple[Server, int, int],
) -> None:
    for module, client in _clients(server):
        a = np.array([[1, 2]], np.int32)
        requested = [module.InferRequestedOutput("SUM"), module.InferRequestedOutput("BATCH")]
        answers: queue.SimpleQueue[Any] = queue.SimpleQueue()
        for _ in range(3):  # trio runs a batch once it holds 3 rows: these three, together
            if module is grpcclient:
                callback = functools.partial(_answered, answers)
                client.async_infer("trio", int32_inputs(module, A=a, B=a), callback, outputs=requested)
            else:
                answers.put(client.async_infer("trio", int32_inputs(module, A=a, B=a), outputs=requested))
        results = [answers.get(timeout=HANG) for _ in range(3)]
        results = [result.get_result() if module is httpclient else result for result in results]
        for result in results:
            assert result.as_numpy("SUM").tolist() == [[2, 4]]
            assert result.as_numpy("DIFF") is None  # not asked for: dropped
            assert result.as_numpy("BATCH").tolist() == [[3]]


@pytest.mark.parametrize(
    ("how", "status", "grpc_status"),
    [(1, 500, "INTERNAL"), (2, 404, "NOT_FOUND"), (3, 400, "INVALID_ARGUMENT"), (4, 503, "UNAVAILABLE"),
     (5, 501, "UNIMPLEMENTED"), (0, 400, "UNKNOWN"), (6, 400, "ALREADY_EXISTS"), (7, 400, "CANCELLED"),
     (-3, 500, "INTERNAL")],
)  # fmt: skip
def test_a_triton_error_becomes_tritons_status_on_each_wire(
    server: tuple[Server, int, int], how: int, status: int, grpc_status: str
) -> None:
    running, grpc_port, _ = server
    body = json.dumps({"inputs": [{"name": "IN", "datatype": "INT32", "shape": [1], "data": [how]}]}).encode()
    request = urllib.request.Request(f"http://{running.address}/v2/models/fails/infer", body, method="POST")
    with pytest.raises(urllib.error.HTTPError) as http_error:
        urllib.request.urlopen(request, timeout=10)
    assert http_error.value.code == status
    message = json.loads(http_error.value.read())["error"]
    assert message == (f"code {how}" if how >= 0 else "no code")
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{grpc_port}")
    with pytest.raises(InferenceServerException) as grpc_error:
        client.infer("fails", int32_inputs(grpcclient, IN=np.array([how], np.int32)))
    assert grpc_error.value.status() == f"StatusCode.{grpc_status}"


def test_an_exception_or_no_response_is_a_500_that_says_so(server: tuple[Server, int, int]) -> None:
    for module, client in _clients(server):
        with pytest.raises(InferenceServerException) as raised:
            client.infer("fails", int32_inputs(module, IN=np.array([-1], np.int32)))
        assert (
            "Failed to process the request(s) for model 'fails_0_0', message: ValueError: the model refuses -1"
            in str(raised.value)
        )
        assert raised.value.status() in ("500", "StatusCode.INTERNAL")
        with pytest.raises(InferenceServerException, match="returned None and sent no response") as none:
            client.infer("fails", int32_inputs(module, IN=np.array([-2], np.int32)))
        assert none.value.status() in ("500", "StatusCode.INTERNAL")


def test_a_decoupled_model_answers_through_its_sender_after_execute_returned(server: tuple[Server, int, int]) -> None:
    _, grpc_port, _ = server
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{grpc_port}")
    got: queue.SimpleQueue[Any] = queue.SimpleQueue()
    client.start_stream(lambda result, error: got.put((result, error)))
    try:
        client.async_stream_infer("repeat", int32_inputs(grpcclient, IN=np.array([4, 5, 6], np.int32)))
        values = []
        for _ in range(3):
            result, error = got.get(timeout=HANG)
            assert error is None
            values.append(int(result.as_numpy("OUT")[0]))
        assert values == [4, 5, 6]
    finally:
        client.stop_stream()


def test_bls_sync_decoupled_and_async_run_in_process(server: tuple[Server, int, int]) -> None:
    for module, client in _clients(server):
        result = client.infer("bls", int32_inputs(module, A=np.array([1, 2], np.int32)))
        assert result.as_numpy("OUT").tolist() == [2, 4]  # adder's SUM, streamed back by repeat
        result = client.infer("bls_async", int32_inputs(module, A=np.array([1, 2], np.int32)))
        assert result.as_numpy("OUT").tolist() == [-2, -4]


def test_a_model_failing_in_initialize_is_unavailable_with_its_reason(server: tuple[Server, int, int]) -> None:
    for _, client in _clients(server):
        assert not client.is_model_ready("broken_init")
        with pytest.raises(InferenceServerException, match="RuntimeError: no weights at .*broken_init") as refused:
            client.infer("broken_init", [])
        assert refused.value.status() in ("503", "400", "StatusCode.UNAVAILABLE")


def test_load_unload_from_a_model_and_is_ready_and_custom_metrics(server: tuple[Server, int, int], root: Path) -> None:
    _, _, metrics_port = server
    module, client = _clients(server)[0]
    marker = root / "spare" / "1" / "model.py.ready"
    marker.unlink()  # spare's is_ready() is false now, on both wires
    assert [other.is_model_ready("spare") for _, other in _clients(server)] == [False, False]
    marker.write_text("")
    assert client.is_model_ready("spare")
    assert client.infer("manager", int32_inputs(module, IN=np.array([0], np.int32))).as_numpy("READY").tolist() == [
        False
    ]
    assert not client.is_model_ready("spare")
    assert client.infer("manager", int32_inputs(module, IN=np.array([1], np.int32))).as_numpy("READY").tolist() == [
        True
    ]
    assert client.is_model_ready("spare")
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as response:
        text = response.read().decode()
    lines = [line for line in text.splitlines() if line.startswith("manager_calls")]
    assert lines == ['manager_calls{Custom="yes",model="manager"} 2.0']


def test_a_decoupled_model_sees_is_cancelled_once_the_client_left(server: tuple[Server, int, int], root: Path) -> None:
    _, grpc_port, _ = server
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{grpc_port}")
    got: queue.SimpleQueue[Any] = queue.SimpleQueue()
    client.start_stream(lambda result, error: got.put((result, error)))
    client.async_stream_infer("ticker", int32_inputs(grpcclient, IN=np.array([0], np.int32)))
    result, error = got.get(timeout=HANG)
    assert error is None and int(result.as_numpy("OUT")[0]) == 0
    client.stop_stream(cancel_requests=True)
    seen = root / "ticker" / "1" / "model.py.cancelled"  # the model's own thread makes it when it notices
    wait_until(seen.exists, "the model noticed the client left")


def _wait_for(path: Path, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    return path.exists()


def _gated(server: tuple[Server, int, int], model: str, keys: list[int]) -> list[concurrent.futures.Future[Any]]:
    """Send one request per key to a gated model at once, each from a thread and client of its own; its pending
    results. (Not one client's ``async_infer``: its gevent greenlets send only when the test's thread yields to
    them, which a test that waits with ``time.sleep`` may not do before it looks for the second request.)"""

    def infer(key: int) -> Any:
        client = httpclient.InferenceServerClient(server[0].address, network_timeout=HANG)
        try:
            return client.infer(model, int32_inputs(httpclient, IN=np.array([key], np.int32)))
        finally:
            client.close()

    pool = concurrent.futures.ThreadPoolExecutor(len(keys))
    try:
        return [pool.submit(infer, key) for key in keys]
    finally:
        pool.shutdown(wait=False)


def test_two_instances_each_initialized_run_two_executes_at_once_and_are_finalized(
    server: tuple[Server, int, int], root: Path
) -> None:
    folder = root / "pair"
    assert sorted(path.name for path in folder.glob("init.*")) == ["init.gpus_0", "init.pair_0_0"]
    assert {path.read_text() for path in folder.glob("init.*")} == {"CPU"}  # KIND_GPU served on the CPU
    pending = _gated(server, "pair", [1, 2])
    # Both run before either is let go.
    assert {written(folder / f"entered.{key}", "a request entered execute") for key in (1, 2)} == {"gpus_0", "pair_0_0"}
    for key in (1, 2):
        (folder / f"go.{key}").write_text("")
    assert sorted(int(result.result(HANG).as_numpy("SEEN")[0]) for result in pending) == [1, 2]
    config = httpclient.InferenceServerClient(server[0].address).get_model_config("pair")
    assert [(group["name"], group["count"]) for group in config["instance_group"]] == [("pair_0", 1), ("gpus", 1)]
    grpcclient.InferenceServerClient(f"127.0.0.1:{server[1]}").unload_model("pair")
    assert sorted(path.name for path in folder.glob("final.*")) == ["final.gpus_0", "final.pair_0_0"]


@pytest.mark.parametrize("model", ["single", "single_async"])
def test_one_instance_runs_one_execute_at_a_time(server: tuple[Server, int, int], root: Path, model: str) -> None:
    folder = root / model
    assert sorted(path.name for path in folder.glob("init.*")) == [f"init.{model}_0_0"]
    pending = _gated(server, model, [3, 4])
    wait_until(lambda: any(folder.glob("entered.*")), "a request entered execute")
    (first,) = [int(path.suffix[1:]) for path in folder.glob("entered.*")]
    second = 7 - first
    (folder / f"go.{second}").write_text("")  # were they run at once, the second would answer now
    # A negative needs a window: 0.5 s is far more than the second request needs to reach execute (the
    # two-instance test above shows it entering at once).
    assert not _wait_for(folder / f"entered.{second}", timeout=0.5)
    (folder / f"go.{first}").write_text("")
    assert [int(result.result(HANG).as_numpy("SEEN")[0]) for result in pending] == [1, 1]
    assert written(folder / f"entered.{second}") == f"{model}_0_0"
