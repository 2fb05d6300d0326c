"""A model's config as `Model`'s arguments (every version shares them), and the config as Triton completes it
from the model it declares."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..model import Model
from ..spec import TensorSpec
from ..triton import DATATYPES_OF, backend_of, tensor_json
from ._errors import RepositoryError
from ._paths import is_model_name


def model_arguments(folder: Path, name: str, config: Mapping[str, Any]) -> dict[str, Any]:
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


def completed_by_model(config: dict[str, Any] | None, name: str, newest: Model) -> dict[str, Any] | None:
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
