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
import json
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic_core import to_jsonable_python

from sa_core.cachepolicy import THREAD_USE
from sa_core.engine import structured
from sa_core.engine.approvals import gate, settle
from sa_core.engine.compaction import compact_history
from sa_core.engine.context import (
    SIDE_ROLE,
    IncrementalConverter,
    Side,
    converter_for,
    dumps_compact,
    registry_system_message,
)
from sa_core.engine.dispatch import execute_call, resolve_any_tool
from sa_core.engine.files import attachment_paths, existing_refs, store_attachment
from sa_core.engine.messages import (
    announce_created,
    complete_prepared,
    create_message,
    new_id,
    new_message,
    prepare_message,
    publish_message,
)
from sa_core.engine.pastcontext import UNSENT, excluding, filtered_history, strip_past_tools
from sa_core.engine.runagent import run_agent_request, take_run_agent
from sa_core.engine.subagents import forward_status, reset_immediate, run_immediate
from sa_core.engine.tools import OfferedTool, normalise_result, result_text
from sa_core.engine.usage import stop_for_budget
from sa_core.providers import ProviderMessage, ReasoningConfig
from sa_core.spec import (
    AgentDefinition,
    AttachmentRef,
    Message,
    PromptDefinition,
    SessionToolBinding,
    SideConfig,
    ToolAttachment,
    ToolCall,
    ToolCallFunction,
    ToolResult,
)
from sa_core.store.clock import now_us
from sa_core.telemetry import tool_call, turn

if TYPE_CHECKING:
    from sa_core.engine.services import EngineContext
    from sa_core.registry import PackScope
    from sa_core.state import ThreadState
    from sa_core.store import Transaction
    from sa_core.store.executions import ResumePoint
    from sa_core.store.rows import QueueEntry

GLOBAL_STEP_CEILING = 250
REPEATED_ERROR_LIMIT = 8
EMPTY_RESPONSE = (
    "You must reply. Empty response was rejected. Return non-empty content, call a tool, or "
    "include attachments."
)
REPEATED_ERROR_MESSAGE = (
    "I've stopped because the same error kept happening {n} times in a row. "
    "The last error was: {error}"
)
STOPPED_BY_USER = "Execution stopped by user"
INTERRUPTED = "Execution interrupted by a runtime shutdown; the turn resumes on restart"
INTERRUPTED_CALL = (
    "Interrupted by a restart while the model was answering; the call was made again"
)
"""Error of an assistant row whose model call a crash cut off (the row stays ``failed``)."""
INTERRUPTED_TOOL = "Interrupted by a restart before it finished."
"""Result of a tool call a restart interrupted that may not run again."""
MAX_TOOL_ATTEMPTS = 2
"""Runs a tool call may start: the first, and one more after a restart interrupted it."""
QUEUED_TOOLS = "queued_tools"
"""Metadata key (``True``) of the message carrying the calls of tools queued with
``state.queue_tool``: a message of the acting side with no content of its own."""

StopReason = Literal[
    "aborted_by_user",
    "step_error",
    "max_total_steps",
    "max_session_turns",
    "awaiting_human",
    "max_side_steps",
    "session_fail",
    "session_stop",
    "stop_tool",
    "stop_on_response",
    "repeated_error",
    "one_step",
    "state_stop_session",
    "budget_exceeded",
    "awaiting_approval",
]
SESSION_END_REASONS = frozenset(
    {"session_stop", "session_fail", "max_session_turns", "state_stop_session"}
)


def other(side: Side) -> Side:
    """The other side."""
    return "b" if side == "a" else "a"


def side_for_role(role: str) -> Side:
    """A stored ``user`` message makes side A act next; ``assistant`` side B."""
    return "b" if role == "assistant" else "a"


@dataclass
class SessionOutcome:
    """How a session ended, with the payload a parent receives."""

    reason: str
    failed: bool
    content: str | None = None
    attachments: list[AttachmentRef] = field(default_factory=list)


@dataclass
class PendingHandoff:
    """A handoff requested by a tool call, executed after the step."""

    agent_name: str
    package: str
    arguments: dict[str, Any]
    init_message: str | None
    init_attachments: list[AttachmentRef]


@dataclass
class StepResult:
    """What one model step produced."""

    message: Message
    calls: list[ToolCall]
    tool_rows: list[Message]
    content: str
    settled: StopReason | None = None
    """Why the flow stopped, when it was settled in the step's own commit."""


class Flow:
    """One run of the turn loop on a thread (``state.execution`` while it runs).

    Exposes the spec's ExecutionState: ``flow_id``, ``current_side``, ``step_count``,
    ``side_a_step_count``, ``side_b_step_count``, ``stopped``, ``stopped_by``,
    ``message_history``, ``prompt_path``, :meth:`force_turn` and :meth:`stop`.
    """

    def __init__(
        self,
        engine: EngineContext,
        state: ThreadState,
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
        self.engine = engine
        self.state = state
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
        self.turn_schema = structured.turn_schema_of(self.messages) if depth == 0 else None
        """The output schema the turn's user message asked for (``send_message``), if any."""
        self.last_text = ""
        self.prompt_path: list[str] = []
        self._forced: Side | None = None
        self._before: list[Message] | None = None
        self._history = history
        """The thread's history as the turn began, read with its acknowledgement, if it was."""
        self._queued = queued
        """The thread's queue as the runner read it under its lease, for the first drain."""
        self._before_filtered: dict[bool, list[Message]] = {}
        self._error_streak: tuple[str, int] = ("", 0)
        self._last_error = ""
        self._prepared: Message | None = None
        self._partial: list[str] = []  # text streamed by the model call in flight
        self._converter = (
            converter_for(state.thread_id, keep=engine.store.keeps_history(state.thread_id))
            if depth == 0
            else IncrementalConverter()
        )
        self._sent: tuple[list[Message], int, list[Message], list[Message]] = (
            self.messages,
            0,
            [],
            [],
        )
        self._unanswered: list[ToolCall] = []
        self._sole_call: str | None = None
        """The id of the running step's only tool call: its row may end the session."""
        self._row_settled: StopReason | None = None
        """Why the flow stopped, when the commit of a tool row settled it."""
        execution = dict(state.row.execution)
        turns = execution.get("turns") or {}
        self.turns: dict[Side, int] = {"a": int(turns.get("a", 0)), "b": int(turns.get("b", 0))}
        self.durable = durable or resume is not None
        """Whether this flow keeps the thread's execution record (a thread's top-level flow)."""
        self._resume = resume
        self.since = resume.since if resume is not None else min(
            (m.created_at for m in self.messages if m.created_at), default=now_us()
        )
        """Creation time of the flow's first message (where a restart reloads it from)."""

    # -- ExecutionState ---------------------------------------------------------------------

    @property
    def side_a_step_count(self) -> int:
        """Steps side A took in this flow."""
        return self.side_steps["a"]

    @property
    def side_b_step_count(self) -> int:
        """Steps side B took in this flow."""
        return self.side_steps["b"]

    @property
    def message_history(self) -> list[Message]:
        """Messages created during this flow."""
        return list(self.messages)

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

    # -- the loop ---------------------------------------------------------------------------

    @property
    def scope(self) -> PackScope:
        """The package the owning agent lives in (changes on cross-package handoff)."""
        return self.state.scope

    def side_config(self, side: Side, agent: AgentDefinition | None = None) -> SideConfig | None:
        """The acting side's config, or None when a human takes that side.

        ``agent``: the thread's agent definition when the caller has it at hand.
        """
        if self.prompt_override is not None:
            return SideConfig(prompt=self.prompt_override.name) if side == "a" else None
        if agent is None:
            agent = self.state.agent
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
            if not self.engine.scheduler.interrupted(self.state.thread_id):
                await asyncio.shield(self._cleanup_after_abort())
            raise
        except Exception as exc:  # a step crashed: record it and settle
            await self._record_step_error(exc)
            reason = "step_error"
        self.stopped_by = self.stopped_by or reason
        if self.depth == 0:  # counted once over: the caches decided on this turn without it
            THREAD_USE.used(self.state.thread_id)
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
            from sa_core.engine.resume import resume_step

            resumed = await resume_step(self, self._resume)
            self._resume = None
            if resumed is not None:
                decision = await self.after_step(*resumed)
                if decision is not None:
                    return decision
        while True:
            if self.stopped or self.state.terminated is not None:  # e.g. terminated by a tool
                return "aborted_by_user"
            if self.depth == 0:
                await self._drain_queue()
                if await run_immediate(self):
                    continue
            if self._forced is not None:
                self.current_side, self._forced = self._forced, None
            side = self.current_side
            agent = self.state.agent
            if self._session_turns_reached(agent):
                await self._end_session(SessionOutcome("max_session_turns", failed=True))
                return "max_session_turns"
            side_config = self.side_config(side, agent)
            if side_config is None:
                return "awaiting_human"
            if side_config.max_steps is not None and self.side_steps[side] >= side_config.max_steps:
                return "max_side_steps"
            if self.step_count >= self._step_ceiling(agent):
                return "max_total_steps"
            if await settle(self, side, side_config):
                return "awaiting_approval"
            if await stop_for_budget(self, side):
                return "budget_exceeded"
            self.side_steps[side] += 1
            self.step_count += 1
            step = await self._step(side, side_config)
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

    def resume_point(self, step_message_id: str | None = None) -> ResumePoint:
        """The flow's position now, for the thread's execution record."""
        from sa_core.store.executions import ResumePoint

        return ResumePoint(
            since=self.since,
            side=self.current_side,
            turns=dict(self.turns),
            step_count=self.step_count,
            side_steps=dict(self.side_steps),
            step_message_id=step_message_id,
        )

    async def save_point(self, point: ResumePoint, *, tx: Transaction | None = None) -> None:
        """Write the execution record of a durable flow (in ``tx`` when given)."""
        if self.durable:
            await self.engine.store.save_running_point(
                self.state.thread_id,
                point.model_dump(mode="json"),
                self.engine.instance_id,
                tx=tx,
            )

    async def save_step_point(self, step_message_id: str, *, tx: Transaction) -> None:
        """Record the step just committed as the resume point (no model built: hot path)."""
        point = {
            "since": self.since,
            "side": self.current_side,
            "turns": dict(self.turns),
            "step_count": self.step_count,
            "side_steps": dict(self.side_steps),
            "step_message_id": step_message_id,
            "attempts": {},
        }
        store = self.engine.store
        await store.save_running_point(
            self.state.thread_id, point, self.engine.instance_id, tx=tx
        )

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
            await self._end_session_on(succeeded[-1], reason)
            return reason  # type: ignore[return-value]
        sibling_human = self.side_config(other(side)) is None
        turn_complete = False
        stop_reason: StopReason = "stop_on_response"
        if config.stop_tool is not None and config.stop_tool in names:
            turn_complete, stop_reason = True, "stop_tool"
        elif config.stop_on_response and step.content.strip() and not step.calls:
            turn_complete = True
        if turn_complete:
            self.turns[side] += 1
            if sibling_human:
                return stop_reason
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
        message = new_message(self.state.thread_id, "assistant", text, depth=self.depth)
        self.remember(await create_message(self.state, message))

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

    # -- one step ---------------------------------------------------------------------------

    def _prompt(self, config: SideConfig) -> PromptDefinition:
        if self.prompt_override is not None:
            return self.prompt_override
        prompt = self.scope.prompt(config.prompt)
        if self.turn_schema is not None:  # asked for by the turn's message
            prompt = structured.with_turn_schema(prompt, self.turn_schema)
        return prompt

    async def _context_messages(self, prompt: PromptDefinition) -> list[Message]:
        """The stored messages a step sees.

        Without ``include_chat``: this flow's messages. With it: the history from before the
        flow (loaded and filtered once per flow; earlier turns' tool traffic dropped unless
        ``include_past_tools``) followed by this flow's messages.
        """
        sent, top = self._sent_messages()
        if not (prompt.include_chat and self.depth == 0):
            return list(sent)
        if self._before is None:
            thread_id = self.state.thread_id
            history = self._history
            if history is None:
                history = await self.engine.store.history(thread_id)
            self._history = None
            keep = self.engine.store.keeps_history(thread_id)
            sent, stripped = filtered_history(thread_id, history, keep=keep)
            in_flow = {m.id for m in self.messages}
            since = min((m.created_at for m in self.messages), default=None)
            self._before = excluding(sent, in_flow, since)
            self._before_filtered[False] = excluding(stripped, in_flow, since)
        before = self._before if prompt.include_past_tools else self._before_filtered[False]
        return before + top

    def _sent_messages(self) -> tuple[list[Message], list[Message]]:
        """The messages of this flow that reached a model (all, and the top-level ones).

        Kept incrementally: each step filters only the messages remembered since the last one,
        so the per-step cost does not grow with the length of the flow.
        """
        messages = self.messages
        if self._sent[0] is not messages or self._sent[1] > len(messages):
            self._sent = (messages, 0, [], [])
        _, seen, sent, top = self._sent
        for message in messages[seen:]:
            if message.status not in UNSENT:
                sent.append(message)
                if message.depth == 0 and message.parent_id is None:
                    top.append(message)
        self._sent = (messages, len(messages), sent, top)
        return sent, top

    async def _step(self, side: Side, config: SideConfig) -> StepResult:
        engine = self.engine
        state = self.state
        prompt = self._prompt(config)
        state.active_prompt = prompt
        self.prompt_path = [prompt.name]
        scope = self.scope
        model = scope.model(prompt.model)
        offered = engine.caches.offered_tools(state, scope, prompt, side)
        if scope.mcp_servers:
            from sa_core.engine.mcp import offered_mcp_tools

            offered.update(await offered_mcp_tools(state, scope, prompt))
        secret = engine.secrets.secret_names(scope, state.row)
        system_text = engine.caches.template(scope, prompt).render(
            lambda name: None if name in secret else state.env_or_none(name)
        )
        history = await self._context_messages(prompt)
        # compaction (issue 36): markers applied, a new one written when over the trigger
        history = await compact_history(self, prompt, model, system_text, offered, history)
        hooks = engine.host.hooks
        if hooks.wants("filter_messages", state):
            history = await hooks.filter_messages(state, history)
        provider_messages = [ProviderMessage("system", system_text)]
        if self.depth == 0 and state.children:
            listing = registry_system_message(state.children)
            if listing:
                provider_messages.append(ProviderMessage("system", listing))
        provider_messages += await self._converter.convert(
            history,
            acting=side,
            images_allowed=model.capabilities.supports_images,
            recent_image_threshold=prompt.recent_image_threshold,
            read_file=lambda path: engine.store.read_file(state.thread_id, path),
        )
        if hooks.wants("prefilter_llm_history", state):
            provider_messages = await hooks.prefilter_llm_history(state, provider_messages)
        pending = new_message(
            state.thread_id,
            SIDE_ROLE[side],
            None,
            status="pending",
            depth=self.depth,
            parent_id=self.parent_message_id,
            prompt=prompt.name,
            request_sent_at=now_us(),
        )
        # written the same way watched or not: one insert once the answer is complete (or has
        # failed); watchers see the pending row as a frame, the store never holds it
        pending = await prepare_message(state, pending)
        self._prepared = pending
        publish_message(state, pending)
        tools = [t for t in offered.values()] if model.capabilities.supports_tool_calls else []
        reasoning = None
        if prompt.reasoning is not None:
            reasoning = ReasoningConfig(
                prompt.reasoning.effort, prompt.reasoning.max_tokens, prompt.reasoning.exclude
            )
        self._partial.clear()
        response, log = await engine.models.call_model(
            state,
            model,
            provider_messages,
            tools,
            tool_choice=prompt.tool_choice if tools else "auto",
            parallel_tool_calls=prompt.parallel_tool_calls,
            reasoning=reasoning,
            provider_options=prompt.provider_options,
            message_id=pending.id,
            depth=self.depth,
            partial=self._partial,
            output=None if prompt.output_schema is None else structured.output_schema_for(prompt),
        )
        calls = [
            ToolCall(
                id=c.id or f"call_{uuid.uuid4().hex[:8]}",
                function=ToolCallFunction(name=c.name, arguments=dumps_compact(c.arguments)),
                extra_content=c.extra_content,
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
            answer = await structured.check_answer(self, prompt, side, calls, content, log)
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
        self.last_text = content
        updates: dict[str, Any] = {
            "content": content or None,
            "tool_calls": [c.model_dump(exclude_none=True) for c in calls] or None,
            "reasoning_content": None
            if (prompt.reasoning and prompt.reasoning.exclude)
            else response.reasoning,
            "reasoning_details": response.reasoning_details,
            "status": "completed",
            "response_completed_at": now_us(),
            "log_id": log.id,
        }
        if answer is not None and answer.metadata is not None:
            updates["metadata"] = answer.metadata
        settled: StopReason | None = None
        try:
            async with engine.store.transaction() as tx:
                await engine.store.insert_log(state.thread_id, log, tx=tx)
                updated = await complete_prepared(state, pending, updates, tx=tx)
                settled = None if rejection else self._last_step(side, config, calls, content)
                if settled is not None:  # the flow settles in this commit: no resume point
                    self.turns[side] += 1
                    queue = await engine.scheduler.settle_in(self, tx, settled)
                elif self.durable:  # the resume point commits with the step (and tool calls)
                    await self.save_step_point(pending.id, tx=tx)
        except BaseException:
            if settled is not None:  # rolled back with the step: the runner settles the flow
                self.turns[side] -= 1
            raise
        if settled is not None:
            self.settled_queue = queue
        message = updated or pending.model_copy(update=updates)
        if (
            isinstance(message.tool_calls, list)
            and message.tool_calls
            and not isinstance(message.tool_calls[0], ToolCall)
        ):
            message = message.model_copy(update={"tool_calls": calls})
        self._prepared = None
        self._partial.clear()
        self.remember(message)
        self._unanswered = list(calls)
        tool_rows: list[Message] = []
        if rejection is not None:  # an empty answer, or one that does not match the schema
            tool_rows.append(
                await self._store_tool_row(
                    calls[0], ToolResult(status="error", error=rejection), config, raw=True
                )
            )
        else:
            self._sole_call = calls[0].id if len(calls) == 1 else None
            for call in calls:
                row = await self._run_call(call, offered, config)
                if row is not None:
                    tool_rows.append(row)
            self._sole_call = None
        tool_rows += await self.run_queued_tools(side, prompt, offered, config)
        self._unanswered = []
        state.active_prompt = prompt
        if self._row_settled is not None:  # the session ended in its tool row's commit
            settled, self._row_settled = self._row_settled, None
        if answer is not None and settled is None:  # a subagent's structured answer ends it
            settled = await structured.end_child_session(self, answer)
        return StepResult(message, calls, tool_rows, content, settled)

    async def run_queued_tools(
        self,
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
        while self.queued_tools:
            batch, self.queued_tools = self.queued_tools, []
            calls = [
                ToolCall(
                    id=f"queued_{uuid.uuid4().hex[:8]}",
                    function=ToolCallFunction(name=name, arguments=dumps_compact(args)),
                )
                for name, args in batch
            ]
            carrier = new_message(
                self.state.thread_id,
                SIDE_ROLE[side],
                None,
                tool_calls=calls,
                status="completed",
                depth=self.depth,
                parent_id=self.parent_message_id,
                prompt=prompt.name,
                metadata={QUEUED_TOOLS: True},
            )
            self.remember(await create_message(self.state, carrier))
            self._unanswered = [*self._unanswered, *calls]
            for call in calls:
                row = await self._run_call(call, offered, config, allow_any=True)
                if row is not None:
                    rows.append(row)
        return rows

    def _last_step(
        self, side: Side, config: SideConfig, calls: list[ToolCall], content: str
    ) -> StopReason | None:
        """Why the flow stops after this step, when that is known before the step commits.

        A thread's top-level flow, run by its runner, whose answer completes a turn with a
        human on the other side: no tool call, handoff, queued tool or stop is left to change
        what :meth:`after_step` decides (it would return ``stop_on_response``).
        """
        if (
            calls
            or self.state.parent_id is not None
            or not (config.stop_on_response and content.strip())
            or self.side_config(other(side)) is not None
            or not self._settles_in_step()
        ):
            return None
        return "stop_on_response"

    def _settles_in_step(self) -> bool:
        """Whether the flow may settle in a commit of its step (its last one, or a tool row's).

        The thread's top-level durable flow, run by its runner, with no queued tool, handoff,
        stop or queued entry left that :meth:`after_step` or the next step would act on.
        """
        scheduler = self.engine.scheduler
        thread_id = self.state.thread_id
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

    async def _run_call(
        self,
        call: ToolCall,
        offered: dict[str, OfferedTool],
        config: SideConfig,
        *,
        allow_any: bool = False,
        attempt: int = 1,
    ) -> Message | None:
        held = await gate(self, call, offered, config)
        if held is not False:
            return held  # parked for approval (None), or refused inside a subprompt
        engine = self.engine
        state = self.state
        tool_message_id = new_id()
        state.emit("tool_call_started", {"id": call.id, "name": call.name})
        result = _refused_on_resume(call, offered, attempt, allow_any=allow_any, state=state)
        if result is None:
            state.tool_call_id, state.tool_attempt = call.id, attempt
            try:
                result = await tool_call(
                    state,
                    call,
                    execute_call(self, call, offered, tool_message_id, allow_any=allow_any),
                )
            finally:
                state.tool_call_id, state.tool_attempt = None, 1
        state.emit("tool_call_done", {"id": call.id, "name": call.name, "status": result.status})
        hooks = engine.host.hooks
        succeeded = result.status == "success"
        after = "after_tool_call_success" if succeeded else "after_tool_call_failure"
        if hooks.wants(after, state):
            if succeeded:
                replaced = await hooks.after_tool_call_success(state, call, result)
            else:
                replaced = await hooks.after_tool_call_failure(state, call, result)
            result = _as_result(replaced, result)
        if config.session_status is not None and call.name == config.session_status.name:
            await forward_status(self, call, result, config.session_status)
        return await self._store_tool_row(call, result, config, message_id=tool_message_id)

    async def _store_tool_row(
        self,
        call: ToolCall,
        result: ToolResult,
        config: SideConfig,
        *,
        message_id: str | None = None,
        raw: bool = False,
    ) -> Message:
        state = self.state
        hooks = self.engine.host.hooks
        if not raw and hooks.wants("before_store_tool_result", state):
            stored = await hooks.before_store_tool_result(state, call, result)
            result = _as_result(stored, result)
        refs: list[AttachmentRef] = []
        for item in result.attachments:
            if isinstance(item, ToolAttachment):
                import base64

                refs.append(
                    await store_attachment(
                        state,
                        item.name,
                        base64.b64decode(item.data),
                        item.mime_type,
                        width=item.width,
                        height=item.height,
                    )
                )
            else:
                refs.append(item)
        binding = _binding_for(config, call.name)
        mapped: str | None = None
        if binding is not None and result.status == "success":
            args = call.arguments
            if binding.message_property and binding.message_property in args:
                value = args[binding.message_property]
                mapped = value.strip() if isinstance(value, str) else json.dumps(value)
            if binding.attachments_property:
                found, missing = await existing_refs(
                    state, attachment_paths(args.get(binding.attachments_property))
                )
                if missing:
                    result = ToolResult(
                        status="error",
                        error="Provided attachment path(s) not found in this thread: "
                        + ", ".join(missing),
                    )
                    mapped = None
                else:
                    refs += found
        content = self.engine.secrets.redact_secrets(state, result_text(result, mapped))
        terminal = {b.name for b in (config.session_stop, config.session_fail) if b is not None}
        listed_by_result = result.subagent_id is not None  # subagent results list their files
        if (
            refs
            and call.name not in terminal
            and result.status == "success"
            and not listed_by_result
        ):
            content += "".join(f'\nAttachment path for "{r.name}": {r.path}' for r in refs)
        row = new_message(
            state.thread_id,
            "tool",
            content,
            id=message_id,
            name=call.name,
            tool_call_id=call.id,
            tool_status=result.status,
            attachments=refs or None,
            subagent_id=result.subagent_id,
            depth=self.depth,
            parent_id=self.parent_message_id,
            metadata={
                "error_code": result.error_code,
                "error_data": to_jsonable_python(result.error_data, fallback=str),
            }
            if result.error_code
            else None,
        )
        ending = self._ends_session(call, result, config)
        if ending is None:
            row = await create_message(state, row)
        else:
            row = await self._store_ending_row(row, ending)
        self.remember(row)
        self._unanswered = [c for c in self._unanswered if c.id != call.id]
        return row

    def _ends_session(
        self, call: ToolCall, result: ToolResult, config: SideConfig
    ) -> Literal["session_stop", "session_fail"] | None:
        """Why the flow stops once this tool row is stored, when nothing left can change it.

        The step's only call is the side's ``session_fail`` or ``session_stop`` tool and it
        succeeded, in the thread's top-level flow run by its runner, with no queued tool,
        handoff or stop pending: :meth:`after_step` would end the session on this row.
        """
        if call.id != self._sole_call or result.status != "success" or not self._settles_in_step():
            return None
        if config.session_fail is not None and config.session_fail.name == call.name:
            return "session_fail"
        if config.session_stop is not None and config.session_stop.name == call.name:
            return "session_stop"
        return None

    async def _store_ending_row(
        self, row: Message, reason: Literal["session_stop", "session_fail"]
    ) -> Message:
        """Store the tool row that ends the session, and settle the flow in the same commit."""
        engine = self.engine
        kept = (self.outcome, dict(self.turns))
        try:
            async with engine.store.transaction() as tx:
                stored = await create_message(self.state, row, tx=tx)
                await self._end_session_on(stored, reason)
                queue = await engine.scheduler.settle_in(self, tx, reason)
        except BaseException:  # rolled back: the runner settles the flow as after any failure
            self.outcome, self.turns = kept
            raise
        self.settled_queue = queue
        self._row_settled = reason
        return stored

    # -- queue, handoff, sessions -----------------------------------------------------------

    async def _drain_queue(self) -> None:
        """Move queued entries into the thread.

        Every queue write in this process flags the thread, so after the flow's first drain an
        unflagged thread is known to be empty; so is it at the first drain when the transaction
        that owed the turn read the queue empty (``Scheduler.take_known_empty``).
        """
        engine = self.engine
        state = self.state
        scheduler = engine.scheduler
        known, self._queued = self._queued, None
        if not scheduler.take_queued(state.thread_id) and (
            self.step_count or scheduler.take_known_empty(state.thread_id)
        ):
            return
        # consumed exactly once: the entries leave the queue in the transaction that stores
        # them as messages (ids taken from the entries) and moves the resume point past them.
        # Read under the lease, they are removed by id with the writes: one statement, nothing
        # read back. One deleted meanwhile undoes that; the queue is then drained as it is.
        if known and await self._drain_entries(known):
            return
        await self._drain_entries(None)

    async def _drain_entries(self, known: list[QueueEntry] | None) -> bool:
        """Store queue entries as the thread's messages; returns whether any were drained.

        ``known``: the entries to remove by id (:meth:`Store.drain_entries`); ``None``: take
        whatever is queued. Their frames go out once the messages are committed.
        """
        from sa_core.store.queue import QueueChanged

        engine = self.engine
        state = self.state
        kept = (len(self.messages), dict(self.turns), self.current_side, self.stopped)
        owner = (state.row.agent_id, state.row.package)  # a run_agent entry may change it
        try:
            async with engine.store.transaction() as tx:
                if known is None:
                    entries = await engine.store.drain_queue(state.thread_id, tx=tx)
                    if not entries:
                        return False
                else:
                    entries = known
                    await engine.store.drain_entries(state.thread_id, entries, tx=tx)
                stored = await self._store_entries(entries, tx)
        except QueueChanged:  # (``known`` only) nothing of the transaction stayed
            del self.messages[kept[0] :]
            self.turns, self.current_side, self.stopped = kept[1], kept[2], kept[3]
            state.row.agent_id, state.row.package = owner
            return False
        await announce_created(state, stored)
        return True

    async def _store_entries(self, entries: list[QueueEntry], tx: Transaction) -> list[Message]:
        """Insert drained entries as messages in ``tx`` and move the resume point past them.

        An entry queued by ``state.run_agent`` is no message: it makes its agent the owner.
        """
        state = self.state
        messages = []
        for entry in entries:
            request = run_agent_request(entry.metadata)
            if request is not None:
                await take_run_agent(self, request, tx)
                continue
            metadata = dict(entry.metadata or {})
            metadata.setdefault("queued", True)
            message_id = metadata.pop("message_id", None) or entry.id
            refs = [AttachmentRef.model_validate(a) for a in entry.attachments]
            message = new_message(
                state.thread_id,
                entry.role,
                entry.content,
                id=message_id,
                silent=entry.silent,
                metadata=metadata,
                attachments=refs or None,
                subagent_id=metadata.get("subagent_id"),
            )
            messages.append(await prepare_message(state, message))
        await self.engine.store.insert_messages(messages, tx=tx)
        for message in messages:
            self.remember(message)
            if message.role == "user":
                self.turn_schema = structured.turn_schema_of([message])
        self.current_side = side_for_role(entries[0].role)
        self.stopped = False
        await self.save_point(self.resume_point(), tx=tx)
        return messages

    async def _perform_handoff(self, handoff: PendingHandoff) -> None:
        engine = self.engine
        state = self.state
        async with engine.store.transaction() as tx:
            await engine.store.update_thread(
                state.thread_id, agent_id=handoff.agent_name, package=handoff.package, tx=tx
            )
            state.row.agent_id = handoff.agent_name
            state.row.package = handoff.package
            self.current_side = "a"
            self.context.update(handoff.arguments)
            if handoff.init_message is not None or handoff.init_attachments:
                message = new_message(
                    state.thread_id,
                    "user",
                    handoff.init_message or "",
                    attachments=handoff.init_attachments or None,
                )
                self.remember(await create_message(state, message, tx=tx))
            await self.save_point(self.resume_point(), tx=tx)
        reset_immediate(self)

    async def _end_session_on(self, row: Message, reason: str) -> None:
        """End the session on the row of its ``session_stop`` or ``session_fail`` tool."""
        await self._end_session(
            SessionOutcome(
                reason,
                failed=reason == "session_fail",
                content=row.content,
                attachments=list(row.attachments or []),
            )
        )

    async def _end_session(self, outcome: SessionOutcome) -> None:
        self.outcome = outcome
        self.turns = {"a": 0, "b": 0}

    # -- failure paths ----------------------------------------------------------------------

    async def _cleanup_after_abort(self) -> None:
        state = self.state
        closing = self.engine.closing
        reason = INTERRUPTED if closing else STOPPED_BY_USER
        said = "".join(self._partial)
        self._partial.clear()
        if said.strip() and not closing:
            # A user stop keeps what the model already said: completed, marked as stopped.
            kept = {"status": "completed", "content": said, "metadata": {"stopped": reason}}
            await self._fail_unanswered_message(kept)
        else:
            await self._fail_unanswered_message({"status": "failed", "metadata": {"error": reason}})
        if closing and self.durable:
            # a shutdown is a restart like a crash: the calls without results run on resume
            self._unanswered = []
        for call in list(self._unanswered):
            row = new_message(
                state.thread_id,
                "tool",
                f"Failed to execute tool: {reason}",
                name=call.name,
                tool_call_id=call.id,
                tool_status="error",
                depth=self.depth,
                parent_id=self.parent_message_id,
            )
            await create_message(state, row)
        self._unanswered = []
        self.stopped_by = "aborted_by_user"

    async def _fail_unanswered_message(self, updates: dict[str, Any]) -> None:
        """Store the message of a model call that never completed as ``failed``.

        Watched or not, a failed call leaves the same row: the prepared (not yet stored)
        message written once with the failure applied.
        """
        prepared, self._prepared = self._prepared, None
        if prepared is not None:
            self.remember(await complete_prepared(self.state, prepared, updates))

    async def _record_step_error(self, exc: Exception) -> None:
        state = self.state
        text = f"{type(exc).__name__}: {exc}"
        data: dict[str, Any] = {"error": text, "depth": self.depth}
        try:
            await self._fail_unanswered_message({"status": "failed", "metadata": {"error": text}})
            for call in list(self._unanswered):
                await self._store_tool_row(
                    call, ToolResult(status="error", error=text), SideConfig(prompt=""), raw=True
                )
        except Exception as again:  # e.g. the hook that failed the step fails these writes too
            data["recording_error"] = f"{type(again).__name__}: {again}"
        await self.engine.log(state.thread_id, "step_error", data)
        self.stopped_by = "step_error"


def without_past_tools(messages: list[Message]) -> list[Message]:
    """Drop the tool traffic of earlier turns (calls are stripped, results removed)."""
    return [m for m in map(strip_past_tools, messages) if m is not None]


def _binding_for(config: SideConfig, name: str) -> SessionToolBinding | None:
    for binding in (config.session_stop, config.session_fail, config.session_status):
        if binding is not None and binding.name == name:
            return binding
    return None


def _as_result(value: Any, fallback: ToolResult) -> ToolResult:
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, dict):
        return normalise_result(value)
    return fallback


def _refused_on_resume(
    call: ToolCall,
    offered: dict[str, OfferedTool],
    attempt: int,
    *,
    allow_any: bool = False,
    state: ThreadState | None = None,
) -> ToolResult | None:
    """The failed result of a call a restart interrupted that may not run again, else None.

    Native tools run again once (``attempt`` 2) unless defined with ``retry_on_resume=False``;
    subagent calls re-attach to the child they created, so they always proceed. ``allow_any``
    (a queued call) looks the tool up in the package when the prompt does not offer it.
    """
    if attempt <= 1:
        return None
    tool = offered.get(call.name)
    if tool is None and allow_any and state is not None:
        tool = resolve_any_tool(state, call.name)
    if tool is not None and tool.kind in ("subagent", "lifecycle"):
        return None
    native = tool.native if tool is not None else None
    if attempt > MAX_TOOL_ATTEMPTS or (native is not None and not native.retry_on_resume):
        return ToolResult(status="error", error=INTERRUPTED_TOOL, error_code="interrupted")
    return None
