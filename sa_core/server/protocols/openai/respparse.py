"""Checking ``POST /v1/responses`` bodies (see :mod:`sa_core.server.protocols.openai.requests`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sa_core.server.protocols.openai.errors import OpenAIError, invalid, unsupported
from sa_core.server.protocols.openai.requests import (
    Turn,
    flag,
    refuse_fields,
    require_object,
    role_of,
    text_format,
    text_of,
)

FIELDS = {"model", "input", "instructions", "previous_response_id", "conversation", "stream",
          "store", "user", "text", "parallel_tool_calls", "truncation"}
EMPTY_OK = {"tools", "tool_choice", "metadata", "include", "background"}
PARTS = ("input_text", "output_text", "text")


@dataclass
class ResponsesRequest:
    """A checked responses request."""

    model: Any
    items: list[Turn]
    """The instructions (as a system message) and the input, in order; the last is a user's."""
    previous_response_id: str | None
    conversation: str | None
    stream: bool
    output_schema: dict[str, Any] | None = None
    """The JSON Schema ``text.format`` asks for, if any."""


def responses_request(body: Any) -> ResponsesRequest:
    """Check a responses request: text input only, no client tools."""
    body = require_object(body)
    refuse_fields(body, FIELDS, EMPTY_OK)
    if body.get("truncation") not in (None, "disabled"):
        raise unsupported("truncation", "only 'disabled'.")
    text = body.get("text")
    output_schema = None
    if text is not None:
        if not isinstance(text, dict):
            raise invalid("text", "expected an object.")
        for name in text:
            if name != "format":
                raise unsupported(f"text.{name}")
        output_schema = text_format(text.get("format"), "text.format", nested=False)
    items: list[Turn] = []
    instructions = body.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise invalid("instructions", "expected a string.")
        items.append(("system", instructions))
    items.extend(input_items(body.get("input")))
    previous = body.get("previous_response_id")
    if previous is not None and not isinstance(previous, str):
        raise invalid("previous_response_id", "expected a string.")
    conversation = conversation_id(body.get("conversation"))
    if previous is not None and conversation is not None:
        raise OpenAIError(
            400,
            "Send either 'previous_response_id' or 'conversation', not both.",
            param="conversation",
        )
    return ResponsesRequest(
        model=body.get("model"),
        items=items,
        previous_response_id=previous,
        conversation=conversation,
        stream=flag(body, "stream"),
        output_schema=output_schema,
    )


def input_items(raw: Any) -> list[Turn]:
    """The ``input``: a string, or a list of messages (text content only)."""
    if isinstance(raw, str):
        return [("user", raw)]
    if not isinstance(raw, list) or not raw:
        raise invalid("input", "expected a string or a non-empty list of messages.")
    items: list[Turn] = []
    for index, item in enumerate(raw):
        where = f"input[{index}]"
        if not isinstance(item, dict):
            raise invalid(where, "expected an object.")
        kind = item.get("type", "message")
        if kind != "message":
            raise unsupported(f"{where}.type", f"items of type {kind!r} are not served; "
                              "send messages (the agent's own tools run on the server).")
        role = role_of(item.get("role"), f"{where}.role")
        items.append((role, text_of(item.get("content"), f"{where}.content", PARTS)))
    if items[-1][0] != "user":
        raise invalid(f"input[{len(items) - 1}].role",
                      "the last input item must be a user message (the agent answers it).")
    return items


def conversation_id(value: Any) -> str | None:
    """``conversation``: an id, or an object with ``id``."""
    if value is None:
        return None
    if isinstance(value, dict):
        value = value.get("id")
    if not isinstance(value, str) or not value:
        raise invalid("conversation", "expected a conversation id or {\"id\": ...}.")
    return value
