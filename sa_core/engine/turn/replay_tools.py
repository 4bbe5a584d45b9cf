"""A replayed thread's tool calls and queue drains (see :mod:`sa_core.engine.model.replaying`).

**Tool calls.** A native or MCP call is served its recorded result, or run again, as the
replay's ``tools`` and the tool's own ``define_tool(replay=...)`` say (:func:`tool_mode`). A
served result brings back what the tool did to its thread: the files and values it wrote,
found in the recording between the message before the call's result and the result itself
(:func:`apply_effects`), and the attachments it returned. A call the recording does not have
is an extra tool call; a call whose name or arguments differ, a different tool call; a tool
run again that returns another result, a different tool result.

**Queue drains.** Which queued messages (children's results, messages queued while a turn
ran) a thread takes before a step is a matter of timing, and a replay runs at another pace
than the recording. So a replayed thread drains exactly the queued messages the recording
has at its position in the history, waits for them when they have not arrived yet (queuing
the recorded user messages itself) and leaves early arrivals queued for the place they
belong (:func:`entries_to_drain`).
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal, Protocol

from sa_core.engine.model.replay_diff import unified
from sa_core.engine.model.replay_record import (
    INTERNAL_VALUE,
    Divergence,
    RecordedThread,
    ThreadCursor,
    recorded_text,
    same_text,
)
from sa_core.engine.tools.tools import result_text
from sa_core.spec import Message, QueueMessageInput, ToolAttachment, ToolResult

if TYPE_CHECKING:
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.threads import ThreadRef
    from sa_core.engine.tools.tools import OfferedTool
    from sa_core.store.rows import QueueEntry

ToolMode = Literal["recorded", "execute", "forbid"]
STOPPED = "Not run: the replay stopped at its first divergence."
NOT_RECORDED = "Not run: the recording has no result for this call."
POLL_SECONDS = 0.01
"""How often a drain waiting for a recorded message looks at the queue again."""


class ReplayedFlow(Protocol):
    """What a replayed thread's drain reads of its flow."""

    @property
    def thread(self) -> ThreadRef:
        """The thread the flow runs on."""
        ...

    @property
    def step_count(self) -> int:
        """Model steps taken in this flow."""
        ...


def tool_mode(tool: OfferedTool, tools: str) -> ToolMode:
    """How a replay treats a call of ``tool`` when the replay asks ``tools``."""
    setting = tool.native.replay if tool.native is not None else "recorded"
    if setting in ("execute", "forbid"):
        return setting
    return "execute" if tools == "execute" else "recorded"


async def run_tool(
    kernel: Kernel,
    cursor: ThreadCursor,
    thread: ThreadRef,
    tool: OfferedTool,
    arguments: dict[str, Any],
    execute: Callable[[], Awaitable[ToolResult]],
) -> ToolResult:
    """Serve or run one call of a replayed thread (see the module docstring)."""
    session = cursor.session
    recorded = cursor.recorded
    call_id = thread.tool_call_id or ""
    cursor.tool_calls += 1
    if session.stopped:
        return ToolResult(status="error", error=STOPPED)
    row = recorded.tool_rows.get(call_id) if recorded is not None else None
    mode = tool_mode(tool, session.tools)
    if recorded is None or row is None:
        if recorded is not None:
            session.diverge(
                Divergence(
                    "extra_tool_call",
                    cursor.path,
                    cursor.tool_calls,
                    f"the replay called tool '{tool.name}' with {_compact(arguments)}; the "
                    "recording has no such call",
                )
            )
        if mode != "execute" or session.stopped:
            return ToolResult(status="error", error=STOPPED if session.stopped else NOT_RECORDED)
        session.tool_executions += 1
        return await execute()
    ordinal = recorded.tool_ordinals.get(call_id, cursor.tool_calls)
    cursor.used_tool_calls.add(call_id)
    if _different_call(cursor, recorded, call_id, tool.name, arguments, ordinal):
        return ToolResult(status="error", error=STOPPED)
    if mode == "execute":
        session.tool_executions += 1
        result = await execute()
        _compare_result(cursor, row, result, ordinal)
        return result
    session.tool_results_served += 1
    await apply_effects(kernel, thread.thread_id, recorded, row)
    return recorded_result(recorded, row)


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _different_call(
    cursor: ThreadCursor,
    recorded: RecordedThread,
    call_id: str,
    name: str,
    arguments: dict[str, Any],
    ordinal: int,
) -> bool:
    """Note a different tool call; returns whether the replay stops on it."""
    was = recorded.call_arguments(call_id)
    if was is None or (was[0] == name and _compact(was[1]) == _compact(arguments)):
        return False
    session = cursor.session
    session.diverge(
        Divergence(
            "different_tool_call",
            cursor.path,
            ordinal,
            f"call {call_id} is {name}({_compact(arguments)}); the recording has "
            f"{was[0]}({_compact(was[1])})",
            unified(f"{was[0]}({_compact(was[1])})", f"{name}({_compact(arguments)})", "call"),
        )
    )
    return session.stopped


def _compare_result(cursor: ThreadCursor, row: Message, result: ToolResult, ordinal: int) -> None:
    """Note a different result of a tool run again."""
    was, now = recorded_text(row), result_text(result)
    if same_text(was, now) and (row.tool_status or "success") == result.status:
        return
    cursor.session.diverge(
        Divergence(
            "different_tool_result",
            cursor.path,
            ordinal,
            f"tool '{row.name}' (call {row.tool_call_id}) returned another result "
            f"({result.status}; recorded: {row.tool_status or 'success'})",
            unified(was, now, "result"),
        )
    )


def recorded_result(recorded: RecordedThread, row: Message) -> ToolResult:
    """The result a recorded tool row stands for (its attachments read from the recording)."""
    text = recorded_text(row)
    attachments: list[ToolAttachment | Any] = [
        ToolAttachment(
            name=ref.name,
            mime_type=ref.mime_type,
            data=base64.b64encode(recorded.files[ref.path]).decode(),
            width=ref.width,
            height=ref.height,
        )
        for ref in row.attachments or []
        if ref.path in recorded.files
    ]
    if row.tool_status == "error":
        meta = row.metadata or {}
        return ToolResult(
            status="error",
            error=text.removeprefix("Failed to execute tool: "),
            error_code=meta.get("error_code"),
            error_data=meta.get("error_data"),
            attachments=attachments,
        )
    return ToolResult(status="success", result=text, attachments=attachments)


async def apply_effects(
    kernel: Kernel, thread_id: str, recorded: RecordedThread, row: Message
) -> None:
    """Write the files and values the recorded call wrote (see the module docstring)."""
    start, end = recorded.before(row), row.created_at
    returned = {ref.path for ref in row.attachments or []}
    store = kernel.store
    for event in recorded.file_events:
        if not start < event.time <= end or event.path in returned:
            continue
        if event.data is None:
            await store.unlink_file(thread_id, event.path)
        else:
            await store.write_file(
                thread_id, event.path, event.data, event.mime_type, metadata=event.metadata
            )
    for value in recorded.value_events:
        if start < value.time <= end and not value.key.startswith(INTERNAL_VALUE):
            if value.deleted:
                await store.delete_value(thread_id, value.key)
            else:
                await store.set_value(thread_id, value.key, value.value)


# -- the queue ----------------------------------------------------------------------------------


async def entries_to_drain(
    kernel: Kernel, cursor: ThreadCursor, flow: ReplayedFlow
) -> list[QueueEntry] | None:
    """The queued entries a replayed thread drains now (``None``: drain as usual)."""
    recorded = cursor.recorded
    assert recorded is not None
    thread_id = flow.thread.thread_id
    position = len(await kernel.store.history(thread_id))
    expected: list[Message] = []
    for message in recorded.top[position:]:
        if not (message.metadata or {}).get("queued"):
            break
        expected.append(message)
    if not expected:
        return [] if flow.step_count else None  # mid-flow, early arrivals wait their turn
    await _queue_inputs(kernel, cursor, recorded, flow.thread, expected)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + cursor.session.wait_timeout
    while True:
        entries = await kernel.store.list_queue(thread_id)
        chosen = _match(cursor, recorded, expected, entries)
        if chosen is not None:
            return chosen
        if cursor.session.stopped or loop.time() > deadline:
            _missing(cursor, recorded, expected, entries)
            return None
        await asyncio.sleep(POLL_SECONDS)


def _origin(cursor: ThreadCursor, recorded: RecordedThread, message: Message) -> str | None:
    """The replay's thread id for the child a recorded queued message came from."""
    child_id = (message.metadata or {}).get("subagent_id")
    if not child_id:
        return None
    child = recorded.child_by_id(child_id)
    if child is None:
        return "?"
    cursors = cursor.session.cursors.values()
    return next((c.thread_id for c in cursors if c.recorded is child), "?")


def _match(
    cursor: ThreadCursor,
    recorded: RecordedThread,
    expected: list[Message],
    entries: list[QueueEntry],
) -> list[QueueEntry] | None:
    """The entries standing for ``expected`` (same role and origin, in order), or ``None``."""
    left = list(entries)
    chosen = []
    for message in expected:
        origin = _origin(cursor, recorded, message)
        found = next(
            (
                e
                for e in left
                if e.role == message.role and (e.metadata or {}).get("subagent_id") == origin
            ),
            None,
        )
        if found is None:
            return None
        left.remove(found)
        chosen.append(found)
    return chosen


async def _queue_inputs(
    kernel: Kernel,
    cursor: ThreadCursor,
    recorded: RecordedThread,
    thread: ThreadRef,
    expected: list[Message],
) -> None:
    """Queue the recorded user messages (no child's) among ``expected``, once each."""
    for message in expected:
        meta = dict(message.metadata or {})
        if meta.get("subagent_id") or message.id in cursor.delivered:
            continue
        cursor.delivered.add(message.id)
        meta.pop("queued", None)
        meta.pop("message_id", None)
        refs = list(message.attachments or [])
        await write_recorded_files(kernel, thread.thread_id, recorded, [r.path for r in refs])
        role: Literal["user", "assistant"] = "assistant" if message.role == "assistant" else "user"
        entry = QueueMessageInput(
            role=role,
            content=message.content or "",
            attachments=refs,
            silent=message.silent,
            metadata=meta or None,
        )
        await kernel.store.enqueue(thread.thread_id, entry)
        kernel.scheduler.note_queued(thread.thread_id)


async def write_recorded_files(
    kernel: Kernel, thread_id: str, recorded: RecordedThread, paths: list[str]
) -> None:
    """Write the recorded files at ``paths`` into a replay thread (a message's attachments)."""
    for path in paths:
        data = recorded.files.get(path)
        if data is not None:
            meta = recorded.file_meta.get(path, {})
            await kernel.store.write_file(
                thread_id, path, data, meta.get("mime_type") or "application/octet-stream",
                metadata=meta.get("metadata"),
            )  # fmt: skip


def _missing(
    cursor: ThreadCursor,
    recorded: RecordedThread,
    expected: list[Message],
    entries: list[QueueEntry],
) -> None:
    if cursor.session.stopped:
        return
    origins = [(m.metadata or {}).get("subagent_id") for m in expected]
    children = [recorded.child_by_id(o) for o in origins if o]
    paths = ", ".join(c.path for c in children if c is not None)
    cursor.session.diverge(
        Divergence(
            "missing_child" if paths else "different_end_state",
            cursor.path,
            None,
            f"the recording has {len(expected)} queued message(s) here"
            + (f" from {paths}" if paths else "")
            + f"; after {cursor.session.wait_timeout:g}s the replay had {len(entries)}",
            unified(
                "\n".join(f"{m.role}: {m.content or ''}" for m in expected),
                "\n".join(f"{e.role}: {e.content}" for e in entries),
                "queued",
            ),
        )
    )


__all__ = [
    "apply_effects",
    "entries_to_drain",
    "recorded_result",
    "run_tool",
    "tool_mode",
    "write_recorded_files",
]
