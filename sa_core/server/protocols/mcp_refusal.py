"""An MCP request without a valid API key: refused so that MCP clients show our message.

MCP hosts read a ``401`` as "this server uses MCP's OAuth authorization": the MCP Inspector,
the TypeScript SDK and desktop hosts then look for ``/.well-known/oauth-protected-resource``
and an authorization server, try to register a client, and report that dance's failure
("Dynamic Client Registration rejected (HTTP 404)") instead of why the request was refused.
This server takes a static API key in a header and no OAuth, so the refusal is a ``403``
(which starts no flow) whose body is a JSON-RPC error: the Python SDK raises it as an
``MCPError`` carrying the message, and the TypeScript SDK shows the body's text. The message
says how to pass the key.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, Response
from litestar.exceptions import NotAuthorizedException

from sa_core.server.auth import bearer_token

__all__ = ["MCP_KEY_REQUIRED", "refuse_without_key"]

MCP_KEY_REQUIRED = -32001
"""The JSON-RPC error code of the refusal (in the range JSON-RPC leaves to servers)."""

HOW_TO = (
    "This MCP server takes an API key of the server in a header, not OAuth: configure your MCP "
    "host to send 'Authorization: Bearer <key>' (create a key with 'sa keys create')."
)


def refuse_without_key(
    request: Request[Any, Any, Any], exc: NotAuthorizedException
) -> Response[Any]:
    """Answer a request that presented no key, or an unknown or revoked one."""
    sent = bearer_token(request, allow_query=False) is not None
    reason = exc.detail if sent else "No API key was sent."
    message = f"{reason.rstrip('.')}. {HOW_TO}"
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": MCP_KEY_REQUIRED, "message": message}}
    return Response(content=body, status_code=403, media_type="application/json")
