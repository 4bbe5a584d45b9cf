"""Paths under ``/v1`` that this server does not serve: a 404 in OpenAI's shape naming them.

The official clients turn it into their usual exception (``openai.NotFoundError``) carrying
our message, which names the method and path asked for and lists the routes served under
``/v1``, instead of the framework's own error shape, which they cannot read. A method that a
served path does not take (``DELETE /v1/models``) is answered the same way, as OpenAI does.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, Response
from litestar.routes import HTTPRoute

from sa_core.server.protocols.openai.errors import error_body

__all__ = ["OPENAI_PREFIX", "is_openai_path", "unrouted_response"]

OPENAI_PREFIX = "/v1"
_LISTED = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})


def is_openai_path(path: str) -> bool:
    """Whether ``path`` lies under the OpenAI-compatible API's prefix."""
    return path == OPENAI_PREFIX or path.startswith(OPENAI_PREFIX + "/")


def served_routes(request: Request[Any, Any, Any]) -> list[str]:
    """``METHOD /v1/...`` for every route the app serves under the prefix, sorted by path."""
    served = []
    for route in request.app.routes:
        if isinstance(route, HTTPRoute) and is_openai_path(route.path_format):
            methods = sorted(route.methods & _LISTED)
            served += [(route.path_format, method) for method in methods]
    return [f"{method} {path}" for path, method in sorted(served)]


def unrouted_response(request: Request[Any, Any, Any]) -> Response[Any]:
    """A 404 naming the method and path asked for and the routes that are served."""
    asked = f"{request.method} {request.url.path}"
    routes = ", ".join(served_routes(request)) or "nothing"
    message = (
        f"Invalid URL ({asked}): this server does not serve it. Its OpenAI-compatible API "
        f"serves {routes}."
    )
    body = error_body(message, kind="invalid_request_error", code="not_found")
    return Response(content=body, status_code=404, media_type="application/json")
