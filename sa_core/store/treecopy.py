"""A thread's rows as they are, for export and import (``sa-thread/1``, see :mod:`sa_core.replay`).

Reads every message (any depth, silent or not, every status), every log, the files with their
bytes and times, and the values with their times; writes files and values back with the times
they had, so an imported thread can be replayed (a replay places each recorded file and value
by its time) and exported again unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection

from sa_core.spec.records import Log, Message
from sa_core.store import tables as t
from sa_core.store.interface import Transaction
from sa_core.store.messagerows import MESSAGE_COLUMNS, messages_from_rows
from sa_core.store.paths import split_path
from sa_core.store.storebase import StoreBase

_M = t.messages.c
_L = t.logs.c
_F = t.files.c
_V = t.thread_values.c


@dataclass(slots=True)
class FileRow:
    """A file or directory of a thread's filesystem, with its bytes and times."""

    path: str
    mime_type: str
    is_directory: bool
    data: bytes | None
    metadata: dict[str, Any] | None
    width: int | None
    height: int | None
    created_at: int
    updated_at: int


@dataclass(slots=True)
class ValueRow:
    """A thread value with its times."""

    key: str
    value: Any
    created_at: int
    updated_at: int


class TreeCopyMixin(StoreBase):
    """Whole threads read and written as they are (export and import)."""

    async def all_messages(self, thread_id: str, *, tx: Transaction | None = None) -> list[Message]:
        """Every message of a thread, oldest first (any depth, silent, every status)."""
        query = (
            select(*MESSAGE_COLUMNS)
            .where(_M.thread_id == thread_id)
            .order_by(_M.created_at, _M.seq)
        )

        def op(conn: Connection) -> list[Message]:
            return messages_from_rows([dict(row) for row in conn.execute(query).mappings()])

        return await self._read(op, tx)

    async def all_logs(self, thread_id: str, *, tx: Transaction | None = None) -> list[Log]:
        """Every log row of a thread, oldest first."""
        columns = [c for c in t.logs.c if c.name not in ("seq", "thread_id", "recording")]
        query = select(*columns).where(_L.thread_id == thread_id).order_by(_L.created_at, _L.seq)

        def op(conn: Connection) -> list[Log]:
            logs = []
            for row in conn.execute(query).mappings():
                values = dict(row)
                extra = values.pop("extra") or {}
                values["data"] = values["data"] or {}
                logs.append(Log.model_validate({**extra, **values}))
            return logs

        return await self._read(op, tx)

    async def file_rows(self, thread_id: str, *, tx: Transaction | None = None) -> list[FileRow]:
        """A thread's files and directories with their bytes, by path."""
        query = select(
            _F.path, _F.mime_type, _F.is_directory, _F.data, _F.meta, _F.width, _F.height,
            _F.created_at, _F.updated_at,
        ).where(_F.thread_id == thread_id).order_by(_F.path)  # fmt: skip

        def op(conn: Connection) -> list[FileRow]:
            return [
                FileRow(
                    row.path,
                    row.mime_type,
                    bool(row.is_directory),
                    row.data,
                    row.meta,
                    row.width,
                    row.height,
                    row.created_at,
                    row.updated_at,
                )  # fmt: skip
                for row in conn.execute(query)
            ]

        return await self._read(op, tx)

    async def value_rows(self, thread_id: str, *, tx: Transaction | None = None) -> list[ValueRow]:
        """A thread's values with their times, by key."""
        query = (
            select(_V.key, _V.value, _V.created_at, _V.updated_at)
            .where(_V.thread_id == thread_id)
            .order_by(_V.key)
        )

        def op(conn: Connection) -> list[ValueRow]:
            return [ValueRow(*row) for row in conn.execute(query)]

        return await self._read(op, tx)

    async def insert_file_rows(
        self, thread_id: str, files: Sequence[FileRow], *, tx: Transaction | None = None
    ) -> None:
        """Store files and directories as they are (paths with their parents listed first)."""
        rows = []
        for file in files:
            parent, name = split_path(file.path)
            rows.append(
                {
                    "thread_id": thread_id,
                    "path": file.path,
                    "parent": parent,
                    "name": name,
                    "is_directory": file.is_directory,
                    "mime_type": file.mime_type,
                    "storage": "local",
                    "size": len(file.data or b""),
                    "data": file.data,
                    "meta": file.metadata,
                    "width": file.width,
                    "height": file.height,
                    "created_at": file.created_at,
                    "updated_at": file.updated_at,
                }
            )
        if rows:
            await self._write(lambda conn: conn.execute(insert(t.files), rows), tx)

    async def insert_value_rows(
        self, thread_id: str, values: Sequence[ValueRow], *, tx: Transaction | None = None
    ) -> None:
        """Store values as they are."""
        rows = [
            {
                "thread_id": thread_id,
                "key": v.key,
                "value": v.value,
                "created_at": v.created_at,
                "updated_at": v.updated_at,
            }
            for v in values
        ]
        if rows:
            await self._write(lambda conn: conn.execute(insert(t.thread_values), rows), tx)
