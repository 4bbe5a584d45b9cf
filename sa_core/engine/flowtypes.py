"""What the pieces of the turn loop share: stop reasons, a step's result, how a session ended.

The loop (:mod:`sa_core.engine.turn.flow`), one model step (:mod:`sa_core.engine.turn.step`), the
tool calls (:mod:`sa_core.engine.turn.toolcall`), the tool rows
(:mod:`sa_core.engine.tools.toolrows`), the queue drain (:mod:`sa_core.engine.turn.drain`) and
resuming (:mod:`sa_core.engine.turn.resume`) all import these from here, below all of them.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from sa_core.spec import AttachmentRef, Message, Side, SideConfig, ToolCall

SIDE_ROLE: dict[Side, Literal["assistant", "user"]] = {"a": "assistant", "b": "user"}
"""The role a side's messages are stored with (side B's as ``user``)."""

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


def turn_completed(config: SideConfig, called: Collection[str], content: str) -> StopReason | None:
    """Whether a step completes the acting side's turn, and how (the spec's stop order).

    ``stop_tool`` when the side's stop tool was among the calls, else ``stop_on_response``
    when the side stops on an answer and gave one (text, no call). The one decision of both
    the loop (:meth:`sa_core.engine.turn.flow.Flow.after_step`) and the step that commits the
    flow's settlement with its answer (:func:`sa_core.engine.turn.step.last_step`).
    """
    if config.stop_tool is not None and config.stop_tool in called:
        return "stop_tool"
    if config.stop_on_response and content.strip() and not called:
        return "stop_on_response"
    return None


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


@dataclass(slots=True)
class SentMessages:
    """A flow's messages that reached a model, kept incrementally step after step.

    Kept by :func:`sa_core.engine.turn.step.sent_messages`: each step filters only what the
    flow remembered since the previous one.
    """

    source: list[Message]
    """The flow's message list these were taken from (a new list starts over)."""
    seen: int = 0
    """How many of ``source`` were looked at."""
    sent: list[Message] = field(default_factory=list)
    """Those that reached a model."""
    top: list[Message] = field(default_factory=list)
    """Those of them at the top level (not a subprompt's, not a nested flow's)."""


@dataclass
class StepResult:
    """What one model step produced."""

    message: Message
    calls: list[ToolCall]
    tool_rows: list[Message]
    content: str
    settled: StopReason | None = None
    """Why the flow stopped, when it was settled in the step's own commit."""


class RunningFlow(Protocol):
    """What a thread handle holds of the flow it runs in (``ThreadRef.execution``).

    The members :class:`ExecutionView` reads, and the flow's scratch ``context``. The flow
    itself (:class:`sa_core.engine.turn.flow.Flow`) owns them; the engine's step state is not
    part of it (:mod:`sa_core.engine.flowview`).
    """

    flow_id: str
    current_side: Side
    step_count: int
    side_steps: dict[Side, int]
    stopped: bool
    stopped_by: str | None
    prompt_path: list[str]
    messages: list[Message]
    context: dict[str, Any]

    def force_turn(self, side: Side) -> None:
        """Make ``side`` act on the next step."""
        ...

    def stop(self, reason: str = "aborted") -> None:
        """Stop the flow after the current step."""
        ...

    def view(self) -> ExecutionView:
        """The flow as user code sees it."""
        ...

    def queue_tool(self, name: str, arguments: dict[str, Any]) -> None:
        """Run tool ``name`` after the current step's tool calls (``state.queue_tool``)."""
        ...


class ExecutionView:
    """A running flow as user code sees it: ``state.execution`` (the spec's ExecutionState).

    Counts, the acting side, the flow's scratch ``context``, and the two controls a tool or
    hook may use: :meth:`force_turn` and :meth:`stop`. Read-only otherwise: the engine's own
    step state (the calls without results, the model call in flight, ...) stays with the turn
    modules (:class:`sa_core.engine.turn.flow.Flow`).
    """

    __slots__ = ("_flow",)

    def __init__(self, flow: RunningFlow) -> None:
        self._flow = flow

    def __repr__(self) -> str:
        flow = self._flow
        return f"<execution {flow.flow_id} side={flow.current_side} steps={flow.step_count}>"

    @property
    def flow_id(self) -> str:
        """The id of this run of the turn loop."""
        return self._flow.flow_id

    @property
    def current_side(self) -> Side:
        """The side acting now."""
        return self._flow.current_side

    @property
    def step_count(self) -> int:
        """Steps taken in this flow, both sides."""
        return self._flow.step_count

    @property
    def side_a_step_count(self) -> int:
        """Steps side A took in this flow."""
        return self._flow.side_steps["a"]

    @property
    def side_b_step_count(self) -> int:
        """Steps side B took in this flow."""
        return self._flow.side_steps["b"]

    @property
    def stopped(self) -> bool:
        """Whether the flow was stopped (:meth:`stop`)."""
        return self._flow.stopped

    @property
    def stopped_by(self) -> str | None:
        """Why it was stopped, if it was."""
        return self._flow.stopped_by

    @property
    def prompt_path(self) -> list[str]:
        """The prompts this flow went through (subprompts included)."""
        return list(self._flow.prompt_path)

    @property
    def context(self) -> dict[str, Any]:
        """A scratch dict tools and hooks of this flow share (``state.context``)."""
        return self._flow.context

    @property
    def message_history(self) -> list[Message]:
        """Messages created during this flow."""
        return list(self._flow.messages)

    def force_turn(self, side: Side) -> None:
        """Make ``side`` act on the next step."""
        self._flow.force_turn(side)

    def stop(self, reason: str = "aborted") -> None:
        """Stop the flow after the current step."""
        self._flow.stop(reason)
