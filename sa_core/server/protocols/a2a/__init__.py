"""The A2A protocol server (``pip install 'standard-agents[a2a]'``), built on ``a2a-sdk``.

Neither importing this package nor building the app imports the SDK (about 300 modules and
20 MiB): :func:`a2a_server` returns the ``/a2a`` mount, which imports it and builds the
endpoints (:mod:`~sa_core.server.protocols.a2a.mount`) on its first request. Without the
``a2a`` extra it returns None and the routes are absent.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

from litestar.handlers import ASGIRouteHandler, asgi

from sa_core.server.auth import PUBLIC

if TYPE_CHECKING:
    from litestar.types import Receive, Scope, Send

    from sa_core.runtime import Runtime
    from sa_core.server.protocols.a2a.mount import A2AServer

PREFIX = "/a2a"
"""Where the A2A endpoints are mounted."""
MISSING = "A2A: not served (install the extra: pip install 'standard-agents[a2a]')"


def available() -> bool:
    """Whether the A2A SDK (with its HTTP server parts) is installed."""
    return all(importlib.util.find_spec(name) is not None for name in ("a2a", "starlette"))


class A2AMount:
    """The ``/a2a`` mount of a runtime's entry agents; the SDK loads on its first request."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.server: A2AServer | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one request under ``/a2a``, building the endpoints first if needed."""
        server = self.server
        if server is None:
            from sa_core.server.protocols.a2a.mount import A2AServer

            server = self.server = A2AServer(self.runtime)
        await server(scope, receive, send)

    async def aclose(self) -> None:
        """Drain the running A2A tasks (at shutdown), if any request built the endpoints."""
        if self.server is not None:
            await self.server.aclose()

    def handler(self) -> ASGIRouteHandler:
        """The Litestar mount of these endpoints at ``/a2a``."""

        async def a2a_endpoints(scope: Scope, receive: Receive, send: Send) -> None:
            await self(scope, receive, send)

        return asgi(PREFIX, is_mount=True, opt={PUBLIC: True}, copy_scope=False)(a2a_endpoints)


def a2a_server(runtime: Runtime) -> A2AMount | None:
    """The A2A endpoints of ``runtime``'s entry agents, or None without the SDK."""
    return A2AMount(runtime) if available() else None
