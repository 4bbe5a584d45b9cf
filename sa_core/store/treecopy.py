"""A thread's rows as they are, for export and import (``sa-thread/1``, see :mod:`sa_core.replay`).

Reads a thread's history through its timeline (a fork's shared messages, logs and recorded
model calls are its source's up to the cut; a rewound thread's leave out the rewound range):
every message (any depth, silent or not, every status) and every log. Reads its files as they
are now and every version of them, and its values with the history of their changes, the bytes
and the times included. Writes all of them back with the times they had, so an imported thread
can be replayed (a replay places each recorded file and value change by its time) and exported
again unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, insert, select
from sqlalchemy.engine import Connection

from sa_core.spec.records import Log, Message
from sa_core.store import tables as t
from sa_core.store.clock import now_us
from sa_core.store.filehistory import put_blob
from sa_core.store.interface import Transaction
from sa_core.store.messagerows import MESSAGE_COLUMNS, messages_from_rows
from sa_core.store.modelcalls import RECORDED_COLUMNS, expanded_calls, read_parts
from sa_core.store.paths import split_path
from sa_core.store.rows import RecordedCall
from sa_core.store.timeline import Segment
from sa_core.store.timelinereads import TimelineMixin

_M = t.messages.c
_L = t.logs.c
_F = t.files.c
_V = t.file_versions.c
_B = t.file_blobs.c
_T = t.thread_values.c
_S = t.state_versions.c
_LOG_COLUMNS = [c for c in t.logs.c if c.name not in ("seq", "thread_id", "recording")]


@dataclass(slots=True)
class FileRow:
    """A file or directory of a thread's filesystem (or one version of it), with its bytes.

    ``op`` is ``write``, ``mkdir`` or ``delete`` for a version, ``None`` for the file as it is;
    ``created_at`` is when the file was created, ``updated_at`` when this content was written.
    """

    path: str
    mime_type: str
    is_directory: bool
    data: bytes | None
    metadata: dict[str, Any] | None
    width: int | None
    height: int | None
    created_at: int
    updated_at: int
    op: str | None = None


@dataclass(slots=True)
class ValueRow:
    """A thread value with its times (a change of it: ``deleted`` when it was removed)."""

    key: str
    value: Any
    created_at: int
    updated_at: int
    deleted: bool = False


def _in(columns: Any, segment: Segment) -> list[Any]:
    """The rows of ``columns``' table the segment holds (its thread, its time range)."""
    where = [columns.thread_id == segment.thread_id, columns.created_at > segment.after]
    if segment.upto is not None:
        where.append(columns.created_at <= segment.upto)
    return where


class TreeCopyMixin(TimelineMixin):
    """Whole threads read and written as they are (export and import)."""

    async def _through_timeline(
        self, thread_id: str, query: Callable[[Segment], Select[Any]], tx: Transaction | None
    ) -> list[Any]:
        """The rows ``query`` selects for each segment of the thread's timeline, in order."""
        segments = (await self.thread_timeline(thread_id, tx=tx)).segments

        def op(conn: Connection) -> list[Any]:
            rows: list[Any] = []
            for segment in segments:
                rows.extend(dict(row) for row in conn.execute(query(segment)).mappings())
            return rows

        return await self._read(op, tx)

    async def all_messages(self, thread_id: str, *, tx: Transaction | None = None) -> list[Message]:
        """Every message of a thread's history, oldest first (any depth, silent, every status)."""
        rows = await self._through_timeline(
            thread_id,
            lambda s: select(*MESSAGE_COLUMNS).where(*_in(_M, s)).order_by(_M.created_at, _M.seq),
            tx,
        )
        return messages_from_rows(rows)

    async def all_logs(self, thread_id: str, *, tx: Transaction | None = None) -> list[Log]:
        """Every log row of a thread's history, oldest first."""
        rows = await self._through_timeline(
            thread_id,
            lambda s: select(*_LOG_COLUMNS).where(*_in(_L, s)).order_by(_L.created_at, _L.seq),
            tx,
        )
        logs = []
        for values in rows:
            extra = values.pop("extra") or {}
            values["data"] = values["data"] or {}
            logs.append(Log.model_validate({**extra, **values}))
        return logs

    async def history_model_calls(
        self, thread_id: str, *, tx: Transaction | None = None
    ) -> list[RecordedCall]:
        """The recorded model calls of a thread's history, in order (the first is ordinal 1)."""
        rows = await self._through_timeline(
            thread_id,
            lambda s: (
                select(*RECORDED_COLUMNS)
                .where(*_in(_L, s), _L.recording.is_not(None))
                .order_by(_L.created_at, _L.seq)
            ),
            tx,
        )
        parts = await self._read(lambda conn: read_parts(conn, rows), tx)
        return expanded_calls(thread_id, rows, parts)

    async def file_rows(self, thread_id: str, *, tx: Transaction | None = None) -> list[FileRow]:
        """A thread's files and directories as they are, with their bytes, by path."""
        columns = [_F.path, _F.mime_type, _F.is_directory, _B.data, _F.meta, _F.width, _F.height]
        source = t.files.outerjoin(t.file_blobs, _B.hash == _F.blob)
        query = (
            select(*columns, _F.created_at, _F.updated_at)
            .select_from(source)
            .where(_F.thread_id == thread_id)
            .order_by(_F.path)
        )
        return await self._read(
            lambda conn: _file_rows([dict(row) for row in conn.execute(query).mappings()]), tx
        )

    async def file_versions(
        self, thread_id: str, *, tx: Transaction | None = None
    ) -> list[FileRow]:
        """Every version of the files of a thread's history (through its timeline), in order."""
        columns: list[Any] = [_V.path, _V.mime_type, _V.is_directory, _B.data, _V.meta]
        columns += [_V.width, _V.height]
        columns += [_V.file_created_at.label("created_at"), _V.created_at.label("updated_at")]
        source = t.file_versions.outerjoin(t.file_blobs, _B.hash == _V.blob)
        rows = await self._through_timeline(
            thread_id,
            lambda s: (
                select(*columns, _V.op)
                .select_from(source)
                .where(*_in(_V, s))
                .order_by(_V.created_at, _V.seq)
            ),
            tx,
        )
        return _file_rows(rows)

    async def value_rows(self, thread_id: str, *, tx: Transaction | None = None) -> list[ValueRow]:
        """A thread's values as they are, with their times, by key."""
        query = (
            select(_T.key, _T.value, _T.created_at, _T.updated_at)
            .where(_T.thread_id == thread_id)
            .order_by(_T.key)
        )
        return await self._read(lambda conn: [ValueRow(*row) for row in conn.execute(query)], tx)

    async def value_versions(
        self, thread_id: str, *, tx: Transaction | None = None
    ) -> list[ValueRow]:
        """Every change of the values of a thread's history (through its timeline), in order."""
        rows = await self._through_timeline(
            thread_id,
            lambda s: (
                select(_S.key, _S.value, _S.created_at, _S.deleted)
                .where(*_in(_S, s), _S.kind == "value")
                .order_by(_S.created_at, _S.seq)
            ),
            tx,
        )
        return [
            ValueRow(r["key"], r["value"], r["created_at"], r["created_at"], bool(r["deleted"]))
            for r in rows
        ]

    async def insert_file_rows(
        self,
        thread_id: str,
        files: Sequence[FileRow],
        versions: Sequence[FileRow] = (),
        *,
        tx: Transaction | None = None,
    ) -> None:
        """Store files and their versions as they are (bytes once per distinct content)."""

        def op(conn: Connection) -> None:
            now = now_us()
            current = [_file_row(conn, thread_id, f, now) for f in files]
            if current:
                conn.execute(insert(t.files), current)
            history = []
            for version in versions:
                row = _file_row(conn, thread_id, version, now)
                for name in ("parent", "name", "updated_at"):
                    row.pop(name)
                row["file_created_at"] = row.pop("created_at")
                row.update(op=version.op or "write", created_at=version.updated_at)
                history.append(row)
            if history:
                conn.execute(insert(t.file_versions), history)

        await self._write(op, tx)

    async def insert_value_rows(
        self,
        thread_id: str,
        values: Sequence[ValueRow],
        versions: Sequence[ValueRow] = (),
        *,
        tx: Transaction | None = None,
    ) -> None:
        """Store values and the history of their changes as they are."""
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
        changes = [
            {
                "thread_id": thread_id,
                "kind": "value",
                "key": v.key,
                "value": v.value,
                "deleted": v.deleted,
                "created_at": v.updated_at,
            }
            for v in versions
        ]

        def op(conn: Connection) -> None:
            if rows:
                conn.execute(insert(t.thread_values), rows)
            if changes:
                conn.execute(insert(t.state_versions), changes)

        await self._write(op, tx)


def _file_rows(rows: Iterable[Mapping[str, Any]]) -> list[FileRow]:
    """File rows (or versions) as read, as :class:`FileRow`."""
    found = []
    for row in rows:
        values = dict(row)
        values["metadata"] = values.pop("meta")
        values["is_directory"] = bool(values["is_directory"])
        found.append(FileRow(**values))
    return found


def _file_row(conn: Connection, thread_id: str, file: FileRow, now: int) -> dict[str, Any]:
    """The ``files`` row of ``file`` (its bytes stored as a blob)."""
    parent, name = split_path(file.path)
    data = file.data
    blob = None if file.is_directory or data is None else put_blob(conn, data, now)
    return {
        "thread_id": thread_id,
        "path": file.path,
        "parent": parent,
        "name": name,
        "is_directory": file.is_directory,
        "mime_type": file.mime_type,
        "storage": "local",
        "size": len(data or b""),
        "blob": blob,
        "meta": file.metadata,
        "width": file.width,
        "height": file.height,
        "created_at": file.created_at,
        "updated_at": file.updated_at,
    }
