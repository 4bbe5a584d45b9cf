"""A process killed with SIGKILL in the middle of a compaction step, then restarted.

The worker (``tests/compaction_worker.py``) blocks inside the summarizer call of the fourth
turn's compaction until it is killed: nothing depends on timing. The restart must redo the
compaction: exactly one marker, every message kept, the turn answered.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from worker_kill import kill_at_marker

from sa_core import Runtime
from sa_core.engine.model.compaction import is_marker
from sa_core.engine.model.compaction_summary import SUMMARY_PREFIX

sys.path.insert(0, str(Path(__file__).parent))
import compaction_worker as worker  # noqa: E402

WORKER = Path(__file__).with_name("compaction_worker.py")


def kill_in_compaction(mode: str, database: Path) -> str:
    """Run the worker until its summarizer blocks, SIGKILL it; returns the thread id printed."""
    return kill_at_marker(WORKER, mode, str(database))


async def restart_and_read(database: Path, thread_id: str) -> tuple[list, list]:
    provider = worker.provider()
    runtime = Runtime(
        packs=[worker.build_pack()],
        providers={"test": provider},
        database_url=f"sqlite:///{database}",
        load_entrypoints=False,
    )
    async with runtime:
        await runtime.wait_idle(timeout=30)
        thread = await runtime.get_thread(thread_id)
        messages = (await thread.get_messages(limit=1000, include_silent=True)).messages
    return messages, provider.requests


def check_compacted_once(messages: list, requests: list) -> None:
    markers = [m for m in messages if is_marker(m)]
    assert len(markers) == 1 and markers[0].content == f"{SUMMARY_PREFIX}THE SUMMARY"
    chat = [m for m in messages if not is_marker(m)]
    assert [m.content[:3] for m in chat] == [
        f"{side}{n}:" for n in range(1, worker.TURNS + 1) for side in "ua"
    ]
    assert all(m.status != "failed" for m in chat)
    # the restart summarized once, then sent the marker and the tail
    assert len(requests) == 2
    assert requests[1].messages[1].content == markers[0].content
    assert [m.content[:3] for m in requests[1].messages[2:]] == ["a2:", "u3:", "a3:", "u4:"]


@pytest.mark.asyncio
async def test_kill_during_compaction_redoes_it_once_and_loses_nothing(tmp_path):
    database = tmp_path / "sa.db"
    thread_id = kill_in_compaction("first", database)
    messages, requests = await restart_and_read(database, thread_id)
    check_compacted_once(messages, requests)


@pytest.mark.asyncio
async def test_a_restart_killed_in_the_redone_compaction_still_stores_one_marker(tmp_path):
    database = tmp_path / "sa.db"
    thread_id = kill_in_compaction("first", database)
    kill_in_compaction("again", database)
    messages, requests = await restart_and_read(database, thread_id)
    check_compacted_once(messages, requests)
