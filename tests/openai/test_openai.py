"""The OpenAI-compatible app in-process (httpx over ASGI): conventions, templates, sampling parameters,
errors as OpenAI's error object, restrictions and mounting. The real client against a real server is
tests/e2e/test_openai_e2e.py."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import numpy as np
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

import oip_asgi
from examples.openai import LLM_INPUTS, LLM_OUTPUTS
from examples.openai import models as examples
from oip_asgi import Model, Result, TensorSpec

pytest.importorskip("jinja2")
pytestmark = pytest.mark.anyio


def said(
    text_input: np.ndarray,
    sampling_parameters: np.ndarray | None = None,
    exclude_input_in_output: np.ndarray | None = None,
) -> Result:
    """What it was given, as JSON: its prompt, sampling parameters and exclude_input_in_output."""
    given = {
        "prompt": text_input.ravel()[0].decode(),
        "sampling": None if sampling_parameters is None else json.loads(sampling_parameters.ravel()[0]),
        "exclude": None if exclude_input_in_output is None else bool(exclude_input_in_output.ravel()[0]),
    }
    return Result({"text_output": np.array([json.dumps(given).encode()], dtype=object)})


SAID_INPUTS = [LLM_INPUTS[0], LLM_INPUTS[2], LLM_INPUTS[3]]  # no stream: a model may leave an optional input out


def templated(template: str) -> Model:
    return Model(said, inputs=SAID_INPUTS, outputs=LLM_OUTPUTS, properties={"chat_template": template})


def wrong_rows(text: np.ndarray) -> np.ndarray:
    return np.zeros((len(text) + 1, 8), dtype=np.float32)


def in_text(text_input: np.ndarray, stream: np.ndarray | None = None) -> Iterator[dict[str, Any]]:
    yield {"text_output": np.array([b"\xff"], dtype=object)}


MODELS: dict[str, Any] = {
    **examples,
    "said": Model(said, inputs=SAID_INPUTS, outputs=LLM_OUTPUTS),
    "alternating": templated(
        "{% for m in messages %}{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
        "{{ raise_exception('roles must alternate user/assistant') }}{% endif %}{{ m['content'] }}|{% endfor %}"
    ),
    "bad_syntax": templated("{% for m in messages %}"),
    "escapes": templated("{{ messages.__class__.__mro__ }}"),
    "tokens": templated("{{ bos_token }}{{ messages[0]['content'] }}{{ eos_token }}").replace(
        properties={"chat_template": "{{ bos_token }}{{ messages[0]['content'] }}{{ eos_token }}", "bos_token": "<s>"}
    ),
    "wrong_rows": Model(
        wrong_rows, inputs=[TensorSpec("text", "BYTES", [-1])], outputs=[TensorSpec("e", "FP32", [-1, 8])]
    ),
    "bare": lambda **inputs: inputs,
    "not_utf8": Model(in_text, inputs=LLM_INPUTS[:2], outputs=LLM_OUTPUTS),
}


@pytest.fixture()
async def client() -> AsyncIterator[httpx.AsyncClient]:
    app = oip_asgi.openai_app(oip_asgi.oip_app(MODELS))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as made:
        yield made


def error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()["error"]
    assert set(body) == {"message", "type", "param", "code"}
    return body


async def test_sampling_fields_reach_the_model_as_its_sampling_parameters(client: httpx.AsyncClient) -> None:
    body = {
        "model": "said", "prompt": "p", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "stop": ["\n"],
        "seed": 3, "n": 1, "presence_penalty": 0.1, "frequency_penalty": 0.2, "unknown_field": "tolerated",
    }  # fmt: skip
    answer = (await client.post("/completions", json=body)).json()
    given = json.loads(answer["choices"][0]["text"])
    assert given == {
        "prompt": "p",
        "sampling": {k: v for k, v in body.items() if k not in ("model", "prompt", "unknown_field")},
        "exclude": True,
    }
    chat = {"model": "said", "messages": [{"role": "user", "content": "q"}], "max_completion_tokens": 4}
    given = json.loads((await client.post("/chat/completions", json=chat)).json()["choices"][0]["message"]["content"])
    assert given["sampling"] == {"max_tokens": 4} and given["prompt"] == "user: q\nassistant:"


async def test_message_content_given_as_text_parts_is_joined(client: httpx.AsyncClient) -> None:
    parts = [{"type": "text", "text": "one "}, {"type": "text", "text": "two"}]
    chat = {"model": "echo", "messages": [{"role": "user", "content": parts}]}
    assert (await client.post("/chat/completions", json=chat)).json()["choices"][0]["message"]["content"] == "one two"
    image = {"type": "image_url", "image_url": {"url": "http://x"}}
    chat = {"model": "echo", "messages": [{"role": "user", "content": [parts[0], image]}]}
    found = error(await client.post("/chat/completions", json=chat), 400)
    assert found["param"] == "messages[0].content[1]" and "'image_url' part" in found["message"]


async def test_a_template_refuses_by_raise_exception_and_a_broken_one_is_a_logged_500(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    messages = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    answer = await client.post("/chat/completions", json={"model": "alternating", "messages": messages})
    assert json.loads(answer.json()["choices"][0]["message"]["content"])["prompt"] == "a|b|"
    twice = [messages[0], messages[0]]
    refused = error(await client.post("/chat/completions", json={"model": "alternating", "messages": twice}), 400)
    assert refused["message"].endswith("refused the messages: roles must alternate user/assistant")
    assert refused["param"] == "messages"
    with caplog.at_level(logging.ERROR, logger="oip_asgi"):
        broken = error(await client.post("/chat/completions", json={"model": "bad_syntax", "messages": messages}), 500)
        assert "chat_template is not a Jinja template" in broken["message"] and broken["type"] == "server_error"
        escaped = error(await client.post("/chat/completions", json={"model": "escapes", "messages": messages}), 500)
        assert "SecurityError" in escaped["message"]  # the sandbox: no reaching into Python's internals
    assert sum("chat_template" in record.getMessage() for record in caplog.records) == 2


async def test_a_template_sees_the_models_bos_and_eos_tokens(client: httpx.AsyncClient) -> None:
    chat = {"model": "tokens", "messages": [{"role": "user", "content": "x"}]}
    content = (await client.post("/chat/completions", json=chat)).json()["choices"][0]["message"]["content"]
    assert json.loads(content)["prompt"] == "<s>x"


@pytest.mark.parametrize(
    ("path", "body", "param", "words"),
    [
        ("/completions", b"{", None, "not JSON"),
        ("/completions", b"", None, "no body"),
        ("/completions", b"[]", None, "Expected `object`"),
        ("/completions", {"prompt": "x"}, "model", "missing required field `model`"),
        ("/completions", {"model": "echo", "prompt": ["a", "b"]}, "prompt", "2 prompts"),
        ("/completions", {"model": "echo", "prompt": [1, 2]}, "prompt[0]", "Expected `str`"),
        ("/completions", {"model": "echo", "prompt": "x", "best_of": 2}, "best_of", "best_of must be 1"),
        ("/completions", {"model": "echo", "prompt": "x", "logprobs": 2}, "logprobs", "gives no token logprobs"),
        ("/completions", {"model": "echo", "prompt": "x", "max_tokens": 0}, "max_tokens", "Expected a value >= 1"),
        ("/completions", {"model": "echo", "prompt": "x", "max_tokens": "9"}, "max_tokens", "Expected `int | null`"),
        ("/completions", {"model": "echo", "prompt": "x", "stream_options": {}}, "stream_options", "stream is true"),
        ("/chat/completions", {"model": "echo", "messages": []}, "messages", "at least one message"),
        ("/chat/completions", {"model": "echo", "messages": [{}]}, "messages[0].role", "missing required field"),
        ("/embeddings", {"model": "embed", "input": []}, "input", "must not be empty"),
        ("/embeddings", {"model": "embed", "input": "x", "encoding_format": "hex"}, "encoding_format", "'float'"),
        ("/embeddings", {"model": "embed", "input": "x", "dimensions": 4}, "dimensions", "gives 8"),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
async def test_a_bad_body_is_a_400_naming_the_field(
    client: httpx.AsyncClient, path: str, body: Any, param: str | None, words: str
) -> None:
    sent = await client.post(path, content=body) if isinstance(body, bytes) else await client.post(path, json=body)
    found = error(sent, 400)
    assert (found["param"], found["type"]) == (param, "invalid_request_error")
    assert words in found["message"]


async def test_models_that_follow_no_convention_say_what_they_lack(client: httpx.AsyncClient) -> None:
    bare = error(await client.post("/completions", json={"model": "bare", "prompt": "x"}), 400)
    assert bare["message"].endswith("it declares no inputs and outputs") and bare["code"] == "model_not_supported"
    embedding = error(await client.post("/embeddings", json={"model": "said", "input": "x"}), 400)
    assert "its required inputs are text_input BYTES [1]" in embedding["message"]


async def test_what_a_model_answers_wrong_is_a_500(client: httpx.AsyncClient) -> None:
    rows = error(await client.post("/embeddings", json={"model": "wrong_rows", "input": ["a", "b"]}), 500)
    assert "answered 2 texts with an output of shape [3, 8]" in rows["message"]
    text = error(await client.post("/completions", json={"model": "not_utf8", "prompt": "x"}), 500)
    assert "text_output is not UTF-8" in text["message"]


async def test_paths_and_methods_not_served(client: httpx.AsyncClient) -> None:
    assert error(await client.get("/engines"), 404)["code"] is None
    wrong = await client.get("/completions")
    assert error(wrong, 405)["message"].endswith("use POST") and wrong.headers["allow"] == "POST"
    assert error(await client.post("/completions", content=b"{}", headers={"content-encoding": "gzip"}), 415)


async def test_a_body_over_the_limit_is_a_413() -> None:
    app = oip_asgi.openai_app(oip_asgi.oip_app(MODELS, max_body_size=1000))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        found = error(await client.post("/completions", json={"model": "echo", "prompt": "x" * 2000}), 413)
        assert "exceeds the maximum allowed input size of 1000 bytes" in found["message"]
        assert found["code"] == "content_too_large"


async def test_the_protocols_restrictions_guard_the_same_groups_here() -> None:
    v2 = oip_asgi.oip_app(MODELS, restricted_apis=["inference:key=secret"])
    app = oip_asgi.openai_app(v2)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        body = {"model": "echo", "prompt": "x"}
        refused = error(await client.post("/completions", json=body), 401)  # Triton's OpenAI frontend's status
        assert refused["type"] == "authentication_error" and "expecting header 'key'" in refused["message"]
        assert (await client.post("/completions", json=body, headers={"key": "secret"})).status_code == 200
        assert (await client.get("/models")).status_code == 200  # the model-repository group is open
    own = oip_asgi.openai_app(v2, restricted_apis=["model-repository:admin=yes"])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=own), base_url="http://test") as client:
        assert (await client.get("/models")).status_code == 401
        assert (await client.post("/completions", json={"model": "echo", "prompt": "x"})).status_code == 200


async def test_mounted_beside_the_protocol_it_serves_the_same_models() -> None:
    v2 = oip_asgi.oip_app({"echo": examples["echo"]})
    app = Starlette(routes=[Mount("/v2", v2), Mount("/v1", oip_asgi.openai_app(v2))])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        answer = await client.post("/v1/completions", json={"model": "echo", "prompt": "hi"})
        assert answer.json()["choices"][0]["text"] == "hi"
        stats = (await client.get("/v2/models/echo/stats")).json()["model_stats"][0]
        assert stats["inference_count"] == 1  # one core: the protocol's statistics count the OpenAI request
        assert (await client.get("/v1/nothing")).json()["error"]["message"].startswith("Invalid URL (GET /v1/nothing)")


def test_the_app_is_the_root_app_too() -> None:
    """Served alone (its lifespan run), it loads the models at start and unloads them at the end."""
    events: list[str] = []
    model = examples["shout"].replace(load=lambda: events.append("load"), unload=lambda: events.append("unload"))
    app = oip_asgi.openai_app(oip_asgi.oip_app({"shout": model}))

    async def run() -> None:
        messages = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])
        sent: list[str] = []

        async def receive() -> dict[str, Any]:
            await asyncio.sleep(0.05)  # let the background load run before the shutdown
            return next(messages)

        async def send(message: dict[str, Any]) -> None:
            sent.append(message["type"])

        await app({"type": "lifespan"}, receive, send)
        assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]

    asyncio.run(run())
    assert events == ["load", "unload"]


# -- What the server does not do is refused by name (issue 35) -----------------------------------------------

CHAT = {"model": "echo", "messages": [{"role": "user", "content": "x"}]}
TOOL = {"type": "function", "function": {"name": "weather", "parameters": {"type": "object", "properties": {}}}}


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("tools", [TOOL], "tools are not served: the model answers text, never a tool call"),
        ("tool_choice", "required", "tool_choice 'required' is not served"),
        ("tool_choice", {"type": "function", "function": {"name": "weather"}}, "tool_choice {'type': 'function'"),
        ("parallel_tool_calls", True, "parallel_tool_calls is not served"),
        ("functions", [TOOL["function"]], "functions are not served"),
        ("function_call", "auto", "function_call 'auto' is not served"),
        ("logit_bias", {"50256": -100}, "logit_bias is not served"),
        ("response_format", {"type": "json_object"}, "response_format {'type': 'json_object'} is not served"),
        ("modalities", ["text", "audio"], "modalities ['text', 'audio'] are not served"),
        ("audio", {"voice": "alloy", "format": "wav"}, "audio is not served"),
        ("prediction", {"type": "content", "content": "x"}, "prediction (predicted outputs) is not served"),
        ("web_search_options", {}, "web_search_options is not served"),
        ("n", 2, "n must be 1 (one choice per request), got 2"),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
async def test_a_chat_field_not_served_is_an_openai_400_naming_it(
    client: httpx.AsyncClient, field: str, value: Any, words: str
) -> None:
    found = error(await client.post("/chat/completions", json={**CHAT, field: value}), 400)
    assert (found["param"], found["type"], found["code"]) == (field, "invalid_request_error", None)
    assert words in found["message"]


async def test_logit_bias_is_refused_on_completions_too(client: httpx.AsyncClient) -> None:
    body = {"model": "echo", "prompt": "x", "logit_bias": {"50256": -100}}
    assert error(await client.post("/completions", json=body), 400)["param"] == "logit_bias"


@pytest.mark.parametrize(
    "asks_nothing",
    [
        {"tools": []},
        {"tool_choice": "none"},
        {"function_call": "none"},
        {"logit_bias": {}},
        {"response_format": {"type": "text"}},
        {"modalities": ["text"]},
        {"n": 1},
        {"top_logprobs": 0},
        {"store": False, "metadata": {"a": "b"}, "service_tier": "auto"},  # about the request, not the answer
    ],
    ids=lambda value: ",".join(value),
)
async def test_the_values_that_ask_for_nothing_more_are_served(client: httpx.AsyncClient, asks_nothing: Any) -> None:
    answer = await client.post("/chat/completions", json={**CHAT, **asks_nothing})
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == "x"


@pytest.mark.parametrize("role", ["wizard", "User", ""])
async def test_a_role_openai_does_not_have_is_refused(client: httpx.AsyncClient, role: str) -> None:
    messages = [{"role": "system", "content": "s"}, {"role": role, "content": "x"}]
    found = error(await client.post("/chat/completions", json={"model": "echo", "messages": messages}), 400)
    assert found["param"] == "messages[1].role"
    assert f"messages[1].role is '{role}'" in found["message"]
    assert "system, developer, user, assistant, tool, function" in found["message"]


@pytest.mark.parametrize("role", ["system", "developer", "user", "assistant", "tool", "function"])
async def test_each_openai_role_is_taken(client: httpx.AsyncClient, role: str) -> None:
    messages = [{"role": role, "content": "a"}, {"role": "user", "content": "x"}]
    assert (await client.post("/chat/completions", json={"model": "echo", "messages": messages})).status_code == 200


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/completions", {"model": "nope", "prompt": "x"}),
        ("POST", "/chat/completions", {"model": "nope", "messages": [{"role": "user", "content": "x"}]}),
        ("POST", "/embeddings", {"model": "nope", "input": "x"}),
        ("GET", "/models/nope", None),
    ],
    ids=lambda value: value if isinstance(value, str) and value.startswith("/") else None,
)
async def test_an_unknown_model_is_openais_model_not_found_listing_the_served_ones(
    client: httpx.AsyncClient, method: str, path: str, body: Any
) -> None:
    found = error(await client.request(method, path, json=body), 404)
    assert (found["type"], found["param"], found["code"]) == ("invalid_request_error", "model", "model_not_found")
    served = ", ".join(MODELS)
    assert found["message"] == f"The model 'nope' does not exist (served: {served})"


async def test_every_field_not_served_is_declared_where_its_requests_decode_it() -> None:
    import msgspec

    from oip_asgi._openai.refusals import NOT_SERVED

    for field, rule in NOT_SERVED.items():
        assert field in {f.name for f in msgspec.structs.fields(rule.request)}, field
