"""Schedules: stored per package and name; a due run is claimed by compare-and-set.

A schedule's ``next_run_at`` says when it runs next. Whoever claims the run moves it on with
:meth:`SchedulesMixin.advance_schedule`, whose ``UPDATE`` matches only the ``next_run_at`` the
claimer read: of several workers that read the same due time, exactly one changes the row, and
it stores the run (its thread and message) in the same transaction, so a crash before the commit
leaves the run due and a crash after it leaves the run stored.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection, RowMapping

from sa_core.spec.schedules import ScheduleRecord
from sa_core.store import tables as t
from sa_core.store.interface import Transaction
from sa_core.store.storebase import StoreBase

_S = t.schedules.c
DELETED = "deleted"
"""The status of a pack's schedule deleted at run time (kept so a restart does not revive it)."""
_COLUMNS = [column.name for column in t.schedules.columns]
_LIVE = _S.status != DELETED


def _record(row: RowMapping) -> ScheduleRecord:
    return ScheduleRecord.model_validate(dict(row))


def _key(package: str, name: str) -> Any:
    return (_S.package == package) & (_S.name == name)


class SchedulesMixin(StoreBase):
    """Schedules of packages."""

    async def list_schedules(
        self,
        package: str | None = None,
        *,
        include_deleted: bool = False,
        tx: Transaction | None = None,
    ) -> list[ScheduleRecord]:
        """The schedules of a package (or of every package), by package and name."""
        stmt = select(t.schedules).order_by(_S.package, _S.name)
        if package is not None:
            stmt = stmt.where(_S.package == package)
        if not include_deleted:
            stmt = stmt.where(_LIVE)

        def op(conn: Connection) -> list[ScheduleRecord]:
            return [_record(row) for row in conn.execute(stmt).mappings()]

        return await self._read(op, tx)

    async def get_schedule(
        self, package: str, name: str, *, tx: Transaction | None = None
    ) -> ScheduleRecord | None:
        """A schedule (``None`` when there is none, or it was deleted)."""
        stmt = select(t.schedules).where(_key(package, name), _LIVE)

        def op(conn: Connection) -> ScheduleRecord | None:
            row = conn.execute(stmt).mappings().first()
            return _record(row) if row is not None else None

        return await self._read(op, tx)

    async def insert_schedule(
        self, record: ScheduleRecord, *, tx: Transaction | None = None
    ) -> bool:
        """Store a new schedule; returns False when one of that name exists (not deleted).

        A deleted one of that name is replaced. Workers starting together may insert the same
        pack schedule at once: one insert wins, the others change nothing.
        """
        values = record.model_dump(include=set(_COLUMNS))
        replace = update(t.schedules).where(_key(record.package, record.name), ~_LIVE)

        def op(conn: Connection) -> bool:
            if conn.execute(replace.values(values)).rowcount > 0:
                return True
            upsert: Any = sqlite_insert
            if conn.dialect.name == "postgresql":  # SQLite stores never load the dialect
                from sqlalchemy.dialects.postgresql import insert as upsert
            stmt = upsert(t.schedules).values(values).on_conflict_do_nothing()
            return bool(conn.execute(stmt).rowcount > 0)

        return await self._write(op, tx)

    async def update_schedule(
        self,
        package: str,
        name: str,
        values: dict[str, Any],
        *,
        tx: Transaction | None = None,
    ) -> bool:
        """Change fields of a schedule (not a deleted one); returns whether it exists."""
        stmt = update(t.schedules).where(_key(package, name), _LIVE).values(values)
        return await self._write(lambda conn: conn.execute(stmt).rowcount > 0, tx)

    async def advance_schedule(
        self,
        package: str,
        name: str,
        expected_next: int,
        values: dict[str, Any],
        *,
        count_run: bool = False,
        tx: Transaction | None = None,
    ) -> bool:
        """Claim the run due at ``expected_next``: write ``values`` if it is still due then.

        Args:
            package: The schedule's package.
            name: Its name.
            expected_next: The ``next_run_at`` the claimer read.
            values: The columns to write (``next_run_at`` moved on, the run's thread ...).
            count_run: Count a run started (``runs`` + 1).
            tx: An open transaction to write in (the one that stores the run).

        Returns:
            Whether this call claimed it: the schedule is active and its ``next_run_at`` was
            still ``expected_next`` (another claimer, a pause or an edit since changes it).
        """
        stmt = (
            update(t.schedules)
            .where(_key(package, name), _S.status == "active", _S.next_run_at == expected_next)
            .values(values)
        )
        if count_run:
            stmt = stmt.values(runs=_S.runs + 1)
        return await self._write(lambda conn: conn.execute(stmt).rowcount > 0, tx)

    async def delete_schedule(
        self, package: str, name: str, *, keep: bool = False, tx: Transaction | None = None
    ) -> bool:
        """Delete a schedule; returns whether there was one.

        Args:
            package: Its package.
            name: Its name.
            keep: Keep the row, marked deleted (a pack's schedule: a restart does not bring
                it back).
            tx: An open transaction to write in.
        """
        stmt: Any = delete(t.schedules).where(_key(package, name), _LIVE)
        if keep:
            stmt = update(t.schedules).where(_key(package, name), _LIVE).values(status=DELETED)
        return await self._write(lambda conn: conn.execute(stmt).rowcount > 0, tx)

    async def remove_schedules(
        self, package: str, names: list[str], *, tx: Transaction | None = None
    ) -> int:
        """Delete schedules of a package by name (marked deleted or not); returns how many."""
        if not names:
            return 0
        stmt = delete(t.schedules).where(_S.package == package, _S.name.in_(names))
        return await self._write(lambda conn: int(conn.execute(stmt).rowcount), tx)

    async def next_schedule_time(self, *, tx: Transaction | None = None) -> int | None:
        """The earliest ``next_run_at`` of an active schedule, or ``None``."""
        stmt = select(func.min(_S.next_run_at)).where(_S.status == "active")

        def op(conn: Connection) -> int | None:
            value = conn.execute(stmt).scalar()
            return int(value) if value is not None else None

        return await self._read(op, tx)

    async def due_schedules(
        self, now_us: int, *, tx: Transaction | None = None
    ) -> list[ScheduleRecord]:
        """Active schedules due at ``now_us``, the most overdue first."""
        stmt = (
            select(t.schedules)
            .where(_S.status == "active", _S.next_run_at <= now_us)
            .order_by(_S.next_run_at, _S.package, _S.name)
        )

        def op(conn: Connection) -> list[ScheduleRecord]:
            return [_record(row) for row in conn.execute(stmt).mappings()]

        return await self._read(op, tx)
