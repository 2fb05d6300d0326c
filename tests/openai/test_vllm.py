"""The vLLM backend's whole tensor convention in-process (issue 38): the toy LLM of examples/openai_vllm.py (and
the same as a Triton Python model) asked for its finish_reason, token counts and logprobs; streamed and whole
answers agree; completions' echo; its embedding task. The real client against a real server is
tests/e2e/test_openai_vllm_e2e.py."""

from __future__ import annotations

import base64
import json
import logging
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

import oip_asgi
from examples.openai import models as examples
from examples.openai_vllm import INPUTS, OUTPUTS, embedding, generate
from examples.openai_vllm import models as toys
from oip_asgi import Model, ModelRepository, TensorSpec

pytest.importorskip("jinja2")
pytestmark = pytest.mark.anyio


def bad_logprobs(text_input: np.ndarray, **inputs: np.ndarray) -> dict[str, np.ndarray]:
    return {
        "text_output": np.array([b"x"], dtype=object),
        "logprobs": np.array([b"[{not json"], dtype=object),
        "finish_reason": np.array([b"stop"], dtype=object),
        "num_input_tokens": np.array([1], dtype=np.uint32),
        "num_output_tokens": np.array([1], dtype=np.uint32),
    }


MODELS: dict[str, Any] = {
    **examples,
    **toys,
    "bad_logprobs": Model(bad_logprobs, inputs=INPUTS, outputs=OUTPUTS),
}
CHAT = [{"role": "user", "content": "hello"}]


@pytest.fixture()
async def client() -> AsyncIterator[httpx.AsyncClient]:
    app = oip_asgi.openai_app(oip_asgi.oip_app(MODELS))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as made:
        yield made


def events(response: httpx.Response) -> list[dict[str, Any]]:
    """A streamed answer's chunks, checked to end with [DONE]."""
    assert response.status_code == 200, response.text
    lines = [line.removeprefix("data: ") for line in response.text.split("\n\n") if line]
    assert lines[-1] == "[DONE]"
    return [json.loads(line) for line in lines[:-1]]


async def both(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The whole answer, and the streamed one put together as a whole one (text, logprobs, reason, usage)."""
    whole = await client.post(path, json=body)
    assert whole.status_code == 200, whole.text
    chat = path == "/chat/completions"
    streamed = {**body, "stream": True, "stream_options": {"include_usage": True}}
    chunks = events(await client.post(path, json=streamed))
    choices = [chunk["choices"][0] for chunk in chunks if chunk["choices"]]
    text = "".join((choice["delta"].get("content") or "") if chat else choice["text"] for choice in choices)
    logprobs: Any = None
    pieces = [choice["logprobs"] for choice in choices if choice["logprobs"] is not None]
    if pieces and chat:
        logprobs = {"content": [token for piece in pieces for token in piece["content"]]}
    elif pieces:
        logprobs = {key: [value for piece in pieces for value in piece[key]] for key in pieces[0]}
    assert chunks[-1]["choices"] == [] and all(chunk["usage"] is None for chunk in chunks[:-1])
    together = {"text": text, "logprobs": logprobs, "finish_reason": choices[-1]["finish_reason"]}
    together["usage"] = chunks[-1]["usage"]
    choice = whole.json()["choices"][0]
    alone = {
        "text": choice["message"]["content"] if chat else choice["text"],
        "logprobs": choice["logprobs"],
        "finish_reason": choice["finish_reason"],
        "usage": whole.json()["usage"],
    }
    return alone, together


# -- finish_reason and usage from the model's own outputs, streamed and whole alike


@pytest.mark.parametrize(
    ("settings", "reason"),
    [
        ({"temperature": 0}, "stop"),  # greedy: "je pu." then the end of sequence
        ({"temperature": 0, "max_tokens": 3}, "length"),
        ({"seed": 7, "max_tokens": 30}, None),
        ({"temperature": 0, "ignore_eos": True, "max_tokens": 12}, "length"),
        ({"temperature": 0, "min_tokens": 9, "max_tokens": 20}, "stop"),
        ({"temperature": 0, "stop": ["pu"]}, "stop"),
    ],
    ids=str,
)
@pytest.mark.parametrize("path", ["/completions", "/chat/completions"])
async def test_streamed_and_whole_answers_agree_on_text_usage_and_the_models_finish_reason(
    client: httpx.AsyncClient, path: str, settings: dict[str, Any], reason: str | None
) -> None:
    body = {"model": "toy", **settings, **({"messages": CHAT} if path == "/chat/completions" else {"prompt": "hello"})}
    alone, together = await both(client, path, body)
    assert alone == together
    prompt = "hello\n" if path == "/chat/completions" else "hello"  # the toy's chat template adds the newline
    steps, text, expected = generate(prompt, {"max_tokens": None, **settings})
    assert alone["text"] == text and alone["finish_reason"] == (reason or expected)
    # The model's counts: a token a character of the prompt; every token generated, the end of sequence too.
    assert alone["usage"] == {"prompt_tokens": len(prompt), "completion_tokens": len(steps),
                              "total_tokens": len(prompt) + len(steps)}  # fmt: skip


async def test_a_seeded_request_answers_the_same_and_another_seed_otherwise(client: httpx.AsyncClient) -> None:
    body = {"model": "toy", "prompt": "hello", "seed": 1, "max_tokens": 16}
    first, second = [(await client.post("/completions", json=body)).json()["choices"][0]["text"] for _ in range(2)]
    other = (await client.post("/completions", json={**body, "seed": 2})).json()["choices"][0]["text"]
    assert first == second != other


async def test_a_model_without_the_pairs_keeps_counting_responses(client: httpx.AsyncClient) -> None:
    """`echo` declares no return_* inputs: its parameters and the responses count, prompt_tokens is 0."""
    whole = (await client.post("/completions", json={"model": "echo", "prompt": "abcdef", "max_tokens": 4})).json()
    assert whole["usage"] == {"prompt_tokens": 0, "completion_tokens": 4, "total_tokens": 4}
    assert whole["choices"][0]["finish_reason"] == "length"
    streamed = {"model": "echo", "prompt": "abcdef", "max_tokens": 4, "stream": True}
    chunks = events(await client.post("/completions", json={**streamed, "stream_options": {"include_usage": True}}))
    assert chunks[-1]["usage"]["completion_tokens"] == 4 and chunks[-2]["choices"][0]["finish_reason"] == "length"


# -- token logprobs


async def test_a_chats_logprobs_are_openais_from_the_models(client: httpx.AsyncClient) -> None:
    body = {"model": "toy", "messages": CHAT, "temperature": 0, "logprobs": True, "top_logprobs": 2}
    alone, together = await both(client, "/chat/completions", body)
    assert alone == together
    steps, text, _ = generate("hello\n", {"temperature": 0, "logprobs": 2})
    content = alone["logprobs"]["content"]
    assert [token["token"] for token in content] == [step.logprobs[str(step.token)]["decoded_token"] for step in steps]
    assert "".join(token["token"] for token in content).removesuffix("</s>") == text
    for token, step in zip(content, steps, strict=True):
        assert token["logprob"] == pytest.approx(step.logprob) and token["bytes"] == list(token["token"].encode())
        ranked = sorted(step.logprobs.values(), key=lambda entry: entry["rank"])[:2]
        assert [top["token"] for top in token["top_logprobs"]] == [entry["decoded_token"] for entry in ranked]
        assert token["top_logprobs"][0]["logprob"] >= token["top_logprobs"][1]["logprob"]
    # top_logprobs 1 at temperature 0: the sampled token is the likeliest, its position's one entry (a stream's usual).
    alone, together = await both(client, "/chat/completions", {**body, "top_logprobs": 1})
    assert alone == together and alone["logprobs"]["content"]
    for token in alone["logprobs"]["content"]:
        assert token["top_logprobs"] == [{key: token[key] for key in ("token", "logprob", "bytes")}]
    # logprobs alone: the sampled tokens, no alternatives (top_logprobs 0, as OpenAI and vLLM answer).
    only = (await client.post("/chat/completions", json={**body, "top_logprobs": None})).json()
    assert all(token["top_logprobs"] == [] for token in only["choices"][0]["logprobs"]["content"])


async def test_a_completions_logprobs_are_openais_from_the_models(client: httpx.AsyncClient) -> None:
    body = {"model": "toy", "prompt": "hello", "seed": 3, "max_tokens": 12, "logprobs": 3}
    alone, together = await both(client, "/completions", body)
    assert alone == together
    logprobs = alone["logprobs"]
    steps, _, _ = generate("hello", {"seed": 3, "max_tokens": 12, "logprobs": 3})
    assert logprobs["tokens"] == [step.logprobs[str(step.token)]["decoded_token"] for step in steps]
    assert logprobs["token_logprobs"] == pytest.approx([step.logprob for step in steps])
    offsets = [sum(len(token) for token in logprobs["tokens"][:index]) for index in range(len(steps))]
    assert logprobs["text_offset"] == offsets
    for top, token in zip(logprobs["top_logprobs"], logprobs["tokens"], strict=True):
        assert token in top and 3 <= len(top) <= 4  # the 3 likeliest, and the sampled token when it is not one
    zero = (await client.post("/completions", json={**body, "logprobs": 0})).json()["choices"][0]["logprobs"]
    assert [list(top) for top in zero["top_logprobs"]] == [[token] for token in zero["tokens"]]


async def test_logprobs_of_a_model_that_gives_none_are_refused_by_name(client: httpx.AsyncClient) -> None:
    for path, body in [
        ("/chat/completions", {"model": "echo", "messages": CHAT, "logprobs": True}),
        ("/completions", {"model": "shout", "prompt": "x", "logprobs": 1}),
    ]:
        found = (await client.post(path, json=body)).json()["error"]
        assert found["param"] == "logprobs" and "gives no token logprobs" in found["message"]


async def test_logprobs_the_model_answers_wrong_are_a_logged_500(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="oip_asgi"):
        answer = await client.post("/completions", json={"model": "bad_logprobs", "prompt": "x", "logprobs": 1})
    assert answer.status_code == 500
    assert "logprobs output is not the vLLM backend's" in answer.json()["error"]["message"]
    assert any("logprobs output is not the vLLM backend's" in record.getMessage() for record in caplog.records)


# -- echo


async def test_echo_puts_the_prompt_before_the_completion_streamed_or_not(client: httpx.AsyncClient) -> None:
    body = {"model": "toy", "prompt": "hello", "temperature": 0, "echo": True}
    alone, together = await both(client, "/completions", body)
    _, text, _ = generate("hello", {"temperature": 0})
    assert alone["text"] == together["text"] == "hello" + text
    assert alone["usage"] == together["usage"]  # the prompt is no completion token
    # A model without exclude_input_in_output (shout): this server puts the prompt first itself.
    shouted = (await client.post("/completions", json={"model": "shout", "prompt": "hey", "echo": True})).json()
    assert shouted["choices"][0]["text"] == "heyHEY"
    refused = (await client.post("/completions", json={**body, "logprobs": 1})).json()["error"]
    assert refused["param"] == "logprobs" and "with echo" in refused["message"]


# -- the vLLM backend's embedding task


async def test_a_vllm_embedding_model_embeds_each_input_as_a_request_of_its_own(client: httpx.AsyncClient) -> None:
    texts = ["first text", "second"]
    answer = (await client.post("/embeddings", json={"model": "toy_embed", "input": texts})).json()
    np.testing.assert_allclose([row["embedding"] for row in answer["data"]], [embedding(t, 8) for t in texts])
    assert answer["usage"] == {"prompt_tokens": len("first text") + len("second"), "total_tokens": 16}
    tokens = await client.post("/embeddings", json={"model": "toy_embed", "input": [3, 4, 3], "dimensions": 4})
    np.testing.assert_allclose(tokens.json()["data"][0]["embedding"], embedding([3, 4, 3], 4))
    packed = await client.post("/embeddings", json={"model": "toy_embed", "input": "abc", "encoding_format": "base64"})
    decoded = np.frombuffer(base64.b64decode(packed.json()["data"][0]["embedding"]), dtype="<f4")
    np.testing.assert_allclose(decoded, embedding("abc", 8), rtol=1e-6)


async def test_each_task_to_the_other_model_is_the_models_own_failure(client: httpx.AsyncClient) -> None:
    generating = await client.post("/embeddings", json={"model": "toy", "input": "x"})
    assert generating.status_code == 500 and "does not support 'embed' request" in generating.json()["error"]["message"]
    embedding_only = await client.post("/completions", json={"model": "toy_embed", "prompt": "x"})
    assert embedding_only.status_code == 500 and "'generate' request" in embedding_only.json()["error"]["message"]


async def test_an_embedding_model_of_neither_convention_says_what_it_lacks(client: httpx.AsyncClient) -> None:
    found = (await client.post("/embeddings", json={"model": "shout", "input": "x"})).json()["error"]
    assert found["code"] == "model_not_supported" and "the vLLM backend's: input embedding_request" in found["message"]
    tokens = (await client.post("/embeddings", json={"model": "embed", "input": [1, 2]})).json()["error"]
    assert tokens["param"] == "input" and "token ids are for models of the vLLM backend's" in tokens["message"]


# -- a Triton Python model written for the vLLM backend's convention

VLLM_LIKE = """
import json
import threading

import numpy as np
import triton_python_backend_utils as pb_utils

from examples.openai_vllm import generate


def flag(request, name):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return bool(tensor.as_numpy()[0]) if tensor is not None else False


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            threading.Thread(target=self.answer, args=(request,)).start()
        return None

    def answer(self, request):
        sender = request.get_response_sender()
        prompt = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy()[0].decode()
        settings = json.loads(pb_utils.get_input_tensor_by_name(request, "sampling_parameters").as_numpy()[0])
        steps, text, reason = generate(prompt, settings)
        stream = flag(request, "stream")
        chunks = [(text[index] if index < len(text) else "", [step]) for index, step in enumerate(steps)]
        if not stream:
            chunks = [(text, steps)]
        for index, (piece, taken) in enumerate(chunks):
            last = index == len(chunks) - 1
            outputs = [pb_utils.Tensor("text_output", np.array([piece.encode()], dtype=object))]
            if flag(request, "return_finish_reason"):
                said = str(reason if last else None)
                outputs.append(pb_utils.Tensor("finish_reason", np.array([said], dtype=object)))
            if flag(request, "return_num_input_tokens"):
                outputs.append(pb_utils.Tensor("num_input_tokens", np.asarray(len(prompt), dtype=np.uint32)))
            if flag(request, "return_num_output_tokens"):
                outputs.append(pb_utils.Tensor("num_output_tokens", np.asarray([len(taken)], dtype=np.uint32)))
            if flag(request, "return_logprobs"):
                listed = json.dumps([step.logprobs for step in taken] if settings.get("logprobs") is not None else None)
                outputs.append(pb_utils.Tensor("logprobs", np.array([listed.encode()], dtype=object)))
            flags = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL if last else 0
            sender.send(pb_utils.InferenceResponse(output_tensors=outputs), flags=flags)
"""
VLLM_CONFIG = """
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [
  { name: "text_input", data_type: TYPE_STRING, dims: [ 1 ] },
  { name: "stream", data_type: TYPE_BOOL, dims: [ 1 ], optional: true },
  { name: "sampling_parameters", data_type: TYPE_STRING, dims: [ 1 ], optional: true },
  { name: "exclude_input_in_output", data_type: TYPE_BOOL, dims: [ 1 ], optional: true },
  { name: "return_finish_reason", data_type: TYPE_BOOL, dims: [ 1 ], optional: true },
  { name: "return_cumulative_logprob", data_type: TYPE_BOOL, dims: [ 1 ], optional: true },
  { name: "return_logprobs", data_type: TYPE_BOOL, dims: [ 1 ], optional: true },
  { name: "return_num_input_tokens", data_type: TYPE_BOOL, dims: [ 1 ], optional: true },
  { name: "return_num_output_tokens", data_type: TYPE_BOOL, dims: [ 1 ], optional: true },
  { name: "embedding_request", data_type: TYPE_STRING, dims: [ 1 ], optional: true }
]
output [
  { name: "text_output", data_type: TYPE_STRING, dims: [ -1 ] },
  { name: "finish_reason", data_type: TYPE_STRING, dims: [ -1 ] },
  { name: "cumulative_logprob", data_type: TYPE_FP32, dims: [ -1 ] },
  { name: "logprobs", data_type: TYPE_STRING, dims: [ -1 ] },
  { name: "num_input_tokens", data_type: TYPE_UINT32, dims: [ 1 ] },
  { name: "num_output_tokens", data_type: TYPE_UINT32, dims: [ -1 ] }
]
"""


async def test_a_triton_python_model_written_for_the_vllm_backends_tensors_is_served_the_same(tmp_path: Path) -> None:
    folder = tmp_path / "vllm_like"
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text(textwrap.dedent(VLLM_LIKE))
    (folder / "config.pbtxt").write_text(VLLM_CONFIG)
    v2 = oip_asgi.oip_app(model_repository=ModelRepository(tmp_path))
    app = oip_asgi.openai_app(v2)
    transport = httpx.ASGITransport(app=app)
    async with v2.lifespan(app), httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        body = {"model": "vllm_like", "messages": CHAT, "temperature": 0, "logprobs": True, "top_logprobs": 1}
        alone, together = await both(client, "/chat/completions", body)
        assert alone == together
        steps, text, reason = generate("user: hello\nassistant:", {"temperature": 0})
        assert (alone["text"], alone["finish_reason"]) == (text, reason)
        assert alone["usage"]["prompt_tokens"] == len("user: hello\nassistant:")
        assert alone["usage"]["completion_tokens"] == len(steps) == len(alone["logprobs"]["content"])


def test_the_toys_sampling_parameters_are_vllms_own() -> None:
    """What the toy refuses, vLLM's SamplingParams refuses: so a key this server sends that vLLM does not know
    fails the tests, as it would fail the backend."""
    with pytest.raises(TypeError, match="unexpected keyword argument 'use_beam_search'"):
        generate("x", {"use_beam_search": False})
    spec = {spec.name for spec in INPUTS} - {"image"}
    assert {"text_input", "stream", "sampling_parameters", "exclude_input_in_output", "embedding_request"} <= spec
    assert [spec.name for spec in OUTPUTS][0] == "text_output" and isinstance(OUTPUTS[0], TensorSpec)
