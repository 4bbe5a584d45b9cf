"""Reading an ``sa-thread/1`` document: checks, and the recorded tree a replay runs against."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from sa_core.engine.model.replay_record import FileEvent, RecordedThread, ValueEvent
from sa_core.engine.tools.approvals import DECISION_LOG
from sa_core.errors import DefinitionNotFoundError, ReplayUnavailableError, ThreadDocumentError
from sa_core.replay.document import FORMAT
from sa_core.spec import Message
from sa_core.store.rows import RecordedCall

if TYPE_CHECKING:
    from sa_core.registry import Registry


def _file_event(version: dict[str, Any]) -> FileEvent:
    """A recorded write (with its bytes) or deletion of a file."""
    deleted = version.get("op") == "delete" or version.get("data") is None
    return FileEvent(
        int(version.get("updated_at") or 0),
        version["path"],
        None if deleted else base64.b64decode(version["data"]),
        version.get("mime_type") or "application/octet-stream",
        version.get("metadata"),
    )


def nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A node and, depth first, its descendants."""
    yield node
    for child in node.get("children") or []:
        yield from nodes(child)


def check_document(registry: Registry, document: Any) -> dict[str, Any]:
    """The document's root node, once the document is one this runtime can use.

    Raises:
        ThreadDocumentError: listing every problem: not an ``sa-thread/1`` document, or
            agents this runtime lacks (each named with the threads that need it).
    """
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        found = document.get("format") if isinstance(document, dict) else type(document).__name__
        raise ThreadDocumentError(
            [f"not an {FORMAT} document (format: {found!r}); export one with thread.export()"]
        )
    root = document.get("thread")
    if not isinstance(root, dict):
        raise ThreadDocumentError(["the document has no 'thread' object"])
    missing: dict[tuple[str, str], list[str]] = {}
    for node in nodes(root):
        package, agent = str(node.get("package")), str(node.get("agent_id"))
        try:
            registry.scope(package).agent(agent)
        except DefinitionNotFoundError:
            missing.setdefault((package, agent), []).append(str(node.get("path")))
    if missing:
        raise ThreadDocumentError(
            [
                f"agent '{agent}' of package '{package}' is not loaded here (needed by "
                f"{', '.join(paths)}); install or load the pack that defines it"
                for (package, agent), paths in missing.items()
            ]
        )
    return root


def unrecorded_calls(root: dict[str, Any]) -> list[tuple[str, int]]:
    """``(path, count)`` of the threads with used model answers that have no recording."""
    found = []
    for node in nodes(root):
        recorded = {c.get("log_id") for c in node.get("model_calls") or []}
        used = [
            log
            for log in node.get("logs") or []
            if log.get("type") == "llm_call" and not (log.get("data") or {}).get("error")
        ]
        count = sum(1 for log in used if log.get("id") not in recorded)
        if count:
            found.append((str(node.get("path")), count))
    return found


def recorded_tree(root: dict[str, Any]) -> RecordedThread:
    """The recorded thread tree of a checked document's root node.

    Raises:
        ReplayUnavailableError: some model answers were not recorded.
    """
    missing = unrecorded_calls(root)
    if missing:
        raise ReplayUnavailableError(missing)
    return _recorded(root)


def _recorded(node: dict[str, Any]) -> RecordedThread:
    files: dict[str, bytes] = {}
    meta: dict[str, dict[str, Any]] = {}
    for file in node.get("files") or []:
        if file.get("is_directory") or file.get("data") is None:
            continue
        files[file["path"]] = base64.b64decode(file["data"])
        meta[file["path"]] = {"mime_type": file.get("mime_type"), "metadata": file.get("metadata")}
    versions = node.get("file_versions")
    if versions is None:  # a document with the files as they are only: each written once
        versions = [f | {"op": "write"} for f in node.get("files") or []]
    events = [_file_event(v) for v in versions if v.get("op") in ("write", "delete")]
    values = [
        ValueEvent(int(v.get("updated_at") or 0), v["key"], v.get("value"), bool(v.get("deleted")))
        for v in node.get("value_versions") or node.get("values") or []
    ]
    decisions = {
        str(log["data"].get("tool_call_id")): dict(log["data"])
        for log in node.get("logs") or []
        if log.get("type") == DECISION_LOG and isinstance(log.get("data"), dict)
    }
    return RecordedThread(
        path=str(node.get("path") or "root"),
        agent=str(node.get("agent_id")),
        package=str(node.get("package")),
        messages=[Message.model_validate(m) for m in node.get("messages") or []],
        calls=[RecordedCall.from_json(c) for c in node.get("model_calls") or []],
        thread_id=str(node.get("id") or ""),
        created_by=(node.get("properties") or {}).get("tool_call_id"),
        history_ids=[str(i) for i in node.get("history_ids") or []],
        files=files,
        file_meta=meta,
        file_events=events,
        value_events=sorted(values, key=lambda v: v.time),
        decisions=decisions,
        children=[_recorded(child) for child in node.get("children") or []],
    )


__all__ = ["check_document", "nodes", "recorded_tree", "unrecorded_calls"]
