"""Triton's Python backend, served: a model.py whose ``TritonPythonModel`` becomes a `Model` (docs/repository.md).

`utils` is ``triton_python_backend_utils``; `provide_utils` puts it in `sys.modules` under that name
before a model.py that may need it runs. `triton_model` builds the `Model` of one version.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

from ..calling import Calling
from ..model import Model
from .adapter import TritonModel, completed_config, is_triton_source
from .host import PythonHost, remember

__all__ = ["PythonHost", "TritonModel", "completed_config", "is_triton_source", "provide_utils", "remember",
           "triton_model"]  # fmt: skip

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
    # The core calls it with its requests, no more calls at once than it has instances; it is ready as they say.
    calling = Calling(takes_requests=True, instance_count=adapter.instance_count, ready=adapter.is_ready)
    if adapter.decoupled:
        predict: Any = adapter.stream
        declared = {key: value for key, value in declared.items() if key not in ("max_batch_size", "max_batch_delay")}
    else:
        predict = adapter.execute_async if adapter.is_async else adapter.execute
    return Model(predict, load=adapter.initialize, unload=adapter.finalize, calling=calling, **declared)
