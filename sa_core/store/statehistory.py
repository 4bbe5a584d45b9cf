"""The history of a thread's values (``state_versions``, ``kind`` ``value``).

Every ``set_value`` and ``delete_value`` also appends a version row, in the same transaction;
the values after any moment are, per key, the newest version from then or before. The current
table stays as it is, read as fast as before. (The registry needs no history: an entry's fields
are fixed when its child is created, and its status at a moment follows from the child's row,
see :mod:`sa_core.engine.timeline.fork`.)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from sqlalchemy import bindparam, func, insert, select
from sqlalchemy.engine import Connection

from sa_core.store import tables as t
from sa_core.store.fast import Prepared

StateKind = Literal["value"]
_S = t.state_versions.c
_RECORD = Prepared(
    insert(t.state_versions).values(
        thread_id=bindparam("s_tid"),
        kind=bindparam("s_kind"),
        key=bindparam("s_key"),
        value=bindparam("s_value"),
        deleted=bindparam("s_deleted"),
        created_at=bindparam("s_at"),
    )
)


def record_state(
    conn: Connection,
    thread_id: str,
    kind: StateKind,
    key: str,
    value: Any,
    at: int,
    *,
    deleted: bool = False,
) -> None:
    """Append a version of a value or registry entry (``value``: its JSON)."""
    params = {
        "s_tid": thread_id,
        "s_kind": kind,
        "s_key": key,
        "s_value": None if deleted else value,
        "s_deleted": deleted,
        "s_at": at,
    }
    _RECORD.run(conn, params)


def record_states(
    conn: Connection,
    thread_id: str,
    kind: StateKind,
    at: int,
    values: dict[str, Any],
    deleted: Iterable[str] = (),
) -> None:
    """Append versions of several keys at once: ``values`` set, ``deleted`` removed."""
    rows = [
        {"thread_id": thread_id, "kind": kind, "key": key, "value": value, "deleted": False}
        for key, value in values.items()
    ]
    rows += [
        {"thread_id": thread_id, "kind": kind, "key": key, "value": None, "deleted": True}
        for key in deleted
    ]
    if rows:
        conn.execute(insert(t.state_versions), [dict(row, created_at=at) for row in rows])


def state_at(conn: Connection, thread_id: str, kind: StateKind, at: int) -> dict[str, Any]:
    """The thread's values (or registry entries) as they were at ``at`` (µs), by key.

    A registry entry is its JSON; deleted keys are left out.
    """
    newest = (
        select(func.max(_S.seq))
        .where(_S.thread_id == thread_id, _S.kind == kind, _S.created_at <= at)
        .group_by(_S.key)
    )
    stmt = select(_S.key, _S.value).where(_S.seq.in_(newest), _S.deleted.is_(False))
    return {row.key: row.value for row in conn.execute(stmt)}
