"""The closure of an agent: every definition it needs, found by walking its definition graph.

Starting at the agent, the walk follows: the sides' prompts; each prompt's model (and the
model's fallbacks), includes, hooks and ``tools`` entries (native tools and their ``uses``,
subprompts, subagent and handoff targets, whose own graphs are walked in turn); the agent's
hooks. Effects are code-level references (``state.schedule_effect("notify", ...)``), so an
effect joins when its name appears as a string literal in the source of a tool, hook, effect or
endpoint already in the closure; so does an agent that code runs with
``state.run_agent("reviewer")`` (the literal right after ``run_agent(``). Thread endpoints
belong to the package rather than to an agent, so every endpoint of the pack joins.

Names that are not the pack's own (plugin tools, ``package/agent`` targets in other packs,
models shared from other packs, provider tools) are *external*: the packed distribution refers
to them and the installing environment must provide them.

Example::

    closure = compute_closure(pack, "forecaster")
    closure.names()       # {"agents": ["forecaster", ...], "prompts": [...], ...}
    closure.external      # ["tool 'search' (a plugin tool, or another pack's entry agent)"]
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sa_core.errors import DefinitionNotFoundError
from sa_core.spec import (
    AgentDefinition,
    EffectDefinition,
    HookDefinition,
    IncludePart,
    MCPServerDefinition,
    ModelDefinition,
    Pack,
    PromptDefinition,
    RemoteAgentDefinition,
    ScheduleDefinition,
    SubagentToolConfig,
    ThreadEndpointDefinition,
    ToolDefinition,
    tool_entry_name,
)
from sa_core.spec.stores import store_config

__all__ = ["KINDS", "Closure", "compute_closure"]

KINDS: tuple[str, ...] = (
    "agents",
    "prompts",
    "models",
    "tools",
    "hooks",
    "effects",
    "endpoints",
    "mcp_servers",
    "schedules",
    "remote_agents",
)
"""The definition kinds of a pack, in the order they are listed."""

_PROVIDER_PREFIX = "provider:"


def _key(kind: str, item: Any) -> str:
    """Return the name a definition is known by within its kind (hooks by id)."""
    return str(item.id if kind == "hooks" else item.name)


@dataclass
class Closure:
    """The definitions one agent needs, in the pack's own order.

    Attributes:
        pack: the pack the agent comes from.
        agent: the entry agent.
        agents, prompts, models, tools, hooks, effects, endpoints: the definitions that go in.
        schedules: the pack's schedules of the agents that go in.
        roles: how each agent other than the entry agent is used (``subagent`` or ``handoff``).
        external: references the pack does not define, described for people.

    """

    pack: Pack
    agent: AgentDefinition
    agents: list[AgentDefinition] = field(default_factory=list)
    prompts: list[PromptDefinition] = field(default_factory=list)
    models: list[ModelDefinition] = field(default_factory=list)
    tools: list[ToolDefinition] = field(default_factory=list)
    hooks: list[HookDefinition] = field(default_factory=list)
    effects: list[EffectDefinition] = field(default_factory=list)
    endpoints: list[ThreadEndpointDefinition] = field(default_factory=list)
    mcp_servers: list[MCPServerDefinition] = field(default_factory=list)
    schedules: list[ScheduleDefinition] = field(default_factory=list)
    remote_agents: list[RemoteAgentDefinition] = field(default_factory=list)
    roles: dict[str, str] = field(default_factory=dict)
    external: list[str] = field(default_factory=list)

    def items(self, kind: str) -> list[Any]:
        """Return the definitions of one kind (one of :data:`KINDS`)."""
        return list(getattr(self, kind))

    def names(self) -> dict[str, list[str]]:
        """Return the names that go in, by kind; kinds without items are left out."""
        return {
            kind: [_key(kind, item) for item in self.items(kind)]
            for kind in KINDS
            if self.items(kind)
        }

    def callables(self) -> list[Callable[..., Any]]:
        """Return the functions of the closure's tools, hooks, effects and endpoints."""
        found: list[Callable[..., Any]] = [t.execute for t in self.tools]
        found += [h.execute for h in self.hooks]
        found += [e.execute for e in self.effects]
        found += [e.handler for e in self.endpoints]
        return found

    def shared_with_other_agents(self) -> list[str]:
        """Definitions of the closure that agents left out of it use as well (they are copied)."""
        mine = {kind: set(names) for kind, names in self.names().items()}
        notes: list[str] = []
        for other in self.pack.agents:
            if other.name in mine.get("agents", set()):
                continue
            theirs = compute_closure(self.pack, other.name).names()
            for kind in ("prompts", "models", "tools", "hooks", "effects"):
                for name in theirs.get(kind, []):
                    if name in mine.get(kind, set()):
                        notes.append(f"{kind[:-1]} '{name}' is also used by agent '{other.name}'")
        return sorted(set(notes))


class _Walker:
    """Walks one pack's graph from an agent. Use :func:`compute_closure`."""

    def __init__(self, pack: Pack, known_tools: Iterable[str]) -> None:
        self.pack = pack
        self.known_tools = set(known_tools)
        self.index: dict[str, dict[str, Any]] = {
            kind: {_key(kind, item): item for item in getattr(pack, kind)} for kind in KINDS
        }
        self.found: dict[str, dict[str, Any]] = {kind: {} for kind in KINDS}
        self.roles: dict[str, str] = {}
        self.external: list[str] = []

    def note(self, text: str) -> None:
        if text not in self.external:
            self.external.append(text)

    def take(self, kind: str, name: str) -> Any | None:
        """Add a definition; return it when it is new to the closure, else ``None``."""
        if name in self.found[kind] or name not in self.index[kind]:
            return None
        item = self.index[kind][name]
        self.found[kind][name] = item
        return item

    def agent(self, name: str, role: str | None = None) -> None:
        if role is not None:
            self.roles.setdefault(name, role)
        agent = self.take("agents", name)
        if agent is None:
            return
        sides = [agent.side_a, *([agent.side_b] if agent.side_b is not None else [])]
        for side in sides:
            self.prompt(side.prompt, f"agent '{agent.name}'")
        for hook_id in agent.hooks:
            self.hook(hook_id)

    def hook(self, hook_id: str) -> None:
        if self.take("hooks", hook_id) is None and hook_id not in self.index["hooks"]:
            self.note(f"hook '{hook_id}' (not defined by the pack)")

    def model(self, name: str) -> None:
        if name in self.found["models"]:
            return
        model = self.take("models", name)
        if model is None:
            self.note(f"model '{name}' (shared from another pack)")
            return
        for fallback in model.fallbacks:
            self.model(fallback)

    def prompt(self, name: str, used_by: str) -> None:
        if name in self.found["prompts"]:
            return
        prompt = self.take("prompts", name)
        if prompt is None:
            self.note(f"prompt '{name}' (used by {used_by}, not defined by the pack)")
            return
        self.model(prompt.model)
        for part in prompt.parts:
            if isinstance(part, IncludePart):
                self.prompt(part.prompt, f"prompt '{prompt.name}'")
        for hook_id in prompt.hooks:
            self.hook(hook_id)
        for entry in prompt.tools:
            self.target(tool_entry_name(entry), subagent=isinstance(entry, SubagentToolConfig))

    def target(self, name: str, *, subagent: bool = False) -> None:
        """Resolve a ``tools`` entry (or a tool's ``uses``) like the runtime does."""
        if name.startswith(_PROVIDER_PREFIX):
            return
        server = name.partition(".")[0] if "." in name and "/" not in name else None
        if server is not None and server in self.index["mcp_servers"]:
            definition = self.take("mcp_servers", server)
            if definition is not None and definition.command is not None:
                command = " ".join(definition.command)
                self.note(
                    f"MCP server '{server}' (runs `{command}`; the installing environment must "
                    f"provide that command)"
                )
            return
        if "/" in name:
            package, _, agent_name = name.rpartition("/")
            if package == self.pack.name and agent_name in self.index["agents"]:
                self.agent(agent_name, self.role_of(agent_name))
            else:
                self.note(f"agent '{name}' (an entry agent of another pack)")
            return
        if not subagent:
            if name in self.index["tools"]:
                tool = self.take("tools", name)
                for used in (tool.uses or []) if tool is not None else []:
                    self.target(used)
                return
            if name in self.known_tools:
                self.note(f"tool '{name}' (a plugin tool)")
                return
            if name in self.index["prompts"]:
                self.prompt(name, "a tools entry")
                return
        if name in self.index["agents"]:
            self.agent(name, self.role_of(name))
            return
        if name in self.index["remote_agents"]:
            remote = self.take("remote_agents", name)
            if remote is not None:
                needs = ", ".join(remote.referenced_variables())
                self.note(
                    f"remote agent '{name}' (an A2A agent at {remote.card_url}; the installing "
                    f"environment must reach it{f' and set {needs}' if needs else ''})"
                )
            return
        self.note(f"tool '{name}' (a plugin tool, or another pack's entry agent)")

    def role_of(self, agent_name: str) -> str:
        agent = self.index["agents"][agent_name]
        return "subagent" if agent.type == "dual_ai" else "handoff"

    def effects(self) -> None:
        """Add effects and ``run_agent`` agents named by the closure's code, until none is new.

        An agent added brings prompts, tools and hooks, whose code is scanned in turn.
        """
        scanned: set[int] = set()
        while True:
            sources = [_source_of(fn) for fn in self.callables() if id(fn) not in scanned]
            scanned.update(id(fn) for fn in self.callables())
            if not sources:
                return
            text = "\n".join(sources)
            added = False
            for name in self.index["effects"]:
                if name not in self.found["effects"] and _names_literal(text, name):
                    self.take("effects", name)
                    added = True
            for name in self.index["agents"]:
                if name not in self.found["agents"] and _runs_agent(text, name):
                    self.agent(name, self.role_of(name))
                    added = True
            if not added:
                return

    def callables(self) -> list[Callable[..., Any]]:
        found: list[Callable[..., Any]] = [t.execute for t in self.found["tools"].values()]
        found += [h.execute for h in self.found["hooks"].values()]
        found += [e.execute for e in self.found["effects"].values()]
        found += [e.handler for e in self.found["endpoints"].values()]
        return found


def _source_of(fn: Callable[..., Any]) -> str:
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return ""


def _names_literal(text: str, name: str) -> bool:
    return re.search(rf"""(['"]){re.escape(name)}\1""", text) is not None


def _runs_agent(text: str, name: str) -> bool:
    return re.search(rf"""run_agent\(\s*(['"]){re.escape(name)}\1""", text) is not None


def _ordered(pack_items: Sequence[Any], kind: str, chosen: dict[str, Any]) -> list[Any]:
    return [item for item in pack_items if chosen.get(_key(kind, item)) is item]


def compute_closure(pack: Pack, agent_name: str, *, known_tools: Iterable[str] = ()) -> Closure:
    """Find everything ``agent_name`` needs within ``pack``.

    Args:
        pack: the pack holding the agent.
        agent_name: the agent to start from; it becomes the entry agent.
        known_tools: plugin tool names, reported as external rather than unknown.

    Raises:
        DefinitionNotFoundError: the pack has no such agent.

    """
    agents = {a.name: a for a in pack.agents}
    if agent_name not in agents:
        raise DefinitionNotFoundError("agent", agent_name, agents, package=pack.name)
    walker = _Walker(pack, known_tools)
    walker.agent(agent_name)
    for endpoint in pack.endpoints:
        walker.found["endpoints"][endpoint.name] = endpoint
    walker.effects()
    for schedule in pack.schedules:  # a schedule goes with the agent it runs
        if schedule.agent in walker.found["agents"]:
            walker.found["schedules"][schedule.name] = schedule
    embedding = store_config(pack.store).embedding_model
    if embedding is not None:  # the pack's store goes along, with its embedding model
        walker.model(embedding)
    closure = Closure(pack=pack, agent=agents[agent_name])
    for kind in KINDS:
        setattr(closure, kind, _ordered(getattr(pack, kind), kind, walker.found[kind]))
    closure.roles = {k: v for k, v in walker.roles.items() if k != agent_name}
    closure.external = walker.external
    return closure
