"""The model-file formats' registry (`_declarations/files/formats.py`): pyproject.toml covers every entry, and
docs/architecture.md's recipe for a new format is true: one entry and a loader, and every place picks it up."""

from __future__ import annotations

import importlib.util
import logging.config
import sys
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from oip_asgi import Model, oip_app
from oip_asgi._declarations.files._common import FileModel, ModelFileError, Runner, check_options, require, spec
from oip_asgi._declarations.files.formats import FORMATS, FileFormat
from oip_asgi._declarations.repository import read_model
from oip_asgi._hosts.cli import main
from oip_asgi._hosts.cli.target import FileOptions, TargetError, file_models
from tests.support.servers import ROOT

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


# -- pyproject.toml cannot import the registry: these keep it from drifting ------------------------------------------


@pytest.mark.parametrize("entry", FORMATS.values(), ids=list(FORMATS))
def test_every_formats_extra_is_in_pyproject_and_its_packages_have_mypy_overrides(entry: FileFormat) -> None:
    assert PYPROJECT["project"]["optional-dependencies"].get(entry.extra), f"pyproject.toml has no extra {entry.extra}"
    overridden = {module for override in PYPROJECT["tool"]["mypy"]["overrides"] for module in override["module"]}
    assert {f"{package}.*" for package in entry.packages} <= overridden


@pytest.mark.parametrize("entry", FORMATS.values(), ids=list(FORMATS))
def test_every_formats_loader_is_a_module_with_read(entry: FileFormat) -> None:
    loader = importlib.import_module(entry.loader, "oip_asgi._declarations.files")  # imports no library
    assert callable(loader.read)


def test_no_two_formats_claim_one_extension_or_one_triton_name() -> None:
    extensions = [extension for entry in FORMATS.values() for extension in entry.extensions]
    assert len(extensions) == len(set(extensions)) and all(e.startswith(".") and e == e.lower() for e in extensions)
    for kind in {kind for entry in FORMATS.values() for kind in (entry.name, *entry.triton)}:
        claiming = [entry.name for entry in FORMATS.values() if kind == entry.name or kind in entry.triton]
        assert len(claiming) == 1, (kind, claiming)


# -- The recipe (docs/architecture.md, "Recipe: a new model-file format"), followed for a toy format -----------------
#
# A .toy file is "TOY" and a number on a line each; its model multiplies a table of rows by that number. Its library
# is `toylib` (the toy extra's), which this test puts in sys.modules.


def read(file: Path, options: dict[str, Any], declared: Mapping[str, Any]) -> FileModel:
    """The toy format's loader (the entry names this module)."""
    check_options(options, ("offset",), "toy")
    require("toylib", f"model file {file.name!r}")
    magic, factor = file.read_text().split()
    if magic != "TOY":
        raise ModelFileError(f"{file.name!r} is no toy model")
    return FileModel(
        predict=_Times(float(factor) + options.get("offset", 0.0)),
        inputs=[spec("rows", "FP64", [-1, 2])],
        outputs=[spec("scaled", "FP64", [-1, 2])],
        batches_rows=True,
    )


class _Times(Runner):
    def __init__(self, factor: float) -> None:
        self.factor = factor
        self.outputs = ["scaled"]

    def __call__(self, **inputs: np.ndarray) -> Mapping[str, np.ndarray]:
        return {"scaled": inputs["rows"] * self.factor}


TOY = FileFormat(
    name="toy",
    title="Toy",
    extensions=(".toy",),
    sniff=lambda content: content.head.startswith(b"TOY\n"),
    platform="toy",
    extra="toy",
    packages=("toylib",),
    loader=__name__,
    triton={"toy": "model.toy"},  # its own name as Triton's: the file its version folders hold
    tabular=True,
)


@pytest.fixture
def command_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """`main` as the command runs it, but leaving this process's sys.path and logging as they were."""
    monkeypatch.setattr(sys, "path", list(sys.path))  # the command adds --app-dir to it
    monkeypatch.setattr(logging.config, "dictConfig", lambda config: None)


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The toy format registered for this test alone, its library importable, and a file of it: x.toy."""
    monkeypatch.setitem(FORMATS, TOY.name, TOY)
    monkeypatch.setitem(sys.modules, "toylib", types.ModuleType("toylib"))
    file = tmp_path / "x.toy"
    file.write_text("TOY\n2.5\n")
    return file


@pytest.mark.usefixtures("command_in_process")
def test_without_its_entry_a_toy_file_is_no_model_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "x.toy").write_text("TOY\n2.5\n")
    with pytest.raises(ModelFileError, match="cannot tell which library"):
        Model.from_file(tmp_path / "x.toy")
    with pytest.raises(ValueError, match="unknown model file format 'toy'"):
        Model.from_file(tmp_path / "x.toy", format="toy")
    assert main(["serve", "missing.toy"]) == 2
    assert (
        "'missing.toy' is neither MODULE:ATTR (for example mymodels:models) nor a model file" in capsys.readouterr().err
    )


@pytest.mark.anyio
async def test_model_from_file_reads_and_serves_a_toy_file_by_its_extension_or_its_content(toy: Path) -> None:
    model = Model.from_file(toy)
    assert (model.name, model.platform, model.max_batch_size) == ("x", "toy", 64)  # the entry's platform
    assert Model.from_file(toy, offset=0.5).predict(rows=np.ones((1, 2)))["scaled"].tolist() == [[3.0, 3.0]]
    with pytest.raises(TypeError, match="unknown option colour for a Toy file; it takes lazy, offset"):
        Model.from_file(toy, colour="red")
    (toy.parent / "y.bin").write_bytes(toy.read_bytes())
    assert Model.from_file(toy.parent / "y.bin").platform == "toy"  # sniffed
    lazy = Model.from_file(toy, lazy=True)
    assert lazy.platform == "toy"

    app = oip_app({"x": model, "lazy": lazy})
    await app.load()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        for name in ("x", "lazy"):
            body = {"inputs": [{"name": "rows", "datatype": "FP64", "shape": [1, 2], "data": [1, 2]}]}
            response = await client.post(f"/models/{name}/infer", json=body)
            assert response.json()["outputs"][0]["data"] == [2.5, 5.0], name
        assert (await client.get("/models/x")).json()["platform"] == "toy"
    await app.core.close()


def test_a_repository_version_of_a_toy_platform_is_its_default_file(toy: Path, tmp_path: Path) -> None:
    folder = tmp_path / "repository" / "toys"
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.toy").write_bytes(toy.read_bytes())
    (folder / "1" / "model.txt").write_text("notes, not the model")  # two model.<ext>: the platform's file wins
    (folder / "2").mkdir()
    (folder / "2" / "model").write_bytes(toy.read_bytes())  # the config's format, whatever the file's name
    for kind in ('platform: "toy"', 'backend: "toy"'):
        (folder / "config.pbtxt").write_text(kind + "\nversion_policy: { all { } }\n")
        versions = read_model(tmp_path / "repository", "toys").versions
        assert [model.version for model in versions] == ["1", "2"], kind
        assert [model.predict(rows=np.ones((1, 2)))["scaled"].tolist() for model in versions] == [[[2.5, 2.5]]] * 2


@pytest.mark.usefixtures("command_in_process")
def test_the_serve_command_takes_toy_files_and_their_tabular_options(
    toy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    models = file_models([str(toy)], FileOptions(input_datatype="FP32"))  # a tabular format's
    assert models["x"].platform == "toy" and [spec.datatype for spec in models["x"].inputs or ()] == ["FP32"]
    assert main(["serve", "missing.toy"]) == 2
    assert capsys.readouterr().err == "oip-asgi: error: no such file: 'missing.toy'\n"  # its extension names a model


def test_a_toy_file_without_its_library_names_its_extra(toy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "toylib", None)
    with pytest.raises(ImportError, match=r"model file 'x.toy' needs the toylib package: pip install -e '\.\[toy\]'"):
        Model.from_file(toy)
    with pytest.raises(TargetError, match=r"needs the toylib package: pip install -e '\.\[toy\]'"):
        file_models([str(toy)], FileOptions())
