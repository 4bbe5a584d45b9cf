"""The per-thread filesystem: one row per file or directory, as it is now.

A file's bytes are stored once per distinct content (``file_blobs``); every change also keeps
a version (:mod:`sa_core.store.filehistory`), so the files after any message can be listed and
read (:meth:`FilesMixin.files_at`, ``read_file(..., at=...)``).
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import and_, bindparam, delete, func, insert, or_, select, update
from sqlalchemy.engine import Connection, RowMapping

from sa_core.errors import FileSystemError
from sa_core.spec.records import FileRecord, FileStats, GrepResult
from sa_core.store import tables as t
from sa_core.store.clock import now_us
from sa_core.store.filehistory import put_blob, record_version, record_versions
from sa_core.store.interface import Transaction
from sa_core.store.paths import (
    DIRECTORY_MIME,
    TEXT_MIME_LIKE,
    ancestors,
    glob_matches,
    normalize_path,
    split_path,
)
from sa_core.store.storebase import StoreBase

MAX_GREP_MATCHES_PER_FILE = 100
MAX_GREP_LINE_CHARS = 1000

_F = t.files.c
_B = t.file_blobs.c
_RECORD_COLUMNS = [c for c in t.files.c if c.name not in ("thread_id", "parent", "updated_at")]
_STAT = select(*_RECORD_COLUMNS).where(
    _F.thread_id == bindparam("b_tid"), _F.path == bindparam("b_path")
)
_WITH_DATA = t.files.outerjoin(t.file_blobs, _B.hash == _F.blob)
_READ = (
    select(_B.data, _F.is_directory)
    .select_from(_WITH_DATA)
    .where(_F.thread_id == bindparam("b_tid"), _F.path == bindparam("b_path"))
)
_INSERT = insert(t.files)
_DELETE = delete(t.files).where(_F.thread_id == bindparam("b_tid"), _F.path == bindparam("b_path"))
_ROOT = FileRecord(path="/", name="", mime_type=DIRECTORY_MIME, is_directory=True)


def _record(row: RowMapping) -> FileRecord:
    values = dict(row)
    values["metadata"] = values.pop("meta")
    values["content_hash"] = values.pop("blob")
    values["is_directory"] = bool(values["is_directory"])
    return FileRecord.model_validate(values)


def _stat(conn: Connection, thread_id: str, path: str) -> FileRecord | None:
    if path == "/":
        return _ROOT
    row = conn.execute(_STAT, {"b_tid": thread_id, "b_path": path}).mappings().first()
    return _record(row) if row is not None else None


def _make_parents(conn: Connection, thread_id: str, path: str, now: int) -> None:
    """Create missing directories above ``path``; fail when one of them is a file."""
    above = ancestors(path)
    if not above:
        return
    existing = {
        row[0]: row[1]
        for row in conn.execute(
            select(_F.path, _F.is_directory).where(_F.thread_id == thread_id, _F.path.in_(above))
        )
    }
    rows = []
    for directory in above:
        if directory in existing:
            if not existing[directory]:
                raise FileSystemError(f"Cannot create {path}: {directory} is a file.")
            continue
        parent, name = split_path(directory)
        rows.append(_dir_row(thread_id, directory, parent, name, now))
    if rows:
        conn.execute(_INSERT, rows)
        record_versions(conn, thread_id, "mkdir", rows, now)


def _dir_row(thread_id: str, path: str, parent: str, name: str, now: int) -> dict[str, Any]:
    return {
        "thread_id": thread_id,
        "path": path,
        "parent": parent,
        "name": name,
        "is_directory": True,
        "mime_type": DIRECTORY_MIME,
        "storage": "local",
        "size": 0,
        "blob": None,
        "meta": None,
        "created_at": now,
        "updated_at": now,
    }


def _write(
    conn: Connection,
    thread_id: str,
    path: str,
    data: bytes | None,
    values: dict[str, Any],
    *,
    blob: tuple[str, int] | None = None,
) -> FileRecord:
    """Write a file from ``data``, or from stored content ``blob`` (hash, size): no copy."""
    if path == "/":
        raise FileSystemError("Cannot write to /: give a file path like /attachments/a.txt.")
    now = now_us()
    _make_parents(conn, thread_id, path, now)
    current = _stat(conn, thread_id, path)
    if current is not None and current.is_directory:
        raise FileSystemError(f"Cannot write {path}: it is a directory.")
    if blob is None:
        content = data or b""
        blob = (put_blob(conn, content, now), len(content))
    row = dict(values, blob=blob[0], size=blob[1], is_directory=False, updated_at=now)
    row.setdefault("storage", "local")
    if current is None:
        parent, name = split_path(path)
        row.update(thread_id=thread_id, path=path, parent=parent, name=name, created_at=now)
        conn.execute(_INSERT, row)
    else:
        conn.execute(update(t.files).where(_F.thread_id == thread_id, _F.path == path).values(row))
        row["created_at"] = current.created_at
    record_version(conn, thread_id, path, "write", row, now)
    found = _stat(conn, thread_id, path)
    assert found is not None
    return found


def _row_of(record: FileRecord) -> dict[str, Any]:
    """The ``files`` values of a record (as a version row needs them)."""
    return {
        "path": record.path,
        "is_directory": record.is_directory,
        "mime_type": record.mime_type,
        "storage": record.storage,
        "location": record.location,
        "size": record.size,
        "blob": record.content_hash,
        "meta": record.metadata,
        "width": record.width,
        "height": record.height,
        "created_at": record.created_at,
    }


def _under(path: str) -> Any:
    """Rows strictly below a directory."""
    prefix = "/" if path == "/" else path + "/"
    return _F.path.startswith(prefix, autoescape=True)


class FilesMixin(StoreBase):
    """Thread files and directories."""

    async def write_file(
        self,
        thread_id: str,
        path: str,
        data: bytes,
        mime_type: str,
        *,
        metadata: dict[str, Any] | None = None,
        width: int | None = None,
        height: int | None = None,
        tx: Transaction | None = None,
    ) -> FileRecord:
        """Write (or overwrite) a file; missing parent directories are created.

        Raises:
            FileSystemError: Bad path, the path is a directory, or a parent is a file.

        """
        norm = normalize_path(path)
        values = {"mime_type": mime_type, "meta": metadata, "width": width, "height": height}
        return await self._write(
            lambda conn: _write(conn, thread_id, norm, bytes(data), values), tx
        )

    async def read_file(
        self, thread_id: str, path: str, *, tx: Transaction | None = None
    ) -> bytes | None:
        """Return a file's bytes, or ``None`` when it does not exist.

        Raises:
            FileSystemError: Bad path, or the path is a directory.

        """
        norm = normalize_path(path)

        def op(conn: Connection) -> bytes | None:
            row = conn.execute(_READ, {"b_tid": thread_id, "b_path": norm}).first()
            if norm == "/" or (row is not None and row.is_directory):
                raise FileSystemError(f"Cannot read {norm}: it is a directory.")
            return bytes(row.data or b"") if row is not None else None

        return await self._read(op, tx)

    async def stat_file(
        self, thread_id: str, path: str, *, tx: Transaction | None = None
    ) -> FileRecord | None:
        """Return a file's or directory's record, or ``None``."""
        norm = normalize_path(path)
        return await self._read(lambda conn: _stat(conn, thread_id, norm), tx)

    async def readdir(
        self, thread_id: str, path: str, *, tx: Transaction | None = None
    ) -> list[FileRecord]:
        """List the direct children of a directory (directories included), by name.

        Raises:
            FileSystemError: The directory does not exist, or the path is a file.

        """
        norm = normalize_path(path)
        stmt = select(*_RECORD_COLUMNS).where(_F.thread_id == thread_id, _F.parent == norm)

        def op(conn: Connection) -> list[FileRecord]:
            current = _stat(conn, thread_id, norm)
            if current is None:
                raise FileSystemError(f"No such directory: {norm}")
            if not current.is_directory:
                raise FileSystemError(f"Not a directory: {norm}")
            return [_record(row) for row in conn.execute(stmt.order_by(_F.name)).mappings()]

        return await self._read(op, tx)

    async def unlink_file(
        self, thread_id: str, path: str, *, tx: Transaction | None = None
    ) -> bool:
        """Delete a file; returns whether it existed.

        Raises:
            FileSystemError: The path is a directory (use :meth:`rmdir`).

        """
        norm = normalize_path(path)

        def op(conn: Connection) -> bool:
            current = _stat(conn, thread_id, norm)
            if current is None:
                return False
            if current.is_directory:
                raise FileSystemError(f"Cannot unlink {norm}: it is a directory; use rmdir.")
            conn.execute(_DELETE, {"b_tid": thread_id, "b_path": norm})
            record_version(conn, thread_id, norm, "delete", _row_of(current), now_us())
            return True

        return await self._write(op, tx)

    async def mkdir(
        self, thread_id: str, path: str, *, tx: Transaction | None = None
    ) -> FileRecord:
        """Create a directory and its parents; an existing directory is returned as is.

        Raises:
            FileSystemError: The path or a parent is a file.

        """
        norm = normalize_path(path)

        def op(conn: Connection) -> FileRecord:
            current = _stat(conn, thread_id, norm)
            if current is not None:
                if not current.is_directory:
                    raise FileSystemError(f"Cannot create directory {norm}: it is a file.")
                return current
            now = now_us()
            _make_parents(conn, thread_id, norm, now)
            parent, name = split_path(norm)
            row = _dir_row(thread_id, norm, parent, name, now)
            conn.execute(_INSERT, row)
            record_version(conn, thread_id, norm, "mkdir", row, now)
            found = _stat(conn, thread_id, norm)
            assert found is not None
            return found

        return await self._write(op, tx)

    async def rmdir(
        self, thread_id: str, path: str, *, recursive: bool = False, tx: Transaction | None = None
    ) -> bool:
        """Remove a directory; returns whether it existed.

        Raises:
            FileSystemError: The root, a file, or a non-empty directory without ``recursive``.

        """
        norm = normalize_path(path)
        if norm == "/":
            raise FileSystemError("Cannot remove the root directory.")

        def op(conn: Connection) -> bool:
            current = _stat(conn, thread_id, norm)
            if current is None:
                return False
            if not current.is_directory:
                raise FileSystemError(f"Cannot rmdir {norm}: it is a file; use unlink.")
            inside = and_(_F.thread_id == thread_id, _under(norm))
            if not recursive and conn.execute(select(_F.path).where(inside).limit(1)).first():
                raise FileSystemError(f"Directory {norm} is not empty; pass recursive=True.")
            removed = [dict(row) for row in conn.execute(select(t.files).where(inside)).mappings()]
            conn.execute(delete(t.files).where(inside))
            conn.execute(_DELETE, {"b_tid": thread_id, "b_path": norm})
            removed.append(_row_of(current))
            record_versions(conn, thread_id, "delete", removed, now_us())
            return True

        return await self._write(op, tx)

    async def file_stats(self, thread_id: str, *, tx: Transaction | None = None) -> FileStats:
        """Total size and count of a thread's files (directories not counted)."""
        stmt = select(func.coalesce(func.sum(_F.size), 0), func.count()).where(
            _F.thread_id == thread_id, _F.is_directory.is_(False)
        )

        def op(conn: Connection) -> FileStats:
            total, count = conn.execute(stmt).one()
            return FileStats(total_size=int(total), file_count=int(count))

        return await self._read(op, tx)

    async def grep_files(
        self, thread_id: str, pattern: str, *, tx: Transaction | None = None
    ) -> list[GrepResult]:
        """Search text files line by line with a regex (an invalid regex is taken literally).

        Returns:
            One result per matching file, by path, with at most
            ``MAX_GREP_MATCHES_PER_FILE`` matching lines and their 1-based line numbers.

        """
        try:
            regex = re.compile(pattern)
        except re.error:
            regex = re.compile(re.escape(pattern))
        stmt = (
            select(_F.path, _F.name, _B.data)
            .select_from(_WITH_DATA)
            .where(
                _F.thread_id == thread_id,
                _F.is_directory.is_(False),
                or_(*(_F.mime_type.like(like) for like in TEXT_MIME_LIKE)),
            )
            .order_by(_F.path)
        )

        def op(conn: Connection) -> list[tuple[str, str, bytes]]:
            return [(r.path, r.name, bytes(r.data or b"")) for r in conn.execute(stmt)]

        results = []
        for path, name, data in await self._read(op, tx):
            matches: list[str] = []
            numbers: list[int] = []
            for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
                if regex.search(line):
                    matches.append(line[:MAX_GREP_LINE_CHARS])
                    numbers.append(number)
                    if len(matches) >= MAX_GREP_MATCHES_PER_FILE:
                        break
            if matches:
                results.append(
                    GrepResult(path=path, name=name, matches=matches, line_numbers=numbers)
                )
        return results

    async def find_files(
        self, thread_id: str, pattern: str, *, tx: Transaction | None = None
    ) -> list[FileRecord]:
        """Find files and directories by glob, by path.

        A pattern containing ``/`` matches whole paths (``/attachments/**``); others match names
        (``*.txt``). ``*`` and ``?`` stay within a segment, ``**`` crosses segments.
        """
        stmt = select(*_RECORD_COLUMNS).where(_F.thread_id == thread_id).order_by(_F.path)

        def op(conn: Connection) -> list[FileRecord]:
            rows = conn.execute(stmt).mappings()
            return [_record(r) for r in rows if glob_matches(pattern, r["path"], r["name"])]

        return await self._read(op, tx)

    async def copy_file(
        self,
        src_thread: str,
        src_path: str,
        dst_thread: str,
        dst_path: str,
        *,
        tx: Transaction | None = None,
    ) -> FileRecord:
        """Copy a file, within a thread or to another one (overwriting the destination).

        Raises:
            FileSystemError: The source is missing or a directory, or the destination is bad.

        """
        src, dst = normalize_path(src_path), normalize_path(dst_path)
        stmt = select(t.files).where(_F.thread_id == src_thread, _F.path == src)

        def op(conn: Connection) -> FileRecord:
            row = conn.execute(stmt).mappings().first()
            if row is None:
                raise FileSystemError(f"Cannot copy {src}: no such file.")
            if row["is_directory"]:
                raise FileSystemError(f"Cannot copy {src}: it is a directory.")
            keys = ("mime_type", "storage", "location", "meta", "width", "height")
            values = {key: row[key] for key in keys}
            return _write(conn, dst_thread, dst, None, values, blob=(row["blob"], row["size"]))

        return await self._write(op, tx)

    async def move_file(
        self, thread_id: str, src_path: str, dst_path: str, *, tx: Transaction | None = None
    ) -> FileRecord:
        """Move (or rename) a file or a directory with everything in it; no bytes are copied.

        A file at the destination is replaced; missing parent directories are created.

        Raises:
            FileSystemError: The source is missing or the root, the destination is a
                directory (for a file) or exists (for a directory), or lies inside the source.

        """
        src, dst = normalize_path(src_path), normalize_path(dst_path)

        def op(conn: Connection) -> FileRecord:
            current = _stat(conn, thread_id, src)
            if current is None or src == "/":
                raise FileSystemError(f"Cannot move {src}: no such file or directory.")
            if dst == src:
                return current
            if dst.startswith(src + "/"):
                raise FileSystemError(f"Cannot move {src} into itself ({dst}).")
            if not current.is_directory:
                keys = ("mime_type", "storage", "location", "meta", "width", "height")
                row = _row_of(current)
                moved = _write(
                    conn,
                    thread_id,
                    dst,
                    None,
                    {key: row[key] for key in keys},
                    blob=(current.content_hash or "", current.size),
                )
                conn.execute(_DELETE, {"b_tid": thread_id, "b_path": src})
                record_version(conn, thread_id, src, "delete", row, now_us())
                return moved
            return _move_directory(conn, thread_id, src, dst)

        return await self._write(op, tx)


def _move_directory(conn: Connection, thread_id: str, src: str, dst: str) -> FileRecord:
    """Move a directory and everything under it to ``dst`` (which must not exist)."""
    if _stat(conn, thread_id, dst) is not None:
        raise FileSystemError(f"Cannot move {src} to {dst}: {dst} exists.")
    now = now_us()
    _make_parents(conn, thread_id, dst, now)
    inside = and_(_F.thread_id == thread_id, or_(_F.path == src, _under(src)))
    rows = [dict(row) for row in conn.execute(select(t.files).where(inside)).mappings()]
    conn.execute(delete(t.files).where(inside))
    record_versions(conn, thread_id, "delete", rows, now)
    moved = []
    for row in rows:
        path = dst + row["path"][len(src) :]
        parent, name = split_path(path)
        moved.append(dict(row, path=path, parent=parent, name=name, updated_at=now))
    conn.execute(_INSERT, moved)
    for op in ("mkdir", "write"):
        kind = [row for row in moved if bool(row["is_directory"]) == (op == "mkdir")]
        record_versions(conn, thread_id, op, kind, now)
    found = _stat(conn, thread_id, dst)
    assert found is not None
    return found
