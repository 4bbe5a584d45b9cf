"""Every way a tool call becomes a tool row (the ``tool`` message answering the call).

* :func:`store_tool_row`: the result of a call that ran (or was refused), through the
  ``before_store_tool_result`` hook, with its attachments stored and a session tool's mapped
  message; the row of a call that ends the session settles the flow in its own commit
  (:func:`store_ending_row`); a successful call's writes to the pack's store commit with its
  row (:func:`store_row_with_writes`), a failed call's are dropped;
* :func:`store_error_row`: a failed result written as it is (an empty or rejected answer, a
  crashed step);
* :func:`cleanup_after_abort`: the calls a stop cut off (``Failed to execute tool: ...``);
* :func:`cancelled_rows`: the calls a stop or terminate left awaiting approval;
* :func:`refused_on_resume`: the result of a call a restart interrupted that may not run again.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any, Literal

from pydantic_core import to_jsonable_python

from sa_core.engine.files import attachment_paths, attachments_named, store_attachment
from sa_core.engine.messages import (
    announce_created,
    complete_prepared,
    create_message,
    new_message,
    prepare_message,
)
from sa_core.engine.secrets import redact
from sa_core.engine.tools.offered import resolve_any_tool
from sa_core.engine.tools.tools import (
    OfferedTool,
    argument_text,
    normalise_result,
    result_text,
)
from sa_core.spec import (
    AttachmentRef,
    Message,
    SessionToolBinding,
    SideConfig,
    ToolAttachment,
    ToolCall,
    ToolResult,
)
from sa_core.store.clock import now_us

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from sa_core.engine.flowview import ToolFlow
    from sa_core.store.packitems import ItemWrite, StoreWrites

STOPPED_BY_USER = "Execution stopped by user"
INTERRUPTED = "Execution interrupted by a runtime shutdown; the turn resumes on restart"
INTERRUPTED_TOOL = "Interrupted by a restart before it finished."
"""Result of a tool call a restart interrupted that may not run again."""
MAX_TOOL_ATTEMPTS = 2
"""Runs a tool call may start: the first, and one more after a restart interrupted it."""
NO_SIDE = SideConfig(prompt="")
"""The side config of a row written without one: no session tool maps its result."""


async def store_tool_row(
    flow: ToolFlow,
    call: ToolCall,
    result: ToolResult,
    config: SideConfig,
    *,
    message_id: str | None = None,
    raw: bool = False,
    metadata: dict[str, Any] | None = None,
    writes: StoreWrites | None = None,
) -> Message:
    """Store the tool row answering ``call`` with ``result`` and remember it in the flow.

    ``raw``: skip the ``before_store_tool_result`` hook (a result the engine made itself).
    ``metadata``: more of the row's metadata (beside an error's code and data).
    The row of the step's only call that ends the session settles the flow in its commit.
    ``writes``: the call's writes to the pack's store, committed with the row when the call
    succeeded (dropped when it failed).
    """
    state = flow.state
    hooks = flow.kernel.host.hooks
    if not raw and flow.kernel.wants_hook("before_store_tool_result", flow.thread):
        stored = await hooks.before_store_tool_result(state, call, result)
        result = as_result(stored, result)
    refs = await _stored_refs(flow, result)
    mapped, result, refs = await _mapped_content(flow, call, result, config, refs)
    content = redact(result_text(result, mapped), flow.kernel.secret_values(flow.thread))
    terminal = {b.name for b in (config.session_stop, config.session_fail) if b is not None}
    listed_by_result = result.subagent_id is not None  # subagent results list their files
    if refs and call.name not in terminal and result.status == "success" and not listed_by_result:
        content += "".join(f'\nAttachment path for "{r.name}": {r.path}' for r in refs)
    row = new_message(
        flow.thread.thread_id,
        "tool",
        content,
        id=message_id,
        name=call.name,
        tool_call_id=call.id,
        tool_status=result.status,
        attachments=refs or None,
        subagent_id=result.subagent_id,
        depth=flow.depth,
        parent_id=flow.parent_message_id,
        metadata=_row_metadata(result, metadata),
    )
    held = writes.take() if writes else []
    pending = held if result.status == "success" else []
    ending = ends_session(flow, call, result, config)
    if ending is not None:
        row = await store_ending_row(flow, row, ending, pending)
    elif pending:
        row = await store_row_with_writes(flow, row, pending)
    else:
        row = await create_message(flow.kernel, flow.thread, row)
    flow.remember(row)
    flow.answered(call.id)
    return row


def _row_metadata(result: ToolResult, extra: dict[str, Any] | None) -> dict[str, Any] | None:
    """A tool row's metadata: an error's code and data, and ``extra``."""
    if not result.error_code:
        return extra
    error = {
        "error_code": result.error_code,
        "error_data": to_jsonable_python(result.error_data, fallback=str),
    }
    return {**error, **extra} if extra else error


async def store_error_row(flow: ToolFlow, call: ToolCall, error: str) -> Message:
    """Store the failed result ``error`` for ``call`` as it is (no hook, no session tool)."""
    return await store_tool_row(
        flow, call, ToolResult(status="error", error=error), NO_SIDE, raw=True
    )


async def _stored_refs(flow: ToolFlow, result: ToolResult) -> list[AttachmentRef]:
    """The result's attachments as references, inline ones stored in the thread first."""
    refs: list[AttachmentRef] = []
    for item in result.attachments:
        if isinstance(item, ToolAttachment):
            refs.append(
                await store_attachment(
                    flow.kernel.store,
                    flow.thread.thread_id,
                    item.name,
                    base64.b64decode(item.data),
                    item.mime_type,
                    width=item.width,
                    height=item.height,
                )
            )
        else:
            refs.append(item)
    return refs


async def _mapped_content(
    flow: ToolFlow,
    call: ToolCall,
    result: ToolResult,
    config: SideConfig,
    refs: list[AttachmentRef],
) -> tuple[str | None, ToolResult, list[AttachmentRef]]:
    """A session tool's mapped message and attachments: ``(mapped, result, refs)``.

    A successful call of the side's ``session_stop``/``session_fail``/``session_status`` tool
    reports its ``message_property`` argument as the row's content and adds the files named by
    its ``attachments_property``; a missing file fails the result instead.
    """
    binding = _binding_for(config, call.name)
    mapped: str | None = None
    if binding is not None and result.status == "success":
        args = call.arguments
        if binding.message_property and binding.message_property in args:
            value = args[binding.message_property]
            mapped = "null" if value is None else (argument_text(value) or "").strip()
        if binding.attachments_property:
            paths = attachment_paths(args.get(binding.attachments_property))
            named = await attachments_named(flow.kernel.store, flow.thread.thread_id, paths)
            if isinstance(named, ToolResult):
                result, mapped = named, None
            else:
                refs = refs + named
    return mapped, result, refs


def ends_session(
    flow: ToolFlow, call: ToolCall, result: ToolResult, config: SideConfig
) -> Literal["session_stop", "session_fail"] | None:
    """Why the flow stops once this tool row is stored, when nothing left can change it.

    The step's only call is the side's ``session_fail`` or ``session_stop`` tool and it
    succeeded, in the thread's top-level flow run by its runner, with no queued tool,
    handoff or stop pending: :meth:`sa_core.engine.turn.flow.Flow.after_step` would end the
    session on this row.
    """
    if call.id != flow.sole_call or result.status != "success" or not flow.settles_in_step():
        return None
    if config.session_fail is not None and config.session_fail.name == call.name:
        return "session_fail"
    if config.session_stop is not None and config.session_stop.name == call.name:
        return "session_stop"
    return None


async def store_row_with_writes(
    flow: ToolFlow, row: Message, writes: Sequence[ItemWrite]
) -> Message:
    """Store a tool row and the tool's writes to the pack's store in one commit.

    A crash before the commit leaves neither: the call runs again on resume (or is refused),
    as if it never ran.
    """
    kernel = flow.kernel
    prepared = await prepare_message(kernel, flow.thread, row)
    async with kernel.store.transaction() as tx:
        await kernel.store.write_items(writes, now=now_us(), tx=tx)
        await kernel.store.insert_messages([prepared], tx=tx)
    await announce_created(kernel, flow.thread, [prepared])
    return prepared


async def store_ending_row(
    flow: ToolFlow,
    row: Message,
    reason: Literal["session_stop", "session_fail"],
    writes: Sequence[ItemWrite] = (),
) -> Message:
    """Store the tool row that ends the session and settle the flow in the same commit.

    ``writes``: the tool's writes to the pack's store, committed with them.
    """
    kernel = flow.kernel
    kept = (flow.outcome, dict(flow.turns))
    try:
        async with kernel.store.transaction() as tx:
            if writes:
                await kernel.store.write_items(writes, now=now_us(), tx=tx)
            stored = await create_message(flow.kernel, flow.thread, row, tx=tx)
            await flow.end_session_on(stored, reason)
            queue = await kernel.scheduler.settle_and_read_queue(flow, tx, reason)
    except BaseException:  # rolled back: the runner settles the flow as after any failure
        flow.restore_session(kept)
        raise
    flow.settled_in_commit(queue, reason)
    return stored


async def cleanup_after_abort(flow: ToolFlow) -> None:
    """After a stop (or shutdown) cancelled the flow: settle the model call and the tool calls.

    A user stop keeps what the model already said; the calls left without a result get
    ``Failed to execute tool: ...`` rows, except on a shutdown of a durable flow (they run on
    resume).
    """
    closing = flow.kernel.closing
    reason = INTERRUPTED if closing else STOPPED_BY_USER
    said = "".join(flow.partial)
    flow.partial.clear()
    if said.strip() and not closing:
        # A user stop keeps what the model already said: completed, marked as stopped.
        kept = {"status": "completed", "content": said, "metadata": {"stopped": reason}}
        await fail_unanswered_message(flow, kept)
    else:
        await fail_unanswered_message(flow, {"status": "failed", "metadata": {"error": reason}})
    if closing and flow.durable:
        # a shutdown is a restart like a crash: the calls without results run on resume
        flow.answered_all()
    for call in list(flow.unanswered):
        row = new_message(
            flow.thread.thread_id,
            "tool",
            f"Failed to execute tool: {reason}",
            name=call.name,
            tool_call_id=call.id,
            tool_status="error",
            depth=flow.depth,
            parent_id=flow.parent_message_id,
        )
        await create_message(flow.kernel, flow.thread, row)
    flow.answered_all()
    flow.ended_by("aborted_by_user")


async def fail_unanswered_message(flow: ToolFlow, updates: dict[str, Any]) -> None:
    """Store the message of a model call that never completed as ``failed``.

    Watched or not, a failed call leaves the same row: the prepared (not yet stored)
    message written once with the failure applied.
    """
    prepared = flow.take_prepared()
    if prepared is not None:
        flow.remember(await complete_prepared(flow.kernel, flow.thread, prepared, updates))


async def record_step_error(flow: ToolFlow, exc: Exception) -> None:
    """A step crashed: fail its model call and its unanswered calls, and log the error."""
    text = f"{type(exc).__name__}: {exc}"
    data: dict[str, Any] = {"error": text, "depth": flow.depth}
    try:
        await fail_unanswered_message(flow, {"status": "failed", "metadata": {"error": text}})
        for call in list(flow.unanswered):
            await store_error_row(flow, call, text)
    except Exception as again:  # e.g. the hook that failed the step fails these writes too
        data["recording_error"] = f"{type(again).__name__}: {again}"
    await flow.kernel.log(flow.thread.thread_id, "step_error", data)
    flow.ended_by("step_error")


def cancelled_rows(
    thread_id: str, entries: Iterable[dict[str, Any]], how: Literal["stopped", "terminated"]
) -> list[Message]:
    """The rows (not yet stored) of calls a stop or terminate left awaiting approval.

    ``entries``: the pending entries (``tool_call_id``, ``name``, ``client``). Each row is the
    failed result ``Not run: the thread was <how> before a human decided.`` with the error
    code ``approval_cancelled`` (for a client tool's call: ``... before the client sent its
    result.``, ``client_tool_cancelled``).
    """
    rows = []
    for entry in entries:
        client = bool(entry.get("client"))
        who = "the client sent its result" if client else "a human decided"
        error = f"Not run: the thread was {how} before {who}."
        code = "client_tool_cancelled" if client else "approval_cancelled"
        rows.append(
            new_message(
                thread_id,
                "tool",
                result_text(ToolResult(status="error", error=error)),
                name=entry["name"],
                tool_call_id=entry["tool_call_id"],
                tool_status="error",
                metadata={"error_code": code, "error_data": None},
            )
        )
    return rows


def _binding_for(config: SideConfig, name: str) -> SessionToolBinding | None:
    for binding in (config.session_stop, config.session_fail, config.session_status):
        if binding is not None and binding.name == name:
            return binding
    return None


def as_result(value: Any, fallback: ToolResult) -> ToolResult:
    """A hook's replacement result: a ``ToolResult``, a dict made one, else ``fallback``."""
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, dict):
        return normalise_result(value)
    return fallback


def refused_on_resume(
    flow: ToolFlow,
    call: ToolCall,
    offered: dict[str, OfferedTool],
    attempt: int,
    *,
    allow_any: bool = False,
) -> ToolResult | None:
    """The failed result of a call a restart interrupted that may not run again, else None.

    Native tools run again once (``attempt`` 2) unless defined with ``retry_on_resume=False``;
    subagent calls re-attach to the child they created, so they always proceed. ``allow_any``
    (a queued call) looks the tool up in the package when the prompt does not offer it.
    """
    if attempt <= 1:
        return None
    tool = offered.get(call.name)
    if tool is None and allow_any:
        tool = resolve_any_tool(flow.kernel, flow.thread, call.name)
    if tool is not None and tool.kind in ("subagent", "lifecycle"):
        return None
    native = tool.native if tool is not None else None
    if attempt > MAX_TOOL_ATTEMPTS or (native is not None and not native.retry_on_resume):
        return ToolResult(status="error", error=INTERRUPTED_TOOL, error_code="interrupted")
    return None
