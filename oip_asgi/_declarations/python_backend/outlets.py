"""Where a served request's responses go: what its ``get_response_sender()`` sends into, with Triton's rules.

A decoupled model's request (`Streamed`) takes any number of responses, the last with (or as) the
FINAL flag, from any thread, during ``execute`` or after it returned; they feed its stream on the
event loop. A request of a model that is not decoupled (`Sent`, Triton 24.06 on) takes one response,
the FINAL flag with it or after it, before or after ``execute`` returned: the first answer the request
gets (sent, or returned by ``execute``) is its client's, and a response sent after it raises, as in
Triton. Both tell ``is_cancelled()`` whether the client has left (`DecodedRequest.cancelled`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading

from ..request import DecodedRequest
from .errors import TritonModelException
from .responses import InferenceResponse

CLOSED = "Unable to send response. Response sender has been closed."
MORE_THAN_ONE = "Unable to send response. Non-decoupled model cannot send more than one response."
FINAL_FIRST = "Unable to send response. Non-decoupled model cannot send complete final before sending a response."
# One lock for every request's outlet: each holds it for a few attribute reads and writes, and a lock a request
# would cost its allocation on the hot path.
_LOCK = threading.Lock()


class Sent:
    """A request of a model that is not decoupled: the one response its sender sends, if it does."""

    __slots__ = ("_later", "closed", "error", "request", "response", "taken")

    def __init__(self, request: DecodedRequest) -> None:
        self.request = request
        self.taken = False  # the model asked for the request's sender: it may answer through it, even later
        self.response: InferenceResponse | None = None  # the one response sent
        self.error: TritonModelException | None = None  # the FINAL flag sent before any response
        self.closed = False
        self._later: concurrent.futures.Future[InferenceResponse] | None = None  # awaited once execute returned

    @property
    def cancelled(self) -> bool:
        return self.request.is_cancelled()

    def take(self) -> None:
        self.taken = True

    def __call__(self, response: InferenceResponse | None, final: bool) -> None:
        with _LOCK:
            if response is not None and self.response is not None:
                raise TritonModelException(MORE_THAN_ONE)
            if self.closed:
                raise TritonModelException(CLOSED)
            if response is None and self.response is None:  # (final: the sender lets nothing else through)
                self.error = TritonModelException(FINAL_FIRST)
            elif response is not None:
                self.response = response
            self.closed = self.closed or final
        self._settle()  # (out of the lock: it runs the waiter's callbacks)
        if self.error is not None and response is None:
            raise self.error

    def answer(self, returned: object) -> object:
        """What the request gets once ``execute`` returned `returned` for it (an `InferenceResponse`, or None):
        the response sent, else the one returned (which closes the sender), else a future of the one its
        sender is yet to send, else None (it never will: the model kept no sender)."""
        with _LOCK:
            if self.response is not None:
                return self.response  # sent first: a response returned as well is dropped, as Triton drops it
            if self.error is not None:
                return self.error
            if returned is not None:
                self.closed = True  # a response sent from now on raises, as in Triton
                return returned
            if not self.taken:
                return None
            self._later = concurrent.futures.Future()
            return self._later

    def close(self) -> InferenceResponse | None:
        """``execute`` failed: the response sent before, if any; a response sent from now on raises."""
        with _LOCK:
            self.closed = True
            return self.response

    def _settle(self) -> None:
        later = self._later
        if later is None or later.done():
            return
        with contextlib.suppress(concurrent.futures.InvalidStateError):  # the client left: nobody waits
            if self.response is not None:
                later.set_result(self.response)
            elif self.error is not None:
                later.set_exception(self.error)


class Streamed:
    """A decoupled request: each response sent feeds its stream on the event loop, from any thread."""

    __slots__ = ("_thread", "closed", "ended", "loop", "queue", "request")

    def __init__(self, loop: asyncio.AbstractEventLoop, request: DecodedRequest) -> None:
        self.loop = loop
        self.request = request
        # Each response sent (or the failure that ends the stream), and whether it was the final one.
        self.queue: asyncio.Queue[tuple[InferenceResponse | BaseException | None, bool]] = asyncio.Queue()
        self.closed = False  # the final flag was sent, or the stream failed: nothing more goes through
        self.ended = False  # nobody reads the stream any more (the client left, or it ended)
        self._thread = threading.get_ident()

    @property
    def cancelled(self) -> bool:
        return self.ended or self.request.is_cancelled()

    def take(self) -> None:
        pass

    def __call__(self, response: InferenceResponse | None, final: bool) -> None:
        with _LOCK:
            if self.closed:
                raise TritonModelException(CLOSED)
            self.closed = final
        self._put((response, final))

    def fail(self, error: BaseException) -> bool:
        """End the stream with `error`, unless its final response was sent (then it reaches nobody, as in Triton)."""
        with _LOCK:
            if self.closed:
                return False
            self.closed = True
        self._put((error, True))
        return True

    def _put(self, item: tuple[InferenceResponse | BaseException | None, bool]) -> None:
        if threading.get_ident() == self._thread:
            self.queue.put_nowait(item)
            return
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)
        except RuntimeError:  # the loop has closed: nobody is listening any more
            pass


Outlet = Sent | Streamed
