"""A real MCP server (the ``mcp`` SDK's MCPServer, formerly FastMCP) used by the MCP tests.

Run ``python tests/support_mcp_server.py stdio`` to serve over stdin/stdout, or
``python tests/support_mcp_server.py http`` to serve streamable HTTP on 127.0.0.1 (a free port,
printed as ``PORT <n>`` on stdout). The HTTP server requires the ``Authorization`` header to equal
the ``MCP_TEST_TOKEN`` environment variable when that is set. ``MCP_START_DELAY`` (seconds)
makes the server sleep before it serves, to stand for a server that is slow to start.
"""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image

# A 1x1 transparent PNG.
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)

server = MCPServer("testing", log_level="CRITICAL")


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@server.tool(description="Echo the text back, with the server's greeting variable.")
def echo(text: str) -> str:
    """Echo."""
    return f"{os.environ.get('GREETING', 'echo')}: {text}"


@server.tool(description="The server's process id.")
def pid() -> str:
    """Pid."""
    return str(os.getpid())


@server.tool(description="A one-pixel image.")
def pixel() -> Image:
    """Return an image."""
    return Image(data=PIXEL, format="png")


@server.tool(description="Answers after the given number of seconds.")
async def slow(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "finally"


@server.tool(description="Always fails.")
def broken(reason: str) -> str:
    """Raise."""
    raise ToolError(f"broken on purpose: {reason}")


async def _serve_http() -> None:
    import uvicorn

    app = server.streamable_http_app()
    token = os.environ.get("MCP_TEST_TOKEN")
    if token:
        inner = app

        async def guarded(scope, receive, send):  # type: ignore[no-untyped-def]
            if scope["type"] == "http":
                headers = dict(scope.get("headers") or [])
                if headers.get(b"authorization", b"").decode() != token:
                    await send({"type": "http.response.start", "status": 401, "headers": []})
                    await send({"type": "http.response.body", "body": b"unauthorized"})
                    return
            await inner(scope, receive, send)

        app = guarded  # type: ignore[assignment]
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])


if __name__ == "__main__":
    time.sleep(float(os.environ.get("MCP_START_DELAY", "0")))
    if sys.argv[1:] == ["http"]:
        asyncio.run(_serve_http())
    else:
        server.run("stdio")
