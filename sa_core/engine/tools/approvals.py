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

Calls of *client tools* (:mod:`sa_core.engine.turn.clienttools`) park the same way: the gate records
them with ``client: true`` and the turn stops with reason ``awaiting_client_tools`` (while no
call awaits a human); their decision is the result the client sent (``{"output": ...}``), which
:func:`settle` stores as the call's tool row. They are not approvals: :func:`list_pending` and
:func:`decide` leave them out.
"""

from __future__ import annotations

import asyncio
import json
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Literal

from sa_core.engine.frames import emit
from sa_core.engine.messages import create_messages
from sa_core.engine.tools.mcp import offered_mcp_tools
from sa_core.engine.tools.offered import offered_tools
from sa_core.engine.tools.toolrows import cancelled_rows, store_tool_row
from sa_core.errors import (
    ApprovalArgumentsError,
    ApprovalConflictError,
    ApprovalNotFoundError,
)
from sa_core.errors import ApprovalError as ApprovalError
from sa_core.spec import Side, SideConfig, ToolCall, ToolCallFunction, ToolResult
from sa_core.spec.schemas import validate_args
from sa_core.store.clock import now_us

if TYPE_CHECKING:
    from sa_core.engine.flowview import ToolFlow
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.threads import ThreadRef
    from sa_core.engine.tools.tools import OfferedTool
    from sa_core.spec import Message

Parked = Literal["awaiting_approval", "awaiting_client_tools"]

KEY = "sa:approvals"
STATUS: Parked = "awaiting_approval"
CLIENT_STATUS: Parked = "awaiting_client_tools"
"""Why a turn stops, and the thread's status, while only client tool calls await results."""
PARKED = (STATUS, CLIENT_STATUS)
CLIENT_RESULT = "client_tool"
"""Metadata key (``True``) of the tool row holding a result a client sent for its tool's call."""
_approved: ContextVar[str | None] = ContextVar("sa_approved_call", default=None)


class ApprovalWaits:
    """One runtime's approval bookkeeping (``kernel.local``).

    Attributes:
        events: Thread id -> the event a call waiting through approvals sleeps on.
        pending_known: Whether a thread has pending approvals: read from the database once
            per thread, then kept up to date here (every approval write goes through this
            module), so a step of a thread without approvals costs no query. At most
            ``KNOWN_THREADS`` threads, the most recently marked: a thread dropped from it is
            read from the database again.
    """

    __slots__ = ("events", "pending_known")

    def __init__(self) -> None:
        self.events: dict[str, asyncio.Event] = {}
        self.pending_known: dict[str, bool] = {}


KNOWN_THREADS = 10_000


def _mark(kernel: Kernel, thread_id: str, pending: bool) -> None:
    known = kernel.local[ApprovalWaits].pending_known
    known.pop(thread_id, None)  # re-inserted last: the dict's order is the order of use
    known[thread_id] = pending
    if len(known) > KNOWN_THREADS:
        del known[next(iter(known))]


def mark_no_pending(kernel: Kernel, thread_id: str) -> None:
    """Record that a thread created a moment ago has no approval requests (no read needed)."""
    _mark(kernel, thread_id, False)


def known_clear(kernel: Kernel, thread_id: str) -> bool:
    """Whether the thread is known to have no pending calls (no read needed)."""
    return kernel.local[ApprovalWaits].pending_known.get(thread_id) is False


def mark(kernel: Kernel, thread_id: str, pending: bool) -> None:
    """Record whether a thread has pending calls, as a read of its approvals value just said."""
    _mark(kernel, thread_id, pending)


def mark_pending(kernel: Kernel, thread_id: str) -> None:
    """Record that a thread's approvals value was just written (read it before the next step)."""
    _mark(kernel, thread_id, True)


# -- parking --------------------------------------------------------------------------------


async def gate(
    flow: ToolFlow, call: ToolCall, offered: dict[str, OfferedTool], config: SideConfig
) -> Message | None | Literal[False]:
    """Before a tool call runs: ``False`` to run it, ``None`` when parked, or a refusal row.

    A client tool's call is always parked (it runs on the client); a gated tool's until approved.
    """
    tool = offered.get(call.name)
    if tool is None or _approved.get() == call.id:
        return False
    client = tool.kind == "client"
    if not (tool.requires_approval or client):
        return False
    if flow.depth > 0 and not client:
        result = ToolResult(
            status="error",
            error=f"Tool '{call.name}' requires human approval, which is only possible in a "
            f"thread's main flow, not inside a subprompt.",
            error_code="approval_unavailable",
        )
        return await store_tool_row(flow, call, result, config)
    kernel, thread = flow.kernel, flow.thread
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
    if client:
        calls[call.id]["client"] = True
    await store.set_value(thread.thread_id, KEY, pending)
    _mark(kernel, thread.thread_id, True)
    flow.answered(call.id)
    event = "tool_call_awaiting_client" if client else "tool_call_awaiting_approval"
    emit(kernel, thread, event, {"id": call.id, "name": call.name})
    return None


async def run_decided_calls(flow: ToolFlow, side: str, config: SideConfig) -> Parked | None:
    """Before a step: act on decided calls; why the turn stays parked, while a call waits.

    Returns:
        ``awaiting_approval`` while a call awaits a human, ``awaiting_client_tools`` while
        only client calls await their results, ``None`` once nothing waits.
    """
    if flow.depth > 0:
        return None
    kernel, thread = flow.kernel, flow.thread
    thread_id = thread.thread_id
    store = kernel.store
    if kernel.local[ApprovalWaits].pending_known.get(thread_id) is False:
        return None
    pending = await store.get_value(thread_id, KEY)
    _mark(kernel, thread_id, bool(pending))
    if not pending:
        return None
    calls: dict[str, Any] = pending.get("calls", {})
    decided = [c for c in calls.values() if c.get("decision") is not None]
    if not decided:
        return _parked_reason(calls)
    if pending.get("side") in ("a", "b") and pending["side"] != side:
        side = pending["side"]
        config = flow.side_config(side) or config  # type: ignore[arg-type]
        flow.act_as(side)  # type: ignore[arg-type]
    await _resume_turn(flow, pending.get("turn_start"))
    flow.resume_turn(pending)
    prompt = kernel.scope_of(thread).prompt(pending.get("prompt") or config.prompt)
    previous = thread.prompt
    thread.prompt = prompt
    try:
        offered: dict[str, OfferedTool] | None = None
        # a call whose row is stored already (a crash came before it was crossed off) is done
        answered = {m.tool_call_id for m in flow.messages if m.role == "tool"}
        for entry in decided:
            if offered is None and not entry.get("client"):
                offered = await _offered(kernel, thread, prompt, side)
            if entry["tool_call_id"] not in answered:
                await _act_on(flow, entry, offered or {}, config)
            calls.pop(entry["tool_call_id"], None)
            if calls:
                await store.set_value(thread_id, KEY, pending)
            else:
                await store.delete_value(thread_id, KEY)
                _mark(kernel, thread_id, False)
    finally:
        thread.prompt = previous
    return _parked_reason(calls) if calls else None


def _parked_reason(calls: dict[str, Any]) -> Parked:
    """``awaiting_approval`` while any call awaits a human, else ``awaiting_client_tools``."""
    if any(not c.get("client") and c.get("decision") is None for c in calls.values()):
        return STATUS
    return CLIENT_STATUS


async def _act_on(
    flow: ToolFlow, entry: dict[str, Any], offered: dict[str, OfferedTool], config: SideConfig
) -> None:
    """Run an approved call, or store a denied call's refusal or a client call's result."""
    decision = entry["decision"]
    arguments = decision.get("arguments")
    if arguments is None:
        arguments = entry["arguments"]
    call = ToolCall(
        id=entry["tool_call_id"],
        function=ToolCallFunction(name=entry["name"], arguments=json.dumps(arguments)),
    )
    if entry.get("client"):
        result = ToolResult(status="success", result=decision.get("output") or "")
        await store_tool_row(flow, call, result, config, metadata={CLIENT_RESULT: True})
    elif decision.get("approve"):
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


async def _resume_turn(flow: ToolFlow, first: str | None) -> None:
    """In a new flow, put the parked turn's messages back in front of the flow's own."""
    if first is None or any(m.id == first for m in flow.messages):
        return
    history = await flow.kernel.store.history(flow.thread.thread_id)
    ids = [m.id for m in history]
    if first not in ids:
        return
    known = {m.id for m in flow.messages}
    turn = [m for m in history[ids.index(first) :] if m.id not in known]
    flow.reload_turn(turn)


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
        if entry.get("client"):
            continue  # a client tool's call awaits the client, not a human
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
    if entry is not None and entry.get("client"):
        raise ApprovalNotFoundError(
            f"Tool call '{tool_call_id}' of thread {thread_id} is a client tool's call: it "
            "awaits the client's result (thread.submit_tool_results), not an approval."
        )
    if entry is None:
        known = ", ".join(c for c, e in calls.items() if not e.get("client")) or "none"
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
    side: Side = "b" if pending.get("side") == "b" else "a"
    if all(c.get("decision") is not None for c in calls.values()):
        parent_id = thread.row.parent_id
        if parent_id is not None:
            await kernel.threads.update_child(parent_id, thread_id, status="running")
        kernel.scheduler.kick(thread_id, side)
        event = kernel.local[ApprovalWaits].events.pop(thread_id, None)
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
    if kernel.local[ApprovalWaits].pending_known.get(thread_id) is False:
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
    if row.execution.get("status") in PARKED:
        execution = {**row.execution, "status": "idle", "last_stop_reason": "aborted_by_user"}
        row.execution = execution
        await store.update_thread(thread_id, execution=execution)
    waiting = thread_id in kernel.scheduler.awaited  # the waiter settles the registry status
    parent_id = thread.row.parent_id
    if parent_id is not None and row.terminated is None and not waiting:
        await kernel.threads.update_child(parent_id, thread_id, status="idle")
    event = kernel.local[ApprovalWaits].events.pop(thread_id, None)
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
        event = kernel.local[ApprovalWaits].events.setdefault(thread_id, asyncio.Event())
        await event.wait()
