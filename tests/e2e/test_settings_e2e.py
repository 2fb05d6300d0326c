"""Triton's logging and trace extensions (issue 39) against a real `oip-asgi serve`, with tritonclient's own
calls over both wires: `get_log_settings`/`update_log_settings` and `get_trace_settings`/`update_trace_settings`,
global and per model; what they change shows in the server's log file and in the spans its process exports;
every bad setting gets Triton's error, and the server keeps serving; the `logging` and `trace` restricted-API
groups guard them on both wires; server metadata lists both extensions."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.support.servers import HOST, Server, free_port, serving
from tests.support.waiting import wait_until, whole_lines

httpclient = pytest.importorskip("tritonclient.http")
grpcclient = pytest.importorskip("tritonclient.grpc")
pytest.importorskip("opentelemetry.sdk")
from google.protobuf import json_format  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

pytestmark = pytest.mark.slow

# A Python model that writes a verbose line and an info line per request, each naming the request's value.
CONFIG = (
    'backend: "python"\ninput [{ name: "IN", data_type: TYPE_INT32, dims: [1] }]\n'
    'output [{ name: "OUT", data_type: TYPE_INT32, dims: [1] }]\n'
)
MODEL = """import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            value = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            pb_utils.Logger.log_verbose(f"verbose {int(value[0])}")
            pb_utils.Logger.log_info(f"info {int(value[0])}")
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", value)]))
        return responses
"""


@dataclass
class Served:
    server: Server
    http: Any
    grpc: Any
    log: Path  # the server's --log-file
    spans: Path  # the spans its process exports, one JSON line each
    folder: Path

    def lines(self) -> list[str]:
        return whole_lines(self.log)

    def spans_of(self, model: str) -> list[dict[str, Any]]:
        spans = map(json.loads, whole_lines(self.spans))
        return [span for span in spans if span["attributes"]["oip.model.name"] == model]

    def infer(self, model: str, count: int = 1) -> None:
        for _ in range(count):
            tensor = httpclient.InferInput("X", [2], "FP32")
            tensor.set_data_from_numpy(np.array([1.0, 2.0], np.float32))
            assert self.http.infer(model, [tensor]).as_numpy("Y").tolist() == [1.0, 2.0]

    def python_model(self, value: int) -> None:
        tensor = grpcclient.InferInput("IN", [1], "INT32")
        tensor.set_data_from_numpy(np.array([value], np.int32))
        assert self.grpc.infer("pylog", [tensor]).as_numpy("OUT").tolist() == [value]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("settings")
    (folder / "repository" / "pylog" / "1").mkdir(parents=True)
    (folder / "repository" / "pylog" / "config.pbtxt").write_text(CONFIG)
    (folder / "repository" / "pylog" / "1" / "model.py").write_text(MODEL)
    log, spans = folder / "server.log", folder / "spans.jsonl"
    port, grpc_port = free_port(), free_port()
    argv = [
        "-m", "oip_asgi", "serve", "tests.apps.tracing:models", "--model-repository", str(folder / "repository"),
        "--host", HOST, "--http-port", str(port), "--grpc-port", str(grpc_port),
        "--log-file", str(log), "--log-format", "ISO8601",
        "--trace-config", "level=TIMESTAMPS", "--trace-config", "rate=2",
    ]  # fmt: skip
    with serving(argv, port, env={"OIP_TEST_SPANS": str(spans)}, cwd=folder) as server:
        http = httpclient.InferenceServerClient(server.address)
        grpc = grpcclient.InferenceServerClient(f"{HOST}:{grpc_port}")
        try:
            yield Served(server, http, grpc, log, spans, folder)
        finally:
            http.close()
            grpc.close()


def grpc_json(message: Any) -> dict[str, Any]:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)["settings"]  # type: ignore[no-any-return]


def test_log_settings_over_both_wires_act_on_the_server_and_on_pb_utils_verbose_lines(served: Served) -> None:
    started = {
        "log_file": str(served.log),
        "log_info": True,
        "log_warning": True,
        "log_error": True,
        "log_verbose_level": 0,
        "log_format": "ISO8601",
    }
    assert served.http.get_log_settings() == started
    assert grpc_json(served.grpc.get_log_settings()) == {
        "log_file": {"string_param": str(served.log)},
        "log_info": {"bool_param": True},
        "log_warning": {"bool_param": True},
        "log_error": {"bool_param": True},
        "log_verbose_level": {"uint32_param": 0},
        "log_format": {"string_param": "ISO8601"},
    }
    served.python_model(1)  # no verbose level: the model's info line only, as Triton
    wait_until(lambda: any(line.endswith('] "info 1"') for line in served.lines()), "the model's info line")
    line = next(line for line in served.lines() if line.endswith('] "info 1"'))
    assert line.split(" ")[1:4] == ["I", str(served.server.pid), "model.py:10]"]  # Triton's ISO8601 layout
    updated = served.grpc.update_log_settings({"log_verbose_level": 1}, as_json=True)["settings"]
    assert updated["log_verbose_level"] == {"uint32_param": 1}
    served.python_model(2)
    served.http.update_log_settings({"log_info": False, "log_verbose_level": 0})
    served.python_model(3)  # INFO off: neither line
    assert served.http.update_log_settings({"log_info": True}) == started
    served.python_model(4)
    wait_until(lambda: any(line.endswith('] "info 4"') for line in served.lines()), "the last info line")
    told = [line.rsplit("] ", 1)[1] for line in served.lines() if "model.py" in line]
    assert told == ['"info 1"', '"verbose 2"', '"info 2"', '"info 4"']


def test_a_bad_log_setting_gets_triton_s_error_and_a_request_never_names_a_file(served: Served) -> None:
    elsewhere = served.folder / "elsewhere.log"
    refusals = [
        (served.http.update_log_settings, {"log_file": str(elsewhere)}, "log file location can not be updated"),
        (served.grpc.update_log_settings, {"log_file": str(elsewhere)}, "log file location can not be updated"),
        (served.http.update_log_settings, {"log_format": "xml"}, "invalid argument for --log_format, got: xml"),
        (served.grpc.update_log_settings, {"log_format": "xml"}, "invalid argument for log_format, got: xml"),
        (served.http.update_log_settings, {"log_info": "yes"}, "attempt to access JSON non-boolean as boolean"),
    ]
    for update, settings, message in refusals:
        with pytest.raises(InferenceServerException, match=message):
            update(settings)
    statuses = []
    for update in (served.http.update_log_settings, served.grpc.update_log_settings):
        with pytest.raises(InferenceServerException) as refused:
            update({"log_file": "x.log"})
        statuses.append(refused.value.status())
    assert statuses == ["501", "StatusCode.UNIMPLEMENTED"]
    assert not elsewhere.exists() and not (served.folder / "x.log").exists()
    assert served.http.get_log_settings()["log_format"] == "ISO8601"  # nothing refused applied
    served.infer("simple")


def test_trace_settings_over_both_wires_sample_the_spans_the_process_exports(served: Served) -> None:
    started = {"trace_level": ["TIMESTAMPS"], "trace_rate": "2", "trace_count": "-1", "trace_mode": "opentelemetry"}
    assert served.http.get_trace_settings() == started
    assert served.http.get_trace_settings(model_name="other") == started
    listed = {key: {"value": value if isinstance(value, list) else [value]} for key, value in started.items()}
    assert grpc_json(served.grpc.get_trace_settings(model_name="other")) == listed
    served.infer("simple", 4)  # --trace-config rate=2: two of the four
    wait_until(lambda: len(served.spans_of("simple")) == 2, "two spans")
    span = served.spans_of("simple")[0]
    assert span["name"] == "oip.model simple" and span["events"][0] == "REQUEST_START"
    assert span["events"][-1] == "REQUEST_END" and "COMPUTE_START" in span["events"]
    # A model's own settings, by gRPC: every request, once; then cleared back to the global ones, by REST.
    own = served.grpc.update_trace_settings(
        model_name="other", settings={"trace_rate": "1", "trace_count": "1", "trace_level": ["TENSORS"]}, as_json=True
    )
    assert own["settings"]["trace_count"] == {"value": ["1"]}
    served.infer("other", 3)
    wait_until(lambda: len(served.spans_of("other")) == 1, "the model's one span")
    assert served.spans_of("other")[0]["events"] == ["TENSOR_QUEUE_INPUT", "TENSOR_BACKEND_OUTPUT"]
    assert served.http.get_trace_settings(model_name="other")["trace_count"] == "0"
    cleared = {"trace_rate": None, "trace_count": None, "trace_level": None}
    assert served.http.update_trace_settings(model_name="other", settings=cleared) == started
    served.grpc.update_trace_settings(settings={"trace_level": ["OFF"]})
    served.infer("simple", 2)
    served.http.update_trace_settings(settings={"trace_level": ["TIMESTAMPS"], "trace_rate": "1"})
    served.infer("other")  # the marker: its span comes after any the untraced requests would have made
    wait_until(lambda: len(served.spans_of("other")) == 2, "the marker's span")
    assert len(served.spans_of("simple")) == 2
    served.http.update_trace_settings(settings={"trace_rate": "2"})


def test_a_bad_trace_setting_gets_triton_s_error_and_the_server_keeps_serving(served: Served) -> None:
    before = served.http.get_trace_settings()
    refusals = [
        (lambda: served.http.update_trace_settings(settings={"trace_file": "t.json"}), "501", "trace file location"),
        (lambda: served.grpc.update_trace_settings(settings={"trace_file": "t.json"}), "UNIMPLEMENTED", "trace file"),
        (lambda: served.http.update_trace_settings(settings={"trace_rate": "fast"}), "400", "Unable to parse"),
        (lambda: served.grpc.update_trace_settings(settings={"trace_count": "-3"}), "INVALID_ARGUMENT", ">= -1"),
        (lambda: served.http.update_trace_settings(settings={"trace_level": ["OFF", "TENSORS"]}), "400", "'OFF'"),
        (lambda: served.http.get_trace_settings(model_name="nope"), "400", "Request for unknown model : nope"),
        (lambda: served.grpc.get_trace_settings(model_name="nope"), "INVALID_ARGUMENT", "unknown model : nope"),
    ]
    for call, status, words in refusals:
        with pytest.raises(InferenceServerException) as refused:
            call()
        assert status in str(refused.value.status()) and words in refused.value.message()
    assert served.http.get_trace_settings() == before
    assert not (served.folder / "t.json").exists()
    served.infer("simple")


def test_server_metadata_lists_both_extensions_on_both_wires(served: Served) -> None:
    listed = served.http.get_server_metadata()["extensions"]
    assert {"logging", "trace"} <= set(listed)
    assert list(served.grpc.get_server_metadata().extensions) == listed


def test_the_logging_and_trace_groups_guard_both_wires_as_triton_s_options_say() -> None:
    port, grpc_port = free_port(), free_port()
    rules = "logging,trace:admin-key=s3cret"
    argv = [
        "-m", "oip_asgi", "serve", "tests.apps.tracing:models", "--host", HOST, "--http-port", str(port),
        "--grpc-port", str(grpc_port), "--http-restricted-api", rules, "--grpc-restricted-protocol", rules,
    ]  # fmt: skip
    with serving(argv, port) as server:
        http = httpclient.InferenceServerClient(server.address)
        grpc = grpcclient.InferenceServerClient(f"{HOST}:{grpc_port}")
        try:
            calls = [
                (http.get_log_settings, "403", "expecting header 'admin-key'"),
                (lambda **kw: http.update_trace_settings(settings={"trace_rate": "5"}, **kw), "403", "'admin-key'"),
                (grpc.get_log_settings, "UNAVAILABLE", "expecting header 'triton-grpc-protocol-admin-key'"),
                (lambda **kw: grpc.update_trace_settings(model_name="simple", settings={"trace_rate": "5"}, **kw),
                 "UNAVAILABLE", "'triton-grpc-protocol-admin-key'"),
            ]  # fmt: skip
            for call, status, words in calls:
                with pytest.raises(InferenceServerException) as refused:
                    call()
                assert status in str(refused.value.status()) and words in refused.value.message()
            key = {"admin-key": "s3cret"}
            assert http.get_trace_settings(headers=key)["trace_rate"] == "1000"  # nothing refused applied
            assert http.get_log_settings(headers=key)["log_info"] is True
            assert http.update_trace_settings(settings={"trace_rate": "5"}, headers=key)["trace_rate"] == "5"
            own = grpc.update_trace_settings(
                model_name="simple",
                settings={"trace_rate": "7"},
                headers={"triton-grpc-protocol-admin-key": "s3cret"},
                as_json=True,
            )
            assert own["settings"]["trace_rate"] == {"value": ["7"]}
            assert http.get_trace_settings(model_name="other", headers=key)["trace_rate"] == "5"
            assert http.is_server_ready() and grpc.is_server_ready()  # other groups are not guarded
        finally:
            http.close()
            grpc.close()
