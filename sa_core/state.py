"""ThreadState: the one API that tools, hooks, effects and thread endpoints see.

It mirrors the spec's ThreadState in snake_case. A state obtained inside a model turn has
``execution`` set (the running flow); one obtained from ``runtime.get_thread`` or given to an
effect or endpoint has ``execution`` None.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from sa_core import telemetry
from sa_core.engine import files, messages, variables
from sa_core.engine.delivery import delivery
from sa_core.engine.frames import emit
from sa_core.engine.model import usage
from sa_core.engine.subagents import runagent, subagent_report, subagent_vars
from sa_core.engine.threads import NO_TOOL_OPTIONS, ThreadRef, tool_config
from sa_core.engine.timeline import fork as forks
from sa_core.engine.timeline import rewind as rewinds
from sa_core.engine.tools import approvals
from sa_core.engine.turn import clienttools, dispatch
from sa_core.errors import (
    ThreadTerminatedError,
    VariableNotFoundError,
)
from sa_core.spec import (
    AgentDefinition,
    AttachmentRef,
    InjectMessageInput,
    Log,
    Message,
    MessagesResult,
    PromptDefinition,
    QueueMessageInput,
    SubagentRegistryEntry,
    ToolAttachment,
    ToolResult,
)
from sa_core.spec.modelsettings import ModelSettings, check_model_settings
from sa_core.spec.schemas import ArgsSpec, is_model_class, json_schema_of
from sa_core.thread_branches import ThreadBranches
from sa_core.thread_files import ThreadFiles
from sa_core.thread_resources import ThreadResources

if TYPE_CHECKING:
    from sa_core.engine.flowtypes import ExecutionView
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.model.usage import ThreadUsage
    from sa_core.registry import PackScope
    from sa_core.store import ThreadRow


class ThreadState(ThreadFiles, ThreadResources, ThreadBranches):
    """A thread, as seen by code running on it: a facade over the kernel and a thread handle.

    Args:
        kernel: The engine's services (:mod:`sa_core.engine.kernel`).
        ref: The engine's half of the thread (:class:`~sa_core.engine.threads.ThreadRef`).
    """

    __slots__ = ("__weakref__", "_kernel", "_ref")

    def __init__(self, kernel: Kernel, ref: ThreadRef) -> None:
        self._kernel = kernel
        self._ref = ref
        ref.facade = weakref.ref(self)  # hooks and tools on this handle get this object

    def __repr__(self) -> str:
        return f"<ThreadState {self.thread_id} agent={self.agent_id!r}>"

    # -- identity ---------------------------------------------------------------------------

    @property
    def row(self) -> ThreadRow:
        """The thread's stored record (shared by every live handle of the thread)."""
        return self._ref.shared.row

    @property
    def thread_id(self) -> str:
        """The thread id."""
        return self._ref.thread_id

    @property
    def agent_id(self) -> str:
        """The name of the agent that owns the thread now (changes on handoff)."""
        return self.row.agent_id

    @property
    def package(self) -> str:
        """The package (pack name) of the owning agent."""
        return self.row.package

    @property
    def user_id(self) -> str | None:
        """The user the thread belongs to."""
        return self.row.user_id

    @property
    def parent_id(self) -> str | None:
        """The parent thread id, for subagent threads."""
        return self.row.parent_id

    @property
    def created_at(self) -> int:
        """Creation time, microseconds since the epoch."""
        return self.row.created_at

    @property
    def terminated(self) -> int | None:
        """Termination time in microseconds, or None while the thread is active."""
        return self.row.terminated

    @property
    def tags(self) -> list[str]:
        """The thread's tags (``name:<value>`` for named subagent instances)."""
        return list(self.row.tags)

    @property
    def children(self) -> list[SubagentRegistryEntry]:
        """The registry of subagent instances this thread spawned."""
        return list(self._ref.shared.children)

    @property
    def execution(self) -> ExecutionView | None:
        """The running flow (step counts, current side, stop()), or None outside a turn."""
        flow = self._ref.execution
        return None if flow is None else flow.view()

    @property
    def active_prompt(self) -> PromptDefinition | None:
        """The prompt in effect: the one the current step runs (its hooks, env and tools)."""
        return self._ref.prompt

    def tool_env(
        self, env: Mapping[str, str], options: Mapping[str, Any] = NO_TOOL_OPTIONS
    ) -> contextlib.AbstractContextManager[None]:
        """Within the block a prompt's tool config applies: ``env`` and ``tool_options``."""
        return tool_config(self._ref, env, options)

    @property
    def tool_options(self) -> Mapping[str, Any]:
        """While a tool runs: the ``options`` of the prompt's tools entry that offered it.

        A read-only mapping (``{"name": ..., "options": {...}}`` in the prompt's ``tools``),
        shared by every call of that entry, so leave nested values as they are; empty when the
        entry gives none, and outside a tool call.
        """
        return self._ref.tool_options

    @property
    def context(self) -> dict[str, Any]:
        """A scratch dict shared by the tools and hooks of one flow."""
        return self._ref.context

    @property
    def scope(self) -> PackScope:
        """The package scope definitions resolve in."""
        return self._kernel.scope_of(self._ref)

    @property
    def agent(self) -> AgentDefinition:
        """The owning agent's definition."""
        return self._kernel.agent_of(self._ref)

    def _check_active(self) -> None:
        if self.row.terminated is not None:
            raise ThreadTerminatedError(self.thread_id, self.row.terminated)

    async def refresh(self) -> ThreadState:
        """Reload the thread row and registry from the database."""
        shared = self._ref.shared
        row = await self._kernel.store.get_thread(self.thread_id)
        if row is not None:
            shared.row = row
        shared.children = await self._kernel.store.list_children(self.thread_id)
        return self

    # -- messages ---------------------------------------------------------------------------

    async def send_message(
        self,
        content: str,
        role: Literal["user", "assistant"] = "user",
        attachments: list[ToolAttachment | AttachmentRef | dict[str, Any]] | None = None,
        *,
        silent: bool = False,
        wait: bool = True,
        output_schema: ArgsSpec = None,
        model_settings: ModelSettings | Mapping[str, Any] | None = None,
        client_tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, str] | None = None,
    ) -> Message:
        """Store a message and run the thread until it settles.

        ``user``: side A acts next; ``assistant``: side B acts next. With ``wait=False`` the
        turn runs in the background (``runtime.wait_idle()`` waits for it).
        ``output_schema`` (a pydantic model class or a JSON Schema dict) makes this turn's
        answer structured output in that shape, replacing the prompt's own ``output_schema``
        for the turn; it is kept as JSON Schema in the message's ``metadata.output_schema``
        (see docs/structured-output.md). ``model_settings`` (``temperature``, ``max_tokens``,
        ... see :class:`~sa_core.spec.ModelSettings`) apply to the model calls of this turn
        only, over the prompt's and the model's own values; they are kept in the message's
        ``metadata.model_settings``.

        ``client_tools`` (``[{"name", "description", "parameters", "strict"}]``) are offered
        to the model for this turn beside the agent's own tools; a call of one is not run: the
        turn parks (status ``awaiting_client_tools``) until :meth:`submit_tool_results` brings
        its result (see docs/protocols.md, "Client tools"). ``tool_choice``: ``auto``
        (default), ``none`` (no client tool offered), ``required``, or ``{"name": tool}``;
        a forced choice applies to the turn's next model step.

        Raises:
            ValueError: ``output_schema`` is not a model class or a valid JSON Schema, or
                ``model_settings`` has unknown keys or values out of range (every problem
                named).
            ClientToolsError: the client tools or ``tool_choice`` cannot be offered (every
                problem listed: an agent with ``serving.client_tools=False``, a name of one of
                the agent's tools, a malformed tool).
            ClientToolResultsError: client tool calls of the thread await their results.

        Returns:
            The stored message.
        """
        self._check_active()
        await clienttools.refuse_while_awaited(self._kernel, self._ref)
        metadata: dict[str, Any] | None = None
        if output_schema is not None:
            from sa_core.spec.schemas import check_schema

            if not (is_model_class(output_schema) or isinstance(output_schema, dict)):
                raise ValueError("output_schema must be a pydantic model class or a JSON Schema")
            metadata = {"output_schema": json_schema_of(output_schema)}
            check_schema(metadata["output_schema"])
        if model_settings is not None and (settings := check_model_settings(model_settings)):
            metadata = {**(metadata or {}), "model_settings": settings}
        if client_tools is not None or tool_choice is not None:
            declared = await clienttools.check(self._kernel, self._ref, client_tools, tool_choice)
            if declared:
                metadata = {**(metadata or {}), **declared}
        if (carried := telemetry.carried_context(self.thread_id)) is not None:
            metadata = {**(metadata or {}), telemetry.TRACE_CONTEXT: carried}  # any worker's turn
        return await delivery.send(
            self._kernel,
            self._ref,
            content,
            role,
            attachments or [],
            silent,
            wait,
            metadata=metadata,
        )

    async def get_messages(
        self,
        limit: int = 100,
        offset: int = 0,
        order: Literal["asc", "desc"] = "asc",
        include_silent: bool = False,
        max_depth: int | None = 0,
        include_rewound: bool = False,
    ) -> MessagesResult:
        """A page of stored messages (top level by default).

        Messages carrying a ``subagent_id`` show that child's registry entry in their
        ``subagent_*`` fields (name, title, description, status, ...), as the registry is now.
        ``include_rewound``: also the messages rewinds took out of the history, each with its
        rewind's record in ``metadata.rewound`` (``id``, ``to``, ``at``).
        """
        page, total = await self._kernel.store.list_messages(
            self.thread_id,
            limit=limit,
            offset=offset,
            order=order,
            include_silent=include_silent,
            max_depth=max_depth,
            include_rewound=include_rewound,
        )
        if include_rewound:
            page = await rewinds.mark_rewound(self._kernel.store, self.thread_id, page)
        page = await messages.with_subagent_fields(self._kernel.store, self.thread_id, page)
        return MessagesResult(messages=page, total=total, has_more=offset + len(page) < total)

    async def get_message(self, message_id: str) -> Message | None:
        """One message by id (silent ones included), ``subagent_*`` fields projected."""
        message = await self._kernel.store.get_message(self.thread_id, message_id)
        if message is None:
            return None
        store = self._kernel.store
        return (await messages.with_subagent_fields(store, self.thread_id, [message]))[0]

    async def inject_message(self, message: InjectMessageInput | Mapping[str, Any]) -> Message:
        """Store a message without starting a turn.

        Inside a run it joins the live history (and the extra context of a flow whose prompt
        does not include the chat).
        """
        return await messages.inject(self._kernel, self._ref, message)

    async def queue_message(self, message: QueueMessageInput | Mapping[str, Any]) -> str:
        """Queue a message for the thread's next step; wakes an idle thread.

        Returns:
            The queue entry id.

        Raises:
            ThreadTerminatedError: the thread is terminated.
        """
        return await delivery.queue_message(self._kernel, self._ref, message)

    async def update_message(self, message_id: str, updates: Mapping[str, Any]) -> Message | None:
        """Update fields of a stored message (runs the update hooks).

        Raises:
            SharedHistoryError: A fork shares the message (with its source, or a fork of this
                thread has it).
        """
        message = await self._kernel.store.get_message(self.thread_id, message_id)
        if message is None:
            return None
        await forks.check_changeable(self._kernel.store, self.thread_id, message)
        return await messages.update_message(self._kernel, self._ref, message_id, dict(updates))

    async def delete_message(self, message_id: str) -> bool:
        """Delete a message (or a still-queued entry) and its attachment files.

        Raises:
            SharedHistoryError: A fork shares the message.
        """
        store = self._kernel.store
        if await store.delete_queue_entry(self.thread_id, message_id):
            return True
        message = await store.get_message(self.thread_id, message_id)
        if message is None:
            return False
        await forks.check_changeable(store, self.thread_id, message)
        for ref in message.attachments or []:
            await store.unlink_file(self.thread_id, ref.path)
        return await store.delete_message(self.thread_id, message_id)

    async def get_logs(
        self, limit: int = 100, offset: int = 0, order: Literal["asc", "desc"] = "desc"
    ) -> list[Log]:
        """Log rows of this thread (model calls with tokens, latency and errors)."""
        logs, _ = await self._kernel.store.list_logs(
            self.thread_id, limit=limit, offset=offset, order=order
        )
        return logs

    async def usage(self, include_descendants: bool = True) -> ThreadUsage:
        """Tokens, cost and model calls of this thread and (by default) its subagent tree.

        Returns:
            A :class:`~sa_core.engine.model.usage.ThreadUsage`: ``thread`` for this thread's own
            model calls, ``tree`` for it plus every descendant, each broken down by model.
        """
        return await usage.thread_usage(
            self._kernel.store, self.thread_id, include_descendants=include_descendants
        )

    async def pending_approvals(self) -> list[dict[str, Any]]:
        """Tool calls of this thread awaiting human approval, in the order the model made them.

        Each is a dict with ``tool_call_id``, ``name``, ``arguments``, ``requested_at`` and
        ``status`` (``pending``, or ``approved`` / ``denied`` until the runner acts on it).
        """
        return await approvals.list_pending(self._kernel, self.thread_id)

    async def approve(self, tool_call_id: str, arguments: dict[str, Any] | None = None) -> None:
        """Approve a pending tool call; it runs (with ``arguments`` if given) and the flow goes on.

        Raises:
            ApprovalNotFoundError: no such pending call. ApprovalConflictError: already decided.
            ApprovalArgumentsError: ``arguments`` do not match the tool's args.
        """
        await approvals.decide(
            self._kernel, self._ref, tool_call_id, approve=True, arguments=arguments
        )

    async def deny(self, tool_call_id: str, reason: str) -> None:
        """Deny a pending tool call: the model sees a failed tool result with ``reason``."""
        await approvals.decide(self._kernel, self._ref, tool_call_id, approve=False, reason=reason)

    async def pending_client_calls(self) -> list[dict[str, Any]]:
        """Client tool calls of this thread awaiting their result, in the order they were made.

        Each is a dict with ``tool_call_id``, ``name``, ``arguments`` (a dict) and
        ``requested_at``.
        """
        return await clienttools.pending_calls(self._kernel, self.thread_id)

    async def submit_tool_results(
        self,
        results: Mapping[str, Any],
        *,
        client_tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, str] | None = None,
        resume: bool = True,
        wait: bool = True,
    ) -> None:
        """Deliver results of pending client tool calls; the parked turn goes on with them.

        ``results``: ``{tool_call_id: output}`` (a string; anything else is sent as JSON).
        Each is stored as its call's tool result; once every pending call has its result, the
        turn continues (on whichever worker holds the thread) and the model sees them. The
        results are queued durably before this returns: a restart keeps them.
        ``client_tools`` replace the turn's client tools from here on (``None`` keeps them);
        ``tool_choice`` applies to the next model step (``None``: ``auto``). With
        ``wait=False`` the turn goes on in the background. With ``resume=False`` the results
        are stored and the turn ends there, with no model step (the caller took the calls as
        the answer and goes on with a new message).

        Raises:
            ClientToolResultsError: an id that is not a client call awaiting a result.
            ClientToolsError: ``client_tools`` or ``tool_choice`` cannot be offered.
        """
        self._check_active()
        if not resume:
            await clienttools.close(self._kernel, self._ref, results)
            return
        options = None
        if client_tools is not None or tool_choice is not None:
            options = await clienttools.check(self._kernel, self._ref, client_tools, tool_choice)
        await clienttools.submit(self._kernel, self._ref, results, options)
        if wait:
            await self._kernel.scheduler.wait(self.thread_id)

    async def variables_request(self, request_id: str) -> dict[str, Any] | None:
        """A pending scoped-variables request of this thread (names only), else None."""
        return await subagent_vars.variables_request(self._kernel.store, self.thread_id, request_id)

    # -- env --------------------------------------------------------------------------------

    def env(self, name: str) -> str:
        """Resolve a variable.

        Order, first hit wins: thread, user account, instance (runtime), agent, tool config
        (the running tool's ``PromptToolConfig.env``), prompt.

        Raises:
            VariableNotFoundError: no source has it.
        """
        value = self.env_or_none(name)
        if value is None:
            raise VariableNotFoundError(name)
        return value

    def env_or_none(self, name: str) -> str | None:
        """Like :meth:`env`, but None when unset."""
        return self._kernel.env_of(self._ref, name)

    def secret_names(self) -> frozenset[str]:
        """Names of the variables whose values are secret on this thread.

        Declared ``secret`` anywhere in the thread's package or by a plugin tool, or typed secret
        on the thread.
        """
        return self._kernel.secrets.secret_names(self.scope, self.row)

    async def set_env(
        self, name: str, value: str, *, type: Literal["text", "secret"] | None = None
    ) -> None:
        """Set a thread variable; active descendants receive it too."""
        await variables.set_env(self._kernel, self._ref, name, value, type)

    # -- tools ------------------------------------------------------------------------------

    def queue_tool(self, name: str, args: Mapping[str, Any] | None = None) -> None:
        """Run a tool after the current step's tool calls (outside a run: in the background)."""
        flow = self._ref.execution
        if flow is not None:
            flow.queue_tool(name, dict(args or {}))
            return
        self._kernel.scheduler.spawn(self.invoke_tool(name, args), f"queue_tool:{name}")

    async def invoke_tool(self, name: str, args: Mapping[str, Any] | None = None) -> ToolResult:
        """Run a tool now and return its result; no tool message is stored."""
        return await dispatch.invoke_tool(self._kernel, self._ref, name, dict(args or {}))

    # -- events -----------------------------------------------------------------------------

    def emit(self, event: str, data: Any = None) -> None:
        """Send a custom event to the thread's live subscribers (secret values redacted)."""
        emit(self._kernel, self._ref, event, data)

    # -- files (the rest: sa_core.thread_files) ------------------------------

    async def get_file_thumbnail(self, path: str) -> bytes | None:
        """A PNG thumbnail (at most 256 px) of an image file; None for anything else.

        Needs Pillow (``pip install 'standard-agents[images]'``); cached per file version.
        """
        from sa_core.thumbnails import file_thumbnail

        return await file_thumbnail(self, path)

    async def save_attachment(
        self, attachment: ToolAttachment | Mapping[str, Any]
    ) -> AttachmentRef:
        """Write a new base64 attachment under ``/attachments/`` and return its reference."""
        return await files.save_attachment(self._kernel.store, self.thread_id, attachment)

    # -- hierarchy and lifecycle ------------------------------------------------------------

    async def get_child_thread(self, reference: str) -> ThreadState | None:
        """A child thread by its subagent reference (None unless it is this thread's child)."""
        child = await self._kernel.threads.child(self._ref, reference)
        return None if child is None else ThreadState(self._kernel, child)

    async def get_parent_thread(self) -> ThreadState | None:
        """The parent thread, or None for top-level threads."""
        parent = await self._kernel.threads.parent(self._ref)
        return None if parent is None else ThreadState(self._kernel, parent)

    async def notify_parent(self, content: str) -> None:
        """Queue a silent message on the parent, tagged with this thread's subagent id.

        Raises:
            NoParentThreadError: this thread has no parent (it is not a subagent).
        """
        await subagent_report.notify_parent(self._kernel, self._ref, content)

    async def set_status(self, status: str) -> None:
        """Set this thread's status in its parent's registry.

        Raises:
            NoParentThreadError: this thread has no parent (it is not a subagent).
        """
        await subagent_report.set_status(self._kernel, self._ref, status)

    async def run_agent(self, agent_name: str) -> None:
        """Enqueue a flow of agent ``agent_name`` on this thread (seed 004 ``runAgent``).

        The agent becomes the thread's owner and its side A acts, once the thread takes in
        its queue: at once on an idle thread, before the next step of a running one (like a
        queued message; durable across restarts). ``agent_name`` is an agent of the thread's
        package, or ``package/agent`` for another package's entry agent.

        Raises:
            ThreadTerminatedError: the thread is terminated.
            DefinitionNotFoundError: no such agent; the message lists the agents it can run.
        """
        self._check_active()
        await runagent.run_agent(self._kernel, self._ref, agent_name)

    async def stop(self) -> None:
        """Abort the in-flight turn; the next message continues the thread."""
        await delivery.stop(self._kernel, self.thread_id)
        await approvals.cancel_pending(
            self._kernel, self._ref, "stopped"
        )  # no orphan approval keeps later turns parked

    async def terminate(self) -> None:
        """Soft-terminate: abort in-flight work and reject new messages and queue entries."""
        await delivery.terminate(self._kernel, self._ref)
        await approvals.cancel_pending(self._kernel, self._ref, "terminated")


def thread_of(state: ThreadState) -> ThreadRef:
    """The engine's handle under a ThreadState (for the composition root and tests)."""
    return state._ref
