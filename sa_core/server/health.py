"""``GET /health``: readiness for load balancers, orchestrators and start-up scripts.

``200 {"status": "ok", "database": "sqlite"}`` once the runtime is started and its database
answers a trivial query; ``503 {"status": "unavailable", "detail": ...}`` before the runtime
started, while it closes, or when the database does not answer within
:data:`PING_TIMEOUT` seconds. No API key is needed, and the answer names no key, URL, host,
pack or error message (only the kind of database and, on failure, the error's class), so it
is safe to expose to a probe. With ``sa serve --workers N`` every worker answers for itself:
the probe reaches whichever worker the kernel hands the connection to.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from litestar import Response, get
from litestar.handlers import HTTPRouteHandler

from sa_core.server.auth import PUBLIC

if TYPE_CHECKING:
    from litestar.types import ControllerRouterHandler

    from sa_core.runtime import Runtime

PATH = "/health"
PING_TIMEOUT = 5.0
"""Seconds the database has to answer before the route says it is unavailable."""
_NO_STORE = {"Cache-Control": "no-store"}


async def readiness(runtime: Runtime, timeout: float = PING_TIMEOUT) -> tuple[int, dict[str, str]]:
    """The status code and body of ``GET /health`` for ``runtime`` (see the module's doc)."""
    if not runtime.is_open:
        state = "is shutting down" if runtime.closing else "is not started yet"
        return 503, {"status": "unavailable", "detail": f"The runtime {state}."}
    store = runtime.store
    try:
        async with asyncio.timeout(timeout):
            await store.ping()
    except TimeoutError:
        detail = f"The database did not answer within {timeout:g} s."
        return 503, {"status": "unavailable", "detail": detail}
    except Exception as exc:  # noqa: BLE001 - any failure of the database means "not ready"
        detail = f"The database did not answer ({type(exc).__name__})."
        return 503, {"status": "unavailable", "detail": detail}
    return 200, {"status": "ok", "database": store.dialect_name}


def health_handler(runtime: Runtime) -> HTTPRouteHandler:
    """The ``GET /health`` route of ``runtime`` (no API key needed)."""

    @get(
        PATH,
        opt={PUBLIC: True},
        name="sa_health",
        tags=["health"],
        summary="Readiness: 200 once the runtime is started and its database answers",
    )
    async def health() -> Response[dict[str, str]]:
        """``200 {"status": "ok", "database": ...}`` when ready, else ``503`` with a detail."""
        status, body = await readiness(runtime)
        return Response(body, status_code=status, headers=_NO_STORE)

    return health


def routes_health(handlers: list[ControllerRouterHandler] | Any) -> bool:
    """Whether one of an app's own top-level route handlers already answers ``GET /health``."""
    for handler in handlers:
        if isinstance(handler, HTTPRouteHandler) and PATH in handler.paths:
            return True
    return False
