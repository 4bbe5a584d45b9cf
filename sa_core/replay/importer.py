"""Import: an ``sa-thread/1`` document recreated as a new thread tree, in one transaction.

Every thread, message and log gets a new id (the store may hold the original: importing on
the machine that exported is allowed), and every mention of an old id anywhere in the tree
(a message's ``log_id``, a registry entry's child, a child's result naming its thread) is
rewritten to the new one. Times are kept, so the imported tree reads, exports and replays as
the original did. The engine's own values (``sa:`` keys: pending approvals, A2A tasks,
conversation indexes) and queued entries are not imported: an imported tree is at rest, and
nothing in it starts running or answers for the original.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sa_core.engine.messages import new_id
from sa_core.engine.model.recording import VOLATILE_ID
from sa_core.engine.model.replay_record import INTERNAL_VALUE
from sa_core.replay.recorded import check_document, nodes
from sa_core.spec import Log, Message, SubagentRegistryEntry
from sa_core.store import ThreadRow
from sa_core.store.rows import RecordedCall
from sa_core.store.treecopy import FileRow, ValueRow

if TYPE_CHECKING:
    from sa_core.engine.kernel import Kernel
    from sa_core.store import Transaction


async def import_thread(kernel: Kernel, document: Mapping[str, Any]) -> str:
    """Recreate the document's tree; returns the new root thread's id.

    Raises:
        ThreadDocumentError: not an ``sa-thread/1`` document, or it needs agents this runtime
            lacks (all named at once).
    """
    root = check_document(kernel.registry, dict(document))
    ids: dict[str, str] = {}
    for node in nodes(root):
        ids[str(node["id"])] = new_id()
        for item in [*(node.get("messages") or []), *(node.get("logs") or [])]:
            ids[str(item["id"])] = new_id()
    tree = remap(root, ids)
    async with kernel.store.transaction() as tx:
        await _insert(kernel, tree, None, tx)
    return str(tree["id"])


def remap(value: Any, ids: Mapping[str, str]) -> Any:
    """``value`` with every old id (wherever it occurs in a text) replaced by its new one."""
    if isinstance(value, str):
        if value in ids:
            return ids[value]
        return VOLATILE_ID.sub(lambda m: ids.get(m.group(0), m.group(0)), value)
    if isinstance(value, dict):
        return {key: remap(item, ids) for key, item in value.items()}
    if isinstance(value, list):
        return [remap(item, ids) for item in value]
    return value


async def _insert(
    kernel: Kernel, node: dict[str, Any], parent_id: str | None, tx: Transaction
) -> None:
    store = kernel.store
    thread_id = str(node["id"])
    execution = dict(node.get("execution") or {})
    if execution.get("status") not in (None, "idle"):
        execution["status"] = "idle"  # at rest: nothing of the original runs here
    row = ThreadRow(
        id=thread_id,
        package=str(node["package"]),
        agent_id=str(node["agent_id"]),
        created_at=int(node.get("created_at") or 0),
        user_id=node.get("user_id"),
        parent_id=parent_id,
        terminated=node.get("terminated"),
        stopped=bool(node.get("stopped")),
        env=dict(node.get("env") or {}),
        env_types=dict(node.get("env_types") or {}),
        tags=list(node.get("tags") or []),
        properties=dict(node.get("properties") or {}),
        execution=execution,
        updated_at=int(node.get("updated_at") or 0),
    )
    await store.create_thread(row, tx=tx)
    messages = [
        Message.model_validate({**m, "thread_id": thread_id}) for m in node.get("messages") or []
    ]
    await store.insert_messages(messages, tx=tx)
    for call in node.get("model_calls") or []:  # each stored with its log
        store.stage_model_call(RecordedCall.from_json(call, thread_id))
    for log in node.get("logs") or []:
        await store.insert_log(thread_id, Log.model_validate(log), tx=tx)
    files = [_file(f) for f in node.get("files") or []]
    versions = [_file(f) for f in node.get("file_versions") or []]
    await store.insert_file_rows(thread_id, files, versions, tx=tx)
    await store.insert_value_rows(
        thread_id, _values(node.get("values")), _values(node.get("value_versions")), tx=tx
    )
    for child in node.get("children") or []:
        await _insert(kernel, child, thread_id, tx)
    for entry in node.get("registry") or []:
        registered = SubagentRegistryEntry.model_validate(entry)
        await store.upsert_child(thread_id, registered, new=True, tx=tx)


def _values(items: list[dict[str, Any]] | None) -> list[ValueRow]:
    """The values (or their changes) of a node, the engine's own (``sa:``) left out."""
    return [
        ValueRow(
            v["key"],
            v.get("value"),
            int(v["created_at"]),
            int(v["updated_at"]),
            bool(v.get("deleted")),
        )  # fmt: skip
        for v in items or []
        if not str(v["key"]).startswith(INTERNAL_VALUE)
    ]


def _file(data: dict[str, Any]) -> FileRow:
    raw = data.get("data")
    return FileRow(
        path=str(data["path"]),
        mime_type=str(data.get("mime_type") or "application/octet-stream"),
        is_directory=bool(data.get("is_directory")),
        data=None if raw is None else base64.b64decode(raw),
        metadata=data.get("metadata"),
        width=data.get("width"),
        height=data.get("height"),
        created_at=int(data.get("created_at") or 0),
        updated_at=int(data.get("updated_at") or 0),
        op=data.get("op"),
    )


__all__ = ["import_thread", "remap"]
