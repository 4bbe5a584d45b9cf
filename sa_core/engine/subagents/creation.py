"""Creating a thread: its row, its live handle, and the variables it must have.

``runtime.create_thread`` and a subagent call (:mod:`sa_core.engine.subagents.subagent_spawn`) both
create threads here; each then boots the immediate subagents of the new thread's prompts
(:func:`sa_core.engine.subagents.subagent_spawn.boot_immediate`), which may create threads in turn.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from sa_core.engine.messages import new_id
from sa_core.engine.threads import ThreadRef
from sa_core.engine.tools.approvals import mark_no_pending
from sa_core.engine.variables import missing_variables, resolve_agent
from sa_core.errors import MissingVariablesError
from sa_core.store.clock import now_us
from sa_core.store.rows import ThreadRow

if TYPE_CHECKING:
    from sa_core.engine.kernel import Kernel
    from sa_core.registry import PackScope
    from sa_core.spec import AgentDefinition


def unset_variables(
    kernel: Kernel,
    scope: PackScope,
    agent: AgentDefinition,
    thread_env: Mapping[str, str],
    user_id: str | None,
    *,
    include_scoped: bool = False,
) -> list[tuple[str, str]]:
    """``(variable, declared_by)`` pairs of required variables that resolve nowhere.

    A variable resolves in the thread's env, the user account's (``user_id``) or the
    instance's (see :meth:`sa_core.engine.kernel.Kernel.env_of` for the whole order).
    """
    return missing_variables(
        scope,
        agent,
        [thread_env, kernel.user_env.get(user_id or "", {}), kernel.env],
        include_scoped=include_scoped,
    )


def thread_row(
    kernel: Kernel,
    agent_name: str,
    env: Mapping[str, str] | None = None,
    user_id: str | None = None,
    *,
    tags: Iterable[str] = (),
    package: str | None = None,
    env_types: Mapping[str, str] | None = None,
    parent_id: str | None = None,
    properties: Mapping[str, Any] | None = None,
) -> ThreadRow:
    """The row of a new thread owned by ``agent_name`` (``package/agent`` to pick a package).

    Nothing is stored: :func:`new_thread` stores it, a schedule's run stores it with its first
    message (:mod:`sa_core.engine.workers.schedules`).

    Raises:
        MissingVariablesError: required variables of the agent's graph have no value.
    """
    agent, scope = resolve_agent(kernel.registry, agent_name, package)
    thread_env = dict(env or {})
    missing = unset_variables(kernel, scope, agent, thread_env, user_id)
    if missing:
        raise MissingVariablesError(agent.name, missing)
    return ThreadRow(
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


async def new_thread(
    kernel: Kernel,
    agent_name: str,
    env: Mapping[str, str] | None = None,
    user_id: str | None = None,
    *,
    tags: Iterable[str] = (),
    package: str | None = None,
    env_types: Mapping[str, str] | None = None,
    parent_id: str | None = None,
    properties: Mapping[str, Any] | None = None,
) -> ThreadRef:
    """Store a new thread owned by ``agent_name`` (``package/agent`` to pick a package).

    Immediate subagents are not booted here (see the module docstring).

    Raises:
        MissingVariablesError: required variables of the agent's graph have no value.
    """
    row = thread_row(
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
    store = kernel.store
    version = store.external_version()
    await store.create_thread(row)
    # a new thread has no children yet: nothing to read
    shared = kernel.threads.add(row, version)
    if kernel.placement.alone:  # nor approval requests (only this process writes them)
        mark_no_pending(kernel, row.id)  # so its first step reads none
    return ThreadRef(shared)


__all__ = ["new_thread", "thread_row", "unset_variables"]
