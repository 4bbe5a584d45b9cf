"""A real ``sa serve`` subprocess on loopback and an MCP client of the official SDK for it.

Shared by the MCP server tests (imported as a module). The server serves every installed pack
(the example packs of ``packs/``) with ``--test-provider``, so no network is needed: a message
``/tool NAME {...}`` makes the offline model call that tool and answer with its result.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from serve_process import ServeProcess, offline_env

from sa_core.store import open_store

LOOKUP = '/tool lookup_order {"order_id": "A1001"}'
"""Makes the offline model call the support desk's ``lookup_order`` tool, then answer."""


class Served(ServeProcess):
    """``sa serve --test-provider`` as a subprocess; its output is kept for failures."""

    def __init__(self, cwd: Path, db: str, *extra: str, env: dict[str, str] | None = None) -> None:
        super().__init__(cwd, db, "--test-provider", *extra, env=offline_env(env))


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
