"""Routing, health, metadata, versions, loading and model errors, driven in-process."""

from __future__ import annotations

import asyncio
import re
import sys
import threading
from typing import Any

import httpx
import numpy as np
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from oip_asgi import Model, OIPMount, TensorSpec, mount, oip_app
from tests.support.client import client
from tests.support.waiting import until

pytestmark = pytest.mark.anyio

INT_IN = [TensorSpec("x", "INT32", [-1])]
INT_OUT = [TensorSpec("y", "INT32", [-1])]


def infer_body(values: list[int], name: str = "x") -> dict[str, Any]:
    return {"inputs": [{"name": name, "shape": [len(values)], "datatype": "INT32", "data": values}]}


def host_with(models: dict[str, Any], **options: Any) -> Starlette:
    host = Starlette()
    mount(host, models, path="/v2", **options)
    return host


async def test_protocol_endpoints_at_v2() -> None:
    app = host_with({"double": Model(lambda x: x * 2, inputs=INT_IN, outputs=INT_OUT)})
    async with client(app) as http:
        for path in ("/v2", "/v2/"):
            response = await http.get(path)
            assert response.status_code == 200
            extensions = [
                "binary_tensor_data", "classification", "logging", "model_configuration", "statistics",
                "system_shared_memory", "trace",
            ]  # fmt: skip
            assert response.json()["extensions"] == extensions
        assert (await http.get("/v2/health/live")).json() == {"live": True}
        assert (await http.get("/v2/health/ready")).json() == {"ready": True}
        assert (await http.get("/v2/models/double/ready")).json() == {"name": "double", "ready": True}
        assert (await http.get("/v2/models/double/versions/1/ready")).status_code == 200
        metadata = (await http.get("/v2/models/double")).json()
        assert metadata == {
            "name": "double",
            "versions": ["1"],
            "platform": "python",
            "inputs": [{"name": "x", "datatype": "INT32", "shape": [-1]}],
            "outputs": [{"name": "y", "datatype": "INT32", "shape": [-1]}],
        }
        response = await http.post("/v2/models/double/infer", json=infer_body([1, 2]))
        assert response.json()["outputs"] == [{"name": "y", "datatype": "INT32", "shape": [2], "data": [2, 4]}]
        assert response.json()["model_version"] == "1"


async def test_plain_mount_redirects_the_bare_prefix_but_oip_mount_does_not() -> None:
    served = oip_app({"m": lambda **inputs: inputs})
    plain = Starlette(routes=[Mount("/v2", app=served)])
    async with client(plain) as http:
        assert (await http.get("/v2", follow_redirects=False)).status_code == 307
    ours = Starlette(routes=[OIPMount("/v2", app=served)])
    async with client(ours) as http:
        assert (await http.get("/v2", follow_redirects=False)).status_code == 200


@pytest.mark.parametrize("root_in_path", [True, False], ids=["path-includes-root", "path-stripped"])
async def test_both_scope_path_conventions(root_in_path: bool) -> None:
    app = oip_app({"m": lambda **inputs: inputs})
    sent: list[dict[str, Any]] = []
    path = "/api/v2/models/m/ready" if root_in_path else "/models/m/ready"
    scope = {"type": "http", "method": "GET", "path": path, "root_path": "/api/v2", "headers": [], "query_string": b""}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    assert sent[0]["status"] == 200
    assert sent[1]["body"] == b'{"name":"m","ready":true}'


async def test_unknown_paths_models_versions_and_methods() -> None:
    app = host_with({"m": [Model(lambda **i: i, version="1"), Model(lambda **i: i, version="2")]})
    async with client(app) as http:
        # Triton's words first (its client examples read them), then ours.
        response = await http.get("/v2/models/nope")
        assert response.status_code == 404
        assert response.json()["error"] == "Request for unknown model: 'nope' is not found; the models are m"
        response = await http.get("/v2/models/m/versions/3")
        assert response.status_code == 404
        assert (
            response.json()["error"] == "Request for unknown model: 'm' version '3' is not found; its versions are 1, 2"
        )
        response = await http.get("/v2/models/m/versions/latest")
        assert response.status_code == 400
        assert response.json()["error"] == (
            "failed to get model version from specified version string 'latest'; model 'm' has versions 1, 2"
        )
        response = await http.get("/v2/nowhere")
        assert response.status_code == 404 and response.headers["content-type"] == "application/json"
        response = await http.get("/v2/models/m/infer")
        assert response.status_code == 405 and response.headers["allow"] == "POST"
        response = await http.post("/v2/health/live")
        assert response.status_code == 405 and "error" in response.json()


async def test_unversioned_urls_use_the_newest_version() -> None:
    versions = [Model(lambda x, v=version: x + v, version=str(version)) for version in (2, 10, 1)]
    app = host_with({"add": versions})
    async with client(app) as http:
        assert (await http.get("/v2/models/add")).json()["versions"] == ["1", "2", "10"]
        response = await http.post("/v2/models/add/infer", json=infer_body([0]))
        assert response.json()["model_version"] == "10"
        assert response.json()["outputs"][0]["data"] == [10]
        response = await http.post("/v2/models/add/versions/2/infer", json=infer_body([0]))
        assert response.json()["outputs"][0]["data"] == [2]


async def test_bare_callable_without_specs_accepts_any_inputs_and_names_a_single_result() -> None:
    app = host_with({"sum": lambda **inputs: sum(inputs.values())})
    async with client(app) as http:
        metadata = (await http.get("/v2/models/sum")).json()
        assert metadata["inputs"] == [] and metadata["outputs"] == []
        body = {"inputs": [{"name": n, "shape": [2], "datatype": "FP64", "data": [1.5, 2]} for n in ("a", "b")]}
        response = await http.post("/v2/models/sum/infer", json=body)
        assert response.json()["outputs"] == [{"name": "OUTPUT0", "datatype": "FP64", "shape": [2], "data": [3.0, 4.0]}]


async def test_async_models_parameters_and_request_id() -> None:
    seen: dict[str, Any] = {}

    async def scale(x: np.ndarray, parameters: dict[str, Any]) -> dict[str, np.ndarray]:
        seen.update(parameters)
        return {"y": x * parameters["factor"]}

    app = host_with({"scale": Model(scale, inputs=INT_IN, outputs=INT_OUT)})
    async with client(app) as http:
        body = {**infer_body([1, 2]), "id": "req-7", "parameters": {"factor": 3, "note": "hi"}}
        response = await http.post("/v2/models/scale/infer", json=body)
    assert response.json()["id"] == "req-7"
    assert response.json()["outputs"][0]["data"] == [3, 6]
    assert seen == {"factor": 3, "note": "hi"}


async def test_sync_models_run_off_the_event_loop() -> None:
    loop_thread = threading.get_ident()
    model_threads: list[int] = []

    def record(x: np.ndarray) -> np.ndarray:
        model_threads.append(threading.get_ident())
        return x

    app = host_with({"m": Model(record, inputs=INT_IN, outputs=INT_OUT)})
    async with client(app) as http:
        assert (await http.post("/v2/models/m/infer", json=infer_body([1]))).status_code == 200
    assert model_threads and model_threads[0] != loop_thread


async def test_model_exceptions_become_500_with_the_message_and_the_server_keeps_serving() -> None:
    def broken(x: np.ndarray) -> np.ndarray:
        raise RuntimeError("weights are corrupt")

    app = host_with(
        {
            "broken": Model(broken, inputs=INT_IN, outputs=INT_OUT),
            "wrong_name": Model(lambda x: {"z": x}, inputs=INT_IN, outputs=INT_OUT),
            "wrong_type": Model(lambda x: np.array(["a"]), inputs=INT_IN, outputs=INT_OUT),
            "wrong_shape": Model(lambda x: x.reshape(1, -1), inputs=INT_IN, outputs=INT_OUT),
            "ok": Model(lambda x: x, inputs=INT_IN, outputs=INT_OUT),
        }
    )
    async with client(app) as http:
        expectations = {
            "broken": "raised RuntimeError: weights are corrupt",
            "wrong_name": "undeclared outputs: 'z'",
            "wrong_type": "does not cast to INT32",
            "wrong_shape": "with shape [1, 2], declared [-1]",
        }
        for name, message in expectations.items():
            response = await http.post(f"/v2/models/{name}/infer", json=infer_body([1, 2]))
            assert response.status_code == 500, name
            assert message in response.json()["error"]
            assert "Traceback" not in response.text
        assert (await http.post("/v2/models/ok/infer", json=infer_body([1, 2]))).status_code == 200


async def test_declared_specs_are_enforced_before_the_model_runs() -> None:
    calls: list[int] = []

    def model(a: np.ndarray, b: np.ndarray) -> dict[str, np.ndarray]:
        calls.append(1)
        return {"y": a + b}

    specs = [TensorSpec("a", "INT32", [-1, 2]), TensorSpec("b", "INT32", [-1, 2])]
    app = host_with({"m": Model(model, inputs=specs, outputs=[TensorSpec("y", "INT32", [-1, 2])])})

    def tensor(name: str, shape: list[int], datatype: str = "INT32") -> dict[str, Any]:
        import math

        return {"name": name, "shape": shape, "datatype": datatype, "data": [1] * math.prod(shape)}

    cases = {
        "missing input 'b'": [tensor("a", [1, 2])],
        "unexpected input 'c'": [tensor("a", [1, 2]), tensor("b", [1, 2]), tensor("c", [1, 2])],
        "input 'b' has datatype INT64, model 'm' expects INT32": [tensor("a", [1, 2]), tensor("b", [1, 2], "INT64")],
        "input 'a' has shape [1, 3], model 'm' expects [-1, 2]": [tensor("a", [1, 3]), tensor("b", [1, 2])],
        "input 'a' has shape [2], model 'm' expects [-1, 2]": [tensor("a", [2]), tensor("b", [1, 2])],
        "input 'a' appears more than once": [tensor("a", [1, 2]), tensor("a", [1, 2]), tensor("b", [1, 2])],
    }
    async with client(app) as http:
        for message, inputs in cases.items():
            response = await http.post("/v2/models/m/infer", json={"inputs": inputs})
            assert response.status_code == 400
            assert message in response.json()["error"]
        outputs = [{"name": "nope"}]
        body = {"inputs": [tensor("a", [1, 2]), tensor("b", [1, 2])], "outputs": outputs}
        response = await http.post("/v2/models/m/infer", json=body)
        assert response.status_code == 400 and "unknown output 'nope'" in response.json()["error"]
    assert calls == []


class Loadable:
    def __init__(self, fail: bool = False, delay: float = 0.0) -> None:
        self.loads = 0
        self.fail = fail
        self.delay = delay

    async def load(self) -> None:
        self.loads += 1
        await asyncio.sleep(self.delay)
        if self.fail:
            raise OSError("weights.bin not found")

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return x


async def test_mounted_models_load_once_lazily_under_concurrency() -> None:
    slow = Loadable(delay=0.05)
    app = host_with({"slow": Model(slow, load=slow.load, inputs=INT_IN, outputs=INT_OUT)})
    async with client(app) as http:
        responses = await asyncio.gather(*(http.post("/v2/models/slow/infer", json=infer_body([1])) for _ in range(8)))
        assert [response.status_code for response in responses] == [200] * 8
        assert (await http.get("/v2/health/ready")).status_code == 200
    assert slow.loads == 1


async def test_a_failed_load_is_reported_not_hidden() -> None:
    broken = Loadable(fail=True)
    app = host_with({"broken": Model(broken, load=broken.load), "fine": lambda **inputs: inputs})
    async with client(app) as http:
        response = await http.post("/v2/models/broken/infer", json=infer_body([1]))
        assert response.status_code == 503
        assert "failed to load: OSError: weights.bin not found" in response.json()["error"]
        response = await http.get("/v2/models/broken/ready")
        assert response.status_code == 400 and response.json() == {"name": "broken", "ready": False}
        assert (await http.get("/v2/models/fine/ready")).status_code == 200
        response = await http.get("/v2/health/ready")
        assert response.status_code == 400 and response.json() == {"ready": False}
    assert broken.loads == 1


class Gated:
    """A model whose load waits for the test to open the gate."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.loads = 0

    async def load(self) -> None:
        self.loads += 1
        await self.gate.wait()

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return x


async def test_readiness_answers_at_once_and_is_false_until_models_have_loaded() -> None:
    model = Gated()
    app = host_with({"m": Model(model, load=model.load, inputs=INT_IN, outputs=INT_OUT), "plain": lambda **i: i})
    async with client(app) as http:
        for _ in range(3):  # a probe during a long load fails at once instead of hanging
            assert (await http.get("/v2/health/ready")).status_code == 400
            assert (await http.get("/v2/models/m/ready")).json() == {"name": "m", "ready": False}
        assert (await http.get("/v2/models/plain/ready")).status_code == 200
        assert (await http.get("/v2/health/live")).status_code == 200
        inference = asyncio.ensure_future(http.post("/v2/models/m/infer", json=infer_body([7])))
        finished, _ = await asyncio.wait({inference}, timeout=0.1)
        assert not finished  # a request waits for the load rather than failing
        model.gate.set()
        assert (await inference).status_code == 200
        assert (await http.get("/v2/health/ready")).status_code == 200
    assert model.loads == 1


async def test_lifespan_starts_loading_and_completes_startup_without_waiting_for_it() -> None:
    model = Gated()
    app = oip_app({"m": Model(model, load=model.load)})
    messages: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    sent: asyncio.Queue[str] = asyncio.Queue()

    async def send(message: dict[str, Any]) -> None:
        await sent.put(message["type"])

    lifespan = asyncio.ensure_future(app({"type": "lifespan", "asgi": {"version": "3.0"}}, messages.get, send))
    await messages.put({"type": "lifespan.startup"})
    assert await sent.get() == "lifespan.startup.complete"
    await until(lambda: model.loads == 1)
    assert not app.ready  # loading, behind readiness
    model.gate.set()
    await until(lambda: app.ready)
    await messages.put({"type": "lifespan.shutdown"})
    assert await sent.get() == "lifespan.shutdown.complete"
    await lifespan


async def test_concurrency_limit_answers_503_instead_of_queueing() -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    async def held(x: np.ndarray) -> np.ndarray:
        entered.set()
        await release.wait()
        return x

    app = host_with({"m": Model(held, inputs=INT_IN, outputs=INT_OUT, max_concurrency=1)})
    async with client(app) as http:
        first = asyncio.ensure_future(http.post("/v2/models/m/infer", json=infer_body([1])))
        await asyncio.wait_for(entered.wait(), 10)
        second = await http.post("/v2/models/m/infer", json=infer_body([1]))
        assert second.status_code == 503 and "busy" in second.json()["error"]
        release.set()
        assert (await first).status_code == 200


def test_model_and_spec_validation_at_construction() -> None:
    with pytest.raises(ValueError, match="FP8"):
        TensorSpec("x", "FP8", [1])
    with pytest.raises(ValueError, match="integers >= -1"):
        TensorSpec("x", "FP32", [-2])
    with pytest.raises(ValueError, match="duplicate input"):
        Model(lambda x: x, inputs=[TensorSpec("x", "FP32", [1]), TensorSpec("x", "FP32", [1])])
    with pytest.raises(TypeError, match="callable"):
        Model("not a function")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no '/'"):
        oip_app({"a/b": lambda **i: i})


SPEC = TensorSpec("x", "FP32", [1])


def _predict(x: Any, y: Any = None, *, parameters: Any = None) -> Any:
    return x


@pytest.mark.parametrize(
    ("build", "error", "message"),
    [
        (lambda: Model(lambda x: x, inputs=[TensorSpec("a", "FP32", [1])]), TypeError, "does not take input 'a'"),
        (lambda: Model(lambda a, b: a, inputs=[TensorSpec("a", "FP32", [1])]), TypeError, "requires argument 'b'"),
        (
            lambda: Model(_predict, inputs=[TensorSpec("x", "FP32", [1]), TensorSpec("z", "FP32", [1])]),
            TypeError,
            "does not take input 'z'",
        ),
        (
            lambda: Model(lambda x, y: x, inputs=[TensorSpec("x", "FP32", [1]), TensorSpec("y", "FP32", [1], True)]),
            TypeError,
            "input 'y' is optional, so its parameter needs a default (y=None)",
        ),
        (
            lambda: Model(lambda s: s, outputs=[TensorSpec("p", "FP32", [-1, 3])], labels=["a", "b"]),
            ValueError,
            "output 'p' has 3 classes but 2 labels",
        ),
        (
            lambda: Model(lambda s: s, outputs=[TensorSpec("p", "FP32", [-1, 3])], labels={"q": ["a"]}),
            ValueError,
            "labels for 'q', which the model does not declare as outputs (p)",
        ),
        (lambda: TensorSpec("x", "FP32", None), TypeError, "shape must be a list of integers"),  # type: ignore[arg-type]
        (lambda: TensorSpec("x", "FP32", 3), TypeError, "shape must be a list of integers"),  # type: ignore[arg-type]
        (lambda: TensorSpec("x", "float32", [1]), ValueError, "'float32' is not a protocol datatype; write 'FP32'"),
        (lambda: TensorSpec("x", "TYPE_FP32", [1]), ValueError, "write 'FP32'"),
        (lambda: TensorSpec("x", "TYPE_STRING", [1]), ValueError, "write 'BYTES'"),
        (lambda: TensorSpec("x", np.float16, [1]), ValueError, "write 'FP16'"),  # type: ignore[arg-type]
        (lambda: TensorSpec("x", "int", [1]), ValueError, "write 'INT64'"),
        (lambda: Model(lambda x: x, inputs={"x": SPEC}), TypeError, "inputs must be a list of TensorSpec, got dict"),  # type: ignore[arg-type]
        (lambda: Model(lambda x: x, inputs=[("x", "FP32", [1])]), TypeError, "inputs must hold TensorSpec objects"),  # type: ignore[list-item]
        (lambda: oip_app([Model(lambda x: x)]), TypeError, "models must be a mapping of name to model, got list"),  # type: ignore[arg-type]
    ],
    ids=[
        "input-not-a-parameter", "parameter-not-an-input", "input-not-a-parameter-beside-defaults",
        "optional-no-default", "too-few-labels", "labels-for-unknown-output", "shape-none", "shape-int",
        "numpy-name", "triton-config-name", "triton-string", "numpy-type", "python-type-name", "inputs-dict",
        "inputs-tuples", "models-list",
    ],
)  # fmt: skip
def test_mistakes_in_a_model_are_refused_when_it_is_built(build: Any, error: type, message: str) -> None:
    with pytest.raises(error) as raised:
        build()
    assert message in str(raised.value)


def test_signatures_that_fit_their_specs_are_accepted() -> None:
    specs = [TensorSpec("x", "FP32", [1]), TensorSpec("y", "FP32", [1], optional=True)]
    Model(_predict, inputs=specs)  # y has a default, `parameters` is the request's
    Model(lambda **inputs: inputs, inputs=specs)  # **kwargs takes anything
    Model(lambda s: s, outputs=[TensorSpec("p", "FP32", [-1, -1])], labels={"p": ["a"]})  # class axis unknown


def test_bf16_declared_without_ml_dtypes_is_refused_when_built(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # `import ml_dtypes` now fails
    with pytest.raises(ValueError, match=r"BF16 needs the ml_dtypes package on the server: pip install"):
        TensorSpec("x", "BF16", [1])


async def test_labels_shorter_than_a_variable_class_axis_are_a_clear_500() -> None:
    model = Model(lambda x: x, outputs=[TensorSpec("p", "FP32", [-1, -1])], labels=["a", "b"])
    body = {
        "inputs": [{"name": "x", "shape": [1, 3], "datatype": "FP32", "data": [0.1, 0.9, 0.5]}],
        "outputs": [{"name": "p", "parameters": {"classification": 3}}],
    }
    async with client(host_with({"m": model})) as http:
        response = await http.post("/v2/models/m/infer", json=body)
    assert response.status_code == 500
    assert response.json()["error"] == "model 'm' has 2 labels for output 'p', whose class axis holds 3"


@pytest.mark.parametrize("expose", [True, False])
async def test_expose_errors_false_keeps_a_models_exception_text_out_of_responses(
    expose: bool, caplog: pytest.LogCaptureFixture
) -> None:
    def leaks(x: Any) -> Any:
        raise ValueError("could not connect to postgres://admin:hunter2@db")

    def fails_to_load() -> None:
        raise OSError("no file /secrets/weights.bin")

    models = {"m": Model(leaks), "broken": Model(lambda x: x, load=fails_to_load)}
    async with client(host_with(models, expose_errors=expose)) as http:
        raised = (await http.post("/v2/models/m/infer", json=infer_body([1]))).json()["error"]
        unloaded = (await http.post("/v2/models/broken/infer", json=infer_body([1]))).json()["error"]
        refused = (await http.post("/v2/models/m/infer", json={"inputs": 1})).json()["error"]
    assert refused.startswith("invalid inference request")  # the server's own messages stay
    if expose:
        assert "hunter2" in raised and "/secrets/weights.bin" in unloaded
        return
    assert "hunter2" not in raised and "/secrets/" not in unloaded
    for message in (raised, unloaded):
        error_id = re.search(r"error id ([0-9a-f]{8})", message)
        assert error_id is not None, message
        logged = [record for record in caplog.records if error_id[1] in record.getMessage()]
        assert len(logged) == 1 and logged[0].exc_info is not None  # the log line holds the traceback
    assert raised.startswith("model 'm' failed (error id ")


async def test_not_found_names_the_full_path_and_the_models_there_are() -> None:
    models = {f"m{index:02}": Model(lambda **i: i) for index in range(12)}
    async with client(host_with(models)) as http:
        missing = (await http.get("/v2/models/m99")).json()["error"]
        nowhere = (await http.get("/v2/nowhere")).json()["error"]
    listed = "m00, m01, m02, m03, m04, m05, m06, m07, m08, m09 and 2 more"
    assert missing == f"Request for unknown model: 'm99' is not found; the models are {listed}"
    assert nowhere.startswith("no such path '/v2/nowhere'")


async def test_httpx_default_client_against_real_transport_shape() -> None:
    # httpx sends Accept-Encoding: gzip by default; the response must still decode transparently.
    app = host_with({"m": Model(lambda x: x, inputs=INT_IN, outputs=INT_OUT)})
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
        response = await http.post("/v2/models/m/infer", json=infer_body([5]))
    assert response.headers["content-encoding"] == "gzip"
    assert response.json()["outputs"][0]["data"] == [5]
