"""Streams across workers: every frame a worker publishes reaches every other worker's bus.

Workers sharing a PostgreSQL database relay frames with ``LISTEN``/``NOTIFY`` on the
``sa_stream`` channel; no broker is needed. A frame travels as a note, JSON
``{"t": thread, "a": [ancestors], "f": frame}``. The frames that waited while the previous
notifications went out are packed into as few notifications as fit, each ``<worker id>|``
followed by JSON ``{"n": number, "b": [note, ...]}`` (a worker skips its own by the prefix,
without decoding them). One notification per frame cost every worker a database statement, a
wake-up and a decode per frame; a turn streams half a dozen frames. ``n`` counts this worker's
notifications: PostgreSQL delivers identical payloads sent in one transaction only once, and no
two of ours are identical. A lone note without ``b`` (an earlier version's format) is still
read. Frames are relayed only while another worker is alive (:attr:`RelayBus.peers`), so a
lone worker pays nothing. NOTIFY payloads are limited to 8000 bytes, so a larger frame is
written to ``stream_frames`` and its note carries only the row number (``"s"``); receivers fetch
it. Frames are sent by one task per worker, in publish order, and received in order by one task.
The ancestors travel with the frame, so a client on another worker watching a parent thread
receives its child threads' frames (tagged ``subagent_id``) just as locally.

Frames are typed (:data:`~sa_core.engine.events.Frame`) on both sides; the one place untyped
JSON becomes a frame is :func:`as_frame`, which every frame read back from a notification or
from ``stream_frames`` passes (it checks the ``type`` tag, as the other workers run this code).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeGuard, get_args, get_type_hints

from sqlalchemy.engine import make_url

from sa_core.engine.events import EventBus, Frame, ParentOf

STREAM_CHANNEL = "sa_stream"
MAX_NOTIFY_BYTES = 7000
"""Payloads above this go through ``stream_frames`` (PostgreSQL's limit is 8000 bytes)."""
FRAME_RETENTION_US = 60 * 1_000_000
"""Relayed large frames are deleted after a minute."""

FRAME_TYPES = frozenset(
    tag for kind in get_args(Frame) for tag in get_args(get_type_hints(kind)["type"])
)
"""The ``type`` tags of :data:`~sa_core.engine.events.Frame`."""

log = logging.getLogger("sa_core.relay")


def as_frame(value: object) -> TypeGuard[Frame]:
    """Whether JSON read back from another worker is a frame (the one place it becomes one).

    Only the ``type`` tag is checked: the frame was published, typed, by this same code on the
    other worker and went through JSON unchanged (values JSON cannot hold became strings).
    """
    return isinstance(value, dict) and value.get("type") in FRAME_TYPES


def asyncpg_dsn(url: str) -> str:
    """The plain ``postgresql://`` DSN asyncpg accepts, from a SQLAlchemy URL."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


class RelayBus(EventBus):
    """An :class:`EventBus` whose frames also reach the buses of the other workers.

    Args:
        worker_id: This worker's id (its own notifications are ignored).
        send: Coroutine function sending a batch of ``(channel, payload)`` notifications.
        store_frame: Coroutine function storing a large frame; returns its row number.
        fetch_frame: Coroutine function reading a stored frame back (``None``: pruned).
        parent_of: A thread's parent (see :class:`~sa_core.engine.events.EventBus`).

    """

    def __init__(
        self,
        worker_id: str,
        send: Callable[[list[tuple[str, str]]], Awaitable[object]],
        store_frame: Callable[[str, Frame], Awaitable[int]],
        fetch_frame: Callable[[int], Awaitable[object]],
        parent_of: ParentOf | None = None,
    ) -> None:
        super().__init__(parent_of)
        self.worker_id = worker_id
        self._send = send
        self._store_frame = store_frame
        self._fetch_frame = fetch_frame
        self._outbox: asyncio.Queue[tuple[str, list[str], Frame]] = asyncio.Queue()
        self._inbox: asyncio.Queue[str] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self.relayed = 0
        """Frames sent to other workers (for tests and benchmarks)."""
        self._peers = False
        self._prefix = f"{worker_id}|"
        self._sent = 0

    @property
    def peers(self) -> bool:
        """Whether another worker is alive (set by the heartbeat and by workers' greetings)."""
        return self._peers

    @peers.setter
    def peers(self, alive: bool) -> None:
        self._peers = alive
        self.has_listeners = self._listening()

    def _listening(self) -> bool:
        """Whether anyone may be watching: a local subscriber, or any other worker."""
        return self._peers or bool(self._subscribers)

    def start(self) -> None:
        """Start the sending and receiving tasks."""
        self._tasks = [
            asyncio.create_task(self._sender(), name="sa-relay-send"),
            asyncio.create_task(self._receiver(), name="sa-relay-receive"),
        ]

    async def stop(self) -> None:
        """Send what is queued (briefly), then stop both tasks."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(2):
                await self._outbox.join()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    def publish(self, thread_id: str, frame: Frame) -> None:
        """Deliver locally and queue the frame for the other workers."""
        super().publish(thread_id, frame)
        if self._peers and self._tasks:
            self._outbox.put_nowait((thread_id, self._ancestors(thread_id), frame))

    def _ancestors(self, thread_id: str) -> list[str]:
        chain: list[str] = []
        parent = self.parent_of(thread_id)
        while parent is not None and len(chain) < 16:
            chain.append(parent)
            parent = self.parent_of(parent)
        return chain

    def on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        """Queue another worker's frame for the receiving task (the asyncpg listener callback)."""
        if not payload.startswith(self._prefix):
            self._inbox.put_nowait(payload)

    def deliver(self, thread_id: str, frame: Frame, ancestors: list[str]) -> None:
        """Hand a frame from another worker to this worker's subscribers (and ancestors').

        As for a frame published here, a subscriber's ``max_backlog`` bounds what waits for it.
        """
        self._deliver(thread_id, frame)
        child = thread_id
        for parent in ancestors:
            self._deliver_tagged(parent, child, frame)
            child = parent

    async def _sender(self) -> None:
        while True:
            batch = [await self._outbox.get()]
            while not self._outbox.empty() and len(batch) < 500:
                batch.append(self._outbox.get_nowait())
            try:
                notes = []
                for thread_id, ancestors, frame in batch:
                    body: dict[str, Any] = {"t": thread_id, "a": ancestors}
                    note = json.dumps({**body, "f": frame}, separators=(",", ":"), default=str)
                    if len(note) > MAX_NOTIFY_BYTES:  # ASCII: json.dumps escapes the rest
                        body["s"] = await self._store_frame(thread_id, frame)
                        note = json.dumps(body, separators=(",", ":"))
                    notes.append(note)
                await self._send([(STREAM_CHANNEL, payload) for payload in self._pack(notes)])
                self.relayed += len(notes)
            except asyncio.CancelledError:
                raise
            except Exception:  # a lost database connection must not end the stream task
                log.exception("relaying %d stream frames failed", len(batch))
            finally:
                for _ in batch:
                    self._outbox.task_done()

    async def _receiver(self) -> None:
        while True:
            payload = await self._inbox.get()
            try:
                packed = json.loads(payload.partition("|")[2])
                for note in packed.get("b") or [packed]:
                    await self._receive(note)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("relayed stream frames could not be delivered")

    async def _receive(self, note: dict[str, Any]) -> None:
        frame = note.get("f")
        if frame is None and "s" in note:
            frame = await self._fetch_frame(int(note["s"]))
        if as_frame(frame):
            self.deliver(str(note["t"]), frame, list(note.get("a") or []))

    def _pack(self, notes: list[str]) -> list[str]:
        """Notification payloads carrying ``notes`` in order, each within the size limit."""
        payloads: list[str] = []
        start = size = 0
        for index, note in enumerate(notes):
            if index > start and size + len(note) > MAX_NOTIFY_BYTES:
                payloads.append(self._payload(notes[start:index]))
                start, size = index, 0
            size += len(note) + 1
        if start < len(notes):
            payloads.append(self._payload(notes[start:]))
        return payloads

    def _payload(self, notes: list[str]) -> str:
        self._sent += 1
        return f'{self._prefix}{{"n":{self._sent},"b":[{",".join(notes)}]}}'
