"""The catalog: packages, and per package its entry agents, prompts, models and tools."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, get
from litestar.params import FromPath

from sa_core.registry import PackScope
from sa_core.runtime import Runtime
from sa_core.server.auth import connection_key
from sa_core.server.context import PackDep, RuntimeDep
from sa_core.server.errors import ApiError, errors
from sa_core.server.schemas import (
    AgentDetailOut,
    AgentOut,
    AgentsOut,
    ModelOut,
    ModelsOut,
    PackageOut,
    PackagesOut,
    PromptOut,
    PromptsOut,
    SideOut,
    ToolOut,
    ToolsOut,
    VariableOut,
)
from sa_core.spec import AgentDefinition, VariableDefinition


def package_info(runtime: Runtime, scope: PackScope) -> PackageOut:
    """Describe a package; missing fields come from its first entry agent."""
    pack = scope.pack
    entry = pack.entry_agent_names()
    first = scope.agents.get(entry[0]) if entry else None
    source = runtime.pack_sources.get(scope.package)

    def pick(field: str) -> str | None:
        value = getattr(pack, field, None) or (getattr(first, field, None) if first else None)
        return str(value) if value else None

    return PackageOut(
        name=scope.package,
        version=pick("version") or (getattr(source, "version", None) if source else None),
        author=pick("author"),
        license=pick("license"),
        description=pack.description or (first.description if first else None),
        entry_agents=entry,
        distribution=getattr(source, "distribution", None) if source else None,
        source="entry_point" if source is not None else "local",
    )


def variable_out(
    variable: VariableDefinition, declared_by: str | None = None, needs_value: bool = False
) -> VariableOut:
    """Describe a variable (never its value)."""
    return VariableOut(
        name=variable.name,
        type=variable.type,
        required=variable.required,
        scoped=variable.scoped,
        description=variable.description,
        declared_by=declared_by,
        needs_value=needs_value,
    )


def entry_agent(scope: PackScope, name: str) -> AgentDefinition:
    """Return an entry agent of the package, else answer 404."""
    if name not in scope.agents or name not in scope.pack.entry_agent_names():
        raise ApiError(404, "agent_not_found", f"Package '{scope.package}' has no agent {name!r}.")
    return scope.agents[name]


def _agent_out(agent: AgentDefinition) -> AgentOut:
    return AgentOut(
        name=agent.name,
        type=agent.type,
        title=agent.title,
        description=agent.description,
        icon=agent.icon,
    )


def _sides(scope: PackScope, agent: AgentDefinition) -> list[SideOut]:
    sides = []
    for key, side in agent.sides():
        prompt = scope.prompts.get(side.prompt)
        sides.append(
            SideOut(
                side=key,
                prompt=side.prompt,
                label=side.label,
                model=prompt.model if prompt else None,
                tools=prompt.tool_names() if prompt else [],
                stop_on_response=side.stop_on_response,
                stop_tool=side.stop_tool,
                max_steps=side.max_steps,
                session_stop=side.session_stop.name if side.session_stop else None,
                session_fail=side.session_fail.name if side.session_fail else None,
                session_status=side.session_status.name if side.session_status else None,
            )
        )
    return sides


def _agent_variables(
    runtime: Runtime, scope: PackScope, agent: AgentDefinition
) -> list[VariableOut]:
    from sa_core.engine.variables import graph_variables

    missing = {name for name, _ in runtime.missing_variables(scope, agent, {}, None)}
    seen: dict[str, VariableOut] = {}
    for declared in graph_variables(scope, agent):
        name = declared.variable.name
        if name not in seen:
            seen[name] = variable_out(declared.variable, declared.declared_by, name in missing)
    return list(seen.values())


@get("/api/packages", responses=errors(), tags=["packages"], summary="List packages")
async def list_packages(request: Request[Any, Any, Any], runtime: RuntimeDep) -> PackagesOut:
    """Every hosted package the key opens, with version, author, license and entry agents."""
    key = connection_key(request.scope)
    scopes = [s for s in runtime.registry.scopes.values() if key is None or key.allows(s.package)]
    return PackagesOut(packages=[package_info(runtime, scope) for scope in scopes])


class CatalogController(Controller):
    """Definitions of one package."""

    @get("/agents", responses=errors(), summary="List entry agents")
    async def list_agents(self, pack: PackDep) -> AgentsOut:
        """List the package's entry agents (the agents threads can be created for)."""
        names = pack.pack.entry_agent_names()
        return AgentsOut(agents=[_agent_out(pack.agents[n]) for n in names if n in pack.agents])

    @get("/agents/{name:str}", responses=errors(404), summary="Describe an agent")
    async def get_agent(
        self, pack: PackDep, runtime: RuntimeDep, name: FromPath[str]
    ) -> AgentDetailOut:
        """Describe an entry agent: its sides, their tools and the variables threads need.

        ``needs_value`` marks required variables with no default: pass them in ``env`` when
        creating a thread.
        """
        agent = entry_agent(pack, name)
        sides = _sides(pack, agent)
        tools = list(dict.fromkeys(t for side in sides for t in side.tools))
        return AgentDetailOut(
            name=agent.name,
            type=agent.type,
            title=agent.title,
            description=agent.description,
            icon=agent.icon,
            max_session_turns=agent.max_session_turns,
            sides=sides,
            tools=tools,
            variables=_agent_variables(runtime, pack, agent),
        )

    @get("/prompts", responses=errors(), summary="List prompts")
    async def list_prompts(self, pack: PackDep) -> PromptsOut:
        """List the package's prompts: model, tools and declared variables."""
        return PromptsOut(
            prompts=[
                PromptOut(
                    name=p.name,
                    model=p.model,
                    tool_description=p.tool_description,
                    include_chat=p.include_chat,
                    include_past_tools=p.include_past_tools,
                    tool_choice=p.tool_choice,
                    tools=p.tool_names(),
                    variables=[variable_out(v) for v in p.variables],
                )
                for p in pack.prompts.values()
            ]
        )

    @get("/models", responses=errors(), summary="List models")
    async def list_models(self, pack: PackDep) -> ModelsOut:
        """List the package's model definitions (provider options are never shown)."""
        return ModelsOut(
            models=[
                ModelOut(
                    name=m.name,
                    provider=m.provider,
                    model=m.model,
                    fallbacks=list(m.fallbacks),
                    max_tokens=m.max_tokens,
                    input_price=m.input_price,
                    output_price=m.output_price,
                    cached_price=m.cached_price,
                )
                for m in pack.models.values()
            ]
        )

    @get("/tools", responses=errors(), summary="List tools")
    async def list_tools(self, pack: PackDep) -> ToolsOut:
        """List the package's tools, then the plugin tools every package can use.

        Names, descriptions and declared variables; never values.
        """
        tools = [
            ToolOut(
                name=t.name,
                description=t.description,
                source="package",
                variables=[variable_out(v) for v in t.variables],
            )
            for t in pack.tools.values()
        ]
        tools += [
            ToolOut(
                name=t.name,
                description=t.description,
                source="plugin",
                variables=[variable_out(v) for v in t.variables],
            )
            for name, t in pack.registry.global_tools.items()
            if name not in pack.tools
        ]
        return ToolsOut(tools=tools)
