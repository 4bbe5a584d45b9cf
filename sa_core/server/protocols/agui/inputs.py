"""A run's input: the ``RunAgentInput`` of the ``ag-ui-protocol`` package, checked and reduced.

:func:`read_input` validates the request body with the package's own model and reduces it to
what a run uses (:class:`RunInput`): the client's thread and run ids, the conversation as
:class:`Said` items (text only: ``developer`` messages count as ``system``; activity and
reasoning messages are the client's display and are left out), the frontend tools as client
tool declarations, the state to set as thread values, and the answers to the interrupts of an
earlier run. Every problem of a body is named in one 400.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import (
    AssistantMessage,
    DeveloperMessage,
    RunAgentInput,
    SystemMessage,
    TextPart,
    ToolMessage,
    UserMessage,
)
from pydantic import ValidationError

from sa_core.server.errors import ApiError
from sa_core.server.protocols.agui.state import reserved

MAX_THREAD_ID = 256
"""The longest ``threadId`` taken (client-made ids are UUIDs, 36 characters)."""


@dataclass(frozen=True)
class Said:
    """One message of the conversation a client sends, reduced to what a thread stores.

    Attributes:
        id: the client's id of the message.
        role: ``user``, ``assistant``, ``system`` or ``tool``.
        text: its text (a tool message's result).
        calls: an assistant message's tool calls, ``{"id", "name", "arguments"}`` each.
        tool_call_id: the call a tool message answers.
    """

    id: str
    role: str
    text: str
    calls: tuple[dict[str, str], ...] = ()
    tool_call_id: str | None = None


@dataclass(frozen=True)
class Resume:
    """An answer to an interrupt of an earlier run (a tool call awaiting approval)."""

    interrupt_id: str
    approve: bool
    arguments: dict[str, Any] | None = None
    reason: str | None = None


@dataclass(frozen=True)
class RunInput:
    """What a run was asked (see the module docstring)."""

    thread_id: str
    run_id: str
    messages: list[Said]
    tools: list[dict[str, Any]] | None = None
    state: dict[str, Any] = field(default_factory=dict)
    resume: list[Resume] = field(default_factory=list)


def read_input(body: Any) -> RunInput:
    """Validate a request body as ``RunAgentInput``.

    Raises:
        ApiError: 400 ``invalid_input`` naming every problem: the shape (as the package's model
            says), a ``threadId`` that is empty or too long, content parts other than text,
            a ``state`` that is not an object or names a key of the runtime's own.
    """
    problems: list[str] = []
    raw = body if isinstance(body, Mapping) else {}
    thread_id = raw.get("threadId", raw.get("thread_id"))
    if isinstance(thread_id, str) and (not thread_id.strip() or len(thread_id) > MAX_THREAD_ID):
        problems.append(f"threadId: expected 1 to {MAX_THREAD_ID} characters.")
    state = checked_state(raw.get("state"), problems)
    try:
        given = RunAgentInput.model_validate(body)
    except ValidationError as exc:
        shape = [
            f"{'.'.join(str(p) for p in error['loc']) or 'body'}: {error['msg']}."
            for error in exc.errors(include_url=False)
            if error["loc"][:1] != ("state",)
        ]
        raise invalid(shape + problems) from None
    messages = [
        said
        for index, message in enumerate(given.messages)
        if (said := reduced(message, f"messages.{index}", problems)) is not None
    ]
    tools = [
        {"name": t.name, "description": t.description, "parameters": t.parameters}
        if t.parameters is not None
        else {"name": t.name, "description": t.description}
        for t in given.tools or []
    ]
    resume = [answer(entry.model_dump(), f"resume.{i}", problems)
              for i, entry in enumerate(given.resume or [])]  # fmt: skip
    if problems:
        raise invalid(problems)
    return RunInput(given.thread_id, given.run_id, messages, tools or None, state, resume)


def invalid(problems: list[str]) -> ApiError:
    """The 400 of a body that is not a ``RunAgentInput`` this server takes."""
    return ApiError(400, "invalid_input", "Invalid RunAgentInput: " + " ".join(problems))


def reduced(message: Any, where: str, problems: list[str]) -> Said | None:
    """A message as :class:`Said`; ``None`` for the kinds a thread does not store."""
    if isinstance(message, UserMessage):
        return Said(message.id, "user", text_of(message.content, f"{where}.content", problems))
    if isinstance(message, SystemMessage | DeveloperMessage):
        return Said(message.id, "system", message.content)
    if isinstance(message, AssistantMessage):
        calls = tuple(
            {"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
            for c in message.tool_calls or []
        )
        return Said(message.id, "assistant", message.content or "", calls)
    if isinstance(message, ToolMessage):
        text = text_of(message.content, f"{where}.content", problems)
        if message.error and not text:
            text = f"Error: {message.error}"
        return Said(message.id, "tool", text, tool_call_id=message.tool_call_id)
    return None  # activity and reasoning messages: the client's own display


def text_of(content: Any, where: str, problems: list[str]) -> str:
    """The text of a message's content: a string, or text parts (other parts are refused)."""
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for index, part in enumerate(content):
        if isinstance(part, TextPart):
            texts.append(part.text)
        else:
            problems.append(
                f"{where}.{index}: only text parts are served (got {part.type!r}); send files "
                "through the thread's files API."
            )
    return "".join(texts)


def checked_state(value: Any, problems: list[str]) -> dict[str, Any]:
    """The state to set as thread values: an object whose keys are not the runtime's."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.append(
            f"state: expected an object (each key becomes a thread value), got "
            f"{type(value).__name__}."
        )
        return {}
    for key in value:
        if not key:
            problems.append("state: an empty key cannot name a thread value.")
        elif reserved(key):
            problems.append(
                f"state.{key}: keys starting with 'sa:' or 'a2a:' belong to the runtime; rename it."
            )
    return dict(value)


def answer(entry: Mapping[str, Any], where: str, problems: list[str]) -> Resume:
    """An interrupt's answer: ``resolved`` approves unless ``payload.approved`` is false."""
    payload = entry.get("payload")
    if payload is not None and not isinstance(payload, Mapping):
        problems.append(f'{where}.payload: expected an object such as {{"approved": true}}.')
        payload = None
    payload = payload or {}
    arguments = payload.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        problems.append(f"{where}.payload.arguments: expected an object.")
        arguments = None
    reason = payload.get("reason")
    approve = entry.get("status") == "resolved" and payload.get("approved", True) is not False
    return Resume(
        str(entry.get("interrupt_id")),
        approve,
        arguments,
        reason if isinstance(reason, str) else None,
    )
