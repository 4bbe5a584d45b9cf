"""An AG-UI client for the tests, as ``@ag-ui/client``'s ``HttpAgent`` (CopilotKit's) works.

It posts a ``RunAgentInput`` (built with ``ag_ui.core``), reads the server-sent events, and
validates each with the package's own types: the ``Event`` union, with no field the protocol
does not declare. It checks the order AG-UI clients require (``RUN_STARTED`` first, one text
message open at a time, tool calls opened and closed, ``RUN_FINISHED`` or ``RUN_ERROR`` last)
and applies the events as a client does: the state from ``STATE_SNAPSHOT`` and the JSON Patches
of ``STATE_DELTA``; messages from the text, tool call and tool result events. The next run sends
the conversation so built, as a real client does.
"""

from __future__ import annotations

import copy
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
from ag_ui.core import (
    BaseEvent,
    Event,
    EventType,
    RunAgentInput,
    StateDeltaEvent,
    Tool,
)
from pydantic import BaseModel, TypeAdapter

EVENTS: TypeAdapter[Any] = TypeAdapter(Event)


def undeclared(model: BaseModel, where: str = "") -> list[str]:
    """The fields of ``model`` (and the models in it) that its type does not declare."""
    found = [f"{where}{type(model).__name__}.{k}" for k in (model.model_extra or {})]
    for name in type(model).model_fields:
        value = getattr(model, name)
        items = value if isinstance(value, list) else [value]
        for item in items:
            if isinstance(item, BaseModel):
                found += undeclared(item, f"{where}{name}.")
    return found


def parse_events(text: str) -> list[BaseEvent]:
    """The events of a server-sent events body, each validated by ``ag_ui.core``."""
    events: list[BaseEvent] = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        assert block.startswith("data: "), block
        event = EVENTS.validate_json(block[len("data: ") :])
        assert undeclared(event) == [], block
        events.append(event)
    return events


def apply_patch(document: Any, ops: list[dict[str, Any]]) -> Any:
    """Apply a JSON Patch of ``add``, ``replace`` and ``remove`` at any depth (RFC 6902)."""
    document = copy.deepcopy(document)
    for op in ops:
        tokens = [t.replace("~1", "/").replace("~0", "~") for t in op["path"].split("/")[1:]]
        parent = document
        for token in tokens[:-1]:
            parent = parent[int(token)] if isinstance(parent, list) else parent[token]
        last = tokens[-1]
        if op["op"] == "remove":
            del parent[last]
        else:
            assert op["op"] in ("add", "replace"), op
            assert (op["op"] == "replace") == (last in parent), op
            parent[last] = op["value"]
    return document


def check_order(events: list[BaseEvent]) -> None:
    """The order AG-UI clients (``@ag-ui/client``'s verifier) require of one run."""
    kinds = [e.type for e in events]
    assert kinds[0] == EventType.RUN_STARTED, kinds
    assert kinds[-1] in (EventType.RUN_FINISHED, EventType.RUN_ERROR), kinds
    assert EventType.RUN_STARTED not in kinds[1:], kinds
    assert not {EventType.RUN_FINISHED, EventType.RUN_ERROR} & set(kinds[:-1]), kinds
    open_text: str | None = None
    open_calls: set[str] = set()
    for event in events:
        data = event.model_dump()
        if event.type == EventType.TEXT_MESSAGE_START:
            assert open_text is None and not open_calls, kinds
            open_text = data["message_id"]
        elif event.type == EventType.TEXT_MESSAGE_CONTENT:
            assert data["message_id"] == open_text and data["delta"], kinds
        elif event.type == EventType.TEXT_MESSAGE_END:
            assert data["message_id"] == open_text, kinds
            open_text = None
        elif event.type == EventType.TOOL_CALL_START:
            assert open_text is None, kinds
            open_calls.add(data["tool_call_id"])
        elif event.type in (EventType.TOOL_CALL_ARGS, EventType.TOOL_CALL_END):
            assert data["tool_call_id"] in open_calls, kinds
            if event.type == EventType.TOOL_CALL_END:
                open_calls.discard(data["tool_call_id"])
        else:
            assert open_text is None, f"{event.type} inside a text message: {kinds}"
    assert open_text is None and not open_calls, kinds


@dataclass
class Run:
    """What one run answered."""

    status: int
    headers: httpx.Headers
    events: list[BaseEvent] = field(default_factory=list)
    body: Any = None

    @property
    def kinds(self) -> list[str]:
        """The event types, in order."""
        return [e.type.value for e in self.events]

    def of(self, kind: EventType) -> list[dict[str, Any]]:
        """The events of one type, as dicts (snake_case keys)."""
        return [e.model_dump() for e in self.events if e.type == kind]

    @property
    def text(self) -> str:
        """Every text delta, joined."""
        return "".join(e["delta"] for e in self.of(EventType.TEXT_MESSAGE_CONTENT))


@dataclass
class Client:
    """One conversation with one agent, as a frontend keeps it."""

    url: str
    key: str | None
    thread_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    messages: list[dict[str, Any]] = field(default_factory=list)
    state: Any = field(default_factory=dict)
    tools: list[dict[str, Any]] = field(default_factory=list)

    def say(self, text: str) -> None:
        """Add a user message (a frontend makes its id)."""
        self.messages.append({"id": str(uuid.uuid4()), "role": "user", "content": text})

    def answer_tool(self, call_id: str, content: str) -> None:
        """Add the result of a frontend tool call."""
        self.messages.append(
            {"id": str(uuid.uuid4()), "role": "tool", "toolCallId": call_id, "content": content}
        )

    def run(self, **extra: Any) -> Run:
        """Run the agent with the conversation so far; apply the events to it."""
        given = RunAgentInput(
            thread_id=self.thread_id,
            run_id=str(uuid.uuid4()),
            messages=self.messages,
            tools=[Tool.model_validate(t) for t in self.tools],
            state=self.state,
            context=[],
            forwarded_props={},
            **extra,
        )
        body = given.model_dump(mode="json", by_alias=True, exclude_none=True)
        headers = {"Accept": "text/event-stream"}
        if self.key is not None:
            headers["Authorization"] = f"Bearer {self.key}"
        response = httpx.post(self.url, json=body, headers=headers, timeout=60)
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            return Run(response.status_code, response.headers, body=response.json())
        run = Run(response.status_code, response.headers, parse_events(response.text))
        check_order(run.events)
        self.apply(run.events)
        return run

    def apply(self, events: list[BaseEvent]) -> None:
        """Apply the events as ``@ag-ui/client`` does: messages and state."""
        for event in events:
            data = event.model_dump()
            if event.type == EventType.STATE_SNAPSHOT:
                self.state = data["snapshot"]
            elif isinstance(event, StateDeltaEvent):
                ops = [op.model_dump(by_alias=True) for op in event.delta]
                self.state = apply_patch(self.state, ops)
            elif event.type == EventType.TEXT_MESSAGE_START:
                self.messages.append({"id": data["message_id"], "role": "assistant", "content": ""})
            elif event.type == EventType.TEXT_MESSAGE_CONTENT:
                self._message(data["message_id"])["content"] += data["delta"]
            elif event.type == EventType.TOOL_CALL_START:
                parent = data.get("parent_message_id")
                last = self.messages[-1] if self.messages else None
                if last is None or last["id"] != parent:
                    last = {"id": parent or data["tool_call_id"], "role": "assistant"}
                    self.messages.append(last)
                last.setdefault("toolCalls", []).append({
                    "id": data["tool_call_id"], "type": "function",
                    "function": {"name": data["tool_call_name"], "arguments": ""},
                })  # fmt: skip
            elif event.type == EventType.TOOL_CALL_ARGS:
                self._call(data["tool_call_id"])["function"]["arguments"] += data["delta"]
            elif event.type == EventType.TOOL_CALL_RESULT:
                self.messages.append({
                    "id": data["message_id"], "role": "tool",
                    "toolCallId": data["tool_call_id"], "content": data["content"],
                })  # fmt: skip

    def _message(self, message_id: str) -> dict[str, Any]:
        return next(m for m in self.messages if m["id"] == message_id)

    def _call(self, call_id: str) -> dict[str, Any]:
        calls = (c for m in self.messages for c in m.get("toolCalls", []))
        return next(c for c in calls if c["id"] == call_id)


def arguments(run: Run, call_id: str) -> Any:
    """The JSON arguments a run streamed for a tool call."""
    deltas = [e["delta"] for e in run.of(EventType.TOOL_CALL_ARGS) if e["tool_call_id"] == call_id]
    return json.loads("".join(deltas))
