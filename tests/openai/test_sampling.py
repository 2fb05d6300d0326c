"""Sampling parameters checked where OpenAI checks them (issue 38): each value out of range a 400 naming its
field with OpenAI's code, vLLM's own parameters passed on in ``sampling_parameters`` with their types and
ranges checked, and what is not served refused by name, never dropped."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

import oip_asgi
from oip_asgi._openai.refusals import NOT_SERVED
from oip_asgi._openai.sampling import VLLM_FIELDS
from tests.openai.test_openai import MODELS, error

pytest.importorskip("jinja2")
pytestmark = pytest.mark.anyio

CHAT = {"model": "said", "messages": [{"role": "user", "content": "x"}]}
COMPLETION = {"model": "said", "prompt": "x"}


@pytest.fixture()
async def client() -> AsyncIterator[httpx.AsyncClient]:
    app = oip_asgi.openai_app(oip_asgi.oip_app(MODELS))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as made:
        yield made


async def sampling_of(client: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    """The sampling parameters the model `said` was given."""
    answer = await client.post("/completions", json={**COMPLETION, **body})
    assert answer.status_code == 200, answer.text
    given: dict[str, Any] = json.loads(answer.json()["choices"][0]["text"])["sampling"]
    return given


@pytest.mark.parametrize(
    ("field", "value", "code", "words"),
    [
        ("temperature", 2.5, "decimal_above_max_value", "Expected a value <= 2, but got 2.5 instead."),
        ("temperature", -0.1, "decimal_below_min_value", "Expected a value >= 0, but got -0.1 instead."),
        ("top_p", 1.1, "decimal_above_max_value", "Expected a value <= 1"),
        ("top_p", 0, "decimal_below_min_value", "Expected a value > 0, but got 0.0 instead."),
        ("presence_penalty", 2.1, "decimal_above_max_value", "Expected a value <= 2"),
        ("presence_penalty", -2.1, "decimal_below_min_value", "Expected a value >= -2"),
        ("frequency_penalty", 3, "decimal_above_max_value", "Expected a value <= 2"),
        ("frequency_penalty", -3, "decimal_below_min_value", "Expected a value >= -2"),
        ("max_tokens", 0, "integer_below_min_value", "Invalid 'max_tokens': integer below minimum value."),
        ("max_tokens", -1, "integer_below_min_value", "Expected a value >= 1, but got -1 instead."),
        ("n", 0, "integer_below_min_value", "Expected a value >= 1"),
        ("seed", 2**63, "integer_above_max_value", "Expected a value <= 9223372036854775807"),
        ("logprobs", 6, "integer_above_max_value", "Expected a value <= 5, but got 6 instead."),
        ("logprobs", -1, "integer_below_min_value", "Expected a value >= 0"),
        # vLLM's own, checked as its SamplingParams checks them.
        ("top_k", -2, "integer_below_min_value", "Expected a value >= -1"),
        ("min_p", 1.5, "decimal_above_max_value", "Expected a value <= 1"),
        ("repetition_penalty", 0, "decimal_below_min_value", "Expected a value > 0"),
        ("min_tokens", -1, "integer_below_min_value", "Expected a value >= 0"),
    ],
    ids=lambda value: value if isinstance(value, str) and not value[:1].isupper() else None,
)
async def test_a_value_out_of_range_is_openais_400_naming_the_field(
    client: httpx.AsyncClient, field: str, value: Any, code: str, words: str
) -> None:
    found = error(await client.post("/completions", json={**COMPLETION, field: value}), 400)
    assert (found["param"], found["code"], found["type"]) == (field, code, "invalid_request_error")
    assert words in found["message"]


@pytest.mark.parametrize(
    ("body", "param", "words"),
    [
        ({"max_completion_tokens": 0}, "max_completion_tokens", "Expected a value >= 1"),
        ({"logprobs": True, "top_logprobs": 21}, "top_logprobs", "Expected a value <= 20, but got 21 instead."),
        ({"logprobs": True, "top_logprobs": -1}, "top_logprobs", "Expected a value >= 0"),
        ({"top_logprobs": 2}, "top_logprobs", "top_logprobs needs logprobs: true"),
        ({"logprobs": 1}, "logprobs", "Expected `bool | null`, got `int`"),
        ({"temperature": 9}, "temperature", "decimal above maximum value"),
        ({"stop": ["a", ""]}, "stop", "stop cannot contain an empty string"),
        ({"min_tokens": 5, "max_tokens": 4}, "min_tokens", "at most max_tokens (4)"),
        ({"ignore_eos": 123}, "ignore_eos", "Expected `bool | null`, got `int`"),
        ({"top_k": 1.5}, "top_k", "Expected `int | null`, got `float`"),
        ({"stop_token_ids": ["a"]}, "stop_token_ids[0]", "Expected `int`, got `str`"),
        (
            {"stream": True, "stream_options": {"continuous_usage_stats": True}},
            "stream_options.continuous_usage_stats",
            "the usage comes once",
        ),
    ],  # fmt: skip
    ids=lambda value: value if isinstance(value, str) and not value[:1].isupper() else None,
)
async def test_a_chats_mistaken_field_is_a_400_naming_it(
    client: httpx.AsyncClient, body: dict[str, Any], param: str, words: str
) -> None:
    found = error(await client.post("/chat/completions", json={**CHAT, **body}), 400)
    assert found["param"] == param and words in found["message"]


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/completions", {"model": "said", "prompt": ""}, "prompt"),
        ("/completions", {"model": "said", "prompt": [""]}, "prompt"),
        ("/embeddings", {"model": "embed", "input": ""}, "input"),
        ("/embeddings", {"model": "embed", "input": []}, "input"),
        ("/embeddings", {"model": "embed", "input": ["a", ""]}, "input[1]"),
        ("/embeddings", {"model": "embed", "input": ["a", 3]}, "input[1]"),
        ("/embeddings", {"model": "embed", "input": 5}, "input"),
        ("/embeddings", {"model": "embed", "input": "a", "dimensions": 0}, "dimensions"),
    ],
    ids=lambda value: json.dumps(value) if isinstance(value, dict) else None,
)
async def test_an_empty_prompt_or_input_is_a_400_naming_it(
    client: httpx.AsyncClient, path: str, body: dict[str, Any], param: str
) -> None:
    assert error(await client.post(path, json=body), 400)["param"] == param


async def test_vllms_own_sampling_parameters_reach_the_model_as_they_are(client: httpx.AsyncClient) -> None:
    vllm = {
        "top_k": 5, "min_p": 0.1, "repetition_penalty": 1.2, "min_tokens": 2, "ignore_eos": True,
        "stop_token_ids": [7, 9], "include_stop_str_in_output": True, "skip_special_tokens": False,
        "spaces_between_special_tokens": False, "allowed_token_ids": [1, 2, 3], "bad_words": ["no"],
    }  # fmt: skip
    assert set(vllm) == set(VLLM_FIELDS)
    assert await sampling_of(client, {**vllm, "max_tokens": 8}) == {**vllm, "max_tokens": 8}
    # And the boundary values that are in range.
    edges = {"temperature": 0, "top_p": 1, "presence_penalty": -2, "frequency_penalty": 2, "top_k": -1, "min_p": 0}
    assert await sampling_of(client, edges) == edges


async def test_token_logprobs_reach_the_model_as_vllms_logprobs(client: httpx.AsyncClient) -> None:
    """A chat's logprobs/top_logprobs and a completion's logprobs are vLLM's `logprobs`: how many likeliest
    tokens each position lists (refused here by `said`, which gives none: see tests/openai/test_vllm.py)."""
    from oip_asgi._openai.sampling import asked
    from oip_asgi._openai.schemas import ChatRequest, CompletionRequest

    assert asked(ChatRequest(model="m", messages=[], logprobs=True, top_logprobs=4)).sampling == {"logprobs": 4}
    assert asked(ChatRequest(model="m", messages=[], logprobs=True)).sampling == {"logprobs": 0}
    assert asked(ChatRequest(model="m", messages=[], logprobs=False, top_logprobs=0)).sampling == {}
    assert asked(CompletionRequest(model="m", prompt="x", logprobs=0)).sampling == {"logprobs": 0}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("logit_bias", {"50256": -100}),
        ("use_beam_search", True),
        ("length_penalty", 0.5),
        ("prompt_logprobs", 1),
        ("guided_json", {"type": "object"}),
        ("structured_outputs", {"regex": "a+"}),
        ("truncate_prompt_tokens", 10),
        ("priority", 1),
        ("best_of", 2),
        ("suffix", "end"),
        ("n", 2),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
async def test_what_is_not_served_is_refused_by_name_never_dropped(
    client: httpx.AsyncClient, field: str, value: Any
) -> None:
    found = error(await client.post("/completions", json={**COMPLETION, field: value}), 400)
    assert found["param"] == field


@pytest.mark.parametrize(
    ("field", "value"),
    [("echo", True), ("add_generation_prompt", False), ("continue_final_message", True), ("chat_template", "{{x}}")],
)
async def test_vllms_chat_fields_not_served_are_refused_by_name(
    client: httpx.AsyncClient, field: str, value: Any
) -> None:
    assert error(await client.post("/chat/completions", json={**CHAT, field: value}), 400)["param"] == field


async def test_the_values_of_vllms_fields_that_ask_nothing_are_served(client: httpx.AsyncClient) -> None:
    asks_nothing = {"use_beam_search": False, "length_penalty": 1.0, "priority": 0, "add_generation_prompt": True}
    assert (await client.post("/chat/completions", json={**CHAT, **asks_nothing})).status_code == 200


def test_every_field_passed_on_is_one_the_toy_vllm_model_takes_as_vllm_does() -> None:
    """The toy refuses a key vLLM's SamplingParams does not have: every field passed on is one of its keys, and
    none of them is refused too."""
    from examples.openai_vllm import KNOWN

    assert set(VLLM_FIELDS) <= KNOWN and not set(VLLM_FIELDS) & set(NOT_SERVED)
