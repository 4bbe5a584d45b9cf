"""The event bus: live frames for a thread's subscribers (SSE, WebSocket, tests).

Frames are plain dicts with a ``type``: ``message_data`` (a stored message, created or updated),
``message_chunk`` / ``reasoning_chunk`` (streamed deltas), ``event`` (``state.emit``,
``tool_call_started``, ``tool_call_done``). A child thread's frames are also delivered to its
ancestors with ``subagent_id`` set. Publishing with no subscribers costs one dict lookup.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

Frame = dict[str, Any]


class EventBus:
    """Fan-out of frames to per-thread subscriber queues."""

    def __init__(self) -> None:
        self._subscribers: dict[str, set[asyncio.Queue[Frame]]] = {}
        self.parent_of: Callable[[str], str | None] = lambda _thread_id: None

    @property
    def has_listeners(self) -> bool:
        """Whether anyone is subscribed at all (lets publishers skip building frames)."""
        return bool(self._subscribers)

    def publish(self, thread_id: str, frame: Frame) -> None:
        """Deliver a frame to the thread's subscribers, and its ancestors' (tagged)."""
        queues = self._subscribers.get(thread_id)
        if queues:
            for queue in queues:
                queue.put_nowait(frame)
        if not self._subscribers:
            return
        child = thread_id
        parent = self.parent_of(child)
        hops = 0
        while parent is not None and hops < 16:
            parent_queues = self._subscribers.get(parent)
            if parent_queues:
                tagged = {**frame, "subagent_id": frame.get("subagent_id") or child}
                for queue in parent_queues:
                    queue.put_nowait(tagged)
            child, parent = parent, self.parent_of(parent)
            hops += 1

    @asynccontextmanager
    async def subscribe(self, thread_id: str) -> AsyncIterator[asyncio.Queue[Frame]]:
        """Receive the thread's frames while the context is open."""
        queue: asyncio.Queue[Frame] = asyncio.Queue()
        self._subscribers.setdefault(thread_id, set()).add(queue)
        try:
            yield queue
        finally:
            subscribers = self._subscribers.get(thread_id)
            if subscribers is not None:
                subscribers.discard(queue)
                if not subscribers:
                    del self._subscribers[thread_id]
