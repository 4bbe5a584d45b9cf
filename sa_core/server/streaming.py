"""Live frames over server-sent events and WebSocket: the same frames on both.

A stream subscribes to the runtime's event bus for one thread. Frames (JSON objects with a
``type``): ``connected`` (first, once subscribed), ``message_data`` (a stored message, created
or updated), ``message_chunk`` / ``reasoning_chunk`` (deltas as they stream), ``event``
(``tool_call_started``, ``tool_call_done`` and ``state.emit`` events), ``queued``, ``value``
(a thread value set through ``state.set_value``); frames of
child threads carry ``subagent_id``. Silent messages are left out unless ``include_silent``.
A client too slow to keep up (``MAX_BACKLOG`` frames behind) is dropped by the event bus at
once, so its unread frames are released while it is still blocked; it then gets an ``error``
frame (``slow_consumer``) and the stream ends (a WebSocket is closed).

Frames are typed up to the encoder: the engine's (:data:`~sa_core.engine.events.Frame`) and the
server's own (:class:`ConnectedFrame`, :class:`ErrorFrame`), together :data:`StreamFrame`. A
stream's queue also holds the server's control items, :class:`Signal` (a heartbeat, the end),
which are never sent.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypedDict

import msgspec
from litestar import Controller, WebSocket, get, websocket
from litestar.di import NamedDependency
from litestar.exceptions import NotAuthorizedException, WebSocketDisconnect
from litestar.params import FromPath, FromQuery, SkipValidation
from litestar.response import ServerSentEvent, ServerSentEventMessage

from sa_core.engine.events import Delivered, Frame
from sa_core.runtime import Runtime
from sa_core.server.auth import PUBLIC, QUERY_TOKEN, authorize, check_key
from sa_core.server.context import PackDep, RuntimeDep, ThreadDep, load_thread
from sa_core.server.errors import ApiError, errors

HEARTBEAT_SECONDS = 15.0
MAX_BACKLOG = 10_000


class ConnectedFrame(TypedDict):
    """The first frame of a stream, once it is subscribed."""

    type: Literal["connected"]
    thread_id: str


class ErrorFrame(TypedDict):
    """The last frame of a stream whose client fell ``MAX_BACKLOG`` frames behind."""

    type: Literal["error"]
    error: Literal["slow_consumer"]
    detail: str


StreamFrame = Frame | ConnectedFrame | ErrorFrame
"""Every frame a stream sends (what :func:`encode` takes)."""


class Signal(enum.Enum):
    """The server's own items in a stream's queue, never sent."""

    PING = "ping"
    """Time for a heartbeat."""
    CLOSE = "close"
    """End the stream after the frames queued before it."""


_PING: Final = Signal.PING
_CLOSE: Final = Signal.CLOSE
Queued = Delivered | Signal
"""What a stream's queue holds: the event bus's frames and the server's signals."""


class StreamHub:
    """The open streams of an app, so shutdown can end them at once."""

    def __init__(self) -> None:
        self._queues: set[asyncio.Queue[Queued]] = set()

    def __len__(self) -> int:
        return len(self._queues)

    def close_all(self) -> None:
        """End every open stream (called before the server drains connections)."""
        for queue in list(self._queues):
            queue.put_nowait(_CLOSE)

    @asynccontextmanager
    async def listen(self, runtime: Runtime, thread_id: str) -> AsyncIterator[LiveStream]:
        """Subscribe to a thread's frames while the context is open."""
        queue: asyncio.Queue[Queued] = asyncio.Queue()
        async with runtime.events.subscribe_into(thread_id, queue, max_backlog=MAX_BACKLOG):
            self._queues.add(queue)
            stream = LiveStream(thread_id, queue)
            try:
                yield stream
            finally:
                stream.stop_heartbeat()
                self._queues.discard(queue)


class LiveStream:
    """One subscription: iterate :meth:`frames`; :meth:`close` ends it from elsewhere."""

    def __init__(self, thread_id: str, queue: asyncio.Queue[Queued]) -> None:
        self.thread_id = thread_id
        self._queue = queue
        self._timer: asyncio.TimerHandle | None = None

    def close(self) -> None:
        """End :meth:`frames` after the frames already queued."""
        self._queue.put_nowait(_CLOSE)

    def stop_heartbeat(self) -> None:
        """Cancel the heartbeat timer."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _beat(self, interval: float) -> None:
        self._queue.put_nowait(_PING)
        self._timer = asyncio.get_running_loop().call_later(interval, self._beat, interval)

    async def frames(
        self, *, include_silent: FromQuery[bool] = False, heartbeat: float = HEARTBEAT_SECONDS
    ) -> AsyncIterator[StreamFrame | None]:
        """Frames to send; ``None`` is a heartbeat (send a keep-alive, or nothing)."""
        async for batch in self.batches(include_silent=include_silent, heartbeat=heartbeat):
            for frame in batch:
                yield frame

    async def batches(
        self, *, include_silent: bool = False, heartbeat: float = HEARTBEAT_SECONDS
    ) -> AsyncIterator[list[StreamFrame | None]]:
        """The frames of :meth:`frames`, each batch holding every frame queued at the time.

        A turn of a fast model queues several frames at once; sending them in one write saves
        a system call and a wake-up of the client per frame. Never empty; order is kept.
        """
        self._timer = asyncio.get_running_loop().call_later(heartbeat, self._beat, heartbeat)
        yield [{"type": "connected", "thread_id": self.thread_id}]
        queue = self._queue
        while True:
            batch: list[StreamFrame | None] = []
            frame = await queue.get()
            while True:
                if frame is _CLOSE:
                    if batch:
                        yield batch
                    return
                if frame is _PING:
                    batch.append(None)
                elif frame["type"] == "overflow":
                    batch.append(_slow_consumer())
                    yield batch
                    return
                elif include_silent or not _is_silent(frame):
                    batch.append(frame)
                if queue.empty():
                    break
                frame = queue.get_nowait()
            if batch:
                yield batch


HubDep = NamedDependency[SkipValidation[StreamHub]]


def _slow_consumer() -> ErrorFrame:
    return {
        "type": "error",
        "error": "slow_consumer",
        "detail": f"The client fell {MAX_BACKLOG} frames behind; "
        "reconnect and reload the thread's messages.",
    }


def _is_silent(frame: Frame) -> bool:
    if frame["type"] != "message_data":
        return False
    data = frame["data"]
    return isinstance(data, dict) and bool(data.get("silent"))


def encode(frame: StreamFrame) -> str:
    """Encode a frame as JSON text (values JSON cannot hold are written as strings)."""
    return msgspec.json.encode(frame, enc_hook=str).decode()


class StreamController(Controller):
    """Live frames of one thread."""

    path = "/threads/{thread_id:str}"

    @get(
        "/stream",
        media_type="text/event-stream",
        responses=errors(404),
        opt={QUERY_TOKEN: True},
        summary="Stream live frames (server-sent events)",
    )
    async def stream(
        self,
        thread: ThreadDep,
        runtime: RuntimeDep,
        hub: HubDep,
        include_silent: FromQuery[bool] = False,
        access_token: FromQuery[str | None] = None,
    ) -> ServerSentEvent:
        """Server-sent events: ``event`` is the frame's ``type``, ``data`` the frame as JSON.

        The first event is ``connected``; a ``: ping`` comment is sent every 15 seconds.
        ``access_token`` may carry the API key for clients that cannot set headers
        (``EventSource``).
        """

        async def events() -> AsyncIterator[ServerSentEventMessage]:
            async with hub.listen(runtime, thread.thread_id) as live:
                async for batch in live.batches(include_silent=include_silent):
                    messages = [_sse(frame) for frame in batch]
                    yield messages[0] if len(messages) == 1 else _Batch(parts=messages)

        return ServerSentEvent(
            events(), headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        )

    @get(
        "/ws",
        status_code=101,
        responses=errors(404, 426),
        opt={QUERY_TOKEN: True},
        summary="Stream live frames (WebSocket)",
    )
    async def websocket_info(
        self,
        thread: ThreadDep,
        include_silent: FromQuery[bool] = False,
        access_token: FromQuery[str | None] = None,
    ) -> None:
        """Open this URL as a WebSocket to receive the frames of ``/stream``.

        Each frame is one JSON text message. Send the text ``ping`` to get ``pong``. A plain
        GET answers 426.
        """
        raise ApiError(
            426, "upgrade_required", "Open this URL as a WebSocket (Upgrade: websocket)."
        )

    @websocket("/ws", opt={PUBLIC: True})
    async def websocket(
        self,
        socket: WebSocket[Any, Any, Any],
        thread_id: FromPath[str],
        runtime: RuntimeDep,
        pack: PackDep,
        hub: HubDep,
        include_silent: FromQuery[bool] = False,
    ) -> None:
        """Send live frames over a WebSocket.

        The key and the thread are checked after the upgrade, so a refusal is a close code a
        browser can read: 4401 (no or bad key), 4404 (no such thread in this package, or a
        package the key does not open).
        """
        await socket.accept()
        try:
            key = await check_key(runtime, socket, allow_query=True)
            authorize(key, method="GET", path=socket.scope["path"], package=pack.package)
            thread = await load_thread(runtime, pack, thread_id)
        except NotAuthorizedException as exc:
            await socket.close(code=4401, reason=_reason(exc.detail))
            return
        except ApiError as exc:
            await socket.close(code=4000 + exc.status, reason=_reason(exc.detail))
            return
        async with hub.listen(runtime, thread.thread_id) as live:
            reader = asyncio.create_task(_read(socket, live))
            try:
                async for frame in live.frames(include_silent=include_silent):
                    if reader.done():
                        break
                    if frame is not None:
                        await socket.send_text(encode(frame))
            except WebSocketDisconnect:
                pass
            finally:
                reader.cancel()
                await asyncio.gather(reader, return_exceptions=True)
        if socket.connection_state != "disconnect":
            await socket.close()


def _sse(frame: StreamFrame | None) -> ServerSentEventMessage:
    """One frame as a server-sent event (a heartbeat is a ``: ping`` comment)."""
    if frame is None:
        return ServerSentEventMessage(comment="ping", data=None)
    return ServerSentEventMessage(event=frame["type"], data=encode(frame))


@dataclass
class _Batch(ServerSentEventMessage):
    """Several events written at once (their encodings, back to back)."""

    parts: list[ServerSentEventMessage] = field(default_factory=list)

    def encode(self) -> bytes:
        """Concatenate the events' own encodings."""
        return b"".join(part.encode() for part in self.parts)


def _reason(detail: str) -> str:
    """Cut a close reason to the 123 bytes a close frame allows."""
    return detail.encode()[:120].decode(errors="ignore")


async def _read(socket: WebSocket[Any, Any, Any], live: LiveStream) -> None:
    """Answer ``ping`` with ``pong``; end the stream when the client goes away."""
    try:
        while True:
            text = await socket.receive_text()
            if text.strip() == "ping":
                await socket.send_text("pong")
    except WebSocketDisconnect:
        pass
    finally:
        live.close()
