"""The server as a Triton Python model sees it (`PythonHost`): BLS, model control and custom metrics.

BLS runs a request on a model this server serves, in this process: through `ServerCore.infer`, the
path every wire's request takes (lookup, readiness, batching, statistics), with an in-process
exchange in place of a wire. A sync ``exec()`` comes from a worker thread: it hands the request to
the event loop and waits, and lends its place in the worker pool meanwhile, so that the model it
calls finds a thread however busy the pool is. Custom metric families are collected on the
server's Prometheus registry, their names and labels as the model wrote them.
"""

from __future__ import annotations

import asyncio
import queue
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .._declarations.errors import BadRequest
from .._declarations.extras import needs_extra
from .._declarations.python_backend import remember
from .checks import check_inputs
from .load_request import python_load_arguments
from .request import DecodedRequest, RequestedOutput
from .streaming import END

if TYPE_CHECKING:
    from .responding import Reply, Responder
    from .serving import ServedModel
    from .workers import WorkerPool


class _Core(Protocol):
    """What BLS and model control use of the `ServerCore`."""

    pool: WorkerPool

    async def infer(self, name: str, version: str | None, exchange: Any, body: Any = None) -> Any: ...

    respond: Responder

    async def load_model(
        self, name: str, *, config: dict[str, Any] | None = None, files: dict[str, bytes] | None = None
    ) -> None: ...

    async def unload_model(self, name: str) -> None: ...

    def model_ready(self, name: str, version: str | None = None) -> bool: ...


@dataclass(frozen=True, slots=True)
class _Header:
    name: str
    datatype: str
    shape: Sequence[int]


class _Exchange:
    """A BLS request as an exchange: decoded from the model's tensors, answered to the calling model."""

    endpoint = "BLS"
    received = sent = 0

    def __init__(self, request: Any, outlet: Any = None) -> None:
        self._request = request
        self._outlet = outlet  # a decoupled call's: takes each response, then END
        self.responses = 0
        self.result: Any = None

    async def decode(self, model: ServedModel) -> DecodedRequest:
        bls = self._request
        check_inputs(model, [_Header(name, datatype, array.shape) for name, (datatype, array) in bls.inputs.items()])
        outputs = [RequestedOutput(name) for name in bls.outputs] or None
        if outputs is not None and model.outputs is not None:
            unknown = [output.name for output in outputs if model.output_spec(output.name) is None]
            if unknown:
                raise BadRequest(f"model '{model.name}' has no output {', '.join(map(repr, unknown))}")
        inputs = {name: array for name, (_, array) in bls.inputs.items()}
        return DecodedRequest(inputs, id=bls.id or None, parameters=bls.parameters, outputs=outputs)

    def encode(self, reply: Reply) -> Any:
        return [(output.name, output.array) for output in reply.outputs], reply.parameters

    async def send(self, response: Any) -> None:
        self.result = response
        self.responses += 1

    async def start(self) -> None:
        pass

    async def send_next(self, response: Any) -> None:
        self.responses += 1
        self._outlet(response)

    async def finish(self) -> None:
        pass


class TritonHost:
    """`core` as the `PythonHost` of the Triton Python models it serves."""

    def __init__(self, core: _Core, registry: Any = None) -> None:
        self.core = core
        self.registry = registry  # the prometheus_client registry of the server's /metrics, if it has one
        self.loop: asyncio.AbstractEventLoop | None = None
        self._families: Any = None
        remember(self)

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def _loop(self, what: str) -> asyncio.AbstractEventLoop:
        loop = self.loop
        if loop is None:
            raise RuntimeError(f"{what}: the server has not started serving")
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            raise RuntimeError(f"{what} would block the event loop: from an async execute, await its async form")
        return loop

    def _wait(self, what: str, coroutine: Any) -> Any:
        """Run `coroutine` on the server's loop from this thread, lending this thread's place in the pool."""
        try:
            loop = self._loop(what)
        except RuntimeError:
            coroutine.close()
            raise
        with self.core.pool.lent():  # lent before the call is made: the model it calls may need a thread at once
            return asyncio.run_coroutine_threadsafe(coroutine, loop).result()

    # BLS

    def infer(self, model: str, version: str, request: Any) -> Any:
        return self._wait("InferenceRequest.exec()", self.infer_async(model, version, request))

    async def infer_async(self, model: str, version: str, request: Any) -> Any:
        exchange = _Exchange(request)
        await self.core.infer(model, version or None, exchange)
        return exchange.result

    def stream(self, model: str, version: str, request: Any) -> Iterator[Any]:
        loop = self._loop("InferenceRequest.exec(decoupled=True)")
        items: queue.SimpleQueue[Any] = queue.SimpleQueue()

        async def run() -> None:
            try:
                await self.core.infer(
                    model, version or None, _Exchange(request, items.put), self.core.respond.streaming
                )
            except BaseException as exc:
                items.put(exc)
                raise
            finally:
                items.put(END)

        return _thread_responses(items, lambda: asyncio.run_coroutine_threadsafe(run(), loop), self.core.pool)

    async def stream_async(self, model: str, version: str, request: Any) -> AsyncIterator[Any]:
        items: asyncio.Queue[Any] = asyncio.Queue()

        async def run() -> None:
            try:
                exchange = _Exchange(request, items.put_nowait)
                await self.core.infer(model, version or None, exchange, self.core.respond.streaming)
            except Exception as exc:
                items.put_nowait(exc)
            finally:
                items.put_nowait(END)

        task = asyncio.get_running_loop().create_task(run())
        try:
            while True:
                item = await items.get()
                if item is END:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            if not task.done():
                task.cancel()

    # Model control

    def load_model(self, name: str, config: str, files: Mapping[str, bytes] | None) -> None:
        async def load() -> None:  # checked on the loop: a server not serving yet is what the model hears first
            arguments = python_load_arguments(name, config, files)
            await self.core.load_model(name, config=arguments.config, files=arguments.files)

        self._wait("pb_utils.load_model", load())

    def unload_model(self, name: str) -> None:
        self._wait("pb_utils.unload_model", self.core.unload_model(name))

    def is_model_ready(self, name: str, version: str) -> bool:
        async def ready() -> bool:
            try:
                return self.core.model_ready(name, version or None)
            except Exception:
                return False

        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not None and running is self.loop:
            try:
                return self.core.model_ready(name, version or None)
            except Exception:
                return False
        return bool(self._wait("pb_utils.is_model_ready", ready()))

    # Custom metrics

    def metric_family(self, name: str, description: str, kind: str) -> Any:
        if self._families is None:
            with needs_extra("metrics", "pb_utils.MetricFamily"):
                from .custom_metrics import CustomFamilies  # prometheus_client

            self._families = CustomFamilies(self.registry)
        return self._families.family(name, description, kind)


def _thread_responses(items: queue.SimpleQueue[Any], start: Any, pool: WorkerPool) -> Iterator[Any]:
    """The responses of a decoupled call started by `start`, as they come, waited for with the thread lent."""
    future = None
    try:
        while True:
            with pool.lent():
                if future is None:
                    future = start()
                item = items.get()
            if item is END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        if future is not None and not future.done():
            future.cancel()
