"""Human approval of tool calls.

A tool defined with ``requires_approval=True`` (or listed by a prompt as
``{"name": ..., "requires_approval": true}``) does not run when the model calls it. The flow
stores the assistant message with its calls as usual, runs the calls that need no approval,
records the others as *pending approvals* in the database (thread value ``sa:approvals``) and
parks: the turn stops with reason ``awaiting_approval``, the thread's status is
``awaiting_approval`` and a parent's registry entry for the thread says the same.

A decision (:func:`decide`: ``thread.approve`` / ``thread.deny``, or
``POST threads/{id}/approvals/{tool_call_id}``) is stored first, then the thread's runner starts.
At the top of its loop the flow executes the decided calls in the order the model made them (an
approved call runs with its possibly edited arguments, through the tool hooks; a denied one stores
a failed tool result carrying the reason) and steps on once no call is left undecided, so the
model sees every result. Everything is in the database, so a restart keeps pending approvals and
decisions; a blocking parent waits through its child's approvals. Stopping or terminating the
thread settles its pending calls as not run (:func:`cancel_pending`).
"""

from __future__ import annotations

import asyncio
import json
import weakref
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Literal

from sa_core.engine.mcp import offered_mcp_tools
from sa_core.engine.messages import create_messages
from sa_core.engine.offered import offered_tools
from sa_core.engine.scrub import emit
from sa_core.engine.toolrows import cancelled_rows, store_tool_row
from sa_core.errors import (
    ApprovalArgumentsError,
    ApprovalConflictError,
    ApprovalNotFoundError,
)
from sa_core.errors import ApprovalError as ApprovalError
from sa_core.spec import SideConfig, ToolCall, ToolCallFunction, ToolResult
from sa_core.spec.schemas import validate_args
from sa_core.store.clock import now_us

if TYPE_CHECKING:
    from sa_core.engine.flow import Flow
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.threads import ThreadRef
    from sa_core.engine.tools import OfferedTool
    from sa_core.spec import Message

KEY = "sa:approvals"
STATUS = "awaiting_approval"
_approved: ContextVar[str | None] = ContextVar("sa_approved_call", default=None)
_events: weakref.WeakKeyDictionary[Kernel, dict[str, asyncio.Event]] = weakref.WeakKeyDictionary()
_pending_known: weakref.WeakKeyDictionary[Kernel, dict[str, bool]] = weakref.WeakKeyDictionary()
"""Per kernel, whether a thread has pending approvals: read from the database once per thread,
then kept up to date here (every approval write goes through this module), so a step of a
thread without approvals costs no query. At most ``KNOWN_THREADS`` threads per runtime, the
most recently marked: a thread dropped from it is read from the database again."""
KNOWN_THREADS = 10_000


def _mark(kernel: Kernel, thread_id: str, pending: bool) -> None:
    known = _pending_known.setdefault(kernel, {})
    known.pop(thread_id, None)  # re-inserted last: the dict's order is the order of use
    known[thread_id] = pending
    if len(known) > KNOWN_THREADS:
        del known[next(iter(known))]


def mark_no_pending(kernel: Kernel, thread_id: str) -> None:
    """Record that a thread created a moment ago has no approval requests (no read needed)."""
    _mark(kernel, thread_id, False)


# -- parking --------------------------------------------------------------------------------


async def gate(
    flow: Flow, call: ToolCall, offered: dict[str, OfferedTool], config: SideConfig
) -> Message | None | Literal[False]:
    """Before a tool call runs: ``False`` to run it, ``None`` when parked, or a refusal row."""
    tool = offered.get(call.name)
    if tool is None or not tool.requires_approval or _approved.get() == call.id:
        return False
    if flow.depth > 0:
        result = ToolResult(
            status="error",
            error=f"Tool '{call.name}' requires human approval, which is only possible in a "
            f"thread's main flow, not inside a subprompt.",
            error_code="approval_unavailable",
        )
        return await store_tool_row(flow, call, result, config)
    kernel, thread = flow.engine, flow.thread
    store = kernel.store
    pending = await store.get_value(thread.thread_id, KEY) or {}
    prompt = thread.prompt.name if thread.prompt is not None else config.prompt
    pending.setdefault("side", flow.current_side)
    pending.setdefault("prompt", prompt)
    if flow.messages:  # the turn so far; a later flow that runs the decisions resumes it
        pending.setdefault("turn_start", flow.messages[0].id)
    calls = pending.setdefault("calls", {})
    calls[call.id] = {
        "tool_call_id": call.id,
        "name": call.name,
        "arguments": call.arguments,
        "requested_at": now_us(),
        "decision": None,
    }
    await store.set_value(thread.thread_id, KEY, pending)
    _mark(kernel, thread.thread_id, True)
    flow.unanswered = [c for c in flow.unanswered if c.id != call.id]
    emit(kernel, thread, "tool_call_awaiting_approval", {"id": call.id, "name": call.name})
    return None


async def settle(flow: Flow, side: str, config: SideConfig) -> bool:
    """Before a step: run decided calls; ``True`` while any call still awaits a decision."""
    if flow.depth > 0:
        return False
    kernel, thread = flow.engine, flow.thread
    thread_id = thread.thread_id
    store = kernel.store
    if _pending_known.get(kernel, {}).get(thread_id) is False:
        return False
    pending = await store.get_value(thread_id, KEY)
    _mark(kernel, thread_id, bool(pending))
    if not pending:
        return False
    calls: dict[str, Any] = pending.get("calls", {})
    decided = [c for c in calls.values() if c.get("decision") is not None]
    if not decided:
        return True
    if pending.get("side") in ("a", "b") and pending["side"] != side:
        side = pending["side"]
        config = flow.side_config(side) or config  # type: ignore[arg-type]
        flow.current_side = side  # type: ignore[assignment]
    await _resume_turn(flow, pending.get("turn_start"))
    prompt = kernel.scope_of(thread).prompt(pending.get("prompt") or config.prompt)
    previous = thread.prompt
    thread.prompt = prompt
    try:
        offered = await _offered(kernel, thread, prompt, side)
        for entry in decided:
            decision = entry["decision"]
            arguments = decision.get("arguments")
            if arguments is None:
                arguments = entry["arguments"]
            call = ToolCall(
                id=entry["tool_call_id"],
                function=ToolCallFunction(name=entry["name"], arguments=json.dumps(arguments)),
            )
            if decision.get("approve"):
                token = _approved.set(call.id)
                try:
                    await flow.run_call(call, offered, config)
                finally:
                    _approved.reset(token)
            else:
                reason = decision.get("reason") or "no reason given"
                result = ToolResult(
                    status="error",
                    error=f"A human denied this tool call: {reason}",
                    error_code="approval_denied",
                )
                await store_tool_row(flow, call, result, config)
            calls.pop(entry["tool_call_id"], None)
            if calls:
                await store.set_value(thread_id, KEY, pending)
            else:
                await store.delete_value(thread_id, KEY)
                _mark(kernel, thread_id, False)
    finally:
        thread.prompt = previous
    return bool(calls)


async def _resume_turn(flow: Flow, first: str | None) -> None:
    """In a new flow, put the parked turn's messages back in front of the flow's own."""
    if first is None or any(m.id == first for m in flow.messages):
        return
    history = await flow.engine.store.history(flow.thread.thread_id)
    ids = [m.id for m in history]
    if first not in ids:
        return
    known = {m.id for m in flow.messages}
    turn = [m for m in history[ids.index(first) :] if m.id not in known]
    flow.messages[:0] = turn


async def _offered(
    kernel: Kernel, thread: ThreadRef, prompt: Any, side: str
) -> dict[str, OfferedTool]:
    scope = kernel.scope_of(thread)
    offered = offered_tools(kernel, thread, scope, prompt, side)
    if scope.mcp_servers:
        offered.update(await offered_mcp_tools(kernel, thread, scope, prompt))
    return offered


# -- reading and deciding -------------------------------------------------------------------


async def list_pending(kernel: Kernel, thread_id: str) -> list[dict[str, Any]]:
    """The thread's tool calls awaiting (or decided and about to run) approval, in call order."""
    pending = await kernel.store.get_value(thread_id, KEY) or {}
    listed = []
    for entry in pending.get("calls", {}).values():
        decision = entry.get("decision")
        status = "pending"
        if decision is not None:
            status = "approved" if decision.get("approve") else "denied"
        listed.append(
            {
                "tool_call_id": entry["tool_call_id"],
                "name": entry["name"],
                "arguments": entry["arguments"],
                "requested_at": entry["requested_at"],
                "status": status,
            }
        )
    return listed


async def decide(
    kernel: Kernel,
    thread: ThreadRef,
    tool_call_id: str,
    *,
    approve: bool,
    arguments: dict[str, Any] | None = None,
    reason: str | None = None,
) -> None:
    """Record a decision on a pending call and start the thread's runner to act on it.

    Raises:
        ApprovalNotFoundError: no pending call with this id.
        ApprovalConflictError: the call was already decided.
        ApprovalArgumentsError: edited ``arguments`` do not validate against the tool's args.
    """
    store = kernel.store
    thread_id = thread.thread_id
    pending = await store.get_value(thread_id, KEY) or {}
    calls = pending.get("calls", {})
    entry = calls.get(tool_call_id)
    if entry is None:
        known = ", ".join(calls) or "none"
        raise ApprovalNotFoundError(
            f"Thread {thread_id} has no tool call '{tool_call_id}' awaiting approval "
            f"(pending: {known}); list them with GET threads/{{id}}/approvals."
        )
    if entry.get("decision") is not None:
        raise ApprovalConflictError(
            f"Tool call '{tool_call_id}' was already "
            f"{'approved' if entry['decision'].get('approve') else 'denied'}."
        )
    if approve and arguments is not None:
        await _check_arguments(kernel, thread, pending, entry["name"], arguments)
    entry["decision"] = {
        "approve": approve,
        "arguments": arguments if approve else None,
        "reason": None if approve else (reason or "no reason given"),
        "decided_at": now_us(),
    }
    await store.set_value(thread_id, KEY, pending)
    side: Literal["a", "b"] = "b" if pending.get("side") == "b" else "a"
    if all(c.get("decision") is not None for c in calls.values()):
        parent_id = thread.row.parent_id
        if parent_id is not None:
            await kernel.threads.update_child(parent_id, thread_id, status="running")
        kernel.scheduler.kick(thread_id, side)
        event = _events.get(kernel, {}).pop(thread_id, None)
        if event is not None:
            event.set()


async def _check_arguments(
    kernel: Kernel,
    thread: ThreadRef,
    pending: dict[str, Any],
    name: str,
    arguments: dict[str, Any],
) -> None:
    prompt = kernel.scope_of(thread).prompt(pending.get("prompt") or "")
    offered = await _offered(kernel, thread, prompt, pending.get("side") or "a")
    tool = offered.get(name)
    if tool is None:
        raise ApprovalArgumentsError(name, ["the tool is no longer offered by the prompt"])
    if tool.native is not None:
        _, problems = validate_args(tool.native.args, arguments)
    else:
        _, problems = validate_args(tool.parameters, arguments)
    if problems:
        raise ApprovalArgumentsError(name, problems)


async def cancel_pending(
    kernel: Kernel, thread: ThreadRef, how: Literal["stopped", "terminated"]
) -> None:
    """On ``stop`` / ``terminate``: settle every call still awaiting approval as not run.

    Each pending call (decided or not: none of them ran) gets the failed tool result ``Not run:
    the thread was <how> before a human decided.`` (error code ``approval_cancelled``), stored
    with the approvals dropped in one transaction, so that the conversation stays complete and no
    later turn stays parked on them. The thread's status leaves ``awaiting_approval``, a parent's
    registry entry follows, and a blocking parent waiting through the approvals stops waiting.
    """
    store = kernel.store
    thread_id = thread.thread_id
    if _pending_known.get(kernel, {}).get(thread_id) is False:
        return
    pending = await store.get_value(thread_id, KEY)
    if pending:
        # a decided call the stopped runner finished but had not yet crossed off has its row
        answered = {m.tool_call_id for m in await store.history(thread_id) if m.role == "tool"}
        entries = pending.get("calls", {}).values()
        unanswered = [e for e in entries if e["tool_call_id"] not in answered]
        rows = cancelled_rows(thread_id, unanswered, how)
        async with store.transaction():
            await create_messages(kernel, thread, rows)
            await store.delete_value(thread_id, KEY)
    _mark(kernel, thread_id, False)
    if not pending:
        return
    row = kernel.threads.live_row(thread_id) or thread.row
    if row.execution.get("status") == STATUS:
        execution = {**row.execution, "status": "idle", "last_stop_reason": "aborted_by_user"}
        row.execution = execution
        await store.update_thread(thread_id, execution=execution)
    waiting = thread_id in kernel.scheduler.awaited  # the waiter settles the registry status
    parent_id = thread.row.parent_id
    if parent_id is not None and row.terminated is None and not waiting:
        await kernel.threads.update_child(parent_id, thread_id, status="idle")
    event = _events.get(kernel, {}).pop(thread_id, None)
    if event is not None:
        event.set()


async def wait_through_approvals(kernel: Kernel, thread_id: str) -> None:
    """For a blocking parent: after the child's runner ends, wait while it awaits approval."""
    while True:
        await kernel.scheduler.wait(thread_id)
        # a live row is kept current by this process's writes (its runner just ended here)
        row = kernel.threads.live_row(thread_id) or await kernel.store.get_thread(thread_id)
        if row is None or row.terminated is not None or row.stopped:
            return
        if row.execution.get("last_stop_reason") != STATUS:
            return
        pending = await kernel.store.get_value(thread_id, KEY)
        if not pending:
            return
        if all(c.get("decision") is not None for c in pending.get("calls", {}).values()):
            await asyncio.sleep(0)  # decided: the runner is (about to be) started
            continue
        event = _events.setdefault(kernel, {}).setdefault(thread_id, asyncio.Event())
        await event.wait()
