"""The OpenAI API's request bodies as msgspec Structs, decoded once per request; unknown fields are tolerated.

Each decoder is built once. msgspec's errors name the field by its JSON path (``$.messages[0].role``),
which the 400 passes on, so a field of the wrong type (``"ignore_eos": 1``) is a 400 naming it. Declared
are the fields this server serves, vLLM's own sampling parameters it passes on to the model, and those it
knows and does not serve (``tools``, ``logit_bias``, ``n`` above 1, vLLM's ``use_beam_search``, ...),
which `refusals.NOT_SERVED` refuses by name; any other field is tolerated.
"""

from __future__ import annotations

from typing import Any

import msgspec

# `stop`: one string or several, as OpenAI's API takes them.
Stop = str | list[str] | None


class StreamOptions(msgspec.Struct, frozen=True, gc=False):
    include_usage: bool = False
    continuous_usage_stats: bool | None = None  # vLLM's; refused when true (sampling.py)


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
    logit_bias: Any = None  # refused (refusals.py)
    user: str | None = None
    # vLLM's own sampling parameters, passed on (sampling.py checks them as vLLM does).
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    min_tokens: int | None = None
    ignore_eos: bool | None = None
    stop_token_ids: list[int] | None = None
    include_stop_str_in_output: bool | None = None
    skip_special_tokens: bool | None = None
    spaces_between_special_tokens: bool | None = None
    allowed_token_ids: list[int] | None = None
    bad_words: list[str] | None = None
    # vLLM's, known and not served: refused when they ask for something (refusals.py).
    use_beam_search: Any = None
    length_penalty: Any = None
    prompt_logprobs: Any = None
    structured_outputs: Any = None
    guided_json: Any = None
    guided_regex: Any = None
    guided_choice: Any = None
    guided_grammar: Any = None
    logits_processors: Any = None
    truncate_prompt_tokens: Any = None
    return_tokens_as_token_ids: Any = None
    priority: Any = None


class CompletionRequest(Sampling, frozen=True, kw_only=True):
    prompt: str | list[str]
    echo: bool = False
    best_of: int | None = None
    suffix: str | None = None
    logprobs: int | None = None  # how many of the most likely tokens a position lists (0 to 5)


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
    logprobs: bool | None = None
    top_logprobs: int | None = None  # with logprobs: how many of the most likely tokens a position lists (0 to 20)
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
    # vLLM's chat fields, known and not served.
    echo: Any = None
    add_generation_prompt: Any = None
    continue_final_message: Any = None
    chat_template: Any = None
    chat_template_kwargs: Any = None
    documents: Any = None


class EmbeddingRequest(msgspec.Struct, frozen=True, kw_only=True):
    model: str
    input: Any  # a text, texts, token ids or lists of them: checked by the exchange, which names the element
    encoding_format: str = "float"  # checked by the exchange, whose message lists the choices
    dimensions: int | None = None
    user: str | None = None


completion_decoder = msgspec.json.Decoder(CompletionRequest)
chat_decoder = msgspec.json.Decoder(ChatRequest)
embedding_decoder = msgspec.json.Decoder(EmbeddingRequest)
encoder = msgspec.json.Encoder()
