"""The server as a Triton Python model sees it (`PythonHost`): BLS, model control and custom metrics.

BLS runs a request on a model this server serves, in this process: through `ServerCore.infer`, the
path every wire's request takes (lookup, readiness, batching, statistics), with an in-process
exchange in place of a wire. A sync ``exec()`` comes from a worker thread (or a model instance's own
loop): it hands the request to the server's event loop and waits, and lends its place in the worker
pool meanwhile, so that the model it calls finds a thread however busy the pool is; an ``async_exec()``
from an instance's own loop is run on the server's and awaited there. Custom metric families are collected on the
server's Prometheus registry, their names and labels as the model wrote them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from .._declarations.errors import BadRequest
from .._declarations.extras import needs_extra
from .._declarations.python_backend import BLSRequest, BLSResponse, MetricFamilyHandle, remember
from .checks import check_inputs
from .load_request import python_load_arguments
from .request import DecodedRequest, RequestedOutput
from .streaming import END

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from .custom_metrics import CustomFamilies
    from .responding import Body, Reply, Responder
    from .serving import ServedModel
    from .workers import WorkerPool

T = TypeVar("T")


class _Core(Protocol):
    """What BLS and model control use of the `ServerCore`."""

    pool: WorkerPool
    respond: Responder

    async def infer(
        self, name: str, version: str | None, exchange: _Exchange, body: Body[BLSResponse] | None = None
    ) -> BLSResponse | None: ...

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

    def __init__(self, request: BLSRequest, outlet: Callable[[BLSResponse], None] | None = None) -> None:
        self._request = request
        self._outlet = outlet  # a decoupled call's: takes each response
        self.responses = 0
        self.result: BLSResponse | None = None

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

    def encode(self, reply: Reply) -> BLSResponse:
        return BLSResponse({output.name: output.array for output in reply.outputs}, reply.parameters, reply.last)

    async def send(self, response: BLSResponse) -> None:
        self.result = response
        self.responses += 1

    async def start(self) -> None:
        pass

    async def send_next(self, response: BLSResponse) -> None:
        assert self._outlet is not None  # (only a decoupled call is answered several times)
        self.responses += 1
        self._outlet(response)

    async def finish(self) -> None:
        pass


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class TritonHost:
    """`core` as the `PythonHost` of the Triton Python models it serves."""

    def __init__(self, core: _Core, registry: CollectorRegistry | None = None) -> None:
        self.core = core
        self.registry = registry  # the prometheus_client registry of the server's /metrics, if it has one
        self.loop: asyncio.AbstractEventLoop | None = None
        self._families: CustomFamilies | None = None
        remember(self)

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def _loop(self, what: str) -> asyncio.AbstractEventLoop:
        loop = self.loop
        if loop is None:
            raise RuntimeError(f"{what}: the server has not started serving")
        if _running_loop() is loop:
            raise RuntimeError(f"{what} would block the server's event loop: call it from a model's execute")
        return loop

    def _wait(self, what: str, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run `coroutine` on the server's loop from this thread, lending this thread's place in the pool."""
        try:
            loop = self._loop(what)
        except RuntimeError:
            coroutine.close()
            raise
        with self.core.pool.lent():  # lent before the call is made: the model it calls may need a thread at once
            return asyncio.run_coroutine_threadsafe(coroutine, loop).result()

    # BLS

    def infer(self, request: BLSRequest) -> BLSResponse:
        return self._wait("InferenceRequest.exec()", self._infer(request))

    async def infer_async(self, request: BLSRequest) -> BLSResponse:
        loop = self.loop
        if loop is None:
            raise RuntimeError("InferenceRequest.async_exec(): the server has not started serving")
        if asyncio.get_running_loop() is loop:
            return await self._infer(request)
        # From a model instance's own loop: run on the server's, awaited here (a cancelled wait cancels it).
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._infer(request), loop))

    async def _infer(self, request: BLSRequest) -> BLSResponse:
        exchange = _Exchange(request)
        await self.core.infer(request.model, request.version or None, exchange)
        assert exchange.result is not None  # a unary answer is sent, or its failure raised
        return exchange.result

    def stream(self, request: BLSRequest) -> Iterator[BLSResponse]:
        loop = self._loop("InferenceRequest.exec(decoupled=True)")
        items: queue.SimpleQueue[object] = queue.SimpleQueue()

        def start() -> concurrent.futures.Future[None]:
            return asyncio.run_coroutine_threadsafe(self._streamed(request, items.put), loop)

        return _thread_responses(items, start, self.core.pool)

    async def _streamed(self, request: BLSRequest, put: Callable[[object], None]) -> None:
        """A decoupled call on the loop: each response `put` as it comes, then its failure if it fails, then END."""
        try:
            exchange = _Exchange(request, put)
            await self.core.infer(request.model, request.version or None, exchange, self.core.respond.streaming)
        except Exception as exc:
            put(exc)
        except BaseException as exc:  # cancelled: a reader still waiting learns it
            put(exc)
            raise
        finally:
            put(END)

    # Model control

    def load_model(self, name: str, config: str, files: Mapping[str, bytes] | None) -> None:
        async def load() -> None:  # checked on the loop: a server not serving yet is what the model hears first
            arguments = python_load_arguments(name, config, files)
            await self.core.load_model(name, config=arguments.config, files=arguments.files)

        self._wait("pb_utils.load_model", load())

    def unload_model(self, name: str) -> None:
        self._wait("pb_utils.unload_model", self.core.unload_model(name))

    def is_model_ready(self, name: str, version: str) -> bool:
        def ready() -> bool:
            try:
                return self.core.model_ready(name, version or None)
            except Exception:
                return False

        if self.loop is not None and _running_loop() is self.loop:
            return ready()

        async def on_the_loop() -> bool:
            return ready()

        return self._wait("pb_utils.is_model_ready", on_the_loop())

    # Custom metrics

    def metric_family(self, name: str, description: str, kind: str) -> MetricFamilyHandle:
        if self._families is None:
            with needs_extra("metrics", "pb_utils.MetricFamily"):
                from .custom_metrics import CustomFamilies  # prometheus_client

            self._families = CustomFamilies(self.registry)
        return self._families.family(name, description, kind)


def _response(item: object) -> BLSResponse | None:
    """A decoupled call's next response; None once it has ended; its failure raised."""
    if item is END:
        return None
    if isinstance(item, BaseException):
        raise item
    assert isinstance(item, BLSResponse)
    return item


def _thread_responses(
    items: queue.SimpleQueue[object], start: Callable[[], concurrent.futures.Future[None]], pool: WorkerPool
) -> Iterator[BLSResponse]:
    """The responses of a decoupled call started by `start`, as they come, waited for with the thread lent."""
    future = None
    try:
        while True:
            with pool.lent():
                if future is None:
                    future = start()
                item = items.get()
            response = _response(item)
            if response is None:
                return
            yield response
    finally:
        if future is not None and not future.done():
            future.cancel()
