"""Request and response bodies of the HTTP API (msgspec structs; they drive the OpenAPI schema).

Secret values never appear here: variables are described by name and type only.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

import msgspec
from msgspec import Meta, Struct

T = TypeVar("T")
Name = Annotated[str, Meta(min_length=1, max_length=200)]


class Base(Struct, kw_only=True):
    """Base of every body: keyword-only fields."""


# -- errors ---------------------------------------------------------------------------------


class MissingVariableOut(Base, kw_only=True):
    """A required variable without a value, and the definition declaring it."""

    name: str
    declared_by: str


class ErrorOut(Base, kw_only=True):
    """Every error: a stable code, a human explanation, and extra fields for some codes."""

    error: str
    detail: str
    missing: list[MissingVariableOut] | None = None
    errors: list[dict[str, Any]] | None = None


# -- catalog --------------------------------------------------------------------------------


class PackageOut(Base, kw_only=True):
    """An installed or named pack."""

    name: str
    version: str | None = None
    author: str | None = None
    license: str | None = None
    description: str | None = None
    entry_agents: list[str]
    distribution: str | None = None
    source: Literal["entry_point", "local"]


class PackagesOut(Base, kw_only=True):
    """``GET /api/packages``."""

    packages: list[PackageOut]


class VariableOut(Base, kw_only=True):
    """A variable an agent's graph declares (never its value)."""

    name: str
    type: Literal["text", "secret"]
    required: bool
    scoped: bool
    description: str
    declared_by: str | None = None
    needs_value: bool = False


class AgentOut(Base, kw_only=True):
    """An entry agent of a package."""

    name: str
    type: Literal["ai_human", "dual_ai"]
    title: str | None = None
    description: str | None = None
    icon: str | None = None


class AgentsOut(Base, kw_only=True):
    """``GET agents``."""

    agents: list[AgentOut]


class SideOut(Base, kw_only=True):
    """One AI side of an agent."""

    side: Literal["a", "b"]
    prompt: str
    label: str | None = None
    model: str | None = None
    tools: list[str]
    stop_on_response: bool
    stop_tool: str | None = None
    max_steps: int | None = None
    session_stop: str | None = None
    session_fail: str | None = None
    session_status: str | None = None


class AgentDetailOut(AgentOut, kw_only=True):
    """``GET agents/{name}``: sides, tools and the variables a thread needs."""

    max_session_turns: int | None = None
    sides: list[SideOut]
    tools: list[str]
    variables: list[VariableOut]


class PromptOut(Base, kw_only=True):
    """A prompt of a package."""

    name: str
    model: str
    tool_description: str
    include_chat: bool
    include_past_tools: bool
    tool_choice: Literal["auto", "none", "required"]
    tools: list[str]
    variables: list[VariableOut]


class PromptsOut(Base, kw_only=True):
    """``GET prompts``."""

    prompts: list[PromptOut]


class ModelOut(Base, kw_only=True):
    """A model definition (provider options are not shown: they may hold credentials)."""

    name: str
    provider: str
    model: str
    fallbacks: list[str]
    max_tokens: int | None = None
    input_price: float | None = None
    output_price: float | None = None
    cached_price: float | None = None


class ModelsOut(Base, kw_only=True):
    """``GET models``."""

    models: list[ModelOut]


class ToolOut(Base, kw_only=True):
    """A tool a package can use: its own, or a plugin's."""

    name: str
    description: str
    source: Literal["package", "plugin"]
    variables: list[VariableOut]


class ToolsOut(Base, kw_only=True):
    """``GET tools``."""

    tools: list[ToolOut]


# -- threads --------------------------------------------------------------------------------


class CreateThreadIn(Base, kw_only=True):
    """``POST threads``."""

    agent: Name
    env: dict[str, str] = msgspec.field(default_factory=dict)
    env_types: dict[str, Literal["text", "secret"]] = msgspec.field(default_factory=dict)
    tags: Annotated[list[str], Meta(max_length=100)] = msgspec.field(default_factory=list)


class EnvVariableOut(Base, kw_only=True):
    """A variable set on a thread: name and type, never the value."""

    name: str
    type: Literal["text", "secret"]


class ThreadOut(Base, kw_only=True):
    """A thread."""

    id: str
    package: str
    agent: str
    created_at: int
    updated_at: int
    parent_id: str | None = None
    user_id: str | None = None
    terminated_at: int | None = None
    stopped: bool
    running: bool
    status: str | None = None
    tags: list[str]
    env: list[EnvVariableOut]


class SubagentOut(Base, kw_only=True):
    """An entry of a thread's subagent registry."""

    reference: str
    name: str
    title: str | None = None
    description: str = ""
    resumable: bool | None = None
    blocking: bool | None = None
    thread_name: str | None = None
    spawn_group_id: str | None = None
    created_at: int | None = None
    status: str
    parent_communication: Literal["implicit", "explicit"] | None = None


class ThreadDetailOut(ThreadOut, kw_only=True):
    """``GET threads/{id}``: the thread and its subagent registry."""

    children: list[SubagentOut]


class ThreadsOut(Base, kw_only=True):
    """``GET threads``."""

    threads: list[ThreadOut]
    total: int
    has_more: bool


class DeletedOut(Base, kw_only=True):
    """``DELETE threads/{id}``: the deleted thread and its descendants."""

    deleted: list[str]


class ThreadStatusOut(Base, kw_only=True):
    """``POST threads/{id}/stop`` and ``terminate``."""

    id: str
    status: Literal["stopped", "terminated"]
    terminated_at: int | None = None


class ChildrenOut(Base, kw_only=True):
    """``GET threads/{id}/children``."""

    children: list[SubagentOut]


class LogOut(Base, kw_only=True):
    """A log row: model calls with tokens, latency and errors."""

    id: str
    type: str
    data: dict[str, Any]
    created_at: int
    parent_id: str | None = None


class LogsOut(Base, kw_only=True):
    """``GET threads/{id}/logs``."""

    logs: list[LogOut]


class EffectOut(Base, kw_only=True):
    """A pending scheduled effect."""

    id: str
    name: str
    args: dict[str, Any]
    scheduled_at: int
    created_at: int


class EffectsOut(Base, kw_only=True):
    """``GET threads/{id}/effects``."""

    effects: list[EffectOut]


class VariablesRequestOut(Base, kw_only=True):
    """``GET threads/{id}/variables/{request_id}``: what a deferred subagent needs."""

    request_id: str
    parent_thread_id: str
    agent_name: str
    registry_agent_name: str
    required: list[str]
    missing: list[str]


class ProvideVariablesIn(Base, kw_only=True):
    """``POST threads/{id}/variables/{request_id}``."""

    env: dict[str, str]


class ProvideVariablesOut(Base, kw_only=True):
    """The child thread booted with the provided variables."""

    request_id: str
    child_thread_id: str
    status: str


# -- messages -------------------------------------------------------------------------------


class AttachmentIn(Base, kw_only=True):
    """A new file sent with a message, base64 encoded."""

    name: Name
    data: str
    mime_type: Annotated[str, Meta(min_length=1, max_length=200)] = "application/octet-stream"


class PostMessageIn(Base, kw_only=True):
    """``POST threads/{id}/messages``."""

    content: str
    role: Literal["user", "assistant"] = "user"
    attachments: Annotated[list[AttachmentIn], Meta(max_length=50)] = msgspec.field(
        default_factory=list
    )
    silent: bool = False
    output_schema: dict[str, Any] | None = None
    """A JSON Schema the answer of this turn must match (structured output)."""
    model_settings: dict[str, Any] | None = None
    """Sampling and length settings for this turn's model calls (``temperature``,
    ``max_tokens``, ...; see ``ModelSettings``)."""


class AttachmentOut(Base, kw_only=True):
    """A reference to a file in the thread's filesystem."""

    path: str
    name: str
    id: str = ""
    type: Literal["file"] = "file"
    mime_type: str = "application/octet-stream"
    size: int = 0
    width: int | None = None
    height: int | None = None
    description: str | None = None


class ToolCallFunctionOut(Base, kw_only=True):
    """The function of a tool call; ``arguments`` is a JSON string."""

    name: str
    arguments: str


class ToolCallOut(Base, kw_only=True):
    """A tool call on an assistant message."""

    id: str
    function: ToolCallFunctionOut
    type: Literal["function"] = "function"
    extra_content: dict[str, Any] | None = None


class MessageOut(Base, kw_only=True):
    """A stored message (``created_at`` in microseconds)."""

    id: str
    role: Literal["system", "user", "assistant", "tool"]
    thread_id: str | None = None
    content: str | None = None
    name: str | None = None
    tool_calls: list[ToolCallOut] | None = None
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
    attachments: list[AttachmentOut] | None = None
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
    output: Any = None
    """The validated answer of a prompt with an ``output_schema`` (``metadata.output``)."""

    def __post_init__(self) -> None:
        if self.output is None and self.metadata:
            self.output = self.metadata.get("output")


class MessagesOut(Base, kw_only=True):
    """``GET threads/{id}/messages``."""

    messages: list[MessageOut]
    total: int
    has_more: bool


class QueuedOut(Base, kw_only=True):
    """``POST threads/{id}/messages``: accepted, the turn runs in the background."""

    status: Literal["queued"]
    message_id: str
    message: MessageOut


# -- files ----------------------------------------------------------------------------------


class FileOut(Base, kw_only=True):
    """A file or directory of the thread's filesystem."""

    path: str
    name: str
    mime_type: str
    size: int
    is_directory: bool
    created_at: int
    width: int | None = None
    height: int | None = None
    metadata: dict[str, Any] | None = None
    content_hash: str | None = None


class DirectoryOut(Base, kw_only=True):
    """``GET threads/{id}/files``: a directory listing and the filesystem totals."""

    path: str
    entries: list[FileOut]
    total_size: int
    file_count: int


class FilesOut(Base, kw_only=True):
    """``GET threads/{id}/find``."""

    files: list[FileOut]


class GrepMatchOut(Base, kw_only=True):
    """Matching lines of one text file."""

    path: str
    name: str
    matches: list[str]
    line_numbers: list[int]


class GrepOut(Base, kw_only=True):
    """``GET threads/{id}/grep``."""

    results: list[GrepMatchOut]


def convert(value: Any, type_: type[T]) -> T:
    """Convert plain data (``model_dump(mode="json")`` output) to a response struct."""
    return msgspec.convert(value, type_, strict=False)
