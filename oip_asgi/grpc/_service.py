"""``inference.GRPCInferenceService`` on the server core: every RPC of the protocol, and Triton's ModelStreamInfer.

Handlers take and return wire bytes: parsing is theirs, so that a message that does not parse is an
INVALID_ARGUMENT like any other bad request (grpcio would answer INTERNAL), and an inference response
is serialized with its raw contents appended straight from the output arrays.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, NamedTuple, NoReturn, TypeVar

import grpc
from google.protobuf.message import DecodeError, Message

from .._core.extensions import REGISTRY
from .._core.load_request import load_arguments, unload_dependents
from .._core.request import DecodedRequest
from .._core.reserved import grpc_parameters
from .._core.responding import Reply
from .._core.server import HasCore, ServerCore, core_of
from .._core.serving import ServedModel
from .._core.shared_memory import SharedMemory
from .._core.unsupported import unsupported
from .._declarations.errors import GRPC_CODES, BadRequest, NotFound, OIPError, quoted
from .._declarations.restricted import Restriction, RestrictionsArgument, restrictions
from .._protobuf import inference_pb2 as pb
from ._codec import SPLIT_ABOVE, decode_request, encode_response, from_string, not_valid, parse_request, serialize
from ._messages import ModelConfigs, model_metadata_response, server_metadata_response, statistics_response
from ._response import head, response_bytes
from ._settings import log_settings_rpc, trace_setting_rpc
from ._shared_memory import shared_memory_rpcs
from ._stream import DEFAULT_FIRST_REQUEST_TIMEOUT, FINAL, Outlet, answer_stream, first_within, stream_end

__all__ = ["DEFAULT_FIRST_REQUEST_TIMEOUT", "SERVICE", "InferenceService", "stream_end"]

_LAST = {FINAL: True}  # a decoupled model's response sent with its final flag, marked so as Triton marks it

SERVICE = "inference.GRPCInferenceService"
_STREAM_RESPONSE_FIELD = 2  # ModelStreamInferResponse.infer_response
# Triton's parameter on streamed requests: the wish for an empty last response from a decoupled model
# (which otherwise marks its end with nothing). Its responses' FINAL says whether one is its request's last.
EMPTY_FINAL = "triton_enable_empty_final_response"

# Triton's RPCs of the extensions this server does not offer: each one's group, and its extension's name.
UNOFFERED = {
    name: (extension.group, extension.name)
    for extension in REGISTRY
    if not extension.offered
    for name in extension.rpcs
    if name not in extension.answering
}
# Each RPC's group, as Triton's --grpc-restricted-protocol names them: the protocol's own, then its extensions'.
GROUPS = {
    **dict.fromkeys(("ServerLive", "ServerReady", "ModelReady"), "health"),
    **dict.fromkeys(("ServerMetadata", "ModelMetadata"), "metadata"),
    **dict.fromkeys(("ModelInfer", "ModelStreamInfer"), "inference"),
    **{name: extension.group for extension in REGISTRY for name in extension.rpcs},
}

# An HTTP status, as the gRPC status that means the same (and that Triton sends for it).
STATUS_CODES = {status: grpc.StatusCode[name] for status, name in GRPC_CODES.items()}


def status_code(error: OIPError) -> grpc.StatusCode:
    return grpc.StatusCode[error.grpc_code]


async def abort(context: Context, error: OIPError) -> NoReturn:
    """End the call with `error`'s code and message: how every gRPC handler here fails."""
    await context.abort(status_code(error), error.message)
    raise AssertionError("abort returned")  # pragma: no cover  # abort always raises


_M = TypeVar("_M", bound=Message)
Context = grpc.aio.ServicerContext[Any, Any]


def _parse(message_type: type[_M], body: bytes) -> _M:
    try:
        return message_type.FromString(body)
    except DecodeError as exc:
        raise BadRequest(f"the request is not a valid {message_type.DESCRIPTOR.name}: {exc}") from None


async def _check(restriction: Restriction, context: Context) -> None:
    """Abort the call unless its metadata carries the restriction's key with its value."""
    presented = None
    for key, value in context.invocation_metadata() or ():
        if key == restriction.header:
            presented = value
            break
    if not restriction.allows(presented):
        await abort(context, restriction.refusal())


def _refusing(group: str, kind: str) -> Callable[[bytes], Awaitable[bytes]]:
    async def refuse(body: bytes) -> bytes:
        raise unsupported(group, kind)  # a new error each call: a raised one keeps its traceback

    return refuse


class _Ends(NamedTuple):
    """How a streamed request's responses end, as Triton marks them."""

    flag: dict[str, bool]  # the parameter every response carries: final for a model that answers once
    version: str  # the version that answers, for the empty final response
    empty_final: bool  # the request asked for an empty final response at its end


class _GRPCExchange:
    """An inference request in a ModelInferRequest: parsed already, its responses serialized for grpcio.

    On ModelInfer its one response is what the handler returns; on ModelStreamInfer its responses go
    to its `outlet`, which the call sends in order.
    """

    __slots__ = (
        "_ends", "_head", "_last", "_memory", "_outlet", "_raw", "_request", "_stream_field", "_typed", "received",
        "responses",
        "sent",
    )  # fmt: skip

    def __init__(
        self,
        request: pb.ModelInferRequest,
        raw: Sequence[bytes | memoryview],
        received: int,
        memory: SharedMemory,
        outlet: Outlet | None = None,
    ) -> None:
        self._request = request
        self._memory = memory
        self._raw = raw
        self._outlet = outlet
        self._stream_field = None if outlet is None else _STREAM_RESPONSE_FIELD
        self._typed = False
        self._ends: _Ends | None = None  # on a stream, once decoded: how the request's responses end
        self._last = False  # its model marked a response its last
        self._head: tuple[object, bytes] | None = None  # a response's fields before its outputs, and their parameters
        self.received = received
        self.sent = self.responses = 0

    @property
    def endpoint(self) -> str:
        return "ModelInfer RPC" if self._outlet is None else "ModelStreamInfer RPC"

    @property
    def decoded(self) -> bool:
        """On a stream: the request was read and checked (a failure from here on is the model's)."""
        return self._ends is not None

    async def decode(self, model: ServedModel) -> DecodedRequest:
        decoded, self._typed = decode_request(self._request, model, self._raw, self._memory)
        asked = False
        if decoded.parameters:
            asked = decoded.parameters.pop(EMPTY_FINAL, False)  # the stream's to act on, not the model's
            if not isinstance(asked, bool):  # Triton's words
                raise BadRequest(f"invalid value type for '{EMPTY_FINAL}' parameter, expected bool_param.")
            decoded.parameters, decoded.controls = grpc_parameters(decoded.parameters)  # Triton's frontend's, taken
        if self._outlet is not None:
            # As Triton: a model that answers once marks its one response final; a decoupled model's
            # responses are not, its end is the empty final response (when asked for) or nothing. Its
            # responses go out as they come, the others' in their requests' order.
            self._ends = _Ends({FINAL: not model.decoupled}, model.version, asked)
            if model.decoupled:
                self._outlet.unordered()
        return decoded

    def encode(self, reply: Reply) -> bytes:
        parameters = reply.parameters
        if self._ends is not None:
            final = self._ends.flag
            if reply.last:  # sent with its model's final flag: marked final, and no empty final response after it
                final, self._last = _LAST, True
            parameters = {**parameters, **final} if parameters else final
        if not self._typed:  # raw outputs written directly when they are plain (see _response.py)
            if not parameters:
                model = reply.model
                fields = head(model.name, model.version, reply.request.id)
            else:
                cached = self._head  # its parameters' head, serialized once while they stay the same
                if cached is None or cached[0] is not parameters:
                    empty, _ = encode_response(Reply(reply.model, reply.request, [], None), parameters, False)
                    cached = self._head = (parameters, empty.SerializeToString())
                fields = cached[1]
            written = response_bytes(fields, reply.outputs, self._stream_field)
            if written is not None:
                return written
        return serialize(*encode_response(reply, parameters, self._typed), self._stream_field)

    async def send(self, response: bytes) -> None:
        self.sent, self.responses = len(response), 1
        if self._outlet is not None:
            self._outlet.put(response)
            self._outlet.end()
        # On ModelInfer grpcio sends what the handler returns.

    async def start(self) -> None:
        if self._outlet is None:
            raise BadRequest(
                f"model {quoted(self._request.model_name)} answers with several responses, "
                "which ModelInfer cannot carry; use ModelStreamInfer"
            )

    def send_next(self, response: bytes) -> Awaitable[None]:
        """What the outlet gives to await (the message's future), awaited by the core: no coroutine between them."""
        assert self._outlet is not None, "send_next before start"
        return self._outlet.put_taken(response, self)

    async def finish(self) -> None:
        assert self._outlet is not None, "finish before start"
        if self._ends is not None and self._ends.empty_final and not self._last:
            end = stream_end(self._request, version=self._ends.version)
            await self._outlet.put_taken(end.SerializeToString())
        self._outlet.end()


class InferenceService:
    """The RPCs of ``inference.GRPCInferenceService`` on `app`'s models, as a grpcio generic handler.

    `restricted_protocols` are Triton's ``--grpc-restricted-protocol`` rules (see `restrictions`).
    """

    def __init__(
        self,
        app: HasCore | ServerCore,
        *,
        restricted_protocols: RestrictionsArgument = (),
        stream_first_request_timeout: float | None = DEFAULT_FIRST_REQUEST_TIMEOUT,
    ) -> None:
        self.core = core_of(app)
        self._memory = self.core.shared_memory
        self.restrictions = restrictions(restricted_protocols, grpc=True)
        self.stream_first_request_timeout = stream_first_request_timeout
        self._configs = ModelConfigs()

    def handler(self) -> grpc.GenericRpcHandler:
        def parsed(
            message_type: type[_M], method: Callable[[_M], Awaitable[Message | bytes]]
        ) -> Callable[[bytes], Any]:
            return lambda body: method(_parse(message_type, body))

        unary: dict[str, Callable[[bytes], Awaitable[Message | bytes]]] = {
            "ServerLive": parsed(pb.ServerLiveRequest, self.server_live),
            "ServerReady": parsed(pb.ServerReadyRequest, self.server_ready),
            "ModelReady": parsed(pb.ModelReadyRequest, self.model_ready),
            "ServerMetadata": parsed(pb.ServerMetadataRequest, self.server_metadata),
            "ModelMetadata": parsed(pb.ModelMetadataRequest, self.model_metadata),
            "ModelInfer": self.model_infer,  # parses its own request: see parse_request
            "ModelStatistics": parsed(pb.ModelStatisticsRequest, self.model_statistics),
            "ModelConfig": parsed(pb.ModelConfigRequest, self.model_config),
            "RepositoryIndex": parsed(pb.RepositoryIndexRequest, self.repository_index),
            "RepositoryModelLoad": parsed(pb.RepositoryModelLoadRequest, self.repository_model_load),
            "RepositoryModelUnload": parsed(pb.RepositoryModelUnloadRequest, self.repository_model_unload),
            **shared_memory_rpcs(self._memory, parsed),
            "TraceSetting": parsed(pb.TraceSettingRequest, self.trace_setting),
            "LogSettings": parsed(pb.LogSettingsRequest, self.log_settings),
            # Triton's RPCs of extensions this server does not offer: UNIMPLEMENTED saying so, and what instead.
            **{name: _refusing(group, extension) for name, (group, extension) in UNOFFERED.items()},
        }
        handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
            name: grpc.unary_unary_rpc_method_handler(self._unary(name, method)) for name, method in unary.items()
        }
        handlers["ModelStreamInfer"] = grpc.stream_stream_rpc_method_handler(
            functools.partial(answer_stream, answer=self._stream_one, opening=self._open_stream)
        )
        return grpc.method_handlers_generic_handler(SERVICE, handlers)

    def _unary(
        self, name: str, method: Callable[[bytes], Awaitable[Message | bytes]]
    ) -> Callable[[bytes, Context], Awaitable[bytes]]:
        restriction = self.restrictions.get(GROUPS[name])
        if name == "ModelInfer":
            return self._model_infer(restriction)

        async def handle(body: bytes, context: Context) -> bytes:
            if restriction is not None:
                await _check(restriction, context)
            try:
                response = await method(body)
                return response if isinstance(response, bytes) else response.SerializeToString()
            except Exception as exc:
                error = self.core.client_error(exc, f"gRPC {name}")
            await abort(context, error)

        return handle

    async def server_live(self, request: pb.ServerLiveRequest) -> pb.ServerLiveResponse:
        return pb.ServerLiveResponse(live=True)

    async def server_ready(self, request: pb.ServerReadyRequest) -> pb.ServerReadyResponse:
        return pb.ServerReadyResponse(ready=self.core.server_ready())

    async def model_ready(self, request: pb.ModelReadyRequest) -> pb.ModelReadyResponse:
        # Triton answers an unknown model with ready=false, not NOT_FOUND; tritonclient's is_model_ready relies on it.
        try:
            return pb.ModelReadyResponse(ready=self.core.model_ready(request.name, request.version or None))
        except (NotFound, BadRequest):
            return pb.ModelReadyResponse(ready=False)

    async def server_metadata(self, request: pb.ServerMetadataRequest) -> pb.ServerMetadataResponse:
        return server_metadata_response(self.core.server_metadata)

    async def model_metadata(self, request: pb.ModelMetadataRequest) -> pb.ModelMetadataResponse:
        model = await self.core.model(request.name, request.version or None)
        return model_metadata_response(self.core.model_metadata(model))

    async def model_infer(self, body: bytes) -> bytes:
        request, raw = parse_request(body)
        return await self.core.infer(
            request.model_name, request.model_version or None, _GRPCExchange(request, raw, len(body), self._memory)
        )

    def _model_infer(self, restriction: Restriction | None) -> Callable[[bytes, Context], Awaitable[bytes]]:
        """ModelInfer's handler: `_unary`'s with `model_infer` inline, one call from grpcio to the core."""
        core, memory = self.core, self._memory

        async def handle(body: bytes, context: Context) -> bytes:
            if restriction is not None:
                await _check(restriction, context)
            try:
                raw: Sequence[bytes | memoryview]
                if len(body) < SPLIT_ABOVE:  # `parse_request`'s for a small message, without its call
                    try:
                        request, raw = from_string(body), ()
                    except DecodeError as exc:
                        raise not_valid(exc) from None
                else:
                    request, raw = parse_request(body)
                exchange = _GRPCExchange(request, raw, len(body), memory)
                return await core.infer(request.model_name, request.model_version or None, exchange)
            except Exception as exc:
                error = core.client_error(exc, "gRPC ModelInfer")
            await abort(context, error)

        return handle

    async def model_statistics(self, request: pb.ModelStatisticsRequest) -> pb.ModelStatisticsResponse:
        """Triton's statistics extension: the counts REST serves, field for field."""
        return statistics_response(self.core.statistics(request.name or None, request.version or None))

    async def model_config(self, request: pb.ModelConfigRequest) -> bytes:
        """Triton's model configuration extension: the configuration REST serves, field for field."""
        model = await self.core.model(request.name, request.version or None)
        return self._configs.response(model, self.core.model_config)

    async def repository_index(self, request: pb.RepositoryIndexRequest) -> pb.RepositoryIndexResponse:
        """Triton's repository extension: the models of the repository, as REST lists them."""
        rows = self.core.repository_index(ready=request.ready)
        return pb.RepositoryIndexResponse(models=[pb.RepositoryIndexResponse.ModelIndex(**row) for row in rows])

    async def repository_model_load(self, request: pb.RepositoryModelLoadRequest) -> pb.RepositoryModelLoadResponse:
        parameters: dict[str, Any] = {}
        for key, parameter in request.parameters.items():
            choice = parameter.WhichOneof("parameter_choice")
            if choice is None:
                raise BadRequest(f"failed to load {quoted(request.model_name)}: parameter {quoted(key)} has no value")
            parameters[key] = getattr(parameter, choice)
        config, files = load_arguments(request.model_name, parameters)
        await self.core.load_model(request.model_name, config=config, files=files)
        return pb.RepositoryModelLoadResponse()

    async def repository_model_unload(
        self, request: pb.RepositoryModelUnloadRequest
    ) -> pb.RepositoryModelUnloadResponse:
        parameters = {key: getattr(value, value.WhichOneof("parameter_choice") or "bool_param")
                      for key, value in request.parameters.items()}  # fmt: skip
        await self.core.unload_model(request.model_name, unload_dependents=unload_dependents(parameters))
        return pb.RepositoryModelUnloadResponse()

    async def trace_setting(self, request: pb.TraceSettingRequest) -> pb.TraceSettingResponse:
        """Triton's trace extension: the settings REST's /v2[/models/{name}]/trace/setting serves."""
        return await trace_setting_rpc(self.core, request)

    async def log_settings(self, request: pb.LogSettingsRequest) -> pb.LogSettingsResponse:
        """Triton's logging extension: the settings REST's /v2/logging serves."""
        return log_settings_rpc(request)

    def model_stream_infer(self, requests: AsyncIterator[bytes], context: Context) -> AsyncIterator[bytes]:
        """Triton's streaming extension: each request's responses, a failed one in its error_message (_stream.py).

        grpcio's handler is `answer_stream` itself (a partial: grpcio sees the async generator function it
        wraps), so that each response passes through one generator, not two."""
        return answer_stream(requests, context, self._stream_one, self._open_stream)

    async def _open_stream(self, requests: AsyncIterator[bytes], context: Context) -> AsyncIterator[bytes]:
        restriction = self.restrictions.get("inference")
        if restriction is not None:  # ended before a request is read, as Triton does
            await _check(restriction, context)
        if self.stream_first_request_timeout is not None:
            requests = first_within(requests, self.stream_first_request_timeout, context)
        return requests

    async def _stream_one(self, body: bytes, outlet: Outlet) -> None:
        request = None
        exchange = None
        try:
            try:
                request, raw = parse_request(body)
                exchange = _GRPCExchange(request, raw, len(body), self._memory, outlet)
                core = self.core
                await core.infer(request.model_name, request.model_version or None, exchange, core.respond.streaming)
                return
            except Exception as exc:
                error = self.core.client_error(exc, "gRPC ModelStreamInfer")
            if outlet.error_mode and exchange is not None and exchange.decoded:
                outlet.end_call(error)  # Triton's error mode: the model's failure ends the call with its status
                return
            if outlet.ended:  # its responses have ended: the server's log is the only place left for it
                return
            # Its last response, marked final as Triton marks a failed one; with the request's id, when it parsed.
            outlet.put(stream_end(request or pb.ModelInferRequest(), error.message).SerializeToString())
        finally:
            outlet.end()  # whatever happened: the call goes on to the next request
