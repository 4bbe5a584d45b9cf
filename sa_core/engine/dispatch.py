"""Tool-call dispatch: lifecycle tools, native tools, subprompts, subagents and handoffs."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from sa_core.engine.tools import LIFECYCLE_TOOLS, NOT_AVAILABLE, OfferedTool, run_native
from sa_core.spec import AttachmentRef, SubpromptConfig, ToolCall, ToolResult
from sa_core.spec.schemas import validate_args

if TYPE_CHECKING:
    from sa_core.engine.flow import Flow
    from sa_core.state import ThreadState


async def execute_call(
    flow: Flow,
    call: ToolCall,
    offered: dict[str, OfferedTool],
    tool_message_id: str,
    *,
    allow_any: bool = False,
) -> ToolResult:
    """Run one tool call of a step and return its result (never raises for tool failures)."""
    name = call.name
    arguments = call.arguments
    if "_raw" in arguments and len(arguments) == 1:
        return ToolResult(
            status="error",
            error=f"Tool arguments for {name} were not valid JSON: {arguments['_raw']}",
        )
    tool = offered.get(name)
    if tool is None and allow_any:
        tool = resolve_any_tool(flow.state, name)
    if tool is None:
        hint = ""
        if any(
            t.subagent is not None and t.agent is not None and t.agent.name == name
            for t in offered.values()
        ):
            hint = " Use subagent_create to start this subagent."
        return ToolResult(status="error", error=NOT_AVAILABLE.format(name=name) + hint)
    return await run_offered(flow.state, flow, tool, arguments, call, tool_message_id)


def resolve_any_tool(state: ThreadState, name: str) -> OfferedTool | None:
    """Any tool of the thread's package by name, offered by its prompt or not (queued calls)."""
    from sa_core.engine.tools import resolve_entry

    found = resolve_entry(state.scope, name)
    if found is None and "." in name:
        from sa_core.engine.mcp import resolve_mcp_name

        found = resolve_mcp_name(state.scope, name)
    return found


async def run_offered(
    state: ThreadState,
    flow: Flow | None,
    tool: OfferedTool,
    arguments: dict[str, Any],
    call: ToolCall | None,
    tool_message_id: str | None,
) -> ToolResult:
    """Execute a resolved tool of any kind."""
    if tool.kind == "lifecycle":
        from sa_core.engine.subagent_lifecycle import run_lifecycle_tool

        return await run_lifecycle_tool(state, flow, tool.name, arguments, tool_message_id)
    if tool.kind == "mcp":
        assert tool.mcp is not None
        scope = state.runtime.registry.scope(tool.mcp.package)
        return await state.runtime.mcp.call(scope, tool.mcp, arguments)
    if tool.kind == "native":
        assert tool.native is not None
        with state.tool_env(tool.env, tool.options):
            return await run_native(tool.native, state, arguments)
    _, problems = validate_args(
        tool.parameters if tool.parameters.get("properties") else None, arguments
    )
    if tool.kind == "prompt":
        if tool.prompt is not None and tool.prompt.required_schema is not None:
            _, problems = validate_args(tool.prompt.required_schema, arguments)
        if problems:
            return ToolResult(
                status="error", error="Tool argument validation failed: " + "; ".join(problems)
            )
        from sa_core.engine.subprompts import run_subprompt

        return await run_subprompt(state, flow, tool, arguments, tool_message_id)
    if problems:
        return ToolResult(
            status="error", error="Tool argument validation failed: " + "; ".join(problems)
        )
    if tool.kind == "subagent":
        from sa_core.engine.subagents import run_subagent_tool

        return await run_subagent_tool(state, flow, tool, arguments, tool_message_id)
    return await _handoff(state, flow, tool, arguments)


async def _handoff(
    state: ThreadState, flow: Flow | None, tool: OfferedTool, arguments: dict[str, Any]
) -> ToolResult:
    from sa_core.engine.files import attachment_paths, existing_refs
    from sa_core.engine.flow import PendingHandoff

    if flow is None or flow.depth > 0:
        return ToolResult(
            status="error", error="Handoffs are only possible from a thread's main flow."
        )
    assert tool.agent is not None and tool.agent_scope is not None
    config = tool.subprompt or SubpromptConfig(name=tool.name)
    message = None
    if config.init_user_message_property:
        value = arguments.get(config.init_user_message_property)
        message = (
            value if isinstance(value, str) else (json.dumps(value) if value is not None else None)
        )
    refs: list[AttachmentRef] = []
    if config.init_attachments_property:
        refs, missing = await existing_refs(
            state.runtime.store,
            state.thread_id,
            attachment_paths(arguments.get(config.init_attachments_property)),
        )
        if missing:
            return ToolResult(
                status="error",
                error="Provided attachment path(s) not found in this thread: " + ", ".join(missing),
            )
    flow.pending_handoff = PendingHandoff(
        agent_name=tool.agent.name,
        package=tool.agent_scope.package,
        arguments=arguments,
        init_message=message,
        init_attachments=refs,
    )
    return ToolResult(status="success", result="Handoff complete")


async def invoke_tool(state: ThreadState, name: str, arguments: dict[str, Any]) -> ToolResult:
    """``state.invoke_tool``: run one tool through the dispatcher; store no tool message."""
    flow = state.execution
    if name in LIFECYCLE_TOOLS:
        from sa_core.engine.subagent_lifecycle import run_lifecycle_tool

        return await run_lifecycle_tool(state, flow, name, arguments, None)
    tool = resolve_any_tool(state, name)
    if tool is None:
        return ToolResult(status="error", error=f"Tool not found: {name}")
    return await run_offered(state, flow, tool, arguments, None, None)
