"""A read-only key on a JSON-RPC endpoint (MCP, A2A): its reads pass, its writes get 403.

JSON-RPC travels in ``POST`` bodies whether a call reads or writes, so the REST rule (every
method but ``GET`` writes) cannot tell MCP's ``tools/list`` from its ``tools/call``. For a
read-only key only, :func:`refuse_writes` reads the body first and lets the request through
when every call in it (one, or a batch) is a read the endpoint names; any other call is
answered with 403 and a JSON-RPC error saying what the key may do. The body is then handed on
unchanged. Keys that may write pay nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from litestar.types import Receive, ReceiveMessage, Scope, Send

from sa_core.server.auth import read_only_detail
from sa_core.store import ApiKeyRow

__all__ = ["READ_ONLY_CODE", "refuse_writes"]

READ_ONLY_CODE = -32003
"""The JSON-RPC error code of a read-only key's write (in the range JSON-RPC leaves to servers)."""


async def refuse_writes(
    key: ApiKeyRow, scope: Scope, receive: Receive, send: Send, is_read: Callable[[str], bool]
) -> Receive | None:
    """Answer a read-only key's JSON-RPC write with 403; else return how to read the body.

    Args:
        key: the request's verified key.
        scope: the request's ASGI scope.
        receive: the request's ASGI receive.
        send: the request's ASGI send.
        is_read: whether a JSON-RPC method only reads.

    Returns:
        The ``receive`` to serve the request with (it replays a body read here), or ``None``
        when the request was refused.
    """
    if not key.read_only or scope.get("method") != "POST":
        return receive
    body = await _read_body(receive)
    calls = _calls(body)
    writes = [call for call in calls if not is_read(str(call.get("method")))]
    if not writes:
        return _replay(body, receive)
    first = writes[0]
    message = read_only_detail(key, f"The JSON-RPC method {first.get('method')!r}")
    error = {"code": READ_ONLY_CODE, "message": message}
    payload = json.dumps({"jsonrpc": "2.0", "id": first.get("id"), "error": error}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
    ]
    start: Any = {"type": "http.response.start", "status": 403, "headers": headers}
    done: Any = {"type": "http.response.body", "body": payload}
    await send(start)
    await send(done)
    return None


async def _read_body(receive: Receive) -> bytes:
    parts: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(parts)


def _calls(body: bytes) -> list[dict[str, Any]]:
    """The JSON-RPC calls of a body (one or a batch); none when it is not JSON-RPC."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return []
    items = parsed if isinstance(parsed, list) else [parsed]
    return [item for item in items if isinstance(item, dict) and "method" in item]


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that gives ``body`` once, then defers to the connection's own."""
    pending = True

    async def replayed() -> ReceiveMessage:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
