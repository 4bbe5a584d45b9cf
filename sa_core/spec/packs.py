"""Pack: a named group of definitions, the unit of installation and isolation."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sa_core.spec.agents import AgentDefinition
from sa_core.spec.effects import EffectDefinition
from sa_core.spec.endpoints import ThreadEndpointDefinition
from sa_core.spec.hooks import HookDefinition
from sa_core.spec.mcp import MCPServerDefinition
from sa_core.spec.models import ModelDefinition
from sa_core.spec.prompts import PromptDefinition
from sa_core.spec.remote import RemoteAgentDefinition
from sa_core.spec.schedules import ScheduleDefinition
from sa_core.spec.stores import StoreConfig
from sa_core.spec.tools import ToolDefinition


@dataclass
class Pack:
    """A group of definitions.

    The pack's ``name`` is its package id: the entry-point name in the ``sa.packs`` group and
    the URL segment under ``/api/packages/``. ``entry_agents`` are the agents other packs (and the
    server's catalog) may reach; by default every agent. ``store`` configures the pack's
    store (:class:`~sa_core.spec.stores.StoreConfig` or a dict of its fields): its
    ``embedding_model`` adds search by meaning.

    Example::

        pack = Pack(name="support", agents=[agent], prompts=[prompt], models=[model])
        pack.validate()
    """

    name: str
    agents: Sequence[AgentDefinition] = field(default_factory=list)
    prompts: Sequence[PromptDefinition] = field(default_factory=list)
    models: Sequence[ModelDefinition] = field(default_factory=list)
    tools: Sequence[ToolDefinition] = field(default_factory=list)
    hooks: Sequence[HookDefinition] = field(default_factory=list)
    effects: Sequence[EffectDefinition] = field(default_factory=list)
    endpoints: Sequence[ThreadEndpointDefinition] = field(default_factory=list)
    mcp_servers: Sequence[MCPServerDefinition] = field(default_factory=list)
    schedules: Sequence[ScheduleDefinition] = field(default_factory=list)
    remote_agents: Sequence[RemoteAgentDefinition] = field(default_factory=list)
    store: StoreConfig | Mapping[str, Any] | None = None
    entry_agents: Sequence[str] | None = None
    version: str | None = None
    author: str | None = None
    license: str | None = None
    description: str | None = None

    def entry_agent_names(self) -> list[str]:
        """The agents reachable from outside the pack."""
        if self.entry_agents is not None:
            return list(self.entry_agents)
        return [a.name for a in self.agents]

    def validate(
        self, *, known_tools: Iterable[str] = (), known_packs: Iterable[Pack] = ()
    ) -> None:
        """Check the whole definition graph; raise one error listing every problem.

        Args:
            known_tools: tool names provided by plugins (globally registered tools).
            known_packs: other packs whose entry agents may be referenced as ``pack/agent``.

        Raises:
            PackValidationError: with ``problems`` listing everything found.
        """
        from sa_core.errors import PackValidationError
        from sa_core.spec.validation import validate_pack

        problems = validate_pack(self, known_tools=known_tools, known_packs=known_packs)
        if problems:
            raise PackValidationError(self.name, problems)

    def warnings(self) -> list[str]:
        """Authoring-guide warnings that do not stop the pack from loading."""
        from sa_core.spec.validation import pack_warnings

        return pack_warnings(self)
