"""One turn of an entry agent, as the MCP server runs it: open, send, follow, wait, answer.

Only the public :class:`~sa_core.runtime.Runtime` and :class:`~sa_core.state.ThreadState` API
is used, so a turn run by another worker (PostgreSQL) is followed as well as one run here:
frames arrive through the event bus's relay, and :meth:`Runtime.has_work` reads the store.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sa_core.errors import MissingVariablesError, ThreadNotFoundError, ThreadTerminatedError
from sa_core.runtime import Runtime
from sa_core.server.streaming import LiveStream, StreamFrame, StreamHub
from sa_core.spec import Message
from sa_core.state import ThreadState

if TYPE_CHECKING:
    from sa_core.engine.events import MessageDataFrame

FrameHandler = Callable[[StreamFrame], Awaitable[None]]
"""Called with every live frame of the thread (and its children) while the turn runs."""

MCP_TAG = "mcp"
"""The tag of threads the MCP server creates (``GET .../threads?tag=mcp`` lists them)."""

_FIRST_POLL = 0.02
_LAST_POLL = 1.0
_DRAIN_SECONDS = 5.0


class TurnError(Exception):
    """A turn could not run or ended without an answer; the message says why."""


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """The answer of a finished turn and the thread it ran on."""

    thread_id: str
    answer: str


async def open_thread(
    runtime: Runtime, package: str, agent: str, thread_id: str | None
) -> ThreadState:
    """A new thread of ``package/agent``, or the thread ``thread_id`` when it is one of its.

    Raises:
        TurnError: required variables have no value, or ``thread_id`` is not a top-level
            thread of this agent (unknown ids and other packages' threads read the same).
    """
    if thread_id is None:
        try:
            return await runtime.create_thread(agent, package=package, tags=[MCP_TAG])
        except MissingVariablesError as exc:
            raise TurnError(
                f"Agent '{package}/{agent}' needs variables that have no value: "
                f"{', '.join(exc.names)}. Set them on the server (instance env)."
            ) from None
    try:
        thread = await runtime.thread_for_message(thread_id)
    except ThreadNotFoundError:
        thread = None
    if (
        thread is None
        or thread.package != package
        or thread.agent_id != agent
        or thread.parent_id is not None
    ):
        raise TurnError(f"Agent '{package}/{agent}' has no thread {thread_id!r}.")
    return thread


async def run_turn(
    runtime: Runtime, hub: StreamHub, thread: ThreadState, message: str, on_frame: FrameHandler
) -> TurnOutcome:
    """Send ``message`` as the user, pass every live frame to ``on_frame``, return the answer.

    The turn runs as any other (durably, on whichever worker holds the thread); this waits
    until the thread has settled. A call cancelled meanwhile leaves the turn running.

    Raises:
        TurnError: the thread is terminated, the turn failed (the cause, with the model
            calls' errors), or it stopped without an answer (waiting for an approval, say).
    """
    async with hub.listen(runtime, thread.thread_id) as live:
        frames = _Frames(live, on_frame)
        try:
            try:
                sent = await thread.send_message(message, wait=False)
            except ThreadTerminatedError:
                raise TurnError(
                    f"Thread {thread.thread_id} is terminated; call without thread_id to start "
                    "a new one."
                ) from None
            await wait_settled(runtime, thread.thread_id, frames.wake)
            answer = await _answer(thread, sent)
            await frames.finish(answer.id if answer is not None else None)
        finally:
            await frames.stop()
    if answer is None or not answer.content:
        raise TurnError(runtime.redact_secrets(thread, await _why_no_answer(thread, sent)))
    return TurnOutcome(thread.thread_id, runtime.redact_secrets(thread, answer.content))


async def wait_settled(runtime: Runtime, thread_id: str, wake: asyncio.Event) -> None:
    """Return once the thread has no work left on any worker.

    A turn running here is awaited directly; one running elsewhere (or queued for another
    worker) is checked again whenever an answer frame arrives, and at growing intervals
    (20 ms up to 1 s) in case the settling write carries no frame.
    """
    delay = _FIRST_POLL
    while True:
        if runtime.is_running(thread_id):
            await runtime.scheduler.wait(thread_id)
            delay = _FIRST_POLL
        wake.clear()
        if not await runtime.has_work(thread_id):
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await wake.wait()
        delay = min(delay * 2, _LAST_POLL)


class _Frames:
    """The live frames of one turn, handed on in order; the answers among them noted."""

    def __init__(self, live: LiveStream, on_frame: FrameHandler) -> None:
        self.live = live
        self.on_frame = on_frame
        self.wake = asyncio.Event()
        """Set on each top-level assistant message frame."""
        self.answered: set[str] = set()
        self.task = asyncio.create_task(self._pump(), name="mcp-turn-frames")

    async def _pump(self) -> None:
        async for frame in self.live.frames():
            if frame is None or frame["type"] == "connected":
                continue
            if frame["type"] == "message_data" and _is_answer(frame):
                data = frame["data"]
                if data.get("status") != "pending":
                    self.answered.add(str(data.get("id")))
                self.wake.set()
            with contextlib.suppress(Exception):  # a client gone away must not end the turn
                await self.on_frame(frame)

    async def finish(self, answer_id: str | None) -> None:
        """Hand on the turn's remaining frames, then end.

        Frames are delivered in order, so once the answer's frame has arrived every frame
        before it has: a turn another worker ran may have settled before its last frames
        were relayed here, and they are waited for (for a few seconds at most).
        """
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_DRAIN_SECONDS):
                while answer_id is not None and answer_id not in self.answered:
                    self.wake.clear()
                    await self.wake.wait()
                self.live.close()  # the frames already queued are still handed on
                await asyncio.shield(self.task)

    async def stop(self) -> None:
        """Stop handing frames on."""
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


def _is_answer(frame: MessageDataFrame) -> bool:
    """Whether the message is a top-level assistant message (in progress, or stored)."""
    data = frame["data"]
    return "subagent_id" not in frame and isinstance(data, dict) and data.get("role") == "assistant"


async def _answer(thread: ThreadState, sent: Message) -> Message | None:
    """The turn's answer, or ``None``.

    That is the last assistant message with text stored after ``sent``, preferring one
    without tool calls.
    """
    stored = await thread.get_message(sent.id)
    since = stored.created_at if stored is not None else sent.created_at
    page = await thread.get_messages(limit=50, order="desc")
    replies = [
        m
        for m in page.messages
        if m.created_at >= since
        and m.id != sent.id
        and m.role == "assistant"
        and m.status != "failed"
        and m.content
    ]
    return next((m for m in replies if not m.tool_calls), None) or next(iter(replies), None)


async def _why_no_answer(thread: ThreadState, sent: Message) -> str:
    """The cause of a turn that stored no answer: its ``step_error``, or its stop reason."""
    stored = await thread.get_message(sent.id)
    since = stored.created_at if stored is not None else sent.created_at
    logs = [log for log in await thread.get_logs(limit=100) if log.created_at >= since]
    failures = [log for log in logs if log.type == "step_error" and not log.data.get("depth")]
    if failures:
        causes = [f"The turn failed: {failures[0].data.get('error')}"]
        attempts = [log for log in logs if log.type == "llm_call" and log.data.get("error")]
        causes += list(dict.fromkeys(f"model call: {log.data['error']}" for log in attempts))
        return "\n".join(causes)
    await thread.refresh()
    execution = thread.row.execution
    if execution.get("status") == "awaiting_approval":
        return (
            f"The turn waits for a human to approve a tool call (thread {thread.thread_id}); "
            "approve it through the HTTP API or the console, then call again with this "
            "thread_id."
        )
    reason = execution.get("last_stop_reason") or "unknown"
    return f"The turn ended without an answer (stop reason: {reason})."
