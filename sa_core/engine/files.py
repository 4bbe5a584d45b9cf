"""Attachment files: the ``/attachments/`` convention and cross-thread copies."""

from __future__ import annotations

import base64
import mimetypes
import os
import re
import secrets
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from sa_core.spec import AttachmentRef, FileRecord, ToolAttachment, ToolResult

if TYPE_CHECKING:
    from sa_core.store import Store

ATTACHMENTS = "/attachments/"


def _extension(name: str, mime_type: str) -> str:
    ext = os.path.splitext(name)[1]
    if ext:
        return ext
    return mimetypes.guess_extension(mime_type) or ""


def ref_from_record(record: FileRecord, description: str | None = None) -> AttachmentRef:
    """An AttachmentRef for a stored file."""
    return AttachmentRef(
        id=record.path,
        path=record.path,
        name=record.name,
        mime_type=record.mime_type,
        size=record.size,
        width=record.width,
        height=record.height,
        description=description,
    )


async def save_attachment(
    store: Store, thread_id: str, attachment: ToolAttachment | Mapping[str, Any]
) -> AttachmentRef:
    """``state.save_attachment``: store a base64 attachment under ``/attachments/``."""
    item = ToolAttachment.model_validate(attachment)
    return await store_attachment(
        store,
        thread_id,
        item.name,
        base64.b64decode(item.data),
        item.mime_type,
        width=item.width,
        height=item.height,
    )


async def store_attachment(
    store: Store,
    thread_id: str,
    name: str,
    data: bytes,
    mime_type: str,
    *,
    width: int | None = None,
    height: int | None = None,
) -> AttachmentRef:
    """Write a new file as ``/attachments/<epochMs>-<8 hex>.<ext>``."""
    stamp = f"{int(time.time() * 1000)}-{secrets.token_hex(4)}"
    path = f"{ATTACHMENTS}{stamp}{_extension(name, mime_type)}"
    record = await store.write_file(
        thread_id, path, data, mime_type, metadata={"name": name}, width=width, height=height
    )
    ref = ref_from_record(record)
    ref.name = name
    return ref


def _path_of(item: Any) -> str | None:
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        value = item.get("path")
        return value if isinstance(value, str) else None
    return getattr(item, "path", None)


def attachment_paths(value: Any) -> list[str]:
    """Paths from an argument holding one path or a list of paths / ``{path}`` objects."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    return [p for p in (_path_of(i) for i in items) if p]


async def existing_refs(
    store: Store, thread_id: str, paths: Iterable[str]
) -> tuple[list[AttachmentRef], list[str]]:
    """Refs for paths under ``/attachments/`` that exist; and the paths that do not."""
    refs: list[AttachmentRef] = []
    missing: list[str] = []
    for path in paths:
        record = None
        if path.startswith(ATTACHMENTS):
            record = await store.stat_file(thread_id, path)
        if record is None or record.is_directory:
            missing.append(path)
        else:
            refs.append(ref_from_record(record))
    return refs, missing


async def attachments_named(
    store: Store, thread_id: str, paths: Iterable[str]
) -> list[AttachmentRef] | ToolResult:
    """The thread's attachments a tool call names, else the call's error result.

    The one check of attachment paths a call hands on (a subagent's, a subprompt's, a
    handoff's first message; a session tool's result): every path must be a file under
    ``/attachments/`` of this thread, or the call fails naming the missing ones.
    """
    refs, missing = await existing_refs(store, thread_id, paths)
    if missing:
        error = "Provided attachment path(s) not found in this thread: " + ", ".join(missing)
        return ToolResult(status="error", error=error)
    return refs


def _copy_name(name: str) -> str:
    stem, ext = os.path.splitext(os.path.basename(name))
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-")[:64] or "file"
    return f"{ATTACHMENTS}{stem}-{secrets.token_hex(4)}{ext}"


async def copy_attachments(
    store: Store, source: str, refs: Iterable[AttachmentRef], destination: str
) -> list[AttachmentRef]:
    """Copy files between thread filesystems; the destination gets destination-local paths."""
    copied: list[AttachmentRef] = []
    for ref in refs:
        record = await store.copy_file(
            source, ref.path, destination, _copy_name(ref.name or ref.path)
        )
        new_ref = ref_from_record(record, ref.description)
        new_ref.name = ref.name
        copied.append(new_ref)
    return copied
