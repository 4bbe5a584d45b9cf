"""Variables declared across an agent's graph: the required-variable check and scoping.

A variable declared ``scoped`` in an agent's graph is not inherited from the parent
(:func:`scoped_names`), neither when a child is created nor when a parent sets a variable
(:func:`set_env`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sa_core.errors import DefinitionNotFoundError
from sa_core.spec import (
    AgentDefinition,
    PromptDefinition,
    PromptToolConfig,
    VariableDefinition,
    tool_entry_name,
)

if TYPE_CHECKING:
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.threads import ThreadRef
    from sa_core.registry import PackScope, Registry


@dataclass(frozen=True, slots=True)
class DeclaredVariable:
    """A variable and who declares it."""

    variable: VariableDefinition
    declared_by: str
    inherited: bool  # reached through a subagent boundary (scoped ones do not inherit)
    tool_env: Mapping[str, str] = field(default_factory=dict)  # the listing's PromptToolConfig.env


_CACHE_LIMIT = 1024
_walked: dict[tuple[int, int], tuple[PackScope, AgentDefinition, tuple[DeclaredVariable, ...]]] = {}


def graph_variables(scope: PackScope, agent: AgentDefinition) -> tuple[DeclaredVariable, ...]:
    """Every variable declared in an agent's graph.

    The graph is the agent, its prompts (and their includes), tools, handoff targets and
    subagents. Definitions do not change once a runtime has loaded its packs, so each
    (scope, agent) pair is walked once: thread creation and every subagent call ask again.
    The cache holds the scope and agent it was computed for, so an id is never reused while
    its entry lives, and it is emptied past ``_CACHE_LIMIT`` pairs.
    """
    key = (id(scope), id(agent))
    cached = _walked.get(key)
    if cached is not None and cached[0] is scope and cached[1] is agent:
        return cached[2]
    found = tuple(_walk(scope, agent))
    if len(_walked) >= _CACHE_LIMIT:
        _walked.clear()
    _walked[key] = (scope, agent, found)
    return found


def _walk(scope: PackScope, agent: AgentDefinition) -> list[DeclaredVariable]:
    found: list[DeclaredVariable] = []
    seen_prompts: set[tuple[str, str]] = set()
    seen_agents: set[tuple[str, str]] = set()

    def visit_agent(agent: AgentDefinition, scope: PackScope, crossed: bool) -> None:
        key = (scope.package, agent.name)
        if key in seen_agents:
            return
        seen_agents.add(key)
        for variable in agent.variables:
            found.append(DeclaredVariable(variable, f"agent '{agent.name}'", crossed))
        for _, side in agent.sides():
            prompt = scope.prompts.get(side.prompt)
            if prompt is not None:
                visit_prompt(prompt, scope, crossed)

    def visit_prompt(prompt: PromptDefinition, scope: PackScope, crossed: bool) -> None:
        key = (scope.package, prompt.name)
        if key in seen_prompts:
            return
        seen_prompts.add(key)
        for variable in prompt.variables:
            found.append(DeclaredVariable(variable, f"prompt '{prompt.name}'", crossed))
        for part in prompt.parts:
            target = getattr(part, "prompt", None)
            if isinstance(target, str) and target in scope.prompts:
                visit_prompt(scope.prompts[target], scope, crossed)
        for entry in prompt.tools:
            name = tool_entry_name(entry)
            tool = scope.tool(name)
            if tool is not None:
                env = entry.env if isinstance(entry, PromptToolConfig) else {}
                for variable in tool.variables:
                    found.append(DeclaredVariable(variable, f"tool '{name}'", crossed, env))
                continue
            if name in scope.prompts:
                visit_prompt(scope.prompts[name], scope, crossed)
                continue
            target = scope.find_agent(name)
            if target is not None:
                target_agent, target_scope = target
                visit_agent(target_agent, target_scope, crossed or target_agent.type == "dual_ai")

    visit_agent(agent, scope, False)
    return found


def missing_variables(
    scope: PackScope,
    agent: AgentDefinition,
    sources: Sequence[Mapping[str, str]],
    *,
    include_scoped: bool = False,
) -> list[tuple[str, str]]:
    """``(variable, declared_by)`` pairs of required variables that resolve nowhere.

    Args:
        scope: The agent's package scope.
        agent: The agent whose graph declares the variables.
        sources: The values given (thread, user account, instance); the agent's and its
            prompts' defaults and a prompt's tool config count too.
        include_scoped: Check scoped variables inherited from subagents as well.
    """
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
        if name in defaults or any(name in source for source in sources):
            continue
        if name in declared.tool_env:  # the prompt's tool config gives the tool its value
            continue
        missing.append((name, declared.declared_by))
    return missing


def resolve_agent(
    registry: Registry, agent_name: str, package: str | None
) -> tuple[AgentDefinition, PackScope]:
    """Resolve the agent a new thread belongs to.

    An explicit ``package`` reaches any of its agents; otherwise only entry agents are
    reachable (``package/agent``, or a bare name that one package exports).
    """
    if package is not None:
        scope = registry.scope(package)
        found = scope.agents.get(agent_name)
        if found is not None:
            return found, scope
        remote = scope.remote_agent(agent_name)
        if remote is not None:  # a remote subagent's child
            return remote.as_agent(), scope
        raise DefinitionNotFoundError("agent", agent_name, scope.agents, package=package)
    return registry.entry_agent(agent_name)


def scoped_names(scope: PackScope, agent: AgentDefinition) -> set[str]:
    """Variables declared ``scoped`` anywhere in a child agent's graph."""
    return {d.variable.name for d in graph_variables(scope, agent) if d.variable.scoped}


async def set_env(
    kernel: Kernel, thread: ThreadRef, name: str, value: str, type_: str | None
) -> None:
    """Set a variable on a thread and the descendants that inherit it.

    A descendant whose agent graph declares ``name`` scoped does not inherit it (nor do its
    own descendants, which inherit from it). Live handles see the new value at once.
    """
    rows = [thread.row]
    for thread_id in await kernel.store.descendant_ids(thread.thread_id):
        row = kernel.threads.live_row(thread_id) or await kernel.store.get_thread(thread_id)
        if row is not None:
            rows.append(row)
    cut: set[str] = set()
    for row in rows:
        if row is not thread.row:
            scope = kernel.registry.scopes.get(row.package)
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
        await kernel.store.update_thread(row.id, env=env, env_types=env_types)
