"""Push notifications of our A2A tasks: each task's configs and the notification each owes.

One row per (task, config) in ``a2a_push``. A change of the task's state queues a notification
on every config of the task by compare-and-set (:meth:`A2APushMixin.queue_push` changes only
the rows whose queued state differs), so of several workers that see the same change, one
queues it, and a change seen again after a restart is not queued twice. Queuing in the
transaction that stores the task's new state makes the two commit together.

A sender claims a due row (:meth:`A2APushMixin.claim_push`, compare-and-set on ``version`` and
an expired claim), sends, and settles the version it claimed
(:meth:`A2APushMixin.settle_push`): a notification queued meanwhile stays owed. A sender that
dies leaves its claim to expire; another worker then sends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, delete, func, insert, or_, select, update
from sqlalchemy.engine import Connection

from sa_core.store import tables as t
from sa_core.store.clock import now_us
from sa_core.store.interface import Transaction
from sa_core.store.storebase import StoreBase

_P = t.a2a_push.c


@dataclass(frozen=True, slots=True)
class PushRow:
    """A notification owed on one config of a task."""

    task_id: str
    config_id: str
    thread_id: str
    config: dict[str, Any]
    version: int
    attempts: int


def _free(now: int) -> Any:
    return or_(_P.claimed_until.is_(None), _P.claimed_until < now)


class A2APushMixin(StoreBase):
    """Push-notification configs of A2A tasks and their owed notifications."""

    async def put_push_config(
        self,
        task_id: str,
        config_id: str,
        thread_id: str,
        config: dict[str, Any],
        *,
        tx: Transaction | None = None,
    ) -> None:
        """Store a config of a task (replacing the task's config of that id)."""
        key = and_(_P.task_id == task_id, _P.config_id == config_id)

        def op(conn: Connection) -> None:
            if conn.execute(update(t.a2a_push).where(key).values(config=config)).rowcount:
                return
            conn.execute(
                insert(t.a2a_push).values(
                    task_id=task_id,
                    config_id=config_id,
                    thread_id=thread_id,
                    config=config,
                    version=0,
                    pending=False,
                    watching=True,
                    attempts=0,
                    next_at=0,
                    seen_at=0,
                    created_at=now_us(),
                )
            )

        await self._write(op, tx)

    async def push_configs(
        self, task_id: str, *, tx: Transaction | None = None
    ) -> list[dict[str, Any]]:
        """The configs of a task (each with its ``id``), oldest first."""
        stmt = (
            select(_P.config_id, _P.config)
            .where(_P.task_id == task_id)
            .order_by(_P.created_at, _P.config_id)
        )

        def op(conn: Connection) -> list[dict[str, Any]]:
            return [{**(row[1] or {}), "id": row[0]} for row in conn.execute(stmt)]

        return await self._read(op, tx)

    async def delete_push_configs(
        self, task_id: str, config_id: str | None = None, *, tx: Transaction | None = None
    ) -> int:
        """Delete a task's config (``None``: all of them); returns how many were deleted."""
        stmt = delete(t.a2a_push).where(_P.task_id == task_id)
        if config_id is not None:
            stmt = stmt.where(_P.config_id == config_id)
        return await self._write(lambda conn: int(conn.execute(stmt).rowcount), tx)

    async def queue_push(
        self, task_id: str, state: str, *, final: bool, tx: Transaction | None = None
    ) -> int:
        """Owe a notification on each config of the task whose queued state is not ``state``.

        Args:
            task_id: The task.
            state: Its state now (``working``, ``completed``...).
            final: The state never changes again: the task is no longer watched.
            tx: The transaction to queue in (else the task's open one, or one of its own).

        Returns:
            How many notifications were queued (0: none owed, or already queued).
        """
        stmt = (
            update(t.a2a_push)
            .where(_P.task_id == task_id, or_(_P.state.is_(None), _P.state != state))
            .values(
                state=state,
                pending=True,
                watching=not final,
                version=_P.version + 1,
                attempts=0,
                next_at=now_us(),
                last_error=None,
            )
        )
        return await self._write(lambda conn: int(conn.execute(stmt).rowcount), tx)

    async def due_pushes(self, limit: int = 50) -> list[PushRow]:
        """Owed notifications due now that no sender holds, soonest first."""
        now = now_us()
        stmt = (
            select(_P.task_id, _P.config_id, _P.thread_id, _P.config, _P.version, _P.attempts)
            .where(_P.pending.is_(True), _P.next_at <= now, _free(now))
            .order_by(_P.next_at)
            .limit(limit)
        )

        def op(conn: Connection) -> list[PushRow]:
            return [
                PushRow(row[0], row[1], row[2], dict(row[3] or {}), int(row[4]), int(row[5]))
                for row in conn.execute(stmt)
            ]

        return await self._read(op)

    async def next_push_at(self) -> int | None:
        """When the soonest owed notification is due (µs), or None when none is owed."""
        stmt = select(func.min(_P.next_at)).where(_P.pending.is_(True))
        return await self._read(lambda conn: conn.execute(stmt).scalar())

    async def claim_push(self, row: PushRow, until: int) -> bool:
        """Take a notification to send (until ``until``, µs); False when another sender has."""
        now = now_us()
        stmt = (
            update(t.a2a_push)
            .where(
                _P.task_id == row.task_id,
                _P.config_id == row.config_id,
                _P.version == row.version,
                _P.pending.is_(True),
                _free(now),
            )
            .values(claimed_until=until)
        )
        return await self._write(lambda conn: conn.execute(stmt).rowcount == 1)

    async def settle_push(
        self, row: PushRow, *, error: str | None = None, retry_at: int | None = None
    ) -> bool:
        """Settle a claimed send: delivered (no ``error``), to retry at ``retry_at``, or given up.

        Returns:
            Whether the row was the version sent (False: a newer notification was queued
            meanwhile; it stays owed, and only the claim is given back).
        """
        key = and_(_P.task_id == row.task_id, _P.config_id == row.config_id)
        values: dict[str, Any] = {"claimed_until": None, "last_error": error}
        if error is None or retry_at is None:
            values["pending"] = False
        else:
            values.update(attempts=row.attempts + 1, next_at=retry_at)

        def op(conn: Connection) -> bool:
            stmt = update(t.a2a_push).where(key, _P.version == row.version).values(**values)
            if conn.execute(stmt).rowcount:
                return True
            conn.execute(update(t.a2a_push).where(key).values(claimed_until=None))
            return False

        return await self._write(op)

    async def watched_pushes(self, limit: int = 100) -> list[tuple[str, str, int]]:
        """Tasks to read again: watched, their thread idle and changed since they were read.

        Returns:
            ``(task id, thread id, the thread's executions.updated_at)`` of each.
        """
        e = t.executions.c
        stmt = (
            select(_P.task_id, _P.thread_id, func.max(e.updated_at))
            .join(t.executions, e.thread_id == _P.thread_id)
            .where(_P.watching.is_(True), e.status == "idle", e.updated_at > _P.seen_at)
            .group_by(_P.task_id, _P.thread_id)
            .limit(limit)
        )
        return await self._read(
            lambda conn: [(row[0], row[1], int(row[2])) for row in conn.execute(stmt)]
        )

    async def saw_push_task(self, task_id: str, updated_at: int) -> None:
        """Record that the task was read again as its thread stood at ``updated_at``."""
        stmt = update(t.a2a_push).where(_P.task_id == task_id).values(seen_at=updated_at)
        await self._write(lambda conn: conn.execute(stmt))

    async def release_push_claims(self) -> None:
        """Give back every sender's claim (a process alone on its database, at its start)."""
        stmt = update(t.a2a_push).where(_P.claimed_until.is_not(None)).values(claimed_until=None)
        await self._write(lambda conn: conn.execute(stmt))

    async def pushes_in_use(self) -> bool:
        """Whether any notification is owed or any task watched (else senders may rest)."""
        stmt = select(_P.task_id).where(or_(_P.pending.is_(True), _P.watching.is_(True))).limit(1)
        return await self._read(lambda conn: conn.execute(stmt).first() is not None)


__all__ = ["A2APushMixin", "PushRow"]
