"""One model step of a flow: build the context, call the model, commit its answer, run its calls.

A step, in order (:func:`run_step`):

1. :func:`provider_messages`: the acting prompt's system text, the stored messages the step
   sees (:func:`context_messages`, compacted, through the ``filter_messages`` hook) and the
   child registry, converted for the provider (through ``prefilter_llm_history``);
2. :func:`ask_model`: a ``pending`` message published (not stored) and the model called
   through retries and fallbacks;
3. :func:`read_answer`: the tool calls and text of the answer, checked against the prompt's
   output schema; an empty answer becomes an ``invalid_assistant_response`` call;
4. :func:`commit_answer`: the answer, its log and the resume point in one transaction (the
   flow settles in it when the step is known to be its last, :func:`last_step`);
5. :func:`run_calls`: the tool calls in order, then the tools they queued.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sa_core.engine.flowtypes import (
    SIDE_ROLE,
    StepResult,
    StopReason,
    other,
    turn_completed,
)
from sa_core.engine.messages import (
    complete_prepared,
    new_message,
    prepare_message,
    publish_message,
)
from sa_core.engine.model import structured
from sa_core.engine.model.compaction import compact_history
from sa_core.engine.model.context import dumps_compact, registry_system_message
from sa_core.engine.model.pastcontext import UNSENT, FilteredHistories, excluding
from sa_core.engine.tools.mcp import offered_mcp_tools
from sa_core.engine.tools.offered import offered_tools
from sa_core.engine.tools.toolrows import store_error_row
from sa_core.engine.tools.tools import OfferedTool
from sa_core.engine.turn import clienttools, toolcall
from sa_core.providers import ProviderMessage, ReasoningConfig
from sa_core.spec import (
    Log,
    Message,
    ModelDefinition,
    PromptDefinition,
    Side,
    SideConfig,
    ToolCall,
    ToolCallFunction,
)
from sa_core.spec.plainbuild import PlainBuilder
from sa_core.store.clock import now_us

if TYPE_CHECKING:
    from sa_core.engine.turn.flow import Flow
    from sa_core.providers import ProviderResponse

EMPTY_RESPONSE = (
    "You must reply. Empty response was rejected. Return non-empty content, call a tool, or "
    "include attachments."
)


@dataclass
class StepAnswer:
    """The model's answer, read: what the step stores and runs."""

    calls: list[ToolCall]
    content: str
    answer: structured.Answer | None
    """The schema check's verdict, when the prompt has an output schema."""
    rejection: str | None
    """The error text for ``calls[0]`` when the answer was rejected (empty, or off-schema)."""


def prompt_for(flow: Flow, config: SideConfig) -> PromptDefinition:
    """The prompt the acting side steps with (the turn's output schema applied)."""
    if flow.prompt_override is not None:
        return flow.prompt_override
    prompt = flow.scope.prompt(config.prompt)
    if flow.turn_schema is not None:  # asked for by the turn's message
        prompt = structured.with_turn_schema(prompt, flow.turn_schema)
    return prompt


async def context_messages(flow: Flow, prompt: PromptDefinition) -> list[Message]:
    """The stored messages a step sees.

    Without ``include_chat``: this flow's messages. With it: the history from before the
    flow (loaded and filtered once per flow; earlier turns' tool traffic dropped unless
    ``include_past_tools``) followed by this flow's messages.
    """
    sent, top = sent_messages(flow)
    if not (prompt.include_chat and flow.depth == 0):
        return list(sent)
    if flow.before is None:
        thread_id = flow.thread.thread_id
        history = flow.history
        if history is None:
            history = await flow.kernel.store.history(thread_id)
        flow.history = None
        keep = flow.kernel.store.keeps_history(thread_id)
        histories: FilteredHistories = flow.kernel.local[FilteredHistories]
        sent, stripped = histories.filtered(thread_id, history, keep=keep)
        in_flow = {m.id for m in flow.messages}
        since = min((m.created_at for m in flow.messages), default=None)
        flow.before = excluding(sent, in_flow, since)
        flow.before_filtered[False] = excluding(stripped, in_flow, since)
    before = flow.before if prompt.include_past_tools else flow.before_filtered[False]
    return before + top


def sent_messages(flow: Flow) -> tuple[list[Message], list[Message]]:
    """The messages of this flow that reached a model (all, and the top-level ones).

    Kept incrementally: each step filters only the messages remembered since the last one,
    so the per-step cost does not grow with the length of the flow.
    """
    messages = flow.messages
    kept = flow.sent
    if kept.source is not messages or kept.seen > len(messages):  # start over, in place
        kept.source, kept.seen, kept.sent, kept.top = messages, 0, [], []
    sent, top = kept.sent, kept.top
    for message in messages[kept.seen :]:
        if message.status not in UNSENT:
            sent.append(message)
            if message.depth == 0 and message.parent_id is None:
                top.append(message)
    kept.seen = len(messages)
    return sent, top


async def run_step(flow: Flow, side: Side, config: SideConfig) -> StepResult:
    """Take one model step on ``side``: call the model, commit its answer, run its calls."""
    prompt = prompt_for(flow, config)
    flow.thread.prompt = prompt
    flow.prompt_path = [prompt.name]
    scope = flow.scope
    model = scope.model(prompt.model)
    offered = offered_tools(flow.kernel, flow.thread, scope, prompt, side)
    if scope.mcp_servers:
        offered.update(await offered_mcp_tools(flow.kernel, flow.thread, scope, prompt))
    client = flow.client_tools
    if client is not None:  # the turn's client tools, beside the agent's own
        clienttools.offer(client, offered)
    messages = await provider_messages(flow, side, prompt, model, offered)
    pending, response, log = await ask_model(flow, side, prompt, model, offered, messages)
    if client is not None:  # a forced tool_choice applies to this step only
        flow.client_tools = client.relaxed()
    read = await read_answer(flow, side, config, prompt, response, log)
    message, settled = await commit_answer(flow, side, config, prompt, pending, response, log, read)
    tool_rows = await run_calls(flow, side, config, prompt, offered, read)
    flow.thread.prompt = prompt
    if flow.row_settled is not None:  # the session ended in its tool row's commit
        settled, flow.row_settled = flow.row_settled, None
    if read.answer is not None and settled is None:  # a subagent's structured answer ends it
        settled = await structured.end_child_session(flow, read.answer)
    return StepResult(message, read.calls, tool_rows, read.content, settled)


async def provider_messages(
    flow: Flow,
    side: Side,
    prompt: PromptDefinition,
    model: ModelDefinition,
    offered: dict[str, OfferedTool],
) -> list[ProviderMessage]:
    """The messages the model receives: system text, child registry, the converted context."""
    kernel = flow.kernel
    state = flow.state
    scope = flow.scope
    thread = flow.thread
    secret = kernel.secrets.secret_names(scope, thread.row)
    system_text = kernel.caches.template(scope, prompt).render(
        lambda name: None if name in secret else kernel.env_of(thread, name)
    )
    history = await context_messages(flow, prompt)
    # compaction (issue 36): markers applied, a new one written when over the trigger
    history = await compact_history(flow, prompt, model, system_text, offered, history)
    hooks = kernel.host.hooks
    if kernel.wants_hook("filter_messages", thread):
        history = await hooks.filter_messages(state, history)
    provider_messages = [ProviderMessage("system", system_text)]
    if flow.depth == 0 and thread.children:
        listing = registry_system_message(list(thread.children))
        if listing:
            provider_messages.append(ProviderMessage("system", listing))
    provider_messages += await flow.converter.convert(
        history,
        acting=side,
        images_allowed=model.capabilities.supports_images,
        recent_image_threshold=prompt.recent_image_threshold,
        read_file=lambda path: kernel.store.read_file(flow.thread.thread_id, path),
    )
    if kernel.wants_hook("prefilter_llm_history", thread):
        provider_messages = await hooks.prefilter_llm_history(state, provider_messages)
    else:  # the converter's output as it is: the recorder knows what it hashed of it
        flow.converter.sent = provider_messages
    return provider_messages


async def ask_model(
    flow: Flow,
    side: Side,
    prompt: PromptDefinition,
    model: ModelDefinition,
    offered: dict[str, OfferedTool],
    provider_messages: list[ProviderMessage],
) -> tuple[Message, ProviderResponse, Log]:
    """Publish the step's ``pending`` message and call the model: ``(pending, response, log)``."""
    kernel = flow.kernel
    pending = new_message(
        flow.thread.thread_id,
        SIDE_ROLE[side],
        None,
        status="pending",
        depth=flow.depth,
        parent_id=flow.parent_message_id,
        prompt=prompt.name,
        request_sent_at=now_us(),
    )
    # written the same way watched or not: one insert once the answer is complete (or has
    # failed); watchers see the pending row as a frame, the store never holds it
    pending = await prepare_message(flow.kernel, flow.thread, pending)
    flow.prepared = pending
    publish_message(flow.kernel, flow.thread.thread_id, pending)
    tools = [t for t in offered.values()] if model.capabilities.supports_tool_calls else []
    choice = prompt.tool_choice if tools else "auto"
    if flow.client_tools is not None and tools:
        choice = clienttools.choice_for(flow.client_tools, choice)
    reasoning = None
    if prompt.reasoning is not None:
        reasoning = ReasoningConfig(
            prompt.reasoning.effort, prompt.reasoning.max_tokens, prompt.reasoning.exclude
        )
    flow.partial.clear()
    response, log = await kernel.models.call(
        kernel,
        flow.thread,
        model,
        provider_messages,
        tools,
        tool_choice=choice,
        parallel_tool_calls=prompt.parallel_tool_calls,
        reasoning=reasoning,
        provider_options=prompt.provider_options,
        message_id=pending.id,
        depth=flow.depth,
        partial=flow.partial,
        output=None if prompt.output_schema is None else structured.output_schema_for(prompt),
        turn_settings=flow.turn_settings,
    )
    return pending, response, log


async def read_answer(
    flow: Flow,
    side: Side,
    config: SideConfig,
    prompt: PromptDefinition,
    response: ProviderResponse,
    log: Log,
) -> StepAnswer:
    """The answer's tool calls and text, schema-checked; an empty answer is rejected."""
    calls = [
        _tool_call(
            c.id or f"call_{uuid.uuid4().hex[:8]}",
            c.name,
            dumps_compact(c.arguments),
            c.extra_content,
        )
        for c in response.tool_calls
    ]
    content = response.content or ""
    if config.stop_tool and config.stop_tool_response_property:
        for call in calls:
            if call.name == config.stop_tool:
                value = call.arguments.get(config.stop_tool_response_property)
                if isinstance(value, str) and value.strip():
                    content = value
    answer = None
    if prompt.output_schema is not None:  # an answer that must match a schema
        answer = await structured.check_answer(flow, prompt, side, calls, content, log)
        calls, content = answer.calls, answer.content
    empty = not content.strip() and not calls and not response.images
    rejection = answer.rejection if answer is not None else None
    if empty:
        rejection = EMPTY_RESPONSE
        calls = [
            ToolCall(
                id=f"call_{uuid.uuid4().hex[:8]}",
                function=ToolCallFunction(name="invalid_assistant_response", arguments="{}"),
            )
        ]
    flow.last_text = content
    return StepAnswer(calls, content, answer, rejection)


_PLAIN_CALLS = PlainBuilder(ToolCall)
_PLAIN_FUNCTIONS = PlainBuilder(ToolCallFunction)


def _tool_call(
    call_id: str, name: str, arguments: str, extra_content: dict[str, Any] | None
) -> ToolCall:
    """A tool call of the answer, built directly when its values allow it.

    The same model as ``ToolCall(id=..., function=ToolCallFunction(...), extra_content=...)``
    (see :class:`~sa_core.spec.plainbuild.PlainBuilder`).
    """
    function = {"name": name, "arguments": arguments}
    values = {
        "id": call_id,
        "function": _PLAIN_FUNCTIONS.build(function) or ToolCallFunction(**function),
        "extra_content": extra_content,
    }
    return _PLAIN_CALLS.build(values) or ToolCall(**values)


async def commit_answer(
    flow: Flow,
    side: Side,
    config: SideConfig,
    prompt: PromptDefinition,
    pending: Message,
    response: ProviderResponse,
    log: Log,
    read: StepAnswer,
) -> tuple[Message, StopReason | None]:
    """Store the answer with its log and the resume point (or the settlement) in one commit.

    Returns:
        ``(message, settled)``: the stored answer, and why the flow stopped when it settled in
        this commit.
    """
    kernel = flow.kernel
    calls, content, rejection = read.calls, read.content, read.rejection
    # a before_update_message hook sees the calls as dicts; without one, the stored message
    # takes the (validated) calls as they are instead of dumping and validating them again
    hooked = kernel.wants_hook("before_update_message", flow.thread)
    updates: dict[str, Any] = {
        "content": content or None,
        "tool_calls": ([c.model_dump(exclude_none=True) for c in calls] if hooked else calls)
        or None,
        "reasoning_content": None
        if (prompt.reasoning and prompt.reasoning.exclude)
        else response.reasoning,
        "reasoning_details": response.reasoning_details,
        "status": "completed",
        "response_completed_at": now_us(),
        "log_id": log.id,
    }
    if read.answer is not None and read.answer.metadata is not None:
        updates["metadata"] = read.answer.metadata
    settled: StopReason | None = None
    try:
        async with kernel.store.transaction() as tx:
            await kernel.store.insert_log(flow.thread.thread_id, log, tx=tx)
            updated = await complete_prepared(flow.kernel, flow.thread, pending, updates, tx=tx)
            settled = None if rejection else last_step(flow, side, config, calls, content)
            if settled is not None:  # the flow settles in this commit: no resume point
                flow.turns[side] += 1
                queue = await kernel.scheduler.settle_and_read_queue(flow, tx, settled)
            elif flow.durable:  # the resume point commits with the step (and tool calls)
                await flow.save_step_point(pending.id, tx=tx)
    except BaseException:
        if settled is not None:  # rolled back with the step: the runner settles the flow
            flow.turns[side] -= 1
        raise
    if settled is not None:
        flow.settled_queue = queue
    message = updated or pending.model_copy(update=updates)
    if (
        isinstance(message.tool_calls, list)
        and message.tool_calls
        and not isinstance(message.tool_calls[0], ToolCall)
    ):
        message = message.model_copy(update={"tool_calls": calls})
    flow.answer_committed(message, calls)
    return message, settled


async def run_calls(
    flow: Flow,
    side: Side,
    config: SideConfig,
    prompt: PromptDefinition,
    offered: dict[str, OfferedTool],
    read: StepAnswer,
) -> list[Message]:
    """Run the answer's tool calls in order (or store its rejection), then the queued tools."""
    calls = read.calls
    tool_rows: list[Message] = []
    if read.rejection is not None:  # an empty answer, or one that does not match the schema
        tool_rows.append(await store_error_row(flow, calls[0], read.rejection))
    else:
        flow.sole_call = calls[0].id if len(calls) == 1 else None
        for call in calls:
            row = await toolcall.run_call(flow, call, offered, config)
            if row is not None:
                tool_rows.append(row)
        flow.sole_call = None
    tool_rows += await toolcall.run_queued_tools(flow, side, prompt, offered, config)
    if flow.unanswered:  # a call left without a row (one awaiting a client, say)
        flow.answered_all()
    return tool_rows


def last_step(
    flow: Flow, side: Side, config: SideConfig, calls: list[ToolCall], content: str
) -> StopReason | None:
    """Why the flow stops after this step, when that is known before the step commits.

    A thread's top-level flow, run by its runner, whose answer completes a turn with a
    human on the other side: no tool call, handoff, queued tool or stop is left to change
    what :meth:`Flow.after_step` decides (it would return ``stop_on_response``).
    """
    if calls or flow.thread.row.parent_id is not None:
        return None
    reason = turn_completed(config, (), content)
    if reason is None or flow.side_config(other(side)) is not None or not flow.settles_in_step():
        return None
    return reason
