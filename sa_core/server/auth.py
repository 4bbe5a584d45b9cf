"""Bearer API keys: a guard on every route, and the security scheme of the OpenAPI schema.

Keys are stored hashed (``runtime.store``); a request presents ``Authorization: Bearer <key>``.
Browsers cannot set headers on ``EventSource`` or ``WebSocket``, so the two streaming routes
also accept ``?access_token=<key>``. Routes marked ``opt={"sa_public": True}`` (pack endpoints
declared ``public``) skip the check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException
from litestar.handlers.base import BaseRouteHandler
from litestar.openapi.spec import Components, SecurityScheme

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from sa_core.runtime import Runtime
    from sa_core.store import Store

SCHEME = "BearerKey"
SECURITY: list[dict[str, list[str]]] = [{SCHEME: []}]
COMPONENTS = Components(
    security_schemes={
        SCHEME: SecurityScheme(
            type="http",
            scheme="bearer",
            description="An API key from `sa keys create` (or printed by the first `sa serve`).",
        )
    }
)
PUBLIC = "sa_public"
QUERY_TOKEN = "sa_query_token"


def bearer_token(
    connection: ASGIConnection[Any, Any, Any, Any], *, allow_query: bool
) -> str | None:
    """Return the presented key: the ``Authorization: Bearer`` header, else ``?access_token=``."""
    header = connection.headers.get("authorization")
    if header:
        scheme, _, token = header.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
        return None
    if allow_query:
        query_token = connection.query_params.get("access_token")
        return str(query_token) if query_token else None
    return None


async def check_key(
    runtime: Runtime, connection: ASGIConnection[Any, Any, Any, Any], *, allow_query: bool
) -> None:
    """Raise ``NotAuthorizedException`` unless the connection presents an active key."""
    token = bearer_token(connection, allow_query=allow_query)
    if token is None:
        raise NotAuthorizedException(
            "Send 'Authorization: Bearer <key>'; create a key with 'sa keys create'."
        )
    if await runtime.store.verify_api_key(token) is None:
        raise NotAuthorizedException("Unknown or revoked API key.")


def api_key_guard(
    runtime: Runtime,
) -> Callable[[ASGIConnection[Any, Any, Any, Any], BaseRouteHandler], Awaitable[None]]:
    """Build a Litestar guard that accepts the active API keys of ``runtime``'s store."""

    async def guard(
        connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler
    ) -> None:
        if not handler.opt.get(PUBLIC):
            await check_key(runtime, connection, allow_query=bool(handler.opt.get(QUERY_TOKEN)))

    return guard


async def ensure_first_key(store: Store, name: str = "default") -> str | None:
    """Create a key when the database has never had one; returns the plaintext, else None.

    A database whose keys were all revoked gets no new one: revoking every key locks the API.
    """
    if await store.list_api_keys():
        return None
    token, _ = await store.create_api_key(name)
    return token
