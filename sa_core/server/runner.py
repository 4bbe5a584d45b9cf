"""Running the app with uvicorn: open streams end first, so shutdown never waits on them."""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import socket
from collections.abc import Generator

import uvicorn
from litestar import Litestar

from sa_core.server.app import StandardAgentsPlugin


def websocket_protocol() -> str:
    """Return the uvicorn WebSocket implementation available here (``none`` without one)."""
    if importlib.util.find_spec("websockets") is not None:
        return "websockets-sansio"
    if importlib.util.find_spec("wsproto") is not None:
        return "wsproto"
    return "none"


def http_protocol() -> str:
    """Return uvicorn's HTTP implementation: the C parser ``httptools`` when installed."""
    return "httptools" if importlib.util.find_spec("httptools") is not None else "h11"


class Server(uvicorn.Server):
    """uvicorn's server that ends the API's streams before draining connections.

    Args:
        config: the uvicorn configuration.
        handle_signals: install SIGINT/SIGTERM handlers (off when embedded, e.g. in tests).

    """

    def __init__(self, config: uvicorn.Config, *, handle_signals: bool = True) -> None:
        super().__init__(config)
        self.handle_signals = handle_signals

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        """Capture signals only when asked to."""
        if not self.handle_signals:
            yield
            return
        with super().capture_signals():
            yield

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """End open streams, then shut down as uvicorn does."""
        app = self.config.app
        if isinstance(app, Litestar):
            with contextlib.suppress(KeyError):
                app.plugins.get(StandardAgentsPlugin).hub.close_all()
        await super().shutdown(sockets)


def build_server(
    app: Litestar,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    log_level: str = "info",
    graceful_timeout: float = 5.0,
    handle_signals: bool = True,
) -> Server:
    """Configure uvicorn for the app.

    Args:
        app: the app from :func:`~sa_core.server.create_app`.
        host: the interface to bind.
        port: the port (0 picks a free one when serving with ``sockets=``).
        log_level: the level of uvicorn's logs and of every other logger without a level of
            its own (the app's logging configuration sets the root logger to ``info``, so a
            library's ``info`` records, such as httpx's line per outbound request, are written
            unless this is ``warning`` or higher).
        graceful_timeout: seconds to wait for open requests at shutdown before cancelling them.
        handle_signals: let uvicorn handle SIGINT and SIGTERM.

    Returns:
        The server; ``await server.serve()`` runs it until it is asked to exit.

    """
    logging.getLogger().setLevel(log_level.upper())
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        http=http_protocol(),
        ws=websocket_protocol(),
        lifespan="on",
        timeout_graceful_shutdown=int(graceful_timeout),
    )
    return Server(config, handle_signals=handle_signals)
