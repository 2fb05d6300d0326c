"""A model.py's ``TritonPythonModel`` as a `Model`, run through the lifecycle Triton runs it through.

``auto_complete_config`` (static) completes the config when the folder is read; ``initialize(args)``
is the `Model`'s load, with Triton's seven string keys; ``finalize`` its unload; ``is_ready``, when
defined, is consulted by readiness. ``execute`` takes a list of requests: the core hands it the
requests a dynamic batch collected (not concatenated, as Triton), or one. A decoupled model answers
through each request's response sender, from any thread, during or after ``execute``; here that
stream is an async generator the core steps as it steps any decoupled model.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import threading
from collections.abc import AsyncGenerator, Mapping
from pathlib import Path
from typing import Any

import anyio.to_thread

from ..errors import ModelError, OIPError
from ..result import Result
from . import host as _host
from . import utils as pb_utils
from .errors import answer_of

logger = logging.getLogger("oip_asgi")


class TritonModel:
    """One version of a ``TritonPythonModel`` class, served: its instance exists from load to unload."""

    def __init__(
        self, cls: type, name: str, version: str, folder: Path, config: dict[str, Any], host: _host.PythonHost | None
    ) -> None:
        self.cls = cls
        self.name = name
        self.version = version
        self.folder = folder
        self.config = config
        self.host = host
        self.instance_name = f"{name}_0_0"  # Triton's <model>_<group>_<index>, with its one CPU instance
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(config)
        self.outputs = [tensor["name"] for tensor in config.get("output", [])]
        self.instance: Any = None
        if not callable(getattr(cls, "execute", None)):
            raise TypeError(f"model {name!r}: TritonPythonModel defines no execute(self, requests)")
        self.is_async = inspect.iscoroutinefunction(getattr(cls, "execute"))  # noqa: B009

    def _enter(self) -> Any:
        return _host.enter(self.host) if self.host is not None else None

    def _leave(self, token: Any) -> None:
        if token is not None:
            _host.leave(token)

    # The lifecycle

    def initialize(self) -> None:
        token = self._enter()
        try:
            instance = self.cls()
            initialize = getattr(instance, "initialize", None)
            if initialize is not None:
                result = initialize(self.args())
                if inspect.iscoroutine(result):
                    asyncio.run(result)  # (off the event loop: the load runs on a worker thread)
            self.instance = instance
        finally:
            self._leave(token)

    def args(self) -> dict[str, str]:
        """Triton's seven keys, every value a string."""
        return {
            "model_config": json.dumps(self.config),
            "model_instance_kind": "CPU",
            "model_instance_name": self.instance_name,
            "model_instance_device_id": "0",
            "model_repository": str(self.folder),
            "model_version": self.version,
            "model_name": self.name,
        }

    def finalize(self) -> None:
        instance, self.instance = self.instance, None
        finalize = getattr(instance, "finalize", None)
        if finalize is None:
            return
        token = self._enter()
        try:
            result = finalize()
            if inspect.iscoroutine(result):
                asyncio.run(result)
        finally:
            self._leave(token)

    def is_ready(self) -> bool:
        check = getattr(self.instance, "is_ready", None)
        if check is None:
            return True
        token = self._enter()
        try:
            return bool(check())
        except Exception:
            logger.exception(
                "model %r (version %s): is_ready() raised; it counts as not ready", self.name, self.version
            )
            return False
        finally:
            self._leave(token)

    # Requests

    def request(self, decoded: Any, sender: pb_utils.InferenceResponseSender | None) -> pb_utils.InferenceRequest:
        """The core's request as ``execute`` gets it."""
        inputs = [pb_utils.Tensor(name, array) for name, array in decoded.inputs.items()]
        asked = decoded.outputs is not None
        requested = [output.name for output in decoded.outputs] if asked else list(self.outputs)
        request = pb_utils.InferenceRequest.served(
            self.name, self.version, inputs, requested, decoded.id or "", dict(decoded.parameters), sender
        )
        request.asked = asked  # the client named its outputs: the others are dropped
        return request

    def failure(self, exc: BaseException) -> ModelError:
        message = (
            f"Failed to process the request(s) for model '{self.instance_name}', message: {type(exc).__name__}: {exc}"
        )
        logger.error("%s", message, exc_info=(type(exc), exc, exc.__traceback__))
        return ModelError(message, redacted=f"Failed to process the request(s) for model '{self.instance_name}'",
                          logged=True)  # fmt: skip

    def answers(self, requests: list[pb_utils.InferenceRequest], returned: Any, sent: list[_Sent]) -> list[Any]:
        """Each request's outputs (a `Result`) or the error it gets, from what ``execute`` returned."""
        if returned is None:
            if all(outlet.response is not None for outlet in sent):  # each answered through its sender
                return [self.outcome(request, outlet.response) for request, outlet in zip(requests, sent, strict=True)]
            return [
                ModelError(
                    f"model '{self.name}' is not decoupled, but its execute() returned None and sent no response "
                    "for this request; return a list with one InferenceResponse per request"
                )
            ] * len(requests)
        responses = list(returned) if isinstance(returned, (list, tuple)) else None
        if responses is None:
            error = ModelError(
                f"model '{self.name}': execute() returned a {type(returned).__name__}; "
                "return a list with one InferenceResponse per request"
            )
            return [error] * len(requests)
        results: list[Any] = []
        for index, request in enumerate(requests):
            if index >= len(responses):
                results.append(
                    ModelError(
                        f"model '{self.name}': execute() returned {len(responses)} responses for {len(requests)} "
                        "requests; this request got none"
                    )
                )
            else:
                results.append(self.outcome(request, responses[index]))
        return results

    def outcome(self, request: pb_utils.InferenceRequest, response: Any) -> Any:
        """A response as the core takes it: a `Result` of the requested outputs, or the error it carries."""
        if not isinstance(response, pb_utils.InferenceResponse):
            return ModelError(
                f"model '{self.name}': execute() returned a {type(response).__name__} for a request, "
                "not a pb_utils.InferenceResponse"
            )
        error = response.error()
        if error is not None:
            return answer_of(error.code(), error.message())
        tensors = response.output_tensors()
        if request.asked:  # outputs the client did not ask for are dropped, as Triton drops them
            wanted = set(request.requested_output_names())
            tensors = [tensor for tensor in tensors if tensor.name() in wanted]
        outputs = {tensor.name(): tensor.as_numpy() for tensor in tensors}
        parameters = response.parameter_values()
        return Result(outputs, parameters) if parameters else outputs

    # execute, as the core calls a model that takes requests

    def execute(self, decoded: list[Any]) -> list[Any]:
        """Sync ``execute`` on a worker thread: one outcome per request."""
        sent = [_Sent() for _ in decoded]
        requests = [
            self.request(one, pb_utils.InferenceResponseSender(outlet))
            for one, outlet in zip(decoded, sent, strict=True)
        ]
        token = self._enter()
        try:
            returned = self.instance.execute(requests)
        except OIPError as exc:
            return [exc] * len(decoded)
        except Exception as exc:
            return [self.failure(exc)] * len(decoded)
        finally:
            self._leave(token)
        return self.answers(requests, returned, sent)

    async def execute_async(self, decoded: list[Any]) -> list[Any]:
        """``async def execute``, awaited on the event loop."""
        sent = [_Sent() for _ in decoded]
        requests = [
            self.request(one, pb_utils.InferenceResponseSender(outlet))
            for one, outlet in zip(decoded, sent, strict=True)
        ]
        token = self._enter()
        try:
            returned = await self.instance.execute(requests)
        except OIPError as exc:
            return [exc] * len(decoded)
        except Exception as exc:
            return [self.failure(exc)] * len(decoded)
        finally:
            self._leave(token)
        return self.answers(requests, returned, sent)

    async def stream(self, decoded: Any) -> AsyncGenerator[Any, None]:
        """A decoupled model's responses to one request, as they are sent (from any thread)."""
        loop = asyncio.get_running_loop()
        outlet = _Stream(loop)
        request = self.request(decoded, pb_utils.InferenceResponseSender(outlet))
        running = loop.create_task(self._run_decoupled(request, outlet))
        try:
            while True:
                response, final = await outlet.queue.get()
                if isinstance(response, BaseException):
                    raise response
                if response is not None:
                    outcome = self.outcome(request, response)
                    if isinstance(outcome, BaseException):
                        raise outcome
                    yield outcome
                if final:
                    return
        finally:
            outlet.cancelled = True  # the client left, or the stream ended: is_cancelled() says so
            if self.is_async and not running.done():
                running.cancel()  # (a sync execute runs on: a thread cannot be stopped, it sees is_cancelled())

    async def _run_decoupled(self, request: pb_utils.InferenceRequest, outlet: _Stream) -> None:
        def call() -> Any:
            token = self._enter()
            try:
                return self.instance.execute([request])
            finally:
                self._leave(token)

        try:
            if self.is_async:
                token = self._enter()
                try:
                    returned = await self.instance.execute([request])
                finally:
                    self._leave(token)
            else:
                returned = await anyio.to_thread.run_sync(call)
        except asyncio.CancelledError:
            raise
        except OIPError as exc:
            outlet.fail(exc)
            return
        except Exception as exc:
            outlet.fail(self.failure(exc))
            return
        if returned is not None:
            outlet.fail(
                ModelError(
                    f"model '{self.name}' is decoupled: its execute() answers through each request's response "
                    f"sender and returns None, but it returned a {type(returned).__name__}"
                )
            )


# The core calls these with its requests (a list, or one for a stream) rather than keyword inputs.
for _method in (TritonModel.execute, TritonModel.execute_async, TritonModel.stream):
    setattr(_method, "takes_requests", True)  # noqa: B010  (a marker the core reads off the bound method)


class _Sent:
    """A non-decoupled request's sender: it takes the one final response (Triton allows that)."""

    def __init__(self) -> None:
        self.response: Any = None
        self.cancelled = False

    def __call__(self, response: Any, final: bool) -> None:
        if response is not None:
            self.response = response


class _Stream:
    """A decoupled request's sender, feeding the stream on the event loop from any thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queue: asyncio.Queue[tuple[Any, bool]] = asyncio.Queue()
        self.cancelled = False
        self._thread = threading.get_ident()

    def __call__(self, response: Any, final: bool) -> None:
        self._put((response, final))

    def fail(self, error: BaseException) -> None:
        self._put((error, True))

    def _put(self, item: tuple[Any, bool]) -> None:
        if threading.get_ident() == self._thread:
            self.queue.put_nowait(item)
            return
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)
        except RuntimeError:  # the loop has closed: nobody is listening any more
            pass


def is_triton_source(source: bytes) -> bool:
    """Whether a model.py may define Triton's class (checked before running it, to provide pb_utils)."""
    return b"TritonPythonModel" in source


def completed_config(cls: type, config: Mapping[str, Any], name: str, host: _host.PythonHost | None) -> dict[str, Any]:
    """The config after the class's ``auto_complete_config``, and Triton's defaults for a Python model."""
    base = {"name": name, "backend": "python", **config}
    auto_complete = getattr(cls, "auto_complete_config", None)
    if auto_complete is None:
        return base
    token = _host.enter(host) if host is not None else None
    try:
        completed = auto_complete(pb_utils.ModelConfig(json.dumps(base)))
    finally:
        if token is not None:
            _host.leave(token)
    if not isinstance(completed, pb_utils.ModelConfig):
        raise TypeError(f"auto_complete_config returned a {type(completed).__name__}, not the ModelConfig it was given")
    result = completed.as_dict()
    if not result.get("input"):
        result.pop("input", None)
    if not result.get("output"):
        result.pop("output", None)
    return result
