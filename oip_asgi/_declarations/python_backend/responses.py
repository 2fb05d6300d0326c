"""``pb_utils.InferenceResponse`` and a decoupled model's ``InferenceResponseSender``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from .errors import TritonError, TritonModelException
from .tensors import Tensor

TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1


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
        self._parameters: dict[str, Any] = dict(parameters) if parameters else {}

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


def get_output_tensor_by_name(inference_response: InferenceResponse, name: str) -> Tensor | None:
    for tensor in inference_response.output_tensors():
        if tensor.name() == name:
            return tensor
    return None


class Outlet(Protocol):
    """Where a served request's responses go (`outlets.py`): each response sent, and whether it was final."""

    @property
    def cancelled(self) -> bool:
        """The client left, or the stream ended: ``is_cancelled()`` says so."""

    def take(self) -> None:
        """The model asked for the request's sender: it may answer through it."""

    def __call__(self, response: InferenceResponse | None, final: bool) -> None:
        """Take `response` (None: only the final flag), or raise what Triton raises to the model."""


class InferenceResponseSender:
    """A request's way to answer: `send` each response, the last with (or as) the final flag.

    Sends from any thread, during `execute` or after it returned; `sink` receives them (`outlets.py`),
    and refuses what Triton refuses (a response after the final flag; a second response, or the final
    flag before any response, where the model is not decoupled).
    """

    def __init__(self, sink: Outlet) -> None:
        self._sink = sink

    def send(self, response: InferenceResponse | None = None, flags: int = 0) -> None:
        if flags not in (0, TRITONSERVER_RESPONSE_COMPLETE_FINAL):
            raise TritonModelException("Unable to send response. Unsupported flag provided.")
        if response is None and not flags:
            raise TritonModelException(
                "Inference Response object must be provided when the response flags is set to zero."
            )
        if response is not None and not isinstance(response, InferenceResponse):
            raise TypeError(f"send() takes a pb_utils.InferenceResponse, got {type(response).__name__}")
        self._sink(response, bool(flags))

    def is_cancelled(self) -> bool:
        return self._sink.cancelled
