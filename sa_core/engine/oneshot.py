"""Non-resumable subagents run once: the child terminates when it has reported its result.

Seed 003: "non-resumable + blocking: parent waits, child completes, child terminates"; seed
001: non-resumable subagents "behave like direct tool calls (no persistent addressing)", and
``terminate()`` "updates parent registry status to terminated". So when a non-resumable
child's flow stops with a result for its parent (its session ended, or it stopped for good
without a terminal tool: the parent gets a failure either way), the child is terminated in the
same write that settles it, and its registry entry says ``terminated``. A child parked on an
approval or stopped by a user has reported nothing yet and stays alive.

Only resumable children are addressable: :func:`addressable` decides which registry entries
``subagent_message`` is offered for, and :func:`not_addressable` is the tool error for the
others. Whether a child is resumable is recorded on its thread (``properties["resumable"]``)
when it is created; a child created before that was recorded keeps running as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sa_core.engine.childlink import WAITING_REASONS
from sa_core.spec import SubagentRegistryEntry, ToolResult

if TYPE_CHECKING:
    from sa_core.store import ThreadRow

KEEPS_RUNNING = frozenset(
    {"awaiting_approval", "awaiting_client_tools", "aborted_by_user", "awaiting_human"}
)
"""Why a flow may stop without having reported to the parent: the child is not finished."""

NOT_ADDRESSABLE = (
    'Subagent reference "{reference}" is a non-resumable {agent} subagent: it ran once for the '
    "call that created it and cannot be messaged. Call {agent} again for a new run."
)


def finishes(row: ThreadRow, reason: str) -> bool:
    """Whether a child whose flow stopped for ``reason`` is done for good (non-resumable).

    Args:
        row: The row of the thread whose flow stopped.
        reason: Why it stopped (a flow stop reason).

    Returns:
        True for a non-resumable child that reported (or was reported as failing) to its
        parent; False for any other thread.
    """
    return (
        row.parent_id is not None
        and row.properties.get("resumable") is False
        and reason not in KEEPS_RUNNING
    )


def termination_fields(row: ThreadRow, reason: str, now: int) -> dict[str, Any]:
    """Mark a finishing non-resumable child terminated; the fields to write with its settle.

    Args:
        row: The live row of the thread whose flow settles; updated in place.
        reason: Why its flow stopped.
        now: The settle's timestamp.

    Returns:
        ``{"terminated": now, "stopped": True}`` when :func:`finishes` says so and the thread
        is not terminated yet (as ``terminate()`` sets them), else an empty dict.
    """
    if row.terminated is not None or not finishes(row, reason):
        return {}
    row.terminated = now
    row.stopped = True
    return {"terminated": now, "stopped": True}


def addressable(entries: list[SubagentRegistryEntry]) -> bool:
    """Whether any registry entry is one ``subagent_message`` may reach.

    A live resumable instance, or a child waiting for its parent's answer (a remote agent's
    task asking for input).
    """
    return any(
        (e.resumable or e.status in WAITING_REASONS) and e.status != "terminated" for e in entries
    )


def not_addressable(entry: SubagentRegistryEntry) -> ToolResult | None:
    """The tool error for a ``subagent_message`` to a non-resumable child, else ``None``.

    A non-resumable child that waits for its parent's answer takes that one message.
    """
    if entry.resumable is not False or entry.status in WAITING_REASONS:
        return None
    text = NOT_ADDRESSABLE.format(reference=entry.reference, agent=entry.name)
    return ToolResult(status="error", error=text, error_code="subagent_not_resumable")


__all__ = ["addressable", "finishes", "not_addressable", "termination_fields"]
