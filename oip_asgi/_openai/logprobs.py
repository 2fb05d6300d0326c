"""Token logprobs: the vLLM backend's ``logprobs`` output read, and written as OpenAI's chat and completion
``logprobs``.

Each response of the vLLM backend carries its new tokens' logprobs as JSON: a list with one object per
token position, mapping token ids to ``{"logprob", "rank", "decoded_token"}``, the sampled token first
(as vLLM builds them) and then the most likely ones; ``null`` when there are none. Here the sampled token
is a position's ``token`` and ``logprob``, and its ``top_logprobs`` are the `top` most likely tokens (by
rank): a chat's a list of them, a completion's a mapping of token to logprob that also holds the sampled
token (OpenAI's "up to logprobs + 1"). A logprob is at least -9999, as vLLM writes -inf (JSON has none).

A streamed chunk's logprobs are written as JSON at once, from pieces kept for each token's text (its
JSON string and its UTF-8 bytes: tokens repeat), without building OpenAI's objects first: it is the
hot path of a stream that asks for them. A whole answer's are the same pieces, joined once.
"""

from __future__ import annotations

import json

import msgspec

from .._declarations.errors import ModelError, quoted
from .schemas import encoder

_FLOOR = -9999.0
_KEPT = 65536  # the tokens whose pieces are kept (a vocabulary's worth)


class TokenLogprob(msgspec.Struct, frozen=True, gc=False):
    logprob: float
    decoded_token: str
    rank: int | None = None


Position = dict[str, TokenLogprob]
_Positions = list[Position] | None
_decoder = msgspec.json.Decoder(_Positions)


def positions(model: str, raw: bytes) -> list[Position]:
    """The token positions of one response's ``logprobs`` output (none for ``null``)."""
    try:
        try:
            found = _decoder.decode(raw)
        except msgspec.DecodeError:  # Python's json writes -Infinity for a logprob of -inf, which is not JSON
            found = msgspec.convert(json.loads(raw), _Positions)
    except (ValueError, msgspec.ValidationError) as exc:
        raise ModelError(
            f"model {quoted(model)}'s logprobs output is not the vLLM backend's (a JSON list of token ids to "
            f"logprob, rank and decoded_token): {exc}"
        ) from None
    return found or []


def _rank(entry: TokenLogprob) -> int:
    return entry.rank if entry.rank is not None else 2**31


def _number(logprob: float) -> bytes:
    return encoder.encode(logprob if logprob >= _FLOOR else _FLOOR)  # -inf, and NaN, become the floor


# Each token's JSON pieces: `"token":"<text>","logprob":`, and `,"bytes":[...]`.
_PIECES: dict[str, tuple[bytes, bytes, bytes]] = {}


def _pieces(token: str) -> tuple[bytes, bytes, bytes]:
    """`token`'s JSON string, its chat object's opening (up to its logprob) and its bytes' field."""
    found = _PIECES.get(token)
    if found is None:
        text = encoder.encode(token)
        found = (text, b'{"token":' + text + b',"logprob":', b',"bytes":' + encoder.encode(list(token.encode())))
        if len(_PIECES) < _KEPT:
            _PIECES[token] = found
    return found


class TokenLogprobs:
    """One answer's token logprobs, `top` most likely tokens a position, as chat (`chat`) or completion ones:
    each streamed chunk's (`chunk`), or the whole answer's (`add`, then `whole`)."""

    __slots__ = ("_chat", "_offset", "_top", "_whole")

    def __init__(self, *, chat: bool, top: int) -> None:
        self._chat = chat
        self._top = top
        self._offset = 0  # a completion's text_offset: where the next token starts in the text
        # The whole answer's: a chat's tokens; a completion's offsets, logprobs, tokens and top logprobs.
        self._whole: list[list[bytes]] = [[]] if chat else [[], [], [], []]

    def chunk(self, found: list[Position]) -> bytes:
        """The `logprobs` of a streamed chunk holding these positions, as JSON."""
        if self._chat:  # a stream's every token: the chat's tokens written straight
            if len(found) == 1 and found[0]:  # a chunk's usual one token
                return b'{"content":[' + self._chat_token(found[0]) + b"]}"
            return _chat_json([self._chat_token(position) for position in found if position])
        return _completion_json(self._parts(found))

    def add(self, found: list[Position]) -> None:
        """Keep these positions for the whole answer."""
        for whole, part in zip(self._whole, self._parts(found), strict=True):
            whole += part

    def whole(self) -> msgspec.Raw:
        """The whole answer's `logprobs`, for its choice."""
        return msgspec.Raw(_chat_json(self._whole[0]) if self._chat else _completion_json(self._whole))

    def _parts(self, found: list[Position]) -> list[list[bytes]]:
        if self._chat:
            return [[self._chat_token(position) for position in found if position]]
        parts: list[list[bytes]] = [[], [], [], []]
        for position in found:
            if position:
                self._completion_token(position, parts)
        return parts

    def _ranked(self, position: Position) -> list[TokenLogprob]:
        """The `top` most likely tokens of a position, by rank (in the model's order where it gives none)."""
        entries = list(position.values())
        if len(entries) > 1:
            entries.sort(key=_rank)
        return entries[: self._top]

    def _chat_token(self, position: Position) -> bytes:
        """One position as a chat's token logprob: ``{"token", "logprob", "bytes", "top_logprobs"}``."""
        chosen = next(iter(position.values()))
        token = chosen.decoded_token
        _, opening, held = _PIECES.get(token) or _pieces(token)
        logprob = chosen.logprob
        own = opening + (encoder.encode(logprob) if logprob >= _FLOOR else _number(logprob)) + held
        if not self._top:
            return own + b',"top_logprobs":[]}'
        if len(position) == 1:  # the sampled token alone: it is the likeliest too (a stream's usual position)
            return own + b',"top_logprobs":[' + own + b"}]}"
        top = []
        for entry in self._ranked(position):
            _, opening, held = _PIECES.get(entry.decoded_token) or _pieces(entry.decoded_token)
            top.append(opening + _number(entry.logprob) + held + b"}")
        return own + b',"top_logprobs":[' + b",".join(top) + b"]}"

    def _completion_token(self, position: Position, into: list[list[bytes]]) -> None:
        """One position as a completion's: its text offset, logprob, token and top logprobs, each into its list."""
        chosen = next(iter(position.values()))
        token = chosen.decoded_token
        text = _pieces(token)[0]
        logprob = _number(chosen.logprob)
        top = {text: logprob}  # the sampled token's, unless among the likeliest
        if self._top:
            top = {_pieces(entry.decoded_token)[0]: _number(entry.logprob) for entry in self._ranked(position)}
            top.setdefault(text, logprob)
        into[0].append(b"%d" % self._offset)
        into[1].append(logprob)
        into[2].append(text)
        into[3].append(b"{" + b",".join(key + b":" + value for key, value in top.items()) + b"}")
        self._offset += len(token)


def _chat_json(tokens: list[bytes]) -> bytes:
    return b'{"content":[' + b",".join(tokens) + b"]}"


def _completion_json(parts: list[list[bytes]]) -> bytes:
    offsets, logprobs, tokens, top = (b"[" + b",".join(part) + b"]" for part in parts)
    return (
        b'{"text_offset":'
        + offsets
        + b',"token_logprobs":'
        + logprobs
        + b',"tokens":'
        + tokens
        + (b',"top_logprobs":' + top + b"}")
    )
