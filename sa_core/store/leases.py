"""Leases on threads' execution and worker heartbeats (several workers on one database).

A worker runs a thread's turns only while it holds the thread's lease: a ``thread_leases`` row
naming it, valid until ``expires_at`` and renewed by the worker's heartbeat. A lease whose
holder stopped renewing it (a crashed worker) expires and another worker takes it over.
Expired leases are claimed with ``FOR UPDATE SKIP LOCKED`` on PostgreSQL, so two workers never
take over the same thread.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from sqlalchemy import bindparam, delete, exists, literal, select, update
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql import Select

from sa_core.store import tables as t
from sa_core.store.clock import now_us
from sa_core.store.fast import Deferred, Prepared
from sa_core.store.interface import Transaction
from sa_core.store.storebase import StoreBase

_L = t.thread_leases.c
_W = t.workers.c


class LeaseAttempt(NamedTuple):
    """What :meth:`LeasesMixin.try_lease` found."""

    token: int | None
    """The acquisition's token when the lease was taken (or renewed), else ``None``."""
    holder: str | None
    """The worker holding the lease when it was not taken, if known."""


@functools.cache
def _acquire_statement(dialect: str) -> Prepared:
    """Take the lease unless another owner holds a valid one.

    Returns a row ``(owner, taken)``: this owner and true when it took (or renewed) the lease;
    on PostgreSQL, the holder and false when another worker holds it (found in the same
    statement); no row otherwise.
    """
    upsert: Any = sqlite_insert
    if dialect == "postgresql":  # built on first use: SQLite stores never load the dialect
        from sqlalchemy.dialects.postgresql import insert as upsert
    stmt = upsert(t.thread_leases).values(
        thread_id=bindparam("v_tid"),
        owner=bindparam("v_owner"),
        expires_at=bindparam("v_expires"),
        acquired_at=bindparam("v_now"),
    )
    taken = stmt.on_conflict_do_update(
        index_elements=[_L.thread_id],
        set_={
            "owner": stmt.excluded.owner,
            "expires_at": stmt.excluded.expires_at,
            "acquired_at": stmt.excluded.acquired_at,
        },
        where=(_L.owner == bindparam("b_owner")) | (_L.expires_at < bindparam("b_now")),
    ).returning(_L.owner)
    if dialect != "postgresql":  # no writes in a WITH clause: who holds it stays unknown
        flag = literal(True).label("taken")
        return Prepared(taken.returning(flag), [_L.owner, flag])
    done = taken.cte("taken")
    # the holder as the statement began (its snapshot), when the upsert did not take it
    holder = select(_L.owner, literal(False).label("taken")).where(
        _L.thread_id == bindparam("v_tid"), ~exists(select(done.c.owner))
    )
    query = select(done.c.owner, literal(True).label("taken")).union_all(holder)
    return Prepared(query, [query.selected_columns[0], query.selected_columns[1]])


def _acquire_params(thread_id: str, owner: str, now: int, ttl_us: int) -> dict[str, Any]:
    return {
        "v_tid": thread_id,
        "v_owner": owner,
        "v_expires": now + ttl_us,
        "v_now": now,
        "b_owner": owner,
        "b_now": now,
    }


@functools.cache
def _release_statements(token: bool, handover: bool) -> tuple[Prepared, Prepared]:
    """Delete the lease (kept when a turn is owed, with ``handover``), and expire it instead."""
    where = [_L.thread_id == bindparam("b_tid"), _L.owner == bindparam("b_owner")]
    if token:
        where.append(_L.acquired_at == bindparam("b_token"))
    drop = delete(t.thread_leases).where(*where)
    if handover:
        x = t.executions.c
        owed = exists().where(x.thread_id == bindparam("b_tid"), x.status.in_(("owed", "running")))
        drop = drop.where(~owed)
    expire = update(t.thread_leases).where(*where).values(expires_at=0)
    return Prepared(drop), Prepared(expire)


class LeaseLost(asyncio.CancelledError):
    """A worker's lease on a thread was taken over: its write is rolled back, its turn ends.

    A cancellation (not an error), so that the turn unwinds as a stopped worker's would and
    leaves the thread to the worker that took it over.
    """


def lease_valid(conn: Connection, thread_id: str, owner: str) -> bool:
    """Whether ``owner`` holds an unexpired lease on the thread (share-locks it till commit).

    The share lock keeps other workers' takeover (``FOR UPDATE SKIP LOCKED``) off the lease
    until the caller's transaction ends, so a write checked here cannot race a takeover.
    """
    row = _LEASE_EXPIRES.first(conn, {"b_tid": thread_id, "b_owner": owner})
    return row is not None and int(row["expires_at"]) >= now_us()


_LEASE_EXPIRES = Prepared(
    select(_L.expires_at)
    .where(_L.thread_id == bindparam("b_tid"), _L.owner == bindparam("b_owner"))
    .with_for_update(read=True),
    [_L.expires_at],
)


def lease_held(owner: str, now: str) -> Select[Any]:
    """A row while a worker holds an unexpired lease on the thread; share-locks the lease row.

    Args:
        owner: The name of the parameter giving the worker (the thread is ``b_tid``).
        now: The name of the parameter giving the time the lease must last past.
    """
    return (
        select(literal(1))
        .where(
            _L.thread_id == bindparam("b_tid"),
            _L.owner == bindparam(owner),
            _L.expires_at >= bindparam(now),
        )
        .with_for_update(read=True)
    )


_LEASE_HELD = Prepared(lease_held("b_owner", "b_now"))


def lease_guard(thread_id: str, owner: str, fence: Callable[[Connection], Any]) -> Deferred:
    """:func:`lease_valid` as a deferred statement (it selects a row while the lease holds).

    Args:
        thread_id: The thread.
        owner: The worker that must hold its lease.
        fence: What runs when the lease does not hold (it raises :class:`LeaseLost`).
    """
    params = {"b_tid": thread_id, "b_owner": owner, "b_now": now_us()}
    return Deferred(_LEASE_HELD, params, fence)


class LeasesMixin(StoreBase):
    """Thread leases and worker heartbeats."""

    async def acquire_lease(
        self, thread_id: str, owner: str, ttl_us: int, *, tx: Transaction | None = None
    ) -> int | None:
        """Take (or renew) a thread's lease unless another worker holds a valid one.

        Args:
            thread_id: The thread.
            owner: The worker id.
            ttl_us: How long the lease lasts without renewal (µs).
            tx: An open transaction to write in.

        Returns:
            A token naming this acquisition (pass it to :meth:`release_lease`), or ``None``
            when another worker holds the lease or the thread is gone.

        """
        return (await self.try_lease(thread_id, owner, ttl_us, tx=tx)).token

    async def try_lease(
        self, thread_id: str, owner: str, ttl_us: int, *, tx: Transaction | None = None
    ) -> LeaseAttempt:
        """:meth:`acquire_lease`, also naming the holder when another worker holds the lease.

        The holder is known on PostgreSQL (read by the same statement), else ``None``.
        """
        now = now_us()
        query = _acquire_statement(self._backend.dialect)
        params = _acquire_params(thread_id, owner, now, ttl_us)
        try:  # one statement: no transaction around it (a round trip, not three)
            rows = await self._write_statement(query, params, tx)
        except IntegrityError:  # the thread does not exist (the lease's foreign key)
            return LeaseAttempt(None, None)
        if not rows:
            return LeaseAttempt(None, None)
        if rows[0]["taken"]:  # the upsert wrote ``owner``
            return LeaseAttempt(now, None)
        return LeaseAttempt(None, str(rows[0]["owner"]))

    async def release_lease(
        self,
        thread_id: str,
        owner: str,
        token: int | None = None,
        *,
        handover: bool = False,
        tx: Transaction | None = None,
    ) -> bool:
        """Give up a lease held by ``owner``; returns whether it held it.

        With ``token`` only that acquisition is released: a later :meth:`acquire_lease` by the
        same owner (a new turn) keeps its lease. With ``handover``, a thread that still owes a
        turn (its runner was cut off) has its lease expired instead of deleted: the workers'
        reapers take it over at once and resume the turn.
        """
        drop, expire = _release_statements(token is not None, handover)
        params = {"b_tid": thread_id, "b_owner": owner, "b_token": token}

        def op(conn: Connection) -> bool:
            if drop.run(conn, params) > 0:
                return True
            return handover and expire.run(conn, params) > 0

        return await self._write(op, tx)

    async def lease_owner(self, thread_id: str, *, tx: Transaction | None = None) -> str | None:
        """The worker holding a valid lease on the thread, or ``None``."""
        stmt = select(_L.owner).where(_L.thread_id == thread_id, _L.expires_at >= now_us())
        return await self._read(lambda conn: conn.execute(stmt).scalar(), tx)

    async def heartbeat(
        self,
        owner: str,
        ttl_us: int,
        thread_ids: Sequence[str],
        *,
        tx: Transaction | None = None,
    ) -> list[str]:
        """Renew ``owner``'s leases on ``thread_ids`` and its ``workers`` row.

        Returns:
            The threads whose leases were renewed (a lease already taken over is not).

        """
        now = now_us()

        def op(conn: Connection) -> list[str]:
            found = conn.execute(
                update(t.workers).where(_W.id == owner).values(heartbeat_at=now)
            ).rowcount
            if not found:
                conn.execute(t.workers.insert().values(id=owner, started_at=now, heartbeat_at=now))
            renewed = conn.execute(
                update(t.thread_leases)
                .where(_L.owner == owner, _L.thread_id.in_(list(thread_ids)))
                .values(expires_at=now + ttl_us)
                .returning(_L.thread_id)
            )
            return sorted(renewed.scalars())

        return await self._write(op, tx)

    async def claim_expired_leases(
        self,
        owner: str,
        ttl_us: int,
        *,
        limit: int = 50,
        at: int | None = None,
        tx: Transaction | None = None,
    ) -> list[str]:
        """Take over leases that expired (their worker died); returns the thread ids taken.

        Args:
            owner: The worker taking them over.
            ttl_us: How long the leases last without renewal (µs).
            limit: At most this many.
            at: The current time (µs), read by the caller just before: it is the token of
                each acquisition (for :meth:`release_lease`) and ``at + ttl_us`` its expiry.
            tx: An open transaction to write in.
        """

        def op(conn: Connection) -> list[str]:
            now = at if at is not None else now_us()
            expired = (
                select(_L.thread_id)
                .where(_L.expires_at < now)
                .order_by(_L.expires_at)
                .limit(limit)
                .with_for_update(skip_locked=True)
            )
            ids = list(conn.execute(expired).scalars())
            if not ids:
                return []
            conn.execute(
                update(t.thread_leases)
                .where(_L.thread_id.in_(ids), _L.expires_at < now)
                .values(owner=owner, expires_at=now + ttl_us, acquired_at=now)
            )
            return ids

        return await self._write(op, tx)

    async def retire_worker(self, owner: str, *, tx: Transaction | None = None) -> None:
        """Remove a stopping worker's row and expire its leases.

        Expired (not deleted) leases are taken over at once by the other workers' reapers,
        which resume the turns this worker's shutdown interrupted.
        """

        def op(conn: Connection) -> None:
            conn.execute(update(t.thread_leases).where(_L.owner == owner).values(expires_at=0))
            conn.execute(delete(t.workers).where(_W.id == owner))

        await self._write(op, tx)

    async def live_workers(self, ttl_us: int, *, tx: Transaction | None = None) -> list[str]:
        """Workers whose heartbeat is younger than ``ttl_us``."""
        stmt = select(_W.id).where(_W.heartbeat_at >= now_us() - ttl_us).order_by(_W.id)
        return await self._read(lambda conn: list(conn.execute(stmt).scalars()), tx)

    async def unleased_queued_threads(self, *, tx: Transaction | None = None) -> list[str]:
        """Threads with queued messages and no valid lease (work nobody is doing)."""
        q = t.queue.c
        held = select(_L.thread_id).where(_L.thread_id == q.thread_id, _L.expires_at >= now_us())
        stmt = select(q.thread_id).where(~exists(held)).distinct().order_by(q.thread_id)
        return await self._read(lambda conn: list(conn.execute(stmt).scalars()), tx)

    async def put_stream_frame(
        self, thread_id: str, frame: Mapping[str, object], *, tx: Transaction | None = None
    ) -> int:
        """Store a frame too large for a notification; returns its row number."""
        stmt = (
            t.stream_frames.insert()
            .values(thread_id=thread_id, frame=frame, created_at=now_us())
            .returning(t.stream_frames.c.seq)
        )
        return await self._write(lambda conn: int(conn.execute(stmt).scalar_one()), tx)

    async def get_stream_frame(
        self, seq: int, *, tx: Transaction | None = None
    ) -> dict[str, Any] | None:
        """A stored frame, or ``None`` once pruned."""
        stmt = select(t.stream_frames.c.frame).where(t.stream_frames.c.seq == seq)
        return await self._read(lambda conn: conn.execute(stmt).scalar(), tx)

    async def prune_stream_frames(
        self, older_than_us: int, *, tx: Transaction | None = None
    ) -> int:
        """Delete stored frames older than ``older_than_us``; returns how many."""
        stmt = delete(t.stream_frames).where(
            t.stream_frames.c.created_at < now_us() - older_than_us
        )
        return await self._write(lambda conn: conn.execute(stmt).rowcount, tx)
