"""Chat messages rendered to the one text an LLM-convention model takes: by the model's chat template, or ours.

A chat template is a Jinja template in Hugging Face's convention: it sees ``messages`` (each a mapping
with ``role`` and ``content``), ``add_generation_prompt`` (true here: the model answers next),
``bos_token`` and ``eos_token`` (the model's properties of those names, or empty) and the helper
``raise_exception(message)``, which is how templates refuse a conversation (a 400 with its message).
It is rendered in Jinja's immutable sandbox, as Hugging Face renders it, and compiled once per text.
A model gives it as its property ``chat_template`` (``Model(properties={"chat_template": ...})``; a
model repository's ``config.pbtxt`` parameter of that name becomes that property).

Without one, `DEFAULT_TEMPLATE`: each message on its own lines as ``<role>: <content>``, in order, then
``assistant:`` for the answer to follow.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from .._core.serving import ServedModel
from .._declarations.errors import ModelError, quoted
from .errors import InvalidField
from .schemas import Message

if TYPE_CHECKING:
    from jinja2 import Template

logger = logging.getLogger("oip_asgi")

# OpenAI's message roles; a chat template reads only these (a message of another would be lost, or misread).
ROLES = ("system", "developer", "user", "assistant", "tool", "function")

DEFAULT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


class TemplateRefused(Exception):
    """A template's own `raise_exception`: the conversation is not one it renders."""


def _raise_exception(message: str) -> NoReturn:
    raise TemplateRefused(message)


@functools.lru_cache(maxsize=64)
def compiled(source: str) -> Template:
    """`source` compiled in the sandbox; a TemplateSyntaxError (a jinja2 TemplateError) when it is not a template."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment  # the openai extra: imported where chat is served

    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    environment.globals["raise_exception"] = _raise_exception
    return environment.from_string(source)


def messages_of(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The messages as a template reads them: content as text (a list of text parts joined)."""
    if not messages:
        raise InvalidField("messages must hold at least one message", param="messages")
    rendered: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if message.role not in ROLES:
            raise InvalidField(
                f"messages[{index}].role is {quoted(message.role)}; a message's role is one of {', '.join(ROLES)}",
                param=f"messages[{index}].role",
            )
        content = message.content
        if isinstance(content, list):
            for part, piece in enumerate(content):
                if piece.type != "text" or piece.text is None:
                    raise InvalidField(
                        f"messages[{index}].content[{part}] is a {quoted(piece.type)} part; this model takes text",
                        param=f"messages[{index}].content[{part}]",
                    )
            content = "".join(piece.text or "" for piece in content)
        item: dict[str, Any] = {"role": message.role, "content": content or ""}
        if message.name is not None:
            item["name"] = message.name
        rendered.append(item)
    return rendered


def render_chat(model: ServedModel, messages: Sequence[Message]) -> str:
    """The prompt `model` gets for `messages`."""
    properties: Mapping[str, str] = model.model.properties or {}
    source = properties.get("chat_template") or DEFAULT_TEMPLATE
    from jinja2 import TemplateError

    try:
        template = compiled(source)
    except TemplateError as exc:
        raise _logged(
            ModelError(f"model {quoted(model.name)}'s chat_template is not a Jinja template: {exc}")
        ) from None
    context = {
        "messages": messages_of(messages),
        "add_generation_prompt": True,
        "bos_token": properties.get("bos_token", ""),
        "eos_token": properties.get("eos_token", ""),
    }
    try:
        return template.render(**context)
    except TemplateRefused as exc:
        raise InvalidField(
            f"model {quoted(model.name)}'s chat template refused the messages: {exc}", param="messages"
        ) from None
    except Exception as exc:  # the template's own mistake (a SecurityError, an undefined call): not the client's
        message = f"model {quoted(model.name)}'s chat_template failed to render: {type(exc).__name__}: {exc}"
        raise _logged(ModelError(message)) from None


def _logged(error: ModelError) -> ModelError:
    """A broken template is the model's configuration failing: the server log tells it, as every 500."""
    logger.error("%s", error.message)
    return error
