"""What every part of pack validation shares: the pack indexed by name, and small helpers."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from sa_core.spec.agents import AgentDefinition
from sa_core.spec.prompts import (
    PromptDefinition,
)
from sa_core.spec.remote import RemoteAgentDefinition
from sa_core.spec.schemas import ArgsSpec, is_model_class, json_schema_of
from sa_core.spec.tools import ToolDefinition

if TYPE_CHECKING:
    from sa_core.spec.packs import Pack


LIFECYCLE_TOOL_NAMES: frozenset[str] = frozenset(
    {"subagent_create", "subagent_message", "subagent_terminate", "subagents"}
)
"""Tools the runtime injects for resumable subagents; packs may not define or list them."""

MAX_RECOMMENDED_TOOLS = 8
"""The authoring guide's mega-agent threshold: models choose poorly past about eight tools."""

MAX_RECOMMENDED_PROMPT_LINES = 150
"""The authoring guide's context-dilution threshold for one prompt's own text."""

PROVIDER_TOOL_PREFIX = "provider:"
"""A ``tools`` entry ``provider:<tool>`` names a tool executed by the model's vendor."""

FUNCTION_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
ENDPOINT_PARAM = re.compile(r"\{[^}]*\}")

TargetKind = Literal["tool", "plugin_tool", "provider_tool", "prompt", "agent"]


@dataclass(frozen=True)
class Target:
    """What a prompt's ``tools`` entry resolved to."""

    kind: TargetKind
    name: str
    tool: ToolDefinition | None = None
    prompt: PromptDefinition | None = None
    agent: AgentDefinition | None = None
    pack_name: str | None = None
    remote: RemoteAgentDefinition | None = None


def hint(name: str, known: Iterable[str], label: str = "known") -> str:
    """Build a ``did you mean`` or ``known: ...`` suffix for an unknown-name message."""
    candidates = sorted(set(known))
    close = difflib.get_close_matches(name, candidates, n=1)
    if close:
        return f" (did you mean '{close[0]}'?)"
    if not candidates:
        return f" ({label}: none)"
    if len(candidates) <= 8:
        return f" ({label}: {', '.join(candidates)})"
    return ""


def blank(value: str | None) -> bool:
    """Whether an optional string field was set to an empty or whitespace-only string."""
    return value is not None and not value.strip()


def schema_properties(args: ArgsSpec) -> set[str] | None:
    """Return the argument names a schema declares, or ``None`` when they cannot be known.

    A tool without ``args`` takes no arguments (an empty set); a JSON Schema dict without
    ``properties`` is free-form (``None``, nothing to check against).
    """
    if args is None:
        return set()
    if isinstance(args, dict):
        props = args.get("properties")
        return set(props) if isinstance(props, dict) and props else None
    if is_model_class(args):
        names = set(json_schema_of(args).get("properties", {}))
        names.update(args.model_fields)
        return names
    return None


def describe_agent(agent: AgentDefinition) -> str:
    """How an agent reads in a problem: its type and whether it is exposed as a tool."""
    exposed = "exposed" if agent.expose_as_tool else "not exposed"
    return f"a {agent.type} agent ({exposed})"


class ValidatorBase:
    """The pack being validated, indexed by name, and the problems found so far."""

    def __init__(self, pack: Pack, known_tools: Iterable[str], known_packs: Iterable[Pack]) -> None:
        self.pack = pack
        self.problems: list[str] = []
        self.known_tools = set(known_tools)
        self.other_packs: dict[str, Pack] = {}
        for other in known_packs:
            if other.name != pack.name:
                self.other_packs.setdefault(other.name, other)
        # First definition wins for lookups; duplicates are reported separately.
        self.agents: dict[str, AgentDefinition] = {}
        for agent in pack.agents:
            self.agents.setdefault(agent.name, agent)
        self.remote_agents: dict[str, RemoteAgentDefinition] = {}
        for remote in pack.remote_agents:
            self.remote_agents.setdefault(remote.name, remote)
        self.prompts: dict[str, PromptDefinition] = {}
        for prompt in pack.prompts:
            self.prompts.setdefault(prompt.name, prompt)
        self.tools: dict[str, ToolDefinition] = {}
        for tool in pack.tools:
            self.tools.setdefault(tool.name, tool)
        self.model_names = {m.name for m in pack.models}
        # Models may be shared: the registry falls back to other packs' models.
        self.shared_model_names = {m.name for p in self.other_packs.values() for m in p.models}
        self.hook_ids = {h.id for h in pack.hooks}

    def add(self, message: str) -> None:
        """Record one problem."""
        self.problems.append(message)
