"""The crash run's HTTP clients: each drives one parent thread of the crash pack with jobs.

A client sends ``job <id> <kind>`` messages, records each acknowledgement (202) and waits for
its ``done`` answer, moving to another worker when its own is killed.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field

import httpx

from crashpack.server import Server

KINDS = ("tool", "block", "bg", "note", "effect")
PACKAGE = "/api/packages/crash"


# -- the clients --------------------------------------------------------------------------


@dataclass
class Load:
    """What the clients share with the kill loop."""

    servers: list[Server]
    epoch: int = 0
    sending: bool = True
    stopped: bool = False
    acked: list[tuple[str, str]] = field(default_factory=list)
    sent: int = 0
    acked_now: asyncio.Event = field(default_factory=asyncio.Event)
    kill_times_us: list[int] = field(default_factory=list)

    def server_for(self, index: int) -> Server | None:
        """The server client ``index`` talks to: its own worker, else any running one."""
        preferred = self.servers[index % len(self.servers)]
        if preferred.base_url is not None:
            return preferred
        return next((s for s in self.servers if s.base_url is not None), None)


async def client(index: int, load: Load, rng: random.Random) -> None:
    thread_id: str | None = None
    number = 0
    async with httpx.AsyncClient(timeout=5.0) as http:
        while not load.stopped:
            server = load.server_for(index)
            base = server.base_url if server is not None else None
            if server is None or base is None or not load.sending:
                await asyncio.sleep(0.05)
                continue
            headers = server.headers
            try:
                if thread_id is None:
                    created = await http.post(
                        f"{base}{PACKAGE}/threads", json={"agent": "parent"}, headers=headers
                    )
                    if created.status_code == 201:
                        thread_id = str(created.json()["id"])
                    continue
                kind = rng.choice(KINDS)
                job = f"k{index}.{number}"
                number += 1
                load.sent += 1
                epoch = load.epoch
                response = await http.post(
                    f"{base}{PACKAGE}/threads/{thread_id}/messages",
                    json={"content": f"job {job} {kind}"},
                    headers=headers,
                )
            except httpx.HTTPError:
                await asyncio.sleep(0.05)
                continue
            if response.status_code != 202:
                continue
            expected = f"{job}~{kind}"
            load.acked.append((thread_id, expected))
            load.acked_now.set()
            await _await_answer(http, load, server, thread_id, expected, epoch)


async def _await_answer(
    http: httpx.AsyncClient, load: Load, server: Server, thread_id: str, job: str, epoch: int
) -> None:
    """Poll for ``done <job>`` until it comes, the server restarts, or 10 seconds pass."""
    deadline = time.monotonic() + 10
    while not load.stopped and load.epoch == epoch and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        base = server.base_url
        if base is None:
            return
        try:
            page = await http.get(
                f"{base}{PACKAGE}/threads/{thread_id}/messages",
                params={"order": "desc", "limit": 50},
                headers=server.headers,
            )
        except httpx.HTTPError:
            return
        if page.status_code == 200 and any(
            f"done {job}" in (m.get("content") or "").splitlines()
            for m in page.json()["messages"]
            if m.get("role") == "assistant"
        ):
            return
