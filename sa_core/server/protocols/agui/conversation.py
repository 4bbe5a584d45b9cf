"""What a run's new messages do on its thread: add history, answer client calls, start a turn.

:func:`plan` reads the new messages (those after what the thread holds) against the client
tool calls the thread's turn awaits:

- only results of awaited calls: they continue the paused turn (:attr:`Plan.results`);
- ending with a ``user`` message: results of awaited calls among them end the paused turn with
  no model step (the client went on, :attr:`Plan.closing`), the others are stored as history,
  and the last one starts the turn (:attr:`Plan.message`);
- anything else (no new message, or a conversation ending with an assistant message): stored,
  and no turn runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sa_core.server.protocols.agui.inputs import Said
from sa_core.state import ThreadState


@dataclass
class Plan:
    """What the new messages of a run do (see the module docstring)."""

    history: list[Said] = field(default_factory=list)
    """Stored as they are, before the turn."""
    closing: dict[str, str] = field(default_factory=dict)
    """Results of awaited calls that end the paused turn (``{call id: output}``)."""
    results: dict[str, str] = field(default_factory=dict)
    """Results of awaited calls that continue the paused turn."""
    message: Said | None = None
    """The user message that starts the turn."""


def plan(new: Sequence[Said], awaited: set[str]) -> Plan:
    """What ``new`` does on a thread whose turn awaits the client calls ``awaited``."""
    answers = {
        said.tool_call_id: said.text
        for said in new
        if said.role == "tool" and said.tool_call_id in awaited
    }
    rest = [s for s in new if not (s.role == "tool" and s.tool_call_id in answers)]
    if answers and not rest:
        return Plan(results={str(k): v for k, v in answers.items()})
    closing = {str(k): v for k, v in answers.items()}
    if rest and rest[-1].role == "user":
        return Plan(history=rest[:-1], closing=closing, message=rest[-1])
    return Plan(history=rest, closing=closing)


def stored_form(said: Said, names: dict[str, str]) -> dict[str, Any]:
    """The message that stores ``said`` on a thread (``names``: tool names by call id)."""
    if said.role == "assistant" and said.calls:
        names.update((c["id"], c["name"]) for c in said.calls)
        calls = [
            {"id": c["id"], "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in said.calls
        ]
        return {"role": "assistant", "content": said.text, "tool_calls": calls}
    if said.role == "tool":
        call_id = said.tool_call_id or ""
        return {"role": "tool", "content": said.text, "tool_call_id": call_id,
                "name": names.get(call_id)}  # fmt: skip
    return {"role": said.role, "content": said.text}


async def add_history(thread: ThreadState, history: Sequence[Said]) -> None:
    """Store ``history`` on the thread without running a turn for it."""
    names: dict[str, str] = {}
    for said in history:
        await thread.inject_message(stored_form(said, names))
