"""The lifecycle tools: create, message, terminate and list subagent instances.

``subagent_create``, ``subagent_message``, ``subagent_terminate`` and ``subagents``.
Offered to a prompt when it has resumable subagent relationships or live resumable instances
(:func:`lifecycle_tools`), and run by :func:`run_lifecycle_tool`. Creating and messaging an
instance is :mod:`sa_core.engine.subagents.subagent_spawn`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sa_core.engine.files import attachment_paths
from sa_core.engine.subagents.subagent_spawn import create, message_instance, terminate_instance
from sa_core.engine.tools.offered import subagent_tools
from sa_core.engine.tools.tools import LIFECYCLE_TOOLS
from sa_core.spec import ToolResult

if TYPE_CHECKING:
    from sa_core.engine.flowview import SubagentFlow
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.threads import ThreadRef
    from sa_core.engine.tools.tools import ToolTable


def _current_table(kernel: Kernel, thread: ThreadRef) -> ToolTable | None:
    prompt = thread.prompt
    if prompt is None:
        return None
    return kernel.caches.tool_table(kernel.scope_of(thread), prompt)


async def run_lifecycle_tool(
    kernel: Kernel,
    thread: ThreadRef,
    flow: SubagentFlow | None,
    name: str,
    arguments: dict[str, Any],
    tool_message_id: str | None,
) -> ToolResult:
    """``subagent_create``, ``subagent_message``, ``subagent_terminate`` and ``subagents``."""
    if name == "subagents":
        return list_instances(thread)
    if name == "subagent_message":
        return await message_instance(kernel, thread, arguments)
    if name == "subagent_terminate":
        return await terminate_instance(kernel, thread, arguments)
    if name != "subagent_create":
        return ToolResult(status="error", error=f"Tool not found: {name}")
    problems = []
    agent_name = arguments.get("agent")
    if not isinstance(agent_name, str) or not agent_name:
        problems.append("subagent_create requires agent.")
    message = arguments.get("message")
    if not isinstance(message, str) or not message.strip():
        problems.append("subagent_create requires message.")
    attachments = arguments.get("attachments")
    if not isinstance(attachments, list):
        problems.append("subagent_create requires attachments (use [] when none).")
    instance = arguments.get("name")
    if not isinstance(instance, str) or not instance.strip():
        problems.append("subagent_create requires name.")
    extra = arguments.get("arguments")
    if extra is not None and not isinstance(extra, dict):
        problems.append("subagent_create arguments must be an object when provided.")
    if problems:
        return ToolResult(status="error", error=" ".join(problems))
    table = _current_table(kernel, thread)
    options = subagent_tools(kernel, thread, table) if table is not None else {}
    tool = options.get(str(agent_name))
    if tool is None or tool.subagent is None or not tool.subagent.is_resumable:
        available = [
            n for n, t in options.items() if t.subagent is not None and t.subagent.is_resumable
        ]
        return ToolResult(
            status="error",
            error=f'Unknown subagent "{agent_name}". Available: {", ".join(available) or "none"}.',
        )
    return await create(
        kernel,
        thread,
        flow,
        tool,
        message=str(message),
        paths=attachment_paths(attachments),
        name=str(instance).strip(),
        arguments=dict(extra or {}),
        tool_message_id=tool_message_id,
    )


def list_instances(thread: ThreadRef) -> ToolResult:
    """``subagents``: this thread's instances with their status."""
    if not thread.children:
        return ToolResult(status="success", result="No active subagent instances.")
    lines = ["Active subagent instances:"]
    for entry in list(thread.children):  # the relationship (agent) name, never the instance name
        lines.append(f"- {entry.reference}: {entry.name} — {entry.status} ({entry.description})")
    lines.append("Message one with subagent_message(referenceId, message).")
    return ToolResult(status="success", result="\n".join(lines))


__all__ = ["LIFECYCLE_TOOLS", "list_instances", "run_lifecycle_tool"]
