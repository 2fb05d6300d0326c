"""Triton's reserved request parameters: those its frontends act on themselves, which no model sees.

Triton's HTTP and gRPC frontends take ``sequence_id``, ``sequence_start``, ``sequence_end``, ``priority``
and ``timeout`` off a request's parameters (HTTP ``binary_data_output`` too), checked in their words,
and hand the model the rest; they refuse any other name that starts with ``triton_`` (gRPC allows its
``triton_enable_empty_final_response``, which its stream acts on). Each wire's decoder does the same
here: what it takes goes to `DecodedRequest.controls` (the sequence id, the flags the two booleans set,
the priority, the timeout in microseconds), where a Triton Python model reads them
(``correlation_id()``, ``flags()``, ``timeout()``). This server has no sequence batcher, priority
levels or queue timeouts: they change nothing else.
"""

from __future__ import annotations

from typing import Any

from .._declarations.errors import BadRequest

SEQUENCE_START, SEQUENCE_END = 1, 2  # Triton's request flags
_TAKEN = frozenset({"sequence_id", "sequence_start", "sequence_end", "priority", "timeout"})
_PREFIX = "triton_"
REST_REFUSAL = "parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified."
GRPC_ALLOWED = ("triton_enable_empty_final_response",)
GRPC_REFUSAL = (
    "parameter keys starting with 'triton_' are reserved for Triton usage. Only the following keys starting with "
    "'triton_' are allowed: " + " ".join(GRPC_ALLOWED)
)
# TritonJson's words for a JSON value of the wrong kind.
_NOT_UINT = "attempt to access JSON non-unsigned-integer as unsigned integer"
_NOT_BOOL = "attempt to access JSON non-boolean as boolean"
_NOT_STRING = "attempt to access JSON non-string as string"


def _uint(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def rest_parameters(parameters: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any] | None, bool]:
    """A REST request's parameters as its model sees them, what Triton's HTTP frontend takes of them, and
    ``binary_data_output``."""
    if not parameters:
        return {}, None, False
    if not any(name in _TAKEN or name.startswith(_PREFIX) or name == "binary_data_output" for name in parameters):
        return parameters, None, False  # (as most requests: nothing to take)
    kept, controls, binary = dict(parameters), {}, False
    for name, value in parameters.items():
        if name.startswith(_PREFIX):
            raise BadRequest(REST_REFUSAL)
        if name == "binary_data_output":
            if not isinstance(value, bool):
                raise BadRequest(f"Unable to parse 'binary_data_output': {_NOT_BOOL}")
            binary = value
        elif name == "sequence_id":
            if not (_uint(value) or isinstance(value, str)):
                raise BadRequest(f"Unable to parse 'sequence_id': {_NOT_STRING}")
            controls[name] = value
        elif name in ("sequence_start", "sequence_end"):
            if not isinstance(value, bool):
                raise BadRequest(f"Unable to parse '{name}': {_NOT_BOOL}")
            _flag(controls, name, value)
        elif name in ("priority", "timeout"):
            if not _uint(value):
                raise BadRequest(f"Unable to parse '{name}': {_NOT_UINT}")
            controls[name] = value
        else:
            continue
        del kept[name]
    return kept, controls or None, binary


def grpc_parameters(parameters: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A gRPC request's parameters (its stream's own taken already) as its model sees them, and what
    Triton's gRPC frontend takes of them."""
    if not parameters or not any(name in _TAKEN or name.startswith(_PREFIX) for name in parameters):
        return parameters, None
    kept, controls = dict(parameters), {}
    for name, value in parameters.items():
        if name.startswith(_PREFIX) and name not in GRPC_ALLOWED:
            raise BadRequest(GRPC_REFUSAL)
        if name == "sequence_id":
            if not (isinstance(value, (int, str)) and not isinstance(value, bool)):
                raise BadRequest(
                    "invalid value type for 'sequence_id' parameter, expected int64_param or string_param."
                )
            controls[name] = value
        elif name in ("sequence_start", "sequence_end"):
            if not isinstance(value, bool):
                raise BadRequest(f"invalid value type for '{name}' parameter, expected bool_param.")
            _flag(controls, name, value)
        elif name == "priority":
            if not isinstance(value, int) or isinstance(value, bool):
                raise BadRequest("invalid value type for 'priority' parameter, expected int64_param or uint64_param.")
            if value < 0:
                raise BadRequest("invalid value for 'priority', expected value >= 0.")
            controls[name] = value
        elif name == "timeout":
            if not isinstance(value, int) or isinstance(value, bool):
                raise BadRequest("invalid value type for 'timeout' parameter, expected int64_param.")
            controls[name] = value
        else:
            continue
        del kept[name]
    return kept, controls or None


def _flag(controls: dict[str, Any], name: str, value: bool) -> None:
    if value:
        controls["flags"] = controls.get("flags", 0) | (SEQUENCE_START if name == "sequence_start" else SEQUENCE_END)
