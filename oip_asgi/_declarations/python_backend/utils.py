"""``triton_python_backend_utils`` as a Triton Python model imports it (``import ... as pb_utils``).

This module *is* that import: the repository reader puts it in `sys.modules` under Triton's name
before it runs a model.py that defines ``TritonPythonModel`` (unless the process already has a
module of that name), so a model file serves unchanged. A user testing a model.py outside any server
can do the same: ``sys.modules["triton_python_backend_utils"] = oip_asgi.python_backend_utils()``.

The values (`Tensor`, `InferenceRequest`, `InferenceResponse`, `TritonError`, the type tables,
`Logger`) need no server. What does (BLS, ``load_model``, ``unload_model``, ``is_model_ready``,
`MetricFamily`) reaches the server serving the calling model through its `PythonHost`. What this
server cannot offer (GPU tensors, DLPack to a device, sequences) raises an error that names it.
"""

from __future__ import annotations

import json
import logging
import struct
import threading
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from . import errors as _errors
from . import host as _host
from .model_config import ModelConfig

__all__ = [
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_END",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_START",
    "TRITONSERVER_REQUEST_RELEASE_ALL",
    "TRITONSERVER_REQUEST_RELEASE_RESCHEDULE",
    "TRITONSERVER_RESPONSE_COMPLETE_FINAL",
    "TRITON_STRING_TO_NUMPY",
    "InferenceRequest",
    "InferenceResponse",
    "InferenceResponseSender",
    "Logger",
    "Metric",
    "MetricFamily",
    "ModelConfig",
    "Tensor",
    "TritonError",
    "TritonModelException",
    "deserialize_bytes_tensor",
    "get_input_config_by_name",
    "get_input_tensor_by_name",
    "get_output_config_by_name",
    "get_output_tensor_by_name",
    "is_model_ready",
    "load_model",
    "numpy_to_triton_type",
    "serialize_byte_tensor",
    "triton_string_to_numpy",
    "triton_to_numpy_type",
    "unload_model",
    "using_decoupled_model_transaction_policy",
]

TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2

# The config's type names and Triton's TRITONSERVER_DataType numbers, to numpy (BYTES: object arrays).
TRITON_STRING_TO_NUMPY: dict[str, Any] = {
    "TYPE_BOOL": bool,
    "TYPE_UINT8": np.uint8,
    "TYPE_UINT16": np.uint16,
    "TYPE_UINT32": np.uint32,
    "TYPE_UINT64": np.uint64,
    "TYPE_INT8": np.int8,
    "TYPE_INT16": np.int16,
    "TYPE_INT32": np.int32,
    "TYPE_INT64": np.int64,
    "TYPE_FP16": np.float16,
    "TYPE_FP32": np.float32,
    "TYPE_FP64": np.float64,
    "TYPE_STRING": np.object_,
}
_NUMPY_OF_NUMBER: dict[int, Any] = {
    1: np.bool_, 2: np.uint8, 3: np.uint16, 4: np.uint32, 5: np.uint64, 6: np.int8, 7: np.int16, 8: np.int32,
    9: np.int64, 10: np.float16, 11: np.float32, 12: np.float64, 13: np.object_,
}  # fmt: skip
_NUMBER_OF_NUMPY = {np.dtype(kind): number for number, kind in _NUMPY_OF_NUMBER.items()}
_NUMBER_OF_NUMPY[np.dtype(np.bytes_)] = 13
# The protocol's datatype names by Triton's number (a BLS tensor's datatype is read from its array).
_DATATYPE_OF_NUMBER = {1: "BOOL", 2: "UINT8", 3: "UINT16", 4: "UINT32", 5: "UINT64", 6: "INT8", 7: "INT16",
                       8: "INT32", 9: "INT64", 10: "FP16", 11: "FP32", 12: "FP64", 13: "BYTES"}  # fmt: skip

_logger = logging.getLogger("oip_asgi.python_backend")


def triton_to_numpy_type(data_type: int) -> Any:
    """The numpy type of Triton's TRITONSERVER_DataType number (None for one it has none for, as Triton)."""
    return _NUMPY_OF_NUMBER.get(data_type)


def numpy_to_triton_type(data_type: Any) -> int | None:
    try:
        return _NUMBER_OF_NUMPY.get(np.dtype(data_type))
    except TypeError:
        return None


def triton_string_to_numpy(triton_type_string: str) -> Any:
    return TRITON_STRING_TO_NUMPY[triton_type_string]


def serialize_byte_tensor(input_tensor: np.ndarray) -> np.ndarray | None:
    """BYTES elements as Triton lays them out: each a 4-byte little-endian length, then its bytes."""
    if input_tensor.size == 0:
        return None
    if input_tensor.dtype != np.object_ and input_tensor.dtype.type != np.bytes_:
        raise ValueError("cannot serialize bytes tensor: invalid datatype")
    flattened = bytearray()
    for item in input_tensor.flat:
        value = item if isinstance(item, bytes) else str(item).encode("utf-8")
        flattened += struct.pack("<I", len(value)) + value
    return np.frombuffer(bytes(flattened), dtype=np.uint8)


def deserialize_bytes_tensor(encoded_tensor: bytes) -> np.ndarray:
    """The object array of a serialized BYTES tensor (`serialize_byte_tensor`'s layout)."""
    items: list[bytes] = []
    offset = 0
    data = bytes(encoded_tensor)
    while offset < len(data):
        (length,) = struct.unpack_from("<I", data, offset)
        offset += 4
        items.append(data[offset : offset + length])
        offset += length
    return np.array(items, dtype=np.object_)


def get_input_config_by_name(model_config: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    for tensor in model_config.get("input", []):
        if tensor["name"] == name:
            found: dict[str, Any] = tensor
            return found
    return None


def get_output_config_by_name(model_config: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    for tensor in model_config.get("output", []):
        if tensor["name"] == name:
            found: dict[str, Any] = tensor
            return found
    return None


def using_decoupled_model_transaction_policy(model_config: Mapping[str, Any]) -> bool:
    return bool(model_config.get("model_transaction_policy", {}).get("decoupled", False))


class TritonError(Exception):
    """An error a model sets on a response (``InferenceResponse(error=...)``), with Triton's code."""

    UNKNOWN: ClassVar[int] = _errors.UNKNOWN
    INTERNAL: ClassVar[int] = _errors.INTERNAL
    NOT_FOUND: ClassVar[int] = _errors.NOT_FOUND
    INVALID_ARG: ClassVar[int] = _errors.INVALID_ARG
    UNAVAILABLE: ClassVar[int] = _errors.UNAVAILABLE
    UNSUPPORTED: ClassVar[int] = _errors.UNSUPPORTED
    ALREADY_EXISTS: ClassVar[int] = _errors.ALREADY_EXISTS
    CANCELLED: ClassVar[int] = _errors.CANCELLED

    def __init__(self, message: str, code: int = _errors.INTERNAL) -> None:
        if message is None:
            raise TypeError("TritonError needs a message")
        super().__init__(message)
        self._message = str(message)
        self._code = code

    def code(self) -> int:
        return self._code

    def message(self) -> str:
        return self._message

    def __repr__(self) -> str:
        return (
            f"TritonError({self._message!r}, {_errors.CODE_NAMES[self._code] if 0 <= self._code < 8 else self._code})"
        )


class TritonModelException(Exception):
    """What a model raises to fail its request(s) (as raising any exception does), Triton's name for it."""


def _text(value: str | bytes) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _unsupported(what: str) -> NotImplementedError:
    return NotImplementedError(f"{what} is not available in oip-asgi: it serves on the CPU, with numpy arrays")


class Tensor:
    """A named tensor: a numpy array on the CPU (BYTES as an object array of bytes)."""

    __slots__ = ("_array", "_name")

    def __init__(self, name: str, data: Any, dtype: Any = None) -> None:
        if name.__class__ is not str:  # (the exact-type tests first: a model makes tensors on every request)
            name = _text(name)
            if not isinstance(name, str):
                raise TypeError(f"a Tensor's name is a string, got {type(name).__name__}")
        if data.__class__ is not np.ndarray and not isinstance(data, np.ndarray):
            if hasattr(data, "__dlpack__"):
                raise TypeError(
                    f"Tensor {name!r} got a {type(data).__name__}; use Tensor.from_dlpack for DLPack objects"
                )
            raise TypeError(f"Tensor {name!r} takes a numpy array, got {type(data).__name__}")
        if dtype is not None:
            data = data.astype(dtype, copy=False)
        if data.dtype.kind in "SU":  # bytes_ or str_: BYTES, as Triton's object arrays of bytes
            data = data.astype(np.object_)
        self._name = name
        self._array: np.ndarray = data

    @classmethod
    def of(cls, name: str, array: np.ndarray) -> Tensor:
        """A request's input as the core decoded it: a name and a numpy array, nothing to check."""
        tensor = cls.__new__(cls)
        tensor._name = name
        tensor._array = array.astype(np.object_) if array.dtype.kind in "SU" else array
        return tensor

    def name(self) -> str:
        return self._name

    def as_numpy(self) -> np.ndarray:
        return self._array

    def shape(self) -> list[int]:
        return list(self._array.shape)

    def triton_dtype(self) -> int | None:
        return numpy_to_triton_type(self._array.dtype)

    def is_cpu(self) -> bool:
        return True

    def to_dlpack(self) -> Any:
        return self._array.__dlpack__()

    def __dlpack__(self, stream: Any = None) -> Any:
        return self._array.__dlpack__()

    def __dlpack_device__(self) -> Any:
        return self._array.__dlpack_device__()

    @staticmethod
    def from_dlpack(name: str, capsule: Any) -> Tensor:
        """A CPU tensor from a DLPack object (a GPU one is refused: this server has no GPU tensors)."""
        device = getattr(capsule, "__dlpack_device__", None)
        if device is not None and device()[0] != 1:  # kDLCPU
            raise _unsupported("a GPU tensor (Tensor.from_dlpack of a device array)")
        try:
            return Tensor(name, np.from_dlpack(capsule))
        except (TypeError, BufferError, RuntimeError) as exc:
            raise _unsupported(f"Tensor.from_dlpack of this object ({exc})") from exc

    def __repr__(self) -> str:
        return f"Tensor({self._name!r}, shape={list(self._array.shape)}, dtype={self._array.dtype})"


def datatype_of(tensor: Tensor) -> str:
    """The protocol datatype of a tensor's array."""
    array = tensor.as_numpy()
    number = numpy_to_triton_type(array.dtype)
    if number is None:
        raise TypeError(f"tensor {tensor.name()!r} has dtype {array.dtype}, which Triton has no type for")
    return _DATATYPE_OF_NUMBER[number]


class InferenceResponse:
    """One response: its output tensors, or an error; and its parameters (names to str, int, float or bool)."""

    def __init__(
        self,
        output_tensors: Sequence[Tensor] | None = None,
        error: TritonError | None = None,
        parameters: Mapping[str, Any] | str | None = None,
    ) -> None:
        tensors = list(output_tensors) if output_tensors else []
        for tensor in tensors:
            if tensor.__class__ is not Tensor and not isinstance(tensor, Tensor):
                raise TypeError(f"output_tensors holds a {type(tensor).__name__}; use pb_utils.Tensor")
        if error is not None and not isinstance(error, TritonError):
            raise TypeError(f"error must be a pb_utils.TritonError, got {type(error).__name__}")
        if isinstance(parameters, str):
            parameters = json.loads(parameters) if parameters else {}
        self._tensors = tensors
        self._error = error
        self._parameters = dict(parameters) if parameters else {}

    def output_tensors(self) -> list[Tensor]:
        return self._tensors

    def has_error(self) -> bool:
        return self._error is not None

    def error(self) -> TritonError | None:
        return self._error

    def parameters(self) -> str:
        return json.dumps(self._parameters)

    def parameter_values(self) -> dict[str, Any]:
        return self._parameters


def get_input_tensor_by_name(inference_request: InferenceRequest, name: str) -> Tensor | None:
    for tensor in inference_request._inputs:
        if tensor._name == name:
            return tensor
    return None


def get_output_tensor_by_name(inference_response: InferenceResponse, name: str) -> Tensor | None:
    for tensor in inference_response.output_tensors():
        if tensor.name() == name:
            return tensor
    return None


class InferenceResponseSender:
    """A decoupled model's way to answer: `send` each response, the last with (or as) the final flag.

    Sends from any thread, during `execute` or after it returned; `sink` receives them (the adapter's).
    """

    def __init__(self, sink: Any) -> None:
        self._sink = sink
        self._closed = False
        self._lock = threading.Lock()

    def send(self, response: InferenceResponse | None = None, flags: int = 0) -> None:
        final = bool(flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        with self._lock:
            if self._closed:
                raise TritonModelException("this request's response sender has already sent its final response")
            if response is None and not final:
                raise TritonModelException("send() without a response must set TRITONSERVER_RESPONSE_COMPLETE_FINAL")
            if response is not None and not isinstance(response, InferenceResponse):
                raise TypeError(f"send() takes a pb_utils.InferenceResponse, got {type(response).__name__}")
            self._closed = final
        self._sink(response, final)

    def is_cancelled(self) -> bool:
        cancelled: bool = self._sink.cancelled
        return cancelled


class InferenceRequest:
    """A request: the model's own (from `execute`'s list) or one it makes for BLS.

    A BLS request is built by the model (``model_name``, ``inputs``, ``requested_output_names``) and
    run by `exec` / `async_exec` on the models the same server serves, in the same process.
    """

    def __init__(
        self,
        *,
        model_name: str,
        inputs: Sequence[Tensor],
        requested_output_names: Sequence[str],
        request_id: str = "",
        correlation_id: int | str = 0,
        model_version: int = -1,
        flags: int = 0,
        timeout: int = 0,
        preferred_memory: Any = None,
        trace: Any = None,
        parameters: Mapping[str, Any] | str | None = None,
    ) -> None:
        if flags:
            raise _unsupported("sequence flags on a request (sequence batching)")
        if preferred_memory is not None and getattr(preferred_memory, "kind", "CPU") != "CPU":
            raise _unsupported("a GPU preferred memory")
        if isinstance(parameters, str):
            parameters = json.loads(parameters) if parameters else {}
        # Triton's binding takes bytes for its strings too (a name read from a BYTES tensor, say).
        self._model_name = _text(model_name)
        self._model_version = model_version
        self._inputs = list(inputs)
        self._requested = [_text(name) for name in requested_output_names]
        self._request_id = request_id
        self._correlation_id = correlation_id
        self._timeout = timeout
        self._parameters: dict[str, Any] = dict(parameters or {})
        self._sender: InferenceResponseSender | None = None
        self._outlet: Any = None  # a served request's: its sender is made from it when the model asks for one
        self.asked = True  # a served request whose client named no outputs gets every output the model made

    @classmethod
    def served(
        cls,
        model_name: str,
        model_version: int,
        inputs: list[Tensor],
        requested: list[str],
        request_id: str,
        parameters: dict[str, Any],
        outlet: Any,
        asked: bool,
    ) -> InferenceRequest:
        """A request a client sent to the model, as `execute` gets it: `model_version` as `model_version()`
        answers (-1 for a version that is not a number), `outlet` its sender's sink, `asked` whether the
        client named its outputs. Made without __init__'s checks: the core made and checked its parts."""
        request = cls.__new__(cls)
        request._model_name = model_name
        request._model_version = model_version
        request._inputs = inputs
        request._requested = requested
        request._request_id = request_id
        request._correlation_id = 0
        request._timeout = 0
        request._parameters = parameters
        request._sender = None
        request._outlet = outlet
        request.asked = asked
        return request

    def inputs(self) -> list[Tensor]:
        return self._inputs

    def requested_output_names(self) -> list[str]:
        return self._requested

    def request_id(self) -> str:
        return self._request_id

    def correlation_id(self) -> int | str:
        return self._correlation_id

    def model_name(self) -> str:
        return self._model_name

    def model_version(self) -> int:
        return self._model_version

    def flags(self) -> int:
        return 0

    def timeout(self) -> int:
        return self._timeout

    def parameters(self) -> str:
        return json.dumps(self._parameters)

    def trace(self) -> None:
        return None

    def is_cancelled(self) -> bool:
        return self._outlet is not None and bool(self._outlet.cancelled)

    def get_response_sender(self) -> InferenceResponseSender:
        if self._sender is None:
            if self._outlet is None:
                raise TritonModelException("only a request the model received has a response sender, not a BLS request")
            self._sender = InferenceResponseSender(self._outlet)
        return self._sender

    def set_release_flags(self, flags: int) -> None:
        if flags & TRITONSERVER_REQUEST_RELEASE_RESCHEDULE:
            raise _unsupported("rescheduling a request (TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)")

    def _target(self) -> tuple[str, str]:
        return self._model_name, "" if self._model_version < 0 else str(self._model_version)

    def exec(self, decoupled: bool = False) -> Any:
        """Run the request on the served model and wait: its response, or with `decoupled` an iterator of
        them (the last one empty, flagged final as Triton's). An error is in the response, not raised."""
        host = _host.current("InferenceRequest.exec")
        if decoupled:
            return _Responses(host.stream(*self._target(), _bls_request(self)))
        return _bls_response(lambda: host.infer(*self._target(), _bls_request(self)))

    async def async_exec(self, decoupled: bool = False) -> Any:
        """As `exec`, awaited (from an ``async def execute``). With `decoupled`, the responses once the
        stream has ended (iterating them as they come would block the event loop this runs on), as an
        iterator, which ``async for`` takes too."""
        host = _host.current("InferenceRequest.async_exec")
        if decoupled:
            return _Collected(
                [response async for response in _AsyncResponses(host.stream_async(*self._target(), _bls_request(self)))]
            )
        try:
            result = await host.infer_async(*self._target(), _bls_request(self))
        except Exception as exc:
            return _failed(exc)
        return _response_of(result)


class BLSRequest:
    """What the host runs for a BLS request: its inputs by name, id, parameters and wanted outputs."""

    __slots__ = ("id", "inputs", "outputs", "parameters")

    def __init__(self, request: InferenceRequest) -> None:
        self.inputs = {tensor.name(): (datatype_of(tensor), tensor.as_numpy()) for tensor in request.inputs()}
        self.id = request.request_id()
        self.parameters = dict(request._parameters)
        self.outputs = list(request.requested_output_names())


def _bls_request(request: InferenceRequest) -> BLSRequest:
    return BLSRequest(request)


def _response_of(result: Any) -> InferenceResponse:
    outputs, parameters = result
    return InferenceResponse([Tensor(name, array) for name, array in outputs], parameters=parameters or None)


def _failed(exc: BaseException) -> InferenceResponse:
    status = getattr(exc, "status_code", 500)
    message = getattr(exc, "message", None) or str(exc)
    return InferenceResponse(error=TritonError(message, _errors.code_of(status)))


def _bls_response(run: Any) -> InferenceResponse:
    try:
        result = run()
    except Exception as exc:
        return _failed(exc)
    return _response_of(result)


_FINAL_EMPTY_NOTE = "the last response of a decoupled BLS call is empty and flagged final, as Triton's"


class _Responses:
    """A decoupled BLS call's responses as they come; an error ends it with a response that carries it."""

    def __init__(self, results: Iterator[Any]) -> None:
        self._results = results
        self._done = False

    def __iter__(self) -> _Responses:
        return self

    def __next__(self) -> InferenceResponse:
        if self._done:
            raise StopIteration
        try:
            return _response_of(next(self._results))
        except StopIteration:
            self._done = True
            return _final()
        except Exception as exc:
            self._done = True
            return _failed(exc)

    def cancel(self) -> None:
        close = getattr(self._results, "close", None)
        if close is not None:
            close()
        self._done = True


class _AsyncResponses:
    def __init__(self, results: AsyncIterator[Any]) -> None:
        self._results = results
        self._done = False

    def __aiter__(self) -> _AsyncResponses:
        return self

    async def __anext__(self) -> InferenceResponse:
        if self._done:
            raise StopAsyncIteration
        try:
            return _response_of(await anext(self._results))
        except StopAsyncIteration:
            self._done = True
            return _final()
        except Exception as exc:
            self._done = True
            return _failed(exc)


class _Collected:
    """A decoupled BLS call's responses, all received: iterated with ``for`` or ``async for``."""

    def __init__(self, responses: list[InferenceResponse]) -> None:
        self._responses = iter(responses)

    def __iter__(self) -> Iterator[InferenceResponse]:
        return self._responses

    def __aiter__(self) -> _Collected:
        return self

    async def __anext__(self) -> InferenceResponse:
        try:
            return next(self._responses)
        except StopIteration:
            raise StopAsyncIteration from None

    def cancel(self) -> None:
        pass


def _final() -> InferenceResponse:
    """The empty response that ends a decoupled BLS stream (Triton's has the final flag and no outputs)."""
    return InferenceResponse()


class Logger:
    """Triton's model logger: lines go to the ``oip_asgi.python_backend`` logger at each level."""

    INFO: ClassVar[int] = 0
    WARNING: ClassVar[int] = 1
    ERROR: ClassVar[int] = 2
    VERBOSE: ClassVar[int] = 3
    _LEVELS: ClassVar[dict[int, int]] = {0: logging.INFO, 1: logging.WARNING, 2: logging.ERROR, 3: logging.DEBUG}

    @staticmethod
    def log(message: str, level: int = 0) -> None:
        _logger.log(Logger._LEVELS.get(level, logging.INFO), "%s", message)

    @staticmethod
    def log_info(message: str) -> None:
        _logger.info("%s", message)

    @staticmethod
    def log_warn(message: str) -> None:
        _logger.warning("%s", message)

    @staticmethod
    def log_error(message: str) -> None:
        _logger.error("%s", message)

    @staticmethod
    def log_verbose(message: str) -> None:
        _logger.debug("%s", message)


class Metric:
    """One labelled series of a `MetricFamily`, on the server's /metrics as the model named it."""

    def __init__(self, series: Any, kind: str) -> None:
        self._series = series
        self._kind = kind

    def increment(self, value: float) -> None:
        if self._kind == MetricFamily.HISTOGRAM:
            raise TritonModelException("a histogram metric takes observe(), not increment()")
        if self._kind == MetricFamily.COUNTER and value < 0:
            raise TritonModelException(f"a counter cannot be incremented by a negative value ({value})")
        self._series.increment(value)

    def set(self, value: float) -> None:
        if self._kind != MetricFamily.GAUGE:
            raise TritonModelException(f"only a gauge can be set, this metric is a {self._kind.lower()}")
        self._series.set(value)

    def observe(self, value: float) -> None:
        if self._kind != MetricFamily.HISTOGRAM:
            raise TritonModelException(f"only a histogram observes values, this metric is a {self._kind.lower()}")
        self._series.observe(value)

    def value(self) -> float:
        if self._kind == MetricFamily.HISTOGRAM:
            raise TritonModelException("a histogram metric has no single value")
        value: float = self._series.value()
        return value


class MetricFamily:
    """A custom metric family (``MetricFamily(name, description, kind)``) on the serving server's /metrics."""

    COUNTER: ClassVar[str] = "COUNTER"
    GAUGE: ClassVar[str] = "GAUGE"
    HISTOGRAM: ClassVar[str] = "HISTOGRAM"

    def __init__(self, name: str, description: str, kind: str) -> None:
        if kind not in (self.COUNTER, self.GAUGE, self.HISTOGRAM):
            raise TritonModelException(f"unknown metric kind {kind!r}: use MetricFamily.COUNTER, GAUGE or HISTOGRAM")
        self._kind = kind
        self._family = _host.current("pb_utils.MetricFamily").metric_family(name, description, kind)

    def Metric(self, labels: Mapping[str, str] | None = None, buckets: Sequence[float] | None = None) -> Metric:
        if self._kind == self.HISTOGRAM and not buckets:
            raise TritonModelException("a histogram metric needs its buckets")
        if self._kind != self.HISTOGRAM and buckets:
            raise TritonModelException("only a histogram metric takes buckets")
        return Metric(self._family.series(dict(labels or {}), list(buckets or [])), self._kind)


def load_model(model_name: str, config: str = "", files: Mapping[str, bytes] | None = None) -> None:
    """Load (or reload) a model of this server's repository, as its repository extension does (explicit mode)."""
    host = _host.current("pb_utils.load_model")
    try:
        host.load_model(model_name, config, files)
    except Exception as exc:  # as Triton: the model sees a TritonModelException with the reason
        raise TritonModelException(getattr(exc, "message", None) or str(exc)) from exc


def unload_model(model_name: str, unload_dependents: bool = False) -> None:
    host = _host.current("pb_utils.unload_model")
    try:
        host.unload_model(model_name)
    except Exception as exc:
        raise TritonModelException(getattr(exc, "message", None) or str(exc)) from exc


def is_model_ready(model_name: str, model_version: str = "") -> bool:
    return _host.current("pb_utils.is_model_ready").is_model_ready(model_name, model_version)
