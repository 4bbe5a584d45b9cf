"""What a pack's thread endpoint receives and may return (no web framework needed).

A handler ``handler(request, state)`` (sync or async) gets an :class:`EndpointRequest` and the
thread's ``ThreadState``. It returns a dict or list (JSON), a str (``text/plain``), bytes
(``application/octet-stream``), None (204), or an :class:`EndpointResponse` for full control.
It may raise :class:`EndpointError` to answer a JSON error::

    async def get_item(request: EndpointRequest, state: ThreadState) -> dict[str, str]:
        data = await state.read_file(f"/items/{request.params['item_id']}.txt")
        if data is None:
            raise EndpointError(404, "item_not_found", "No such item.")
        return {"item": data.decode()}
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from sa_core.errors import EndpointError

__all__ = ["EndpointError", "EndpointRequest", "EndpointResponse"]


@dataclass(frozen=True)
class EndpointRequest:
    """An HTTP request to a thread endpoint.

    Attributes:
        method: ``GET``, ``POST``, ...
        path: the URL path.
        params: the path parameters of the endpoint's path (``{item_id}``), and ``thread_id``.
        query: query parameters (the last value of repeated ones).
        headers: request headers, lower-case names.
        body: the raw request body.

    """

    method: str
    path: str
    params: dict[str, str] = field(default_factory=dict)
    query: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    def text(self) -> str:
        """Decode the body as UTF-8 (invalid bytes replaced)."""
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        """Parse the body as JSON.

        Raises:
            EndpointError: 400 when the body is not JSON.

        """
        try:
            return json.loads(self.body or b"null")
        except ValueError:
            raise EndpointError(
                400, "invalid_json", "The request body is not valid JSON."
            ) from None


@dataclass
class EndpointResponse:
    """A full response: status, headers, media type and a body (JSON-able, str or bytes)."""

    body: Any = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    media_type: str | None = None
