"""Ensembles served from a repository, in process: each step's tensors routed between composing models (from
code, model files, Triton Python models), steps run as soon as their inputs exist, only what the request's
outputs need runs, a decoupled step streams through, a step's error names its model, and what the
ensemble's metadata, config and statistics say (`_core/ensemble.py`, `_core/ensemble_plan.py`)."""

from __future__ import annotations

import asyncio
import json
import re
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from oip_asgi import BadRequest, Model, ModelRepository, OIPError, TensorSpec, oip_app
from oip_asgi._core.ensemble import EnsembleRunner
from tests.declarations.test_ensemble_config import CHAIN, StepSpec, ensemble_config, write_ensemble
from tests.support.client import client
from tests.support.servers import ROOT
from tests.support.waiting import HANG

pytestmark = pytest.mark.anyio

I32 = [-1]


def spec(name: str, datatype: str = "INT32", shape: list[int] = I32) -> TensorSpec:
    return TensorSpec(name, datatype, shape)


def add(x: np.ndarray) -> np.ndarray:
    return x + 1


def double(a: np.ndarray) -> dict[str, np.ndarray]:
    return {"b": a * 2}


CODE = {
    "add": Model(add, inputs=[spec("x")], outputs=[spec("y")]),
    "double": Model(double, inputs=[spec("a")], outputs=[spec("b")]),
}


def served(root: Path, ensembles: Mapping[str, str], models: Mapping[str, Any] = CODE, **options: Any) -> Any:
    """An app serving `models` from code and the ensembles (name to config.pbtxt) of a repository at `root`."""
    for name, config in ensembles.items():
        write_ensemble(root, name, config)
    return oip_app(dict(models), model_repository=ModelRepository(root, **options))


def body(**inputs: list[int]) -> dict[str, Any]:
    return {
        "inputs": [
            {"name": name, "shape": [len(data)], "datatype": "INT32", "data": data} for name, data in inputs.items()
        ]
    }


async def stats(http: Any) -> dict[str, dict[str, Any]]:
    return {entry["name"]: entry for entry in (await http.get("/models/stats")).json()["model_stats"]}


async def test_an_ensemble_routes_tensors_through_its_steps_and_answers_its_declared_outputs(tmp_path: Path) -> None:
    app = served(tmp_path, {"pipe": ensemble_config("pipe", CHAIN)})
    async with client(app) as http:
        await app.load()
        response = await http.post("/models/pipe/infer", json={"id": "r-7", **body(IN=[1, 2, 3])})
        assert response.status_code == 200, response.text
        assert response.json() == {
            "model_name": "pipe", "model_version": "1", "id": "r-7",  # the ensemble request's id, as Triton's
            "outputs": [{"name": "OUT", "datatype": "INT32", "shape": [3], "data": [4, 6, 8]}],
        }  # fmt: skip
        # What the protocol tells of it: Triton's platform name, its declared tensors, its config as written.
        metadata = (await http.get("/models/pipe")).json()
        assert metadata == {
            "name": "pipe", "versions": ["1"], "platform": "ensemble",
            "inputs": [{"name": "IN", "datatype": "INT32", "shape": [-1]}],
            "outputs": [{"name": "OUT", "datatype": "INT32", "shape": [-1]}],
        }  # fmt: skip
        config = (await http.get("/models/pipe/config")).json()
        assert config["platform"] == "ensemble" and "backend" not in config and "instance_group" not in config
        assert [step["model_name"] for step in config["ensemble_scheduling"]["step"]] == ["add", "double"]
        assert "model_transaction_policy" not in config
        assert (await http.get("/models/pipe/ready")).status_code == 200


async def test_each_model_counts_its_own_executions_and_the_ensemble_its_requests(tmp_path: Path) -> None:
    app = served(tmp_path, {"pipe": ensemble_config("pipe", CHAIN)})
    async with client(app) as http:
        await app.load()
        for _ in range(3):
            assert (await http.post("/models/pipe/infer", json=body(IN=[1]))).status_code == 200
        assert (await http.post("/models/add/infer", json=body(x=[1]))).status_code == 200
        counted = await stats(http)
        counts = {name: (entry["inference_count"], entry["execution_count"]) for name, entry in counted.items()}
        assert counts == {"pipe": (3, 3), "add": (4, 4), "double": (3, 3)}
        assert counted["pipe"]["inference_stats"]["success"]["count"] == 3


async def test_steps_that_are_ready_together_run_at_once(tmp_path: Path) -> None:
    """Two steps that take only the ensemble's input, each waiting for the other to have started: they finish
    only if they run at the same time (run one after the other, the first would wait for ever)."""
    started = {"left": asyncio.Event(), "right": asyncio.Event()}

    def waiting(mine: str, other: str) -> Any:
        async def predict(x: np.ndarray) -> np.ndarray:
            started[mine].set()
            await asyncio.wait_for(started[other].wait(), HANG)
            return x

        return Model(predict, inputs=[spec("x")], outputs=[spec("y")])

    steps: list[StepSpec] = [("left", {"x": "IN"}, {"y": "L"}), ("right", {"x": "IN"}, {"y": "R"})]
    outputs = (("L", "TYPE_INT32", I32), ("R", "TYPE_INT32", I32))
    models = {"left": waiting("left", "right"), "right": waiting("right", "left")}
    app = served(tmp_path, {"both": ensemble_config("both", steps, outputs=outputs)}, models)
    async with client(app) as http:
        await app.load()
        response = await http.post("/models/both/infer", json=body(IN=[5]))
        assert response.status_code == 200, response.text
        assert [output["name"] for output in response.json()["outputs"]] == ["L", "R"]


FORK: list[StepSpec] = [
    ("add", {"x": "IN"}, {"y": "mid"}),
    ("double", {"a": "mid"}, {"b": "TWICE"}),
    ("triple", {"t": "mid"}, {"u": "THRICE"}),
]
FORK_OUTPUTS = (("TWICE", "TYPE_INT32", I32), ("THRICE", "TYPE_INT32", I32))


async def test_only_the_steps_the_requested_outputs_need_run_and_no_intermediate_tensor_is_returned(
    tmp_path: Path,
) -> None:
    models = {**CODE, "triple": Model(lambda t: {"u": t * 3}, inputs=[spec("t")], outputs=[spec("u")])}
    app = served(tmp_path, {"fork": ensemble_config("fork", FORK, outputs=FORK_OUTPUTS)}, models)
    async with client(app) as http:
        await app.load()
        everything = (await http.post("/models/fork/infer", json=body(IN=[1]))).json()
        assert {output["name"]: output["data"] for output in everything["outputs"]} == {"TWICE": [4], "THRICE": [6]}
        one = await http.post("/models/fork/infer", json={**body(IN=[1]), "outputs": [{"name": "THRICE"}]})
        assert [output["name"] for output in one.json()["outputs"]] == ["THRICE"]
        counted = await stats(http)
        assert counted["triple"]["execution_count"] == 2 and counted["double"]["execution_count"] == 1  # pruned once
        unknown = await http.post("/models/fork/infer", json={**body(IN=[1]), "outputs": [{"name": "mid"}]})
        assert unknown.status_code == 400 and "unknown output 'mid'" in unknown.json()["error"]


PROBE = """
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy()
            seen = {"id": request.request_id(), "parameters": json.loads(request.parameters()),
                    "asked": sorted(request.requested_output_names())}
            outputs = [pb_utils.Tensor("y", x), pb_utils.Tensor("seen", np.array([json.dumps(seen).encode()], object))]
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
"""
PROBE_CONFIG = """
name: "probe"
backend: "python"
input [ { name: "x", data_type: TYPE_INT32, dims: [ -1 ] } ]
output [ { name: "y", data_type: TYPE_INT32, dims: [ -1 ] }, { name: "seen", data_type: TYPE_STRING, dims: [ 1 ] } ]
"""


def write_python_model(root: Path, name: str, source: str, config: str) -> None:
    (root / name / "1").mkdir(parents=True)
    (root / name / "1" / "model.py").write_text(textwrap.dedent(source))
    (root / name / "config.pbtxt").write_text(config)


async def test_each_step_gets_the_ensemble_requests_id_and_parameters_and_asks_for_the_outputs_its_step_maps(
    tmp_path: Path,
) -> None:
    write_python_model(tmp_path, "probe", PROBE, PROBE_CONFIG)
    steps: list[StepSpec] = [
        ("probe", {"x": "IN"}, {"y": "mid", "seen": "SEEN"}),
        ("double", {"a": "mid"}, {"b": "OUT"}),
    ]
    outputs = (("OUT", "TYPE_INT32", I32), ("SEEN", "TYPE_STRING", [1]))
    app = served(tmp_path, {"pipe": ensemble_config("pipe", steps, outputs=outputs)})
    async with client(app) as http:
        await app.load()
        request = {"id": "abc", "parameters": {"temperature": 0.5, "tag": "t"}, **body(IN=[3])}
        response = await http.post("/models/pipe/infer", json=request)
        assert response.status_code == 200, response.text
        answered = {output["name"]: output["data"] for output in response.json()["outputs"]}
        assert answered["OUT"] == [6]
        assert json.loads(answered["SEEN"][0]) == {
            "id": "abc", "parameters": {"temperature": 0.5, "tag": "t"}, "asked": ["seen", "y"]
        }  # fmt: skip
        assert "parameters" not in response.json()  # a step's response parameters stay inside, as in Triton


async def test_a_steps_error_is_the_requests_error_with_its_status_naming_the_steps_model(tmp_path: Path) -> None:
    class Teapot(OIPError, status_code=418):  # a model's own error class, its own constructor
        def __init__(self, kind: str) -> None:
            super().__init__(f"I am a {kind}")

    def refuses(a: np.ndarray) -> np.ndarray:
        if (a > 1000).any():
            raise Teapot("teapot")
        if (a > 100).any():
            raise BadRequest("values above 100 are refused")
        raise ValueError("the weights are corrupt")

    models = {**CODE, "double": Model(refuses, inputs=[spec("a")], outputs=[spec("b")])}
    app = served(tmp_path, {"pipe": ensemble_config("pipe", CHAIN)}, models)
    async with client(app) as http:
        await app.load()
        raised = await http.post("/models/pipe/infer", json=body(IN=[1]))
        assert raised.status_code == 500
        assert raised.json()["error"] == "in ensemble 'pipe', model 'double' raised ValueError: the weights are corrupt"
        refused = await http.post("/models/pipe/infer", json=body(IN=[500]))
        assert refused.status_code == 400  # the step's status
        assert refused.json()["error"] == "in ensemble 'pipe', model 'double': values above 100 are refused"
        teapot = await http.post("/models/pipe/infer", json=body(IN=[5000]))
        assert (teapot.status_code, teapot.json()["error"]) == (
            418,
            "in ensemble 'pipe', model 'double': I am a teapot",
        )
        wrong = await http.post(
            "/models/pipe/infer", json={"inputs": [{"name": "IN", "shape": [1], "datatype": "FP32", "data": [1.0]}]}
        )
        assert wrong.status_code == 400 and "expects INT32" in wrong.json()["error"]  # the ensemble's own check
        assert (await stats(http))["pipe"]["inference_stats"]["fail"]["count"] == 3
        assert (await http.post("/models/add/infer", json=body(x=[1]))).status_code == 200  # the server goes on


def repeat(x: np.ndarray) -> Iterator[dict[str, np.ndarray]]:
    for value in x:
        yield {"r": np.array([value], np.int32)}


async def test_a_decoupled_step_streams_through_the_steps_after_it_each_response_one_of_the_ensemble(
    tmp_path: Path,
) -> None:
    models = {**CODE, "repeat": Model(repeat, inputs=[spec("x")], outputs=[spec("r")])}
    steps: list[StepSpec] = [("repeat", {"x": "IN"}, {"r": "one"}), ("double", {"a": "one"}, {"b": "OUT"})]
    app = served(tmp_path, {"stream": ensemble_config("stream", steps)}, models)
    async with client(app) as http:
        await app.load()
        config = (await http.get("/models/stream/config")).json()
        assert config["model_transaction_policy"] == {"decoupled": True}  # as Triton: one decoupled step makes it so
        response = await http.post("/models/stream/generate_stream", json={"IN": [1, 2, 3]})
        assert response.status_code == 200, response.text
        events = [json.loads(line[len("data: ") :]) for line in response.text.split("\n\n") if line]
        assert [event["OUT"] for event in events] == [2, 4, 6]
        once = await http.post("/models/stream/infer", json=body(IN=[1]))
        assert once.status_code == 501  # Triton's answer for a decoupled model on a unary endpoint
        assert "decoupled" in once.json()["error"]
        counted = await stats(http)
        assert counted["double"]["execution_count"] == 3 and counted["repeat"]["execution_count"] == 1


async def test_a_decoupled_ensemble_answers_in_the_order_its_decoupled_step_made_the_responses(
    tmp_path: Path,
) -> None:
    """The step after the decoupled one finishes the first response last (it waits for the third to have been
    doubled): the ensemble still answers 2, 4, 6."""
    third = asyncio.Event()

    async def doubled_late(a: np.ndarray) -> dict[str, np.ndarray]:
        if a[0] == 1:
            await asyncio.wait_for(third.wait(), HANG)
        if a[0] == 3:
            third.set()
        return {"b": a * 2}

    models = {
        **CODE,
        "repeat": Model(repeat, inputs=[spec("x")], outputs=[spec("r")]),
        "double": Model(doubled_late, inputs=[spec("a")], outputs=[spec("b")]),
    }
    steps: list[StepSpec] = [("repeat", {"x": "IN"}, {"r": "one"}), ("double", {"a": "one"}, {"b": "OUT"})]
    app = served(tmp_path, {"stream": ensemble_config("stream", steps)}, models)
    async with client(app) as http:
        await app.load()
        response = await http.post("/models/stream/generate_stream", json={"IN": [1, 2, 3]})
        assert response.status_code == 200, response.text
        events = [json.loads(line[len("data: ") :]) for line in response.text.split("\n\n") if line]
        assert [event["OUT"] for event in events] == [2, 4, 6]


async def test_a_non_decoupled_ensemble_answers_generate_too(tmp_path: Path) -> None:
    app = served(tmp_path, {"pipe": ensemble_config("pipe", CHAIN)})
    async with client(app) as http:
        await app.load()
        response = await http.post("/models/pipe/generate", json={"IN": [1, 2]})
        assert response.status_code == 200, response.text
        assert response.json()["OUT"] == [4, 6]


async def test_tensors_gain_and_lose_the_batch_dimension_between_batching_and_non_batching_models(
    tmp_path: Path,
) -> None:
    """Triton's batch_to_nobatch: the ensemble batches, its first model does, its second does not (it takes [4])."""
    seen: list[tuple[int, ...]] = []

    def flat(a: np.ndarray) -> dict[str, np.ndarray]:
        seen.append(a.shape)
        return {"b": a * 2}

    models = {
        "add": Model(add, inputs=[spec("x", shape=[-1, 4])], outputs=[spec("y", shape=[-1, 4])], max_batch_size=8),
        "double": Model(flat, inputs=[spec("a", shape=[4])], outputs=[spec("b", shape=[4])]),
    }
    declared = {"inputs": (("IN", "TYPE_INT32", [4]),), "outputs": (("OUT", "TYPE_INT32", [4]),)}
    config = ensemble_config("pipe", CHAIN, extra="max_batch_size: 4", **declared)  # type: ignore[arg-type]
    app = served(tmp_path, {"pipe": config}, models)
    async with client(app) as http:
        await app.load()
        request = {"inputs": [{"name": "IN", "shape": [1, 4], "datatype": "INT32", "data": [1, 2, 3, 4]}]}
        response = await http.post("/models/pipe/infer", json=request)
        assert response.status_code == 200, response.text
        assert response.json()["outputs"][0]["shape"] == [1, 4] and response.json()["outputs"][0]["data"] == [
            4,
            6,
            8,
            10,
        ]
        assert seen == [(4,)]  # the batch of one left out for the model that does not batch
        too_many = {"inputs": [{"name": "IN", "shape": [5, 4], "datatype": "INT32", "data": list(range(20))}]}
        refused = await http.post("/models/pipe/infer", json=too_many)
        assert refused.status_code == 400
        assert refused.json()["error"] == "inference request batch-size must be <= 4 for 'pipe'"


async def test_the_runner_of_a_served_ensemble_is_an_ensemble_runner(tmp_path: Path) -> None:
    app = served(tmp_path, {"pipe": ensemble_config("pipe", CHAIN)})
    async with client(app):
        await app.load()
        model = app.core.served.get("pipe")
        assert isinstance(model.model.predict.__self__, EnsembleRunner)  # type: ignore[attr-defined]
        assert model.ready


async def test_the_documented_ensemble_serves_as_written(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "repository.md").read_text()
    examples = dict(re.findall(r"<!-- example: (\S+) -->\n```\w+\n(.*?)```", page, re.DOTALL))
    for name in ("double/1/model.py", "quadruple/config.pbtxt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(examples[name])
    (tmp_path / "quadruple" / "1").mkdir()
    app = oip_app(model_repository=tmp_path)
    async with client(app) as http:
        await app.load()
        request = {"inputs": [{"name": "x", "shape": [2], "datatype": "INT64", "data": [1, 2]}]}
        response = await http.post("/models/quadruple/infer", json=request)
        assert response.status_code == 200, response.text
        assert response.json()["outputs"] == [{"name": "y", "datatype": "INT64", "shape": [2], "data": [4, 8]}]
        assert (await stats(http))["double"]["execution_count"] == 2  # one model, two steps


async def test_a_model_file_of_the_repository_is_a_step_like_any_model(tmp_path: Path) -> None:
    """A `.skops` PCA read by `Model.from_file` (no config), then a model from code on what it made."""
    skops_io = pytest.importorskip("skops.io")
    from sklearn.decomposition import PCA

    X = np.arange(40, dtype=np.float64).reshape(10, 4) ** 1.5
    pca = PCA(n_components=2).fit(X)
    (tmp_path / "pca" / "1").mkdir(parents=True)
    skops_io.dump(pca, tmp_path / "pca" / "1" / "model.skops")
    total = Model(
        lambda t: {"s": t.sum(axis=1)},
        inputs=[spec("t", "FP64", [-1, 2])],
        outputs=[spec("s", "FP64", [-1])],
    )
    steps: list[StepSpec] = [("pca", {"input-0": "IN"}, {"transform": "mid"}), ("total", {"t": "mid"}, {"s": "OUT"})]
    declared = {"inputs": (("IN", "TYPE_FP64", [-1, 4]),), "outputs": (("OUT", "TYPE_FP64", [-1]),)}
    app = served(tmp_path, {"reduced": ensemble_config("reduced", steps, **declared)}, {"total": total})  # type: ignore[arg-type]
    async with client(app) as http:
        await app.load()
        rows = X[:3]
        request = {"inputs": [{"name": "IN", "shape": [3, 4], "datatype": "FP64", "data": rows.ravel().tolist()}]}
        response = await http.post("/models/reduced/infer", json=request)
        assert response.status_code == 200, response.text
        assert np.allclose(response.json()["outputs"][0]["data"], pca.transform(rows).sum(axis=1))
        assert (await stats(http))["pca"]["execution_count"] == 1


async def test_a_traced_ensemble_request_is_one_trace_its_steps_spans_under_its_own(tmp_path: Path) -> None:
    """As Triton traces an ensemble: the ensemble's request, and each composing model's as its child; the steps
    follow the ensemble request's sampling (one in two here), never sampled on their own."""
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    write_ensemble(tmp_path, "pipe", ensemble_config("pipe", CHAIN))
    app = oip_app(dict(CODE), model_repository=tmp_path, tracing={"level": "TIMESTAMPS", "rate": 2})
    app.core.respond.tracer = provider.get_tracer("oip_asgi")  # the test's own provider
    async with client(app) as http:
        await app.load()
        for _ in range(2):  # the first not traced, nor its steps; the second traced, and its steps
            assert (await http.post("/models/pipe/infer", json=body(IN=[1]))).status_code == 200
    spans = {span.name: span for span in exporter.get_finished_spans()}
    assert sorted(spans) == ["oip.model add", "oip.model double", "oip.model pipe"]
    assert len(exporter.get_finished_spans()) == 3
    ensemble = spans["oip.model pipe"].context
    for step in ("add", "double"):
        parent = spans[f"oip.model {step}"].parent
        assert parent is not None and parent.span_id == ensemble.span_id
        assert spans[f"oip.model {step}"].context.trace_id == ensemble.trace_id
    exporter.shutdown()
