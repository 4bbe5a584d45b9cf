"""The thread filesystem: list, download, upload, delete, grep and find.

Paths are thread-absolute (``/attachments/a.png``). A ``..`` segment is refused, so a request
can never name anything outside its own thread's filesystem.
"""

from __future__ import annotations

import mimetypes
import re
from typing import Annotated, Any
from urllib.parse import quote

from litestar import Controller, Request, Response, delete, get, put
from litestar.params import FromPath, FromQuery, QueryParameter

from sa_core.errors import FileSystemError
from sa_core.server.context import ThreadDep
from sa_core.server.errors import ApiError, errors
from sa_core.server.openapi import FileDownload, RawUpload
from sa_core.server.routes.thumbnails import thumbnail_response
from sa_core.server.schemas import DirectoryOut, FileOut, FilesOut, GrepOut, convert
from sa_core.spec import FileRecord
from sa_core.state import ThreadState
from sa_core.store.paths import normalize_path

Pattern = Annotated[str, QueryParameter(min_length=1, max_length=500)]


def safe_path(path: str) -> str:
    """Normalise a thread path from the URL, refusing traversal and NUL bytes (400)."""
    if "\x00" in path:
        raise ApiError(400, "invalid_path", "The path contains a NUL byte.")
    if any(segment == ".." for segment in path.split("/")):
        raise ApiError(400, "invalid_path", "'..' is not allowed in thread paths.")
    try:
        return normalize_path(path or "/")
    except FileSystemError as exc:
        raise ApiError(400, "invalid_path", str(exc)) from None


def file_out(record: FileRecord) -> FileOut:
    """Describe a file record."""
    return convert(record.model_dump(mode="json"), FileOut)


async def _existing(thread: ThreadState, path: str) -> FileRecord:
    record = await thread.stat_file(path)
    if record is None:
        raise ApiError(404, "file_not_found", f"No file or directory at {path}.")
    return record


async def directory_at(thread: ThreadState, path: str, at: str) -> DirectoryOut:
    """``GET files?at=``: a directory as it was after message ``at``."""
    try:
        records = await thread.files_at(at)
    except FileSystemError as exc:
        raise ApiError(404, "message_not_found", str(exc)) from None
    found = {record.path: record for record in records}
    if path != "/" and path not in found:
        raise ApiError(404, "file_not_found", f"No file or directory at {path} after {at}.")
    if path != "/" and not found[path].is_directory:
        raise ApiError(400, "not_a_directory", f"{path} was a file after {at}.")
    prefix = "/" if path == "/" else path + "/"
    entries = [r for r in records if r.path.startswith(prefix) and "/" not in r.path[len(prefix) :]]
    files = [r for r in records if not r.is_directory]
    return DirectoryOut(
        path=path,
        entries=[file_out(r) for r in sorted(entries, key=lambda r: r.name)],
        total_size=sum(r.size for r in files),
        file_count=len(files),
    )


async def _download_at(thread: ThreadState, path: str, at: str) -> Response[bytes]:
    try:
        found = {r.path: r for r in await thread.files_at(at)}.get(path)
    except FileSystemError as exc:
        raise ApiError(404, "message_not_found", str(exc)) from None
    if found is None or found.is_directory:
        raise ApiError(404, "file_not_found", f"No file at {path} after message {at}.")
    data = await thread.read_file(path, at=at) or b""
    disposition = f"attachment; filename*=UTF-8''{quote(found.name or 'file', safe='')}"
    return Response(
        content=data,
        media_type=found.mime_type or "application/octet-stream",
        headers={"Content-Disposition": disposition},
    )


class FilesController(Controller):
    """Files of one thread."""

    path = "/threads/{thread_id:str}"

    @get("/files", responses=errors(404), summary="List a directory")
    async def list_directory(
        self, thread: ThreadDep, path: FromQuery[str] = "/", at: FromQuery[str | None] = None
    ) -> DirectoryOut:
        """List a directory (the root by default), with the filesystem totals.

        ``at``: a message id of the thread's history: the directory as it was after it.
        """
        clean = safe_path(path)
        if at is not None:
            return await directory_at(thread, clean, at)
        record = await _existing(thread, clean)
        if not record.is_directory:
            raise ApiError(400, "not_a_directory", f"{clean} is a file; download it instead.")
        entries = await thread.readdir_file(clean)
        stats = await thread.get_file_stats()
        return DirectoryOut(
            path=clean,
            entries=[file_out(e) for e in entries],
            total_size=stats.total_size,
            file_count=stats.file_count,
        )

    @get(
        "/files/{path:path}",
        responses=errors(404, 501),
        operation_class=FileDownload,
        summary="Download a file",
    )
    async def download(
        self,
        thread: ThreadDep,
        path: FromPath[str],
        thumbnail: FromQuery[bool] = False,
        at: FromQuery[str | None] = None,
    ) -> Response[bytes]:
        """Answer the file's bytes, with its MIME type.

        With ``thumbnail=1`` an image file answers a PNG of at most 256 px instead (``404
        no_thumbnail`` for files that are not images). ``at``: a message id of the thread's
        history: the file as it was after it.
        """
        clean = safe_path(path)
        if at is not None:
            return await _download_at(thread, clean, at)
        record = await _existing(thread, clean)
        if record.is_directory:
            raise ApiError(
                400, "is_a_directory", f"{clean} is a directory; list it with GET files?path=."
            )
        if thumbnail:
            return await thumbnail_response(thread, clean)
        data = await thread.read_file(clean) or b""
        disposition = f"attachment; filename*=UTF-8''{quote(record.name or 'file', safe='')}"
        return Response(
            content=data,
            media_type=record.mime_type or "application/octet-stream",
            headers={"Content-Disposition": disposition},
        )

    @put(
        "/files/{path:path}",
        status_code=201,
        responses=errors(404, 413),
        operation_class=RawUpload,
        summary="Upload a file",
    )
    async def upload(
        self, thread: ThreadDep, path: FromPath[str], request: Request[Any, Any, Any]
    ) -> FileOut:
        """Write (or overwrite) a file; missing parent directories are created."""
        clean = safe_path(path)
        if clean == "/":
            raise ApiError(400, "invalid_path", "Give a file path like /notes/a.txt.")
        data = await request.body()
        if not data:
            raise ApiError(
                400,
                "empty_body",
                "The request body is empty; send the file's bytes (the schema requires a body).",
            )
        mime = request.headers.get("content-type", "").split(";")[0].strip()
        if not mime or mime == "application/x-www-form-urlencoded":
            mime = mimetypes.guess_type(clean)[0] or "application/octet-stream"
        return file_out(await thread.write_file(clean, data, mime))

    @delete("/files/{path:path}", responses=errors(404), summary="Delete a file or directory")
    async def remove(
        self, thread: ThreadDep, path: FromPath[str], recursive: FromQuery[bool] = False
    ) -> None:
        """Delete a file, or a directory (non-empty ones only with ``recursive=true``)."""
        clean = safe_path(path)
        if clean == "/":
            raise ApiError(400, "invalid_path", "The root directory cannot be deleted.")
        record = await _existing(thread, clean)
        if record.is_directory:
            if not recursive and await thread.readdir_file(clean):
                raise ApiError(
                    400,
                    "directory_not_empty",
                    f"Directory {clean} is not empty; add ?recursive=true to delete it with "
                    f"everything in it.",
                )
            await thread.rmdir_file(clean, recursive=recursive)
        else:
            await thread.unlink_file(clean)

    @get("/grep", responses=errors(400, 404), summary="Search file contents")
    async def grep(self, thread: ThreadDep, pattern: Pattern) -> GrepOut:
        """Regex search (Python ``re`` syntax) through text files; an invalid regex is a 400."""
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ApiError(
                400,
                "invalid_pattern",
                f"pattern {pattern!r} is not a valid regular expression: {exc}. Escape special "
                f"characters such as ( [ * with a backslash to match them literally.",
            ) from None
        results = await thread.grep_files(pattern)
        return convert({"results": [r.model_dump(mode="json") for r in results]}, GrepOut)

    @get("/find", responses=errors(404), summary="Find files by glob")
    async def find(self, thread: ThreadDep, pattern: Pattern) -> FilesOut:
        """Files and directories matching a glob (``*.txt``, ``/attachments/**``)."""
        return FilesOut(files=[file_out(r) for r in await thread.find_files(pattern)])
