"""MCP tools: servers a pack declares, started lazily and shared per runtime.

A prompt's ``"<server>.<tool>"`` and ``"<server>.*"`` entries expand, the first time a step uses
the prompt, into offered tools named ``<server>_<tool>`` whose schemas come from the server's
``tools/list``. Calls go through ``tools/call``; text becomes the result, images become
attachments, ``isError`` becomes a failed result.

Each server runs in one background task that owns its connection (the ``mcp`` SDK's transports
are task-scoped). A call that finds the connection closed (the server crashed or was killed)
restarts the server and retries once. :meth:`McpManager.close` stops every server; the runtime
calls it when it closes. The ``mcp`` SDK is imported only when a server starts.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

from sa_core.engine.secrets import redact
from sa_core.engine.tools.tools import McpToolRef, OfferedTool, flag_enabled
from sa_core.errors import ConfigurationError
from sa_core.spec import PromptToolConfig, ToolAttachment, ToolResult, tool_entry_name
from sa_core.spec.mcp import MCPServerDefinition, split_mcp_name, substitute

if TYPE_CHECKING:
    from mcp.client.client import Client
    from mcp_types import CallToolResult, Tool

    from sa_core.engine.kernel import Kernel
    from sa_core.engine.threads import ThreadRef
    from sa_core.registry import PackScope
    from sa_core.spec import PromptDefinition

CONNECTION_CLOSED = -32000  # the SDK's JSON-RPC code for a closed connection
_MIME_SUFFIX = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}


def offered_name(server: str, tool: str) -> str:
    """The model-visible name of an MCP tool (model APIs forbid dots in function names)."""
    return f"{server}_{tool}"


def _require_sdk() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise ConfigurationError(
            "MCP tools need the MCP SDK; install it with: pip install 'standard-agents[mcp]'"
        ) from exc


class McpStartTimeout(TimeoutError):
    """An MCP server did not start (or list its tools) within its ``start_timeout``."""

    def __init__(self, definition: MCPServerDefinition, what: str = "start") -> None:
        super().__init__(
            f"MCP server '{definition.name}' did not {what} within "
            f"{definition.start_timeout:g} seconds (its start_timeout); raise start_timeout in "
            f"define_mcp_server(name='{definition.name}', ...) if it needs longer to start."
        )


class McpConnection:
    """One running MCP server, owned by a background task."""

    def __init__(self, definition: MCPServerDefinition, lookup: Any) -> None:
        self.definition = definition
        self._lookup = lookup
        self._client: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._lock = asyncio.Lock()
        self.starts = 0
        self.secret_values: list[str] = []

    @property
    def running(self) -> bool:
        """Whether the server's connection is up."""
        return self._client is not None and self._task is not None and not self._task.done()

    def _resolve(self, values: dict[str, str]) -> dict[str, str]:
        resolved = {k: substitute(v, self._lookup) for k, v in values.items()}
        for original, value in zip(values.values(), resolved.values(), strict=True):
            if value != original and len(value) >= 4 and value not in self.secret_values:
                self.secret_values.append(value)
        return resolved

    async def client(self) -> Client:
        """The live client, starting (or restarting) the server when needed."""
        async with self._lock:
            if self.running:
                assert self._client is not None
                return self._client
            await self._shutdown()
            _require_sdk()
            loop = asyncio.get_running_loop()
            ready: asyncio.Future[Client] = loop.create_future()
            self._stop = asyncio.Event()
            self._task = asyncio.create_task(
                self._own(ready, self._stop), name=f"mcp:{self.definition.name}"
            )
            try:
                async with asyncio.timeout(self.definition.start_timeout):
                    self._client = await ready
            except TimeoutError as exc:
                await self._shutdown(cancel=True)
                raise McpStartTimeout(self.definition) from exc
            except BaseException:
                await self._shutdown(cancel=True)
                raise
            self.starts += 1
            return self._client

    async def _own(self, ready: asyncio.Future[Client], stop: asyncio.Event) -> None:
        """Open the transport and session, hand the client over, hold them until stopped."""
        from mcp.client.client import Client

        definition = self.definition
        try:
            async with AsyncExitStack() as stack:
                if definition.command is not None:
                    from mcp.client.stdio import StdioServerParameters, stdio_client

                    executable = definition.command[0]
                    if executable in ("python", "python3"):
                        executable = sys.executable  # the runtime's interpreter and packages
                    params = StdioServerParameters(
                        command=executable,
                        args=list(definition.command[1:]),
                        env=self._resolve(definition.env) or None,
                        cwd=definition.cwd,
                    )
                    transport: Any = stdio_client(params)
                else:
                    from mcp.client.streamable_http import streamable_http_client
                    from mcp.shared._httpx_utils import create_mcp_http_client

                    assert definition.url is not None
                    http = await stack.enter_async_context(
                        create_mcp_http_client(headers=self._resolve(definition.headers))
                    )
                    transport = streamable_http_client(definition.url, http_client=http)
                client = await stack.enter_async_context(Client(transport, cache=None))
                ready.set_result(client)
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self._client = None

    async def _shutdown(self, *, cancel: bool = False) -> None:
        """Stop the owning task: ask it to close (5 s), or cancel it at once with ``cancel``.

        A start that failed or timed out cancels: the task is not yet waiting for the stop
        signal, so asking would only add the 5 s wait.
        """
        task, self._task = self._task, None
        self._client = None
        if task is None:
            return
        if cancel:
            task.cancel()
        if self._stop is not None:
            self._stop.set()
        try:
            async with asyncio.timeout(5):
                await asyncio.shield(task)
        except TimeoutError:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        except BaseException:  # the task's own failure was reported to its starter
            pass

    async def stop(self) -> None:
        """Stop the server (its process, or its HTTP session)."""
        async with self._lock:
            await self._shutdown()

    async def list_tools(self) -> list[Tool]:
        """Every tool the server lists (all pages), within the server's ``start_timeout``.

        The listing is part of starting: it happens once per runtime, before any call.
        """
        client = await self.client()
        tools: list[Tool] = []
        cursor: str | None = None
        while True:
            try:
                async with asyncio.timeout(self.definition.start_timeout):
                    page = await client.list_tools(cursor=cursor)
            except TimeoutError as exc:
                raise McpStartTimeout(self.definition, "list its tools") from exc
            tools += page.tools
            cursor = page.next_cursor
            if not cursor:
                return tools

    async def call(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        """``tools/call``; a closed connection restarts the server and retries once."""
        from mcp.shared.exceptions import MCPError

        for attempt in (1, 2):
            client = await self.client()
            try:
                async with asyncio.timeout(self.definition.timeout):
                    return await client.call_tool(tool, arguments)
            except MCPError as exc:
                if exc.code != CONNECTION_CLOSED or attempt == 2:
                    raise
            except Exception:
                if self.running or attempt == 2:
                    raise
            async with self._lock:
                await self._shutdown()
        raise AssertionError("unreachable")


class McpManager:
    """The MCP servers of one runtime, shared by every thread, by (package, server)."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env
        self.connections: dict[tuple[str, str], McpConnection] = {}
        self._schemas: dict[tuple[str, str], list[Tool]] = {}
        self._offered: dict[tuple[str, str], dict[str, OfferedTool]] = {}

    def _lookup(self, name: str) -> str:
        value = self.env.get(name) or os.environ.get(name)
        if value is None:
            raise ConfigurationError(
                f"MCP server variable '{name}' is not set; set it in the instance env "
                f"(Runtime(env={{'{name}': ...}})) or the process environment."
            )
        return value

    def connection(self, scope: PackScope, server: str) -> McpConnection:
        """The (not necessarily started) connection to a server of a package."""
        key = (scope.package, server)
        found = self.connections.get(key)
        if found is None:
            found = McpConnection(scope.mcp_servers[server], self._lookup)
            self.connections[key] = found
        return found

    async def server_tools(self, scope: PackScope, server: str) -> list[Tool]:
        """A server's ``tools/list``, fetched once per runtime."""
        key = (scope.package, server)
        tools = self._schemas.get(key)
        if tools is None:
            tools = await self.connection(scope, server).list_tools()
            self._schemas[key] = tools
        return tools

    async def offered(self, scope: PackScope, prompt: PromptDefinition) -> dict[str, OfferedTool]:
        """The MCP tools a prompt offers, by model-visible name (empty without MCP entries)."""
        key = (scope.package, prompt.name)
        cached = self._offered.get(key)
        if cached is not None:
            return cached
        offered: dict[str, OfferedTool] = {}
        for entry in prompt.tools:
            parts = split_mcp_name(tool_entry_name(entry))
            if parts is None or parts[0] not in scope.mcp_servers:
                continue
            server, wanted = parts
            listed = {t.name: t for t in await self.server_tools(scope, server)}
            if wanted != "*" and wanted not in listed:
                raise ConfigurationError(
                    f"prompt '{prompt.name}': MCP server '{server}' has no tool '{wanted}' "
                    f"(it lists: {', '.join(sorted(listed)) or 'none'}); fix the tools entry."
                )
            for name in listed if wanted == "*" else [wanted]:
                tool = listed[name]
                model_name = offered_name(server, name)
                offered[model_name] = OfferedTool(
                    name=model_name,
                    kind="mcp",
                    description=tool.description or tool.title or f"{server} tool {name}",
                    parameters=dict(tool.input_schema or {"type": "object", "properties": {}}),
                    optional=None if isinstance(entry, str) else entry.optional,
                    mcp=McpToolRef(scope.package, server, name),
                    requires_approval=isinstance(entry, PromptToolConfig)
                    and entry.requires_approval,
                )
        self._offered[key] = offered
        return offered

    async def call(
        self, scope: PackScope, ref: McpToolRef, arguments: dict[str, Any]
    ) -> ToolResult:
        """Call an MCP tool; every failure becomes an error result naming the server."""
        connection = self.connection(scope, ref.server)
        try:
            outcome = await connection.call(ref.tool, arguments)
        except McpStartTimeout as exc:
            return ToolResult(status="error", error=str(exc), error_code="mcp_timeout")
        except TimeoutError:
            return ToolResult(
                status="error",
                error=f"MCP server '{ref.server}' did not answer {ref.tool} within "
                f"{connection.definition.timeout:g} seconds.",
                error_code="mcp_timeout",
            )
        except ConfigurationError as exc:
            return ToolResult(status="error", error=str(exc), error_code="mcp_unavailable")
        except Exception as exc:
            detail = getattr(exc, "message", None) or str(exc) or type(exc).__name__
            return ToolResult(
                status="error",
                error=f"MCP server '{ref.server}' failed on {ref.tool}: {detail}",
                error_code="mcp_error",
            )
        return scrub(to_tool_result(ref.tool, outcome), connection.secret_values)

    async def close(self) -> None:
        """Stop every server."""
        connections = list(self.connections.values())
        self.connections.clear()
        await asyncio.gather(*(c.stop() for c in connections), return_exceptions=True)


def to_tool_result(tool: str, outcome: CallToolResult) -> ToolResult:
    """Map an MCP ``CallToolResult`` to the spec's tool result."""
    from mcp_types import AudioContent, EmbeddedResource, ImageContent, ResourceLink, TextContent

    texts: list[str] = []
    attachments: list[ToolAttachment] = []
    for item in outcome.content:
        if isinstance(item, TextContent):
            texts.append(item.text)
        elif isinstance(item, ImageContent):
            suffix = _MIME_SUFFIX.get(item.mime_type, "bin")
            attachments.append(
                ToolAttachment(
                    name=f"{tool}-{len(attachments) + 1}.{suffix}",
                    mime_type=item.mime_type,
                    data=item.data,
                )
            )
        elif isinstance(item, EmbeddedResource):
            text = getattr(item.resource, "text", None)
            texts.append(text if isinstance(text, str) else f"[resource {item.resource.uri}]")
        elif isinstance(item, ResourceLink):
            texts.append(f"[resource {item.uri}]")
        elif isinstance(item, AudioContent):
            texts.append(f"[audio {item.mime_type}]")
    text = "\n".join(texts)
    if not text and outcome.structured_content is not None:
        text = json.dumps(outcome.structured_content, indent=2, ensure_ascii=False, default=str)
    if outcome.is_error:
        return ToolResult(
            status="error", error=text or f"MCP tool {tool} failed", error_code="mcp_tool_error"
        )
    return ToolResult(status="success", result=text, attachments=list(attachments))


def scrub(result: ToolResult, secrets: list[str]) -> ToolResult:
    """Replace resolved ``${NAME}`` values (tokens in headers or env) in a result."""
    if not secrets:
        return result
    updates: dict[str, str] = {}
    for field_name in ("result", "error"):
        value = getattr(result, field_name)
        if isinstance(value, str):
            updates[field_name] = redact(value, secrets)
    return result.model_copy(update=updates)


async def offered_mcp_tools(
    kernel: Kernel, thread: ThreadRef, scope: PackScope, prompt: PromptDefinition
) -> dict[str, OfferedTool]:
    """The MCP tools a step offers: the prompt's, gated by their ``optional`` flags."""
    tools = await kernel.mcp.offered(scope, prompt)
    return {
        name: tool
        for name, tool in tools.items()
        if tool.optional is None or flag_enabled(kernel.env_of(thread, tool.optional))
    }


def resolve_mcp_name(scope: PackScope, name: str) -> OfferedTool | None:
    """An MCP tool by its ``"<server>.<tool>"`` name, for ``state.invoke_tool``.

    The server validates the arguments.
    """
    parts = split_mcp_name(name)
    if parts is None or parts[0] not in scope.mcp_servers or parts[1] in ("", "*"):
        return None
    server, tool = parts
    return OfferedTool(
        name=offered_name(server, tool),
        kind="mcp",
        description="",
        parameters={"type": "object", "properties": {}},
        mcp=McpToolRef(scope.package, server, tool),
    )
