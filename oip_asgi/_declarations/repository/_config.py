"""A model's ``config.pbtxt`` (or a load request's config JSON) read into Triton's ``ModelConfig``, as JSON.

Protobuf parses and checks both (field names, types, enum values), through the ``ModelConfig``
message generated into ``oip_asgi._protobuf.inference_pb2``: that is why reading a config needs
protobuf (the ``repository`` extra; not grpcio). The JSON is written as Triton's configuration
endpoint writes it: proto field names, enum values by name, 64-bit integers as numbers, only the
fields that are set.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..extras import install_line


class ConfigError(ValueError):
    """A config that protobuf cannot read as Triton's ModelConfig."""


# What the repository acts on; anything else set in a config is named in the model's one warning.
HONOURED: dict[str, Any] = {
    "name": True,
    "platform": True,
    "backend": True,
    "max_batch_size": True,
    "version_policy": True,
    "default_model_filename": True,
    "parameters": True,
    "input": {"name": True, "data_type": True, "dims": True, "optional": True, "reshape": True},
    "output": {"name": True, "data_type": True, "dims": True, "label_filename": True, "reshape": True},
    "dynamic_batching": {"max_queue_delay_microseconds": True},
    "model_transaction_policy": {"decoupled": True},
}
# A Triton Python model's instance groups are its instances (python_backend/instances.py).
HONOURED_PYTHON_BACKEND: dict[str, Any] = {
    **HONOURED,
    "instance_group": {"name": True, "kind": True, "count": True, "gpus": True},
}


def _protobuf() -> tuple[Any, Any, Any]:
    try:
        from google.protobuf import json_format, text_format

        from ..._protobuf import inference_pb2
    except ImportError as exc:
        raise ConfigError(f"reading a model's config needs protobuf: {install_line('repository')}") from exc
    return text_format, json_format, inference_pb2


def read_pbtxt(file: Path) -> dict[str, Any]:
    """``config.pbtxt`` in Triton's text format, as ModelConfig JSON."""
    text_format, _, pb = _protobuf()
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {file.name}: {exc}") from exc
    try:
        message = text_format.Parse(text, pb.ModelConfig())
    except text_format.ParseError as exc:
        raise ConfigError(f"{file.name} is not a valid Triton ModelConfig: {exc}") from exc
    return to_json(message)


def checked_json(config: Mapping[str, Any]) -> dict[str, Any]:
    """A load request's config JSON, checked by parsing it as ModelConfig, in the same form as a read one."""
    _, json_format, pb = _protobuf()
    try:
        message = json_format.ParseDict(dict(config), pb.ModelConfig())
    except (json_format.ParseError, TypeError, ValueError) as exc:
        raise ConfigError(f"the config is not a valid Triton ModelConfig: {exc}") from exc
    return to_json(message)


def to_json(message: Any) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for field, value in message.ListFields():
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            result[field.name] = {key: _value(value_field, item) for key, item in value.items()}
        elif _repeated(field):
            result[field.name] = [_value(field, item) for item in value]
        else:
            result[field.name] = _value(field, value)
    return result


def _repeated(field: Any) -> bool:
    # protobuf 6 has `is_repeated` and no `label`; 5 has `label` (3 is LABEL_REPEATED).
    is_repeated = getattr(field, "is_repeated", None)
    return bool(is_repeated) if is_repeated is not None else bool(field.label == 3)


def _value(field: Any, value: Any) -> Any:
    if field.message_type is not None:
        return to_json(value)
    if field.enum_type is not None:
        return field.enum_type.values_by_number[value].name
    return value  # numbers (64-bit ones stay numbers, as Triton writes them), strings, booleans


def unacted(config: Mapping[str, Any], honoured: Mapping[str, Any] = HONOURED, where: str = "") -> list[str]:
    """The fields set in `config` that the repository does not act on, as dotted paths."""
    found: list[str] = []
    for key, value in config.items():
        rule = honoured.get(key)
        path = f"{where}{key}"
        if rule is True:
            continue
        if rule is None:
            found.append(path)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                found.extend(unacted(item, rule, f"{path}[{index}]."))
        else:
            found.extend(unacted(value, rule, f"{path}."))
    return found
