"""The Runtime: loads packs and plugins, owns the store, and runs threads.

    async with Runtime(packs=[pack], providers={"test": TestProvider(script)}) as runtime:
        thread = await runtime.create_thread("support")
        await thread.send_message("Hello")

Threads run one turn at a time each; many threads run concurrently. An idle thread holds no
task and no connection: a thread's task exists only while it has work.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from sa_core.engine.delivery.delivery import open_thread, thread_for_message
from sa_core.engine.delivery.effects import EffectScheduler
from sa_core.engine.events import EventBus
from sa_core.engine.kernel import Kernel, Life
from sa_core.engine.model.caches import PromptCaches
from sa_core.engine.model.embedder import pack_embedder
from sa_core.engine.model.modelcall import ModelCaller
from sa_core.engine.model.replaying import Replays
from sa_core.engine.owed import turn_settled
from sa_core.engine.placement import LocalPlacement, Placement
from sa_core.engine.remote.remote_client import prefetch_cards
from sa_core.engine.secrets import SecretNames, redact
from sa_core.engine.subagents.creation import new_thread, unset_variables
from sa_core.engine.subagents.subagent_spawn import boot_immediate
from sa_core.engine.subagents.subagents import provide_variables
from sa_core.engine.threads import LiveThreads
from sa_core.engine.tools.mcp import McpManager
from sa_core.engine.turn.running import resume_interrupted
from sa_core.engine.workers.scheduler import Scheduler
from sa_core.engine.workers.schedules import ScheduleTimer
from sa_core.errors import (
    PackLoadError,
    PackValidationError,
    ThreadTerminatedError,
)
from sa_core.memory import PackStore
from sa_core.offline import offline_provider
from sa_core.plugins import create_plugin_host
from sa_core.quietimport import collector_paused, skip_final_collection
from sa_core.registry import Registry
from sa_core.schedules import Schedules
from sa_core.spec.stores import store_config
from sa_core.state import ThreadState, thread_of
from sa_core.store.clock import SystemClock

if TYPE_CHECKING:
    from sa_core.engine.workers.leases import LeasePlacement
    from sa_core.offline import OfflineSpec
    from sa_core.plugins import PluginHost
    from sa_core.providers import Provider
    from sa_core.registry import PackScope
    from sa_core.replay.report import ReplayReport
    from sa_core.spec import AgentDefinition, Pack
    from sa_core.store import Store
    from sa_core.store.clock import Clock

DEFAULT_DATABASE = ".sa/sa.db"


def default_database_url() -> str:
    """``sqlite:///`` on ``.sa/sa.db`` under the working directory."""
    return f"sqlite:///{Path.cwd() / DEFAULT_DATABASE}"


class Runtime:
    """Hosts packs and runs their threads on a durable store.

    Args:
        packs: packs to load, in addition to installed ones.
        providers: provider objects by name; they override registered providers of that name.
        database_url: a SQLAlchemy-style URL (``sqlite:///path.db``); default ``.sa/sa.db``.
        load_entrypoints: load plugins (``sa``) and packs (``sa.packs``) from entry points.
        env: instance-level variables (the "instance" source of env resolution).
        user_env: per-user variables, by user id (the "user account" source).
        plugins: extra plugin objects to register.
        offline: answer every model offline, for trying packs without API keys or network:
            ``True`` answers ``Test response received.``; a script file path (YAML or JSON) or
            a ``TestScript`` answers from the script (see :mod:`sa_core.offline`). Offline
            calls are logged as provider ``test`` and model ``offline:<model>``.
        clock: the time schedules run by (default the system's); a test passes a
            :class:`sa_core.testing.ManualClock`.
        work: run turns, effects and schedules (the default). ``False`` opens a runtime that
            only reads and changes stored threads (the ``sa thread`` commands), leaving every
            turn, effect and schedule (and the claims of running processes) to the servers on
            the same database.
    """

    def __init__(
        self,
        packs: Sequence[Pack] = (),
        providers: Mapping[str, Provider] | None = None,
        database_url: str | None = None,
        load_entrypoints: bool = True,
        *,
        env: Mapping[str, str] | None = None,
        user_env: Mapping[str, Mapping[str, str]] | None = None,
        plugins: Sequence[object] = (),
        offline: OfflineSpec = False,
        clock: Clock | None = None,
        work: bool = True,
    ) -> None:
        self._packs = list(packs)
        self.work = work
        self._provider_overrides = dict(providers or {})
        self.database_url = database_url or default_database_url()
        self.load_entrypoints = load_entrypoints
        self.env: dict[str, str] = dict(env or {})
        self.user_env: dict[str, dict[str, str]] = {k: dict(v) for k, v in (user_env or {}).items()}
        self._plugins = list(plugins)
        self.offline = offline
        self.pack_errors: list[PackLoadError] = []
        self.pack_sources: dict[str, Any] = {}
        self.instance_id = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        """Names this runtime in the execution records it claims."""
        self.workers: LeasePlacement | None = None
        """Leases and stream relay shared with other workers (PostgreSQL), else ``None``."""
        self._life = Life()
        self.clock: Clock = clock or SystemClock()
        self.schedules = Schedules(lambda: self.kernel)
        """The packs' schedules: create, list, get, pause, resume, delete (once started)."""

    # -- lifecycle --------------------------------------------------------------------------

    async def __aenter__(self) -> Runtime:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Load plugins and packs, open the store, build the kernel and resume pending work."""
        self.host: PluginHost = create_plugin_host(
            load_entrypoints=self.load_entrypoints, plugins=self._plugins
        )
        self.providers: dict[str, Provider] = {**self.host.providers, **self._provider_overrides}
        self.registry: Registry = self._load_registry()
        with collector_paused():  # the database layer loads here, not on import
            from sa_core.store.store import open_store
        skip_final_collection()  # the process holds the runtime's heap from now on

        vectors = any(store_config(p.store).embedding_model for p in self.registry.packs)
        self.store: Store = await open_store(self.database_url, vectors=vectors)
        threads = LiveThreads(self.store)
        self.workers = await self._attach_workers(threads)
        self.kernel = kernel = self._build_kernel(threads)
        self.events = kernel.events
        self.scheduler = kernel.scheduler
        self.effects = kernel.effects
        self.mcp = kernel.mcp
        kernel.life.open = True
        if not self.work:
            return
        # a database this start created holds no claim and no interrupted turn
        fresh = self.store.created
        # alone: the processes that held claims are gone; with workers, a thread whose lease
        # is valid runs elsewhere (its kick finds the lease taken)
        if not (fresh and self.workers is None):
            await kernel.placement.start()
        await kernel.schedules.start()  # the packs' schedules, stored
        await kernel.effects.start()  # its loop runs due effects and schedules
        await prefetch_cards(kernel)  # remote agents described by their cards (bounded wait)
        if not fresh:
            await resume_interrupted(kernel)
        kernel.placement.run()

    async def _attach_workers(self, threads: LiveThreads) -> LeasePlacement | None:
        """PostgreSQL: share threads with the database's other workers (relaying bus, leases)."""
        if not self.store.url.startswith("postgresql"):
            return None
        from sa_core.engine.workers.leases import (
            attach_workers,  # the workers' machinery, PostgreSQL only
        )

        return await attach_workers(self.store, threads.parent_of)

    def _load_registry(self) -> Registry:
        """The registry of the given, plugin and installed packs (validated)."""
        packs = [*self._packs, *self.host.packs]
        if self.load_entrypoints:
            packs += self._installed_packs({p.name for p in packs})
        registry = Registry([], global_tools=self.host.tools, global_effects=self.host.effects)
        for pack in packs:
            pack.validate(known_tools=self.host.tools, known_packs=packs)
            registry.add(pack)
        if self.offline is not False:
            names = {m.provider for s in registry.scopes.values() for m in s.models.values()}
            offline = offline_provider(self.offline)
            self.providers.update({name: offline for name in names})
        return registry

    def _build_kernel(self, threads: LiveThreads) -> Kernel:
        """The engine's services over the open store (see :mod:`sa_core.engine.kernel`)."""
        store = self.store
        events = self.workers.relay if self.workers is not None else EventBus(threads.parent_of)
        placement: Placement = self.workers or LocalPlacement(store, self.instance_id, threads)
        models = ModelCaller(self.providers, store, events, offline=self.offline is not False)
        return Kernel(
            store=store,
            registry=self.registry,
            host=self.host,
            events=events,
            threads=threads,
            scheduler=Scheduler(store),
            placement=placement,
            caches=PromptCaches(),
            secrets=SecretNames(self.registry),
            models=models,
            effects=EffectScheduler(),
            schedules=ScheduleTimer(self.clock),
            mcp=McpManager(self.env),
            env=self.env,
            user_env=self.user_env,
            instance_id=self.instance_id,
            life=self._life,
            make_state=ThreadState,
            replays=Replays(),
        )

    def _installed_packs(self, taken: set[str]) -> list[Pack]:
        from sa_core.packloader import installed_packs

        found, errors = installed_packs()
        self.pack_errors.extend(errors)
        packs = []
        for info, pack in found:
            if pack.name in taken:
                continue
            taken.add(pack.name)
            self.pack_sources[pack.name] = info
            packs.append(pack)
        return packs

    async def close(self) -> None:
        """Stop in-flight turns cleanly, stop effects, close providers and the store."""
        if not self._life.open:
            return
        self._life.open = False
        self._life.closing = True
        kernel = self.kernel
        await kernel.effects.stop()
        await kernel.scheduler.close()
        await kernel.mcp.close()
        await kernel.placement.stop()
        for provider in self.providers.values():
            closer = getattr(provider, "aclose", None)
            if closer is not None:
                await closer()
        await self.store.close()

    @property
    def is_open(self) -> bool:
        """Whether the runtime is started and not closed."""
        return self._life.open

    @property
    def closing(self) -> bool:
        """Whether the runtime is shutting down."""
        return self._life.closing

    async def wait_idle(self, timeout: float | None = None) -> None:
        """Wait until no thread has work and no effect or schedule is running or due."""
        kernel = self.kernel
        scheduler, effects, schedules = kernel.scheduler, kernel.effects, kernel.schedules

        async def settle() -> None:
            while True:
                pending = [*scheduler.pending(), *effects.running]
                if pending:
                    await asyncio.gather(*pending, return_exceptions=True)
                    continue
                if schedules.starting or await effects.has_due() or await schedules.has_due():
                    await asyncio.sleep(0.005)
                    continue
                await asyncio.sleep(0)
                if not (scheduler.busy or effects.running):
                    return

        async with asyncio.timeout(timeout):
            await settle()

    # -- threads ----------------------------------------------------------------------------

    async def create_thread(
        self,
        agent_name: str,
        env: Mapping[str, str] | None = None,
        user_id: str | None = None,
        *,
        tags: Iterable[str] = (),
        package: str | None = None,
        env_types: Mapping[str, str] | None = None,
        parent_id: str | None = None,
        properties: Mapping[str, Any] | None = None,
    ) -> ThreadState:
        """Create a thread owned by ``agent_name`` (``package/agent`` to pick a package).

        Raises:
            MissingVariablesError: required variables of the agent's graph have no value.
        """
        kernel = self.kernel
        thread = await new_thread(
            kernel,
            agent_name,
            env,
            user_id,
            tags=tags,
            package=package,
            env_types=env_types,
            parent_id=parent_id,
            properties=properties,
        )
        state = ThreadState(kernel, thread)
        await boot_immediate(kernel, thread)
        return state

    def missing_variables(
        self,
        scope: PackScope,
        agent: AgentDefinition,
        thread_env: Mapping[str, str],
        user_id: str | None,
        *,
        include_scoped: bool = False,
    ) -> list[tuple[str, str]]:
        """``(variable, declared_by)`` pairs of required variables that resolve nowhere."""
        return unset_variables(
            self.kernel, scope, agent, thread_env, user_id, include_scoped=include_scoped
        )

    async def get_thread(self, thread_id: str) -> ThreadState:
        """Reopen a thread.

        Raises:
            ThreadNotFoundError: no thread has this id.
        """
        return ThreadState(self.kernel, await open_thread(self.kernel, thread_id))

    async def thread_for_message(self, thread_id: str) -> ThreadState:
        """The thread a message is about to be sent on (the server's hot path).

        See :func:`sa_core.engine.delivery.delivery.thread_for_message`.

        Raises:
            ThreadNotFoundError: no thread has this id.
        """
        return ThreadState(self.kernel, await thread_for_message(self.kernel, thread_id))

    async def delete_thread(self, thread_id: str) -> list[str]:
        """Hard-delete a thread and its descendants; returns the deleted ids."""
        threads = self.kernel.threads
        parent = threads.parent_of(thread_id)
        for descendant in [thread_id, *await self.store.descendant_ids(thread_id)]:
            await self.scheduler.cancel(descendant)
        deleted = await self.store.delete_thread(thread_id)
        for gone in [*deleted, parent]:  # rows gone, and the parent's registry changed
            if gone is not None:
                threads.forget_current(gone)
        return deleted

    async def import_thread(self, document: Mapping[str, Any]) -> ThreadState:
        """Recreate an exported thread tree (``thread.export()``) here, as a new tree.

        Raises:
            ThreadDocumentError: not an ``sa-thread/1`` document, or it needs agents this
                runtime lacks (named all at once).
        """
        from sa_core.replay.importer import import_thread  # the database layer: on first use

        thread_id = await import_thread(self.kernel, document)
        return await self.get_thread(thread_id)

    async def replay_thread(
        self,
        thread_id_or_document: str | Mapping[str, Any],
        tools: Literal["recorded", "execute"] = "recorded",
        stop_at_first: bool = True,
    ) -> ReplayReport:
        """Run a recorded thread again on a new thread, its model answers from the recording.

        See :func:`sa_core.replay.driver.replay_thread` and docs/time-travel.md.
        """
        from sa_core.replay.driver import replay_thread  # the database layer: on first use

        return await replay_thread(
            self.kernel, thread_id_or_document, tools=tools, stop_at_first=stop_at_first
        )

    def is_running(self, thread_id: str) -> bool:
        """Whether the thread has a turn in flight or queued."""
        return self.scheduler.is_running(thread_id)

    async def has_work(self, thread_id: str) -> bool:
        """Whether the thread has work left on any worker.

        That is a turn in flight here, a turn owed or running in its execution record, or
        queued messages. Unlike :meth:`is_running` this reads the store, so it also sees a
        turn another worker runs (PostgreSQL): ``False`` means the thread settled everywhere.
        """
        if self.is_running(thread_id):
            return True
        return not await turn_settled(self.kernel, thread_id)

    async def turn_settled(self, thread_id: str) -> bool:
        """Whether the thread owes no turn and has nothing queued, as the database says."""
        return await turn_settled(self.kernel, thread_id)

    def redact_secrets(self, state: ThreadState, text: str) -> str:
        """Replace the values of the thread's secret variables in ``text`` with ``[redacted]``."""
        return redact(text, self.kernel.secret_values(thread_of(state)))

    def pack_store(self, package: str) -> PackStore:
        """The store of ``package``: what its threads see as ``state.store``.

        Raises:
            DefinitionNotFoundError: no such package.
        """
        self.registry.scope(package)

        def env(name: str) -> str | None:
            return self.env.get(name) or os.environ.get(name)

        return PackStore(self.store, package, embedder=pack_embedder(self.kernel, package, env))

    async def provide_variables(
        self, parent_thread_id: str, request_id: str, env: Mapping[str, str]
    ) -> dict[str, Any]:
        """Supply scoped variables a deferred ``subagent_create`` asked for and boot the child.

        Returns:
            ``{request_id, child_thread_id, status}``.
        """
        return await provide_variables(self.kernel, parent_thread_id, request_id, dict(env))


__all__ = ["PackValidationError", "Runtime", "ThreadTerminatedError", "default_database_url"]
