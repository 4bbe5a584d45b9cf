"""Which tasks are background work, so that an event loop may run them after requests.

A thread's turns (its runner task), the runtime's background tasks and due effects run in a
context where :data:`BACKGROUND` is true; so does every task they start. Any event loop runs
them as usual; ``sa serve``'s :class:`~sa_core.server.eventloop.ResponsiveEventLoop` runs them
in time slices after the work of requests and streams, so that a busy server still answers a
request, and sends a thread's frames, within a few milliseconds; and the store's write lock
lets a request's transaction go before theirs (:mod:`sa_core.store.prioritylock`).
"""

from __future__ import annotations

from contextvars import Context

from sa_core.store.ambient import detached_context
from sa_core.store.prioritylock import BACKGROUND

__all__ = ["BACKGROUND", "background_context"]


def background_context() -> Context:
    """A context for a background task: no open store transaction, :data:`BACKGROUND` set."""
    context = detached_context()
    context.run(BACKGROUND.set, True)
    return context
