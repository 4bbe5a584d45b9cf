"""Client tools over the OpenAI-compatible API (docs/protocols.md, "Client tools").

A request may declare function ``tools`` and a ``tool_choice``: they are offered to the agent's
model for the turn beside the agent's own tools (``thread.send_message(..., client_tools=...,
tool_choice=...)``), unless the agent turns client tools off (``serving.client_tools``). When
the model calls one, the turn pauses and the response returns the call; the request that
carries the results (chat: ``role: "tool"`` messages after the assistant message with the
calls; Responses: ``function_call_output`` items) continues the same thread and the same turn
(``thread.submit_tool_results``).

This module reads and writes the shapes (no thread is touched here; for that see
:mod:`~sa_core.server.protocols.openai.toolturns`). Conversations a client keeps (chat messages, a
Responses ``input`` carrying history) are found by
the digest of their ``(role, text)`` pairs: an assistant message with tool calls keeps its calls
in its text after :data:`CALLS_MARK` (:func:`assistant_turn`), and a tool result is the pair
``("tool", JSON [call_id, output])`` (:func:`tool_turn`), so that both APIs reduce a paused
conversation to the same pairs. Arguments are compared as JSON values, not as text: clients
rebuild the string their own way.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sa_core.engine.turn import clienttools
from sa_core.server.protocols.openai.errors import OpenAIError, invalid, unsupported
from sa_core.spec import Message

Turn = tuple[str, str]
CALLS_MARK = "\x00tool_calls\x00"
"""Between an assistant message's text and its tool calls (JSON), in a conversation's pairs."""
CHOICES = ("auto", "none", "required")
Add = Callable[[OpenAIError], None]


@dataclass
class ClientTools:
    """What a request asks of client tools.

    Attributes:
        tools: the declared functions, as the engine takes them (``None``: none declared).
        choice: the ``tool_choice``, as the engine takes it (``None``: not given).
        results: ``{call_id: output}`` when the request continues a paused turn.
    """

    tools: list[dict[str, Any]] | None = None
    choice: str | dict[str, str] | None = None
    results: dict[str, str] | None = None

    @property
    def declared(self) -> bool:
        """Whether the request declares tools, or a choice other than ``auto``."""
        return bool(self.tools) or self.choice not in (None, "auto")


# -- parsing --------------------------------------------------------------------------------


def chat_tools(value: Any, add: Add) -> list[dict[str, Any]] | None:
    """``tools`` of chat completions: ``[{"type": "function", "function": {...}}]``."""
    return _tools(value, add, nested=True)


def responses_tools(value: Any, add: Add) -> list[dict[str, Any]] | None:
    """``tools`` of Responses: ``[{"type": "function", "name": ..., ...}]``."""
    return _tools(value, add, nested=False)


def _tools(value: Any, add: Add, *, nested: bool) -> list[dict[str, Any]] | None:
    if value is None or value == []:
        return None
    if not isinstance(value, list):
        add(invalid("tools", "expected a list of function tools."))
        return None
    specs: list[dict[str, Any]] = []
    for index, tool in enumerate(value):
        where = f"tools[{index}]"
        if not isinstance(tool, dict) or tool.get("type") != "function":
            kind = tool.get("type") if isinstance(tool, dict) else type(tool).__name__
            add(unsupported(f"{where}.type", f"only function tools are served (got {kind!r}); "
                            "the agent's own tools run on the server."))  # fmt: skip
            continue
        spec = tool.get("function") if nested else tool
        if not isinstance(spec, dict):
            add(invalid(f"{where}.function", "expected an object with 'name'."))
            continue
        declared = {k: v for k, v in spec.items() if k in clienttools.FIELDS and v is not None}
        specs.append(declared)
    return specs


def chat_choice(value: Any) -> str | dict[str, str] | None:
    """``tool_choice`` of chat completions: a mode, or a function (``{"function": {name}}``)."""
    if value is None or value in CHOICES:
        return value  # type: ignore[no-any-return]
    function = value.get("function") if isinstance(value, dict) else None
    if (
        isinstance(value, dict)
        and value.get("type") == "function"
        and isinstance(function, dict)
        and isinstance(function.get("name"), str)
    ):
        return {"name": function["name"]}
    raise invalid("tool_choice", "expected 'auto', 'none', 'required' or {\"type\": "
                  "\"function\", \"function\": {\"name\": ...}}.")  # fmt: skip


def responses_choice(value: Any) -> str | dict[str, str] | None:
    """``tool_choice`` of Responses: a mode, or ``{"type": "function", "name": ...}``."""
    if value is None or value in CHOICES:
        return value  # type: ignore[no-any-return]
    if (
        isinstance(value, dict)
        and value.get("type") == "function"
        and isinstance(value.get("name"), str)
    ):
        return {"name": value["name"]}
    if isinstance(value, dict) and value.get("type") not in (None, "function"):
        raise unsupported("tool_choice", f"only functions can be chosen (got "
                          f"{value.get('type')!r}).")  # fmt: skip
    raise invalid("tool_choice", "expected 'auto', 'none', 'required' or {\"type\": "
                  "\"function\", \"name\": ...}.")  # fmt: skip


def chat_calls(value: Any, where: str) -> list[dict[str, str]]:
    """An assistant message's ``tool_calls``: ``[{"id", "name", "arguments"}]``."""
    if not isinstance(value, list):
        raise invalid(where, "expected a list of tool calls.")
    calls = []
    for index, call in enumerate(value):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(call.get("id"), str):
            raise invalid(f"{where}[{index}]", "expected {\"id\", \"type\": \"function\", "
                          "\"function\": {\"name\", \"arguments\"}}.")  # fmt: skip
        calls.append(call_of(call["id"], function.get("name"), function.get("arguments")))
    return calls


def call_of(call_id: Any, name: Any, arguments: Any) -> dict[str, str]:
    """A tool call as this module keeps it."""
    return {"id": str(call_id), "name": str(name or ""), "arguments": str(arguments or "{}")}


def output_text(value: Any, where: str) -> str:
    """A tool result's output: a string, or a list of text parts."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(p, dict) for p in value):
        texts = [p.get("text") for p in value]
        if all(isinstance(t, str) for t in texts):
            return "".join(str(t) for t in texts)
    raise invalid(where, "expected a string or a list of text parts.")


# -- a conversation's pairs -----------------------------------------------------------------


def assistant_turn(text: str, calls: Sequence[Mapping[str, str]]) -> Turn:
    """The pair of an assistant message (its tool calls kept after :data:`CALLS_MARK`)."""
    if not calls:
        return ("assistant", text)
    listed = [[c["id"], c["name"], canonical(c["arguments"])] for c in calls]
    return ("assistant", text + CALLS_MARK + json.dumps(listed, ensure_ascii=False))


def tool_turn(call_id: str, output: str) -> Turn:
    """The pair of a tool result."""
    return ("tool", json.dumps([call_id, output], ensure_ascii=False))


def canonical(arguments: str) -> str:
    """Arguments as a JSON value written one way (the text itself when it is not JSON)."""
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError:
        return arguments
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def join_call(turns: list[Turn], call: Mapping[str, str]) -> None:
    """Add a Responses ``function_call`` item to the conversation's pairs.

    It joins the assistant message right before it (as chat's ``tool_calls`` do), else it is an
    assistant message of its own.
    """
    if turns and turns[-1][0] == "assistant":
        text, calls = split_assistant(turns[-1][1])
        turns[-1] = assistant_turn(text, [*calls, dict(call)])
    else:
        turns.append(assistant_turn("", [call]))


def split_assistant(text: str) -> tuple[str, list[dict[str, str]]]:
    """An assistant pair's text and its tool calls (as :func:`assistant_turn` wrote them)."""
    content, mark, listed = text.partition(CALLS_MARK)
    if not mark:
        return text, []
    return content, [call_of(*entry) for entry in json.loads(listed)]


def split_result(text: str) -> tuple[str, str]:
    """A tool pair's call id and output."""
    call_id, output = json.loads(text)
    return str(call_id), str(output)


def check_answered(turns: Sequence[Turn], add: Add, where: Callable[[int], str]) -> None:
    """Check that each assistant message's tool calls are answered by the results after it.

    Every call needs its result, right after the message and before any other; a result
    needs its call. ``where(index)`` names the request field of ``turns[index]``.
    """
    if not has_tool_traffic(turns):
        return
    index = 0
    while index < len(turns):
        role, text = turns[index]
        calls = split_assistant(text)[1] if role == "assistant" else []
        if role == "tool":
            add(invalid(where(index), "a tool result must follow the assistant message that "
                        "made its call."))  # fmt: skip
        index += 1
        if not calls:
            continue
        made = [c["id"] for c in calls]
        answered: list[str] = []
        while index < len(turns) and turns[index][0] == "tool":
            answered.append(split_result(turns[index][1])[0])
            index += 1
        missing = [c for c in made if c not in answered]
        unknown = [a for a in answered if a not in made]
        if missing:
            add(invalid(where(index - 1), f"the results of tool calls {', '.join(missing)} "
                        "must follow the assistant message that made them."))  # fmt: skip
        if unknown:
            add(invalid(where(index - 1), f"results for calls {', '.join(unknown)} that the "
                        "assistant message before them did not make."))  # fmt: skip


def has_tool_traffic(turns: Sequence[Turn]) -> bool:
    """Whether any pair is a tool result or an assistant message with calls (few requests)."""
    for role, text in turns:  # noqa: SIM110 - a loop, about twice as fast as any() here
        if role == "tool" or (role == "assistant" and CALLS_MARK in text):
            return True
    return False


def trailing_results(messages: Sequence[Turn]) -> tuple[int, dict[str, str]] | None:
    """Where the known part ends and the results after it, when the messages end with results.

    Such a request continues a paused turn; any other gives ``None``.
    """
    end = len(messages)
    while end > 0 and messages[end - 1][0] == "tool":
        end -= 1
    if end == len(messages) or end == 0 or messages[end - 1][0] != "assistant":
        return None
    return end, dict(split_result(text) for _, text in messages[end:])


def history_messages(history: Sequence[Turn]) -> list[dict[str, Any]]:
    """The messages that store ``history`` on a thread (tool calls and results as they were)."""
    names: dict[str, str] = {}
    stored: list[dict[str, Any]] = []
    for role, text in history:
        if role == "assistant":
            content, calls = split_assistant(text)
            message: dict[str, Any] = {"role": role, "content": content}
            if calls:
                names.update((c["id"], c["name"]) for c in calls)
                message["tool_calls"] = [
                    {"id": c["id"], "function": {"name": c["name"], "arguments": c["arguments"]}}
                    for c in calls
                ]
            stored.append(message)
        elif role == "tool":
            call_id, output = split_result(text)
            stored.append(
                {"role": role, "content": output, "tool_call_id": call_id,
                 "name": names.get(call_id)}
            )  # fmt: skip
        else:
            stored.append({"role": role, "content": text})
    return stored


# -- answers --------------------------------------------------------------------------------


def paused_calls(
    replies: Sequence[Message], pending: Sequence[Mapping[str, Any]]
) -> list[dict[str, str]]:
    """The client calls a paused turn returns, in order, with their arguments as made.

    The arguments are read from the assistant message that made the calls.
    """
    waiting = {p["tool_call_id"] for p in pending}
    calls: list[dict[str, str]] = []
    for message in replies:
        for call in message.tool_calls or []:
            if call.id in waiting:
                calls.append(call_of(call.id, call.name, call.function.arguments))
    return calls


def chat_call(call: Mapping[str, str], index: int | None = None) -> dict[str, Any]:
    """A tool call in chat completions' shape (with ``index`` in a streamed delta)."""
    shaped: dict[str, Any] = {
        "id": call["id"],
        "type": "function",
        "function": {"name": call["name"], "arguments": call["arguments"]},
    }
    return shaped if index is None else {"index": index, **shaped}


def function_call_item(call: Mapping[str, str], status: str = "completed") -> dict[str, Any]:
    """A ``function_call`` output item of Responses."""
    return {
        "type": "function_call",
        "id": f"fc_{call['id']}",
        "call_id": call["id"],
        "name": call["name"],
        "arguments": call["arguments"] if status == "completed" else "",
        "status": status,
    }
