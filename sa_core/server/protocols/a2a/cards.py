"""Agent cards: one per entry agent, built from its definition, prompt and tools.

A card names the agent, describes it, lists skills (the agent itself, from its side A prompt,
then each tool that prompt offers), declares Bearer authentication with the server's API keys,
and gives the JSON-RPC URL. Nothing secret goes in: no prompt text, no variable values.
"""

from __future__ import annotations

from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)

from sa_core.registry import PackScope
from sa_core.server.protocols.a2a.paths import PREFIX

SCHEME = "bearer"


def agent_path(package: str, agent: str) -> str:
    """The JSON-RPC path of an agent (its card is under it, at the well-known path)."""
    return f"{PREFIX}/{package}/{agent}"


def agent_card(scope: PackScope, agent_name: str, base_url: str) -> AgentCard:
    """The card of an entry agent, with ``base_url`` (scheme and host) in its URL."""
    from sa_core import __version__

    agent = scope.agents[agent_name]
    prompt = scope.prompts.get(agent.side_a.prompt) if agent.side_a is not None else None
    description = (
        agent.description
        or agent.tool_description
        or (prompt.tool_description if prompt else "")
        or f"The {agent_name} agent of the {scope.package} package."
    )
    skills = [
        AgentSkill(
            id=agent_name,
            name=agent.title or agent_name,
            description=description,
            tags=[scope.package, agent.type],
        )
    ]
    for tool_name in prompt.tool_names() if prompt else []:
        tool = scope.tools.get(tool_name)
        skills.append(
            AgentSkill(
                id=f"tool:{tool_name}",
                name=tool_name,
                description=(tool.description if tool else "") or f"The {tool_name} tool.",
                tags=["tool"],
            )
        )
    version = getattr(scope.pack, "version", None) or getattr(agent, "version", None)
    requirement = SecurityRequirement()
    requirement.schemes[SCHEME].CopyFrom(StringList())
    return AgentCard(
        name=agent.title or agent_name,
        description=description,
        version=str(version or __version__),
        supported_interfaces=[
            AgentInterface(
                url=base_url + agent_path(scope.package, agent_name),
                protocol_binding="JSONRPC",
                protocol_version="1.0",
            )
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=True),
        security_schemes={
            SCHEME: SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="Bearer",
                    description="An API key of the server (sa keys create).",
                )
            )
        },
        security_requirements=[requirement],
        default_input_modes=["text/plain", "application/json", "application/octet-stream"],
        default_output_modes=["text/plain", "application/octet-stream"],
        skills=skills,
    )
