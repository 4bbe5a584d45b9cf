"""The child -> parent protocol: what a child's row records for the call waiting on it.

A blocking subagent call and its child talk through four keys of the child's
``row.execution`` entry (stored as JSON with the thread):

* ``waiter``: the id of the tool call waiting for the child's session to end, recorded in the
  transaction that hands the child its message.
* ``answered``: that call's id once it has its result (the result was computed and the
  registry status written), so a call run again after a restart re-attaches instead of
  messaging the child again.
* ``last_outcome``: the child's session outcome (``reason``, ``failed``, ``content``,
  ``attachments``), written by its settle.
* ``last_stop_reason``: why the child's last flow stopped, written by its settle.

:class:`ChildLink` is the one typed view of those keys: every reader parses the entry with
:meth:`ChildLink.from_execution` and every writer goes through :meth:`ChildLink.to_execution`,
which changes only the keys whose value changed, in place, so the stored JSON stays as it was
(old rows read as before). The texts a blocking call's result is made of live here too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from sa_core.spec import AttachmentRef, ToolResult

if TYPE_CHECKING:
    from sa_core.store import ThreadRow

ATTACHMENTS_TEXT = "\n\nThe subagent also returned the following attachment(s):\n\n{paths}"
NO_TERMINAL_TEXT = (
    "Subagent execution stopped before completion ({reason}). It did not call a terminal "
    "session tool (sessionStop/sessionFail)."
)

WAITING_REASONS = frozenset({"input-required", "auth-required"})
"""Outcomes of a child that waits for its parent's answer (a remote agent's A2A task asking
for input): its registry status says so, and ``subagent_message`` may answer it even when the
child is not resumable."""

KEYS = ("last_outcome", "last_stop_reason", "waiter", "answered")
"""The execution keys of the protocol, in the order a new key is appended."""


class ChildOutcome(NamedTuple):
    """A child's session outcome as its settle stored it (``last_outcome``).

    Immutable, as a named tuple (cheaper to build than a frozen dataclass; a child's steps and
    its settle read it several times).

    Attributes:
        reason: The flow stop reason that ended the session.
        failed: Whether the session failed (a missing flag reads as failed).
        content: The outcome's text, if any.
        attachments: The outcome's attachments, as stored (``AttachmentRef`` dumps).
    """

    reason: str | None
    failed: bool
    content: str | None
    attachments: tuple[Mapping[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The stored form: ``{"reason", "failed", "content", "attachments"}``."""
        return {
            "reason": self.reason,
            "failed": self.failed,
            "content": self.content,
            "attachments": [dict(a) for a in self.attachments],
        }

    def attachment_refs(self) -> list[AttachmentRef]:
        """The outcome's attachments as references."""
        return [AttachmentRef.model_validate(a) for a in self.attachments]


class ChildLink(NamedTuple):
    """A child's side of the protocol with the call waiting on it (see the module docstring).

    Immutable, as a named tuple, like :class:`ChildOutcome`.

    Attributes:
        waiter: The id of the blocking call waiting for the child, if any.
        answered: The id of the blocking call that got its result, if any.
        outcome: The session outcome of the child's last settle, if it recorded one.
        stop_reason: Why the child's last flow stopped, if it settled.
    """

    waiter: str | None = None
    answered: str | None = None
    outcome: ChildOutcome | None = None
    stop_reason: str | None = None

    @classmethod
    def from_execution(cls, execution: Mapping[str, Any]) -> ChildLink:
        """Read the protocol's keys from a thread's execution entry (missing keys: ``None``)."""
        raw = execution.get("last_outcome")
        outcome = (
            ChildOutcome(
                raw.get("reason"),
                raw.get("failed", True),
                raw.get("content"),
                tuple(raw.get("attachments") or ()),
            )
            if raw
            else None
        )
        return cls(
            execution.get("waiter"),
            execution.get("answered"),
            outcome,
            execution.get("last_stop_reason"),
        )

    @classmethod
    def of(cls, row: ThreadRow | None) -> ChildLink:
        """The protocol state a child's row records (an empty link for no row)."""
        return cls.from_execution(row.execution) if row is not None else EMPTY

    def to_execution(self, execution: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of ``execution`` with this link's keys written; the entry is not changed.

        Only keys whose value differs from what ``execution`` holds are touched: a changed key
        keeps its place, a new one is appended, a ``None`` one is removed. Everything else in
        the entry (turns, status, side) is kept as it is.
        """
        before = ChildLink.from_execution(execution)
        result = dict(execution)
        for key, old, new in (
            ("last_outcome", before.outcome, self.outcome),
            ("last_stop_reason", before.stop_reason, self.stop_reason),
            ("waiter", before.waiter, self.waiter),
            ("answered", before.answered, self.answered),
        ):
            if new == old:
                continue
            if new is None:
                result.pop(key, None)
            else:
                result[key] = new.to_json() if isinstance(new, ChildOutcome) else new
        return result

    def concerns(self, call_id: str) -> bool:
        """Whether ``call_id`` waits on this child or was answered by it."""
        return call_id in (self.waiter, self.answered)

    def awaited_by(self, call_id: str) -> ChildLink:
        """A blocking call hands the child a message: it waits, the previous outcome goes.

        An empty ``call_id`` records no waiter (and keeps one recorded before).
        """
        return ChildLink(call_id or self.waiter, None, None, None)

    def released(self, answered: bool = False) -> ChildLink:
        """The waiting call stopped waiting; ``answered``: it got its result."""
        return ChildLink(
            None, self.waiter if answered else self.answered, self.outcome, self.stop_reason
        )

    def settled(self, outcome: ChildOutcome | None, stop_reason: str, answer: bool) -> ChildLink:
        """The child's flow settled with ``outcome``; ``answer``: the waiter is answered now."""
        if answer and self.waiter:
            return ChildLink(None, self.waiter, outcome, stop_reason)
        return ChildLink(self.waiter, self.answered, outcome, stop_reason)

    def outcome_attachments(self) -> list[Mapping[str, Any]]:
        """The stored attachments of the last outcome (none without one)."""
        return list(self.outcome.attachments) if self.outcome is not None else []

    def entry_status(self, terminated: bool) -> str:
        """The registry status a finished blocking call leaves its child in."""
        if terminated:
            return "terminated"
        if self.outcome is not None and self.outcome.reason in WAITING_REASONS:
            return self.outcome.reason
        return "idle" if self.outcome is not None and not self.outcome.failed else "failed"


EMPTY = ChildLink()
"""The link of a child with nothing recorded (or of no row at all)."""


def entry_status(row: ThreadRow | None) -> str:
    """The registry status a finished blocking call leaves the child whose row is ``row`` in."""
    return ChildLink.of(row).entry_status(row is not None and row.terminated is not None)


def call_result(child_id: str, row: ThreadRow | None, copied: list[AttachmentRef]) -> ToolResult:
    """The tool result a blocking call gets from its finished child's row.

    Args:
        child_id: The child thread's id.
        row: The child's row as read (``None``: deleted).
        copied: The outcome's attachments, copied to the parent.

    Returns:
        The outcome's text (or why there is none) with the child's reference; an error for a
        failed (or missing) outcome.
    """
    link = ChildLink.of(row)
    outcome = link.outcome
    reason = link.stop_reason or (
        "aborted_by_user" if row is not None and row.stopped else "unknown"
    )
    failed = outcome.failed if outcome is not None else True
    reason_known = reason not in ("aborted_by_user", "unknown")  # else a terminate() cut it
    text = outcome.content if outcome is not None else NO_TERMINAL_TEXT.format(reason=reason)
    if outcome is None and row is not None and row.terminated is not None and not reason_known:
        text = NO_TERMINAL_TEXT.format(reason="terminated")
    suffix = f"\n\nReference: {child_id}"
    if copied:
        suffix = ATTACHMENTS_TEXT.format(paths="\n".join(r.path for r in copied)) + suffix
    if failed:
        return ToolResult(
            status="error",
            error=f"{text or 'Subagent failed'}{suffix}",
            subagent_id=child_id,
            attachments=list(copied),
        )
    return ToolResult(
        status="success",
        result=f"{text or ''}{suffix}",
        subagent_id=child_id,
        attachments=list(copied),
    )


__all__ = [
    "ATTACHMENTS_TEXT",
    "EMPTY",
    "NO_TERMINAL_TEXT",
    "WAITING_REASONS",
    "ChildLink",
    "ChildOutcome",
    "call_result",
    "entry_status",
]
