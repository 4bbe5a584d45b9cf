"""A thread's live frames and stored messages as AG-UI events (``ag_ui.core`` models).

:class:`Translator` turns what a turn does at the top level of its thread into the events of
one run, in an order AG-UI clients accept (one text message open at a time, closed before a
tool call or anything else is sent):

- the answer's text deltas (``message_chunk``) open a ``TEXT_MESSAGE_START`` whose id is the
  assistant message's stored id, then ``TEXT_MESSAGE_CONTENT`` each; the stored message closes
  it (``TEXT_MESSAGE_END``, after any text the deltas lacked);
- each tool call of a stored assistant message is ``TOOL_CALL_START`` (its parent message the
  assistant message), ``TOOL_CALL_ARGS`` (the arguments, whole) and ``TOOL_CALL_END``;
- each stored tool result of a call the server ran is ``TOOL_CALL_RESULT``, its message id the
  tool row's (a client tool's result came from the client: it is not sent back);
- a ``value`` frame of a key of the state is a ``STATE_DELTA`` (a JSON Patch of that key);
- a pack's own ``state.emit(name, data)`` is a ``CUSTOM`` event (``name``, ``value``).

Frames of subagents and deeper messages are not the run's. A message is translated once,
whichever comes first of its frame and its stored row (a run reads the turn's rows at its end,
in case a frame did not reach it). Text goes through the thread's secret redaction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    StateDeltaEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from sa_core.engine.tools.approvals import CLIENT_RESULT, CLIENT_STATUS
from sa_core.server.protocols.agui.state import patch

ENGINE_EVENTS = frozenset(
    {
        "tool_call_started",
        "tool_call_done",
        "tool_call_awaiting_client",
        "tool_call_awaiting_approval",
        CLIENT_STATUS,
    }
)
"""Events the engine emits itself: the run tells the same through messages and its end."""


class Translator:
    """The events of one run (see the module docstring).

    Args:
        redact: replaces the thread's secret values in a text.
        state: the state the client was sent (changed as deltas are sent).
    """

    def __init__(self, redact: Callable[[str], str], state: dict[str, Any]) -> None:
        self.redact = redact
        self.state = state
        self.open: str | None = None
        """The text message being streamed, if one is."""
        self.held: list[BaseEvent] = []
        """Events that came while a text message was open: sent once it is closed."""
        self.streamed: dict[str, str] = {}
        self.done: set[str] = set()
        """Messages translated whole (assistant messages, tool results)."""
        self.replied = False
        """Whether an assistant message of the turn was stored (with text or tool calls)."""

    # -- frames -------------------------------------------------------------------------------

    def chunk(self, message_id: str | None, text: str) -> list[BaseEvent]:
        """A text delta of the assistant message ``message_id``."""
        if message_id is None or message_id in self.done or not text:
            return []
        out = self._start(message_id)
        self.streamed[message_id] = self.streamed.get(message_id, "") + text
        out.append(TextMessageContentEvent(message_id=message_id, delta=self.redact(text)))
        return out

    def message(self, data: dict[str, Any]) -> list[BaseEvent]:
        """A message as stored (a ``message_data`` frame's ``data``, or a row read back)."""
        if data.get("depth") or data.get("silent"):
            return []
        message_id = str(data.get("id"))
        if message_id in self.done:
            return []
        if data.get("role") == "assistant":
            return self._assistant(message_id, data)
        if data.get("role") == "tool" and not (data.get("metadata") or {}).get(CLIENT_RESULT):
            self.done.add(message_id)
            result = ToolCallResultEvent(
                message_id=message_id,
                tool_call_id=str(data.get("tool_call_id")),
                content=self.redact(str(data.get("content") or "")),
                role="tool",
            )
            return [*self._close(), result]
        return []

    def value(self, key: str, value: Any) -> list[BaseEvent]:
        """A thread value set during the run."""
        ops = patch(self.state, key, value)
        return self._after_text(StateDeltaEvent(delta=ops)) if ops else []

    def changes(self, ops: list[dict[str, Any]]) -> list[BaseEvent]:
        """The state's changes the frames did not tell (read at the run's end)."""
        return self._after_text(StateDeltaEvent(delta=ops)) if ops else []

    def event(self, name: str, data: Any) -> list[BaseEvent]:
        """An event the thread emitted: a pack's own is a ``CUSTOM`` event."""
        if name in ENGINE_EVENTS:
            return []
        return self._after_text(CustomEvent(name=name, value=data))

    def close(self) -> list[BaseEvent]:
        """End the text message still open, if any (the run is ending)."""
        return self._close()

    # -- parts --------------------------------------------------------------------------------

    def _assistant(self, message_id: str, data: dict[str, Any]) -> list[BaseEvent]:
        status = data.get("status")
        if status == "pending":
            return []
        self.done.add(message_id)
        out: list[BaseEvent] = []
        if status == "failed":
            return self._close() if self.open == message_id else []
        content = str(data.get("content") or "")
        streamed = self.streamed.get(message_id, "")
        rest = content[len(streamed) :] if content.startswith(streamed) else ""
        if rest:
            out += self._start(message_id)
            out.append(TextMessageContentEvent(message_id=message_id, delta=self.redact(rest)))
        out += self._close()
        calls = data.get("tool_calls") or []
        self.replied = self.replied or bool(content) or bool(calls)
        for call in calls:
            call_id = str(call["id"])
            function = call.get("function") or {}
            arguments = str(function.get("arguments") or "")
            out.append(ToolCallStartEvent(
                tool_call_id=call_id, tool_call_name=str(function.get("name")),
                parent_message_id=message_id,
            ))  # fmt: skip
            if arguments:
                out.append(ToolCallArgsEvent(tool_call_id=call_id, delta=arguments))
            out.append(ToolCallEndEvent(tool_call_id=call_id))
        return out

    def _start(self, message_id: str) -> list[BaseEvent]:
        if self.open == message_id:
            return []
        out = self._close()
        self.open = message_id
        out.append(TextMessageStartEvent(message_id=message_id, role="assistant"))
        return out

    def _close(self) -> list[BaseEvent]:
        if self.open is None:
            return []
        out: list[BaseEvent] = [TextMessageEndEvent(message_id=self.open), *self.held]
        self.open = None
        self.held = []
        return out

    def _after_text(self, event: BaseEvent) -> list[BaseEvent]:
        if self.open is not None:
            self.held.append(event)
            return []
        return [event]
