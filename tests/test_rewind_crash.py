"""A kill -9 during a rewind leaves the thread as it was before, or as the rewind made it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sa_core.store import open_store
from worker_kill import kill_at_marker_lines

WORKER = Path(__file__).with_name("rewind_worker.py")


async def snapshot(url: str, thread_id: str) -> dict[str, Any]:
    async with await open_store(url) as store:
        messages, _ = await store.list_messages(thread_id, limit=1000)
        files = await store.find_files(thread_id, "*")
        return {
            "history": [m.id for m in messages],
            "files": {r.path: r.content_hash for r in files},
            "values": await store.list_values(thread_id),
            "registry": [c.reference for c in await store.list_children(thread_id)],
        }


def printed(lines: list[str], key: str) -> str:
    return next(line.split(" ", 1)[1] for line in lines if line.startswith(key + " "))


@pytest.mark.asyncio
async def test_a_kill_inside_the_rewind_transaction_leaves_the_thread_as_it_was(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sa.db'}"
    lines = kill_at_marker_lines(WORKER, url, "inside")
    thread_id, before = printed(lines, "THREAD"), json.loads(printed(lines, "BEFORE"))
    assert await snapshot(url, thread_id) == before
    async with await open_store(url) as store:
        assert await store.list_lineage(thread_id) == []


@pytest.mark.asyncio
async def test_a_kill_after_the_rewind_committed_leaves_the_thread_rewound(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sa.db'}"
    lines = kill_at_marker_lines(WORKER, url, "committed")
    thread_id, cut = printed(lines, "THREAD"), printed(lines, "CUT")
    before = json.loads(printed(lines, "BEFORE"))
    after = await snapshot(url, thread_id)
    assert after["history"] == before["history"][: before["history"].index(cut) + 1]
    async with await open_store(url) as store:
        message = await store.get_message(thread_id, cut)
        assert message is not None
        at_cut = await store.files_at(thread_id, message.created_at)
        assert after["files"] == {r.path: r.content_hash for r in at_cut}
        assert [e.kind for e in await store.list_lineage(thread_id)] == ["rewind"]
        hidden = before["registry"]
        for child_id in hidden:  # created after the cut: stopped in the rewind's transaction
            child = await store.get_thread(child_id)
            assert child is not None and child.stopped
    assert after["values"] == {"created": True, "colour": "blue"} and after["registry"] == []
