"""One version of a model folder as a `Model`: its model file (`Model.from_file`), or its model.py, run
once per read, which defines ``model`` or Triton's ``TritonPythonModel`` (`..python_backend`)."""

from __future__ import annotations

import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..files._common import AdvisedError
from ..files.formats import by_triton_name, default_file
from ..model import Model
from ..python_backend import PythonHost, is_triton_source, provide_utils, triton_model
from ._errors import RepositoryError
from ._imports import ModelImports, install
from ._modules import ROOT, ReadModules, module_name, register
from ._paths import is_model_name

# The parameter that lets a pickle or joblib file load: "true", or the skops types to trust, comma-separated.
TRUSTED = "trusted"


def version_model(
    folder: Path,
    number: str,
    settings: Mapping[str, Any],
    config: Mapping[str, Any],
    modules: ReadModules,
    host: PythonHost | None = None,
) -> Model:
    """Version `number` (its folder `folder`) as a `Model`, declared as the model's `settings` say."""
    file = _model_file(folder, config)
    declared = {**settings, "version": number}
    if file.name.endswith(".py"):
        module = _module(file, declared["name"], number, modules)
        cls = _triton_class_of(module)
        if cls is not None:
            return triton_model(cls, declared, dict(config), folder.parent, host)
        return _python_model(file, module, declared)
    known = by_triton_name(_kind(config))  # else the file's extension or content tells
    trusted = _trusted(config.get("parameters", {}).get(TRUSTED, {}).get("string_value", ""))
    options: dict[str, Any] = {"trusted": trusted} if trusted else {}
    if config:  # its config says whether it batches (Triton auto-completes only a model without one)
        declared.setdefault("max_batch_size", None)
    try:
        return Model.from_file(file, format=known.name if known else None, **options, **declared)
    except AdvisedError as exc:  # its way forward here is the config's, not Model.from_file's argument
        raise RepositoryError(f"model {declared['name']!r}: {exc.for_origin('repository')}") from exc


def _model_file(folder: Path, config: Mapping[str, Any]) -> Path:
    named: str = config.get("default_model_filename", "")
    if named:
        if not is_model_name(named) or not (folder / named).exists():
            raise RepositoryError(f"version {folder.name} of {folder.parent.name!r} has no {named!r}")
        return folder / named
    files = sorted(entry for entry in folder.iterdir() if not entry.name.startswith("."))
    kind = _kind(config)
    default = "model.py" if kind == "python" else default_file(kind)  # the file Triton's platform or backend reads
    candidates = [entry for entry in files if entry.name == default] or [
        entry for entry in files if entry.stem == "model"
    ]
    if len(candidates) == 1:
        return candidates[0]
    if len(files) == 1:
        return files[0]
    listed = ", ".join(entry.name for entry in files) or "nothing"
    raise RepositoryError(
        f"version {folder.name} of {folder.parent.name!r} holds {listed}: name the model file model.<ext> "
        "or set default_model_filename"
    )


def _kind(config: Mapping[str, Any]) -> str:
    """The config's platform, or else its backend: Triton's name for what runs the model."""
    kind: str = config.get("platform") or config.get("backend") or ""
    return kind


def _trusted(value: str) -> bool | list[str]:
    if value.strip().lower() in ("", "false", "0", "no"):
        return False
    if value.strip().lower() in ("true", "1", "yes"):
        return True
    return [part.strip() for part in value.split(",") if part.strip()]


def _module(file: Path, model: str, version: str, modules: ReadModules) -> types.ModuleType:
    """A version's model.py, run once per read (`modules` keeps it)."""
    # One module per model version, replaced on reload, so that pickling and dataclasses find it by name.
    # Compiled from the source each time: no __pycache__ written into the repository (poll mode would see
    # a change), and no stale bytecode for a model.py rewritten within its file system's mtime resolution.
    name = module_name(model, version)
    if name in modules:
        return modules[name]
    # Its neighbours importable, as Triton makes them: the version folder, then the model folder (_imports.py).
    imports = ModelImports(name, [file.parent, file.parent.parent], modules)
    module = imports.package_module(file)
    source = file.read_bytes()
    if is_triton_source(source):
        provide_utils()  # `import triton_python_backend_utils as pb_utils` works in the file, unchanged
    code = compile(source, str(file), "exec")
    install(ROOT)
    register({name: module})
    imports.run(module, code)
    return module


def _triton_class_of(module: types.ModuleType) -> type | None:
    """Triton's ``TritonPythonModel`` class where the module defines it (and no ``model`` of ours)."""
    found = getattr(module, "TritonPythonModel", None)
    return found if isinstance(found, type) and not hasattr(module, "model") else None


def triton_class(folder: Path, name: str, number: str, config: Mapping[str, Any], modules: ReadModules) -> type | None:
    """The newest version's ``TritonPythonModel``, where its file is a model.py that defines one."""
    file = _model_file(folder, config)
    if not file.name.endswith(".py") or not is_triton_source(file.read_bytes()):
        return None
    return _triton_class_of(_module(file, name, number, modules))


def _python_model(file: Path, module: types.ModuleType, declared: Mapping[str, Any]) -> Model:
    """``model`` from a version's model.py: a `Model` (what the config declares wins) or a callable."""
    found = getattr(module, "model", None)
    if isinstance(found, Model):
        return found.replace(**declared)
    if callable(found):
        return Model(found, **declared)
    raise RepositoryError(
        f"{file.parent.name}/{file.name} defines no `model` (a Model or a callable) and no class TritonPythonModel"
    )
