"""The SQLite write-ahead log is checkpointed by a background thread, never by a commit."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import threading
from pathlib import Path

import pytest

from sa_core.store import ThreadRow, now_us, open_store
from sa_core.store.checkpoint import Checkpointer


def checkpoint_threads(path: Path) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"sa-sqlite-checkpoint:{path}"]


@pytest.mark.asyncio
async def test_committed_rows_reach_the_database_file_through_the_background_checkpoint(
    tmp_path: Path,
) -> None:
    database = tmp_path / "sa.db"
    async with await open_store(f"sqlite:///{database}") as store:
        assert len(checkpoint_threads(database)) == 1
        for index in range(5):
            await store.create_thread(
                ThreadRow(id=f"t{index}", package="p", agent_id="a", created_at=now_us())
            )
        # far below the automatic checkpoint of a commit: only the thread copies the log back
        copy = tmp_path / "copy.db"
        found = 0
        for _ in range(200):  # waits for the thread (at most ~10 s), asserts no duration
            shutil.copyfile(database, copy)  # the database file alone, without its log
            with sqlite3.connect(copy) as conn:
                tables = conn.execute("SELECT name FROM sqlite_master WHERE name='threads'")
                if tables.fetchall():
                    found = conn.execute("SELECT count(*) FROM threads").fetchone()[0]
            if found == 5:
                break
            await asyncio.sleep(0.05)
        assert found == 5
    assert checkpoint_threads(database) == []  # stopped with the store's last connection


def test_a_checkpointer_on_a_missing_directory_stops_quietly(tmp_path: Path) -> None:
    checkpointer = Checkpointer(str(tmp_path / "missing" / "sa.db"), interval=0.01)
    checkpointer.start()
    checkpointer.stop()
    assert checkpointer.checkpoints == 0
