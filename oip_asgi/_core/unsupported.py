"""Triton's extensions this server does not offer answer what their entry says (`extensions.py`): one answer
for both wires.

A client of Triton (tritonclient, perf_analyzer's shared-memory modes) may call them; "no such path"
or grpcio's "Method not found!" would leave it guessing whether it typed the path wrong. Triton
answers a feature it was built without as UNSUPPORTED: HTTP 501 and gRPC UNIMPLEMENTED, as here.
"""

from __future__ import annotations

from .._declarations.errors import OIPError
from .extensions import REGISTRY


class Unsupported(OIPError, status_code=501, grpc_code="UNIMPLEMENTED"):
    """Triton's UNSUPPORTED: an extension this server does not offer, or a setting a request may not change
    (a log or trace file, as Triton 2.51 refuses it)."""


# What each extension not offered answers, by its API group and its name.
_ANSWERS = {(extension.group, extension.name): extension.not_offered for extension in REGISTRY if not extension.offered}


def unsupported(group: str, name: str) -> Unsupported:
    """The answer to a call of the extension `name` (behind the restricted API `group`), which is not offered."""
    return Unsupported(_ANSWERS[group, name])
