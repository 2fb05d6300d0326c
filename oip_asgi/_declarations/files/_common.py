"""What every loader shares: the description a file gives, the options a `Model` takes, missing extras."""

from __future__ import annotations

import copy
import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import numpy as np

from ..calling import COMPUTES_ONLY
from ..errors import BadRequest, ModelNotReady
from ..extras import install_line
from ..spec import TensorSpec
from .formats import FORMATS, extra_of


class ModelFileError(ValueError):
    """A model file that cannot be read, or that this library cannot serve as it is."""


# Where a model file was named: its refusals' advice names the way forward of that place.
Origin = Literal["python", "command line", "repository"]


class AdvisedError(ModelFileError):
    """A refusal whose way forward depends on where the file was named: a Python argument of
    `Model.from_file`, an option of the serve command, or a parameter of a repository's config.pbtxt.

    Its message is the Python one; `for_origin` gives another place's.
    """

    def __init__(self, problem: str, advice: Mapping[Origin, str]) -> None:
        self.problem = problem
        self.advice = dict(advice)
        super().__init__(self.for_origin("python"))

    def for_origin(self, origin: Origin) -> str:
        return self.problem + self.advice[origin]  # each advice starts with its own separator


class MissingExtra(ImportError):
    """A model file whose library is not installed."""


def require(module: str, purpose: str) -> ModuleType:
    """`module` imported, or an error that says which extra brings it (a format's, formats.py) and how to install
    that."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        package = module.split(".")[0]
        raise MissingExtra(f"{purpose} needs the {package} package: {install_line(extra_of(package))}") from exc


class UnknownOption(TypeError):
    """`Model.from_file` given an option neither the file's format nor `Model` takes."""


def check_options(own: Mapping[str, Any], accepted: Sequence[str], format: str) -> None:
    """`own` are options of `format` (its name in formats.py) or `lazy`, or an error naming those it takes."""
    unknown = sorted(set(own) - set(accepted))
    if unknown:
        takes = ", ".join(sorted({*accepted, "lazy"}))
        unknowns = ", ".join(unknown)
        title = FORMATS[format].title
        raise UnknownOption(f"Model.from_file: unknown option {unknowns} for a {title} file; it takes {takes}")


class Runner(ABC):
    """A file's model as a `Model` calls it: the inputs by name in, a mapping of `outputs` to arrays out.

    A library's computation, no I/O: its `Model` declares it `COMPUTES_ONLY`, so the core may run a call
    on its event loop when it costs less than the hop to a worker thread (_core/inline.py).
    """

    outputs: list[str]  # what it returns: all the file's outputs, or the ones the caller declared

    @abstractmethod
    def __call__(self, **inputs: np.ndarray) -> Mapping[str, np.ndarray]: ...

    def only(self, outputs: Sequence[str], file: Path) -> Runner:
        """A copy returning only `outputs` (a `Model` refuses undeclared outputs), each one it can make."""
        unknown = [name for name in outputs if name not in self.outputs]
        if unknown:
            raise ValueError(
                f"model file {file.name!r} has no output {', '.join(map(repr, unknown))}; "
                f"its outputs are {', '.join(map(repr, self.outputs))}"
            )
        runner = copy.copy(self)
        runner.outputs = list(outputs)
        return runner


# A file model whose every tensor starts with the batch dimension is served as Triton's ONNX auto-complete serves
# it: max_batch_size above 0, dims without that dimension (perf_analyzer then needs no --shape), and concurrent
# requests batched. 64 rows (Triton's default is 4) lets a tabular model's calls share their cost; a bigger request
# still runs, alone. No delay: a lone request runs at once, and only requests arriving together share a call.
DEFAULT_MAX_BATCH_SIZE = 64


@dataclass
class FileModel:
    """What a file says about the model it holds, and the callable that runs it.

    `platform`: Triton's, where the loader tells which of its format's platforms the file is; else the reader
    gives the format's (formats.py).
    `batches_rows`: the model takes a table of rows whatever their number (a tabular model's, or an ONNX graph's
    whose every first dimension is variable), so requests' rows may be concatenated into one call.
    """

    predict: Runner
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    platform: str | None = None
    labels: dict[str, list[str]] = field(default_factory=dict)
    properties: dict[str, str] = field(default_factory=dict)
    batches_rows: bool = False

    def model(self, file: Path, declared: Mapping[str, Any]) -> dict[str, Any]:
        """`Model`'s arguments: this description, with what the caller declared in its place."""
        outputs = declared.get("outputs", self.outputs)
        predict = self.predict.only([spec.name for spec in outputs], file) if "outputs" in declared else self.predict
        known = {spec.name for spec in outputs}
        labels = {name: names for name, names in self.labels.items() if name in known} or None
        properties = {**self.properties, **(declared.get("properties") or {})} or None
        return {
            "predict": predict,
            "name": file.stem,
            "inputs": self.inputs,
            "outputs": outputs,
            "labels": labels,
            "platform": self.platform,
            "calling": COMPUTES_ONLY,
            **self._batching(declared),
            **declared,
            "properties": properties,
        }

    def _batching(self, declared: Mapping[str, Any]) -> dict[str, Any]:
        """Triton's batch dimension where the file has one, unless the caller declares max_batch_size (None: off)."""
        if not self.batches_rows or "max_batch_size" in declared:
            return {}
        specs = [*declared.get("inputs", self.inputs), *declared.get("outputs", self.outputs)]
        if not all(spec.shape and spec.shape[0] == -1 for spec in specs):
            return {}
        return {"max_batch_size": DEFAULT_MAX_BATCH_SIZE, "max_batch_delay": 0.0}


class _LoadedLater:
    """The model of a file read in the background.

    Where the caller declared no inputs, the core cannot check a request's input names, so this does,
    against those the file turns out to take.
    """

    def __init__(self, file: Path, check_names: bool) -> None:
        self.file = file
        self.check_names = check_names
        self.loaded: FileModel | None = None
        self.runner: Runner | None = None

    def __repr__(self) -> str:
        return f"<model file {str(self.file)!r}>"

    def __call__(self, **inputs: np.ndarray) -> Mapping[str, np.ndarray]:
        if self.loaded is None or self.runner is None:  # the core calls a model only once it is ready
            raise ModelNotReady(f"model file {str(self.file)!r} has not loaded yet")
        wanted = {spec.name for spec in self.loaded.inputs}
        if self.check_names and set(inputs) != wanted:
            raise BadRequest(
                f"model file {self.file.name!r} takes inputs {', '.join(sorted(wanted))}; "
                f"the request has {', '.join(sorted(inputs)) or 'none'}"
            )
        return self.runner(**inputs)


def loaded_lazily(
    file: Path, platform: str, read: Callable[[], FileModel], declared: Mapping[str, Any]
) -> dict[str, Any]:
    """`Model`'s arguments for one that reads its file when the server starts: until then (or if that
    fails) it is not ready.

    Its metadata is what the caller declares (`inputs`, `outputs`, `labels`), since the file is not read yet.
    """
    runner = _LoadedLater(file, check_names="inputs" not in declared)

    def load() -> None:
        loaded = read()
        declared_outputs = declared.get("outputs")
        runner.runner = (
            loaded.predict.only([spec.name for spec in declared_outputs], file) if declared_outputs else loaded.predict
        )
        runner.loaded = loaded

    return {
        "predict": runner,
        "name": file.stem,
        "platform": platform,
        "calling": COMPUTES_ONLY,
        **declared,
        "load": load,
    }


def spec(name: str, datatype: str, shape: Sequence[int]) -> TensorSpec:
    return TensorSpec(name, datatype, list(shape))


def batch_rows(array: np.ndarray, name: str, features: int) -> np.ndarray:
    """`array` as the 2-D table of rows a tabular model takes, or a BadRequest saying what is wrong."""
    if array.ndim != 2 or (features > 0 and array.shape[1] != features):
        raise BadRequest(
            f"input {name!r} must have shape [rows, {features if features > 0 else 'features'}], "
            f"got {list(array.shape)}"
        )
    return array
