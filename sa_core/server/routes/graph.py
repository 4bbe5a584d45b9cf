"""``GET graph``: the pack as a graph (agents, their sides' prompts, tools and subagents)."""

from __future__ import annotations

from typing import Literal

from litestar import Controller, get

from sa_core.server.context import PackDep
from sa_core.server.errors import errors
from sa_core.server.schemas import Base

NodeKind = Literal["agent", "prompt", "tool"]
EdgeKind = Literal["side_a", "side_b", "tool", "subprompt", "subagent"]


class GraphNodeOut(Base, kw_only=True):
    """An agent, a prompt or a tool of the pack (agents carry their type and side labels)."""

    id: str
    kind: NodeKind
    name: str
    type: str | None = None
    title: str | None = None
    entry: bool = False
    side_labels: dict[str, str] | None = None


class GraphEdgeOut(Base, kw_only=True):
    """``source`` uses ``target``: an agent's side runs a prompt, a prompt calls a tool."""

    source: str
    target: str
    kind: EdgeKind


class GraphOut(Base, kw_only=True):
    """``GET graph``."""

    nodes: list[GraphNodeOut]
    edges: list[GraphEdgeOut]


class GraphController(Controller):
    """The shape of one package."""

    @get("/graph", responses=errors(), summary="The pack as a graph")
    async def graph(self, pack: PackDep) -> GraphOut:
        """Agents (entry agents marked), the prompt each side runs, and what each prompt calls.

        A prompt's tool that names an agent is a ``subagent`` edge; one that names a prompt is a
        ``subprompt`` edge. Node ids are ``agent:NAME``, ``prompt:NAME`` and ``tool:NAME``.
        """
        entry = set(pack.pack.entry_agent_names())
        nodes: dict[str, GraphNodeOut] = {}
        edges: list[GraphEdgeOut] = []
        for agent in pack.agents.values():
            agent_id = f"agent:{agent.name}"
            nodes[agent_id] = GraphNodeOut(
                id=agent_id,
                kind="agent",
                name=agent.name,
                type=agent.type,
                title=agent.title,
                entry=agent.name in entry,
                side_labels={side: config.label for side, config in agent.sides() if config.label},
            )
            for side, config in agent.sides():
                edges.append(
                    GraphEdgeOut(
                        source=agent_id,
                        target=f"prompt:{config.prompt}",
                        kind="side_a" if side == "a" else "side_b",
                    )
                )
        for prompt in pack.prompts.values():
            prompt_id = f"prompt:{prompt.name}"
            nodes[prompt_id] = GraphNodeOut(id=prompt_id, kind="prompt", name=prompt.name)
            for name in prompt.tool_names():
                if name in pack.agents:
                    edges.append(
                        GraphEdgeOut(source=prompt_id, target=f"agent:{name}", kind="subagent")
                    )
                elif name in pack.prompts:
                    edges.append(
                        GraphEdgeOut(source=prompt_id, target=f"prompt:{name}", kind="subprompt")
                    )
                else:
                    tool_id = f"tool:{name}"
                    nodes.setdefault(tool_id, GraphNodeOut(id=tool_id, kind="tool", name=name))
                    edges.append(GraphEdgeOut(source=prompt_id, target=tool_id, kind="tool"))
        known = set(nodes)
        return GraphOut(
            nodes=list(nodes.values()),
            edges=[e for e in edges if e.source in known and e.target in known],
        )
