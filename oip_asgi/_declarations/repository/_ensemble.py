"""An ensemble's config (``platform: "ensemble"``, ``ensemble_scheduling { step [...] }``) read and checked on its own.

An ensemble has no code and no model file: its config names its inputs and outputs and the steps that
route tensors between the models it is made of (its composing models), and its version folders are
empty. What can be told from the config alone is checked here, in Triton's words (Triton's
``ValidateEnsembleSchedulingConfig``): every step names a model and maps inputs and outputs, each
tensor is written once, every tensor is used and every output is written. What depends on the
composing models (that they are served, their tensors, whether they are decoupled) is the core's to
check when it serves the ensemble (``_core/ensemble_plan.py``); so is running it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..calling import Calling
from ..model import Model
from ._errors import RepositoryError
from ._paths import PathError, model_folder
from ._settings import model_arguments

ENSEMBLE = "ensemble"  # Triton's platform name for an ensemble

# What an ensemble's config acts on; anything else set is named in the model's one warning.
HONOURED_ENSEMBLE: dict[str, Any] = {
    "name": True,
    "platform": True,
    "max_batch_size": True,
    "version_policy": True,
    "parameters": True,
    "input": {"name": True, "data_type": True, "dims": True, "optional": True},
    "output": {"name": True, "data_type": True, "dims": True, "label_filename": True},
    "ensemble_scheduling": {"step": {"model_name": True, "model_version": True, "input_map": True, "output_map": True}},
}


@dataclass(frozen=True, slots=True)
class EnsembleStep:
    """One step: a composing model (its version, -1 for the newest) and the ensemble tensors it takes and makes."""

    model_name: str
    model_version: int
    input_map: Mapping[str, str]  # the model's input -> the ensemble tensor given to it
    output_map: Mapping[str, str]  # the model's output -> the ensemble tensor it makes


@dataclass(frozen=True, slots=True)
class EnsembleTensor:
    """An ensemble input or output as its config declares it (``dims`` without the batch dimension)."""

    name: str
    data_type: str  # Triton's name: TYPE_FP32
    dims: tuple[int, ...]
    optional: bool = False


@dataclass(frozen=True, slots=True)
class Ensemble:
    """An ensemble's config, checked on its own: what the core checks against its composing models and runs."""

    name: str
    steps: tuple[EnsembleStep, ...]
    inputs: tuple[EnsembleTensor, ...]
    outputs: tuple[EnsembleTensor, ...]
    max_batch_size: int

    @property
    def models(self) -> tuple[str, ...]:
        """The models its steps name, each once, in order."""
        return tuple(dict.fromkeys(step.model_name for step in self.steps))


def is_ensemble(config: Mapping[str, Any]) -> bool:
    return config.get("platform") == ENSEMBLE or "ensemble_scheduling" in config


def _runs_in_the_core(requests: object) -> object:
    raise RuntimeError("an ensemble's steps are run by the server core, which replaces this callable")


def ensemble_versions(folder: Path, name: str, config: Mapping[str, Any], numbers: Sequence[str]) -> list[Model]:
    """An ensemble's versions as `Model`s that declare its tensors, labels and properties; the core that serves
    them gives each the callable that runs its steps (an ensemble has no code of its own)."""
    arguments = model_arguments(folder, name, config)
    arguments.pop("max_batch_size", None)  # an ensemble batches nothing itself: its composing models may
    arguments.pop("max_batch_delay", None)
    calling = Calling(takes_requests=True)
    return [Model(_runs_in_the_core, **arguments, version=number, calling=calling) for number in numbers]


def checked_ensemble(name: str, config: Mapping[str, Any]) -> Ensemble:
    """The ensemble `config` declares, checked as Triton checks an ensemble's config before it looks at its models."""
    if config.get("platform") != ENSEMBLE:
        raise RepositoryError(f"ensemble scheduling cannot be set for model '{name}' whose platform is not {ENSEMBLE}")
    if "ensemble_scheduling" not in config:
        raise RepositoryError(f"ensemble scheduling must be set for ensemble {name} whose platform is {ENSEMBLE}")
    if config.get("backend"):
        raise RepositoryError(f"Ensemble model '{name}' must have platform type '{ENSEMBLE}' and empty backend type")
    for field, refusal in (
        ("instance_group", f"instance group should not be specified for ensemble '{name}'"),
        ("optimization", f"optimization should not be specified for ensemble '{name}'"),
        ("model_warmup", f"model_warmup can not be specified for ensemble '{name}'"),
    ):
        if config.get(field):
            raise RepositoryError(refusal)
    steps = tuple(_step(name, index, step) for index, step in enumerate(config["ensemble_scheduling"].get("step", [])))
    if not steps:
        raise RepositoryError(f"must specify 'step' for ensemble '{name}'")
    ensemble = Ensemble(
        name,
        steps,
        tuple(_tensor(tensor) for tensor in config.get("input", [])),
        tuple(_tensor(tensor) for tensor in config.get("output", [])),
        config.get("max_batch_size", 0),
    )
    _check_flow(ensemble)
    return ensemble


def _step(name: str, index: int, step: Mapping[str, Any]) -> EnsembleStep:
    for field in ("model_name", "input_map", "output_map"):
        if not step.get(field):
            raise RepositoryError(f"must specify '{field}' in step {index} of ensemble '{name}'")
    return EnsembleStep(step["model_name"], step.get("model_version", -1), step["input_map"], step["output_map"])


def _tensor(tensor: Mapping[str, Any]) -> EnsembleTensor:
    return EnsembleTensor(
        tensor.get("name", ""), tensor.get("data_type", "TYPE_INVALID"), tuple(tensor.get("dims", ())),
        tensor.get("optional", False),
    )  # fmt: skip


def _check_flow(ensemble: Ensemble) -> None:
    """Every tensor written once, no cycle among the steps, every input used, every output written, nothing unused."""
    name = ensemble.name
    made_by: dict[str, int] = {}
    for index, step in enumerate(ensemble.steps):
        for tensor in step.output_map.values():
            if tensor in made_by:
                raise RepositoryError(
                    f"ensemble tensor '{tensor}' can appear in an output map only once for ensemble '{name}' "
                    f"step {index}"
                )
            made_by[tensor] = index
    _check_no_cycle(ensemble, made_by)
    taken = {tensor for step in ensemble.steps for tensor in step.input_map.values()}
    known = taken | set(made_by)
    for declared in ensemble.inputs:
        if declared.name not in known:
            raise RepositoryError(f"ensemble input '{declared.name}' for ensemble {name}' is not used")
    ready = {declared.name for declared in ensemble.inputs}
    runs = True
    while runs:  # a step runs once every tensor it takes is ready, and makes its outputs ready
        runs = False
        for step in ensemble.steps:
            outputs = set(step.output_map.values())
            if not outputs <= ready and set(step.input_map.values()) <= ready:
                ready |= outputs
                runs = True
    for declared in ensemble.outputs:
        if declared.name not in known:
            raise RepositoryError(f"ensemble output '{declared.name}' for ensemble {name}' is not used")
        if declared.name not in ready:
            message = f"output '{declared.name}' for ensemble '{name}' is not written"
            missing = _unconnected(declared.name, ensemble, made_by, ready)
            if missing is not None:
                message += f": at least one of its depending tensors, '{missing}', is not connected"
            raise RepositoryError(message)
    outputs = {declared.name for declared in ensemble.outputs}
    for tensor in sorted(known - outputs):
        if tensor not in ready or tensor not in taken:
            raise RepositoryError(f"ensemble tensor '{tensor}' is unused in ensemble '{name}'")


def _unconnected(output: str, ensemble: Ensemble, made_by: Mapping[str, int], ready: set[str]) -> str | None:
    """The first tensor up `output`'s chain that nothing makes ready, as Triton names it."""
    found, current, seen = None, output, {output}
    while current in made_by:
        step = ensemble.steps[made_by[current]]
        waiting = [tensor for tensor in step.input_map.values() if tensor not in ready and tensor not in seen]
        if not waiting:
            break
        current = found = waiting[0]
        seen.add(current)
    return found


def _check_no_cycle(ensemble: Ensemble, made_by: Mapping[str, int]) -> None:
    """Steps that take what one another make would wait for one another forever: refused, naming them."""
    feeds = {
        index: sorted({made_by[tensor] for tensor in step.input_map.values() if tensor in made_by})
        for index, step in enumerate(ensemble.steps)
    }
    done: set[int] = set()

    def visit(index: int, path: list[int]) -> None:
        if index in path:
            cycle = [*path[path.index(index) :], index]
            steps = " -> ".join(f"step {step} ('{ensemble.steps[step].model_name}')" for step in cycle)
            raise RepositoryError(
                f"in ensemble '{ensemble.name}', steps form a cycle, so none of them can run: {steps} "
                "(each takes a tensor the one after it makes)"
            )
        if index in done:
            return
        for before in feeds[index]:
            visit(before, [*path, index])
        done.add(index)

    for index in feeds:
        visit(index, [])


def composing_models(root: Path, name: str, config: Mapping[str, Any] | None = None) -> tuple[str, ...] | None:
    """The models the ensemble `name` of the repository names in its steps, in order; None for a model that is
    not an ensemble (or whose config cannot be read: its load says why). `config`, where given, is a load
    request's, in place of the folder's. Reads the config alone, never a model.py."""
    from ._config import ConfigError, read_pbtxt

    if config is None:
        try:
            file = model_folder(root, name) / "config.pbtxt"
            config = read_pbtxt(file) if file.is_file() else {}
        except (PathError, ConfigError, OSError):
            return None
    if config.get("platform") != ENSEMBLE:
        return None
    steps = config.get("ensemble_scheduling", {}).get("step", [])
    return tuple(dict.fromkeys(step["model_name"] for step in steps if step.get("model_name")))
