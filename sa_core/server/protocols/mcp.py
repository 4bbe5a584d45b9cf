"""The MCP server: every hosted entry agent as an MCP tool, over streamable HTTP.

Mounted at ``/mcp`` (every package) and at ``/api/packages/{package}/mcp`` (one package) by
:class:`~sa_core.server.app.StandardAgentsPlugin`, behind the API's bearer keys. Each entry
agent is a tool named ``{package}__{agent}`` taking ``message`` and an optional ``thread_id``;
a call runs one turn (:mod:`sa_core.server.protocols.mcp_turns`) and returns the answer and the
thread id, while progress notifications say what the agent is doing.

A key limited to some packages sees and calls only their agents (another package's tool is
unknown, its ``/api/packages/{package}/mcp`` a 404); a read-only key may list the tools but
not call them (403, :mod:`sa_core.server.rpc_writes`).

The transport is the ``mcp`` SDK's streamable HTTP in stateless mode: every request is served
on its own (no session to keep), so any worker of a PostgreSQL deployment answers any request.
The SDK is an optional extra, imported only when a request arrives; without it the routes are
left out (:func:`mcp_unavailable`).
"""

from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from litestar.exceptions import NotAuthorizedException
from litestar.handlers import ASGIRouteHandler, asgi
from litestar.types import Receive, Scope, Send

from sa_core.runtime import Runtime
from sa_core.server.auth import WRITES_CHECKED_INSIDE, connection_key
from sa_core.server.protocols.mcp_progress import describe
from sa_core.server.protocols.mcp_refusal import refuse_without_key
from sa_core.server.protocols.mcp_turns import TurnError, open_thread, run_turn
from sa_core.server.rpc_writes import refuse_writes
from sa_core.server.streaming import StreamFrame, StreamHub
from sa_core.store import ApiKeyRow

if TYPE_CHECKING:
    import mcp_types
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel.server import Server

    from sa_core.registry import PackScope
    from sa_core.spec import AgentDefinition

logger = logging.getLogger(__name__)

SEPARATOR = "__"
"""Between the package and the agent in a tool name (MCP tool names allow no slash)."""

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": {"type": "string", "description": "What to say to the agent."},
        "thread_id": {
            "type": "string",
            "description": "Continue this conversation (a thread_id an earlier call returned); "
            "leave it out to start a new one.",
        },
    },
    "required": ["message"],
    "additionalProperties": False,
}
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "description": "The agent's final answer of the turn."},
        "thread_id": {"type": "string", "description": "The conversation, to continue it."},
    },
    "required": ["answer", "thread_id"],
}
READS = frozenset({"initialize", "ping", "tools/list"})
"""The MCP methods that only read (notifications too); a read-only key may call nothing else."""
INSTRUCTIONS = (
    "Each tool is an agent. A call sends your message, runs one turn of the agent and returns "
    "its answer with a thread_id; pass that thread_id to continue the same conversation."
)


def mcp_unavailable() -> str | None:
    """Why the MCP server is not served (the SDK is not installed), or ``None`` when it is."""
    if importlib.util.find_spec("mcp") is None:
        return (
            "the MCP server (/mcp) is off: the mcp SDK is not installed "
            "(pip install 'standard-agents[mcp]')"
        )
    return None


def mcp_handlers(runtime: Runtime, hub: StreamHub, package: str | None = None) -> list[Any]:
    """The ASGI route at ``/mcp`` of a router serving ``package`` (every one when ``None``).

    Empty when the SDK is not installed. The router's guards (the API keys) apply to it; a
    request they refuse is answered for MCP clients (:mod:`.mcp_refusal`). A read-only key's
    calls are told apart here: it may list the tools, not call them.
    """
    if mcp_unavailable() is not None:
        return []
    endpoint = McpEndpoint(runtime, hub, package)

    async def mcp_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        key = connection_key(scope)
        if key is not None and key.read_only:
            replay = await refuse_writes(key, scope, receive, send, is_read)
            if replay is None:
                return
            receive = replay
        await endpoint(scope, receive, send)

    handler: ASGIRouteHandler = asgi(
        "/mcp",
        is_mount=True,
        copy_scope=True,
        exception_handlers={NotAuthorizedException: refuse_without_key},
        opt={WRITES_CHECKED_INSIDE: True},
    )(mcp_endpoint)
    return [handler]


@dataclass(frozen=True, slots=True)
class AgentTool:
    """An entry agent offered as a tool."""

    package: str
    agent: str
    definition: AgentDefinition


class McpEndpoint:
    """Serves MCP requests for the entry agents of one package, or of every package."""

    def __init__(self, runtime: Runtime, hub: StreamHub, package: str | None) -> None:
        self.runtime = runtime
        self.hub = hub
        self.package = package
        self._server: Server[Any] | None = None

    @property
    def server(self) -> Server[Any]:
        """The SDK's low-level server with this endpoint's handlers (built once)."""
        if self._server is None:
            from mcp.server.lowlevel.server import Server

            from sa_core import __version__

            name = "standard-agents" + (f"/{self.package}" if self.package else "")
            self._server = Server(
                name,
                version=__version__,
                instructions=INSTRUCTIONS,
                on_list_tools=self.list_tools,
                on_call_tool=self.call_tool,
            )
        return self._server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one HTTP request, statelessly, with a session manager of its own."""
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        manager = StreamableHTTPSessionManager(app=self.server, stateless=True)
        async with manager.run():
            await manager.handle_request(dict(scope), receive, send)  # type: ignore[arg-type]

    def agents(self, key: ApiKeyRow | None) -> dict[str, AgentTool]:
        """The tools served here to ``key``, by name: each entry agent of the package(s).

        Only the packages ``key`` opens; none without a key (the guard always gives one).
        """
        if key is None:
            return {}
        scopes = self.runtime.registry.scopes
        if self.package is None:
            chosen = [scope for scope in scopes.values() if key.allows(scope.package)]
        else:
            chosen = [scopes[self.package]] if self.package in scopes else []
        tools: dict[str, AgentTool] = {}
        for scope in chosen:
            for name in scope.pack.entry_agent_names():
                if name in scope.agents:
                    tool = AgentTool(scope.package, name, scope.agents[name])
                    tools[f"{scope.package}{SEPARATOR}{name}"] = tool
        return tools

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListToolsResult:
        """``tools/list``: every entry agent, in one page."""
        import mcp_types

        scopes = self.runtime.registry.scopes
        tools = [
            mcp_types.Tool(
                name=name,
                title=tool.definition.title or tool.agent,
                description=describe_agent(scopes[tool.package], tool.definition),
                input_schema=INPUT_SCHEMA,
                output_schema=OUTPUT_SCHEMA,
                annotations=mcp_types.ToolAnnotations(read_only_hint=False, open_world_hint=True),
            )
            for name, tool in self.agents(request_key(ctx)).items()
        ]
        return mcp_types.ListToolsResult(tools=tools)

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult:
        """``tools/call``: run one turn of the agent and return its answer and thread id."""
        tool = self.agents(request_key(ctx)).get(params.name)
        if tool is None:
            return tool_error(f"Unknown tool {params.name!r}; tools/list names the agents.")
        arguments = dict(params.arguments or {})
        problem = check_arguments(arguments)
        if problem is not None:
            return tool_error(problem)
        progress = Progress(ctx)
        try:
            thread = await open_thread(
                self.runtime, tool.package, tool.agent, arguments.get("thread_id")
            )
            outcome = await run_turn(
                self.runtime, self.hub, thread, arguments["message"], progress.frame
            )
        except TurnError as exc:
            return tool_error(str(exc))
        except Exception:
            logger.exception("MCP call of %s failed", params.name)
            return tool_error("The turn could not run: internal error (see the server log).")
        return tool_answer(outcome.answer, outcome.thread_id)


def is_read(method: str) -> bool:
    """Whether an MCP method only reads (a read-only key may call it)."""
    return method in READS or method.startswith("notifications/")


def request_key(ctx: ServerRequestContext[Any]) -> ApiKeyRow | None:
    """The API key the guard verified for the HTTP request carrying this MCP request."""
    request = ctx.request
    scope = getattr(request, "scope", None)
    return None if scope is None else connection_key(scope)


class Progress:
    """Progress notifications of one call, one per frame worth telling.

    Without a progress token from the client, reporting does nothing.
    """

    def __init__(self, ctx: ServerRequestContext[Any]) -> None:
        self._ctx = ctx
        self._count = 0

    async def frame(self, frame: StreamFrame) -> None:
        """Report what ``frame`` shows the agent doing, if anything."""
        line = describe(frame)
        if line is None:
            return
        self._count += 1
        await self._ctx.session.report_progress(self._count, None, line)


def describe_agent(scope: PackScope, agent: AgentDefinition) -> str:
    """A tool description: the agent's title and description, else its prompt's."""
    parts = [p for p in (agent.title, agent.description) if p]
    if not parts:
        prompt = scope.prompts.get(agent.side_a.prompt)
        if prompt is not None and prompt.tool_description:
            parts.append(prompt.tool_description)
    if not parts:
        parts.append(f"The agent {agent.name} of package {scope.package}.")
    return ". ".join(p.rstrip(".") for p in parts) + ". " + INSTRUCTIONS


def check_arguments(arguments: dict[str, Any]) -> str | None:
    """Why the arguments do not fit the input schema, or ``None``."""
    unknown = sorted(set(arguments) - {"message", "thread_id"})
    if unknown:
        return f"Unknown argument(s) {', '.join(unknown)}; the tool takes message and thread_id."
    message = arguments.get("message")
    if not isinstance(message, str) or not message.strip():
        return "The argument 'message' is required: the text to send to the agent."
    thread_id = arguments.get("thread_id")
    if thread_id is not None and not isinstance(thread_id, str):
        return "The argument 'thread_id' must be a string (a thread_id an earlier call returned)."
    return None


def tool_answer(answer: str, thread_id: str) -> mcp_types.CallToolResult:
    """A successful call: the answer and the thread id, as text and as structured content."""
    import mcp_types

    return mcp_types.CallToolResult(
        content=[
            mcp_types.TextContent(type="text", text=answer),
            mcp_types.TextContent(type="text", text=f"thread_id: {thread_id}"),
        ],
        structured_content={"answer": answer, "thread_id": thread_id},
    )


def tool_error(text: str) -> mcp_types.CallToolResult:
    """A failed call (``isError``): the cause as text."""
    import mcp_types

    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text=text)], is_error=True
    )
