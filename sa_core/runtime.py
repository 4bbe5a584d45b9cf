"""The Runtime: loads packs and plugins, owns the store, and runs threads.

    async with Runtime(packs=[pack], providers={"test": TestProvider(script)}) as runtime:
        thread = await runtime.create_thread("support")
        await thread.send_message("Hello")

Threads run one turn at a time each; many threads run concurrently. An idle thread holds no
task and no connection: a thread's task exists only while it has work.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from sa_core.errors import (
    DefinitionNotFoundError,
    MissingVariablesError,
    PackLoadError,
    PackValidationError,
    ThreadNotFoundError,
    ThreadTerminatedError,
)

if TYPE_CHECKING:
    from sa_core.engine.context import PromptTemplate
    from sa_core.engine.events import EventBus, QueuedFrame
    from sa_core.engine.flow import Flow, StopReason
    from sa_core.engine.leases import Workers
    from sa_core.engine.mcp import McpManager
    from sa_core.engine.scheduler import Scheduler
    from sa_core.engine.tools import OfferedTool, ToolTable
    from sa_core.offline import OfflineSpec
    from sa_core.plugins import PluginHost
    from sa_core.providers import Provider, ProviderMessage, ProviderResponse
    from sa_core.registry import PackScope, Registry
    from sa_core.spec import (
        AttachmentRef,
        Log,
        Message,
        ModelDefinition,
        Pack,
        PromptDefinition,
        QueueMessageInput,
        SubagentRegistryEntry,
        ToolAttachment,
    )
    from sa_core.state import SharedThread, ThreadState
    from sa_core.store import QueueEntry, Store, ThreadRow, Transaction
    from sa_core.store.executions import ExecutionRecord, ResumePoint

DEFAULT_DATABASE = ".sa/sa.db"
FLOW_MARKER = "sa:flow"
KEPT_HANDLES = 1024
"""Live handles of threads whose lease this worker keeps after a turn, kept at most (the
newest; see :meth:`Runtime.thread_for_message`)."""
"""Thread value older versions set while a flow ran (read once on start, then removed).

The engine now keeps a typed execution record per thread (``store.get_execution``)."""


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
    ) -> None:
        self._packs = list(packs)
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
        self.workers: Workers | None = None
        """Leases and stream relay shared with other workers (PostgreSQL), else ``None``."""
        self._live: weakref.WeakValueDictionary[str, SharedThread] = weakref.WeakValueDictionary()
        self._fresh: set[str] = set()
        self._primed_history: dict[str, list[Message]] = {}
        self._kept_handles: OrderedDict[str, SharedThread] = OrderedDict()
        """Handles of threads settled here with their lease kept (the live map is weak)."""
        """Histories read with a turn's acknowledgement, for its runner (see ``start_turn``)."""
        """Threads whose live row and registry were read in the transaction owing their turn."""
        self._current: weakref.WeakKeyDictionary[SharedThread, int] = weakref.WeakKeyDictionary()
        """Live handles known current, with the store's external version they were read at.

        In-process writers update the live row and registry with the store (see
        :meth:`update_child`, :meth:`stop_thread`, ...), so a live handle read, created or
        refreshed while the version was ``v`` is still what the database holds as long as no
        other connection has committed since (the version is still ``v``). A backend that
        cannot tell (``None``, PostgreSQL) never marks a handle current."""
        self._open = False
        self.closing = False
        self._mcp: McpManager | None = None

    # -- lifecycle --------------------------------------------------------------------------

    async def __aenter__(self) -> Runtime:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Load plugins and packs, open the store, and resume pending work."""
        from sa_core.engine.caches import PromptCaches
        from sa_core.engine.effects import EffectScheduler
        from sa_core.engine.events import EventBus
        from sa_core.engine.modelcall import ModelCaller
        from sa_core.engine.scheduler import Scheduler
        from sa_core.engine.secrets import SecretRedactor
        from sa_core.engine.services import EngineContext
        from sa_core.plugins import create_plugin_host
        from sa_core.registry import Registry
        from sa_core.store import open_store

        self.host: PluginHost = create_plugin_host(
            load_entrypoints=self.load_entrypoints, plugins=self._plugins
        )
        self.providers: dict[str, Provider] = {**self.host.providers, **self._provider_overrides}
        packs = [*self._packs, *self.host.packs]
        if self.load_entrypoints:
            packs += self._installed_packs({p.name for p in packs})
        self.registry: Registry = Registry(
            [], global_tools=self.host.tools, global_effects=self.host.effects
        )
        for pack in packs:
            pack.validate(known_tools=self.host.tools, known_packs=packs)
            self.registry.add(pack)
        if self.offline is not False:
            from sa_core.offline import offline_provider

            names = {m.provider for s in self.registry.scopes.values() for m in s.models.values()}
            offline = offline_provider(self.offline)
            self.providers.update({name: offline for name in names})
        self.store: Store = await open_store(self.database_url)
        self.events: EventBus = EventBus()
        self.events.parent_of = self._parent_of
        from sa_core.engine.leases import attach_workers

        self.workers = await attach_workers(self)  # PostgreSQL: relaying bus, thread leases
        workers = self.workers
        self.scheduler: Scheduler = Scheduler(
            self.store,
            self.instance_id,
            self._run_flow,
            self._settle_flow,
            accepting=lambda: self._open,
            claim=workers.claim if workers is not None else None,
            release=workers.release if workers is not None else None,
        )
        self.caches = PromptCaches()
        self.secrets = SecretRedactor(self.registry)
        self.models = ModelCaller(
            self.providers, self.store, self.events, offline=self.offline is not False
        )
        self.engine: EngineContext = EngineContext(
            store=self.store,
            registry=self.registry,
            host=self.host,
            events=self.events,
            scheduler=self.scheduler,
            caches=self.caches,
            secrets=self.secrets,
            models=self.models,
            instance_id=self.instance_id,
            is_closing=lambda: self.closing,
        )
        self.effects = EffectScheduler(self)
        self._open = True
        if workers is None:  # alone on the database: the processes that held claims are gone
            await self.store.release_claims()
        # with workers, a thread whose lease is valid runs elsewhere (its kick below finds the
        # lease taken); expired leases are taken over here or by the other workers' reapers
        await self.effects.start()
        await self._resume_interrupted()
        for thread_id in await self.store.threads_with_queue():
            row = await self.store.get_thread(thread_id)
            if row is not None and row.terminated is None:
                self.scheduler.kick(thread_id, "a")
        if workers is not None:
            workers.run()

    def live_row(self, thread_id: str) -> ThreadRow | None:
        """The row live handles of a thread share (their view of it), or None when none is open."""
        shared = self._live.get(thread_id)
        return shared.row if shared is not None else None

    def _parent_of(self, thread_id: str) -> str | None:
        shared = self._live.get(thread_id)
        return shared.row.parent_id if shared is not None else None

    async def _resume_interrupted(self) -> None:
        """Resume every owed or interrupted flow from the last point it committed."""
        for thread_id, record in (await self.store.owed_executions()).items():
            row = await self.store.get_thread(thread_id)
            if row is None or row.terminated is not None or row.stopped or record.resume is None:
                await self.store.finish_execution(thread_id, record.stop_reason)
                continue
            self.scheduler.kick(thread_id, record.resume.side, resume=record.resume)
        for thread_id, marker in (await self.store.threads_with_value(FLOW_MARKER)).items():
            await self.store.delete_value(thread_id, FLOW_MARKER)  # written by older versions
            row = await self.store.get_thread(thread_id)
            if row is None or row.terminated is not None or row.stopped:
                continue
            marker = marker if isinstance(marker, dict) else {}
            side: Literal["a", "b"] = "b" if marker.get("side") == "b" else "a"
            for message_id in marker.get("messages", []):
                message = await self.store.get_message(thread_id, message_id)
                if message is not None:
                    self.scheduler.kick(thread_id, side, initial=message)
            self.scheduler.kick(thread_id, side)

    async def ensure_running(self, thread_id: str) -> None:
        """Start a thread's runner if it owes work (a turn or queued entries) and has none."""
        if self.scheduler.is_running(thread_id) or not self._open:
            return
        record = await self.store.get_execution(thread_id)
        point = record.owed_resume if record is not None else None
        if point is not None:
            self.scheduler.kick(thread_id, point.side, resume=point)
            return
        from sa_core.engine.flow import side_for_role

        queue = await self.store.list_queue(thread_id)
        if queue:
            self.scheduler.kick(thread_id, side_for_role(queue[0].role))

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
        if not self._open:
            return
        self._open = False
        self.closing = True
        await self.effects.stop()
        await self.scheduler.close()
        if self._mcp is not None:
            await self._mcp.close()
        if self.workers is not None:
            await self.workers.stop()
        for provider in self.providers.values():
            closer = getattr(provider, "aclose", None)
            if closer is not None:
                await closer()
        await self.store.close()

    @property
    def mcp(self) -> McpManager:
        """The runtime's MCP servers (started lazily, stopped by :meth:`close`)."""
        if self._mcp is None:
            from sa_core.engine.mcp import McpManager

            self._mcp = McpManager(self)
        return self._mcp

    async def wait_idle(self, timeout: float | None = None) -> None:
        """Wait until no thread has work and no effect is running or due."""

        async def settle() -> None:
            while True:
                pending = [*self.scheduler.pending(), *self.effects.running]
                if pending:
                    await asyncio.gather(*pending, return_exceptions=True)
                    continue
                if await self.effects.has_due():
                    await asyncio.sleep(0.005)
                    continue
                await asyncio.sleep(0)
                if not (self.scheduler.busy or self.effects.running):
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
        from sa_core.engine.messages import new_id
        from sa_core.store import ThreadRow, now_us

        agent, scope = self._resolve_agent(agent_name, package)
        thread_env = dict(env or {})
        self.check_variables(scope, agent, thread_env, user_id)
        row = ThreadRow(
            id=new_id(),
            package=scope.package,
            agent_id=agent.name,
            created_at=now_us(),
            user_id=user_id,
            parent_id=parent_id,
            env=thread_env,
            env_types=dict(env_types or {}),
            tags=list(tags),
            properties=dict(properties or {}),
        )
        version = self.store.external_version()
        await self.store.create_thread(row)
        from sa_core.state import SharedThread, ThreadState

        shared = SharedThread(row, [])  # a new thread has no children yet: nothing to read
        self._live[row.id] = shared
        self._mark_current(shared, version)
        if self.workers is None:  # nor approval requests (only this process writes them)
            from sa_core.engine.approvals import mark_no_pending

            mark_no_pending(self, row.id)  # so its first step reads none
        state = ThreadState(self, shared)
        from sa_core.engine.subagents import boot_immediate

        await boot_immediate(state)
        return state

    def _resolve_agent(self, agent_name: str, package: str | None) -> tuple[Any, PackScope]:
        """Resolve the agent a new thread belongs to.

        An explicit ``package`` reaches any of its agents; otherwise only entry agents are
        reachable (``package/agent``, or a bare name that one package exports).
        """
        if package is not None:
            scope = self.registry.scope(package)
            if agent_name not in scope.agents:
                raise DefinitionNotFoundError("agent", agent_name, scope.agents, package=package)
            return scope.agents[agent_name], scope
        return self.registry.entry_agent(agent_name)

    def check_variables(
        self,
        scope: PackScope,
        agent: Any,
        thread_env: Mapping[str, str],
        user_id: str | None,
        *,
        include_scoped: bool = False,
    ) -> None:
        """Raise :class:`MissingVariablesError` for required variables without a value."""
        missing = self.missing_variables(
            scope, agent, thread_env, user_id, include_scoped=include_scoped
        )
        if missing:
            raise MissingVariablesError(agent.name, missing)

    def missing_variables(
        self,
        scope: PackScope,
        agent: Any,
        thread_env: Mapping[str, str],
        user_id: str | None,
        *,
        include_scoped: bool = False,
    ) -> list[tuple[str, str]]:
        """``(variable, declared_by)`` pairs of required variables that resolve nowhere."""
        from sa_core.engine.variables import graph_variables

        user_env = self.user_env.get(user_id or "", {})
        defaults: dict[str, str] = dict(agent.env)
        for prompt in scope.prompts.values():
            for key, value in prompt.env.items():
                defaults.setdefault(key, value)
        missing: list[tuple[str, str]] = []
        for declared in graph_variables(scope, agent):
            variable = declared.variable
            if not variable.required:
                continue
            if declared.inherited and variable.scoped and not include_scoped:
                continue
            name = variable.name
            if name in thread_env or name in user_env or name in self.env or name in defaults:
                continue
            if name in declared.tool_env:  # the prompt's tool config gives the tool its value
                continue
            missing.append((name, declared.declared_by))
        return missing

    async def get_thread(self, thread_id: str) -> ThreadState:
        """Reopen a thread.

        Raises:
            ThreadNotFoundError: no thread has this id.
        """
        version, row, children = await self._read_thread(thread_id)
        if row is None:
            raise ThreadNotFoundError(thread_id)
        return await self.state_for(row, read_at=version, children=children)

    async def thread_for_message(self, thread_id: str) -> ThreadState:
        """The thread a message is about to be sent on (the server's hot path).

        A thread with a live handle known to match the database (no other process wrote since
        it was read or written here, ``PRAGMA data_version`` on SQLite) is not read again.
        With several workers, a thread whose lease this worker holds (a turn runs here, or ran
        last and the lease is kept) is not read first either: its live handle serves, and the
        message's commit checks that the row is still as the handle holds it (:meth:`send`
        reads it and goes on when it is not). Otherwise as :meth:`get_thread`.

        Raises:
            ThreadNotFoundError: no thread has this id.
        """
        from sa_core.state import ThreadState

        shared = self._live.get(thread_id)
        if shared is not None and (
            thread_id in self.workers.held
            if self.workers is not None
            else self._live_current(thread_id)
        ):
            return ThreadState(self, shared)
        return await self.get_thread(thread_id)

    async def _read_thread(
        self, thread_id: str
    ) -> tuple[int | None, ThreadRow | None, list[SubagentRegistryEntry] | None]:
        """A thread's row, with the store's external version taken before reading it.

        Without a version (PostgreSQL) the live registry cannot be known current, so it is read
        with the row in the same statement; otherwise it is left to :meth:`state_for`.
        """
        version = self.store.external_version()  # before the reads: see ``_current``
        if version is not None:
            return version, await self.store.get_thread(thread_id), None
        found = await self.store.get_thread_with_children(thread_id)
        return (None, *found) if found is not None else (None, None, None)

    async def state_for(
        self,
        row: ThreadRow,
        flow: Flow | None = None,
        *,
        read_at: int | None = None,
        children: list[SubagentRegistryEntry] | None = None,
    ) -> ThreadState:
        """A ThreadState over a stored thread row (sharing live handles of the same thread).

        Args:
            row: The thread's row, as read from the store.
            flow: The flow running on the thread, if any.
            read_at: The store's external version taken before ``row`` was read (lets the
                next turn start without reading the row and registry again); ``None`` when
                unknown.
            children: The thread's registry, read with ``row`` (not read again).
        """
        from sa_core.state import SharedThread, ThreadState

        shared = self._live.get(row.id)
        if shared is not None and read_at is not None and self._current.get(shared) == read_at:
            # the live registry matched the database at ``read_at`` and nothing was committed
            # elsewhere before ``row`` was read: only the row is new
            if shared.row is not row:
                for item in dataclasses.fields(row):
                    setattr(shared.row, item.name, getattr(row, item.name))
            return ThreadState(self, shared, flow=flow)
        if children is None:
            children = await self.store.list_children(row.id)
        if shared is None:
            shared = SharedThread(row, children)
            self._live[row.id] = shared
        else:
            if shared.row is not row:
                for item in dataclasses.fields(row):
                    setattr(shared.row, item.name, getattr(row, item.name))
            shared.children = children
        self._mark_current(shared, read_at)
        return ThreadState(self, shared, flow=flow)

    def _mark_current(self, shared: SharedThread, version: int | None) -> None:
        """Record that ``shared`` matched the database at ``version`` (``None``: unknown)."""
        if version is None:
            self._current.pop(shared, None)
        else:
            self._current[shared] = version

    def _forget_current(self, thread_id: str) -> None:
        """The thread's live handle may differ from the database (a write rolled back)."""
        shared = self._live.get(thread_id)
        if shared is not None:
            self._mark_current(shared, None)

    def _live_current(self, thread_id: str) -> bool:
        """Whether the thread's live handle is known to match the database (see ``_current``).

        Call inside a write transaction: no other connection can commit until it ends.
        """
        shared = self._live.get(thread_id)
        if shared is None:
            return False
        version = self._current.get(shared)
        return version is not None and version == self.store.external_version()

    async def update_child(self, parent_id: str, reference: str, **fields: Any) -> None:
        """Update a registry entry in the store and in every live handle of the parent.

        Inside a write transaction, a parent handle known to match the database gives the
        entry as stored: it is not read back.
        """
        shared = self._live.get(parent_id)
        current = None
        if shared is not None and self.store.in_transaction() and self._live_current(parent_id):
            current = next((e for e in shared.children if e.reference == reference), None)
        updated = await self.store.update_child(parent_id, reference, current=current, **fields)
        if shared is not None:
            shared.children = [
                (updated or e.model_copy(update=fields)) if e.reference == reference else e
                for e in shared.children
            ]

    async def delete_thread(self, thread_id: str) -> list[str]:
        """Hard-delete a thread and its descendants; returns the deleted ids."""
        parent = self._parent_of(thread_id)
        for descendant in [thread_id, *await self.store.descendant_ids(thread_id)]:
            await self.scheduler.cancel(descendant)
        deleted = await self.store.delete_thread(thread_id)
        for gone in [*deleted, parent]:  # rows gone, and the parent's registry changed
            shared = self._live.get(gone) if gone is not None else None
            if shared is not None:
                self._mark_current(shared, None)
        return deleted

    @property
    def is_open(self) -> bool:
        """Whether the runtime is started and not closed."""
        return self._open

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
        record = await self.store.get_execution(thread_id)
        if record is not None and record.status != "idle":
            return True
        return bool(await self.store.list_queue(thread_id))

    # -- messages, queue, execution ---------------------------------------------------------

    async def attachment_refs(
        self,
        state: ThreadState,
        attachments: Sequence[ToolAttachment | AttachmentRef | Mapping[str, Any]],
    ) -> list[AttachmentRef]:
        """Store new (base64) attachments and pass existing references through."""
        from sa_core.spec import AttachmentRef, ToolAttachment

        refs: list[AttachmentRef] = []
        for item in attachments:
            if isinstance(item, AttachmentRef):
                refs.append(item)
            elif isinstance(item, ToolAttachment) or (isinstance(item, Mapping) and "data" in item):
                refs.append(await state.save_attachment(item))
            else:
                refs.append(AttachmentRef.model_validate(item))
        return refs

    async def send(
        self,
        state: ThreadState,
        content: str,
        role: Literal["user", "assistant"],
        attachments: Sequence[Any],
        silent: bool,
        wait: bool,
        *,
        metadata: dict[str, Any] | None = None,
    ) -> Message:
        """Send a message on a thread (``state.send_message``); ``metadata`` goes on it.

        Returns once the message and the turn it is owed are committed (one transaction), or
        its queue entry is, while a turn runs; with ``wait``, once the thread is idle again.

        With several workers the commit also checks that the thread's row is as ``state``
        holds it (a handle from :meth:`thread_for_message` is not read first); when it is not,
        nothing was written: the row is read again and the message sent on it.
        """
        from sa_core.store.threads import ThreadChanged

        refs = await self.attachment_refs(state, attachments)
        prepared: dict[str, Message] = {}
        verify = self.workers is not None
        while True:
            try:
                message = await self._deliver(
                    state, content, role, refs, silent, verify, prepared, metadata
                )
                break
            except ThreadChanged:
                state = await self.get_thread(state.thread_id)
                if state.row.terminated is not None:
                    raise ThreadTerminatedError(state.thread_id, state.row.terminated) from None
                verify = False  # just read: as any read, it may race a change
        if wait:
            await self.scheduler.wait(state.thread_id)
        return message

    async def _deliver(
        self,
        state: ThreadState,
        content: str,
        role: Literal["user", "assistant"],
        refs: list[AttachmentRef],
        silent: bool,
        verify: bool,
        prepared: dict[str, Message],
        metadata: dict[str, Any] | None = None,
    ) -> Message:
        """Commit a message (or its queue entry) and start the turn it owes; see :meth:`send`.

        Args:
            state: The thread.
            content: The message text.
            role: ``user`` or ``assistant``.
            refs: Its attachments, stored.
            silent: Whether it is silent.
            verify: Check in the commit that the row is as ``state`` holds it
                (:class:`~sa_core.store.threads.ThreadChanged` when not).
            prepared: The message as ``before_create_message`` shaped it, kept across
                attempts (the hooks run once).
            metadata: The message's metadata, if any.
        """
        from sa_core.engine.flow import side_for_role
        from sa_core.engine.messages import announce_created, new_id, new_message, prepare_message
        from sa_core.spec import QueueMessageInput
        from sa_core.store import now_us

        thread_id = state.thread_id
        if state.row.stopped:
            state.row.stopped = False
            state.row.updated_at = now = now_us()
            await self.store.update_thread(thread_id, stopped=False, updated_at=now)
        # a stopped turn still unwinding drains nothing more, so start after it
        await self.scheduler.unwinding(thread_id)
        # a runner settling its last turn: wait for its commit rather than queue behind it
        await self.scheduler.wait_settled(thread_id)
        elsewhere = False  # another worker holds the thread's lease
        holder: str | None = None  # that worker, when known
        if not self.scheduler.is_running(thread_id) and self.workers is not None:
            # the thread's lease says which worker runs it: queue for another, or take it here
            settled = self.workers.settled(thread_id)  # kept since its last turn: nothing owed
            taken, holder = await self.workers.try_acquire(thread_id)
            elsewhere = not taken
            # taken here: a turn a dead worker left owed resumes first; this message queues
            busy = elsewhere or (not settled and await self._owes_turn(thread_id))
        else:
            busy = self.scheduler.is_running(thread_id)
        if busy:
            message_id = new_id()
            entry = QueueMessageInput(
                role=role,
                content=content,
                attachments=refs,
                silent=silent,
                metadata={**(metadata or {}), "message_id": message_id},
            )
            async with self.store.transaction() as tx:
                if verify:
                    await self.store.expect_thread_unchanged(thread_id, state.row.updated_at, tx=tx)
                await self.store.enqueue(thread_id, entry, tx=tx)
            self.scheduler.note_queued(thread_id, committed_here=True)
            if not self.scheduler.is_running(thread_id):  # no runner, or it ended meanwhile
                side = side_for_role(role)
                if self.workers is None:
                    self.start_turn(thread_id, side)  # a runner drains the entry
                else:
                    self.workers.notify_work(thread_id, side, holder)  # another may run it
                    if self.workers.settled(thread_id):
                        # its runner here settled meanwhile (nothing owed) and kept the lease
                        self.scheduler.kick(thread_id, side, waiting=True)
                    elif not elsewhere:  # a turn a dead worker left owed resumes here first
                        await self.ensure_running(thread_id)
                    # else the lease holder runs it when notified (the reapers, if it died)
            message = new_message(
                thread_id,
                role,
                content,
                id=message_id,
                silent=silent,
                attachments=refs or None,
                metadata=metadata,
            )
        else:
            message = prepared.get("message") or await prepare_message(
                state,
                new_message(
                    thread_id,
                    role,
                    content,
                    silent=silent,
                    attachments=refs or None,
                    metadata=metadata,
                ),
            )
            prepared["message"] = message
            # acknowledged only once the message and the turn it is owed commit together; the
            # same transaction claims the thread for this runtime and reads what the runner
            # needs (thread row, registry, queue), so the turn starts without more round trips
            try:
                async with self.store.transaction() as tx:
                    if verify:  # in the same statement as the writes (PostgreSQL)
                        await self.store.expect_thread_unchanged(
                            thread_id, state.row.updated_at, tx=tx
                        )
                    await self.store.insert_messages([message], tx=tx)
                    owed = self._owed_record(state, message, side_for_role(role))
                    if not self.scheduler.accepts_work():
                        claimed = False
                        await self.store.save_execution(thread_id, owed, tx=tx)
                    elif self.workers is not None:  # the thread's lease, taken above, is the claim
                        claimed = True
                        await self.store.save_execution(thread_id, owed, tx=tx)
                    else:  # the owed turn and this runtime's claim, in one statement
                        claimed = await self.store.owe_execution(
                            thread_id, owed, self.instance_id, tx=tx
                        )
                    # the runner needs the live row and registry as committed: re-read them unless
                    # the live handle is known current (read earlier with nothing committed since);
                    # the reads go with the writes, in one statement (PostgreSQL)
                    history: list[Message] | None = None
                    if claimed and thread_id in self._live and not self._live_current(thread_id):
                        start = await self.store.read_turn_start(
                            thread_id, tx=tx, written=[message]
                        )
                        fresh = start is not None and self._adopt_live(
                            thread_id, start.row, start.children
                        )
                        queued = start is not None and bool(start.queue)
                        history = start.history if start is not None else None
                    else:
                        # the queue, which nothing here writes, may go with the writes
                        queued = claimed and bool(
                            await self.store.list_queue(thread_id, tx=tx, unwritten=True)
                        )
                        fresh = claimed and thread_id in self._live
                    queue_empty = fresh and not queued
            except BaseException:
                self._forget_current(thread_id)  # a row adopted in a rolled-back transaction
                raise
            await announce_created(state, [message])
            self.start_turn(
                thread_id,
                side_for_role(role),
                initial=message,
                claimed=claimed,
                queue_empty=queue_empty,
                fresh=fresh,
                history=history,
            )
        return message

    def start_turn(
        self,
        thread_id: str,
        side: Literal["a", "b"],
        *,
        initial: Message | None = None,
        claimed: bool = False,
        queue_empty: bool = False,
        fresh: bool = False,
        history: list[Message] | None = None,
    ) -> bool:
        """Start the thread's runner on work just committed; returns whether it started.

        Args:
            thread_id: The thread.
            side: The side whose turn it is.
            initial: The message that owes the turn, already stored.
            claimed: The committing transaction claimed the thread for this runtime.
            queue_empty: That transaction also found the thread's queue empty.
            fresh: The thread's live handle (row, registry) was written or re-read in that
                transaction, so the runner uses it without reading it back.
            history: The thread's history as that transaction committed it, read with it: the
                turn's first step uses it instead of loading it (with ``fresh`` only).
        """
        new_runner = not self.scheduler.is_running(thread_id)
        started = self.scheduler.kick(
            thread_id, side, initial=initial, claimed=claimed, queue_empty=queue_empty
        )
        if started and fresh:
            self._fresh.add(thread_id)
            if history is not None and new_runner:  # a runner going on may have written since
                self._primed_history[thread_id] = history
        return started

    async def _refresh_live(self, thread_id: str, tx: Transaction) -> bool:
        """Re-read a live thread's row and registry in ``tx``; False when it is not live."""
        if thread_id not in self._live:
            return False
        found = await self.store.get_thread_with_children(thread_id, tx=tx)
        return found is not None and self._adopt_live(thread_id, *found)

    def _adopt_live(
        self,
        thread_id: str,
        row: ThreadRow,
        children: list[SubagentRegistryEntry],
        *,
        keep: tuple[str, ...] = (),
    ) -> bool:
        """Make a live thread's handle the row and registry just read; False when not live.

        Args:
            thread_id: The thread.
            row: Its row as read.
            children: Its registry as read.
            keep: Fields whose live values stay (the reading transaction wrote them, and its
                read may predate its own writes).
        """
        shared = self._live.get(thread_id)
        if shared is None:
            return False
        for item in dataclasses.fields(row):
            if item.name not in keep:
                setattr(shared.row, item.name, getattr(row, item.name))
        shared.children = children
        self._mark_current(shared, self.store.external_version())
        return True

    async def _has_approvals(self, thread_id: str) -> bool:
        """Whether a thread kicked without a message or queued entries has approvals to act on.

        Several workers are told about the same queued work; the one that gets the lease after
        another already took the entries in must not run a turn on nothing new.
        """
        from sa_core.engine.approvals import KEY as APPROVALS

        return await self.store.get_value(thread_id, APPROVALS) is not None

    async def _owes_turn(self, thread_id: str) -> bool:
        """Whether the thread's execution record owes a turn (one a stopped worker left)."""
        record = await self.store.get_execution(thread_id)
        return record is not None and record.owed_resume is not None

    def _owed_record(
        self, state: ThreadState, message: Message, side: Literal["a", "b"]
    ) -> ExecutionRecord:
        """The execution record of a thread that owes a turn starting at ``message``."""
        from sa_core.store.executions import ExecutionRecord, ResumePoint

        turns = state.row.execution.get("turns") or {}
        point = ResumePoint(
            since=message.created_at,
            side=side,
            turns={"a": int(turns.get("a", 0)), "b": int(turns.get("b", 0))},
        )
        return ExecutionRecord(status="owed", resume=point)

    async def queue(self, state: ThreadState, data: QueueMessageInput) -> str:
        """Queue a message on a thread and wake it (``state.queue_message``)."""
        from sa_core.engine.flow import side_for_role

        refs = await self.attachment_refs(state, data.attachments)
        entry = data.model_copy(update={"attachments": refs})
        thread_id = state.thread_id
        claimed = fresh = False
        if self.scheduler.is_running(thread_id):
            queue_id = await self.store.enqueue(thread_id, entry)
        else:
            # an idle thread: the entry, the claim and the runner's reads in one transaction
            self.scheduler.note_queued(thread_id)  # no first drain may be skipped from here on
            async with self.store.transaction() as tx:
                queue_id = await self.store.enqueue(thread_id, entry, tx=tx)
                # several workers: the runner claims through the thread's lease instead
                claimed = (
                    self.workers is None
                    and self.scheduler.accepts_work()
                    and await self.store.claim_execution(thread_id, self.instance_id, tx=tx)
                )
                fresh = claimed and await self._refresh_live(thread_id, tx)
        frame: QueuedFrame = {
            "type": "queued",
            "queue_id": queue_id,
            "role": data.role,
            "silent": data.silent,
        }
        self.events.publish(thread_id, frame)
        if self.scheduler.is_running(thread_id):
            self.scheduler.note_queued(thread_id)
        else:
            side = side_for_role(data.role)
            self.start_turn(thread_id, side, claimed=claimed, fresh=fresh)
            if self.workers is not None:  # it may run on another worker
                self.workers.notify_work(thread_id, side)
        return queue_id

    async def _run_flow(
        self,
        thread_id: str,
        side: Literal["a", "b"],
        initial: list[Message],
        resume: ResumePoint | None,
    ) -> Flow | None:
        """Run one flow of a thread (the scheduler's runner calls this)."""
        from sa_core.engine.flow import Flow
        from sa_core.state import ThreadState

        continued = self.scheduler.take_continued(thread_id)  # nothing owed, work waits
        shared = self._live.get(thread_id) if thread_id in self._fresh else None
        self._fresh.discard(thread_id)
        history = self._primed_history.pop(thread_id, None) if shared is not None else None
        self._primed_history.pop(thread_id, None)
        queued: list[QueueEntry] | None = None
        if shared is not None:  # read in the transaction that owed this turn (see ``send``)
            if shared.row.terminated is not None:
                return None
            state = ThreadState(self, shared)
        elif not initial and not continued and self.workers is not None:
            # read under the lease just taken, never before it: a resume point read earlier
            # (a restart's owed turns) may be one another worker has finished meanwhile. The
            # row, registry, record, queue and history come back from one query
            start = await self.store.read_runner_start(thread_id)
            if start is None or start.row.terminated is not None:
                return None
            owed = start.execution.owed_resume if start.execution is not None else None
            if owed is not None:
                # kicked for queued work on a thread another worker left mid-turn: finish that
                # turn from its resume point first (the queue is drained on the way)
                resume, side = owed, owed.side
            elif start.queue or await self._has_approvals(thread_id):
                resume = None  # the turn it owed is done: only the queued work is left
                history, queued = start.history, start.queue
            else:
                return None  # another worker did the work meanwhile
            state = await self.state_for(start.row, children=start.children)
        else:
            version, row, children = await self._read_thread(thread_id)
            if row is None or row.terminated is not None:
                return None
            state = await self.state_for(row, read_at=version, children=children)
        flow = Flow(
            self.engine,
            state,
            side,
            initial_messages=initial,
            resume=resume,
            durable=True,
            history=history,
            queued=queued,
        )
        state.execution = flow
        self.scheduler.attach(thread_id, flow)
        try:
            flow.end_reason = await flow.run()
        except BaseException:
            self._forget_current(thread_id)  # a write of the step may have rolled back
            raise
        if flow.end_reason == "step_error":
            self._forget_current(thread_id)
        return flow

    async def _settle_flow(self, flow: Flow, reason: StopReason | None = None) -> None:
        """Record a finished flow: the outcome, a parent's report and "nothing owed", at once.

        ``reason`` is why the flow stopped when it is settled before :meth:`Flow.run` returns
        (in the commit of its last step); by default the flow's ``end_reason``.

        The runner's thread handle then lets go of the flow (``state.execution`` is ``None``
        outside a turn): a handle kept elsewhere, say by a provider's request log, no longer
        holds the turn's messages in a flow-handle reference cycle that only the garbage
        collector's full passes free.
        """
        why: str = reason or flow.end_reason or "idle"
        try:
            async with self.store.transaction() as tx:
                await self._settle(flow.state, flow, why)
                await self.store.finish_execution(flow.state.thread_id, why, tx=tx)
        except BaseException:
            self._forget_current(flow.state.thread_id)  # the live row went ahead of the store
            raise
        flow.state.execution = None
        if self.workers is not None:  # the lease stays a while: so does the handle
            self._keep_handle(flow.state.thread_id)

    def _keep_handle(self, thread_id: str) -> None:
        """Hold a settled thread's live handle for its next message (the newest few)."""
        shared = self._live.get(thread_id)
        if shared is None:
            return
        kept = self._kept_handles
        kept[thread_id] = shared
        kept.move_to_end(thread_id)
        while len(kept) > KEPT_HANDLES:
            kept.popitem(last=False)

    async def _settle(self, state: ThreadState, flow: Flow, reason: str) -> None:
        from sa_core.engine.oneshot import termination_fields
        from sa_core.engine.subagents import on_flow_end, settled_execution
        from sa_core.store import now_us

        execution = dict(state.row.execution)
        execution.update(
            turns=dict(flow.turns),
            side=flow.current_side,
            last_stop_reason=reason,
            status="awaiting_human"
            if reason in ("awaiting_human", "stop_on_response", "stop_tool")
            else ("awaiting_approval" if reason == "awaiting_approval" else "idle"),
        )
        # a child's outcome (and the call it answers) goes in the same update
        state.row.execution = settled_execution(state, flow, reason, execution)
        state.row.updated_at = now = now_us()
        # a non-resumable child that reported is terminated in the same write
        ended = termination_fields(state, reason, now)
        await self.store.set_thread_fields(
            state.thread_id, execution=state.row.execution, updated_at=now, **ended
        )
        await on_flow_end(state, flow, reason)

    async def wait_thread(self, thread_id: str) -> None:
        """Wait until the thread has no turn in flight."""
        await self.scheduler.wait(thread_id)

    _wait_thread = wait_thread  # the name older callers use

    async def turn_settled(self, thread_id: str) -> bool:
        """Whether the thread owes no turn and has nothing queued, as the database says.

        Unlike :meth:`wait_thread` (this process's runner only), this holds whichever worker
        runs the thread: a caller on any worker can watch the thread's frames and ask this when
        one of them looks like the end of a turn.
        """
        record = await self.store.get_execution(thread_id)
        if record is not None and record.status != "idle":
            return False
        return not await self.store.list_queue(thread_id)

    async def stop_thread(self, thread_id: str) -> None:
        """Stop the thread's turn (``state.stop``); the thread stays usable."""
        # flag and cancel before the first await, so that a message sent meanwhile sees the
        # stop (and clears it) and waits for the aborted turn instead of queueing behind it
        shared = self._live.get(thread_id)
        if shared is not None:
            shared.row.stopped = True
        task = self.scheduler.runner(thread_id)
        if task is not None and task is asyncio.current_task():
            # called from the thread's own turn (a tool, a hook): it cannot wait for itself to
            # be cancelled, so the turn ends after the current step instead
            flow = self.scheduler.flow(thread_id)
            if flow is not None:
                flow.stop("aborted_by_user")
            task = None
        elif task is not None:
            task.cancel()
        await self.store.update_thread(thread_id, stopped=True)
        if task is None and self.workers is not None:
            self.workers.notify_stop(thread_id)  # its turn may run on another worker
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)
            row = shared.row if shared is not None else await self.store.get_thread(thread_id)
            if (
                row is not None
                and row.parent_id is not None
                and row.terminated is None
                and thread_id not in self.scheduler.awaited  # the waiter settles the status
            ):
                await self.update_child(row.parent_id, thread_id, status="idle")
        if not self.scheduler.is_running(thread_id) and (
            task is not None
            or self.workers is None
            or await self.store.lease_owner(thread_id) in (None, self.workers.worker_id)
        ):  # a message sent meanwhile owes a turn; a turn on another worker records its end
            await self.store.finish_execution(thread_id, "aborted_by_user")

    async def terminate(self, state: ThreadState) -> None:
        """Terminate a thread for good (``state.terminate``)."""
        from sa_core.store import now_us

        if state.row.terminated is not None:
            return
        terminated = now_us()
        state.row.terminated = terminated
        state.row.stopped = True
        await self.store.update_thread(state.thread_id, terminated=terminated, stopped=True)
        if self.workers is not None and not self.scheduler.is_running(state.thread_id):
            self.workers.notify_stop(state.thread_id)  # its turn may run on another worker
        await self.scheduler.cancel(state.thread_id)  # never the caller's own runner
        await self.store.finish_execution(state.thread_id, "aborted_by_user")
        if state.parent_id is not None:
            await self.update_child(state.parent_id, state.thread_id, status="terminated")

    async def set_thread_env(
        self, state: ThreadState, name: str, value: str, type_: str | None
    ) -> None:
        """Set a variable on a thread and the descendants that inherit it.

        A descendant whose agent graph declares ``name`` scoped does not inherit it (nor do its
        own descendants, which inherit from it). Live handles see the new value at once.
        """
        from sa_core.engine.subagents import scoped_names

        rows = [state.row]
        for thread_id in await self.store.descendant_ids(state.thread_id):
            shared = self._live.get(thread_id)
            row = shared.row if shared is not None else await self.store.get_thread(thread_id)
            if row is not None:
                rows.append(row)
        cut: set[str] = set()
        for row in rows:
            if row is not state.row:
                scope = self.registry.scopes.get(row.package)
                agent = scope.agents.get(row.agent_id) if scope is not None else None
                if row.parent_id in cut or (
                    scope is not None and agent is not None and name in scoped_names(scope, agent)
                ):
                    cut.add(row.id)
                    continue
            if row.terminated is not None:
                continue
            env = {**row.env, name: value}
            env_types = {**row.env_types, name: type_} if type_ else row.env_types
            row.env, row.env_types = env, env_types
            await self.store.update_thread(row.id, env=env, env_types=env_types)

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Run a background task (awaited by :meth:`wait_idle`, cancelled on close)."""
        return self.scheduler.spawn(coro, name)

    # -- per-prompt caches and secrets (sa_core.engine.caches / .secrets) ---------------------

    def template(self, scope: PackScope, prompt: PromptDefinition) -> PromptTemplate:
        """The compiled system prompt of a prompt (includes resolved once)."""
        return self.caches.template(scope, prompt)

    def tool_table(self, scope: PackScope, prompt: PromptDefinition) -> ToolTable:
        """The resolved tools of a prompt (schemas computed once)."""
        return self.caches.tool_table(scope, prompt)

    def offered_tools(
        self, state: ThreadState, scope: PackScope, prompt: PromptDefinition, side: str
    ) -> dict[str, OfferedTool]:
        """The tools a step offers: the table, gated by optional flags, plus lifecycle tools."""
        return self.caches.offered_tools(state, scope, prompt, side)

    def secret_names(self, scope: PackScope, row: ThreadRow) -> frozenset[str]:
        """Variables declared secret in the package or by plugin tools, plus secret-typed env."""
        return self.secrets.secret_names(scope, row)

    def redact_secrets(self, state: ThreadState, text: str) -> str:
        """Replace the values of the thread's secret variables in ``text`` with ``[redacted]``."""
        return self.secrets.redact_secrets(state, text)

    # -- model calls and logs (sa_core.engine.modelcall) --------------------------------------

    def provider(self, name: str) -> Provider:
        """A provider by name."""
        return self.models.provider(name)

    async def call_model(
        self,
        state: ThreadState,
        model: ModelDefinition,
        messages: list[ProviderMessage],
        tools: Sequence[OfferedTool],
        **options: Any,
    ) -> tuple[ProviderResponse, Log]:
        """Call a model with retries and fallbacks (see :meth:`ModelCaller.call_model`)."""
        return await self.models.call_model(state, model, messages, tools, **options)

    async def log(self, thread_id: str, kind: str, data: dict[str, Any]) -> str:
        """Append a log row to a thread; returns its id."""
        return await self.models.log(thread_id, kind, data)

    # -- composition entry points -------------------------------------------------------------

    async def provide_variables(
        self, parent_thread_id: str, request_id: str, env: Mapping[str, str]
    ) -> dict[str, Any]:
        """Supply scoped variables a deferred ``subagent_create`` asked for and boot the child.

        Returns:
            ``{request_id, child_thread_id, status}``.
        """
        from sa_core.engine.subagents import provide_variables

        return await provide_variables(self, parent_thread_id, request_id, dict(env))


__all__ = ["PackValidationError", "Runtime", "ThreadTerminatedError", "default_database_url"]
