"""Where an A2A task (one turn of a thread) stands, read from the thread alone.

A task is the turn that starts with the task's first message (and takes any messages the
client sent into the same task later). Its state comes from what the thread stored, so any
worker, before or after a restart, reads the same answer:

- ``completed``: the turn's last assistant message is a finished answer (no tool calls);
- ``canceled``: that answer was cut short by a stop, or the thread was stopped mid-turn;
- ``input-required``: a tool call awaits a human approval, or a subagent awaits variables;
- ``failed``: the turn logged a ``step_error`` and stored no answer;
- ``working``: none of these yet.

This module uses only the public :class:`~sa_core.state.ThreadState` API and imports no A2A
code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from sa_core.spec import FileRecord, Message
from sa_core.state import ThreadState

TurnState = Literal["working", "completed", "failed", "canceled", "input-required"]
SETTLED: frozenset[str] = frozenset({"completed", "failed", "canceled", "input-required"})
_PAGE = 500


@dataclass
class TurnOutcome:
    """What a turn has come to."""

    state: TurnState
    note: str = ""
    """A short explanation for the client (why input is required, why it failed)."""
    answer: Message | None = None
    """The answering assistant message (``completed``, or ``canceled`` with partial text)."""
    files: list[FileRecord] = field(default_factory=list)
    """Files written on the thread since the turn began (not the client's own attachments)."""


async def turn_messages(thread: ThreadState, message_ids: list[str]) -> list[Message] | None:
    """The turn's top-level messages: from its first message up to a message of another turn.

    ``message_ids`` are the messages the client sent into this task; another ``user`` message
    (a later task, or a message posted over the HTTP API) ends the turn. None when the first
    message is not in the thread: still queued (another worker runs the thread and has not
    taken it yet), or deleted.
    """
    if not message_ids:
        return None
    found: list[Message] = []
    offset = 0
    while True:  # newest first, back to the first message of the turn
        page = await thread.get_messages(limit=_PAGE, offset=offset, order="desc")
        for message in page.messages:
            found.append(message)
            if message.id == message_ids[0]:
                found.reverse()
                return _cut(found, set(message_ids))
        if not page.has_more:
            return None
        offset += len(page.messages)


def _cut(messages: list[Message], ours: set[str]) -> list[Message]:
    for index, message in enumerate(messages):
        if index and message.role == "user" and message.id not in ours:
            return messages[:index]
    return messages


async def turn_outcome(
    thread: ThreadState, message_ids: list[str], *, running: bool
) -> TurnOutcome:
    """Read where the turn stands (see the module docstring).

    Args:
        thread: the task's thread (refreshed by the caller when it may be stale).
        message_ids: the messages the client sent into the task, first one first.
        running: whether this process knows the turn is still in flight.
    """
    messages = await turn_messages(thread, message_ids)
    if messages is None:  # queued for the worker that runs the thread
        return TurnOutcome("working")
    answer = _answer(messages)
    if answer is not None:
        stopped = bool((answer.metadata or {}).get("stopped"))
        files = await produced_files(thread, messages)
        if stopped:
            return TurnOutcome("canceled", "The turn was stopped.", answer, files)
        return TurnOutcome("completed", "", answer, files)
    waiting = await _awaiting_input(thread, messages)
    if waiting:
        return TurnOutcome("input-required", waiting)
    if running:
        return TurnOutcome("working")
    started = messages[0].created_at
    for log in await thread.get_logs(limit=20, order="desc"):
        if log.type == "step_error" and log.created_at >= started:
            return TurnOutcome(
                "failed", "The turn failed; the thread's logs say why (GET .../threads/{id}/logs)."
            )
    if thread.row.stopped:
        return TurnOutcome("canceled", "The thread was stopped.")
    return TurnOutcome("working")


def _answer(messages: list[Message]) -> Message | None:
    last = next((m for m in reversed(messages) if m.role == "assistant"), None)
    if last is None or last.tool_calls or last.status != "completed":
        return None
    return last


async def _awaiting_input(thread: ThreadState, messages: list[Message]) -> str:
    pending = [a for a in await thread.pending_approvals() if a.get("status") == "pending"]
    if pending:
        calls = ", ".join(f"{a['name']} ({a['tool_call_id']})" for a in pending)
        return (
            f"Awaiting human approval of tool call(s): {calls}. Decide each with POST "
            f"/api/packages/{thread.package}/threads/{thread.thread_id}/approvals/"
            '{tool_call_id} and {"approve": true} or {"approve": false, "reason": "..."}.'
        )
    for message in messages:
        meta = message.metadata or {}
        if message.role != "tool" or meta.get("error_code") != "subagent_env_required":
            continue
        request_id = str((meta.get("error_data") or {}).get("request_id", ""))
        request = await thread.variables_request(request_id) if request_id else None
        if request is not None:
            names = ", ".join(str(n) for n in request.get("missing") or request["required"])
            return (
                f"Subagent {request['agent_name']!r} awaits variables: {names}. Provide them "
                f"with POST /api/packages/{thread.package}/threads/{thread.thread_id}/"
                f'variables/{request_id} and {{"env": {{"NAME": "value"}}}}.'
            )
    return ""


async def produced_files(thread: ThreadState, messages: list[Message]) -> list[FileRecord]:
    """Files created on the thread since the turn began, minus the client's attachments."""
    sent = {
        ref.path
        for message in messages
        if message.role == "user"
        for ref in message.attachments or []
    }
    started = messages[0].created_at
    return [
        record
        for record in await thread.find_files("/**")
        if not record.is_directory and record.created_at >= started and record.path not in sent
    ]
