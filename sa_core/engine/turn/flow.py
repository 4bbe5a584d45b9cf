"""The turn loop: one flow runs steps on a thread until it parks, ends a session, or stops.

Each step (spec reference §6.2): drain the durable queue (the first queued role picks the acting
side), check the safety limits, build the context, call the model through retries and
fallbacks, execute the tool calls in order, then evaluate stops in the spec's order:
``session_fail`` / ``session_stop`` (only a *successful* call ends the session; a failed one
keeps the side stepping), then ``stop_tool``, then ``stop_on_response``, then the limits.
A completed turn parks when the other side is human and switches sides otherwise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sa_core.cachepolicy import THREAD_USE
from sa_core.engine.flowtypes import (
    ExecutionView,
    PendingHandoff,
    SentMessages,
    SessionOutcome,
    StepResult,
    StopReason,
    other,
    turn_completed,
)
from sa_core.engine.messages import create_message, new_id, new_message
from sa_core.engine.model.context import flow_converter
from sa_core.engine.model.turnsettings import turn_asks
from sa_core.engine.model.usage import stop_for_budget
from sa_core.engine.remote.remote_step import run_remote_step
from sa_core.engine.subagents.subagent_spawn import reset_immediate, run_immediate
from sa_core.engine.tools.approvals import run_decided_calls
from sa_core.engine.tools.toolrows import cleanup_after_abort, record_step_error
from sa_core.engine.tools.tools import OfferedTool
from sa_core.engine.turn import clienttools, resume, toolcall
from sa_core.engine.turn import step as turn_step
from sa_core.engine.turn.drain import drain_queue
from sa_core.spec import AgentDefinition, Message, PromptDefinition, Side, SideConfig, ToolCall
from sa_core.spec.remote import REMOTE_PROMPT_PREFIX
from sa_core.store.clock import now_us
from sa_core.store.execution_record import ResumePoint
from sa_core.telemetry import turn

if TYPE_CHECKING:
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.threads import ThreadRef
    from sa_core.registry import PackScope
    from sa_core.store import Transaction
    from sa_core.store.rows import QueueEntry

__all__ = ["Flow"]

GLOBAL_STEP_CEILING = 250
REPEATED_ERROR_LIMIT = 8
REPEATED_ERROR_MESSAGE = (
    "I've stopped because the same error kept happening {n} times in a row. "
    "The last error was: {error}"
)


class Flow:
    """One run of the turn loop on a thread: its counts and the engine's step state.

    User code sees it through :meth:`view` (``state.execution``: the spec's ExecutionState,
    counts, side, :meth:`force_turn` and :meth:`stop`). The step state (the calls without
    results, the model call in flight, the settlement) is this class's: the turn modules
    change it, the lower groups through the methods below and the small protocols of
    :mod:`sa_core.engine.flowview`, never by assigning it.
    """

    _view: ExecutionView | None = None

    turn_schema: dict[str, Any] | None = None
    """The output schema the turn's user message asked for (``send_message``), if any."""
    turn_settings: dict[str, Any] | None = None
    """The model settings the turn's user message asked for (``send_message``), if any."""
    client_tools: clienttools.TurnTools | None = None
    """The client tools the turn's user message declared (``send_message``), if any."""

    def __init__(
        self,
        kernel: Kernel,
        thread: ThreadRef,
        side: Side,
        *,
        depth: int = 0,
        parent_message_id: str | None = None,
        prompt_override: PromptDefinition | None = None,
        initial_messages: list[Message] | None = None,
        resume: ResumePoint | None = None,
        durable: bool = False,
        history: list[Message] | None = None,
        queued: list[QueueEntry] | None = None,
    ) -> None:
        self.kernel = kernel
        self.thread = thread  # the engine's handle; ``state``: the facade user code gets
        self.state: Any = kernel.user_state(thread)
        thread.execution = self
        self.flow_id = new_id()
        self.current_side: Side = side
        self.depth = depth
        self.parent_message_id = parent_message_id
        self.prompt_override = prompt_override
        self.step_count = 0
        self.side_steps: dict[Side, int] = {"a": 0, "b": 0}
        self.stopped = False
        self.stopped_by: str | None = None
        self.context: dict[str, Any] = {}
        self.queued_tools: list[tuple[str, dict[str, Any]]] = []
        self.pending_handoff: PendingHandoff | None = None
        self.outcome: SessionOutcome | None = None
        self.end_reason: StopReason | None = None
        """Why the flow stopped, once :meth:`run` returned."""
        self.settled_queue: list[QueueEntry] | None = None
        """The thread's queue as the commit of the flow's last step, which settled the flow,
        read it; ``None`` when the runner settles the flow in a transaction of its own."""
        self.messages: list[Message] = list(initial_messages or [])
        if depth == 0:  # the turn's output schema, model settings and client tools
            self.read_turn(self.messages)
        self.last_text = ""
        self.prompt_path: list[str] = []
        self._forced: Side | None = None
        self._error_streak: tuple[str, int] = ("", 0)
        self._last_error = ""
        # the working state of the steps (sa_core.engine.turn.step, .toolcall, .toolrows, .drain)
        self.before: list[Message] | None = None
        """The history from before the flow as steps see it (loaded once per flow)."""
        self.before_filtered: dict[bool, list[Message]] = {}  # without past tool traffic
        self.history = history
        """The thread's history as the turn began, read with its acknowledgement, if it was."""
        self.queued_entries = queued
        """The thread's queue as the runner read it under its lease, for the first drain."""
        self.prepared: Message | None = None
        """The model call in flight's message, prepared but not stored yet."""
        self.partial: list[str] = []  # text streamed by the model call in flight
        thread_id = thread.thread_id
        self.converter = flow_converter(kernel, thread_id, depth)
        self.sent = SentMessages(self.messages)
        self.unanswered: list[ToolCall] = []
        """Tool calls of the running step (and its queued tools) without a stored row yet."""
        self.sole_call: str | None = None
        """The id of the running step's only tool call: its row may end the session."""
        self.row_settled: StopReason | None = None
        """Why the flow stopped, when the commit of a tool row settled it."""
        turns = thread.row.execution.get("turns") or {}
        self.turns: dict[Side, int] = {"a": int(turns.get("a", 0)), "b": int(turns.get("b", 0))}
        self.durable = durable or resume is not None
        """Whether this flow keeps the thread's execution record (a thread's top-level flow)."""
        self._resume = resume
        self.since = (
            resume.since
            if resume is not None
            else min((m.created_at for m in self.messages if m.created_at), default=None)
            or now_us()  # (a creation time is never 0: only a flow without one reads the clock)
        )
        """Creation time of the flow's first message (where a restart reloads it from)."""

    # -- ExecutionState ---------------------------------------------------------------------

    def view(self) -> ExecutionView:
        """The flow as user code sees it (``state.execution``), made on first use."""
        view = self._view
        if view is None:
            view = self._view = ExecutionView(self)
        return view

    def force_turn(self, side: Side) -> None:
        """Make ``side`` act on the next step."""
        self._forced = side

    def stop(self, reason: str = "aborted") -> None:
        """Stop the flow after the current step."""
        self.stopped = True
        self.stopped_by = reason

    def remember(self, message: Message) -> None:
        """Add a message created during this flow to the live history."""
        self.messages.append(message)

    def queue_tool(self, name: str, arguments: dict[str, Any]) -> None:
        """Run tool ``name`` after the current step's tool calls (``state.queue_tool``)."""
        self.queued_tools.append((name, arguments))

    # -- the step state the lower groups change (one place each) ----------------------------

    def await_answers(self, calls: Sequence[ToolCall], *, more: bool = False) -> None:
        """``calls`` (joining those awaited already when ``more``) wait for their result rows."""
        self.unanswered = [*self.unanswered, *calls] if more else list(calls)

    def answered(self, call_id: str) -> None:
        """The call ``call_id`` has its row (or waits for a human): it is no longer awaited."""
        unanswered = self.unanswered
        for index, call in enumerate(unanswered):
            if call.id == call_id:
                del unanswered[index]
                return

    def answered_all(self) -> None:
        """No call of the step waits for a row any more (run, failed, or left for a resume)."""
        self.unanswered = []

    def answer_committed(self, message: Message, calls: Sequence[ToolCall]) -> None:
        """The model call in flight is stored as ``message``; its ``calls`` await results."""
        self.prepared = None
        self.partial.clear()
        self.messages.append(message)
        self.unanswered = list(calls)

    def take_prepared(self) -> Message | None:
        """The model call in flight's message (prepared, not stored), handed over once."""
        prepared, self.prepared = self.prepared, None
        return prepared

    def log_prepared(self, log_id: str) -> None:
        """Link the model call in flight's message to its request log ``log_id``."""
        if self.prepared is not None:
            self.prepared = self.prepared.model_copy(update={"log_id": log_id})

    def settled_in_commit(self, queue: list[QueueEntry], reason: StopReason | None = None) -> None:
        """The flow settled in a step's commit (``reason``: in a tool row's) that read ``queue``."""
        self.settled_queue = queue
        if reason is not None:
            self.row_settled = reason

    def restore_session(self, kept: tuple[SessionOutcome | None, dict[Side, int]]) -> None:
        """Undo an :meth:`end_session` whose commit rolled back (``kept``: the state before)."""
        self.outcome, self.turns = kept

    def ended_by(self, reason: str) -> None:
        """Record why the flow ended (a stop or a step error), without stopping it again."""
        self.stopped_by = reason

    def act_as(self, side: Side) -> None:
        """Make ``side`` the acting side now (a parked turn resumes on its own side)."""
        self.current_side = side

    def reload_turn(self, turn: Sequence[Message]) -> None:
        """Put a parked turn's stored messages (``turn``) back in front of the live history."""
        self.messages[:0] = turn
        if turn and turn[0].created_at:  # a resume point saved from now on reloads the turn
            self.since = min(self.since, turn[0].created_at)

    def read_turn(self, messages: Sequence[Message]) -> None:
        """Take the turn's options from its user message: output schema, settings, client tools."""
        self.turn_schema, self.turn_settings = turn_asks(messages)
        self.client_tools = clienttools.turn_tools_of(messages)

    def resume_turn(self, pending: Mapping[str, Any]) -> None:
        """Back in a parked turn (``pending``: its approvals value): the turn's options again.

        Read from the turn's first user message, with the client tools its results ask for.
        """
        self.read_turn([m for m in self.messages if m.role == "user" and m.depth == 0][:1])
        options = pending.get(clienttools.OPTIONS)
        self.client_tools = clienttools.resumed_tools(self.client_tools, options)

    # -- the loop ---------------------------------------------------------------------------

    @property
    def scope(self) -> PackScope:
        """The package the owning agent lives in (changes on cross-package handoff)."""
        return self.kernel.scope_of(self.thread)

    def side_config(self, side: Side, agent: AgentDefinition | None = None) -> SideConfig | None:
        """The acting side's config, or None when a human takes that side.

        ``agent``: the thread's agent definition when the caller has it at hand.
        """
        if self.prompt_override is not None:
            return SideConfig(prompt=self.prompt_override.name) if side == "a" else None
        if agent is None:
            agent = self.kernel.agent_of(self.thread)
        if side == "a":
            return agent.side_a
        return agent.side_b if agent.type == "dual_ai" else None

    async def run(self) -> StopReason:
        """Run steps until the flow settles; returns why it stopped."""
        reason: StopReason
        try:
            reason = await turn(self, self._loop)
        except asyncio.CancelledError:
            # a turn handed over to another worker is left as a crash leaves it (no records)
            if not self.kernel.scheduler.interrupted(self.thread.thread_id):
                await asyncio.shield(cleanup_after_abort(self))
            raise
        except Exception as exc:  # a step crashed: record it and settle
            await record_step_error(self, exc)
            reason = "step_error"
        self.stopped_by = self.stopped_by or reason
        if self.depth == 0:  # counted once over: the caches decided on this turn without it
            THREAD_USE.used(self.thread.thread_id)
        return reason

    def _step_ceiling(self, agent: AgentDefinition) -> int:
        """The flow's step limit: 250, or a side's larger ``max_steps`` (``agent``'s sides)."""
        limits = [GLOBAL_STEP_CEILING]
        for config in (self.side_config("a", agent), self.side_config("b", agent)):
            if config is not None and config.max_steps is not None:
                limits.append(config.max_steps)
        return max(limits)

    async def _loop(self) -> StopReason:
        if self._resume is not None:
            resumed = await resume.resume_step(self, self._resume)
            self._resume = None
            if resumed is not None:
                decision = await self.after_step(*resumed)
                if decision is not None:
                    return decision
        while True:
            if self.stopped or self.thread.row.terminated is not None:  # e.g. terminated by a tool
                return "aborted_by_user"
            if self.depth == 0:
                await drain_queue(self)
                if await run_immediate(self):
                    continue
            if self._forced is not None:
                self.current_side, self._forced = self._forced, None
            side = self.current_side
            agent = self.kernel.agent_of(self.thread)
            if self._session_turns_reached(agent):
                await self.end_session(SessionOutcome("max_session_turns", failed=True))
                return "max_session_turns"
            side_config = self.side_config(side, agent)
            if side_config is None:
                return "awaiting_human"
            if side_config.max_steps is not None and self.side_steps[side] >= side_config.max_steps:
                return "max_side_steps"
            if self.step_count >= self._step_ceiling(agent):
                return "max_total_steps"
            parked = await run_decided_calls(self, side, side_config)
            if parked is not None:
                return parked
            if await stop_for_budget(self, side):
                return "budget_exceeded"
            self.side_steps[side] += 1
            self.step_count += 1
            remote = None
            if side_config.prompt.startswith(REMOTE_PROMPT_PREFIX):  # no prompt: a remote agent
                remote = self.scope.remote_agent(agent.name)
            if remote is not None and self.prompt_override is None:  # an A2A exchange, no model
                step = await run_remote_step(self, remote)
            else:
                step = await turn_step.run_step(self, side, side_config)
            if step.settled is not None:
                return step.settled
            if self.prompt_override is not None:
                return "one_step"
            decision = await self.after_step(side, side_config, step)
            if decision is not None:
                return decision

    def _session_turns_reached(self, agent: AgentDefinition) -> bool:
        """Whether a ``dual_ai`` session used up ``max_session_turns``.

        The cap counts the completed turns of both sides together in the current session
        (seed 002: "Maximum total turns across both sides. Only applies to ``dual_ai``
        agents."): a cap of 2 is one turn of side A and one of side B.
        """
        cap = agent.max_session_turns
        if cap is None or agent.type != "dual_ai" or self.prompt_override is not None:
            return False
        return self.turns["a"] + self.turns["b"] >= cap

    async def after_step(
        self, side: Side, config: SideConfig, step: StepResult
    ) -> StopReason | None:
        """Finish a step whose tool calls all have results: handoff, error streak, stops."""
        if self.pending_handoff is not None:
            await self._perform_handoff(self.pending_handoff)
            self.pending_handoff = None
            return None
        if self._repeated_error(step):
            await self._post_repeated_error()
            return "repeated_error"
        return await self._evaluate_stop(side, config, step)

    # -- the execution record ---------------------------------------------------------------

    def point_json(self, step_message_id: str | None = None) -> dict[str, Any]:
        """The flow's position now as the execution record stores it (the one conversion)."""
        return {
            "since": self.since,
            "side": self.current_side,
            "turns": dict(self.turns),
            "step_count": self.step_count,
            "side_steps": dict(self.side_steps),
            "step_message_id": step_message_id,
            "attempts": {},
        }

    def resume_point(self, step_message_id: str | None = None) -> ResumePoint:
        """The flow's position now, for the thread's execution record."""
        return ResumePoint.model_validate(self.point_json(step_message_id))

    async def save_point(self, point: ResumePoint, *, tx: Transaction | None = None) -> None:
        """Write the execution record of a durable flow (in ``tx`` when given)."""
        if self.durable:
            await self.kernel.store.save_running_point(
                self.thread.thread_id,
                point.model_dump(mode="json"),
                self.kernel.instance_id,
                tx=tx,
            )

    async def save_step_point(self, step_message_id: str, *, tx: Transaction) -> None:
        """Record the step just committed as the resume point (no model built: hot path)."""
        point = self.point_json(step_message_id)
        store = self.kernel.store
        await store.save_running_point(self.thread.thread_id, point, self.kernel.instance_id, tx=tx)

    async def _evaluate_stop(
        self, side: Side, config: SideConfig, step: StepResult
    ) -> StopReason | None:
        names = [c.name for c in step.calls]
        statuses: dict[str, list[Message]] = {}
        for row in step.tool_rows:
            statuses.setdefault(row.name or "", []).append(row)
        for binding, reason in (
            (config.session_fail, "session_fail"),
            (config.session_stop, "session_stop"),
        ):
            if binding is None or binding.name not in names:
                continue
            rows = statuses.get(binding.name, [])
            succeeded = [r for r in rows if r.tool_status == "success"]
            if not succeeded:
                return None  # called but failed: keep stepping, turn not complete
            await self.end_session_on(succeeded[-1], reason)
            return reason  # type: ignore[return-value]
        sibling_human = self.side_config(other(side)) is None
        completed = turn_completed(config, names, step.content)
        if completed is not None:
            self.turns[side] += 1
            if sibling_human:
                return completed
            self.current_side = other(side)
            return None
        if not config.stop_on_response and config.stop_tool is None:
            if sibling_human:
                return None
            self.turns[side] += 1
            self.current_side = other(side)
        return None

    async def _post_repeated_error(self) -> None:
        """Tell the user why the flow stopped (reference.md section 6.2, step 13)."""
        text = REPEATED_ERROR_MESSAGE.format(n=REPEATED_ERROR_LIMIT, error=self._last_error)
        message = new_message(self.thread.thread_id, "assistant", text, depth=self.depth)
        self.remember(await create_message(self.kernel, self.thread, message))

    def _repeated_error(self, step: StepResult) -> bool:
        if self.depth > 0:
            return False
        for row in step.tool_rows:
            if row.tool_status == "error":
                signature = f"{row.name}:{(row.content or '')[:200]}"
                self._last_error = row.content or ""
                previous, count = self._error_streak
                self._error_streak = (signature, count + 1 if signature == previous else 1)
            else:
                self._error_streak = ("", 0)
        return self._error_streak[1] >= REPEATED_ERROR_LIMIT

    def settles_in_step(self) -> bool:
        """Whether the flow may settle in a commit of its step (its last one, or a tool row's).

        The thread's top-level durable flow, run by its runner, with no queued tool, handoff,
        stop or queued entry left that :meth:`after_step` or the next step would act on.
        """
        scheduler = self.kernel.scheduler
        thread_id = self.thread.thread_id
        return not (
            not self.durable
            or self.depth
            or self.prompt_override is not None
            or self.queued_tools
            or self.pending_handoff is not None
            or self.stopped
            or scheduler.flow(thread_id) is not self
            # an entry queued during the step (say by a hook): on PostgreSQL the settlement's
            # queue read goes in the statement that writes it, and would not see it
            or scheduler.has_queued(thread_id)
        )

    async def run_call(
        self,
        call: ToolCall,
        offered: dict[str, OfferedTool],
        config: SideConfig,
        *,
        allow_any: bool = False,
        attempt: int = 1,
    ) -> Message | None:
        """Run one tool call of this flow (:func:`sa_core.engine.turn.toolcall.run_call`).

        A method so that the approval gate's module, below the tool calls, can run the calls
        it settles without importing them.
        """
        return await toolcall.run_call(
            self, call, offered, config, allow_any=allow_any, attempt=attempt
        )

    async def _perform_handoff(self, handoff: PendingHandoff) -> None:
        kernel = self.kernel
        async with kernel.store.transaction() as tx:
            await kernel.store.update_thread(
                self.thread.thread_id, agent_id=handoff.agent_name, package=handoff.package, tx=tx
            )
            self.thread.row.agent_id = handoff.agent_name
            self.thread.row.package = handoff.package
            self.current_side = "a"
            self.context.update(handoff.arguments)
            if handoff.init_message is not None or handoff.init_attachments:
                message = new_message(
                    self.thread.thread_id,
                    "user",
                    handoff.init_message or "",
                    attachments=handoff.init_attachments or None,
                )
                self.remember(await create_message(self.kernel, self.thread, message, tx=tx))
            await self.save_point(self.resume_point(), tx=tx)
        reset_immediate(self)

    async def end_session_on(self, row: Message, reason: str) -> None:
        """End the session on the row of its ``session_stop`` or ``session_fail`` tool.

        As :meth:`end_session` does (inline: a child's last row commits on this path).
        """
        self.outcome = SessionOutcome(
            reason,
            failed=reason == "session_fail",
            content=row.content,
            attachments=list(row.attachments or []),
        )
        self.turns = {"a": 0, "b": 0}

    async def end_session(self, outcome: SessionOutcome) -> None:
        """End the session with ``outcome``: the turn counters start again."""
        self.outcome = outcome
        self.turns = {"a": 0, "b": 0}
