"""Spawning: creating a child thread and handing it a message.

A subagent call creates a child (:func:`create`): the child thread, its entry in the parent's
registry and its first message commit in one transaction (a new ``dual_ai`` child's first turn
is owed right there, see :mod:`sa_core.engine.subagents.child_start`), and a blocking call records
itself as the child's waiter in that transaction. ``subagent_message`` hands an existing
instance a message (:func:`message_instance`). Immediate subagents are created when their
prompt becomes active (:func:`boot_immediate`). What the child then reports back is
:mod:`sa_core.engine.subagents.subagent_report`'s.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from sa_core.engine.childlink import ChildLink
from sa_core.engine.delivery import delivery
from sa_core.engine.files import attachment_paths, attachments_named, copy_attachments
from sa_core.engine.forkrefs import current_reference
from sa_core.engine.messages import inject
from sa_core.engine.oneshot import not_addressable
from sa_core.engine.subagents.child_start import can_owe_directly, owe_first_turn, start_child
from sa_core.engine.subagents.creation import new_thread, unset_variables
from sa_core.engine.subagents.subagent_report import await_child, collect
from sa_core.engine.subagents.subagent_vars import child_env, defer_for_variables
from sa_core.engine.tools.offered import subagent_tools
from sa_core.engine.tools.tools import OfferedTool
from sa_core.spec import (
    AttachmentRef,
    ImmediateConfig,
    ResumableConfig,
    SubagentRegistryEntry,
    SubagentToolConfig,
    ToolResult,
)
from sa_core.store.clock import now_us

if TYPE_CHECKING:
    from sa_core.engine.flowview import FlowScratch, SubagentFlow
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.threads import ThreadRef
    from sa_core.spec import Message, PromptDefinition


def child_role(config: SubagentToolConfig) -> str:
    """The role a child receives its parent's messages as (side B receives as ``assistant``)."""
    if (
        isinstance(config.resumable, ResumableConfig)
        and config.resumable.receives_messages == "side_b"
    ):
        return "assistant"
    return "user"


async def create(
    kernel: Kernel,
    thread: ThreadRef,
    flow: SubagentFlow | None,
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
    """Create a child through a subagent relationship and hand it its first message.

    Refused at the instance cap (a blocking relationship capped at one messages its instance
    instead), deferred when variables are missing, re-attached when a restart interrupted the
    call after it created the child. The result is the blocking child's outcome, or
    "initiated".
    """
    assert tool.subagent is not None and tool.agent is not None and tool.agent_scope is not None
    config = tool.subagent
    agent, scope = tool.agent, tool.agent_scope
    capped = await _at_cap(kernel, thread, config, agent.name, message, paths)
    if capped is not None:
        return capped
    refs_in = await attachments_named(kernel.store, thread.thread_id, paths)
    if isinstance(refs_in, ToolResult):
        return refs_in
    env = child_env(thread.row, scope, agent)
    env.update(extra_env or {})
    env.update(provided_env or {})
    missing = unset_variables(kernel, scope, agent, env, thread.row.user_id, include_scoped=True)
    if missing:
        return await defer_for_variables(
            kernel,
            thread,
            flow,
            tool,
            message,
            paths,
            name,
            arguments,
            [n for n, _ in missing],
        )
    call_id = thread.tool_call_id
    if call_id is not None and thread.tool_attempt > 1:
        existing = await _child_for_call(kernel, thread, call_id)
        if existing is not None:  # a restart interrupted this call: re-attach, create nothing
            return await collect(kernel, thread, existing, config)
    owner = owner_side or (flow.current_side if flow is not None else "a")
    spawn = _Spawn(tool, env, name, arguments, owner, _spawn_group(flow))
    child = await _spawn(kernel, thread, spawn, message, refs_in)  # held: live handles are weak
    return await collect(kernel, thread, child.thread_id, config)


async def _at_cap(
    kernel: Kernel,
    thread: ThreadRef,
    config: SubagentToolConfig,
    agent_name: str,
    message: str,
    paths: list[str],
) -> ToolResult | None:
    """The result of a create refused (or turned into a message) at the instance cap."""
    live = [e for e in thread.children if e.name == agent_name and e.status != "terminated"]
    cap = config.resumable.max_instances if isinstance(config.resumable, ResumableConfig) else None
    if cap is None or len(live) < cap:
        return None
    if config.blocking and cap == 1 and len(live) == 1:
        return await message_instance(
            kernel,
            thread,
            {"referenceId": live[0].reference, "message": message, "attachments": paths},
        )
    refs = ", ".join(e.reference for e in live)
    return ToolResult(
        status="error",
        error=(
            f'Subagent instance limit reached for "{agent_name}" ({cap}). Use '
            f"subagent_message with an existing reference instead. Active references: {refs}"
        ),
        error_code="subagent_limit_reached",
    )


@dataclass(frozen=True, slots=True)
class _Spawn:
    """What a new child is created with, besides its first message."""

    tool: OfferedTool
    env: dict[str, str]
    name: str | None
    arguments: dict[str, Any]
    owner_side: str
    spawn_group: str | None


async def _spawn(
    kernel: Kernel,
    thread: ThreadRef,
    spawn: _Spawn,
    message: str,
    refs_in: list[AttachmentRef],
) -> ThreadRef:
    """Create the child, its registry entry and its first message in one transaction.

    Returns:
        The child's handle (keep it while waiting: the live handles are weak references);
        its runner is started when its first turn was owed directly.
    """
    tool = spawn.tool
    assert tool.subagent is not None and tool.agent is not None and tool.agent_scope is not None
    config, agent, scope = tool.subagent, tool.agent, tool.agent_scope
    store = kernel.store
    call_id = thread.tool_call_id
    name = spawn.name
    tags = [f"name:{_normalise_name(name)}"] if name else []
    properties = {
        "owner_side": spawn.owner_side,
        "relationship": tool.name,
        "prompt": thread.prompt.name if thread.prompt is not None else None,
        "arguments": spawn.arguments,
        "resumable": config.is_resumable,  # a non-resumable child terminates when it reports
    }
    if call_id is not None:
        properties["tool_call_id"] = call_id
    # the child, its registry entry and its first message commit together
    async with store.transaction():
        child = await new_thread(
            kernel,
            agent.name,
            env=spawn.env,
            user_id=thread.row.user_id,
            tags=tags,
            package=scope.package,
            parent_id=thread.thread_id,
            properties=properties,
        )
        await boot_immediate(kernel, child)
        entry = SubagentRegistryEntry(
            reference=child.thread_id,
            name=agent.name,
            title=agent.title,
            description=tool.description,
            resumable=config.is_resumable,
            blocking=config.blocking,
            thread_name=name,
            spawn_group_id=spawn.spawn_group,
            created_at=now_us(),
            status="running",
            parent_communication=config.parent_communication,
        )
        await store.upsert_child(thread.thread_id, entry, new=True)
        shared = thread.shared
        shared.children = [*[e for e in shared.children if e.reference != entry.reference], entry]
        copied = await copy_attachments(store, thread.thread_id, refs_in, child.thread_id)
        if can_owe_directly(kernel, child):  # its owed turn: no drain
            first_message = await _hand_over_first(kernel, thread, child, config, message, copied)
        else:
            first_message = None
            await _hand_over(kernel, thread, child, config, message, copied, first=True)
    if first_message is not None:
        start_child(kernel, child.thread_id, first_message)
    return child


async def _child_for_call(kernel: Kernel, thread: ThreadRef, call_id: str) -> str | None:
    """The child a tool call created or waits on (recorded durably with the child)."""
    for entry in thread.children:
        row = await kernel.store.get_thread(entry.reference)
        if row is not None and (
            row.properties.get("tool_call_id") == call_id
            or ChildLink.from_execution(row.execution).concerns(call_id)
        ):
            return row.id
    return None


async def _deliver(
    kernel: Kernel,
    thread: ThreadRef,
    child: ThreadRef,
    config: SubagentToolConfig,
    message: str,
    attachments: list[AttachmentRef],
) -> ToolResult:
    """Hand a blocking call's message to an existing child, and wait for its outcome."""
    call_id = thread.tool_call_id
    if (
        config.blocking
        and call_id is not None
        and thread.tool_attempt > 1
        and ChildLink.from_execution(child.row.execution).concerns(call_id)
    ):
        return await collect(kernel, thread, child.thread_id, config)  # delivered before a restart
    await _hand_over(kernel, thread, child, config, message, attachments, first=False)
    return await collect(kernel, thread, child.thread_id, config)


async def _hand_over(
    kernel: Kernel,
    thread: ThreadRef,
    child: ThreadRef,
    config: SubagentToolConfig,
    message: str,
    attachments: list[AttachmentRef],
    *,
    first: bool,
) -> None:
    """Queue the message on the child; a blocking call also records itself as the waiter.

    One transaction: after a restart the parent finds the child it waits on by its tool call id.
    """
    role = child_role(config)
    async with kernel.store.transaction():
        if first:
            await _announce_attachments(kernel, child, attachments)
        if config.blocking:
            await await_child(kernel, child, thread.tool_call_id or "")
        await delivery.queue_message(
            kernel, child, {"role": role, "content": message, "attachments": attachments}
        )


async def _announce_attachments(
    kernel: Kernel, child: ThreadRef, attachments: list[AttachmentRef]
) -> None:
    """Tell a new child where the files of its first message are (silent user messages)."""
    for ref in attachments:
        content = f"Initial asset attachment path: {ref.path}"
        await inject(kernel, child, {"role": "user", "content": content, "silent": True})


async def _hand_over_first(
    kernel: Kernel,
    thread: ThreadRef,
    child: ThreadRef,
    config: SubagentToolConfig,
    message: str,
    attachments: list[AttachmentRef],
) -> Message:
    """Like :func:`_hand_over` for a new child: the first message is stored, its turn owed."""
    async with kernel.store.transaction():
        await _announce_attachments(kernel, child, attachments)
        if config.blocking:
            await await_child(kernel, child, thread.tool_call_id or "")
        role: Literal["user", "assistant"] = (
            "assistant" if child_role(config) == "assistant" else "user"
        )
        return await owe_first_turn(kernel, child, role, message, attachments)


def _spawn_group(flow: SubagentFlow | None) -> str | None:
    if flow is None:
        return None
    for message in reversed(flow.messages):
        if message.role in ("assistant", "user") and message.tool_calls:
            return message.id
    return None


def _normalise_name(name: str) -> str:
    return re.sub(r"\s+", " ", name).strip()[:120]


async def message_instance(
    kernel: Kernel, thread: ThreadRef, arguments: Mapping[str, Any]
) -> ToolResult:
    """``subagent_message``: deliver a message to a live resumable instance."""
    reference = arguments.get("referenceId") or arguments.get("reference_id")
    reference = await current_reference(kernel, thread, reference)
    message = arguments.get("message")
    if not isinstance(reference, str) or not isinstance(message, str) or not message.strip():
        return ToolResult(
            status="error", error="subagent_message requires referenceId and message."
        )
    entry = next((e for e in thread.children if e.reference == reference), None)
    refused = not_addressable(entry) if entry is not None else None
    if refused is not None:
        return refused
    store = kernel.store
    row = await store.get_thread(reference) if entry else None
    if entry is None or row is None or row.terminated is not None or entry.status == "terminated":
        return ToolResult(status="error", error=f'Subagent reference "{reference}" is not active.')
    paths = attachment_paths(arguments.get("attachments"))
    refs = await attachments_named(store, thread.thread_id, paths)
    if isinstance(refs, ToolResult):
        return refs
    child = await kernel.threads.ref_for(row)
    copied = await copy_attachments(store, thread.thread_id, refs, child.thread_id)
    config = _config_for(kernel, thread, row)
    await kernel.threads.update_child(thread.thread_id, reference, status="running")
    if config is not None and config.blocking:
        return await _deliver(kernel, thread, child, config, message, copied)
    role = child_role(config) if config is not None else "user"
    await delivery.queue_message(
        kernel, child, {"role": role, "content": message, "attachments": copied}
    )
    return ToolResult(
        status="success", result=f"Message sent to subagent {reference}.", subagent_id=reference
    )


async def terminate_instance(
    kernel: Kernel, thread: ThreadRef, arguments: Mapping[str, Any]
) -> ToolResult:
    """``subagent_terminate``: terminate a child of this thread (a remote task is cancelled)."""
    reference = arguments.get("referenceId") or arguments.get("reference_id")
    reference = await current_reference(kernel, thread, reference)
    entry = next((e for e in thread.children if e.reference == reference), None)
    if not isinstance(reference, str) or entry is None:
        return ToolResult(
            status="error",
            error=f"subagent_terminate requires the referenceId of a subagent of this thread "
            f'(got "{reference}").',
        )
    child = await kernel.threads.open(reference)
    if child is not None and child.row.terminated is None:
        await delivery.terminate(kernel, child)
    return ToolResult(
        status="success", result=f"Subagent {reference} terminated.", subagent_id=reference
    )


def _config_for(kernel: Kernel, thread: ThreadRef, child_row: Any) -> SubagentToolConfig | None:
    """The relationship a child was created through: its prompt's entry in the parent's package.

    Children created before the prompt was recorded fall back to the active prompt, then to any
    prompt of the parent's package; other packages' prompts are never consulted.
    """
    name = child_row.properties.get("relationship") or child_row.agent_id
    scope = kernel.scope_of(thread)
    recorded = scope.prompts.get(child_row.properties.get("prompt") or "")
    candidates = [p for p in (recorded, thread.prompt) if p is not None]
    for prompt in [*candidates, *scope.prompts.values()]:
        tool = kernel.caches.tool_table(scope, prompt).tools.get(name)
        if tool is not None and tool.subagent is not None:
            return tool.subagent
    return None


async def boot_immediate(kernel: Kernel, thread: ThreadRef) -> None:
    """Create the immediate subagents of the prompts the thread's agent makes active.

    Side A's prompt, and side B's on a ``dual_ai`` agent: both become active with the thread
    (or the handoff), so both sides' immediate entries start then (seed 001, 5.2). A side B
    child is owned by side B: its reports are queued for side B to act on.
    """
    agent = kernel.agent_of(thread)
    scope = kernel.scope_of(thread)
    sides = [("a", agent.side_a)]
    side_b = agent.side_b if agent.type == "dual_ai" else None
    if side_b is not None and side_b.prompt != agent.side_a.prompt:  # a prompt boots once
        sides.append(("b", side_b))
    first = None
    for side, config in sides:
        prompt = scope.prompts.get(config.prompt)
        if prompt is not None:
            first = first or prompt
            await _boot_prompt(kernel, thread, prompt, side)
    if first is not None:
        thread.prompt = first  # side A's, which acts first


async def _boot_prompt(
    kernel: Kernel, thread: ThreadRef, prompt: PromptDefinition, side: str
) -> None:
    """Create the immediate subagents of one side's prompt, owned by that side."""
    thread.prompt = prompt  # the prompt each child records as its relationship's
    table = kernel.caches.tool_table(kernel.scope_of(thread), prompt)
    for tool in subagent_tools(kernel, thread, table).values():
        config = tool.subagent
        if config is None or not config.immediate:
            continue
        for index, (name, message, env) in enumerate(_immediate_instances(thread, config)):
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
            await create(
                kernel,
                thread,
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
    thread: ThreadRef, config: SubagentToolConfig
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
            if (value := thread.row.env.get(key + suffix)) is not None
        }
        name = thread.row.env.get(spec.name_env + suffix) if spec.name_env else None
        description = (
            thread.row.env.get(spec.description_env + suffix) if spec.description_env else None
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


async def run_immediate(flow: FlowScratch) -> bool:
    """Boot immediates after a handoff made a new prompt active; never ends the step."""
    if flow.context.pop("_immediate_due", False):
        await boot_immediate(flow.kernel, flow.thread)
    return False


def reset_immediate(flow: FlowScratch) -> None:
    """Mark the new active prompt's immediates to boot before the next step."""
    flow.context["_immediate_due"] = True


__all__ = [
    "boot_immediate",
    "child_role",
    "create",
    "message_instance",
    "reset_immediate",
    "run_immediate",
    "terminate_instance",
]
