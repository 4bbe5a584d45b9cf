"""Subprompts: a prompt listed in another prompt's tools runs as one nested LLM step.

The nested flow runs on the same thread at ``depth + 1`` with ``parent_id`` set to the calling
tool message, so its messages are stored but never enter the parent's context. The result
string honours ``include_text_response``, ``include_tool_calls`` and ``include_errors``
(spec reference §6.6).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sa_core.engine.files import attachment_paths, attachments_named
from sa_core.engine.messages import create_message, new_message
from sa_core.engine.model.pastcontext import without_past_tools
from sa_core.engine.tools.tools import argument_text
from sa_core.engine.turn import flow as turn_loop
from sa_core.spec import AttachmentRef, Message, SubpromptConfig, ToolResult

if TYPE_CHECKING:
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.threads import ThreadRef
    from sa_core.engine.tools.tools import OfferedTool
    from sa_core.engine.turn.flow import Flow

FAILED_PREFIX = "Failed to execute tool: "


async def initial_input(
    kernel: Kernel, thread: ThreadRef, config: SubpromptConfig, arguments: dict[str, Any]
) -> tuple[str | None, list[AttachmentRef]] | ToolResult:
    """The first message a subprompt or a handoff starts with, read from the call's arguments.

    ``init_user_message_property`` names its text, ``init_attachments_property`` the thread's
    files it attaches; a file that does not exist is the call's error result.
    """
    text = None
    if config.init_user_message_property:
        text = argument_text(arguments.get(config.init_user_message_property))
    if not config.init_attachments_property:
        return text, []
    paths = attachment_paths(arguments.get(config.init_attachments_property))
    named = await attachments_named(kernel.store, thread.thread_id, paths)
    return named if isinstance(named, ToolResult) else (text, named)


async def run_subprompt(
    kernel: Kernel,
    thread: ThreadRef,
    parent: Flow | None,
    tool: OfferedTool,
    arguments: dict[str, Any],
    tool_message_id: str | None,
) -> ToolResult:
    """Run the subprompt and format its result."""
    assert tool.prompt is not None
    config = tool.subprompt or SubpromptConfig(name=tool.name)
    prompt = tool.prompt
    depth = (parent.depth if parent is not None else 0) + 1
    try:
        sub_thread = await kernel.threads.ref_for(thread.row)
        initial: list[Message] = []
        if prompt.include_chat:
            initial = list(await kernel.store.history(thread.thread_id))
            if not prompt.include_past_tools:
                initial = without_past_tools(initial)
        flow = turn_loop.Flow(
            kernel,
            sub_thread,
            "a",
            depth=depth,
            parent_message_id=tool_message_id,
            prompt_override=prompt,
            initial_messages=initial,
        )
        start = await initial_input(kernel, thread, config, arguments)
        if isinstance(start, ToolResult):
            return start
        text, refs = start
        if text is not None or refs:
            message = new_message(
                thread.thread_id,
                "user",
                text or "",
                attachments=refs or None,
                depth=depth,
                parent_id=tool_message_id,
            )
            flow.remember(await create_message(flow.kernel, flow.thread, message))
        await flow.run()
    except Exception as exc:
        detail = str(exc) if config.include_errors else "Tool execution failed"
        return ToolResult(status="error", error=f"Error: {detail}")
    return format_result(config, flow)


def format_result(config: SubpromptConfig, flow: Flow) -> ToolResult:
    """The spec's subprompt result string from the nested flow's messages."""
    created = [m for m in flow.messages if m.parent_id == flow.parent_message_id]
    tool_rows = [m for m in created if m.role == "tool"]
    calls = [c for m in created if m.role == "assistant" and m.tool_calls for c in m.tool_calls]
    errors = [r for r in tool_rows if r.tool_status == "error"]
    attachments = [a for m in created if m.role == "assistant" for a in (m.attachments or [])]
    if errors:
        lines = [f"Sub-prompt failed with {len(errors)} error(s):"]
        if config.include_errors:
            for row in errors:
                message = row.content or ""
                if message.startswith(FAILED_PREFIX):
                    message = message[len(FAILED_PREFIX) :]
                lines.append(f"  {row.name}: {message}")
        if config.include_tool_calls:
            others = [r.name or "" for r in tool_rows if r.tool_status != "error"]
            if others:
                lines.append(f"Other tools run: {', '.join(others)}")
        return ToolResult(status="error", error="\n".join(lines))
    parts: list[str] = []
    if config.include_text_response:
        text = flow.last_text or next(
            (m.content for m in reversed(created) if m.role == "assistant" and m.content), ""
        )
        if text:
            parts.append(text)
    block: list[str] = []
    if config.include_tool_calls:
        block += [f"Tool Call: {c.name}({c.function.arguments})" for c in calls]
    for row in tool_rows:
        if config.include_tool_calls:
            block.append(f"Tool Response: {row.content}")
    if block:
        parts.append("Tool Executions:\n" + "\n".join(block))
    result = "\n\n".join(parts) or "Prompt executed successfully"
    return ToolResult(status="success", result=result, attachments=list(attachments))
