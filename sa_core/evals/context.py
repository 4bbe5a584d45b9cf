"""What a run shares while it runs: the runtime, target, judge, cache and its overrides.

:func:`run_overrides` applies a run's ``models`` map and its cache to the runtime for the
run's duration and restores both afterwards: prompts that use a model name get the mapped model
definition of the pack, and every provider is wrapped by the eval cache (and the answers of
cases recorded from threads).
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sa_core.errors import DefinitionNotFoundError
from sa_core.evals.cache import CacheMode, CacheStats, CachingProvider, TrialKeys
from sa_core.evals.judge import Judge

if TYPE_CHECKING:
    from sa_core.evals.suite import Suite
    from sa_core.providers import Provider, ProviderResponse
    from sa_core.registry import PackScope
    from sa_core.runtime import Runtime
    from sa_core.spec.models import ModelDefinition

ROLES = ("judge", "user")
"""Role names ``models`` maps besides the pack's own model names."""


@dataclass
class RunContext:
    """A run in progress."""

    runtime: Runtime
    suite: Suite
    scope: PackScope
    agent: str
    run_id: str
    cache: CacheMode
    models: dict[str, str]
    keys: TrialKeys
    stats: CacheStats = field(default_factory=CacheStats)
    recorded: dict[str, deque[ProviderResponse]] = field(default_factory=dict)
    judge: Judge | None = None

    @property
    def package(self) -> str:
        """The target's package."""
        return self.scope.package


def check_models(scope: PackScope, models: Mapping[str, str]) -> dict[str, str]:
    """The ``models`` map, checked: every key a model name or role, every value a model.

    Raises:
        DefinitionNotFoundError: a name the pack does not define (every known one listed).
    """
    for name, chosen in models.items():
        if name not in ROLES and name not in scope.models:
            raise DefinitionNotFoundError(
                "model", name, [*scope.models, *ROLES], package=scope.package
            )
        if chosen not in scope.models:
            raise DefinitionNotFoundError("model", chosen, scope.models, package=scope.package)
    return dict(models)


def judge_model(
    scope: PackScope, suite: Suite, models: Mapping[str, str]
) -> ModelDefinition | None:
    """The judge's model definition: ``models['judge']``, the suite's, else the pack's first."""
    name = models.get("judge") or suite.judge_model
    if name is not None:
        if name not in scope.models:
            raise DefinitionNotFoundError("model", name, scope.models, package=scope.package)
        return scope.models[name]
    chat = [m for m in scope.models.values() if getattr(m, "kind", "chat") == "chat"]
    return chat[0] if chat else None


class RecordedAnswers:
    """Answers recorded from a thread, served in order to the trial that replays them."""

    def __init__(self, inner: Provider, context: RunContext) -> None:
        self.inner = inner
        self.context = context

    @property
    def name(self) -> str:
        """The wrapped provider's name."""
        return self.inner.name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.inner, attribute)

    async def _next(self, user: str | None) -> ProviderResponse | None:
        key = await self.context.keys.key_of(user)
        queue = self.context.recorded.get(key or "")
        roots = self.context.keys.ids.get(key or "", [])
        if queue and roots and roots[0] == user:  # the case's own thread, not its children
            self.context.stats.hits += 1
            return queue.popleft()
        return None

    async def generate(self, request: Any) -> ProviderResponse:
        """The next recorded answer of the trial, else the provider's."""
        found = await self._next(request.user)
        return found if found is not None else await self.inner.generate(request)

    async def stream(self, request: Any) -> AsyncIterator[Any]:
        """The next recorded answer of the trial as chunks, else the provider's stream."""
        from sa_core.providers import response_chunks

        found = await self._next(request.user)
        source = response_chunks(found) if found is not None else self.inner.stream(request)
        async for chunk in source:
            yield chunk


_RUNNING: weakref.WeakSet[Runtime] = weakref.WeakSet()
"""Runtimes with a run in progress: a run's overrides belong to the whole runtime."""


@asynccontextmanager
async def run_overrides(context: RunContext) -> AsyncIterator[None]:
    """Swap models and wrap providers for the run; restore both afterwards.

    Raises:
        RuntimeError: another run is in progress on the same runtime.
    """
    runtime, scope = context.runtime, context.scope
    if runtime in _RUNNING:
        raise RuntimeError(
            "an eval run is already in progress on this runtime; run suites one after another "
            "(or on separate runtimes): a run's model overrides and cache apply to the runtime"
        )
    model = judge_model(scope, context.suite, context.models)  # before the names are remapped
    saved_models = dict(scope.models)
    saved_providers = dict(runtime.providers)
    _RUNNING.add(runtime)
    try:
        for name, chosen in context.models.items():
            if name not in ROLES:
                scope.models[name] = saved_models[chosen]
        for name, provider in saved_providers.items():
            wrapped: Any = provider
            if context.cache != "off":
                wrapped = CachingProvider(
                    wrapped, runtime.store, context.cache, context.keys, context.stats
                )
            runtime.providers[name] = RecordedAnswers(wrapped, context)
        if model is not None and model.provider in runtime.providers:
            context.judge = Judge(model, runtime.providers[model.provider])
        yield
    finally:
        _RUNNING.discard(runtime)
        scope.models.clear()
        scope.models.update(saved_models)
        runtime.providers.clear()
        runtime.providers.update(saved_providers)
