"""What a step offers the model: the prompt's tools and the subagent lifecycle tools.

The prompt's tools are gated by their optional flags; resumable subagents add
``subagent_create``, ``subagent_message`` and ``subagents``.

Low in the engine on purpose: the turn (:mod:`sa_core.engine.turn.step`), approvals, resume and
the tool rows ask for the offered (or any resolvable) tools without importing what runs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sa_core.engine.oneshot import addressable
from sa_core.engine.tools.mcp import resolve_mcp_name
from sa_core.engine.tools.tools import OfferedTool, flag_enabled, resolve_entry

if TYPE_CHECKING:
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.threads import ThreadRef
    from sa_core.engine.tools.tools import ToolTable
    from sa_core.registry import PackScope
    from sa_core.spec import PromptDefinition


def resolve_any_tool(kernel: Kernel, thread: ThreadRef, name: str) -> OfferedTool | None:
    """Any tool of the thread's package by name, offered by its prompt or not (queued calls)."""
    scope = kernel.scope_of(thread)
    found = resolve_entry(scope, name)
    if found is None and "." in name:
        found = resolve_mcp_name(scope, name)
    return found


def enabled(kernel: Kernel, thread: ThreadRef, tool: OfferedTool) -> bool:
    """Whether a tool's ``optional`` flag (a variable), if any, is on for the thread."""
    return tool.optional is None or flag_enabled(kernel.env_of(thread, tool.optional))


def offered_tools(
    kernel: Kernel, thread: ThreadRef, scope: PackScope, prompt: PromptDefinition, side: str
) -> dict[str, OfferedTool]:
    """The tools a step offers: the table, gated by optional flags, plus lifecycle tools."""
    table = kernel.caches.tool_table(scope, prompt)
    offered = {
        name: tool
        for name, tool in table.tools.items()
        if enabled(kernel, thread, tool)
        and not (tool.subagent is not None and tool.subagent.is_resumable)
    }
    offered.update(lifecycle_tools(kernel, thread, table))
    return offered


def subagent_tools(kernel: Kernel, thread: ThreadRef, table: ToolTable) -> dict[str, OfferedTool]:
    """Subagent relationships of a prompt, enabled by their optional flags, by agent name."""
    return {
        name: tool
        for name, tool in table.tools.items()
        if tool.kind == "subagent" and enabled(kernel, thread, tool)
    }


def lifecycle_tools(kernel: Kernel, thread: ThreadRef, table: ToolTable) -> dict[str, OfferedTool]:
    """The lifecycle tools (create, message, terminate, list) when resumable branches exist."""
    resumable = [
        t
        for t in subagent_tools(kernel, thread, table).values()
        if t.subagent is not None and t.subagent.is_resumable
    ]
    reachable = addressable(thread.children)  # only resumable instances take messages
    if not resumable and not reachable:
        return {}
    offered: dict[str, OfferedTool] = {}
    if resumable:
        arg_schemas = [t.parameters for t in resumable if t.parameters.get("properties")]
        properties: dict[str, Any] = {
            "agent": {
                "type": "string",
                "enum": [t.name for t in resumable],
                "description": "Which subagent to create.",
            },
            "name": {"type": "string", "description": "A short, unique name for this instance."},
            "message": {"type": "string", "description": "The instruction for the subagent."},
            "attachments": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Paths under /attachments/ to pass along (use [] when none).",
            },
        }
        if arg_schemas:
            properties["arguments"] = {"type": "object", "anyOf": arg_schemas}
        descriptions = "; ".join(f"{t.name}: {t.description}" for t in resumable)
        offered["subagent_create"] = OfferedTool(
            name="subagent_create",
            kind="lifecycle",
            description=f"Create a persistent subagent instance. Available: {descriptions}",
            parameters={
                "type": "object",
                "properties": properties,
                "required": ["agent", "name", "message", "attachments"],
            },
        )
    if reachable or resumable:
        offered["subagent_message"] = OfferedTool(
            name="subagent_message",
            kind="lifecycle",
            description="Send a message to an existing subagent instance by its reference.",
            parameters={
                "type": "object",
                "properties": {
                    "referenceId": {"type": "string"},
                    "message": {"type": "string"},
                    "attachments": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["referenceId", "message", "attachments"],
            },
        )
        offered["subagent_terminate"] = OfferedTool(
            name="subagent_terminate",
            kind="lifecycle",
            description="Terminate a subagent instance for good (a remote agent's task is "
            "cancelled); it takes no more messages.",
            parameters={
                "type": "object",
                "properties": {"referenceId": {"type": "string"}},
                "required": ["referenceId"],
            },
        )
    offered["subagents"] = OfferedTool(
        name="subagents",
        kind="lifecycle",
        description="List this thread's subagent instances with their status.",
        parameters={"type": "object", "properties": {}},
    )
    return offered
