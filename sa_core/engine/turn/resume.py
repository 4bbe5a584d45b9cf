"""Resuming a flow a crash or shutdown interrupted, from its last committed point.

The thread's execution record (:class:`sa_core.store.executions.ResumePoint`) says where the
flow stood: which side acts, the turn and step counters, and the model step committed last.
Resuming never asks the model for a response already stored and never runs a tool call whose
result is stored:

* model calls that were streaming (``pending`` rows) are marked ``failed`` with
  :data:`INTERRUPTED_CALL` and made again;
* the last step's calls without a result run now, in order, then those of the tools it
  queued with ``state.queue_tool`` (stored before they ran); the call that was running at the
  crash runs again at most once (``state.tool_attempt == 2``), or gets the failed result
  ``Interrupted by a restart before it finished.`` when its tool says ``retry_on_resume=False``;
  a blocking subagent call re-attaches to the child it created;
* a handoff whose tool call succeeded but that was not performed yet is performed;
* then the step's stop conditions are evaluated as if it had just finished.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sa_core.engine.flowtypes import StepResult
from sa_core.engine.messages import update_message
from sa_core.engine.tools.offered import offered_tools
from sa_core.engine.tools.toolrows import store_error_row
from sa_core.engine.turn import clienttools, dispatch, toolcall
from sa_core.engine.turn import step as turn_step
from sa_core.spec import Message, Side, SideConfig, ToolCall

if TYPE_CHECKING:
    from sa_core.engine.turn.flow import Flow
    from sa_core.store.execution_record import ResumePoint

INTERRUPTED_CALL = "Interrupted by a restart while the model was answering; the call was made again"
"""Error of an assistant row whose model call a crash cut off (the row stays ``failed``)."""


async def mark_interrupted_calls(flow: Flow) -> None:
    """Mark the thread's ``pending`` assistant rows failed: their model call never finished."""
    for message_id in await flow.kernel.store.pending_message_ids(flow.thread.thread_id):
        await update_message(
            flow.kernel,
            flow.thread,
            message_id,
            {"status": "failed", "metadata": {"error": INTERRUPTED_CALL, "interrupted": True}},
        )


async def resume_step(flow: Flow, point: ResumePoint) -> tuple[Side, SideConfig, StepResult] | None:
    """Restore a flow at ``point``; finish the committed step whose calls lack results.

    Returns:
        ``(side, side config, step)`` when a committed step was finished (its stops still to
        be evaluated), else ``None`` (the flow continues with a fresh step on ``point.side``).
    """
    flow.current_side = point.side
    flow.turns = {"a": int(point.turns.get("a", 0)), "b": int(point.turns.get("b", 0))}
    flow.step_count = point.step_count
    steps = point.side_steps
    flow.side_steps = {"a": int(steps.get("a", 0)), "b": int(steps.get("b", 0))}
    await mark_interrupted_calls(flow)
    history = await flow.kernel.store.history(flow.thread.thread_id, since=point.since - 1)
    flow.messages = [m for m in history if m.parent_id is None]
    flow.read_turn(flow.messages)  # the turn's output schema and client tools
    if point.step_message_id is None:
        return None
    if flow.client_tools is not None:  # a forced tool_choice applied to the step taken
        flow.client_tools = flow.client_tools.relaxed()
    message = next((m for m in flow.messages if m.id == point.step_message_id), None)
    config = flow.side_config(point.side)
    if message is None or message.status != "completed" or config is None:
        return None
    prompt = turn_step.prompt_for(flow, config)
    flow.thread.prompt = prompt
    flow.prompt_path = [prompt.name]
    offered = offered_tools(flow.kernel, flow.thread, flow.scope, prompt, point.side)
    if flow.client_tools is not None:  # a client call without a result parks again
        clienttools.offer(flow.client_tools, offered)
    calls = [
        c if isinstance(c, ToolCall) else ToolCall.model_validate(c)
        for c in message.tool_calls or []
    ]
    queued = _queued_calls(flow.messages, message)
    answered = {m.tool_call_id: m for m in flow.messages if m.role == "tool" and m.tool_call_id}
    tool_rows: list[Message] = [answered[c.id] for c in (*calls, *queued) if c.id in answered]
    unanswered = [c for c in (*calls, *queued) if c.id not in answered]
    queued_ids = {c.id for c in queued}
    for call in calls:
        tool = offered.get(call.name)
        done = answered.get(call.id)
        if tool is not None and tool.kind == "handoff" and done and done.tool_status == "success":
            # the handoff itself commits with a new resume point: it is still to be performed
            await dispatch.run_offered(flow.kernel, flow.thread, flow, tool, call.arguments, None)
    flow.await_answers(unanswered)
    for index, call in enumerate(unanswered):
        # the first call without a result may have been running; later ones never started
        started = point.attempts.get(call.id, 1 if index == 0 else 0)
        attempt = started + 1 if started else 1
        point.attempts[call.id] = attempt
        await flow.save_point(point)  # the start commits before the call runs
        row: Message | None
        if call.name == "invalid_assistant_response" and not (message.content or "").strip():
            row = await store_error_row(flow, call, turn_step.EMPTY_RESPONSE)
        else:
            allow_any = call.id in queued_ids
            row = await toolcall.run_call(
                flow, call, offered, config, allow_any=allow_any, attempt=attempt
            )
        if row is not None:
            tool_rows.append(row)
    # tools the resumed calls queued
    tool_rows += await toolcall.run_queued_tools(flow, point.side, prompt, offered, config)
    flow.answered_all()
    flow.last_text = message.content or ""
    return point.side, config, StepResult(message, calls, tool_rows, message.content or "")


def _queued_calls(messages: list[Message], step: Message) -> list[ToolCall]:
    """The calls of tools queued during ``step`` (``state.queue_tool``), stored after it."""
    found: list[ToolCall] = []
    after = False
    for message in messages:
        if message is step:
            after = True
        elif after and message.metadata and message.metadata.get(toolcall.QUEUED_TOOLS):
            found += [
                c if isinstance(c, ToolCall) else ToolCall.model_validate(c)
                for c in message.tool_calls or []
            ]
    return found
