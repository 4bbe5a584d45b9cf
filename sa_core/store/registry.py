"""Per-thread registries: subagent children, pending variable requests, key/value entries."""

from __future__ import annotations

import uuid
from typing import Any

from pydantic_core import to_jsonable_python
from sqlalchemy import bindparam, delete, insert, select, update
from sqlalchemy.engine import Connection

from sa_core.spec.records import SubagentRegistryEntry
from sa_core.store import tables as t
from sa_core.store.clock import now_us
from sa_core.store.fast import Prepared
from sa_core.store.interface import Transaction
from sa_core.store.statehistory import record_state
from sa_core.store.storebase import StoreBase

_C = t.children.c
_R = t.env_requests.c
_V = t.thread_values.c

# The statements of every turn go through the prepared path (see ``fast.py``).
CHILDREN = Prepared(
    select(_C.entry)
    .where(_C.parent_id == bindparam("b_pid"), _C.hidden_by.is_(None))
    .order_by(_C.created_at, _C.reference),
    [_C.entry],
)
"""A parent's registry in creation order (entries a rewind hid left out)."""
_CHILD_WHERE = (_C.parent_id == bindparam("b_pid"), _C.reference == bindparam("b_ref"))
_CHILD = Prepared(select(_C.entry).where(*_CHILD_WHERE), [_C.entry])
_UPDATE_CHILD = Prepared(update(t.children).where(*_CHILD_WHERE).values(entry=bindparam("v_entry")))
_INSERT_CHILD = Prepared(
    insert(t.children).values(
        parent_id=bindparam("v_pid"),
        reference=bindparam("v_ref"),
        entry=bindparam("v_entry"),
        created_at=bindparam("v_created"),
    )
)
_VALUE_WHERE = (_V.thread_id == bindparam("b_tid"), _V.key == bindparam("b_key"))
_GET_VALUE = Prepared(select(_V.value).where(*_VALUE_WHERE), [_V.value])
_UPDATE_VALUE = Prepared(
    update(t.thread_values)
    .where(*_VALUE_WHERE)
    .values(value=bindparam("v_value"), updated_at=bindparam("v_now"))
)
_INSERT_VALUE = Prepared(
    insert(t.thread_values).values(
        thread_id=bindparam("v_tid"),
        key=bindparam("v_key"),
        value=bindparam("v_value"),
        created_at=bindparam("v_now"),
        updated_at=bindparam("v_now"),
    )
)
_DELETE_VALUE = Prepared(delete(t.thread_values).where(*_VALUE_WHERE))


def _entry_json(entry: SubagentRegistryEntry) -> dict[str, Any]:
    return entry.model_dump(mode="json")


class RegistryMixin(StoreBase):
    """Children, variable requests and thread values."""

    async def upsert_child(
        self,
        parent_id: str,
        entry: SubagentRegistryEntry,
        *,
        new: bool = False,
        tx: Transaction | None = None,
    ) -> None:
        """Insert or replace a child entry, keyed by ``(parent_id, entry.reference)``.

        A replaced entry keeps its place in creation order. ``new``: the entry is known not to
        exist (its child is created in the same transaction), so it is only inserted.
        """
        data = _entry_json(entry)
        params = {"b_pid": parent_id, "b_ref": entry.reference, "v_entry": data}
        row = {
            "v_pid": parent_id,
            "v_ref": entry.reference,
            "v_entry": data,
            "v_created": entry.created_at or now_us(),
        }

        def op(conn: Connection) -> None:
            if new or _UPDATE_CHILD.run(conn, params) == 0:
                _INSERT_CHILD.run(conn, row)

        await self._write(op, tx)

    async def list_children(
        self, parent_id: str, *, tx: Transaction | None = None
    ) -> list[SubagentRegistryEntry]:
        """List a parent's children, in creation order."""
        params = {"b_pid": parent_id}

        def op(conn: Connection) -> list[SubagentRegistryEntry]:
            return [
                SubagentRegistryEntry.model_validate(row["entry"])
                for row in CHILDREN.rows(conn, params)
            ]

        return await self._read_one(op, tx)

    async def update_child(
        self,
        parent_id: str,
        reference: str,
        *,
        tx: Transaction | None = None,
        current: SubagentRegistryEntry | None = None,
        **fields: Any,
    ) -> SubagentRegistryEntry | None:
        """Update fields of a child entry.

        Args:
            parent_id: The parent thread.
            reference: The child thread.
            tx: An open transaction to write in.
            current: The entry as stored now, when the caller knows it (inside a write
                transaction): it is not read back.
            **fields: The fields to change.

        Returns:
            The updated entry, or ``None`` when there is none.

        Raises:
            pydantic.ValidationError: A field is unknown or has a wrong type.

        """
        params: dict[str, Any] = {"b_pid": parent_id, "b_ref": reference}

        def op(conn: Connection) -> SubagentRegistryEntry | None:
            if current is not None:
                merged = current.model_dump()
            else:
                found = _CHILD.first(conn, params)
                if found is None or found["entry"] is None:
                    return None
                merged = SubagentRegistryEntry.model_validate(found["entry"]).model_dump()
            merged.update(fields, reference=reference)
            entry = SubagentRegistryEntry.model_validate(merged)
            _UPDATE_CHILD.run(conn, {**params, "v_entry": _entry_json(entry)})
            return entry

        return await self._write(op, tx)

    async def create_env_request(
        self, parent_id: str, payload: dict[str, Any], *, tx: Transaction | None = None
    ) -> str:
        """Store a pending variable request of a thread; returns its id (a uuid4)."""
        request_id = str(uuid.uuid4())
        stmt = insert(t.env_requests).values(
            id=request_id,
            parent_id=parent_id,
            payload=to_jsonable_python(payload),
            created_at=now_us(),
        )
        await self._write(lambda conn: conn.execute(stmt), tx)
        return request_id

    async def get_env_request(
        self, parent_id: str, request_id: str, *, tx: Transaction | None = None
    ) -> dict[str, Any] | None:
        """Return a pending variable request's payload, or ``None``."""
        stmt = select(_R.payload).where(_R.parent_id == parent_id, _R.id == request_id)

        def op(conn: Connection) -> dict[str, Any] | None:
            row = conn.execute(stmt).first()
            return dict(row.payload or {}) if row is not None else None

        return await self._read(op, tx)

    async def delete_env_request(
        self, parent_id: str, request_id: str, *, tx: Transaction | None = None
    ) -> bool:
        """Delete a pending variable request; returns whether it existed."""
        stmt = delete(t.env_requests).where(_R.parent_id == parent_id, _R.id == request_id)
        return await self._write(lambda conn: conn.execute(stmt).rowcount > 0, tx)

    async def get_value(self, thread_id: str, key: str, *, tx: Transaction | None = None) -> Any:
        """Return a thread value (``None`` when unset)."""
        params = {"b_tid": thread_id, "b_key": key}

        def op(conn: Connection) -> Any:
            found = _GET_VALUE.first(conn, params)
            return None if found is None else found["value"]

        return await self._read(op, tx)

    async def set_value(
        self, thread_id: str, key: str, value: Any, *, tx: Transaction | None = None
    ) -> None:
        """Set a thread value (any JSON-serialisable value)."""
        data = to_jsonable_python(value)

        def op(conn: Connection) -> None:
            now = now_us()
            params = {"b_tid": thread_id, "b_key": key, "v_value": data, "v_now": now}
            if not _UPDATE_VALUE.run(conn, params):
                _INSERT_VALUE.run(
                    conn, {"v_tid": thread_id, "v_key": key, "v_value": data, "v_now": now}
                )
            record_state(conn, thread_id, "value", key, data, now)

        await self._write(op, tx)

    async def delete_value(
        self, thread_id: str, key: str, *, tx: Transaction | None = None
    ) -> bool:
        """Delete a thread value; returns whether it existed."""
        params = {"b_tid": thread_id, "b_key": key}

        def op(conn: Connection) -> bool:
            if _DELETE_VALUE.run(conn, params) == 0:
                return False
            record_state(conn, thread_id, "value", key, None, now_us(), deleted=True)
            return True

        return await self._write(op, tx)

    async def threads_with_value(
        self, key: str, *, tx: Transaction | None = None
    ) -> dict[str, Any]:
        """Return ``{thread_id: value}`` of every thread that has ``key`` set (indexed)."""
        stmt = select(_V.thread_id, _V.value).where(_V.key == key).order_by(_V.created_at)
        return await self._read(lambda conn: {row[0]: row[1] for row in conn.execute(stmt)}, tx)

    async def list_values(
        self, thread_id: str, *, prefix: str | None = None, tx: Transaction | None = None
    ) -> dict[str, Any]:
        """Return a thread's values by key (optionally only keys starting with ``prefix``)."""
        stmt = select(_V.key, _V.value).where(_V.thread_id == thread_id)
        if prefix:
            stmt = stmt.where(_V.key.startswith(prefix, autoescape=True))
        stmt = stmt.order_by(_V.key)
        return await self._read(lambda conn: {row[0]: row[1] for row in conn.execute(stmt)}, tx)
