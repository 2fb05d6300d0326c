"""Token logprobs: the vLLM backend's ``logprobs`` output read, and written as OpenAI's chat and completion
``logprobs``.

Each response of the vLLM backend carries its new tokens' logprobs as JSON: a list with one object per
token position, mapping token ids to ``{"logprob", "rank", "decoded_token"}``, the sampled token first
(as vLLM builds them) and then the most likely ones; ``null`` when there are none. Here the sampled token
is a position's ``token`` and ``logprob``, and its ``top_logprobs`` are the `top` most likely tokens (by
rank): a chat's a list of them, a completion's a mapping of token to logprob that also holds the sampled
token (OpenAI's "up to logprobs + 1"). A logprob is at least -9999, as vLLM writes -inf (JSON has none).
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from .._declarations.errors import ModelError, quoted
from .schemas import encoder

_FLOOR = -9999.0


class TokenLogprob(msgspec.Struct, frozen=True, gc=False):
    logprob: float
    decoded_token: str
    rank: int | None = None


Position = dict[str, TokenLogprob]
_Positions = list[Position] | None
_decoder = msgspec.json.Decoder(_Positions)


class TopLogprob(msgspec.Struct, gc=False):
    """A token among a position's likeliest: OpenAI's chat logprob (its text's UTF-8 bytes too)."""

    token: str
    logprob: float
    bytes: list[int]


class ChatTokenLogprob(TopLogprob, gc=False):
    top_logprobs: list[TopLogprob]


class CompletionLogprobs(msgspec.Struct, gc=False):
    text_offset: list[int]
    token_logprobs: list[float]
    tokens: list[str]
    top_logprobs: list[dict[str, float]]


def positions(model: str, raw: bytes) -> list[Position]:
    """The token positions of one response's ``logprobs`` output (none for ``null``)."""
    try:
        found = _decoder.decode(raw)
    except msgspec.DecodeError:  # Python's json writes -Infinity for a logprob of -inf, which is not JSON
        try:
            found = msgspec.convert(json.loads(raw), _Positions)
        except (ValueError, msgspec.ValidationError) as exc:
            raise ModelError(
                f"model {quoted(model)}'s logprobs output is not the vLLM backend's (a JSON list of token ids "
                f"to logprob, rank and decoded_token): {exc}"
            ) from None
    except msgspec.ValidationError as exc:
        raise ModelError(
            f"model {quoted(model)}'s logprobs output is not the vLLM backend's (a JSON list of token ids to "
            f"logprob, rank and decoded_token): {exc}"
        ) from None
    return found or []


def _ranked(position: Position, top: int) -> list[TokenLogprob]:
    """The `top` most likely tokens of a position, by rank (in the model's order where it gives none)."""
    entries = list(position.values())
    if top <= 0:
        return []
    if len(entries) > 1:
        entries.sort(key=lambda entry: entry.rank if entry.rank is not None else 2**31)
    return entries[:top]


def _clamped(logprob: float) -> float:
    return logprob if logprob >= _FLOOR else _FLOOR  # -inf, and NaN, become the floor


class TokenLogprobs:
    """One answer's token logprobs, `top` most likely tokens a position, as chat (`chat`) or completion ones."""

    __slots__ = ("_chat", "_content", "_offset", "_top", "_whole")

    def __init__(self, *, chat: bool, top: int) -> None:
        self._chat = chat
        self._top = top
        self._offset = 0  # a completion's text_offset: where the next token starts in the text
        self._content: list[ChatTokenLogprob] = []
        self._whole = CompletionLogprobs([], [], [], [])

    def chunk(self, found: list[Position]) -> bytes:
        """The `logprobs` of a chunk holding these positions, as JSON; kept for the whole answer too."""
        if self._chat:
            content = [self._chat_token(position) for position in found if position]
            self._content += content
            return b'{"content":' + encoder.encode(content) + b"}"
        part = CompletionLogprobs([], [], [], [])
        for position in found:
            if position:
                self._completion_token(position, part)
        whole = self._whole
        whole.text_offset += part.text_offset
        whole.token_logprobs += part.token_logprobs
        whole.tokens += part.tokens
        whole.top_logprobs += part.top_logprobs
        return encoder.encode(part)

    def add(self, found: list[Position]) -> None:
        """Keep these positions for the whole answer."""
        for position in found:
            if not position:
                continue
            if self._chat:
                self._content.append(self._chat_token(position))
            else:
                self._completion_token(position, self._whole)

    def whole(self) -> Any:
        """The whole answer's `logprobs`, for its choice."""
        return {"content": self._content} if self._chat else self._whole

    def _chat_token(self, position: Position) -> ChatTokenLogprob:
        chosen = next(iter(position.values()))
        top = [
            TopLogprob(entry.decoded_token, _clamped(entry.logprob), list(entry.decoded_token.encode()))
            for entry in _ranked(position, self._top)
        ]
        token = chosen.decoded_token
        return ChatTokenLogprob(token, _clamped(chosen.logprob), list(token.encode()), top)

    def _completion_token(self, position: Position, into: CompletionLogprobs) -> None:
        chosen = next(iter(position.values()))
        token = chosen.decoded_token
        logprob = _clamped(chosen.logprob)
        top = {entry.decoded_token: _clamped(entry.logprob) for entry in _ranked(position, self._top)}
        top.setdefault(token, logprob)
        into.text_offset.append(self._offset)
        into.token_logprobs.append(logprob)
        into.tokens.append(token)
        into.top_logprobs.append(top)
        self._offset += len(token)
