"""RemoteAgentDefinition: an A2A agent on another server, used exactly like a local subagent.

A pack declares remote agents in ``Pack(remote_agents=[...])``; a prompt lists one in its
``tools`` like a ``dual_ai`` agent, with ``blocking``, ``resumable``, ``immediate`` and the
init properties. The runtime talks to it over A2A (see ``docs/remote-agents.md``); the child is
a thread of its own whose messages mirror the exchange.

``url`` is the agent's card (``.../.well-known/agent-card.json``, or any ``.json`` URL) or the
base URL the card is read under. Header values may reference variables as ``${NAME}``: they are
resolved per exchange from the child thread's variables (then the process environment), sent
only to the agent's own server, and scrubbed from everything the remote returns.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pydantic import Field, PrivateAttr

from sa_core.spec.agents import AgentDefinition, SideConfig
from sa_core.spec.base import SpecModel

if TYPE_CHECKING:
    from sa_core.spec.packs import Pack

CARD_PATH = "/.well-known/agent-card.json"
"""Where an A2A agent's card is read under its base URL."""
REMOTE_PROMPT_PREFIX = "a2a:"
"""The side A "prompt" of a remote agent's stand-in definition: no prompt of any pack."""
DEFAULT_TIMEOUT = 600.0
"""Seconds one exchange (one A2A task) may take unless ``timeout`` says otherwise."""

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_REFERENCE = re.compile(r"\$\{([^}]*)\}")
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class RemoteAgentDefinition(SpecModel):
    """An A2A agent served elsewhere, offered to prompts as a subagent.

    Attributes:
        name: the tool name prompts list (and the child threads' agent name).
        url: the agent card's URL, or the base URL it is read under.
        headers: HTTP headers sent with every request to the agent (values may use
            ``${NAME}``).
        tool_description: what the model is told the tool does; by default the card's name,
            description and skills.
        timeout: seconds one exchange (one A2A task) may take before it fails.
        title: a display name.
    """

    name: str
    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    tool_description: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    title: str | None = None
    _agent: AgentDefinition | None = PrivateAttr(default=None)
    _card_summary: str | None = PrivateAttr(default=None)

    @property
    def card_url(self) -> str:
        """The URL the agent card is read from."""
        url = self.url.strip()
        if url.endswith(".json") or "/.well-known/" in url:
            return url
        return url.rstrip("/") + CARD_PATH

    def referenced_variables(self) -> list[str]:
        """Every ``${NAME}`` the header values reference, in order, once each."""
        names: list[str] = []
        for value in self.headers.values():
            for name in _REFERENCE.findall(value):
                if _VARIABLE.match(name) and name not in names:
                    names.append(name)
        return names

    def __eq__(self, other: object) -> bool:
        """Equal fields make equal definitions (what was learnt from the card is not compared)."""
        if not isinstance(other, RemoteAgentDefinition):
            return NotImplemented
        return self.model_dump() == other.model_dump()

    __hash__ = None  # type: ignore[assignment]

    def describe(self) -> str:
        """The tool description: ``tool_description``, else the card's summary, else a default."""
        if self.tool_description:
            return self.tool_description
        if self._card_summary:
            return self._card_summary
        return f"Delegate work to the remote agent '{self.name}' (A2A, {self.card_url})."

    def remember_card(self, summary: str) -> bool:
        """Keep the card's summary (name, description, skills); whether it changed."""
        changed = summary != self._card_summary
        self._card_summary = summary
        return changed

    def as_agent(self) -> AgentDefinition:
        """The stand-in agent definition child threads are created with (built once).

        A ``dual_ai`` agent exposed as a tool whose side A names no prompt: the engine runs
        a remote child's turns as A2A exchanges instead of model steps.
        """
        if self._agent is None:
            self._agent = AgentDefinition(
                name=self.name,
                type="dual_ai",
                side_a=SideConfig(prompt=REMOTE_PROMPT_PREFIX + self.name),
                expose_as_tool=True,
                tool_description=self.tool_description,
                title=self.title,
            )
        return self._agent


def define_remote_agent(
    *,
    name: str,
    url: str,
    headers: dict[str, str] | None = None,
    tool_description: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    **fields: Any,
) -> RemoteAgentDefinition:
    """Define an A2A agent on another server that prompts use as a subagent.

    Example::

        research = define_remote_agent(
            name="research",
            url="https://agents.example.com/a2a/research/.well-known/agent-card.json",
            headers={"Authorization": "Bearer ${RESEARCH_KEY}"},
            timeout=300,
        )
        pack = Pack(name="desk", remote_agents=[research], prompts=[define_prompt(
            name="main", model="fast", prompt="...",
            tools=[{"name": "research", "blocking": False}])], ...)

    Args:
        name: the tool name prompts list (1-64 letters, digits, ``_`` or ``-``).
        url: the agent card URL, or the base URL (the card is then read from
            ``/.well-known/agent-card.json`` under it).
        headers: HTTP headers for every request to the agent; values may reference variables
            as ``${NAME}`` (declare secrets with ``type="secret"``).
        tool_description: the tool's description; by default built from the card's name,
            description and skills.
        timeout: seconds one exchange may take (default 600).
        **fields: ``title``.
    """
    return RemoteAgentDefinition(
        name=name,
        url=url,
        headers=dict(headers or {}),
        tool_description=tool_description,
        timeout=timeout,
        **fields,
    )


def remote_agent_problems(pack: Pack) -> list[str]:
    """Every problem of the pack's remote agents: names, URLs, headers, timeouts, references."""
    problems: list[str] = []
    taken = {
        **{t.name: "a tool" for t in pack.tools},
        **{p.name: "a prompt" for p in pack.prompts},
        **{a.name: "an agent" for a in pack.agents},
    }
    seen: set[str] = set()
    for remote in pack.remote_agents:
        where = f"remote agent '{remote.name}'"
        if remote.name in seen:
            problems.append(
                f"pack '{pack.name}': remote agent '{remote.name}' is defined more than once in "
                f"remote_agents; names must be unique within a pack."
            )
        seen.add(remote.name)
        if remote.name in taken:
            problems.append(
                f"{where}: {taken[remote.name]} of the pack has the same name; rename one of "
                f"them (prompts list both by name)."
            )
        if not _NAME.match(remote.name):
            problems.append(
                f"{where}: name is not a valid function name for model APIs; use 1-64 letters, "
                f"digits, '_' or '-'."
            )
        problems += _url_problems(where, remote.url)
        problems += _header_problems(where, remote.headers)
        if not remote.timeout > 0 or remote.timeout == float("inf"):
            problems.append(
                f"{where}: timeout must be a positive number of seconds (got {remote.timeout!r})."
            )
    return problems


def _url_problems(where: str, url: str) -> list[str]:
    stripped = url.strip()
    if not stripped.startswith(("http://", "https://")) or len(stripped) < 9:
        return [
            f"{where}: url '{url}' must be an http:// or https:// URL of the agent card (or the "
            f"base URL its card is read under)."
        ]
    if any(c.isspace() for c in stripped):
        return [f"{where}: url '{url}' contains whitespace; write the URL without spaces."]
    return []


def _header_problems(where: str, headers: dict[str, str]) -> list[str]:
    problems: list[str] = []
    for key, value in headers.items():
        if not _HEADER_NAME.match(key):
            problems.append(
                f"{where}: header name '{key}' is not a valid HTTP header name; use letters, "
                f"digits and '-'."
            )
        if "\r" in value or "\n" in value:
            problems.append(f"{where}: header '{key}' has a line break in its value; remove it.")
        for name in _REFERENCE.findall(value):
            if not _VARIABLE.match(name):
                problems.append(
                    f"{where}: header '{key}' references '${{{name}}}', which is not a variable "
                    f"name; write ${{NAME}} with letters, digits and '_'."
                )
        if value.count("${") != len(_REFERENCE.findall(value)):
            problems.append(
                f"{where}: header '{key}' has an unclosed '${{'; write ${{NAME}} to reference a "
                f"variable."
            )
    return problems


def remote_agent_warnings(pack: Pack) -> list[str]:
    """Advice: header variables the pack does not declare secret (their values are sent)."""
    holders = [
        *(a.variables for a in pack.agents),
        *(p.variables for p in pack.prompts),
        *(t.variables for t in pack.tools),
    ]
    secret = {v.name for variables in holders for v in variables if v.type == "secret"}
    warnings = []
    for remote in pack.remote_agents:
        for name in remote.referenced_variables():
            if name not in secret:
                warnings.append(
                    f"remote agent '{remote.name}': header variable '{name}' is not declared "
                    f"with type='secret' by any agent, prompt or tool of the pack; its value is "
                    f"still scrubbed from what the remote returns, but declare it secret so it is "
                    f"never shown as a thread variable."
                )
    return warnings


__all__ = [
    "CARD_PATH",
    "DEFAULT_TIMEOUT",
    "REMOTE_PROMPT_PREFIX",
    "RemoteAgentDefinition",
    "define_remote_agent",
    "remote_agent_problems",
    "remote_agent_warnings",
]
