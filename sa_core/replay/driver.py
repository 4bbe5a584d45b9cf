"""Replay: a recorded thread tree run again on new threads, answered from its recording.

:func:`replay_thread` checks the document (its agents loaded here, every model answer
recorded), creates a new root thread of the same agent, and has the engine follow it and its
children (:mod:`sa_core.engine.model.replaying`: answers from the recording, tools recorded or run
again, queued messages taken where the recording took them). It then feeds the recorded
inputs in order: each user message the root received directly, once the replay's root has
reached the place in its history where the recording received it; each approval decision,
when the same call awaits approval (the queued messages and the children's results come by
themselves). When the tree is at rest it compares what is left: recorded model calls, tool
calls and children the replay never made, and each thread's end state (messages, files,
values). Everything it finds is a divergence of the :class:`~sa_core.replay.report.ReplayReport`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from sa_core.engine.delivery.delivery import open_thread, send, stop
from sa_core.engine.messages import new_id
from sa_core.engine.model.replay_record import Divergence, RecordedThread, ReplaySession, ToolReplay
from sa_core.engine.secrets import REDACTED
from sa_core.engine.subagents.creation import new_thread
from sa_core.engine.subagents.subagent_spawn import boot_immediate
from sa_core.engine.tools import approvals
from sa_core.engine.turn.replay_tools import write_recorded_files
from sa_core.replay.document import export_thread
from sa_core.replay.endstate import compare_end
from sa_core.replay.recorded import check_document, recorded_tree
from sa_core.replay.report import ReplayReport
from sa_core.spec.lineage import LineageEntry
from sa_core.store.clock import now_us

if TYPE_CHECKING:
    from sa_core.engine.kernel import Kernel
    from sa_core.spec import Message

POLL_SECONDS = 0.01
"""How often the driver looks at the replay's threads while they run."""
SETTLE_TIMEOUT = 600.0
"""Seconds a replay may run in all before it is reported as stuck."""


async def replay_thread(
    kernel: Kernel,
    source: str | Mapping[str, Any],
    *,
    tools: ToolReplay = "recorded",
    stop_at_first: bool = True,
    wait_timeout: float = 30.0,
) -> ReplayReport:
    """Replay a thread (by id, or an exported document) and report how it went.

    Args:
        kernel: The engine.
        source: A thread id of this runtime's store, or an ``sa-thread/1`` document.
        tools: ``recorded`` (serve each tool's recorded result) or ``execute`` (run the tools
            again); a tool's own ``define_tool(replay=...)`` applies on top.
        stop_at_first: Stop at the first divergence (else go on and report them all).
        wait_timeout: Seconds a thread waits for a message the recording says it received
            before that counts as a divergence.

    Raises:
        ThreadNotFoundError: ``source`` is an id no thread has.
        ThreadDocumentError: the document is not ``sa-thread/1`` or needs agents not loaded.
        ReplayUnavailableError: model answers of the thread were not recorded.
    """
    if isinstance(source, str):
        document = await export_thread(kernel, source)
    else:
        document = dict(source)
    node = check_document(kernel.registry, document)
    session = ReplaySession(recorded_tree(node), tools, stop_at_first, wait_timeout)
    root = await _new_root(kernel, node)
    kernel.replays.begin(session, root.thread_id)
    try:
        await kernel.store.add_lineage(_lineage(root.thread_id, node, tools))
        await boot_immediate(kernel, root)
        await _feed(kernel, session, root.thread_id)
        await _settle(kernel, session)
        if not session.stopped:
            await compare_end(kernel, session)
    finally:
        kernel.replays.end(session)
    return ReplayReport(
        identical=not session.divergences,
        divergence=session.divergences[0] if session.divergences else None,
        divergences=list(session.divergences),
        source_thread_id=str(node.get("id") or ""),
        thread_id=root.thread_id,
        tools=tools,
        model_calls=session.model_calls_served,
        tool_results_served=session.tool_results_served,
        tool_executions=session.tool_executions,
    )


async def _new_root(kernel: Kernel, node: dict[str, Any]) -> Any:
    """The replay's root: the recorded agent, variables and tags; secrets only as stand-ins."""
    env = dict(node.get("env") or {})
    for name in node.get("secrets") or []:
        if name not in kernel.env:  # never recorded: tools run again read this runtime's own
            env[name] = REDACTED
    properties = {**(node.get("properties") or {}), "replay_of": node.get("id")}
    return await new_thread(
        kernel,
        str(node["agent_id"]),
        env,
        node.get("user_id"),
        tags=list(node.get("tags") or []),
        package=str(node["package"]),
        env_types=dict(node.get("env_types") or {}),
        properties=properties,
    )


def _lineage(thread_id: str, node: dict[str, Any], tools: str) -> LineageEntry:
    """The replay's entry in the lineage.

    ``thread.lineage()`` lists it for the replay, and for its source when that is in this store.
    """
    return LineageEntry(
        id=new_id(),
        kind="replay",
        thread_id=thread_id,
        source_id=str(node.get("id") or "") or None,
        created_at=now_us(),
        data={"tools": tools},
    )


def inputs(recorded: RecordedThread) -> list[tuple[int, Message]]:
    """The user messages the recorded root received directly, with their history positions.

    A user message no model wrote (no log), that did not come through the queue (those the
    engine takes itself, :mod:`sa_core.engine.turn.replay_tools`) and not from a child.
    """
    return [
        (position, message)
        for position, message in enumerate(recorded.top)
        if message.role == "user"
        and message.log_id is None
        and not (message.metadata or {}).get("queued")
        and not message.subagent_id
    ]


async def _feed(kernel: Kernel, session: ReplaySession, root_id: str) -> None:
    """Send the recorded inputs in order, each where the recording received it."""
    recorded = session.root
    for position, message in inputs(recorded):
        await _reach(kernel, session, root_id, position)
        if session.stopped:
            return
        thread = await open_thread(kernel, root_id)
        refs = list(message.attachments or [])
        await write_recorded_files(kernel, root_id, recorded, [r.path for r in refs])
        role: Literal["user", "assistant"] = "user"
        await send(
            kernel, thread, message.content or "", role, refs, message.silent, False,
            metadata=dict(message.metadata) if message.metadata else None,
        )  # fmt: skip


async def _reach(kernel: Kernel, session: ReplaySession, root_id: str, position: int) -> None:
    """Wait until the root is idle with ``position`` messages, or nothing can move anymore."""
    scheduler = kernel.scheduler
    while not session.stopped:
        await _decide_approvals(kernel, session)
        count = len(await kernel.store.history(root_id))
        if count >= position and not scheduler.is_running(root_id):
            return
        if not any(scheduler.is_running(t) for t in session.cursors):
            return  # at rest short of the place: what is missing shows at the end
        await asyncio.sleep(POLL_SECONDS)


async def _settle(kernel: Kernel, session: ReplaySession) -> None:
    """Wait until no thread of the replay runs (deciding the approvals they wait for).

    A replay still running after :data:`SETTLE_TIMEOUT` is stopped (its threads through the
    normal stop path, so nothing of it runs once the replay's cursors are gone) and diverges.
    """
    scheduler = kernel.scheduler
    try:
        async with asyncio.timeout(SETTLE_TIMEOUT):
            while True:
                decided = await _decide_approvals(kernel, session)
                if not decided and not any(scheduler.is_running(t) for t in session.cursors):
                    return
                await asyncio.sleep(POLL_SECONDS)
    except TimeoutError:
        running = [c.path for t, c in session.cursors.items() if scheduler.is_running(t)]
        for thread_id in list(session.cursors):
            await stop(kernel, thread_id)
        session.diverge(
            Divergence(
                "different_end_state",
                session.root.path,
                None,
                f"the replay did not come to rest within {SETTLE_TIMEOUT:g}s "
                f"(still running: {', '.join(running)}); it was stopped",
            )
        )


async def _decide_approvals(kernel: Kernel, session: ReplaySession) -> bool:
    """Decide the replay's pending approvals as the recording did; returns whether any."""
    decided = False
    for thread_id, cursor in list(session.cursors.items()):
        recorded = cursor.recorded
        if recorded is None or kernel.scheduler.is_running(thread_id):
            continue
        for pending in await approvals.list_pending(kernel, thread_id):
            if pending["status"] != "pending":
                continue
            decision = _decision(recorded, pending["tool_call_id"])
            if decision is None:
                continue  # never decided in the recording either
            thread = await open_thread(kernel, thread_id)
            await approvals.decide(
                kernel,
                thread,
                pending["tool_call_id"],
                approve=bool(decision.get("approve")),
                arguments=decision.get("arguments"),
                reason=decision.get("reason"),
            )
            decided = True
    return decided


DENIED = "Failed to execute tool: A human denied this tool call: "


def _decision(recorded: RecordedThread, call_id: str) -> dict[str, Any] | None:
    """The recorded decision on a call: its log, else what its result row shows."""
    logged = recorded.decisions.get(call_id)
    if logged is not None:
        return logged
    row = recorded.tool_rows.get(call_id)
    if row is None:
        return None
    content = row.content or ""
    if content.startswith(DENIED):
        return {"approve": False, "reason": content[len(DENIED) :]}
    if (row.metadata or {}).get("error_code") == "approval_cancelled":
        return None
    return {"approve": True}


__all__ = ["inputs", "replay_thread"]
