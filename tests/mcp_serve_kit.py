"""A real ``sa serve`` subprocess on loopback and an MCP client of the official SDK for it.

Shared by the MCP server tests (imported as a module). The server serves every installed pack
(the example packs of ``packs/``) with ``--test-provider``, so no network is needed: a message
``/tool NAME {...}`` makes the offline model call that tool and answer with its result.
"""

from __future__ import annotations

import asyncio
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from sa_core.store import open_store

LOOKUP = '/tool lookup_order {"order_id": "A1001"}'
"""Makes the offline model call the support desk's ``lookup_order`` tool, then answer."""


def free_port() -> int:
    """A port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Served:
    """``sa serve --test-provider`` as a subprocess; its output is kept for failures."""

    def __init__(self, cwd: Path, db: str, *extra: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")} | (env or {})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sa_core.cli", "serve", "--port", str(self.port),
             "--db", db, "--test-provider", "--log-level", "warning", *extra],
            cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        self.lines: queue.Queue[str] = queue.Queue()
        stdout = self.proc.stdout
        assert stdout is not None
        threading.Thread(target=lambda: [self.lines.put(x) for x in stdout], daemon=True).start()

    def output(self) -> str:
        """Everything the server printed so far."""
        lines = []
        while not self.lines.empty():
            lines.append(self.lines.get_nowait())
        return "".join(lines)

    def wait_line(self, text: str, timeout: float = 60) -> str:
        """The first line printed from now on that contains ``text``."""
        seen: list[str] = []
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            seen.append(line)
            if text in line:
                return line.rstrip("\n")
        raise AssertionError(f"{text!r} not printed:\n{''.join(seen)}")

    def wait_ready(self, timeout: float = 90) -> None:
        """Return once the server answers HTTP (its packs are loaded and mounted by then)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"sa serve exited: {self.output()}"
            try:
                httpx.get(f"{self.url}/schema/openapi.json", timeout=2)
                return
            except httpx.TransportError:
                time.sleep(0.1)
        raise AssertionError(f"sa serve on {self.port} did not answer: {self.output()}")

    def stop(self) -> None:
        """SIGINT, then wait (kill after a generous ceiling)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


async def new_key(db: str, name: str = "mcp-tests") -> str:
    """A new API key in the server's database (from outside the server, like ``sa keys``)."""
    async with await open_store(db) as store:
        return (await store.create_api_key(name))[0]


def create_key(db: str, name: str = "mcp-tests") -> str:
    """:func:`new_key` outside an event loop (for fixtures)."""
    return asyncio.run(new_key(db, name))


async def revoke_key(db: str, token: str) -> None:
    """Revoke a key with ``sa keys revoke KEY --db DB`` (another process, as an operator would)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sa_core.cli", "keys", "revoke", token, "--db", db,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    output, _ = await proc.communicate()
    assert proc.returncode == 0, output.decode()


@asynccontextmanager
async def mcp_client(
    url: str, token: str | None, statuses: list[int] | None = None, mode: str = "auto"
) -> AsyncIterator[Any]:
    """The official SDK's client on ``url``, sending ``token`` as a bearer key.

    ``statuses`` receives the HTTP status of every response the client gets; ``mode`` is the
    client's protocol negotiation (``legacy``: the initialize handshake of 2025 hosts).
    """
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def record(response: Any) -> None:
        if statuses is not None:
            statuses.append(response.status_code)

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    hooks = {"response": [record]}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(120), event_hooks=hooks) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


class ProgressLog:
    """A progress callback that keeps what it is told."""

    def __init__(self) -> None:
        self.messages: list[str] = []
        self.values: list[float] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        """Record one notification."""
        self.values.append(progress)
        self.messages.append(message or "")
