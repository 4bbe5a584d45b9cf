"""``thread.rewind(to=...)``: roll a thread back in place to a message of its history.

Nothing is deleted. The thread's timeline (:mod:`sa_core.store.timeline`) leaves out the
messages after the cut, so no later context shows them (``get_messages(include_rewound=True)``
still does); its files and values return to what they were after the message (new version
rows, the old ones kept); registry entries of children created after it are hidden, their
threads stopped; queue entries and pending effects from after it are cancelled. One
transaction writes all of it, with the rewind's lineage record (which keeps the timeline
before, so that rewinding to a later message of the range undoes the rewind). Refused while a
turn runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sa_core.engine.delivery import delivery
from sa_core.engine.events import TimelineFrame
from sa_core.engine.messages import new_id
from sa_core.engine.model.context import forget_converted
from sa_core.engine.model.pastcontext import forget_filtered
from sa_core.engine.timeline.cut import Cut, find_cut
from sa_core.engine.tools import approvals
from sa_core.errors import ThreadBusyError
from sa_core.spec.lineage import LineageEntry
from sa_core.store import now_us
from sa_core.store.timeline import Timeline, intersection, merged

if TYPE_CHECKING:
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.threads import ThreadRef
    from sa_core.spec import Message
    from sa_core.store import Store, Transaction

STOP_REASON = "rewound"
"""Stop reason of a child a rewind stopped (it was created after the cut)."""


async def rewind(kernel: Kernel, thread: ThreadRef, to: str) -> LineageEntry:
    """Rewind a thread to message ``to``; returns the rewind's lineage record.

    Raises:
        ThreadBusyError: A turn runs on the thread.
        CutPointError: ``to`` is not a quiescent message of the thread's history (or of a
            range an earlier rewind took back).
    """
    store, thread_id = kernel.store, thread.thread_id
    await _refuse_busy(kernel, thread_id)
    if await approvals.list_pending(kernel, thread_id):
        await approvals.cancel_pending(kernel, thread, "stopped")  # the normal stop path
    cut = await find_cut(store, thread_id, to)
    current = await store.thread_timeline(thread_id)
    after = cut.view.continued(cut.at, thread_id, now_us())
    after = Timeline(after.segments, merged((*current.seen, *after.segments)))
    kept = intersection(current.segments, after.segments)
    rewound = await store.count_messages(current.segments) - await store.count_messages(kept)
    entry = LineageEntry(
        id=new_id(),
        kind="rewind",
        thread_id=thread_id,
        message_id=to,
        created_at=now_us(),
        data={"cut_at": cut.at, "rewound": rewound, "before": current.to_json()},
    )
    async with store.transaction() as tx:
        await _refuse_busy(kernel, thread_id, tx)
        await store.set_timeline(thread_id, after, tx=tx)
        entry.data["changed"] = await store.restore_state(thread_id, cut.owner, cut.at, tx=tx)
        hidden = await _hide_children(store, thread_id, after, entry.id, tx)
        queued, effects = await store.cancel_after(thread_id, cut.at, tx=tx)
        entry.data.update(
            after=after.to_json(), hidden=hidden, cancelled_queue=queued, cancelled_effects=effects
        )
        await store.add_lineage(entry, tx=tx)
    await _settle_in_process(kernel, thread, after, hidden)
    _publish(kernel, thread_id, cut, entry)
    return entry


async def _refuse_busy(kernel: Kernel, thread_id: str, tx: Transaction | None = None) -> None:
    """Raise :class:`ThreadBusyError` while the thread runs or owes a turn."""
    record = await kernel.store.get_execution(thread_id, tx=tx)
    if kernel.scheduler.is_running(thread_id) or (
        record is not None and record.status in ("owed", "running")
    ):
        raise ThreadBusyError(thread_id, "rewind")


async def _hide_children(
    store: Store, thread_id: str, after: Timeline, rewind_id: str, tx: Transaction
) -> list[str]:
    """Hide the registry entries created outside the new history, show those back in it.

    Returns:
        The children hidden by this rewind (their threads are stopped once it commits).
    """
    changes: dict[str, str | None] = {}
    hidden = []
    for reference, created_at, hidden_by in await store.registry_rows(thread_id, tx=tx):
        visible = after.covers(created_at)
        if visible and hidden_by is not None:
            changes[reference] = None
        elif not visible and hidden_by is None:
            changes[reference] = rewind_id
            hidden.append(reference)
    if changes:
        await store.set_hidden(thread_id, changes, tx=tx)
    for child_id in hidden:  # a restart resumes none of them
        await store.update_thread(child_id, stopped=True, tx=tx)
        await store.finish_execution(child_id, STOP_REASON, tx=tx)
    return hidden


async def _settle_in_process(
    kernel: Kernel, thread: ThreadRef, after: Timeline, hidden: list[str]
) -> None:
    """After the commit: the live handle, this process's caches, and the hidden children."""
    store, thread_id = kernel.store, thread.thread_id
    thread.row.timeline = after.to_json()
    thread.shared.children = await store.list_children(thread_id)
    forget_filtered(thread_id)
    forget_converted(thread_id)
    approvals.mark_no_pending(kernel, thread_id)  # a quiescent cut has none
    for child_id in hidden:
        for stopped in [child_id, *await store.descendant_ids(child_id)]:
            await delivery.stop(kernel, stopped)


def _publish(kernel: Kernel, thread_id: str, cut: Cut, entry: LineageEntry) -> None:
    frame: TimelineFrame = {
        "type": "rewind",
        "thread_id": thread_id,
        "message_id": cut.message_id,
        "cut_at": cut.at,
        "rewound": int(entry.data["rewound"]),
        "lineage_id": entry.id,
    }
    kernel.events.publish(thread_id, frame)


async def mark_rewound(store: Store, thread_id: str, page: list[Message]) -> list[Message]:
    """``page`` with each message a rewind took out carrying that rewind in ``metadata.rewound``.

    The rewind named is the newest that removed the message from the history (``id``, the
    message it went back ``to``, and ``at``, when).
    """
    timeline = await store.thread_timeline(thread_id)
    out = []
    rewinds: list[LineageEntry] | None = None
    for message in page:
        owner = message.thread_id or thread_id
        if timeline.holds(owner, message.created_at):
            out.append(message)
            continue
        if rewinds is None:
            found = await store.list_lineage(thread_id)
            rewinds = [e for e in found if e.kind == "rewind" and e.thread_id == thread_id]
        record = _rewind_of(rewinds, owner, message.created_at)
        metadata = dict(message.metadata or {})
        metadata["rewound"] = record
        out.append(message.model_copy(update={"metadata": metadata}))
    return out


def _rewind_of(rewinds: list[LineageEntry], owner: str, created_at: int) -> dict[str, Any]:
    for entry in reversed(rewinds):
        before = Timeline.of(owner, entry.data.get("before"))
        after = Timeline.of(owner, entry.data.get("after"))
        if before.holds(owner, created_at) and not after.holds(owner, created_at):
            return {"id": entry.id, "to": entry.message_id, "at": entry.created_at}
    return {"id": None, "to": None, "at": None}
