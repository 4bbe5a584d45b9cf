"""The engine context: everything the turn loop uses, passed explicitly instead of the Runtime.

The :class:`~sa_core.runtime.Runtime` is the composition root: it builds these services once
when it starts and hands the turn loop (:class:`~sa_core.engine.flow.Flow`) this context.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sa_core.engine.caches import PromptCaches
    from sa_core.engine.events import EventBus
    from sa_core.engine.modelcall import ModelCaller
    from sa_core.engine.scheduler import Scheduler
    from sa_core.engine.secrets import SecretRedactor
    from sa_core.plugins import PluginHost
    from sa_core.registry import Registry
    from sa_core.store import Store


@dataclass(frozen=True, slots=True)
class EngineContext:
    """The services of a running runtime.

    Attributes:
        store: Durable state.
        registry: Packs by package.
        host: The plugin host (hooks).
        events: Live frames.
        scheduler: Runner tasks and claims.
        caches: Compiled prompts and tool tables.
        secrets: Secret names and redaction.
        models: Model calls and logs.
        instance_id: The name this runtime claims threads under.
        is_closing: Whether the runtime is shutting down (a cancelled flow then owes its work
            to the next start instead of failing its tool calls).
    """

    store: Store
    registry: Registry
    host: PluginHost
    events: EventBus
    scheduler: Scheduler
    caches: PromptCaches
    secrets: SecretRedactor
    models: ModelCaller
    instance_id: str
    is_closing: Callable[[], bool]

    @property
    def closing(self) -> bool:
        """Whether the runtime is shutting down."""
        return self.is_closing()

    async def log(self, thread_id: str, kind: str, data: dict[str, Any]) -> str:
        """Append a log row to a thread; returns its id."""
        return await self.models.log(thread_id, kind, data)
