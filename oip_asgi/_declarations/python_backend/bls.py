"""What a BLS call (``InferenceRequest.exec``, ``async_exec``) gives back: its response, or a decoupled call's
responses; a failure comes back in a response carrying it, never raised, as Triton's."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from ..errors import OIPError
from .errors import TritonError, code_of
from .host import BLSResponse
from .responses import InferenceResponse
from .tensors import Tensor


def response_of(result: BLSResponse) -> InferenceResponse:
    outputs = [Tensor(name, array) for name, array in result.outputs.items()]
    return InferenceResponse(outputs, parameters=result.parameters or None)


def failed(exc: BaseException) -> InferenceResponse:
    """The response that carries a BLS call's failure: its message, and the Triton code of its status."""
    if isinstance(exc, OIPError):  # what the served model's client would have been told
        return InferenceResponse(error=TritonError(exc.message or str(exc), code_of(exc.status_code)))
    return InferenceResponse(error=TritonError(str(exc), code_of(500)))


def final() -> InferenceResponse:
    """The empty response that ends a decoupled BLS stream (Triton's has the final flag and no outputs)."""
    return InferenceResponse()


class Responses:
    """A decoupled BLS call's responses as they come (Triton's response iterator): ``next()`` and ``for``
    wait for each on the calling thread; ``async for`` awaits each. An error ends it with a response that
    carries it; as in Triton, a stream its model ended with the final flag alone ends with an empty response."""

    def __init__(self, results: Iterator[BLSResponse]) -> None:
        self._results = results
        self._done = False
        self._first: InferenceResponse | None = None  # taken by `arrived`, given first

    def __iter__(self) -> Responses:
        return self

    def __next__(self) -> InferenceResponse:
        first, self._first = self._first, None
        if first is not None:
            return first
        if self._done:
            raise StopIteration
        try:
            result = next(self._results)
        except StopIteration:  # the stream ended with the final flag alone: Triton's empty last response
            self._done = True
            return final()
        except Exception as exc:
            self._done = True
            return failed(exc)
        if result.last:  # sent with the final flag: the last response, as Triton's iterator ends
            self._done = True
            for _ in self._results:  # (its end, which follows it)
                pass
        return response_of(result)

    def __aiter__(self) -> Responses:
        return self

    async def __anext__(self) -> InferenceResponse:
        response = await asyncio.get_running_loop().run_in_executor(None, self._next_or_none)
        if response is None:
            raise StopAsyncIteration
        return response

    async def arrived(self) -> None:
        """Return once the first response has come (or the call failed), without blocking the running loop:
        what Triton's ``await async_exec(decoupled=True)`` waits for."""
        self._first = await asyncio.get_running_loop().run_in_executor(None, self._next_or_none)

    def _next_or_none(self) -> InferenceResponse | None:
        return next(self, None)

    def cancel(self) -> None:
        close = getattr(self._results, "close", None)  # a generator's: the stream stops
        if close is not None:
            close()
        self._done = True
