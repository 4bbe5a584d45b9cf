"""A database made before a column was added is upgraded in place when the store opens."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sa_core.store import ThreadRow, open_store


@pytest.mark.asyncio
@pytest.mark.parametrize("scheme", ["sqlite", "sqlite+aiosqlite"])
async def test_an_effects_table_without_attempts_gets_the_column_and_effects_run(
    tmp_path: Path, scheme: str
) -> None:
    path = tmp_path / "old.db"
    store = await open_store(f"{scheme}:///{path}")
    await store.create_thread(ThreadRow(id="t1", agent_id="a", package="p"))
    await store.schedule_effect("t1", "remind", {"n": 1}, 0)
    await store.close()
    with sqlite3.connect(path) as conn:  # the effects table as the first release made it
        conn.execute("ALTER TABLE effects DROP COLUMN attempts")
    assert "attempts" not in _columns(path)

    store = await open_store(f"{scheme}:///{path}")
    try:
        assert "attempts" in _columns(path)
        claimed = await store.claim_due_effects(now_us=1)
        assert [run.name for run in claimed] == ["remind"]
        assert await store.start_effect(claimed[0].id)
    finally:
        await store.close()


def _columns(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {row[1] for row in conn.execute("PRAGMA table_info(effects)")}
