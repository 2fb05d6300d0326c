"""Triton's model configuration extension: a served `Model` as the ``ModelConfig`` Triton would answer.

The dict has Triton's field names (as its JSON writes them, with proto field names) and holds what
the declaration knows: a bare callable has a name, platform, backend, version policy and instance
group, and no tensors. Both wires send it: REST as JSON, gRPC parsed into ``inference.ModelConfig``.

What Triton would read from files we have not got:

- ``label_filename``: an output with labels names ``<output>_labels.txt``, the file a Triton model
  directory would hold them in. Nothing is served at that name: the name says the output has labels,
  and the classification extension answers with them.
- ``dims``: a batching model's tensors without their first (batch) dimension, as Triton writes them,
  even when none is left (``[]`` for a tensor of one value per row, where Triton's own configurations
  write ``[1]`` with a ``reshape``: we accept no such reshape on the wire, so we do not claim one).
- ``version_policy``: every version is served: ``specific`` with their numbers, or ``all`` when
  some version has a name rather than a number (Triton's versions are integers).
- ``model_transaction_policy``: ``decoupled`` for a generator, which answers over time.
- ``instance_group``: one group of kind ``KIND_CPU``; its ``count`` is ``max_concurrency`` when the
  model has one (the calls it runs at once), else 1 as Triton's default (the count is not a bound).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._declarations.model import Model
from .._declarations.spec import TensorSpec
from .._declarations.triton import backend_of, is_integer_version, tensor_json


def model_config(name: str, model: Model, versions: Sequence[str]) -> dict[str, Any]:
    """`model`, served as `name` in `versions` (its own among them), as Triton's ``ModelConfig`` JSON."""
    batching = model.max_batch_size is not None
    config: dict[str, Any] = {
        "name": name,
        "platform": model.platform,
        "backend": backend_of(model.platform),
        "version_policy": _version_policy(versions),
        "max_batch_size": model.max_batch_size or 0,
        "input": [tensor_json(spec, batching) | _input_flags(spec) for spec in model.inputs or ()],
        "output": [tensor_json(spec, batching) | _label_file(model, spec) for spec in model.outputs or ()],
        "instance_group": [
            {"name": f"{name}_0", "kind": "KIND_CPU", "count": model.max_concurrency or 1},
        ],
    }
    if batching:
        config["dynamic_batching"] = {"max_queue_delay_microseconds": round(model.max_batch_delay * 1_000_000)}
    if model.decoupled:
        config["model_transaction_policy"] = {"decoupled": True}
    if model.properties:
        config["parameters"] = {key: {"string_value": value} for key, value in model.properties.items()}
    return config


def _version_policy(versions: Sequence[str]) -> dict[str, Any]:
    if all(map(is_integer_version, versions)):
        return {"specific": {"versions": [int(version) for version in versions]}}
    return {"all": {}}


def _input_flags(spec: TensorSpec) -> dict[str, Any]:
    return {"optional": True} if spec.optional else {}


def _label_file(model: Model, spec: TensorSpec) -> dict[str, Any]:
    return {"label_filename": f"{spec.name}_labels.txt"} if model.labels_for(spec.name) is not None else {}
