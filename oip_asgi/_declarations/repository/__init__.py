"""A Triton-style model repository folder read into `Model` declarations (docs/repository.md).

``<root>/<model>/<version>/<file>`` with integer version folders, an optional
``<root>/<model>/config.pbtxt`` (Triton's ``ModelConfig`` in protobuf's text format) and the label
files it names. A version's file is a model file `Model.from_file` reads, or a ``model.py`` that
defines ``model`` (a `Model` or a callable) or Triton's ``class TritonPythonModel`` (`..python_backend`:
its ``auto_complete_config`` completes the config here, before the specs are built). Nothing here
serves: the core's repository manager calls `read_model` off the event loop and serves what it returns.
"""

from __future__ import annotations

import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..files import FORMATS
from ..files._common import AdvisedError
from ..model import Model
from ..model_repository import ModelRepository
from ..python_backend import PythonHost, completed_config, is_triton_source, provide_utils, triton_model
from ..spec import TensorSpec
from ..triton import DATATYPES_OF, backend_of, is_integer_version, tensor_json
from ._config import HONOURED, HONOURED_PYTHON_BACKEND, ConfigError, checked_json, read_pbtxt, unacted
from ._modules import Modules, module_name, register, release
from ._paths import PathError, folder_fingerprint, inside, is_model_name, model_folder, write_files
from ._reshape import reshaped, reshapes

__all__ = [
    "DirectoryModel",
    "ModelRepository",
    "Modules",
    "PathError",
    "RepositoryError",
    "fingerprint",
    "model_names",
    "read_model",
    "register",
    "release",
]


class RepositoryError(Exception):
    """A model the repository cannot serve; the message is the reason (the index and a request's 503 show it)."""


@dataclass(frozen=True)
class DirectoryModel:
    name: str
    versions: list[Model]  # integer versions ascending, those the version policy chose
    config: dict[str, Any] | None  # Triton's ModelConfig JSON, completed; None without config.pbtxt or override
    warnings: list[str]  # one message naming the config fields read and not acted on (the logger names the model)
    # The model.py modules it registered in sys.modules: `release` them once its versions stop serving.
    modules: Modules = field(default_factory=dict)


# Triton's file name for a platform's or backend's model, and the `Model.from_file` format it is.
DEFAULT_FILES = {
    "onnxruntime_onnx": "model.onnx",
    "onnxruntime": "model.onnx",
    "pytorch_libtorch": "model.pt",
    "torch_export": "model.pt2",
    "pytorch": "model.pt",
    "python": "model.py",
}
_FORMAT_OF = {
    "onnxruntime_onnx": "onnx",
    "onnxruntime": "onnx",
    "pytorch_libtorch": "torch",
    "torch_export": "torch",
    "pytorch": "torch",
    **{format: format for format in FORMATS},
}
# The parameter that lets a pickle or joblib file load: "true", or the skops types to trust, comma-separated.
TRUSTED = "trusted"


def model_names(root: Path) -> list[str]:
    """The model folders directly under `root`, sorted; anything that could not be served by its name is left out."""
    try:
        entries = list(root.iterdir())
    except OSError:
        return []
    return sorted(
        entry.name for entry in entries if is_model_name(entry.name) and entry.is_dir() and inside(entry, root)
    )


def fingerprint(root: Path, name: str) -> object:
    """A value that stays equal while nothing in the model's folder changes (names, sizes, modification times)."""
    try:
        folder = model_folder(root, name)
    except PathError:
        return None
    return folder_fingerprint(folder) if folder.is_dir() else None


def read_model(
    root: Path,
    name: str,
    *,
    config: Mapping[str, Any] | None = None,
    files: Mapping[str, bytes] | None = None,
    allow_files: bool = False,
    host: PythonHost | None = None,
) -> DirectoryModel:
    """The model in ``root/name``, its files read now; `config` and `files` are a load request's overrides.

    Its model.py modules are in `sys.modules` (`DirectoryModel.modules`); a read that fails leaves none.
    `host` is the server a Triton Python model's BLS, model control and metrics reach.
    """
    modules: dict[str, types.ModuleType] = {}
    try:
        try:
            return _read(root, name, config, files, allow_files, modules, host)
        except RepositoryError:
            raise
        except (PathError, ConfigError) as exc:
            raise RepositoryError(str(exc)) from exc
        except (Exception, SystemExit) as exc:  # a model file's library or a model.py raises what it raises
            raise RepositoryError(f"model {name!r}: {type(exc).__name__}: {exc}") from exc
    except BaseException:
        release(modules)
        raise


def _read(
    root: Path,
    name: str,
    override: Mapping[str, Any] | None,
    files: Mapping[str, bytes] | None,
    allow_files: bool,
    modules: dict[str, types.ModuleType],
    host: PythonHost | None = None,
) -> DirectoryModel:
    folder = model_folder(root, name)
    checked = None if override is None else checked_json(override)  # replaces config.pbtxt, as in Triton
    if files:
        if not allow_files:
            raise RepositoryError(
                "file overrides in a load request are off: the app must enable them to write into the repository"
            )
        write_files(folder, files)  # only once the request's config is known to be valid
    if not folder.is_dir():
        raise RepositoryError(f"no model {name!r} in the repository")
    config = checked if override is not None else _read_config(folder)
    if config is not None and config.get("name", name) != name:
        raise RepositoryError(f"config names model {config['name']!r}, but its folder is {name!r}")
    numbers = _versions(folder, config or {})
    triton = _triton_class(folder / numbers[-1], name, numbers[-1], config or {}, modules)
    if triton is not None:  # Triton's Python model: its auto_complete_config completes the config first
        config = completed_config(triton, config or {}, name, host)
    settings = _settings(folder, name, config or {})
    versions = [
        _with_reshapes(_version(folder / number, number, settings, config or {}, modules, host), config or {})
        for number in numbers
    ]
    _check_decoupled(name, config or {}, versions)
    ignored = unacted(config or {}, HONOURED if triton is None else HONOURED_PYTHON_BACKEND)
    warnings = [f"config fields not acted on: {', '.join(ignored)}"] if ignored else []
    return DirectoryModel(name, versions, _completed(config, name, versions[-1]), warnings, modules)


def _check_decoupled(name: str, config: Mapping[str, Any], versions: Sequence[Model]) -> None:
    """A config that declares the model decoupled is refused for a model that answers once: it would never stream."""
    if not config.get("model_transaction_policy", {}).get("decoupled", False):
        return
    once = [model.version for model in versions if not model.decoupled]
    if once:
        raise RepositoryError(
            f"model {name!r}: config.pbtxt declares model_transaction_policy {{ decoupled: true }}, but version "
            f"{', '.join(once)} answers once; a decoupled model is a generator function (it yields each response)"
        )


def _with_reshapes(model: Model, config: Mapping[str, Any]) -> Model:
    batching = config.get("max_batch_size", 0) > 0
    return reshaped(model, reshapes(config.get("input", [])), reshapes(config.get("output", [])), batching)


def _read_config(folder: Path) -> dict[str, Any] | None:
    file = folder / "config.pbtxt"
    return read_pbtxt(file) if file.is_file() else None


def _versions(folder: Path, config: Mapping[str, Any]) -> list[str]:
    found = sorted(
        (entry.name for entry in folder.iterdir() if entry.is_dir() and is_integer_version(entry.name)),
        key=int,
    )
    if not found:
        raise RepositoryError(f"model {folder.name!r} has no version folders (integer names such as 1/)")
    policy = config.get("version_policy", {"latest": {}})
    if "all" in policy:
        return found
    if "specific" in policy:
        wanted = [int(version) for version in policy["specific"].get("versions", [])]
        missing = sorted(set(wanted) - {int(version) for version in found})
        if missing:
            raise RepositoryError(
                f"model {folder.name!r}: version_policy names versions with no folder: {', '.join(map(str, missing))}"
            )
        return [version for version in found if int(version) in wanted]
    count = policy["latest"].get("num_versions", 1)
    return found[-count:] if count > 0 else found[-1:]


def _settings(folder: Path, name: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """What the config declares, as `Model` arguments (every version shares them)."""
    batching = config.get("max_batch_size", 0) > 0
    settings: dict[str, Any] = {"name": name}
    if "input" in config:
        settings["inputs"] = [_spec(tensor, batching) for tensor in config["input"]]
    if "output" in config:
        settings["outputs"] = [_spec(tensor, batching) for tensor in config["output"]]
        labels = {
            tensor["name"]: _labels(folder, tensor["label_filename"])
            for tensor in config["output"]
            if tensor.get("label_filename")
        }
        if labels:
            settings["labels"] = labels
    if config.get("platform") or config.get("backend"):
        settings["platform"] = config.get("platform") or config["backend"]
    if config.get("parameters"):
        settings["properties"] = {key: value.get("string_value", "") for key, value in config["parameters"].items()}
    if batching and "dynamic_batching" in config:
        # Without dynamic_batching Triton still takes batched requests, one call each: so do we.
        settings["max_batch_size"] = config["max_batch_size"]
        delay = config["dynamic_batching"].get("max_queue_delay_microseconds", 0)
        settings["max_batch_delay"] = delay / 1_000_000
    return settings


def _spec(tensor: Mapping[str, Any], batching: bool) -> TensorSpec:
    type_name = tensor.get("data_type", "TYPE_INVALID")
    datatype = DATATYPES_OF.get(type_name, type_name.removeprefix("TYPE_"))
    if datatype == "INVALID":
        raise RepositoryError(f"tensor {tensor.get('name', '')!r} has no data_type")
    dims = list(tensor.get("dims", []))
    return TensorSpec(
        tensor.get("name", ""), datatype, [-1, *dims] if batching else dims, tensor.get("optional", False)
    )


def _labels(folder: Path, filename: str) -> list[str]:
    file = folder / filename
    if not is_model_name(filename) or not file.is_file():
        raise RepositoryError(f"label file {filename!r} is not a file in model folder {folder.name!r}")
    lines = file.read_text(encoding="utf-8").splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def _version(
    folder: Path,
    number: str,
    settings: Mapping[str, Any],
    config: Mapping[str, Any],
    modules: dict[str, types.ModuleType],
    host: PythonHost | None = None,
) -> Model:
    file = _model_file(folder, config)
    declared = {**settings, "version": number}
    if file.name.endswith(".py"):
        module = _module(file, declared["name"], number, modules)
        cls = _triton_class_of(module)
        if cls is not None:
            return triton_model(cls, declared, dict(config), folder.parent, host)
        return _python_model(file, module, declared)
    kind = config.get("platform") or config.get("backend") or ""
    trusted = _trusted(config.get("parameters", {}).get(TRUSTED, {}).get("string_value", ""))
    options: dict[str, Any] = {"trusted": trusted} if trusted else {}
    if config:  # its config says whether it batches (Triton auto-completes only a model without one)
        declared.setdefault("max_batch_size", None)
    try:
        return Model.from_file(file, format=_FORMAT_OF.get(kind), **options, **declared)
    except AdvisedError as exc:  # its way forward here is the config's, not Model.from_file's argument
        raise RepositoryError(f"model {declared['name']!r}: {exc.for_origin('repository')}") from exc


def _model_file(folder: Path, config: Mapping[str, Any]) -> Path:
    named: str = config.get("default_model_filename", "")
    if named:
        if not is_model_name(named) or not (folder / named).exists():
            raise RepositoryError(f"version {folder.name} of {folder.parent.name!r} has no {named!r}")
        return folder / named
    files = sorted(entry for entry in folder.iterdir() if not entry.name.startswith("."))
    default = DEFAULT_FILES.get(config.get("platform") or config.get("backend") or "")
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


def _trusted(value: str) -> bool | list[str]:
    if value.strip().lower() in ("", "false", "0", "no"):
        return False
    if value.strip().lower() in ("true", "1", "yes"):
        return True
    return [part.strip() for part in value.split(",") if part.strip()]


def _module(file: Path, model: str, version: str, modules: dict[str, types.ModuleType]) -> types.ModuleType:
    """A version's model.py, run once per read (`modules` keeps it)."""
    # One module per model version, replaced on reload, so that pickling and dataclasses find it by name.
    # Compiled from the source each time: no __pycache__ written into the repository (poll mode would see
    # a change), and no stale bytecode for a model.py rewritten within its file system's mtime resolution.
    name = module_name(model, version)
    if name in modules:
        return modules[name]
    module = types.ModuleType(name)
    module.__file__ = str(file)
    source = file.read_bytes()
    if is_triton_source(source):
        provide_utils()  # `import triton_python_backend_utils as pb_utils` works in the file, unchanged
    code = compile(source, str(file), "exec")
    register({name: module})
    modules[name] = module
    exec(code, module.__dict__)
    return module


def _triton_class_of(module: types.ModuleType) -> type | None:
    """Triton's ``TritonPythonModel`` class where the module defines it (and no ``model`` of ours)."""
    found = getattr(module, "TritonPythonModel", None)
    return found if isinstance(found, type) and not hasattr(module, "model") else None


def _triton_class(
    folder: Path, name: str, number: str, config: Mapping[str, Any], modules: dict[str, types.ModuleType]
) -> type | None:
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


def _completed(config: dict[str, Any] | None, name: str, newest: Model) -> dict[str, Any] | None:
    """The config as Triton completes it: what it leaves out, from the model it declares."""
    if config is None:
        return None
    completed = {"name": name, **config}
    if not completed.get("platform") and not completed.get("backend"):
        completed["platform"] = newest.platform
    if not completed.get("backend"):
        completed["backend"] = backend_of(completed.get("platform", ""))
    completed.setdefault("version_policy", {"latest": {"num_versions": 1}})
    if newest.decoupled:
        completed["model_transaction_policy"] = {"decoupled": True}
    batching = completed.get("max_batch_size", 0) > 0
    for key, specs in (("input", newest.inputs), ("output", newest.outputs)):
        if key not in completed and specs:
            completed[key] = [tensor_json(spec, batching) for spec in specs]
    return completed
