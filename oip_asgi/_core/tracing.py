"""OpenTelemetry spans for model calls, when the app asks for them (`tracing=True`).

opentelemetry-api is not a dependency: an app that asks for spans without it installed fails when
it is built, with the line to install it. Spans nest under the request's own span when the host is
instrumented (OpenTelemetry's ASGI middleware), since they are made in the request's context.
"""

from __future__ import annotations

from typing import Any

from .._version import __version__


def tracer() -> Any:
    try:
        from opentelemetry import trace
    except ImportError:
        raise ImportError("tracing=True needs the OpenTelemetry API: pip install opentelemetry-api") from None
    return trace.get_tracer("oip_asgi", __version__)
