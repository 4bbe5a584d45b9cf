"""One AG-UI run on a durable thread: its input applied, its turn followed, its events streamed.

A run (:class:`Run`) subscribes to the thread's live frames, then:

1. ``RUN_STARTED`` (the client's ``threadId`` and ``runId``);
2. sets the input's ``state`` as thread values and sends ``STATE_SNAPSHOT``, the thread's state;
3. does what the new messages say (:mod:`~sa_core.server.protocols.agui.conversation`): store
   history, answer client tool calls, send the user message with the frontend ``tools`` as
   client tools (``thread.send_message(..., client_tools=...)``), or continue the paused turn
   with their results (``thread.submit_tool_results``); or, with ``resume``, decide the tool
   calls awaiting approval;
4. follows the turn as it runs, on whichever worker holds the thread (as the OpenAI adapter
   does), through :class:`~sa_core.server.protocols.agui.translate.Translator`, until the
   database says the turn is settled; the turn's stored messages are then read back for
   whatever a frame did not bring, and the state's last changes sent;
5. ends: ``RUN_FINISHED`` (with ``outcome.pendingToolCallIds`` when the turn paused on client
   tool calls, an ``interrupt`` outcome when calls await a human's approval, ``cancelled`` when
   the thread was stopped), or ``RUN_ERROR`` naming why the turn failed.

A client that goes away leaves the turn running; its answer is on the thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

from ag_ui.core import (
    BaseEvent,
    Interrupt,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
)
from ag_ui.encoder import EventEncoder

from sa_core.engine.events import Delivered
from sa_core.errors import (
    ApprovalArgumentsError,
    ApprovalConflictError,
    ApprovalNotFoundError,
    ClientToolResultsError,
    ThreadTerminatedError,
)
from sa_core.runtime import Runtime
from sa_core.server.protocols.agui.conversation import Plan, add_history, plan
from sa_core.server.protocols.agui.inputs import Resume, RunInput
from sa_core.server.protocols.agui.state import apply_state, changes, read_state
from sa_core.server.protocols.agui.threads import new_messages, remember
from sa_core.server.protocols.agui.translate import Translator
from sa_core.spec import Message
from sa_core.state import ThreadState
from sa_core.store.clock import now_us

logger = logging.getLogger("sa_core.server.agui")

POLL_SECONDS = 1.0
"""Without a frame for this long, ask the database whether the turn ended (a safety net)."""
MAX_BACKLOG = 10_000
READ_PAGE = 100
APPROVAL_SCHEMA = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "arguments": {"type": "object"},
        "reason": {"type": "string"},
    },
}
"""What an answer to an approval interrupt holds (``payload`` of its ``resume`` entry)."""


class RunFailed(Exception):
    """The run cannot go on: ``RUN_ERROR`` with ``code`` and ``message``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Run:
    """One run (see the module docstring).

    Args:
        runtime: the runtime.
        thread: the run's thread (:func:`~sa_core.server.protocols.agui.threads.open_thread`).
        given: the run's input.
        fresh: whether the thread was created for this run (it holds none of the messages).
        encoder: the ``ag_ui`` encoder of the response.
    """

    def __init__(
        self,
        runtime: Runtime,
        thread: ThreadState,
        given: RunInput,
        fresh: bool,
        encoder: EventEncoder,
    ) -> None:
        self.runtime = runtime
        self.thread = thread
        self.given = given
        self.fresh = fresh
        self.encoder = encoder
        self.started = now_us()

    async def stream(self) -> AsyncIterator[str]:
        """The run's events, encoded; a failure ends them with ``RUN_ERROR``."""
        encode = self.encoder.encode
        yield encode(RunStartedEvent(thread_id=self.given.thread_id, run_id=self.given.run_id))
        try:
            async for event in self._events():
                yield encode(event)
        except RunFailed as exc:
            text = self.runtime.redact_secrets(self.thread, exc.message)
            yield encode(RunErrorEvent(message=text, code=exc.code))
        except Exception:  # noqa: BLE001 - the stream has begun: the client is told in it
            logger.exception("AG-UI run %s on thread %s failed", self.given.run_id,
                             self.thread.thread_id)  # fmt: skip
            yield encode(RunErrorEvent(
                message="The server failed to run the agent; see the server log.",
                code="internal_error",
            ))  # fmt: skip

    async def _events(self) -> AsyncIterator[BaseEvent]:
        runtime, thread = self.runtime, self.thread
        async with runtime.events.subscribe(thread.thread_id, max_backlog=MAX_BACKLOG) as queue:
            state = await apply_state(
                runtime, thread, await read_state(runtime, thread), self.given.state
            )
            yield StateSnapshotEvent(snapshot=dict(state))
            translator = Translator(lambda text: runtime.redact_secrets(thread, text), state)
            anchor = await self._start(translator)
            if anchor is not None:
                async for event in self._follow(queue, translator):
                    yield event
        if anchor is not None:
            for message in await messages_after(thread, anchor):
                for event in translator.message(message.model_dump(mode="json")):
                    yield event
        for event in translator.close():
            yield event
        now = await read_state(runtime, thread)
        for event in translator.changes(changes(translator.state, now)):
            yield event
        yield await self._end(translator, anchor)

    # -- starting -----------------------------------------------------------------------------

    async def _start(self, translator: Translator) -> str | None:
        """Act on the input; the id of the message the turn's replies follow (None: no turn)."""
        thread, given = self.thread, self.given
        if thread.terminated is not None:
            raise RunFailed(
                "thread_terminated",
                f"The thread {thread.thread_id} was terminated; start a new conversation "
                "(a new threadId).",
            )
        if given.resume:
            return await self._decide(given.resume, translator)
        new = await new_messages(self.runtime, thread, given.messages, self.fresh)
        awaited = {p["tool_call_id"] for p in await thread.pending_client_calls()}
        todo = plan(new, awaited)
        left = sorted(awaited - set(todo.closing))
        if todo.message is not None and left:
            raise RunFailed(
                "tool_results_awaited",
                f"The thread's turn awaits the results of its client tool calls "
                f"({', '.join(left)}); send them as tool messages before a new message.",
            )
        try:
            anchor = await self._apply(todo, translator)
        except (ClientToolResultsError, ThreadTerminatedError) as exc:
            raise RunFailed("invalid_messages", str(exc)) from None
        await remember(self.runtime, thread, new)
        return anchor

    async def _apply(self, todo: Plan, translator: Translator) -> str | None:
        thread, tools = self.thread, self.given.tools
        if todo.closing:
            await thread.submit_tool_results(todo.closing, resume=False)
        if todo.history:
            before = await newest_id(thread)
            await add_history(thread, todo.history)
            translator.done.update(m.id for m in await messages_after(thread, before))
        if todo.results:
            made = await calls_message(thread, set(todo.results))
            assert made is not None  # an awaited call was stored with its message
            translator.done.update(m.id for m in await messages_after(thread, made.id))
            await thread.submit_tool_results(todo.results, client_tools=tools, wait=False)
            return made.id
        if todo.message is not None:
            sent = await thread.send_message(todo.message.text, wait=False, client_tools=tools)
            return sent.id
        return None

    async def _decide(self, answers: Sequence[Resume], translator: Translator) -> str:
        """Approve or deny the tool calls the answers name; the message that made them."""
        thread = self.thread
        waiting = {a["tool_call_id"] for a in await thread.pending_approvals()
                   if a["status"] == "pending"}  # fmt: skip
        unknown = [a.interrupt_id for a in answers if a.interrupt_id not in waiting]
        if unknown:
            raise RunFailed(
                "invalid_resume",
                f"resume answers {', '.join(unknown)}, which await no approval on this thread "
                f"(awaiting: {', '.join(sorted(waiting)) or 'none'}).",
            )
        made = await calls_message(thread, {a.interrupt_id for a in answers})
        assert made is not None  # a call awaiting approval was stored with its message
        translator.done.update(m.id for m in await messages_after(thread, made.id))
        try:
            for entry in answers:
                if entry.approve:
                    await thread.approve(entry.interrupt_id, entry.arguments)
                else:
                    await thread.deny(entry.interrupt_id, entry.reason or "Denied by the user.")
        except (ApprovalArgumentsError, ApprovalConflictError, ApprovalNotFoundError) as exc:
            raise RunFailed("invalid_resume", str(exc)) from None
        return made.id

    # -- following ----------------------------------------------------------------------------

    async def _follow(
        self, queue: asyncio.Queue[Delivered], translator: Translator
    ) -> AsyncIterator[BaseEvent]:
        """The turn's events as its frames come, until the turn is settled."""
        runtime, thread_id = self.runtime, self.thread.thread_id
        watching = True
        while True:
            try:
                frame = await asyncio.wait_for(queue.get(), POLL_SECONDS)
            except TimeoutError:
                if await runtime.turn_settled(thread_id):
                    return
                continue
            if frame["type"] == "overflow":  # fell behind: the stored rows tell the rest
                watching = False
                continue
            if not watching or frame.get("subagent_id"):
                continue
            if frame["type"] == "message_chunk" and not frame["depth"]:
                for event in translator.chunk(frame["message_id"], frame["chunk"]):
                    yield event
            elif frame["type"] == "message_data" and not frame["depth"]:
                data = frame["data"]
                for event in translator.message(data):
                    yield event
                if (
                    data.get("role") == "assistant"
                    and data.get("status") == "completed"
                    and not data.get("tool_calls")
                    and await runtime.turn_settled(thread_id)
                ):
                    return
            elif frame["type"] == "value":
                for event in translator.value(frame["key"], frame["value"]):
                    yield event
            elif frame["type"] == "event":
                name = frame["eventType"]
                for event in translator.event(name, frame["data"]):
                    yield event
                if name == "awaiting_client_tools" and await runtime.turn_settled(thread_id):
                    return

    # -- ending -------------------------------------------------------------------------------

    async def _end(self, translator: Translator, anchor: str | None) -> BaseEvent:
        thread, given = self.thread, self.given
        ids = {"thread_id": given.thread_id, "run_id": given.run_id}
        pending = await thread.pending_client_calls()
        if pending:
            calls = [p["tool_call_id"] for p in pending]
            outcome = RunFinishedSuccessOutcome(pending_tool_call_ids=calls)
            return RunFinishedEvent(**ids, outcome=outcome)
        waiting = [a for a in await thread.pending_approvals() if a["status"] == "pending"]
        if waiting:
            interrupts = [self._interrupt(a) for a in waiting]
            return RunFinishedEvent(**ids, outcome=RunFinishedInterruptOutcome(
                interrupts=interrupts))  # fmt: skip
        if anchor is None or translator.replied:
            return RunFinishedEvent(**ids)
        await thread.refresh()
        if thread.row.execution.get("last_stop_reason") == "aborted_by_user":
            return RunFinishedEvent(**ids, outcome=RunFinishedCancelledOutcome())
        raise RunFailed("turn_failed", await self._why_failed())

    def _interrupt(self, approval: dict[str, Any]) -> Interrupt:
        thread = self.thread
        call_id = str(approval["tool_call_id"])
        route = f"/api/packages/{thread.package}/threads/{thread.thread_id}/approvals/{call_id}"
        return Interrupt(
            id=call_id,
            reason="tool_approval",
            tool_call_id=call_id,
            message=(
                f"The tool call {approval['name']} awaits a human's approval. Run again with "
                f"resume [{{interruptId: '{call_id}', status: 'resolved', payload: "
                "{approved: true}}] (or approved: false and a reason), or decide it with "
                f"POST {route}."
            ),
            response_schema=APPROVAL_SCHEMA,
        )

    async def _why_failed(self) -> str:
        """Why the turn stored no answer: its ``step_error``, its failed model calls."""
        logs = [log for log in await self.thread.get_logs(limit=100)
                if log.created_at >= self.started]  # fmt: skip
        failures = [log for log in logs if log.type == "step_error" and not log.data.get("depth")]
        if failures:
            causes = [f"The turn failed: {failures[0].data.get('error')}"]
            attempts = [log for log in logs if log.type == "llm_call" and log.data.get("error")]
            causes += list(dict.fromkeys(f"model call: {log.data['error']}" for log in attempts))
            return "\n".join(causes)
        reason = self.thread.row.execution.get("last_stop_reason") or "unknown"
        return f"The turn ended without an answer (stop reason: {reason})."


# -- reading the thread --------------------------------------------------------------------


async def newest_id(thread: ThreadState) -> str | None:
    """The id of the thread's newest top-level message, if it has any."""
    page = await thread.get_messages(limit=1, order="desc")
    return page.messages[0].id if page.messages else None


async def messages_after(thread: ThreadState, message_id: str | None) -> list[Message]:
    """The top-level messages stored after ``message_id`` (all for ``None``), oldest first."""
    newer: list[Message] = []
    offset = 0
    while True:
        page = await thread.get_messages(limit=READ_PAGE, offset=offset, order="desc")
        for message in page.messages:
            if message.id == message_id:
                return newer[::-1]
            newer.append(message)
        if not page.has_more:
            return newer[::-1] if message_id is None else []
        offset += READ_PAGE


async def calls_message(thread: ThreadState, call_ids: set[str]) -> Message | None:
    """The newest top-level assistant message that made one of ``call_ids``."""
    offset = 0
    while True:
        page = await thread.get_messages(limit=READ_PAGE, offset=offset, order="desc")
        for message in page.messages:
            if message.role == "assistant" and any(
                call.id in call_ids for call in message.tool_calls or []
            ):
                return message
        if not page.has_more:
            return None
        offset += READ_PAGE
