"""gRPC's halves of Triton's logging and trace extensions: ``LogSettings`` and ``TraceSetting``, their
messages to the core's changes (checked there, in Triton's words) and its settings back to messages."""

from __future__ import annotations

from .._core import log_settings, trace_settings
from .._core.log_settings import LogSettings
from .._core.server import ServerCore
from .._core.trace_settings import TraceSettingsResponse
from .._protobuf import inference_pb2 as pb


def log_settings_rpc(request: pb.LogSettingsRequest) -> pb.LogSettingsResponse:
    """The settings after the request's change them (none given: as they are)."""
    if request.settings:
        given = {
            key: (choice, None if choice is None else getattr(value, choice))
            for key, value in request.settings.items()
            for choice in [value.WhichOneof("parameter_choice")]
        }
        settings = log_settings.update(log_settings.grpc_changes(given))
    else:
        settings = log_settings.current()
    return _log_response(settings)


def _log_response(settings: LogSettings) -> pb.LogSettingsResponse:
    response = pb.LogSettingsResponse()
    for key in settings.__struct_fields__:
        value = getattr(settings, key)
        entry = response.settings[key]
        if isinstance(value, bool):
            entry.bool_param = value
        elif isinstance(value, int):
            entry.uint32_param = min(value, 2**32 - 1)  # REST takes larger ones, as Triton's does
        else:
            entry.string_param = value
    return response


async def trace_setting_rpc(core: ServerCore, request: pb.TraceSettingRequest) -> pb.TraceSettingResponse:
    """The settings of the request's model (or the global ones) after the request's change them."""
    name = request.model_name or None
    if name is not None:
        await core.trace_settings(name)  # an unknown model is refused before its settings are read, as Triton does
    given = {key: list(value.value) for key, value in request.settings.items()}
    settings = await core.trace_settings(name, trace_settings.grpc_changes(given) if given else None)
    return _trace_response(settings)


def _trace_response(settings: TraceSettingsResponse) -> pb.TraceSettingResponse:
    response = pb.TraceSettingResponse()
    for key in settings.__struct_fields__:
        value = getattr(settings, key)
        response.settings[key].value.extend(value if isinstance(value, list) else [value])
    return response
