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

from sa_core.engine.context import (
    SIDE_ROLE,
    IncrementalConverter,
    Side,
    converter_for,
    dumps_compact,
    registry_system_message,
)
from sa_core.engine.messages import (
    complete_prepared,
    create_message,
    create_messages,
    new_message,
    prepare_message,
    update_message,
)
from sa_core.providers import ProviderMessage, ReasoningConfig
from sa_core.spec import (
    AttachmentRef,
    Message,
    PromptDefinition,
    SessionToolBinding,
    SideConfig,
    ToolCall,
    ToolCallFunction,
    ToolResult,
)

if TYPE_CHECKING:
    from sa_core.engine.tools import OfferedTool
    from sa_core.registry import PackScope
    from sa_core.runtime import Runtime
    from sa_core.state import ThreadState

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
UNSENT = ("pending", "failed")
"""Statuses of assistant rows that never got a model answer; they stay out of contexts."""
STOPPED_BY_USER = "Execution stopped by user"
INTERRUPTED = "Execution interrupted by a runtime shutdown; the turn resumes on restart"

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


class Flow:
    """One run of the turn loop on a thread (``state.execution`` while it runs).

    Exposes the spec's ExecutionState: ``flow_id``, ``current_side``, ``step_count``,
    ``side_a_step_count``, ``side_b_step_count``, ``stopped``, ``stopped_by``,
    ``message_history``, ``prompt_path``, :meth:`force_turn` and :meth:`stop`.
    """

    def __init__(
        self,
        runtime: Runtime,
        state: ThreadState,
        side: Side,
        *,
        depth: int = 0,
        parent_message_id: str | None = None,
        prompt_override: PromptDefinition | None = None,
        initial_messages: list[Message] | None = None,
    ) -> None:
        self.runtime = runtime
        self.state = state
        self.flow_id = str(uuid.uuid4())
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
        self.messages: list[Message] = list(initial_messages or [])
        self.last_text = ""
        self.prompt_path: list[str] = []
        self._forced: Side | None = None
        self._before: list[Message] | None = None
        self._before_filtered: dict[bool, list[Message]] = {}
        self._error_streak: tuple[str, int] = ("", 0)
        self._pending: Message | None = None
        self._prepared: Message | None = None
        self._converter = converter_for(state.thread_id) if depth == 0 else IncrementalConverter()
        self._unanswered: list[ToolCall] = []
        execution = dict(state._row.execution)
        turns = execution.get("turns") or {}
        self.turns: dict[Side, int] = {"a": int(turns.get("a", 0)), "b": int(turns.get("b", 0))}

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

    def side_config(self, side: Side) -> SideConfig | None:
        """The acting side's config, or None when a human takes that side."""
        if self.prompt_override is not None:
            return SideConfig(prompt=self.prompt_override.name) if side == "a" else None
        agent = self.state.agent
        if side == "a":
            return agent.side_a
        return agent.side_b if agent.type == "dual_ai" else None

    async def run(self) -> StopReason:
        """Run steps until the flow settles; returns why it stopped."""
        reason: StopReason
        try:
            reason = await self._loop()
        except asyncio.CancelledError:
            await asyncio.shield(self._cleanup_after_abort())
            raise
        except Exception as exc:  # a step crashed: record it and settle
            await self._record_step_error(exc)
            reason = "step_error"
        self.stopped_by = self.stopped_by or reason
        return reason

    def _step_ceiling(self) -> int:
        """The flow's step limit: 250, or a side's larger ``max_steps``."""
        limits = [GLOBAL_STEP_CEILING]
        for config in (self.side_config("a"), self.side_config("b")):
            if config is not None and config.max_steps is not None:
                limits.append(config.max_steps)
        return max(limits)

    async def _loop(self) -> StopReason:
        while True:
            if self.stopped or self.state.terminated is not None:  # e.g. terminated by a tool
                return "aborted_by_user"
            if self.depth == 0:
                await self._drain_queue()
                from sa_core.engine.subagents import run_immediate

                if await run_immediate(self):
                    continue
            if self._forced is not None:
                self.current_side, self._forced = self._forced, None
            side = self.current_side
            agent = self.state.agent
            cap = agent.max_session_turns if self.prompt_override is None else None
            if cap is not None and min(self.turns["a"], self.turns["b"]) >= cap:
                await self._end_session(SessionOutcome("max_session_turns", failed=True))
                return "max_session_turns"
            side_config = self.side_config(side)
            if side_config is None:
                return "awaiting_human"
            if side_config.max_steps is not None and self.side_steps[side] >= side_config.max_steps:
                return "max_side_steps"
            if self.step_count >= self._step_ceiling():
                return "max_total_steps"
            self.side_steps[side] += 1
            self.step_count += 1
            step = await self._step(side, side_config)
            if self.prompt_override is not None:
                return "one_step"
            if self.pending_handoff is not None:
                await self._perform_handoff(self.pending_handoff)
                self.pending_handoff = None
                continue
            if self._repeated_error(step):
                return "repeated_error"
            decision = await self._evaluate_stop(side, side_config, step)
            if decision is not None:
                return decision

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
            row = succeeded[-1]
            await self._end_session(
                SessionOutcome(
                    reason,
                    failed=reason == "session_fail",
                    content=row.content,
                    attachments=list(row.attachments or []),
                )
            )
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

    def _repeated_error(self, step: StepResult) -> bool:
        if self.depth > 0:
            return False
        for row in step.tool_rows:
            if row.tool_status == "error":
                signature = f"{row.name}:{(row.content or '')[:200]}"
                previous, count = self._error_streak
                self._error_streak = (signature, count + 1 if signature == previous else 1)
            else:
                self._error_streak = ("", 0)
        return self._error_streak[1] >= REPEATED_ERROR_LIMIT

    # -- one step ---------------------------------------------------------------------------

    def _prompt(self, config: SideConfig) -> PromptDefinition:
        if self.prompt_override is not None:
            return self.prompt_override
        return self.scope.prompt(config.prompt)

    async def _context_messages(self, prompt: PromptDefinition) -> list[Message]:
        """The stored messages a step sees.

        Without ``include_chat``: this flow's messages. With it: the history from before the
        flow (loaded and filtered once per flow; earlier turns' tool traffic dropped unless
        ``include_past_tools``) followed by this flow's messages.
        """
        current = [m for m in self.messages if m.status not in UNSENT]
        if not (prompt.include_chat and self.depth == 0):
            return current
        if self._before is None:
            history = await self.runtime.store.history(self.state.thread_id)
            in_flow = {m.id for m in self.messages}
            self._before = [m for m in history if m.id not in in_flow and m.status not in UNSENT]
        before = self._before_filtered.get(prompt.include_past_tools)
        if before is None:
            before = self._before if prompt.include_past_tools else without_past_tools(self._before)
            self._before_filtered[prompt.include_past_tools] = before
        return before + [m for m in current if m.depth == 0 and m.parent_id is None]

    async def _step(self, side: Side, config: SideConfig) -> StepResult:
        runtime = self.runtime
        state = self.state
        prompt = self._prompt(config)
        state._prompt = prompt
        self.prompt_path = [prompt.name]
        scope = self.scope
        model = scope.model(prompt.model)
        offered = runtime.offered_tools(state, scope, prompt, side)
        secret = runtime.secret_names(scope, state._row)
        system_text = runtime.template(scope, prompt).render(
            lambda name: None if name in secret else state.env_or_none(name)
        )
        history = await self._context_messages(prompt)
        if runtime.host.has_impls("filter_messages"):
            history = await runtime.host.chain("filter_messages", list(history), state=state)
        provider_messages = [ProviderMessage("system", system_text)]
        if self.depth == 0 and state._children:
            listing = registry_system_message(state._children)
            if listing:
                provider_messages.append(ProviderMessage("system", listing))
        provider_messages += await self._converter.convert(
            history,
            acting=side,
            images_allowed=model.capabilities.supports_images,
            recent_image_threshold=prompt.recent_image_threshold,
            read_file=lambda path: runtime.store.read_file(state.thread_id, path),
        )
        provider_messages = await runtime.host.chain(
            "prefilter_llm_history", provider_messages, state=state
        )
        from sa_core.store import now_us

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
        watched = runtime.events.has_listeners
        if watched:
            pending = await create_message(state, pending)
            self._pending = pending
        else:
            pending = await prepare_message(state, pending)
            self._prepared = pending
        tools = [t for t in offered.values()] if model.capabilities.supports_tool_calls else []
        reasoning = None
        if prompt.reasoning is not None:
            reasoning = ReasoningConfig(
                prompt.reasoning.effort, prompt.reasoning.max_tokens, prompt.reasoning.exclude
            )
        response, log = await runtime.call_model(
            state,
            model,
            provider_messages,
            tools,
            tool_choice=prompt.tool_choice if tools else "auto",
            parallel_tool_calls=prompt.parallel_tool_calls,
            reasoning=reasoning,
            message_id=pending.id,
            depth=self.depth,
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
        empty = not content.strip() and not calls and not response.images
        if empty:
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
        async with runtime.store.transaction():
            await runtime.store.insert_log(state.thread_id, log)
            if watched:
                updated = await update_message(state, pending.id, updates)
            else:
                updated = await complete_prepared(state, pending, updates)
        message = updated or pending.model_copy(update=updates)
        if (
            isinstance(message.tool_calls, list)
            and message.tool_calls
            and not isinstance(message.tool_calls[0], ToolCall)
        ):
            message = message.model_copy(update={"tool_calls": calls})
        self._pending = self._prepared = None
        self.remember(message)
        self._unanswered = list(calls)
        tool_rows: list[Message] = []
        if empty:
            tool_rows.append(
                await self._store_tool_row(
                    calls[0], ToolResult(status="error", error=EMPTY_RESPONSE), config, raw=True
                )
            )
        else:
            for call in calls:
                row = await self._run_call(call, offered, config)
                if row is not None:
                    tool_rows.append(row)
        while self.queued_tools:
            name, args = self.queued_tools.pop(0)
            queued = ToolCall(
                id=f"queued_{uuid.uuid4().hex[:8]}",
                function=ToolCallFunction(name=name, arguments=dumps_compact(args)),
            )
            row = await self._run_call(queued, offered, config, allow_any=True)
            if row is not None:
                tool_rows.append(row)
        self._unanswered = []
        state._prompt = prompt
        return StepResult(message, calls, tool_rows, content)

    async def _run_call(
        self,
        call: ToolCall,
        offered: dict[str, OfferedTool],
        config: SideConfig,
        *,
        allow_any: bool = False,
    ) -> Message | None:
        from sa_core.engine.dispatch import execute_call

        runtime = self.runtime
        state = self.state
        tool_message_id = str(uuid.uuid4())
        state.emit("tool_call_started", {"id": call.id, "name": call.name})
        result = await execute_call(self, call, offered, tool_message_id, allow_any=allow_any)
        state.emit("tool_call_done", {"id": call.id, "name": call.name, "status": result.status})
        hook = (
            "after_tool_call_success" if result.status == "success" else "after_tool_call_failure"
        )
        replaced = await runtime.host.chain(hook, result, state=state, tool_call=call)
        result = _as_result(replaced, result)
        if config.session_status is not None and call.name == config.session_status.name:
            from sa_core.engine.subagents import forward_status

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
        from pydantic_core import to_jsonable_python

        from sa_core.engine.files import attachment_paths, existing_refs, store_attachment
        from sa_core.engine.tools import result_text
        from sa_core.spec import ToolAttachment

        state = self.state
        if not raw:
            stored = await self.runtime.host.chain(
                "before_store_tool_result", result, state=state, tool_call=call
            )
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
        content = self.runtime.redact_secrets(state, result_text(result, mapped))
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
        row = await create_message(state, row)
        self.remember(row)
        self._unanswered = [c for c in self._unanswered if c.id != call.id]
        return row

    # -- queue, handoff, sessions -----------------------------------------------------------

    async def _drain_queue(self) -> None:
        """Move queued entries into the thread.

        Every queue write in this process flags the thread, so after the flow's first drain an
        unflagged thread is known to be empty.
        """
        runtime = self.runtime
        state = self.state
        if self.step_count and state.thread_id not in runtime._queued:
            return
        runtime._queued.discard(state.thread_id)
        entries = await runtime.store.drain_queue(state.thread_id)
        if not entries:
            return
        messages = []
        for entry in entries:
            metadata = dict(entry.metadata or {})
            metadata.setdefault("queued", True)
            message_id = metadata.pop("message_id", None)
            refs = [AttachmentRef.model_validate(a) for a in entry.attachments]
            messages.append(
                new_message(
                    state.thread_id,
                    entry.role,
                    entry.content,
                    id=message_id,
                    silent=entry.silent,
                    metadata=metadata,
                    attachments=refs or None,
                    subagent_id=metadata.get("subagent_id"),
                )
            )
        stored = await create_messages(state, messages)
        for message in stored:
            self.remember(message)
            if self.side_config("b") is None and message.role == "user" and not message.silent:
                self.turns["b"] += 1
        self.current_side = side_for_role(entries[0].role)
        self.stopped = False

    async def _perform_handoff(self, handoff: PendingHandoff) -> None:
        runtime = self.runtime
        state = self.state
        await runtime.store.update_thread(
            state.thread_id, agent_id=handoff.agent_name, package=handoff.package
        )
        state._row.agent_id = handoff.agent_name
        state._row.package = handoff.package
        self.current_side = "a"
        self.context.update(handoff.arguments)
        if handoff.init_message is not None or handoff.init_attachments:
            message = new_message(
                state.thread_id,
                "user",
                handoff.init_message or "",
                attachments=handoff.init_attachments or None,
            )
            self.remember(await create_message(state, message))
        from sa_core.engine.subagents import reset_immediate

        reset_immediate(self)

    async def _end_session(self, outcome: SessionOutcome) -> None:
        self.outcome = outcome
        self.turns = {"a": 0, "b": 0}

    # -- failure paths ----------------------------------------------------------------------

    async def _cleanup_after_abort(self) -> None:
        state = self.state
        reason = INTERRUPTED if self.runtime.closing else STOPPED_BY_USER
        await self._fail_unanswered_message({"status": "failed", "metadata": {"error": reason}})
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

        Watched or not, a failed call leaves the same row: an update of the pending row, or
        the prepared (not yet stored) message written once with the failure applied.
        """
        pending, self._pending = self._pending, None
        prepared, self._prepared = self._prepared, None
        if pending is not None:
            await update_message(self.state, pending.id, updates)
        elif prepared is not None:
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
        await self.runtime.log(state.thread_id, "step_error", data)
        self.stopped_by = "step_error"


def without_past_tools(messages: list[Message]) -> list[Message]:
    """Drop the tool traffic of earlier turns (calls are stripped, results removed)."""
    kept: list[Message] = []
    for message in messages:
        if message.role == "tool":
            continue
        elif message.tool_calls:
            if (message.content or "").strip():
                kept.append(message.model_copy(update={"tool_calls": None}))
        else:
            kept.append(message)
    return kept


def _binding_for(config: SideConfig, name: str) -> SessionToolBinding | None:
    for binding in (config.session_stop, config.session_fail, config.session_status):
        if binding is not None and binding.name == name:
            return binding
    return None


def _as_result(value: Any, fallback: ToolResult) -> ToolResult:
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, dict):
        from sa_core.engine.tools import normalise_result

        return normalise_result(value)
    return fallback
