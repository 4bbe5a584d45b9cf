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
from sa_core.server.protocols.a2a.paths import PREFIX

if TYPE_CHECKING:
    from litestar.types import Receive, Scope, Send

    from sa_core.runtime import Runtime
    from sa_core.server.protocols.a2a.mount import A2AServer

MISSING = "A2A: not served (install the extra: pip install 'standard-agents[a2a]')"


def available() -> bool:
    """Whether the A2A SDK (with its HTTP server parts) is installed."""
    return all(importlib.util.find_spec(name) is not None for name in ("a2a", "starlette"))


class A2AMount:
    """The ``/a2a`` mount of a runtime's entry agents; the SDK loads on its first request.

    It also runs the loop sending the push notifications its tasks owe
    (:class:`~sa_core.server.protocols.a2a.push_delivery.PushDelivery`), from the server's
    start: notifications left owed by a previous run, or another worker, go out without any
    A2A request here.
    """

    def __init__(self, runtime: Runtime) -> None:
        from sa_core.server.protocols.a2a.push_delivery import PushDelivery

        self.runtime = runtime
        self.server: A2AServer | None = None
        self.push = PushDelivery(runtime, self._refresh, self._live)

    def _endpoints(self) -> A2AServer:
        server = self.server
        if server is None:
            from sa_core.server.protocols.a2a.mount import A2AServer

            server = self.server = A2AServer(self.runtime, self.push)
        return server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one request under ``/a2a``, building the endpoints first if needed."""
        self.start()
        await self._endpoints()(scope, receive, send)

    def start(self) -> None:
        """Start sending push notifications (once the runtime is open; else at a request)."""
        if self.runtime.is_open:
            self.push.start()

    async def _refresh(self, task_id: str, thread_id: str) -> None:
        await self._endpoints().refresh_task(task_id, thread_id)

    def _live(self, task_id: str) -> bool:
        return self.server is not None and self.server.is_live(task_id)

    async def aclose(self) -> None:
        """Stop the push loop and drain the running A2A tasks (at shutdown)."""
        await self.push.aclose()
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
