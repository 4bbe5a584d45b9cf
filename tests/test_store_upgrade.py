"""Databases made before schema versioning are upgraded in place when the store opens."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sa_core.store import ThreadRow, open_store
from sa_core.store.migrate import HEAD

_BEFORE_VERSIONING = (
    "DROP TABLE alembic_version",
    "DROP TABLE workers",
    "DROP TABLE thread_leases",
    "DROP TABLE stream_frames",
    "ALTER TABLE effects DROP COLUMN owner",
    "DROP TABLE schedules",
    "DROP TABLE store_items_fts",
    "DROP TABLE store_items",
    "ALTER TABLE api_keys DROP COLUMN packages",
    "ALTER TABLE api_keys DROP COLUMN read_only",
)
"""Turn a fresh database into one made by the durable engine's release, before migrations."""


@pytest.mark.asyncio
@pytest.mark.parametrize("scheme", ["sqlite", "sqlite+aiosqlite"])
@pytest.mark.parametrize("without_attempts", [False, True], ids=["durable-release", "first-release"])
async def test_an_unversioned_database_is_upgraded_and_its_effects_run(
    tmp_path: Path, scheme: str, without_attempts: bool
) -> None:
    path = tmp_path / "old.db"
    store = await open_store(f"{scheme}:///{path}")
    await store.create_thread(ThreadRow(id="t1", agent_id="a", package="p"))
    await store.schedule_effect("t1", "remind", {"n": 1}, 0)
    await store.close()
    with sqlite3.connect(path) as conn:
        for statement in _BEFORE_VERSIONING:
            conn.execute(statement)
        if without_attempts:  # the effects table as the first release made it
            conn.execute("ALTER TABLE effects DROP COLUMN attempts")
    assert "attempts" not in _columns(path) or not without_attempts

    store = await open_store(f"{scheme}:///{path}")
    try:
        assert {"attempts", "owner"} <= _columns(path)
        with sqlite3.connect(path) as conn:
            assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(HEAD,)]
        claimed = await store.claim_due_effects(now_us=1)
        assert [run.name for run in claimed] == ["remind"]
        assert await store.start_effect(claimed[0].id)
        _, key = await store.create_api_key("team", packages=["p"], read_only=True)
        assert (key.packages, key.read_only) == (("p",), True)
    finally:
        await store.close()


def _columns(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {row[1] for row in conn.execute("PRAGMA table_info(effects)")}
