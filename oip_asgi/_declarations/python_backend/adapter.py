"""A model.py's ``TritonPythonModel`` served (`TritonModel`), through the lifecycle Triton runs it through.

The config's instance groups (instances.py) say how many objects of the class serve it: the
`Model`'s load makes and ``initialize(args)``s each, with Triton's seven string keys and its own
instance name; its unload ``finalize``s each; ``is_ready``, when defined, is consulted by readiness.
A BLS call from ``initialize`` or ``finalize`` fails, in Triton's words.

``execute`` takes a list of requests: the core hands it the requests a dynamic batch collected (not
concatenated, as Triton), or one. As in Triton:

- a sync ``execute`` runs on a worker thread, one at a time per instance (the core runs no more calls
  at once than `instance_count`; each call takes a free instance and gives it back);
- an ``async def execute`` runs on its instance's own event loop (`Instance`), where a blocking BLS call
  blocks only that loop. A model that is not decoupled runs one at a time per instance; a decoupled
  one's executes overlap, as Triton schedules them, each request answered as it finishes;
- a decoupled model answers through each request's response sender (outlets.py), from any thread,
  during ``execute`` or after it returned: each request's stream is an async generator the core steps;
- a model that is not decoupled returns one response per request, or answers a request through its
  sender (one response, and the FINAL flag), even after ``execute`` returned.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import itertools
import json
import logging
import queue
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Any

import anyio.to_thread

from ..errors import ModelError, OIPError
from ..model import Outcome, Outputs
from ..request import DecodedRequest
from ..result import Last, Later, Result
from .errors import TritonModelException, answer_of
from .host import PythonHost, back, enter, leave, outside_execute
from .instances import Instance, InstanceSpec, completed_groups, instance_specs
from .model_config import using_decoupled_model_transaction_policy
from .outlets import Sent, Streamed
from .requests import InferenceRequest
from .responses import InferenceResponse
from .tensors import Tensor

logger = logging.getLogger("oip_asgi")


class TritonModel:
    """One version of a ``TritonPythonModel`` class, served: its instances exist from load to unload."""

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
        self._free: queue.SimpleQueue[Instance] = queue.SimpleQueue()  # a sync execute's instances, free
        self._waiting: asyncio.Queue[Instance] | None = None  # an async one's (made on the serving loop)
        self._turns: itertools.cycle[Instance] | None = None  # a decoupled async one's: its executes overlap
        self._slots: asyncio.Semaphore | None = None  # a decoupled sync one's: one execute at a time per instance
        self._running: set[asyncio.Task[None]] = set()  # (the loop keeps only weak references to tasks)
        if not callable(getattr(cls, "execute", None)):
            raise TypeError(f"model {name!r}: TritonPythonModel defines no execute(self, requests)")
        self.is_async = inspect.iscoroutinefunction(getattr(cls, "execute"))  # noqa: B009

    # The lifecycle

    def initialize(self) -> None:
        """Make and initialize each instance; if one fails, those made are finalized and the load fails."""
        token, refused = enter(self.host), outside_execute()
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
                served = Instance(instance, spec.name)
                self.instances.append(served)
                self._free.put(served)
        finally:
            back(refused)
            leave(token)
        self._turns = itertools.cycle(self.instances)

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
        """Stop each instance's loop, then finalize it (the core unloads once no call runs); one that fails
        does not stop the others."""
        instances, self.instances = self.instances, []
        self._free, self._waiting, self._turns = queue.SimpleQueue(), None, None
        failed: BaseException | None = None
        token, refused = enter(self.host), outside_execute()
        try:
            for instance in instances:
                instance.stop()
                finalize = getattr(instance.object, "finalize", None)
                if finalize is None:
                    continue
                try:
                    result = finalize()
                    if inspect.iscoroutine(result):
                        asyncio.run(result)
                except Exception as exc:
                    failed = failed or exc
        finally:
            back(refused)
            leave(token)
        if failed is not None:
            raise failed

    def is_ready(self) -> bool:
        """Ready when every instance that defines ``is_ready()`` says so."""
        checks = [check for check in (getattr(one.object, "is_ready", None) for one in self.instances) if check]
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

    def request(self, decoded: DecodedRequest, outlet: Sent | Streamed) -> InferenceRequest:
        """The core's request as ``execute`` gets it; `outlet` takes what its sender sends."""
        of = Tensor.of
        inputs = [of(name, array) for name, array in decoded.inputs.items()]
        outputs = decoded.outputs
        requested = [output.name for output in outputs] if outputs is not None else list(self.outputs)
        return InferenceRequest.served(
            self.name, self.version_number, inputs, requested, decoded.id or "", decoded.parameters, outlet,
            outputs is not None,  # the client named its outputs: the others are dropped
            decoded.controls,
        )  # fmt: skip

    def _requests(self, decoded: list[DecodedRequest]) -> tuple[list[InferenceRequest], list[Sent]]:
        sent = [Sent(one) for one in decoded]
        return [self.request(one, outlet) for one, outlet in zip(decoded, sent, strict=True)], sent

    def failure(self, exc: BaseException, instance: str) -> ModelError:
        message = f"Failed to process the request(s) for model '{instance}', message: {type(exc).__name__}: {exc}"
        logger.error("%s", message, exc_info=(type(exc), exc, exc.__traceback__))
        return ModelError(message, redacted=f"Failed to process the request(s) for model '{instance}'", logged=True)

    def error_of(self, exc: BaseException, instance: str) -> OIPError:
        """What a request gets when ``execute`` raised `exc`: an `OIPError` as raised, anything else logged."""
        return exc if isinstance(exc, OIPError) else self.failure(exc, instance)

    def _take(self) -> Instance:
        """A free instance: there is one, as the core runs no more calls at once than there are instances."""
        try:
            return self._free.get_nowait()
        except queue.Empty:
            raise RuntimeError(
                f"model {self.name!r}: more execute calls at once than its {self.instance_count} instance(s)"
            ) from None

    def answers(self, requests: list[InferenceRequest], returned: object, sent: list[Sent]) -> list[Outcome]:
        """Each request's outcome, from what ``execute`` returned and what its sender sent."""
        if isinstance(returned, list) and len(returned) == len(requests):  # (as models do: checked first)
            responses: list[object] = returned
        elif returned is None:
            responses = [None] * len(requests)
        elif not isinstance(returned, (list, tuple)):
            error = self._wrong(
                f"execute() returned a {type(returned).__name__}; return a list with one InferenceResponse per request"
            )
            return self._failed(requests, sent, error)
        else:
            short = self._wrong(
                f"execute() returned {len(returned)} responses for {len(requests)} requests; this request got none"
            )
            responses = [*returned[: len(requests)], *[short] * (len(requests) - len(returned))]
        outcomes: list[Outcome] = []
        outcome = self.outcome
        for request, outlet, response in zip(requests, sent, responses, strict=True):
            if not outlet.taken and response.__class__ is InferenceResponse:  # as most models answer: returned
                outlet.closed = True  # (no sender was made: nothing else answers it)
                outcomes.append(outcome(request, response))
                continue
            answer = outlet.answer(response) if not isinstance(response, ModelError) else response
            outcomes.append(self._outcome_of(request, answer))
        return outcomes

    def _outcome_of(self, request: InferenceRequest, answer: object) -> Outcome:
        if answer is None:
            return self._wrong(
                "it is not decoupled, but its execute() returned None and sent no response for this request; "
                "return a list with one InferenceResponse per request"
            )
        if isinstance(answer, ModelError):
            return answer
        if isinstance(answer, TritonModelException):  # the FINAL flag sent before any response
            return self._wrong(str(answer))
        if isinstance(answer, concurrent.futures.Future):  # its sender is yet to send it
            return Later(_answered_later(answer, lambda response: self._later_outcome(request, response)))
        return self.outcome(request, answer)

    def _wrong(self, what: str) -> ModelError:
        """A request the model answered wrongly, or not at all: its 500, and the log line."""
        message = f"model '{self.name}': {what}"
        logger.error("%s", message)
        return ModelError(message, logged=True)

    def _later_outcome(self, request: InferenceRequest, response: object) -> Outcome:
        outcome = self.outcome(request, response)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def _failed(self, requests: list[InferenceRequest], sent: list[Sent], error: OIPError) -> list[Outcome]:
        """Each request's outcome when ``execute`` failed: what its sender sent before, else `error`."""
        outcomes: list[Outcome] = []
        for request, outlet in zip(requests, sent, strict=True):
            response = outlet.close()
            outcomes.append(error if response is None else self.outcome(request, response))
        return outcomes

    def outcome(self, request: InferenceRequest, response: object) -> Outcome:
        """A response as the core takes it: a `Result` of the requested outputs, or the error it carries."""
        if not isinstance(response, InferenceResponse):
            return self._wrong(
                f"execute() returned a {type(response).__name__} for a request, not a pb_utils.InferenceResponse"
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
        requests, sent = self._requests(decoded)
        instance = self._take()
        token = enter(self.host)
        try:
            returned = instance.object.execute(requests)
        except Exception as exc:
            return self._failed(requests, sent, self.error_of(exc, instance.name))
        finally:
            leave(token)
            self._free.put(instance)
        return self.answers(requests, returned, sent)

    async def execute_async(self, decoded: list[DecodedRequest]) -> list[Outcome]:
        """``async def execute`` on a free instance's loop, awaited here; the instance is busy until it
        ends, even when the client leaves first (it runs on, seeing ``is_cancelled()``)."""
        requests, sent = self._requests(decoded)
        instance = await self._free_async()
        running = asyncio.wrap_future(instance.submit(self._entered(instance.object.execute, requests)))
        running.add_done_callback(lambda _: self._give_back(instance))
        try:
            returned = await asyncio.shield(running)
        except Exception as exc:
            return self._failed(requests, sent, self.error_of(exc, instance.name))
        return self.answers(requests, returned, sent)

    async def _free_async(self) -> Instance:
        waiting = self._waiting
        if waiting is None:
            waiting = self._waiting = asyncio.Queue()
            for instance in self.instances:
                waiting.put_nowait(instance)
        return await waiting.get()

    def _give_back(self, instance: Instance) -> None:
        if self._waiting is not None and instance in self.instances:  # (not after an unload)
            self._waiting.put_nowait(instance)

    async def _entered(self, execute: Callable[..., Any], requests: list[InferenceRequest]) -> object:
        """``execute(requests)`` awaited on an instance's loop, where pb_utils finds the server it runs in."""
        token = enter(self.host)
        try:
            return await execute(requests)
        finally:
            leave(token)

    # A decoupled model: each request a stream of the responses its sender sends

    def streams(self, decoded: list[DecodedRequest]) -> list[AsyncGenerator[Outputs, None]]:
        """Each request's responses, as an async generator; ``execute`` is started on them now."""
        loop = asyncio.get_running_loop()
        outlets = [Streamed(loop, one) for one in decoded]
        requests = [self.request(one, outlet) for one, outlet in zip(decoded, outlets, strict=True)]
        if self.is_async:
            self._start_async(requests, outlets)
        else:
            task = loop.create_task(self._run_sync(requests, outlets))
            self._running.add(task)
            task.add_done_callback(self._running.discard)
        return [self._responses(request, outlet) for request, outlet in zip(requests, outlets, strict=True)]

    async def _responses(self, request: InferenceRequest, outlet: Streamed) -> AsyncGenerator[Outputs, None]:
        try:
            while True:
                response, final = await outlet.queue.get()
                if isinstance(response, BaseException):
                    raise response
                if response is not None:
                    outcome = self.outcome(request, response)
                    if isinstance(outcome, BaseException):
                        raise outcome
                    if final:  # sent with the final flag: its request's last response, marked so
                        parameters = outcome.parameters if isinstance(outcome, Result) else None
                        outcome = Last(outcome.outputs if isinstance(outcome, Result) else outcome, parameters)
                    yield outcome  # type: ignore[misc]  # an Outcome that is not an error: outputs
                if final:
                    return
        finally:
            outlet.ended = True  # the client left, or the stream ended: is_cancelled() says so

    def _start_async(self, requests: list[InferenceRequest], outlets: list[Streamed]) -> None:
        """An async execute on the next instance's loop, not waited for: a decoupled model's executes overlap."""
        if self._turns is None:
            raise RuntimeError(f"model {self.name!r} is not loaded")
        instance = next(self._turns)
        running = instance.submit(self._entered(instance.object.execute, requests))
        running.add_done_callback(lambda done: self._ended(done, instance, outlets))

    def _ended(self, done: Any, instance: Instance, outlets: list[Streamed]) -> None:
        """A decoupled async execute has ended (on its instance's loop): its failure to the requests still open."""
        if done.cancelled():
            self._fail(outlets, ModelError(f"model '{self.name}' was unloaded while it answered"))
        elif done.exception() is not None:
            self._fail(outlets, exception=done.exception(), instance=instance.name)
        else:
            self._check_none(done.result(), outlets, instance.name)

    async def _run_sync(self, requests: list[InferenceRequest], outlets: list[Streamed]) -> None:
        """A sync execute on a worker thread, one at a time per instance; its responses may come later."""
        if self._slots is None:  # (made on the loop that serves the model)
            self._slots = asyncio.Semaphore(self.instance_count)
        async with self._slots:
            instance = self._take()
            try:
                returned = await anyio.to_thread.run_sync(self._call, instance, requests)
            except Exception as exc:
                self._fail(outlets, exception=exc, instance=instance.name)
                return
            finally:
                self._free.put(instance)
        self._check_none(returned, outlets, instance.name)

    def _call(self, instance: Instance, requests: list[InferenceRequest]) -> object:
        token = enter(self.host)
        try:
            return instance.object.execute(requests)
        finally:
            leave(token)

    def _check_none(self, returned: object, outlets: list[Streamed], instance: str) -> None:
        if returned is not None:  # Triton's words, which its clients look for
            self._fail(
                outlets,
                exception=TritonModelException(
                    f"Python model '{instance}' is using the decoupled mode and the execute function must return None."
                ),
                instance=instance,
            )

    def _fail(
        self,
        outlets: list[Streamed],
        error: OIPError | None = None,
        *,
        exception: BaseException | None = None,
        instance: str = "",
    ) -> None:
        """End each stream still open with the error; an error no stream takes (each request had its final
        response) is only logged, as in Triton."""
        open_ = [outlet for outlet in outlets if not outlet.closed]
        if exception is not None:
            error = self.error_of(exception, instance) if open_ else None
            if error is None:
                logger.error(
                    "Failed to process the request(s) for model '%s', message: %s: %s",
                    instance, type(exception).__name__, exception,
                    exc_info=(type(exception), exception, exception.__traceback__),
                )  # fmt: skip
        if error is not None:
            for outlet in open_:
                outlet.fail(error)


def _answered_later(
    future: concurrent.futures.Future[Any], outcome: Callable[[object], Outcome]
) -> concurrent.futures.Future[Outcome]:
    """A future of the outcome of a response its sender is yet to send (`future` is of the response)."""
    result: concurrent.futures.Future[Outcome] = concurrent.futures.Future()

    def arrived(done: concurrent.futures.Future[object]) -> None:
        if result.done():
            return
        try:
            result.set_result(outcome(done.result()))
        except BaseException as exc:
            result.set_exception(exc)

    def gone(done: concurrent.futures.Future[Outcome]) -> None:
        if done.cancelled():
            future.cancel()  # the client left: a response sent from now on reaches nobody

    future.add_done_callback(arrived)
    result.add_done_callback(gone)
    return result
