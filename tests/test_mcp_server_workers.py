"""The MCP server on two ``sa serve`` workers sharing one PostgreSQL database.

The transport is stateless, so any worker answers any request: a conversation started through
worker 1 is continued (``thread_id``) through worker 2. The second call normally comes while
worker 1 still keeps the thread's lease (a third of the lease time after a turn), so worker 2
queues the message for worker 1 and follows the turn run there through the relayed frames and
the store; had the lease lapsed, worker 2 would run it itself. Either way the answers and the
progress are the same.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp_serve_kit import LOOKUP, ProgressLog, Served, mcp_client, new_key

pytest.importorskip("mcp")

TRIAGE = "support_desk__triage"
DONE = ["calling tool lookup_order", "tool lookup_order done (success)"]


@pytest.fixture
def workers(tmp_path: Path, pg_database_url: str) -> Iterator[list[Served]]:
    """Two workers on one fresh database."""
    started = [Served(tmp_path, pg_database_url) for _ in range(2)]
    try:
        for worker in started:
            worker.wait_ready()
        yield started
    finally:
        for worker in started:
            worker.stop()


@pytest.mark.asyncio
async def test_a_call_through_one_worker_is_continued_through_another(
    workers: list[Served], pg_database_url: str
) -> None:
    key = await new_key(pg_database_url)
    first_progress, second_progress = ProgressLog(), ProgressLog()
    async with mcp_client(f"{workers[0].url}/mcp", key) as one:
        first = await one.call_tool(TRIAGE, {"message": LOOKUP}, progress_callback=first_progress)
    assert not first.is_error, first.content
    assert first.structured_content is not None
    thread_id = first.structured_content["thread_id"]
    async with mcp_client(f"{workers[1].url}/mcp", key) as two:
        second = await two.call_tool(
            TRIAGE, {"message": LOOKUP, "thread_id": thread_id}, progress_callback=second_progress
        )
        third = await two.call_tool(TRIAGE, {"message": "Thanks!", "thread_id": thread_id})
    assert not second.is_error, second.content
    assert second.structured_content is not None
    assert second.structured_content["thread_id"] == thread_id
    assert "Ada Lovelace" in second.structured_content["answer"]
    assert first_progress.messages == DONE
    assert second_progress.messages == DONE  # relayed from whichever worker ran the turn
    assert third.structured_content == {"answer": "Test response received.", "thread_id": thread_id}

    api = f"{workers[1].url}/api/packages/support_desk/threads/{thread_id}/messages"
    page = httpx.get(api, headers={"Authorization": f"Bearer {key}"}, timeout=30).json()
    users: list[Any] = [m["content"] for m in page["messages"] if m["role"] == "user"]
    assert users == [LOOKUP, LOOKUP, "Thanks!"]
