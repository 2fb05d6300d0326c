"""The OpenAI API's request bodies as msgspec Structs, decoded once per request; unknown fields are tolerated.

Each decoder is built once. msgspec's errors name the field by its JSON path (``$.messages[0].role``),
which the 400 passes on. Declared are the fields this server honours and those it knows and cannot
honour (``tools``, ``logit_bias``, ``n`` above 1, ...), which `refusals.NOT_SERVED` refuses by name;
any other field is tolerated.
"""

from __future__ import annotations

from typing import Any

import msgspec

# `stop`: one string or up to four, as OpenAI's API takes them.
Stop = str | list[str] | None


class StreamOptions(msgspec.Struct, frozen=True, gc=False):
    include_usage: bool = False


class Sampling(msgspec.Struct, frozen=True, kw_only=True):
    """The fields every generating request shares, and which go into the model's ``sampling_parameters``."""

    model: str
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: Stop = None
    seed: int | None = None
    n: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    logprobs: Any = None
    logit_bias: Any = None  # refused (refusals.py)
    user: str | None = None


class CompletionRequest(Sampling, frozen=True, kw_only=True):
    prompt: str | list[str]
    echo: bool = False
    best_of: int | None = None
    suffix: str | None = None


class ContentPart(msgspec.Struct, frozen=True, gc=False):
    """One part of a message's content given as a list; only text parts can reach a text model."""

    type: str
    text: str | None = None


class Message(msgspec.Struct, frozen=True, kw_only=True):
    role: str
    content: str | list[ContentPart] | None = None
    name: str | None = None


class ChatRequest(Sampling, frozen=True, kw_only=True):
    messages: list[Message]
    max_completion_tokens: int | None = None
    top_logprobs: int | None = None
    # Known, not served: refused when they ask for something (refusals.py).
    tools: Any = None
    tool_choice: Any = None
    parallel_tool_calls: Any = None
    functions: Any = None
    function_call: Any = None
    response_format: Any = None
    modalities: Any = None
    audio: Any = None
    prediction: Any = None
    web_search_options: Any = None


class EmbeddingRequest(msgspec.Struct, frozen=True, kw_only=True):
    model: str
    input: str | list[str]
    encoding_format: str = "float"  # checked by the exchange, whose message lists the choices
    dimensions: int | None = None
    user: str | None = None


completion_decoder = msgspec.json.Decoder(CompletionRequest)
chat_decoder = msgspec.json.Decoder(ChatRequest)
embedding_decoder = msgspec.json.Decoder(EmbeddingRequest)
encoder = msgspec.json.Encoder()
