"""Prometheus metrics under Triton's names, OpenTelemetry spans of model calls, the access log."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from oip_asgi import Model, TensorSpec, oip_app
from tests.support.client import client
from tests.support.servers import Server, uvicorn
from tests.support.waiting import wait_until

pytestmark = pytest.mark.anyio
httpclient = pytest.importorskip("tritonclient.http")

SPECS = {"inputs": [TensorSpec("x", "INT32", [-1])], "outputs": [TensorSpec("y", "INT32", [-1])]}
REQUEST = {"inputs": [{"name": "x", "shape": [2], "datatype": "INT32", "data": [1, 2]}]}


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@pytest.fixture(scope="module")
def observed() -> Iterator[Server]:
    with uvicorn("examples.observability:app") as server:
        yield server


@pytest.mark.slow
def test_a_scrape_of_a_real_server_carries_triton_named_counts(observed: Server) -> None:
    triton = httpclient.InferenceServerClient(observed.address)
    try:
        for rows in (1, 3):
            tensor = httpclient.InferInput("INPUT0", [rows], "FP32")
            tensor.set_data_from_numpy(np.ones(rows, dtype=np.float32), binary_data=True)
            triton.infer("identity_fp32", [tensor])
        tensor = httpclient.InferInput("X", [1], "FP32")
        tensor.set_data_from_numpy(np.array([-1.0], dtype=np.float32))
        with pytest.raises(Exception, match="non-negative"):
            triton.infer("sqrt", [tensor])  # the model refuses: a failure from its call
    finally:
        triton.close()
    scraped = httpx.get(f"http://{observed.address}/metrics")  # httpx follows no redirect: a 307 fails here
    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain")
    text = scraped.text
    found = samples(text)
    labels = (("model", "identity_fp32"), ("version", "1"))
    assert found[("nv_inference_request_success", labels)] == 2
    assert found[("nv_inference_count", labels)] == 2 and found[("nv_inference_exec_count", labels)] == 2
    for duration in ("request", "queue", "compute_input", "compute_infer", "compute_output"):
        assert (f"nv_inference_{duration}_duration_us", labels) in found
    assert found[("nv_inference_request_duration_us", labels)] > 0
    failure = (("model", "sqrt"), ("reason", "BACKEND"), ("version", "1"))
    assert found[("nv_inference_request_failure", failure)] == 1
    assert found[("nv_inference_request_success", (("model", "sqrt"), ("version", "1")))] == 0
    # Triton's exact sample names: no _total, which prometheus_client gives its own counters.
    names = {line.split("{")[0] for line in text.splitlines() if line.startswith("nv_")}
    assert "nv_inference_request_success" in names and not any(name.endswith("_total") for name in names)


@pytest.mark.slow
def test_the_access_log_reaches_a_plain_uvicorns_output(observed: Server) -> None:
    # uvicorn configures its own loggers only (and runs at --log-level warning here): the app's fallback hands
    # the line asked for to uvicorn's handlers, in uvicorn's format.
    tensor = {"shape": [1, 16], "datatype": "INT32", "data": list(range(16))}
    request = {"inputs": [{"name": "INPUT0", **tensor}, {"name": "INPUT1", **tensor}]}
    assert httpx.post(f"http://{observed.address}/v2/models/simple/infer", json=request).status_code == 200
    line = "INFO:     model=simple version=1 status=200 bytes_in="
    wait_until(lambda: line in observed.output(), "the access line in the server's output")
    assert observed.output().count(line) == 1


async def test_metrics_go_to_the_registry_given_and_are_zero_before_any_request() -> None:
    registry = CollectorRegistry()
    app = oip_app({"m": Model(lambda x: x, **SPECS)}, metrics=registry)
    found = samples(generate_latest(registry).decode())
    assert found[("nv_inference_request_success", (("model", "m"), ("version", "1")))] == 0
    async with client(app) as http:
        assert (await http.post("/models/m/infer", json=REQUEST)).status_code == 200
    assert (
        samples(generate_latest(registry).decode())[
            ("nv_inference_request_success", (("model", "m"), ("version", "1")))
        ]
        == 1
    )
    with pytest.raises(TypeError, match="metrics must be True or a prometheus_client CollectorRegistry"):
        oip_app({"m": Model(lambda x: x, **SPECS)}, metrics="yes")  # type: ignore[arg-type]


async def test_request_duration_counts_successful_requests_only_as_triton_does() -> None:
    # Dashboards divide nv_inference_request_duration_us by nv_inference_request_success.
    def sometimes(x: np.ndarray) -> np.ndarray:
        if x[0] < 0:
            raise ValueError("negative")
        return x

    registry = CollectorRegistry()
    app = oip_app({"m": Model(sometimes, **SPECS)}, metrics=registry)
    failing = {"inputs": [{**REQUEST["inputs"][0], "data": [-1, 2]}]}
    async with client(app) as http:
        assert (await http.post("/models/m/infer", json=REQUEST)).status_code == 200
        assert (await http.post("/models/m/infer", json=failing)).status_code == 500
    labels = (("model", "m"), ("version", "1"))
    found = samples(generate_latest(registry).decode())
    success_us = app.core.served.get("m").statistics.success.ns / 1000
    assert found[("nv_inference_request_duration_us", labels)] == pytest.approx(success_us)
    assert app.core.served.get("m").statistics.fail.ns > 0


async def test_the_tracing_recipe_nests_the_model_call_in_the_request_span() -> None:
    from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    batched = Model(
        lambda x: x,
        **{"inputs": [TensorSpec("x", "INT32", [-1])], "outputs": [TensorSpec("y", "INT32", [-1])]},
        max_batch_size=4,
        max_batch_delay=0,
    )
    oip = oip_app({"m": Model(lambda x: x, **SPECS), "b": batched}, tracing=True)
    # the recipe sets the global provider; the test keeps its own
    oip.core.respond.tracer = provider.get_tracer("oip_asgi")
    app = OpenTelemetryMiddleware(oip, tracer_provider=provider)
    async with client(app) as http:
        assert (await http.post("/models/m/infer", json=REQUEST)).status_code == 200
        assert (await http.post("/models/b/infer", json=REQUEST)).status_code == 200
    spans = {span.name: span for span in exporter.get_finished_spans()}
    model_span = spans["oip.model m"]
    assert dict(model_span.attributes or {}) == {"oip.model.name": "m", "oip.model.version": "1", "oip.batch_size": 1}
    request_span = next(span for span in spans.values() if span.kind is SpanKind.SERVER)
    assert model_span.parent is not None and model_span.parent.span_id == request_span.context.span_id
    assert (spans["oip.model b"].attributes or {})["oip.batch_size"] == 2


async def test_the_access_log_is_off_by_default_and_one_line_per_inference_when_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="oip_asgi")
    quiet = oip_app({"m": Model(lambda x: x, **SPECS)})
    logged = oip_app({"m": Model(lambda x: x, **SPECS)}, access_log=True)
    async with client(quiet) as http:
        await http.post("/models/m/infer", json=REQUEST)
    assert not caplog.records
    async with client(logged) as http:
        await http.post("/models/m/infer", json=REQUEST)
        await http.post("/models/m/infer", json={"inputs": [{**REQUEST["inputs"][0], "datatype": "FP32"}]})
    first, second = (record.getMessage() for record in caplog.records)
    assert first.startswith("model=m version=1 status=200 bytes_in=") and "compute_output_us=" in first
    assert second.startswith("model=m version=1 status=400 ")
    assert all(record.name == "oip_asgi.access" for record in caplog.records)


def test_the_flask_metrics_recipe_serves_the_counts_beside_the_protocol() -> None:
    flask = pytest.importorskip("flask")
    from werkzeug.middleware.dispatcher import DispatcherMiddleware

    import oip_asgi
    from oip_asgi_flask import OIP

    registry = CollectorRegistry()
    app = flask.Flask(__name__)
    OIP(app, models=oip_asgi.oip_app({"m": Model(lambda x: x, **SPECS)}, metrics=registry))
    app.wsgi_app = DispatcherMiddleware(  # type: ignore[method-assign]
        app.wsgi_app, {"/metrics": __import__("prometheus_client").make_wsgi_app(registry)}
    )
    http = app.test_client()
    assert http.post("/v2/models/m/infer", json=REQUEST).status_code == 200
    text = http.get("/metrics").get_data(as_text=True)
    assert samples(text)[("nv_inference_request_success", (("model", "m"), ("version", "1")))] == 1
