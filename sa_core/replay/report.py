"""The outcome of a replay: identical, or where it first diverged."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sa_core.engine.model.replay_record import Divergence


@dataclass
class ReplayReport:
    """What ``runtime.replay_thread`` found.

    Attributes:
        identical: The replay did what the recording did (no divergence).
        divergence: The first divergence (``None`` when identical).
        divergences: Every divergence found, in the order found (one when the replay stopped at
            the first).
        source_thread_id: The recorded root thread (its id where it was recorded).
        thread_id: The replay's root thread, in this runtime (inspect it like any thread).
        tools: ``recorded`` or ``execute``, as asked.
        model_calls: Model answers served from the recording (no provider was called).
        tool_results_served: Tool calls answered from the recording.
        tool_executions: Tool calls run again.
    """

    identical: bool
    divergence: Divergence | None
    divergences: list[Divergence] = field(default_factory=list)
    source_thread_id: str = ""
    thread_id: str = ""
    tools: str = "recorded"
    model_calls: int = 0
    tool_results_served: int = 0
    tool_executions: int = 0

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON object (the replay route's answer)."""
        return {
            "identical": self.identical,
            "divergence": None if self.divergence is None else self.divergence.to_json(),
            "divergences": [d.to_json() for d in self.divergences],
            "source_thread_id": self.source_thread_id,
            "thread_id": self.thread_id,
            "tools": self.tools,
            "model_calls": self.model_calls,
            "tool_results_served": self.tool_results_served,
            "tool_executions": self.tool_executions,
        }

    def __str__(self) -> str:
        counts = (
            f"{self.model_calls} model answers served, {self.tool_results_served} tool results "
            f"served, {self.tool_executions} tools run (tools={self.tools})"
        )
        if self.identical or self.divergence is None:
            return f"Identical: the replay did what the recording did. {counts}."
        more = len(self.divergences) - 1
        extra = f" (and {more} more)" if more > 0 else ""
        return f"Diverged{extra}: {self.divergence}\n{counts}; replay thread {self.thread_id}."


__all__ = ["Divergence", "ReplayReport"]
