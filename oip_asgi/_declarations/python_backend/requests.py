"""``pb_utils.InferenceRequest``: a request ``execute`` gets, or one a model makes and runs (BLS)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from . import bls
from .errors import TritonModelException, unsupported
from .host import BLSRequest, PythonHost, current, in_execute
from .responses import InferenceResponse, InferenceResponseSender, Outlet
from .tensors import Tensor, as_text, datatype_of

TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2


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
            raise unsupported("sequence flags on a request (sequence batching)")
        if preferred_memory is not None and getattr(preferred_memory, "kind", "CPU") != "CPU":
            raise unsupported("a GPU preferred memory")
        if isinstance(parameters, str):
            parameters = json.loads(parameters) if parameters else {}
        # Triton's binding takes bytes for its strings too (a name read from a BYTES tensor, say).
        self._model_name = as_text(model_name)
        self._model_version = model_version
        self._inputs = list(inputs)
        self._requested = [as_text(name) for name in requested_output_names]
        self._request_id = request_id
        self._correlation_id = correlation_id
        self._timeout = timeout
        self._flags = 0
        self._parameters: dict[str, Any] = dict(parameters or {})
        self._sender: InferenceResponseSender | None = None
        self._outlet: Outlet | None = None  # a served request's: its sender is made from it when the model asks
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
        outlet: Outlet,
        asked: bool,
        controls: dict[str, Any] | None = None,
    ) -> InferenceRequest:
        """A request a client sent to the model, as `execute` gets it: `model_version` as `model_version()`
        answers (-1 for a version that is not a number), `outlet` its sender's sink, `asked` whether the
        client named its outputs, `controls` what Triton's frontend took out of its parameters (its
        sequence id, flags and timeout). Made without __init__'s checks: the core made and checked its parts."""
        request = cls.__new__(cls)
        request._model_name = model_name
        request._model_version = model_version
        request._inputs = inputs
        request._requested = requested
        request._request_id = request_id
        request._correlation_id = 0
        request._timeout = 0
        request._flags = 0
        request._parameters = parameters
        request._sender = None
        request._outlet = outlet
        request.asked = asked
        if controls:
            request._correlation_id = controls.get("sequence_id", 0)
            request._timeout = controls.get("timeout", 0)
            request._flags = controls.get("flags", 0)
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
        return self._flags

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
            self._outlet.take()
            self._sender = InferenceResponseSender(self._outlet)
        return self._sender

    def set_release_flags(self, flags: int) -> None:
        if flags & TRITONSERVER_REQUEST_RELEASE_RESCHEDULE:
            raise unsupported("rescheduling a request (TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)")

    # BLS

    def exec(self, decoupled: bool = False) -> InferenceResponse | bls.Responses:
        """Run the request on the served model and wait: its response, or with `decoupled` an iterator of
        them (the last one empty, flagged final as Triton's). An error is in the response, not raised.
        From an ``async def execute`` it blocks that instance's own loop, as in Triton, not the server's."""
        host = _bls_host("InferenceRequest.exec")
        if decoupled:
            return bls.Responses(host.stream(self._bls()))
        try:
            result = host.infer(self._bls())
        except Exception as exc:
            return bls.failed(exc)
        return bls.response_of(result)

    async def async_exec(self, decoupled: bool = False) -> InferenceResponse | bls.Responses:
        """As `exec`, awaited. With `decoupled`, once the first response has come: an iterator of the
        responses (``next()`` and ``for`` wait for each as it comes; ``async for`` awaits it)."""
        host = _bls_host("InferenceRequest.async_exec")
        if decoupled:
            responses = bls.Responses(host.stream(self._bls()))
            await responses.arrived()
            return responses
        try:
            result = await host.infer_async(self._bls())
        except Exception as exc:
            return bls.failed(exc)
        return bls.response_of(result)

    def _bls(self) -> BLSRequest:
        """What the host runs: the model's tensors with their datatypes, its target, id, parameters and outputs."""
        return BLSRequest(
            model=self._model_name,
            version="" if self._model_version < 0 else str(self._model_version),
            inputs={tensor.name(): (datatype_of(tensor), tensor.as_numpy()) for tensor in self._inputs},
            id=self._request_id,
            parameters=dict(self._parameters),
            outputs=list(self._requested),
        )


def _bls_host(what: str) -> PythonHost:
    """The server a BLS call runs on; refused, in Triton's words, from a model's initialize or finalize."""
    if not in_execute():
        raise TritonModelException("BLS is only supported during the 'execute' function.")
    return current(what)


def get_input_tensor_by_name(inference_request: InferenceRequest, name: str) -> Tensor | None:
    for tensor in inference_request._inputs:
        if tensor._name == name:
            return tensor
    return None
