"""The store's half of a fork and a rewind: state at a moment copied or restored, by reference.

:mod:`sa_core.engine.timeline.fork` and :mod:`sa_core.engine.timeline.rewind` decide what is cut
where; the writes they need are here, each run in the caller's transaction. Nothing is ever copied
by value that can be shared: messages through the timeline, file bytes through their hashes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import and_, func, insert, select, update
from sqlalchemy.engine import Connection

from sa_core.store import tables as t
from sa_core.store.clock import now_us
from sa_core.store.filehistory import FileHistoryMixin, restore_files, versions_at
from sa_core.store.interface import Transaction
from sa_core.store.lineage import LineageMixin
from sa_core.store.statehistory import record_states, state_at
from sa_core.store.timeline import Segment
from sa_core.store.timelinereads import TimelineMixin, segment_where

_V = t.thread_values.c
_C = t.children.c
_Q = t.queue.c
_E = t.effects.c
_M = t.messages.c


def restore_values(conn: Connection, thread_id: str, target: Mapping[str, Any], now: int) -> int:
    """Make the thread's values ``target``; each key that changes gets a version row."""
    current = {
        row.key: row.value
        for row in conn.execute(select(_V.key, _V.value).where(_V.thread_id == thread_id))
    }
    gone = [key for key in current if key not in target]
    changed = {
        key: value for key, value in target.items() if key not in current or current[key] != value
    }
    touched = [*gone, *changed]
    if touched:
        conn.execute(t.thread_values.delete().where(_V.thread_id == thread_id, _V.key.in_(touched)))
    if changed:
        conn.execute(
            insert(t.thread_values),
            [
                {
                    "thread_id": thread_id,
                    "key": key,
                    "value": value,
                    "created_at": now,
                    "updated_at": now,
                }
                for key, value in changed.items()
            ],
        )
    record_states(conn, thread_id, "value", now, changed, gone)
    return len(touched)


class BranchingMixin(FileHistoryMixin, LineageMixin, TimelineMixin):
    """State at a moment: copied into a fork, restored by a rewind."""

    async def restore_state(
        self, thread_id: str, owner_id: str, at: int, *, tx: Transaction
    ) -> int:
        """Make the thread's files and values those ``owner_id`` had at ``at`` (µs).

        A fork's new thread gets its source's state at the cut; a rewound thread its own state
        at the message it goes back to. Each path or key that changes gets a version row.

        Returns:
            How many files, directories and values changed (bytes are shared, not copied).
        """

        def op(conn: Connection) -> int:
            now = now_us()
            files = restore_files(conn, thread_id, versions_at(conn, owner_id, at), now)
            values = restore_values(conn, thread_id, state_at(conn, owner_id, "value", at), now)
            return files + values

        return await self._write(op, tx)

    async def registry_entries(
        self, parent_id: str, *, tx: Transaction | None = None
    ) -> list[dict[str, Any]]:
        """Every registry entry (JSON) of a parent, hidden ones included, in creation order."""
        stmt = (
            select(_C.entry).where(_C.parent_id == parent_id).order_by(_C.created_at, _C.reference)
        )
        return await self._read(
            lambda conn: [dict(row.entry) for row in conn.execute(stmt) if row.entry], tx
        )

    async def registry_rows(
        self, parent_id: str, *, tx: Transaction | None = None
    ) -> list[tuple[str, int, str | None]]:
        """``(reference, created_at, hidden_by)`` of every registry row of a parent."""
        stmt = select(_C.reference, _C.created_at, _C.hidden_by).where(_C.parent_id == parent_id)
        return await self._read(
            lambda conn: [(r.reference, r.created_at, r.hidden_by) for r in conn.execute(stmt)], tx
        )

    async def set_hidden(
        self, parent_id: str, hidden: Mapping[str, str | None], *, tx: Transaction
    ) -> None:
        """Hide registry entries (reference -> the rewind's id) or show them again (``None``)."""

        def op(conn: Connection) -> None:
            for reference, by in hidden.items():
                conn.execute(
                    update(t.children)
                    .where(_C.parent_id == parent_id, _C.reference == reference)
                    .values(hidden_by=by)
                )

        await self._write(op, tx)

    async def cancel_after(
        self, thread_id: str, at: int, *, tx: Transaction
    ) -> tuple[list[str], list[str]]:
        """Cancel the thread's queue entries and pending effects created after ``at`` (µs).

        Queue entries leave the queue (their ids are returned, to be kept in the rewind's
        record); effects stay, marked ``cancelled``.

        Returns:
            The cancelled queue entries' and effects' ids.
        """
        after = and_(_Q.thread_id == thread_id, _Q.created_at > at)
        pending = and_(_E.thread_id == thread_id, _E.created_at > at, _E.status == "pending")

        def op(conn: Connection) -> tuple[list[str], list[str]]:
            queued = list(conn.execute(select(_Q.id).where(after)).scalars())
            if queued:
                conn.execute(t.queue.delete().where(after))
            effects = list(conn.execute(select(_E.id).where(pending)).scalars())
            if effects:
                conn.execute(
                    update(t.effects)
                    .where(_E.id.in_(effects))
                    .values(status="cancelled", finished_at=now_us(), error="rewound")
                )
            return queued, effects

        return await self._write(op, tx)

    async def count_messages(
        self, segments: tuple[Segment, ...], *, tx: Transaction | None = None
    ) -> int:
        """How many top-level messages the segments hold."""
        counts = [
            select(func.count()).select_from(t.messages).where(*segment_where(s), _M.depth == 0)
            for s in segments
        ]
        return await self._read(
            lambda conn: sum(int(conn.execute(count).scalar_one()) for count in counts), tx
        )
