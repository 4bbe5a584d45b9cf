"""Bearer API keys: a guard on every route, and the security scheme of the OpenAPI schema.

Keys are stored hashed (``runtime.store``); a request presents ``Authorization: Bearer <key>``.
Browsers cannot set headers on ``EventSource`` or ``WebSocket``, so the two streaming routes
also accept ``?access_token=<key>``. Routes marked ``opt={"sa_public": True}`` (pack endpoints
declared ``public``) skip the check.

A key may be scoped (:class:`~sa_core.store.ApiKeyRow`): limited to some packages, and
read-only. :func:`authorize` is the one decision: a package the key does not open answers 404
exactly as a package that is not served; a read-only key's write (any method but ``GET``,
``HEAD``, ``OPTIONS``, unless the route is marked ``sa_read_by_nature``) answers 403 saying
what the key may do; routes marked ``sa_admin``
(managing keys) need a key with full access. The REST guard, the WebSocket stream and each
protocol's own key check (``/v1``, ``/mcp``, ``/a2a``) call it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException
from litestar.handlers.base import BaseRouteHandler
from litestar.openapi.spec import Components, SecurityScheme

from sa_core.server.errors import ApiError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from litestar.types import Scope

    from sa_core.runtime import Runtime
    from sa_core.store import ApiKeyRow, Store

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
ADMIN = "sa_admin"
"""Route option: only a key with full access (every package, read-write) may call it."""
READ_BY_NATURE = "sa_read_by_nature"
"""Route option: a method other than ``GET`` that only reads (a search whose query is the
body): a read-only key may call it."""
WRITES_CHECKED_INSIDE = "sa_writes_checked_inside"
"""Route option: the handler tells a read-only key's reads from its writes itself (JSON-RPC
over ``POST``: MCP's ``tools/list`` reads, its ``tools/call`` writes)."""
KEY_STATE = "sa_api_key"
"""Where the verified key is kept in the connection scope's ``state``."""
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
READS = "list and read packages, threads, messages, files, logs and live streams"
WRITES = (
    "create threads, send messages, approve tool calls, set values or variables, stop, "
    "terminate or delete threads, or write files"
)


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
) -> ApiKeyRow:
    """Return the connection's active key (kept for the handler, :func:`connection_key`).

    Raises:
        NotAuthorizedException: no key, or an unknown or revoked one.
    """
    token = bearer_token(connection, allow_query=allow_query)
    if token is None:
        raise NotAuthorizedException(
            "Send 'Authorization: Bearer <key>'; create a key with 'sa keys create'."
        )
    key = await runtime.store.verify_api_key(token)
    if key is None:
        raise NotAuthorizedException("Unknown or revoked API key.")
    connection.scope["state"][KEY_STATE] = key
    return key


def connection_key(scope: Scope | Mapping[str, Any]) -> ApiKeyRow | None:
    """The key the guard verified for this connection (``None`` on public routes)."""
    state = scope.get("state")
    return None if state is None else state.get(KEY_STATE)


def no_package_detail(package: str) -> str:
    """What a request to a package that is not served (or not opened by the key) is told."""
    return f"No package '{package}' is served here; GET /api/packages lists them."


def read_only_detail(key: ApiKeyRow, attempted: str) -> str:
    """The refusal of a read-only key's write: what the key may do, and what it tried."""
    return (
        f"This API key ({key.describe_access()}) may {READS}, but not {WRITES}. {attempted} "
        "needs a read-write key."
    )


def authorize(
    key: ApiKeyRow,
    *,
    method: str,
    path: str,
    package: str | None = None,
    opt: Mapping[str, Any] | None = None,
) -> None:
    """Refuse what a scoped key may not do on a route.

    Args:
        key: the verified key.
        method: the HTTP method (``GET`` for a WebSocket).
        path: the request's path, named in the refusal.
        package: the package the route belongs to, if any.
        opt: the route's options (``sa_admin``, ``sa_read_by_nature``,
            ``sa_writes_checked_inside``).

    Raises:
        ApiError: 404 ``not_found`` for a package the key does not open (as for one not
            served), 403 ``admin_only`` for a route needing full access, 403
            ``read_only_key`` for a read-only key's write.
    """
    if key.packages is None and not key.read_only:
        return
    if package is not None and not key.allows(package):
        raise ApiError(404, "not_found", no_package_detail(package))
    options = opt or {}
    if options.get(ADMIN):
        raise ApiError(
            403,
            "admin_only",
            f"{method} {path} needs an API key with full access (every package, read-write); "
            f"this key is {key.describe_access()}.",
        )
    if (
        key.read_only
        and method not in READ_METHODS
        and not options.get(READ_BY_NATURE)
        and not options.get(WRITES_CHECKED_INSIDE)
    ):
        raise ApiError(403, "read_only_key", read_only_detail(key, f"{method} {path}"))


def api_key_guard(
    runtime: Runtime, package: str | None = None
) -> Callable[[ASGIConnection[Any, Any, Any, Any], BaseRouteHandler], Awaitable[None]]:
    """Build a Litestar guard that accepts the active API keys of ``runtime``'s store.

    Args:
        runtime: the runtime whose store holds the keys.
        package: the package whose routes the guard protects (``None``: routes of no package).
    """

    async def guard(
        connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler
    ) -> None:
        opt = handler.opt
        if opt.get(PUBLIC):
            return
        key = await check_key(runtime, connection, allow_query=bool(opt.get(QUERY_TOKEN)))
        if key.packages is not None or key.read_only:
            scope = connection.scope
            method = str(scope.get("method", "GET"))
            authorize(key, method=method, path=scope["path"], package=package, opt=opt)

    return guard


async def ensure_first_key(store: Store, name: str = "default") -> str | None:
    """Create a key when the database has never had one; returns the plaintext, else None.

    A database whose keys were all revoked gets no new one: revoking every key locks the API.
    """
    if await store.list_api_keys():
        return None
    token, _ = await store.create_api_key(name)
    return token
