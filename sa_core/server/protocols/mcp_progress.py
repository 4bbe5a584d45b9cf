"""What an agent is doing, in words, for MCP progress notifications.

Each live frame worth telling becomes one short line: tool calls starting and finishing, events
a pack emits, and the same for subagents (prefixed with the child thread's id). Streamed text,
message contents and event data are left out: they may be long, and only the final answer is
the call's result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sa_core.engine.events import EventFrame, MessageDataFrame
    from sa_core.server.streaming import StreamFrame


def describe(frame: StreamFrame) -> str | None:
    """One line saying what ``frame`` shows the agent doing, or ``None`` for nothing to say."""
    if frame["type"] == "event":
        line = _event(frame)
        child = frame.get("subagent_id")
    elif frame["type"] == "message_data":
        line = _answered(frame)
        child = frame.get("subagent_id")
    else:
        return None
    if line is None:
        return None
    return f"subagent {child}: {line}" if child else line


def _event(frame: EventFrame) -> str | None:
    data = frame["data"]
    event = str(frame["eventType"])
    name = data.get("name") if isinstance(data, dict) else None
    if event == "tool_call_started":
        return f"calling tool {name}"
    if event == "tool_call_done":
        status = data.get("status") if isinstance(data, dict) else None
        return f"tool {name} done" + (f" ({status})" if status else "")
    return f"event {event}"


def _answered(frame: MessageDataFrame) -> str | None:
    """``answered`` for a subagent's final answer (a top-level one is the call's result)."""
    data = frame["data"]
    if frame.get("subagent_id") and isinstance(data, dict):
        answered = data.get("role") == "assistant" and data.get("status") == "completed"
        if answered and data.get("content") and not data.get("tool_calls"):
            return "answered"
    return None
