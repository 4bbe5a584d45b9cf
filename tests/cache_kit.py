"""What the cache tests share: a store on a new SQLite file, a thread with messages, a chat pack.

A test module gets the ``store`` fixture with ``store = sqlite_store()`` and ``counted_turns``
with ``counted_turns = empty_turn_counts()``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from sa_core import Pack, define_agent, define_model, define_prompt
from sa_core.cachepolicy import THREAD_USE, ThreadUse
from sa_core.spec.records import Message
from sa_core.store import Store, ThreadRow, now_us, open_store
from sa_core.testing import FunctionProvider


def sqlite_store() -> Any:
    """The ``store`` fixture: a store on a new SQLite file, closed after the test."""

    @pytest_asyncio.fixture
    async def store(tmp_path: Path) -> AsyncIterator[Store]:
        opened = await open_store(f"sqlite:///{tmp_path / 'sa.db'}")
        try:
            yield opened
        finally:
            await opened.close()

    return store


async def thread_with(store: Store, *contents: str, thread_id: str = "t1") -> list[Message]:
    await store.create_thread(ThreadRow(id=thread_id, package="pkg", agent_id="agent"))
    messages = [
        Message(id=f"{thread_id}-m{i}", thread_id=thread_id, role="user", content=text,
                created_at=now_us() + i)
        for i, text in enumerate(contents)
    ]  # fmt: skip
    await store.insert_messages(messages)
    return messages


def chat_pack() -> tuple[Pack, FunctionProvider]:
    """A chat agent that sees its whole history, and a provider answering how much it saw."""
    prompt = define_prompt(name="chat", model="fast", prompt="Chat.", include_chat=True)
    agent = define_agent(name="chatter", side_a={"prompt": "chat"})
    model = define_model(name="fast", provider="test", model="m")
    pack = Pack(name="p", agents=[agent], prompts=[prompt], models=[model])
    return pack, FunctionProvider(lambda request: f"answer {len(request.messages)}")


def empty_turn_counts() -> Any:
    """The ``counted_turns`` fixture: the process's turn counts, empty for the test."""

    @pytest.fixture
    def counted_turns() -> Iterator[ThreadUse]:
        THREAD_USE.clear()
        yield THREAD_USE
        THREAD_USE.clear()

    return counted_turns


def texts(messages: list[Message]) -> list[str | None]:
    return [m.content for m in messages]
