"""An HTTP server on 127.0.0.1 for tests that point a provider's ``base_url`` at it.

:class:`HTTPLoopback` is the skeleton: a ``ThreadingHTTPServer`` on a free port, served from a
daemon thread while its ``with`` block runs. A subclass (a dataclass, for the fields it records)
implements :meth:`HTTPLoopback.reply`, which gets every POST with its body already read.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


@dataclass
class HTTPLoopback:
    """Answers each POST with :meth:`reply`; ``url`` is ``http://127.0.0.1:<port>``."""

    def __post_init__(self) -> None:
        loopback = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                loopback.reply(self, self.rfile.read(length))

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def reply(self, request: BaseHTTPRequestHandler, body: bytes) -> None:
        """Answer ``request`` (whose body was ``body``), e.g. with :func:`send`."""
        raise NotImplementedError

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def send(request: BaseHTTPRequestHandler, status: int, content_type: str, payload: bytes) -> None:
    """Answer ``request`` with ``payload``, its type and length in the headers."""
    request.send_response(status)
    request.send_header("Content-Type", content_type)
    request.send_header("Content-Length", str(len(payload)))
    request.end_headers()
    request.wfile.write(payload)
