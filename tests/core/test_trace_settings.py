"""Triton's trace extension (issue 39): ``GET``/``POST /v2[/models/{name}]/trace/setting`` and gRPC ``TraceSetting``
sample requests into OpenTelemetry spans, globally and per model, with Triton's settings, semantics and errors,
on both wires, in process. tests/e2e/test_settings_e2e.py drives the same with tritonclient against
`oip-asgi serve`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import numpy as np
import pytest

from oip_asgi import Model, OIPApp, TensorSpec, oip_app
from oip_asgi._core import responding, trace_settings
from oip_asgi._core.trace_settings import start_setting
from oip_asgi.grpc import inference_pb2 as pb
from oip_asgi.grpc import inference_pb2_grpc
from tests.support.grpc import grpc_server

pytest.importorskip("opentelemetry.sdk")
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

X = [TensorSpec("X", "FP32", [-1])]
Y = [TensorSpec("Y", "FP32", [-1])]
MODELS = {"simple": Model(lambda X: X, inputs=X, outputs=Y), "other": Model(lambda X: X, inputs=X, outputs=Y)}
INFER = {"inputs": [{"name": "X", "shape": [3], "datatype": "FP32", "data": [1.0, 2.0, 3.0]}]}
OFF = {"trace_level": ["OFF"], "trace_rate": "1000", "trace_count": "-1", "trace_mode": "opentelemetry"}


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    yield exporter
    exporter.shutdown()


def traced_app(exporter: InMemorySpanExporter, **options: Any) -> OIPApp:
    """An app whose spans go to `exporter` (the test's own provider: the global one is set once per process)."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = oip_app(MODELS, **options)
    app.core.respond.tracer = provider.get_tracer("oip_asgi")
    return app


def call(app: Any, *requests: tuple[str, str, object]) -> list[httpx.Response]:
    """Each (method, path, JSON body) in turn, on one client."""

    async def calls() -> list[httpx.Response]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://oip") as client:
            return [await client.request(method, path, json=body) for method, path, body in requests]

    return asyncio.run(calls())


def settings(app: Any, body: object = None, model: str | None = None) -> httpx.Response:
    path = f"/models/{model}/trace/setting" if model else "/trace/setting"
    (response,) = call(app, ("POST" if body is not None else "GET", path, body))
    return response


def infer(app: Any, model: str, times: int) -> None:
    assert {r.status_code for r in call(app, *[("POST", f"/models/{model}/infer", INFER)] * times)} == {200}


def traced(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return list(exporter.get_finished_spans())


def test_tracing_is_off_as_triton_starts_and_costs_no_look_at_the_settings(exporter: InMemorySpanExporter) -> None:
    app = traced_app(exporter)
    assert settings(app).json() == OFF
    assert settings(app, model="simple").json() == OFF
    assert app.core.respond.once.__func__ is responding.Responder._once  # type: ignore[attr-defined]
    infer(app, "simple", 3)
    assert traced(exporter) == []
    on = settings(app, {"trace_level": ["TIMESTAMPS"], "trace_rate": "1"})
    assert on.json() == {**OFF, "trace_level": ["TIMESTAMPS"], "trace_rate": "1"}
    assert app.core.respond.once.__func__ is responding.Responder._traced_once  # type: ignore[attr-defined]
    assert settings(app, {"trace_level": ["OFF"]}).status_code == 200
    assert app.core.respond.once.__func__ is responding.Responder._once  # type: ignore[attr-defined]


def test_timestamps_are_a_span_with_triton_s_timestamps_in_order(exporter: InMemorySpanExporter) -> None:
    app = traced_app(exporter, tracing=True)  # tracing=True: TIMESTAMPS, every request
    assert settings(app).json() == {**OFF, "trace_level": ["TIMESTAMPS"], "trace_rate": "1"}
    infer(app, "simple", 1)
    (span,) = traced(exporter)
    assert span.name == "oip.model simple"
    assert dict(span.attributes or {}) == {"oip.model.name": "simple", "oip.model.version": "1", "oip.batch_size": 1}
    names = [event.name for event in span.events]
    assert names == [
        "REQUEST_START", "QUEUE_START", "COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END",
        "REQUEST_END",
    ]  # fmt: skip
    moments = [event.timestamp for event in span.events]
    assert moments == sorted(moments) and span.start_time == moments[0] and span.end_time == moments[-1]


def test_tensors_are_events_with_names_datatypes_and_shapes_never_data(exporter: InMemorySpanExporter) -> None:
    app = traced_app(exporter, tracing={"level": "TENSORS", "rate": 1})
    infer(app, "simple", 1)
    (span,) = traced(exporter)
    events = [(event.name, dict(event.attributes or {})) for event in span.events]
    tensor = {"tensor.name": "X", "tensor.datatype": "FP32", "tensor.shape": "3"}
    assert events == [("TENSOR_QUEUE_INPUT", tensor), ("TENSOR_BACKEND_OUTPUT", {**tensor, "tensor.name": "Y"})]
    assert "1.0" not in json.dumps([attributes for _, attributes in events])


def test_rate_traces_one_request_in_n_and_count_stops_after_n_traces(exporter: InMemorySpanExporter) -> None:
    app = traced_app(exporter)
    settings(app, {"trace_level": ["TIMESTAMPS"], "trace_rate": "3", "trace_count": "2"})
    infer(app, "simple", 8)
    assert len(traced(exporter)) == 2  # the 3rd and 6th requests; then the count is spent
    assert settings(app).json()["trace_count"] == "0"  # Triton's GET tells what is left
    infer(app, "simple", 6)
    assert len(traced(exporter)) == 2


def test_a_model_s_own_settings_sample_it_and_the_others_follow_the_global_ones(
    exporter: InMemorySpanExporter,
) -> None:
    app = traced_app(exporter)
    assert settings(app, {"trace_level": ["TIMESTAMPS"], "trace_rate": "2"}, model="simple").status_code == 200
    infer(app, "simple", 4)
    infer(app, "other", 4)
    assert [span.name for span in traced(exporter)] == ["oip.model simple"] * 2
    assert settings(app, model="other").json() == OFF
    settings(app, {"trace_level": ["TIMESTAMPS", "TENSORS"], "trace_count": "5"})  # "simple" keeps its own two
    assert settings(app, model="simple").json() == {
        **OFF, "trace_level": ["TIMESTAMPS"], "trace_rate": "2", "trace_count": "5"
    }  # fmt: skip
    assert settings(app, model="other").json() == {**OFF, "trace_level": ["TIMESTAMPS", "TENSORS"], "trace_count": "5"}


def test_clearing_returns_to_the_global_settings_or_to_the_start_as_triton_s_test_does() -> None:
    """Triton's qa/L0_trace/trace_endpoint_test.py, test_http_clear_settings, on this server's start settings."""
    app = oip_app(MODELS, tracing={"level": "TIMESTAMPS", "rate": 1})
    start = {**OFF, "trace_level": ["TIMESTAMPS"], "trace_rate": "1"}
    settings(app, {"trace_rate": "12", "log_frequency": "34"}, model="simple")
    settings(app, {"trace_rate": "56", "trace_count": "78", "trace_level": ["OFF"]})
    assert settings(app, {"trace_rate": None, "trace_count": None}).json() == {**start, "trace_level": ["OFF"]}
    assert settings(app, model="simple").json() == {**start, "trace_level": ["OFF"], "trace_rate": "12"}
    cleared = settings(app, {"trace_rate": None, "trace_level": None}, model="simple")
    assert cleared.json() == {**start, "trace_level": ["OFF"]}
    assert app.core.traces.models["simple"].log_frequency == 34  # kept: Triton's opentelemetry mode does not tell it
    assert settings(app, {"log_frequency": None}, model="simple").status_code == 200
    assert "simple" not in app.core.traces.models  # nothing of its own left: the global settings' again


# Every bad setting: Triton's words on REST, its code and words on gRPC (Triton 2.51's handlers); a JSON value
# of the wrong kind is 400 here, where Triton's TritonJson answers 500: a malformed request is a client's error.
REST_REFUSALS = [
    ({"trace_file": "/tmp/anywhere.json"}, 501, trace_settings.FILE_REFUSED),
    ({"trace_file": None}, 501, trace_settings.FILE_REFUSED),
    ({"trace_level": "TIMESTAMPS"}, 400, "attempt to access JSON non-array as array"),
    ({"trace_level": [1]}, 400, "attempt to access JSON non-string as string"),
    ({"trace_level": ["OFF", "TIMESTAMPS"]}, 400, "Expect only one trace level 'OFF' is specified"),
    (
        {"trace_level": ["TIMESTAMP"]},
        400,
        "unknown trace level 'TIMESTAMP'; the levels are OFF, TIMESTAMPS and TENSORS",
    ),
    ({"trace_rate": 5}, 400, "attempt to access JSON non-string as string"),
    ({"trace_rate": "five"}, 400, "Unable to parse 'trace_rate', got: five"),
    ({"trace_rate": "-1"}, 400, "Unable to parse 'trace_rate', value is out of range [ 0, 4294967295 ], got: -1"),
    (
        {"trace_rate": "0", "trace_level": ["TIMESTAMPS"]},
        400,
        "Attempting to set invalid trace setting :sample rate must be non-zero",
    ),
    ({"trace_count": "-2"}, 400, "Unable to parse 'trace_count'. Expecting value >= -1, got:-2"),
    (
        {"trace_count": "2147483648"},
        400,
        "Unable to parse 'trace_count', value is out of range [ -1, 2147483647 ], got: 2147483648",
    ),
    ({"log_frequency": "often"}, 400, "Unable to parse 'log_frequency', got: often"),
]


@pytest.mark.parametrize(("body", "status", "message"), REST_REFUSALS, ids=[json.dumps(b) for b, _, _ in REST_REFUSALS])
def test_rest_refuses_a_bad_setting_as_triton_and_changes_nothing(
    body: dict[str, Any], status: int, message: str
) -> None:
    app = oip_app(MODELS)
    for model in (None, "simple"):
        refused = settings(app, body, model=model)
        assert (refused.status_code, refused.json()) == (status, {"error": message})
        assert settings(app, model=model).json() == OFF
    infer(app, "simple", 1)  # and it keeps serving


def test_an_unknown_model_is_refused_first_in_triton_s_words() -> None:
    app = oip_app(MODELS)
    for body in (None, {"trace_file": "x"}):
        refused = settings(app, body, model="does-not-exist")
        assert (refused.status_code, refused.json()) == (400, {"error": "Request for unknown model : does-not-exist"})


def test_a_refused_update_of_the_global_settings_leaves_every_model_as_it_was() -> None:
    app = oip_app(MODELS)
    settings(app, {"trace_level": ["TIMESTAMPS"], "trace_rate": "2"}, model="simple")
    refused = settings(app, {"trace_rate": "0"})  # "simple" keeps its own rate; the global setting is off: no refusal
    assert refused.status_code == 200
    refused = settings(app, {"trace_count": "0"})  # "simple" would take count 0 while it traces: Triton refuses
    assert refused.status_code == 400 and refused.json()["error"].startswith(
        "Attempting to set invalid trace setting :"
    )
    assert settings(app, model="simple").json() == {**OFF, "trace_level": ["TIMESTAMPS"], "trace_rate": "2"}


def values(*given: str) -> pb.TraceSettingRequest.SettingValue:
    return pb.TraceSettingRequest.SettingValue(value=list(given))


GRPC_REFUSALS = [
    ({"trace_file": values("x.json")}, grpc.StatusCode.UNIMPLEMENTED, trace_settings.FILE_REFUSED),
    (
        {"trace_level": values("OFF", "TENSORS")},
        grpc.StatusCode.INVALID_ARGUMENT,
        "Expect only one trace level 'OFF' is specified",
    ),
    ({"trace_rate": values("1", "2")}, grpc.StatusCode.INVALID_ARGUMENT, "expect only 1 value for 'trace_rate'"),
    (
        {"trace_count": values("-7")},
        grpc.StatusCode.INVALID_ARGUMENT,
        "Unable to parse 'trace_count'. Expecting value >= -1, got: -7",
    ),
    ({"log_frequency": values("x")}, grpc.StatusCode.INVALID_ARGUMENT, "Unable to parse 'log_frequency', got: x"),
]


def test_grpc_reads_changes_and_clears_as_rest_and_refuses_as_triton(exporter: InMemorySpanExporter) -> None:
    app = traced_app(exporter)
    with grpc_server(app) as address, grpc.insecure_channel(address) as channel:
        stub = inference_pb2_grpc.GRPCInferenceServiceStub(channel)

        def setting(model: str = "", **given: pb.TraceSettingRequest.SettingValue) -> dict[str, list[str]]:
            response = stub.TraceSetting(pb.TraceSettingRequest(model_name=model, settings=given), timeout=10)
            return {key: list(value.value) for key, value in response.settings.items()}

        listed = {key: value if isinstance(value, list) else [value] for key, value in OFF.items()}
        assert setting() == listed
        assert setting("simple", trace_level=values("TIMESTAMPS"), trace_rate=values("1"))["trace_rate"] == ["1"]
        assert settings(app, model="simple").json()["trace_level"] == ["TIMESTAMPS"]  # one set of settings
        infer(app, "simple", 2)
        assert len(traced(exporter)) == 2
        assert setting("simple", trace_level=values(), trace_rate=values()) == listed  # no value: cleared
        for given, code, message in GRPC_REFUSALS:
            with pytest.raises(grpc.RpcError) as refused:
                setting("simple", **given)
            assert (refused.value.code(), refused.value.details()) == (code, message), given
        with pytest.raises(grpc.RpcError) as unknown:
            setting("nope")
        assert (unknown.value.code(), unknown.value.details()) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            "Request for unknown model : nope",
        )
        assert setting() == listed


def test_without_opentelemetry_turning_tracing_on_is_triton_s_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> None:
        raise ImportError("tracing needs the OpenTelemetry API: pip install opentelemetry-api")

    monkeypatch.setattr(responding, "tracer", missing)
    app = oip_app(MODELS)
    refused = settings(app, {"trace_level": ["TIMESTAMPS"]})
    assert refused.status_code == 503
    assert refused.json()["error"].startswith("the server does not support tracing: tracing needs the OpenTelemetry")
    assert settings(app).json() == OFF
    with pytest.raises(ImportError, match="pip install opentelemetry-api"):
        oip_app(MODELS, tracing=True)  # an app built to trace says so when it is built


def test_a_traced_request_that_fails_is_an_error_span(exporter: InMemorySpanExporter) -> None:
    def fails(X: np.ndarray) -> np.ndarray:
        raise ValueError("no luck")

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = oip_app({"fails": Model(fails, inputs=X, outputs=Y)}, tracing=True)
    app.core.respond.tracer = provider.get_tracer("oip_asgi")
    (response,) = call(app, ("POST", "/models/fails/infer", INFER))
    assert response.status_code == 500
    (span,) = traced(exporter)
    assert not span.status.is_ok and [event.name for event in span.events][-1] == "REQUEST_END"
    assert any(event.name == "exception" for event in span.events) or span.status.description


@pytest.mark.parametrize(
    ("tracing", "message"),
    [
        ({"mode": "triton"}, "trace mode 'triton' is not served"),
        ({"level": "LOUD"}, "invalid value for trace level option: LOUD"),
        ({"rate": "x"}, "Unable to parse 'trace_rate', got: x"),
        ({"level": "TIMESTAMPS", "rate": 0}, "sample rate must be non-zero"),
        ({"file": "/tmp/t.json"}, "unknown setting 'file'"),
    ],
)
def test_the_start_settings_are_checked_when_the_app_is_built(tracing: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
        oip_app(MODELS, tracing=tracing)
    levels = start_setting({"level": ["timestamps", "TENSORS"], "count": "-1"}).trace_level
    assert levels == ("TIMESTAMPS", "TENSORS")
    assert start_setting({"level": ["TIMESTAMPS", "off"]}).trace_level == ()  # OFF anywhere, as Triton's parser
