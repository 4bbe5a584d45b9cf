"""``thread.fork(at=...)``: a new thread whose history is its source's up to a cut, then its own.

Nothing of the history is copied: the fork's row carries a timeline (its source's segments up
to the cut, then its own messages, :mod:`sa_core.store.timeline`). Its files and values are
those of the source at the cut, written as rows that point at the same stored contents; its
registry is the source's then (the entries created by the cut), each child forked in turn at the
same moment: a child that had settled (its thread terminated) by the cut keeps its status; one
running or resumable then is ``interrupted``, its calls without results answered as such, and
can be resumed in the fork. Everything commits in one
transaction; the source and its children are only read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sa_core.engine.events import TimelineFrame
from sa_core.engine.forkrefs import FORKED_FROM
from sa_core.engine.messages import new_id, new_message
from sa_core.engine.threads import ThreadRef
from sa_core.engine.timeline.cut import Cut, find_cut, unanswered_calls
from sa_core.engine.tools.tools import result_text
from sa_core.errors import SharedHistoryError
from sa_core.spec import Message, SubagentRegistryEntry, ToolResult
from sa_core.spec.lineage import LineageEntry
from sa_core.store import ThreadRow, now_us
from sa_core.store.timeline import Timeline

if TYPE_CHECKING:
    from sa_core.engine.kernel import Kernel
    from sa_core.store import Store, Transaction

INTERRUPTED = "interrupted"
"""Registry status of a forked child that was running, or resumable, at the cut."""
INTERRUPTED_CALL = (
    "Interrupted: the thread was forked while this call ran; its result is not known here."
)
"""Error result of a forked child's tool call that had no result at the cut."""


async def fork(kernel: Kernel, thread: ThreadRef, at: str | None) -> ThreadRef:
    """Fork a thread after message ``at`` (``None``: its latest), as a new top-level thread.

    Raises:
        CutPointError: ``at`` is not a quiescent message of the thread's history.
    """
    store = kernel.store
    cut = await find_cut(store, thread.thread_id, at)
    async with store.transaction() as tx:
        row = await fork_thread(store, thread.row, cut, None, tx)
    version = store.external_version()
    handle = kernel.threads.add(row, version)
    handle.children = await store.list_children(row.id)
    frame: TimelineFrame = {
        "type": "fork",
        "thread_id": thread.thread_id,
        "fork_id": row.id,
        "message_id": at,
        "cut_at": cut.at,
    }
    kernel.events.publish(thread.thread_id, frame)
    return ThreadRef(handle)


async def fork_thread(
    store: Store, source: ThreadRow, cut: Cut, parent_id: str | None, tx: Transaction
) -> ThreadRow:
    """Store the fork of ``source`` at ``cut`` (and of its children at the same moment)."""
    fork_id = new_id()
    row = ThreadRow(
        id=fork_id,
        package=source.package,
        agent_id=source.agent_id,
        created_at=now_us(),
        user_id=source.user_id,
        parent_id=parent_id,
        terminated=source.terminated if _ended_by(source.terminated, cut.at) else None,
        env=dict(source.env),
        env_types=dict(source.env_types),
        tags=list(source.tags),
        properties={**source.properties, FORKED_FROM: source.id},
        timeline=cut.view.forked(cut.at, fork_id).to_json(),
    )
    await store.create_thread(row, tx=tx)
    await store.restore_state(fork_id, cut.owner, cut.at, tx=tx)
    for entry in await store.registry_entries(cut.owner, tx=tx):
        created = int(entry.get("created_at") or 0)
        if created <= cut.at and cut.view.covers(created):
            await _fork_child(store, fork_id, entry, cut.at, tx)
    lineage = LineageEntry(
        id=new_id(),
        kind="fork",
        thread_id=fork_id,
        source_id=source.id,
        message_id=cut.message_id,
        created_at=row.created_at,
        data={"cut_at": cut.at, "owner": cut.owner},
    )
    await store.add_lineage(lineage, tx=tx)
    return row


def _ended_by(moment: int | None, at: int) -> bool:
    return moment is not None and moment <= at


async def _fork_child(
    store: Store, parent_id: str, entry: dict[str, Any], at: int, tx: Transaction
) -> None:
    """Fork the child an entry of the source's registry names, at moment ``at``."""
    child = await store.get_thread(str(entry.get("reference")), tx=tx)
    if child is None:
        return
    view = await store.thread_timeline(child.id, tx=tx)
    forked = await fork_thread(store, child, Cut(child.id, None, at, view), parent_id, tx)
    status = str(entry.get("status") or "terminated")  # what a child settles with stays
    if not _ended_by(child.terminated, at):  # running or resumable at the cut
        status = INTERRUPTED
        await _answer_open_calls(store, forked.id, view, at, tx)
    fields = dict(entry, reference=forked.id, status=status)
    await store.upsert_child(parent_id, SubagentRegistryEntry.model_validate(fields), tx=tx)


async def _answer_open_calls(
    store: Store, thread_id: str, view: Timeline, at: int, tx: Transaction
) -> None:
    """Give a forked child's calls that had no result at the cut an ``interrupted`` result."""
    calls = await unanswered_calls(store, view, at)
    content = result_text(ToolResult(status="error", error=INTERRUPTED_CALL))
    rows = [
        new_message(
            thread_id,
            "tool",
            content,
            name=call.function.name,
            tool_call_id=call.id,
            tool_status="error",
            metadata={"error_code": "interrupted_by_fork", "error_data": None},
        )
        for call in calls
    ]
    if rows:
        await store.insert_messages(rows, tx=tx)


async def check_changeable(store: Store, thread_id: str, message: Message) -> None:
    """Refuse a change of a message that a fork shares (``update_message``, ``delete_message``).

    Raises:
        SharedHistoryError: The message is the fork's source's, or a fork of this thread has it.
    """
    if message.thread_id is not None and message.thread_id != thread_id:
        raise SharedHistoryError(
            thread_id,
            f"Cannot change message {message.id} in thread {thread_id}: it belongs to thread "
            f"{message.thread_id}, which the thread was forked from.",
        )
    await store.check_unshared(thread_id, message.id, message.created_at)
