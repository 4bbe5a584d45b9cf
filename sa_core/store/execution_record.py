"""A thread's execution record and its resume point: the models, without the SQL.

The engine builds and reads these; :mod:`sa_core.store.executions` stores them (one row per
thread in ``executions``). This module imports no database code, so the engine loads it
without SQLAlchemy.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from sa_core.spec import Side

ExecutionStatus = Literal["owed", "running", "idle"]


class ResumePoint(BaseModel):
    """Where a flow stands, as of its last committed write.

    Attributes:
        since: Creation time (µs) of the flow's first message; the flow's messages are the
            top-level messages created at or after it.
        side: The side that acts at this point.
        turns: Completed turns per side.
        step_count: Steps the flow has taken.
        side_steps: Steps per side.
        step_message_id: The model step committed last whose tool calls and stop checks may be
            unfinished; ``None`` when the next thing to do is a fresh step on ``side``.
        attempts: Tool call id to the number of runs started (written only when a restart
            runs a call again, so "at most once more" holds across repeated crashes).
    """

    since: int
    side: Side = "a"
    turns: dict[str, int] = Field(default_factory=lambda: {"a": 0, "b": 0})
    step_count: int = 0
    side_steps: dict[str, int] = Field(default_factory=lambda: {"a": 0, "b": 0})
    step_message_id: str | None = None
    attempts: dict[str, int] = Field(default_factory=dict)


class ExecutionRecord(BaseModel):
    """A thread's execution: what it owes and where a restart picks it up.

    Attributes:
        status: ``owed`` (a turn was acknowledged and has not started), ``running`` (a flow
            runs) or ``idle`` (nothing owed).
        resume: The resume point while ``owed`` or ``running``.
        stop_reason: Why the last flow stopped.
        claimed_by: The runtime instance running the thread (see ``claim_execution``).
        claimed_until: When the claim lapses (µs); ``None`` while the claimant runs.
    """

    status: ExecutionStatus = "idle"
    resume: ResumePoint | None = None
    stop_reason: str | None = None
    claimed_by: str | None = None
    claimed_until: int | None = None

    @property
    def owed_resume(self) -> ResumePoint | None:
        """Where the owed (or interrupted) turn resumes; ``None`` when no turn is owed."""
        return self.resume if self.status != "idle" else None
