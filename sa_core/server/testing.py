"""Serve an app on 127.0.0.1 for tests: in the running event loop, or in a background thread.

    async with live_server(create_app(runtime)) as base_url:
        async with httpx.AsyncClient(base_url=base_url) as client:
            ...

``live_server`` shares the test's event loop, so the test may also use the runtime directly.
``serve_in_thread`` runs its own loop, for synchronous clients (``requests``, schemathesis).
``signed_in_client`` is Litestar's in-process ``TestClient`` with a fresh API key already sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from litestar import Litestar

from sa_core.server.runner import Server, build_server

if TYPE_CHECKING:
    from litestar.testing import TestClient

    from sa_core.runtime import Runtime

STARTUP_TIMEOUT = 60.0


@contextlib.contextmanager
def signed_in_client(runtime: Runtime) -> Iterator[TestClient[Any]]:
    """A ``TestClient`` of ``create_app(runtime)`` whose requests carry a new API key.

    The runtime starts and stops with the client; the key is created in its store.
    """
    from litestar.testing import TestClient

    from sa_core.server.app import create_app

    with TestClient(create_app(runtime)) as client:
        token, _ = client.blocking_portal.call(runtime.store.create_api_key, "tests")
        client.headers["Authorization"] = f"Bearer {token}"
        yield client


def _bound_socket(host: str) -> socket.socket:
    # proto=IPPROTO_TCP matters: asyncio turns Nagle off (TCP_NODELAY) only on sockets that say
    # so, and small responses would otherwise wait ~40 ms for delayed ACKs on kept-alive
    # connections.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    return sock


def _server(app: Litestar, host: str, port: int, graceful_timeout: float = 2) -> Server:
    return build_server(
        app,
        host,
        port,
        log_level="warning",
        graceful_timeout=graceful_timeout,
        handle_signals=False,
    )


@contextlib.asynccontextmanager
async def live_server(
    app: Litestar, host: str = "127.0.0.1", graceful_timeout: float = 2
) -> AsyncIterator[str]:
    """Serve ``app`` with uvicorn in the current event loop on a free port.

    Args:
        app: the app to serve.
        host: the interface to bind.
        graceful_timeout: seconds the server waits for open requests when it stops, before
            cancelling them.

    Yields:
        The base URL, ``http://127.0.0.1:<port>``.

    Raises:
        RuntimeError: the server did not start within ``STARTUP_TIMEOUT`` seconds.

    """
    sock = _bound_socket(host)
    port = sock.getsockname()[1]
    server = _server(app, host, port, graceful_timeout)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async with asyncio.timeout(STARTUP_TIMEOUT):
            while not server.started:
                if task.done():
                    task.result()
                    raise RuntimeError("The server stopped before it started.")
                await asyncio.sleep(0.01)
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            async with asyncio.timeout(STARTUP_TIMEOUT + graceful_timeout):
                await task
        sock.close()


@contextlib.contextmanager
def serve_in_thread(app: Litestar, host: str = "127.0.0.1") -> Iterator[str]:
    """Serve ``app`` with uvicorn in a background thread with its own event loop.

    Yields:
        The base URL, ``http://127.0.0.1:<port>``.

    Raises:
        RuntimeError: the server did not start within ``STARTUP_TIMEOUT`` seconds.

    """
    sock = _bound_socket(host)
    port = sock.getsockname()[1]
    server = _server(app, host, port)
    failure: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(server.serve(sockets=[sock]))
        except BaseException as exc:  # reported to the caller below
            failure.append(exc)

    thread = threading.Thread(target=run, name="sa-test-server", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not server.started and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        if not server.started:
            raise RuntimeError(f"The server did not start: {failure[0] if failure else 'timeout'}")
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(STARTUP_TIMEOUT)
        sock.close()
