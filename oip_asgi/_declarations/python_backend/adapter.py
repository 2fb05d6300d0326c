"""A model.py's ``TritonPythonModel`` served (`TritonModel`), through the lifecycle Triton runs it through.

The config's instance groups (instances.py) say how many objects of the class serve it: the
`Model`'s load makes and ``initialize(args)``s each, with Triton's seven string keys and its own
instance name; its unload ``finalize``s each; ``is_ready``, when defined, is consulted by readiness.
Each instance runs one ``execute`` at a time: the core runs no more calls at once than
`instance_count` (the `Model`'s `Calling` says so), and each call takes a free instance and gives it
back. ``execute`` takes a list of requests: the core hands it the requests a dynamic batch collected
(not concatenated, as Triton), or one. A decoupled model answers through each request's response
sender, from any thread, during or after ``execute``; here that stream is an async generator the
core steps as it steps any decoupled model.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import queue
import threading
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any, Protocol

import anyio.to_thread

from ..errors import ModelError, OIPError
from ..model import Outcome, Outputs
from ..request import DecodedRequest
from ..result import Result
from .errors import answer_of
from .host import Entered, PythonHost, enter, leave
from .instances import InstanceSpec, completed_groups, instance_specs
from .model_config import using_decoupled_model_transaction_policy
from .requests import InferenceRequest
from .responses import InferenceResponse
from .tensors import Tensor

logger = logging.getLogger("oip_asgi")


class Instance(Protocol):
    """An object of the model's ``TritonPythonModel`` class (``initialize``, ``finalize`` and ``is_ready``
    are its own to define or not)."""

    def execute(self, requests: list[InferenceRequest]) -> Any:
        """A list of one `InferenceResponse` per request, or None (a decoupled model's, or one whose
        requests' senders answered); awaitable from an ``async def execute``."""


class TritonModel:
    """One version of a ``TritonPythonModel`` class, served: its instance exists from load to unload."""

    def __init__(
        self, cls: type, name: str, version: str, folder: Path, config: dict[str, Any], host: PythonHost | None
    ) -> None:
        self.cls = cls
        self.name = name
        self.version = version
        self.version_number = int(version) if version.isdigit() else -1  # as request.model_version() answers
        self.folder = folder
        self.config = config
        self.config_json = json.dumps(config)  # (once: each initialize gets it)
        self.decoupled = using_decoupled_model_transaction_policy(config)
        self.outputs = [tensor["name"] for tensor in config.get("output", [])]
        self.host = host
        self.specs = instance_specs(completed_groups(config, name), name)
        self.instance_count = len(self.specs)  # the core runs at most this many calls at once
        self.instances: list[Instance] = []  # from load to unload
        self._free: queue.SimpleQueue[tuple[Instance, str]] = queue.SimpleQueue()  # each instance and its name
        self._slots: asyncio.Semaphore | None = None  # a decoupled model's: its executes run on the loop's tasks
        if not callable(getattr(cls, "execute", None)):
            raise TypeError(f"model {name!r}: TritonPythonModel defines no execute(self, requests)")
        self.is_async = inspect.iscoroutinefunction(getattr(cls, "execute"))  # noqa: B009

    # The lifecycle

    def initialize(self) -> None:
        """Make and initialize each instance; if one fails, those made are finalized and the load fails."""
        token = enter(self.host)
        try:
            for spec in self.specs:
                instance = self.cls()
                initialize = getattr(instance, "initialize", None)
                if initialize is not None:
                    try:
                        result = initialize(self.args(spec))
                        if inspect.iscoroutine(result):
                            asyncio.run(result)  # (off the event loop: the load runs on a worker thread)
                    except BaseException:
                        self.finalize()
                        raise
                self.instances.append(instance)
                self._free.put((instance, spec.name))
        finally:
            leave(token)

    def args(self, spec: InstanceSpec) -> dict[str, str]:
        """Triton's seven keys, every value a string."""
        return {
            "model_config": self.config_json,
            "model_instance_kind": spec.kind,
            "model_instance_name": spec.name,
            "model_instance_device_id": str(spec.device_id),
            "model_repository": str(self.folder),
            "model_version": self.version,
            "model_name": self.name,
        }

    def finalize(self) -> None:
        """Finalize each instance (the core unloads once no call runs); one that fails does not stop the others."""
        instances, self.instances = self.instances, []
        self._free = queue.SimpleQueue()
        failed: BaseException | None = None
        token = enter(self.host)
        try:
            for instance in instances:
                finalize = getattr(instance, "finalize", None)
                if finalize is None:
                    continue
                try:
                    result = finalize()
                    if inspect.iscoroutine(result):
                        asyncio.run(result)
                except Exception as exc:
                    failed = failed or exc
        finally:
            leave(token)
        if failed is not None:
            raise failed

    def is_ready(self) -> bool:
        """Ready when every instance that defines ``is_ready()`` says so."""
        checks = [check for check in (getattr(instance, "is_ready", None) for instance in self.instances) if check]
        if not checks:
            return True
        token = enter(self.host)
        try:
            return all(bool(check()) for check in checks)
        except Exception:
            logger.exception(
                "model %r (version %s): is_ready() raised; it counts as not ready", self.name, self.version
            )
            return False
        finally:
            leave(token)

    # Requests

    def requests(self, decoded: list[DecodedRequest]) -> tuple[list[InferenceRequest], list[_Sent]]:
        """The core's requests as ``execute`` gets them, and the sender each may answer through."""
        sent = [_Sent() for _ in decoded]
        return [self.request(one, outlet) for one, outlet in zip(decoded, sent, strict=True)], sent

    def request(self, decoded: DecodedRequest, outlet: _Sent | _Stream) -> InferenceRequest:
        """The core's request as ``execute`` gets it; `outlet` takes what its sender sends."""
        of = Tensor.of
        inputs = [of(name, array) for name, array in decoded.inputs.items()]
        outputs = decoded.outputs
        requested = [output.name for output in outputs] if outputs is not None else list(self.outputs)
        return InferenceRequest.served(
            self.name, self.version_number, inputs, requested, decoded.id or "", decoded.parameters, outlet,
            outputs is not None,  # the client named its outputs: the others are dropped
        )  # fmt: skip

    def failure(self, exc: BaseException, instance: str) -> ModelError:
        message = f"Failed to process the request(s) for model '{instance}', message: {type(exc).__name__}: {exc}"
        logger.error("%s", message, exc_info=(type(exc), exc, exc.__traceback__))
        return ModelError(message, redacted=f"Failed to process the request(s) for model '{instance}'", logged=True)

    def error_of(self, exc: Exception, instance: str) -> OIPError:
        """What a request gets when ``execute`` raised `exc`: an `OIPError` as raised, anything else logged."""
        return exc if isinstance(exc, OIPError) else self.failure(exc, instance)

    def _take(self) -> tuple[Instance, str]:
        """A free instance: there is one, as the core runs no more calls at once than there are instances."""
        try:
            return self._free.get_nowait()
        except queue.Empty:
            raise RuntimeError(
                f"model {self.name!r}: more execute calls at once than its {self.instance_count} instance(s)"
            ) from None

    def _give_back(self, instance: Instance, name: str, token: Entered) -> None:
        leave(token)
        self._free.put((instance, name))

    def answers(self, requests: list[InferenceRequest], returned: object, sent: list[_Sent]) -> list[Outcome]:
        """Each request's outputs (a `Result`) or the error it gets, from what ``execute`` returned."""
        if isinstance(returned, list) and len(returned) == len(requests):  # (as models do: checked first)
            outcome = self.outcome
            return [outcome(request, response) for request, response in zip(requests, returned, strict=True)]
        if returned is None:
            if all(outlet.response is not None for outlet in sent):  # each answered through its sender
                return [self.outcome(request, outlet.response) for request, outlet in zip(requests, sent, strict=True)]
            return [
                ModelError(
                    f"model '{self.name}' is not decoupled, but its execute() returned None and sent no response "
                    "for this request; return a list with one InferenceResponse per request"
                )
            ] * len(requests)
        if not isinstance(returned, (list, tuple)):
            error = ModelError(
                f"model '{self.name}': execute() returned a {type(returned).__name__}; "
                "return a list with one InferenceResponse per request"
            )
            return [error] * len(requests)
        responses = list(returned)
        results: list[Outcome] = []
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

    def outcome(self, request: InferenceRequest, response: object) -> Outcome:
        """A response as the core takes it: a `Result` of the requested outputs, or the error it carries."""
        if not isinstance(response, InferenceResponse):
            return ModelError(
                f"model '{self.name}': execute() returned a {type(response).__name__} for a request, "
                "not a pb_utils.InferenceResponse"
            )
        # Read through the package's own fields rather than the model-facing methods: it runs per request.
        error = response._error
        if error is not None:
            return answer_of(error.code(), error.message())
        tensors = response._tensors
        if request.asked:  # outputs the client did not ask for are dropped, as Triton drops them
            wanted = request._requested
            tensors = [tensor for tensor in tensors if tensor._name in wanted]
        outputs = {tensor._name: tensor._array for tensor in tensors}
        parameters = response._parameters
        return Result(outputs, parameters) if parameters else outputs

    # execute, as the core calls a model that takes requests (`Calling.takes_requests`)

    def execute(self, decoded: list[DecodedRequest]) -> list[Outcome]:
        """Sync ``execute`` on a worker thread: one outcome per request."""
        requests, sent = self.requests(decoded)
        instance, name = self._take()
        token = enter(self.host)
        try:
            returned = instance.execute(requests)
        except Exception as exc:
            return [self.error_of(exc, name)] * len(requests)
        finally:
            self._give_back(instance, name, token)
        return self.answers(requests, returned, sent)

    async def execute_async(self, decoded: list[DecodedRequest]) -> list[Outcome]:
        """``async def execute``, awaited on the event loop."""
        requests, sent = self.requests(decoded)
        instance, name = self._take()
        token = enter(self.host)
        try:
            returned = await instance.execute(requests)
        except Exception as exc:
            return [self.error_of(exc, name)] * len(requests)
        finally:
            self._give_back(instance, name, token)
        return self.answers(requests, returned, sent)

    async def stream(self, decoded: DecodedRequest) -> AsyncGenerator[Outputs, None]:
        """A decoupled model's responses to one request, as they are sent (from any thread)."""
        loop = asyncio.get_running_loop()
        outlet = _Stream(loop)
        request = self.request(decoded, outlet)
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

    async def _run_decoupled(self, request: InferenceRequest, outlet: _Stream) -> None:
        """``execute`` on a free instance, held until execute returns (its responses may come later, as Triton's)."""
        if self._slots is None:  # (made on the loop that serves the model)
            self._slots = asyncio.Semaphore(self.instance_count)
        async with self._slots:
            instance, name = self._take()
            try:
                returned = await self._execute_decoupled(instance, request)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                outlet.fail(self.error_of(exc, name))
                return
            finally:
                self._free.put((instance, name))
        if returned is not None:
            outlet.fail(
                ModelError(
                    f"model '{self.name}' is decoupled: its execute() answers through each request's response "
                    f"sender and returns None, but it returned a {type(returned).__name__}"
                )
            )

    async def _execute_decoupled(self, instance: Instance, request: InferenceRequest) -> object:
        def call() -> object:
            token = enter(self.host)
            try:
                return instance.execute([request])
            finally:
                leave(token)

        if not self.is_async:
            return await anyio.to_thread.run_sync(call)
        token = enter(self.host)
        try:
            return await instance.execute([request])
        finally:
            leave(token)


class _Sent:
    """A non-decoupled request's sender: it takes the one final response (Triton allows that)."""

    __slots__ = ("cancelled", "response")

    def __init__(self) -> None:
        self.response: InferenceResponse | None = None
        self.cancelled = False

    def __call__(self, response: InferenceResponse | None, final: bool) -> None:
        if response is not None:
            self.response = response


class _Stream:
    """A decoupled request's sender, feeding the stream on the event loop from any thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        # Each response sent (or the failure that ends the stream), and whether it was the final one.
        self.queue: asyncio.Queue[tuple[InferenceResponse | BaseException | None, bool]] = asyncio.Queue()
        self.cancelled = False
        self._thread = threading.get_ident()

    def __call__(self, response: InferenceResponse | None, final: bool) -> None:
        self._put((response, final))

    def fail(self, error: BaseException) -> None:
        self._put((error, True))

    def _put(self, item: tuple[InferenceResponse | BaseException | None, bool]) -> None:
        if threading.get_ident() == self._thread:
            self.queue.put_nowait(item)
            return
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)
        except RuntimeError:  # the loop has closed: nobody is listening any more
            pass
