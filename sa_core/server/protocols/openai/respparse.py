"""Checking ``POST /v1/responses`` bodies (see :mod:`sa_core.server.protocols.openai.requests`).

The ``input`` may carry the conversation so far, as the clients that keep their own history
send it (the OpenAI Agents SDK's ``to_input_list()``, pydantic-ai, LangChain, ``llm``):
messages of every role, assistant messages with ``output_text`` parts, and ``reasoning``
items, which are left out (they are a model's private notes, not the conversation), and the
``function_call`` items of client tools with their ``function_call_output`` items. Each message
becomes the same ``(role, text)`` pair a chat completions message does (the function calls
join the assistant message before them, as chat's ``tool_calls`` do), so the two APIs agree on a
conversation's digest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sa_core.server.protocols.openai.errors import OpenAIError, Problems, invalid, unsupported
from sa_core.server.protocols.openai.models import Model
from sa_core.server.protocols.openai.requests import (
    CLIENT_TOOLS,
    UNMEANING,
    Turn,
    common_fields,
    flag,
    refuse_fields,
    role_of,
    text_format,
    text_of,
)
from sa_core.server.protocols.openai.settings import (
    RESPONSES_SETTINGS,
    ClientSettings,
    asked_settings,
    client_settings,
)
from sa_core.server.protocols.openai.toolcalls import (
    ClientTools,
    call_of,
    check_answered,
    join_call,
    output_text,
    responses_choice,
    responses_tools,
    tool_turn,
)
from sa_core.spec.agents import ClientSettingsPolicy

FIELDS = {"model", "input", "instructions", "previous_response_id", "conversation", "stream",
          "text", "reasoning", "truncation", "include", "tools", "tool_choice", *UNMEANING,
          *(name for name in RESPONSES_SETTINGS if "." not in name)}  # fmt: skip
EMPTY_OK = {*CLIENT_TOOLS, "background"}
PARTS = ("input_text", "output_text", "text")
SKIPPED_ITEMS = ("reasoning",)
"""Input item types left out of the conversation."""
REASONING_KEYS = ("effort", "summary", "generate_summary")


@dataclass
class ResponsesRequest:
    """A checked responses request."""

    items: list[Turn]
    """The instructions (as a system message) and the input, in order; the last is a user's."""
    previous_response_id: str | None
    conversation: str | None
    stream: bool
    user: str = ""
    """Whose conversation this is (``user``, else ``safety_identifier``)."""
    output_schema: dict[str, Any] | None = None
    """The JSON Schema ``text.format`` asks for, if any."""
    settings: ClientSettings = field(default_factory=ClientSettings)
    metadata: dict[str, str] | None = None
    client: ClientTools = field(default_factory=ClientTools)
    """The client tools and ``tool_choice`` the request declares."""

    @property
    def carries_history(self) -> bool:
        """Whether the input is the whole conversation (no id names where it continues)."""
        return self.previous_response_id is None and self.conversation is None


def responses_request(
    body: dict[str, Any], policy: ClientSettingsPolicy, model: Model
) -> ResponsesRequest:
    """Check a responses request for ``model``: text input, client function tools.

    Raises:
        OpenAIError: a 400 naming every refused or invalid field.
    """
    problems = Problems()
    refuse_fields(body, FIELDS, EMPTY_OK, problems)
    common = common_fields(body, problems)
    if body.get("truncation") not in (None, "auto", "disabled"):
        problems.add(invalid("truncation", "expected 'auto' or 'disabled'."))
    if not isinstance(body.get("include", []), list):
        problems.add(invalid("include", "expected a list."))
    problems.attempt(check_reasoning, body.get("reasoning"), default=None)
    output_schema = problems.attempt(text_options, body.get("text"), default=None)
    asked = asked_settings(body, RESPONSES_SETTINGS)
    settings = client_settings(asked, RESPONSES_SETTINGS, policy, model, problems)
    items: list[Turn] = []
    instructions = body.get("instructions")
    if instructions is not None:
        if isinstance(instructions, str):
            items.append(("system", instructions))
        else:
            problems.add(invalid("instructions", "expected a string."))
    items.extend(input_items(body.get("input"), problems))
    previous = body.get("previous_response_id")
    if previous is not None and not isinstance(previous, str):
        problems.add(invalid("previous_response_id", "expected a string."))
    conversation = problems.attempt(conversation_id, body.get("conversation"), default=None)
    if previous is not None and conversation is not None:
        problems.add(OpenAIError(
            400, "Send either 'previous_response_id' or 'conversation', not both.",
            param="conversation",
        ))  # fmt: skip
    if previous is None and conversation is None:  # the input carries the conversation
        check_answered(items, problems.add, lambda index: "input")
    client = ClientTools(
        responses_tools(body.get("tools"), problems.add),
        problems.attempt(responses_choice, body.get("tool_choice"), default=None),
    )
    stream = problems.attempt(flag, body, "stream", default=False)
    problems.raise_any()
    return ResponsesRequest(
        items=items,
        previous_response_id=previous,
        conversation=conversation,
        stream=stream,
        user=common.user,
        output_schema=output_schema,
        settings=settings,
        metadata=common.metadata,
        client=client,
    )


def check_reasoning(value: Any) -> None:
    """``reasoning``: an object; its ``effort`` is a setting, ``summary`` changes nothing."""
    if value is None:
        return
    if not isinstance(value, dict):
        raise invalid("reasoning", 'expected an object such as {"effort": "low"}.')
    for name in value:
        if name not in REASONING_KEYS:
            raise unsupported(f"reasoning.{name}")


def text_options(value: Any) -> dict[str, Any] | None:
    """``text``: its ``format`` (the schema it asks for, if any); ``verbosity`` is a setting."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise invalid("text", "expected an object.")
    for name in value:
        if name not in ("format", "verbosity"):
            raise unsupported(f"text.{name}")
    return text_format(value.get("format"), "text.format", False)


def input_items(raw: Any, problems: Problems) -> list[Turn]:
    """The ``input``: a string, or a list of items.

    Items: messages (text content only), reasoning items, and client tools' function calls and
    their outputs.
    """
    if isinstance(raw, str):
        return [("user", raw)]
    if not isinstance(raw, list) or not raw:
        problems.add(invalid("input", "expected a string or a non-empty list of messages."))
        return []
    found = len(problems.errors)
    try:  # every item at once; on a problem, again one by one to name each bad one
        parsed = [input_item(item, index) for index, item in enumerate(raw)]
    except OpenAIError:
        parsed = [problems.attempt(input_item, item, i, default=None) for i, item in enumerate(raw)]
    items: list[Turn] = []
    for entry in parsed:
        if isinstance(entry, dict):  # a function call joins the assistant message before it
            join_call(items, entry)
        elif entry is not None:
            items.append(entry)
    if len(problems.errors) == found and (not items or items[-1][0] not in ("user", "tool")):
        problems.add(
            invalid(
                f"input[{len(raw) - 1}]",
                "the last input message must be a "
                "user's (the agent answers it), or function call outputs.",
            )
        )
    return items


def function_call(item: dict[str, Any], where: str) -> dict[str, str]:
    """A ``function_call`` item (a client tool's call the model made)."""
    call_id, name = item.get("call_id"), item.get("name")
    if not isinstance(call_id, str) or not isinstance(name, str):
        raise invalid(where, "expected a function_call with 'call_id', 'name' and 'arguments'.")
    return call_of(call_id, name, item.get("arguments"))


def input_item(item: Any, index: int) -> Turn | dict[str, str] | None:
    """One input item as ``(role, text)``.

    A function call is returned as the call (it joins a message); ``None`` for an item left
    out (reasoning).
    """
    where = f"input[{index}]"
    if not isinstance(item, dict):
        raise invalid(where, "expected an object.")
    kind = item.get("type", "message")
    if kind in SKIPPED_ITEMS:
        return None
    if kind == "function_call":
        return function_call(item, where)
    if kind == "function_call_output":
        call_id = item.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            raise invalid(f"{where}.call_id", "expected the call_id of the call it answers.")
        return tool_turn(call_id, output_text(item.get("output"), f"{where}.output"))
    if kind != "message":
        raise unsupported(f"{where}.type", f"items of type {kind!r} are not served; send "
                          "messages, function calls and their outputs.")  # fmt: skip
    role = role_of(item.get("role"), f"{where}.role")
    return role, text_of(item.get("content"), f"{where}.content", PARTS)


def conversation_id(value: Any) -> str | None:
    """``conversation``: an id, or an object with ``id``."""
    if value is None:
        return None
    if isinstance(value, dict):
        value = value.get("id")
    if not isinstance(value, str) or not value:
        raise invalid("conversation", 'expected a conversation id or {"id": ...}.')
    return value
