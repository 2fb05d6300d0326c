"""An OpenAI request's body decoded, and a completion's prompt: each mistake a 400 naming its field.

What the request asks of the model besides its prompt is `sampling`'s.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from .errors import InvalidField
from .schemas import CompletionRequest

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
    if not isinstance(prompt, str):
        if len(prompt) != 1:
            raise InvalidField(f"prompt holds {len(prompt)} prompts; give one per request", param="prompt")
        prompt = prompt[0]
    if not prompt:
        raise InvalidField("prompt must not be empty", param="prompt")
    return prompt
