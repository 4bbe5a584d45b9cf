"""The registry: every loaded definition, resolved per package.

Each pack is a namespace. Inside a pack, names resolve to the pack's own definitions first, then
to globally registered plugin tools and effects. From outside, only a pack's entry agents are
reachable, addressed ``package/agent``. Tool names shown to a model stay unqualified, so two packs
may define tools of the same name without conflict.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sa_core.errors import DefinitionNotFoundError, DuplicateNameError

if TYPE_CHECKING:
    from sa_core.spec import (
        AgentDefinition,
        EffectDefinition,
        HookDefinition,
        MCPServerDefinition,
        ModelDefinition,
        Pack,
        PromptDefinition,
        RemoteAgentDefinition,
        ThreadEndpointDefinition,
        ToolDefinition,
    )


@dataclass
class PackScope:
    """The definitions visible from inside one package."""

    package: str
    pack: Pack
    registry: Registry
    agents: dict[str, AgentDefinition] = field(default_factory=dict)
    prompts: dict[str, PromptDefinition] = field(default_factory=dict)
    models: dict[str, ModelDefinition] = field(default_factory=dict)
    tools: dict[str, ToolDefinition] = field(default_factory=dict)
    hooks: dict[str, HookDefinition] = field(default_factory=dict)
    effects: dict[str, EffectDefinition] = field(default_factory=dict)
    endpoints: list[ThreadEndpointDefinition] = field(default_factory=list)
    mcp_servers: dict[str, MCPServerDefinition] = field(default_factory=dict)
    remote_agents: dict[str, RemoteAgentDefinition] = field(default_factory=dict)
    """A2A agents on other servers, used as subagents (never entry agents, not in ``agents``)."""

    def agent(self, name: str) -> tuple[AgentDefinition, PackScope]:
        """Resolve an agent name (``name`` or ``package/name``) and the scope it lives in.

        A remote agent of this package resolves to its stand-in definition
        (:meth:`~sa_core.spec.RemoteAgentDefinition.as_agent`).
        """
        if name in self.agents:
            return self.agents[name], self
        remote = self.remote_agents.get(name)
        if remote is not None:
            return remote.as_agent(), self
        return self.registry.entry_agent(name, self.agents)

    def remote_agent(self, name: str) -> RemoteAgentDefinition | None:
        """The remote agent of this package named ``name``, if it is one."""
        return self.remote_agents.get(name) if self.remote_agents else None

    def find_agent(self, name: str) -> tuple[AgentDefinition, PackScope] | None:
        """Like :meth:`agent`, but ``None`` when the name is not an agent."""
        try:
            return self.agent(name)
        except DefinitionNotFoundError:
            return None

    def prompt(self, name: str) -> PromptDefinition:
        """Resolve a prompt of this package."""
        try:
            return self.prompts[name]
        except KeyError:
            raise DefinitionNotFoundError(
                "prompt", name, self.prompts, package=self.package
            ) from None

    def model(self, name: str) -> ModelDefinition:
        """Resolve a model of this package, falling back to models of other packs."""
        found = self.models.get(name) or self.registry.any_model(name)
        if found is None:
            raise DefinitionNotFoundError("model", name, self.models, package=self.package)
        return found

    def tool(self, name: str) -> ToolDefinition | None:
        """A native tool of this package, else a plugin tool, else ``None``."""
        return self.tools.get(name) or self.registry.global_tools.get(name)

    def effect(self, name: str) -> EffectDefinition:
        """Resolve an effect of this package or a plugin's."""
        found = self.effects.get(name) or self.registry.global_effects.get(name)
        if found is None:
            known = [*self.effects, *self.registry.global_effects]
            raise DefinitionNotFoundError("effect", name, known, package=self.package)
        return found


class Registry:
    """All packs, indexed per package, plus plugin-registered tools and effects."""

    def __init__(
        self,
        packs: Iterable[Pack],
        *,
        global_tools: Mapping[str, ToolDefinition] | None = None,
        global_effects: Mapping[str, EffectDefinition] | None = None,
    ) -> None:
        self.global_tools: dict[str, ToolDefinition] = dict(global_tools or {})
        self.global_effects: dict[str, EffectDefinition] = dict(global_effects or {})
        self.scopes: dict[str, PackScope] = {}
        self._agent_homes: dict[str, list[str]] = {}
        for pack in packs:
            self.add(pack)

    def add(self, pack: Pack) -> PackScope:
        """Index a pack; its name must be unique."""
        if pack.name in self.scopes:
            raise DuplicateNameError(
                f"Two packs are named '{pack.name}'; pack names are package ids and must be unique."
            )
        scope = PackScope(
            package=pack.name,
            pack=pack,
            registry=self,
            agents={a.name: a for a in pack.agents},
            prompts={p.name: p for p in pack.prompts},
            models={m.name: m for m in pack.models},
            tools={t.name: t for t in pack.tools},
            hooks={h.id: h for h in pack.hooks},
            effects={e.name: e for e in pack.effects},
            endpoints=list(pack.endpoints),
            mcp_servers={s.name: s for s in pack.mcp_servers},
            remote_agents={r.name: r for r in pack.remote_agents},
        )
        self.scopes[pack.name] = scope
        for agent_name in pack.entry_agent_names():
            self._agent_homes.setdefault(agent_name, []).append(pack.name)
        return scope

    @property
    def packs(self) -> list[Pack]:
        """Every pack, in load order."""
        return [s.pack for s in self.scopes.values()]

    def scope(self, package: str) -> PackScope:
        """The scope of a package."""
        try:
            return self.scopes[package]
        except KeyError:
            raise DefinitionNotFoundError("package", package, self.scopes) from None

    def entry_agent(
        self, name: str, local: Mapping[str, AgentDefinition] | None = None
    ) -> tuple[AgentDefinition, PackScope]:
        """Resolve ``package/agent``, or a bare entry-agent name that only one pack defines."""
        if "/" in name:
            package, _, agent_name = name.rpartition("/")
            scope = self.scope(package)
            if agent_name not in scope.agents:
                raise DefinitionNotFoundError("agent", agent_name, scope.agents, package=package)
            if agent_name not in scope.pack.entry_agent_names():
                raise DefinitionNotFoundError(
                    "entry agent",
                    agent_name,
                    scope.pack.entry_agent_names(),
                    package=package,
                    hint="Only a package's entry agents are reachable from outside it.",
                )
            return scope.agents[agent_name], scope
        homes = self._agent_homes.get(name, [])
        if len(homes) == 1:
            scope = self.scopes[homes[0]]
            return scope.agents[name], scope
        if len(homes) > 1:
            raise DefinitionNotFoundError(
                "agent",
                name,
                hint=f"Several packages define it ({', '.join(homes)}); write 'package/{name}'.",
            )
        known = [f"{p}/{a}" for a, ps in self._agent_homes.items() for p in ps]
        raise DefinitionNotFoundError("agent", name, [*(local or {}), *known])

    def any_model(self, name: str) -> ModelDefinition | None:
        """A model of any pack with this name (models may be shared)."""
        for scope in self.scopes.values():
            if name in scope.models:
                return scope.models[name]
        return None
