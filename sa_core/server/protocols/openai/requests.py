"""Checking request bodies: what this server serves, and a 400 naming the field otherwise.

The agent decides how it answers: its own prompt, model, sampling settings and tools. So
fields that would change those (``tools``, ``temperature``, audio, ``n`` above 1, ...) are refused
with a 400 naming the field rather than silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sa_core.server.protocols.openai.errors import OpenAIError, invalid, unsupported
from sa_core.spec.schemas import check_schema

Turn = tuple[str, str]
"""A message as this API keeps it: ``(role, text)``, role ``system``, ``user`` or ``assistant``."""

ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}


def require_object(body: Any) -> dict[str, Any]:
    """The request body as a JSON object."""
    if not isinstance(body, dict):
        raise OpenAIError(400, "The request body must be a JSON object.")
    return body


def refuse_fields(body: Mapping[str, Any], served: set[str], empty_ok: set[str]) -> None:
    """Refuse every field outside ``served``; those in ``empty_ok`` only when set to something.

    ``null`` is always accepted (clients send it for "unset").
    """
    for name, value in body.items():
        if name in served or value is None:
            continue
        if name in empty_ok and value in ([], {}, False, "none", "auto", "disabled"):
            continue
        if name in ("tools", "functions", "tool_choice", "function_call"):
            raise unsupported(name, "the agent's own tools run on the server; client tools "
                              "are not served.")
        raise unsupported(name, "the agent's definition decides this.")


def text_of(content: Any, param: str, part_types: tuple[str, ...]) -> str:
    """The text of a message's content: a string, or a list of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts: list[str] = []
        for index, part in enumerate(content):
            where = f"{param}[{index}]"
            if not isinstance(part, dict) or part.get("type") not in part_types:
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise unsupported(where, f"content parts of type {kind!r} are not served; "
                                  "send text.")
            text = part.get("text")
            if not isinstance(text, str):
                raise invalid(f"{where}.text", "expected a string.")
            texts.append(text)
        return "".join(texts)
    raise invalid(param, "expected a string or a list of text parts.")


def role_of(value: Any, param: str) -> str:
    """A message role, with ``developer`` taken as ``system``."""
    if value in ("tool", "function"):
        raise unsupported(param, "tool results come from the agent's own tools, which run "
                          "on the server.")
    if value not in ROLES:
        raise invalid(param, f"expected one of {', '.join(ROLES)}, got {value!r}.")
    return ROLES[value]


@dataclass
class ChatRequest:
    """A checked ``POST /v1/chat/completions`` body."""

    model: Any
    messages: list[Turn]
    stream: bool
    include_usage: bool
    user: str
    output_schema: dict[str, Any] | None = None
    """The JSON Schema ``response_format`` asks for, if any."""


CHAT_FIELDS = {"model", "messages", "stream", "stream_options", "response_format", "n", "user",
               "store", "modalities", "parallel_tool_calls"}
CHAT_EMPTY_OK = {"tools", "functions", "tool_choice", "function_call", "metadata", "logprobs"}


def chat_request(body: Any) -> ChatRequest:
    """Check a chat completions request (see the module's docstring)."""
    body = require_object(body)
    refuse_fields(body, CHAT_FIELDS, CHAT_EMPTY_OK)
    if body.get("n") not in (None, 1):
        raise unsupported("n", "one choice per request (n=1).")
    if body.get("modalities") not in (None, ["text"]):
        raise unsupported("modalities", "text only.")
    output_schema = text_format(body.get("response_format"), "response_format", nested=True)
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise invalid("messages", "expected a non-empty list of messages.")
    messages: list[Turn] = []
    for index, message in enumerate(raw):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise invalid(where, "expected an object.")
        role = role_of(message.get("role"), f"{where}.role")
        if message.get("tool_calls"):
            raise unsupported(f"{where}.tool_calls", "tool calls are the agent's own.")
        for name in ("audio", "function_call"):
            if message.get(name) is not None:
                raise unsupported(f"{where}.{name}")
        content = message.get("content")
        text = "" if content is None and role == "assistant" else text_of(
            content, f"{where}.content", ("text", "input_text", "output_text")
        )
        messages.append((role, text))
    if messages[-1][0] != "user":
        raise invalid(f"messages[{len(messages) - 1}].role",
                      "the last message must be a user message (the agent answers it).")
    return ChatRequest(
        model=body.get("model"),
        messages=messages,
        stream=flag(body, "stream"),
        include_usage=include_usage(body.get("stream_options")),
        user=str(body.get("user") or ""),
        output_schema=output_schema,
    )


def flag(body: Mapping[str, Any], name: str) -> bool:
    """A boolean field (``null`` or missing: false)."""
    value = body.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise invalid(name, "expected true or false.")
    return value


def include_usage(options: Any) -> bool:
    """``stream_options.include_usage``."""
    if options is None:
        return False
    if not isinstance(options, dict):
        raise invalid("stream_options", "expected an object.")
    for name in options:
        if name != "include_usage":
            raise unsupported(f"stream_options.{name}")
    return flag(options, "include_usage")


def text_format(value: Any, param: str, *, nested: bool) -> dict[str, Any] | None:
    """The JSON Schema a ``response_format`` / ``text.format`` asks the answer to follow.

    ``text`` (or nothing): ``None``. ``json_object``: any JSON object. ``json_schema``: its
    ``schema``, under ``json_schema`` in chat completions (``nested``), beside ``type`` in
    responses. The turn's answer is then structured output in that shape
    (``thread.send_message(..., output_schema=...)``), replacing the agent's own schema.
    """
    if value is None:
        return None
    if not isinstance(value, dict):
        raise invalid(param, "expected an object such as {\"type\": \"text\"}.")
    kind = value.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "object"}
    if kind != "json_schema":
        raise unsupported(f"{param}.type", f"expected 'text', 'json_object' or 'json_schema', "
                          f"got {kind!r}.")
    where = f"{param}.json_schema" if nested else param
    spec = value.get("json_schema") if nested else value
    if not isinstance(spec, dict):
        raise invalid(where, "expected an object with 'name' and 'schema'.")
    schema = spec.get("schema")
    if not isinstance(schema, dict):
        raise invalid(f"{where}.schema", "expected a JSON Schema object.")
    try:
        check_schema(schema)
    except ValueError as exc:
        raise invalid(f"{where}.schema", f"{exc}.") from None
    return schema
