"""Frames user code publishes on a thread: custom events and values, secrets scrubbed.

``state.emit(event, data)`` sends an ``event`` frame (:func:`emit`), ``state.set_value``
a ``value`` frame (:func:`publish_value`); both pass through
:func:`sa_core.engine.scrub.scrub_payload` first. Nothing is built when no one listens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic_core import to_jsonable_python

from sa_core.engine.scrub import scrub_payload
from sa_core.store.clock import now_us

if TYPE_CHECKING:
    from sa_core.engine.events import EventFrame, ValueFrame
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.threads import ThreadRef


def emit(kernel: Kernel, thread: ThreadRef, event: str, data: Any = None) -> None:
    """Send a custom event to the thread's live subscribers (secret values redacted)."""
    events = kernel.events
    if not events.has_listeners:
        return
    frame: EventFrame = {
        "type": "event",
        "eventType": event,
        "data": scrub_payload(kernel, thread, data),
        "timestamp": now_us(),
    }
    events.publish(thread.thread_id, frame)


def publish_value(kernel: Kernel, thread: ThreadRef, key: str, value: Any) -> None:
    """Tell the thread's live subscribers that value ``key`` is now ``value`` (secrets redacted)."""
    events = kernel.events
    if not events.has_listeners:
        return
    frame: ValueFrame = {
        "type": "value",
        "key": key,
        "value": scrub_payload(kernel, thread, to_jsonable_python(value, fallback=str)),
    }
    events.publish(thread.thread_id, frame)
