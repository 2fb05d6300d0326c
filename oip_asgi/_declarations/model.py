"""What a user declares: `Model` (a callable and what the protocol can tell about it) and `TensorSpec`.

A `Model` is a declaration, checked when built and unchanged after: the server core serves it
(its load state, worker threads, batcher, statistics and requests in flight are the core's), so
one `Model` may be served by several apps, or under several names.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from .calling import BY_KEYWORD, Calling
from .checks import (
    check_batching,
    check_decoupled,
    check_labels,
    check_signature,
    checked_specs,
    is_async,
    is_generator,
    takes_argument,
)
from .errors import OIPError
from .result import Later, Result
from .spec import TensorSpec
from .triton import version_key

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


# What a model returns: output names to array-likes, one array-like, or either inside a `Result`.
Outputs: TypeAlias = "Mapping[str, ArrayLike] | ArrayLike | Result"
# What a model that takes requests (`Calling.takes_requests`) answers each request with: its outputs or its error,
# or (a Triton Python model's request answered through its sender after execute returned) either of them later.
Outcome: TypeAlias = "Outputs | OIPError | Later"


class Predict(Protocol):
    """A model: takes one keyword argument per input tensor (numpy arrays), returns its outputs.

    The result is a mapping of output name to array-like, or a single array-like when the model
    declares exactly one output, or a `Result` that adds parameters to the response. Async callables
    are awaited; sync ones run in a worker thread, or on the event loop once measured cheaper than the
    hop to one (`Model`'s ``inline``). A callable that declares a ``parameters`` argument
    also receives the request's parameters, and one that declares ``input_parameters`` each input's
    own (input name to its parameters, for every input of the request). An `OIPError` it raises
    (``BadRequest`` for input it refuses) reaches the client with its status and message; any other
    exception is a 500.
    """

    def __call__(self, **inputs: Any) -> Outputs | Awaitable[Outputs]: ...


class Model:
    """A callable with the metadata the protocol can tell about it.

    ``labels`` name the classes for the classification extension: one list for every output, or a
    mapping of output name to list. ``load`` (sync or async) runs once before the model serves,
    at startup or at first use. ``unload`` (sync or async) runs once after a version that loaded stops
    serving, once its last request in flight has finished: replaced by a reload, unloaded or removed,
    and when the server shuts down; it frees what ``load`` took (a failure is logged, the server goes
    on). Sync ``load`` and ``unload`` run off the event loop. ``max_concurrency`` bounds the requests
    in flight for this model; past it the model answers 503 instead of queueing without bound.

    ``max_batch_size`` turns on adaptive batching: concurrent requests of the same kind are run as
    one call, their rows concatenated along axis 0, once the batch holds ``max_batch_size`` rows or
    ``max_batch_delay`` seconds after its first request. Every input and output then declares a
    variable first dimension (-1), and the model returns one row of each output per input row.

    ``name`` is the name to serve it under where nothing else names it (``oip-asgi serve`` of a model
    file); a models mapping's key always wins (a `Model` listed under two names is served as two).

    ``inline=False`` runs every call of a sync ``predict`` on a worker thread. By default, a sync model of
    one request's inputs (not batched, not a generator) runs on the event loop while its request is its only
    one in flight and its recent calls were measured, in wall time, cheaper than the hop to a thread (30 µs):
    the first calls run on threads, and one that turns out slower sends it back there (README.md).
    Say ``inline=False`` for a function that may block for long (I/O, locks) or must keep off the event
    loop's thread (it waits on this server's loop, or keeps state per thread).

    ``calling`` says how the core calls ``predict`` where not as above (`Calling`): the server's own
    readers declare it (a model file's runner, a Triton Python model); a model written in Python leaves it.
    """

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
        unload: Callable[[], Any] | None = None,
        max_concurrency: int | None = None,
        properties: Mapping[str, str] | None = None,
        max_batch_size: int | None = None,
        max_batch_delay: float = 0.002,
        inline: bool = True,
        calling: Calling = BY_KEYWORD,
    ) -> None:
        if not callable(predict):
            raise TypeError(f"a model must be callable, got {type(predict).__name__}")
        if max_concurrency is not None and max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        if not isinstance(inline, bool):
            raise TypeError(f"inline must be True or False, got {type(inline).__name__}")
        if not isinstance(calling, Calling):
            raise TypeError(f"calling must be a Calling, got {type(calling).__name__}")
        self.predict = predict
        self.name = name
        self.inputs: tuple[TensorSpec, ...] | None = checked_specs(inputs, "inputs", TensorSpec)
        self.outputs: tuple[TensorSpec, ...] | None = checked_specs(outputs, "outputs", TensorSpec)
        self.calling = calling
        # A model that takes the core's requests (a Triton Python model's execute) has no keyword inputs.
        if not calling.takes_requests:
            check_signature(predict, self.inputs)
        check_labels(labels, self.outputs)
        check_batching(max_batch_size, max_batch_delay, self.inputs, self.outputs)
        # A generator function is a decoupled model: each value it yields is one response (docs/streaming.md).
        # A model that takes requests says so (each request gets its own stream, even out of one batched call).
        self.decoupled = is_generator(predict) or calling.decoupled
        check_decoupled(self.decoupled and not calling.takes_requests, max_batch_size)
        self._input_specs = {spec.name: spec for spec in self.inputs or ()}
        self._output_specs = {spec.name: spec for spec in self.outputs or ()}
        self.labels = labels
        self.version = str(version)
        self.platform = platform
        self.load = load
        self.unload = unload
        self.max_concurrency = max_concurrency
        self.properties = dict(properties) if properties else None
        self.max_batch_size = max_batch_size
        self.max_batch_delay = max_batch_delay
        self.inline = inline
        self.is_async = is_async(predict)
        self.takes_parameters = takes_argument(predict, "parameters")
        self.takes_input_parameters = takes_argument(predict, "input_parameters")

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
        from .files import UnknownOption, file_model

        declared = {key: value for key, value in options.items() if key in OPTIONS}
        own = {key: value for key, value in options.items() if key not in OPTIONS}
        try:
            return cls(**file_model(path, format, own, declared))
        except UnknownOption as exc:
            raise TypeError(f"{exc}, and Model's own: {', '.join(sorted(OPTIONS))}") from None

    def options(self) -> dict[str, Any]:
        """What was declared besides the callable: `Model`'s keyword arguments, as given."""
        return {option: getattr(self, option) for option in OPTIONS}

    def replace(self, **changes: Any) -> Model:
        """A `Model` of the same callable, declared as this one with `changes`."""
        return Model(self.predict, **{**self.options(), **changes})

    def __repr__(self) -> str:
        return f"Model({self.predict!r}, version={self.version!r})"

    def labels_for(self, output: str) -> Sequence[str] | None:
        if self.labels is None or isinstance(self.labels, Sequence):
            return self.labels
        return self.labels.get(output)

    def input_spec(self, name: str) -> TensorSpec | None:
        return self._input_specs.get(name)

    def output_spec(self, name: str) -> TensorSpec | None:
        return self._output_specs.get(name)


ModelsArgument = Mapping[str, Model | Callable[..., Any] | Sequence[Model]]

# `Model`'s keyword arguments: each kept as the attribute of its name.
OPTIONS = tuple(name for name in inspect.signature(Model.__init__).parameters if name not in ("self", "predict"))


def declared_versions(name: Any, entry: Model | Callable[..., Any] | Sequence[Model]) -> list[Model]:
    """The versions of one entry of a models mapping (a `Model`, a bare callable or a list of versions), checked."""
    if not isinstance(name, str) or not name or "/" in name:
        raise ValueError(f"model name {name!r} must be a non-empty string with no '/'")
    versions = list(entry) if isinstance(entry, Sequence) else [entry]
    if not versions:
        raise ValueError(f"model {name!r} has no versions")
    models = [version if isinstance(version, Model) else Model(version) for version in versions]
    seen: set[str] = set()
    for model in models:
        if model.version in seen:
            raise ValueError(f"model {name!r} lists version {model.version!r} twice")
        seen.add(model.version)
    return sorted(models, key=lambda model: version_key(model.version))


def checked_models(models: Any) -> ModelsArgument:
    if not isinstance(models, Mapping):
        raise TypeError(
            f"models must be a mapping of name to model, got {type(models).__name__}; "
            "write oip_app({'name': model, ...})"
        )
    return models
