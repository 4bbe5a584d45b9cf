"""Model calling: the fallback chain of a model, retries, live deltas and ``llm_call`` logs."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from sa_core.engine.messages import new_id
from sa_core.engine.model.promptcache import may_wait_long, prompt_cache_for
from sa_core.engine.model.recording import Recorder
from sa_core.engine.model.replaying import ReplayProvider
from sa_core.engine.model.retry import AttemptRecord, ModelAttempt, call_with_fallbacks
from sa_core.engine.model.structured import PartialOutput, apply_to_request
from sa_core.engine.model.turnsettings import apply_turn_settings
from sa_core.errors import DefinitionNotFoundError
from sa_core.offline import offline_model
from sa_core.provider_check import unknown_provider_hint
from sa_core.providers import OutputSchema, ProviderRequest, StreamChunk, Usage
from sa_core.spec import Log
from sa_core.store.clock import now_us
from sa_core.telemetry import model_attempt

if TYPE_CHECKING:
    from sa_core.engine.events import ChunkFrame, EventBus
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.model.recording import RequestDigest
    from sa_core.engine.threads import ThreadRef
    from sa_core.engine.tools.tools import OfferedTool
    from sa_core.providers import Provider, ProviderMessage, ProviderResponse, ReasoningConfig
    from sa_core.spec import ModelDefinition
    from sa_core.store import Store


class ModelCaller:
    """Calls models for threads and records each attempt.

    Args:
        providers: Provider objects by name.
        store: Where failed attempts are logged.
        events: Where streamed deltas are published.
        offline: Every model is answered by the offline test provider: requests name
            ``offline:<model>`` and no prices apply, so logs never claim the pack's real model.
    """

    def __init__(
        self,
        providers: Mapping[str, Provider],
        store: Store,
        events: EventBus,
        *,
        offline: bool = False,
    ) -> None:
        self.providers = providers
        self.store = store
        self.events = events
        self.offline = offline
        self.first_chunk_timeout, self.stall_timeout = stream_timeouts()
        """The stream guards in seconds, from the environment when the caller is built."""
        self.recorder = Recorder(store)
        """Records each used answer with its request's hash (``recorder.enabled``: at all)."""

    def provider(self, name: str) -> Provider:
        """A provider by name."""
        try:
            return self.providers[name]
        except KeyError:
            raise DefinitionNotFoundError(
                "provider", name, self.providers, hint=unknown_provider_hint(name, self.providers)
            ) from None

    async def call(
        self,
        kernel: Kernel,
        thread: ThreadRef,
        model: ModelDefinition,
        messages: list[ProviderMessage],
        tools: Sequence[OfferedTool],
        *,
        tool_choice: Any = "auto",
        parallel_tool_calls: bool | None = None,
        reasoning: ReasoningConfig | None = None,
        provider_options: Mapping[str, Any] | None = None,
        message_id: str | None = None,
        depth: int = 0,
        partial: list[str] | None = None,
        output: OutputSchema | None = None,
        turn_settings: Mapping[str, Any] | None = None,
    ) -> tuple[ProviderResponse, Log]:
        """Call a model with retries and fallbacks; stream deltas to subscribers; log attempts.

        Failed attempts are logged at once. The successful attempt's log row is returned
        unsaved, so the caller can store it in the same transaction as the message it produced.
        ``partial`` collects the text streamed by the current attempt (a failed attempt's is
        dropped), so a stopped turn can keep what was said. The answer is recorded with its log
        (:mod:`~sa_core.engine.model.recording`); a replayed thread's comes from its recording.
        ``provider_options`` (the prompt's) are merged over each model definition's own,
        key by key, for the model and each of its fallbacks. ``output`` (a prompt's
        ``output_schema``) goes to each provider natively or as a forced final tool.
        Each request asks for prompt caching as its model's ``prompt_caching`` (overridden by
        the active prompt's) says (:mod:`~sa_core.engine.model.promptcache`). ``turn_settings``
        (the turn's ``model_settings``) go on every request of the chain, over its own values.

        Returns:
            The response and the successful attempt's (unsaved) log row.
        """
        chain = self._chain(
            kernel, thread, model, messages, tools, output,
            ProviderSettings(
                tool_choice, parallel_tool_calls, reasoning, provider_options, turn_settings
            ),
        )  # fmt: skip
        replayed = kernel.replays.active  # a replayed thread's chain serves its recording
        chain, digest = self._replayed(kernel, thread, chain) if replayed else (chain, None)
        events = self.events
        thread_id = thread.thread_id
        log_ids: list[str] = []

        tracker = PartialOutput() if output is not None else None
        on_chunk = chunk_publisher(events, thread_id, message_id, depth, partial, tracker)

        succeeded: list[Log] = []

        async def on_attempt(record: AttemptRecord) -> None:
            data = _attempt_data(record)
            data["message_id"] = message_id
            model_attempt(thread, data)
            if log_ids:
                data["retry_of_log_id"] = log_ids[-1]
            if partial is not None and record.error is not None:
                partial.clear()
            if tracker is not None and record.error is not None:
                tracker.reset()
            if record.error is None:
                log = new_log("llm_call", data)
                log_ids.append(log.id)
                succeeded.append(log)
            else:
                log_ids.append(await self.log(thread_id, "llm_call", data))

        response, record = await call_with_fallbacks(
            chain,
            on_chunk=on_chunk,
            on_attempt=on_attempt,
            first_chunk_timeout=self.first_chunk_timeout,
            stall_timeout=self.stall_timeout,
        )
        log = succeeded[-1]
        if self.recorder.enabled:
            self._record(kernel, thread, model, chain, record, (response, log, message_id, digest))
        return response, log

    def _provider_for(self, kernel: Kernel, thread: ThreadRef, name: str) -> Provider:
        """The provider ``name``.

        For a replayed thread a stand-in when it is not installed here: a replay never calls
        it (the recording answers).
        """
        found = self.providers.get(name)
        if found is None and kernel.replays.active and kernel.replays.cursor(thread):
            return ReplayProvider(name, None, f"provider {name!r} is not installed here")
        return found if found is not None else self.provider(name)

    def _replayed(
        self, kernel: Kernel, thread: ThreadRef, chain: list[ModelAttempt]
    ) -> tuple[list[ModelAttempt], RequestDigest | None]:
        """For a replayed thread, a chain that serves its recording (and the request's digest)."""
        return kernel.replays.serve(kernel, thread, chain, self.recorder)

    def _record(
        self,
        kernel: Kernel,
        thread: ThreadRef,
        model: ModelDefinition,
        chain: list[ModelAttempt],
        attempt: AttemptRecord,
        call: tuple[ProviderResponse, Log, str | None, RequestDigest | None],
    ) -> None:
        """Record the answer used (unless its model says ``record=False``)."""
        response, log, message_id, digest = call
        entry = chain[0]
        definition = model
        if entry.model_name != attempt.model_name:  # a fallback answered
            entry = next(e for e in chain if e.model_name == attempt.model_name)
        if attempt.model_name != model.name:
            definition = kernel.scope_of(thread).model(attempt.model_name)
        if definition.record:
            self.recorder.record(thread, entry.request, response, log, message_id, digest)

    def _chain(
        self,
        kernel: Kernel,
        thread: ThreadRef,
        model: ModelDefinition,
        messages: list[ProviderMessage],
        tools: Sequence[OfferedTool],
        output: OutputSchema | None,
        settings: ProviderSettings,
    ) -> list[ModelAttempt]:
        """One attempt per model of the chain (the model, then its fallbacks), requests built."""
        provider_tools = [t.as_provider_tool() for t in tools]

        def lookup(name: str) -> str | None:
            return kernel.env_of(thread, name) or os.environ.get(name)

        chain: list[ModelAttempt] = []
        waits_long = may_wait_long(tools, thread.children)
        offline = self.offline
        definitions = [model]
        if model.fallbacks:
            scope = kernel.scope_of(thread)
            definitions += [scope.model(name) for name in model.fallbacks]
        for definition in definitions:
            request = ProviderRequest(
                model=offline_model(definition.model) if offline else definition.model,
                messages=messages,
                tools=provider_tools,
                tool_choice=settings.tool_choice,
                parallel_tool_calls=settings.parallel_tool_calls,
                reasoning=settings.reasoning,
                provider_options={
                    **definition.provider_options,
                    **(settings.provider_options or {}),
                },
                max_tokens=definition.max_tokens,
                user=thread.thread_id,
                env=lookup,
                prompt_cache=prompt_cache_for(
                    thread.thread_id, definition, thread.prompt, waits_long=waits_long
                ),
            )
            if settings.turn:
                apply_turn_settings(request, settings.turn)
            provider = self.providers.get(definition.provider)
            if provider is None:
                provider = self._provider_for(kernel, thread, definition.provider)
            if output is not None:
                apply_to_request(provider, request, output)
            chain.append(
                ModelAttempt(
                    model_name=definition.name,
                    provider=provider,
                    request=request,
                    input_price=None if offline else definition.input_price,
                    output_price=None if offline else definition.output_price,
                    cached_price=None if offline else definition.cached_price,
                    cache_write_price=None if offline else definition.cache_write_price,
                )
            )
        return chain

    async def log(self, thread_id: str, kind: str, data: dict[str, Any]) -> str:
        """Append a log row to a thread; returns its id."""
        log = new_log(kind, data)
        await self.store.insert_log(thread_id, log)
        return log.id


def stream_timeouts() -> tuple[float, float]:
    """The (first chunk, stall) stream timeouts in seconds.

    120 and 45 unless the environment's ``STANDARD_AGENTS_STREAM_FIRST_CHUNK_TIMEOUT_MS`` or
    ``STANDARD_AGENTS_STREAM_STALL_TIMEOUT_MS`` (milliseconds) say otherwise.
    """
    first = float(os.environ.get("STANDARD_AGENTS_STREAM_FIRST_CHUNK_TIMEOUT_MS", 120000))
    stall = float(os.environ.get("STANDARD_AGENTS_STREAM_STALL_TIMEOUT_MS", 45000))
    return first / 1000, stall / 1000


def new_log(kind: str, data: dict[str, Any]) -> Log:
    """A log row with a fresh id and time (not yet stored)."""
    return Log(id=new_id(), type=kind, data=data, created_at=now_us())


@dataclass(slots=True)
class ProviderSettings:
    """What a step asks of every model of its chain, beside the messages and tools."""

    tool_choice: Any
    parallel_tool_calls: bool | None
    reasoning: ReasoningConfig | None
    provider_options: Mapping[str, Any] | None
    turn: Mapping[str, Any] | None = None
    """The turn's own ``model_settings``, if its message carries any."""


def chunk_publisher(
    events: EventBus,
    thread_id: str,
    message_id: str | None,
    depth: int,
    partial: list[str] | None,
    tracker: PartialOutput | None,
) -> Callable[[StreamChunk], None]:
    """The streaming callback of a model call: text kept in ``partial``, chunks as frames."""

    def on_chunk(chunk: StreamChunk) -> None:
        if partial is not None and chunk.type == "content-delta" and chunk.delta:
            partial.append(chunk.delta)
        if tracker is not None and events.has_listeners:
            value = tracker.feed(chunk)
            if value is not None:
                events.publish(
                    thread_id,
                    {
                        "type": "output_chunk",
                        "message_id": message_id,
                        "depth": depth,
                        "output": value,
                    },
                )
        if not events.has_listeners or chunk.delta is None:
            return
        kind: Literal["message_chunk", "reasoning_chunk"]
        if chunk.type == "content-delta":
            kind = "message_chunk"
        elif chunk.type == "reasoning-delta":
            kind = "reasoning_chunk"
        else:
            return
        frame: ChunkFrame = {
            "type": kind,
            "message_id": message_id,
            "depth": depth,
            "chunk": chunk.delta,
        }
        events.publish(thread_id, frame)

    return on_chunk


_NO_USAGE = Usage()


def _attempt_data(record: AttemptRecord) -> dict[str, Any]:
    """The ``llm_call`` log data of one attempt (a failed one's usage is empty)."""
    usage = record.usage or _NO_USAGE  # a provider's answer without usage counts none
    return {
        "provider": record.provider,
        "model": record.model,
        "model_name": record.model_name,
        "attempt": record.attempt,
        "input_tokens": usage.prompt_tokens,
        "output_tokens": usage.completion_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
        "cached_tokens": usage.cached_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "cost_total": record.cost,
        "latency_ms": record.latency_ms,
        "time_to_first_token_ms": record.time_to_first_token_ms,
        "finish_reason": record.finish_reason,
        "error": record.error,
        "error_type": record.error_code,
    }
