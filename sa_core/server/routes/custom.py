"""Thread endpoints packs define, mounted at ``/api/packages/{package}/threads/{id}/{path}``."""

from __future__ import annotations

import inspect
import re
from typing import Any

from litestar import Request, Response, route
from litestar.handlers import HTTPRouteHandler

from sa_core.errors import ConfigurationError, EndpointError
from sa_core.registry import PackScope
from sa_core.server.auth import PUBLIC
from sa_core.server.context import ThreadDep
from sa_core.server.endpoints import EndpointRequest, EndpointResponse
from sa_core.server.errors import ApiError, errors
from sa_core.server.openapi import pack_endpoint_operation
from sa_core.spec import ThreadEndpointDefinition

RESERVED = frozenset(
    {
        "messages",
        "stream",
        "ws",
        "stop",
        "terminate",
        "logs",
        "children",
        "effects",
        "variables",
        "files",
        "grep",
        "find",
    }
)
_PARAM = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _route_path(package: str, endpoint: ThreadEndpointDefinition) -> str:
    path = endpoint.path.strip("/")
    problem = None
    if not path:
        problem = "its path is empty; give it one like 'summary' or 'items/{item_id}'"
    elif path.split("/")[0] in RESERVED:
        problem = f"its first path segment '{path.split('/')[0]}' is a built-in thread route"
    elif "thread_id" in _PARAM.findall(path):
        problem = "'thread_id' is taken by the thread's id; name the parameter differently"
    elif "{" in _PARAM.sub("", path) or "}" in _PARAM.sub("", path):
        problem = "path parameters are written {name} (letters, digits, underscores)"
    if problem:
        raise ConfigurationError(
            f"Pack '{package}': thread endpoint '{endpoint.name}' cannot be mounted: {problem}."
        )
    return "/threads/{thread_id:str}/" + _PARAM.sub(r"{\1:str}", path)


def _to_response(result: Any) -> Response[Any]:
    if isinstance(result, EndpointResponse):
        body, media = result.body, result.media_type
        if media is None:
            media = _media_for(body)
        return Response(
            content=b"" if body is None else body,
            status_code=result.status,
            headers=result.headers,
            media_type=media,
        )
    if result is None:
        return Response(content=b"", status_code=204)
    return Response(content=result, media_type=_media_for(result))


def _media_for(body: Any) -> str:
    if isinstance(body, bytes | bytearray):
        return "application/octet-stream"
    if isinstance(body, str):
        return "text/plain"
    return "application/json"


def _handler(package: str, endpoint: ThreadEndpointDefinition) -> HTTPRouteHandler:
    async def call_endpoint(request: Request[Any, Any, Any], thread: ThreadDep) -> Response[Any]:
        incoming = EndpointRequest(
            method=request.method,
            path=request.url.path,
            params={k: str(v) for k, v in request.path_params.items()},
            query={k: v for k, v in request.query_params.items()},
            headers=dict(request.headers.items()),
            body=await request.body(),
        )
        try:
            result = endpoint.handler(incoming, thread)
            if inspect.isawaitable(result):
                result = await result
        except EndpointError as exc:
            raise ApiError(exc.status, exc.error, exc.detail) from None
        return _to_response(result)

    with_body = endpoint.method in ("POST", "PUT", "PATCH")
    return route(
        _route_path(package, endpoint),
        http_method=[endpoint.method],
        operation_class=pack_endpoint_operation(with_body=with_body, public=endpoint.public),
        opt={PUBLIC: endpoint.public},
        responses=errors(404),
        summary=endpoint.name,
        description=endpoint.description or None,
        name=f"{package}:{endpoint.name}",
        status_code=200,
    )(call_endpoint)


def endpoint_handlers(scope: PackScope) -> list[HTTPRouteHandler]:
    """Route handlers for a package's thread endpoints.

    Raises:
        ConfigurationError: an endpoint's path is empty, collides with a built-in route or
            reuses ``thread_id``.

    """
    return [_handler(scope.package, endpoint) for endpoint in scope.endpoints]
