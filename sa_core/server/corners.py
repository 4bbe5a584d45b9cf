"""Routing corners of the API: ``OPTIONS`` answers, and requests to unknown packages.

* Litestar builds the automatic ``OPTIONS`` answer of a path from the first handler registered
  on it, so ``OPTIONS .../messages`` said ``GET, OPTIONS`` although the path also takes
  ``POST``. :func:`allow_header_middleware` rewrites the header from the app's final route map.
* A WebSocket to ``/api/packages/<unknown>/threads/<id>/ws`` matched no route and was refused
  at the handshake (HTTP 403), which a browser cannot read. :func:`unknown_package_websocket`
  accepts it and closes with 4404 and a reason, like the other WebSocket refusals (4401 for a
  bad key, checked first).
* A request no route matches under ``/api/packages/`` gets a 404 saying which part is wrong:
  the package (with the closest served name) or the route (:func:`package_route_detail`).
"""

from __future__ import annotations

import difflib
from typing import Any

from litestar import Litestar, Request, WebSocket, websocket
from litestar.enums import ScopeType
from litestar.exceptions import NotAuthorizedException
from litestar.params import FromPath
from litestar.routes import HTTPRoute
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from sa_core.runtime import Runtime
from sa_core.server.auth import PUBLIC, check_key
from sa_core.server.errors import UnmatchedRouteDetail

PACKAGES_PREFIX = "/api/packages/"


def allowed_methods(app: Litestar, path_template: str) -> list[str]:
    """Every HTTP method the app answers on a path (``OPTIONS`` included).

    Args:
        app: the app.
        path_template: the matched route's template as the router reports it
            (``/api/packages/a/threads/{thread_id}/messages``, parameter types dropped).
    """
    methods: set[str] = set()
    for route in app.routes:
        if isinstance(route, HTTPRoute) and route.path_format == path_template:
            methods.update(str(m) for m in route.methods)
    return sorted(methods)


def allow_header_middleware(app: ASGIApp) -> ASGIApp:
    """Answer ``OPTIONS`` with an ``Allow`` header listing every method of the path."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP or scope.get("method") != "OPTIONS":
            await app(scope, receive, send)
            return
        template = scope.get("path_template")
        methods = allowed_methods(Litestar.from_scope(scope), template) if template else []

        async def send_with_allow(message: Message) -> None:
            if message["type"] == "http.response.start" and methods:
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"allow"]
                headers.append((b"allow", ", ".join(methods).encode()))
                message = {**message, "headers": headers}
            await send(message)

        await app(scope, receive, send_with_allow)

    return middleware


def unknown_package_websocket(runtime: Runtime) -> Any:
    """The WebSocket route that refuses packages which are not served, with close code 4404."""

    @websocket(
        "/api/packages/{package:str}/threads/{thread_id:str}/ws",
        opt={PUBLIC: True},
        name="sa_unknown_package_ws",
    )
    async def refuse(socket: WebSocket[Any, Any, Any], package: FromPath[str]) -> None:
        await socket.accept()
        try:
            await check_key(runtime, socket, allow_query=True)
        except NotAuthorizedException as exc:
            await socket.close(code=4401, reason=str(exc.detail)[:120])
            return
        hint = did_you_mean(package, sorted(runtime.registry.scopes))
        reason = f"No package '{package}' is served here{hint}."
        await socket.close(code=4404, reason=reason.encode()[:120].decode(errors="ignore"))

    return refuse


def did_you_mean(package: str, served: list[str]) -> str:
    """`` (did you mean 'x'?)`` when a served name is close to ``package``, else ``""``."""
    close = difflib.get_close_matches(package, served, n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def package_route_detail(runtime: Runtime) -> UnmatchedRouteDetail:
    """What a 404 says about an unmatched ``/api/packages/...`` URL of ``runtime``'s server.

    The answer names the package when it is not served (with the closest served name, unless
    the app hides its schema, which lists the packages anyway), else the route; None for a path
    elsewhere.
    """

    def detail(request: Request[Any, Any, Any]) -> str | None:
        path = request.url.path
        if not path.startswith(PACKAGES_PREFIX):
            return None
        package = path[len(PACKAGES_PREFIX) :].split("/", 1)[0]
        served = list(runtime.registry.scopes)
        if package in served:
            return (
                f"Package '{package}' has no route {request.method} {path}; the schema at "
                f"/schema/openapi.json lists its routes."
            )
        hint = did_you_mean(package, served) if request.app.openapi_config is not None else ""
        return f"No package '{package}' is served here{hint}; GET /api/packages lists them."

    return detail
