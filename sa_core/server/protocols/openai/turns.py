"""One turn of an agent on a durable thread, watched through the thread's live frames.

The turn is sent like any message (``thread.send_message(..., wait=False)``), so it runs on
whichever worker holds the thread, exactly as a turn posted to the messages API does. This
process subscribes to the thread's frames first (relayed between workers on PostgreSQL), passes
the answer's text deltas on as they stream, and asks the database whether the turn is over
(:meth:`Runtime.turn_settled`) when a frame looks like its end, or when no frame came for a
second. The answer is then read back from the stored messages.

A turn that declares client tools sends them with the message; one that carries their results
submits them instead (``thread.submit_tool_results``) and follows the parked turn as it goes on.
A turn that pauses on client tool calls ends when its runner settles (the
``awaiting_client_tools`` event); its result carries the calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sa_core.engine.model.usage import UsageTotals
from sa_core.runtime import Runtime
from sa_core.server.protocols.openai.toolcalls import ClientTools, paused_calls
from sa_core.spec import Message
from sa_core.state import ThreadState
from sa_core.store.clock import now_us

SEPARATOR = "\n\n"
"""Between the texts of two assistant messages of one turn (text, a tool call, more text)."""
POLL_SECONDS = 1.0
"""Without a frame for this long, ask the database whether the turn ended (a safety net)."""
MAX_BACKLOG = 10_000
READ_PAGE = 100
PAUSED = "awaiting_client_tools"
"""The event a turn's runner emits once the turn parked on client tool calls."""


@dataclass
class TurnResult:
    """The outcome of a turn."""

    thread_id: str
    request: Message
    """The message that started the turn (as stored), or for a turn that goes on with client
    tool results, the assistant message whose calls they answer."""
    replies: list[Message] = field(default_factory=list)
    """The turn's top-level assistant messages, oldest first."""
    text: str = ""
    """What the client was given: the streamed text, else the replies' texts joined."""
    usage: UsageTotals = field(default_factory=UsageTotals)
    calls: list[dict[str, str]] = field(default_factory=list)
    """The client tool calls the turn paused on (``id``, ``name``, ``arguments``), if it did."""

    @property
    def answered(self) -> bool:
        """Whether the turn produced text or client tool calls (a failed one produces none)."""
        return bool(self.text) or bool(self.calls)


class Turn:
    """Send a message on a thread and follow the turn it starts.

    Iterate :meth:`deltas`: the stored message that starts the turn, the answer's text as it
    streams, then the :class:`TurnResult`.
    """

    def __init__(
        self,
        runtime: Runtime,
        thread: ThreadState,
        content: str,
        output_schema: dict[str, Any] | None = None,
        model_settings: dict[str, Any] | None = None,
        client: ClientTools | None = None,
        anchor: Message | None = None,
        started: str | None = None,
    ) -> None:
        self.runtime = runtime
        self.thread = thread
        self.content = content
        self.output_schema = output_schema
        """The JSON Schema the client's ``response_format`` / ``text.format`` asked for."""
        self.model_settings = model_settings
        """The client's sampling and length settings the serving policy applies."""
        self.client = client
        """The client tools the request declares, or the results it brings."""
        self.anchor = anchor
        """With results: the assistant message whose calls they answer."""
        self.started = started
        """With results: the id of the user message that started the turn, when known."""
        self._streamed: list[str] = []
        self._request: Message | None = None
        self._since: int | None = None
        """When results were submitted: the turn's usage counts the calls made since."""

    async def deltas(
        self, before: UsageTotals | None = None
    ) -> AsyncIterator[Message | str | TurnResult]:
        """Run the turn: yield the stored request, text deltas as they stream, then the result.

        Args:
            before: the thread's usage with its subagents before the turn, from
                :func:`usage_before` (``None``: no subagents then; the turn's logs tell).
        """
        runtime, thread_id = self.runtime, self.thread.thread_id
        async with runtime.events.subscribe(thread_id, max_backlog=MAX_BACKLOG) as queue:
            self._request = await self._start()
            yield self._request
            watching = True
            texts: dict[str | None, str] = {}
            while True:
                try:
                    frame = await asyncio.wait_for(queue.get(), POLL_SECONDS)
                except TimeoutError:
                    if await runtime.turn_settled(thread_id):
                        break
                    continue
                if frame["type"] == "overflow":  # fell behind: stop streaming, wait for the end
                    watching = False
                    continue
                if not watching or frame.get("subagent_id"):
                    continue
                if frame["type"] == "message_chunk":
                    if frame["depth"] or self.output_schema is not None:
                        continue
                    for piece in self._chunk(texts, frame["message_id"], frame["chunk"]):
                        yield piece
                elif frame["type"] == "message_data" and not frame["depth"]:
                    if self.output_schema is not None:  # structured: the validated answer only
                        if await runtime.turn_settled(thread_id):
                            break
                        continue
                    data = frame["data"]
                    if data.get("role") != "assistant" or data.get("status") == "pending":
                        continue
                    if data.get("status") == "completed":
                        for piece in self._final(texts, str(data.get("id")), data):
                            yield piece
                    if not data.get("tool_calls") and await runtime.turn_settled(thread_id):
                        break
                elif (
                    frame["type"] == "event"
                    and frame.get("eventType") == PAUSED
                    and await runtime.turn_settled(thread_id)
                ):
                    break
        result = await self._result(before)
        if self.output_schema is not None and result.text:
            yield result.text  # a rejected, retried answer is never shown: the valid one, whole
        yield result

    async def _start(self) -> Message:
        """Send the turn's message, or submit the results it brings; the turn's anchor."""
        client = self.client
        if client is not None and client.results is not None:
            assert self.anchor is not None
            self._since = now_us()
            await self.thread.submit_tool_results(
                client.results, client_tools=client.tools, tool_choice=client.choice, wait=False
            )
            return self.anchor
        return await self.thread.send_message(
            self.content,
            wait=False,
            output_schema=self.output_schema,
            model_settings=self.model_settings,
            client_tools=client.tools if client is not None else None,
            tool_choice=client.choice if client is not None else None,
        )

    def _emit(self, text: str) -> str:
        self._streamed.append(text)
        return text

    def _chunk(self, texts: dict[str | None, str], key: str | None, chunk: str) -> list[str]:
        out: list[str] = []
        if key not in texts:
            if self._streamed:
                out.append(self._emit(SEPARATOR))
            texts[key] = ""
        texts[key] += chunk
        if chunk:
            out.append(self._emit(self.runtime.redact_secrets(self.thread, chunk)))
        return out

    def _final(self, texts: dict[str | None, str], key: str, data: dict[str, Any]) -> list[str]:
        content = str(data.get("content") or "")
        streamed = texts.pop(key, None)
        if streamed is None:
            streamed = texts.pop(None, "")
        if not content.startswith(streamed) or len(content) == len(streamed):
            return []
        rest = content[len(streamed) :]
        return self._chunk({None: streamed} if streamed else {}, None, rest)

    async def _result(self, before: UsageTotals | None) -> TurnResult:
        assert self._request is not None
        replies = await replies_after(self.thread, self._request.id)
        if self.output_schema is not None:  # the answer that validated, if one did
            text = next(
                (m.content or "" for m in reversed(replies) if "output" in (m.metadata or {})), ""
            )
        elif self._streamed:
            text = "".join(self._streamed)
        else:
            text = self.runtime.redact_secrets(self.thread, joined(replies))
        calls: list[dict[str, str]] = []
        if self.client is not None or not text:  # did it pause on client calls?
            pending = await self.thread.pending_client_calls()
            calls = paused_calls(replies, pending) if pending else []
        if before is None:
            since = self._since or self._request.created_at
            usage = await turn_usage(self.thread, since)
        else:  # subagents' calls are logged on their threads: the tree's totals tell
            after = (await self.thread.usage()).tree or UsageTotals()
            usage = usage_delta(after, before)
        return TurnResult(
            thread_id=self.thread.thread_id,
            request=self._request,
            replies=replies,
            text=text,
            usage=usage,
            calls=calls,
        )


def joined(replies: Sequence[Message]) -> str:
    """The texts of a turn's completed assistant messages, joined."""
    return SEPARATOR.join(
        m.content for m in replies if m.content and m.status in ("completed", None)
    )


async def replies_after(thread: ThreadState, message_id: str) -> list[Message]:
    """The top-level assistant messages after ``message_id`` up to the next user message."""
    newer: list[Message] = []
    offset = 0
    while True:
        page = await thread.get_messages(limit=READ_PAGE, offset=offset, order="desc")
        for message in page.messages:
            if message.id == message_id:
                newer.reverse()
                replies: list[Message] = []
                for later in newer:
                    if later.role == "user":
                        break
                    if later.role == "assistant":
                        replies.append(later)
                return replies
            newer.append(message)
        if not page.has_more:
            return []
        offset += READ_PAGE


async def turn_usage(thread: ThreadState, since: int) -> UsageTotals:
    """The usage of the thread's model calls logged since ``since`` (µs): one turn's.

    Read from the newest logs back, so it costs the turn's rows, not the thread's history.
    """
    totals = UsageTotals()
    offset = 0
    while True:
        logs = await thread.get_logs(limit=READ_PAGE, offset=offset, order="desc")
        for log in logs:
            if log.created_at < since:
                return totals
            if log.type == "llm_call":
                totals.add(log_usage(log.data))
        if len(logs) < READ_PAGE:
            return totals
        offset += READ_PAGE


def log_usage(data: dict[str, Any]) -> UsageTotals:
    """The usage one ``llm_call`` log row records."""
    failed = bool(data.get("error"))
    return UsageTotals(
        input_tokens=int(data.get("input_tokens") or 0),
        output_tokens=int(data.get("output_tokens") or 0),
        reasoning_tokens=int(data.get("reasoning_tokens") or 0),
        cached_tokens=int(data.get("cached_tokens") or 0),
        cache_write_tokens=int(data.get("cache_write_tokens") or 0),
        cost_usd=float(data.get("cost_total") or 0.0),
        model_calls=0 if failed else 1,
        failed_model_calls=1 if failed else 0,
    )


def usage_delta(after: UsageTotals, before: UsageTotals) -> UsageTotals:
    """The usage a turn added (the totals after it, less those before)."""
    return UsageTotals(
        input_tokens=after.input_tokens - before.input_tokens,
        output_tokens=after.output_tokens - before.output_tokens,
        reasoning_tokens=after.reasoning_tokens - before.reasoning_tokens,
        cached_tokens=after.cached_tokens - before.cached_tokens,
        cache_write_tokens=after.cache_write_tokens - before.cache_write_tokens,
        cost_usd=after.cost_usd - before.cost_usd,
        model_calls=after.model_calls - before.model_calls,
        failed_model_calls=after.failed_model_calls - before.failed_model_calls,
    )


async def usage_before(thread: ThreadState) -> UsageTotals | None:
    """The usage of the thread and its subagents before a turn, when it has subagents.

    ``None`` for a thread without subagents: the turn's usage is then read from its own logs
    (:func:`turn_usage`), which stays cheap however long the thread grows.
    """
    if not thread.children:
        return None
    return (await thread.usage()).tree or UsageTotals()
