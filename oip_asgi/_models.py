"""Models: what a user hands us (`Model`, `TensorSpec`, or a bare callable) and how we run them."""

from __future__ import annotations

import copy
import inspect
import logging
import os
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

import anyio.to_thread
import numpy as np

from ._batching import Batcher
from ._declarations import (
    check_batching,
    check_labels,
    check_signature,
    checked_datatype,
    checked_shape,
    checked_specs,
)
from ._errors import ModelError, ModelNotReady, NotFound, OIPError
from ._result import Result
from ._statistics import CallTimes, ModelStatistics, RequestTimes, now
from ._workers import Escaped, WorkerPool

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

logger = logging.getLogger("oip_asgi")

_DEFAULT_POOL = WorkerPool()  # for a model called outside an app; an app gives its models its own


# What a model returns: output names to array-likes, one array-like, or either inside a `Result`.
Outputs: TypeAlias = "Mapping[str, ArrayLike] | ArrayLike | Result"


class Predict(Protocol):
    """A model: takes one keyword argument per input tensor (numpy arrays), returns its outputs.

    The result is a mapping of output name to array-like, or a single array-like when the model
    declares exactly one output, or a `Result` that adds parameters to the response. Async callables
    are awaited; sync ones run in a worker thread. A callable that declares a ``parameters`` argument
    also receives the request's parameters. An `OIPError` it raises (``BadRequest`` for input it
    refuses) reaches the client with its status and message; any other exception is a 500.
    """

    def __call__(self, **inputs: Any) -> Outputs | Awaitable[Outputs]: ...


@dataclass(frozen=True)
class TensorSpec:
    """A declared input or output: its name, protocol datatype and shape (-1 for a variable dimension)."""

    name: str
    datatype: str
    shape: Sequence[int]
    optional: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"TensorSpec: name must be a non-empty string, got {self.name!r}")
        where = f"TensorSpec {self.name!r}"
        checked_datatype(self.datatype, where)
        object.__setattr__(self, "shape", checked_shape(self.shape, where))

    def accepts_shape(self, shape: Sequence[int]) -> bool:
        return len(shape) == len(self.shape) and all(
            want in (-1, got) for want, got in zip(self.shape, shape, strict=False)
        )


class Model:
    """A callable with the metadata the protocol can tell about it.

    ``labels`` name the classes for the classification extension: one list for every output, or a
    mapping of output name to list. ``load`` (sync or async) runs once before the model serves,
    at startup or at first use. ``max_concurrency`` bounds the requests in flight for this model;
    past it the model answers 503 instead of queueing without bound.

    ``max_batch_size`` turns on adaptive batching: concurrent requests of the same kind are run as
    one call, their rows concatenated along axis 0, once the batch holds ``max_batch_size`` rows or
    ``max_batch_delay`` seconds after its first request. Every input and output then declares a
    variable first dimension (-1), and the model returns one row of each output per input row.

    ``name`` is the name to serve it under where nothing else names it (``oip-asgi serve`` of a model
    file); a models mapping's key always wins (a `Model` listed under two names is served as two).
    """

    name: str = ""

    def __init__(
        self,
        predict: Predict | Callable[..., Any],
        *,
        inputs: Sequence[TensorSpec] | None = None,
        outputs: Sequence[TensorSpec] | None = None,
        labels: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
        version: str = "1",
        name: str = "",
        platform: str = "python",
        load: Callable[[], Any] | None = None,
        max_concurrency: int | None = None,
        properties: Mapping[str, str] | None = None,
        max_batch_size: int | None = None,
        max_batch_delay: float = 0.002,
    ) -> None:
        if not callable(predict):
            raise TypeError(f"a model must be callable, got {type(predict).__name__}")
        if max_concurrency is not None and max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self.predict = predict
        self.name = name
        self.inputs: tuple[TensorSpec, ...] | None = checked_specs(inputs, "inputs", TensorSpec)
        self.outputs: tuple[TensorSpec, ...] | None = checked_specs(outputs, "outputs", TensorSpec)
        check_signature(predict, self.inputs)
        check_labels(labels, self.outputs)
        check_batching(max_batch_size, max_batch_delay, self.inputs, self.outputs)
        self._input_specs = {spec.name: spec for spec in self.inputs or ()}
        self._output_specs = {spec.name: spec for spec in self.outputs or ()}
        self.labels = labels
        self.version = str(version)
        self.platform = platform
        self.properties = dict(properties) if properties else None
        self.max_concurrency = max_concurrency
        self.in_flight = 0
        self._load = load
        self._loaded = load is None
        self._load_error: ModelNotReady | None = None
        self._load_lock: anyio.Lock | None = None
        self._is_async = _is_async(predict)
        self._takes_parameters = _takes_parameters(predict)
        self.max_batch_size = max_batch_size
        self.max_batch_delay = max_batch_delay
        self.pool = _DEFAULT_POOL  # the app's, once the repository binds the model
        self.batcher: Batcher | None = None
        self.statistics = ModelStatistics()

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], *, format: str | None = None, **options: Any) -> Model:
        """A model served from a model file: ONNX, scikit-learn, XGBoost, LightGBM or PyTorch (docs/models.md).

        The format comes from the file's extension or content unless given (``"onnx"``, ``"sklearn"``,
        ``"xgboost"``, ``"lightgbm"``, ``"torch"``). The inputs, outputs, class labels and properties are
        read from the file; any argument `Model` takes (``name`` defaults to the file's stem) overrides
        them. The format's own options: ``trusted`` (scikit-learn: ``True`` to load a pickle or joblib
        file, or the skops types to trust), ``providers`` and ``session_options`` (ONNX), ``device``
        (PyTorch), and ``lazy=True`` to read the file when the server starts rather than now.
        """
        from ._formats import from_file

        return from_file(path, format, options)

    def __repr__(self) -> str:
        return f"Model({self.predict!r}, version={self.version!r})"

    def bound(self, name: str, pool: WorkerPool) -> Model:
        """This model served as `name`: itself, or a copy when it already serves under another name."""
        model = self if self.name in ("", name) else copy.copy(self)
        model.name = name
        model.pool = pool
        model.statistics = ModelStatistics()
        if model.max_batch_size is not None:
            assert model.outputs is not None  # checked when built
            model.batcher = Batcher(
                name,
                model.invoke,
                max_batch_size=model.max_batch_size,
                max_batch_delay=model.max_batch_delay,
                keyed_by_parameters=model._takes_parameters,
                single_output=model.outputs[0].name,
                statistics=model.statistics,
            )
        return model

    @property
    def ready(self) -> bool:
        return self._loaded

    def labels_for(self, output: str) -> Sequence[str] | None:
        if self.labels is None or isinstance(self.labels, Sequence):
            return self.labels
        return self.labels.get(output)

    def input_spec(self, name: str) -> TensorSpec | None:
        return self._input_specs.get(name)

    def output_spec(self, name: str) -> TensorSpec | None:
        return self._output_specs.get(name)

    async def load(self) -> None:
        """Run the load step once, however many requests ask at the same time."""
        if self._loaded or self._load is None:
            return
        if self._load_lock is None:
            self._load_lock = anyio.Lock()
        async with self._load_lock:
            if self._loaded or self._load_error is not None:
                return
            try:
                result = self._load() if _is_async(self._load) else await anyio.to_thread.run_sync(self._load)
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                error_id = _error_id()
                self._load_error = ModelNotReady(
                    f"model '{self.name}' version {self.version} failed to load: {type(exc).__name__}: {exc}",
                    redacted=f"model '{self.name}' version {self.version} failed to load (error id {error_id})",
                )
                logger.exception(
                    "model %r (version %s) failed to load (error id %s)", self.name, self.version, error_id
                )
                return
            self._loaded = True

    async def ensure_ready(self) -> None:
        await self.load()
        if self._load_error is not None:
            raise self._load_error

    async def __call__(
        self, inputs: Mapping[str, np.ndarray], parameters: Mapping[str, Any], times: RequestTimes | None = None
    ) -> Any:
        """The user's function on `inputs` (and `parameters`, if it takes them), run off the event loop.

        A batched model answers with this request's rows of its batch's result. `times` gets the
        request's queue and model-call times, for the statistics (the app records them).
        """
        if self.max_concurrency is not None and self.in_flight >= self.max_concurrency:
            raise ModelNotReady(
                f"model '{self.name}' is busy: {self.max_concurrency} requests already in flight, retry later"
            )
        self.in_flight += 1
        try:
            if times is None:
                times = RequestTimes()
            times.called = True
            times.submitted = now()
            if self.batcher is not None:
                return await self.batcher.submit(inputs, parameters, times)
            return await self.invoke(inputs, parameters, times)
        finally:
            self.in_flight -= 1

    async def invoke(self, inputs: Mapping[str, np.ndarray], parameters: Mapping[str, Any], call: CallTimes) -> Any:
        """One call of the user's function; what it raises, unless an `OIPError`, becomes a `ModelError`."""
        kwargs = {**inputs, "parameters": parameters} if self._takes_parameters else inputs
        result: Any
        try:
            if self._is_async:
                call.started = now()
                try:
                    result = await self.predict(**kwargs)  # type: ignore[misc]  # checked at construction
                finally:
                    call.ended = now()
            else:
                result = await self.pool.run(_timed, {"function": self.predict, "kwargs": kwargs, "call": call})
                if inspect.isawaitable(result):
                    result = await result
        except OIPError:
            raise  # raised on purpose: the client gets its status and message
        except (Exception, SystemExit) as exc:  # a sys.exit() in a model (argparse, say) is its failure too
            raised = exc.exception if isinstance(exc, Escaped) else exc
            # The client gets the message (unless the app hides it); the traceback is for whoever runs the server.
            error_id = _error_id()
            logger.error(
                "model %r (version %s) raised (error id %s)",
                self.name,
                self.version,
                error_id,
                exc_info=(type(raised), raised, raised.__traceback__),
            )
            raise ModelError(
                f"model '{self.name}' raised {type(raised).__name__}: {raised}",
                redacted=f"model '{self.name}' failed (error id {error_id}); the server log has the details",
            ) from raised
        return result


def _timed(function: Callable[..., Any], kwargs: Mapping[str, Any], call: CallTimes) -> Any:
    call.started = now()  # on the worker thread: the wait for it was the queue
    try:
        return function(**kwargs)
    finally:
        call.ended = now()


def _error_id() -> str:
    return secrets.token_hex(4)


def _is_async(function: Callable[..., Any]) -> bool:
    # Instances with an `async def __call__` count too.
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(type(function).__call__)


def _takes_parameters(function: Callable[..., Any]) -> bool:
    try:
        parameter = inspect.signature(function).parameters.get("parameters")
    except (TypeError, ValueError):
        return False
    return parameter is not None and parameter.kind in (parameter.KEYWORD_ONLY, parameter.POSITIONAL_OR_KEYWORD)


ModelsArgument = Mapping[str, Model | Callable[..., Any] | Sequence[Model]]


class ModelRepository:
    """Models by name and version; the unversioned name means the newest version."""

    def __init__(self, models: ModelsArgument, pool: WorkerPool) -> None:
        if not isinstance(models, Mapping):
            raise TypeError(
                f"models must be a mapping of name to model, got {type(models).__name__}; "
                "write oip_app({'name': model, ...})"
            )
        self._versions: dict[str, dict[str, Model]] = {}
        for name, entry in models.items():
            if not isinstance(name, str) or not name or "/" in name:
                raise ValueError(f"model name {name!r} must be a non-empty string with no '/'")
            versions = list(entry) if isinstance(entry, Sequence) else [entry]
            if not versions:
                raise ValueError(f"model {name!r} has no versions")
            by_version: dict[str, Model] = {}
            for entry_model in versions:
                model = (entry_model if isinstance(entry_model, Model) else Model(entry_model)).bound(name, pool)
                if model.version in by_version:
                    raise ValueError(f"model {name!r} lists version {model.version!r} twice")
                by_version[model.version] = model
            self._versions[name] = dict(sorted(by_version.items(), key=lambda item: _version_key(item[0])))

    def names(self) -> list[str]:
        return list(self._versions)

    def all(self) -> list[Model]:
        return [model for versions in self._versions.values() for model in versions.values()]

    def versions(self, name: str) -> list[str]:
        return list(self._versions[name])

    def get(self, name: str, version: str | None = None) -> Model:
        versions = self._versions.get(name)
        if versions is None:
            raise NotFound(f"unknown model '{name}'; {self._listing()}")
        if version is None:
            return next(reversed(versions.values()))
        model = versions.get(version)
        if model is None:
            raise NotFound(f"model '{name}' has no version '{version}' (versions: {', '.join(versions)})")
        return model

    def _listing(self, most: int = 10) -> str:
        names = list(self._versions)
        if not names:
            return "this server has no models"
        more = f" and {len(names) - most} more" if len(names) > most else ""
        return f"the models are {', '.join(names[:most])}{more}"


def _version_key(version: str) -> tuple[int, int, str]:
    """Integer versions order numerically (as Triton's do) and after any named ones."""
    return (1, int(version), "") if version.isdigit() else (0, 0, version)
