"""Ensembles under a repository's model control, in process: an ensemble that cannot serve is not ready and
says why (a model not served, a tensor nobody makes, a cycle, tensors its models disagree on), loading one
loads its models by name in explicit mode, unloading a composing model unloads the ensemble until it comes
back, ``unload_dependents`` takes along what was loaded only for it, and the none and poll modes load
ensembles after their models (`_core/control.py`, `_core/ensembles.py`)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from oip_asgi import ModelRepository, oip_app
from oip_asgi._core.ensembles import EnsembleGraph, batch
from tests.core.test_ensembles import CODE, I32, body, served, spec
from tests.core.test_repository import index, write_model
from tests.declarations.test_ensemble_config import CHAIN, StepSpec, ensemble_config, write_ensemble
from tests.support.client import client

pytestmark = pytest.mark.anyio


def rows(found: list[dict[str, str]]) -> dict[str, tuple[str, str]]:
    return {row["name"]: (row.get("state", ""), row.get("reason", "")) for row in found}


def repository(root: Path) -> Path:
    """add and double as model.py folders (x + 1 and a * 2, INT32), and the ensemble pipe of the two."""
    write_model(root, "add", adds=1)
    write_model(root, "double", body=_DOUBLE)
    write_ensemble(
        root,
        "pipe",
        ensemble_config("pipe", [("add", {"x": "IN"}, {"y": "mid"}), ("double", {"x": "mid"}, {"y": "OUT"})]),
    )
    return root


_DOUBLE = """
from oip_asgi import Model, TensorSpec

model = Model(lambda x: x * 2, inputs=[TensorSpec("x", "INT32", [-1])], outputs=[TensorSpec("y", "INT32", [-1])])
"""


async def infer(http: Any, name: str, **inputs: list[int]) -> tuple[int, Any]:
    response = await http.post(f"/models/{name}/infer", json=body(**inputs))
    answer = response.json()
    return response.status_code, answer["outputs"][0]["data"] if response.status_code == 200 else answer["error"]


async def test_loading_an_ensemble_loads_its_models_by_name_and_unloading_one_unloads_it_until_it_is_back(
    tmp_path: Path,
) -> None:
    app = oip_app(model_repository=ModelRepository(repository(tmp_path), model_control_mode="explicit"))
    async with client(app) as http:
        await app.load()
        assert (await http.post("/repository/models/pipe/load")).status_code == 200
        assert rows(await index(http)) == {"add": ("READY", ""), "double": ("READY", ""), "pipe": ("READY", "")}
        assert await infer(http, "pipe", IN=[1, 2]) == (200, [4, 6])

        assert (await http.post("/repository/models/add/unload")).status_code == 200
        reason = "ensemble pipe contains models that are not available or ambiguous: add"
        assert rows(await index(http))["pipe"] == ("UNAVAILABLE", reason)
        assert (await http.get("/models/pipe/ready")).status_code != 200
        assert await infer(http, "pipe", IN=[1]) == (
            404, f"Request for unknown model: 'pipe' has no available versions; it is UNAVAILABLE: {reason}"
        )  # fmt: skip
        assert (await http.get("/health/ready")).status_code == 200  # as Triton: unloaded is not failed
        assert await infer(http, "double", x=[1]) == (200, [2])  # the rest goes on

        assert (await http.post("/repository/models/add/load")).status_code == 200
        assert rows(await index(http))["pipe"] == ("READY", "")  # planned again once its model is back
        assert await infer(http, "pipe", IN=[1]) == (200, [4])


async def test_unload_dependents_unloads_what_was_loaded_only_along_with_the_ensemble(tmp_path: Path) -> None:
    app = oip_app(model_repository=ModelRepository(repository(tmp_path), model_control_mode="explicit"))
    async with client(app) as http:
        await app.load()
        assert (await http.post("/repository/models/pipe/load")).status_code == 200
        assert (await http.post("/repository/models/pipe/unload")).status_code == 200  # without: its models stay
        assert rows(await index(http)) == {
            "add": ("READY", ""),
            "double": ("READY", ""),
            "pipe": ("UNAVAILABLE", "unloaded"),
        }

        assert (await http.post("/repository/models/add/load")).status_code == 200  # add now loaded on its own
        assert (await http.post("/repository/models/pipe/load")).status_code == 200
        unload = {"parameters": {"unload_dependents": True}}
        assert (await http.post("/repository/models/pipe/unload", json=unload)).status_code == 200
        assert rows(await index(http)) == {
            "add": ("READY", ""), "double": ("UNAVAILABLE", "unloaded"), "pipe": ("UNAVAILABLE", "unloaded")
        }  # fmt: skip
        # An ensemble unloaded on purpose stays so when its model comes back.
        assert (await http.post("/repository/models/double/load")).status_code == 200
        assert rows(await index(http))["pipe"] == ("UNAVAILABLE", "unloaded")

        wrong = await http.post("/repository/models/add/unload", json={"parameters": {"unload_dependents": "yes"}})
        assert wrong.status_code == 400
        assert wrong.json()["error"] == "Unable to parse 'unload_dependents': expected a boolean, got str"
        assert "model_repository(unload_dependents)" in (await http.get("/")).json()["extensions"]


NOT_READY: dict[str, tuple[list[StepSpec], dict[str, Any], str]] = {
    "a model not served": (
        [("add", {"x": "IN"}, {"y": "mid"}), ("nope", {"a": "mid"}, {"b": "OUT"})], {},
        "ensemble pipe contains models that are not available or ambiguous: nope",
    ),
    "a version not served": (
        [("add", {"x": "IN"}, {"y": "OUT"})], {"version": 3},
        "ensemble 'pipe' depends on 'add' whose required version 3 is not loaded",
    ),
    "an input the model has not": (
        [("add", {"x": "IN", "z": "IN"}, {"y": "mid"}), ("double", {"a": "mid"}, {"b": "OUT"})], {},
        "in ensemble pipe, ensemble tensor IN is mapping to non-existing input z in model add",
    ),
    "an output the model does not make": (
        [("add", {"x": "IN"}, {"w": "mid"}), ("double", {"a": "mid"}, {"b": "OUT"})], {},
        "in ensemble pipe, ensemble tensor mid is mapped from non-existing output w in model add",
    ),
    "an input of the model left unmapped": (
        [("add", {"x": "IN"}, {"y": "mid"}), ("pair", {"p": "mid"}, {"s": "OUT"})], {},
        "in ensemble pipe, input q in model pair is not mapped to any ensemble tensors",
    ),
    "models that disagree on a tensor's data type": (
        [("add", {"x": "IN"}, {"y": "mid"}), ("floats", {"f": "mid"}, {"g": "OUT"})], {},
        "in ensemble pipe, ensemble tensor mid: inconsistent data type: TYPE_INT32 is inferred from model add while "
        "TYPE_FP32 is inferred from model floats",
    ),
    "models that disagree on a tensor's shape": (
        [("add", {"x": "IN"}, {"y": "mid"}), ("square", {"m": "mid"}, {"n": "OUT"})], {},
        "in ensemble pipe, ensemble tensor mid: inconsistent shape: [-1] is inferred from model add while [-1,2] is "
        "inferred from model square",
    ),
    "a batch larger than a model's": (
        [("small", {"x": "IN"}, {"y": "OUT"})], {"batch": 4},
        "ensemble pipe allows maximum batch size 4, but it contains model small which only allows maximum batch "
        "size to be 2",
    ),
    "a step taking the responses of two decoupled models": (
        [("repeat", {"x": "IN"}, {"r": "one"}), ("repeat", {"x": "IN"}, {"r": "two"}),
         ("pair", {"p": "one", "q": "two"}, {"s": "OUT"})], {},
        "in ensemble pipe, step of model 'pair' receives inputs originated from different decoupled models",
    ),
}  # fmt: skip


def _more_models() -> dict[str, Any]:
    from oip_asgi import Model

    def repeat(x: Any) -> Any:
        yield {"r": x}

    return {
        **CODE,
        "pair": Model(lambda p, q: {"s": p + q}, inputs=[spec("p"), spec("q")], outputs=[spec("s")]),
        "floats": Model(lambda f: {"g": f}, inputs=[spec("f", "FP32")], outputs=[spec("g", "FP32")]),
        "square": Model(lambda m: {"n": m}, inputs=[spec("m", shape=[-1, 2])], outputs=[spec("n", shape=[-1, 2])]),
        "small": Model(
            lambda x: x, inputs=[spec("x", shape=[-1, 1])], outputs=[spec("y", shape=[-1, 1])], max_batch_size=2
        ),
        "repeat": Model(repeat, inputs=[spec("x")], outputs=[spec("r")]),
    }


@pytest.mark.parametrize(("steps", "options", "reason"), list(NOT_READY.values()), ids=list(NOT_READY))
async def test_an_ensemble_that_cannot_serve_is_not_ready_and_says_why_and_the_server_goes_on(
    tmp_path: Path, steps: list[StepSpec], options: dict[str, Any], reason: str
) -> None:
    config = ensemble_config("pipe", steps)
    if "version" in options:
        config = config.replace("model_version: -1", f"model_version: {options['version']}")
    if "batch" in options:
        config = ensemble_config(
            "pipe", steps, inputs=(("IN", "TYPE_INT32", [1]),), outputs=(("OUT", "TYPE_INT32", [1]),),
            extra=f"max_batch_size: {options['batch']}",
        )  # fmt: skip
    app = served(tmp_path, {"pipe": config}, _more_models())
    async with client(app) as http:
        await app.load()
        assert rows(await index(http))["pipe"] == ("UNAVAILABLE", reason)
        assert (await http.get("/models/pipe/ready")).status_code != 200
        assert (await http.get("/health/ready")).status_code != 200  # a model that failed to load, as Triton
        response = await http.post("/models/pipe/infer", json=body(IN=[1]))
        assert response.status_code == 503 and reason in response.json()["error"]
        assert await infer(http, "add", x=[1]) == (200, [2])


async def test_ensembles_that_name_one_another_in_a_circle_are_refused_naming_the_circle(tmp_path: Path) -> None:
    write_ensemble(tmp_path, "outer", ensemble_config("outer", [("inner", {"x": "IN"}, {"y": "OUT"})]))
    declared = {"inputs": (("x", "TYPE_INT32", I32),), "outputs": (("y", "TYPE_INT32", I32),)}
    write_ensemble(tmp_path, "inner", ensemble_config("inner", [("outer", {"IN": "x"}, {"OUT": "y"})], **declared))
    write_ensemble(tmp_path, "self", ensemble_config("self", [("self", {"IN": "IN"}, {"OUT": "OUT"})]))
    app = oip_app(model_repository=ModelRepository(tmp_path, model_control_mode="explicit"))
    async with client(app) as http:
        await app.load()
        response = await http.post("/repository/models/outer/load")
        assert response.status_code == 400
        assert (
            response.json()["error"]
            == "failed to load 'outer': circular dependency between ensembles: outer -> inner -> outer"
        )
        response = await http.post("/repository/models/self/load")
        assert response.json()["error"] == "failed to load 'self': circular dependency between ensembles: self -> self"
        assert rows(await index(http))["outer"][0] == "UNAVAILABLE"


async def test_an_ensemble_of_ensembles_loads_inner_first_and_runs_through_both(tmp_path: Path) -> None:
    write_ensemble(tmp_path, "inner", ensemble_config("inner", CHAIN))
    write_ensemble(
        tmp_path,
        "outer",
        ensemble_config("outer", [("inner", {"IN": "IN"}, {"OUT": "mid"}), ("add", {"x": "mid"}, {"y": "OUT"})]),
    )
    app = oip_app(dict(CODE), model_repository=tmp_path)  # mode none: everything at start, in order
    async with client(app) as http:
        await app.load()
        assert await infer(http, "outer", IN=[1]) == (200, [5])  # ((1 + 1) * 2) + 1
        assert rows(await index(http)) == {"inner": ("READY", ""), "outer": ("READY", "")}


async def test_poll_mode_unloads_an_ensemble_whose_model_is_removed_and_serves_it_again_once_it_is_back(
    tmp_path: Path,
) -> None:
    repository(tmp_path)
    app = oip_app(model_repository=ModelRepository(tmp_path, model_control_mode="poll", repository_poll_secs=3600))
    async with client(app) as http:
        await app.load()
        assert await infer(http, "pipe", IN=[1]) == (200, [4])
        kept = tmp_path.parent / f"{tmp_path.name}-add"
        shutil.move(tmp_path / "add", kept)
        await app.core.control.poll_once()  # type: ignore[union-attr]
        assert rows(await index(http))["pipe"] == (
            "UNAVAILABLE", "ensemble pipe contains models that are not available or ambiguous: add"
        )  # fmt: skip
        shutil.move(kept, tmp_path / "add")
        await app.core.control.poll_once()  # type: ignore[union-attr]
        assert await infer(http, "pipe", IN=[1]) == (200, [4])


async def test_a_composing_model_from_code_that_failed_to_load_leaves_the_ensemble_not_ready(tmp_path: Path) -> None:
    from oip_asgi import Model

    def broken() -> None:
        raise RuntimeError("no weights")

    models = {**CODE, "double": Model(CODE["double"].predict, inputs=[spec("a")], outputs=[spec("b")], load=broken)}
    app = served(tmp_path, {"pipe": ensemble_config("pipe", CHAIN)}, models)
    async with client(app) as http:
        await app.load()
        assert (await http.get("/models/pipe/ready")).status_code != 200
        status, error = await infer(http, "pipe", IN=[1])
        assert status == 503 and error.startswith("in ensemble 'pipe', model 'double' version 1 failed to load")


def test_a_batch_loads_models_first_then_each_ensemble_after_the_ensembles_it_names() -> None:
    graph = {"outer": ("inner", "add"), "inner": ("add", "double"), "loop": ("loop",)}
    planned = batch(["outer", "add", "inner", "double", "loop"], graph.get)
    assert planned.levels == [["add", "double"], ["inner"], ["outer"]]
    assert planned.refused == {"loop": "circular dependency between ensembles: loop -> loop"}
    along = batch(["outer"], graph.get, lambda model: model != "add")
    assert along.levels == [["double"], ["inner"], ["outer"]]  # add: served already, so not loaded along
    names = EnsembleGraph(named={"outer": ("inner", "add"), "inner": ("add", "double")}, explicit={"add"})
    assert names.dependents({"add"}) == ["outer", "inner"] and names.dependents({"inner"}) == ["outer"]
    assert not names.only_along("add") and not names.only_along("double")
