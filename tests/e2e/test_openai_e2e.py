"""The OpenAI-compatible API end to end: the official `openai` client (sync and async, stream and not)
against `oip-asgi serve --openai` of tests/apps/openai.py and examples/openai_repository, one server."""

from __future__ import annotations

import asyncio
import random
import string
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

openai = pytest.importorskip("openai")

from examples.openai import embed  # noqa: E402
from tests.support.servers import ROOT, Server, free_port, serving  # noqa: E402
from tests.support.waiting import written  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    port = free_port()
    argv = [
        "-m", "oip_asgi", "serve", "tests.apps.openai:models", "--model-repository",
        str(ROOT / "examples" / "openai_repository"), "--port", str(port), "--openai",
    ]  # fmt: skip
    with serving(argv, port) as running:
        yield running


@pytest.fixture(scope="module")
def client(server: Server) -> Iterator[openai.OpenAI]:
    # No retries: a 500 must reach the test as it was answered, once.
    with openai.OpenAI(base_url=f"http://{server.address}/v1", api_key="unused", max_retries=0) as made:
        yield made


def async_client(server: Server) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"http://{server.address}/v1", api_key="unused", max_retries=0)


# -- /v1/models


def test_the_models_are_listed_and_retrieved(client: openai.OpenAI) -> None:
    listed = {model.id: model for model in client.models.list()}
    assert {"echo", "shout", "embed", "broken", "endless", "add", "chatty"} <= set(listed)
    assert all(model.object == "model" and model.owned_by == "oip-asgi" for model in listed.values())
    echo = client.models.retrieve("echo")
    assert (echo.id, echo.created) == ("echo", listed["echo"].created)
    with pytest.raises(openai.NotFoundError) as raised:
        client.models.retrieve("nope")
    assert raised.value.code == "model_not_found"


# -- /v1/completions


def test_a_completion_joins_the_responses_and_says_why_it_ended(client: openai.OpenAI) -> None:
    whole = client.completions.create(model="echo", prompt="hello world")
    assert whole.object == "text_completion"
    assert (whole.choices[0].text, whole.choices[0].finish_reason) == ("hello world", "stop")
    cut = client.completions.create(model="echo", prompt=["hello world"], max_tokens=5)
    assert (cut.choices[0].text, cut.choices[0].finish_reason) == ("hello", "length")
    assert cut.usage is not None and cut.usage.completion_tokens == 5
    stopped = client.completions.create(model="echo", prompt="hello world", stop=[" "], max_tokens=50)
    assert (stopped.choices[0].text, stopped.choices[0].finish_reason) == ("hello", "stop")


def test_a_streamed_completion_is_one_chunk_a_response_then_the_usage(client: openai.OpenAI) -> None:
    stream = client.completions.create(
        model="echo", prompt="abcdef", max_tokens=4, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    texts = [chunk.choices[0].text for chunk in chunks if chunk.choices and chunk.choices[0].finish_reason is None]
    assert texts == ["a", "b", "c", "d"]
    assert [chunk.choices[0].finish_reason for chunk in chunks if chunk.choices][-1] == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert (chunks[-1].usage.completion_tokens, chunks[-1].usage.total_tokens) == (4, 4)
    assert len({chunk.id for chunk in chunks}) == 1


def test_a_model_that_answers_once_streams_its_one_answer(client: openai.OpenAI) -> None:
    chunks = list(client.completions.create(model="shout", prompt="quiet", stream=True))
    assert [chunk.choices[0].text for chunk in chunks] == ["QUIET", ""]
    assert chunks[-1].choices[0].finish_reason == "stop"
    once = client.completions.create(model="shout", prompt="quiet")
    assert once.usage is not None and (once.usage.prompt_tokens, once.usage.completion_tokens) == (5, 5)


# -- /v1/chat/completions


def test_a_chat_renders_the_messages_with_the_models_template(client: openai.OpenAI) -> None:
    answer = client.chat.completions.create(
        model="echo", messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi there"}]
    )
    assert answer.object == "chat.completion"
    assert (answer.choices[0].message.role, answer.choices[0].message.content) == ("assistant", "hi there")
    # A repository model's template, from its config.pbtxt parameter chat_template.
    rendered = client.chat.completions.create(
        model="chatty", messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    )
    assert rendered.choices[0].message.content == "[system] be brief\n[user] hi\n[assistant]"
    # Without a template: every message's content in order, as "<role>: <content>" lines.
    plain = client.chat.completions.create(model="shout", messages=[{"role": "user", "content": "hi"}])
    assert plain.choices[0].message.content == "USER: HI\nASSISTANT:"


def test_a_streamed_chat_sends_the_role_the_pieces_the_reason_and_the_usage(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="echo",
        messages=[{"role": "user", "content": "hey"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [chunk.choices[0].delta.content for chunk in chunks[1:4]] == ["h", "e", "y"]
    assert chunks[4].choices[0].finish_reason == "stop"
    assert chunks[5].choices == [] and chunks[5].usage is not None and chunks[5].usage.completion_tokens == 3
    assert len(chunks) == 6 and {chunk.object for chunk in chunks} == {"chat.completion.chunk"}


def test_the_async_client_chats_and_completes(server: Server) -> None:
    async def run() -> tuple[str, list[str], str]:
        async with async_client(server) as client:
            chat = await client.chat.completions.create(model="echo", messages=[{"role": "user", "content": "yo"}])
            stream = await client.chat.completions.create(
                model="echo", messages=[{"role": "user", "content": "abc"}], stream=True
            )
            pieces = [chunk.choices[0].delta.content or "" async for chunk in stream]
            completion = await client.completions.create(model="shout", prompt="up")
            return chat.choices[0].message.content or "", pieces, completion.choices[0].text

    assert asyncio.run(run()) == ("yo", ["", "a", "b", "c", ""], "UP")


# -- /v1/embeddings


def test_embeddings_come_as_floats_and_as_base64(client: openai.OpenAI, server: Server) -> None:
    texts = ["first text", "second"]
    expected = embed(np.array([text.encode() for text in texts], dtype=object))
    as_floats = client.embeddings.create(model="embed", input=texts, encoding_format="float")
    assert [item.index for item in as_floats.data] == [0, 1]
    np.testing.assert_allclose([item.embedding for item in as_floats.data], expected, rtol=1e-6)
    default = client.embeddings.create(model="embed", input="first text")  # the client asks for base64
    np.testing.assert_allclose(default.data[0].embedding, expected[0], rtol=1e-6)

    async def run() -> list[float]:
        async with async_client(server) as aclient:
            return (await aclient.embeddings.create(model="embed", input=["second"])).data[0].embedding

    np.testing.assert_allclose(asyncio.run(run()), expected[1], rtol=1e-6)


# -- errors, as OpenAI's error object


def test_an_unknown_model_is_a_not_found_error_on_every_endpoint(client: openai.OpenAI) -> None:
    calls = [
        lambda: client.completions.create(model="nope", prompt="x"),
        lambda: client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}]),
        lambda: client.embeddings.create(model="nope", input="x"),
    ]
    for call in calls:
        with pytest.raises(openai.NotFoundError) as raised:
            call()
        assert "The model 'nope' does not exist (served: echo, " in raised.value.message
        assert raised.value.code == "model_not_found" and raised.value.param == "model"


def test_a_tool_calling_client_is_told_tools_are_not_served_not_answered_plain_text(client: openai.OpenAI) -> None:
    tool = {"type": "function", "function": {"name": "weather", "parameters": {"type": "object", "properties": {}}}}
    messages = [{"role": "user", "content": "weather?"}]
    for asked in ({"tools": [tool]}, {"logit_bias": {"1": 5}}):
        with pytest.raises(openai.BadRequestError) as raised:
            client.chat.completions.create(model="echo", messages=messages, **asked)  # type: ignore[arg-type]
        assert raised.value.param == next(iter(asked)) and "not served" in raised.value.message
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model="echo", messages=[{"role": "wizard", "content": "x"}])  # type: ignore[list-item]
    assert raised.value.param == "messages[0].role"


def test_a_bad_body_is_a_bad_request_error_naming_the_field(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model="echo", messages=[{"role": 3, "content": "x"}])  # type: ignore[list-item]
    assert raised.value.param == "messages[0].role" and "Expected `str`, got `int`" in raised.value.message
    with pytest.raises(openai.BadRequestError) as raised:
        client.completions.create(model="echo", prompt="x", n=2)
    assert raised.value.param == "n"
    with pytest.raises(openai.BadRequestError) as raised:
        client.post("/chat/completions", body={"model": "echo"}, cast_to=httpx.Response)
    assert raised.value.param == "messages" and "missing required field" in raised.value.message
    with pytest.raises(openai.BadRequestError) as raised:
        client.completions.create(model="add", prompt="x")
    assert raised.value.code == "model_not_supported" and "it needs the input 'a'" in raised.value.message
    with pytest.raises(openai.BadRequestError) as raised:
        client.embeddings.create(model="echo", input="x")
    assert "does not follow an embedding convention" in raised.value.message


def test_a_model_that_raises_is_an_internal_server_error_with_its_message(
    client: openai.OpenAI, server: Server
) -> None:
    with pytest.raises(openai.InternalServerError) as raised:
        client.completions.create(model="broken", prompt="abc")
    assert raised.value.status_code == 500
    assert "model 'broken' raised ValueError: the model broke" in raised.value.message
    with pytest.raises(openai.InternalServerError, match="broke at once"):
        client.completions.create(model="broken", prompt="now", stream=True)  # before the first chunk: a 500
    # Once the stream has begun, the failure is an event holding the error object: the client raises it.
    seen: list[str] = []
    with pytest.raises(openai.APIError, match="the model broke"):
        for chunk in client.completions.create(model="broken", prompt="abc", stream=True):
            seen.append(chunk.choices[0].text)
    assert seen == ["a", "b"]
    assert "ValueError: the model broke" in server.output()  # and the log has it


# -- the client that leaves, and many at once


def test_a_client_that_leaves_stops_the_model(client: openai.OpenAI, tmp_path: Path) -> None:
    marker = tmp_path / "closed"
    stream = client.completions.create(model="endless", prompt=str(marker), stream=True)
    for index, chunk in enumerate(stream):
        assert chunk.choices[0].text == "tick "
        if index == 20:
            break
    stream.close()
    assert written(marker, "the model's generator was not closed").startswith("closed after")


def test_sixteen_streaming_chats_of_a_hundred_chunks_complete_in_order(server: Server) -> None:
    rng = random.Random(28)
    prompts = ["".join(rng.choices(string.ascii_letters + string.digits, k=100)) for _ in range(16)]

    async def chat(client: openai.AsyncOpenAI, prompt: str) -> list[str]:
        stream = await client.chat.completions.create(
            model="echo", messages=[{"role": "user", "content": prompt}], stream=True, max_tokens=100
        )
        return [chunk.choices[0].delta.content async for chunk in stream if chunk.choices[0].delta.content]

    async def run() -> list[list[str]]:
        async with async_client(server) as client:
            return await asyncio.gather(*(chat(client, prompt) for prompt in prompts))

    for prompt, pieces in zip(prompts, asyncio.run(run()), strict=True):
        assert pieces == list(prompt)
