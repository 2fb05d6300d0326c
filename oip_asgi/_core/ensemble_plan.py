"""An ensemble checked against the models it is made of, as they serve now: its `Plan`, or why it cannot serve.

The ensemble's config was checked on its own when it was read (``_declarations/repository/_ensemble.py``);
here, in Triton's words (its ``ValidateEnsembleConfig``), is what depends on its composing models: each
is served (in the version a step asks for), takes the inputs and makes the outputs its step maps, with the
data types and shapes the other steps and the ensemble's own tensors give them, and batches at least as
much as the ensemble does; no step takes tensors that come from two different decoupled models. An
ensemble one of whose steps is decoupled is decoupled itself, as in Triton. The model control plans an
ensemble whenever it loads it or one of its composing models changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .._declarations.repository import Ensemble, EnsembleStep, RepositoryError
from .._declarations.spec import TensorSpec
from .._declarations.triton import DATA_TYPES
from .request import RequestedOutput
from .served import Cause, ServedModels
from .serving import ServedModel


@dataclass(frozen=True, slots=True)
class Step:
    """An ensemble's step as it runs: its model, the tensors it takes and makes, and what its model batches."""

    index: int
    model: str
    version: str | None  # None: the newest
    inputs: tuple[tuple[str, str], ...]  # (the model's input, the ensemble tensor given to it)
    outputs: tuple[tuple[str, str], ...]  # (the model's output, the ensemble tensor it makes)
    batching: bool  # the model's max_batch_size is above 0: its tensors lead with the batch dimension
    dims: Mapping[str, tuple[int, ...]]  # each declared input's dims without the batch dimension
    decoupled: bool
    takes: tuple[str, ...]  # the ensemble tensors it takes, each once
    makes: tuple[str, ...]  # and those it makes
    requested: tuple[RequestedOutput, ...]  # what it asks its model for: the outputs it maps, as Triton asks


@dataclass(frozen=True, slots=True)
class Plan:
    """An ensemble ready to run: its steps, which step makes each tensor and which take it."""

    name: str
    steps: tuple[Step, ...]
    made_by: Mapping[str, int]
    taken_by: Mapping[str, tuple[int, ...]]
    inputs: tuple[str, ...]
    outputs: Mapping[str, tuple[int, ...]]  # each output's dims without the batch dimension
    max_batch_size: int
    decoupled: bool


@dataclass(frozen=True, slots=True)
class _Tensor:
    """What a model (or the ensemble) says of an ensemble tensor: its data type and shape."""

    model: str
    data_type: str
    dims: tuple[int, ...]
    batching: bool

    @property
    def full(self) -> tuple[int, ...]:
        return (-1, *self.dims) if self.batching else self.dims


def plan(ensemble: Ensemble, served: ServedModels, config_of: Callable[[ServedModel], dict[str, Any]]) -> Plan:
    """`ensemble` checked against its composing models as `served` serves them now; RepositoryError says why not."""
    models = _composing(ensemble, served)
    name = ensemble.name
    batching = ensemble.max_batch_size > 0
    tensors = {
        declared.name: _Tensor(name, declared.data_type, declared.dims, batching)
        for declared in (*ensemble.inputs, *ensemble.outputs)
    }
    steps: list[Step] = []
    for index, declared in enumerate(ensemble.steps):
        model = models[index]
        most = config_of(model).get("max_batch_size", 0)
        if most != 0 and most < ensemble.max_batch_size:
            raise RepositoryError(
                f"ensemble {name} allows maximum batch size {ensemble.max_batch_size}, but it contains model "
                f"{declared.model_name} which only allows maximum batch size to be {most}"
            )
        steps.append(_checked_step(name, index, declared, model, most > 0, tensors))
    decoupled = _check_decoupled(ensemble, steps)
    taken_by: dict[str, list[int]] = {}
    for step in steps:
        for taken in step.takes:
            taken_by.setdefault(taken, []).append(step.index)
    return Plan(
        name,
        tuple(steps),
        {tensor: step.index for step in steps for _, tensor in step.outputs},
        {tensor: tuple(indexes) for tensor, indexes in taken_by.items()},
        tuple(tensor.name for tensor in ensemble.inputs),
        {tensor.name: tensor.dims for tensor in ensemble.outputs},
        ensemble.max_batch_size,
        decoupled,
    )


def _composing(ensemble: Ensemble, served: ServedModels) -> list[ServedModel]:
    """Each step's model, served in the version it asks for; else Triton's reason why the ensemble cannot serve."""
    name = ensemble.name
    missing = []
    for step in ensemble.steps:
        model = step.model_name
        if model in served:
            continue
        record = served.not_served(model)
        if record is not None and record.cause is Cause.FAILED:
            raise RepositoryError(
                f"ensemble '{name}' depends on '{model}' which has no loaded version. Model '{model}' loading "
                f"failed with error: {record.reason}"
            )
        missing.append(model)
    if missing:
        raise RepositoryError(
            f"ensemble {name} contains models that are not available or ambiguous: {', '.join(dict.fromkeys(missing))}"
        )
    models = []
    for step in ensemble.steps:
        version = None if step.model_version == -1 else str(step.model_version)
        if version is not None and version not in served.versions(step.model_name):
            raise RepositoryError(
                f"ensemble '{name}' depends on '{step.model_name}' whose required version {version} is not loaded"
            )
        models.append(served.get(step.model_name, version))
    return models


def _checked_step(
    name: str, index: int, step: EnsembleStep, model: ServedModel, batching: bool, tensors: dict[str, _Tensor]
) -> Step:
    """Triton's ``ValidateTensorMapping``: the step's maps against its model's tensors, and each tensor's data type
    and shape as every model that takes or makes it says (a model that declares no tensors takes what it gets)."""
    where = f"in ensemble {name}"
    model_name = step.model_name
    if model.inputs is not None:
        _declared(where, step.input_map, model.input_spec, "is mapping to non-existing input", model_name)
        for spec in model.inputs:
            given = step.input_map.get(spec.name)
            if given is None:
                if spec.optional:
                    continue
                raise RepositoryError(
                    f"{where}, input {spec.name} in model {model_name} is not mapped to any ensemble tensors"
                )
            _consistent(where, given, tensors, _said(model_name, spec, batching))
    if model.outputs is not None:
        _declared(where, step.output_map, model.output_spec, "is mapped from non-existing output", model_name)
        for model_output, made in step.output_map.items():
            _consistent(where, made, tensors, _said(model_name, model.output_spec(model_output), batching))
    version = None if step.model_version == -1 else str(step.model_version)
    dims = {spec.name: tuple(spec.shape[1:] if batching else spec.shape) for spec in model.inputs or ()}
    return Step(
        index, model_name, version, tuple(step.input_map.items()), tuple(step.output_map.items()), batching, dims,
        model.decoupled, tuple(dict.fromkeys(step.input_map.values())), tuple(step.output_map.values()),
        tuple(RequestedOutput(output) for output in step.output_map),
    )  # fmt: skip


def _declared(
    where: str, mapping: Mapping[str, str], spec_of: Callable[[str], TensorSpec | None], what: str, model: str
) -> None:
    """Every tensor of the model's a step maps is one the model declares."""
    for own, tensor in mapping.items():
        if spec_of(own) is None:
            raise RepositoryError(f"{where}, ensemble tensor {tensor} {what} {own} in model {model}")


def _said(model: str, spec: TensorSpec | None, batching: bool) -> _Tensor:
    assert spec is not None  # (looked up above)
    dims = tuple(spec.shape[1:] if batching else spec.shape)
    return _Tensor(model, DATA_TYPES[spec.datatype], dims, batching)


def _consistent(where: str, tensor: str, tensors: dict[str, _Tensor], said: _Tensor) -> None:
    known = tensors.setdefault(tensor, said)
    if known is said:
        return
    if known.data_type != said.data_type:
        raise RepositoryError(
            f"{where}, ensemble tensor {tensor}: inconsistent data type: {known.data_type} is inferred from model "
            f"{known.model} while {said.data_type} is inferred from model {said.model}"
        )
    # Shapes agree with -1 as a wildcard; or in full, where a batching model's [d] meets another's [-1, d].
    if not (_fits(known.dims, said.dims) or _fits(known.full, said.full)):
        raise RepositoryError(
            f"{where}, ensemble tensor {tensor}: inconsistent shape: {_text(known.full)} is inferred from model "
            f"{known.model} while {_text(said.full)} is inferred from model {said.model}"
        )


def _fits(one: tuple[int, ...], other: tuple[int, ...]) -> bool:
    return len(one) == len(other) and all(a == b or -1 in (a, b) for a, b in zip(one, other, strict=True))


def _text(dims: tuple[int, ...]) -> str:
    return "[" + ",".join(map(str, dims)) + "]"


def _check_decoupled(ensemble: Ensemble, steps: list[Step]) -> bool:
    """Each tensor comes from the ensemble's inputs or from one decoupled step's responses (its label); a step, and
    the ensemble's outputs, must take tensors of one label. Whether the ensemble is decoupled: any step is."""
    labels = {name: 0 for name in (tensor.name for tensor in ensemble.inputs)}
    count = 0
    pending = list(steps)
    while pending:  # in the order the tensors become ready (the steps form no cycle: checked when read)
        ready = [step for step in pending if all(tensor in labels for _, tensor in step.inputs)]
        if not ready:
            break
        for step in ready:
            label = _one_label(ensemble.name, step.model, [labels[tensor] for _, tensor in step.inputs])
            if step.decoupled:
                count += 1
                label = count
            labels.update((tensor, label) for _, tensor in step.outputs)
            pending.remove(step)
    _one_label(ensemble.name, ensemble.name, [labels.get(tensor.name, 0) for tensor in ensemble.outputs])
    return count > 0


def _one_label(name: str, model: str, labels: list[int]) -> int:
    if len(set(labels)) > 1:
        raise RepositoryError(
            f"in ensemble {name}, step of model '{model}' receives inputs originated from different decoupled models"
        )
    return labels[0] if labels else 0
