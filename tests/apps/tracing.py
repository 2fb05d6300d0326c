"""An app for `oip-asgi serve` whose process exports its spans to a file, one JSON line each.

OpenTelemetry's SDK is the process's to configure (the serve command traces through the API alone): this
module configures it as an app would, when it is imported, writing each finished span to the file named
by ``OIP_TEST_SPANS``: its name, its attributes and its events' names.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

import numpy as np
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from oip_asgi import Model, TensorSpec


class _Lines(SpanExporter):
    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with open(self.path, "a", encoding="utf-8") as file:
            for span in spans:
                line = {
                    "name": span.name,
                    "attributes": dict(span.attributes or {}),
                    "events": [event.name for event in span.events],
                }
                file.write(json.dumps(line) + "\n")
        return SpanExportResult.SUCCESS


if "OIP_TEST_SPANS" in os.environ:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_Lines(os.environ["OIP_TEST_SPANS"])))
    trace.set_tracer_provider(provider)


def _identity(X: np.ndarray) -> np.ndarray:
    return X


models = {
    name: Model(_identity, inputs=[TensorSpec("X", "FP32", [-1])], outputs=[TensorSpec("Y", "FP32", [-1])])
    for name in ("simple", "other")
}
