"""Subagents: ``dual_ai`` agents run as child threads, in the four modes of the spec.

|               | blocking                          | non-blocking                          |
|---------------|-----------------------------------|---------------------------------------|
| non-resumable | the tool call runs the child to   | returns the reference at once; the    |
|               | the end of its session            | parent is notified when it ends       |
| resumable     | ``subagent_create`` /             | ``subagent_create`` returns at once;  |
|               | ``subagent_message`` wait per call| ``subagent_message`` any time         |

Children are threads with ``parent_id`` set, tracked in the parent's registry
(``SubagentRegistryEntry``). A child's session outcome (the mapped ``session_stop`` /
``session_fail`` payload) is persisted on the child, so results survive restarts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from sa_core.engine.child_start import can_owe_directly, owe_first_turn, start_child
from sa_core.engine.oneshot import addressable, finishes, not_addressable
from sa_core.engine.tools import LIFECYCLE_TOOLS, OfferedTool, flag_enabled
from sa_core.spec import (
    AgentDefinition,
    AttachmentRef,
    ImmediateConfig,
    ResumableConfig,
    SubagentRegistryEntry,
    SubagentToolConfig,
    ToolResult,
)

if TYPE_CHECKING:
    from sa_core.engine.flow import Flow, SessionOutcome
    from sa_core.engine.tools import ToolTable
    from sa_core.registry import PackScope
    from sa_core.runtime import Runtime
    from sa_core.spec import Message, PromptDefinition, SessionToolBinding, ToolCall
    from sa_core.state import ThreadState
    from sa_core.store import ThreadRow

RESULT_TEXT = "Subagent (reference: {ref}) has returned the following result:\n\n{result}"
FAILURE_TEXT = "Subagent (reference: {ref}) has reported a failure:\n\n{result}"
ATTACHMENTS_TEXT = "\n\nThe subagent also returned the following attachment(s):\n\n{paths}"
INITIATED_TEXT = "The subagent was initiated successfully. Reference: {ref}"
TERMINAL_TOOLS = ("session_stop", "session_fail")
NO_TERMINAL_TEXT = (
    "Subagent execution stopped before completion ({reason}). It did not call a terminal "
    "session tool (sessionStop/sessionFail)."
)


# ---------------------------------------------------------------------------------------------
# Relationships visible to a prompt
# ---------------------------------------------------------------------------------------------


def _enabled(state: ThreadState, tool: OfferedTool) -> bool:
    return tool.optional is None or flag_enabled(state.env_or_none(tool.optional))


def subagent_tools(state: ThreadState, table: ToolTable) -> dict[str, OfferedTool]:
    """Subagent relationships of a prompt, enabled by their optional flags, by agent name."""
    return {
        name: tool
        for name, tool in table.tools.items()
        if tool.kind == "subagent" and _enabled(state, tool)
    }


def _current_table(state: ThreadState) -> ToolTable | None:
    prompt = state.active_prompt
    if prompt is None:
        return None
    return state.runtime.tool_table(state.scope, prompt)


def lifecycle_tools(state: ThreadState, table: ToolTable) -> dict[str, OfferedTool]:
    """``subagent_create`` / ``subagent_message`` / ``subagents`` when resumable branches exist."""
    resumable = [
        t
        for t in subagent_tools(state, table).values()
        if t.subagent is not None and t.subagent.is_resumable
    ]
    reachable = addressable(state.children)  # only resumable instances take messages
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
    offered["subagents"] = OfferedTool(
        name="subagents",
        kind="lifecycle",
        description="List this thread's subagent instances with their status.",
        parameters={"type": "object", "properties": {}},
    )
    return offered


# ---------------------------------------------------------------------------------------------
# Tool entry points
# ---------------------------------------------------------------------------------------------


async def run_subagent_tool(
    state: ThreadState,
    flow: Flow | None,
    tool: OfferedTool,
    arguments: dict[str, Any],
    tool_message_id: str | None,
) -> ToolResult:
    """A non-resumable subagent called directly by its agent name."""
    assert tool.subagent is not None and tool.agent is not None and tool.agent_scope is not None
    config = tool.subagent
    message = _init_message(config, arguments)
    paths = (
        _arg_paths(arguments.get(config.init_attachments_property))
        if config.init_attachments_property
        else []
    )
    name = None
    if config.init_agent_name_property:
        value = arguments.get(config.init_agent_name_property)
        name = str(value) if value else None
    return await _create(
        state,
        flow,
        tool,
        message=message,
        paths=paths,
        name=name,
        arguments=arguments,
        tool_message_id=tool_message_id,
    )


async def run_lifecycle_tool(
    state: ThreadState,
    flow: Flow | None,
    name: str,
    arguments: dict[str, Any],
    tool_message_id: str | None,
) -> ToolResult:
    """``subagent_create``, ``subagent_message`` and ``subagents``."""
    if name == "subagents":
        return _list_instances(state)
    if name == "subagent_message":
        return await _message_instance(state, flow, arguments)
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
    table = _current_table(state)
    options = subagent_tools(state, table) if table is not None else {}
    tool = options.get(str(agent_name))
    if tool is None or tool.subagent is None or not tool.subagent.is_resumable:
        available = [
            n for n, t in options.items() if t.subagent is not None and t.subagent.is_resumable
        ]
        return ToolResult(
            status="error",
            error=f'Unknown subagent "{agent_name}". Available: {", ".join(available) or "none"}.',
        )
    return await _create(
        state,
        flow,
        tool,
        message=str(message),
        paths=_arg_paths(attachments),
        name=str(instance).strip(),
        arguments=dict(extra or {}),
        tool_message_id=tool_message_id,
    )


# ---------------------------------------------------------------------------------------------
# Creating and messaging instances
# ---------------------------------------------------------------------------------------------


def _init_message(config: SubagentToolConfig, arguments: Mapping[str, Any]) -> str:
    if config.init_user_message_property:
        value = arguments.get(config.init_user_message_property)
        if isinstance(value, str):
            return value
        return json.dumps(value) if value is not None else ""
    if isinstance(arguments.get("message"), str):
        return str(arguments["message"])
    return json.dumps(dict(arguments)) if arguments else ""


def _arg_paths(value: Any) -> list[str]:
    from sa_core.engine.files import attachment_paths

    return attachment_paths(value)


def _child_role(config: SubagentToolConfig) -> str:
    if (
        isinstance(config.resumable, ResumableConfig)
        and config.resumable.receives_messages == "side_b"
    ):
        return "assistant"
    return "user"


def scoped_names(scope: PackScope, agent: AgentDefinition) -> set[str]:
    """Variables declared ``scoped`` anywhere in a child agent's graph."""
    from sa_core.engine.variables import graph_variables

    return {d.variable.name for d in graph_variables(scope, agent) if d.variable.scoped}


def child_env(parent: ThreadState, scope: PackScope, agent: AgentDefinition) -> dict[str, str]:
    """The parent's env minus the child graph's scoped variables."""
    scoped = scoped_names(scope, agent)
    return {k: v for k, v in parent.row.env.items() if k not in scoped}


async def _create(
    state: ThreadState,
    flow: Flow | None,
    tool: OfferedTool,
    *,
    message: str,
    paths: list[str],
    name: str | None,
    arguments: dict[str, Any],
    tool_message_id: str | None,
    provided_env: Mapping[str, str] | None = None,
    extra_env: Mapping[str, str] | None = None,
    owner_side: str | None = None,
) -> ToolResult:
    from sa_core.engine.files import existing_refs

    assert tool.subagent is not None and tool.agent is not None and tool.agent_scope is not None
    config = tool.subagent
    runtime = state.runtime
    agent, scope = tool.agent, tool.agent_scope
    live = [e for e in state.children if e.name == agent.name and e.status != "terminated"]
    cap = config.resumable.max_instances if isinstance(config.resumable, ResumableConfig) else None
    if cap is not None and len(live) >= cap:
        if config.blocking and cap == 1 and len(live) == 1:
            return await _message_instance(
                state,
                flow,
                {"referenceId": live[0].reference, "message": message, "attachments": paths},
            )
        refs = ", ".join(e.reference for e in live)
        return ToolResult(
            status="error",
            error=(
                f'Subagent instance limit reached for "{agent.name}" ({cap}). Use '
                f"subagent_message with an existing reference instead. Active references: {refs}"
            ),
            error_code="subagent_limit_reached",
        )
    refs_in, missing_paths = await existing_refs(state, paths)
    if missing_paths:
        return ToolResult(
            status="error",
            error="Provided attachment path(s) not found in this thread: "
            + ", ".join(missing_paths),
        )
    env = child_env(state, scope, agent)
    env.update(extra_env or {})
    env.update(provided_env or {})
    missing = runtime.missing_variables(scope, agent, env, state.user_id, include_scoped=True)
    if missing:
        return await _defer_for_variables(
            state, flow, tool, message, paths, name, arguments, [n for n, _ in missing]
        )
    call_id = state.tool_call_id
    if call_id is not None and state.tool_attempt > 1:
        existing = await _child_for_call(state, call_id)
        if existing is not None:  # a restart interrupted this call: re-attach, create nothing
            return await _collect(state, existing, config)
    owner = owner_side or (flow.current_side if flow is not None else "a")
    tags = [f"name:{_normalise_name(name)}"] if name else []
    properties = {
        "owner_side": owner,
        "relationship": tool.name,
        "prompt": state.active_prompt.name if state.active_prompt is not None else None,
        "arguments": arguments,
        "resumable": config.is_resumable,  # a non-resumable child terminates when it reports
    }
    if call_id is not None:
        properties["tool_call_id"] = call_id
    from sa_core.engine.files import copy_attachments
    from sa_core.store import now_us

    # the child, its registry entry and its first message commit together
    async with runtime.store.transaction():
        child = await runtime.create_thread(
            agent.name,
            env=env,
            user_id=state.user_id,
            tags=tags,
            package=scope.package,
            parent_id=state.thread_id,
            properties=properties,
        )
        entry = SubagentRegistryEntry(
            reference=child.thread_id,
            name=agent.name,
            title=agent.title,
            description=tool.description,
            resumable=config.is_resumable,
            blocking=config.blocking,
            thread_name=name,
            spawn_group_id=_spawn_group(flow),
            created_at=now_us(),
            status="running",
            parent_communication=config.parent_communication,
        )
        await runtime.store.upsert_child(state.thread_id, entry, new=True)
        state.children = [*[e for e in state.children if e.reference != entry.reference], entry]
        copied = await copy_attachments(state, refs_in, child) if refs_in else []
        if can_owe_directly(child):  # stored as a message with its owed turn: no drain
            first_message = await _hand_over_first(state, child, config, message, copied)
        else:
            first_message = None
            await _hand_over(state, child, config, message, copied, first=True)
    if first_message is not None:
        start_child(child, first_message)
    return await _collect(state, child.thread_id, config)


async def _child_for_call(state: ThreadState, call_id: str) -> str | None:
    """The child a tool call created or waits on (recorded durably with the child)."""
    for entry in state.children:
        row = await state.runtime.store.get_thread(entry.reference)
        if row is not None and (
            row.properties.get("tool_call_id") == call_id
            or call_id in (row.execution.get("waiter"), row.execution.get("answered"))
        ):
            return row.id
    return None


async def _deliver(
    state: ThreadState,
    child: ThreadState,
    entry: SubagentRegistryEntry,
    config: SubagentToolConfig,
    message: str,
    attachments: list[AttachmentRef],
    *,
    first: bool,
) -> ToolResult:
    call_id = state.tool_call_id
    waiting = {child.row.execution.get("waiter"), child.row.execution.get("answered")}
    if config.blocking and call_id is not None and state.tool_attempt > 1 and call_id in waiting:
        return await _collect(state, child.thread_id, config)  # delivered before a restart
    await _hand_over(state, child, config, message, attachments, first=first)
    return await _collect(state, child.thread_id, config)


async def _hand_over(
    state: ThreadState,
    child: ThreadState,
    config: SubagentToolConfig,
    message: str,
    attachments: list[AttachmentRef],
    *,
    first: bool,
) -> None:
    """Queue the message on the child; a blocking call also records itself as the waiter.

    One transaction: after a restart the parent finds the child it waits on by its tool call id.
    """
    role = _child_role(config)
    async with state.runtime.store.transaction():
        if first:
            await _announce_attachments(child, attachments)
        if config.blocking:
            await _await_child(child, state.tool_call_id or "")
        await child.queue_message({"role": role, "content": message, "attachments": attachments})


async def _announce_attachments(child: ThreadState, attachments: list[AttachmentRef]) -> None:
    """Tell a new child where the files of its first message are (silent user messages)."""
    for ref in attachments:
        content = f"Initial asset attachment path: {ref.path}"
        await child.inject_message({"role": "user", "content": content, "silent": True})


async def _hand_over_first(
    state: ThreadState,
    child: ThreadState,
    config: SubagentToolConfig,
    message: str,
    attachments: list[AttachmentRef],
) -> Message:
    """Like :func:`_hand_over` for a new child: the first message is stored, its turn owed."""
    async with state.runtime.store.transaction():
        await _announce_attachments(child, attachments)
        if config.blocking:
            await _await_child(child, state.tool_call_id or "")
        role: Literal["user", "assistant"] = (
            "assistant" if _child_role(config) == "assistant" else "user"
        )
        return await owe_first_turn(child, role, message, attachments)


async def _collect(state: ThreadState, child_id: str, config: SubagentToolConfig) -> ToolResult:
    """The tool result of a delivered call: wait for a blocking child, else "initiated"."""
    if not config.blocking:
        return ToolResult(
            status="success", result=INITIATED_TEXT.format(ref=child_id), subagent_id=child_id
        )
    runtime = state.runtime
    if runtime.workers is not None:  # the child may run on any worker: wait through the store
        from sa_core.engine.child_wait import collect

        return await collect(state, child_id)
    runtime.scheduler.awaited.add(child_id)
    finished = False
    try:
        await runtime.ensure_running(child_id)
        await runtime.wait_thread(child_id)
        from sa_core.engine.approvals import wait_through_approvals

        await wait_through_approvals(runtime, child_id)
        finished = True
    finally:
        runtime.scheduler.awaited.discard(child_id)
        if not finished and not runtime.closing:  # stopped: the child reports as usual later
            await asyncio.shield(_release_child(runtime, child_id))
    return await _blocking_result(state, child_id)


async def _await_child(child: ThreadState, call_id: str) -> None:
    """Record the waiting call on a child and drop its previous session outcome.

    A run that is cancelled (stop, terminate) records no outcome; the waiter must then report
    that, not the result of the invocation before. While a waiter is recorded the child's
    outcome goes to that call only, never also as a notification (across restarts too).
    """
    execution = {
        k: v
        for k, v in child.row.execution.items()
        if k not in ("last_outcome", "last_stop_reason", "answered")
    }
    if call_id:
        execution["waiter"] = call_id
    child.row.execution = execution
    await child.runtime.store.update_thread(child.thread_id, execution=execution)


async def _release_child(runtime: Runtime, child_id: str, answered: bool = False) -> None:
    """Clear a child's recorded waiter: the wait ended, or (``answered``) its call got the result.

    An answered call stays recorded as ``answered`` so that the call, run again after a
    restart before its result was stored, re-attaches instead of messaging the child again.
    """
    row = runtime.live_row(child_id) or await runtime.store.get_thread(child_id)
    if row is None or "waiter" not in row.execution:
        return
    execution = {k: v for k, v in row.execution.items() if k != "waiter"}
    if answered:
        execution["answered"] = row.execution["waiter"]
    row.execution = execution
    await runtime.store.update_thread(child_id, execution=execution)


def _spawn_group(flow: Flow | None) -> str | None:
    if flow is None:
        return None
    for message in reversed(flow.messages):
        if message.role in ("assistant", "user") and message.tool_calls:
            return message.id
    return None


def _normalise_name(name: str) -> str:
    return re.sub(r"\s+", " ", name).strip()[:120]


async def _blocking_result(state: ThreadState, child_id: str) -> ToolResult:
    """The finished child's outcome as the call's result.

    One transaction: the reads, the copied attachments, the registry status and the call
    marked ``answered`` on the child. When the child's own settle already did those writes
    (see :func:`_answer_waiter`), the result is read from its live row with no transaction.
    """
    row = _answered_row(state, child_id)
    if row is not None:
        return _result(child_id, row, [])
    async with state.runtime.store.transaction():
        return await _blocking_result_in_tx(state, child_id)


def _answered_row(state: ThreadState, child_id: str) -> ThreadRow | None:
    """The child's live row when its settle already answered this call, else ``None``."""
    runtime = state.runtime
    call_id = state.tool_call_id
    row = runtime.live_row(child_id) if runtime.workers is None else None
    if row is None or call_id is None or "waiter" in row.execution:
        return None
    if row.execution.get("answered") != call_id:
        return None
    return row if not _outcome_attachments(row) else None


def _outcome_attachments(row: ThreadRow) -> list[Any]:
    outcome = row.execution.get("last_outcome") or {}
    return list(outcome.get("attachments") or [])


def _entry_status(row: ThreadRow | None) -> str:
    """The registry status a finished blocking call leaves its child in."""
    outcome = (row.execution.get("last_outcome") if row else None) or {}
    failed = outcome.get("failed", True) if outcome else True
    if row is not None and row.terminated is not None:
        return "terminated"
    return "failed" if failed else "idle"


def _result(child_id: str, row: ThreadRow | None, copied: list[AttachmentRef]) -> ToolResult:
    """The tool result a blocking call gets from its finished child's row."""
    outcome = (row.execution.get("last_outcome") if row else None) or {}
    reason = (row.execution.get("last_stop_reason") if row else None) or (
        "aborted_by_user" if row is not None and row.stopped else "unknown"
    )
    failed = outcome.get("failed", True) if outcome else True
    reason_known = reason not in ("aborted_by_user", "unknown")  # else a terminate() cut it
    text = outcome.get("content") if outcome else NO_TERMINAL_TEXT.format(reason=reason)
    if not outcome and row is not None and row.terminated is not None and not reason_known:
        text = NO_TERMINAL_TEXT.format(reason="terminated")
    suffix = f"\n\nReference: {child_id}"
    if copied:
        suffix = ATTACHMENTS_TEXT.format(paths="\n".join(r.path for r in copied)) + suffix
    if failed:
        return ToolResult(
            status="error",
            error=f"{text or 'Subagent failed'}{suffix}",
            subagent_id=child_id,
            attachments=list(copied),
        )
    return ToolResult(
        status="success",
        result=f"{text or ''}{suffix}",
        subagent_id=child_id,
        attachments=list(copied),
    )


async def _blocking_result_in_tx(state: ThreadState, child_id: str) -> ToolResult:
    from sa_core.engine.files import copy_attachments

    runtime = state.runtime
    row = await runtime.store.get_thread(child_id)
    refs = [AttachmentRef.model_validate(a) for a in (_outcome_attachments(row) if row else [])]
    child = await runtime.state_for(row) if (row and refs) else None
    copied = await copy_attachments(child, refs, state) if (child and refs) else []
    await _set_entry_status(state.runtime, state.thread_id, child_id, _entry_status(row), state)
    await _release_child(runtime, child_id, answered=True)
    return _result(child_id, row, copied)


def _can_answer_here(runtime: Runtime, execution: Mapping[str, Any]) -> bool:
    """Whether a child's settle may answer its waiting blocking call itself.

    The settle then commits the registry status and the call marked ``answered`` with the
    child's outcome, and the parent reads its result from the live row with no transaction
    (see :func:`_blocking_result`). Only for a single runtime (the parent waits in this
    process) and an outcome without attachments (the parent copies those, in
    :func:`_blocking_result_in_tx`).
    """
    outcome = execution.get("last_outcome") or {}
    return runtime.workers is None and not runtime.closing and not outcome.get("attachments")


async def _message_instance(
    state: ThreadState, flow: Flow | None, arguments: Mapping[str, Any]
) -> ToolResult:
    from sa_core.engine.files import copy_attachments, existing_refs

    reference = arguments.get("referenceId") or arguments.get("reference_id")
    message = arguments.get("message")
    if not isinstance(reference, str) or not isinstance(message, str) or not message.strip():
        return ToolResult(
            status="error", error="subagent_message requires referenceId and message."
        )
    entry = next((e for e in state.children if e.reference == reference), None)
    refused = not_addressable(entry) if entry is not None else None
    if refused is not None:
        return refused
    runtime = state.runtime
    row = await runtime.store.get_thread(reference) if entry else None
    if entry is None or row is None or row.terminated is not None or entry.status == "terminated":
        return ToolResult(status="error", error=f'Subagent reference "{reference}" is not active.')
    refs, missing = await existing_refs(state, _arg_paths(arguments.get("attachments")))
    if missing:
        return ToolResult(
            status="error",
            error="Provided attachment path(s) not found in this thread: " + ", ".join(missing),
        )
    child = await runtime.state_for(row)
    copied = await copy_attachments(state, refs, child) if refs else []
    config = _config_for(state, row)
    await _set_entry_status(runtime, state.thread_id, reference, "running", state)
    if config is not None and config.blocking:
        result = await _deliver(state, child, entry, config, message, copied, first=False)
        return result
    role = _child_role(config) if config is not None else "user"
    await child.queue_message({"role": role, "content": message, "attachments": copied})
    return ToolResult(
        status="success", result=f"Message sent to subagent {reference}.", subagent_id=reference
    )


def _config_for(state: ThreadState, child_row: Any) -> SubagentToolConfig | None:
    """The relationship a child was created through: its prompt's entry in the parent's package.

    Children created before the prompt was recorded fall back to the active prompt, then to any
    prompt of the parent's package; other packages' prompts are never consulted.
    """
    name = child_row.properties.get("relationship") or child_row.agent_id
    scope = state.scope
    recorded = scope.prompts.get(child_row.properties.get("prompt") or "")
    candidates = [p for p in (recorded, state.active_prompt) if p is not None]
    for prompt in [*candidates, *scope.prompts.values()]:
        tool = state.runtime.tool_table(scope, prompt).tools.get(name)
        if tool is not None and tool.subagent is not None:
            return tool.subagent
    return None


def _list_instances(state: ThreadState) -> ToolResult:
    if not state.children:
        return ToolResult(status="success", result="No active subagent instances.")
    lines = ["Active subagent instances:"]
    for entry in state.children:  # the relationship (agent) name, never the instance name
        lines.append(f"- {entry.reference}: {entry.name} — {entry.status} ({entry.description})")
    lines.append("Message one with subagent_message(referenceId, message).")
    return ToolResult(status="success", result="\n".join(lines))


async def _set_entry_status(
    runtime: Runtime, parent_id: str, reference: str, status: str, parent: ThreadState | None = None
) -> None:
    await runtime.update_child(parent_id, reference, status=status)


# ---------------------------------------------------------------------------------------------
# Scoped-variable bootstrap
# ---------------------------------------------------------------------------------------------


async def _defer_for_variables(
    state: ThreadState,
    flow: Flow | None,
    tool: OfferedTool,
    message: str,
    paths: list[str],
    name: str | None,
    arguments: dict[str, Any],
    missing: list[str],
) -> ToolResult:
    assert tool.agent is not None and tool.agent_scope is not None
    required = sorted(scoped_names(tool.agent_scope, tool.agent) | set(missing))
    payload = {
        "agent": tool.name,
        "package": tool.agent_scope.package,
        "message": message,
        "attachments": paths,
        "name": name,
        "arguments": arguments,
        "required": required,
        "missing": missing,
        "owner_side": flow.current_side if flow is not None else "a",
        "prompt": state.active_prompt.name if state.active_prompt is not None else None,
    }
    request_id = await state.runtime.store.create_env_request(state.thread_id, payload)
    endpoint = f"/api/packages/{state.package}/threads/{state.thread_id}/variables/{request_id}"
    return ToolResult(
        status="error",
        error=(
            f"Subagent '{tool.name}' needs variables that are not set: {', '.join(missing)}. "
            f"Ask the user to provide them at {endpoint}."
        ),
        error_code="subagent_env_required",
        error_data={
            "request_id": request_id,
            "endpoint": endpoint,
            "required": required,
            "missing": missing,
            "agent": tool.name,
        },
    )


async def variables_request(
    runtime: Runtime, parent_id: str, request_id: str
) -> dict[str, Any] | None:
    """The public view of a pending variables request (names only, never values)."""
    payload = await runtime.store.get_env_request(parent_id, request_id)
    if payload is None:
        return None
    return {
        "request_id": request_id,
        "parent_thread_id": parent_id,
        "agent_name": payload["agent"],
        "registry_agent_name": payload["agent"],
        "required": payload["required"],
        "missing": payload["missing"],
    }


async def provide_variables(
    runtime: Runtime, parent_id: str, request_id: str, env: dict[str, str]
) -> dict[str, Any]:
    """Store the provided values and boot the deferred child with the original payload."""
    from sa_core.errors import ConfigurationError

    payload = await runtime.store.get_env_request(parent_id, request_id)
    if payload is None:
        raise ConfigurationError(
            f"No pending variables request {request_id} on thread {parent_id}; it may have been "
            "used already."
        )
    still_missing = [n for n in payload["missing"] if n not in env]
    if still_missing:
        raise ConfigurationError(
            f"Variables still missing for request {request_id}: {', '.join(still_missing)}."
        )
    parent = await runtime.get_thread(parent_id)
    scope = runtime.registry.scope(payload["package"])
    found = scope.find_agent(payload["agent"])
    if found is None:
        raise ConfigurationError(f"Agent {payload['agent']} is no longer available.")
    from sa_core.engine.tools import resolve_entry

    prompt = scope.prompts.get(payload.get("prompt") or "") if payload.get("prompt") else None
    tool = None
    if prompt is not None:
        tool = runtime.tool_table(parent.scope, prompt).tools.get(payload["agent"])
    if tool is None:
        tool = resolve_entry(
            parent.scope, SubagentToolConfig(name=payload["agent"], blocking=False)
        )
    assert tool is not None and tool.subagent is not None
    nonblocking = tool.subagent.model_copy(update={"blocking": False})
    tool = dataclasses.replace(tool, subagent=nonblocking)
    parent.active_prompt = prompt
    result = await _create(
        parent,
        None,
        tool,
        message=payload["message"],
        paths=payload["attachments"],
        name=payload.get("name"),
        arguments=payload.get("arguments") or {},
        tool_message_id=None,
        provided_env=env,
        owner_side=payload.get("owner_side"),
    )
    if result.status != "success":
        raise ConfigurationError(result.error or "The subagent could not be created.")
    await runtime.store.delete_env_request(parent_id, request_id)
    return {"request_id": request_id, "child_thread_id": result.subagent_id, "status": "success"}


# ---------------------------------------------------------------------------------------------
# Immediate subagents
# ---------------------------------------------------------------------------------------------


async def boot_immediate(state: ThreadState) -> None:
    """Create the immediate subagents of the prompts the thread's agent makes active.

    Side A's prompt, and side B's on a ``dual_ai`` agent: both become active with the thread
    (or the handoff), so both sides' immediate entries start then (seed 001, 5.2). A side B
    child is owned by side B: its reports are queued for side B to act on.
    """
    agent = state.agent
    sides = [("a", agent.side_a)]
    side_b = agent.side_b if agent.type == "dual_ai" else None
    if side_b is not None and side_b.prompt != agent.side_a.prompt:  # a prompt boots once
        sides.append(("b", side_b))
    first = None
    for side, config in sides:
        prompt = state.scope.prompts.get(config.prompt)
        if prompt is not None:
            first = first or prompt
            await _boot_prompt(state, prompt, side)
    if first is not None:
        state.active_prompt = first  # side A's, which acts first


async def _boot_prompt(state: ThreadState, prompt: PromptDefinition, side: str) -> None:
    """Create the immediate subagents of one side's prompt, owned by that side."""
    state.active_prompt = prompt  # the prompt each child records as its relationship's
    table = state.runtime.tool_table(state.scope, prompt)
    for tool in subagent_tools(state, table).values():
        config = tool.subagent
        if config is None or not config.immediate:
            continue
        for index, (name, message, env) in enumerate(_immediate_instances(state, config)):
            cap = (
                config.resumable.max_instances
                if isinstance(config.resumable, ResumableConfig)
                else None
            )
            if cap is not None and index >= cap:
                break
            immediate_tool = dataclasses.replace(
                tool, subagent=config.model_copy(update={"blocking": False})
            )
            await _create(
                state,
                None,
                immediate_tool,
                message=message,
                paths=[],
                name=name,
                arguments={},
                tool_message_id=None,
                extra_env=env,
                owner_side=side,
            )


def _immediate_instances(
    state: ThreadState, config: SubagentToolConfig
) -> list[tuple[str | None, str, dict[str, str]]]:
    """``(name, message, scoped env)`` per instance; the object form fans out per env index."""
    if not isinstance(config.immediate, ImmediateConfig):
        return [(config.name, f"Begin your work as {config.name}.", {})]
    spec = config.immediate
    instances: list[tuple[str | None, str, dict[str, str]]] = []
    index = 1
    while True:
        suffix = "" if index == 1 else f"__{index}"
        env = {
            key: value
            for key in spec.scoped_env
            if (value := state.row.env.get(key + suffix)) is not None
        }
        name = state.row.env.get(spec.name_env + suffix) if spec.name_env else None
        description = (
            state.row.env.get(spec.description_env + suffix) if spec.description_env else None
        )
        if index > 1 and not env and name is None and description is None:
            break
        instances.append(
            (name or config.name, description or f"Begin your work as {name or config.name}.", env)
        )
        index += 1
        if not spec.scoped_env and not spec.name_env and not spec.description_env:
            break
    return instances


async def run_immediate(flow: Flow) -> bool:
    """Boot immediates after a handoff made a new prompt active; never ends the step."""
    if flow.context.pop("_immediate_due", False):
        await boot_immediate(flow.state)
    return False


def reset_immediate(flow: Flow) -> None:
    """Mark the new active prompt's immediates to boot before the next step."""
    flow.context["_immediate_due"] = True


# ---------------------------------------------------------------------------------------------
# Child -> parent
# ---------------------------------------------------------------------------------------------


async def forward_status(
    flow: Flow, call: ToolCall, result: ToolResult, binding: SessionToolBinding
) -> None:
    """A ``session_status`` call updates the parent's registry status, ending nothing."""
    state = flow.state
    if state.parent_id is None:
        return
    status = None
    if binding.message_property:
        value = call.arguments.get(binding.message_property)
        status = (
            value if isinstance(value, str) else (json.dumps(value) if value is not None else None)
        )
    status = status or result.result or result.error or "running"
    await state.runtime.update_child(state.parent_id, state.thread_id, status=status.strip())


async def set_status(state: ThreadState, status: str) -> None:
    """``state.set_status``."""
    if not status.strip():
        raise ValueError("set_status needs a non-empty status.")
    if state.parent_id is None:
        from sa_core.errors import NoParentThreadError

        raise NoParentThreadError(state.thread_id, "set_status")
    await state.runtime.update_child(state.parent_id, state.thread_id, status=status.strip())


async def notify_parent(state: ThreadState, content: str) -> None:
    """``state.notify_parent``: a silent message queued on the parent, tagged with this child."""
    if not content.strip():
        raise ValueError("notify_parent needs non-empty content.")
    if state.parent_id is None:
        from sa_core.errors import NoParentThreadError

        raise NoParentThreadError(state.thread_id, "notify_parent")
    parent = await state.get_parent_thread()
    if parent is None or parent.terminated is not None:
        return
    role = "assistant" if state.row.properties.get("owner_side") == "b" else "user"
    await parent.queue_message(
        {
            "role": role,
            "content": content,
            "silent": True,
            "metadata": {"subagent_id": state.thread_id, "subagent_event": "notification"},
        }
    )


def _final_outcome(flow: Flow) -> SessionOutcome | None:
    """The flow's session outcome, with the text a failure without a terminal tool reports."""
    outcome = flow.outcome
    if outcome is not None and outcome.content is None and outcome.reason not in TERMINAL_TOOLS:
        outcome = dataclasses.replace(
            outcome, content=NO_TERMINAL_TEXT.format(reason=outcome.reason)
        )
    return outcome


def settled_execution(
    state: ThreadState, flow: Flow, reason: str, execution: dict[str, Any]
) -> dict[str, Any]:
    """A child's execution entry as its flow settles: its outcome, and the call it answers.

    ``execution`` (the thread's entry with the settled turn counts and status) is changed in
    place and returned; a thread without a parent keeps it as it is. The runtime's settle
    writes it in its one update of the thread's row, and then calls :func:`on_flow_end`.
    """
    if state.parent_id is None:
        return execution
    outcome = _final_outcome(flow)
    if outcome is not None:
        execution["last_outcome"] = {
            "reason": outcome.reason,
            "failed": outcome.failed,
            "content": outcome.content,
            "attachments": [a.model_dump() for a in outcome.attachments],
        }
    else:
        execution.pop("last_outcome", None)
    execution["last_stop_reason"] = reason
    if _answering(state, reason, execution) and execution.get("waiter"):
        execution["answered"] = execution.pop("waiter")  # the call is answered in this write
    elif state.runtime.workers is not None and execution.get("waiter"):
        from sa_core.engine.child_wait import announce_settled

        announce_settled(state)  # wakes the waiting call, on any worker, once this commits
    return execution


def _answering(state: ThreadState, reason: str, execution: Mapping[str, Any]) -> bool:
    """Whether a child's settle answers its waiting blocking call itself."""
    runtime = state.runtime
    return (
        reason != "awaiting_approval"
        and state.thread_id in runtime.scheduler.awaited
        and bool(execution.get("waiter") or execution.get("answered"))
        and _can_answer_here(runtime, execution)
    )


async def on_flow_end(state: ThreadState, flow: Flow, reason: str) -> None:
    """After a child's flow settled its row: the registry status, and the parent's report.

    The row's execution entry was shaped by :func:`settled_execution` and written before.
    """
    runtime = state.runtime
    if state.parent_id is None:
        return
    outcome = _final_outcome(flow)
    execution = state.row.execution
    answering = _answering(state, reason, execution)
    if reason == "awaiting_approval":  # parked, not finished: the parent keeps waiting
        await runtime.update_child(state.parent_id, state.thread_id, status=reason)
        return
    if answering:
        # answered in this settle (or in the settle of a flow before this one, while the
        # call still waits): the waiting call reads the outcome without another transaction
        await runtime.update_child(
            state.parent_id, state.thread_id, status=_entry_status(state.row)
        )
        return
    if state.thread_id in runtime.scheduler.awaited or execution.get("waiter"):
        return  # a blocking call receives the outcome as its result
    entries = await runtime.store.list_children(state.parent_id)
    entry = next((e for e in entries if e.reference == state.thread_id), None)
    if entry is None:
        return
    finished = finishes(state, reason)  # a non-resumable child: terminated by this settle
    if state.terminated is not None and not finished:
        return
    if outcome is None:
        if reason == "aborted_by_user":  # stopped: not running any more, nothing to report
            await runtime.update_child(state.parent_id, state.thread_id, status="idle")
            return
        if not entry.resumable and reason not in ("awaiting_human",):
            outcome_text, failed = NO_TERMINAL_TEXT.format(reason=reason), True
        else:
            await runtime.update_child(state.parent_id, state.thread_id, status="idle")
            return
    else:
        outcome_text, failed = outcome.content or "", outcome.failed
    status = "terminated" if finished else ("failed" if failed else "idle")
    await runtime.update_child(state.parent_id, state.thread_id, status=status)
    if entry.parent_communication == "explicit":
        return
    parent = await state.get_parent_thread()
    if parent is None or parent.terminated is not None:
        return
    from sa_core.engine.files import copy_attachments

    copied = []
    if outcome is not None and outcome.attachments:
        copied = await copy_attachments(state, outcome.attachments, parent)
    template = FAILURE_TEXT if failed else RESULT_TEXT
    text = template.format(ref=state.thread_id, result=outcome_text)
    if copied:
        text += ATTACHMENTS_TEXT.format(paths="\n".join(r.path for r in copied))
    role = "assistant" if state.row.properties.get("owner_side") == "b" else "user"
    await parent.queue_message(
        {
            "role": role,
            "content": text,
            "silent": True,
            "attachments": copied,
            "metadata": {
                "subagent_id": state.thread_id,
                "subagent_event": "failure" if failed else "result",
            },
        }
    )
    await state.inject_message(
        {
            "role": "system",
            "content": "Subagent forwarded "
            + ("failure details" if failed else "results")
            + " to parent thread.",
            "silent": True,
            "metadata": {"status_kind": "subagent_event"},
        }
    )


__all__ = [
    "LIFECYCLE_TOOLS",
    "boot_immediate",
    "lifecycle_tools",
    "on_flow_end",
    "run_lifecycle_tool",
]
