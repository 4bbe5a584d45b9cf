"""Where a fork or a rewind cuts a thread's history, and whether it may cut there.

A cut is a message of the thread's history (or of a range a rewind took back: rewinding to a
later message of it undoes that rewind) at a quiescent point: after a user message, an answer
without tool calls, or the last result of a tool round. The files, values and registry after
the message are those of the thread that stored it, as they were when it was stored
(:meth:`~sa_core.store.timeline.Timeline.owner_at`).

A child of a forked thread is cut at a moment instead of a message, wherever it stood then:
its tool calls without results at that moment are :func:`unanswered_calls`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sa_core.errors import CutPointError
from sa_core.store import now_us
from sa_core.store.timeline import Timeline

if TYPE_CHECKING:
    from sa_core.spec import Message, ToolCall
    from sa_core.store import Store

TAIL_PAGE = 20
"""Messages read per page when walking back from a cut to the start of its tool round."""


@dataclass(frozen=True, slots=True)
class Cut:
    """A point in a thread's history.

    Attributes:
        thread_id: The thread cut.
        message_id: The message cut after (``None``: the history's end, now).
        at: The moment (µs): the message's creation time, or now.
        view: The history the message is in (the thread's own, or one a rewind replaced).
        owner: The thread whose state at ``at`` is the history's then.
    """

    thread_id: str
    message_id: str | None
    at: int
    view: Timeline

    @property
    def owner(self) -> str:
        """The thread whose files, values and registry at :attr:`at` are the cut's."""
        return self.view.owner_at(self.at)


async def find_cut(store: Store, thread_id: str, message_id: str | None) -> Cut:
    """The quiescent cut of a thread after ``message_id`` (``None``: its latest message).

    Raises:
        CutPointError: No such message in the thread's history, or not a quiescent point.
    """
    timeline = await store.thread_timeline(thread_id)
    if message_id is None:
        tail = await store.view_tail(timeline.segments, limit=1)
        if tail:
            await _check_quiescent(store, thread_id, timeline, tail[0])
        return Cut(thread_id, None, now_us(), timeline)
    message = await store.get_message(thread_id, message_id)
    if message is None or message.thread_id is None:
        raise CutPointError(thread_id, message_id, "the thread's history has no such message.")
    view = await _view_holding(store, thread_id, timeline, message)
    await _check_quiescent(store, thread_id, view, message)
    return Cut(thread_id, message_id, message.created_at, view)


async def _view_holding(
    store: Store, thread_id: str, timeline: Timeline, message: Message
) -> Timeline:
    """The history ``message`` is in: the current one, else the newest one a rewind replaced."""
    owner = message.thread_id or thread_id
    if timeline.holds(owner, message.created_at):
        return timeline
    for entry in reversed(await store.list_lineage(thread_id)):
        before = entry.data.get("before")
        if entry.kind == "rewind" and entry.thread_id == thread_id and before is not None:
            view = Timeline.of(thread_id, before)
            if view.holds(owner, message.created_at):
                return view
    raise CutPointError(thread_id, message.id, "the message is not in the thread's history.")


async def _check_quiescent(store: Store, thread_id: str, view: Timeline, message: Message) -> None:
    """Refuse a cut after ``message`` unless the thread was quiescent there."""
    if message.depth != 0 or message.parent_id is not None:
        reason = "it is a message inside a subprompt's run."
    elif message.status == "pending":
        reason = "the model was still answering it."
    elif message.role == "assistant" and message.tool_calls:
        reason = "its tool calls have no results yet (cut after the round's last result)."
    elif message.role in ("user", "assistant"):
        return
    else:
        open_calls = await unanswered_calls(store, view, message.created_at)
        if not open_calls:
            return
        names = ", ".join(call.function.name for call in open_calls)
        reason = f"the tool round is not over: {names} had no result yet."
    raise CutPointError(thread_id, message.id, reason)


async def unanswered_calls(store: Store, view: Timeline, at: int) -> list[ToolCall]:
    """The calls of the last tool round up to ``at`` (µs) that had no result by then."""
    segments = view.up_to(at)
    answered: set[str] = set()
    offset = 0
    while True:
        page = await store.view_tail(segments, limit=TAIL_PAGE, offset=offset)
        for message in page:
            if message.role == "tool" and message.tool_call_id:
                answered.add(message.tool_call_id)
            elif message.role == "assistant" and message.tool_calls:
                if message.status == "pending":
                    continue  # a model call in flight: it never reached the history
                return [call for call in message.tool_calls if call.id not in answered]
            elif message.role in ("user", "assistant"):
                return []
        if len(page) < TAIL_PAGE:
            return []
        offset += TAIL_PAGE
