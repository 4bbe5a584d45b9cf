"""The file system API of a thread (``state.write_file``, ``state.read_file``, ...).

A part of :class:`~sa_core.state.ThreadState`, kept in its own module: every method is one
call to the store's per-thread file system (or to :mod:`sa_core.engine.files`).
"""

from __future__ import annotations

import asyncio
import mimetypes
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from sa_core.errors import FileSystemError
from sa_core.spec import FileRecord, FileStats, GrepResult

if TYPE_CHECKING:
    from sa_core.engine.kernel import Kernel


class ThreadFiles:
    """The thread's files: text and binary files, directories, search and attachments."""

    __slots__ = ()
    _kernel: Kernel

    @property
    def thread_id(self) -> str:
        """The thread id."""
        raise NotImplementedError

    # -- files ------------------------------------------------------------------------------

    async def write_file(
        self,
        path: str,
        data: bytes | str,
        mime_type: str | None = None,
        *,
        metadata: dict[str, Any] | None = None,
        width: int | None = None,
        height: int | None = None,
    ) -> FileRecord:
        """Write a file (text is stored as UTF-8 and stays searchable)."""
        raw = data.encode() if isinstance(data, str) else data
        mime = (
            mime_type
            or mimetypes.guess_type(path)[0]
            or ("text/plain" if isinstance(data, str) else "application/octet-stream")
        )
        return await self._kernel.store.write_file(
            self.thread_id, path, raw, mime, metadata=metadata, width=width, height=height
        )

    async def read_file(self, path: str, *, at: str | None = None) -> bytes | None:
        """A file's bytes, or None when it does not exist.

        ``at``: a message id of the thread's history: the file as it was after that message.
        """
        store = self._kernel.store
        if at is None:
            return await store.read_file(self.thread_id, path)
        message = await store.get_message(self.thread_id, at)
        if message is None:
            raise FileSystemError(
                f"Thread {self.thread_id} has no message {at} in its history; pass the id of "
                "one of its messages (get_messages)."
            )
        owner = message.thread_id or self.thread_id
        return await store.read_file_at(owner, path, message.created_at)

    async def read_file_stream(self, path: str, chunk_size: int = 65536) -> AsyncIterator[bytes]:
        """A file's bytes in chunks."""
        data = await self.read_file(path)
        if data is None:
            raise FileSystemError(f"No file at {path} in thread {self.thread_id}.")
        for start in range(0, len(data), chunk_size):
            yield data[start : start + chunk_size]
            await asyncio.sleep(0)

    async def stat_file(self, path: str) -> FileRecord | None:
        """Metadata of a file or directory."""
        return await self._kernel.store.stat_file(self.thread_id, path)

    async def readdir_file(self, path: str = "/") -> list[FileRecord]:
        """Direct children of a directory."""
        return await self._kernel.store.readdir(self.thread_id, path)

    async def move_file(self, src: str, dst: str) -> FileRecord:
        """Move a file or directory to a new path (the earlier paths stay in the history)."""
        return await self._kernel.store.move_file(self.thread_id, src, dst)

    async def rename_file(self, path: str, new_name: str) -> FileRecord:
        """Rename a file or directory within its directory."""
        if not new_name or "/" in new_name:
            raise FileSystemError(
                f"Cannot rename {path} to {new_name!r}: give a name without '/' (use move_file "
                "to move it elsewhere)."
            )
        parent = path.rstrip("/").rsplit("/", 1)[0] or ""
        return await self._kernel.store.move_file(self.thread_id, path, f"{parent}/{new_name}")

    async def unlink_file(self, path: str) -> bool:
        """Delete a file."""
        return await self._kernel.store.unlink_file(self.thread_id, path)

    async def mkdir_file(self, path: str) -> FileRecord:
        """Create a directory."""
        return await self._kernel.store.mkdir(self.thread_id, path)

    async def rmdir_file(self, path: str, *, recursive: bool = False) -> bool:
        """Remove a directory."""
        return await self._kernel.store.rmdir(self.thread_id, path, recursive=recursive)

    async def get_file_stats(self) -> FileStats:
        """Total size and file count."""
        return await self._kernel.store.file_stats(self.thread_id)

    async def grep_files(self, pattern: str) -> list[GrepResult]:
        """Regex search through text files."""
        return await self._kernel.store.grep_files(self.thread_id, pattern)

    async def find_files(self, pattern: str) -> list[FileRecord]:
        """Glob search on paths and names."""
        return await self._kernel.store.find_files(self.thread_id, pattern)
