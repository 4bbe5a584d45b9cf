"""``POST .../messages`` answers 202 only once the message and its owed turn are committed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from test_server_live import A, new_thread, serving

from sa_core.testing import FunctionProvider


@pytest.mark.asyncio
async def test_post_message_202_comes_after_the_message_and_the_owed_turn_commit(
    sa_database_url: str,
) -> None:
    gate = asyncio.Event()

    async def answer(request: Any) -> str:
        await gate.wait()
        return "answered"

    async with serving(sa_database_url, FunctionProvider(answer)) as (client, runtime, _):
        thread_id = await new_thread(client)
        response = await client.post(f"{A}/threads/{thread_id}/messages", json={"content": "hi"})
        assert response.status_code == 202, response.text
        message_id = response.json()["message_id"]
        # what the 202 promised is in the database, before any model answered
        record = await runtime.store.get_execution(thread_id)
        stored = await runtime.store.get_message(thread_id, message_id)
        assert record is not None and record.status == "owed" and record.resume is not None
        assert stored is not None and stored.content == "hi"
        assert record.resume.since == stored.created_at
        gate.set()
        await runtime.wait_idle(timeout=60)
        page = await (await runtime.get_thread(thread_id)).get_messages()
        record = await runtime.store.get_execution(thread_id)
    assert [m.content for m in page.messages] == ["hi", "answered"]
    assert record is not None and record.status == "idle"
