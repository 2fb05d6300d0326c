"""OpenAI's request fields this server knows and does not serve, in one table: each refused by name.

A client that sets one of these asks for something the answer would silently lack (a tool call, a token
bias, JSON checked against a schema), so it gets OpenAI's 400 with ``param`` naming the field rather
than plain text. A field is refused only when its value asks for something: the value that asks
for nothing (unset, ``n: 1``, ``tool_choice: "none"``, ``response_format: {"type": "text"}``) is served.
Each field is declared in `schemas` so that decoding keeps it; a field the server comes to serve leaves
this table and goes to the model's ``sampling_parameters`` (`sampling`).
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


def _true(value: Any) -> bool:
    return value is None or value is True


def _no_penalty(value: Any) -> bool:
    return value is None or value == 1


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
    "suffix": NotServed(_empty, "suffix is not supported", CompletionRequest),
    # Token-level control the model's sampling parameters do not carry (Triton's vLLM backend neither).
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
    # vLLM's own fields that Triton's vLLM backend does not take, or this server does not do.
    "use_beam_search": NotServed(_empty, "use_beam_search is not served: the model samples, one sequence"),
    "length_penalty": NotServed(_no_penalty, "length_penalty (beam search's) is not served"),
    "prompt_logprobs": NotServed(_unset, "prompt_logprobs are not served: the model gives no prompt logprobs"),
    **{
        field: NotServed(_unset, f"{field} (structured outputs) is not served: {_TEXT_ONLY}, not held to a format")
        for field in ("structured_outputs", "guided_json", "guided_regex", "guided_choice", "guided_grammar")
    },
    "logits_processors": NotServed(_empty, "logits_processors are not served"),
    "truncate_prompt_tokens": NotServed(_unset, "truncate_prompt_tokens is not served: the prompt goes whole"),
    "return_tokens_as_token_ids": NotServed(_empty, "return_tokens_as_token_ids is not served: tokens come as text"),
    "priority": NotServed(_empty, "priority is not served: requests are not scheduled by priority"),
    "echo": NotServed(_empty, "echo is not served on chats (it is on completions)", ChatRequest),
    "add_generation_prompt": NotServed(
        _true, "add_generation_prompt {value} is not served: the model answers next", ChatRequest
    ),
    "continue_final_message": NotServed(
        _empty, "continue_final_message is not served: the model answers next", ChatRequest
    ),
    "chat_template": NotServed(_unset, "chat_template is not served: the model's own renders the chat", ChatRequest),
    "chat_template_kwargs": NotServed(_empty, "chat_template_kwargs are not served", ChatRequest),
    "documents": NotServed(_unset, "documents are not served: the chat template sees the messages", ChatRequest),
}


def refuse_not_served(request: Sampling) -> None:
    """A 400 naming the first field of `request` that asks for what this server does not do."""
    for field, rule in NOT_SERVED.items():
        if not isinstance(request, rule.request):
            continue
        value = getattr(request, field)
        if not rule.asks_nothing(value):
            raise InvalidField(rule.why.format(value=value), param=field)
