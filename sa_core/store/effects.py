"""Scheduled effects: pending → processing (claimed) → completed | failed."""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic_core import to_jsonable_python
from sqlalchemy import bindparam, delete, func, insert, select, update
from sqlalchemy.engine import Connection

from sa_core.spec.records import ScheduledEffect
from sa_core.store import tables as t
from sa_core.store.clock import now_us
from sa_core.store.interface import Transaction
from sa_core.store.rows import EffectRun
from sa_core.store.storebase import StoreBase

INTERRUPTED_EFFECT = "Interrupted by a restart before it finished."
"""Error of an effect a restart interrupted after its last allowed attempt."""
_E = t.effects.c
_INSERT = insert(t.effects)
_NEXT = select(func.min(_E.scheduled_at)).where(_E.status == "pending")
_DUE = (
    select(_E.id, _E.thread_id, _E.name, _E.args, _E.scheduled_at, _E.created_at, _E.attempts)
    .where(_E.status == "pending", _E.scheduled_at <= bindparam("b_now"))
    .order_by(_E.scheduled_at, _E.created_at)
    .with_for_update(skip_locked=True)
)
"""Due effects, locked (``FOR UPDATE SKIP LOCKED`` on PostgreSQL): one worker claims each."""
_REMOVE = delete(t.effects).where(
    _E.thread_id == bindparam("b_tid"), _E.id == bindparam("b_id"), _E.status == "pending"
)


def _claim(conn: Connection, now: int, owner: str | None) -> list[EffectRun]:
    runs = [
        EffectRun(
            id=row.id,
            thread_id=row.thread_id,
            name=row.name,
            args=dict(row.args or {}),
            scheduled_at=row.scheduled_at,
            created_at=row.created_at,
            attempt=int(row.attempts or 0) + 1,
        )
        for row in conn.execute(_DUE, {"b_now": now})
    ]
    if runs:
        conn.execute(
            update(t.effects)
            .where(_E.id.in_([run.id for run in runs]), _E.status == "pending")
            .values(status="processing", started_at=now_us(), owner=owner)
        )
    return runs


class EffectsMixin(StoreBase):
    """Scheduled effects."""

    worker_id: str | None = None
    """The worker claiming effects through this store (``None``: a single process)."""
    worker_ttl_us: int | None = None
    """Heartbeat expiry of workers (when several workers share the database)."""

    def join_workers(self, worker_id: str, ttl_us: int) -> None:
        """Claim effects as worker ``worker_id`` (several workers share the database).

        Workers whose heartbeat is older than ``ttl_us`` are dead: their effects are taken over.
        """
        self.worker_id = worker_id
        self.worker_ttl_us = ttl_us

    async def schedule_effect(
        self,
        thread_id: str,
        name: str,
        args: dict[str, Any],
        run_at_us: int,
        *,
        tx: Transaction | None = None,
    ) -> ScheduledEffect:
        """Schedule an effect to run at ``run_at_us`` (µs since the epoch)."""
        effect = ScheduledEffect(
            id=str(uuid.uuid4()),
            name=name,
            args=to_jsonable_python(args),
            scheduled_at=int(run_at_us),
            created_at=now_us(),
        )
        row = {
            "id": effect.id,
            "thread_id": thread_id,
            "name": name,
            "args": effect.args,
            "scheduled_at": effect.scheduled_at,
            "created_at": effect.created_at,
            "status": "pending",
            "attempts": 0,
        }
        await self._write(lambda conn: conn.execute(_INSERT, row), tx)
        return effect

    async def list_effects(
        self,
        thread_id: str,
        name: str | None = None,
        *,
        any_status: bool = False,
        tx: Transaction | None = None,
    ) -> list[ScheduledEffect]:
        """Pending effects of a thread (optionally of one name), soonest first.

        Args:
            thread_id: The thread.
            name: Only effects of this name.
            any_status: Also effects running, done, failed or interrupted (not only pending).
            tx: The transaction to read in.
        """
        stmt = select(_E.id, _E.name, _E.args, _E.scheduled_at, _E.created_at).where(
            _E.thread_id == thread_id
        )
        if not any_status:
            stmt = stmt.where(_E.status == "pending")
        if name is not None:
            stmt = stmt.where(_E.name == name)
        stmt = stmt.order_by(_E.scheduled_at, _E.created_at)

        def op(conn: Connection) -> list[ScheduledEffect]:
            return [
                ScheduledEffect(
                    id=row.id,
                    name=row.name,
                    args=dict(row.args or {}),
                    scheduled_at=row.scheduled_at,
                    created_at=row.created_at,
                )
                for row in conn.execute(stmt)
            ]

        return await self._read(op, tx)

    async def remove_effect(
        self, thread_id: str, effect_id: str, *, tx: Transaction | None = None
    ) -> bool:
        """Cancel a pending effect; returns whether one was removed."""
        params = {"b_tid": thread_id, "b_id": effect_id}
        return await self._write(lambda conn: conn.execute(_REMOVE, params).rowcount > 0, tx)

    async def next_effect_time(self, *, tx: Transaction | None = None) -> int | None:
        """Return the earliest ``scheduled_at`` of any pending effect, or ``None``."""

        def op(conn: Connection) -> int | None:
            value = conn.execute(_NEXT).scalar()
            return int(value) if value is not None else None

        return await self._read(op, tx)

    async def claim_due_effects(
        self, now_us: int, *, tx: Transaction | None = None
    ) -> list[EffectRun]:
        """Mark every pending effect due at ``now_us`` as processing and return them.

        The effects are claimed for this store's :attr:`worker_id` (several workers: each due
        effect is claimed by exactly one). A claim does not count an attempt:
        :meth:`start_effect` does, when the body starts.
        """
        owner = self.worker_id
        return await self._write(lambda conn: _claim(conn, now_us, owner), tx)

    async def start_effect(self, effect_id: str, *, tx: Transaction | None = None) -> bool:
        """Count the attempt of a claimed effect whose body is about to run.

        Committed right before the body runs, so that a crash between the claim and the body
        does not use up one of the effect's attempts; returns whether the effect is still claimed.
        """
        stmt = (
            update(t.effects)
            .where(_E.id == effect_id, _E.status == "processing")
            .values(attempts=_E.attempts + 1)
        )
        return await self._write(lambda conn: conn.execute(stmt).rowcount > 0, tx)

    async def finish_effect(
        self,
        effect_id: str,
        status: Literal["completed", "failed"],
        error: str | None = None,
        *,
        tx: Transaction | None = None,
    ) -> bool:
        """Record the outcome of a claimed effect; returns whether it exists."""
        if status not in ("completed", "failed"):
            raise ValueError(f"finish_effect: status must be completed or failed, not {status!r}")
        stmt = (
            update(t.effects)
            .where(_E.id == effect_id)
            .values(status=status, error=error, finished_at=now_us())
        )
        return await self._write(lambda conn: conn.execute(stmt).rowcount > 0, tx)

    async def reset_processing_effects(
        self, *, max_attempts: int | None = None, tx: Transaction | None = None
    ) -> int:
        """Return effects left ``processing`` by a crash to ``pending``; returns how many.

        With several workers (:attr:`worker_ttl_us` set) only the effects of workers whose
        heartbeat stopped are reset; effects other workers are running are left to them.

        Args:
            max_attempts: Effects whose body already started this many times (see
                :meth:`start_effect`) are not run again: they are marked ``failed`` with
                ``INTERRUPTED_EFFECT`` instead.
            tx: An open transaction to write in.
        """
        reset = update(t.effects).where(_E.status == "processing")
        if self.worker_ttl_us is not None:
            live = select(t.workers.c.id).where(
                t.workers.c.heartbeat_at >= now_us() - self.worker_ttl_us
            )
            reset = reset.where(_E.owner.is_(None) | _E.owner.not_in(live))
        give_up = None
        if max_attempts is not None:
            give_up = reset.where(_E.attempts >= max_attempts).values(
                status="failed", error=INTERRUPTED_EFFECT, finished_at=now_us(), owner=None
            )
        stmt = reset.values(status="pending", started_at=None, owner=None)

        def op(conn: Connection) -> int:
            if give_up is not None:
                conn.execute(give_up)
            return int(conn.execute(stmt).rowcount)

        return await self._write(op, tx)
