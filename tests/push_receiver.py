"""A webhook on loopback that records A2A push notifications (for the push tests).

:class:`PushReceiver` answers each POST with the next status of ``statuses`` (then 200) and
keeps every request's path, headers and JSON body. It can be stopped and started again on the
same port (a receiver that is down while notifications are owed).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from serve_process import free_port


class PushReceiver:
    """Records notifications; answers ``statuses`` in turn, then 200."""

    def __init__(self, statuses: tuple[int, ...] = (), port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self.statuses = list(statuses)
        self.received: list[dict[str, Any]] = []
        """Every request: ``path``, ``headers`` (lower-case names), ``body``, ``status``."""
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> PushReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                receiver.received.append(
                    {
                        "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": json.loads(body or b"null"),
                        "status": status,
                    }
                )
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def delivered(self) -> list[dict[str, Any]]:
        """The notifications answered with a 2xx."""
        return [r for r in self.received if 200 <= r["status"] < 300]

    def states(self) -> list[str]:
        """The task state each delivered notification carried (``TASK_STATE_...``)."""
        return [r["body"]["task"]["status"]["state"] for r in self.delivered()]

    def wait_for(self, state: str, seconds: float = 60) -> dict[str, Any]:
        """The first delivered notification whose task is in ``state``."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for request in self.delivered():
                if request["body"]["task"]["status"]["state"] == state:
                    return request
            time.sleep(0.05)
        raise AssertionError(f"no {state} notification; received {self.received}")

    def __enter__(self) -> PushReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
