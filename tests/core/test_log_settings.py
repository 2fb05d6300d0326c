"""Triton's logging extension (issue 39): ``GET``/``POST /v2/logging`` and gRPC ``LogSettings`` read and change
what the server's loggers write, with Triton's errors for a bad setting, on both wires, in process.
tests/e2e/test_settings_e2e.py drives the same with tritonclient against `oip-asgi serve`."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest

from oip_asgi import oip_app
from oip_asgi._core import log_settings
from oip_asgi._core.log_settings import SWITCHES, TritonFormat
from oip_asgi._declarations.python_backend import utils as pb_utils
from oip_asgi.grpc import inference_pb2 as pb
from oip_asgi.grpc import inference_pb2_grpc
from tests.apps.guard import models
from tests.support.grpc import grpc_server

INFER = {"inputs": [{"name": "X", "shape": [1], "datatype": "FP32", "data": [1.0]}]}
TRITON_DEFAULTS = {
    "log_file": "",
    "log_info": True,
    "log_warning": True,
    "log_error": True,
    "log_verbose_level": 0,
    "log_format": "default",
}


class Kept(logging.Handler):
    """A handler on the ``oip_asgi`` logger that keeps each line it takes, formatted."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def kept() -> Iterator[Kept]:
    handler = Kept()
    handler.setFormatter(TritonFormat(logging.Formatter("%(levelname)s:%(name)s:%(message)s")))
    logger = logging.getLogger("oip_asgi")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)  # Triton's start: INFO, WARNING and ERROR on, no verbose lines
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def rest(app: Any, method: str, body: object = None, *, raw: bytes | None = None) -> httpx.Response:
    async def call() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://oip") as client:
            if raw is not None:
                return await client.request(method, "/logging", content=raw)
            return await client.request(method, "/logging", json=body)

    return asyncio.run(call())


def log_everything() -> None:
    """One line at each of Triton's levels, from the server's loggers and a Python model's pb_utils.Logger."""
    logging.getLogger("oip_asgi").error("an error")
    logging.getLogger("oip_asgi.grpc").warning("a warning")
    logging.getLogger("oip_asgi.access").info("an info line")
    pb_utils.Logger.log_verbose("a verbose line")
    logging.getLogger("oip_asgi").log(logging.DEBUG - 1, "a level 2 verbose line")


def test_get_tells_the_settings_and_a_post_changes_only_what_it_names(kept: Kept) -> None:
    app = oip_app(models)
    assert rest(app, "GET").json() == TRITON_DEFAULTS
    changed = rest(app, "POST", {"log_verbose_level": 1, "log_warning": False, "log_info": None})
    assert changed.status_code == 200
    assert changed.json() == {**TRITON_DEFAULTS, "log_verbose_level": 1, "log_warning": False}
    assert rest(app, "GET").json() == changed.json()
    log_everything()
    assert [line.split(":", 1)[0] for line in kept.lines] == ["ERROR", "INFO", "DEBUG"]


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({}, ["an error", "a warning", "an info line"]),
        ({"log_info": False}, ["an error", "a warning"]),
        ({"log_warning": False}, ["an error", "an info line"]),  # a level off between two that are on
        ({"log_error": False, "log_warning": False}, ["an info line"]),
        ({"log_info": False, "log_warning": False, "log_error": False}, []),
        ({"log_verbose_level": 1}, ["an error", "a warning", "an info line", "a verbose line"]),
        (
            {"log_verbose_level": 2, "log_info": False},
            ["an error", "a warning", "a verbose line", "a level 2 verbose line"],
        ),
    ],
    ids=["as-started", "no-info", "no-warning", "info-only", "nothing", "verbose-1", "verbose-2-no-info"],
)
def test_each_switch_acts_on_the_server_s_lines_and_pb_utils_verbose_lines(
    kept: Kept, settings: dict[str, Any], expected: list[str]
) -> None:
    """Verbose lines (pb_utils.Logger.log_verbose, Triton's verbose level 1) appear only at a verbose level."""
    assert rest(oip_app(models), "POST", settings).status_code == 200
    log_everything()
    assert [line.rsplit(":", 1)[1] for line in kept.lines] == expected


def test_iso8601_lays_lines_out_as_triton_and_default_as_before(kept: Kept) -> None:
    app = oip_app(models)
    assert rest(app, "POST", {"log_format": "ISO8601"}).json()["log_format"] == "ISO8601"
    pb_utils.Logger.log_warn('a "quoted"\nline')
    assert rest(app, "POST", {"log_format": "default"}).json()["log_format"] == "default"
    logging.getLogger("oip_asgi").warning("plain again")
    iso, plain = kept.lines
    stamp, level, pid, where, message = iso.split(" ", 4)
    assert stamp.endswith("Z") and stamp[4] == "-" and stamp[10] == "T" and level == "W" and pid.isdigit()
    assert where == "test_log_settings.py:" + where.split(":")[1] and where.endswith("]")  # the model's line
    assert json.loads(message) == 'a "quoted"\nline'  # one line, escaped as Triton escapes messages
    assert plain == "WARNING:oip_asgi:plain again"


# Every bad setting: Triton's words on REST, its code and words on gRPC (src/http_server.cc and
# src/grpc/grpc_server.cc of Triton 2.51). Where Triton's REST answers a client's mistake 500 (TritonJson's
# INTERNAL) or 503 (an unknown log_format), this server answers 400, as every malformed request.
REST_REFUSALS = [
    ({"log_file": "/tmp/elsewhere.log"}, 501, "log file location can not be updated through network protocol"),
    ({"log_info": "false"}, 400, "attempt to access JSON non-boolean as boolean"),
    ({"log_warning": 0}, 400, "attempt to access JSON non-boolean as boolean"),
    ({"log_error": [True]}, 400, "attempt to access JSON non-boolean as boolean"),
    ({"log_verbose_level": -1}, 400, "attempt to access JSON non-unsigned-integer as unsigned-integer"),
    ({"log_verbose_level": 1.5}, 400, "attempt to access JSON non-unsigned-integer as unsigned-integer"),
    ({"log_verbose_level": True}, 400, "attempt to access JSON non-unsigned-integer as unsigned-integer"),
    ({"log_format": 8601}, 400, "attempt to access JSON non-string as string"),
    ({"log_format": "iso8601"}, 400, "invalid argument for --log_format, got: iso8601"),
    # Checked in Triton's order: the first refusal is the answer, and nothing before it applied.
    ({"log_info": False, "log_format": "json"}, 400, "invalid argument for --log_format, got: json"),
]


@pytest.mark.parametrize(("body", "status", "message"), REST_REFUSALS, ids=[json.dumps(b) for b, _, _ in REST_REFUSALS])
def test_rest_refuses_a_bad_setting_as_triton_and_changes_nothing(
    body: dict[str, Any], status: int, message: str
) -> None:
    app = oip_app(models)
    before = rest(app, "GET").json()
    refused = rest(app, "POST", body)
    assert (refused.status_code, refused.json()) == (status, {"error": message})
    assert rest(app, "GET").json() == before
    assert rest(app, "POST", {"log_file": None}).status_code == 200  # null: Triton's no change


def test_rest_refuses_a_body_that_is_not_json_and_keeps_serving() -> None:
    app = oip_app(models)
    refused = rest(app, "POST", raw=b'{"log_info": tru')
    assert refused.status_code == 400
    assert refused.json()["error"].startswith("failed to parse the request JSON buffer: ")
    assert rest(app, "POST", raw=b"").status_code == 200  # an empty body changes nothing
    assert rest(app, "POST", [1, 2]).json() == rest(app, "GET").json()  # no object: no setting named

    async def infer() -> int:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://oip") as client:
            return (await client.post("/models/identity/infer", json=INFER)).status_code

    assert asyncio.run(infer()) == 200


def value(choice: str, given: object) -> pb.LogSettingsRequest.SettingValue:
    setting = pb.LogSettingsRequest.SettingValue()
    setattr(setting, choice, given)
    return setting


GRPC_REFUSALS = [
    ({"log_file": value("string_param", "x.log")}, grpc.StatusCode.UNIMPLEMENTED, log_settings.FILE_REFUSED),
    ({"log_file": pb.LogSettingsRequest.SettingValue()}, grpc.StatusCode.UNIMPLEMENTED, log_settings.FILE_REFUSED),
    ({"log_info": value("string_param", "true")}, grpc.StatusCode.INVALID_ARGUMENT, "expect boolean for 'log_info'"),
    (
        {"log_error": pb.LogSettingsRequest.SettingValue()},
        grpc.StatusCode.INVALID_ARGUMENT,
        "expect boolean for 'log_error'",
    ),
    (
        {"log_verbose_level": value("bool_param", True)},
        grpc.StatusCode.INVALID_ARGUMENT,
        "expect int32 for 'log_verbose_level'",
    ),
    ({"log_format": value("uint32_param", 1)}, grpc.StatusCode.INVALID_ARGUMENT, "expect string for 'log_format'"),
    (
        {"log_format": value("string_param", "xml")},
        grpc.StatusCode.INVALID_ARGUMENT,
        "invalid argument for log_format, got: xml",
    ),
]


def test_grpc_reads_and_changes_the_settings_and_refuses_as_triton() -> None:
    app = oip_app(models)
    with grpc_server(app) as address, grpc.insecure_channel(address) as channel:
        stub = inference_pb2_grpc.GRPCInferenceServiceStub(channel)
        before = stub.LogSettings(pb.LogSettingsRequest(), timeout=10)
        assert set(before.settings) == set(TRITON_DEFAULTS)
        changed = stub.LogSettings(
            pb.LogSettingsRequest(
                settings={"log_verbose_level": value("uint32_param", 3), "log_format": value("string_param", "ISO8601")}
            ),
            timeout=10,
        )
        assert changed.settings["log_verbose_level"].uint32_param == 3
        assert changed.settings["log_format"].string_param == "ISO8601"
        assert changed.settings["log_file"].WhichOneof("parameter_choice") == "string_param"
        assert changed.settings["log_info"].bool_param is before.settings["log_info"].bool_param
        assert rest(app, "GET").json()["log_verbose_level"] == 3  # one set of settings, both wires
        for settings, code, message in GRPC_REFUSALS:
            with pytest.raises(grpc.RpcError) as refused:
                stub.LogSettings(pb.LogSettingsRequest(settings=settings), timeout=10)
            assert (refused.value.code(), refused.value.details()) == (code, message), settings
        assert stub.LogSettings(pb.LogSettingsRequest(), timeout=10) == changed  # nothing refused applied


def test_a_host_s_own_levels_are_what_get_tells() -> None:
    logger = logging.getLogger("oip_asgi")
    logger.setLevel(logging.WARNING)
    assert rest(oip_app(models), "GET").json() == {**TRITON_DEFAULTS, "log_info": False}
    logger.setLevel(logging.DEBUG)
    assert rest(oip_app(models), "GET").json() == {**TRITON_DEFAULTS, "log_verbose_level": 1}
    assert not SWITCHES.iso8601
