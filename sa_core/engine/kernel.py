"""The kernel: everything the engine may touch, in one frozen, typed context.

Start here to learn the engine. Every engine function receives the kernel and, when it works
on one thread, a :class:`~sa_core.engine.threads.ThreadRef` (the engine's half of a thread):
never the ``Runtime`` (the composition root, which builds the kernel when it starts) nor a
``ThreadState`` (the facade tools, hooks, effects and thread endpoints see). The engine may
not import either (``tests/test_architecture.py``).

What the kernel holds, by layer:

- durable state: :attr:`Kernel.store` (every write and read of the database);
- definitions: :attr:`Kernel.registry` (packs by package), :attr:`Kernel.host` (plugins and
  their hooks), :attr:`Kernel.caches` (compiled prompts, tool tables), :attr:`Kernel.secrets`
  (secret names and redaction), :attr:`Kernel.env` and :attr:`Kernel.user_env` (the instance
  and user-account sources of a variable);
- running: :attr:`Kernel.threads` (the live handles of threads, one owner),
  :attr:`Kernel.scheduler` (one runner task per thread), :attr:`Kernel.placement` (which thread
  runs where: this process alone, or leases shared by several workers on PostgreSQL),
  :attr:`Kernel.models` (model calls, their logs and recordings), :attr:`Kernel.replays` (the
  replays running), :attr:`Kernel.effects` (durable delayed work),
  :attr:`Kernel.schedules` (runs the clock starts),
  :attr:`Kernel.mcp` (MCP servers), :attr:`Kernel.events` (live frames to subscribers);
- the process: :attr:`Kernel.instance_id` and :attr:`Kernel.life` (open, closing).

User code (a tool, a hook, an effect) is given a ``ThreadState``; the engine builds one with
:meth:`Kernel.user_state` and only passes it on (:class:`UserThread` is all it knows of it).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from sa_core.engine.secrets import MIN_SECRET_LENGTH
from sa_core.errors import DefinitionNotFoundError

if TYPE_CHECKING:
    from sa_core.engine.delivery.effects import EffectScheduler
    from sa_core.engine.events import EventBus
    from sa_core.engine.model.caches import PromptCaches
    from sa_core.engine.model.modelcall import ModelCaller
    from sa_core.engine.model.replaying import Replays
    from sa_core.engine.placement import Placement
    from sa_core.engine.secrets import SecretNames
    from sa_core.engine.threads import LiveThreads, ThreadRef
    from sa_core.engine.tools.mcp import McpManager
    from sa_core.engine.workers.scheduler import Scheduler
    from sa_core.engine.workers.schedules import ScheduleTimer
    from sa_core.plugins import PluginHost
    from sa_core.registry import PackScope, Registry
    from sa_core.spec import AgentDefinition
    from sa_core.store import Store


class KernelBound(Protocol):
    """A service the kernel holds that works with the kernel itself (it is handed it once)."""

    def bind(self, kernel: Kernel) -> None:
        """Keep ``kernel`` (called by :meth:`Kernel.__post_init__`)."""
        ...


class UserThread(Protocol):
    """What the engine knows of the facade user code gets (a ``ThreadState``): its thread."""

    @property
    def thread_id(self) -> str:
        """The thread id."""
        ...


UserStateFactory = Callable[["Kernel", "ThreadRef"], UserThread]
"""Builds the facade user code sees over a thread handle (the runtime gives ``ThreadState``)."""


T = TypeVar("T")


class Local(dict[type[Any], Any]):
    """What the engine keeps in memory for one runtime beside its services: one entry per kind.

    A module defines its entry's class (a bounded cache, the waiters of a registry) and asks
    ``kernel.local.of(ThatClass)`` (typed), or ``kernel.local[ThatClass]`` on a hot path (no
    Python call once built); the first ask builds it, without arguments. The kernel owns every
    entry, so two runtimes in one process share none, and each goes with its runtime.
    """

    __slots__ = ()

    def __missing__(self, kind: type[Any]) -> Any:
        entry = self[kind] = kind()
        return entry

    def of(self, kind: type[T]) -> T:
        """The runtime's entry of ``kind`` (built on first use)."""
        entry: T = self[kind]
        return entry


@dataclass(slots=True)
class Life:
    """The process's lifecycle flags (the one mutable part of the kernel).

    Attributes:
        open: Started and not closed: new work may start.
        closing: Shutting down (a cancelled flow then owes its work to the next start instead
            of failing its tool calls).
    """

    open: bool = False
    closing: bool = False


@dataclass(frozen=True, slots=True, eq=False, weakref_slot=True)
class Kernel:
    """The services of a running runtime (see the module docstring).

    Attributes:
        store: Durable state.
        registry: Packs by package.
        host: The plugin host (its ``hooks`` run lifecycle hooks).
        events: Live frames (a relaying bus with several workers).
        threads: Live thread handles.
        scheduler: Runner tasks and background tasks.
        placement: Which thread runs where (claims, leases).
        caches: Compiled prompts and tool tables.
        secrets: Secret names and redaction.
        models: Model calls and logs.
        effects: Scheduled effects (their loop also starts due schedules).
        schedules: When schedules are due, and their runs.
        mcp: MCP servers (started lazily).
        env: Instance-level variables.
        user_env: Per-user variables, by user id.
        instance_id: The name this runtime claims threads under.
        life: Open and closing flags.
        make_state: Builds the facade user code sees (see :meth:`user_state`).
        replays: The replays running here, by thread (:mod:`sa_core.engine.model.replaying`).
        local: What the engine's modules keep in memory for this runtime (:class:`Local`).
    """

    store: Store
    registry: Registry
    host: PluginHost
    events: EventBus
    threads: LiveThreads
    scheduler: Scheduler
    placement: Placement
    caches: PromptCaches
    secrets: SecretNames
    models: ModelCaller
    effects: EffectScheduler
    schedules: ScheduleTimer
    mcp: McpManager
    env: Mapping[str, str]
    user_env: Mapping[str, Mapping[str, str]]
    instance_id: str
    life: Life
    make_state: UserStateFactory
    replays: Replays
    local: Local = field(default_factory=Local)

    def __post_init__(self) -> None:
        """Hand the kernel to the services that work with it: built in one step, bound here."""
        services: tuple[KernelBound, ...] = (
            self.scheduler,
            self.placement,
            self.effects,
            self.schedules,
        )
        for service in services:
            service.bind(self)

    @property
    def closing(self) -> bool:
        """Whether the runtime is shutting down."""
        return self.life.closing

    @property
    def is_open(self) -> bool:
        """Whether the runtime is started and not closed (new work may start)."""
        return self.life.open

    def user_state(self, thread: ThreadRef) -> Any:
        """The ``ThreadState`` user code (a tool, a hook, an effect) gets for ``thread``.

        Typed ``Any`` on purpose: the engine passes it on to user code and never uses it. One
        facade per handle while it lives, so every hook and tool of a flow gets the same one.
        """
        held = thread.facade
        facade = held() if held is not None else None
        if facade is None:
            facade = self.make_state(self, thread)
            thread.facade = weakref.ref(facade)
        return facade

    def wants_hook(self, hook: str, thread: ThreadRef) -> bool:
        """Whether lifecycle hook ``hook`` would run any implementation on ``thread``.

        Asked before a hook call (and before :meth:`user_state`): most steps call none.
        """
        package = thread.shared.row.package
        scope = self.registry.scopes.get(package) or self.registry.scope(package)
        hooks = self.host.hooks
        wanted = hooks.wanted_with_pack_hooks if scope.hooks else hooks.wanted_without_pack_hooks
        return hook in wanted

    # -- what a thread resolves to -----------------------------------------------------------

    def scope_of(self, thread: ThreadRef) -> PackScope:
        """The package scope a thread's definitions resolve in."""
        package = thread.shared.row.package
        return self.registry.scopes.get(package) or self.registry.scope(package)

    def agent_of(self, thread: ThreadRef) -> AgentDefinition:
        """The definition of the agent that owns a thread now."""
        row = thread.shared.row
        package = row.package
        scope = self.registry.scopes.get(package) or self.registry.scope(package)
        return scope.agent(row.agent_id)[0]

    def env_of(self, thread: ThreadRef, name: str) -> str | None:
        """Resolve a variable of a thread, or None when unset.

        Order, first hit wins: thread, user account, instance, agent, tool config (the running
        tool's ``PromptToolConfig.env``), prompt (the active one, else side A's).
        """
        row = thread.shared.row
        if name in row.env:
            return row.env[name]
        if row.user_id is not None:
            user_env = self.user_env.get(row.user_id)
            if user_env and name in user_env:
                return user_env[name]
        if name in self.env:
            return self.env[name]
        scope: PackScope | None = None
        agent: AgentDefinition | None = None
        try:
            scope = self.registry.scopes.get(row.package) or self.registry.scope(row.package)
            agent = scope.agent(row.agent_id)[0]
        except DefinitionNotFoundError:
            pass
        if agent is not None and name in agent.env:
            return agent.env[name]
        if name in thread.tool_env:
            return thread.tool_env[name]
        prompt = thread.prompt
        if prompt is None and agent is not None and scope is not None:
            prompt = scope.prompts.get(agent.side_a.prompt)
        if prompt is not None and name in prompt.env:
            return prompt.env[name]
        return None

    def secret_values(self, thread: ThreadRef) -> list[str]:
        """The thread's secret values long enough to redact, longest first."""
        row = thread.shared.row
        scope = self.registry.scopes.get(row.package) or self.registry.scope(row.package)
        names = self.secrets.secret_names(scope, row)
        if not names:  # most threads have no secret: nothing to look up
            return []
        values = {self.env_of(thread, name) for name in names}
        found = [v for v in values if v and len(v) >= MIN_SECRET_LENGTH]
        return sorted(found, key=len, reverse=True)

    async def log(self, thread_id: str, kind: str, data: dict[str, Any]) -> str:
        """Append a log row to a thread; returns its id."""
        return await self.models.log(thread_id, kind, data)
