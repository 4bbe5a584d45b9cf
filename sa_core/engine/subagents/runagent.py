"""``state.run_agent``: enqueue a flow of a named agent on the thread (seed 004 ``runAgent``).

A flow on a thread is a flow of the agent that owns it, so running another agent makes that
agent the owner, as a handoff does, and lets its side A act. The request travels through the
thread's durable queue, as a queue entry that is not a message: it wakes an idle thread,
waits behind a running step like any queued message, survives a restart, and is taken in
exactly once, by the drain that makes the agent the owner (one transaction).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sa_core.engine.delivery import delivery
from sa_core.engine.subagents.subagent_spawn import reset_immediate
from sa_core.errors import DefinitionNotFoundError
from sa_core.spec import AgentDefinition, QueueMessageInput

if TYPE_CHECKING:
    from sa_core.engine.flowview import FlowScratch
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.threads import ThreadRef
    from sa_core.registry import PackScope
    from sa_core.store import Transaction

RUN_AGENT = "sa:run_agent"
"""Metadata key of a queue entry that runs an agent: ``{"agent": name, "package": package}``."""


def resolve_agent(
    kernel: Kernel, thread: ThreadRef, name: str
) -> tuple[AgentDefinition, PackScope]:
    """The agent ``name`` names for this thread, and the package scope it lives in.

    ``name`` is an agent of the thread's package, or ``package/agent`` for another package's
    entry agent (as for handoffs and subagents).

    Raises:
        DefinitionNotFoundError: no such agent; the message names it, the thread's package
            and the agents the thread can run.
    """
    scope = kernel.scope_of(thread)
    try:
        return scope.agent(name)
    except DefinitionNotFoundError as exc:
        if "/" in name or exc.kind != "agent" or exc.package is not None or exc.hint:
            raise  # about another package (its agents, an entry agent, an ambiguous name)
        registry = kernel.registry
        others = [
            f"{package}/{agent}"
            for package, other in registry.scopes.items()
            if package != scope.package
            for agent in other.pack.entry_agent_names()
        ]
        raise DefinitionNotFoundError(
            "agent",
            name,
            [*scope.agents, *others],
            package=scope.package,
            hint="run_agent takes an agent of the thread's package, or 'package/agent' for "
            "another package's entry agent.",
        ) from None


async def run_agent(kernel: Kernel, thread: ThreadRef, name: str) -> None:
    """Queue a flow of agent ``name`` on the thread (see the module docstring).

    Raises:
        DefinitionNotFoundError: ``name`` is not an agent the thread can run.
    """
    agent, scope = resolve_agent(kernel, thread, name)
    entry = QueueMessageInput(
        role="user",  # side A acts next
        content="",
        silent=True,
        metadata={RUN_AGENT: {"agent": agent.name, "package": scope.package}},
    )
    await delivery.enqueue(kernel, thread, entry)


def run_agent_request(metadata: dict[str, Any] | None) -> dict[str, Any] | None:
    """The agent a queue entry asks to run (its ``RUN_AGENT`` metadata), or None."""
    if not metadata:
        return None
    request = metadata.get(RUN_AGENT)
    return request if isinstance(request, dict) else None


async def take_run_agent(flow: FlowScratch, request: dict[str, Any], tx: Transaction) -> None:
    """Make the requested agent the thread's owner, in the drain's transaction ``tx``.

    An agent that no longer resolves (its pack changed since the request) is logged as
    ``run_agent_failed`` and the entry dropped; the thread keeps its owner.
    """
    thread = flow.thread
    agent_name, package = str(request.get("agent", "")), str(request.get("package", ""))
    registry = flow.kernel.registry
    if package not in registry.scopes or agent_name not in registry.scope(package).agents:
        data = {"agent": agent_name, "package": package, "error": "Unknown agent"}
        await flow.kernel.log(thread.thread_id, "run_agent_failed", data)
        return
    row = thread.row
    if (row.agent_id, row.package) != (agent_name, package):
        await flow.kernel.store.update_thread(
            thread.thread_id, agent_id=agent_name, package=package, tx=tx
        )
        row.agent_id, row.package = agent_name, package
        reset_immediate(flow)
