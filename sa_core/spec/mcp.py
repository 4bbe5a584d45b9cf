"""MCPServerDefinition: a Model Context Protocol server whose tools a pack's prompts may offer.

Prompts list an MCP server's tools as ``"<server>.<tool>"`` (one tool) or ``"<server>.*"`` (every
tool the server lists). The model sees them as ``<server>_<tool>``, since model APIs do not allow
dots in function names. Tool schemas come from the server's ``tools/list`` when the server is
first used, so validation can only check the server name.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pydantic import Field, model_validator

from sa_core.spec.base import DEFERRED, SpecModel

if TYPE_CHECKING:
    from sa_core.spec.packs import Pack

_SERVER_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,31}$")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def variables_in(text: str) -> list[str]:
    """The ``${NAME}`` variable references in a header or env value."""
    return _VARIABLE.findall(text)


def substitute(text: str, lookup: Any) -> str:
    """Replace each ``${NAME}`` with ``lookup(NAME)`` (which returns a str)."""
    return _VARIABLE.sub(lambda m: str(lookup(m.group(1))), text)


class MCPServerDefinition(SpecModel):
    """An MCP server: a command spoken to over stdio, or a streamable HTTP ``url``.

    ``env`` (stdio) and ``headers`` (HTTP) values may reference variables as ``${NAME}``; they
    are resolved from the runtime's instance env, then the process environment, when the server
    starts, and their values are scrubbed from tool results. Use this for secrets such as an
    ``Authorization`` header: the value never reaches a model, a log or an API response. A
    ``command`` starting with ``python`` runs with the runtime's own interpreter.
    """

    model_config = DEFERRED

    name: str
    description: str = ""
    command: list[str] | None = None
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    timeout: float = 60.0
    start_timeout: float = 60.0

    @model_validator(mode="after")
    def _one_transport(self) -> MCPServerDefinition:
        if not _SERVER_NAME.match(self.name):
            raise ValueError(
                f"MCP server name '{self.name}' must start with a letter and contain only letters, "
                f"digits and '-' (at most 32 characters); tools are offered as <server>_<tool>."
            )
        if (self.command is None) == (self.url is None):
            raise ValueError(
                f"MCP server '{self.name}': give exactly one of command=[...] (stdio) or url=... "
                f"(streamable HTTP)."
            )
        if self.command is not None and not self.command:
            raise ValueError(f"MCP server '{self.name}': command is empty; name the executable.")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(
                f"MCP server '{self.name}': url '{self.url}' must start with http:// or https://."
            )
        if self.headers and self.url is None:
            raise ValueError(
                f"MCP server '{self.name}': headers apply to url= servers only; pass variables to "
                f"a stdio server through env=."
            )
        for field_name in ("timeout", "start_timeout"):
            value = getattr(self, field_name)
            if not value > 0 or value == float("inf"):
                raise ValueError(
                    f"MCP server '{self.name}': {field_name} must be a positive number of "
                    f"seconds (got {value!r})."
                )
        return self

    @property
    def transport(self) -> str:
        """``"stdio"`` or ``"http"``."""
        return "stdio" if self.command is not None else "http"

    def referenced_variables(self) -> list[str]:
        """Every ``${NAME}`` its env and header values reference."""
        names: list[str] = []
        for value in [*self.env.values(), *self.headers.values()]:
            names += [n for n in variables_in(value) if n not in names]
        return names


def define_mcp_server(
    *,
    name: str,
    command: list[str] | None = None,
    env: dict[str, str] | None = None,
    url: str | None = None,
    headers: dict[str, str] | None = None,
    **fields: Any,
) -> MCPServerDefinition:
    """Define an MCP server a pack's prompts can take tools from.

    Example::

        files = define_mcp_server(name="files", command=["uvx", "mcp-server-filesystem", "."])
        search = define_mcp_server(
            name="search",
            url="https://mcp.example.com/mcp",
            headers={"Authorization": "Bearer ${SEARCH_TOKEN}"},
        )
        prompt = define_prompt(name="main", model="fast", prompt="...",
                               tools=["files.read_file", "search.*"])

    Args:
        name: the server name prompts use as the prefix of ``"<server>.<tool>"``.
        command: the executable and its arguments, for a stdio server.
        env: extra environment variables for a stdio server (values may use ``${NAME}``).
        url: the endpoint of a streamable HTTP server.
        headers: HTTP headers sent to a ``url`` server (values may use ``${NAME}``).
        **fields: ``description``, ``cwd``, ``timeout`` (seconds per tool call, default 60),
            ``start_timeout`` (seconds to start the server: spawn or connect, ``initialize`` and
            ``tools/list``; default 60, separate from ``timeout`` so a short per-call limit
            never stops a slow-starting server).
    """
    return MCPServerDefinition(
        name=name, command=command, env=env or {}, url=url, headers=headers or {}, **fields
    )


def split_mcp_name(name: str) -> tuple[str, str] | None:
    """``("server", "tool")`` for a ``"server.tool"`` tools entry (``tool`` may be ``*``)."""
    if "." not in name or "/" in name:
        return None
    server, _, tool = name.partition(".")
    return server, tool


def mcp_entry_problems(pack: Pack, where: str, name: str) -> list[str]:
    """Problems with a ``"<server>.<tool>"`` tools entry: only the server can be checked."""
    server, tool = split_mcp_name(name) or ("", "")
    known = [s.name for s in pack.mcp_servers]
    if server not in known:
        listed = ", ".join(known) or "none"
        return [
            f"{where}: tools entry '{name}' names MCP server '{server}', which the pack does not "
            f"declare (declared: {listed}); add define_mcp_server(name='{server}', ...) to the "
            f"pack's mcp_servers or fix the entry."
        ]
    if not tool:
        return [
            f"{where}: tools entry '{name}' has no tool after the dot; write '{server}.<tool>' or "
            f"'{server}.*'."
        ]
    return []


def mcp_server_problems(pack: Pack) -> list[str]:
    """Duplicate MCP server names in a pack."""
    seen: set[str] = set()
    problems = []
    for server in pack.mcp_servers:
        if server.name in seen:
            problems.append(
                f"pack '{pack.name}': MCP server '{server.name}' is defined more than once in "
                f"mcp_servers; names must be unique within a pack."
            )
        seen.add(server.name)
    return problems
