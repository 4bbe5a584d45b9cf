"""The event bus: live frames for a thread's subscribers (SSE, WebSocket, tests).

A frame is one of the typed dicts below (:data:`Frame`), told apart by ``type``:
``message_data`` (a stored message, created or updated), ``message_chunk`` /
``reasoning_chunk`` (streamed deltas), ``output_chunk`` (a structured answer, parsed so far),
``event`` (``state.emit``, ``tool_call_started``, ``tool_call_done``), ``queued`` (a queue
entry), ``value`` (a thread value set through ``state.set_value``), ``fork`` and ``rewind``
(:mod:`sa_core.engine.timeline.fork`, :mod:`sa_core.engine.timeline.rewind`). A child thread's
frames are also delivered to its ancestors with ``subagent_id`` set. Publishing with no subscribers
costs one dict lookup. Subscribers receive the frames as published (:data:`Delivered`: a
:data:`Frame`, or :data:`OVERFLOW`), plain dicts ready to encode; an ancestor receives a tagged
copy, so the frame a thread's own subscribers hold is never changed.

A subscription may bound its backlog (``max_backlog``): a subscriber that falls that many
frames behind is dropped at once, its queued frames are released and it receives
:data:`OVERFLOW` as its last frame, so a client that stops reading holds a bounded amount of
memory however long the thread keeps publishing.

A subscriber that wakes its reader with items of its own (a heartbeat, a close) subscribes a
queue of its own that holds them too (:meth:`EventBus.subscribe_into`); the bus only puts
:data:`Delivered` frames into it (:class:`Inbox`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Literal, Protocol, TypedDict, TypeVar


class _Relayed(TypedDict, total=False):
    subagent_id: str
    """Set on the copies an ancestor's subscribers receive: the thread it came from."""


class MessageDataFrame(_Relayed):
    """A message as stored (created or updated)."""

    type: Literal["message_data"]
    message_id: str
    depth: int
    data: dict[str, Any]


class ChunkFrame(_Relayed):
    """A streamed delta of a model answer (content or reasoning)."""

    type: Literal["message_chunk", "reasoning_chunk"]
    message_id: str | None
    depth: int
    chunk: str


class OutputFrame(_Relayed):
    """The structured answer streamed so far, parsed as far as it goes (``output_schema``)."""

    type: Literal["output_chunk"]
    message_id: str | None
    depth: int
    output: Any


class EventFrame(_Relayed):
    """A custom or tool event (``state.emit``, ``tool_call_started``, ``tool_call_done``)."""

    type: Literal["event"]
    eventType: str
    data: Any
    timestamp: int


class QueuedFrame(_Relayed):
    """A message queued for the thread's next step."""

    type: Literal["queued"]
    queue_id: str
    role: str
    silent: bool


class ValueFrame(_Relayed):
    """A thread value set through ``state.set_value`` (secret values redacted)."""

    type: Literal["value"]
    key: str
    value: Any


class TimelineFrame(_Relayed, total=False):
    """A fork made from the thread (``fork``), or the thread rewound (``rewind``).

    ``fork``: ``fork_id`` is the new thread, ``message_id`` the message of the cut (``None``:
    the latest). ``rewind``: ``message_id`` is the message the thread went back to,
    ``rewound`` how many messages left the history, ``lineage_id`` the rewind's record.
    """

    type: Literal["fork", "rewind"]
    thread_id: str
    fork_id: str
    message_id: str | None
    cut_at: int
    rewound: int
    lineage_id: str


class OverflowFrame(TypedDict):
    """The last frame of a subscriber dropped for falling ``max_backlog`` frames behind."""

    type: Literal["overflow"]


Frame = (
    MessageDataFrame
    | ChunkFrame
    | OutputFrame
    | EventFrame
    | QueuedFrame
    | ValueFrame
    | TimelineFrame
)
"""Every frame the engine publishes."""
Delivered = Frame | OverflowFrame
"""What a subscriber receives: the published frames, then perhaps :data:`OVERFLOW`."""
OVERFLOW: OverflowFrame = {"type": "overflow"}
"""The one :class:`OverflowFrame` (subscribers may test for it with ``is``)."""


class Inbox(Protocol):
    """A subscriber's queue as the bus uses it: any ``asyncio.Queue`` that holds :data:`Delivered`.

    The bus puts frames in, and empties the queue when it drops the subscriber.
    """

    def put_nowait(self, item: Delivered, /) -> None:
        """Queue a frame."""

    def qsize(self) -> int:
        """How many items wait."""

    def empty(self) -> bool:
        """Whether nothing waits."""

    def get_nowait(self) -> object:
        """Take the next item (the bus discards what it takes)."""


InboxT = TypeVar("InboxT", bound=Inbox)


ParentOf = Callable[[str], str | None]
"""A thread's parent id (``None``: a top-level thread), as the live threads know it."""


def _no_parent(_thread_id: str) -> str | None:
    return None


class EventBus:
    """Fan-out of frames to per-thread subscriber queues."""

    def __init__(self, parent_of: ParentOf | None = None) -> None:
        self._subscribers: dict[str, set[Inbox]] = {}
        self._limits: dict[Inbox, int] = {}
        self.has_listeners = False
        """Whether anyone is subscribed at all (lets publishers skip building frames).

        An attribute kept with the subscriptions, not a property: publishers ask it several
        times per model step.
        """
        self.parent_of: ParentOf = parent_of or _no_parent
        """A thread's parent, for the frames its ancestors also receive (the live threads')."""

    def _listening(self) -> bool:
        """Whether a frame published now may reach anyone (kept in :attr:`has_listeners`)."""
        return bool(self._subscribers)

    def subscriber_count(self, thread_id: str | None = None) -> int:
        """Open subscriptions of a thread (of every thread without an id)."""
        if thread_id is not None:
            return len(self._subscribers.get(thread_id, ()))
        return sum(len(queues) for queues in self._subscribers.values())

    @property
    def thread_count(self) -> int:
        """Threads with at least one open subscription (entries the bus holds)."""
        return len(self._subscribers)

    def publish(self, thread_id: str, frame: Frame) -> None:
        """Deliver a frame to the thread's subscribers, and a tagged copy to its ancestors'."""
        if not self._subscribers:
            return
        self._deliver(thread_id, frame)
        child = thread_id
        parent = self.parent_of(child)
        hops = 0
        while parent is not None and hops < 16:
            self._deliver_tagged(parent, child, frame)
            child, parent = parent, self.parent_of(parent)
            hops += 1

    def _deliver(self, thread_id: str, frame: Frame) -> None:
        """Put a frame in each subscriber queue of one thread (within its backlog bound)."""
        queues = self._subscribers.get(thread_id)
        if queues:
            for queue in list(queues):
                self._put(thread_id, queue, frame)

    def _deliver_tagged(self, ancestor: str, child: str, frame: Frame) -> None:
        """Deliver to an ancestor's subscribers a copy tagged with the child it came through."""
        queues = self._subscribers.get(ancestor)
        if queues:
            tagged = frame.copy()
            tagged["subagent_id"] = frame.get("subagent_id") or child
            for queue in list(queues):
                self._put(ancestor, queue, tagged)

    def _put(self, thread_id: str, queue: Inbox, frame: Frame) -> None:
        limit = self._limits.get(queue)
        if limit is not None and queue.qsize() >= limit:
            self._drop(thread_id, queue)
            while not queue.empty():
                queue.get_nowait()
            queue.put_nowait(OVERFLOW)
            return
        queue.put_nowait(frame)

    def _drop(self, thread_id: str, queue: Inbox) -> None:
        self._limits.pop(queue, None)
        subscribers = self._subscribers.get(thread_id)
        if subscribers is not None:
            subscribers.discard(queue)
            if not subscribers:
                del self._subscribers[thread_id]
                self.has_listeners = self._listening()

    def subscribe(
        self, thread_id: str, *, max_backlog: int | None = None
    ) -> AbstractAsyncContextManager[asyncio.Queue[Delivered]]:
        """Receive the thread's frames in a new queue while the context is open.

        Args:
            thread_id: the thread whose frames (and its descendants' frames) to receive.
            max_backlog: drop the subscription once this many frames wait unread: the queued
                frames are released and :data:`OVERFLOW` is the last frame. ``None``: no bound.

        Raises:
            ValueError: ``max_backlog`` is below 1 (on entering the context).
        """
        queue: asyncio.Queue[Delivered] = asyncio.Queue()
        return self.subscribe_into(thread_id, queue, max_backlog=max_backlog)

    @asynccontextmanager
    async def subscribe_into(
        self, thread_id: str, queue: InboxT, *, max_backlog: int | None = None
    ) -> AsyncIterator[InboxT]:
        """Receive the thread's frames in ``queue`` while the context is open.

        For a subscriber that puts items of its own into its queue too (a heartbeat, a close):
        its queue's type says so, ``asyncio.Queue[Delivered | Own]``, and the bus puts only
        :data:`Delivered` into it.

        Args:
            thread_id: the thread whose frames (and its descendants' frames) to receive.
            queue: an empty queue, subscribed to no other thread.
            max_backlog: as for :meth:`subscribe` (items of the subscriber's own count too).

        Raises:
            ValueError: ``max_backlog`` is below 1.
        """
        if max_backlog is not None and max_backlog < 1:
            raise ValueError(f"max_backlog must be a whole number >= 1 or None, got {max_backlog}.")
        self._subscribers.setdefault(thread_id, set()).add(queue)
        self.has_listeners = True
        if max_backlog is not None:
            self._limits[queue] = max_backlog
        try:
            yield queue
        finally:
            self._drop(thread_id, queue)
