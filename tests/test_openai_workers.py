"""The OpenAI-compatible API on two ``sa serve`` workers sharing one PostgreSQL database.

A conversation started through one worker is continued through the other: the conversation
index and the response ids live in the database, so either worker finds the thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from openai_serve import MODEL, Served

from sa_core.store import open_store

REPLY = "Test response received."


@pytest.fixture
def workers(tmp_path: Path, pg_database_url: str) -> Iterator[list[Served]]:
    async def key() -> str:
        async with await open_store(pg_database_url) as store:
            return (await store.create_api_key("openai-tests"))[0]

    token = asyncio.run(key())
    started = [
        Served(tmp_path, pg_database_url, "--lease-seconds", "2", key=token) for _ in range(2)
    ]
    try:
        for worker in started:
            worker.start()
        yield started
    finally:
        for worker in started:
            worker.stop()


def sdk(worker: Served) -> openai.OpenAI:
    return openai.OpenAI(base_url=worker.base_url, api_key=worker.key, max_retries=0, timeout=60)


def test_a_chat_started_on_one_worker_continues_on_the_other(workers: list[Served]) -> None:
    one, two = workers
    messages: list[Any] = [{"role": "user", "content": "Hi from worker one"}]
    first = sdk(one).chat.completions.with_raw_response.create(model=MODEL, messages=messages)
    thread_id = first.headers["x-sa-thread-id"]
    messages += [
        {"role": "assistant", "content": first.parse().choices[0].message.content},
        {"role": "user", "content": "And from worker two"},
    ]
    with sdk(two).chat.completions.with_streaming_response.create(
        model=MODEL, messages=messages, stream=True
    ) as streamed:
        assert streamed.headers["x-sa-thread-id"] == thread_id
        text = "".join(c.choices[0].delta.content or "" for c in streamed.parse() if c.choices)
    assert text == REPLY
    page = sdk(one).get(
        f"{one.url}/api/packages/reminders/threads/{thread_id}/messages",
        cast_to=dict,  # type: ignore[arg-type]
    )
    assert [m["role"] for m in page["messages"]] == ["user", "assistant"] * 2


def test_a_response_created_on_one_worker_continues_on_the_other(workers: list[Served]) -> None:
    one, two = workers
    first = sdk(one).responses.create(model=MODEL, input="Hi")
    second = sdk(two).responses.with_raw_response.create(
        model=MODEL, input="Again", previous_response_id=first.id
    )
    answer = second.parse()
    assert answer.output_text == REPLY
    assert answer.conversation == first.conversation
    assert sdk(one).responses.retrieve(answer.id).output_text == REPLY
