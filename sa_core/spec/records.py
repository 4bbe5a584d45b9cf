"""Runtime records: messages, tool calls and results, files, registry entries, logs."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field

from sa_core.spec.base import DEFERRED, RecordModel, SpecModel

MessageRole = Literal["system", "user", "assistant", "tool"]


class ToolCallFunction(RecordModel):
    """The function part of a tool call; ``arguments`` is a JSON string, as on the wire."""

    name: str
    arguments: str = "{}"


class ToolCall(RecordModel):
    """A tool call stored on an assistant message."""

    id: str
    type: Literal["function"] = "function"
    function: ToolCallFunction
    extra_content: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        """The called tool's name."""
        return self.function.name

    @property
    def arguments(self) -> dict[str, Any]:
        """The parsed arguments (invalid JSON yields ``{}``)."""
        try:
            value = json.loads(self.function.arguments or "{}")
        except json.JSONDecodeError:
            return {}
        return value if isinstance(value, dict) else {}


class AttachmentRef(SpecModel):
    """A reference to a file in a thread's filesystem."""

    model_config = SpecModel.model_config | {"extra": "allow"}

    id: str = ""
    type: Literal["file"] = "file"
    path: str
    name: str
    mime_type: str = "application/octet-stream"
    size: int = 0
    width: int | None = None
    height: int | None = None
    description: str | None = None


class ToolAttachment(SpecModel):
    """A new file a tool returns: written to ``/attachments/`` when its result is stored."""

    name: str
    mime_type: str = "application/octet-stream"
    data: str
    width: int | None = None
    height: int | None = None


class ToolResult(RecordModel):
    """What a tool returns."""

    model_config = DEFERRED

    status: Literal["success", "error"] = "success"
    result: str | None = None
    error: str | None = None
    error_code: str | None = None
    error_data: dict[str, Any] | None = None
    stack: str | None = None
    attachments: list[ToolAttachment | AttachmentRef] = Field(default_factory=list)
    subagent_id: str | None = None

    @classmethod
    def success(cls, result: str, **fields: Any) -> ToolResult:
        """A successful result."""
        return cls(status="success", result=result, **fields)

    @classmethod
    def failure(cls, error: str, **fields: Any) -> ToolResult:
        """An error result."""
        return cls(status="error", error=error, **fields)


class Message(RecordModel):
    """A stored message, with every field of the spec's Message.

    Roles encode sides: side A writes ``assistant``, side B (or the human) writes ``user``.
    ``created_at`` is in microseconds since the epoch.
    """

    id: str
    thread_id: str | None = None
    role: MessageRole
    content: str | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    log_id: str | None = None
    created_at: int = 0
    request_sent_at: int | None = None
    response_completed_at: int | None = None
    status: Literal["pending", "completed", "failed"] | None = None
    silent: bool = False
    tool_status: Literal["success", "error"] | None = None
    reasoning_content: str | None = None
    reasoning_details: list[dict[str, Any]] | None = None
    parent_id: str | None = None
    depth: int = 0
    prompt: str | None = None
    attachments: list[AttachmentRef] | None = None
    metadata: dict[str, Any] | None = None
    subagent_id: str | None = None
    subagent_name: str | None = None
    subagent_title: str | None = None
    subagent_description: str | None = None
    subagent_status: str | None = None
    subagent_resumable: bool | None = None
    subagent_blocking: bool | None = None
    subagent_thread_name: str | None = None
    subagent_spawn_group_id: str | None = None


class MessagesResult(BaseModel):
    """A page of messages."""

    messages: list[Message]
    total: int
    has_more: bool


class QueueMessageInput(RecordModel):
    """A message queued for the thread's next step (``user``: side A acts next)."""

    model_config = DEFERRED

    role: Literal["user", "assistant"] = "user"
    content: str
    attachments: list[ToolAttachment | AttachmentRef] = Field(default_factory=list)
    silent: bool = False
    metadata: dict[str, Any] | None = None


class InjectMessageInput(RecordModel):
    """A message stored directly, without starting a turn."""

    model_config = DEFERRED

    role: MessageRole
    content: str
    silent: bool = False
    metadata: dict[str, Any] | None = None
    name: str | None = None
    tool_call_id: str | None = None
    tool_calls: list[ToolCall] | None = None
    """An assistant message's tool calls (a conversation a client brings, say)."""


class FileRecord(SpecModel):
    """Metadata of a file or directory in a thread's filesystem."""

    path: str
    name: str
    mime_type: str = "application/octet-stream"
    storage: Literal["local", "url", "s3", "r2"] = "local"
    location: str | None = None
    size: int = 0
    metadata: dict[str, Any] | None = None
    is_directory: bool = False
    created_at: int = 0
    width: int | None = None
    height: int | None = None
    content_hash: str | None = None
    """The SHA-256 of the file's bytes (hex); ``None`` for a directory."""


class FileStats(SpecModel):
    """Totals of a thread's filesystem."""

    model_config = DEFERRED

    total_size: int
    file_count: int


class GrepResult(SpecModel):
    """Matches of a pattern in one text file."""

    model_config = DEFERRED

    path: str
    name: str
    matches: list[str]
    line_numbers: list[int] = Field(default_factory=list)


class SubagentRegistryEntry(SpecModel):
    """One child instance in a parent's registry (``ThreadState.children``)."""

    model_config = DEFERRED

    reference: str
    name: str
    title: str | None = None
    description: str = ""
    resumable: bool | None = None
    blocking: bool | None = None
    thread_name: str | None = None
    spawn_group_id: str | None = None
    created_at: int | None = None
    status: str = "running"
    parent_communication: Literal["implicit", "explicit"] | None = None


class ScheduledEffect(SpecModel):
    """A pending effect run."""

    model_config = DEFERRED

    id: str
    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    scheduled_at: int
    created_at: int


class Log(RecordModel):
    """A log row (``state.get_logs``): model calls, tool calls, errors."""

    id: str
    type: str
    data: dict[str, Any] = Field(default_factory=dict)
    created_at: int
    parent_id: str | None = None
