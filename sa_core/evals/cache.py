"""The eval cache: model answers served by a canonical request hash and the trial's key.

Every provider of the runtime is wrapped for the run by a :class:`CachingProvider`. A request's
key is the SHA-256 of its canonical form (provider, model, messages, tools, settings, with the
trial's thread ids and tool-call ids replaced by their order of appearance, so the same
conversation hashes the same in any run) together with the trial's cache key
(``suite/case/trial``, or a judge sample's key): repeats of a case never serve each other, and a
prompt edit changes the hash of exactly the calls that carry that prompt.

Answers are stored durably in the ``eval_cache`` table of the runtime's database, next to the
threads they answered, so ``sa eval list`` / a rerun on the same database finds them, and two
processes on one database share them. Modes: ``off`` (no cache), ``record`` (always ask the
provider, store the answer), ``replay`` (only stored answers: a miss fails the trial with
:class:`CacheMissError`), ``replay-or-record`` (stored answers, the provider on a miss).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from sa_core.errors import ProviderError
from sa_core.providers import (
    ProviderRequest,
    ProviderResponse,
    ProviderToolCall,
    StreamChunk,
    StreamCollector,
    Usage,
    response_chunks,
)

if TYPE_CHECKING:
    from sa_core.providers import Provider
    from sa_core.store import Store

CacheMode = Literal["off", "record", "replay", "replay-or-record"]
CACHE_MODES: tuple[str, ...] = ("off", "record", "replay", "replay-or-record")
JUDGE_PREFIX = "eval-judge:"
"""Judge requests carry ``user = eval-judge:<trial key>/judge<i>#<sample>``."""
_CALL_ID = re.compile(r"\bcall_[A-Za-z0-9_-]+\b")
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")


class CacheMissError(ProviderError):
    """``cache="replay"`` and no answer is recorded for a request."""

    def __init__(self, trial_key: str, summary: str) -> None:
        super().__init__(
            f"eval cache miss under cache='replay' (trial {trial_key}): {summary}; run with "
            "cache='replay-or-record' or 'record' to ask the provider",
            "cache_miss",
        )
        self.trial_key = trial_key


@dataclass
class CacheStats:
    """What the cache did in a run: answers served, missed, and calls the providers got."""

    hits: int = 0
    misses: int = 0
    provider_calls: int = 0
    missed: list[dict[str, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return dataclasses.asdict(self)


class TrialKeys:
    """Which trial a request belongs to: its thread's (or an ancestor's) trial key."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.by_thread: dict[str, str] = {}
        self.ids: dict[str, list[str]] = {}
        """The thread ids of each trial (forgotten together when the trial ends)."""

    def register(self, thread_id: str, key: str) -> None:
        """A trial's root thread."""
        self.by_thread[thread_id] = key
        self.ids.setdefault(key, []).append(thread_id)

    def forget(self, key: str) -> None:
        """Drop a finished trial's threads (keeps memory flat over long runs)."""
        for thread_id in self.ids.pop(key, []):
            self.by_thread.pop(thread_id, None)

    async def key_of(self, thread_id: str | None) -> str | None:
        """The trial key of a thread, walking up its parents; ``None`` outside any trial."""
        if thread_id is None:
            return None
        if thread_id.startswith(JUDGE_PREFIX):
            return thread_id
        chain = []
        current: str | None = thread_id
        while current is not None and current not in self.by_thread:
            chain.append(current)
            row = await self.store.get_thread(current)
            current = row.parent_id if row is not None else None
        if current is None:
            return None
        key = self.by_thread[current]
        for found in chain:
            self.register(found, key)
        return key


def canonical(provider: str, request: ProviderRequest) -> str:
    """The request as canonical JSON, ids normalised.

    UUIDs (thread, child and message ids, in tool results and prompts) and tool-call ids become
    placeholders numbered by first appearance, so a rerun of the same conversation hashes alike.
    """
    body = {
        "provider": provider,
        "model": request.model,
        "messages": [
            {
                "role": m.role,
                "content": m.content,
                "tool_calls": [[c.name, c.arguments] for c in m.tool_calls],
                "tool_call_id": m.tool_call_id,
                "tool_name": m.tool_name,
                "images": len(m.images),
            }
            for m in request.messages
        ],
        "tools": [[t.name, t.description, t.parameters] for t in request.tools],
        "tool_choice": request.tool_choice,
        "parallel_tool_calls": request.parallel_tool_calls,
        "output_schema": dataclasses.asdict(request.output_schema)
        if request.output_schema
        else None,
        "max_tokens": request.max_tokens,
        "settings": [request.temperature, request.top_p, request.seed, request.stop],
        "options": {k: v for k, v in request.provider_options.items() if "key" not in k.lower()},
    }
    text = json.dumps(body, sort_keys=True, default=str)
    ids: dict[str, str] = {}
    text = _UUID.sub(lambda m: ids.setdefault(m.group(0), f"<id{len(ids)}>"), text)
    calls: dict[str, str] = {}
    return _CALL_ID.sub(lambda m: calls.setdefault(m.group(0), f"<call{len(calls)}>"), text)


def response_to_json(response: ProviderResponse) -> dict[str, Any]:
    """A provider answer as stored in the cache."""
    return {
        "content": response.content,
        "tool_calls": [dataclasses.asdict(c) for c in response.tool_calls],
        "reasoning": response.reasoning,
        "reasoning_details": response.reasoning_details,
        "finish_reason": response.finish_reason,
        "usage": dataclasses.asdict(response.usage),
        "response_id": response.response_id,
    }


def response_from_json(data: dict[str, Any]) -> ProviderResponse:
    """A cached answer back as a :class:`ProviderResponse`."""
    return ProviderResponse(
        content=data.get("content"),
        tool_calls=[ProviderToolCall(**c) for c in data.get("tool_calls") or []],
        reasoning=data.get("reasoning"),
        reasoning_details=data.get("reasoning_details"),
        finish_reason=data.get("finish_reason") or "stop",
        usage=Usage(**(data.get("usage") or {})),
        response_id=data.get("response_id"),
        metadata={"eval_cache": "hit"},
    )


class CachingProvider:
    """A provider that answers from the eval cache, asking ``inner`` as the mode allows."""

    def __init__(
        self, inner: Provider, store: Store, mode: CacheMode, keys: TrialKeys, stats: CacheStats
    ) -> None:
        self.inner = inner
        self.store = store
        self.mode = mode
        self.keys = keys
        self.stats = stats

    @property
    def name(self) -> str:
        """The wrapped provider's name."""
        return self.inner.name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.inner, attribute)  # capabilities (structured output, ...)

    async def _key(self, request: ProviderRequest) -> tuple[str, str]:
        trial = await self.keys.key_of(request.user) or "-"
        text = canonical(self.inner.name, request)
        digest = hashlib.sha256(f"{trial}\n{text}".encode()).hexdigest()
        return digest, trial

    async def _cached(self, request: ProviderRequest) -> tuple[ProviderResponse | None, str, str]:
        key, trial = await self._key(request)
        if self.mode == "record":
            return None, key, trial
        found = await self.store.get_eval_cache(key)
        if found is not None:
            self.stats.hits += 1
            return response_from_json(found), key, trial
        self.stats.misses += 1
        system = next((m.content or "" for m in request.messages if m.role == "system"), "")
        self.stats.missed.append({"trial": trial, "model": request.model, "system": system[:80]})
        if self.mode == "replay":
            raise CacheMissError(trial, f"model {request.model}, {len(request.messages)} messages")
        return None, key, trial

    async def generate(self, request: ProviderRequest) -> ProviderResponse:
        """A stored answer, or the provider's (stored for next time)."""
        cached, key, trial = await self._cached(request)
        if cached is not None:
            return cached
        self.stats.provider_calls += 1
        response = await self.inner.generate(request)
        await self.store.put_eval_cache(key, trial, response_to_json(response))
        return response

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamChunk]:
        """A stored answer replayed as chunks, or the provider's stream (stored when done)."""
        cached, key, trial = await self._cached(request)
        if cached is not None:
            async for chunk in response_chunks(cached):
                yield chunk
            return
        self.stats.provider_calls += 1
        collector = StreamCollector()
        async for chunk in self.inner.stream(request):
            collector.add(chunk)
            yield chunk
        await self.store.put_eval_cache(key, trial, response_to_json(collector.response()))
