"""A generate request on HTTP: its JSON body read whole, its responses sent as Triton's generate extension does.

``/generate`` sends its one response as JSON; ``/generate_stream`` sends each as a server-sent event
(``text/event-stream; charset=utf-8``), uncompressed so that an event reaches the client when sent.
While a stream is answered, the client's leaving (``http.disconnect``) cancels the request, which
closes the model's generator.
"""

from __future__ import annotations

from starlette.types import Receive, Send

from .._core.request import DecodedRequest
from .._core.responding import Reply
from .._core.serving import ServedModel
from .._declarations.errors import ModelError, OIPError
from .._http.disconnect import DisconnectWatch
from .._http.events import EVENT_STREAM
from .._http.headers import raw_headers
from .body import BodyReader
from .generate import ONE_RESPONSE, error_event, generate_request, generate_response
from .responses import JSON, ResponseStream, event, send_response


class GenerateExchange(DisconnectWatch):
    """What the core asks of the wire, for ``/generate`` (`streaming` false) and ``/generate_stream``."""

    endpoint = "HTTP end point"

    def __init__(self, reader: BodyReader, receive: Receive, send: Send, *, streaming: bool) -> None:
        super().__init__(receive)
        self._reader = reader
        self._send = send
        self.streaming = streaming
        self.stream: ResponseStream | None = None  # once the answer has started
        self.decoded = False  # the request was read and checked: a failure from here on is the model's
        self._kept: bytes | None = None  # /generate: its one response, sent once the model has ended
        self.sent = self.responses = 0

    @property
    def received(self) -> int:
        return self._reader.received

    async def decode(self, model: ServedModel) -> DecodedRequest:
        request = generate_request(await self._reader.read_rest(), model)
        self.decoded = True
        if self.streaming:  # the body is read: from here the client's next message is its leaving
            self.watch()
        return request

    def encode(self, reply: Reply) -> bytes:
        return generate_response(reply.model, reply.request, reply.outputs, reply.parameters)

    async def send(self, response: bytes) -> None:
        """A model that answers once: its one response, as an event or as JSON."""
        await self.start()
        await self.send_next(response)
        await self.finish()

    async def start(self) -> None:
        if self.streaming:
            self.stream = ResponseStream(self._send)
            await self.stream.start(200, EVENT_STREAM)

    async def send_next(self, response: bytes) -> None:
        if self.stream is None:  # /generate: kept until the end, which tells whether it was the only one
            if self._kept is not None:
                raise ModelError(ONE_RESPONSE)  # ends the model at once: the answer cannot be sent
            self._kept = response
            self.responses += 1
            return
        await self.stream.send(event(response))
        self.sent, self.responses = self.stream.sent, self.responses + 1

    async def finish(self) -> None:
        if self.stream is not None:
            self.finished = True
            await self.stream.finish()
            return
        if self._kept is None:
            raise ModelError(ONE_RESPONSE)
        self.sent = await send_response(self._send, 200, [JSON], [self._kept])

    @property
    def streams_errors(self) -> bool:
        """On /generate_stream, once the request was read and checked: a failure from there on is the model's."""
        return self.streaming and self.decoded

    async def error(self, error: OIPError) -> None:
        """As Triton: an event holding the error, under the status it has when it is the first thing sent."""
        stream = self.stream
        if stream is None:
            stream = ResponseStream(self._send)
            await stream.start(error.status_code, [EVENT_STREAM[0], *raw_headers(error.headers)])
        await stream.send(error_event(error.message))
        await stream.finish()
