"""Triton's extensions this server does not offer, and what a client does instead: one answer for both wires.

A client of Triton (tritonclient, perf_analyzer's shared-memory modes) may call them; "no such path"
or grpcio's "Method not found!" would leave it guessing whether it typed the path wrong. Triton
answers a feature it was built without as UNSUPPORTED: HTTP 501 and gRPC UNIMPLEMENTED, as here.
"""

from __future__ import annotations

from .._declarations.errors import OIPError


class Unsupported(OIPError, status_code=501, grpc_code="UNIMPLEMENTED"):
    """A Triton extension this server does not offer (Triton's UNSUPPORTED)."""


_SEND_IN_THE_BODY = (
    "send the tensors in the request instead: as binary data after the JSON (REST's binary tensor data "
    "extension; tritonclient: set_data_from_numpy(array, binary_data=True)) or in raw_input_contents (gRPC)"
)

# Each extension by its API group (Triton's names, as --http-restricted-api takes them): what it answers.
_ANSWERS = {
    "shared-memory": {
        "system": "this server does not offer Triton's system shared memory extension (tensors in shared memory "
        f"regions registered with the server); {_SEND_IN_THE_BODY}",
        "cuda": "this server does not offer Triton's CUDA shared memory extension (tensors in GPU memory "
        f"registered with the server); {_SEND_IN_THE_BODY}",
    },
    "trace": {
        "": "this server does not offer Triton's trace extension (trace settings changed while it runs); "
        "trace model calls with OpenTelemetry instead: oip_app(tracing=True) makes a span of each "
        "(docs/observability.md)",
    },
    "logging": {
        "": "this server does not offer Triton's logging extension (log settings changed while it runs); "
        "it logs through Python's logging, to the 'oip_asgi' logger: set its level where the app's logging "
        "is configured (oip-asgi serve --log-level)",
    },
}


def unsupported(group: str, kind: str = "") -> Unsupported:
    """The answer to a call of the extension of `group` (`kind`: "system" or "cuda" for shared memory)."""
    return Unsupported(_ANSWERS[group][kind])
