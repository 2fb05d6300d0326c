"""A model folder read: its versions' `Model`s, its config completed, and what of it is not acted on.

The core's model control calls `read_model` off the event loop and serves what it returns; `model_names`
and `fingerprint` tell it which folders there are and whether one changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..model import Model
from ..python_backend import PythonHost, completed_config
from ..triton import is_integer_version
from ._config import HONOURED, HONOURED_PYTHON_BACKEND, ConfigError, checked_json, read_pbtxt, unacted
from ._ensemble import HONOURED_ENSEMBLE, Ensemble, checked_ensemble, ensemble_versions, is_ensemble
from ._errors import RepositoryError
from ._modules import Modules, ReadModules, release
from ._paths import PathError, folder_fingerprint, inside, is_model_name, model_folder, write_files
from ._reshape import reshaped, reshapes
from ._settings import completed_by_model, model_arguments
from ._version import triton_class, version_model


@dataclass(frozen=True)
class DirectoryModel:
    name: str
    versions: list[Model]  # integer versions ascending, those the version policy chose
    config: dict[str, Any] | None  # Triton's ModelConfig JSON, completed; None without config.pbtxt or override
    warnings: list[str]  # one message naming the config fields read and not acted on (the logger names the model)
    # The model.py modules it registered in sys.modules: `release` them once its versions stop serving.
    modules: Modules = field(default_factory=dict)
    ensemble: Ensemble | None = None  # an ensemble's steps: the core checks them against its models and runs them


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
    modules = ReadModules()
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
    modules: ReadModules,
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
    if config is not None and is_ensemble(config):
        return _ensemble(folder, name, config, numbers)
    triton = triton_class(folder / numbers[-1], name, numbers[-1], config or {}, modules)
    if triton is not None:  # Triton's Python model: its auto_complete_config completes the config first
        config = completed_config(triton, config or {}, name, host)
    settings = model_arguments(folder, name, config or {})
    versions = [
        _with_reshapes(version_model(folder / number, number, settings, config or {}, modules, host), config or {})
        for number in numbers
    ]
    _check_decoupled(name, config or {}, versions)
    ignored = unacted(config or {}, HONOURED if triton is None else HONOURED_PYTHON_BACKEND)
    warnings = [f"config fields not acted on: {', '.join(ignored)}"] if ignored else []
    return DirectoryModel(name, versions, completed_by_model(config, name, versions[-1]), warnings, modules)


def _ensemble(folder: Path, name: str, config: dict[str, Any], numbers: list[str]) -> DirectoryModel:
    ensemble = checked_ensemble(name, config)
    ignored = unacted(config, HONOURED_ENSEMBLE)
    warnings = [f"config fields not acted on: {', '.join(ignored)}"] if ignored else []
    completed = {
        "name": name,
        **config,
        "version_policy": config.get("version_policy", {"latest": {"num_versions": 1}}),
    }
    return DirectoryModel(
        name, ensemble_versions(folder, name, config, numbers), completed, warnings, ensemble=ensemble
    )


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
