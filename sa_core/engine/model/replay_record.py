"""What a replay runs against: the recorded tree, the replay's sessions and its divergences.

The replay driver (:mod:`sa_core.replay`) reads an exported document into a tree of
:class:`RecordedThread` (one per thread, with its messages, recorded model calls, file and
value changes, approval decisions and children), and starts a :class:`ReplaySession`. The
engine follows each thread of the replay with a :class:`ThreadCursor` (its place in the
recording); every difference it finds is a :class:`Divergence`.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from sa_core.engine.model.recording import normalise
from sa_core.spec import Message

if TYPE_CHECKING:
    from sa_core.store.rows import RecordedCall

DivergenceKind = Literal[
    "request_changed",
    "different_tool_call",
    "different_tool_result",
    "extra_model_call",
    "missing_model_call",
    "extra_tool_call",
    "missing_tool_call",
    "extra_child",
    "missing_child",
    "different_end_state",
]
"""What differs between the recording and the replay (docs/time-travel.md lists each)."""
ToolReplay = Literal["recorded", "execute"]
INTERNAL_VALUE = "sa:"
"""Values under this prefix are the engine's own (approvals, A2A tasks): never replayed."""
_ATTACHMENT_LINE = re.compile(r'\nAttachment path for "[^"\n]*": \S+$')


@dataclass(slots=True)
class Divergence:
    """The first (or any) place where the replay did not do what the recording did.

    Attributes:
        kind: What differs (:data:`DivergenceKind`).
        path: The thread, as ``root`` or ``root/researcher#1`` (agent and creation rank).
        ordinal: The model call (for model calls and requests) or tool call (for tool calls
            and results) of that thread, counted from 1; ``None`` for children and end states.
        summary: One line saying what happened.
        diff: A readable diff (unified diff of the texts that differ), possibly empty.
    """

    kind: DivergenceKind
    path: str
    ordinal: int | None
    summary: str
    diff: str = ""

    def to_json(self) -> dict[str, Any]:
        """The divergence as a JSON object."""
        return {
            "kind": self.kind,
            "path": self.path,
            "ordinal": self.ordinal,
            "summary": self.summary,
            "diff": self.diff,
        }

    def __str__(self) -> str:
        where = self.path if self.ordinal is None else f"{self.path}, #{self.ordinal}"
        text = f"{self.kind} at {where}: {self.summary}"
        return f"{text}\n{self.diff}" if self.diff else text


@dataclass(slots=True)
class FileEvent:
    """A recorded change of a file: written with ``data``, or deleted (``data is None``)."""

    time: int
    path: str
    data: bytes | None
    mime_type: str = "application/octet-stream"
    metadata: dict[str, Any] | None = None


@dataclass(slots=True)
class ValueEvent:
    """A recorded change of a thread value (``state.set_value``) at ``time``: set, or deleted."""

    time: int
    key: str
    value: Any
    deleted: bool = False


@dataclass
class RecordedThread:
    """One thread of the recording (see the module docstring)."""

    path: str
    agent: str
    package: str
    messages: list[Message]
    calls: list[RecordedCall]
    thread_id: str = ""
    """The recorded thread's id (its children's results name it)."""
    created_by: str | None = None
    """The tool call that created the thread (a child), when known."""
    history_ids: list[str] = field(default_factory=list)
    """The threads its history was read from (a fork's sources and itself): a child's result
    in its parent's history names one of them."""
    files: dict[str, bytes] = field(default_factory=dict)
    """The thread's files at the end of the recording, by path."""
    file_meta: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Their ``mime_type`` and ``metadata``, by path."""
    file_events: list[FileEvent] = field(default_factory=list)
    value_events: list[ValueEvent] = field(default_factory=list)
    decisions: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Approval decisions by tool-call id: ``approve``, ``arguments``, ``reason``."""
    children: list[RecordedThread] = field(default_factory=list)
    tool_rows: dict[str, Message] = field(init=False)
    tool_ordinals: dict[str, int] = field(init=False)
    top: list[Message] = field(init=False)
    """The top-level messages, as the thread's history holds them."""

    def __post_init__(self) -> None:
        rows = [m for m in self.messages if m.role == "tool" and m.tool_call_id]
        self.tool_rows = {m.tool_call_id: m for m in rows if m.tool_call_id}
        self.tool_ordinals = {m.tool_call_id: i + 1 for i, m in enumerate(rows) if m.tool_call_id}
        self.top = [m for m in self.messages if m.depth == 0 and m.status != "pending"]

    def child(self, path: str) -> RecordedThread | None:
        """The child recorded at ``path``."""
        return next((c for c in self.children if c.path == path), None)

    def child_by_id(self, thread_id: str) -> RecordedThread | None:
        """The child whose recorded thread id is ``thread_id``."""
        return next((c for c in self.children if thread_id in (c.thread_id, *c.history_ids)), None)

    def call_arguments(self, call_id: str) -> tuple[str, dict[str, Any]] | None:
        """The tool name and arguments of the recorded call ``call_id``."""
        for message in self.messages:
            for call in message.tool_calls or []:
                if call.id == call_id:
                    return call.name, call.arguments
        return None

    def before(self, message: Message) -> int:
        """When the message recorded before ``message`` (same thread) was created."""
        index = next(i for i, m in enumerate(self.messages) if m.id == message.id)
        earlier = [m.created_at for m in self.messages[:index]]
        return max(earlier, default=0)


def recorded_text(row: Message) -> str:
    """A tool row's content without the attachment-path lines the engine appends."""
    text = row.content or ""
    while True:
        stripped = _ATTACHMENT_LINE.sub("", text)
        if stripped == text:
            return text
        text = stripped


def same_text(recorded: str | None, replayed: str | None) -> bool:
    """Whether two texts are equal once ids, timestamps and file names are normalised."""
    return normalise(recorded or "") == normalise(replayed or "")


@dataclass
class ReplaySession:
    """One replay: its recording, options, findings and counters.

    Attributes:
        root: The recorded root thread.
        tools: ``recorded`` serves tool results; ``execute`` runs the tools again (each
            tool's own ``replay`` setting applies on top, see ``define_tool``).
        stop_at_first: Stop the replay at the first divergence.
        wait_timeout: Seconds a thread waits for a message the recording says it received
            (a child's result, a queued message) before that counts as a divergence.
    """

    root: RecordedThread
    tools: ToolReplay = "recorded"
    stop_at_first: bool = True
    wait_timeout: float = 30.0
    divergences: list[Divergence] = field(default_factory=list)
    cursors: dict[str, ThreadCursor] = field(default_factory=dict)
    model_calls_served: int = 0
    tool_executions: int = 0
    tool_results_served: int = 0

    @property
    def stopped(self) -> bool:
        """Whether the replay stops now (it diverged and stops at the first divergence)."""
        return self.stop_at_first and bool(self.divergences)

    def diverge(self, divergence: Divergence) -> None:
        """Note a divergence (kept in the order found)."""
        self.divergences.append(divergence)


@dataclass
class ThreadCursor:
    """Where one thread of the replay stands in its recording.

    ``recorded`` is ``None`` for a child the recording does not have (an extra child).
    """

    session: ReplaySession
    thread_id: str
    path: str
    recorded: RecordedThread | None
    next_call: int = 0
    tool_calls: int = 0
    used_tool_calls: set[str] = field(default_factory=set)
    children: Counter[str] = field(default_factory=Counter)
    """Children created so far, by agent."""
    matched: Counter[str] = field(default_factory=Counter)
    """Children matched with the recording's so far, by agent (their rank makes their path)."""
    delivered: set[str] = field(default_factory=set)
    """Recorded queued user messages this replay queued (by recorded message id)."""


__all__ = [
    "INTERNAL_VALUE",
    "Divergence",
    "DivergenceKind",
    "FileEvent",
    "RecordedThread",
    "ReplaySession",
    "ThreadCursor",
    "ToolReplay",
    "ValueEvent",
    "recorded_text",
    "same_text",
]
