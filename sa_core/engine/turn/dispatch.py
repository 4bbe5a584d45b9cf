"""Tool-call dispatch: lifecycle tools, native tools, subprompts, subagents and handoffs."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, cast

from sa_core.engine.flowtypes import PendingHandoff
from sa_core.engine.subagents import subagent_lifecycle, subagents
from sa_core.engine.threads import tool_config
from sa_core.engine.tools.offered import resolve_any_tool
from sa_core.engine.tools.tools import (
    LIFECYCLE_TOOLS,
    NOT_AVAILABLE,
    OfferedTool,
    run_native,
)
from sa_core.engine.turn import replay_tools, subprompts
from sa_core.spec import SubpromptConfig, ToolCall, ToolResult
from sa_core.spec.schemas import validate_args

if TYPE_CHECKING:
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.threads import ThreadRef
    from sa_core.engine.turn.flow import Flow


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
        tool = resolve_any_tool(flow.kernel, flow.thread, name)
    if tool is None:
        hint = ""
        if any(
            t.subagent is not None and t.agent is not None and t.agent.name == name
            for t in offered.values()
        ):
            hint = " Use subagent_create to start this subagent."
        return ToolResult(status="error", error=NOT_AVAILABLE.format(name=name) + hint)
    return await run_offered(flow.kernel, flow.thread, flow, tool, arguments, tool_message_id)


async def run_offered(
    kernel: Kernel,
    thread: ThreadRef,
    flow: Flow | None,
    tool: OfferedTool,
    arguments: dict[str, Any],
    tool_message_id: str | None,
) -> ToolResult:
    """Execute a resolved tool of any kind (user code gets the thread's ``ThreadState``)."""
    if tool.kind == "lifecycle":
        return await subagent_lifecycle.run_lifecycle_tool(
            kernel, thread, flow, tool.name, arguments, tool_message_id
        )
    if kernel.replays.active and tool.kind in ("mcp", "native"):
        cursor = kernel.replays.cursor(thread)
        if cursor is not None:  # a replay: the recorded result, or the tool run again

            def execute() -> Awaitable[ToolResult]:
                return _execute(kernel, thread, tool, arguments)

            return await replay_tools.run_tool(kernel, cursor, thread, tool, arguments, execute)
    if tool.kind == "mcp":
        assert tool.mcp is not None
        scope = kernel.registry.scope(tool.mcp.package)
        return await kernel.mcp.call(scope, tool.mcp, arguments)
    if tool.kind == "native":  # (as _execute, without its frame on the hot path)
        assert tool.native is not None
        with tool_config(thread, tool.env, tool.options):
            return await run_native(tool.native, kernel.user_state(thread), arguments)
    if tool.kind == "client":  # parked by the gate; never run here
        return ToolResult(
            status="error", error=f"Tool '{tool.name}' is a client tool: the client runs it."
        )
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
        return await subprompts.run_subprompt(
            kernel, thread, flow, tool, arguments, tool_message_id
        )
    if problems:
        return ToolResult(
            status="error", error="Tool argument validation failed: " + "; ".join(problems)
        )
    if tool.kind == "subagent":
        return await subagents.run_subagent_tool(
            kernel, thread, flow, tool, arguments, tool_message_id
        )
    return await _handoff(kernel, thread, flow, tool, arguments)


async def _execute(
    kernel: Kernel, thread: ThreadRef, tool: OfferedTool, arguments: dict[str, Any]
) -> ToolResult:
    """Run a native or MCP tool (user code gets the thread's ``ThreadState``) for a replay."""
    if tool.kind == "mcp":
        assert tool.mcp is not None
        scope = kernel.registry.scope(tool.mcp.package)
        return await kernel.mcp.call(scope, tool.mcp, arguments)
    assert tool.native is not None
    with tool_config(thread, tool.env, tool.options):
        return await run_native(tool.native, kernel.user_state(thread), arguments)


async def _handoff(
    kernel: Kernel,
    thread: ThreadRef,
    flow: Flow | None,
    tool: OfferedTool,
    arguments: dict[str, Any],
) -> ToolResult:
    if flow is None or flow.depth > 0:
        return ToolResult(
            status="error", error="Handoffs are only possible from a thread's main flow."
        )
    assert tool.agent is not None and tool.agent_scope is not None
    config = tool.subprompt or SubpromptConfig(name=tool.name)
    start = await subprompts.initial_input(kernel, thread, config, arguments)
    if isinstance(start, ToolResult):
        return start
    message, refs = start
    flow.pending_handoff = PendingHandoff(
        agent_name=tool.agent.name,
        package=tool.agent_scope.package,
        arguments=arguments,
        init_message=message,
        init_attachments=refs,
    )
    return ToolResult(status="success", result="Handoff complete")


async def invoke_tool(
    kernel: Kernel, thread: ThreadRef, name: str, arguments: dict[str, Any]
) -> ToolResult:
    """``state.invoke_tool``: run one tool through the dispatcher; store no tool message."""
    flow = cast("Flow | None", thread.execution)  # only ever the engine's own flow
    if name in LIFECYCLE_TOOLS:
        return await subagent_lifecycle.run_lifecycle_tool(
            kernel, thread, flow, name, arguments, None
        )
    tool = resolve_any_tool(kernel, thread, name)
    if tool is None:
        return ToolResult(status="error", error=f"Tool not found: {name}")
    return await run_offered(kernel, thread, flow, tool, arguments, None)
