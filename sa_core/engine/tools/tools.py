"""Tool tables and native tool execution.

A prompt's ``tools`` entries resolve once per (package, prompt) into :class:`OfferedTool` rows:
native tools, prompts (subprompts), ``ai_human`` agents (handoffs) and ``dual_ai`` agents
(subagents). JSON schemas are computed here, never per step.
"""

from __future__ import annotations

import functools
import inspect
import json
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from sa_core.engine.threads import NO_TOOL_OPTIONS
from sa_core.providers import ProviderTool
from sa_core.spec import (
    AgentDefinition,
    PromptDefinition,
    PromptToolConfig,
    SubagentToolConfig,
    SubpromptConfig,
    ToolDefinition,
    ToolEntry,
    ToolResult,
    tool_entry_name,
)
from sa_core.spec.mcp import split_mcp_name
from sa_core.spec.plainbuild import PlainBuilder
from sa_core.spec.schemas import EMPTY_OBJECT_SCHEMA, json_schema_of, validate_args

if TYPE_CHECKING:
    from sa_core.registry import PackScope

ToolKind = Literal["native", "prompt", "handoff", "subagent", "lifecycle", "mcp", "client"]
LIFECYCLE_TOOLS = ("subagent_create", "subagent_message", "subagent_terminate", "subagents")
NOT_AVAILABLE = (
    'Tool "{name}" is not available for this prompt. You can only use tools that were '
    "explicitly configured for this prompt."
)


def argument_text(value: Any) -> str | None:
    """A tool call's argument as message text: a string as is, other values as JSON.

    ``None`` (the argument absent or null) stays ``None``.
    """
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value)


@dataclass(frozen=True, slots=True)
class McpToolRef:
    """The server and remote tool name behind an offered MCP tool."""

    package: str
    server: str
    tool: str


@dataclass(slots=True)
class OfferedTool:
    """One callable a prompt offers, resolved."""

    name: str
    kind: ToolKind
    description: str
    parameters: dict[str, Any]
    optional: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=lambda: NO_TOOL_OPTIONS)
    native: ToolDefinition | None = None
    prompt: PromptDefinition | None = None
    subprompt: SubpromptConfig | None = None
    agent: AgentDefinition | None = None
    agent_scope: PackScope | None = None
    subagent: SubagentToolConfig | None = None
    mcp: McpToolRef | None = None
    requires_approval: bool = False
    strict: bool = False
    """A client tool declared ``strict`` (its provider tool asks for exact arguments)."""
    provider_form: ProviderTool | None = field(default=None, init=False, repr=False, compare=False)
    """The tool as requests offer it, made once (:meth:`as_provider_tool`)."""

    def as_provider_tool(self) -> ProviderTool:
        """The tool as a provider request offers it: one object, shared by every request.

        Requests are read-only for providers, so sharing it is safe; the recorder of model
        calls then finds a request's tools unchanged by identity.
        """
        made = self.provider_form
        if made is None:
            made = ProviderTool(self.name, self.description, self.parameters, self.strict)
            self.provider_form = made
        return made


@dataclass(slots=True)
class ToolTable:
    """Everything a prompt offers, by model-visible name."""

    tools: dict[str, OfferedTool]
    unresolved: list[str]

    @property
    def has_resumable_subagents(self) -> bool:
        """Whether lifecycle tools must be offered."""
        return any(t.subagent is not None and t.subagent.is_resumable for t in self.tools.values())


def _init_schema(entry: SubpromptConfig | SubagentToolConfig | None) -> dict[str, Any]:
    """A schema built from init_* properties, for targets without a required_schema."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    if entry is not None:
        if entry.init_user_message_property:
            properties[entry.init_user_message_property] = {
                "type": "string",
                "description": "The message to send.",
            }
            required.append(entry.init_user_message_property)
        if entry.init_attachments_property:
            properties[entry.init_attachments_property] = {
                "type": "array",
                "items": {"type": "string"},
                "description": "Paths of files under /attachments/ to pass along.",
            }
        name_prop = getattr(entry, "init_agent_name_property", None)
        if name_prop:
            properties[name_prop] = {"type": "string", "description": "A name for the instance."}
            required.append(name_prop)
    if not properties:
        return dict(EMPTY_OBJECT_SCHEMA)
    return {"type": "object", "properties": properties, "required": required}


def _schema_for_target(
    required_schema: Any, entry: SubpromptConfig | SubagentToolConfig | None
) -> dict[str, Any]:
    if required_schema is not None:
        return json_schema_of(required_schema)
    return _init_schema(entry)


def _remote_schema(entry: SubagentToolConfig) -> dict[str, Any]:
    """A remote agent's arguments: its init properties, with ``message`` unless one is named."""
    schema = _init_schema(entry)
    if entry.init_user_message_property:
        return schema
    properties = dict(schema.get("properties") or {})
    properties["message"] = {
        "type": "string",
        "description": "The message to send to the remote agent, as it should read it.",
    }
    required = [*(schema.get("required") or []), "message"]
    return {"type": "object", "properties": properties, "required": required}


def build_tool_table(scope: PackScope, prompt: PromptDefinition) -> ToolTable:
    """Resolve a prompt's tool entries in its package."""
    tools: dict[str, OfferedTool] = {}
    unresolved: list[str] = []
    for entry in prompt.tools:
        if is_mcp_entry(scope, entry):
            continue  # expanded from the server's tools/list when a step first needs it
        offered = resolve_entry(scope, entry)
        if offered is None:
            unresolved.append(tool_entry_name(entry))
        else:
            tools[offered.name] = offered
    return ToolTable(tools, unresolved)


def is_mcp_entry(scope: PackScope, entry: ToolEntry) -> bool:
    """Whether a tools entry is ``"<server>.<tool>"`` for an MCP server of the package."""
    parts = split_mcp_name(tool_entry_name(entry))
    return parts is not None and parts[0] in scope.mcp_servers


def resolve_entry(scope: PackScope, entry: ToolEntry) -> OfferedTool | None:
    """Resolve one tools entry: native tool, prompt, or agent (handoff / subagent)."""
    name = tool_entry_name(entry)
    optional = None if isinstance(entry, str) else entry.optional
    if not isinstance(entry, SubagentToolConfig):
        native = scope.tool(name)
        if native is not None:
            return OfferedTool(
                name=name,
                kind="native",
                description=native.description,
                parameters=json_schema_of(native.args),
                optional=optional,
                env=dict(entry.env) if isinstance(entry, PromptToolConfig) else {},
                options=MappingProxyType(dict(entry.options))
                if isinstance(entry, PromptToolConfig) and entry.options
                else NO_TOOL_OPTIONS,
                native=native,
                requires_approval=native.requires_approval
                or (isinstance(entry, PromptToolConfig) and entry.requires_approval),
            )
        if name in scope.prompts:
            target = scope.prompts[name]
            config = entry if isinstance(entry, SubpromptConfig) else SubpromptConfig(name=name)
            return OfferedTool(
                name=name,
                kind="prompt",
                description=target.tool_description or f"Run the {name} prompt.",
                parameters=_schema_for_target(target.required_schema, config),
                optional=optional,
                prompt=target,
                subprompt=config,
            )
    found = scope.find_agent(name)
    if found is None:
        return None
    agent, agent_scope = found
    tool_name = agent.name
    side_a_prompt = agent_scope.prompts.get(agent.side_a.prompt)
    required = side_a_prompt.required_schema if side_a_prompt else None
    if agent.type == "dual_ai":
        relationship: SubagentToolConfig
        if isinstance(entry, SubagentToolConfig):
            relationship = entry
        else:
            relationship = SubagentToolConfig(
                name=name,
                init_user_message_property=getattr(entry, "init_user_message_property", None),
                init_attachments_property=getattr(entry, "init_attachments_property", None),
                optional=optional,
            )
        description = relationship.description or agent.tool_description or agent.description or ""
        remote = agent_scope.remote_agent(agent.name)
        if remote is not None:  # an A2A agent elsewhere: its card describes it
            description = relationship.description or remote.describe()
        return OfferedTool(
            name=tool_name,
            kind="subagent",
            description=description or f"Delegate work to the {agent.name} agent.",
            parameters=_remote_schema(relationship)
            if remote is not None
            else _schema_for_target(required, relationship),
            optional=relationship.optional,
            agent=agent,
            agent_scope=agent_scope,
            subagent=relationship,
        )
    sub = entry if isinstance(entry, SubpromptConfig) else None
    title = agent.title or agent.name
    return OfferedTool(
        name=tool_name,
        kind="handoff",
        description=agent.tool_description or f"Hand off conversation to {title} agent",
        parameters=_schema_for_target(required, sub),
        optional=optional,
        agent=agent,
        agent_scope=agent_scope,
        subprompt=sub,
    )


def flag_enabled(value: str | None) -> bool:
    """The spec's optional-branch test: true / 1 / yes, any case."""
    return value is not None and value.strip().lower() in ("true", "1", "yes")


# ---------------------------------------------------------------------------------------------
# Native execution and result normalisation
# ---------------------------------------------------------------------------------------------


_PLAIN_RESULTS = PlainBuilder(ToolResult)
"""Builds a plain text result directly (see :class:`~sa_core.spec.plainbuild.PlainBuilder`)."""


def normalise_result(value: Any) -> ToolResult:
    """Turn whatever a tool returned into a :class:`ToolResult`.

    A ToolResult or a dict with ``status`` is taken as one (MCP-style ``content`` text parts
    joined by newlines win over ``result``); a str is a success; ``None`` is an empty success;
    anything else is JSON-encoded with a 2-space indent.
    """
    if type(value) is str:  # the common answer, decided before the (ABC) Mapping check
        return _text_result(value)
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, Mapping) and (
        value.get("status") in ("success", "error") or isinstance(value.get("content"), list)
    ):
        data = dict(value)
        content = data.pop("content", None)
        if isinstance(content, list):
            texts = [str(p.get("text", "")) for p in content if isinstance(p, Mapping)]
            if texts:
                data["result"] = "\n".join(texts)
        data.setdefault("status", "success")
        if data.get("result") is not None and not isinstance(data["result"], str):
            data["result"] = json.dumps(data["result"], indent=2, ensure_ascii=False, default=str)
        return ToolResult.model_validate(data)
    if isinstance(value, str):
        return _text_result(value)
    if value is None:
        return ToolResult(status="success")
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    return ToolResult(
        status="success", result=json.dumps(value, indent=2, ensure_ascii=False, default=str)
    )


def _text_result(text: str) -> ToolResult:
    """``ToolResult(status="success", result=text)``."""
    plain = {"status": "success", "result": text}
    return _PLAIN_RESULTS.build(plain) or ToolResult(**plain)


def error_result(exc: BaseException) -> ToolResult:
    """A ToolResult for a raised exception."""
    message = str(exc) or type(exc).__name__
    return ToolResult(
        status="error",
        error=message,
        stack="".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-4000:],
    )


async def run_native(tool: ToolDefinition, state: Any, arguments: dict[str, Any]) -> ToolResult:
    """Validate arguments and run a native tool; failures become error results."""
    value, problems = validate_args(tool.args, arguments)
    if problems:
        return ToolResult(
            status="error",
            error="Tool argument validation failed: " + "; ".join(problems),
            error_code="invalid_arguments",
        )
    try:
        outcome = (
            tool.execute(state, value)
            if tool.args is not None
            else _call_no_args(tool, state, value)
        )
        if type(outcome) is not str and inspect.isawaitable(outcome):  # (text is never)
            outcome = await outcome
        return normalise_result(outcome)
    except Exception as exc:
        return error_result(exc)


def _call_no_args(tool: ToolDefinition, state: Any, value: Any) -> Any:
    """Tools without args take ``(state)``; accept ``(state, args)`` too."""
    execute = tool.execute
    try:
        takes_args = _takes_args(execute)
    except TypeError:  # an unhashable callable: inspect it every time
        takes_args = _takes_args.__wrapped__(execute)
    if takes_args:
        return execute(state, value)
    return execute(state)


@functools.lru_cache(maxsize=1024)
def _takes_args(execute: Callable[..., Any]) -> bool:
    """Whether a tool function accepts a second positional argument (cached per function)."""
    try:
        params = inspect.signature(execute).parameters
    except (TypeError, ValueError):
        return True
    positional = [
        p for p in params.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params.values())


def result_text(result: ToolResult, mapped_message: str | None = None) -> str:
    """The stored tool-message content for a result (spec §6.5)."""
    if result.status == "success":
        if mapped_message:
            return mapped_message
        text = (result.result or "").strip()
        return text or "Tool executed successfully"
    return f"Failed to execute tool: {result.error or 'unknown error'}"
