"""The example models with everything an operator watches: Triton's Prometheus metrics at /metrics,
OpenTelemetry spans (the request's, from the ASGI middleware, with the model call's inside), the
statistics extension at /v2/models/stats and an access log line per inference.

Run it with ``uvicorn examples.observability:app`` and scrape ``localhost:8000/metrics``.
"""

from __future__ import annotations

import prometheus_client
from fastapi import FastAPI
from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware

import oip_asgi
from examples.models import models

app = FastAPI()
oip_asgi.mount(app, models, path="/v2", metrics=True, tracing=True, access_log=True)
app.mount("/metrics", prometheus_client.make_asgi_app())
app.add_middleware(OpenTelemetryMiddleware)
