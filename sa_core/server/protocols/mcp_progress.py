"""What an agent is doing, in words, for MCP progress notifications.

Each live frame worth telling becomes one short line: tool calls starting and finishing, events
a pack emits, and the same for subagents (prefixed with the child thread's id). Streamed text,
message contents and event data are left out: they may be long, and only the final answer is
the call's result.
"""

from __future__ import annotations

from typing import Any


def describe(frame: dict[str, Any]) -> str | None:
    """One line saying what ``frame`` shows the agent doing, or ``None`` for nothing to say."""
    line = _describe(frame)
    if line is None:
        return None
    child = frame.get("subagent_id")
    return f"subagent {child}: {line}" if child else line


def _describe(frame: dict[str, Any]) -> str | None:
    kind = frame.get("type")
    if kind == "event":
        data = frame.get("data")
        event = str(frame.get("eventType"))
        name = data.get("name") if isinstance(data, dict) else None
        if event == "tool_call_started":
            return f"calling tool {name}"
        if event == "tool_call_done":
            status = data.get("status") if isinstance(data, dict) else None
            return f"tool {name} done" + (f" ({status})" if status else "")
        return f"event {event}"
    data = frame.get("data")
    if kind == "message_data" and frame.get("subagent_id") and isinstance(data, dict):
        answered = data.get("role") == "assistant" and data.get("status") == "completed"
        if answered and data.get("content") and not data.get("tool_calls"):
            return "answered"
    return None
