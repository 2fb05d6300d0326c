"""OpenAI's request fields this server knows and does not serve, in one table: each refused by name.

A client that sets one of these asks for something the answer would silently lack (a tool call, token
probabilities, JSON checked against a schema), so it gets OpenAI's 400 with ``param`` naming the field
rather than plain text. A field is refused only when its value asks for something: the value that asks
for nothing (unset, ``n: 1``, ``tool_choice: "none"``, ``response_format: {"type": "text"}``) is served.
Each field is declared in `schemas` so that decoding keeps it; a field the server comes to serve leaves
this table and goes to the model's ``sampling_parameters`` (`texts`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import InvalidField
from .schemas import ChatRequest, CompletionRequest, Sampling

_TEXT_ONLY = "the model answers text"


def _unset(value: Any) -> bool:
    return value is None


def _empty(value: Any) -> bool:
    return value is None or value is False or value == 0 or value == {} or value == [] or value == ""


def _one(value: Any) -> bool:
    return value is None or value == 1


def _no_call(value: Any) -> bool:
    return value is None or value == "none"


def _text_format(value: Any) -> bool:
    return value is None or (isinstance(value, dict) and value.get("type") == "text")


def _text_modality(value: Any) -> bool:
    return value is None or value == ["text"]


@dataclass(frozen=True)
class NotServed:
    """A field that asks for what the server does not do, unless `asks_nothing(value)`; `why` is the 400's
    message (``{value}`` is the value sent); `request` the request kind that has the field."""

    asks_nothing: Callable[[Any], bool]
    why: str
    request: type[Sampling] = Sampling


NOT_SERVED: dict[str, NotServed] = {
    # One choice of text per request.
    "n": NotServed(_one, "n must be 1 (one choice per request), got {value}"),
    "best_of": NotServed(_one, "best_of must be 1, got {value}", CompletionRequest),
    "echo": NotServed(_empty, "echo is not supported: the answer never repeats the prompt", CompletionRequest),
    "suffix": NotServed(_empty, "suffix is not supported", CompletionRequest),
    # Token-level control and reports: the model gives text, not tokens.
    "logprobs": NotServed(_empty, "logprobs are not available: the model gives text, not token probabilities"),
    "top_logprobs": NotServed(
        _empty, "top_logprobs is not available: the model gives text, not token probabilities", ChatRequest
    ),
    "logit_bias": NotServed(_empty, "logit_bias is not served: the model's sampling takes no token biases"),
    # Tool calling: the answer is text, never a call.
    "tools": NotServed(_empty, f"tools are not served: {_TEXT_ONLY}, never a tool call", ChatRequest),
    "tool_choice": NotServed(
        _no_call, f"tool_choice {{value!r}} is not served: {_TEXT_ONLY}, never a tool call", ChatRequest
    ),
    "parallel_tool_calls": NotServed(
        _unset, f"parallel_tool_calls is not served: {_TEXT_ONLY}, never a tool call", ChatRequest
    ),
    "functions": NotServed(_empty, f"functions are not served: {_TEXT_ONLY}, never a function call", ChatRequest),
    "function_call": NotServed(
        _no_call, f"function_call {{value!r}} is not served: {_TEXT_ONLY}, never a function call", ChatRequest
    ),
    # Other answers than free text.
    "response_format": NotServed(
        _text_format,
        f"response_format {{value}} is not served: {_TEXT_ONLY}, not checked against a format",
        ChatRequest,
    ),
    "modalities": NotServed(_text_modality, f"modalities {{value}} are not served: {_TEXT_ONLY} only", ChatRequest),
    "audio": NotServed(_unset, f"audio is not served: {_TEXT_ONLY} only", ChatRequest),
    "prediction": NotServed(_unset, "prediction (predicted outputs) is not served", ChatRequest),
    "web_search_options": NotServed(
        _unset, "web_search_options is not served: the model searches nothing", ChatRequest
    ),
}


def refuse_not_served(request: Sampling) -> None:
    """A 400 naming the first field of `request` that asks for what this server does not do."""
    for field, rule in NOT_SERVED.items():
        if not isinstance(request, rule.request):
            continue
        value = getattr(request, field)
        if not rule.asks_nothing(value):
            raise InvalidField(rule.why.format(value=value), param=field)
