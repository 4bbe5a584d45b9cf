"""The end of a replay: what the recording did that the replay did not, and each end state."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from sa_core.engine.files import ATTACHMENTS
from sa_core.engine.model.recording import normalise
from sa_core.engine.model.replay_diff import render_stored, unified
from sa_core.engine.model.replay_record import INTERNAL_VALUE, Divergence, ThreadCursor

if TYPE_CHECKING:
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.model.replay_record import RecordedThread, ReplaySession
    from sa_core.spec import Message


async def compare_end(kernel: Kernel, session: ReplaySession) -> None:
    """Note what is missing, then the first thread whose end state differs."""
    cursors = [c for c in session.cursors.values() if c.recorded is not None]
    for cursor in cursors:
        _missing_calls(cursor)
    for cursor in cursors:
        await _missing_tool_calls(kernel, cursor)
    _missing_children(session)
    for cursor in cursors:
        if session.stopped:
            return
        await _end_state(kernel, cursor)


def _missing_calls(cursor: ThreadCursor) -> None:
    recorded = cursor.recorded
    assert recorded is not None
    if cursor.next_call >= len(recorded.calls):
        return
    call = recorded.calls[cursor.next_call]
    answer = call.response
    said = answer.get("content") or ", ".join(c["name"] for c in answer.get("tool_calls") or [])
    cursor.session.diverge(
        Divergence(
            "missing_model_call",
            cursor.path,
            cursor.next_call + 1,
            f"the recording has {len(recorded.calls)} model calls, the replay made "
            f"{cursor.next_call}; the next recorded answer: {said!r}",
        )
    )


async def _missing_tool_calls(kernel: Kernel, cursor: ThreadCursor) -> None:
    recorded = cursor.recorded
    assert recorded is not None
    answered = {
        m.tool_call_id
        for m in await kernel.store.all_messages(cursor.thread_id)
        if m.role == "tool"
    }
    scope = kernel.registry.scope(recorded.package)
    for call_id, row in recorded.tool_rows.items():
        name = row.name or ""
        native = scope.tool(name) is not None or "." in name
        if native and call_id not in cursor.used_tool_calls and call_id not in answered:
            cursor.session.diverge(
                Divergence(
                    "missing_tool_call",
                    cursor.path,
                    recorded.tool_ordinals.get(call_id),
                    f"the recording called tool '{name}' (call {call_id}); the replay never did",
                )
            )
            return


def _missing_children(session: ReplaySession) -> None:
    made = {c.path for c in session.cursors.values()}

    def walk(recorded: RecordedThread) -> None:
        for child in recorded.children:
            if child.path not in made:
                session.diverge(
                    Divergence(
                        "missing_child",
                        child.path,
                        None,
                        f"the recording has a child of agent '{child.agent}' here; the replay "
                        "never created it",
                    )
                )
            walk(child)

    walk(session.root)


async def _end_state(kernel: Kernel, cursor: ThreadCursor) -> None:
    """Compare one thread's messages, files and values with the recording's."""
    recorded = cursor.recorded
    assert recorded is not None
    store = kernel.store
    now = [m for m in await store.all_messages(cursor.thread_id) if m.status != "pending"]
    was = [m for m in recorded.messages if m.status != "pending"]
    mine, theirs = [_message_text(m) for m in now], [_message_text(m) for m in was]
    if mine != theirs:
        index = next(
            (i for i, (a, b) in enumerate(zip(theirs, mine, strict=False)) if a != b), None
        )
        if index is None:
            index = min(len(mine), len(theirs))
        cursor.session.diverge(
            Divergence(
                "different_end_state",
                cursor.path,
                None,
                f"the messages differ from message {index + 1} on ({len(was)} recorded, "
                f"{len(now)} in the replay)",
                unified("\n".join(theirs[index:]), "\n".join(mine[index:]), "messages"),
            )
        )
        return
    files_was = _files(recorded.files)
    rows = await store.file_rows(cursor.thread_id)
    files_now = _files({f.path: f.data or b"" for f in rows if not f.is_directory})
    if files_was != files_now:
        cursor.session.diverge(
            Divergence(
                "different_end_state",
                cursor.path,
                None,
                "the files differ",
                unified(_listing(files_was), _listing(files_now), "files"),
            )
        )
        return
    values_was: dict[str, Any] = {}
    for change in recorded.value_events:
        if change.deleted:
            values_was.pop(change.key, None)
        else:
            values_was[change.key] = change.value
    values_now = {v.key: v.value for v in await store.value_rows(cursor.thread_id)}
    if _public(values_was) != _public(values_now):
        cursor.session.diverge(
            Divergence(
                "different_end_state",
                cursor.path,
                None,
                "the thread's values differ",
                unified(_listing(_public(values_was)), _listing(_public(values_now)), "values"),
            )
        )


def _message_text(message: Message) -> str:
    status = f" [{message.tool_status or message.status}]" if message.role == "tool" else ""
    return normalise(render_stored(message) + status).replace("\n", " | ")


def _files(files: dict[str, bytes]) -> dict[str, Any]:
    """Path -> content hash; attachments (random names) as a sorted list of hashes."""
    named = {}
    attached = []
    for path, data in files.items():
        digest = hashlib.sha256(data).hexdigest()[:16]
        if path.startswith(ATTACHMENTS):
            attached.append(digest)
        else:
            named[path] = digest
    return {"files": named, "attachments": sorted(attached)}


def _public(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if not k.startswith(INTERNAL_VALUE)}


def _listing(value: dict[str, Any]) -> str:
    lines = []
    for key, item in sorted(value.items()):
        lines.append(f"{key}: {item}")
    return "\n".join(lines)


__all__ = ["compare_end"]
