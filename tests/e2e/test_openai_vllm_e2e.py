"""Issue 38 end to end: the official `openai` client (sync and async, stream and not) and raw HTTP against one
`oip-asgi serve --openai` process serving the toy LLM of examples/openai_vllm.py (the vLLM backend's whole
convention), with an API key (from OIP_OPENAI_API_KEY), explicit model control of examples/openai_repository,
metrics, a restricted model-repository group and a small --http-max-input-size."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

openai = pytest.importorskip("openai")

from examples.openai_vllm import embedding, generate  # noqa: E402
from tests.support.servers import ROOT, Server, free_port, serving  # noqa: E402

pytestmark = pytest.mark.slow

KEY = "sk-e2e-4d1f9c"
ADMIN = {"admin": "secret"}  # the model-repository group's header
LIMIT = 4096


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    port, metrics = free_port(), free_port()
    argv = [
        "-m", "oip_asgi", "serve", "examples.openai_vllm:models", "--openai", "--port", str(port),
        "--model-repository", str(ROOT / "examples" / "openai_repository"), "--model-control-mode", "explicit",
        "--metrics-port", str(metrics), "--http-max-input-size", str(LIMIT),
        "--http-restricted-api", "model-repository:admin=secret",
    ]  # fmt: skip
    with serving(argv, port, env={"OIP_OPENAI_API_KEY": KEY}) as running:
        yield running


@pytest.fixture(scope="module")
def client(server: Server) -> Iterator[openai.OpenAI]:
    # No retries: a failure must reach the test as it was answered, once.
    with openai.OpenAI(base_url=f"http://{server.address}/v1", api_key=KEY, max_retries=0) as made:
        yield made


def async_client(server: Server, **options: Any) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"http://{server.address}/v1", api_key=KEY, max_retries=0, **options)


# -- the vLLM backend's convention through the official client


def test_a_completion_streamed_and_whole_agree_on_text_usage_and_finish_reason(client: openai.OpenAI) -> None:
    for settings in ({"temperature": 0}, {"seed": 5, "max_tokens": 20}, {"temperature": 0, "max_tokens": 2}):
        whole = client.completions.create(model="toy", prompt="hello", **settings)  # type: ignore[call-overload]
        chunks = list(
            client.completions.create(
                model="toy", prompt="hello", stream=True, stream_options={"include_usage": True}, **settings
            )  # type: ignore[call-overload]
        )
        steps, text, reason = generate("hello", settings)
        assert whole.choices[0].text == "".join(c.choices[0].text for c in chunks if c.choices) == text
        assert whole.choices[0].finish_reason == [c.choices[0].finish_reason for c in chunks if c.choices][-1] == reason
        assert whole.usage == chunks[-1].usage
        assert whole.usage is not None and (whole.usage.prompt_tokens, whole.usage.completion_tokens) == (5, len(steps))


def test_a_chat_gives_openais_logprobs_from_the_models(client: openai.OpenAI) -> None:
    messages = [{"role": "user", "content": "hello"}]
    whole = client.chat.completions.create(
        model="toy",
        messages=messages,
        temperature=0,
        logprobs=True,
        top_logprobs=3,  # type: ignore[arg-type]
    )
    content = whole.choices[0].logprobs.content  # type: ignore[union-attr]
    assert content is not None and all(len(token.top_logprobs) == 3 for token in content)
    assert "".join(token.token for token in content).removesuffix("</s>") == whole.choices[0].message.content
    streamed = client.chat.completions.create(
        model="toy",
        messages=messages,
        temperature=0,
        logprobs=True,
        top_logprobs=3,
        stream=True,  # type: ignore[arg-type]
    )
    pieces = [
        token
        for chunk in streamed
        if chunk.choices and chunk.choices[0].logprobs
        for token in chunk.choices[0].logprobs.content or []
    ]
    assert [token.model_dump() for token in pieces] == [token.model_dump() for token in content]


def test_the_async_client_streams_echo_and_vllms_own_parameters(server: Server) -> None:
    async def run() -> tuple[str, str, Any]:
        async with async_client(server) as client:
            stream = await client.completions.create(
                model="toy", prompt="abc", echo=True, temperature=0, stream=True,
                extra_body={"ignore_eos": True, "max_tokens": 12},
            )  # fmt: skip
            streamed = "".join([chunk.choices[0].text async for chunk in stream if chunk.choices])
            whole = await client.completions.create(
                model="toy", prompt="abc", echo=True, temperature=0, extra_body={"ignore_eos": True, "max_tokens": 12}
            )
            embedded = await client.embeddings.create(
                model="toy_embed", input=["abc", "hello"], encoding_format="float"
            )
            return streamed, whole.choices[0].text, embedded

    streamed, whole, embedded = asyncio.run(run())
    _, text, _ = generate("abc", {"temperature": 0, "ignore_eos": True, "max_tokens": 12})
    assert streamed == whole == "abc" + text and len(text) == 12  # no end of sequence: ignore_eos
    np.testing.assert_allclose([item.embedding for item in embedded.data], [embedding("abc", 8), embedding("hello", 8)])
    assert embedded.usage.prompt_tokens == 8


# -- errors: named, and the server keeps serving


def test_a_bad_sampling_parameter_is_a_bad_request_naming_it_and_the_server_goes_on(client: openai.OpenAI) -> None:
    for asked, param in [({"temperature": 2.5}, "temperature"), ({"top_p": 0}, "top_p"),
                         ({"extra_body": {"min_tokens": -1}}, "min_tokens"),
                         ({"extra_body": {"logit_bias": {"3": 1}}}, "logit_bias")]:  # fmt: skip
        with pytest.raises(openai.BadRequestError) as raised:
            client.completions.create(model="toy", prompt="x", **asked)  # type: ignore[call-overload]
        assert raised.value.param == param
    assert client.completions.create(model="toy", prompt="x", max_tokens=1).choices[0].text


def test_a_models_failure_is_a_500_with_its_message_and_a_log_line(client: openai.OpenAI, server: Server) -> None:
    with pytest.raises(openai.InternalServerError, match="does not support 'embed' request"):
        client.embeddings.create(model="toy", input="x")
    assert "does not support 'embed' request" in server.output()
    assert client.completions.create(model="toy", prompt="x", max_tokens=1).choices[0].text


# -- the API key, restrictions, model control and the probes on the API port


def test_the_api_key_is_required_as_openais_clients_send_it(server: Server) -> None:
    with openai.OpenAI(base_url=f"http://{server.address}/v1", api_key="sk-wrong", max_retries=0) as wrong:
        with pytest.raises(openai.AuthenticationError) as raised:
            wrong.completions.create(model="toy", prompt="x")
    assert raised.value.code == "invalid_api_key"
    bare = httpx.post(f"http://{server.address}/v1/completions", json={"model": "toy", "prompt": "x"})
    assert bare.status_code == 401 and bare.json()["error"]["code"] == "invalid_api_key"
    assert httpx.get(f"http://{server.address}/v2/health/ready").status_code == 200  # /v2 needs no key


def test_a_restricted_v1_api_is_an_authentication_error_and_v2_keeps_tritons_403(server: Server) -> None:
    with openai.OpenAI(base_url=f"http://{server.address}/v1", api_key=KEY, max_retries=0) as plain:
        with pytest.raises(openai.AuthenticationError, match="expecting header 'admin'"):
            plain.models.list()
    assert httpx.post(f"http://{server.address}/v2/repository/index").status_code == 403


def test_a_model_is_loaded_and_unloaded_on_v1(server: Server) -> None:
    with openai.OpenAI(
        base_url=f"http://{server.address}/v1", api_key=KEY, max_retries=0, default_headers=ADMIN
    ) as admin:
        assert "chatty" not in {model.id for model in admin.models.list()}
        loaded = admin.post("/models/chatty/load", body={}, cast_to=httpx.Response)
        assert loaded.json()["id"] == "chatty"
        chat = admin.chat.completions.create(model="chatty", messages=[{"role": "user", "content": "hi"}])
        assert chat.choices[0].message.content == "[user] hi\n[assistant]"
        unloaded = admin.post("/models/chatty/unload", body={}, cast_to=httpx.Response)
        assert unloaded.json() == {"status": "success", "model": "chatty"}
        with pytest.raises(openai.NotFoundError):
            admin.chat.completions.create(model="chatty", messages=[{"role": "user", "content": "hi"}])


def test_the_api_port_serves_what_operators_probe(server: Server) -> None:
    base = f"http://{server.address}"
    client_call = httpx.post(f"{base}/v1/completions", json={"model": "toy", "prompt": "x"}, headers=_bearer())
    assert client_call.status_code == 200
    assert httpx.get(f"{base}/health/ready").status_code == 200
    assert httpx.get(f"{base}/health").status_code == 200
    metrics = httpx.get(f"{base}/metrics")
    assert metrics.status_code == 200 and metrics.headers["content-type"].startswith("text/plain")
    assert 'nv_inference_request_success{model="toy",version="1"}' in metrics.text


def test_a_body_over_the_input_size_is_a_413_on_v1_and_v2(client: openai.OpenAI, server: Server) -> None:
    with pytest.raises(openai.APIStatusError) as raised:
        client.completions.create(model="toy", prompt="x" * LIMIT)
    assert raised.value.status_code == 413 and raised.value.code == "content_too_large"
    body = json.dumps({"text_input": "x" * LIMIT})  # the protocol's generate extension, the same limit
    assert httpx.post(f"http://{server.address}/v2/models/toy/generate", content=body).status_code == 413
    assert client.completions.create(model="toy", prompt="x", max_tokens=1).choices[0].text  # and serves on


def _bearer() -> dict[str, str]:
    return {"Authorization": f"Bearer {KEY}"}
