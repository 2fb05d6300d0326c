"""What a BLS call (``InferenceRequest.exec``, ``async_exec``) gives back: its response, or a decoupled call's
responses; a failure comes back in a response carrying it, never raised, as Triton's."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

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
    """A decoupled BLS call's responses as they come; an error ends it with a response that carries it."""

    def __init__(self, results: Iterator[BLSResponse]) -> None:
        self._results = results
        self._done = False

    def __iter__(self) -> Responses:
        return self

    def __next__(self) -> InferenceResponse:
        if self._done:
            raise StopIteration
        try:
            return response_of(next(self._results))
        except StopIteration:
            self._done = True
            return final()
        except Exception as exc:
            self._done = True
            return failed(exc)

    def cancel(self) -> None:
        close = getattr(self._results, "close", None)  # a generator's: the stream stops
        if close is not None:
            close()
        self._done = True


class Collected:
    """A decoupled BLS call's responses, all received: iterated with ``for`` or ``async for``."""

    def __init__(self, responses: list[InferenceResponse]) -> None:
        self._responses = iter(responses)

    def __iter__(self) -> Iterator[InferenceResponse]:
        return self._responses

    def __aiter__(self) -> Collected:
        return self

    async def __anext__(self) -> InferenceResponse:
        try:
            return next(self._responses)
        except StopIteration:
            raise StopAsyncIteration from None

    def cancel(self) -> None:
        pass


async def collected(results: AsyncIterator[BLSResponse]) -> Collected:
    """Every response of a decoupled call awaited on the event loop, then the final one (or the failure)."""
    responses: list[InferenceResponse] = []
    try:
        async for result in results:
            responses.append(response_of(result))
    except Exception as exc:
        responses.append(failed(exc))
    else:
        responses.append(final())
    return Collected(responses)
