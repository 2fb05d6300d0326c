"""What reading a model folder asks of Triton's Python backend: ``pb_utils`` importable before a model.py
runs, the config its class's ``auto_complete_config`` completes, and the `Model` of one version."""

from __future__ import annotations

import json
import sys
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..calling import Calling
from ..model import Model
from .adapter import TritonModel
from .host import PythonHost, enter, leave
from .instances import completed_groups
from .model_config import ModelConfig

UTILS = "triton_python_backend_utils"


def provide_utils() -> types.ModuleType:
    """``triton_python_backend_utils`` importable (ours, unless the process has one of that name already)."""
    from . import utils

    existing = sys.modules.setdefault(UTILS, utils)
    return existing


def triton_model(
    cls: type, declared: dict[str, Any], config: dict[str, Any], folder: Path, host: PythonHost | None
) -> Model:
    """One version's `Model` of `cls`: `declared` are `Model`'s arguments from the completed `config`."""
    adapter = TritonModel(cls, declared["name"], declared["version"], folder, config, host)
    # The core calls it with its requests (those a dynamic batch collected, or one), no more calls at once
    # than it has instances, save a decoupled one's (each request a stream); it is ready as they say.
    calling = Calling(
        takes_requests=True,
        decoupled=adapter.decoupled,
        instance_count=None if adapter.decoupled else adapter.instance_count,
        ready=adapter.is_ready,
    )
    predict: Callable[..., object] = adapter.execute_async if adapter.is_async else adapter.execute
    if adapter.decoupled:
        predict = adapter.streams
    return Model(predict, load=adapter.initialize, unload=adapter.finalize, calling=calling, **declared)


def is_triton_source(source: bytes) -> bool:
    """Whether a model.py may define Triton's class (checked before running it, to provide pb_utils)."""
    return b"TritonPythonModel" in source


def completed_config(cls: type, config: Mapping[str, Any], name: str, host: PythonHost | None) -> dict[str, Any]:
    """The config after the class's ``auto_complete_config``, and Triton's defaults for a Python model."""
    base = {"name": name, "backend": "python", **config}
    auto_complete = getattr(cls, "auto_complete_config", None)
    if auto_complete is None:
        return base | {"instance_group": completed_groups(base, name)}
    token = enter(host)
    try:
        completed = auto_complete(ModelConfig(json.dumps(base)))
    finally:
        leave(token)
    if not isinstance(completed, ModelConfig):
        raise TypeError(f"auto_complete_config returned a {type(completed).__name__}, not the ModelConfig it was given")
    result = completed.as_dict()
    if not result.get("input"):
        result.pop("input", None)
    if not result.get("output"):
        result.pop("output", None)
    result["instance_group"] = completed_groups(result, name)
    return result
