"""What the pieces of the turn loop share: stop reasons, a step's result, how a session ended.

The loop (:mod:`sa_core.engine.flow`), one model step (:mod:`sa_core.engine.step`), the tool
calls (:mod:`sa_core.engine.toolcall`), the tool rows (:mod:`sa_core.engine.toolrows`), the queue
drain (:mod:`sa_core.engine.drain`) and resuming (:mod:`sa_core.engine.resume`) all import these
from here, below all of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from sa_core.engine.context import Side
from sa_core.spec import AttachmentRef, Message, ToolCall

StopReason = Literal[
    "aborted_by_user",
    "step_error",
    "max_total_steps",
    "max_session_turns",
    "awaiting_human",
    "max_side_steps",
    "session_fail",
    "session_stop",
    "stop_tool",
    "stop_on_response",
    "repeated_error",
    "one_step",
    "state_stop_session",
    "budget_exceeded",
    "awaiting_approval",
    "awaiting_client_tools",
]


def other(side: Side) -> Side:
    """The other side."""
    return "b" if side == "a" else "a"


def side_for_role(role: str) -> Side:
    """A stored ``user`` message makes side A act next; ``assistant`` side B."""
    return "b" if role == "assistant" else "a"


@dataclass
class SessionOutcome:
    """How a session ended, with the payload a parent receives."""

    reason: str
    failed: bool
    content: str | None = None
    attachments: list[AttachmentRef] = field(default_factory=list)


@dataclass
class PendingHandoff:
    """A handoff requested by a tool call, executed after the step."""

    agent_name: str
    package: str
    arguments: dict[str, Any]
    init_message: str | None
    init_attachments: list[AttachmentRef]


@dataclass
class StepResult:
    """What one model step produced."""

    message: Message
    calls: list[ToolCall]
    tool_rows: list[Message]
    content: str
    settled: StopReason | None = None
    """Why the flow stopped, when it was settled in the step's own commit."""
