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
import weakref
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
    from sa_core.engine.events import EventBus
    from sa_core.engine.flow import Flow
    from sa_core.engine.leases import Workers
    from sa_core.engine.tools import OfferedTool, ToolTable
    from sa_core.plugins import PluginHost
    from sa_core.providers import Provider, ProviderMessage, ProviderResponse, ReasoningConfig
    from sa_core.registry import PackScope, Registry
    from sa_core.spec import (
        AttachmentRef,
        Log,
        Message,
        ModelDefinition,
        Pack,
        PromptDefinition,
        QueueMessageInput,
        ToolAttachment,
    )
    from sa_core.state import SharedThread, ThreadState
    from sa_core.store import Store, ThreadRow

DEFAULT_DATABASE = ".sa/sa.db"
FLOW_MARKER = "sa:flow"
"""Thread value set while a flow runs; a thread still marked at start was interrupted."""


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
        offline: answer every model with the unscripted test provider (``Test response
            received.``), for trying packs without API keys or network.
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
        offline: bool = False,
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
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._flows: dict[str, Flow] = {}
        self._kicked: set[str] = set()
        self._settling: set[str] = set()
        self._queued: set[str] = set()
        self._starting: set[str] = set()
        self.workers: Workers | None = None
        """Leases and stream relay shared with other workers (PostgreSQL), else ``None``."""
        self._initial: dict[str, list[Message]] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._tables: dict[tuple[str, str], ToolTable] = {}
        self._templates: dict[tuple[str, str], PromptTemplate] = {}
        self._secrets: dict[str, frozenset[str]] = {}
        self._parents: dict[str, str | None] = {}
        self._blocking_waits: set[str] = set()
        self._live: weakref.WeakValueDictionary[str, SharedThread] = weakref.WeakValueDictionary()
        self._open = False
        self.closing = False

    # -- lifecycle --------------------------------------------------------------------------

    async def __aenter__(self) -> Runtime:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Load plugins and packs, open the store, and resume pending work."""
        from sa_core.engine.effects import EffectScheduler
        from sa_core.engine.events import EventBus
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
        if self.offline:
            from sa_core.testing import TestProvider

            names = {m.provider for s in self.registry.scopes.values() for m in s.models.values()}
            self.providers.update({name: TestProvider(name=name) for name in names})
        self.store: Store = await open_store(self.database_url)
        self.events: EventBus = EventBus()
        self.events.parent_of = self._parents.get
        self.effects = EffectScheduler(self)
        from sa_core.engine.leases import attach_workers

        self.workers = await attach_workers(self)
        self._open = True
        await self.effects.start()
        await self._resume_interrupted()
        for thread_id in await self.store.threads_with_queue():
            row = await self.store.get_thread(thread_id)
            if row is not None and row.terminated is None:
                self._kick(thread_id, "a")

    async def _resume_interrupted(self) -> None:
        """Restart the flows a shutdown or crash interrupted, on the side that was acting."""
        for thread_id, marker in (await self.store.threads_with_value(FLOW_MARKER)).items():
            row = await self.store.get_thread(thread_id)
            if row is None or row.terminated is not None or row.stopped:
                await self.store.delete_value(thread_id, FLOW_MARKER)
                continue
            marker = marker if isinstance(marker, dict) else {}
            initial = [
                message
                for message_id in marker.get("messages", [])
                if (message := await self.store.get_message(thread_id, message_id)) is not None
            ]
            if initial:
                self._initial[thread_id] = initial
            self._kick(thread_id, "b" if marker.get("side") == "b" else "a")

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
        tasks = list(self._tasks.values()) + list(self._background)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.workers is not None:
            await self.workers.stop()
        for provider in self.providers.values():
            closer = getattr(provider, "aclose", None)
            if closer is not None:
                await closer()
        await self.store.close()

    async def wait_idle(self, timeout: float | None = None) -> None:
        """Wait until no thread has work and no effect is running or due."""

        async def settle() -> None:
            while True:
                pending = [*self._tasks.values(), *self._background, *self.effects.running]
                if pending:
                    await asyncio.gather(*pending, return_exceptions=True)
                    continue
                if await self.effects.has_due():
                    await asyncio.sleep(0.005)
                    continue
                await asyncio.sleep(0)
                if not (self._tasks or self._background or self.effects.running):
                    return

        await asyncio.wait_for(settle(), timeout)

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
        await self.store.create_thread(row)
        self._parents[row.id] = parent_id
        state = await self._state_for(row)
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
        row = await self.store.get_thread(thread_id)
        if row is None:
            raise ThreadNotFoundError(thread_id)
        return await self._state_for(row)

    async def _state_for(self, row: ThreadRow, flow: Flow | None = None) -> ThreadState:
        from sa_core.state import SharedThread, ThreadState

        self._parents.setdefault(row.id, row.parent_id)
        children = await self.store.list_children(row.id)
        shared = self._live.get(row.id)
        if shared is None:
            shared = SharedThread(row, children)
            self._live[row.id] = shared
        else:
            if shared.row is not row:
                for item in dataclasses.fields(row):
                    setattr(shared.row, item.name, getattr(row, item.name))
            shared.children = children
        return ThreadState(self, shared, flow=flow)

    async def update_child(self, parent_id: str, reference: str, **fields: Any) -> None:
        """Update a registry entry in the store and in every live handle of the parent."""
        await self.store.update_child(parent_id, reference, **fields)
        shared = self._live.get(parent_id)
        if shared is not None:
            shared.children = [
                e.model_copy(update=fields) if e.reference == reference else e
                for e in shared.children
            ]

    async def delete_thread(self, thread_id: str) -> list[str]:
        """Hard-delete a thread and its descendants; returns the deleted ids."""
        for descendant in [thread_id, *await self.store.descendant_ids(thread_id)]:
            await self._cancel(descendant)
        return await self.store.delete_thread(thread_id)

    @property
    def is_open(self) -> bool:
        """Whether the runtime is started and not closed."""
        return self._open

    def is_running(self, thread_id: str) -> bool:
        """Whether the thread has a turn in flight or queued."""
        return thread_id in self._tasks

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

    async def _send(
        self,
        state: ThreadState,
        content: str,
        role: Literal["user", "assistant"],
        attachments: Sequence[Any],
        silent: bool,
        wait: bool,
    ) -> Message:
        from sa_core.engine.flow import side_for_role
        from sa_core.engine.messages import create_message, new_id, new_message
        from sa_core.spec import QueueMessageInput

        refs = await self.attachment_refs(state, attachments)
        thread_id = state.thread_id
        if state._row.stopped:
            state._row.stopped = False
            await self.store.update_thread(thread_id, stopped=False)
        task = self._tasks.get(thread_id)
        if task is not None and task.cancelling() and task is not asyncio.current_task():
            # a stopped turn is still unwinding: it drains nothing more, so start after it
            await asyncio.wait([task])
        busy = thread_id in self._tasks or thread_id in self._starting
        if not busy and self.workers is not None:
            self._starting.add(thread_id)
            try:  # another worker runs the thread: queue for it and notify it
                busy = not await self.workers.acquire(thread_id)
            finally:
                self._starting.discard(thread_id)
        if busy:
            # a turn runs, or another send is starting one (its writes may suspend): queue
            message_id = new_id()
            entry = QueueMessageInput(
                role=role,
                content=content,
                attachments=refs,
                silent=silent,
                metadata={"message_id": message_id},
            )
            await self.store.enqueue(thread_id, entry)
            self._queued.add(thread_id)
            self._note_queued(thread_id)
            if thread_id in self._tasks or thread_id in self._starting:
                pass  # this process runs it and takes the entry in
            elif self.workers is not None:  # another worker may run it
                self.workers.notify_work(thread_id, side_for_role(role))
                self.workers.kick_if_queued(thread_id, side_for_role(role))
            else:
                # the turn ended while the entry was being written (an async backend)
                self._kick(thread_id, side_for_role(role))
            message = new_message(
                thread_id, role, content, id=message_id, silent=silent, attachments=refs or None
            )
        else:
            self._starting.add(thread_id)
            try:
                message = await create_message(
                    state,
                    new_message(thread_id, role, content, silent=silent, attachments=refs or None),
                )
                if role == "user" and state.agent.type == "ai_human":
                    await self._count_human_turn(state)
                self._initial.setdefault(thread_id, []).append(message)
                self._kick(thread_id, side_for_role(role))
            finally:
                self._starting.discard(thread_id)
        if wait:
            await self._wait_thread(thread_id)
        return message

    async def _count_human_turn(self, state: ThreadState) -> None:
        execution = dict(state._row.execution)
        turns = dict(execution.get("turns") or {})
        turns["b"] = int(turns.get("b", 0)) + 1
        execution["turns"] = turns
        state._row.execution = execution
        await self.store.update_thread(state.thread_id, execution=execution)

    async def _queue(self, state: ThreadState, data: QueueMessageInput) -> str:
        from sa_core.engine.flow import side_for_role

        refs = await self.attachment_refs(state, data.attachments)
        entry = data.model_copy(update={"attachments": refs})
        queue_id = await self.store.enqueue(state.thread_id, entry)
        self._queued.add(state.thread_id)
        self.events.publish(
            state.thread_id,
            {"type": "queued", "queue_id": queue_id, "role": data.role, "silent": data.silent},
        )
        if state.thread_id in self._tasks:
            self._note_queued(state.thread_id)
        else:
            self._kick(state.thread_id, side_for_role(data.role))
            if self.workers is not None:  # it may run on another worker
                self.workers.notify_work(state.thread_id, side_for_role(data.role))
        return queue_id

    def _note_queued(self, thread_id: str) -> None:
        """Note new queue entries for a thread whose flow already took its last step.

        A running flow drains the queue before each step by itself.
        """
        if thread_id in self._settling:
            self._kicked.add(thread_id)

    def _kick(self, thread_id: str, side: Literal["a", "b"]) -> None:
        if not self._open:
            return
        if thread_id in self._tasks:
            self._kicked.add(thread_id)
            return
        self._tasks[thread_id] = asyncio.create_task(
            self._drive(thread_id, side), name=f"sa-thread-{thread_id}"
        )

    async def _drive(self, thread_id: str, side: Literal["a", "b"]) -> None:
        from sa_core.engine.flow import Flow, side_for_role

        try:
            if self.workers is not None and not await self.workers.acquire(thread_id):
                return  # another worker runs it and was told about the work
            while True:
                self._kicked.discard(thread_id)
                row = await self.store.get_thread(thread_id)
                if row is None or row.terminated is not None:
                    return
                state = await self._state_for(row)
                initial = self._initial.pop(thread_id, [])
                flow = Flow(self, state, side, initial_messages=initial)
                state._flow = flow
                self._flows[thread_id] = flow
                marker = {"side": side, "messages": [m.id for m in initial]}
                await self.store.set_value(thread_id, FLOW_MARKER, marker)
                reason = await flow.run()
                self._settling.add(thread_id)
                await self._settle(state, flow, reason)
                await self.store.delete_value(thread_id, FLOW_MARKER)
                queue = await self.store.list_queue(thread_id)
                if not queue and thread_id not in self._kicked:
                    return
                self._settling.discard(thread_id)
                side = side_for_role(queue[0].role) if queue else flow.current_side
        finally:
            self._settling.discard(thread_id)
            self._flows.pop(thread_id, None)
            self._tasks.pop(thread_id, None)
            self._initial.pop(thread_id, None)
            if self.workers is not None:
                self.workers.release(thread_id)

    async def _settle(self, state: ThreadState, flow: Flow, reason: str) -> None:
        execution = dict(state._row.execution)
        execution.update(
            turns=dict(flow.turns),
            side=flow.current_side,
            last_stop_reason=reason,
            status="awaiting_human"
            if reason in ("awaiting_human", "stop_on_response", "stop_tool")
            else "idle",
        )
        state._row.execution = execution
        await self.store.update_thread(state.thread_id, execution=execution)
        from sa_core.engine.subagents import on_flow_end

        await on_flow_end(state, flow, reason)

    async def _wait_thread(self, thread_id: str) -> None:
        while thread_id in self._tasks:
            task = self._tasks[thread_id]
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                if task.cancelled():
                    continue
                raise

    async def _cancel(self, thread_id: str) -> None:
        task = self._tasks.get(thread_id)
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _stop(self, thread_id: str) -> None:
        # flag and cancel before the first await, so that a message sent meanwhile sees the
        # stop (and clears it) and waits for the aborted turn instead of queueing behind it
        shared = self._live.get(thread_id)
        if shared is not None:
            shared.row.stopped = True
        task = self._tasks.get(thread_id)
        if task is not None and task is asyncio.current_task():
            # called from the thread's own turn (a tool, a hook): it cannot wait for itself to
            # be cancelled, so the turn ends after the current step instead
            flow = self._flows.get(thread_id)
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
                and thread_id not in self._blocking_waits  # the waiter settles the status
            ):
                await self.update_child(row.parent_id, thread_id, status="idle")
        await self.store.delete_value(thread_id, FLOW_MARKER)

    async def _terminate(self, state: ThreadState) -> None:
        from sa_core.store import now_us

        if state._row.terminated is not None:
            return
        terminated = now_us()
        state._row.terminated = terminated
        state._row.stopped = True
        await self.store.update_thread(state.thread_id, terminated=terminated, stopped=True)
        if asyncio.current_task() is not self._tasks.get(state.thread_id):
            await self._cancel(state.thread_id)
        await self.store.delete_value(state.thread_id, FLOW_MARKER)
        if state.parent_id is not None:
            await self.update_child(state.parent_id, state.thread_id, status="terminated")

    async def _set_env(self, state: ThreadState, name: str, value: str, type_: str | None) -> None:
        """Set a variable on a thread and the descendants that inherit it.

        A descendant whose agent graph declares ``name`` scoped does not inherit it (nor do its
        own descendants, which inherit from it). Live handles see the new value at once.
        """
        from sa_core.engine.subagents import scoped_names

        rows = [state._row]
        for thread_id in await self.store.descendant_ids(state.thread_id):
            shared = self._live.get(thread_id)
            row = shared.row if shared is not None else await self.store.get_thread(thread_id)
            if row is not None:
                rows.append(row)
        cut: set[str] = set()
        for row in rows:
            if row is not state._row:
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

    def _spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    # -- per-prompt caches ------------------------------------------------------------------

    def template(self, scope: PackScope, prompt: PromptDefinition) -> PromptTemplate:
        """The compiled system prompt of a prompt (includes resolved once)."""
        key = (scope.package, prompt.name)
        cached = self._templates.get(key)
        if cached is None or prompt is not scope.prompts.get(prompt.name, prompt):
            from sa_core.engine.context import compile_prompt

            cached = compile_prompt(prompt, scope.prompts.get)
            self._templates[key] = cached
        return cached

    def tool_table(self, scope: PackScope, prompt: PromptDefinition) -> ToolTable:
        """The resolved tools of a prompt (schemas computed once)."""
        key = (scope.package, prompt.name)
        cached = self._tables.get(key)
        if cached is None:
            from sa_core.engine.tools import build_tool_table

            cached = build_tool_table(scope, prompt)
            self._tables[key] = cached
        return cached

    def offered_tools(
        self, state: ThreadState, scope: PackScope, prompt: PromptDefinition, side: str
    ) -> dict[str, OfferedTool]:
        """The tools a step offers: the table, gated by optional flags, plus lifecycle tools."""
        from sa_core.engine.subagents import lifecycle_tools
        from sa_core.engine.tools import flag_enabled

        table = self.tool_table(scope, prompt)
        offered = {
            name: tool
            for name, tool in table.tools.items()
            if (tool.optional is None or flag_enabled(state.env_or_none(tool.optional)))
            and not (tool.subagent is not None and tool.subagent.is_resumable)
        }
        offered.update(lifecycle_tools(state, table))
        return offered

    def secret_names(self, scope: PackScope, row: ThreadRow) -> frozenset[str]:
        """Variables declared secret in the package or by plugin tools, plus secret-typed env."""
        declared = self._secrets.get(scope.package)
        if declared is None:
            names = {
                v.name for a in scope.agents.values() for v in a.variables if v.type == "secret"
            }
            names |= {
                v.name for p in scope.prompts.values() for v in p.variables if v.type == "secret"
            }
            tools = [*scope.tools.values(), *self.registry.global_tools.values()]
            names |= {v.name for t in tools for v in t.variables if v.type == "secret"}
            declared = frozenset(names)
            self._secrets[scope.package] = declared
        if not row.env_types:
            return declared
        return declared | {k for k, v in row.env_types.items() if v == "secret"}

    def redact_secrets(self, state: ThreadState, text: str) -> str:
        """Replace the values of the thread's secret variables in ``text`` with ``[redacted]``.

        Tools may read secrets; whatever they return is scrubbed before it is stored, so a
        secret never reaches a model, a log or an API response.
        """
        for name in self.secret_names(state.scope, state._row):
            value = state.env_or_none(name)
            if value and len(value) >= 4 and value in text:
                text = text.replace(value, "[redacted]")
        return text

    # -- model calls and logs ---------------------------------------------------------------

    def provider(self, name: str) -> Provider:
        """A provider by name."""
        try:
            return self.providers[name]
        except KeyError:
            raise DefinitionNotFoundError(
                "provider (install its plugin or pass providers={...} to Runtime)",
                name,
                self.providers,
            ) from None

    async def call_model(
        self,
        state: ThreadState,
        model: ModelDefinition,
        messages: list[ProviderMessage],
        tools: Sequence[OfferedTool],
        *,
        tool_choice: Any = "auto",
        parallel_tool_calls: bool | None = None,
        reasoning: ReasoningConfig | None = None,
        message_id: str | None = None,
        depth: int = 0,
    ) -> tuple[ProviderResponse, Log]:
        """Call a model with retries and fallbacks; stream deltas to subscribers; log attempts.

        Failed attempts are logged at once. The successful attempt's log row is returned
        unsaved, so the caller can store it in the same transaction as the message it produced.

        Returns:
            The response and the successful attempt's (unsaved) log row.
        """
        from sa_core.engine.retry import ModelAttempt, call_model
        from sa_core.providers import ProviderRequest, ProviderTool, StreamChunk

        provider_tools = [ProviderTool(t.name, t.description, t.parameters) for t in tools]

        def lookup(name: str) -> str | None:
            return state.env_or_none(name) or os.environ.get(name)

        chain = []
        for definition in [model, *(state.scope.model(n) for n in model.fallbacks)]:
            request = ProviderRequest(
                model=definition.model,
                messages=messages,
                tools=provider_tools,
                tool_choice=tool_choice,
                parallel_tool_calls=parallel_tool_calls,
                reasoning=reasoning,
                provider_options=dict(definition.provider_options),
                max_tokens=definition.max_tokens,
                user=state.thread_id,
                env=lookup,
            )
            chain.append(
                ModelAttempt(
                    model_name=definition.name,
                    provider=self.provider(definition.provider),
                    request=request,
                    input_price=definition.input_price,
                    output_price=definition.output_price,
                    cached_price=definition.cached_price,
                )
            )
        events = self.events
        thread_id = state.thread_id
        log_ids: list[str] = []

        def on_chunk(chunk: StreamChunk) -> None:
            if not events.has_listeners or chunk.delta is None:
                return
            if chunk.type == "content-delta":
                kind = "message_chunk"
            elif chunk.type == "reasoning-delta":
                kind = "reasoning_chunk"
            else:
                return
            events.publish(
                thread_id,
                {"type": kind, "message_id": message_id, "depth": depth, "chunk": chunk.delta},
            )

        succeeded: list[Log] = []

        async def on_attempt(record: Any) -> None:
            data = _attempt_data(record)
            data["message_id"] = message_id
            if log_ids:
                data["retry_of_log_id"] = log_ids[-1]
            if record.error is None:
                log = new_log("llm_call", data)
                log_ids.append(log.id)
                succeeded.append(log)
            else:
                log_ids.append(await self.log(thread_id, "llm_call", data))

        first = (
            float(os.environ.get("STANDARD_AGENTS_STREAM_FIRST_CHUNK_TIMEOUT_MS", 120000)) / 1000
        )
        stall = float(os.environ.get("STANDARD_AGENTS_STREAM_STALL_TIMEOUT_MS", 45000)) / 1000
        response, _ = await call_model(
            chain,
            on_chunk=on_chunk,
            on_attempt=on_attempt,
            first_chunk_timeout=first,
            stall_timeout=stall,
        )
        return response, succeeded[-1]

    async def log(self, thread_id: str, kind: str, data: dict[str, Any]) -> str:
        """Append a log row to a thread; returns its id."""
        log = new_log(kind, data)
        await self.store.insert_log(thread_id, log)
        return log.id

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


def new_log(kind: str, data: dict[str, Any]) -> Log:
    """A log row with a fresh id and time (not yet stored)."""
    from sa_core.engine.messages import new_id
    from sa_core.spec import Log
    from sa_core.store import now_us

    return Log(id=new_id(), type=kind, data=data, created_at=now_us())


def _attempt_data(record: Any) -> dict[str, Any]:
    usage = getattr(record, "usage", None)
    return {
        "provider": getattr(record, "provider", None),
        "model": getattr(record, "model", None),
        "model_name": getattr(record, "model_name", None),
        "attempt": getattr(record, "attempt", None),
        "input_tokens": getattr(usage, "prompt_tokens", 0) if usage else 0,
        "output_tokens": getattr(usage, "completion_tokens", 0) if usage else 0,
        "reasoning_tokens": getattr(usage, "reasoning_tokens", 0) if usage else 0,
        "cached_tokens": getattr(usage, "cached_tokens", 0) if usage else 0,
        "cost_total": getattr(record, "cost", None),
        "latency_ms": getattr(record, "latency_ms", None),
        "time_to_first_token_ms": getattr(record, "time_to_first_token_ms", None),
        "finish_reason": getattr(record, "finish_reason", None),
        "error": getattr(record, "error", None),
        "error_type": getattr(record, "error_code", None),
    }


__all__ = ["PackValidationError", "Runtime", "ThreadTerminatedError", "default_database_url"]
