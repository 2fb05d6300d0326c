"""The example models with everything an operator watches: Triton's Prometheus metrics at /metrics,
OpenTelemetry spans (the request's, from the ASGI middleware, with the model call's inside), the
statistics extension at /v2/models/stats and an access log line per inference.

Run it with ``uvicorn examples.observability:app`` and scrape ``localhost:8000/metrics``.
"""

from __future__ import annotations

import prometheus_client
from fastapi import FastAPI, Response
from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware

import oip_asgi
from examples.models import models

oip = oip_asgi.oip_app(models, metrics=True, tracing=True, access_log=True)
app = FastAPI(lifespan=oip.lifespan)
oip_asgi.mount(app, oip, path="/v2")


# A route, not app.mount("/metrics", prometheus_client.make_asgi_app()): a mount answers GET /metrics
# with a 307 to /metrics/, which Prometheus follows but many scrapers and probes do not.
@app.get("/metrics", include_in_schema=False)
async def metrics() -> Response:
    return Response(prometheus_client.generate_latest(), media_type=prometheus_client.CONTENT_TYPE_LATEST)


app.add_middleware(OpenTelemetryMiddleware)
