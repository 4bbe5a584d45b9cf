"""What a tool or effect runs as, and a thread's durable values, definitions and effects.

A part of :class:`~sa_core.state.ThreadState`, kept in its own module: every method is one
call to the store or to the thread's package scope.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sa_core.engine.frames import publish_value
from sa_core.engine.model.embedder import pack_embedder
from sa_core.memory import PackStore
from sa_core.spec import AgentDefinition, ModelDefinition, PromptDefinition, ScheduledEffect

if TYPE_CHECKING:
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.threads import ThreadRef
    from sa_core.registry import PackScope


class ThreadResources:
    """The running call's attempt, durable values, definitions and effects of a thread."""

    __slots__ = ()
    _kernel: Kernel
    _ref: ThreadRef

    @property
    def thread_id(self) -> str:
        """The thread id."""
        raise NotImplementedError

    @property
    def scope(self) -> PackScope:
        """The package scope definitions resolve in."""
        raise NotImplementedError

    # -- durable values ---------------------------------------------------------------------

    async def get_value(self, key: str) -> Any:
        """A JSON value stored on the thread under ``key`` (None when unset); survives restarts.

        Keys starting with ``sa:`` belong to the runtime; use your own prefix.
        """
        return await self._kernel.store.get_value(self.thread_id, key)

    @property
    def store(self) -> PackStore:
        """The pack's store: memory every thread of the package shares (see :mod:`sa_core.memory`).

        ``await state.store.put(("users", uid), "prefs", {"tone": "brief"}, ttl=None)``, ``get``,
        ``delete``, ``search(namespace_prefix, query=None, filter=None, limit=10)`` and
        ``list_namespaces(prefix)``. Unlike :meth:`set_value`, it is not tied to this thread.
        While a tool runs, its writes commit with its result (see :mod:`sa_core.memory`).
        """
        kernel, ref = self._kernel, self._ref
        package = ref.shared.row.package

        def env(name: str) -> str | None:
            return kernel.env_of(ref, name) or os.environ.get(name)

        embedder = pack_embedder(kernel, package, env)
        return PackStore(kernel.store, package, embedder=embedder, held=ref.store_writes)

    async def set_value(self, key: str, value: Any) -> None:
        """Store a JSON-serialisable value on the thread under ``key`` (see :meth:`get_value`).

        The thread's live subscribers get a ``value`` frame with it (secret values redacted).
        """
        await self._kernel.store.set_value(self.thread_id, key, value)
        publish_value(self._kernel, self._ref, key, value)

    # -- resources --------------------------------------------------------------------------

    def load_model(self, name: str) -> ModelDefinition:
        """A model definition visible to this thread's package."""
        return self.scope.model(name)

    def load_prompt(self, name: str) -> PromptDefinition:
        """A prompt definition of this thread's package."""
        return self.scope.prompt(name)

    def load_agent(self, name: str) -> AgentDefinition:
        """An agent definition (``package/agent`` for another package's entry agent)."""
        return self.scope.agent(name)[0]

    def get_prompt_names(self) -> list[str]:
        """Prompt names of this thread's package."""
        return sorted(self.scope.prompts)

    def get_agent_names(self) -> list[str]:
        """Agent names of this thread's package."""
        return sorted(self.scope.agents)

    def get_model_names(self) -> list[str]:
        """Model names of this thread's package."""
        return sorted(self.scope.models)

    # -- effects ----------------------------------------------------------------------------

    async def schedule_effect(
        self, name: str, args: Mapping[str, Any] | None = None, delay: float = 0
    ) -> str:
        """Run effect ``name`` after ``delay`` seconds; durable across restarts.

        Returns:
            The scheduled effect id.
        """
        self.scope.effect(name)
        return await self._kernel.effects.schedule(self.thread_id, name, dict(args or {}), delay)

    async def get_scheduled_effects(self, name: str | None = None) -> list[ScheduledEffect]:
        """Pending effects of this thread (optionally only those named ``name``)."""
        return await self._kernel.store.list_effects(self.thread_id, name)

    async def remove_scheduled_effect(self, effect_id: str) -> bool:
        """Cancel a pending effect."""
        return await self._kernel.store.remove_effect(self.thread_id, effect_id)

    # -- while a tool or an effect runs ----------------------------------------------------

    @property
    def tool_call_id(self) -> str | None:
        """While a tool runs: the id of its tool call, stable across restarts.

        Use it as the idempotency key of anything the tool does outside the thread.
        """
        return self._ref.tool_call_id

    @property
    def tool_attempt(self) -> int:
        """While a tool runs: 1 on the first run of its call, else 2.

        2 when a restart interrupted the first run and the call runs again (it never runs a
        third time).
        """
        return self._ref.tool_attempt

    @property
    def effect_attempt(self) -> int | None:
        """While an effect runs: 1 on its first run, 2 when a restart interrupted the first."""
        return self._ref.effect_attempt
