"""What a generating request asks of the model, checked where OpenAI checks it: its sampling parameters (the
JSON object Triton's vLLM backend reads as ``sampling_parameters``), token logprobs, the echo, the usage.

Three kinds of fields (docs/openai.md has the table):

- OpenAI's sampling fields, served: each checked as OpenAI checks it (`OPENAI_BOUNDS`: ``temperature`` in
  [0, 2], ``top_p`` in (0, 1], the penalties in [-2, 2], ``max_tokens`` at least 1, ...) and passed on;
  token logprobs (a chat's ``logprobs``/``top_logprobs``, a completion's ``logprobs``) become vLLM's
  ``logprobs``, the number of most likely tokens each position lists;
- vLLM's own sampling parameters (`VLLM_FIELDS`), passed on with their types (msgspec's) and ranges
  (`VLLM_BOUNDS`, as vLLM's SamplingParams checks them) checked;
- the fields known and not served, refused by name (`refusals`).

A value out of range is OpenAI's 400: ``Invalid 'temperature': decimal above maximum value. Expected a value
<= 2, but got 2.5 instead.``, ``param`` the field and ``code`` OpenAI's (``decimal_above_max_value``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .errors import InvalidField
from .refusals import refuse_not_served
from .schemas import ChatRequest, CompletionRequest, Sampling

# (lowest, highest, whether the lowest is excluded); None: no bound on that side.
Bound = tuple[float | None, float | None, bool]
INT64 = (-(2**63), 2**63 - 1)

OPENAI_BOUNDS: dict[str, Bound] = {
    "temperature": (0, 2, False),
    "top_p": (0, 1, True),
    "presence_penalty": (-2, 2, False),
    "frequency_penalty": (-2, 2, False),
    "max_tokens": (1, None, False),
    "n": (1, None, False),
    "seed": (*INT64, False),
}
CHAT_BOUNDS: dict[str, Bound] = {"max_completion_tokens": (1, None, False), "top_logprobs": (0, 20, False)}
COMPLETION_BOUNDS: dict[str, Bound] = {"logprobs": (0, 5, False)}

# vLLM's own sampling parameters, passed on to the model as they are (after their checks).
VLLM_FIELDS = (
    "top_k",
    "min_p",
    "repetition_penalty",
    "min_tokens",
    "ignore_eos",
    "stop_token_ids",
    "include_stop_str_in_output",
    "skip_special_tokens",
    "spaces_between_special_tokens",
    "allowed_token_ids",
    "bad_words",
)
VLLM_BOUNDS: dict[str, Bound] = {
    "top_k": (-1, None, False),  # 0 (or -1) considers every token
    "min_p": (0, 1, False),
    "repetition_penalty": (0, None, True),
    "min_tokens": (0, None, False),
}
# OpenAI's sampling fields passed on under their own names (max_tokens and the logprobs apart).
_OPENAI_FIELDS = ("temperature", "top_p", "stop", "seed", "n", "presence_penalty", "frequency_penalty")


@dataclass(frozen=True, slots=True)
class Asked:
    """What a request asks of an LLM-convention model, checked: its ``sampling_parameters`` (vLLM's
    ``logprobs`` among them when `logprobs` is not None: that many most likely tokens a position), whether
    the answer repeats the prompt first (a completion's `echo`), and whether it reports the usage."""

    sampling: dict[str, Any]
    max_tokens: int | None
    logprobs: int | None
    echo: bool
    usage: bool


def asked(request: ChatRequest | CompletionRequest) -> Asked:
    """`request`'s sampling fields checked, and what it asks of the model; a 400 naming the first field that
    is out of range, mistaken, or not served."""
    _bounded(request, OPENAI_BOUNDS)
    _bounded(request, VLLM_BOUNDS)
    refuse_not_served(request)
    logprobs: int | None = None
    echo = False
    if isinstance(request, ChatRequest):
        _bounded(request, CHAT_BOUNDS)
        if request.top_logprobs and not request.logprobs:  # 0 asks for nothing
            raise InvalidField("top_logprobs needs logprobs: true", param="top_logprobs")
        if request.logprobs:
            logprobs = request.top_logprobs or 0
        max_tokens = request.max_tokens if request.max_completion_tokens is None else request.max_completion_tokens
    else:
        _bounded(request, COMPLETION_BOUNDS)
        logprobs, echo, max_tokens = request.logprobs, request.echo, request.max_tokens
        if echo and logprobs is not None:
            raise InvalidField(
                "logprobs with echo are not served: the model gives no logprobs of the prompt's tokens",
                param="logprobs",
            )
    stops = [request.stop] if isinstance(request.stop, str) else request.stop or []
    if any(stop == "" for stop in stops):
        raise InvalidField("stop cannot contain an empty string", param="stop")
    if request.min_tokens is not None and max_tokens is not None and request.min_tokens > max_tokens:
        raise InvalidField(
            f"min_tokens must be at most max_tokens ({max_tokens}), got {request.min_tokens}", param="min_tokens"
        )
    options = request.stream_options
    if options is not None:
        if not request.stream:
            raise InvalidField("stream_options is only allowed when stream is true", param="stream_options")
        if options.continuous_usage_stats:
            raise InvalidField(
                "stream_options.continuous_usage_stats is not served: the usage comes once, after the last chunk",
                param="stream_options.continuous_usage_stats",
            )
    fields = (*_OPENAI_FIELDS, *VLLM_FIELDS)
    sampling = {field: value for field in fields if (value := getattr(request, field)) is not None}
    if max_tokens is not None:
        sampling["max_tokens"] = max_tokens
    if logprobs is not None:
        sampling["logprobs"] = logprobs
    usage = not request.stream or bool(options is not None and options.include_usage)
    return Asked(sampling, max_tokens, logprobs, echo, usage)


def _bounded(request: Sampling, bounds: dict[str, Bound]) -> None:
    for field, (low, high, low_open) in bounds.items():
        value = getattr(request, field)
        if value is None:
            continue
        kind = "integer" if isinstance(value, int) else "decimal"
        if kind == "decimal" and not math.isfinite(value):
            raise InvalidField(f"Invalid {field!r}: expected a finite number, but got {value} instead.", param=field)
        if low is not None and (value <= low if low_open else value < low):
            wanted = f"> {low}" if low_open else f">= {low}"
            raise InvalidField(
                f"Invalid {field!r}: {kind} below minimum value. Expected a value {wanted}, but got {value} instead.",
                param=field,
                code=f"{kind}_below_min_value",
            )
        if high is not None and value > high:
            raise InvalidField(
                f"Invalid {field!r}: {kind} above maximum value. Expected a value <= {high}, but got {value} instead.",
                param=field,
                code=f"{kind}_above_max_value",
            )
