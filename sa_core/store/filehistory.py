"""The history of a thread's files: contents by hash, and one version row per change.

A file's bytes are stored once per distinct content in ``file_blobs`` (keyed by SHA-256,
shared by every thread and every version), so a copy, a move, a fork or a rewind never copies
bytes. Every write, deletion, directory made and move appends ``file_versions`` rows in the
transaction that changes ``files`` (the filesystem as it is now, read as before): the files
after any moment are, per path, the newest version from then or before, unless a deletion.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import bindparam, func, insert, select
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection

from sa_core.errors import FileSystemError
from sa_core.spec.records import FileRecord
from sa_core.store import tables as t
from sa_core.store.interface import Transaction
from sa_core.store.paths import normalize_path, split_path
from sa_core.store.storebase import StoreBase

_F = t.files.c
_V = t.file_versions.c
_B = t.file_blobs.c
VERSION_FIELDS = (
    "is_directory",
    "mime_type",
    "storage",
    "location",
    "size",
    "blob",
    "meta",
    "width",
    "height",
)
"""The columns a version shares with its ``files`` row (besides the path)."""
_BLOB_INSERT_SQLITE = sqlite_insert(t.file_blobs).on_conflict_do_nothing(index_elements=["hash"])
_HAS_BLOB = select(_B.hash).where(_B.hash == bindparam("b_hash"))
_RECORD = insert(t.file_versions)


def content_hash(data: bytes) -> str:
    """The SHA-256 of a file's bytes, as stored (hex)."""
    return hashlib.sha256(data).hexdigest()


def put_blob(conn: Connection, data: bytes, now: int) -> str:
    """Store bytes once (a content already stored is not written again); returns its hash."""
    digest = content_hash(data)
    if conn.execute(_HAS_BLOB, {"b_hash": digest}).first() is None:
        stmt = _BLOB_INSERT_SQLITE if conn.dialect.name == "sqlite" else _blob_insert_pg()
        conn.execute(stmt, {"hash": digest, "data": data, "size": len(data), "created_at": now})
    return digest


@functools.cache
def _blob_insert_pg() -> Any:
    """The blob insert of PostgreSQL (its dialect is imported on first use, never on SQLite)."""
    from sqlalchemy.dialects.postgresql import insert as pg_insert

    return pg_insert(t.file_blobs).on_conflict_do_nothing(index_elements=["hash"])


def record_version(
    conn: Connection, thread_id: str, path: str, op: str, row: Mapping[str, Any], now: int
) -> None:
    """Append the version of ``path`` that ``op`` (write, mkdir, delete) made from ``row``.

    ``row`` is the ``files`` row written (or, for a deletion, the one removed).
    """
    values = {name: row.get(name) for name in VERSION_FIELDS}
    values["storage"] = values["storage"] or "local"
    values["size"] = values["size"] or 0
    conn.execute(
        _RECORD,
        dict(
            values,
            thread_id=thread_id,
            path=path,
            op=op,
            file_created_at=row.get("created_at") or now,
            created_at=now,
        ),
    )


def record_versions(
    conn: Connection, thread_id: str, op: str, rows: Sequence[Mapping[str, Any]], now: int
) -> None:
    """:func:`record_version` of several rows (each with its ``path``) in one statement."""
    if not rows:
        return
    params = []
    for row in rows:
        values = {name: row.get(name) for name in VERSION_FIELDS}
        values["storage"] = values["storage"] or "local"
        values["size"] = values["size"] or 0
        params.append(
            dict(
                values,
                thread_id=thread_id,
                path=row["path"],
                op=op,
                file_created_at=row.get("created_at") or now,
                created_at=now,
            )
        )
    conn.execute(_RECORD, params)


def versions_at(conn: Connection, thread_id: str, at: int) -> dict[str, dict[str, Any]]:
    """The thread's files and directories as they were at ``at`` (µs): their versions by path."""
    newest = (
        select(func.max(_V.seq))
        .where(_V.thread_id == thread_id, _V.created_at <= at)
        .group_by(_V.path)
    )
    stmt = select(t.file_versions).where(_V.seq.in_(newest), _V.op != "delete")
    return {row["path"]: dict(row) for row in conn.execute(stmt.order_by(_V.path)).mappings()}


def version_at(conn: Connection, thread_id: str, path: str, at: int) -> dict[str, Any] | None:
    """The version of one path at ``at`` (µs), or ``None`` when it did not exist then."""
    stmt = (
        select(t.file_versions)
        .where(_V.thread_id == thread_id, _V.path == path, _V.created_at <= at)
        .order_by(_V.seq.desc())
        .limit(1)
    )
    row = conn.execute(stmt).mappings().first()
    return None if row is None or row["op"] == "delete" else dict(row)


def blob_data(conn: Connection, digest: str | None) -> bytes:
    """The bytes stored under a hash (empty for ``None``)."""
    if digest is None:
        return b""
    found = conn.execute(select(_B.data).where(_B.hash == digest)).scalar()
    return bytes(found or b"")


def record_of(version: Mapping[str, Any]) -> FileRecord:
    """The :class:`FileRecord` of a version row."""
    _, name = split_path(version["path"])
    return FileRecord(
        path=version["path"],
        name=name,
        mime_type=version["mime_type"],
        storage=version["storage"],
        location=version["location"],
        size=version["size"],
        metadata=version["meta"],
        is_directory=bool(version["is_directory"]),
        created_at=version["file_created_at"],
        width=version["width"],
        height=version["height"],
        content_hash=version["blob"],
    )


def _differs(current: Mapping[str, Any], target: Mapping[str, Any]) -> bool:
    return any(current.get(name) != target.get(name) for name in VERSION_FIELDS)


def restore_files(
    conn: Connection, thread_id: str, target: Mapping[str, Mapping[str, Any]], now: int
) -> int:
    """Make the thread's files ``target`` (versions by path, as :func:`versions_at` gives).

    Each path that changes gets a version row; no bytes are copied. Returns how many changed.
    """
    current = {
        row["path"]: dict(row)
        for row in conn.execute(select(t.files).where(_F.thread_id == thread_id)).mappings()
    }
    gone = [row for path, row in current.items() if path not in target]
    if gone:
        conn.execute(
            t.files.delete().where(
                _F.thread_id == thread_id, _F.path.in_([r["path"] for r in gone])
            )
        )
        record_versions(conn, thread_id, "delete", gone, now)
    changed = [
        dict(version)
        for path, version in target.items()
        if path not in current or _differs(current[path], version)
    ]
    if changed:
        conn.execute(
            t.files.delete().where(
                _F.thread_id == thread_id, _F.path.in_([row["path"] for row in changed])
            )
        )
        conn.execute(insert(t.files), [_files_row(thread_id, row, now) for row in changed])
        for op in ("mkdir", "write"):
            rows = [row for row in changed if bool(row["is_directory"]) == (op == "mkdir")]
            for row in rows:
                row["created_at"] = row["file_created_at"]
            record_versions(conn, thread_id, op, rows, now)
    return len(gone) + len(changed)


def _files_row(thread_id: str, version: Mapping[str, Any], now: int) -> dict[str, Any]:
    parent, name = split_path(version["path"])
    row = {name_: version[name_] for name_ in VERSION_FIELDS}
    row.update(
        thread_id=thread_id,
        path=version["path"],
        parent=parent,
        name=name,
        created_at=version["file_created_at"],
        updated_at=now,
    )
    return row


class FileHistoryMixin(StoreBase):
    """The files of a thread as they were at a moment."""

    async def files_at(
        self, thread_id: str, at: int, *, tx: Transaction | None = None
    ) -> list[FileRecord]:
        """The thread's files and directories as they were at ``at`` (µs), by path."""
        return await self._read(
            lambda conn: [record_of(v) for v in versions_at(conn, thread_id, at).values()], tx
        )

    async def read_file_at(
        self, thread_id: str, path: str, at: int, *, tx: Transaction | None = None
    ) -> bytes | None:
        """A file's bytes as they were at ``at`` (µs), or ``None`` when it did not exist then.

        Raises:
            FileSystemError: Bad path, or the path was a directory then.
        """
        norm = normalize_path(path)

        def op(conn: Connection) -> bytes | None:
            version = version_at(conn, thread_id, norm, at) if norm != "/" else {"blob": None}
            if version is not None and (norm == "/" or version["is_directory"]):
                raise FileSystemError(f"Cannot read {norm}: it was a directory.")
            return None if version is None else blob_data(conn, version["blob"])

        return await self._read(op, tx)
