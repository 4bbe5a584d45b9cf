"""Where a thread came from and what was done to it: forks, rewinds and replays."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from sa_core.spec.base import RecordModel


class LineageEntry(RecordModel):
    """One fork, rewind or replay (``thread.lineage()``).

    Attributes:
        id: The entry's id.
        kind: ``fork`` (``thread_id`` was forked from ``source_id`` at ``message_id``),
            ``rewind`` (``thread_id`` was rolled back to ``message_id``) or ``replay``
            (``thread_id`` replays ``source_id``).
        thread_id: The thread made (fork, replay) or changed (rewind).
        source_id: The thread it came from (fork, replay).
        message_id: The message of the cut (fork, rewind).
        created_at: When (µs since the epoch).
        data: Details: a fork's ``cut_at``; a rewind's ``rewound`` (how many messages left
            the history), ``cut_at`` and the timelines before and after.
    """

    id: str
    kind: str
    thread_id: str
    source_id: str | None = None
    message_id: str | None = None
    created_at: int
    data: dict[str, Any] = Field(default_factory=dict)
