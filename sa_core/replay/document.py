"""Export: a thread tree as a portable, versioned JSON document (``"format": "sa-thread/1"``).

The document holds the root thread and, recursively, its children, each as a *node*::

    {"format": "sa-thread/1", "exported_at": ..., "file_history": "versions", "thread": NODE}

    NODE = {"id", "path", "package", "agent_id", "user_id", "parent_id", "history_ids",
            "created_at",
            "updated_at", "terminated", "stopped", "tags", "properties", "execution",
            "env" (secret variables left out), "env_types", "secrets" (their names),
            "messages", "logs", "model_calls", "files" (contents in base64),
            "file_versions", "values", "value_versions", "registry", "queue",
            "children": [NODE, ...]}

``path`` names a thread by its place in the tree: ``root``, then ``<agent>#<rank>`` per level
(the rank among its parent's children of that agent, in creation order), as in
``root/researcher#1``; a replay reports divergences by it. ``file_history`` is ``versions``:
``files`` holds each file as it is now, ``file_versions`` every change of them (a write, a
directory made, a deletion: ``op``), in order, with its time; ``value_versions`` likewise every
change of the values. A node's ``messages`` are its history as the thread sees it (a fork's
shared part included, a rewound range left out), each as the thread's own.

Secret values never appear: the values of the thread's secret variables are dropped from
``env``, and every text of the node (text files too) is scrubbed of them (``[redacted]``), as
tool results are.
"""

from __future__ import annotations

import base64
import contextlib
from collections import Counter
from typing import TYPE_CHECKING, Any

from pydantic_core import to_jsonable_python

from sa_core.engine.delivery.delivery import open_thread
from sa_core.engine.scrub import scrub_payload
from sa_core.engine.secrets import redact
from sa_core.store.clock import now_us

if TYPE_CHECKING:
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.threads import ThreadRef
    from sa_core.spec import SubagentRegistryEntry
    from sa_core.store.treecopy import FileRow, ValueRow

FORMAT = "sa-thread/1"
"""The document format this version writes and reads."""
FILE_HISTORY = "versions"
"""What a document holds of files: each as it is now (``files``) and every version of them
(``file_versions``: each write, directory made and deletion, in order, with its time)."""


async def export_thread(kernel: Kernel, thread_id: str) -> dict[str, Any]:
    """The ``sa-thread/1`` document of a thread and its children (see the module docstring).

    Raises:
        ThreadNotFoundError: no thread has this id.
    """
    root = await open_thread(kernel, thread_id)
    return {
        "format": FORMAT,
        "exported_at": now_us(),
        "file_history": FILE_HISTORY,
        "thread": await export_node(kernel, root, "root"),
    }


async def export_node(kernel: Kernel, thread: ThreadRef, path: str) -> dict[str, Any]:
    """One thread and, recursively, its children."""
    store = kernel.store
    thread_id = thread.thread_id
    row = thread.shared.row
    secret = kernel.secrets.secret_names(kernel.scope_of(thread), row)
    secrets = kernel.secret_values(thread)
    node: dict[str, Any] = {
        "id": thread_id,
        "path": path,
        "package": row.package,
        "agent_id": row.agent_id,
        "user_id": row.user_id,
        "parent_id": row.parent_id,
        "history_ids": [  # the threads its history is read from: a fork's sources, itself
            s.thread_id for s in (await store.thread_timeline(thread_id)).segments
        ],
        "created_at": row.created_at,
        "updated_at": row.updated_at,
        "terminated": row.terminated,
        "stopped": row.stopped,
        "tags": list(row.tags),
        "properties": dict(row.properties),
        "execution": dict(row.execution),
        "env": {k: v for k, v in row.env.items() if k not in secret},
        "env_types": dict(row.env_types),
        "secrets": sorted(k for k in row.env if k in secret),
        "messages": [  # its history through its timeline (a fork's shared part too), as its own
            m.model_dump(mode="json", exclude_none=True) | {"thread_id": thread_id}
            for m in await store.all_messages(thread_id)
        ],
        "logs": [log.model_dump(mode="json") for log in await store.all_logs(thread_id)],
        "model_calls": [c.to_json() for c in await store.history_model_calls(thread_id)],
        "files": [_file_json(f, secrets) for f in await store.file_rows(thread_id)],
        "file_versions": [_file_json(f, secrets) for f in await store.file_versions(thread_id)],
        "values": [_value_json(v) for v in await store.value_rows(thread_id)],
        "value_versions": [_value_json(v) for v in await store.value_versions(thread_id)],
        "registry": [e.model_dump(mode="json") for e in await store.list_children(thread_id)],
        "queue": [to_jsonable_python(e) for e in await store.list_queue(thread_id)],
    }
    node = scrub_payload(kernel, thread, node)
    node["children"] = [
        await export_node(kernel, await open_thread(kernel, child_id), child_path)
        for child_id, child_path in child_paths(path, await store.list_children(thread_id))
    ]
    return dict(node)


def child_paths(path: str, entries: list[SubagentRegistryEntry]) -> list[tuple[str, str]]:
    """``(thread id, path)`` of each child in creation order (see the module docstring)."""
    ranks: Counter[str] = Counter()
    found = []
    for entry in sorted(entries, key=lambda e: e.created_at or 0):
        ranks[entry.name] += 1
        found.append((entry.reference, f"{path}/{entry.name}#{ranks[entry.name]}"))
    return found


def _file_json(file: FileRow, secrets: list[str]) -> dict[str, Any]:
    data = file.data
    if data is not None and secrets:  # a text file a tool wrote a secret into
        with contextlib.suppress(UnicodeDecodeError):
            data = redact(data.decode(), secrets).encode()
    return {
        "path": file.path,
        "mime_type": file.mime_type,
        "is_directory": file.is_directory,
        "metadata": file.metadata,
        "width": file.width,
        "height": file.height,
        "created_at": file.created_at,
        "updated_at": file.updated_at,
        "data": None if data is None else base64.b64encode(data).decode(),
    } | ({} if file.op is None else {"op": file.op})


def _value_json(value: ValueRow) -> dict[str, Any]:
    found = {
        "key": value.key,
        "value": value.value,
        "created_at": value.created_at,
        "updated_at": value.updated_at,
    }
    return found | {"deleted": True} if value.deleted else found


__all__ = ["FILE_HISTORY", "FORMAT", "child_paths", "export_node", "export_thread"]
