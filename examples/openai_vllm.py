"""A toy LLM that follows Triton's vLLM backend: its whole tensor convention and its sampling rules, runnable
anywhere (no GPU, no download): ``oip-asgi serve examples.openai_vllm:models --openai``.

- ``toy``: a character-level language model (its tokens are the characters of `VOCAB`, then an end of
  sequence, ``</s>``), whose next-token logits come from a fixed table of the last character. It samples
  as vLLM does: ``temperature`` 0 is greedy, otherwise ``top_k``, ``top_p`` and ``min_p`` keep the
  likeliest tokens, drawn from a generator seeded by ``seed`` (random without one); ``presence_penalty``,
  ``frequency_penalty`` and ``repetition_penalty`` penalise the tokens generated; it ends at ``max_tokens``
  (16 unless asked, vLLM's default: ``length``), at its end of sequence unless ``ignore_eos`` (not before
  ``min_tokens``), at a ``stop`` string (left out of the text unless ``include_stop_str_in_output``) or a
  ``stop_token_ids`` token (``stop``). It answers as the vLLM backend does: one response a token when
  ``stream`` is true, else one with the whole text (the prompt first unless ``exclude_input_in_output``);
  with the outputs its ``return_*`` inputs ask for: ``finish_reason`` ("None" until the last response),
  ``num_input_tokens`` (one a character of the prompt), ``num_output_tokens`` (that response's tokens),
  ``logprobs`` (the response's tokens: the sampled one first, then the ``logprobs`` likeliest, by rank,
  as JSON) and ``cumulative_logprob``. A sampling parameter vLLM's SamplingParams does not have fails the
  request, as it fails the backend.
- ``toy_embed``: the vLLM backend's embedding task on the same tensors: ``embedding_request`` (JSON: the
  ``input``, a text or token ids, and ``pooling_params``' ``dimensions``) in, the embedding as a JSON list
  in ``text_output``; a generation request to it fails, as one to ``toy`` asking for an embedding does.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from oip_asgi import Model, TensorSpec

VOCAB = "abcdefghijklmnopqrstuvwxyz .,!?"
EOS = len(VOCAB)  # the end of sequence token, decoded as "</s>" and left out of the text
SIZE = len(VOCAB) + 1
# vLLM's SamplingParams' fields the toy reads; any other key fails the request, as it fails vLLM's constructor.
KNOWN = {
    "n", "max_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "stop", "stop_token_ids", "ignore_eos",
    "min_tokens", "presence_penalty", "frequency_penalty", "repetition_penalty", "logprobs",
    "include_stop_str_in_output", "skip_special_tokens", "spaces_between_special_tokens", "allowed_token_ids",
    "bad_words",
}  # fmt: skip
_TABLE = np.random.default_rng(283).normal(0.0, 2.0, size=(SIZE + 1, SIZE))  # next-token logits by last token
_TABLE[:, EOS] -= 3.0  # the end of sequence is rare, but likeliest after a sentence's end
for _end in ".!?":
    _TABLE[VOCAB.index(_end), EOS] = _TABLE[VOCAB.index(_end)].max() + 1.0


def token_of(character: str) -> int:
    return VOCAB.index(character) if character in VOCAB else VOCAB.index(" ")


def decoded(token: int) -> str:
    return "</s>" if token == EOS else VOCAB[token]


@dataclass
class Step:
    """One generated token: its id, its text in the answer ("" for the end of sequence) and its logprobs."""

    token: int
    text: str
    logprobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    logprob: float = 0.0


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    finite = logits[np.isfinite(logits)]
    top = finite.max() if finite.size else 0.0
    shifted = logits - top
    return shifted - math.log(float(np.exp(shifted).sum()))


def generate(prompt: str, settings: dict[str, Any]) -> tuple[list[Step], str, str]:
    """The steps of an answer to `prompt`, its text (without a stop string) and its finish reason."""
    unknown = sorted(set(settings) - KNOWN)
    if unknown:
        raise TypeError(f"SamplingParams.__init__() got an unexpected keyword argument {unknown[0]!r}")
    if settings.get("n", 1) != 1:
        raise ValueError("the toy answers one sequence")
    temperature = float(settings.get("temperature", 1.0))
    max_tokens = int(settings.get("max_tokens") or 16)
    min_tokens = int(settings.get("min_tokens", 0))
    top_k, top_p, min_p = int(settings.get("top_k", 0)), float(settings.get("top_p", 1.0)), settings.get("min_p", 0.0)
    stops = settings.get("stop") or []
    stops = [stops] if isinstance(stops, str) else stops
    stop_ids = set(settings.get("stop_token_ids") or [])
    listed = settings.get("logprobs")
    rng = np.random.default_rng(settings.get("seed"))
    counts = np.zeros(SIZE)
    previous = token_of(prompt[-1]) if prompt else SIZE
    steps: list[Step] = []
    text = ""
    reason = "length"
    while len(steps) < max_tokens:
        logits = _TABLE[previous].copy()
        logits -= float(settings.get("frequency_penalty", 0.0)) * counts
        logits -= float(settings.get("presence_penalty", 0.0)) * (counts > 0)
        penalty = float(settings.get("repetition_penalty", 1.0))
        seen = counts > 0
        logits[seen] = np.where(logits[seen] > 0, logits[seen] / penalty, logits[seen] * penalty)
        if settings.get("ignore_eos") or len(steps) < min_tokens:
            logits[EOS] = -math.inf
        logprobs = _log_softmax(logits)
        if temperature == 0:
            token = int(np.argmax(logits))
        else:
            weights = logits / temperature
            order = np.argsort(-weights)
            if top_k > 0:
                weights[order[top_k:]] = -math.inf
            probabilities = np.exp(_log_softmax(weights))
            kept = np.cumsum(probabilities[order]) - probabilities[order] < top_p  # the nucleus
            weights[order[~kept]] = -math.inf
            weights[probabilities < min_p * probabilities.max()] = -math.inf
            probabilities = np.exp(_log_softmax(weights))
            token = int(rng.choice(SIZE, p=probabilities / probabilities.sum()))
        step = Step(token, "" if token == EOS else VOCAB[token], logprob=float(logprobs[token]))
        if listed is not None:
            ranks = np.argsort(-logprobs, kind="stable")
            rank_of = {int(candidate): rank + 1 for rank, candidate in enumerate(ranks)}
            for candidate in [token, *map(int, ranks[: int(listed)])]:
                entry = {"logprob": float(logprobs[candidate]), "rank": rank_of[candidate]}
                step.logprobs.setdefault(str(candidate), {**entry, "decoded_token": decoded(candidate)})
        steps.append(step)
        counts[token] += 1
        previous = token
        text += step.text
        if token == EOS or token in stop_ids:
            reason = "stop"
            break
        found = next((stop for stop in stops if text.endswith(stop)), None)
        if found is not None:
            reason = "stop"
            if not settings.get("include_stop_str_in_output"):
                text = text[: len(text) - len(found)]
            break
    return steps, text, reason


def _flag(array: np.ndarray | None) -> bool:
    return bool(array is not None and array.ravel()[0])


def _text(value: str) -> np.ndarray:
    return np.array([value.encode()], dtype=object)


def _response(text: str, steps: list[Step], reason: str | None, prompt: str, asked: dict[str, bool]) -> dict[str, Any]:
    response = {"text_output": _text(text)}
    if asked["return_finish_reason"]:
        response["finish_reason"] = _text(str(reason))
    if asked["return_num_input_tokens"]:
        response["num_input_tokens"] = np.array([len(prompt)], dtype=np.uint32)
    if asked["return_num_output_tokens"]:
        response["num_output_tokens"] = np.array([len(steps)], dtype=np.uint32)
    if asked["return_logprobs"]:
        listed = [step.logprobs for step in steps] if steps and steps[0].logprobs else None
        response["logprobs"] = _text(json.dumps(listed))
    if asked["return_cumulative_logprob"]:
        response["cumulative_logprob"] = np.array([sum(step.logprob for step in steps)], dtype=np.float32)
    return response


RETURNS = ("finish_reason", "cumulative_logprob", "logprobs", "num_input_tokens", "num_output_tokens")


async def toy(
    text_input: np.ndarray, embedding_request: np.ndarray | None = None, **inputs: np.ndarray
) -> AsyncIterator[dict[str, Any]]:
    if embedding_request is not None:
        raise ValueError("Model toy does not support 'embed' request")
    prompt = text_input.ravel()[0].decode()
    stream = _flag(inputs.get("stream"))
    exclude = inputs.get("exclude_input_in_output")
    prepend = not _flag(exclude) if exclude is not None else not stream  # the backend's default
    if prepend and stream:
        raise ValueError("When streaming, `exclude_input_in_output` = False is not allowed.")
    parameters = inputs.get("sampling_parameters")
    settings = json.loads(parameters.ravel()[0]) if parameters is not None else {}
    asked = {f"return_{name}": _flag(inputs.get(f"return_{name}")) for name in RETURNS}
    steps, text, reason = generate(prompt, settings)
    if not stream:
        yield _response((prompt if prepend else "") + text, steps, reason, prompt, asked)
        return
    sent = 0
    for index, step in enumerate(steps):
        last = index == len(steps) - 1
        shown = len(text) if last else min(sent + len(step.text), len(text))  # a stop string is held back
        yield _response(text[sent:shown], [step], reason if last else None, prompt, asked)
        sent = shown


def embedding(item: str | list[int], dimensions: int) -> list[float]:
    """The toy's embedding of a text (or token ids): its characters counted by their place in `VOCAB`, folded
    into `dimensions` and normalised."""
    tokens = [token_of(character) for character in item] if isinstance(item, str) else [int(t) for t in item]
    row = np.zeros(dimensions)
    for token in tokens:
        row[token % dimensions] += 1.0
    return (row / max(float(np.linalg.norm(row)), 1.0)).tolist()


async def toy_embed(
    text_input: np.ndarray, embedding_request: np.ndarray | None = None, **inputs: np.ndarray
) -> AsyncIterator[dict[str, Any]]:
    if embedding_request is None:
        raise ValueError("Model toy_embed does not support 'generate' request")
    asked = json.loads(embedding_request.ravel()[0])
    item = asked["input"]
    dimensions = (asked.get("pooling_params") or {}).get("dimensions", [8])[0]
    response = {"text_output": _text(json.dumps(embedding(item, dimensions)))}
    if _flag(inputs.get("return_num_input_tokens")):
        response["num_input_tokens"] = np.array([len(item)], dtype=np.uint32)
    if _flag(inputs.get("return_num_output_tokens")):
        response["num_output_tokens"] = np.array([0], dtype=np.uint32)
    yield response


def _optional(name: str, datatype: str, dims: list[int]) -> TensorSpec:
    return TensorSpec(name, datatype, dims, optional=True)


# The vLLM backend's inputs and outputs, as its auto-completed config.pbtxt declares them.
INPUTS = [
    TensorSpec("text_input", "BYTES", [1]),
    _optional("image", "BYTES", [-1]),
    _optional("stream", "BOOL", [1]),
    _optional("sampling_parameters", "BYTES", [1]),
    _optional("exclude_input_in_output", "BOOL", [1]),
    *(_optional(f"return_{name}", "BOOL", [1]) for name in RETURNS),
    _optional("embedding_request", "BYTES", [1]),
]
OUTPUTS = [
    TensorSpec("text_output", "BYTES", [-1]),
    TensorSpec("finish_reason", "BYTES", [-1]),
    TensorSpec("cumulative_logprob", "FP32", [-1]),
    TensorSpec("logprobs", "BYTES", [-1]),
    TensorSpec("num_input_tokens", "UINT32", [1]),
    TensorSpec("num_output_tokens", "UINT32", [-1]),
]
CHAT_TEMPLATE = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"

models: dict[str, Any] = {
    "toy": Model(toy, inputs=INPUTS, outputs=OUTPUTS, properties={"chat_template": CHAT_TEMPLATE}),
    "toy_embed": Model(toy_embed, inputs=INPUTS, outputs=OUTPUTS),
}
