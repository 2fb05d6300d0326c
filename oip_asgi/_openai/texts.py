"""What an OpenAI request asks of an LLM-convention model: its prompt, its sampling parameters, checked.

The fields the server knows and cannot honour are refused by name rather than ignored (`refusals`).
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from .errors import InvalidField
from .refusals import refuse_not_served
from .schemas import ChatRequest, CompletionRequest, Sampling

_PATH = re.compile(r" - at `\$\.?(?P<path>[^`]*)`$")
_MISSING = re.compile(r"missing required field `(?P<field>[^`]+)`")


def decoded(decoder: msgspec.json.Decoder[Any], body: bytes) -> Any:
    """`body` decoded, or a 400 with msgspec's words and the field it names as ``param``."""
    if not body.strip():
        raise InvalidField("the request has no body: send a JSON object", param=None)
    try:
        return decoder.decode(body)
    except msgspec.ValidationError as exc:
        message = str(exc)
        found = _PATH.search(message)
        param = found.group("path") or None if found else None
        missing = _MISSING.search(message)
        if missing is not None:
            param = f"{param}.{missing.group('field')}" if param else missing.group("field")
        raise InvalidField(f"invalid request: {message}", param=param) from None
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise InvalidField(f"the request body is not JSON: {exc}", param=None) from None


def prompt_of(request: CompletionRequest) -> str:
    prompt = request.prompt
    if isinstance(prompt, str):
        return prompt
    if len(prompt) != 1:
        raise InvalidField(f"prompt holds {len(prompt)} prompts; give one per request", param="prompt")
    return prompt[0]


def max_tokens_of(request: Sampling) -> int | None:
    if isinstance(request, ChatRequest) and request.max_completion_tokens is not None:
        return request.max_completion_tokens
    return request.max_tokens


def sampling_parameters(request: Sampling) -> dict[str, Any]:
    """The model's ``sampling_parameters``: the sampling fields the request sets, checked."""
    refuse_not_served(request)
    max_tokens = max_tokens_of(request)
    if max_tokens is not None and max_tokens < 1:
        raise InvalidField(f"max_tokens must be at least 1, got {max_tokens}", param="max_tokens")
    if request.stream_options is not None and not request.stream:
        raise InvalidField("stream_options is only allowed when stream is true", param="stream_options")
    sampling: dict[str, Any] = {}
    for key, value in (
        ("max_tokens", max_tokens),
        ("temperature", request.temperature),
        ("top_p", request.top_p),
        ("stop", request.stop),
        ("seed", request.seed),
        ("n", request.n),
        ("presence_penalty", request.presence_penalty),
        ("frequency_penalty", request.frequency_penalty),
    ):
        if value is not None:
            sampling[key] = value
    return sampling
