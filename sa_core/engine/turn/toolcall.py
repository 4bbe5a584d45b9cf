"""Running a step's tool calls: one call from the approval gate to its row; queued tools.

Tools queued with ``state.queue_tool`` run as calls of their own (:func:`run_queued_tools`).

A call first passes the approval gate (:func:`sa_core.engine.tools.approvals.gate`), then runs
(``tool_call_started``/``tool_call_done`` frames, the ``after_tool_call_*`` hooks), and its
result becomes a tool row (:func:`sa_core.engine.tools.toolrows.store_tool_row`).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from sa_core.engine.flowtypes import SIDE_ROLE
from sa_core.engine.frames import emit
from sa_core.engine.messages import create_message, new_id, new_message
from sa_core.engine.model.context import dumps_compact
from sa_core.engine.subagents.subagent_report import forward_status
from sa_core.engine.tools.approvals import gate
from sa_core.engine.tools.toolrows import as_result, refused_on_resume, store_tool_row
from sa_core.engine.tools.tools import OfferedTool
from sa_core.engine.turn import dispatch
from sa_core.spec import Message, PromptDefinition, Side, SideConfig, ToolCall, ToolCallFunction
from sa_core.store.packitems import StoreWrites
from sa_core.telemetry import tool_call

if TYPE_CHECKING:
    from sa_core.engine.turn.flow import Flow

QUEUED_TOOLS = "queued_tools"
"""Metadata key (``True``) of the message carrying the calls of tools queued with
``state.queue_tool``: a message of the acting side with no content of its own."""


async def run_queued_tools(
    flow: Flow,
    side: Side,
    prompt: PromptDefinition,
    offered: dict[str, OfferedTool],
    config: SideConfig,
) -> list[Message]:
    """Run the tools queued with ``state.queue_tool`` as regular, paired tool calls.

    Each batch (the tools queued so far) is first stored as a message of the acting side
    carrying the calls, marked ``metadata.queued_tools``; it commits before the tools run,
    as a model step does. Each tool's result then commits as its tool message when it
    finishes, so every later context pairs the call with its result. Tools queued while a
    batch runs form the next batch.

    Returns:
        The tool messages stored, in order.
    """
    rows: list[Message] = []
    while flow.queued_tools:
        batch, flow.queued_tools = flow.queued_tools, []
        calls = [
            ToolCall(
                id=f"queued_{uuid.uuid4().hex[:8]}",
                function=ToolCallFunction(name=name, arguments=dumps_compact(args)),
            )
            for name, args in batch
        ]
        carrier = new_message(
            flow.thread.thread_id,
            SIDE_ROLE[side],
            None,
            tool_calls=calls,
            status="completed",
            depth=flow.depth,
            parent_id=flow.parent_message_id,
            prompt=prompt.name,
            metadata={QUEUED_TOOLS: True},
        )
        flow.remember(await create_message(flow.kernel, flow.thread, carrier))
        flow.await_answers(calls, more=True)
        for call in calls:
            row = await run_call(flow, call, offered, config, allow_any=True)
            if row is not None:
                rows.append(row)
    return rows


async def run_call(
    flow: Flow,
    call: ToolCall,
    offered: dict[str, OfferedTool],
    config: SideConfig,
    *,
    allow_any: bool = False,
    attempt: int = 1,
) -> Message | None:
    """Run one tool call and store its row; ``None`` when it was parked for approval.

    ``allow_any``: a queued call, looked up in the package when the prompt does not offer it.
    ``attempt``: the run this is (2 when a restart interrupted the first).
    From the run to the row, writes to the pack's store are held (``thread.store_writes``)
    and commit with the row (see :func:`~sa_core.engine.tools.toolrows.store_tool_row`).
    """
    held = await gate(flow, call, offered, config)
    if held is not False:
        return held  # parked for approval (None), or refused inside a subprompt
    thread = flow.thread
    outer, thread.store_writes = thread.store_writes, StoreWrites()
    try:
        return await _run_gated(flow, call, offered, config, allow_any, attempt)
    finally:
        thread.store_writes = outer


async def _run_gated(
    flow: Flow,
    call: ToolCall,
    offered: dict[str, OfferedTool],
    config: SideConfig,
    allow_any: bool,
    attempt: int,
) -> Message:
    """Run a call past the approval gate, its hooks, and store its row with its writes."""
    kernel = flow.kernel
    state = flow.state
    tool_message_id = new_id()
    if kernel.events.has_listeners:  # the frames' data is built only for a listener
        emit(kernel, flow.thread, "tool_call_started", {"id": call.id, "name": call.name})
    result = refused_on_resume(flow, call, offered, attempt, allow_any=allow_any)
    if result is None:
        thread = flow.thread
        thread.tool_call_id, thread.tool_attempt = call.id, attempt
        try:
            result = await tool_call(
                state,
                call,
                dispatch.execute_call(flow, call, offered, tool_message_id, allow_any=allow_any),
            )
        finally:
            thread.tool_call_id, thread.tool_attempt = None, 1
    if kernel.events.has_listeners:
        done = {"id": call.id, "name": call.name, "status": result.status}
        emit(kernel, flow.thread, "tool_call_done", done)
    hooks = kernel.host.hooks
    succeeded = result.status == "success"
    after = "after_tool_call_success" if succeeded else "after_tool_call_failure"
    if kernel.wants_hook(after, flow.thread):
        if succeeded:
            replaced = await hooks.after_tool_call_success(state, call, result)
        else:
            replaced = await hooks.after_tool_call_failure(state, call, result)
        result = as_result(replaced, result)
    if config.session_status is not None and call.name == config.session_status.name:
        await forward_status(flow, call, result, config.session_status)
    return await store_tool_row(
        flow, call, result, config, message_id=tool_message_id, writes=flow.thread.store_writes
    )
