"""Triton's load request as `ServerCore.load_model`'s typed arguments, refused in Triton's words.

The repository extension's load carries its parameters as a map: ``config`` (ModelConfig JSON
text) and ``file:<path>`` (a file's bytes, which a config then refers to). A Triton Python model's
``pb_utils.load_model`` gives the same two things as its own arguments. Both become a `LoadArguments`
here, once: the wires (REST, which base64-decodes the files first, and gRPC) call `load_arguments`, the
Python backend's host `python_load_arguments`. An unload's one parameter, ``unload_dependents``, is read
by `unload_dependents` for both wires.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

from .._declarations.errors import BadRequest, quoted


class LoadArguments(NamedTuple):
    config: dict[str, Any] | None
    files: dict[str, bytes] | None


def load_arguments(name: str, parameters: Mapping[str, object]) -> LoadArguments:
    """The repository extension's load parameters for the model `name`, checked in order."""
    config = None
    files: dict[str, bytes] = {}
    for key, value in parameters.items():
        if key == "config":
            config = _config(name, value)
        elif key.startswith("file:"):
            files[key.removeprefix("file:")] = _file(name, key, value)
    return _arguments(name, config, files)


def unload_dependents(parameters: Mapping[str, object]) -> bool:
    """The repository extension's unload parameter ``unload_dependents`` (a boolean; False when left out)."""
    value = parameters.get("unload_dependents", False)
    if not isinstance(value, bool):
        raise BadRequest(f"Unable to parse 'unload_dependents': expected a boolean, got {type(value).__name__}")
    return value


def python_load_arguments(name: str, config: str, files: Mapping[str, object] | None) -> LoadArguments:
    """``pb_utils.load_model``'s arguments (an empty `config`: none given)."""
    contents = {path: _file(name, f"file:{path}", content) for path, content in (files or {}).items()}
    return _arguments(name, _config(name, config) if config else None, contents)


def _config(name: str, value: object) -> dict[str, Any]:
    try:
        config = json.loads(value)  # type: ignore[arg-type]  # not text: the TypeError below says so
    except (TypeError, ValueError) as exc:
        raise BadRequest(f"failed to load {quoted(name)}: parameter config is not JSON: {exc}") from None
    if not isinstance(config, dict):
        raise BadRequest(f"failed to load {quoted(name)}: parameter config must be a JSON object")
    return config


def _file(name: str, key: str, value: object) -> bytes:
    if not isinstance(value, bytes):
        raise BadRequest(f"failed to load {quoted(name)}: parameter {quoted(key)} must be bytes")
    return value


def _arguments(name: str, config: dict[str, Any] | None, files: dict[str, bytes]) -> LoadArguments:
    if files and config is None:  # as Triton: files come with the config they go with
        raise BadRequest(f"failed to load {quoted(name)}: file parameters need a config parameter too")
    return LoadArguments(config, files or None)
